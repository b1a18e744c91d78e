// topology-device-plugin: PCI devices chosen by selectors, published per
// resource with their NUMA affinity from libtopology, preferred allocations
// from the cost model, health from driver binding and AER counters, and
// hot-plug from kernel uevents plus periodic rescans.
#ifndef TOPOLOGY_DEVICE_PLUGIN_REFERENCE_PLUGIN_H_
#define TOPOLOGY_DEVICE_PLUGIN_REFERENCE_PLUGIN_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "topology/clock.h"
#include "topology/cost_model.h"
#include "topology/plugin/health.h"
#include "topology/plugin/plugin_runner.h"
#include "topology/plugin/rescan_loop.h"
#include "topology/plugin/uevent_monitor.h"
#include "topology/sysfs_reader.h"
#include "topology/thread_annotations.h"
#include "topology/topology.h"

#include "config.h"
#include "dra_held.h"
#include "nvidia.h"
#include "resource_cdi.h"
#include "selectors.h"

namespace topology::device_plugin {

struct PluginOptions {
  Config config;
  std::filesystem::path host_root = "/";
  plugin::RunnerOptions runner;
  // Period of the reconcile. While kernel uevents are watched it reads only
  // what changes without one (AER counters, devices waiting out their
  // recovery); without uevents it is a full rescan. Zero: never.
  std::chrono::nanoseconds rescan_interval = std::chrono::seconds(10);
  // How long a faulted device must stay quiet before it is Healthy again.
  std::chrono::nanoseconds recovery_period = std::chrono::seconds(60);
  // Listen for kernel uevents: a device added, removed, bound or unbound
  // (PCI), or a PCI network interface renamed (net), starts a full rescan.
  // Falls back to periodic full rescans when unavailable or when the
  // socket fails.
  bool watch_uevents = true;
  // Uevents come in bursts (a VF batch, a driver rebind): wait this long
  // after one before rescanning.
  std::chrono::milliseconds uevent_debounce{50};
  // The rescan loop's and the health recovery's time; tests give a
  // FakeClock.
  const Clock* clock = &Clock::Real();
  // Where the plugin writes the CDI specs of resources with a cdiKind (one
  // file each, topology-device-plugin-<kind>.json); empty: none written,
  // and no CDI names returned for them.
  std::filesystem::path cdi_dir = "/var/run/cdi";
  // Reported by the build_info metric.
  std::string version = "unknown";
  // The DRA driver's checkpoint of prepared claims on this node
  // (topology-dra-driver's <plugin dir>/prepared-claims.json): a device a
  // prepared claim holds is left out of the lists, read at the start and at
  // every reconcile and rescan, so a node moved back from DRA never hands a
  // device out twice. Absent file: nothing held. Empty path: not read.
  std::filesystem::path dra_claims;
};

// One discovery with everything derived from it; immutable once built.
struct Snapshot {
  explicit Snapshot(Topology t) : topology(std::move(t)), model(topology) {}
  Topology topology;
  CostModel model;
  Claims claims;  // device -> resource index
  // The GPUs of resources with `nvidia: true`, cross-checked.
  NvidiaInventory nvidia;
  // With `nvidia: true`: the CDI names the node's specs define (its
  // /etc/cdi and /var/run/cdi under the host root, and --cdi-dir); an
  // nvidia.com/gpu=<UUID> name is returned only when defined here.
  std::set<std::string> cdi_defined;
};

// The device nodes (container path = host path) Allocate gives for one
// device of a resource configured as `config`: the VFIO nodes of a device
// bound to vfio-pci, the configured patterns expanded under `root`, and
// for an NVIDIA GPU (`gpu` not null) its node and the control nodes.
StatusOr<std::vector<std::string>> NodePathsOf(
    const ResourceConfig& config, const PciDevice& device,
    const std::filesystem::path& root, const NvidiaGpuInformation* gpu);

// One discovery under `host_root` with what the plugin derives from it:
// the config's claims (sticky for `previous`), the NVIDIA inventory, the
// CDI names defined on the node. The device plugin and the DRA driver build
// their inventory with it.
StatusOr<std::shared_ptr<Snapshot>> DiscoverSnapshot(
    const Config& config, const std::filesystem::path& host_root,
    const SysfsReader& sysfs, const std::filesystem::path& cdi_dir,
    const Claims& previous);

// What a container gets for `device_ids` of the resource configured as
// `config` (the device plugin's Allocate answer): PCIDEVICE_<RESOURCE> with
// every address, the device nodes (VFIO, the configured patterns under
// `root`, NVIDIA's), NVIDIA's env and mounts, and the CDI names of a
// resource with a cdiKind when its spec is written. Read from `snapshot`
// and, for NVIDIA GPUs, the driver's information under `root` again. The
// DRA driver gives a claim's devices the same edits.
StatusOr<plugin::ContainerAllocation> AllocationFor(
    const ResourceConfig& config, const Snapshot& snapshot,
    const std::filesystem::path& root,
    const std::vector<std::string>& device_ids, bool cdi_spec_written);

class TopologyDevicePlugin {
 public:
  // Discovers the host once and assigns devices to resources.
  static StatusOr<std::unique_ptr<TopologyDevicePlugin>> Create(
      PluginOptions options);
  ~TopologyDevicePlugin();

