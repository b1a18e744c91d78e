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
  // Sorted by id; of duplicates, the last one wins.
  std::stable_sort(
      devices.begin(), devices.end(),
      [](const Device& a, const Device& b) { return a.id < b.id; });
  std::vector<Device> table;
  table.reserve(devices.size());
  for (Device& d : devices) {
    if (!table.empty() && table.back().id == d.id) {
      table.back() = std::move(d);
    } else {
      table.push_back(std::move(d));
    }
  }
  MutexLock lock(mutex_);
  Resource& r = resources_[resource];
  r.devices = std::move(table);
  r.masks.clear();
  r.healthy.clear();
  r.located.clear();
  r.masks.reserve(r.devices.size());
  r.healthy.reserve(r.devices.size());
  r.located.reserve(r.devices.size());
  for (const Device& d : r.devices) {
    r.masks.push_back(MaskOf(d));
    r.healthy.push_back(d.healthy ? 1 : 0);
    r.located.push_back(d.numa_nodes.empty() ? 0 : 1);
  }
  r.has_topology =
      std::find(r.located.begin(), r.located.end(), 1) != r.located.end();
  // The nodes hints are made over (kubelet v1.37's deviceNUMANodes): those
  // of the machine that host a device of the resource, every node when
  // none does.
  r.node_ids.clear();
  for (int id : numa_node_ids_) {
    if (std::any_of(r.masks.begin(), r.masks.end(),
                    [&](const NumaMask& mask) { return mask.IsSet(id); })) {
      r.node_ids.push_back(id);
    }
  }
  if (r.node_ids.empty()) r.node_ids = numa_node_ids_;
  r.any_healthy =
      std::find(r.healthy.begin(), r.healthy.end(), 1) != r.healthy.end();
  // What the allocations hold, counted again for the new list.
  r.holders.assign(r.devices.size(), 0);
  r.endpoint = std::move(endpoint);
  for (const auto& [key, by_resource] : allocations_) {
    if (auto it = by_resource.find(resource); it != by_resource.end()) {
      for (uint32_t i : IndicesOf(r, it->second.ids)) ++r.holders[i];
    }
  }
}

int64_t DeviceManager::Resource::Find(const std::string& id) const {
  const auto it = std::lower_bound(
      devices.begin(), devices.end(), id,
      [](const Device& d, const std::string& key) { return d.id < key; });
  return it != devices.end() && it->id == id ? it - devices.begin() : -1;
}

DeviceManager::IndexList DeviceManager::IndicesOf(const Resource& r,
                                                  const DeviceSet& ids) {
  IndexList out;
  out.reserve(ids.size());
  for (const std::string& id : ids) {
    if (const int64_t i = r.Find(id); i >= 0) {
      out.push_back(static_cast<uint32_t>(i));
    }
  }
  return out;
}

void DeviceManager::Hold(const std::string& resource, const DeviceSet& ids,
                         int delta) {
  const auto r = resources_.find(resource);
  if (r == resources_.end()) return;
  for (uint32_t i : IndicesOf(r->second, ids)) {
    uint32_t& holders = r->second.holders[i];
    if (delta > 0) {
      ++holders;
    } else if (holders > 0) {
      --holders;
    }
  }
}

void DeviceManager::SetAllocation(const ContainerKey& key,
                                  const std::string& resource,
                                  DeviceSet devices) {
  auto a = allocations_.find(key);
  if (a != allocations_.end()) {
    if (auto it = a->second.find(resource); it != a->second.end()) {
      Hold(resource, it->second.ids, -1);
      a->second.erase(it);
    }
  }
  if (devices.empty()) {
    if (a != allocations_.end() && a->second.empty()) allocations_.erase(a);
    return;
  }
  Hold(resource, devices, +1);
  allocations_[key][resource] = Held{std::move(devices), {}};
}

void DeviceManager::SetEndpoint(
    const std::string& resource,
    std::shared_ptr<DevicePluginEndpoint> endpoint) {
  MutexLock lock(mutex_);
  if (auto it = resources_.find(resource); it != resources_.end()) {
    it->second.endpoint = std::move(endpoint);
  }
}

void DeviceManager::ForgetEndpoints() {
  MutexLock lock(mutex_);
  for (auto& [name, resource] : resources_) resource.endpoint.reset();
}

