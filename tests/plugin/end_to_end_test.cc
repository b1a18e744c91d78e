// topology-manager serve and topology-device-plugin as separate processes,
// on fixture machines: alignment under every policy and scope, plugin
// crash and return, manager restart, and a long admit/release loop.
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_command.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"

extern char** environ;

namespace topology::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::Contains;
using ::testing::Not;
using ::testing::SizeIs;
namespace tm = topologymanager::v1alpha1;

class Process {
 public:
  explicit Process(std::vector<std::string> args) {
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    EXPECT_EQ(
        posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ),
        0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int Stop(int signal = SIGTERM) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  size_t Threads() const {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/task")) {
      ++n;
    }
    return n;
  }
  // The names of the process's threads (/proc/<pid>/task/*/comm).
  std::vector<std::string> ThreadNames() const {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/task", error)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name)) names.push_back(name);
    }
    return names;
  }
  size_t Fds() const {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/fd")) {
      ++n;
    }
    return n;
  }

 private:
  pid_t pid_ = -1;
};

struct NodeSetup {
  std::string machine = "dual-socket-8gpu";
  std::string policy = "single-numa-node";
  std::string scope = "container";
};

class EndToEndTest : public ::testing::Test {
 protected:
  void Write(const NodeSetup& setup) {
    setup_ = setup;
    ASSERT_TRUE(WriteMachine(setup.machine, root_.path()));
    std::filesystem::create_directories(plugins());
    std::ofstream(work_.path() / "plugin.yaml")
        << "resources:\n"
           "  - name: example.com/gpu\n"
           "    selectors: [{vendors: [\"10de\"], classes: [\"0302\"]}]\n"
           "  - name: example.com/nic\n"
           "    selectors: [{vendors: [\"15b3\"], classes: [\"0200\"]}]\n";
  }
  std::filesystem::path plugins() const { return work_.path() / "plugins"; }
  std::string control() const {
    return (work_.path() / "control.sock").string();
  }

  void StartManager() {
    manager_ = std::make_unique<Process>(
        std::vector<std::string>{TOPOLOGY_MANAGER_BINARY,
                                 "serve",
                                 "--plugin-dir",
                                 plugins().string(),
                                 "--host-root",
                                 root_.path().string(),
                                 "--control-socket",
                                 control(),
                                 "--topology-manager-policy",
                                 setup_.policy,
                                 "--topology-manager-scope",
                                 setup_.scope,
                                 "--cpu-manager-policy",
                                 "static",
                                 "--reserved-cpus",
                                 "0",
                                 "--grace-period",
                                 "5s",
                                 "--node-name",
                                 "e2e"});
    for (int i = 0; i < 200 && !std::filesystem::exists(control()); ++i) {
      std::this_thread::sleep_for(10ms);
    }
    stub_ = tm::Control::NewStub(grpc::CreateChannel(
        "unix:" + control(), grpc::InsecureChannelCredentials()));
  }
  void StartPlugin() {
    plugin_ = std::make_unique<Process>(std::vector<std::string>{
        TOPOLOGY_DEVICE_PLUGIN_BINARY, "--config",
        (work_.path() / "plugin.yaml").string(), "--host-root",
        root_.path().string(), "--plugin-dir", plugins().string(),
        "--http-addr", "", "--rescan-interval", "0"});
  }

  json Status() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    tm::StatusRequest request;
    tm::JsonReply reply;
    if (!stub_->Status(&context, request, &reply).ok()) return json();
    return json::parse(reply.json());
  }
  size_t Allocatable(const std::string& resource) {
    const json status = Status();
    if (status.is_null()) return 0;
    for (const json& r : status["resources"]) {
      if (r["name"] == resource) return r["allocatable"].get<size_t>();
    }
    return 0;
  }
  // Both resources of the default machine: each registers on its own
  // socket, so a pod asking for both waits for both.
  bool WaitGpusAndNics() {
    return WaitAllocatable("example.com/gpu", 8) &&
           WaitAllocatable("example.com/nic", 4);
  }
  bool WaitAllocatable(const std::string& resource, size_t count,
                       std::chrono::milliseconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      if (Allocatable(resource) == count) return true;
      std::this_thread::sleep_for(20ms);
    }
    return false;
  }
  json Admit(const std::string& yaml) {
    grpc::ClientContext context;
    tm::AdmitRequest request;
    auto* manifest = request.add_manifests();
    manifest->set_source("test.yaml");
    manifest->set_yaml(yaml);
    tm::JsonReply reply;
    const grpc::Status status = stub_->Admit(&context, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() ? json::parse(reply.json())[0] : json();
  }
  bool Release(const std::string& pod) {
    grpc::ClientContext context;
    tm::ReleaseRequest request;
    request.set_pod(pod);
    tm::JsonReply reply;
    return stub_->Release(&context, request, &reply).ok();
  }

  TempDir root_;
  TempDir work_;
  NodeSetup setup_;
  std::unique_ptr<Process> manager_;
  std::unique_ptr<Process> plugin_;
  std::unique_ptr<tm::Control::Stub> stub_;
};

