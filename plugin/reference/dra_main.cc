// topology-dra-driver: the reference DRA driver. The same configuration and
// discovery as topology-device-plugin, published as this node's pool of
// ResourceSlices; claims prepared with the device plugin's container edits
// as one CDI spec each (dra_driver.h), on the DRA framework.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <glog/logging.h>
#include <malloc.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>

#include "topology/common/daemon.h"
#include "topology/common/kubelet_checkpoint.h"
#include "topology/common/kubelet_names.h"
#include "topology/common/safe_file.h"
#include "topology/common/text_util.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/plugin/rescan_loop.h"
#include "topology/plugin/uevent_monitor.h"
#include "topology/thread_annotations.h"

#include "config.h"
#include "dra_driver.h"
#include "dra_options.h"
#include "pod_resources.h"
#include "program.h"
#include "reference_plugin.h"

namespace {

namespace dp = topology::device_plugin;
namespace dra = topology::draplugin;
namespace common = topology::common;
namespace plugin = topology::plugin;

// One gauge a feature gate the API server has off, as read from the fields
// it dropped of the driver's slices: what an operator turns on.
std::string DisabledFeatureMetrics(const std::set<std::string>& gates) {
  if (gates.empty()) return {};
  std::string text = "# TYPE topology_dra_feature_gate_disabled gauge\n";
  for (const std::string& gate : gates) {
    // "DRADeviceBindingConditions (with ...)": the gate's name alone.
    text += "topology_dra_feature_gate_disabled{gate=\"" +
            gate.substr(0, gate.find(' ')) + "\"} 1\n";
  }
  return text;
}

constexpr int kExitError = 1;
constexpr int kExitUsage = 2;
// Sent with each device's health: the kubelet takes Unknown after this long
// without a report.
constexpr std::chrono::seconds kHealthTimeout(60);
// A burst of uevents (a PF's VFs created) is one rescan.
constexpr std::chrono::milliseconds kUeventDebounce(500);

// A bad command line or configuration: said on stderr, exit 2.
int Usage(const std::string& what) {
  std::cerr << "topology-dra-driver: " << what << "\n";
  return kExitUsage;
}

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

// The published devices' attributes, by device name, for device metadata
// (--device-metadata): each prepared device's file mirrors its slice
// attributes as last published. Replaced by each publish.
class PublishedAttributes {
 public:
  using Attributes = std::map<std::string, dra::AttributeValue>;
  void set(const std::vector<dra::SliceDevice>& devices) {
    auto map = std::make_shared<std::map<std::string, Attributes>>();
    for (const dra::SliceDevice& device : devices) {
      (*map)[device.name] = device.attributes;
    }
    topology::MutexLock lock(mu_);
    attributes_ = std::move(map);
  }
  Attributes of(const std::string& device) const {
    std::shared_ptr<const std::map<std::string, Attributes>> map;
    {
      topology::MutexLock lock(mu_);
      map = attributes_;
    }
    if (!map) return {};
    const auto it = map->find(device);
    return it == map->end() ? Attributes() : it->second;
  }

 private:
  mutable topology::Mutex mu_;
  std::shared_ptr<const std::map<std::string, Attributes>> attributes_
      TOPOLOGY_GUARDED_BY(mu_);
};

// Devices running pods still hold through a device plugin (the kubelet
// device manager's checkpoint, confirmed by its pod resources API):
// published tainted, so that a node moved from the device plugin to DRA
// never hands one out twice. Read at start and at every health pass; a
// file that cannot be read keeps the holders last known (logged once per
// problem).
class HeldDevices {
 public:
  using Held = std::map<topology::PciAddress, std::vector<std::string>>;

  HeldDevices(const std::filesystem::path& checkpoint,
              const std::filesystem::path& pod_resources)
      : reader_(checkpoint, pod_resources) {}

