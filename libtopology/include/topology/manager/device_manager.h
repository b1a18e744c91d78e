// DeviceManager: the device side of the kubelet's admission, as a
// HintProvider. It knows each extended resource's devices (from a device
// plugin's ListAndWatch), generates topology hints with the kubelet device
// manager's rules (as of v1.37, over the NUMA nodes that host a device of
// the resource, every node when none does), and allocates after admission
// with its rules: reusable
// init-container devices first, then devices aligned with the stored
// affinity (asking the plugin's GetPreferredAllocation only when there are
// more aligned devices than needed), then the rest.
//
// It is the only holder of the device lists and of the allocations, each
// with the plugin's Allocate response (as the kubelet's podDevices keeps
// AllocResp beside the device ids): whoever shows an allocation asks it.
//
// Thread safety: all methods lock an internal mutex. Plugin endpoints are
// called without it (as the kubelet releases its mutex around
// GetPreferredAllocation and Allocate), and are held by shared ownership, so
// a plugin that re-registers or goes away during a call never leaves a
// dangling endpoint behind.
#ifndef TOPOLOGY_MANAGER_DEVICE_MANAGER_H_
#define TOPOLOGY_MANAGER_DEVICE_MANAGER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "topology/export.h"
#include "topology/manager/hint_provider.h"
#include "topology/manager/numa_mask.h"
#include "topology/manager/store.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::manager {

struct Device {
  std::string id = {};
  // NUMA nodes from the plugin's TopologyInfo; empty = no topology.
  std::vector<int> numa_nodes = {};
  bool healthy = true;
};

// The plugin side of a resource: what the kubelet reaches over gRPC.
class DevicePluginEndpoint {
 public:
  virtual ~DevicePluginEndpoint() = default;
  // Whether the plugin advertised GetPreferredAllocation.
  virtual bool PreferredAllocationAvailable() const = 0;
  virtual StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size) = 0;
  // The Allocate call for one container's devices of this resource. The
  // answer is the plugin's response for the container, opaque to the
  // manager (the host keeps a serialized ContainerAllocateResponse); it is
  // stored with the allocation.
  virtual StatusOr<std::string> Allocate(
      const std::vector<std::string>& device_ids) = 0;
};

class TOPOLOGY_EXPORT DeviceManager final : public HintProvider {
 public:
  // `store` (the topology manager) must outlive this object.
  DeviceManager(std::vector<int> numa_node_ids, const Store* store);

  // Registers `resource` or replaces its device list (a full ListAndWatch
  // update). `endpoint` may be null (no plugin calls); shared, so that a
  // call in flight keeps it alive after a replacement.
  void UpdateResource(const std::string& resource, std::vector<Device> devices,
                      std::shared_ptr<DevicePluginEndpoint> endpoint);
  void RemoveResource(const std::string& resource);
  bool HasResource(const std::string& resource) const;
  // The kubelet's isDevicePluginResource: registered now, or still held by
  // an allocation (a plugin gone past its grace period).
  bool IsDevicePluginResource(const std::string& resource) const;
  // Drops every endpoint reference (device lists and allocations stay).
  void ForgetEndpoints();
  // A new registration of a known resource: calls go to `endpoint` at once,
  // before its first list arrives (as the kubelet switches endpoints at
  // registration). No-op for an unknown resource.
  void SetEndpoint(const std::string& resource,
                   std::shared_ptr<DevicePluginEndpoint> endpoint);

  ProviderHints GetTopologyHints(const Pod& pod,
                                 const Container& container) override;
  ProviderHints GetPodTopologyHints(const Pod& pod) override;
  Status Allocate(const Pod& pod, const Container& container) override;

  // Frees everything allocated to the pod.
  void RemovePod(const std::string& pod_uid);

  // Opt-in joint choice for containers that ask for several device
  // resources: given, per resource, the candidate devices (the aligned ones
  // when they suffice) and the count, returns the chosen ids per resource.
  // Used instead of the per-resource GetPreferredAllocation path when every
  // resource of the container has enough aligned devices and nothing to
  // reuse; on an error or an invalid answer the kubelet's path is taken.
  struct JointPool {
    std::vector<std::string> candidates = {};  // sorted
    int count = 0;
  };
  using JointSelector =
      std::function<StatusOr<std::map<std::string, std::vector<std::string>>>(
          const std::map<std::string, JointPool>&)>;
  void SetJointSelector(JointSelector selector);