std::string PodYaml(const std::string& name, int gpus, int nics, int cpus) {
  std::string yaml =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
      "}\nspec:\n  containers:\n    - name: c\n      resources:\n"
      "        limits:\n          cpu: \"" +
      std::to_string(cpus) + "\"\n          memory: 1Gi\n";
  if (gpus > 0)
    yaml += "          example.com/gpu: " + std::to_string(gpus) + "\n";
  if (nics > 0)
    yaml += "          example.com/nic: " + std::to_string(nics) + "\n";
  return yaml;
}

// The NUMA node of each GPU/NIC of the dual-socket machine.
int NodeOf(const std::string& address) {
  const int bus = std::stoi(address.substr(5, 2), nullptr, 16);
  return bus < 0x80 ? 0 : 1;
}

class PolicyTest : public EndToEndTest,
                   public ::testing::WithParamInterface<
                       std::tuple<std::string, std::string>> {};

TEST_P(PolicyTest, AlignmentUnderEachPolicyAndScope) {
  const auto& [policy, scope] = GetParam();
  Write({.machine = "dual-socket-8gpu", .policy = policy, .scope = scope});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  // Two GPUs, one NIC and 4 CPUs: one NUMA node whenever the policy aligns.
  const json pod = Admit(PodYaml("aligned", 2, 1, 4));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  const json& c = pod["containers"][0];
  std::set<int> nodes;
  for (const auto& id : c["devices"]["example.com/gpu"])
    nodes.insert(NodeOf(id));
  for (const auto& id : c["devices"]["example.com/nic"])
    nodes.insert(NodeOf(id));
  if (policy != "none") {
    EXPECT_THAT(nodes, SizeIs(1)) << pod.dump();
    ASSERT_FALSE(c["numa_nodes"].is_null());
    EXPECT_EQ(c["numa_nodes"].size(), 1u);
    // The exclusive CPUs are on that node (node 0: CPUs 0-7,16-23).
    const int node = *nodes.begin();
    EXPECT_EQ(c["numa_nodes"][0], node);
  }
  // Six GPUs on one node are impossible.
  const json big = Admit(PodYaml("big", 6, 0, 2));
  if (policy == "single-numa-node" || policy == "restricted") {
    EXPECT_FALSE(big["admitted"].get<bool>());
    EXPECT_EQ(big["reason"], "TopologyAffinityError");
  } else {
    EXPECT_TRUE(big["admitted"].get<bool>()) << big.dump();
  }
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_EQ(manager_->Stop(), 0);
}

