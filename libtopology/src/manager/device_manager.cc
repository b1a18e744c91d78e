#include "topology/manager/device_manager.h"

#include <algorithm>
#include <climits>
#include <iterator>

#include "topology/manager/numa_hints.h"

namespace topology::manager {
namespace {

NumaMask MaskOf(const Device& device) {
  uint64_t bits = 0;
  for (int id : device.numa_nodes) {
    if (id >= 0 && id < NumaMask::kMaxNodes) bits |= uint64_t{1} << id;
  }
  return NumaMask::FromBits(bits);
}

std::vector<std::string> Sorted(const std::set<std::string>& set) {
  return std::vector<std::string>(set.begin(), set.end());
}

// Quantities are 64-bit, as in the kubelet. A count beyond INT_MAX exceeds
// any device list, so saturating keeps every comparison's answer.
int Saturate(int64_t count) {
  return static_cast<int>(std::clamp<int64_t>(count, 0, INT_MAX));
}

}  // namespace

DeviceManager::DeviceManager(std::vector<int> numa_node_ids, const Store* store)
    : numa_node_ids_(std::move(numa_node_ids)), store_(store) {}

void DeviceManager::UpdateResource(
    const std::string& resource, std::vector<Device> devices,
    std::shared_ptr<DevicePluginEndpoint> endpoint) {
  std::lock_guard<std::mutex> lock(mutex_);
  Resource& r = resources_[resource];
  r.devices.clear();
  for (Device& d : devices) {
    const std::string id = d.id;
    r.devices[id] = std::move(d);  // duplicates: the last one wins
  }
  r.endpoint = std::move(endpoint);
}

void DeviceManager::SetEndpoint(
    const std::string& resource,
    std::shared_ptr<DevicePluginEndpoint> endpoint) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (auto it = resources_.find(resource); it != resources_.end()) {
    it->second.endpoint = std::move(endpoint);
  }
}

void DeviceManager::ForgetEndpoints() {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [name, resource] : resources_) resource.endpoint.reset();
}

void DeviceManager::RemoveResource(const std::string& resource) {
  std::lock_guard<std::mutex> lock(mutex_);
  resources_.erase(resource);
}

bool DeviceManager::HasResource(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return resources_.count(resource) != 0;
}

bool DeviceManager::IsDevicePluginResource(const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return IsDevicePluginResourceLocked(resource);
}

bool DeviceManager::IsDevicePluginResourceLocked(
    const std::string& resource) const {
  if (resources_.count(resource) != 0) return true;
  return std::any_of(
      allocations_.begin(), allocations_.end(),
      [&](const auto& entry) { return entry.second.count(resource) != 0; });
}

bool DeviceManager::HasTopology(const Resource& r) const {
  return std::any_of(r.devices.begin(), r.devices.end(), [](const auto& d) {
    return !d.second.numa_nodes.empty();
  });
}

HintList DeviceManager::Generate(const Resource& r, const DeviceList& available,
                                 const DeviceSet& reusable,
                                 int64_t request) const {
  HintRequest hint_request;
  hint_request.node_ids = numa_node_ids_;
  hint_request.request = Saturate(request);
  hint_request.all_items.reserve(r.devices.size());
  for (const auto& [id, device] : r.devices) {
    hint_request.all_items.push_back(MaskOf(device));
  }
  // Both lists are sorted like the device map: one walk each.
  const auto masks = [&](const auto& ids, std::vector<NumaMask>& out) {
    auto d = r.devices.begin();
    for (const std::string& id : ids) {
      while (d != r.devices.end() && d->first < id) ++d;
      if (d == r.devices.end()) break;
      if (d->first == id) out.push_back(MaskOf(d->second));
    }
  };
  masks(available, hint_request.available_items);
  masks(reusable, hint_request.reusable_items);
  return GenerateHintList(hint_request, HintForm::kAuto);
}

