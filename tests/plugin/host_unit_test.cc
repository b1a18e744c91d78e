// Pod manifests as the host module reads them, and the topology-manager
// command line against a running serve.
#include <fstream>
#include <iterator>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/common/text_util.h"

#include "build_paths.h"
#include "checkpoint.h"
#include "kubelet_config.h"
#include "pod_manifest.h"
#include "status_matchers.h"

namespace topology::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using text::InvalidUtf8Line;
using text::IsValidUtf8;
using text::Quoted;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

TEST(CpuQuantityTest, KubernetesForms) {
  EXPECT_EQ(*ParseCpuQuantity("2"), 2000);
  EXPECT_EQ(*ParseCpuQuantity("1500m"), 1500);
  EXPECT_EQ(*ParseCpuQuantity("0.5"), 500);
  EXPECT_EQ(*ParseCpuQuantity("250m"), 250);
  for (const char* bad : {"", "two", "1x", "-1", "m"}) {
    EXPECT_THAT(ParseCpuQuantity(bad).status(),
                StatusIs(StatusCode::kInvalidArgument))
        << bad;
  }
}

TEST(PodManifestTest, ContainersLimitsAndQos) {
  auto pods = ParsePodManifests(R"(
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: ml
spec:
  initContainers:
    - name: fetch
      restartPolicy: Always
      resources:
        limits: {cpu: "1", memory: 1Gi}
  containers:
    - name: main
      resources:
        limits:
          cpu: "4"
          memory: 8Gi
          example.com/gpu: 2
        requests:
          cpu: 4000m
          memory: 8192Mi
---
apiVersion: v1
kind: Pod
metadata: {name: burstable, uid: 1234}
spec:
  containers:
    - name: c
      resources:
        limits: {cpu: "2", memory: 1Gi}
        requests: {cpu: "1"}
)",
                                "pods.yaml");
  ASSERT_THAT(pods.status(), IsOk());
  ASSERT_EQ(pods->size(), 2u);
  const manager::Pod& train = (*pods)[0];
  EXPECT_EQ(train.uid, "ml/train");
  EXPECT_EQ(train.ns, "ml");
  EXPECT_TRUE(train.guaranteed);
  ASSERT_EQ(train.init_containers.size(), 1u);
  EXPECT_TRUE(train.init_containers[0].restartable);
  // Memory in bytes, for the memory manager.
  EXPECT_THAT(train.containers[0].limits,
              ElementsAre(Pair("cpu", 4000), Pair("example.com/gpu", 2),
                          Pair("memory", int64_t{8} << 30)));
  const manager::Pod& burstable = (*pods)[1];
  EXPECT_EQ(burstable.uid, "1234");
  EXPECT_FALSE(burstable.guaranteed);
}

// Quantity.AsInt64: exact bytes from every spelling, refused when not a
// whole number of bytes or beyond int64.
TEST(PodManifestTest, ByteQuantitiesAreExact) {
  EXPECT_EQ(*ParseByteQuantity("1Gi"), int64_t{1} << 30);
  EXPECT_EQ(*ParseByteQuantity("1.5Gi"), int64_t{3} << 29);
  EXPECT_EQ(*ParseByteQuantity("129e6"), 129000000);
  EXPECT_EQ(*ParseByteQuantity("100M"), 100000000);
  EXPECT_EQ(*ParseByteQuantity("128974848"), 128974848);
  EXPECT_EQ(*ParseByteQuantity("1000m"), 1);
  EXPECT_EQ(*ParseByteQuantity("+2Ki"), 2048);
  EXPECT_EQ(*ParseByteQuantity("7Ei"), int64_t{7} << 60);
  for (const char* bad : {"0.5", "100m", "-1Gi", "8Ei", "1Gb", "", "Gi", "1e99",
                          "9223372036854775808", "1.2.3"}) {
    EXPECT_THAT(ParseByteQuantity(bad).status(),
                StatusIs(StatusCode::kInvalidArgument,
                         HasSubstr("is not a quantity of bytes")))
        << bad;
  }
  // In a manifest: hugepages and memory limits in bytes, a fraction of a
  // byte named with its field.
  auto pods = ParsePodManifests(R"(
kind: Pod
metadata: {name: dpdk}
spec:
  containers:
    - name: c
      resources:
        limits: {cpu: "2", memory: 2Gi, hugepages-1Gi: 4Gi, hugepages-2Mi: 512Mi}
)",
                                "dpdk.yaml");
  ASSERT_THAT(pods.status(), IsOk());
  EXPECT_THAT(
      (*pods)[0].containers[0].limits,
      ElementsAre(Pair("cpu", 2000), Pair("hugepages-1Gi", int64_t{4} << 30),
                  Pair("hugepages-2Mi", int64_t{512} << 20),
                  Pair("memory", int64_t{2} << 30)));
  EXPECT_THAT(ParsePodManifests("kind: Pod\nmetadata: {name: x}\nspec: "
                                "{containers: [{name: c, resources: {limits: "
                                "{memory: \"0.5\"}}}]}\n",
                                "x.yaml")
                  .status()
                  .message(),
              HasSubstr("spec.containers[0].resources.limits.memory"));
}