  // One container's devices of one resource.
  struct Allocation {
    std::string pod_uid = {};
    std::string container = {};
    std::string resource = {};
    std::vector<std::string> device_ids = {};  // sorted
  };
  // Puts back an allocation from a checkpoint (the resource may not be
  // registered yet); the devices count as in use from now on.
  void Restore(const std::string& pod_uid, const std::string& container,
               const std::string& resource,
               std::vector<std::string> device_ids);
  // Every allocation, including those reserved for an Allocate call in
  // flight.
  std::vector<Allocation> Allocations() const;
  // Devices allocated to a container, sorted.
  std::vector<std::string> ContainerDevices(const std::string& pod_uid,
                                            const std::string& container,
                                            const std::string& resource) const;
  // What the plugin's Allocate answered for a container's devices of
  // `resource`; empty when it was not called (no endpoint, a restored
  // allocation) or the container holds none.
  std::string AllocateResponse(const std::string& pod_uid,
                               const std::string& container,
                               const std::string& resource) const;
  // What one registered resource has now.
  struct ResourceSnapshot {
    std::vector<Device> devices = {};      // sorted by id
    std::vector<std::string> in_use = {};  // sorted
  };
  // Every registered resource, read at one instant.
  std::map<std::string, ResourceSnapshot> Snapshot() const;
  // A resource's devices, sorted by id; empty when unknown.
  std::vector<Device> Devices(const std::string& resource) const;
  // Every device of `resource` turns unhealthy (its plugin went away: the
  // kubelet keeps the capacity and zeroes what is allocatable). The
  // endpoint is kept until a new registration replaces it.
  void MarkUnhealthy(const std::string& resource);
  // Devices in use for a resource, sorted.
  std::vector<std::string> InUse(const std::string& resource) const;

  // The pod-level request of an extended resource: the larger of (app
  // containers + sidecars) and (each regular init container + the sidecars
  // started before it).
  static int64_t PodRequest(const Pod& pod, const std::string& resource);

 private:
  // A resource's devices in one flat table, sorted by id, with what every
  // admission asks of each device kept beside it in compact arrays (the
  // records themselves are large): its NUMA mask, health, whether it lists
  // a node, and how many allocations hold it. What is free is then one pass
  // over plain arrays, with no id compared or copied, whatever the number of
  // pods held.
  struct Resource {
    std::vector<Device> devices = {};    // sorted by id, unique
    std::vector<NumaMask> masks = {};    // per device
    std::vector<uint8_t> healthy = {};   // per device: devices[i].healthy
    std::vector<uint8_t> located = {};   // per device: any NUMA node listed
    std::vector<uint32_t> holders = {};  // allocations holding each device
    bool has_topology = false;           // any device with NUMA nodes
    // The NUMA nodes hints combine: those hosting a device, else all.
    std::vector<int> node_ids = {};
    bool any_healthy = false;
    std::shared_ptr<DevicePluginEndpoint> endpoint = {};
    // The index of `id`, or -1.
    int64_t Find(const std::string& id) const;
    bool Free(size_t i) const { return healthy[i] != 0 && holders[i] == 0; }
  };
  using DeviceSet = std::set<std::string>;
  // Indices into a Resource's table, ascending (so the ids are sorted too).
  using IndexList = std::vector<uint32_t>;

  // One container's devices of one resource and the plugin's answer.
  struct Held {
    DeviceSet ids = {};
    std::string response = {};
  };
  using ContainerKey = std::pair<std::string, std::string>;  // (pod, name)

  HintList Generate(const Resource& r, const IndexList& available,
                    const DeviceSet& reusable, int64_t request) const;
  bool IsDevicePluginResourceLocked(const std::string& resource) const
      TOPOLOGY_REQUIRES(mutex_);
  // Free, healthy devices of a registered resource.
  static IndexList Available(const Resource& r);
  // The table indices of `ids` that are in it, ascending.
  static IndexList IndicesOf(const Resource& r, const DeviceSet& ids);
  DeviceSet PodDevices(const std::string& pod_uid,
                       const std::string& resource) const
      TOPOLOGY_REQUIRES(mutex_);
  // Sets the devices of one container's allocation of `resource` (empty:
  // removes it), keeping the holder counts in step.
  // keeping the holder counts in step; the response is dropped.
  void SetAllocation(const ContainerKey& key, const std::string& resource,
                     DeviceSet devices) TOPOLOGY_REQUIRES(mutex_);
  // Counts `ids` as held (`delta` +1) or no longer held (-1).
  void Hold(const std::string& resource, const DeviceSet& ids, int delta)
      TOPOLOGY_REQUIRES(mutex_);
  // mutex_ is released around the plugin's GetPreferredAllocation and held
  // again on return.
  StatusOr<DeviceSet> DevicesToAllocate(const Pod& pod,
                                        const Container& container,
                                        const std::string& resource,
                                        int64_t required, DeviceSet* reusable)
      TOPOLOGY_REQUIRES(mutex_);
  // Chosen devices per resource from the joint selector, or empty.
  std::map<std::string, DeviceSet> JointChoice(const Pod& pod,
                                               const Container& container)
      TOPOLOGY_REQUIRES(mutex_);

  const std::vector<int> numa_node_ids_;
  const Store* const store_;
  mutable Mutex mutex_;
  std::map<std::string, Resource> resources_ TOPOLOGY_GUARDED_BY(mutex_);
  // (pod uid, container) -> resource -> devices and Allocate response
  std::map<ContainerKey, std::map<std::string, Held>> allocations_
      TOPOLOGY_GUARDED_BY(mutex_);
  JointSelector joint_selector_ TOPOLOGY_GUARDED_BY(mutex_);
  // Devices of finished init containers that later containers may reuse.
  std::string reuse_pod_ TOPOLOGY_GUARDED_BY(mutex_);
  std::map<std::string, DeviceSet> reusable_ TOPOLOGY_GUARDED_BY(mutex_);
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_DEVICE_MANAGER_H_
