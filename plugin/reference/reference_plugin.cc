#include "reference_plugin.h"

#include <algorithm>
#include <set>
#include <sstream>

#include <glob.h>
#include <glog/logging.h>
#include <malloc.h>

#include "topology/common/cdi.h"
#include "topology/common/safe_file.h"
#include "topology/device_selection.h"
#include "topology/discovery.h"
#include "topology/plugin/metrics_text.h"
#include "topology/plugin/uevent_monitor.h"

#include "nvidia.h"
#include "reference_views.h"
#include "selectors.h"

namespace topology::device_plugin {

namespace {

std::string Join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += sep;
    out += item;
  }
  return out;
}

void ReplaceAll(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos;
       at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// Paths matching `pattern` (absolute, as seen in the container) under
// `host_root`, returned without the root.
std::vector<std::string> ExpandUnderRoot(const std::filesystem::path& host_root,
                                         const std::string& pattern) {
  const std::string root =
      host_root.string() == "/"
          ? std::string()
          : std::filesystem::path(host_root).lexically_normal().string();
  std::string rooted = root;
  if (!rooted.empty() && rooted.back() == '/') rooted.pop_back();
  const std::string full = rooted + pattern;
  glob_t matches{};
  std::vector<std::string> out;
  if (glob(full.c_str(), 0, nullptr, &matches) == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) {
      std::string path = matches.gl_pathv[i];  // NOLINT
      out.push_back(path.substr(rooted.size()));
    }
  }
  globfree(&matches);
  return out;
}

}  // namespace

StatusOr<std::vector<std::string>> NodePathsOf(
    const ResourceConfig& config, const PciDevice& device,
    const std::filesystem::path& root, const NvidiaGpuInformation* gpu) {
  const std::string id = device.address.ToString();
  std::vector<std::string> paths;
  if (device.driver == "vfio-pci") {
    if (!device.iommu_group) {
      return FailedPreconditionError("vfio-pci device " + id +
                                     " has no IOMMU group");
    }
    paths.emplace_back("/dev/vfio/vfio");
    paths.push_back("/dev/vfio/" + std::to_string(*device.iommu_group));
  }
  for (std::string pattern : config.device_nodes) {
    ReplaceAll(pattern, "{address}", id);
    ReplaceAll(pattern, "{iommuGroup}",
               device.iommu_group ? std::to_string(*device.iommu_group)
                                  : std::string("none"));
    for (std::string& path : ExpandUnderRoot(root, pattern)) {
      paths.push_back(std::move(path));
    }
  }
  if (gpu != nullptr) {
    paths.push_back("/dev/nvidia" + std::to_string(gpu->minor));
    for (std::string& node : NvidiaControlNodes(root)) {
      paths.push_back(std::move(node));
    }
  }
  return paths;
}

