// topology-dra-driver as a process, end to end: a generated machine, an
// in-process HTTPS API server (slices and claims stored as an API server
// does), the kubelet's DRA side over real sockets. The driver publishes the
// node's devices, registers, reports ready, prepares a claim allocated by
// hand into CDI ids whose spec exists, stops on SIGTERM within 5 s removing
// its sockets, and after a restart unprepares the claim, removing the spec.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/draplugin/claim_cdi.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/testing/fake_dra_kubelet.h"
#include "topology/testing/fake_kubelet.h"

#include "build_paths.h"
#include "child_process.h"
#include "fake_api_server.h"
#include "fake_resource_store.h"
#include "run_command.h"
#include "socket_util.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "wait_for.h"

namespace topology::device_plugin {
namespace {

namespace dra = ::topology::draplugin;
using nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::SizeIs;
using ::topology::draplugin::KubeConfig;
using ::topology::testing::FakeApiServer;
using ::topology::testing::FakeDraKubelet;
using ::topology::testing::FakeResourceStore;
using ::topology::testing::IsOk;
using ::topology::testing::Scaled;
using namespace std::chrono_literals;

const std::string& Binary() {
  return topology::testing::ProgramPath("topology-dra-driver");
}
constexpr char kDriver[] = "pci.libtopology.dev";

std::string Base64(const std::string& in) {
  static const char kTable[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < in.size(); i += 3) {
    uint32_t n = 0;
    for (size_t j = 0; j < 3; ++j) {
      n = (n << 8) |
          (i + j < in.size()
               ? static_cast<uint32_t>(static_cast<uint8_t>(in[i + j]))
               : 0u);
    }
    const size_t chars = std::min<size_t>(in.size() - i, 3) + 1;
    for (size_t k = 0; k < 4; ++k) {
      out += k < chars ? kTable[(n >> (18 - 6 * k)) & 63] : '=';
    }
  }
  return out;
}

// The driver as a child process, its klog lines appended to `log`.
class DriverProcess : public ::topology::testing::ChildProcess {
 public:
  DriverProcess(std::vector<std::string> args, const std::string& log)
      : ChildProcess(Binary(), std::move(args), log, /*append=*/true) {}
};

using ::topology::testing::WaitFor;

class DraDriverBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::WriteMachine("dual-socket-accel", root_.path()));
    std::ofstream(work_.path() / "config.yaml")
        << "resources:\n"
           "  - name: example.com/vf\n"
           "    selectors: [{drivers: [vfio-pci]}]\n";
    auto server = FakeApiServer::Start(
        work_.path() / "pki",
        [this](const FakeApiServer::Request& r) { return store_.Handle(r); });
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    std::ofstream(work_.path() / "kubeconfig")
        << "current-context: node\n"
           "clusters: [{name: c, cluster: {server: \""
        << server_->url()
        << "\", certificate-authority-data: " << Base64(server_->ca_pem())
        << "}}]\n"
           "contexts: [{name: node, context: {cluster: c, user: u}}]\n"
           "users: [{name: u, user: {token: node-token}}]\n";
    http_port_ = testing::FreeLoopbackPort();
  }
  std::unique_ptr<DriverProcess> Start(std::vector<std::string> extra = {},
                                       int http_port = 0) {
    if (http_port == 0) http_port = http_port_;
    std::vector<std::string> args{
        "--config",
        config_.empty() ? (work_.path() / "config.yaml").string()
                        : config_.string(),
        "--host-root",
        host_root_.empty() ? root_.path().string() : host_root_.string(),
        "--kubeconfig",
        kubeconfig_.empty() ? (work_.path() / "kubeconfig").string()
                            : kubeconfig_.string(),
        "--node-name",
        "node-a",
        "--registry-dir",
        registry_dir_.empty() ? (sockets_.path() / "registry").string()
                              : registry_dir_.string(),
        "--plugin-dir",
        (sockets_.path() / "plugin").string(),
        "--cdi-dir",
        (work_.path() / "cdi").string(),
        "--http-addr",
        "127.0.0.1:" + std::to_string(http_port),
        "-v",
        "1"};
    // Every kubelet path the test's own: a kubelet running on this machine
    // (the real-node tests' one) is never asked, nor its checkpoint read.
    args.insert(args.end(),
                {"--kubelet-root", (sockets_.path() / "kubelet").string()});
    if (std::find(extra.begin(), extra.end(), "--device-plugin-dir") ==
        extra.end()) {
      args.insert(args.end(),
                  {"--device-plugin-dir",
                   (sockets_.path() / "kubelet" / "device-plugins").string()});
    }
    args.insert(args.end(), extra.begin(), extra.end());
    return std::make_unique<DriverProcess>(
        std::move(args), (work_.path() / "driver.log").string());
  }
  std::vector<json> Slices() const {
    std::vector<json> out;
    for (const auto& [name, slice] : store_.slices()) out.push_back(slice);
    return out;
  }
  // Claim ml/one, allocated by hand: `device` of this node for request vf.
  void AddClaimOfOne(const std::string& uid, const std::string& device) {
    store_.AddClaim(
        "ml", "one",
        {{"metadata", {{"name", "one"}, {"namespace", "ml"}, {"uid", uid}}},
         {"status",
          {{"allocation",
            {{"devices",
              {{"results",
                {{{"request", "vf"},
                  {"driver", kDriver},
                  {"pool", "node-a"},
                  {"device", device}}}}}}}}}}});
  }
  // The kubelet's own client of the test's API server.
  StatusOr<std::unique_ptr<dra::KubeClient>> KubeletClient() const {
    KubeConfig config;
    config.server = server_->url();
    config.ca_pem = server_->ca_pem();
    config.token = "kubelet-token";
    config.source = "the test's kubelet";
    return dra::KubeClient::Create(config);
  }
  std::string Log() const {
    std::ifstream in(work_.path() / "driver.log");
    return std::string((std::istreambuf_iterator<char>(in)), {});
  }

  ::topology::testing::TempDir root_;
  ::topology::testing::TempDir work_;
  ::topology::testing::TempDir sockets_;
  FakeResourceStore store_{"node-a", kDriver, true};
  std::unique_ptr<FakeApiServer> server_;
  int http_port_ = 0;
  // Instead of the fixture's own, when set.
  std::filesystem::path kubeconfig_;
  std::filesystem::path registry_dir_;
  std::filesystem::path host_root_;
  std::filesystem::path config_;
};

