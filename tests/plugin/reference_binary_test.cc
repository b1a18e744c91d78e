// The topology-device-plugin executable as operators run it: a separate
// process against the in-process fake kubelet (crash, SIGTERM, flags).
#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/testing/fake_kubelet.h"

#include "build_paths.h"
#include "child_process.h"
#include "run_command.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"

extern char** environ;

namespace topology::testing {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;
using ::testing::Not;

const std::string& Binary() {
  return topology::testing::ProgramPath("topology-device-plugin");
}

// The plugin binary as a child process.
class PluginProcess : public ::topology::testing::ChildProcess {
 public:
  // With `log`, the process's stderr (its klog lines) goes to that file.
  explicit PluginProcess(std::vector<std::string> args,
                         const std::string& log = "")
      : ChildProcess(Binary(), std::move(args), log) {}
};

class PluginBinaryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(WriteMachine("dual-socket-8gpu", root_.path()));
    std::ofstream(config_) << "resources:\n"
                              "  - name: example.com/gpu\n"
                              "    selectors:\n"
                              "      - vendors: [\"10de\"]\n"
                              "        classes: [\"0302\"]\n";
  }
  std::vector<std::string> Args() const {
    return {"--config", config_.string(), "--host-root", root_.path().string(),
            "--plugin-dir", plugins_.path().string(), "--http-addr", "",
            "--rescan-interval", "0",
            // No DRA driver's claims: never the machine's.
            "--dra-claims", ""};
  }

  TempDir root_;
  TempDir plugins_;
  std::filesystem::path config_ = root_.path() / "config.yaml";
  FakeKubelet kubelet_{plugins_.path()};
};

TEST_F(PluginBinaryTest, P53_CrashMidStreamThenRestart) {
  kubelet_.Start();
  auto first_process = std::make_unique<PluginProcess>(Args());
  auto first = kubelet_.WaitForConnection("example.com/gpu", 10s);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  const auto stale = plugins_.path() / first->request().endpoint();
  first_process->Signal(SIGKILL);
  auto end = first->WaitForEnd(5s);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->ok());
  EXPECT_TRUE(std::filesystem::exists(stale));  // a crash leaves its socket
  first_process.reset();
  PluginProcess second_process(Args());
  auto second = kubelet_.WaitForConnection("example.com/gpu", 10s, 2);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(2s)));
  EXPECT_EQ(second->latest()->devices_size(), 8);
  EXPECT_FALSE(std::filesystem::exists(stale));  // cleaned at start-up
}

TEST_F(PluginBinaryTest, P54_SigtermEndsStreamsRemovesSocketExitsZero) {
  kubelet_.Start();
  const std::string log = (root_.path() / "plugin.log").string();
  PluginProcess process(Args(), log);
  auto connection = kubelet_.WaitForConnection("example.com/gpu", 10s);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  const auto socket = plugins_.path() / connection->request().endpoint();
  process.Signal(SIGTERM);
  EXPECT_EQ(process.Wait(5s), std::optional<int>(0));
  auto end = connection->WaitForEnd(2s);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->ok());
  EXPECT_FALSE(std::filesystem::exists(socket));
  // At the default verbosity the log says what was advertised, once.
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("example.com/gpu: advertising 8 device(s): "
                              "0000:1a:00.0 (numa 0), 0000:1b:00.0 (numa 0)"));
  EXPECT_THAT(text, HasSubstr("received signal 15; shutting down"));
}

// A surge rollout on one node: a second plugin process starts beside the
// first, registers, and exits. Neither deletes the other's socket (before,
// both named it after pid 1 in their containers and deleted each other's in
// a loop); the first registers again once the second is gone, so the node
// keeps its devices.
TEST_F(PluginBinaryTest, SurgeRolloutKeepsTheResourceServed) {
  kubelet_.Start();
  PluginProcess first_process(Args());
  auto first = kubelet_.WaitForConnection("example.com/gpu", 10s);
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  const auto first_socket = plugins_.path() / first->request().endpoint();
  auto second_process = std::make_unique<PluginProcess>(Args());
  auto second = kubelet_.WaitForConnection("example.com/gpu", 10s, 2);
  ASSERT_NE(second, nullptr);
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(2s)));
  EXPECT_NE(second->request().endpoint(), first->request().endpoint());
  EXPECT_EQ(kubelet_.accepted_registrations(), 2U);
  EXPECT_TRUE(std::filesystem::exists(first_socket));
  second_process->Signal(SIGTERM);
  EXPECT_EQ(second_process->Wait(5s), std::optional<int>(0));
  auto again = kubelet_.WaitForConnection("example.com/gpu", 10s, 3);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again->request().endpoint(), first->request().endpoint());
  // No tug of war: the first's comeback is the third registration, none
  // came while the second served.
  EXPECT_EQ(kubelet_.accepted_registrations(), 3U);
  ASSERT_TRUE(again->WaitForMessages(1, Scaled(2s)));
  EXPECT_EQ(again->latest()->devices_size(), 8);
}