StatusOr<plugin::ContainerAllocation> AllocationFor(
    const ResourceConfig& config, const Snapshot& snapshot,
    const std::filesystem::path& root,
    const std::vector<std::string>& device_ids, bool cdi_spec_written) {
  plugin::ContainerAllocation allocation;
  allocation.envs[PciDeviceEnvName(config.name)] = Join(device_ids, ",");
  std::vector<NvidiaGpuInformation> gpus;
  std::set<std::string> nodes;
  auto add_node = [&](const std::string& path) {
    if (nodes.insert(path).second) {
      allocation.devices.push_back({path, path, "rw"});
    }
  };
  for (const std::string& id : device_ids) {
    auto address = PciAddress::Parse(id);
    if (!address.ok()) return address.status();
    const PciDevice* device = snapshot.topology.FindDevice(*address);
    if (device == nullptr) {
      return NotFoundError("device " + id + " of " + config.name +
                           " is no longer present");
    }
    auto paths = NodePathsOf(config, *device, root, nullptr);
    if (!paths.ok()) return paths.status();
    for (const std::string& path : *paths) add_node(path);
    // Only names a spec defines: a CDI-enabled runtime refuses the rest.
    const bool has_edits =
        !paths->empty() ||
        (config.nvidia && snapshot.nvidia.gpus.contains(*address));
    if (!config.cdi_kind.empty() && has_edits && cdi_spec_written) {
      allocation.cdi_devices.push_back(config.cdi_kind + "=" + id);
    }
    if (config.nvidia) {
      if (const auto problem = snapshot.nvidia.problems.find(*address);
          problem != snapshot.nvidia.problems.end()) {
        return FailedPreconditionError(config.name + ": device " + id + ": " +
                                       problem->second);
      }
      auto gpu = ReadNvidiaGpuInformation(root, *address);
      if (!gpu.ok()) {
        return Status(gpu.status().code(), config.name + ": device " + id +
                                               ": " + gpu.status().message());
      }
      // Read again now: the driver may have been reloaded since the scan.
      // No other GPU may have its node or UUID.
      for (const auto& [other, info] : snapshot.nvidia.gpus) {
        if (other != *address &&
            (info.minor == gpu->minor || info.uuid == gpu->uuid)) {
          return FailedPreconditionError(
              config.name + ": device " + id +
              ": the NVIDIA driver now "
              "gives it the Device Minor or UUID of " +
              other.ToString());
        }
      }
      gpus.push_back(std::move(*gpu));
    }
  }
  if (config.nvidia) {
    AddNvidiaOutputs(gpus, NvidiaControlNodes(root), allocation);
    // nvidia.com/gpu=<UUID> only where the node's specs (nvidia-ctk cdi
    // generate) define it; the env and nodes serve the other runtimes.
    std::erase_if(allocation.cdi_devices, [&](const std::string& name) {
      return name.starts_with("nvidia.com/gpu=") &&
             !snapshot.cdi_defined.contains(name);
    });
  }
  return allocation;
}

// The framework's view of one configured resource.
class TopologyDevicePlugin::Handler final : public plugin::ResourceHandler {
 public:
  Handler(TopologyDevicePlugin* plugin, size_t index)
      : plugin_(plugin),
        index_(index),
        config_(plugin->options_.config.resources[index]) {}

  plugin::DevicePluginOptions Options() const override {
    return {.pre_start_required = false,
            .get_preferred_allocation_available = config_.preferred_allocation};
  }

  StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const plugin::PreferredAllocationRequest& request) override {
    const std::shared_ptr<const Snapshot> snapshot = plugin_->snapshot();
    SelectionRequest selection;
    selection.size = request.size;
    selection.explain = VLOG_IS_ON(3);
    Status parsed = OkStatus();
    selection.available.reserve(request.available.size());
    for (const std::string& id : request.available) {
      auto address = PciAddress::Parse(id);
      if (!address.ok()) {
        parsed = address.status();
      } else {
        selection.available.push_back(*address);
      }
    }
    for (const std::string& id : request.must_include) {
      auto address = PciAddress::Parse(id);
      if (!address.ok()) {
        parsed = address.status();
      } else {
        selection.must_include.push_back(*address);
      }
    }
    StatusOr<Selection> chosen =
        parsed.ok() ? DeviceSelector(snapshot->model).Select(selection)
                    : StatusOr<Selection>(parsed);
    if (chosen.ok()) {
      std::vector<std::string> ids;
      for (const PciAddress& address : chosen->devices) {
        ids.push_back(address.ToString());
      }
      VLOG(2) << config_.name << ": preferred " << Join(ids, ",") << " (cost "
              << chosen->cost << ") from " << request.available.size()
              << " available";
      if (VLOG_IS_ON(3) && !chosen->explanation.empty()) {
        VLOG(3) << config_.name << ": " << chosen->explanation;
      }
      return ids;
    }
    // One odd device must not fail every admission on the node: answer
    // with the must-include devices and the first others instead.
    LOG(WARNING) << config_.name << ": cost-based choice failed ("
                 << chosen.status().ToString()
                 << "); answering in address order";
    return plugin::MustIncludeThenInOrder(request);
  }

  StatusOr<plugin::ContainerAllocation> Allocate(
      const std::vector<std::string>& device_ids) override {
    // Read afresh: a claim prepared since the last list is never handed
    // out a second time, and an unreadable claim checkpoint refuses.
    if (Status free = plugin_->dra_held_.CheckNotHeld(device_ids); !free.ok()) {
      LOG(WARNING) << config_.name << ": Allocate " << Join(device_ids, ",")
                   << ": " << free.message();
      return free;
    }
    const std::shared_ptr<const Snapshot> snapshot = plugin_->snapshot();
    auto allocation =
        AllocationFor(config_, *snapshot, plugin_->options_.host_root,
                      device_ids, plugin_->cdi_spec_written(index_));
    if (allocation.ok()) {
      VLOG(2) << config_.name << ": Allocate " << Join(device_ids, ",")
              << " -> " << allocation->devices.size() << " device node(s)";
    }
    return allocation;
  }

 private:
  TopologyDevicePlugin* plugin_;
  const size_t index_;
  const ResourceConfig& config_;
};