TEST_F(DraDriverBinaryTest,
       PublishesRegistersPreparesStopsAndUnpreparesAfterARestart) {
  auto driver = Start();
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  const json slice = Slices().front();
  EXPECT_EQ(slice["spec"]["nodeName"], "node-a");
  EXPECT_EQ(slice["spec"]["pool"]["name"], "node-a");
  ASSERT_THAT(slice["spec"]["devices"], SizeIs(8));
  const json& device = slice["spec"]["devices"][0];
  EXPECT_TRUE(device["attributes"].contains("resource.kubernetes.io/pcieRoot"));
  EXPECT_EQ(device["attributes"]["resource"]["string"], "example.com/vf");
  EXPECT_TRUE(device["attributes"].contains("pcieSwitch"));
  EXPECT_EQ(server_->requests().front().authorization, "Bearer node-token");

  FakeDraKubelet kubelet(sockets_.path() / "registry");
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 5s))
      << Log();
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ready = plugin::HttpGet(http_port_, "/readyz");
        return ready.ok() && ready->first == 200;
      },
      5s))
      << Log();

  // A claim allocated by hand: two VFs of this node.
  const std::string first = slice["spec"]["devices"][0]["name"];
  const std::string second = slice["spec"]["devices"][1]["name"];
  store_.AddClaim(
      "ml", "pair",
      {{"metadata", {{"name", "pair"}, {"namespace", "ml"}, {"uid", "u-1"}}},
       {"status",
        {{"allocation",
          {{"devices",
            {{"results",
              {{{"request", "vfs"},
                {"driver", kDriver},
                {"pool", "node-a"},
                {"device", first}},
               {{"request", "vfs"},
                {"driver", kDriver},
                {"pool", "node-a"},
                {"device", second}}}}}}}}}}});
  auto prepared = kubelet.Prepare({{"ml", "u-1", "pair"}});
  ASSERT_THAT(prepared.status(), IsOk());
  const auto& answer = prepared->at("u-1");
  ASSERT_EQ(answer.error, "") << Log();
  ASSERT_THAT(answer.devices, SizeIs(2));
  EXPECT_EQ(answer.devices[0].request_names, std::vector<std::string>{"vfs"});
  const auto spec =
      work_.path() / "cdi" / draplugin::ClaimCdiFileName(kDriver, "u-1");
  ASSERT_TRUE(std::filesystem::exists(spec));
  std::ifstream in(spec);
  const std::string text((std::istreambuf_iterator<char>(in)), {});
  for (const auto& d : answer.devices) {
    ASSERT_THAT(d.cdi_device_ids, SizeIs(1));
    const std::string name =
        d.cdi_device_ids[0].substr(d.cdi_device_ids[0].find('=') + 1);
    EXPECT_NE(text.find("\"" + name + "\""), std::string::npos) << name;
  }

  const auto stop = std::chrono::steady_clock::now();
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0) << Log();
  EXPECT_LT(std::chrono::steady_clock::now() - stop, 5s);
  EXPECT_FALSE(
      std::filesystem::exists(sockets_.path() / "plugin" / "dra.sock"));
  EXPECT_FALSE(std::filesystem::exists(sockets_.path() / "registry" /
                                       (std::string(kDriver) + "-reg.sock")));
  EXPECT_TRUE(std::filesystem::exists(spec));  // the claim stays prepared

  // After a restart, with no Prepare in between: Unprepare removes it.
  driver = Start();
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 10s))
      << Log();
  auto undone = kubelet.Unprepare({{"ml", "u-1", "pair"}});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at("u-1"), "");
  EXPECT_FALSE(std::filesystem::exists(spec));
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

