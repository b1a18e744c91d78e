// topology-device-plugin: serves PCI devices chosen by a YAML config to the
// kubelet, with NUMA affinity and cost-based preferred allocations.
#include <iostream>
#include <memory>
#include <string>
#include <utility>

#include <glog/logging.h>

#include <CLI/CLI.hpp>

#include "topology/common/daemon.h"
#include "topology/plugin/http_endpoint.h"

#include "config.h"
#include "plugin_options.h"
#include "program.h"
#include "reference_plugin.h"

namespace {

namespace dp = topology::device_plugin;
namespace common = topology::common;
namespace plugin = topology::plugin;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int Usage(const std::string& what) {
  std::cerr << "topology-device-plugin: " << what << "\n";
  return kExitUsage;
}

int Run(const dp::DevicePluginOptions& flags, const char* argv0) {
  const common::DaemonProcess process{.verbosity = flags.verbosity};
  common::SetUpDaemon(argv0, process);
  auto config = dp::LoadConfig(flags.config_file);
  if (!config.ok()) return Usage(config.status().message());
  dp::PluginOptions options = flags.ToPluginOptions(std::move(*config));
  options.version = TOPOLOGY_VERSION;
  auto created = dp::TopologyDevicePlugin::Create(std::move(options));
  if (!created.ok()) {
    std::cerr << "topology-device-plugin: " << created.status().ToString()
              << "\n";
    return kExitError;
  }
  dp::TopologyDevicePlugin& device_plugin = **created;
  if (flags.print_matches) {
    std::cout << device_plugin.DescribeMatches();
    return 0;
  }
  const topology::Status started = device_plugin.Start();
  if (!started.ok()) {
    LOG(ERROR) << "cannot start: " << started.ToString();
    return kExitError;
  }
  std::unique_ptr<plugin::HttpEndpoint> http;
  if (!flags.http_addr.empty()) {
    auto endpoint = plugin::HttpEndpoint::Start(
        flags.http_addr,
        {.health_problem = [&] { return device_plugin.HealthProblem(); },
         .readiness_problem = [&] { return device_plugin.ReadinessProblem(); },
         .metrics = [&] { return device_plugin.MetricsText(); }});
    if (!endpoint.ok()) {
      LOG(ERROR) << endpoint.status().message();
      device_plugin.Stop();
      return kExitError;
    }
    http = std::move(*endpoint);
    LOG(INFO) << "serving /healthz, /readyz and /metrics on "
              << flags.http_addr;
  }
  common::AwaitShutdown(process);
  http.reset();
  device_plugin.Stop();
  LOG(INFO) << "stopped";
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "topology-device-plugin: advertises PCI devices to the kubelet with "
      "their NUMA affinity and answers GetPreferredAllocation from PCIe "
      "costs."};
  app.set_version_flag(
      "--version", std::string("topology-device-plugin ") + TOPOLOGY_VERSION);
  return dp::ParseCompleteAndRun<dp::DevicePluginOptions>(
      "topology-device-plugin", app, argc, argv, kExitUsage, &Run);
}

}  // namespace

int main(int argc, char** argv) {
  return topology::device_plugin::RunGuarded("topology-device-plugin",
                                             [&] { return Main(argc, argv); });
}