TopologyDevicePlugin::TopologyDevicePlugin(PluginOptions options)
    : options_(std::move(options)),
      reader_(NewHostRootReader(options_.host_root)),
      health_(options_.recovery_period),

      mixed_locality_warned_(options_.config.resources.size(), false),
      cdi_specs_(&options_.config.resources, options_.cdi_dir,
                 options_.host_root),
      dra_held_(options_.dra_claims),
      loop_(std::make_unique<plugin::RescanLoop>(
          plugin::RescanLoop::Options{.interval = options_.rescan_interval,
                                      .debounce = options_.uevent_debounce,
                                      .clock = options_.clock})) {}

TopologyDevicePlugin::~TopologyDevicePlugin() { Stop(); }

StatusOr<std::unique_ptr<TopologyDevicePlugin>> TopologyDevicePlugin::Create(
    PluginOptions options) {
  if (Status direct =
          files::RefuseLinkedDirectory("CDI directory", options.cdi_dir);
      !direct.ok()) {
    return direct;
  }
  std::unique_ptr<TopologyDevicePlugin> plugin(
      new TopologyDevicePlugin(std::move(options)));
  // Events from here on start a rescan once the loop runs.
  if (plugin->options_.watch_uevents) plugin->loop_->WatchUevents();
  // A claim the DRA driver prepares or unprepares changes the lists at
  // once, not at the next period (with --rescan-interval 0, never).
  if (!plugin->options_.dra_claims.empty()) {
    plugin->loop_->WatchFile(plugin->options_.dra_claims);
  }
  auto snapshot = plugin->Discover({});
  if (!snapshot.ok()) return snapshot.status();
  for (const std::string& warning : PfNamesWithoutInterface(
           plugin->options_.config, (*snapshot)->topology)) {
    LOG(WARNING) << warning;
  }
  plugin->cdi_specs_.Write(**snapshot);
  size_t undefined = 0;
  for (const auto& [address, gpu] : (*snapshot)->nvidia.gpus) {
    if (!(*snapshot)->cdi_defined.contains("nvidia.com/gpu=" + gpu.uuid)) {
      ++undefined;
    }
  }
  if (undefined > 0) {
    LOG(WARNING) << undefined << " NVIDIA GPU(s) have no CDI name defined "
                 << "on the node (no spec in /etc/cdi or /var/run/cdi names "
                 << "nvidia.com/gpu=<UUID>; nvidia-ctk cdi generate writes "
                 << "one): Allocate returns NVIDIA_VISIBLE_DEVICES and the "
                 << "device nodes for them, and no CDI name";
  }
  if (const std::string& missing = (*snapshot)->nvidia.driver_missing;
      !missing.empty()) {
    LOG(ERROR) << missing << "; every GPU of the resources with nvidia: "
               << "true is advertised Unhealthy until it is (mount the "
                  "host's /proc/driver/nvidia read-only at "
               << (plugin->options_.host_root / "proc/driver/nvidia").string()
               << ")";
  }
  plugin->runner_ =
      std::make_unique<plugin::PluginRunner>(plugin->options_.runner);
  {
    MutexLock rescan(plugin->rescan_mu_);
    (void)plugin->dra_held_.Read();
  }
  {
    MutexLock lock(plugin->mu_);
    plugin->snapshot_ = *snapshot;
  }
  for (size_t r = 0; r < plugin->options_.config.resources.size(); ++r) {
    std::vector<plugin::Device> devices;
    {
      MutexLock lock(plugin->mu_);
      devices = plugin->DevicesOf(**snapshot, r, /*read_health=*/true);
    }
    auto publisher = plugin->runner_->AddResource(
        plugin->options_.config.resources[r].name,
        std::make_shared<Handler>(plugin.get(), r), std::move(devices));
    if (!publisher.ok()) return publisher.status();
    plugin->publishers_.push_back(*publisher);
  }
  malloc_trim(0);
  return plugin;
}

