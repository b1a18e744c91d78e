// A node's devices published as resource.k8s.io/v1 ResourceSlices: one
// pool for the node, split into slices of at most 128 devices (64 when a
// device has taints), validated before anything is sent, kept in step
// with the API server: an unchanged inventory sends nothing, a changed one
// goes out as the pool's next generation, slices of this node and driver
// that do not belong (other pools, older generations, leftovers) are
// deleted, and slices deleted by someone else (the kubelet deletes its
// node's slices at its start) are published again at the next resync. The
// resync reads only the slices' names and resource versions while nothing
// changed, so an idle node with 10,000 devices costs a small list.
// Other nodes' and other drivers' slices are never touched.
#ifndef TOPOLOGY_DRAPLUGIN_RESOURCE_SLICES_H_
#define TOPOLOGY_DRAPLUGIN_RESOURCE_SLICES_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <variant>
#include <vector>

#include "topology/clock.h"
#include "topology/draplugin/attribute_value.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/slice_validation.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

namespace slice_sync {
struct Plan;         // slice_sync.h, private to the framework
struct EncodedPool;  // slice_sync.h
}  // namespace slice_sync

// At most this many devices in one slice, and when a device of the pool
// has taints or a list attribute (the API's
// ResourceSliceMaxDevicesWithAdvancedFeatures).
inline constexpr size_t kMaxDevicesPerSlice = kResourceSliceMaxDevices;
inline constexpr size_t kMaxAdvancedDevicesPerSlice =
    kResourceSliceMaxDevicesWithAdvancedFeatures;

struct DeviceTaint {
  std::string key = {};
  std::string value = {};
  std::string effect = "NoSchedule";  // NoSchedule, NoExecute or None
  friend bool operator==(const DeviceTaint&, const DeviceTaint&) = default;
};

// What one allocation of a shareable device may ask of a capacity
// (KEP-5075, gate DRAConsumableCapacity, beta since 1.36): `default` when
// the request names none, and either some valid values (at most 10,
// ascending, the default among them) or a range; a request is rounded up
// to the next valid amount. Quantities as text ("10Gi").
struct CapacityRequestPolicy {
  std::string default_value = {};
  std::vector<std::string> valid_values = {};
  struct Range {
    std::string min = {};
    std::string max = {};   // empty: the capacity's value
    std::string step = {};  // empty: any amount from min
    friend bool operator==(const Range&, const Range&) = default;
  };
  std::optional<Range> valid_range = {};
  friend bool operator==(const CapacityRequestPolicy&,
                         const CapacityRequestPolicy&) = default;
};

// One capacity of a device: its value, and for a device that allows
// multiple allocations, what each allocation may consume of it. A plain
// quantity converts: `device.capacity["memory"] = "80Gi"`.
struct DeviceCapacity {
  DeviceCapacity() = default;
  DeviceCapacity(std::string quantity)  // NOLINT(runtime/explicit)
      : value(std::move(quantity)) {}
  DeviceCapacity(const char* quantity)  // NOLINT(runtime/explicit)
      : value(quantity) {}
  std::string value = {};
  std::optional<CapacityRequestPolicy> request_policy = {};
  friend bool operator==(const DeviceCapacity&,
                         const DeviceCapacity&) = default;
};

// A set of counters that partitions of one piece of hardware draw from
// (KEP-4815, gate DRAPartitionableDevices, beta since 1.36): the scheduler
// never allocates devices together whose consumptions exceed a counter.
// Published in slices of their own in the device's pool (at most 8 sets a
// slice), as the API requires since 1.35.
struct CounterSet {
  std::string name = {};  // a DNS label, unique in the pool
  // counter name (a DNS label) -> quantity
  std::map<std::string, std::string> counters = {};
  friend bool operator==(const CounterSet&, const CounterSet&) = default;
};

// What a device draws from one counter set of its pool while allocated.
struct CounterConsumption {
  std::string counter_set = {};
  std::map<std::string, std::string> counters = {};  // name -> quantity
  friend bool operator==(const CounterConsumption&,
                         const CounterConsumption&) = default;
};

struct SliceDevice {
  std::string name = {};  // a DNS label, unique in the pool
  // Qualified names: "<domain>/<name>" or "<name>" (the driver's domain).
  std::map<std::string, AttributeValue> attributes = {};
  std::map<std::string, DeviceCapacity> capacity = {};  // "1", "80Gi"
  std::vector<DeviceTaint> taints = {};
  // Shared by capacity (KEP-5075): the scheduler may allocate the device to
  // several claims at once, each with a share id and the capacity it
  // consumes, as long as the sum fits.
  bool allow_multiple_allocations = false;
  // At most 2 counter sets, each of the device's pool.
  std::vector<CounterConsumption> consumes_counters = {};
  friend bool operator==(const SliceDevice&, const SliceDevice&) = default;
};