  // Reads the holders again; true when they changed (each change logged).
  bool Refresh() {
    auto read = reader_.Read();
    if (!read.ok()) {
      if (read.status().message() != problem_) {
        problem_ = read.status().message();
        LOG(WARNING) << problem_
                     << "; devices held through a device plugin stay as last "
                        "read";
      }
      return false;
    }
    problem_.clear();
    if (*read == held_) return false;
    for (const auto& [address, pods] : *read) {
      if (!held_.contains(address)) {
        LOG(INFO) << address.ToString() << " is held by pod " << pods.front()
                  << " through a device plugin: published with a NoSchedule "
                     "taint";
      }
    }
    for (const auto& [address, pods] : held_) {
      if (!read->contains(address)) {
        LOG(INFO) << address.ToString()
                  << " is no longer held through a device plugin";
      }
    }
    held_ = std::move(*read);
    return true;
  }
  const Held& held() const { return held_; }
  // For Prepare, which reads the holders afresh at each claim.
  const dp::HeldDevicesReader& reader() const { return reader_; }

 private:
  const dp::HeldDevicesReader reader_;
  Held held_;
  std::string problem_;
};

// The credentials and the API before anything is served or published: a
// token the server refuses, or a server without resource.k8s.io/v1, ends
// the start with the reason instead of a refusal logged at every resync.
// A server that does not answer yet is not fatal: publishing retries.
topology::Status CheckApiServer(dra::KubeClient& client,
                                const std::string& kubeconfig) {
  const std::string credentials_source =
      kubeconfig.empty() ? std::string("the pod's service account")
                         : "--kubeconfig " + kubeconfig;
  auto answer =
      client.Request("GET", "/apis/resource.k8s.io/v1/resourceslices?limit=1");
  if (!answer.ok()) {
    LOG(WARNING) << "the API server did not answer: "
                 << answer.status().message() << "; publishing will retry";
    return topology::OkStatus();
  }
  if (answer->status == 401 || answer->status == 403) {
    return topology::FailedPreconditionError(
        "the API server refuses the credentials of " + credentials_source +
        " (HTTP " + std::to_string(answer->status) +
        " listing resourceslices: " +
        topology::text::Quoted(answer->body, 200) +
        "): check the ServiceAccount and its ClusterRoleBinding");
  }
  if (answer->status == 404) {
    return topology::FailedPreconditionError(
        "the API server does not serve resource.k8s.io/v1 ResourceSlices "
        "(Kubernetes 1.34 and later, with DRA)");
  }
  return topology::OkStatus();
}

// Runtimes read the specs: the directory is made readable to all (the
// specs themselves are written 0644). Temporary files of this driver's
// spec writes that a kill interrupted are removed.
topology::Status PrepareCdiDirectory(const std::string& cdi_dir,
                                     const std::string& driver) {
  if (std::error_code error;
      !std::filesystem::is_directory(cdi_dir) &&
      (!std::filesystem::create_directories(cdi_dir, error) ||
       chmod(cdi_dir.c_str(), 0755) != 0)) {
    return topology::FailedPreconditionError(
        "cannot create the CDI directory " + cdi_dir +
        (error ? ": " + error.message() : ""));
  }
  if (const size_t removed =
          topology::files::RemoveTemporaryLeftoversIn(cdi_dir, driver + "-");
      removed > 0) {
    LOG(INFO) << "removed " << removed << " temporary CDI spec file(s) of "
              << driver << " that an interrupted write left in " << cdi_dir;
  }
  return topology::OkStatus();
}

// /healthz, /readyz (registered with the kubelet, slices published) and
// /metrics of the driver; null (logged) when the address cannot be served.
std::unique_ptr<plugin::HttpEndpoint> ServeHttp(const std::string& address,
                                                dra::DriverRunner& runner,
                                                dra::SlicePublisher& slices) {
  const auto readiness_problem = [&runner, &slices] {
    if (!runner.registered()) {
      // The kubelet's reason, when it refused (an old kubelet: "no handler
      // registered for plugin type: DRAPlugin").
      const std::string why = runner.registration_error();
      return why.empty() ? std::string("not registered with the kubelet")
                         : "not registered with the kubelet: the kubelet "
                           "refused the registration: " +
                               why;
    }
    if (!slices.published()) return std::string("ResourceSlices not published");
    return std::string();
  };
  const auto metrics = [&runner, &slices] {
    const auto stats = slices.stats();
    return "# TYPE topology_dra_prepared_claims gauge\n"
           "topology_dra_prepared_claims " +
           std::to_string(runner.PreparedClaims().size()) +
           "\n# TYPE topology_dra_slice_writes_total counter\n"
           "topology_dra_slice_writes_total " +
           std::to_string(stats.creates + stats.updates + stats.deletes) +
           "\n" + DisabledFeatureMetrics(stats.disabled_features);
  };
  auto endpoint = plugin::HttpEndpoint::Start(
      address, {.health_problem = [] { return std::string(); },
                .readiness_problem = readiness_problem,
                .metrics = metrics,
                .server_name = "topology-dra-driver"});
  if (!endpoint.ok()) {
    LOG(ERROR) << endpoint.status().message();
    return nullptr;
  }
  return std::move(*endpoint);
}

// The driver from its start to its stop: the inventory, its health and
// holders, published as slices and on the health streams, kept fresh by the
// rescan loop; claims prepared by the DRA framework.
class DraDriver {
 public:
  DraDriver(const dp::DraDriverOptions& options, dp::Config config,
            std::unique_ptr<dra::KubeClient> client)
      : options_(options),
        config_(std::move(config)),
        client_(std::move(client)),
        sysfs_(topology::NewHostRootReader(options.host_root)),
        health_(options.recovery),
        held_(std::filesystem::path(options.device_plugin_dir) /
                  topology::kubelet::kKubeletCheckpoint,
              dp::PodResourcesSocket(options.kubelet_root)),
        slices_(client_.get(), options.driver, options.node, {}),
        source_(client_.get()) {}