TEST(PodManifestTest, ErrorsNameTheField) {
  struct Case {
    const char* yaml;
    const char* message;
  };
  const Case cases[] = {
      {"kind: Deployment\nmetadata: {name: x}\n", "only Pod manifests"},
      {"kind: Pod\nspec: {containers: [{name: c}]}\n", "metadata.name"},
      {"kind: Pod\nmetadata: {name: x}\nspec: {}\n", "spec.containers"},
      {"kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, "
       "resources: "
       "{limits: {cpu: lots}}}]}\n",
       "spec.containers[0].resources.limits.cpu"},
      {"kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, "
       "resources: "
       "{limits: {example.com/gpu: 1.5}}}]}\n",
       "not a whole number of devices"},
      {"kind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c}, {name: "
       "c}]}\n",
       "used twice"},
      {"kind: Pod\nmetadata: {name: [\n", "pods.yaml:"},
      {"", "no Pod manifest"},
      // A key given twice, at any depth, in any document.
      {"kind: Pod\nkind: Pod\nmetadata: {name: x}\n",
       "pods.yaml (document 1): (top): key \"kind\" is given twice"},
      {"kind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c}]}\n"
       "---\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, "
       "resources: {limits: {example.com/gpu: 1, example.com/gpu: 2}}}]}\n",
       "pods.yaml (document 2): spec.containers[0].resources.limits: key "
       "\"example.com/gpu\" is given twice"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(ParsePodManifests(c.yaml, "pods.yaml").status(),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.yaml;
  }
}

// The server bounds what it parses as the command does.
TEST(PodManifestTest, LargerThanTheLimitIsRefused) {
  const std::string big(kMaxManifestBytes + 1, '#');
  EXPECT_THAT(ParsePodManifests(big, "big.yaml").status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("big.yaml: larger than 4 MiB")));
}

std::string Corpus(const std::string& name) {
  std::ifstream in(topology::testing::SourceDir() +
                   "/tests/fuzz/corpus/checkpoint/" + name);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(CheckpointTest, DecodesWhatItEncodesAndChecksEverything) {
  auto one = DecodeCheckpoint(Corpus("one_pod.json"));
  ASSERT_THAT(one.status(), IsOk());
  ASSERT_EQ(one->pods.size(), 1u);
  EXPECT_EQ(one->pods[0].containers[0].cpus.ToList(), "1-2");
  EXPECT_THAT(one->registered.at("example.com/gpu"), ::testing::SizeIs(2));
  auto again = DecodeCheckpoint(EncodeCheckpoint(*one));
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(EncodeCheckpoint(*again), EncodeCheckpoint(*one));
  // Conflicts decode; the restoring manager drops them.
  auto doubled = DecodeCheckpoint(Corpus("double_booked.json"));
  ASSERT_THAT(doubled.status(), IsOk());
  EXPECT_EQ(doubled->pods.size(), 2u);
  EXPECT_THAT(DecodeCheckpoint(Corpus("negative_limit.json")).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("negative limit")));
  EXPECT_THAT(DecodeCheckpoint(Corpus("bad_checksum.json")).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("checksum")));
  EXPECT_THAT(DecodeCheckpoint("garbage").status(),
              StatusIs(StatusCode::kDataLoss));
  // The second version: records, with a header that counts them.
  auto v2 = DecodeCheckpoint(Corpus("v2_one_pod.snapshot"));
  ASSERT_THAT(v2.status(), IsOk());
  EXPECT_EQ(EncodeCheckpoint(*v2), EncodeCheckpoint(*one));
  EXPECT_THAT(DecodeCheckpoint(Corpus("v2_count_mismatch.snapshot")).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("its header says 2")));
  EXPECT_THAT(
      DecodeCheckpoint(Corpus("v2_release_in_snapshot.snapshot")).status(),
      StatusIs(StatusCode::kDataLoss,
               HasSubstr("record 3: unexpected record release")));
  EXPECT_THAT(DecodeCheckpoint(Corpus("v2_unknown_version.snapshot")).status(),
              StatusIs(StatusCode::kDataLoss,
                       HasSubstr("unknown checkpoint version 3")));
  // A large snapshot is decoded in two halves: the same pods, in order, and
  // damage in the second half is named by its record number.
  Checkpoint many;
  for (int i = 0; i < 4000; ++i) {
    CheckpointPod pod = one->pods[0];
    pod.pod.uid = "uid-" + std::to_string(i);
    many.pods.push_back(pod);
  }
  std::string text = EncodeCheckpoint(many);
  ASSERT_GT(text.size(), size_t{1} << 20);
  auto decoded = DecodeCheckpoint(text);
  ASSERT_THAT(decoded.status(), IsOk());
  ASSERT_EQ(decoded->pods.size(), 4000u);
  EXPECT_EQ(decoded->pods[3999].pod.uid, "uid-3999");
  EXPECT_EQ(EncodeCheckpoint(*decoded), text);
  const size_t record_3500 = [&] {
    size_t at = 0;
    for (int line = 1; line < 3500; ++line) at = text.find('\n', at) + 1;
    return at;
  }();
  text[record_3500 + 20] ^= 0x01;
  EXPECT_THAT(DecodeCheckpoint(text).status(),
              StatusIs(StatusCode::kDataLoss, HasSubstr("record 3500:")));
}

