// topology-dra-driver: the reference DRA driver. The same configuration and
// discovery as topology-device-plugin, published as this node's pool of
// ResourceSlices; claims prepared with the device plugin's container edits
// as one CDI spec each (dra_driver.h), on the DRA framework.
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <glog/logging.h>
#include <malloc.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/plugin/duration.h"
#include "topology/plugin/go_flags.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/plugin/logging.h"
#include "topology/plugin/plugin_runner.h"
#include "topology/plugin/rescan_loop.h"
#include "topology/plugin/uevent_monitor.h"
#include "topology/thread_annotations.h"

#include "config.h"
#include "dra_driver.h"
#include "kubelet_checkpoint.h"
#include "kubelet_names.h"
#include "pod_resources.h"
#include "program.h"
#include "reference_plugin.h"
#include "safe_file.h"
#include "text_util.h"

namespace {

namespace dp = topology::device_plugin;
namespace dra = topology::draplugin;
namespace plugin = topology::plugin;

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
// Sent with each device's health: the kubelet takes Unknown after this long
// without a report.
constexpr std::chrono::seconds kHealthTimeout(60);
// A burst of uevents (a PF's VFs created) is one rescan.
constexpr std::chrono::milliseconds kUeventDebounce(500);

// The inventory in force, replaced by each rescan.
class Inventory {
 public:
  explicit Inventory(std::shared_ptr<const dp::Snapshot> snapshot)
      : snapshot_(std::move(snapshot)) {}
  std::shared_ptr<const dp::Snapshot> get() const {
    topology::MutexLock lock(mu_);
    return snapshot_;
  }
  void set(std::shared_ptr<const dp::Snapshot> snapshot) {
    topology::MutexLock lock(mu_);
    snapshot_ = std::move(snapshot);
  }