  // The exit status when the driver cannot start; nullopt when it runs.
  std::optional<int> Start();
  // In the order the signal's bound needs: the loop, the HTTP endpoint,
  // the kubelet's side, then the API server's (a sync waiting on it ends
  // now, not at the client's timeout).
  void Stop();

 private:
  // The inventory's slices and health list. The streams hear first:
  // publishing waits on the API server.
  void Publish(const dp::Snapshot& snapshot);
  // Health every --health-interval (AER counters, unhealthy devices, the
  // holders); a full rescan after a PCI uevent, and every --rescan-interval
  // only while no uevents come, as the device plugin does. A change is
  // published; the streams hear again at least every half health timeout,
  // so the kubelet never takes Unknown.
  void OnPass(const plugin::RescanLoop::Pass& pass);
  // One device, one path: the device plugin's configuration on this node
  // must not select a device this one selects.
  topology::Status CheckOverlap(const dp::Snapshot& snapshot) const {
    if (!plugin_config_) return topology::OkStatus();
    return dp::CheckNoOverlap(config_, snapshot, *plugin_config_, *sysfs_);
  }

  const dp::DraDriverOptions& options_;
  const dp::Config config_;
  const std::unique_ptr<dra::KubeClient> client_;
  const std::unique_ptr<topology::SysfsReader> sysfs_;
  std::optional<dp::Config> plugin_config_;
  std::optional<Inventory> inventory_;
  dp::DraHealth health_;
  HeldDevices held_;
  dra::SlicePublisher slices_;
  dra::ApiClaimSource source_;
  PublishedAttributes attributes_;  // with --device-metadata
  std::unique_ptr<dp::DraHandler> handler_;
  std::unique_ptr<dra::DriverRunner> runner_;
  const topology::Clock& clock_ = topology::Clock::Real();
  topology::Clock::TimePoint next_rescan_;
  topology::Clock::TimePoint last_report_;
  std::unique_ptr<plugin::RescanLoop> loop_;
  std::unique_ptr<plugin::HttpEndpoint> http_;
};

std::optional<int> DraDriver::Start() {
  if (auto checked = CheckApiServer(*client_, options_.kubeconfig);
      !checked.ok()) {
    LOG(ERROR) << checked.message();
    return kExitError;
  }
  if (auto cdi = PrepareCdiDirectory(options_.cdi_dir, options_.driver);
      !cdi.ok()) {
    LOG(ERROR) << cdi.message();
    return kExitError;
  }
  auto discovered = dp::DiscoverSnapshot(config_, options_.host_root, *sysfs_,
                                         options_.cdi_dir, {});
  if (!discovered.ok()) {
    LOG(ERROR) << "discovery: " << discovered.status().message();
    return kExitError;
  }
  if (!options_.device_plugin_config.empty()) {
    auto loaded = dp::LoadConfig(options_.device_plugin_config);
    if (!loaded.ok()) {
      return Usage("--device-plugin-config: " + loaded.status().message());
    }
    plugin_config_ = std::move(*loaded);
    if (auto status = CheckOverlap(**discovered); !status.ok()) {
      return Usage("--device-plugin-config " + options_.device_plugin_config +
                   ": " + status.message());
    }
  }
  inventory_.emplace(*discovered);
  health_.Judge(**discovered, *sysfs_);
  (void)held_.Refresh();
  // Prepare reads the kubelet's device checkpoint itself, at each claim:
  // the taint guards nothing where DRADeviceTaints is off or a claim
  // tolerates it.
  handler_ = std::make_unique<dp::DraHandler>(
      config_, options_.host_root, options_.cdi_dir, options_.driver,
      options_.node, [this] { return inventory_->get(); },
      [this] { return held_.reader().Read(); });
  if (options_.device_metadata) {
    handler_->set_metadata(
        [this](const std::string& device) { return attributes_.of(device); });
  }
  // The kubelet's directories before anything is published: a bad
  // --registry-dir or --plugin-dir ends the start here, naming it.
  dra::DriverOptions driver;
  driver.driver_name = options_.driver;
  driver.registry_dir = options_.registry_dir;
  driver.plugin_dir = options_.plugin_dir;
  driver.state_dir = options_.state_dir;
  driver.cdi_dir = options_.cdi_dir;  // specs of claims not prepared go
  driver.pod_uid = options_.pod_uid;
  driver.device_metadata = options_.device_metadata;
  driver.health_timeout = kHealthTimeout;
  auto runner = dra::DriverRunner::Create(driver, &source_, handler_.get());
  if (!runner.ok()) return Usage(runner.status().message());
  runner_ = std::move(*runner);
  if (auto started = runner_->Start(); !started.ok()) {
    LOG(ERROR) << "cannot start: " << started.message();
    return kExitError;
  }
  Publish(**discovered);
  slices_.Start();
  malloc_trim(0);
  // The device plugin's rescan loop (plugin/rescan_loop.h): the same
  // uevents start a rescan in both programs.
  loop_ = std::make_unique<plugin::RescanLoop>(
      plugin::RescanLoop::Options{.interval = options_.health_every,
                                  .debounce = kUeventDebounce,
                                  .clock = &clock_});
  if (options_.watch_uevents && !loop_->WatchUevents()) {
    LOG(WARNING) << "no uevents; full rescans every "
                 << options_.rescan_interval;
  }
  next_rescan_ = clock_.Now() + options_.rescan_every;
  last_report_ = clock_.Now();
  loop_->Start([this](const plugin::RescanLoop::Pass& pass) { OnPass(pass); });
  if (!options_.http_addr.empty()) {
    http_ = ServeHttp(options_.http_addr, *runner_, slices_);
  }
  // The configuration, discovery, the inventory's first build and gRPC's
  // plugins setting themselves up are done: their code pages go
  // (common::ReleaseStartupCode); what publishing, the passes and the
  // kubelet's calls run comes back as they run.
  common::ReleaseStartupCode();
  return std::nullopt;
}

void DraDriver::Publish(const dp::Snapshot& snapshot) {
  std::vector<std::string> warnings;
  auto devices = dp::DraInventory(config_, snapshot, *sysfs_,
                                  options_.numa_attribute_form, &warnings);
  for (const std::string& warning : warnings) VLOG(1) << warning;
  // The slices and the health streams say the same: an unhealthy device
  // is tainted and reported Unhealthy with the reason.
  dp::TaintUnhealthy(options_.driver, health_.unhealthy(), &devices);
  dp::TaintHeld(options_.driver, held_.held(), &devices);
  runner_->SetHealth(
      dp::HealthReport(options_.node, snapshot, health_.unhealthy()));
  dra::Pool pool;
  pool.name = options_.node;
  pool.counter_sets = dp::PartitionSriov(snapshot, &devices);
  if (!pool.counter_sets.empty()) {
    pool.partition_type_attribute =
        options_.driver + "/" + dp::kPartitionTypeAttribute;
  }
  if (options_.device_metadata) attributes_.set(devices);
  pool.devices = std::move(devices);
  if (auto status = slices_.Publish(std::move(pool)); !status.ok()) {
    LOG(ERROR) << "publishing: " << status.message();
  }
  // The inventory, the health list and the slices were built from scratch:
  // what they freed goes back to the system, so that the idle driver's
  // resident memory is what it keeps.
  malloc_trim(0);
}

void DraDriver::OnPass(const plugin::RescanLoop::Pass& pass) {
  std::shared_ptr<const dp::Snapshot> snapshot = inventory_->get();
  bool changed = false;
  if (pass.periodic) {
    changed = health_.Recheck(*snapshot, *sysfs_);
    changed |= held_.Refresh();
  }
  const bool rescan_due =
      pass.uevent || (!pass.uevents_live && options_.rescan_every.count() > 0 &&
                      pass.now >= next_rescan_);
  if (rescan_due) {
    next_rescan_ = pass.now + options_.rescan_every;
    auto fresh = dp::DiscoverSnapshot(config_, options_.host_root, *sysfs_,
                                      options_.cdi_dir, snapshot->claims);
    if (!fresh.ok()) {
      LOG(WARNING) << "rescan: " << fresh.status().message();
    } else if (auto status = CheckOverlap(**fresh); !status.ok()) {
      LOG(ERROR) << "rescan not used: " << status.message();
    } else {
      inventory_->set(*fresh);
      snapshot = *fresh;
      health_.Judge(*snapshot, *sysfs_);
      changed = true;  // unchanged slices send nothing
    }
  }
  if (changed) {
    Publish(*snapshot);
    last_report_ = clock_.Now();
  } else if (clock_.Now() - last_report_ >= kHealthTimeout / 2) {
    runner_->RefreshHealth();
    last_report_ = clock_.Now();
  }
}

void DraDriver::Stop() {
  if (loop_) loop_->Stop();
  http_.reset();
  if (runner_) runner_->Stop();
  client_->Cancel();
  slices_.Stop();
}

int Run(const dp::DraDriverOptions& options, const char* argv0) {
  if (options.print_device_classes) {
    auto config = dp::LoadConfig(options.config_file);
    if (!config.ok()) return Usage(config.status().message());
    std::cout << dp::DeviceClassesYaml(*config, options.driver);
    return std::cout.flush() ? 0 : kExitError;
  }
  // As the device plugin: gRPC's poll engine (docs/performance.md).
  const common::DaemonProcess process{.verbosity = options.verbosity};
  common::SetUpDaemon(argv0, process);
  auto config = dp::LoadConfig(options.config_file);
  if (!config.ok()) return Usage(config.status().message());
  if (topology::Status shared = dp::ValidateSharing(*config, options.driver);
      !shared.ok()) {
    return Usage(options.config_file + ": " + shared.message());
  }
  auto credentials = options.kubeconfig.empty()
                         ? dra::InClusterConfig()
                         : dra::LoadKubeConfig(options.kubeconfig);
  if (!credentials.ok()) return Usage(credentials.status().message());
  auto client = dra::KubeClient::Create(std::move(*credentials));
  if (!client.ok()) return Usage(client.status().message());
  DraDriver driver(options, std::move(*config), std::move(*client));
  if (std::optional<int> failed = driver.Start()) return *failed;
  common::AwaitShutdown(process);
  driver.Stop();
  LOG(INFO) << "stopped";
  return 0;
}

int Main(int argc, char** argv) {
  CLI::App app{
      "The reference DRA driver: this node's PCI devices as ResourceSlices "
      "with their NUMA and PCIe topology, claims prepared through CDI."};
  app.set_version_flag("--version",
                       std::string("topology-dra-driver ") + TOPOLOGY_VERSION);
  return dp::ParseCompleteAndRun<dp::DraDriverOptions>(
      "topology-dra-driver", app, argc, argv, kExitUsage, &Run);
}

}  // namespace

int main(int argc, char** argv) {
  // One malloc arena: the driver's threads (gRPC's, the resync, the health
  // streams) mostly sleep and seldom allocate at once, and an arena of
  // their own each kept what they once freed (0.5 MiB idle at 10,000
  // devices).
  mallopt(M_ARENA_MAX, 1);
  return topology::device_plugin::RunGuarded("topology-dra-driver",
                                             [&] { return Main(argc, argv); });
}