StatusOr<std::shared_ptr<Snapshot>> DiscoverSnapshot(
    const Config& config, const std::filesystem::path& host_root,
    const SysfsReader& sysfs, const std::filesystem::path& cdi_dir,
    const Claims& previous) {
  DiscoveryOptions discovery;
  discovery.host_root = host_root;
  discovery.use_hwloc = false;  // CPU topology is not needed here
  StatusOr<Topology> topology = topology::Discover(discovery);
  if (!topology.ok()) return topology.status();
  auto snapshot = std::make_shared<Snapshot>(std::move(*topology));
  snapshot->claims = AssignDevices(config, snapshot->topology, sysfs, previous);
  std::vector<PciAddress> gpus;
  for (const auto& [address, index] : snapshot->claims) {
    if (config.resources[index].nvidia) gpus.push_back(address);
  }
  snapshot->nvidia = ReadNvidiaInventory(host_root, gpus);
  if (!gpus.empty()) {
    std::vector<std::string> warnings;
    std::vector<std::filesystem::path> dirs = {host_root / "etc/cdi",
                                               host_root / "var/run/cdi"};
    if (!cdi_dir.empty()) dirs.push_back(cdi_dir);
    snapshot->cdi_defined = common::CdiDefinedNames(dirs, &warnings);
    for (const std::string& warning : warnings) LOG(WARNING) << warning;
  }
  return snapshot;
}

StatusOr<std::shared_ptr<Snapshot>> TopologyDevicePlugin::Discover(
    const Claims& previous) const {
  return DiscoverSnapshot(options_.config, options_.host_root, *reader_,
                          options_.cdi_dir, previous);
}

std::shared_ptr<const Snapshot> TopologyDevicePlugin::snapshot() const {
  MutexLock lock(mu_);
  return snapshot_;
}