DeviceManager::DeviceList DeviceManager::Available(
    const std::string& resource) const {
  DeviceList available;
  const auto r = resources_.find(resource);
  if (r == resources_.end()) return available;
  DeviceSet in_use;
  for (const auto& [key, by_resource] : allocations_) {
    if (auto it = by_resource.find(resource); it != by_resource.end()) {
      in_use.insert(it->second.begin(), it->second.end());
    }
  }
  available.reserve(r->second.devices.size());
  for (const auto& [id, device] : r->second.devices) {
    if (device.healthy && (in_use.empty() || !in_use.contains(id))) {
      available.push_back(id);
    }
  }
  return available;
}

DeviceManager::DeviceSet DeviceManager::PodDevices(
    const std::string& pod_uid, const std::string& resource) const {
  DeviceSet devices;
  for (const auto& [key, by_resource] : allocations_) {
    if (key.first != pod_uid) continue;
    if (auto it = by_resource.find(resource); it != by_resource.end()) {
      devices.insert(it->second.begin(), it->second.end());
    }
  }
  return devices;
}

ProviderHints DeviceManager::GetTopologyHints(const Pod& pod,
                                              const Container& container) {
  std::lock_guard<std::mutex> lock(mutex_);
  ProviderHints hints;
  for (const auto& [resource, quantity] : container.limits) {
    if (!IsDevicePluginResourceLocked(resource)) continue;
    const auto r = resources_.find(resource);
    const int64_t requested = quantity;
    if (r == resources_.end() || !HasTopology(r->second)) {
      // Held by allocations only (plugin gone): no topology alignment.
      hints[resource] = std::nullopt;
      continue;
    }
    // Already allocated (a restart): regenerate from exactly those devices.
    const auto key = std::make_pair(pod.uid, container.name);
    if (auto a = allocations_.find(key); a != allocations_.end()) {
      if (auto it = a->second.find(resource);
          it != a->second.end() && !it->second.empty()) {
        hints[resource] =
            static_cast<int64_t>(it->second.size()) != requested
                ? std::vector<TopologyHint>{}
                : Generate(r->second, Sorted(it->second), {}, requested);
        continue;
      }
    }
    const DeviceList available = Available(resource);
    DeviceSet reusable;
    if (reuse_pod_ == pod.uid) {
      if (auto it = reusable_.find(resource); it != reusable_.end()) {
        reusable = it->second;
      }
    }
    // |available ∪ reusable|
    size_t both = available.size();
    for (const std::string& id : reusable) {
      if (!std::binary_search(available.begin(), available.end(), id)) ++both;
    }
    if (static_cast<int64_t>(both) < requested) {
      hints[resource] = std::vector<TopologyHint>{};
      continue;
    }
    hints[resource] = Generate(r->second, available, reusable, requested);
  }
  return hints;
}

int64_t DeviceManager::PodRequest(const Pod& pod, const std::string& resource) {
  const auto limit = [&](const Container& c) -> int64_t {
    const auto it = c.limits.find(resource);
    return it == c.limits.end() ? 0 : std::max<int64_t>(it->second, 0);
  };
  // Sums saturate: a hostile manifest cannot overflow them.
  const auto add = [](int64_t a, int64_t b) {
    int64_t sum = 0;
    return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
  };
  int64_t sidecars = 0;
  int64_t init_peak = 0;
  for (const Container& c : pod.init_containers) {
    if (c.restartable) {
      sidecars = add(sidecars, limit(c));
      init_peak = std::max(init_peak, sidecars);
    } else {
      init_peak = std::max(init_peak, add(limit(c), sidecars));
    }
  }
  int64_t apps = sidecars;
  for (const Container& c : pod.containers) apps = add(apps, limit(c));
  return std::max(apps, init_peak);
}

ProviderHints DeviceManager::GetPodTopologyHints(const Pod& pod) {
  std::set<std::string> names;
  for (const Container& c : pod.init_containers) {
    for (const auto& [resource, q] : c.limits) names.insert(resource);
  }
  for (const Container& c : pod.containers) {
    for (const auto& [resource, q] : c.limits) names.insert(resource);
  }
  std::lock_guard<std::mutex> lock(mutex_);
  ProviderHints hints;
  for (const std::string& resource : names) {
    if (!IsDevicePluginResourceLocked(resource)) continue;
    const auto r = resources_.find(resource);
    const int64_t requested = PodRequest(pod, resource);
    if (r == resources_.end() || !HasTopology(r->second)) {
      hints[resource] = std::nullopt;
      continue;
    }
    const DeviceSet allocated = PodDevices(pod.uid, resource);
    if (!allocated.empty()) {
      hints[resource] =
          static_cast<int64_t>(allocated.size()) != requested
              ? HintList(std::vector<TopologyHint>{})
              : Generate(r->second, Sorted(allocated), {}, requested);
      continue;
    }
    const DeviceList available = Available(resource);
    if (static_cast<int64_t>(available.size()) < requested) {
      hints[resource] = std::vector<TopologyHint>{};
      continue;
    }
    hints[resource] = Generate(r->second, available, {}, requested);
  }
  return hints;
}