// A kubelet that refuses the registration (one without the DRA handler:
// "no handler registered for plugin type: DRAPlugin") is named in /readyz
// with its reason.
TEST_F(DraDriverBinaryTest, ReadyzSaysWhyTheKubeletRefused) {
  auto driver = Start();
  FakeDraKubelet old_kubelet(sockets_.path() / "registry");
  old_kubelet.set_refusal("no handler registered for plugin type: DRAPlugin");
  ASSERT_TRUE(WaitFor(
      [&] {
        return old_kubelet.Register(kDriver).code() ==
               StatusCode::kFailedPrecondition;
      },
      Scaled(10s)))
      << Log();
  std::string body;
  ASSERT_TRUE(WaitFor(
      [&] {
        auto ready = plugin::HttpGet(http_port_, "/readyz");
        if (!ready.ok() || ready->first == 200) return false;
        body = ready->second;
        return body.find("no handler registered") != std::string::npos;
      },
      Scaled(5s)))
      << body << Log();
  EXPECT_THAT(body, HasSubstr("the kubelet refused the registration: no "
                              "handler registered for plugin type: "
                              "DRAPlugin"));
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

// Two driver processes in one plugin directory, each with its pod UID (a
// rolling update with surge): both serve and register, no socket is ever
// replaced, a claim prepared through one is unprepared through the other,
// and killing either leaves the other serving.
TEST_F(DraDriverBinaryTest, TwoProcessesWithTheirPodUidsShareANode) {
  const std::string uid_a = "0a0a0a0a-0000-4000-8000-00000000000a";
  const std::string uid_b = "0b0b0b0b-0000-4000-8000-00000000000b";
  auto a = Start({"--pod-uid", uid_a});
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, Scaled(10s))) << Log();
  const int port_b = testing::FreeLoopbackPort();
  auto b = Start({"--pod-uid", uid_b}, port_b);
  const auto registry = sockets_.path() / "registry";
  const auto socket_a =
      draplugin::RollingUpdateRegistrationSocket(registry, kDriver, uid_a);
  const auto socket_b =
      draplugin::RollingUpdateRegistrationSocket(registry, kDriver, uid_b);
  FakeDraKubelet through_a(registry);
  FakeDraKubelet through_b(registry);
  ASSERT_TRUE(
      WaitFor([&] { return through_a.RegisterSocket(socket_a, kDriver).ok(); },
              Scaled(10s)))
      << Log();
  ASSERT_TRUE(
      WaitFor([&] { return through_b.RegisterSocket(socket_b, kDriver).ok(); },
              Scaled(10s)))
      << Log();
  // A file's identity: its inode and its change time (a socket made again
  // at once may get the inode number just freed).
  using Identity = std::pair<ino_t, int64_t>;
  const auto inode = [](const std::filesystem::path& path) {
    struct stat info {};
    if (lstat(path.c_str(), &info) != 0) return Identity{0, 0};
    return Identity{info.st_ino, int64_t{info.st_ctim.tv_sec} * 1000000000 +
                                     info.st_ctim.tv_nsec};
  };
  const auto dra_a = sockets_.path() / "plugin" / ("dra-" + uid_a + ".sock");
  const auto dra_b = sockets_.path() / "plugin" / ("dra-" + uid_b + ".sock");
  const std::vector<Identity> before = {inode(socket_a), inode(socket_b),
                                        inode(dra_a), inode(dra_b)};
  for (const Identity& i : before) EXPECT_NE(i.first, ino_t{0});
  const json slice = Slices().front();
  AddClaimOfOne("u-1", slice["spec"]["devices"][0]["name"]);
  auto prepared = through_a.Prepare({{"ml", "u-1", "one"}});
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_EQ(prepared->at("u-1").error, "") << Log();
  const auto spec =
      work_.path() / "cdi" / draplugin::ClaimCdiFileName(kDriver, "u-1");
  ASSERT_TRUE(std::filesystem::exists(spec));
  auto undone = through_b.Unprepare({{"ml", "u-1", "one"}});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at("u-1"), "") << Log();
  EXPECT_FALSE(std::filesystem::exists(spec));
  // Each instance's looks at its sockets leave the other's alone. A socket
  // of a's removed is served again by a (so a has looked since), while b's
  // are the same files; then the other way round.
  EXPECT_THAT(Log(), Not(HasSubstr("serving it again")));
  const auto replaced = [&](const std::filesystem::path& path,
                            const Identity& old) {
    return WaitFor(
        [&] {
          const Identity now = inode(path);
          return now.first != 0 && now != old;
        },
        Scaled(10s));
  };
  // (A socket just made may still get its mode and owner: the files that
  // stay are compared by inode.)
  const auto file = [&](const std::filesystem::path& path) {
    return inode(path).first;
  };
  std::filesystem::remove(dra_a);
  ASSERT_TRUE(replaced(dra_a, before[2])) << Log();
  ASSERT_TRUE(replaced(socket_a, before[0])) << Log();  // registered again
  EXPECT_EQ(file(socket_b), before[1].first);
  EXPECT_EQ(file(dra_b), before[3].first);
  const std::vector<ino_t> after_a = {file(socket_a), file(dra_a)};
  std::filesystem::remove(dra_b);
  ASSERT_TRUE(replaced(dra_b, before[3])) << Log();
  ASSERT_TRUE(replaced(socket_b, before[1])) << Log();
  EXPECT_EQ((std::vector<ino_t>{file(socket_a), file(dra_a)}), after_a);
  EXPECT_TRUE(through_a.RegisterSocket(socket_a, kDriver).ok());
  EXPECT_TRUE(through_b.RegisterSocket(socket_b, kDriver).ok());
  // Killing one leaves the other serving.
  a->Signal(SIGKILL);
  a->Wait(5s);
  auto again = through_b.Prepare({{"ml", "u-1", "one"}});
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->at("u-1").error, "") << Log();
  EXPECT_TRUE(std::filesystem::exists(spec));
  b->Signal(SIGTERM);
  EXPECT_EQ(b->Wait(5s), 0);
  EXPECT_FALSE(std::filesystem::exists(dra_b));
}