void DeviceManager::RemoveResource(const std::string& resource) {
  MutexLock lock(mutex_);
  resources_.erase(resource);
}

bool DeviceManager::HasResource(const std::string& resource) const {
  MutexLock lock(mutex_);
  return resources_.count(resource) != 0;
}

bool DeviceManager::IsDevicePluginResource(const std::string& resource) const {
  MutexLock lock(mutex_);
  return IsDevicePluginResourceLocked(resource);
}

bool DeviceManager::IsDevicePluginResourceLocked(
    const std::string& resource) const {
  if (resources_.count(resource) != 0) return true;
  return std::any_of(
      allocations_.begin(), allocations_.end(),
      [&](const auto& entry) { return entry.second.count(resource) != 0; });
}

HintList DeviceManager::Generate(const Resource& r, const IndexList& available,
                                 const DeviceSet& reusable,
                                 int64_t request) const {
  HintRequest hint_request;
  hint_request.node_ids = r.node_ids;
  hint_request.request = Saturate(request);
  hint_request.all_items = r.masks;
  hint_request.available_items.reserve(available.size());
  for (uint32_t i : available) {
    hint_request.available_items.push_back(r.masks[i]);
  }
  for (uint32_t i : IndicesOf(r, reusable)) {
    hint_request.reusable_items.push_back(r.masks[i]);
  }
  return GenerateHintList(hint_request, HintForm::kAuto);
}

DeviceManager::IndexList DeviceManager::Available(const Resource& r) {
  IndexList available;
  available.reserve(r.devices.size());
  for (size_t i = 0; i < r.devices.size(); ++i) {
    if (r.Free(i)) available.push_back(static_cast<uint32_t>(i));
  }
  return available;
}

DeviceManager::DeviceSet DeviceManager::PodDevices(
    const std::string& pod_uid, const std::string& resource) const {
  DeviceSet devices;
  // Keyed by (pod, container): the pod's entries are one range.
  for (auto it = allocations_.lower_bound({pod_uid, std::string()});
       it != allocations_.end() && it->first.first == pod_uid; ++it) {
    if (auto d = it->second.find(resource); d != it->second.end()) {
      devices.insert(d->second.ids.begin(), d->second.ids.end());
    }
  }
  return devices;
}