// Both daemons run gRPC's poll engine, under which a client connection
// with no call on it is read by nobody: the manager lets go of its
// connection to a plugin whose stream has ended, so the plugin's stop does
// not wait out its servers' 2 s grace for a goodbye nobody reads.
TEST_F(EndToEndTest, PluginStopsPromptlyAfterServingAdmissions) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const json pod = Admit(PodYaml("one", 2, 1, 1));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, Scaled(1500ms));
  EXPECT_EQ(manager_->Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    EndToEnd, PolicyTest,
    ::testing::Combine(::testing::Values("none", "best-effort", "restricted",
                                         "single-numa-node"),
                       ::testing::Values("container", "pod")),
    [](const auto& param_info) {
      std::string name =
          std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Beyond the kubelet: under the node policy "dynamic" each pod's own policy
// (spec.topology.policy or the annotation) decides it, with the real plugin
// on the dual-socket machine.
TEST_F(EndToEndTest, DynamicPolicyAppliesEachPodsOwn) {
  Write({.machine = "dual-socket-8gpu",
         .policy = "dynamic",
         .scope = "container"});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const auto with_policy = [](const std::string& name, int gpus,
                              const std::string& how) {
    std::string yaml = PodYaml(name, gpus, 0, 1);
    if (how.starts_with("spec:")) {
      yaml += "  topology: {policy: " + how.substr(5) + "}\n";
    } else if (how.starts_with("annotation:")) {
      yaml.replace(
          yaml.find("metadata: {name: " + name + "}"),
          static_cast<std::string>("metadata: {name: " + name + "}").size(),
          "metadata: {name: " + name +
              ", annotations: {topology.libtopology.dev/policy: " +
              how.substr(11) + "}}");
    }
    return yaml;
  };
  // Six GPUs cannot be on one NUMA node (four per node).
  const json strict = Admit(with_policy("strict", 6, "spec:single-numa-node"));
  EXPECT_FALSE(strict["admitted"].get<bool>());
  EXPECT_EQ(strict["reason"], "TopologyAffinityError");
  EXPECT_EQ(strict["topology_policy"]["policy"], "single-numa-node");
  EXPECT_EQ(strict["topology_policy"]["source"], "spec.topology.policy");
  const json relaxed =
      Admit(with_policy("relaxed", 6, "annotation:best-effort"));
  EXPECT_TRUE(relaxed["admitted"].get<bool>()) << relaxed.dump();
  EXPECT_EQ(relaxed["topology_policy"]["policy"], "best-effort");
  EXPECT_EQ(relaxed["topology_policy"]["source"],
            "annotation topology.libtopology.dev/policy");
  ASSERT_TRUE(Release("relaxed"));
  // No policy stated: the Topology Manager does not intervene.
  const json plain = Admit(with_policy("plain", 6, ""));
  EXPECT_TRUE(plain["admitted"].get<bool>()) << plain.dump();
  EXPECT_EQ(plain["topology_policy"]["policy"], "none");
  EXPECT_EQ(plain["topology_policy"]["source"], "default");
  EXPECT_TRUE(plain["containers"][0]["numa_nodes"].is_null());
  ASSERT_TRUE(Release("plain"));
  // Every container of the pod on one node.
  std::string two = PodYaml("together", 2, 0, 1);
  two +=
      "    - name: d\n      resources:\n        limits: {cpu: \"1\", "
      "memory: 1Gi, example.com/gpu: 2}\n"
      "  topology: {policy: pod-level-single-numa-node}\n";
  const json together = Admit(two);
  ASSERT_TRUE(together["admitted"].get<bool>()) << together.dump();
  EXPECT_EQ(together["topology_policy"]["scope"], "pod");
  std::set<int> nodes;
  for (const json& c : together["containers"]) {
    for (const auto& id : c["devices"]["example.com/gpu"]) {
      nodes.insert(NodeOf(id));
    }
  }
  EXPECT_THAT(nodes, SizeIs(1)) << together.dump();
  // An unknown policy is a clear error naming the pod.
  grpc::ClientContext context;
  tm::AdmitRequest request;
  auto* manifest = request.add_manifests();
  manifest->set_source("bad.yaml");
  manifest->set_yaml(with_policy("odd", 1, "spec:sometimes"));
  tm::JsonReply reply;
  const grpc::Status bad = stub_->Admit(&context, request, &reply);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(),
              ::testing::HasSubstr("pod \"odd\": unknown topology policy"));
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_EQ(manager_->Stop(), 0);
}

TEST_F(EndToEndTest, SubNumaClusteringMachine) {
  Write({.machine = "snc", .policy = "single-numa-node", .scope = "pod"});
  StartManager();
  StartPlugin();
  // Both resources listed (they register separately; a pod asking for one
  // not yet offered is OutOf<resource>, as in the kubelet).
  const json status = [&] {
    for (int i = 0; i < 500; ++i) {
      json s = Status();
      if (!s.is_null() && s["resources"].size() == 2 &&
          Allocatable("example.com/gpu") > 0) {
        return s;
      }
      std::this_thread::sleep_for(20ms);
    }
    return Status();
  }();
  ASSERT_FALSE(status["resources"].empty()) << status.dump();
  EXPECT_THAT(status["numa_nodes"], SizeIs(4));
  const json pod = Admit(PodYaml("one", 1, 0, 2));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  EXPECT_EQ(pod["containers"][0]["numa_nodes"].size(), 1u);
}

TEST_F(EndToEndTest, PluginKilledThenBack) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const json pod = Admit(PodYaml("held", 1, 0, 1));
  ASSERT_TRUE(pod["admitted"].get<bool>());
  const auto killed = std::chrono::steady_clock::now();
  plugin_->Stop(SIGKILL);
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 0, 1s));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 1s);
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const json status = Status();
  EXPECT_EQ(status["pods"][0]["containers"][0]["devices"],
            pod["containers"][0]["devices"]);
}