StatusOr<DeviceManager::DeviceSet> DeviceManager::DevicesToAllocate(
    std::unique_lock<std::mutex>& lock, const Pod& pod,
    const Container& container, const std::string& resource, int64_t required,
    DeviceSet* reusable) {
  const auto key = std::make_pair(pod.uid, container.name);
  if (auto a = allocations_.find(key); a != allocations_.end()) {
    if (auto it = a->second.find(resource); it != a->second.end()) {
      if (static_cast<int64_t>(it->second.size()) != required) {
        return FailedPreconditionError(
            "pod \"" + pod.name + "\" container \"" + container.name +
            "\" changed request for resource \"" + resource + "\" from " +
            std::to_string(it->second.size()) + " to " +
            std::to_string(required));
      }
      return DeviceSet{};  // already allocated
    }
  }
  if (resources_.find(resource) == resources_.end()) {
    return FailedPreconditionError("cannot allocate unregistered device " +
                                   resource);
  }
  int64_t needed = required;
  DeviceSet allocated;
  {
    const Resource& r = resources_.at(resource);
    if (needed > 0 && reusable->empty() &&
        std::none_of(r.devices.begin(), r.devices.end(),
                     [](const auto& d) { return d.second.healthy; })) {
      return FailedPreconditionError(
          "no healthy devices present; cannot allocate unhealthy devices " +
          resource);
    }
  }
  const auto take_from = [&](const std::vector<std::string>& devices) {
    for (const std::string& id : devices) {
      if (needed == 0) break;
      if (allocated.insert(id).second) --needed;
    }
    return needed == 0;
  };
  if (take_from(Sorted(*reusable))) return allocated;

  // The pools, split by the stored affinity: aligned, unaligned, no
  // topology. Recomputed after every plugin call, for which the lock is
  // released: the list may change (or the resource go) meanwhile.
  std::vector<std::string> aligned;
  std::vector<std::string> unaligned;
  std::vector<std::string> no_affinity;
  DeviceList available;
  std::shared_ptr<DevicePluginEndpoint> endpoint;
  const TopologyHint hint = store_->GetAffinity(pod.uid, container.name);
  const auto split = [&]() -> Status {
    const auto r = resources_.find(resource);
    if (r == resources_.end()) {
      return FailedPreconditionError("cannot allocate unregistered device " +
                                     resource);
    }
    aligned.clear();
    unaligned.clear();
    no_affinity.clear();
    available = Available(resource);
    if (!allocated.empty()) {
      std::erase_if(available, [&](const std::string& id) {
        return allocated.contains(id);
      });
    }
    endpoint = r->second.endpoint;
    const bool use_affinity =
        HasTopology(r->second) && hint.affinity.has_value();
    // `available` is a sorted subset of the sorted device map: one walk.
    auto d = r->second.devices.begin();
    for (const std::string& id : available) {
      while (d->first < id) ++d;
      const Device& device = d->second;
      if (!use_affinity || device.numa_nodes.empty()) {
        no_affinity.push_back(id);
      } else if (hint.affinity->AnySet(device.numa_nodes)) {
        aligned.push_back(id);
      } else {
        unaligned.push_back(id);
      }
    }
    return OkStatus();
  };
  if (Status status = split(); !status.ok()) return status;
  if (static_cast<int64_t>(available.size()) < needed) {
    return ResourceExhaustedError(
        "requested number of devices unavailable for " + resource +
        ". Requested: " + std::to_string(needed) +
        ", Available: " + std::to_string(available.size()));
  }
  // Asks the plugin without holding the lock, then takes back only what is
  // still free.
  const auto preferred = [&](const std::vector<std::string>& pool)
      -> StatusOr<std::vector<std::string>> {
    if (endpoint == nullptr || !endpoint->PreferredAllocationAvailable()) {
      return std::vector<std::string>{};
    }
    // The pool and the devices already chosen, sorted and unique (the pool
    // is sorted: it is drawn from `available` in order).
    std::vector<std::string> offer;
    offer.reserve(pool.size() + allocated.size());
    std::set_union(pool.begin(), pool.end(), allocated.begin(), allocated.end(),
                   std::back_inserter(offer));
    const std::shared_ptr<DevicePluginEndpoint>& callee = endpoint;
    lock.unlock();
    auto answer = callee->GetPreferredAllocation(offer, Sorted(allocated),
                                                 Saturate(required));
    lock.lock();
    if (Status status = split(); !status.ok()) return status;
    return answer;
  };
  // The plugin's answer, in its order, without what is not in `pool`
  // (sorted).
  const auto within = [](const std::vector<std::string>& ids,
                         const std::vector<std::string>& pool) {
    std::vector<std::string> out;
    for (const std::string& id : ids) {
      if (std::binary_search(pool.begin(), pool.end(), id)) out.push_back(id);
    }
    return out;
  };
  if (needed < static_cast<int64_t>(aligned.size())) {
    // More aligned devices than needed: let the plugin choose among them.
    auto answer = preferred(aligned);
    if (!answer.ok()) return answer.status();
    if (take_from(within(*answer, aligned)) || take_from(aligned)) {
      return allocated;
    }
    // The list shrank during the call: fall through to the wider pools.
    if (take_from(unaligned) || take_from(no_affinity)) return allocated;
  } else {
    if (take_from(aligned)) return allocated;
    // `preferred` builds its offer before the call and recomputes
    // `available` only after it, so the pool can be `available` itself.
    auto answer = preferred(available);
    if (!answer.ok()) return answer.status();
    if (take_from(within(*answer, available)) || take_from(aligned) ||
        take_from(unaligned) || take_from(no_affinity)) {
      return allocated;
    }
  }
  return InternalError(
      "unexpectedly allocated less resources than required. "
      "Requested: " +
      std::to_string(required) + ", Got: " + std::to_string(required - needed));
}