TEST_F(DraDriverBinaryTest, AFaultIsATaintOnTheSliceAndUnhealthyOnTheStream) {
  // Every function has an AER counter, as on a real machine.
  for (const auto& entry : std::filesystem::directory_iterator(
           root_.path() / "sys/bus/pci/devices")) {
    std::ofstream(entry.path() / "aer_dev_fatal") << "TOTAL_ERR_FATAL 0\n";
  }
  auto driver =
      Start({"--health-interval", "100ms", "--recovery-period", "1h"});
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  const std::string first = Slices().front()["spec"]["devices"][0]["name"];
  // "pci-0000-3b-00-0" names 0000:3b:00.0.
  std::string address = first.substr(4);
  address[4] = ':';
  address[7] = ':';
  address[10] = '.';
  const auto aer =
      root_.path() / "sys/bus/pci/devices" / address / "aer_dev_fatal";
  FakeDraKubelet kubelet(sockets_.path() / "registry");
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 5s))
      << Log();
  auto healthy = kubelet.FirstHealth("v1", 5s);
  ASSERT_THAT(healthy.status(), IsOk());
  ASSERT_THAT(*healthy, SizeIs(8));
  for (const auto& entry : *healthy) {
    EXPECT_EQ(entry.health, 1) << entry.device;
    EXPECT_EQ(entry.pool, "node-a");
  }

  std::ofstream(aer) << "TOTAL_ERR_FATAL 2\n";
  const auto tainted = [&] {
    for (const json& slice : Slices()) {
      for (const json& device : slice["spec"]["devices"]) {
        if (device["name"] == first && device.contains("taints")) return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(WaitFor(tainted, 10s)) << Log();
  // A stream opened now starts with the fault, its reason the message.
  auto now = kubelet.FirstHealth("v1alpha1", 5s);
  ASSERT_THAT(now.status(), IsOk());
  ASSERT_THAT(*now, SizeIs(8));
  for (const auto& entry : *now) {
    EXPECT_EQ(entry.health, entry.device == first ? 2 : 1) << entry.device;
    if (entry.device == first) {
      EXPECT_THAT(entry.message, ::testing::HasSubstr("AER"));
    }
    EXPECT_EQ(entry.timeout_seconds, 60);
  }
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

// The switch from the device plugin on a live node: a device a running pod
// holds through the device plugin (the kubelet's checkpoint in
// --device-plugin-dir) is published with a NoSchedule taint whose value is the
// pod's UID; once the kubelet's checkpoint no longer names it, the taint
// goes at the next resync.
TEST_F(DraDriverBinaryTest,
       ADeviceHeldThroughTheDevicePluginIsTaintedUntilReleased) {
  const auto kubelet_root = work_.path() / "kubelet";
  std::filesystem::create_directories(kubelet_root / "device-plugins");
  const auto checkpoint =
      kubelet_root / "device-plugins" / "kubelet_internal_checkpoint";
  const auto write_checkpoint = [&](const std::string& entries) {
    // As the kubelet writes it: a new file renamed over the old.
    const auto next = checkpoint.string() + ".new";
    std::ofstream(next) << R"({"Data":{"PodDeviceEntries":[)" << entries
                        << R"(],"RegisteredDevices":{}},"Checksum":1})";
    std::filesystem::rename(next, checkpoint);
  };
  // Which device: the first function the driver publishes, found from a
  // run without a checkpoint entry.
  write_checkpoint("");
  auto driver =
      Start({"--device-plugin-dir", (kubelet_root / "device-plugins").string(),
             "--health-interval", "100ms"});
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  const std::string first = Slices().front()["spec"]["devices"][0]["name"];
  std::string address = first.substr(4);  // pci-0000-3b-00-0
  address[4] = ':';
  address[7] = ':';
  address[10] = '.';
  const auto taint_of = [&]() -> std::optional<json> {
    for (const json& slice : Slices()) {
      for (const json& device : slice["spec"]["devices"]) {
        if (device["name"] == first && device.contains("taints")) {
          return device["taints"];
        }
      }
    }
    return std::nullopt;
  };
  EXPECT_FALSE(taint_of().has_value());

  constexpr char kPod[] = "6c1e8f50-0b8a-4d1e-9d1c-7a3f2b4c5d6e";
  write_checkpoint(
      std::string(R"({"PodUID":")") + kPod +
      R"(","ContainerName":"c","ResourceName":"example.com/accel",)"
      R"("DeviceIDs":{"0":[")" +
      address + R"("]},"AllocResp":""})");
  ASSERT_TRUE(WaitFor([&] { return taint_of().has_value(); }, 10s)) << Log();
  const json taints = *taint_of();
  ASSERT_EQ(taints.size(), 1u) << taints.dump();
  EXPECT_EQ(taints[0]["key"], "pci.libtopology.dev/device-plugin-allocated");
  EXPECT_EQ(taints[0]["value"], kPod);
  EXPECT_EQ(taints[0]["effect"], "NoSchedule");
  EXPECT_THAT(Log(), HasSubstr(address + " is held by pod " + kPod));

  // The pod ended: the kubelet's checkpoint drops the entry.
  write_checkpoint("");
  EXPECT_TRUE(WaitFor([&] { return !taint_of().has_value(); }, 10s)) << Log();
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

