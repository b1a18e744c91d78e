#include "dra_driver.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <glog/logging.h>

#include <nlohmann/json.hpp>

#include "topology/common/k8s_names.h"
#include "topology/common/quantity.h"
#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_cdi.h"

#include "pod_resources.h"
#include "selectors.h"

namespace topology::device_plugin {
namespace {

std::string Hex(unsigned value, int digits) {
  char text[16];
  std::snprintf(text, sizeof(text), "0x%0*x", digits, value);
  return text;
}

// The device's NUMA node and the nodes nearest to it ("0,1"); empty when
// the device has no node.
std::string NearestNodes(const Topology& topology, const PciDevice& device) {
  if (device.numa_nodes.empty()) return {};
  const int own = device.numa_nodes.front();
  std::optional<int> nearest;
  for (const NumaNode& node : topology.numa_nodes()) {
    if (node.id == own) continue;
    if (auto d = topology.Distance(own, node.id)) {
      nearest = nearest ? std::min(*nearest, *d) : *d;
    }
  }
  std::set<int> nodes = {own};
  for (const NumaNode& node : topology.numa_nodes()) {
    if (node.id == own || !nearest) continue;
    if (topology.Distance(own, node.id) == nearest) nodes.insert(node.id);
  }
  std::string out;
  for (int node : nodes) out += (out.empty() ? "" : ",") + std::to_string(node);
  return out;
}

// A device of a resource the configuration marks shareable: published
// with allowMultipleAllocations and each capacity with its request policy.
void ShareByCapacity(const ResourceConfig& resource,
                     draplugin::SliceDevice* device) {
  if (resource.shared_capacity.empty()) return;
  device->allow_multiple_allocations = true;
  for (const auto& [name, shared] : resource.shared_capacity) {
    draplugin::DeviceCapacity capacity(shared.value);
    if (!shared.default_value.empty() || !shared.valid_values.empty() ||
        !shared.range_min.empty()) {
      draplugin::CapacityRequestPolicy policy;
      policy.default_value = shared.default_value;
      policy.valid_values = shared.valid_values;
      if (!shared.range_min.empty()) {
        policy.valid_range =
            draplugin::CapacityRequestPolicy::Range{.min = shared.range_min,
                                                    .max = shared.range_max,
                                                    .step = shared.range_step};
      }
      capacity.request_policy = std::move(policy);
    }
    device->capacity[name] = std::move(capacity);
  }
}

// "bandwidth" -> "BANDWIDTH", "example.com/memory" -> "MEMORY": the
// capacity's name in an environment variable.
std::string EnvSuffix(const std::string& capacity) {
  std::string out = capacity.substr(capacity.rfind('/') + 1);
  for (char& c : out) {
    c = std::isalnum(static_cast<unsigned char>(c))
            ? static_cast<char>(std::toupper(static_cast<unsigned char>(c)))
            : '_';
  }
  return out;
}

}  // namespace

Status ValidateSharing(const Config& config, const std::string& driver) {
  for (size_t i = 0; i < config.resources.size(); ++i) {
    const ResourceConfig& resource = config.resources[i];
    if (resource.shared_capacity.empty()) continue;
    draplugin::SliceDevice probe{.name = "probe"};
    ShareByCapacity(resource, &probe);
    if (Status valid = draplugin::ValidateDevices(driver, {probe});
        !valid.ok()) {
      std::string message = valid.message();
      if (message.starts_with("device \"probe\": ")) {
        message = message.substr(16);
      }
      return InvalidArgumentError("resources[" + std::to_string(i) + "] (" +
                                  resource.name + ").shareable: " + message);
    }
  }
  return OkStatus();
}

std::string ShareEnvName(const std::string& resource,
                         const std::string& capacity) {
  return PciDeviceEnvName(resource) + "_" + EnvSuffix(capacity);
}

std::vector<draplugin::SliceDevice> DraInventory(
    const Config& config, const Snapshot& snapshot, const SysfsReader& sysfs,
    dra::NumaAttributeForm numa_form, std::vector<std::string>* warnings) {
  std::vector<draplugin::SliceDevice> devices;
  for (const auto& [address, index] : snapshot.claims) {
    const PciDevice* pci = snapshot.topology.FindDevice(address);
    if (pci == nullptr) continue;
    const std::string id = address.ToString();
    draplugin::SliceDevice device;
    device.name = dra::PciDeviceName(address);
    const dra::PciAttributes standard =
        dra::StandardPciAttributes(sysfs, id, numa_form);
    for (const dra::DeviceAttribute& attribute : standard.attributes) {
      if (const auto* text = std::get_if<std::string>(&attribute.value)) {
        device.attributes[attribute.name] = {*text, false};
      } else if (const auto* number = std::get_if<int64_t>(&attribute.value)) {
        device.attributes[attribute.name] = {*number, false};
      } else {
        // The list form (the cluster's DRAListTypeAttributes gate).
        device.attributes[attribute.name] = {
            std::get<std::vector<int64_t>>(attribute.value), false};
      }
    }
    if (warnings != nullptr) {
      for (const auto& [name, why] : standard.omitted) {
        warnings->push_back(id + ": " + name +
                            " not published: " + why.message());
      }
    }
    device.attributes["resource"] = {config.resources[index].name, false};
    device.attributes["vendorID"] = {Hex(pci->vendor_id, 4), false};
    device.attributes["deviceID"] = {Hex(pci->device_id, 4), false};
    device.attributes["class"] = {Hex(pci->class_code, 6), false};
    for (size_t i = 0;
         i < pci->upstream_bridges.size() && i < pci->upstream_is_switch.size();
         ++i) {
      if (pci->upstream_is_switch[i]) {
        device.attributes["pcieSwitch"] = {pci->upstream_bridges[i].ToString(),
                                           false};
        break;
      }
    }
    if (const std::string nearest = NearestNodes(snapshot.topology, *pci);
        !nearest.empty()) {
      device.attributes["nearestNumaNodes"] = {nearest, false};
    }
    ShareByCapacity(config.resources[index], &device);
    devices.push_back(std::move(device));
  }
  std::sort(devices.begin(), devices.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  return devices;
}

std::vector<draplugin::CounterSet> PartitionSriov(
    const Snapshot& snapshot, std::vector<draplugin::SliceDevice>* devices) {
  // The published functions by address, and each published PF's published
  // VFs.
  std::map<PciAddress, draplugin::SliceDevice*> published;
  for (draplugin::SliceDevice& device : *devices) {
    if (auto address = dra::AddressOfPciDeviceName(device.name)) {
      published.emplace(*address, &device);
    }
  }
  std::map<PciAddress, std::vector<draplugin::SliceDevice*>> vfs_of;
  for (const auto& [address, device] : published) {
    const PciDevice* pci = snapshot.topology.FindDevice(address);
    if (pci == nullptr || !pci->physfn || !published.contains(*pci->physfn)) {
      continue;
    }
    vfs_of[*pci->physfn].push_back(device);
  }
  std::vector<draplugin::CounterSet> sets;
  for (const auto& [pf_address, vfs] : vfs_of) {
    draplugin::SliceDevice* pf = published.at(pf_address);
    const std::string count = std::to_string(vfs.size());
    sets.push_back({.name = pf->name, .counters = {{"vfs", count}}});
    pf->consumes_counters = {
        {.counter_set = pf->name, .counters = {{"vfs", count}}}};
    pf->attributes[kPartitionTypeAttribute] = {"pf-" + count, false};
    for (draplugin::SliceDevice* vf : vfs) {
      vf->consumes_counters = {
          {.counter_set = pf->name, .counters = {{"vfs", "1"}}}};
      vf->attributes[kPartitionTypeAttribute] = {std::string("vf"), false};
    }
  }
  return sets;
}

bool DraHealth::Update(const Snapshot& snapshot, const PciAddress& address,
                       plugin::HealthVerdict verdict) {
  // A GPU whose driver information is missing or shared with another GPU
  // would fail or reach the wrong GPU at Prepare.
  if (const auto problem = snapshot.nvidia.problems.find(address);
      problem != snapshot.nvidia.problems.end()) {
    verdict.health = plugin::Health::kUnhealthy;
    verdict.reason = problem->second;
  }
  const auto known = unhealthy_.find(address);
  if (verdict.health == plugin::Health::kHealthy) {
    if (known == unhealthy_.end()) return false;
    LOG(INFO) << address.ToString() << " is Healthy again";
    unhealthy_.erase(known);
    return true;
  }
  if (verdict.reason.empty()) verdict.reason = "unhealthy";
  if (known != unhealthy_.end() && known->second == verdict.reason) {
    return false;
  }
  LOG(WARNING) << address.ToString() << " is Unhealthy: " << verdict.reason;
  unhealthy_.insert_or_assign(address, verdict.reason);
  return true;
}

bool DraHealth::Judge(const Snapshot& snapshot, const SysfsReader& sysfs) {
  const auto now = topology::Clock::Real().Now();
  bool changed = false;
  for (const auto& [address, resource] : snapshot.claims) {
    changed |= Update(
        snapshot, address,
        tracker_.Observe(address, plugin::ReadPciHealth(sysfs, address), now));
  }
  tracker_.ForgetIf([&](const PciAddress& address) {
    return !snapshot.claims.contains(address);
  });
  for (auto it = unhealthy_.begin(); it != unhealthy_.end();) {
    if (snapshot.claims.contains(it->first)) {
      ++it;
    } else {
      it = unhealthy_.erase(it);
      changed = true;
    }
  }
  return changed;
}

bool DraHealth::Recheck(const Snapshot& snapshot, const SysfsReader& sysfs) {
  const auto now = topology::Clock::Real().Now();
  bool changed = false;
  for (const PciAddress& address : tracker_.NeedRecheck()) {
    if (!snapshot.claims.contains(address)) continue;
    changed |=
        Update(snapshot, address,
               tracker_.Recheck(address,
                                plugin::ReadPciAerFatal(sysfs, address), now));
  }
  return changed;
}

draplugin::DeviceTaint UnhealthyTaint(const std::string& driver) {
  return {.key = driver + "/unhealthy", .value = {}, .effect = "NoSchedule"};
}

void TaintUnhealthy(const std::string& driver,
                    const std::map<PciAddress, std::string>& unhealthy,
                    std::vector<draplugin::SliceDevice>* devices) {
  if (unhealthy.empty()) return;
  std::set<std::string> names;
  for (const auto& [address, reason] : unhealthy) {
    names.insert(dra::PciDeviceName(address));
  }
  for (draplugin::SliceDevice& device : *devices) {
    if (names.contains(device.name)) {
      device.taints.push_back(UnhealthyTaint(driver));
    }
  }
}

std::map<PciAddress, std::vector<std::string>> HeldThroughDevicePlugins(
    const std::vector<kubelet::PodDevices>& entries) {
  std::map<PciAddress, std::vector<std::string>> held;
  for (const kubelet::PodDevices& entry : entries) {
    for (const std::string& id : entry.device_ids) {
      auto address = PciAddress::Parse(id);
      if (!address.ok()) continue;
      std::vector<std::string>& pods = held[*address];
      const auto at = std::lower_bound(pods.begin(), pods.end(), entry.pod_uid);
      if (at == pods.end() || *at != entry.pod_uid) {
        pods.insert(at, entry.pod_uid);
      }
    }
  }
  return held;
}

StatusOr<std::map<PciAddress, std::vector<std::string>>>
ReadHeldThroughDevicePlugins(const std::filesystem::path& checkpoint) {
  auto entries = kubelet::ReadDeviceCheckpoint(checkpoint);
  if (entries.ok()) return HeldThroughDevicePlugins(*entries);
  if (entries.status().code() == StatusCode::kNotFound) {
    return std::map<PciAddress, std::vector<std::string>>();
  }
  return entries.status();
}

std::map<PciAddress, std::vector<std::string>> RunningHolders(
    std::map<PciAddress, std::vector<std::string>> held,
    const std::set<std::string>& ids) {
  std::set<PciAddress> listed;
  for (const std::string& id : ids) {
    if (auto address = PciAddress::Parse(id); address.ok()) {
      listed.insert(*address);
    }
  }
  std::erase_if(
      held, [&](const auto& entry) { return !listed.contains(entry.first); });
  return held;
}

HeldDevicesReader::HeldDevicesReader(std::filesystem::path checkpoint,
                                     std::filesystem::path pod_resources_socket)
    : checkpoint_(std::move(checkpoint)),
      pod_resources_socket_(std::move(pod_resources_socket)) {}

StatusOr<std::map<PciAddress, std::vector<std::string>>>
HeldDevicesReader::Read() const {
  auto held = ReadHeldThroughDevicePlugins(checkpoint_);
  if (!held.ok() || held->empty()) return held;
  auto ids =
      ListDevicePluginDeviceIds(pod_resources_socket_, std::chrono::seconds(2));
  std::string problem = ids.ok() ? std::string() : ids.status().message();
  {
    MutexLock lock(mu_);
    if (problem != problem_) {
      if (!problem.empty()) {
        LOG(WARNING) << problem
                     << "; every device the kubelet's checkpoint names counts "
                        "as held through a device plugin, a deleted pod's too";
      } else {
        LOG(INFO) << "the kubelet's pod resources API answers again";
      }
      problem_ = std::move(problem);
    }
  }
  if (!ids.ok()) return held;
  return RunningHolders(std::move(*held), *ids);
}

draplugin::DeviceTaint HeldTaint(const std::string& driver,
                                 const std::string& pod_uid) {
  return {.key = driver + "/device-plugin-allocated",
          .value = k8s::IsLabelValue(pod_uid) ? pod_uid : std::string(),
          .effect = "NoSchedule"};
}

void TaintHeld(const std::string& driver,
               const std::map<PciAddress, std::vector<std::string>>& held,
               std::vector<draplugin::SliceDevice>* devices) {
  if (held.empty()) return;
  for (draplugin::SliceDevice& device : *devices) {
    const std::optional<PciAddress> address =
        dra::AddressOfPciDeviceName(device.name);
    if (!address) continue;
    const auto it = held.find(*address);
    if (it == held.end() || it->second.empty()) continue;
    device.taints.push_back(HeldTaint(driver, it->second.front()));
  }
}

std::vector<draplugin::DeviceHealth> HealthReport(
    const std::string& pool, const Snapshot& snapshot,
    const std::map<PciAddress, std::string>& unhealthy) {
  std::vector<draplugin::DeviceHealth> report;
  report.reserve(snapshot.claims.size());
  for (const auto& [address, resource] : snapshot.claims) {
    if (snapshot.topology.FindDevice(address) == nullptr) continue;
    draplugin::DeviceHealth health;
    health.pool = pool;
    health.device = dra::PciDeviceName(address);
    const auto reason = unhealthy.find(address);
    if (reason == unhealthy.end()) {
      health.health = draplugin::HealthStatus::kHealthy;
    } else {
      health.health = draplugin::HealthStatus::kUnhealthy;
      health.message = reason->second;
    }
    report.push_back(std::move(health));
  }
  return report;
}

Status CheckNoOverlap(const Config& dra_config, const Snapshot& snapshot,
                      const Config& device_plugin_config,
                      const SysfsReader& sysfs) {
  // The device plugin's selection on the machine already discovered.
  const Claims theirs =
      AssignDevices(device_plugin_config, snapshot.topology, sysfs, {});
  std::string shared;
  size_t count = 0;
  for (const auto& [address, resource] : snapshot.claims) {
    const auto other = theirs.find(address);
    if (other == theirs.end()) continue;
    if (++count <= 8) {
      shared += (shared.empty() ? "" : "; ") + address.ToString() + " (" +
                dra_config.resources[resource].name + " here, " +
                device_plugin_config.resources[other->second].name +
                " in the device plugin's)";
    }
  }
  if (count == 0) return OkStatus();
  return FailedPreconditionError(
      std::to_string(count) +
      " device(s) selected by both this configuration and the device "
      "plugin's, so both could hand them out: " +
      shared + (count > 8 ? "; ..." : "") +
      ". Give the two configurations distinct selectors.");
}

DraHandler::DraHandler(Config config, std::filesystem::path host_root,
                       std::filesystem::path cdi_dir, std::string driver,
                       std::string pool, SnapshotSource snapshot,
                       HeldSource held)
    : config_(std::move(config)),
      host_root_(std::move(host_root)),
      cdi_dir_(std::move(cdi_dir)),
      driver_(std::move(driver)),
      pool_(std::move(pool)),
      snapshot_(std::move(snapshot)),
      held_(std::move(held)) {}

StatusOr<std::vector<draplugin::PreparedDevice>> DraHandler::Prepare(
    const draplugin::Claim& claim) {
  const std::shared_ptr<const Snapshot> snapshot = snapshot_();
  if (!snapshot) return UnavailableError("no inventory yet");
  // A device of this node by its DRA name: the name carries the address,
  // so a claim costs its own devices, not a walk of the node's 10,000.
  const auto find = [&](const std::string& name)
      -> std::optional<std::pair<PciAddress, size_t>> {
    auto address = dra::AddressOfPciDeviceName(name);
    if (!address) return std::nullopt;
    const auto it = snapshot->claims.find(*address);
    if (it == snapshot->claims.end()) return std::nullopt;
    return std::pair{*address, it->second};
  };
  // The claim's devices, in result order, grouped by resource.
  std::vector<std::pair<const draplugin::AllocationResult*, PciAddress>> chosen;
  std::map<size_t, std::vector<std::string>> by_resource;
  for (const draplugin::AllocationResult& result : claim.results) {
    if (result.pool != pool_) {
      return FailedPreconditionError("device " + result.device +
                                     " is of pool " + result.pool +
                                     ", not this node's (" + pool_ + ")");
    }
    const auto found = find(result.device);
    if (!found) {
      return FailedPreconditionError("device " + result.device +
                                     " is not one this driver has on " + pool_);
    }
    chosen.emplace_back(&result, found->first);
    auto& ids = by_resource[found->second];
    const std::string id = found->first.ToString();
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  }
  if (Status free = RefuseHeld(claim, chosen); !free.ok()) return free;
  // The environment of the claim: what Allocate gives each resource's
  // devices together, and for a shared resource what the claim's shares of
  // each device may use, in the devices' order (the sum of its shares).
  std::map<std::string, std::string> claim_env;
  for (const auto& [index, ids] : by_resource) {
    auto allocation = AllocationFor(config_.resources[index], *snapshot,
                                    host_root_, ids, false);
    if (!allocation.ok()) return allocation.status();
    for (const auto& [key, value] :
         ShareEnvironment(config_.resources[index], ids, chosen)) {
      allocation->envs[key] = value;
    }
    for (const auto& [key, value] : allocation->envs) {
      auto [it, fresh] = claim_env.emplace(key, value);
      if (!fresh && it->second != value) {
        return FailedPreconditionError(
            key + " would be set twice: the claim's resources disagree");
      }
    }
  }
  // Each device's (each share's) own nodes and mounts, under a CDI name of
  // its own: "<device>" or "<device>-<share id>", with the environment the
  // configurations of its request set (the class's, then the claim's).
  std::vector<common::CdiDevice> cdi;
  std::set<std::string> named;
  for (const auto& [result, address] : chosen) {
    const std::string name = CdiNameOf(*result);
    if (!named.insert(name).second) continue;
    const size_t index = find(result->device)->second;
    auto allocation = AllocationFor(config_.resources[index], *snapshot,
                                    host_root_, {address.ToString()}, false);
    if (!allocation.ok()) return allocation.status();
    auto env = ConfiguredEnvironment(claim, result->request);
    if (!env.ok()) return env.status();
    common::CdiDevice device;
    device.name = name;
    device.device_nodes = allocation->devices;
    device.mounts = allocation->mounts;
    device.env = std::move(*env);
    cdi.push_back(std::move(device));
  }
  auto ids = draplugin::WriteClaimCdiSpec(
      cdi_dir_, driver_, cdi_kind(), claim.ref.uid, std::move(cdi), claim_env);
  if (!ids.ok()) return ids.status();
  std::map<std::string, std::string> id_of;  // CDI device name -> CDI id
  for (const std::string& id : *ids) {
    id_of[id.substr(id.find('=') + 1 + claim.ref.uid.size() + 1)] = id;
  }
  std::vector<draplugin::PreparedDevice> prepared;
  for (const auto& [result, address] : chosen) {
    draplugin::PreparedDevice device;
    device.request_names = {result->request};
    device.pool = result->pool;
    device.device = result->device;
    device.share_id = result->share_id;
    device.cdi_device_ids = {id_of.at(CdiNameOf(*result))};
    if (metadata_) device.metadata_attributes = metadata_(result->device);
    prepared.push_back(std::move(device));
  }
  return prepared;
}

StatusOr<std::map<std::string, std::string>> ConfiguredEnvironment(
    const draplugin::Claim& claim, const std::string& request) {
  std::map<std::string, std::string> env;
  for (const draplugin::OpaqueConfig* config :
       draplugin::ConfigsFor(claim, request)) {
    const std::string who =
        "configuration (" + config->source + ") of " + "request " + request;
    const auto parameters =
        nlohmann::json::parse(config->parameters, nullptr, false);
    if (!parameters.is_object()) {
      return FailedPreconditionError(who + ": parameters are not an object");
    }
    for (const auto& [key, value] : parameters.items()) {
      if (key == "apiVersion" || key == "kind") continue;
      if (key != "env") {
        return FailedPreconditionError(who + ": unknown parameter \"" +
                                       key.substr(0, 80) + "\" (known: env)");
      }
      if (!value.is_object()) {
        return FailedPreconditionError(who + ": env is not a map");
      }
      for (const auto& [name, text] : value.items()) {
        const bool valid_name =
            !name.empty() && name.size() <= 256 &&
            !std::isdigit(static_cast<unsigned char>(name[0])) &&
            std::all_of(name.begin(), name.end(), [](char c) {
              return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
            });
        if (!valid_name) {
          return FailedPreconditionError(
              who + ": env name \"" + name.substr(0, 80) +
              "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)");
        }
        if (!text.is_string() ||
            text.get<std::string>().find('\0') != std::string::npos) {
          return FailedPreconditionError(who + ": env " + name +
                                         " is not a string");
        }
        env[name] = text.get<std::string>();  // a later one wins
      }
    }
  }
  return env;
}

Status DraHandler::RefuseHeld(
    const draplugin::Claim& claim,
    const std::vector<std::pair<const draplugin::AllocationResult*,
                                PciAddress>>& chosen) const {
  // A device a running pod holds through a device plugin is never also
  // prepared for a claim (a node moving from one path to the other); the
  // kubelet's checkpoint is read now, not as last published, and a
  // checkpoint that cannot be read refuses every claim.
  if (!held_) return OkStatus();
  auto held = held_();
  if (!held.ok()) {
    return FailedPreconditionError(
        "cannot tell which devices pods hold through a device plugin (" +
        held.status().message() +
        "); no device is prepared until it can be read");
  }
  for (const auto& [result, address] : chosen) {
    // adminAccess (monitoring, maintenance): the device may be in use by
    // others, through a device plugin too.
    if (result->admin_access) continue;
    const auto it = held->find(address);
    if (it == held->end() || it->second.empty()) continue;
    return FailedPreconditionError(
        "device " + result->device + " (" + address.ToString() +
        ") is held by pod " + it->second.front() +
        " through a device plugin (the kubelet's device checkpoint names "
        "it): it is not prepared for claim " +
        claim.ref.ns + "/" + claim.ref.name + " while that pod holds it");
  }
  return OkStatus();
}

std::string DraHandler::CdiNameOf(const draplugin::AllocationResult& result) {
  return result.share_id.empty() ? result.device
                                 : result.device + "-" + result.share_id;
}

std::map<std::string, std::string> DraHandler::ShareEnvironment(
    const ResourceConfig& resource, const std::vector<std::string>& ids,
    const std::vector<
        std::pair<const draplugin::AllocationResult*, PciAddress>>& chosen) {
  std::map<std::string, std::string> env;
  if (resource.shared_capacity.empty()) return env;
  for (const auto& [name, shared] : resource.shared_capacity) {
    std::string list;
    for (const std::string& id : ids) {
      k8s::Quantity sum;
      bool any = false;
      for (const auto& [result, address] : chosen) {
        if (address.ToString() != id) continue;
        const auto consumed = result->consumed_capacity.find(name);
        // A share that names no amount of this capacity, or a device
        // allocated whole, may use all of it.
        const auto amount = k8s::Quantity::Parse(
            consumed != result->consumed_capacity.end() ? consumed->second
                                                        : shared.value);
        if (!amount) continue;
        sum = sum.Plus(*amount).value_or(sum);
        any = true;
      }
      if (!list.empty()) list += ',';
      list += any ? sum.ToString() : shared.value;
    }
    env[ShareEnvName(resource.name, name)] = list;
  }
  return env;
}

Status DraHandler::Unprepare(
    const draplugin::ClaimRef& claim,
    const std::vector<draplugin::PreparedDevice>& /*devices*/) {
  return draplugin::RemoveClaimCdiSpec(cdi_dir_, driver_, claim.uid);
}

std::string DeviceClassName(const std::string& resource) {
  const size_t slash = resource.find('/');
  std::string name =
      slash == std::string::npos
          ? resource
          : resource.substr(slash + 1) + "." + resource.substr(0, slash);
  for (char& c : name) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c == '_') c = '-';
  }
  return name;
}

std::string DeviceClassesYaml(const Config& config, const std::string& driver) {
  std::string out;
  for (const ResourceConfig& resource : config.resources) {
    const std::string name = DeviceClassName(resource.name);
    if (!out.empty()) out += "---\n";
    out +=
        "# The devices of the ConfigMap's resource " + resource.name +
        ". A claim asks for\n# them with deviceClassName: " + name +
        ". A pod written for the device\n# plugin (limits: " + resource.name +
        ": 1) gets one through DRA, unchanged,\n# on a node where no "
        "device plugin serves it (extendedResourceName).\n"
        "apiVersion: resource.k8s.io/v1\n"
        "kind: DeviceClass\n"
        "metadata:\n"
        "  name: " +
        name +
        "\n"
        "spec:\n"
        "  extendedResourceName: " +
        resource.name +
        "\n"
        "  selectors:\n"
        "    - cel:\n"
        "        expression: >-\n"
        "          device.driver == \"" +
        driver +
        "\" &&\n"
        "          device.attributes[\"" +
        driver + "\"].resource == \"" + resource.name + "\"\n";
  }
  return out;
}

}  // namespace topology::device_plugin