TEST(TextTest, Utf8AndQuoting) {
  EXPECT_TRUE(IsValidUtf8("gpu-\xc3\xa9"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // surrogate
  EXPECT_EQ(InvalidUtf8Line("a\nb\xc3\xa9\n"), 0u);
  EXPECT_EQ(InvalidUtf8Line("\xff"), 1u);
  // Lines counted up to the bad byte; a newline inside a broken sequence
  // is still a newline.
  EXPECT_EQ(InvalidUtf8Line("a\n\nb\xc3\n\xa9"), 3u);
  EXPECT_EQ(InvalidUtf8Line("a\n\nb\n\xc3"), 4u);
  EXPECT_EQ(Quoted("a\x01"
                   "b"),
            "\"a\\x01b\"");
  const std::string big(100000, 'x');
  EXPECT_EQ(Quoted(big), "\"" + std::string(64, 'x') + "\"... (100000 bytes)");
}

// Manifests a hostile user could send: names that are not UTF-8 or too
// long, and echoes that stay bounded.
TEST(PodManifestTest, HostileNamesAreRefusedWithBoundedMessages) {
  auto not_utf8 = ParsePodManifests(
      "kind: Pod\nmetadata: {name: \"a\xff\"}\nspec: {containers: [{name: "
      "c}]}\n",
      "p.yaml");
  EXPECT_THAT(not_utf8.status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("metadata.name: is not valid UTF-8")));
  const std::string huge(100000, '7');
  auto echoed = ParsePodManifests(
      "kind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n"
      "    resources:\n      limits: {example.com/gpu: \"" +
          huge + "x\"}\n",
      "p.yaml");
  ASSERT_FALSE(echoed.ok());
  EXPECT_LT(echoed.status().message().size(), 400u);
  EXPECT_THAT(ParseCpuQuantity("99999999999999999999").status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("too large")));
}

// The pod's own topology policy: spec.topology.policy or the annotation.
TEST(PodManifestTest, TopologyPolicyFromTheSpecOrTheAnnotation) {
  const std::string head = "kind: Pod\nmetadata:\n  name: p\n";
  const std::string containers = "  containers: [{name: c}]\n";
  auto spec = ParsePodManifests(
      head + "spec:\n  topology: {policy: restricted}\n" + containers, "a");
  ASSERT_THAT(spec.status(), IsOk());
  EXPECT_EQ((*spec)[0].topology_policy, "restricted");
  EXPECT_EQ((*spec)[0].topology_policy_source, "spec.topology.policy");
  auto annotated = ParsePodManifests(
      head + "  annotations: {" + std::string(kTopologyPolicyAnnotation) +
          ": pod-level-single-numa-node}\nspec:\n" + containers,
      "b");
  ASSERT_THAT(annotated.status(), IsOk());
  EXPECT_EQ((*annotated)[0].topology_policy, "pod-level-single-numa-node");
  EXPECT_EQ((*annotated)[0].topology_policy_source,
            "annotation " + std::string(kTopologyPolicyAnnotation));
  auto none = ParsePodManifests(head + "spec:\n" + containers, "c");
  ASSERT_THAT(none.status(), IsOk());
  EXPECT_EQ((*none)[0].topology_policy, "");
  EXPECT_THAT(
      ParsePodManifests(
          head + "spec:\n  topology: {policy: always}\n" + containers, "d")
          .status(),
      StatusIs(StatusCode::kInvalidArgument,
               HasSubstr("pod \"p\": unknown topology policy "
                         "\"always\"")));
  EXPECT_THAT(ParsePodManifests(head + "  annotations: {" +
                                    std::string(kTopologyPolicyAnnotation) +
                                    ": none}\nspec:\n  topology: {policy: "
                                    "restricted}\n" +
                                    containers,
                                "e")
                  .status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("contradicts")));
}