// Credentials the API server refuses end the start with the reason, before
// any socket is served or slice sent (not a 403 logged at every resync).
TEST_F(DraDriverBinaryTest,
       CredentialsTheServerRefusesEndTheStartBeforeAnything) {
  auto refusing = FakeApiServer::Start(
      work_.path() / "pki-refusing", [](const FakeApiServer::Request&) {
        FakeApiServer::Answer answer;
        answer.status = 403;
        answer.body =
            R"({"kind":"Status","status":"Failure","reason":"Forbidden"})";
        return answer;
      });
  ASSERT_THAT(refusing.status(), IsOk());
  kubeconfig_ = work_.path() / "refused-kubeconfig";
  std::ofstream(kubeconfig_)
      << "current-context: node\n"
         "clusters: [{name: c, cluster: {server: \""
      << (*refusing)->url()
      << "\", certificate-authority-data: " << Base64((*refusing)->ca_pem())
      << "}}]\n"
         "contexts: [{name: node, context: {cluster: c, user: u}}]\n"
         "users: [{name: u, user: {token: stale-token}}]\n";
  auto driver = Start();
  EXPECT_EQ(driver->Wait(10s), 1) << Log();
  EXPECT_THAT(Log(), HasSubstr("refuses the credentials of --kubeconfig"));
  EXPECT_THAT(Log(), HasSubstr("HTTP 403"));
  // Nothing served: no registration socket.
  EXPECT_FALSE(std::filesystem::exists(sockets_.path() / "registry") &&
               !std::filesystem::is_empty(sockets_.path() / "registry"));
}

