// Conversion between the framework's plain values and v1beta1 messages.
#ifndef TOPOLOGY_PLUGIN_SRC_PROTO_CONVERSION_H_
#define TOPOLOGY_PLUGIN_SRC_PROTO_CONVERSION_H_

#include <vector>

#include "topology/plugin/types.h"

#include "deviceplugin/v1beta1/api.pb.h"

namespace topology::plugin {

v1beta1::DevicePluginOptions ToProto(const DevicePluginOptions& options);
DevicePluginOptions FromProto(const v1beta1::DevicePluginOptions& options);

void ToProto(const Device& device, v1beta1::Device* out);
Device FromProto(const v1beta1::Device& device);

void ToProto(const std::vector<Device>& devices,
             v1beta1::ListAndWatchResponse* out);

void ToProto(const ContainerAllocation& allocation,
             v1beta1::ContainerAllocateResponse* out);
ContainerAllocation FromProto(const v1beta1::ContainerAllocateResponse& in);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_SRC_PROTO_CONVERSION_H_