// serve --config: a KubeletConfiguration as the kubelet reads it, each
// field the managers and Node Allocatable read on the flag it stands for,
// a flag given on the command line over it.
TEST(KubeletConfigTest, TheManagersFieldsBecomeServesFlags) {
  const std::string text =
      "apiVersion: kubelet.config.k8s.io/v1beta1\n"
      "kind: KubeletConfiguration\n"
      "cgroupDriver: systemd\n"  // not the managers': left alone
      "topologyManagerPolicy: single-numa-node\n"
      "topologyManagerScope: pod\n"
      "topologyManagerPolicyOptions: {prefer-closest-numa-nodes: \"true\"}\n"
      "cpuManagerPolicy: static\n"
      "cpuManagerPolicyOptions:\n"
      "  {full-pcpus-only: \"true\", strict-cpu-reservation: \"true\"}\n"
      "featureGates: {CPUManagerPolicyAlphaOptions: true}\n"
      "reservedSystemCPUs: 0-1\n"
      "memoryManagerPolicy: Static\n"
      "kubeReserved: {cpu: 500m, memory: 924Mi}\n"
      "systemReserved: {memory: 1Gi}\n"
      "evictionHard: {memory.available: 100Mi, nodefs.available: 10%}\n"
      "reservedMemory:\n"
      "  - numaNode: 0\n"
      "    limits: {memory: 1Gi, hugepages-2Mi: 4Mi}\n"
      "  - {numaNode: 1, limits: {memory: 1Gi}}\n";
  ServeFlags flags;
  ASSERT_THAT(ApplyKubeletConfiguration(text, "kubelet.yaml", &flags), IsOk());
  EXPECT_EQ(flags.policy, "single-numa-node");
  EXPECT_EQ(flags.scope, "pod");
  EXPECT_EQ(flags.policy_options, "prefer-closest-numa-nodes=true");
  EXPECT_EQ(flags.cpu_policy, "static");
  EXPECT_EQ(flags.cpu_policy_options,
            "full-pcpus-only=true,strict-cpu-reservation=true");
  EXPECT_EQ(flags.reserved_cpus, "0-1");
  EXPECT_EQ(flags.feature_gates, "CPUManagerPolicyAlphaOptions=true");
  EXPECT_EQ(flags.memory.policy, "Static");
  EXPECT_EQ(flags.memory.kube_reserved, "cpu=500m,memory=924Mi");
  EXPECT_EQ(flags.memory.system_reserved, "memory=1Gi");
  EXPECT_EQ(flags.memory.eviction_hard,
            "memory.available<100Mi,nodefs.available<10%");
  EXPECT_THAT(flags.memory.reserved_memory,
              ElementsAre("0:hugepages-2Mi=4Mi,memory=1Gi", "1:memory=1Gi"));
  // The flags given win.
  ServeFlags given;
  given.policy = "restricted";
  given.memory.reserved_memory = {"0:memory=2Gi"};
  given.given = {"--topology-manager-policy", "--reserved-memory"};
  ASSERT_THAT(ApplyKubeletConfiguration(text, "kubelet.yaml", &given), IsOk());
  EXPECT_EQ(given.policy, "restricted");
  EXPECT_THAT(given.memory.reserved_memory, ElementsAre("0:memory=2Gi"));
  EXPECT_EQ(given.scope, "pod");
}

TEST(KubeletConfigTest, WhatCannotBeReadIsNamed) {
  const std::string header =
      "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n";
  const std::pair<std::string, std::string> cases[] = {
      {"kind: Pod\n", "not a KubeletConfiguration"},
      {"apiVersion: v1\nkind: KubeletConfiguration\n",
       "not a KubeletConfiguration"},
      {header + "reservedMemory: {numaNode: 0}\n",
       "reservedMemory: not a list"},
      {header + "reservedMemory: [{limits: {memory: 1Gi}}]\n",
       "reservedMemory[0].numaNode: missing"},
      {header + "kubeReserved: [memory]\n", "kubeReserved: not a mapping"},
      {header + "cpuManagerPolicy: [static]\n",
       "cpuManagerPolicy: not a string or number"},
      {header + "cpuManagerPolicyOptions: [full-pcpus-only]\n",
       "cpuManagerPolicyOptions: not a mapping"},
      {header + "memoryManagerPolicy: Static\nmemoryManagerPolicy: None\n",
       "given twice"},
      {"{", "kubelet.yaml"},
  };
  for (const auto& [text, message] : cases) {
    ServeFlags flags;
    EXPECT_THAT(ApplyKubeletConfiguration(text, "kubelet.yaml", &flags),
                StatusIs(StatusCode::kInvalidArgument, HasSubstr(message)))
        << text;
  }
}

}  // namespace
}  // namespace topology::host