// A registration directory that cannot be served ends the start naming it,
// before any slice is published.
TEST_F(DraDriverBinaryTest, ABadRegistryDirectoryEndsTheStartBeforePublishing) {
  registry_dir_ = work_.path() / "not-a-directory";
  std::ofstream(registry_dir_) << "a file\n";
  auto driver = Start();
  EXPECT_EQ(driver->Wait(10s), 1) << Log();
  EXPECT_THAT(Log(), HasSubstr(registry_dir_.string()));
  EXPECT_TRUE(Slices().empty());
}

// The kubelet wipes its node's slices at its start, and a driver's 30 s
// after it deregistered (FakeDraKubelet::WipeSlices, as the kubelet does
// it): the driver publishes its own again at the next resync; another
// driver's slice goes only with the whole node's wipe.
TEST_F(DraDriverBinaryTest, SlicesTheKubeletWipesArePublishedAgain) {
  auto driver = Start();
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  store_.Put("other-driver", "node-a", "gpu.example.com", "node-a", 1);
  auto client = KubeletClient();
  ASSERT_THAT(client.status(), IsOk());

  // After this driver deregistered: its slices only.
  auto wiped = FakeDraKubelet::WipeSlices(**client, "node-a", kDriver);
  ASSERT_THAT(wiped.status(), IsOk());
  EXPECT_GE(*wiped, 1u);
  EXPECT_TRUE(store_.slices().contains("other-driver"));
  EXPECT_TRUE(WaitFor(
      [&] {
        const auto slices = store_.slices();
        return std::any_of(slices.begin(), slices.end(), [](const auto& slice) {
          return slice.second["spec"]["driver"] == kDriver;
        });
      },
      15s))
      << Log();

  // At the kubelet's start: every slice of the node.
  wiped = FakeDraKubelet::WipeSlices(**client, "node-a");
  ASSERT_THAT(wiped.status(), IsOk());
  EXPECT_FALSE(store_.slices().contains("other-driver"));
  EXPECT_TRUE(WaitFor([&] { return !Slices().empty(); }, 15s)) << Log();
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0);
}