// A node's pool as one publish sends it: its devices (in slices of at most
// 128, 64 when a device has taints, counters or a list attribute), its
// counter sets (in slices of their own) and, where the devices that consume
// counters carry a string attribute telling their partition type (devices
// of one type consume the same counters), that attribute's qualified name
// (1.37, gate DRAPartitionableDevicesType, alpha: a server with the gate
// off drops it, and the publisher says so).
struct Pool {
  std::string name = {};
  std::vector<SliceDevice> devices = {};
  std::vector<CounterSet> counter_sets = {};
  std::string partition_type_attribute = {};
};

// INVALID_ARGUMENT naming the driver or the device and what is wrong, by
// the API server's rules (ValidateDriverName, and for each device those of
// ValidateResourceSlice: DNS-label names, unique; qualified attribute and
// capacity names in any domain; values; at most 32 attributes and
// capacities and 48 attribute values; at most 16 taints with label keys and
// values and the effects NoSchedule, NoExecute, None).
Status ValidateDevices(const std::string& driver,
                       const std::vector<SliceDevice>& devices);

// ValidateDevices of the pool's devices, and across its slices what the
// scheduler needs and no single slice's validation sees: counter set names
// unique in the pool, each device drawing only on counters the pool's sets
// have, and `partition_type_attribute` a string attribute of every device
// that consumes counters. INVALID_ARGUMENT naming the set or the device.
Status ValidatePool(const std::string& driver, const Pool& pool);

// The ResourceSlices SlicePublisher::Publish creates for `devices` as a
// new pool `pool` of `node` (generation 1, no owner reference): the bodies
// the API server receives, in order, built by the publisher's own plan. For
// tests: the testing kit's ValidatePublishedSlices judges them by the API
// server's rules. INTERNAL when a body cannot be built.
StatusOr<std::vector<std::string>> NewPoolSliceBodies(
    const std::string& driver, const std::string& node, const std::string& pool,
    const std::vector<SliceDevice>& devices);
// The same for a whole pool: its counter sets' slices too.
StatusOr<std::vector<std::string>> NewPoolSliceBodies(const std::string& driver,
                                                      const std::string& node,
                                                      const Pool& pool);

// resource.k8s.io/v1 ResourceSlices through a KubeClient, typed as
// client-go's ResourceSlices() client is: the verbs and paths in one place.
// Each answer is the server's (status and body, unread), or the transport's
// failure. Thread-safe as the client is.
class ResourceSliceClient {
 public:
  // `client` is not owned and must outlive this one.
  explicit ResourceSliceClient(KubeClient* client) : client_(client) {}

  // The ResourceSlices of `node` (of `driver` alone when not empty), listed
  // as the kubelet and the Go controller list them: with a field selector
  // on spec.nodeName (and spec.driver) where the server supports one; where
  // it answers 400 to it (no such field label), the whole list, and from
  // then on `*filter_here` is true and the caller keeps the slices of
  // `node` and `driver` itself. `accept` as KubeClient::Request's.
  StatusOr<HttpResponse> ListNode(const std::string& node,
                                  const std::string& driver, bool* filter_here,
                                  std::string_view accept = {}) const;
  // POST of a new slice (its metadata.generateName or name in `body`).
  StatusOr<HttpResponse> Create(std::string_view body) const;
  // PUT of the slice `name` (its resourceVersion in `body`).
  StatusOr<HttpResponse> Update(const std::string& name,
                                std::string_view body) const;
  StatusOr<HttpResponse> Delete(const std::string& name) const;
  // The ownerReference a slice of `node` carries, as the Go controller sets
  // it (a JSON array: the Node's apiVersion, kind, name and uid, controller
  // true), from one short GET of the Node of at most a Node's size; the
  // error says why it cannot be had (HTTP status, a Node not `node`'s).
  StatusOr<std::string> NodeOwnerReference(const std::string& node) const;

 private:
  KubeClient* const client_;
};

// ResourceSliceClient(&client).ListNode(node, driver, filter_here, accept).
StatusOr<HttpResponse> ListNodeSlices(KubeClient& client,
                                      const std::string& node,
                                      const std::string& driver,
                                      bool* filter_here,
                                      std::string_view accept = {});

class SlicePublisher {
 public:
  struct Options {
    // How often the published slices are compared with the API server's.
    std::chrono::milliseconds resync = std::chrono::seconds(5);
    // The resync's time; not owned. Tests give a FakeClock.
    const Clock* clock = &Clock::Real();
  };
  struct Stats {
    uint64_t syncs = 0;
    uint64_t checks = 0;  // resyncs that found the slices as last seen
    uint64_t creates = 0;
    uint64_t updates = 0;
    uint64_t deletes = 0;
    // Feature gates the API server has off, read from the fields it
    // dropped of a slice written (DRADeviceTaints, ...).
    std::set<std::string> disabled_features;
  };