 private:
  mutable topology::Mutex mu_;
  std::shared_ptr<const dp::Snapshot> snapshot_ TOPOLOGY_GUARDED_BY(mu_);
};

int Run(int argc, char** argv) {
  CLI::App app{
      "The reference DRA driver: this node's PCI devices as ResourceSlices "
      "with their NUMA and PCIe topology, claims prepared through CDI."};
  app.set_version_flag("--version",
                       std::string("topology-dra-driver ") + TOPOLOGY_VERSION);
  std::string driver = dp::kDefaultDraDriverName;
  std::string node;
  std::string config_file;
  std::string host_root = "/";
  std::string kubeconfig;
  std::string kubelet_root = "/var/lib/kubelet";
  // The kubelet's device manager keeps its socket and checkpoint here
  // whatever its --root-dir (pluginapi.DevicePluginPath).
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string registry_dir;
  std::string plugin_dir;
  std::string cdi_dir = "/var/run/cdi";
  std::string state_dir;
  std::string http_addr;
  std::string numa_form = "scalar";
  std::string rescan_interval = "30s";
  bool watch_uevents = true;
  std::string health_interval = "10s";
  std::string recovery_period = "1m";
  std::string device_plugin_config;
  std::string pod_uid;
  bool print_device_classes = false;
  int verbosity = 0;
  app.add_option("--driver-name", driver, "DRA driver name (a DNS subdomain)")
      ->capture_default_str();
  app.add_option("--node-name", node, "This node's name (default: NODE_NAME)");
  app.add_option("--config", config_file,
                 "YAML configuration file (topology-device-plugin's)")
      ->required();
  app.add_option("--host-root", host_root, "Directory whose sys/ is the host's")
      ->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster credentials)");
  app.add_option("--kubelet-root", kubelet_root,
                 "The kubelet's --root-dir: the registration and plugin "
                 "directories default below it")
      ->capture_default_str();
  app.add_option("--device-plugin-dir", device_plugin_dir,
                 "The kubelet device manager's directory, whose checkpoint "
                 "says which devices pods hold through device plugins (the "
                 "kubelet keeps it here whatever its --root-dir)")
      ->capture_default_str();
  app.add_option("--registry-dir", registry_dir,
                 "The kubelet's plugin registration directory (default: "
                 "<kubelet root>/plugins_registry)");
  app.add_option("--plugin-dir", plugin_dir,
                 "Where dra.sock goes (default: <kubelet root>/plugins/"
                 "<driver>)");
  app.add_option("--cdi-dir", cdi_dir, "Where claims' CDI specs are written")
      ->capture_default_str();
  app.add_option("--state-dir", state_dir,
                 "Where the checkpoint of prepared claims goes (default: the "
                 "plugin directory)");
  app.add_option("--http-addr", http_addr,
                 "host:port of /healthz, /readyz and /metrics (empty "
                 "disables)");
  app.add_option("--numa-node-form", numa_form,
                 "resource.kubernetes.io/numaNode as an int (scalar) or the "
                 "device's node and the nearest ones as a list of ints (list: "
                 "clusters with the DRAListTypeAttributes gate)")
      ->check(CLI::IsMember({"scalar", "list"}))
      ->capture_default_str();
  app.add_option("--rescan-interval", rescan_interval,
                 "How often the devices are discovered again while no "
                 "uevents are watched (Go duration; 0 disables)")
      ->capture_default_str();
  app.add_flag("--uevents,!--no-uevents", watch_uevents,
               "Rescan on PCI uevents (else every --rescan-interval)")
      ->capture_default_str();
  app.add_option("--health-interval", health_interval,
                 "How often AER counters and unhealthy devices are read "
                 "again (Go duration)")
      ->capture_default_str();
  app.add_option("--recovery-period", recovery_period,
                 "Quiet time before a faulted device is Healthy again")
      ->capture_default_str();
  app.add_option("--device-plugin-config", device_plugin_config,
                 "topology-device-plugin's configuration on this node: the "
                 "driver refuses to start when both select a device");
  app.add_option("--pod-uid", pod_uid,
                 "This pod's UID (default: POD_UID, from the downward API): "
                 "per-pod socket names, so that two instances on a node both "
                 "serve during a rolling update (kubelet 1.33+)");
  app.add_flag("--print-device-classes", print_device_classes,
               "Print the DeviceClasses of --config's resources (YAML) and "
               "exit");
  app.add_option("-v,--v", verbosity, "Log verbosity (klog -v)")
      ->capture_default_str();
  if (auto done = dp::ParseCommandLine(app, argc, argv, kExitUsage)) {
    return *done;
  }
  const auto usage = [](const std::string& what) {
    std::cerr << "topology-dra-driver: " << what << "\n";
    return kExitUsage;
  };
  if (print_device_classes) {
    auto config = dp::LoadConfig(config_file);
    if (!config.ok()) return usage(config.status().message());
    std::cout << dp::DeviceClassesYaml(*config, driver);
    return std::cout.flush() ? 0 : kExitError;
  }
  if (node.empty()) {
    if (const char* env = std::getenv("NODE_NAME"); env != nullptr) node = env;
  }
  if (node.empty()) return usage("--node-name or NODE_NAME is needed");
  if (pod_uid.empty()) {
    if (const char* env = std::getenv("POD_UID"); env != nullptr) {
      pod_uid = env;
    }
  }
  if (kubelet_root.empty() || kubelet_root.front() != '/') {
    return usage("--kubelet-root must be an absolute path");
  }
  if (device_plugin_dir.empty() || device_plugin_dir.front() != '/') {
    return usage("--device-plugin-dir must be an absolute path");
  }
  const std::filesystem::path kubelet_dir(kubelet_root);
  if (registry_dir.empty()) {
    registry_dir = (kubelet_dir / "plugins_registry").string();
  }
  if (plugin_dir.empty())
    plugin_dir = (kubelet_dir / "plugins" / driver).string();
  auto interval = plugin::ParseDuration(rescan_interval);
  if (!interval.ok()) {
    return usage("--rescan-interval: " + interval.status().message());
  }
  auto health_every = plugin::ParseDuration(health_interval);
  if (!health_every.ok() || health_every->count() <= 0) {
    return usage("--health-interval: " +
                 (health_every.ok() ? std::string("must be positive")
                                    : health_every.status().message()));
  }
  auto recovery = plugin::ParseDuration(recovery_period);
  if (!recovery.ok()) {
    return usage("--recovery-period: " + recovery.status().message());
  }