TEST_F(DraDriverBinaryTest, SharingADeviceWithTheDevicePluginIsRefusedAtStart) {
  std::ofstream(work_.path() / "device-plugin.yaml")
      << "resources:\n"
         "  - name: example.com/accel\n"
         "    selectors: [{drivers: [vfio-pci]}]\n";
  auto driver = Start({"--device-plugin-config",
                       (work_.path() / "device-plugin.yaml").string()});
  EXPECT_EQ(driver->Wait(10s), 2);
  EXPECT_THAT(Log(), ::testing::HasSubstr("distinct selectors"));
  EXPECT_TRUE(Slices().empty());
}

// The guide's uninstall (docs/dra-driver-guide.md, "Uninstall"): a
// spec a crash left for a claim that is not prepared goes at the start;
// deleting the driver (SIGTERM) keeps the spec of a claim a running pod
// holds, since a restarting container needs it; the kubelet's wipe of the
// driver's slices 30 s after it deregistered leaves the node none of them.
TEST_F(DraDriverBinaryTest, UninstallKeepsTheSpecsOfPreparedClaimsOnly) {
  constexpr char kRunning[] = "3d6f9b2c-8e1a-4c7d-b5f0-2a4e6c8d0f13";
  constexpr char kLeft[] = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d";
  const auto cdi = work_.path() / "cdi";
  std::filesystem::create_directories(cdi);
  const auto left = cdi / draplugin::ClaimCdiFileName(kDriver, kLeft);
  std::ofstream(left) << R"({"cdiVersion":"0.5.0","kind":"x/y","devices":[]})";
  auto driver = Start();
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  EXPECT_FALSE(std::filesystem::exists(left));
  EXPECT_THAT(Log(), HasSubstr(std::string("removed the CDI spec of claim ") +
                               kLeft + ", which is not prepared"));

  FakeDraKubelet kubelet(sockets_.path() / "registry");
  ASSERT_TRUE(WaitFor([&] { return kubelet.Register(kDriver).ok(); }, 5s))
      << Log();
  const std::string device = Slices().front()["spec"]["devices"][0]["name"];
  AddClaimOfOne(kRunning, device);
  auto prepared = kubelet.Prepare({{"ml", kRunning, "one"}});
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_EQ(prepared->at(kRunning).error, "") << Log();
  const auto running = cdi / draplugin::ClaimCdiFileName(kDriver, kRunning);
  ASSERT_TRUE(std::filesystem::exists(running));

  // kubectl delete -k: the pod gets SIGTERM.
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0) << Log();
  EXPECT_TRUE(std::filesystem::exists(running));
  // The kubelet, 30 s after the driver deregistered.
  auto client = KubeletClient();
  ASSERT_THAT(client.status(), IsOk());
  auto wiped = FakeDraKubelet::WipeSlices(**client, "node-a", kDriver);
  ASSERT_THAT(wiped.status(), IsOk());
  EXPECT_GE(*wiped, 1u);
  EXPECT_TRUE(Slices().empty());
  EXPECT_TRUE(std::filesystem::exists(running));
}