  // `client` is not owned and must outlive the publisher.
  SlicePublisher(KubeClient* client, std::string driver, std::string node,
                 Options options);
  ~SlicePublisher();
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  // Sets the pool's devices and brings the API server in step now. The
  // same devices again, with the slices as the last full list found them,
  // cost one metadata-only list.
  // INVALID_ARGUMENT (nothing sent) for devices ValidateDevices refuses;
  // the API server's error otherwise (the resync tries again).
  Status Publish(std::string pool, std::vector<SliceDevice> devices)
      TOPOLOGY_EXCLUDES(mu_);
  // The same for a pool with counter sets (or a partition type): INVALID_
  // ARGUMENT for a pool ValidatePool refuses.
  Status Publish(Pool pool) TOPOLOGY_EXCLUDES(mu_);
  // The resync thread; Stop ends it (within a second). Idempotent.
  void Start() TOPOLOGY_EXCLUDES(mu_);
  void Stop() TOPOLOGY_EXCLUDES(mu_);

  // The last sync brought the API server in step.
  bool published() const TOPOLOGY_EXCLUDES(mu_);
  Stats stats() const TOPOLOGY_EXCLUDES(mu_);

 private:
  // One sync in the Go controller's phases (slice_sync.h): list what is
  // there, build what should be, compare, plan, apply.
  Status Sync() TOPOLOGY_EXCLUDES(mu_);
  // The plan's writes sent (deletes, then updates and creates, several in
  // flight), what the server stored kept. REQUIRES: sync_mu_.
  Status Apply(slice_sync::Plan plan, const std::string& pool,
               const std::vector<std::string>& wanted, size_t devices,
               const std::function<Status(Status)>& fail)
      TOPOLOGY_REQUIRES(sync_mu_) TOPOLOGY_EXCLUDES(mu_);
  // The one list of this node's and driver's slices (in full, or names and
  // versions only): with the field selector, or, once the server refused
  // it, without (filter_here_).
  StatusOr<HttpResponse> ListOurs(bool metadata_only) TOPOLOGY_EXCLUDES(mu_);
  // The Node's ownerReference, read once it can be. REQUIRES: sync_mu_.
  void LookUpOwner() TOPOLOGY_REQUIRES(sync_mu_) TOPOLOGY_EXCLUDES(mu_);
  // The resync's cheap look: this node's slices' names and resource
  // versions only (a metadata-only list); true when they are exactly those
  // the last full list found with nothing to write.
  bool Unchanged() TOPOLOGY_EXCLUDES(mu_);
  void Loop() TOPOLOGY_EXCLUDES(mu_);

  KubeClient* const client_;
  const ResourceSliceClient slices_;  // through client_
  const std::string driver_;
  const std::string node_;
  const Options options_;

  // Syncs one at a time (Publish and the resync thread).
  Mutex sync_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  mutable Mutex mu_;
  std::condition_variable_any wake_;
  std::string pool_ TOPOLOGY_GUARDED_BY(mu_);
  // The pool as sent (slice_sync::EncodedPool: the devices' JSON in
  // deflated blocks, the counter sets').
  std::shared_ptr<const slice_sync::EncodedPool> devices_
      TOPOLOGY_GUARDED_BY(mu_);
  bool have_devices_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool published_ TOPOLOGY_GUARDED_BY(mu_) = false;
  // The API server refused a field selector on spec.*: list and filter.
  bool filter_here_ TOPOLOGY_GUARDED_BY(mu_) = false;
  // name -> resourceVersion of this node's slices when the last full list
  // needed no write; empty when unknown (the next resync lists in full).
  std::map<std::string, std::string> seen_ TOPOLOGY_GUARDED_BY(mu_);
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  Stats stats_ TOPOLOGY_GUARDED_BY(mu_);
  std::thread loop_;
  // The Node's ownerReference (JSON text), once the Node was read: slices
  // are owned by their Node, as the Go controller sets it, and go with it.
  // Empty while unknown (no "get nodes" right, no such Node): the slices
  // are published without, and the next sync asks again.
  std::string owner_ TOPOLOGY_GUARDED_BY(sync_mu_);
  bool owner_warned_ TOPOLOGY_GUARDED_BY(sync_mu_) = false;
  // A slice's devices as sent -> as the API server stored them, where it
  // dropped fields (a feature gate off): the stored form counts as in step,
  // said once, instead of a new generation written at every sync.
  std::map<std::string, std::string> stored_as_ TOPOLOGY_GUARDED_BY(sync_mu_);
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_RESOURCE_SLICES_H_