  umask(077);
  // As the device plugin: gRPC's poll engine (docs/performance.md).
  const std::string engine = plugin::ChooseGrpcPollEngine();
  plugin::InitLogging(argv[0], verbosity);
  VLOG(1) << "gRPC polling engine: " << engine;
  plugin::BlockShutdownSignals();
  auto config = dp::LoadConfig(config_file);
  if (!config.ok()) return usage(config.status().message());
  auto credentials = kubeconfig.empty() ? dra::InClusterConfig()
                                        : dra::LoadKubeConfig(kubeconfig);
  if (!credentials.ok()) return usage(credentials.status().message());
  auto client = dra::KubeClient::Create(std::move(*credentials));
  if (!client.ok()) return usage(client.status().message());
  // The credentials and the API before anything is served or published: a
  // token the server refuses, or a server without resource.k8s.io/v1, ends
  // the start with the reason instead of a refusal logged at every resync.
  // A server that does not answer yet is not fatal: publishing retries.
  const std::string credentials_source =
      kubeconfig.empty() ? std::string("the pod's service account")
                         : "--kubeconfig " + kubeconfig;
  if (auto answer = (*client)->Request(
          "GET", "/apis/resource.k8s.io/v1/resourceslices?limit=1");
      !answer.ok()) {
    LOG(WARNING) << "the API server did not answer: "
                 << answer.status().message() << "; publishing will retry";
  } else if (answer->status == 401 || answer->status == 403) {
    LOG(ERROR) << "the API server refuses the credentials of "
               << credentials_source << " (HTTP " << answer->status
               << " listing resourceslices: "
               << topology::text::Quoted(answer->body, 200)
               << "): check the ServiceAccount and its ClusterRoleBinding";
    return kExitError;
  } else if (answer->status == 404) {
    LOG(ERROR) << "the API server does not serve resource.k8s.io/v1 "
                  "ResourceSlices (Kubernetes 1.34 and later, with DRA)";
    return kExitError;
  }

  // Runtimes read the specs: the directory is made readable to all (the
  // specs themselves are written 0644).
  if (std::error_code error;
      !std::filesystem::is_directory(cdi_dir) &&
      (!std::filesystem::create_directories(cdi_dir, error) ||
       chmod(cdi_dir.c_str(), 0755) != 0)) {
    LOG(ERROR) << "cannot create the CDI directory " << cdi_dir
               << (error ? ": " + error.message() : "");
    return kExitError;
  }
  // Temporary files of this driver's spec writes that a kill interrupted.
  if (const size_t removed =
          topology::files::RemoveTemporaryLeftoversIn(cdi_dir, driver + "-");
      removed > 0) {
    LOG(INFO) << "removed " << removed << " temporary CDI spec file(s) of "
              << driver << " that an interrupted write left in " << cdi_dir;
  }
  const auto form = numa_form == "list"
                        ? topology::dra::NumaAttributeForm::kList
                        : topology::dra::NumaAttributeForm::kScalar;
  auto sysfs = topology::NewHostRootReader(host_root);
  auto discovered =
      dp::DiscoverSnapshot(*config, host_root, *sysfs, cdi_dir, {});
  if (!discovered.ok()) {
    LOG(ERROR) << "discovery: " << discovered.status().message();
    return kExitError;
  }
  // One device, one path: the device plugin's configuration on this node
  // must not select a device this one selects.
  std::optional<dp::Config> plugin_config;
  const auto overlap = [&](const dp::Snapshot& snapshot) {
    if (!plugin_config) return topology::OkStatus();
    return dp::CheckNoOverlap(*config, snapshot, *plugin_config, *sysfs);
  };
  if (!device_plugin_config.empty()) {
    auto loaded = dp::LoadConfig(device_plugin_config);
    if (!loaded.ok()) {
      return usage("--device-plugin-config: " + loaded.status().message());
    }
    plugin_config = std::move(*loaded);
    if (auto status = overlap(**discovered); !status.ok()) {
      return usage("--device-plugin-config " + device_plugin_config + ": " +
                   status.message());
    }
  }
  Inventory inventory(*discovered);
  dp::DraHealth health(*recovery);
  health.Judge(**discovered, *sysfs);