  // Serves and registers every resource, then starts the rescan loop and the
  // uevent monitor.
  Status Start();
  void Stop();

  // Rescans now (also what the loop does). Errors keep the last snapshot.
  Status Rescan();
  // The cheap periodic check while uevents are watched (also what the loop
  // does then): rereads the AER counters of the devices that have one and
  // re-evaluates devices that are not healthy; publishes only when a
  // verdict changed. Reads nothing else.
  Status Reconcile();
  // A kernel uevent arrived (the monitor calls this; tests call it directly
  // after changing a fixture tree): rescan after the debounce delay. Events
  // of virtual devices (veth pairs of pods starting) are ignored; "closed"
  // turns the loop back to full rescans.
  void NotifyUevent(const std::string& action, const std::string& devpath);
  // Whether the uevent monitor runs and its socket works.
  bool watching_uevents() const;
  // Fault injection: force a device's health (nullopt clears), then publish.
  Status SetHealthOverride(const std::string& device_id,
                           std::optional<plugin::Health> health);

  // Whether resource `index`'s CDI spec is in place (names are returned
  // only then).
  bool cdi_spec_written(size_t index) const {
    return cdi_specs_.written(index);
  }

  // Human-readable claims per resource (--print-matches).
  std::string DescribeMatches() const;
  // Prometheus text exposition.
  std::string MetricsText() const;
  // Empty when healthy, else why not (for /healthz: liveness).
  std::string HealthProblem() const;
  // Empty when serving and every resource is registered with the kubelet,
  // else why not (for /readyz).
  std::string ReadinessProblem() const;

  plugin::PluginRunner& runner() { return *runner_; }
  std::shared_ptr<const Snapshot> snapshot() const;
  const PluginOptions& options() const { return options_; }

 private:
  class Handler;
  explicit TopologyDevicePlugin(PluginOptions options);
  StatusOr<std::shared_ptr<Snapshot>> Discover(const Claims& previous) const;
  // Publishes every resource's list from `snapshot` and the health state:
  // read afresh for each device with `read_health`, else as last judged.
  Status Publish(const std::shared_ptr<Snapshot>& snapshot, bool read_health)
      TOPOLOGY_REQUIRES(rescan_mu_);
  // Logs a resource's list at -v 0 the first time and when its size
  // changes (the first 16 devices, with NUMA nodes and health).
  void LogDeviceList(size_t resource,
                     const std::vector<plugin::Device>& devices)
      TOPOLOGY_REQUIRES(rescan_mu_);
  std::vector<plugin::Device> DevicesOf(const Snapshot& snapshot,
                                        size_t resource, bool read_health)
      TOPOLOGY_REQUIRES(mu_);
  // One pass of the rescan loop: a full rescan after a uevent, without
  // uevents, or while GPU driver information is missing; else a reconcile.
  void Pass(const plugin::RescanLoop::Pass& pass);

  PluginOptions options_;
  std::unique_ptr<SysfsReader> reader_;
  std::unique_ptr<plugin::PluginRunner> runner_;
  std::vector<plugin::ResourcePublisher*> publishers_;

  mutable Mutex mu_;
  std::shared_ptr<const Snapshot> snapshot_ TOPOLOGY_GUARDED_BY(mu_);
  plugin::HealthTracker health_ TOPOLOGY_GUARDED_BY(mu_);
  std::map<PciAddress, std::string> unhealthy_reasons_ TOPOLOGY_GUARDED_BY(mu_);
  std::vector<bool> mixed_locality_warned_ TOPOLOGY_GUARDED_BY(mu_);
  // Per resource: the device count last logged (-1: never), so that the
  // first list and every change in size are logged at -v 0.
  std::vector<int64_t> logged_count_ TOPOLOGY_GUARDED_BY(rescan_mu_);
  // The resources' CDI specs and whether each is in place.
  ResourceCdiSpecs cdi_specs_;
  uint64_t rescans_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  uint64_t reconciles_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  uint64_t rescan_errors_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  std::string last_rescan_error_ TOPOLOGY_GUARDED_BY(mu_);
  // Devices prepared claims of the DRA driver hold: not offered (read
  // again by each rescan and reconcile, under rescan_mu_).
  DraHeldDevices dra_held_;

  // One rescan at a time; taken before mu_.
  Mutex rescan_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  // The rescan loop and its uevent monitor (plugin/rescan_loop.h).
  std::unique_ptr<plugin::RescanLoop> loop_;
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_REFERENCE_PLUGIN_H_
