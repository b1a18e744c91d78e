// The generated v1beta1 API against the wire spec: every message, field name,
// number and type, the services' method paths, and encodings compared with
// bytes written out by hand.
#include <string>

#include <gtest/gtest.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "deviceplugin/v1beta1/api.pb.h"

namespace topology::plugin {
namespace {

using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;

struct Field {
  const char* message;
  const char* name;
  int number;
  FieldDescriptor::Type type;
  bool repeated;
  const char* message_type = nullptr;  // for TYPE_MESSAGE
};

constexpr auto kString = FieldDescriptor::TYPE_STRING;
constexpr auto kBool = FieldDescriptor::TYPE_BOOL;
constexpr auto kMessage = FieldDescriptor::TYPE_MESSAGE;

const Field kFields[] = {
    {"DevicePluginOptions", "pre_start_required", 1, kBool, false},
    {"DevicePluginOptions", "get_preferred_allocation_available", 2, kBool,
     false},
    {"RegisterRequest", "version", 1, kString, false},
    {"RegisterRequest", "endpoint", 2, kString, false},
    {"RegisterRequest", "resource_name", 3, kString, false},
    {"RegisterRequest", "options", 4, kMessage, false,
     "v1beta1.DevicePluginOptions"},
    {"ListAndWatchResponse", "devices", 1, kMessage, true, "v1beta1.Device"},
    {"TopologyInfo", "nodes", 1, kMessage, true, "v1beta1.NUMANode"},
    {"NUMANode", "ID", 1, FieldDescriptor::TYPE_INT64, false},
    {"Device", "ID", 1, kString, false},
    {"Device", "health", 2, kString, false},
    {"Device", "topology", 3, kMessage, false, "v1beta1.TopologyInfo"},
    {"PreStartContainerRequest", "devices_ids", 1, kString, true},
    {"PreferredAllocationRequest", "container_requests", 1, kMessage, true,
     "v1beta1.ContainerPreferredAllocationRequest"},
    {"ContainerPreferredAllocationRequest", "available_deviceIDs", 1, kString,
     true},
    {"ContainerPreferredAllocationRequest", "must_include_deviceIDs", 2,
     kString, true},
    {"ContainerPreferredAllocationRequest", "allocation_size", 3,
     FieldDescriptor::TYPE_INT32, false},
    {"PreferredAllocationResponse", "container_responses", 1, kMessage, true,
     "v1beta1.ContainerPreferredAllocationResponse"},
    {"ContainerPreferredAllocationResponse", "deviceIDs", 1, kString, true},
    {"AllocateRequest", "container_requests", 1, kMessage, true,
     "v1beta1.ContainerAllocateRequest"},
    {"ContainerAllocateRequest", "devices_ids", 1, kString, true},
    {"AllocateResponse", "container_responses", 1, kMessage, true,
     "v1beta1.ContainerAllocateResponse"},
    {"ContainerAllocateResponse", "envs", 1, kMessage, true},
    {"ContainerAllocateResponse", "mounts", 2, kMessage, true, "v1beta1.Mount"},
    {"ContainerAllocateResponse", "devices", 3, kMessage, true,
     "v1beta1.DeviceSpec"},
    {"ContainerAllocateResponse", "annotations", 4, kMessage, true},
    {"ContainerAllocateResponse", "cdi_devices", 5, kMessage, true,
     "v1beta1.CDIDevice"},
    {"Mount", "container_path", 1, kString, false},
    {"Mount", "host_path", 2, kString, false},
    {"Mount", "read_only", 3, kBool, false},
    {"DeviceSpec", "container_path", 1, kString, false},
    {"DeviceSpec", "host_path", 2, kString, false},
    {"DeviceSpec", "permissions", 3, kString, false},
    {"CDIDevice", "name", 1, kString, false},
};

TEST(ApiWireTest, EveryFieldHasTheKubeletsNumberAndType) {
  // Linking the generated code registers the file in the generated pool.
  (void)v1beta1::Empty::descriptor();
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  for (const Field& f : kFields) {
    SCOPED_TRACE(std::string(f.message) + "." + f.name);
    const auto* message =
        pool->FindMessageTypeByName(std::string("v1beta1.") + f.message);
    ASSERT_NE(message, nullptr);
    const FieldDescriptor* field = message->FindFieldByName(f.name);
    ASSERT_NE(field, nullptr);
    EXPECT_EQ(field->number(), f.number);
    EXPECT_EQ(field->type(), f.type);
    EXPECT_EQ(field->is_repeated(), f.repeated);
    if (f.message_type != nullptr) {
      EXPECT_EQ(field->message_type()->full_name(), f.message_type);
    }
  }
  // No field beyond the spec's (e.g. the historical DeviceSpec field 4).
  const auto* device_spec = pool->FindMessageTypeByName("v1beta1.DeviceSpec");
  EXPECT_EQ(device_spec->field_count(), 3);
  EXPECT_EQ(pool->FindMessageTypeByName("v1beta1.Empty")->field_count(), 0);
  EXPECT_EQ(pool->FindMessageTypeByName("v1beta1.PreStartContainerResponse")
                ->field_count(),
            0);
  // Maps are string -> string.
  const auto* envs =
      pool->FindMessageTypeByName("v1beta1.ContainerAllocateResponse")
          ->FindFieldByName("envs");
  ASSERT_TRUE(envs->is_map());
  EXPECT_EQ(envs->message_type()->FindFieldByNumber(1)->type(), kString);
  EXPECT_EQ(envs->message_type()->FindFieldByNumber(2)->type(), kString);
}

TEST(ApiWireTest, MethodPathsAndStreaming) {
  const DescriptorPool* pool = DescriptorPool::generated_pool();
  const auto* registration = pool->FindServiceByName("v1beta1.Registration");
  ASSERT_NE(registration, nullptr);
  ASSERT_EQ(registration->method_count(), 1);
  EXPECT_EQ(registration->method(0)->full_name(),
            "v1beta1.Registration.Register");
  const auto* plugin = pool->FindServiceByName("v1beta1.DevicePlugin");
  ASSERT_NE(plugin, nullptr);
  const char* methods[] = {"GetDevicePluginOptions", "ListAndWatch",
                           "GetPreferredAllocation", "Allocate",
                           "PreStartContainer"};
  ASSERT_EQ(plugin->method_count(), 5);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(plugin->method(i)->name(), methods[i]);
    EXPECT_FALSE(plugin->method(i)->client_streaming());
    EXPECT_EQ(plugin->method(i)->server_streaming(), i == 1);
  }
  // The :path on the wire.
  EXPECT_STREQ(v1beta1::DevicePlugin::service_full_name(),
               "v1beta1.DevicePlugin");
  EXPECT_STREQ(v1beta1::Registration::service_full_name(),
               "v1beta1.Registration");
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

TEST(ApiWireTest, EncodingsMatchBytesWrittenByHand) {
  v1beta1::Device device;
  device.set_id("a");
  device.set_health("Healthy");
  device.mutable_topology()->add_nodes()->set_id(1);
  // 1:"a"  2:"Healthy"  3:{1:{1:1}}
  EXPECT_EQ(device.SerializeAsString(),
            Bytes({0x0a, 0x01, 'a', 0x12, 0x07, 'H', 'e', 'a', 'l', 't', 'h',
                   'y', 0x1a, 0x04, 0x0a, 0x02, 0x08, 0x01}));

  v1beta1::RegisterRequest request;
  request.set_version("v1beta1");
  request.set_endpoint("x.sock");
  request.set_resource_name("e.com/g");
  request.mutable_options()->set_get_preferred_allocation_available(true);
  EXPECT_EQ(request.SerializeAsString(),
            Bytes({0x0a, 0x07, 'v', '1', 'b', 'e', 't',  'a',  '1',  0x12,
                   0x06, 'x',  '.', 's', 'o', 'c', 'k',  0x1a, 0x07, 'e',
                   '.',  'c',  'o', 'm', '/', 'g', 0x22, 0x02, 0x10, 0x01}));

  v1beta1::ContainerPreferredAllocationRequest preferred;
  preferred.add_available_deviceids("d");
  preferred.add_must_include_deviceids("d");
  preferred.set_allocation_size(2);
  EXPECT_EQ(preferred.SerializeAsString(),
            Bytes({0x0a, 0x01, 'd', 0x12, 0x01, 'd', 0x18, 0x02}));

  v1beta1::ContainerAllocateResponse response;
  (*response.mutable_envs())["K"] = "V";
  response.add_cdi_devices()->set_name("v.com/g=1");
  // envs entry: 1:{1:"K" 2:"V"}; cdi_devices: 5:{1:"v.com/g=1"}
  EXPECT_EQ(
      response.SerializeAsString(),
      Bytes({0x0a, 0x06, 0x0a, 0x01, 'K', 0x12, 0x01, 'V', 0x2a, 0x0b, 0x0a,
             0x09, 'v',  '.',  'c',  'o', 'm',  '/',  'g', '=',  '1'}));
}

}  // namespace
}  // namespace topology::plugin