Status DeviceManager::Allocate(const Pod& pod, const Container& container) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (reuse_pod_ != pod.uid) {
    reuse_pod_ = pod.uid;
    reusable_.clear();
  }
  const bool is_init =
      std::any_of(pod.init_containers.begin(), pod.init_containers.end(),
                  [&](const Container& c) { return c.name == container.name; });
  const bool restartable_init =
      is_init &&
      std::any_of(pod.init_containers.begin(), pod.init_containers.end(),
                  [&](const Container& c) {
                    return c.name == container.name && c.restartable;
                  });
  const auto key = std::make_pair(pod.uid, container.name);
  std::map<std::string, DeviceSet> joint = JointChoice(pod, container);
  for (const auto& [resource, quantity] : container.limits) {
    if (!IsDevicePluginResourceLocked(resource)) continue;
    auto chosen = joint.count(resource)
                      ? StatusOr<DeviceSet>(joint[resource])
                      : DevicesToAllocate(lock, pod, container, resource,
                                          quantity, &reusable_[resource]);
    if (!chosen.ok()) return chosen.status();
    if (chosen->empty()) continue;
    // Reserve before the call, so that a concurrent admission never picks
    // the same devices, and call the plugin without holding the lock (the
    // shared endpoint stays alive even if the plugin re-registers).
    allocations_[key][resource] = *chosen;
    std::shared_ptr<DevicePluginEndpoint> endpoint;
    if (auto r = resources_.find(resource); r != resources_.end()) {
      endpoint = r->second.endpoint;
    }
    if (endpoint) {
      lock.unlock();
      Status status = endpoint->Allocate(Sorted(*chosen));
      lock.lock();
      if (!status.ok()) {
        if (auto a = allocations_.find(key); a != allocations_.end()) {
          a->second.erase(resource);
          if (a->second.empty()) allocations_.erase(a);
        }
        return status;
      }
    }
    DeviceSet& reusable = reusable_[resource];
    if (is_init && !restartable_init) {
      // A regular init container's devices are free again for later
      // containers of the same pod.
      reusable.insert(chosen->begin(), chosen->end());
    } else {
      for (const std::string& id : *chosen) reusable.erase(id);
    }
  }
  return OkStatus();
}