// deploy/both-paths as shipped: its two configurations (rendered from the
// overlay by the manifest checker, as the pods read them from their
// ConfigMaps) on a machine with both kinds of device. The device plugin
// starts and advertises its devices to the kubelet; the driver, given the
// device plugin's configuration as the overlay gives it, starts, publishes
// its own, and each device is offered by exactly one path.
TEST_F(DraDriverBinaryTest, TheBothPathsOverlayStartsBothEachOwningItsDevices) {
  const auto configs = work_.path() / "both-paths";
  const auto rendered = ::topology::testing::RunCommand(
      std::string(TOPOLOGY_SYSTEM_PYTHON3) + " " +
      topology::testing::SourceDir() +
      "/tests/deploy/validate_manifests.py --both-paths-configs " +
      topology::testing::SourceDir() + " " + configs.string());
  ASSERT_EQ(rendered.exit_code, 0) << rendered.out;
  ::topology::testing::TempDir machine;
  ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", machine.path()));
  host_root_ = machine.path();

  ::topology::testing::TempDir plugins;
  ::topology::testing::FakeKubelet kubelet(plugins.path());
  kubelet.Start();
  ::topology::testing::ChildProcess plugin(
      topology::testing::ProgramPath("topology-device-plugin"),
      {"--config", (configs / "device-plugin.yaml").string(), "--host-root",
       machine.path().string(), "--plugin-dir", plugins.path().string(),
       "--http-addr", "", "--rescan-interval", "0",
       // The driver's claims, as the overlay mounts them.
       "--dra-claims",
       (sockets_.path() / "plugin" / "prepared-claims.json").string()},
      (work_.path() / "plugin.log").string());
  auto connection = kubelet.WaitForConnection("example.com/nic", 10s);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(5s)));
  const auto advertised = connection->latest();
  ASSERT_TRUE(advertised.has_value());
  std::set<std::string> by_plugin;
  for (const auto& device : advertised->devices()) {
    by_plugin.insert(device.id());
  }

  config_ = configs / "dra-driver.yaml";
  auto driver = Start(
      {"--device-plugin-config", (configs / "device-plugin.yaml").string()});
  ASSERT_TRUE(WaitFor([&] { return !Slices().empty(); }, 10s)) << Log();
  std::set<std::string> by_driver;
  for (const json& slice : Slices()) {
    for (const json& device : slice["spec"]["devices"]) {
      std::string address = device["name"].get<std::string>().substr(4);
      address[4] = ':';  // pci-0000-3b-00-0 is 0000:3b:00.0
      address[7] = ':';
      address[10] = '.';
      by_driver.insert(address);
    }
  }
  EXPECT_THAT(by_plugin, SizeIs(::testing::Gt(0u)));
  EXPECT_THAT(by_driver, SizeIs(::testing::Gt(0u)));
  std::vector<std::string> both;
  std::set_intersection(by_plugin.begin(), by_plugin.end(), by_driver.begin(),
                        by_driver.end(), std::back_inserter(both));
  EXPECT_THAT(both, ::testing::IsEmpty());
  driver->Signal(SIGTERM);
  EXPECT_EQ(driver->Wait(5s), 0) << Log();
  plugin.Signal(SIGTERM);
  EXPECT_EQ(plugin.Wait(5s), 0);
}

}  // namespace
}  // namespace topology::device_plugin