  // Devices running pods still hold through a device plugin (the kubelet
  // device manager's checkpoint, confirmed by its pod resources API):
  // published tainted, so that a node moved from the device plugin to DRA
  // never hands one out twice. Read at start and at every health pass; a
  // file that cannot be read keeps the last holders known (logged once per
  // problem).
  const dp::HeldDevicesReader held_reader(
      std::filesystem::path(device_plugin_dir) /
          topology::kubelet::kKubeletCheckpoint,
      dp::PodResourcesSocket(kubelet_dir));
  std::map<topology::PciAddress, std::vector<std::string>> held;
  std::string held_problem;
  const auto read_held = [&]() -> bool {
    auto read = held_reader.Read();
    std::map<topology::PciAddress, std::vector<std::string>> now;
    if (read.ok()) {
      now = std::move(*read);
      held_problem.clear();
    } else {
      if (read.status().message() != held_problem) {
        held_problem = read.status().message();
        LOG(WARNING) << held_problem
                     << "; devices held through a device plugin stay as last "
                        "read";
      }
      return false;
    }
    if (now == held) return false;
    for (const auto& [address, pods] : now) {
      if (!held.contains(address)) {
        LOG(INFO) << address.ToString() << " is held by pod " << pods.front()
                  << " through a device plugin: published with a NoSchedule "
                     "taint";
      }
    }
    for (const auto& [address, pods] : held) {
      if (!now.contains(address)) {
        LOG(INFO) << address.ToString()
                  << " is no longer held through a device plugin";
      }
    }
    held = std::move(now);
    return true;
  };
  (void)read_held();

  dra::SlicePublisher publisher(client->get(), driver, node, {});
  // The slices and the health streams say the same: an unhealthy device is
  // tainted and reported Unhealthy with the reason.
  // The streams hear first: publishing waits on the API server.
  const auto publish = [&](const dp::Snapshot& snapshot,
                           dra::DriverRunner* runner) {
    std::vector<std::string> warnings;
    auto devices = dp::DraInventory(*config, snapshot, *sysfs, form, &warnings);
    for (const std::string& warning : warnings) VLOG(1) << warning;
    dp::TaintUnhealthy(driver, health.unhealthy(), &devices);
    dp::TaintHeld(driver, held, &devices);
    if (runner != nullptr) {
      runner->SetHealth(dp::HealthReport(node, snapshot, health.unhealthy()));
    }
    if (auto status = publisher.Publish(node, std::move(devices));
        !status.ok()) {
      LOG(ERROR) << "publishing: " << status.message();
    }
    // The inventory, the health list and the slices were built from
    // scratch: what they freed goes back to the system, so that the idle
    // driver's resident memory is what it keeps.
    malloc_trim(0);
  };
  // The kubelet's directories before anything is published: a bad
  // --registry-dir or --plugin-dir ends the start here, naming it.
  // Prepare reads the kubelet's device checkpoint itself, at each claim:
  // the taint above guards nothing where DRADeviceTaints is off or a claim
  // tolerates it.
  dp::DraHandler handler(
      *config, host_root, cdi_dir, driver, node,
      [&inventory] { return inventory.get(); },
      [&held_reader] { return held_reader.Read(); });
  dra::ApiClaimSource source(client->get());
  dra::DriverOptions options;
  options.driver_name = driver;
  options.registry_dir = registry_dir;
  options.plugin_dir = plugin_dir;
  options.state_dir = state_dir;
  options.cdi_dir = cdi_dir;  // specs of claims not prepared go at start
  options.pod_uid = pod_uid;
  options.health_timeout = kHealthTimeout;
  auto runner = dra::DriverRunner::Create(options, &source, &handler);
  if (!runner.ok()) return usage(runner.status().message());
  if (auto started = (*runner)->Start(); !started.ok()) {
    LOG(ERROR) << "cannot start: " << started.message();
    return kExitError;
  }
  // The streams hear first: publishing waits on the API server.
  publish(**discovered, runner->get());
  publisher.Start();
  malloc_trim(0);

