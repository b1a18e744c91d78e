// topology-device-plugin: serves PCI devices chosen by a YAML config to the
// kubelet, with NUMA affinity and cost-based preferred allocations.
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

#include <glog/logging.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "topology/plugin/cdi.h"
#include "topology/plugin/duration.h"
#include "topology/plugin/go_flags.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/plugin/logging.h"

#include "config.h"
#include "program.h"
#include "reference_plugin.h"

namespace {

namespace dp = topology::device_plugin;
namespace plugin = topology::plugin;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int Run(int argc, char** argv) {
  CLI::App app{
      "topology-device-plugin: advertises PCI devices to the kubelet with "
      "their NUMA affinity and answers GetPreferredAllocation from PCIe "
      "costs."};
  app.set_version_flag(
      "--version", std::string("topology-device-plugin ") + TOPOLOGY_VERSION);
  std::string config_file;
  std::string plugin_dir = plugin::kDefaultPluginDir;
  std::string host_root = "/";
  std::string rescan_interval = "10s";
  std::string recovery_period = "1m";
  std::string http_addr = "127.0.0.1:8081";
  std::string cdi_dir = plugin::kDefaultCdiDir;
  std::string dra_claims =
      "/var/lib/kubelet/plugins/pci.libtopology.dev/prepared-claims.json";
  bool print_matches = false;
  bool watch_uevents = true;
  int verbosity = 0;
  app.add_option("--config", config_file, "YAML configuration file")
      ->required();
  app.add_option("--plugin-dir", plugin_dir,
                 "Directory of kubelet.sock and the plugin sockets")
      ->capture_default_str();
  app.add_option("--host-root", host_root,
                 "Directory whose sys/ (and dev/) are the host's")
      ->capture_default_str();
  app.add_option("--rescan-interval", rescan_interval,
                 "Period of the reconcile: AER counters while uevents are "
                 "watched, full rescans without (Go duration; 0 disables)")
      ->capture_default_str();
  app.add_option("--recovery-period", recovery_period,
                 "Quiet time before a faulted device is Healthy again")
      ->capture_default_str();
  app.add_option("--cdi-dir", cdi_dir,
                 "Where the CDI specs of resources with a cdiKind are written "
                 "(empty: none, and no CDI names returned for them)")
      ->capture_default_str();
  app.add_option("--http-addr", http_addr,
                 "host:port of /healthz, /readyz and /metrics (empty "
                 "disables)")
      ->capture_default_str();
  app.add_option("--dra-claims", dra_claims,
                 "topology-dra-driver's checkpoint of prepared claims on this "
                 "node: the devices its claims hold are not offered (empty: "
                 "not read)")
      ->capture_default_str();
  // Two flags rather than CLI11's "--uevents,!--no-uevents", whose help
  // shows the negated name's "{false}" for what is on by default.
  app.add_flag_callback(
      "--uevents", [&watch_uevents] { watch_uevents = true; },
      "Watch kernel uevents for hot-plug and driver changes (the default)");
  app.add_flag_callback(
      "--no-uevents", [&watch_uevents] { watch_uevents = false; },
      "Periodic full rescans instead of uevents: for a recorded --host-root, "
      "where no uevent arrives");
  app.add_flag("--print-matches", print_matches,
               "Print the devices each resource claims and exit");
  app.add_option("-v,--v", verbosity, "Log verbosity (klog -v)")
      ->capture_default_str();
  if (auto done = dp::ParseCommandLine(app, argc, argv, kExitUsage)) {
    return *done;
  }

  // Sockets get explicit modes; the umask covers the window before.
  umask(077);
  const std::string engine = plugin::ChooseGrpcPollEngine();
  plugin::InitLogging(argv[0], verbosity);
  plugin::BlockShutdownSignals();
  plugin::RaiseOpenFileLimit();
  VLOG(1) << "gRPC polling engine: " << engine;

  auto config = dp::LoadConfig(config_file);
  if (!config.ok()) {
    std::cerr << "topology-device-plugin: " << config.status().message()
              << "\n";
    return kExitUsage;
  }
  dp::PluginOptions options;
  options.config = std::move(*config);
  options.host_root = host_root;
  options.runner.plugin_dir = plugin_dir;
  // --print-matches only looks: it writes no spec.
  options.cdi_dir = print_matches ? std::string() : cdi_dir;
  options.watch_uevents = watch_uevents && !print_matches;
  options.version = TOPOLOGY_VERSION;
  options.dra_claims = dra_claims;
  for (auto [flag, text, target] :
       {std::tuple{"--rescan-interval", &rescan_interval,
                   &options.rescan_interval},
        std::tuple{"--recovery-period", &recovery_period,
                   &options.recovery_period}}) {
    auto duration = plugin::ParseDuration(*text);
    if (!duration.ok()) {
      std::cerr << "topology-device-plugin: " << flag << ": "
                << duration.status().message() << "\n";
      return kExitUsage;
    }
    *target = *duration;
  }

  auto created = dp::TopologyDevicePlugin::Create(std::move(options));
  if (!created.ok()) {
    std::cerr << "topology-device-plugin: " << created.status().ToString()
              << "\n";
    return kExitError;
  }
  dp::TopologyDevicePlugin& device_plugin = **created;
  if (print_matches) {
    std::cout << device_plugin.DescribeMatches();
    return 0;
  }
  const topology::Status started = device_plugin.Start();
  if (!started.ok()) {
    LOG(ERROR) << "cannot start: " << started.ToString();
    return kExitError;
  }
  std::unique_ptr<plugin::HttpEndpoint> http;
  if (!http_addr.empty()) {
    auto endpoint = plugin::HttpEndpoint::Start(
        http_addr,
        {.health_problem = [&] { return device_plugin.HealthProblem(); },
         .readiness_problem = [&] { return device_plugin.ReadinessProblem(); },
         .metrics = [&] { return device_plugin.MetricsText(); }});
    if (!endpoint.ok()) {
      LOG(ERROR) << endpoint.status().message();
      device_plugin.Stop();
      return kExitError;
    }
    http = std::move(*endpoint);
    LOG(INFO) << "serving /healthz, /readyz and /metrics on " << http_addr;
  }
  const int signal = plugin::WaitForShutdownSignal();
  LOG(INFO) << "received signal " << signal << "; shutting down";
  plugin::ExitIfStillRunningAfter(std::chrono::milliseconds(4500), 0);
  http.reset();
  device_plugin.Stop();
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return topology::device_plugin::RunGuarded("topology-device-plugin",
                                             [&] { return Run(argc, argv); });
}