std::vector<plugin::Device> TopologyDevicePlugin::DevicesOf(
    const Snapshot& snapshot, size_t resource, bool read_health) {
  const ResourceConfig& config = options_.config.resources[resource];
  const auto now = options_.clock->Now();
  std::vector<plugin::Device> devices;
  devices.reserve(static_cast<size_t>(std::count_if(
      snapshot.claims.begin(), snapshot.claims.end(),
      [&](const auto& claim) { return claim.second == resource; })));
  // Held by a prepared DRA claim: offered again once it is unprepared.
  // Before the claim checkpoint was ever read whole (corrupt, a link, too
  // large at start), any device may be held: none is offered.
  const std::shared_ptr<const std::set<PciAddress>> held = dra_held_.Held();
  for (const auto& [address, index] : snapshot.claims) {
    if (index != resource) continue;
    if (held == nullptr || held->contains(address)) continue;
    const PciDevice* device = snapshot.topology.FindDevice(address);
    if (device == nullptr) continue;
    std::optional<plugin::HealthVerdict> last;
    if (!read_health) last = health_.Last(address);
    plugin::HealthVerdict verdict =
        last ? *last
             : health_.Observe(address,
                               plugin::ReadPciHealth(*reader_, address), now);
    // A GPU whose driver information is missing or shared with another GPU
    // would fail or reach the wrong GPU at Allocate.
    if (const auto problem = snapshot.nvidia.problems.find(address);
        problem != snapshot.nvidia.problems.end()) {
      verdict.health = plugin::Health::kUnhealthy;
      verdict.reason = problem->second;
    }
    // Only devices that are not healthy have an entry (10,000 healthy
    // devices cost nothing here).
    auto known = unhealthy_reasons_.find(address);
    const std::string_view reason =
        known == unhealthy_reasons_.end() ? std::string_view() : known->second;
    if (verdict.reason != reason) {
      if (verdict.health == plugin::Health::kUnhealthy) {
        LOG(WARNING) << config.name << ": " << address.ToString()
                     << " is Unhealthy: " << verdict.reason;
      } else {
        LOG(INFO) << config.name << ": " << address.ToString()
                  << " is Healthy again";
      }
      if (verdict.reason.empty()) {
        unhealthy_reasons_.erase(known);
      } else {
        unhealthy_reasons_.insert_or_assign(address, verdict.reason);
      }
    }
    plugin::Device out;
    out.id = address.ToString();
    out.health = verdict.health;
    if (!config.exclude_topology) {
      for (int node : device->numa_nodes) out.numa_nodes.push_back(node);
    }
    devices.push_back(std::move(out));
  }
  bool warned = mixed_locality_warned_[resource];
  DropPartialLocality(config.name, devices, &warned);
  mixed_locality_warned_[resource] = warned;
  return devices;
}

void TopologyDevicePlugin::LogDeviceList(
    size_t resource, const std::vector<plugin::Device>& devices) {
  if (logged_count_.size() < publishers_.size()) {
    logged_count_.resize(publishers_.size(), -1);
  }
  const auto count = static_cast<int64_t>(devices.size());
  if (logged_count_[resource] == count) return;
  const bool first = logged_count_[resource] < 0;
  logged_count_[resource] = count;
  LOG(INFO) << options_.config.resources[resource].name << ": "
            << (first ? "advertising " : "now advertising ") << count
            << " device(s)" << (devices.empty() ? "" : ":")
            << DeviceListLine(devices);
}

Status TopologyDevicePlugin::Publish(const std::shared_ptr<Snapshot>& snapshot,
                                     bool read_health) {
  std::vector<std::vector<plugin::Device>> lists;
  {
    MutexLock lock(mu_);
    size_t gone = 0;
    for (const auto& [address, index] : snapshot_->claims) {
      if (!snapshot->claims.contains(address)) {
        unhealthy_reasons_.erase(address);
        // One line per device up to a point: a PF's VFs going at once would
        // otherwise be hundreds of lines.
        if (++gone <= 16) {
          LOG(INFO) << options_.config.resources[index].name << ": "
                    << address.ToString() << " is gone";
        }
      }
    }
    if (gone > 16) LOG(INFO) << "and " << gone - 16 << " more devices are gone";
    if (gone > 0) {
      health_.ForgetIf([&](const PciAddress& address) {
        return !snapshot->claims.contains(address);
      });
    }
    snapshot_ = snapshot;
    for (size_t r = 0; r < publishers_.size(); ++r) {
      lists.push_back(DevicesOf(*snapshot, r, read_health));
    }
  }
  cdi_specs_.Write(*snapshot);
  Status result = OkStatus();
  for (size_t r = 0; r < publishers_.size(); ++r) {
    LogDeviceList(r, lists[r]);
    Status status = publishers_[r]->SetDevices(std::move(lists[r]));
    if (!status.ok()) {
      LOG(ERROR) << status.ToString();
      result = status;
    }
  }
  return result;
}