  // Health every --health-interval (AER counters, unhealthy devices); a
  // full rescan shortly after a PCI uevent (a device added or removed, a
  // driver bound or unbound), and every --rescan-interval only while no
  // uevents come (none in a user namespace, or --no-uevents), as the device
  // plugin does. A change is published as slices and on the health
  // streams; the streams hear again at least every half health timeout, so
  // the kubelet never takes Unknown.
  // The device plugin's rescan loop (plugin/rescan_loop.h): the same
  // uevents start a rescan in both programs. Its period is the health
  // interval; full rescans on a uevent, and every --rescan-interval only
  // while no uevents come.
  const topology::Clock& clock = topology::Clock::Real();
  plugin::RescanLoop loop({.interval = *health_every,
                           .debounce = kUeventDebounce,
                           .clock = &clock});
  if (watch_uevents && !loop.WatchUevents()) {
    LOG(WARNING) << "no uevents; full rescans every " << rescan_interval;
  }
  loop.Start([&, next_rescan = clock.Now() + *interval,
              last_report =
                  clock.Now()](const plugin::RescanLoop::Pass& pass) mutable {
    std::shared_ptr<const dp::Snapshot> snapshot = inventory.get();
    bool changed = false;
    if (pass.periodic) {
      changed = health.Recheck(*snapshot, *sysfs);
      changed |= read_held();
    }
    const bool rescan_due =
        pass.uevent || (!pass.uevents_live && interval->count() > 0 &&
                        pass.now >= next_rescan);
    if (rescan_due) {
      next_rescan = pass.now + *interval;
      auto fresh = dp::DiscoverSnapshot(*config, host_root, *sysfs, cdi_dir,
                                        snapshot->claims);
      if (!fresh.ok()) {
        LOG(WARNING) << "rescan: " << fresh.status().message();
      } else if (auto status = overlap(**fresh); !status.ok()) {
        LOG(ERROR) << "rescan not used: " << status.message();
      } else {
        inventory.set(*fresh);
        snapshot = *fresh;
        health.Judge(*snapshot, *sysfs);
        changed = true;  // unchanged slices send nothing
      }
    }
    if (changed) {
      publish(*snapshot, runner->get());
      last_report = clock.Now();
    } else if (clock.Now() - last_report >= kHealthTimeout / 2) {
      (*runner)->RefreshHealth();
      last_report = clock.Now();
    }
  });

  std::unique_ptr<plugin::HttpEndpoint> http;
  if (!http_addr.empty()) {
    dra::DriverRunner& r = **runner;
    auto endpoint = plugin::HttpEndpoint::Start(
        http_addr,
        {.health_problem = [] { return std::string(); },
         .readiness_problem =
             [&r, &publisher] {
               if (!r.registered()) {
                 // The kubelet's reason, when it refused (an old kubelet:
                 // "no handler registered for plugin type: DRAPlugin").
                 const std::string why = r.registration_error();
                 return why.empty()
                            ? std::string("not registered with the kubelet")
                            : "not registered with the kubelet: the kubelet "
                              "refused the registration: " +
                                  why;
               }
               if (!publisher.published())
                 return std::string("ResourceSlices not published");
               return std::string();
             },
         .metrics =
             [&r, &publisher] {
               const auto stats = publisher.stats();
               return "# TYPE topology_dra_prepared_claims gauge\n"
                      "topology_dra_prepared_claims " +
                      std::to_string(r.PreparedClaims().size()) +
                      "\n# TYPE topology_dra_slice_writes_total counter\n"
                      "topology_dra_slice_writes_total " +
                      std::to_string(stats.creates + stats.updates +
                                     stats.deletes) +
                      "\n";
             },
         .server_name = "topology-dra-driver"});
    if (!endpoint.ok()) {
      LOG(ERROR) << endpoint.status().message();
    } else {
      http = std::move(*endpoint);
    }
  }

  const int signal = plugin::WaitForShutdownSignal();
  LOG(INFO) << "received signal " << signal << "; shutting down";
  plugin::ExitIfStillRunningAfter(std::chrono::milliseconds(4500), 0);
  loop.Stop();
  http.reset();
  (*runner)->Stop();
  // A sync waiting on the API server ends now, not at the client's timeout.
  (*client)->Cancel();
  publisher.Stop();
  LOG(INFO) << "stopped";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena: the driver's threads (gRPC's, the resync, the health
  // streams) mostly sleep and seldom allocate at once, and an arena of
  // their own each kept what they once freed (0.5 MiB idle at 10,000
  // devices).
  mallopt(M_ARENA_MAX, 1);
  return topology::device_plugin::RunGuarded("topology-dra-driver",
                                             [&] { return Run(argc, argv); });
}