// A client that opens an HTTP/2 connection on `socket` and then never reads
// again (a kubelet stopped in a debugger, or hung): the server's goodbye on
// shutdown is never acknowledged. The descriptor, or -1.
int StalledClient(const std::filesystem::path& socket) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = socket.string();
  if (path.size() >= sizeof(address.sun_path)) {
    close(fd);
    return -1;
  }
  std::copy(path.begin(), path.end(), address.sun_path);
  // The client preface and an empty SETTINGS frame.
  constexpr char kPreface[] =
      "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\4\0\0\0\0\0";
  constexpr size_t kPrefaceSize = sizeof(kPreface) - 1;
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  if (connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) != 0 ||
      write(fd, kPreface, kPrefaceSize) != static_cast<ssize_t>(kPrefaceSize)) {
    close(fd);
    return -1;
  }
  return fd;
}

// Every resource's server waits for its clients' goodbye at once, under one
// grace: a client that never reads on each of four sockets does not make
// the stop outlast its watchdog.
TEST_F(PluginBinaryTest, StopWithStalledClientsOnEverySocketIsPrompt) {
  std::ofstream(config_)
      << "resources:\n"
         "  - {name: example.com/gpu-a, selectors: [{pciAddresses: "
         "[\"1a:00.0\", \"1b:00.0\"]}]}\n"
         "  - {name: example.com/gpu-b, selectors: [{pciAddresses: "
         "[\"3d:00.0\", \"3e:00.0\"]}]}\n"
         "  - {name: example.com/gpu-c, selectors: [{pciAddresses: "
         "[\"9a:00.0\", \"9b:00.0\"]}]}\n"
         "  - {name: example.com/gpu-d, selectors: [{pciAddresses: "
         "[\"ba:00.0\", \"bb:00.0\"]}]}\n";
  kubelet_.Start();
  const std::string log = (root_.path() / "plugin.log").string();
  PluginProcess process(Args(), log);
  std::vector<int> stalled;
  for (const char* resource : {"example.com/gpu-a", "example.com/gpu-b",
                               "example.com/gpu-c", "example.com/gpu-d"}) {
    auto connection = kubelet_.WaitForConnection(resource, 10s);
    ASSERT_NE(connection, nullptr) << resource;
    ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s))) << resource;
    const int fd =
        StalledClient(plugins_.path() / connection->request().endpoint());
    ASSERT_GE(fd, 0) << resource;
    stalled.push_back(fd);
  }
  process.Signal(SIGTERM);
  EXPECT_EQ(process.Wait(5s), std::optional<int>(0));
  for (const int fd : stalled) close(fd);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("stopped"));
  EXPECT_THAT(text, Not(HasSubstr("did not finish")));
}

TEST_F(PluginBinaryTest, PrintMatches) {
  const CommandResult result =
      RunCommand(Binary() + " --config " + config_.string() + " --host-root " +
                 root_.path().string() + " --print-matches");
  EXPECT_EQ(result.exit_code, 0) << result.out;
  EXPECT_THAT(result.out, HasSubstr("example.com/gpu: 8 device(s)"));
  EXPECT_THAT(result.out, HasSubstr("0000:bb:00.0  10de:20b0 class 030200  "
                                    "driver nvidia  numa 1  Healthy"));
  // Flags as Go's flag package takes them (one dash, "="), as operators
  // copy them from Go plugins' manifests.
  const CommandResult go_style =
      RunCommand(Binary() + " -v=2 -config=" + config_.string() +
                 " -host-root=" + root_.path().string() + " --print-matches");
  EXPECT_EQ(go_style.exit_code, 0) << go_style.out;
  EXPECT_THAT(go_style.out, HasSubstr("example.com/gpu: 8 device(s)"));
}

TEST_F(PluginBinaryTest, BadInputIsExitTwoNamingWhat) {
  std::ofstream(config_) << "resources:\n  - name: example.com/gpu\n"
                            "    selectors: [{vendor: [\"10de\"]}]\n";
  CommandResult result = RunCommand(Binary() + " --config " + config_.string() +
                                    " --print-matches");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.out,
              HasSubstr("resources[0].selectors[0]: unknown key \"vendor\""));
  std::ofstream(config_) << "resources: [{name: example.com/gpu, "
                            "selectors: [{vendors: [\"10de\"]}]}]\n";
  result = RunCommand(Binary() + " --config " + config_.string() +
                      " --rescan-interval 5 --print-matches");
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.out, HasSubstr("--rescan-interval"));
  result = RunCommand(Binary() + " --no-such-flag");
  EXPECT_EQ(result.exit_code, 2);
}

}  // namespace
}  // namespace topology::testing
