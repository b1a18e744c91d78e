// Soak (label "long", not in CI): 1,000 plugin restarts and 10,000
// admissions with releases and random restarts of the manager itself,
// against real sockets. Descriptors, threads and resident memory stay flat;
// no device is ever held by two pods.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"

#include "fake_plugin.h"
#include "host_manager.h"
#include "host_start.h"
#include "seeded_random.h"
#include "status_matchers.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::host {
namespace {

using namespace std::chrono_literals;
using ::topology::testing::FakePlugin;
using ::topology::testing::IsOk;
using ::topology::testing::MakeDevice;
using ::topology::testing::WaitFor;

constexpr char kGpu[] = "example.com/gpu";

size_t Entries(const char* dir) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    (void)entry;
    ++n;
  }
  return n;
}

size_t ResidentKiB() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("VmRSS:")) return std::stoul(line.substr(6));
  }
  return 0;
}

TEST(SoakTest, PluginRestartsAdmissionsAndManagerRestarts) {
  testing::TempDir root;
  testing::TempDir dir;
  ASSERT_TRUE(testing::WriteMachine("dual-socket-8gpu", root.path()));
  DiscoveryOptions options;
  options.host_root = root.path();
  auto topology = Discover(options);
  ASSERT_THAT(topology.status(), IsOk());
  HostConfig config;
  config.plugin_dir = dir.path() / "plugins";
  config.control_socket.clear();
  config.topology.policy = manager::kPolicySingleNumaNode;
  config.grace_period = 2s;
  config.dial_timeout = 2s;
  config.rpc_timeout = 2s;
  auto start_host = [&] {
    auto host = HostManager::Create(config, *topology);
    EXPECT_THAT(host.status(), IsOk());
    EXPECT_THAT(testing::StartHost(**host), IsOk());
    return std::move(*host);
  };
  std::unique_ptr<HostManager> host = start_host();
  std::vector<v1beta1::Device> devices;
  devices.reserve(8);
  for (int i = 0; i < 8; ++i) {
    devices.push_back(MakeDevice("gpu-" + std::to_string(i), {i / 4}));
  }
  testing::SeededRandom rng(
      static_cast<uint64_t>(testing::EnvOr("TOPOLOGY_SEED", 1111)));
  std::set<std::string> held_pods;
  std::unique_ptr<FakePlugin> plugin;
  size_t fds_at_start = 0;
  size_t threads_at_start = 0;
  [[maybe_unused]] size_t rss_at_start = 0;  // unread under ASan
  int pod_number = 0;
  for (int restart = 0; restart < 1000; ++restart) {
    // The plugin restarts on a new socket (the old one exits first).
    if (plugin) plugin->Stop();
    plugin = std::make_unique<FakePlugin>(
        config.plugin_dir, kGpu, "p-" + std::to_string(restart) + ".sock");
    plugin->SetDevices(devices);
    plugin->Start();
    ASSERT_TRUE(plugin->Register().ok()) << restart;
    EXPECT_TRUE(WaitFor([&] {
      return host->Resources()[kGpu].allocatable == 8;
    })) << restart;
    // Now and then the manager itself restarts and restores.
    if (restart % 97 == 96) {
      host.reset();
      host = start_host();
      // The restart deleted the plugin's socket: it serves a new one.
      plugin->Stop();
      plugin = std::make_unique<FakePlugin>(
          config.plugin_dir, kGpu, "q-" + std::to_string(restart) + ".sock");
      plugin->SetDevices(devices);
      plugin->Start();
      ASSERT_TRUE(plugin->Register().ok());
      EXPECT_TRUE(WaitFor([&] {
        return host->Resources()[kGpu].allocatable == 8;
      })) << restart;
    }
    for (int a = 0; a < 10; ++a) {
      if (!held_pods.empty() && (rng.Chance(33) || held_pods.size() > 5)) {
        auto it = held_pods.begin();
        std::advance(it,
                     rng.Uniform(0, static_cast<int>(held_pods.size()) - 1));
        EXPECT_THAT(host->Release(*it), IsOk());
        held_pods.erase(it);
      }
      manager::Pod pod;
      pod.uid = "pod-" + std::to_string(pod_number++);
      pod.name = pod.uid;
      pod.containers.push_back(
          {"main", {{kGpu, static_cast<int64_t>(rng.Uniform(1, 2))}}, false});
      if (host->Admit(pod, false).admitted) held_pods.insert(pod.uid);
    }
    // Nothing double-booked, ever.
    std::map<std::string, std::string> owner;
    // Held by name: a range over a member of a temporary would outlive it.
    const auto status = host->StatusJson();
    for (const auto& p : status["pods"]) {
      for (const auto& c : p["containers"]) {
        if (!c["devices"].contains(kGpu)) continue;
        for (const auto& id : c["devices"][kGpu]) {
          auto [it, fresh] =
              owner.emplace(id.get<std::string>(), p["uid"].get<std::string>());
          ASSERT_TRUE(fresh)
              << id << " held by " << it->second << " and " << p["uid"];
        }
      }
    }
    if (restart == 50) {
      fds_at_start = Entries("/proc/self/fd");
      threads_at_start = Entries("/proc/self/task");
      rss_at_start = ResidentKiB();
    }
  }
  plugin->Stop();
  plugin.reset();
  // The stopped plugin's descriptors and threads go.
  (void)::topology::testing::WaitFor(
      [&] {
        return Entries("/proc/self/fd") <= fds_at_start + 16 &&
               Entries("/proc/self/task") <= threads_at_start + 8;
      },
      5s);
  EXPECT_LE(Entries("/proc/self/fd"), fds_at_start + 16);
  EXPECT_LE(Entries("/proc/self/task"), threads_at_start + 8);
#ifndef __SANITIZE_ADDRESS__
  // (AddressSanitizer keeps freed memory in quarantine, 256 MiB by default:
  // there the resident size says nothing about leaks, which it reports
  // itself.)
  EXPECT_LE(ResidentKiB(), rss_at_start + uint64_t{32} * 1024);
#endif
}

}  // namespace
}  // namespace topology::host