// With its ListAndWatch streams open and idle, the plugin has no thread
// that polls on a timer for them: gRPC 1.51's callback API would add two
// "nexting_thread"s that wake every 1.1 s whether or not anything happens.
TEST_F(EndToEndTest, IdleStreamsHaveNoPollingThreads) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const std::vector<std::string> names = plugin_->ThreadNames();
  ASSERT_FALSE(names.empty());
  EXPECT_THAT(names, Not(Contains("nexting_thread")));
}

TEST_F(EndToEndTest, ManagerRestartKeepsAllocationsAndPluginsComeBack) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  std::set<std::string> held;
  for (int i = 0; i < 3; ++i) {
    const json pod = Admit(PodYaml("before-" + std::to_string(i), 2, 0, 1));
    ASSERT_TRUE(pod["admitted"].get<bool>());
    for (const auto& id : pod["containers"][0]["devices"]["example.com/gpu"]) {
      held.insert(id.get<std::string>());
    }
  }
  ASSERT_EQ(manager_->Stop(), 0);
  StartManager();
  // The plugin sees kubelet.sock re-created and registers again.
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  EXPECT_THAT(Status()["pods"], SizeIs(3));
  const json after = Admit(PodYaml("after", 2, 0, 1));
  ASSERT_TRUE(after["admitted"].get<bool>()) << after.dump();
  for (const auto& id : after["containers"][0]["devices"]["example.com/gpu"]) {
    EXPECT_FALSE(held.contains(id.get<std::string>())) << id;
  }
  EXPECT_FALSE(Admit(PodYaml("too-many", 1, 0, 1))["admitted"].get<bool>());
}

TEST_F(EndToEndTest, ThousandPodsAdmittedAndReleasedWithoutLeaks) {
  Write({.machine = "dual-socket-8gpu",
         .policy = "single-numa-node",
         .scope = "pod"});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  size_t threads = 0;
  size_t fds = 0;
  const int rounds = static_cast<int>(
      std::max<int64_t>(100, std::strtol(std::getenv("TOPOLOGY_E2E_PODS")
                                             ? std::getenv("TOPOLOGY_E2E_PODS")
                                             : "1000",
                                         nullptr, 10)));
  for (int i = 0; i < rounds; ++i) {
    const std::string name = "pod-" + std::to_string(i);
    const json pod = Admit(PodYaml(name, 1 + i % 4, i % 2, 1 + i % 3));
    ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
    ASSERT_TRUE(Release(name));
    if (i == 50) {
      threads = manager_->Threads();
      fds = manager_->Fds();
    }
  }
  const json status = Status();
  EXPECT_THAT(status["pods"], SizeIs(0));
  for (const json& r : status["resources"])
    EXPECT_EQ(r["in_use"], 0) << r.dump();
  // gRPC's pools vary by a few threads with the load; a leak would grow
  // with the 950 cycles after the measurement.
  EXPECT_LE(manager_->Threads(), threads + 8);
  EXPECT_LE(manager_->Fds(), fds + 4);
}

