// The uevent monitor against the real kernel: writing "change" to a PCI
// function's uevent file makes the kernel send that uevent, which the
// monitor must deliver, also when its socket lives in a network namespace
// of its own (a pod on the pod network). Skipped where no PCI function's
// uevent file is writable (not root, read-only /sys). Then the reference
// plugin's loop while it watches uevents. These tests run one at a time:
// the kernel's uevents are the machine's.
#include "topology/plugin/uevent_monitor.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "topology/testing/fake_clock.h"
#include "topology/testing/fake_kubelet.h"

#include "reference_plugin.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "wait_for.h"

namespace topology::plugin {
namespace {

using namespace std::chrono_literals;
using ::topology::testing::Scaled;

class Events {
 public:
  void Add(const std::string& action, const std::string& devpath) {
    std::lock_guard lock(mu_);
    events_.emplace_back(action, devpath);
    changed_.notify_all();
  }
  // Waits for an event with `action` whose devpath ends in "/<name>".
  bool WaitFor(const std::string& action, const std::string& name,
               std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, timeout, [&] {
      for (const auto& [a, devpath] : events_) {
        if (a == action && devpath.ends_with("/" + name)) return true;
      }
      return false;
    });
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::pair<std::string, std::string>> events_;
};

// The first PCI function whose uevent file takes a write, or empty.
std::string WritablePciFunction() {
  std::error_code error;
  for (const auto& entry :
       std::filesystem::directory_iterator("/sys/bus/pci/devices", error)) {
    std::ofstream uevent(entry.path() / "uevent");
    if (uevent.is_open()) return entry.path().filename().string();
  }
  return "";
}

bool Trigger(const std::string& function) {
  std::ofstream uevent("/sys/bus/pci/devices/" + function + "/uevent");
  uevent << "change";
  uevent.flush();
  return static_cast<bool>(uevent);
}

TEST(UeventMonitorTest, DeliversTheKernelsPciUevents) {
  const std::string function = WritablePciFunction();
  if (function.empty()) GTEST_SKIP() << "no writable PCI uevent file";
  Events events;
  auto monitor = UeventMonitor::Start(
      [&](const std::string& action, const std::string& devpath) {
        events.Add(action, devpath);
      });
  ASSERT_TRUE(monitor.ok()) << monitor.status().ToString();
  ASSERT_TRUE(Trigger(function));
  EXPECT_TRUE(events.WaitFor("change", function, Scaled(2s))) << function;
}

TEST(UeventMonitorTest, DeliversInANetworkNamespaceOfItsOwn) {
  const std::string function = WritablePciFunction();
  if (function.empty()) GTEST_SKIP() << "no writable PCI uevent file";
  Events events;
  StatusOr<std::unique_ptr<UeventMonitor>> monitor =
      UnavailableError("not started");
  int unshare_error = 0;
  // The socket belongs to the namespace of the thread that opens it.
  std::thread([&] {
    if (unshare(CLONE_NEWNET) != 0) {
      unshare_error = errno;
      return;
    }
    monitor = UeventMonitor::Start(
        [&](const std::string& action, const std::string& devpath) {
          events.Add(action, devpath);
        });
  }).join();
  if (unshare_error != 0) GTEST_SKIP() << "cannot create a network namespace";
  ASSERT_TRUE(monitor.ok()) << monitor.status().ToString();
  ASSERT_TRUE(Trigger(function));
  EXPECT_TRUE(events.WaitFor("change", function, Scaled(2s))) << function;
}

TEST(UeventMonitorTest, OnlyTheInitialUserNamespaceGetsUevents) {
  testing::TempDir dir;
  const auto map = dir.path() / "uid_map";
  std::ofstream(map) << "         0          0 4294967295\n";
  EXPECT_TRUE(InInitialUserNamespace(map));
  std::ofstream(map) << "         0     100000      65536\n";
  EXPECT_FALSE(InInitialUserNamespace(map));
  std::ofstream(map) << "0 0 4294967295\n1 1 1\n";
  EXPECT_FALSE(InInitialUserNamespace(map));
  std::ofstream(map) << "";  // a new namespace before its map is written
  EXPECT_FALSE(InInitialUserNamespace(map));
  EXPECT_TRUE(InInitialUserNamespace(dir.path() / "missing"));
}

// In a user namespace of its own the socket would open and stay silent:
// the monitor refuses, so that the plugin falls back to rescans. The test
// runs itself again in a new user namespace that unshare(1) makes before
// it starts the program (a process with threads, as every process under
// ThreadSanitizer is, cannot enter one itself).
TEST(UeventMonitorTest, RefusesInAUserNamespaceOfItsOwn) {
  if (std::getenv("TOPOLOGY_UEVENT_IN_USER_NAMESPACE") != nullptr) {
    auto monitor =
        UeventMonitor::Start([](const std::string&, const std::string&) {});
    std::_Exit(!monitor.ok() &&
                       monitor.status().code() == StatusCode::kUnavailable
                   ? 0
                   : 1);
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string command =
      "TOPOLOGY_UEVENT_IN_USER_NAMESPACE=1 /usr/bin/unshare --user -- '" +
      self +
      "' --gtest_filter=UeventMonitorTest.RefusesInAUserNamespaceOfItsOwn "
      ">/dev/null 2>&1";
  const int status = std::system(command.c_str());
  ASSERT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << command;
}

// While uevents are watched, the periodic pass is the reconcile, and
// events of virtual devices (pods' veth pairs) start no rescan; once the
// socket is reported closed, periodic passes are full rescans again.
TEST(UeventPluginTest, PeriodicPassIsAReconcileWhileUeventsAreWatched) {
  testing::FakeClock clock;  // each Advance of the period is one pass
  testing::TempDir root;
  testing::TempDir plugins;
  ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", root.path()));
  testing::FakeKubelet kubelet(plugins.path());
  kubelet.Start();
  auto config = device_plugin::ParseConfig(
      "resources: [{name: example.com/gpu, selectors: [{vendors: "
      "[\"10de\"]}]}]",
      "t");
  ASSERT_TRUE(config.ok());
  device_plugin::PluginOptions options;
  options.config = *config;
  options.host_root = root.path();
  options.runner.plugin_dir = plugins.path();
  options.rescan_interval = 50ms;
  options.watch_uevents = true;
  options.clock = &clock;
  auto plugin = device_plugin::TopologyDevicePlugin::Create(std::move(options));
  ASSERT_TRUE(plugin.ok()) << plugin.status().ToString();
  ASSERT_TRUE((*plugin)->Start().ok());
  if (!(*plugin)->watching_uevents()) {
    GTEST_SKIP() << "no kernel uevent socket here";
  }
  const auto counter = [&](std::string_view name) {
    const std::string text = (*plugin)->MetricsText();
    const size_t at = text.find(std::string("\n") + std::string(name) + " ");
    return at == std::string::npos
               ? -1
               : int64_t{std::stoll(text.substr(at + name.size() + 2))};
  };
  const int64_t rescans = counter("topology_device_plugin_rescans_total");
  const int64_t reconciles = counter("topology_device_plugin_reconciles_total");
  (*plugin)->NotifyUevent("add", "/devices/virtual/net/veth1234");
  // Four periods, one at a time: the loop waits on the clock (its next
  // pass set) before time moves, and `name` counts each pass.
  const auto four_passes = [&](std::string_view name, int64_t from) {
    for (int i = 1; i <= 4; ++i) {
      if (!testing::WaitFor([&] { return clock.waiters() > 0; }, 5s)) {
        return false;
      }
      clock.Advance(50ms);
      if (!testing::WaitFor([&] { return counter(name) == from + i; }, 5s)) {
        return false;
      }
    }
    return true;
  };
  ASSERT_TRUE(
      four_passes("topology_device_plugin_reconciles_total", reconciles));
  EXPECT_EQ(counter("topology_device_plugin_rescans_total"), rescans);
  (*plugin)->NotifyUevent("closed", "");
  EXPECT_FALSE((*plugin)->watching_uevents());
  ASSERT_TRUE(four_passes("topology_device_plugin_rescans_total", rescans));
  EXPECT_EQ(counter("topology_device_plugin_reconciles_total"), reconciles + 4);
  (*plugin)->Stop();
}

}  // namespace
}  // namespace topology::plugin
