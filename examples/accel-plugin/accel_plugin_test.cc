// accel-plugin's tests, written with libtopology's test kit only (the
// installed libtopology::testing): a generated two-socket machine with
// accelerators, the plugin program started on it as on a node, and a fake
// kubelet over real unix sockets that calls it as the kubelet does.
// docs/plugin-author-guide.md quotes the parts between the "guide:" markers.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

// guide:test_includes
#include "topology/testing/fake_kubelet.h"  // FakeKubelet, PluginConnection
#include "topology/testing/machines.h"      // WriteMachine
// guide:end

namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;
using topology::testing::FakeKubelet;
using topology::testing::PluginConnection;

// The program under test, started with arguments; SIGTERM at the end (the
// plugin must stop with exit 0 within 5 s, as under a kubelet).
class Process {
 public:
  explicit Process(const std::vector<std::string>& args) {
    std::vector<char*> argv;
    for (const std::string& arg : args) {
      argv.push_back(const_cast<char*>(arg.c_str()));
    }
    argv.push_back(nullptr);
    if (posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ) !=
        0) {
      pid_ = -1;
    }
  }
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }

  bool started() const { return pid_ > 0; }

  // SIGTERM, then the exit status (-1 if it did not exit within `timeout`).
  int Terminate(std::chrono::milliseconds timeout) {
    kill(pid_, SIGTERM);
    for (auto end = std::chrono::steady_clock::now() + timeout;
         std::chrono::steady_clock::now() < end;
         std::this_thread::sleep_for(10ms)) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
      }
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

// guide:test_fixture
// Each test: a fresh machine with 4 accelerators on each of two NUMA nodes
// (0000:1a-1d:00.0 on node 0, 0000:9a-9d:00.0 on node 1), a fake kubelet in
// its own plugin directory, and the plugin started on both.
class AccelPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Unix socket paths are short (108 bytes): a directory below /tmp.
    char dir[] = "/tmp/accel.XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    ASSERT_TRUE(
        topology::testing::WriteMachine("dual-socket-accel", dir_ / "machine"));
    fs::create_directories(dir_ / "dp");
    kubelet_ = std::make_unique<FakeKubelet>(dir_ / "dp");
    kubelet_->Start();
    plugin_ = std::make_unique<Process>(std::vector<std::string>{
        ACCEL_PLUGIN, "--resource", "example.com/accel", "--class", "1200",
        "--host-root", dir_ / "machine", "--plugin-dir", dir_ / "dp"});
    ASSERT_TRUE(plugin_->started());
    connection_ = kubelet_->WaitForConnection("example.com/accel", 10s);
    ASSERT_NE(connection_, nullptr) << "the plugin did not register";
    // The kubelet allocates only what a ListAndWatch message offered.
    ASSERT_TRUE(connection_->WaitForMessages(1, 10s)) << "no device list";
  }

  void TearDown() override {
    if (plugin_) {
      EXPECT_EQ(plugin_->Terminate(5s), 0);
    }
    connection_.reset();
    kubelet_.reset();
    fs::remove_all(dir_);
  }

  fs::path dir_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<Process> plugin_;
  std::shared_ptr<PluginConnection> connection_;
};
// guide:end

// guide:test_list
TEST_F(AccelPluginTest, AdvertisesEachAcceleratorWithItsNumaNode) {
  auto list = connection_->WaitForList(
      [](const auto& response) { return response.devices_size() == 8; }, 10s);
  ASSERT_TRUE(list.has_value()) << "8 accelerators were not advertised";
  for (const auto& device : list->devices()) {
    // Buses 0x1a-0x1d are on node 0, 0x9a-0x9d on node 1.
    const int expected = device.id().substr(5, 1) == "9" ? 1 : 0;
    ASSERT_EQ(device.topology().nodes_size(), 1) << device.id();
    EXPECT_EQ(device.topology().nodes(0).id(), expected) << device.id();
    EXPECT_EQ(device.health(), "Healthy") << device.id();
  }
}
// guide:end

// guide:test_allocate
TEST_F(AccelPluginTest, PrefersTheNodeOfTheDeviceItMustInclude) {
  std::vector<std::string> all;
  for (const char* bus : {"1a", "1b", "1c", "1d", "9a", "9b", "9c", "9d"}) {
    all.push_back(std::string("0000:") + bus + ":00.0");
  }
  std::vector<std::string> chosen;
  const grpc::Status status =
      connection_->GetPreferredAllocation(all, {"0000:9c:00.0"}, 2, &chosen);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(chosen.size(), 2U);
  EXPECT_TRUE(chosen[0] == "0000:9c:00.0" || chosen[1] == "0000:9c:00.0");
  for (const std::string& id : chosen) {
    EXPECT_EQ(id.substr(5, 1), "9") << "not on node 1: " << id;
  }
}

TEST_F(AccelPluginTest, AllocateHandsOutTheAddresses) {
  v1beta1::ContainerAllocateResponse response;
  const grpc::Status status =
      connection_->Allocate({"0000:1a:00.0", "0000:1b:00.0"}, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.envs().at("ACCEL_VISIBLE_DEVICES"),
            "0000:1a:00.0,0000:1b:00.0");
  ASSERT_EQ(response.cdi_devices_size(), 2);
  EXPECT_EQ(response.cdi_devices(0).name(), "example.com/accel=0000:1a:00.0");
}
// guide:end

// guide:test_health
TEST_F(AccelPluginTest, AnUnboundDriverMakesTheDeviceUnhealthy) {
  // What the kernel shows when the driver lets go of a device.
  fs::remove(dir_ / "machine/sys/bus/pci/devices/0000:1b:00.0/driver");
  auto list = connection_->WaitForList(
      [](const auto& response) {
        for (const auto& device : response.devices()) {
          if (device.id() == "0000:1b:00.0") {
            return device.health() == "Unhealthy";
          }
        }
        return false;
      },
      15s);
  EXPECT_TRUE(list.has_value()) << "0000:1b:00.0 stayed Healthy";
}

TEST_F(AccelPluginTest, RegistersAgainWhenTheKubeletRestarts) {
  kubelet_->Restart(100ms);  // deletes every socket, as a kubelet does
  connection_ = kubelet_->WaitForConnection("example.com/accel", 15s,
                                            /*min_accepted=*/2);
  ASSERT_NE(connection_, nullptr) << "no registration after the restart";
  EXPECT_TRUE(connection_->WaitForMessages(1, 5s));
}
// guide:end

}  // namespace