TEST_F(EndToEndTest, CommandLine) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const auto file = [&](const std::string& name, const std::string& text) {
    const auto path = work_.path() / name;
    std::ofstream(path) << text;
    return path.string();
  };
  const std::string good = file("good.yaml", PodYaml("good", 2, 1, 2));
  CommandResult result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                                    " admit --format json --control-socket " +
                                    control() + " " + good);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const json line = json::parse(result.out);
  EXPECT_EQ(line["pod"], "good");
  EXPECT_EQ(line["admitted"], true);
  EXPECT_TRUE(line["reason"].is_null());
  EXPECT_EQ(line["containers"][0]["devices"]["example.com/gpu"].size(), 2u);
  EXPECT_EQ(line["containers"][0]["numa_nodes"].size(), 1u);
  EXPECT_FALSE(line["containers"][0]["cpus"].get<std::string>().empty());

  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --format json --control-socket " + control() +
                      " " + file("six.yaml", PodYaml("six", 6, 0, 1)));
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_EQ(json::parse(result.out)["reason"], "TopologyAffinityError");

  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --control-socket " + control() + " " +
                      file("bad.yaml",
                           "kind: Pod\nmetadata: {name: b}\nspec: "
                           "{containers: [{name: c, resources: {limits: "
                           "{cpu: lots}}}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("spec.containers[0].resources.limits.cpu"));

  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " status --format nrt --control-socket " + control());
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const json nrt = json::parse(result.out);
  EXPECT_EQ(nrt["kind"], "NodeResourceTopology");
  EXPECT_THAT(nrt["zones"], SizeIs(2));

  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " release good --control-socket " + control());
  EXPECT_EQ(result.exit_code, 0) << result.out;
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " release good --control-socket " + control());
  EXPECT_EQ(result.exit_code, 2) << result.out;
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " status --control-socket " +
                      (work_.path() / "nope.sock").string());
  EXPECT_EQ(result.exit_code, 3) << result.out;

  // A pod name that is not UTF-8 is bad input (2), named, never "cannot
  // reach" (3).
  result = RunCommand(
      std::string(TOPOLOGY_MANAGER_BINARY) + " admit --control-socket " +
      control() + " " +
      file("latin1.yaml",
           "kind: Pod\nmetadata: {name: \"caf\xe9\"}\nspec: {containers: "
           "[{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("metadata.name: is not valid UTF-8"));
  // Elsewhere (a comment), the server names the file and line.
  result = RunCommand(
      std::string(TOPOLOGY_MANAGER_BINARY) + " admit --control-socket " +
      control() + " " +
      file("comment.yaml",
           "kind: Pod\nmetadata: {name: c}\n# caf\xe9\nspec: {containers: "
           "[{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("comment.yaml line 3: not valid UTF-8"));
  // Manifests are bounded before anything is sent: exit 2 naming the file
  // and the limit, never "cannot reach" or an exception's text.
  const std::string big = file("big.yaml", std::string(20u << 20, '#'));
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --control-socket " + control() + " " + big);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr(big + " is larger than 4 MiB"));
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --control-socket " + control() + " " +
                      work_.path().string());
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr("is a directory"));
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --control-socket " + control() + " /dev/zero");
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("/dev/zero is larger than 4 MiB"));
  const std::string part = file("part.yaml", std::string(4u << 20, '#'));
  result = RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                      " admit --control-socket " + control() + " " + part +
                      " " + part + " " + part + " " + good);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr("larger than 12 MiB"));
  // A key given twice is refused, as the API server refuses it.
  result =
      RunCommand(std::string(TOPOLOGY_MANAGER_BINARY) +
                 " admit --control-socket " + control() + " " +
                 file("twice.yaml",
                      "kind: Pod\nmetadata:\n  name: twice\n  annotations:\n"
                      "    topology.libtopology.dev/policy: none\n"
                      "    topology.libtopology.dev/policy: single-numa-node\n"
                      "spec: {containers: [{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("metadata.annotations: key "
                                   "\"topology.libtopology.dev/policy\" is "
                                   "given twice (lines 5 and 6)"));
  // The server refuses a status format it does not know.
  {
    grpc::ClientContext context;
    tm::StatusRequest request;
    request.set_format("yaml");
    tm::JsonReply reply;
    const grpc::Status status = stub_->Status(&context, request, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                ::testing::HasSubstr("unknown status format"));
  }
}

}  // namespace
}  // namespace topology::testing

namespace topology::testing {
namespace {

// Every binary names itself and the project's version, and exits 0.
TEST(CommandLineTest, EveryBinaryPrintsItsVersion) {
  for (const std::string& binary :
       {std::string(TOPOLOGY_MANAGER_BINARY),
        std::string(TOPOLOGY_DEVICE_PLUGIN_BINARY)}) {
    const CommandResult result = RunCommand(binary + " --version");
    EXPECT_EQ(result.exit_code, 0) << binary << ": " << result.out;
    const std::string name = std::filesystem::path(binary).filename().string();
    EXPECT_EQ(result.out, name + " " + TOPOLOGY_PROJECT_VERSION + "\n");
  }
}

}  // namespace
}  // namespace topology::testing