void DeviceManager::SetJointSelector(JointSelector selector) {
  std::lock_guard<std::mutex> lock(mutex_);
  joint_selector_ = std::move(selector);
}

std::map<std::string, DeviceManager::DeviceSet> DeviceManager::JointChoice(
    const Pod& pod, const Container& container) {
  if (!joint_selector_) return {};
  const auto key = std::make_pair(pod.uid, container.name);
  const TopologyHint hint = store_->GetAffinity(pod.uid, container.name);
  std::map<std::string, JointPool> pools;
  for (const auto& [resource, quantity] : container.limits) {
    const auto r = resources_.find(resource);
    if (r == resources_.end() || quantity <= 0) continue;
    if (allocations_.count(key) && allocations_[key].count(resource)) return {};
    if (quantity > static_cast<int64_t>(r->second.devices.size())) return {};
    if (!reusable_[resource].empty()) return {};
    const DeviceList available = Available(resource);
    JointPool pool;
    pool.count = Saturate(quantity);
    for (const std::string& id : available) {
      const Device& device = r->second.devices.at(id);
      const bool aligned = !HasTopology(r->second) || !hint.affinity ||
                           hint.affinity->AnySet(device.numa_nodes);
      if (aligned) pool.candidates.push_back(id);
    }
    if (static_cast<int>(pool.candidates.size()) < pool.count) return {};
    pools[resource] = std::move(pool);
  }
  if (pools.size() < 2) return {};
  auto answer = joint_selector_(pools);
  if (!answer.ok()) return {};
  std::map<std::string, DeviceSet> chosen;
  for (const auto& [resource, pool] : pools) {
    auto it = answer->find(resource);
    if (it == answer->end()) return {};
    DeviceSet ids(it->second.begin(), it->second.end());
    if (static_cast<int>(ids.size()) != pool.count) return {};
    for (const std::string& id : ids) {
      if (!std::binary_search(pool.candidates.begin(), pool.candidates.end(),
                              id)) {
        return {};
      }
    }
    chosen[resource] = std::move(ids);
  }
  return chosen;
}

void DeviceManager::Restore(const std::string& pod_uid,
                            const std::string& container,
                            const std::string& resource,
                            std::vector<std::string> device_ids) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_[{pod_uid, container}][resource] =
      DeviceSet(device_ids.begin(), device_ids.end());
}

std::vector<DeviceManager::Allocation> DeviceManager::Allocations() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Allocation> out;
  for (const auto& [key, by_resource] : allocations_) {
    for (const auto& [resource, ids] : by_resource) {
      out.push_back({key.first, key.second, resource,
                     std::vector<std::string>(ids.begin(), ids.end())});
    }
  }
  return out;
}

void DeviceManager::RemovePod(const std::string& pod_uid) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Keyed by (pod, container): the pod's entries are one range.
  auto it = allocations_.lower_bound({pod_uid, std::string()});
  while (it != allocations_.end() && it->first.first == pod_uid)
    it = allocations_.erase(it);
  if (reuse_pod_ == pod_uid) {
    reuse_pod_.clear();
    reusable_.clear();
  }
}

std::vector<std::string> DeviceManager::ContainerDevices(
    const std::string& pod_uid, const std::string& container,
    const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto a = allocations_.find({pod_uid, container});
  if (a == allocations_.end()) return {};
  const auto it = a->second.find(resource);
  return it == a->second.end() ? std::vector<std::string>{}
                               : Sorted(it->second);
}

std::vector<std::string> DeviceManager::InUse(
    const std::string& resource) const {
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceSet in_use;
  for (const auto& [key, by_resource] : allocations_) {
    if (auto it = by_resource.find(resource); it != by_resource.end()) {
      in_use.insert(it->second.begin(), it->second.end());
    }
  }
  return Sorted(in_use);
}

}  // namespace topology::manager
