// topology-nrt-exporter: this node's NodeResourceTopology, kept fresh
// (exporter.h). --once prints the object once and exits.
#include <cstdlib>
#include <iostream>

#include <glog/logging.h>

#include <CLI/CLI.hpp>

#include "topology/common/daemon.h"
#include "topology/common/duration.h"
#include "topology/common/pod_fingerprint.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/plugin/http_endpoint.h"

#include "exporter.h"

namespace {

namespace nrt = topology::nrt;
namespace dra = topology::draplugin;
namespace common = topology::common;

constexpr int kExitUsage = 2;
constexpr int kExitError = 1;

struct Flags {
  std::string node;
  std::string kubeconfig;
  std::string host_root = "/";
  std::string kubelet_root = "/var/lib/kubelet";
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string pod_resources_socket;
  std::string kubelet_config;
  bool kubelet_configz = false;
  std::string method = common::kPodFingerprintMethodAll;
  bool no_dra = false;
  std::string resync = "60s";
  std::string min_interval = "100ms";
  std::string kubelet_settle = "10s";
  bool once = false;
  std::string http_addr;
  int verbosity = 0;
};

int Usage(std::string_view message) {
  std::cerr << "topology-nrt-exporter: " << message << "\n";
  return kExitUsage;
}

int Run(const Flags& flags) {
  nrt::ExporterOptions options;
  options.node_name = flags.node;
  if (options.node_name.empty()) {
    const char* env = std::getenv("NODE_NAME");
    if (env != nullptr) options.node_name = env;
  }
  if (options.node_name.empty())
    return Usage("--node-name or NODE_NAME is needed");
  options.host_root = flags.host_root;
  options.kubelet_root = flags.kubelet_root;
  options.device_plugin_dir = flags.device_plugin_dir;
  options.pod_resources_socket = flags.pod_resources_socket;
  options.kubelet_config = flags.kubelet_config;
  options.kubelet_configz = flags.kubelet_configz;
  options.dra = !flags.no_dra;
  options.release_startup_code = true;
  if (flags.method != common::kPodFingerprintMethodAll &&
      flags.method != common::kPodFingerprintMethodExclusive) {
    return Usage("--pods-fingerprint-method: \"" + flags.method +
                 "\" is neither \"all\" nor \"with-exclusive-resources\"");
  }
  options.fingerprint_method = flags.method;
  for (const auto& [flag, text, out] :
       {std::tuple{"--resync-period", &flags.resync, &options.resync},
        std::tuple{"--min-interval", &flags.min_interval,
                   &options.min_interval},
        std::tuple{"--kubelet-settle-period", &flags.kubelet_settle,
                   &options.kubelet_settle}}) {
    auto parsed = common::ParseDuration(*text);
    if (!parsed.ok() || parsed->count() <= 0) {
      return Usage(std::string(flag) + ": \"" + *text +
                   "\" is not a positive duration");
    }
    *out = std::chrono::duration_cast<std::chrono::milliseconds>(*parsed);
  }

  std::unique_ptr<dra::KubeClient> client;
  if (!flags.once || options.dra || options.kubelet_configz ||
      !flags.kubeconfig.empty()) {
    auto credentials = flags.kubeconfig.empty()
                           ? dra::InClusterConfig()
                           : dra::LoadKubeConfig(flags.kubeconfig);
    if (!credentials.ok()) {
      if (!flags.once) return Usage(credentials.status().message());
      LOG(WARNING) << "no API server (" << credentials.status().message()
                   << "): DRA devices are not counted";
    } else {
      auto created = dra::KubeClient::Create(std::move(*credentials));
      if (!created.ok()) return Usage(created.status().message());
      client = std::move(*created);
    }
  }
  auto exporter = nrt::Exporter::Create(options, client.get());
  if (!exporter.ok()) {
    std::cerr << "topology-nrt-exporter: " << exporter.status().message()
              << "\n";
    return kExitError;
  }
  if (flags.once) {
    auto built = (*exporter)->BuildNow();
    if (!built.ok()) {
      std::cerr << "topology-nrt-exporter: " << built.status().message()
                << "\n";
      return kExitError;
    }
    for (const std::string& note : built->notes) std::cerr << note << "\n";
    std::cout << nrt::Render(built->object).dump(2) << "\n";
    return std::cout.flush() ? 0 : kExitError;
  }
  if (auto started = (*exporter)->Start(); !started.ok()) {
    std::cerr << "topology-nrt-exporter: " << started.message() << "\n";
    return kExitError;
  }
  std::unique_ptr<topology::plugin::HttpEndpoint> http;
  if (!flags.http_addr.empty()) {
    nrt::Exporter* e = exporter->get();
    auto served = topology::plugin::HttpEndpoint::Start(
        flags.http_addr,
        {.health_problem = [e] { return e->HealthProblem(); },
         .readiness_problem = [e] { return e->ReadinessProblem(); },
         .metrics = [e] { return e->Metrics(); },
         .server_name = "topology-nrt-exporter"});
    if (!served.ok()) {
      std::cerr << "topology-nrt-exporter: --http-addr: "
                << served.status().message() << "\n";
      return kExitError;
    }
    http = std::move(*served);
  }
  LOG(INFO) << "exporting the NodeResourceTopology of " << options.node_name;
  const common::DaemonProcess process{.verbosity = flags.verbosity};
  common::AwaitShutdown(process);
  http.reset();
  (*exporter)->Stop();
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "This node's NodeResourceTopology (topology.node.k8s.io/v1alpha2) for "
      "topology-aware schedulers: its NUMA nodes with their costs, CPUs, "
      "memory, huge pages, device plugin resources and DRA device classes, "
      "from the kubelet's pod resources API and state, kept fresh."};
  app.set_version_flag(
      "--version", std::string("topology-nrt-exporter ") + TOPOLOGY_VERSION);
  Flags flags;
  app.add_option("--node-name", flags.node,
                 "This node's name (default: NODE_NAME)");
  app.add_option("--kubeconfig", flags.kubeconfig,
                 "kubeconfig file (default: in-cluster credentials)");
  app.add_option("--host-root", flags.host_root,
                 "Directory whose sys/ is the host's")
      ->capture_default_str();
  app.add_option("--kubelet-root", flags.kubelet_root,
                 "The kubelet's --root-dir (its state files, pods, "
                 "pod-resources/kubelet.sock, plugins_registry)")
      ->capture_default_str();
  app.add_option("--device-plugin-dir", flags.device_plugin_dir,
                 "The device manager's directory (the kubelet keeps it here "
                 "whatever its --root-dir)")
      ->capture_default_str();
  app.add_option("--pod-resources-socket", flags.pod_resources_socket,
                 "The kubelet's pod resources socket (default: <kubelet "
                 "root>/pod-resources/kubelet.sock)");
  app.add_option("--kubelet-config", flags.kubelet_config,
                 "The kubelet's configuration file (KubeletConfiguration)");
  app.add_flag("--kubelet-configz", flags.kubelet_configz,
               "Read the kubelet's configuration from its configz, through "
               "the API server (nodes/proxy)");
  app.add_option("--pods-fingerprint-method", flags.method,
                 "Pods the fingerprint covers: all, or "
                 "with-exclusive-resources (as the scheduler is set)")
      ->capture_default_str();
  app.add_flag("--no-dra", flags.no_dra,
               "Leave DRA devices out (no ResourceSlices or DeviceClasses "
               "read)");
  app.add_option("--resync-period", flags.resync,
                 "A round at least this often (Go duration)")
      ->capture_default_str();
  app.add_option("--min-interval", flags.min_interval,
                 "At most one round this often (Go duration)")
      ->capture_default_str();
  app.add_option("--kubelet-settle-period", flags.kubelet_settle,
                 "After the kubelet restarted, nothing is written for this "
                 "long (Go duration): it lists its pods once it has them back")
      ->capture_default_str();
  app.add_flag("--once", flags.once,
               "Print the object (JSON) once and exit; nothing is written");
  app.add_option("--http-addr", flags.http_addr,
                 "host:port of /healthz, /readyz and /metrics (empty: none)");
  app.add_option("-v,--v", flags.verbosity, "Log verbosity (klog -v)");
  CLI11_PARSE(app, argc, argv);
  // A round's answers are megabytes while parsed: given back whole.
  const common::DaemonProcess process{.verbosity = flags.verbosity,
                                      .malloc_release_threshold = 128 << 10};
  common::SetUpDaemon(argv[0], process);
  return Run(flags);
}
