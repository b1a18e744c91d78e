#include "proto_conversion.h"

#include <cstring>

namespace topology::plugin {

const char* HealthName(Health health) {
  return health == Health::kHealthy ? "Healthy" : "Unhealthy";
}

v1beta1::DevicePluginOptions ToProto(const DevicePluginOptions& options) {
  v1beta1::DevicePluginOptions out;
  out.set_pre_start_required(options.pre_start_required);
  out.set_get_preferred_allocation_available(
      options.get_preferred_allocation_available);
  return out;
}

DevicePluginOptions FromProto(const v1beta1::DevicePluginOptions& options) {
  return {.pre_start_required = options.pre_start_required(),
          .get_preferred_allocation_available =
              options.get_preferred_allocation_available()};
}

void ToProto(const Device& device, v1beta1::Device* out) {
  out->set_id(device.id);
  out->set_health(HealthName(device.health));
  // No nodes: leave TopologyInfo absent (nil), which every kubelet reads as
  // "no preference"; an empty list was a rejection before kubelet 1.26.
  if (!device.numa_nodes.empty()) {
    auto* topology = out->mutable_topology();
    for (int64_t node : device.numa_nodes) topology->add_nodes()->set_id(node);
  }
}

Device FromProto(const v1beta1::Device& device) {
  Device out;
  out.id = device.id();
  // Only the exact string counts as healthy, as in the kubelet.
  out.health =
      device.health() == "Healthy" ? Health::kHealthy : Health::kUnhealthy;
  if (device.has_topology()) {
    for (const auto& node : device.topology().nodes()) {
      out.numa_nodes.push_back(node.id());
    }
  }
  return out;
}

void ToProto(const std::vector<Device>& devices,
             v1beta1::ListAndWatchResponse* out) {
  out->mutable_devices()->Reserve(static_cast<int>(devices.size()));
  for (const Device& device : devices) ToProto(device, out->add_devices());
}

void ToProto(const ContainerAllocation& allocation,
             v1beta1::ContainerAllocateResponse* out) {
  for (const auto& [key, value] : allocation.envs) {
    (*out->mutable_envs())[key] = value;
  }
  for (const auto& [key, value] : allocation.annotations) {
    (*out->mutable_annotations())[key] = value;
  }
  for (const common::Mount& mount : allocation.mounts) {
    auto* m = out->add_mounts();
    m->set_container_path(mount.container_path);
    m->set_host_path(mount.host_path);
    m->set_read_only(mount.read_only);
  }
  for (const common::DeviceNode& node : allocation.devices) {
    auto* d = out->add_devices();
    d->set_container_path(node.container_path);
    d->set_host_path(node.host_path);
    d->set_permissions(node.permissions);
  }
  for (const std::string& name : allocation.cdi_devices) {
    out->add_cdi_devices()->set_name(name);
  }
}

ContainerAllocation FromProto(const v1beta1::ContainerAllocateResponse& in) {
  ContainerAllocation out;
  out.envs.insert(in.envs().begin(), in.envs().end());
  out.annotations.insert(in.annotations().begin(), in.annotations().end());
  for (const auto& m : in.mounts()) {
    out.mounts.push_back({m.container_path(), m.host_path(), m.read_only()});
  }
  for (const auto& d : in.devices()) {
    out.devices.push_back({d.container_path(), d.host_path(), d.permissions()});
  }
  for (const auto& c : in.cdi_devices()) out.cdi_devices.push_back(c.name());
  return out;
}

}  // namespace topology::plugin