Status TopologyDevicePlugin::Rescan() {
  MutexLock rescan(rescan_mu_);
  (void)dra_held_.Read();  // the lists are published whole below
  auto snapshot = Discover(this->snapshot()->claims);
  {
    MutexLock lock(mu_);
    ++rescans_;
    if (!snapshot.ok()) {
      ++rescan_errors_;
      last_rescan_error_ = snapshot.status().ToString();
      LOG(ERROR) << "rescan failed: " << last_rescan_error_;
      return snapshot.status();
    }
    last_rescan_error_.clear();
  }
  Status status = Publish(*snapshot, /*read_health=*/true);
  // Discovery allocates and frees a lot; hand the freed pages back so an
  // idle plugin stays small.
  malloc_trim(0);
  return status;
}

Status TopologyDevicePlugin::SetHealthOverride(
    const std::string& device_id, std::optional<plugin::Health> health) {
  auto address = PciAddress::Parse(device_id);
  if (!address.ok()) return address.status();
  std::shared_ptr<Snapshot> same;
  {
    MutexLock lock(mu_);
    if (!snapshot_->claims.contains(*address)) {
      return NotFoundError("no resource claims " + device_id);
    }
    health_.SetOverride(*address, health);
    same = std::const_pointer_cast<Snapshot>(snapshot_);
  }
  MutexLock rescan(rescan_mu_);
  return Publish(same, /*read_health=*/false);
}

Status TopologyDevicePlugin::Reconcile() {
  MutexLock rescan(rescan_mu_);
  const bool held_changed = dra_held_.Read();
  std::shared_ptr<const Snapshot> snapshot;
  std::vector<PciAddress> candidates;
  {
    MutexLock lock(mu_);
    ++reconciles_;
    snapshot = snapshot_;
    candidates = health_.NeedRecheck();
  }
  // The reads happen outside mu_: sysfs can be slow on a sick device.
  std::vector<std::pair<PciAddress, std::optional<uint64_t>>> readings;
  readings.reserve(candidates.size());
  for (const PciAddress& address : candidates) {
    if (snapshot->claims.contains(address)) {
      readings.emplace_back(address,
                            plugin::ReadPciAerFatal(*reader_, address));
    }
  }
  bool changed = held_changed;
  {
    MutexLock lock(mu_);
    const auto now = options_.clock->Now();
    for (const auto& [address, aer] : readings) {
      const plugin::HealthVerdict verdict = health_.Recheck(address, aer, now);
      const auto known = unhealthy_reasons_.find(address);
      const std::string& reason =
          known == unhealthy_reasons_.end() ? std::string() : known->second;
      const auto problem = snapshot->nvidia.problems.find(address);
      const std::string& expected = problem == snapshot->nvidia.problems.end()
                                        ? verdict.reason
                                        : problem->second;
      changed = changed || expected != reason;
    }
  }
  if (!changed) return OkStatus();
  return Publish(std::const_pointer_cast<Snapshot>(snapshot),
                 /*read_health=*/false);
}

bool TopologyDevicePlugin::watching_uevents() const {
  return loop_->uevents_live();
}

void TopologyDevicePlugin::NotifyUevent(const std::string& action,
                                        const std::string& devpath) {
  loop_->OnUevent(action, devpath);
}

void TopologyDevicePlugin::Pass(const plugin::RescanLoop::Pass& pass) {
  // Without uevents nothing else tells of a device added, removed or
  // rebound: then every period is a full rescan. So too while a GPU's
  // driver information is missing or shared (no uevent tells of the driver
  // loading or /proc/driver/nvidia being mounted).
  const bool full =
      pass.uevent || !pass.uevents_live || !snapshot()->nvidia.problems.empty();
  (void)(full ? Rescan() : Reconcile());
}