ProviderHints DeviceManager::GetTopologyHints(const Pod& pod,
                                              const Container& container) {
  MutexLock lock(mutex_);
  ProviderHints hints;
  for (const auto& [resource, quantity] : container.limits) {
    if (!IsDevicePluginResourceLocked(resource)) continue;
    const auto r = resources_.find(resource);
    const int64_t requested = quantity;
    if (r == resources_.end() || !r->second.has_topology) {
      // Held by allocations only (plugin gone): no topology alignment.
      hints[resource] = std::nullopt;
      continue;
    }
    // Already allocated (a restart): regenerate from exactly those devices.
    const auto key = std::make_pair(pod.uid, container.name);
    if (auto a = allocations_.find(key); a != allocations_.end()) {
      if (auto it = a->second.find(resource);
          it != a->second.end() && !it->second.ids.empty()) {
        hints[resource] =
            static_cast<int64_t>(it->second.ids.size()) != requested
                ? std::vector<TopologyHint>{}
                : Generate(r->second, IndicesOf(r->second, it->second.ids), {},
                           requested);
        continue;
      }
    }
    const IndexList available = Available(r->second);
    DeviceSet reusable;
    if (reuse_pod_ == pod.uid) {
      if (auto it = reusable_.find(resource); it != reusable_.end()) {
        reusable = it->second;
      }
    }
    // |available ∪ reusable|
    size_t both = available.size();
    for (const std::string& id : reusable) {
      const int64_t i = r->second.Find(id);
      if (i < 0 || !r->second.Free(static_cast<size_t>(i))) ++both;
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
  return EffectiveRequest(pod, [&](const Container& c) -> int64_t {
    const auto it = c.limits.find(resource);
    return it == c.limits.end() ? 0 : it->second;
  });
}

ProviderHints DeviceManager::GetPodTopologyHints(const Pod& pod) {
  std::set<std::string> names;
  for (const Container& c : pod.init_containers) {
    for (const auto& [resource, q] : c.limits) names.insert(resource);
  }
  for (const Container& c : pod.containers) {
    for (const auto& [resource, q] : c.limits) names.insert(resource);
  }
  MutexLock lock(mutex_);
  ProviderHints hints;
  for (const std::string& resource : names) {
    if (!IsDevicePluginResourceLocked(resource)) continue;
    const auto r = resources_.find(resource);
    const int64_t requested = PodRequest(pod, resource);
    if (r == resources_.end() || !r->second.has_topology) {
      hints[resource] = std::nullopt;
      continue;
    }
    const DeviceSet allocated = PodDevices(pod.uid, resource);
    if (!allocated.empty()) {
      hints[resource] =
          static_cast<int64_t>(allocated.size()) != requested
              ? HintList(std::vector<TopologyHint>{})
              : Generate(r->second, IndicesOf(r->second, allocated), {},
                         requested);
      continue;
    }
    const IndexList available = Available(r->second);
    if (static_cast<int64_t>(available.size()) < requested) {
      hints[resource] = std::vector<TopologyHint>{};
      continue;
    }
    hints[resource] = Generate(r->second, available, {}, requested);
  }
  return hints;
}

StatusOr<DeviceManager::DeviceSet> DeviceManager::DevicesToAllocate(
    const Pod& pod, const Container& container, const std::string& resource,
    int64_t required, DeviceSet* reusable) {
  const auto key = std::make_pair(pod.uid, container.name);
  if (auto a = allocations_.find(key); a != allocations_.end()) {
    if (auto it = a->second.find(resource); it != a->second.end()) {
      if (static_cast<int64_t>(it->second.ids.size()) != required) {
        return FailedPreconditionError(
            "pod \"" + pod.name + "\" container \"" + container.name +
            "\" changed request for resource \"" + resource + "\" from " +
            std::to_string(it->second.ids.size()) + " to " +
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
  if (needed > 0 && reusable->empty() && !resources_.at(resource).any_healthy) {
    return FailedPreconditionError(
        "no healthy devices present; cannot allocate unhealthy devices " +
        resource);
  }
  const auto take_ids = [&](const std::vector<std::string>& ids) {
    for (const std::string& id : ids) {
      if (needed == 0) break;
      if (allocated.insert(id).second) --needed;
    }
    return needed == 0;
  };
  if (take_ids(Sorted(*reusable))) return allocated;

  // The pools, split by the stored affinity: aligned, unaligned, no
  // topology; indices into `table`'s devices. Recomputed after every plugin
  // call, for which the lock is released: the list may change (or the
  // resource go) meanwhile, and with it the table.
  const Resource* table = nullptr;
  IndexList aligned;
  IndexList unaligned;
  IndexList no_affinity;
  IndexList available;
  std::shared_ptr<DevicePluginEndpoint> endpoint;
  const TopologyHint hint = store_->GetAffinity(pod.uid, container.name);
  const auto split = [&]() TOPOLOGY_REQUIRES(mutex_) -> Status {
    const auto r = resources_.find(resource);
    if (r == resources_.end()) {
      return FailedPreconditionError("cannot allocate unregistered device " +
                                     resource);
    }
    table = &r->second;
    aligned.clear();
    unaligned.clear();
    no_affinity.clear();
    available = Available(*table);
    if (!allocated.empty()) {
      const IndexList chosen = IndicesOf(*table, allocated);
      std::erase_if(available, [&](uint32_t i) {
        return std::binary_search(chosen.begin(), chosen.end(), i);
      });
    }
    endpoint = table->endpoint;
    const bool use_affinity = table->has_topology && hint.affinity.has_value();
    for (uint32_t i : available) {
      if (!use_affinity || table->located[i] == 0) {
        no_affinity.push_back(i);
      } else if (!hint.affinity->And(table->masks[i]).IsEmpty()) {
        aligned.push_back(i);
      } else {
        unaligned.push_back(i);
      }
    }
    return OkStatus();
  };
  // Takes devices of the current table, in the given order.
  const auto take_from = [&](const IndexList& pool) {
    for (uint32_t i : pool) {
      if (needed == 0) break;
      if (allocated.insert(table->devices[i].id).second) --needed;
    }
    return needed == 0;
  };
  if (Status status = split(); !status.ok()) return status;
  if (static_cast<int64_t>(available.size()) < needed) {
    return ResourceExhaustedError(
        "requested number of devices unavailable for " + resource +
        ". Requested: " + std::to_string(needed) +
        ", Available: " + std::to_string(available.size()));
  }
  // Asks the plugin without holding the lock; the table is read again
  // after the call, so only what is still free is taken.
  const auto ask = [&](const IndexList& pool) TOPOLOGY_REQUIRES(
                       mutex_) -> StatusOr<std::vector<std::string>> {
    if (endpoint == nullptr || !endpoint->PreferredAllocationAvailable()) {
      return std::vector<std::string>{};
    }
    // The pool and the devices already chosen, sorted and unique (the pool
    // is in table order, which is id order).
    std::vector<std::string> offer;
    offer.reserve(pool.size() + allocated.size());
    auto chosen = allocated.begin();
    for (uint32_t i : pool) {
      const std::string& id = table->devices[i].id;
      for (; chosen != allocated.end() && *chosen < id; ++chosen) {
        offer.push_back(*chosen);
      }
      if (chosen != allocated.end() && *chosen == id) ++chosen;
      offer.push_back(id);
    }
    offer.insert(offer.end(), chosen, allocated.end());
    // `endpoint` is this thread's own reference: it keeps the plugin's
    // endpoint alive through the call even if the resource goes meanwhile.
    mutex_.unlock();
    auto answer = endpoint->GetPreferredAllocation(offer, Sorted(allocated),
                                                   Saturate(required));
    mutex_.lock();
    if (Status status = split(); !status.ok()) return status;
    return answer;
  };
  // The plugin's answer, in its order, without what is not in `pool`
  // (ascending indices of the current table).
  const auto within = [&](const std::vector<std::string>& ids,
                          const IndexList& pool) {
    IndexList out;
    for (const std::string& id : ids) {
      const int64_t i = table->Find(id);
      if (i >= 0 && std::binary_search(pool.begin(), pool.end(),
                                       static_cast<uint32_t>(i))) {
        out.push_back(static_cast<uint32_t>(i));
      }
    }
    return out;
  };
  if (needed < static_cast<int64_t>(aligned.size())) {
    // More aligned devices than needed: let the plugin choose among them.
    auto answer = ask(aligned);
    if (!answer.ok()) return answer.status();
    if (take_from(within(*answer, aligned)) || take_from(aligned)) {
      return allocated;
    }
    // The list shrank during the call: fall through to the wider pools.
    if (take_from(unaligned) || take_from(no_affinity)) return allocated;
  } else {
    if (take_from(aligned)) return allocated;
    // `ask` builds its offer before the call and recomputes `available`
    // only after it, so the pool can be `available` itself.
    auto answer = ask(available);
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
  MutexLock lock(mutex_);
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
                      : DevicesToAllocate(pod, container, resource, quantity,
                                          &reusable_[resource]);
    if (!chosen.ok()) return chosen.status();
    if (chosen->empty()) continue;
    // Reserve before the call, so that a concurrent admission never picks
    // the same devices, and call the plugin without holding the lock (the
    // shared endpoint stays alive even if the plugin re-registers).
    SetAllocation(key, resource, *chosen);
    std::shared_ptr<DevicePluginEndpoint> endpoint;
    if (auto r = resources_.find(resource); r != resources_.end()) {
      endpoint = r->second.endpoint;
    }
    if (endpoint) {
      lock.unlock();
      StatusOr<std::string> response = endpoint->Allocate(Sorted(*chosen));
      lock.lock();
      if (!response.ok()) {
        SetAllocation(key, resource, {});
        return response.status();
      }
      // Kept with the allocation, unless it was released meanwhile.
      if (auto a = allocations_.find(key); a != allocations_.end()) {
        if (auto it = a->second.find(resource);
            it != a->second.end() && it->second.ids == *chosen) {
          it->second.response = std::move(*response);
        }
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
  MutexLock lock(mutex_);
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
    if (auto a = allocations_.find(key);
        a != allocations_.end() && a->second.count(resource) != 0) {
      return {};
    }
    if (quantity > static_cast<int64_t>(r->second.devices.size())) return {};
    if (!reusable_[resource].empty()) return {};
    JointPool pool;
    pool.count = Saturate(quantity);
    for (uint32_t i : Available(r->second)) {
      const Device& device = r->second.devices[i];
      const bool aligned = !r->second.has_topology || !hint.affinity ||
                           hint.affinity->AnySet(device.numa_nodes);
      if (aligned) pool.candidates.push_back(device.id);
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
  MutexLock lock(mutex_);
  const ContainerKey key{pod_uid, container};
  SetAllocation(key, resource, DeviceSet(device_ids.begin(), device_ids.end()));
  // An empty record still marks the resource as a device plugin's.
  if (device_ids.empty()) allocations_[key].try_emplace(resource);
}

std::vector<DeviceManager::Allocation> DeviceManager::Allocations() const {
  MutexLock lock(mutex_);
  std::vector<Allocation> out;
  for (const auto& [key, by_resource] : allocations_) {
    for (const auto& [resource, held] : by_resource) {
      out.push_back({key.first, key.second, resource, Sorted(held.ids)});
    }
  }
  return out;
}

void DeviceManager::RemovePod(const std::string& pod_uid) {
  MutexLock lock(mutex_);
  // Keyed by (pod, container): the pod's entries are one range.
  auto it = allocations_.lower_bound({pod_uid, std::string()});
  while (it != allocations_.end() && it->first.first == pod_uid) {
    for (const auto& [resource, held] : it->second) {
      Hold(resource, held.ids, -1);
    }
    it = allocations_.erase(it);
  }
  if (reuse_pod_ == pod_uid) {
    reuse_pod_.clear();
    reusable_.clear();
  }
}

std::vector<std::string> DeviceManager::ContainerDevices(
    const std::string& pod_uid, const std::string& container,
    const std::string& resource) const {
  MutexLock lock(mutex_);
  const auto a = allocations_.find({pod_uid, container});
  if (a == allocations_.end()) return {};
  const auto it = a->second.find(resource);
  return it == a->second.end() ? std::vector<std::string>{}
                               : Sorted(it->second.ids);
}

std::string DeviceManager::AllocateResponse(const std::string& pod_uid,
                                            const std::string& container,
                                            const std::string& resource) const {
  MutexLock lock(mutex_);
  const auto a = allocations_.find({pod_uid, container});
  if (a == allocations_.end()) return {};
  const auto it = a->second.find(resource);
  return it == a->second.end() ? std::string() : it->second.response;
}

std::map<std::string, DeviceManager::ResourceSnapshot> DeviceManager::Snapshot()
    const {
  MutexLock lock(mutex_);
  std::map<std::string, ResourceSnapshot> out;
  std::map<std::string, DeviceSet> in_use;
  for (const auto& [key, by_resource] : allocations_) {
    for (const auto& [resource, held] : by_resource) {
      if (resources_.contains(resource)) {
        in_use[resource].insert(held.ids.begin(), held.ids.end());
      }
    }
  }
  for (const auto& [name, r] : resources_) {
    ResourceSnapshot& snapshot = out[name];
    snapshot.devices = r.devices;
    snapshot.in_use = Sorted(in_use[name]);
  }
  return out;
}

std::vector<Device> DeviceManager::Devices(const std::string& resource) const {
  MutexLock lock(mutex_);
  const auto it = resources_.find(resource);
  return it == resources_.end() ? std::vector<Device>{} : it->second.devices;
}

void DeviceManager::MarkUnhealthy(const std::string& resource) {
  MutexLock lock(mutex_);
  const auto it = resources_.find(resource);
  if (it == resources_.end()) return;
  Resource& r = it->second;
  for (Device& device : r.devices) device.healthy = false;
  std::fill(r.healthy.begin(), r.healthy.end(), uint8_t{0});
  r.any_healthy = false;
}

std::vector<std::string> DeviceManager::InUse(
    const std::string& resource) const {
  MutexLock lock(mutex_);
  DeviceSet in_use;
  for (const auto& [key, by_resource] : allocations_) {
    if (auto it = by_resource.find(resource); it != by_resource.end()) {
      in_use.insert(it->second.ids.begin(), it->second.ids.end());
    }
  }
  return Sorted(in_use);
}

}  // namespace topology::manager