Status TopologyDevicePlugin::Start() {
  Status status = runner_->Start();
  if (!status.ok()) return status;
  // The lists given at creation, before any rescan thread exists.
  {
    MutexLock rescan(rescan_mu_);
    for (size_t r = 0; r < publishers_.size(); ++r) {
      LogDeviceList(r, publishers_[r]->devices());
    }
  }
  // Serving started (its buffers are in place) and the copies above are
  // gone: hand the free pages back, as after each rescan.
  malloc_trim(0);
  // Watched since Create, before its discovery, so that nothing changes
  // unseen in between; again here after a Stop, with a full pass for what
  // changed meanwhile.
  if (options_.watch_uevents && !loop_->uevents_live() &&
      loop_->WatchUevents()) {
    loop_->RequestPass();
  }
  loop_->Start([this](const plugin::RescanLoop::Pass& pass) { Pass(pass); });
  return OkStatus();
}

void TopologyDevicePlugin::Stop() {
  loop_->Stop();
  if (runner_) runner_->Stop();
}

std::string TopologyDevicePlugin::DescribeMatches() const {
  const std::shared_ptr<const Snapshot> snapshot = this->snapshot();
  MatchesView view{.snapshot = *snapshot,
                   .config = options_.config,
                   .cdi_dir = options_.cdi_dir};
  for (size_t r = 0; r < publishers_.size(); ++r) {
    view.devices.push_back(publishers_[r]->devices());
    view.cdi_written.push_back(cdi_specs_.written(r));
  }
  {
    MutexLock lock(mu_);
    view.unhealthy_reasons = unhealthy_reasons_;
  }
  return device_plugin::DescribeMatches(view);
}

std::string TopologyDevicePlugin::MetricsText() const {
  constexpr std::string_view kPrefix = "topology_device_plugin";
  plugin::MetricsText text;
  WriteBuildInfo(text, kPrefix, options_.version);
  WriteResourceMetrics(text, kPrefix, publishers_);
  MutexLock lock(mu_);
  text.Family("topology_device_plugin_rescans_total", "counter",
              "Rescans of the PCI devices.");
  text.Sample("topology_device_plugin_rescans_total", {}, rescans_);
  text.Family("topology_device_plugin_reconciles_total", "counter",
              "Cheap checks of what changes without a uevent.");
  text.Sample("topology_device_plugin_reconciles_total", {}, reconciles_);
  text.Family("topology_device_plugin_rescan_errors_total", "counter",
              "Rescans that failed.");
  text.Sample("topology_device_plugin_rescan_errors_total", {}, rescan_errors_);
  const size_t undefined = UndefinedGpuCdiNames(*snapshot_).size();
  text.Family("topology_device_plugin_cdi_names_undefined", "gauge",
              "NVIDIA GPUs whose nvidia.com/gpu=<UUID> no CDI spec on the "
              "node defines (Allocate returns no CDI name for them).");
  text.Sample("topology_device_plugin_cdi_names_undefined", {}, undefined);
  return text.str();
}

std::string TopologyDevicePlugin::HealthProblem() const {
  if (!loop_->running()) return "not serving";
  MutexLock lock(mu_);
  if (!last_rescan_error_.empty())
    return "last rescan failed: " + last_rescan_error_;
  return "";
}

std::string TopologyDevicePlugin::ReadinessProblem() const {
  std::string problem = HealthProblem();
  if (!problem.empty()) return problem;
  for (const plugin::ResourcePublisher* publisher : publishers_) {
    if (publisher->superseded()) {
      problem += (problem.empty() ? "" : "; ") + publisher->resource_name() +
                 " is served by another instance of the plugin";
    } else if (!publisher->registered()) {
      problem += (problem.empty() ? "" : "; ") + publisher->resource_name() +
                 " is not registered with the kubelet";
    }
  }
  return problem;
}

}  // namespace topology::device_plugin
