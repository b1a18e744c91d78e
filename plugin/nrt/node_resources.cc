#include "node_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace topology::nrt {

namespace {

constexpr int64_t kMaxCpuId = 1 << 20;
constexpr int64_t kMaxNumaId = 1 << 16;

struct IdError {
  std::string what;
};

int CheckedId(int64_t id, int64_t limit, const char* what) {
  if (id < 0 || id >= limit) {
    throw IdError{std::string(what) + " " + std::to_string(id) +
                  " out of range"};
  }
  return static_cast<int>(id);
}

template <typename Nodes>
std::vector<int> NumaIds(const Nodes& nodes) {
  std::vector<int> out;
  for (const auto& node : nodes) {
    out.push_back(CheckedId(node.id(), kMaxNumaId, "NUMA node"));
  }
  return out;
}

template <typename Cpus>
void AddCpus(const Cpus& cpus, std::vector<int>* out) {
  for (const int64_t id : cpus) out->push_back(CheckedId(id, kMaxCpuId, "CPU"));
}

void AddDevices(const v1::ContainerDevices& devices,
                std::vector<DeviceEntry>* out) {
  std::vector<int> nodes;
  if (devices.has_topology()) nodes = NumaIds(devices.topology().nodes());
  for (const std::string& id : devices.device_ids()) {
    out->push_back({devices.resource_name(), id, nodes});
  }
}

void AddMemory(const v1::ContainerMemory& memory,
               std::vector<MemoryEntry>* out) {
  std::vector<int> nodes;
  if (memory.has_topology()) nodes = NumaIds(memory.topology().nodes());
  out->push_back({memory.memory_type(), memory.size(), std::move(nodes)});
}

Status Unanswered(const std::filesystem::path& socket, const char* call,
                  const grpc::Status& status) {
  return UnavailableError("the kubelet's pod resources API at " +
                          socket.string() + " did not answer " + call + ": " +
                          status.error_message());
}

Status OutOfRange(const std::filesystem::path& socket, const IdError& error) {
  return InvalidArgumentError("the kubelet's pod resources API at " +
                              socket.string() + " answered " + error.what);
}

}  // namespace

StatusOr<NodeResources> ReadNodeResources(const std::filesystem::path& socket,
                                          std::chrono::milliseconds deadline) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxPodResourcesAnswerBytes);
  const auto stub = v1::PodResourcesLister::NewStub(
      grpc::CreateCustomChannel("unix:" + socket.string(),
                                grpc::InsecureChannelCredentials(), arguments));
  v1::AllocatableResourcesResponse allocatable;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    const grpc::Status status = stub->GetAllocatableResources(
        &context, v1::AllocatableResourcesRequest(), &allocatable);
    if (!status.ok()) {
      return Unanswered(socket, "GetAllocatableResources", status);
    }
  }
  v1::ListPodResourcesResponse listed;
  {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline);
    const grpc::Status status =
        stub->List(&context, v1::ListPodResourcesRequest(), &listed);
    if (!status.ok()) return Unanswered(socket, "List", status);
  }
  NodeResources out;
  try {
    AddCpus(allocatable.cpu_ids(), &out.allocatable_cpus);
    for (const auto& devices : allocatable.devices()) {
      AddDevices(devices, &out.allocatable_devices);
    }
    for (const auto& memory : allocatable.memory()) {
      AddMemory(memory, &out.allocatable_memory);
    }
    out.pods.reserve(static_cast<size_t>(listed.pod_resources_size()));
    for (const auto& pod : listed.pod_resources()) {
      PodEntry entry{.ns = pod.namespace_(), .name = pod.name()};
      AddCpus(pod.cpu_ids(), &entry.cpus);
      for (const auto& memory : pod.memory()) AddMemory(memory, &entry.memory);
      for (const auto& container : pod.containers()) {
        AddCpus(container.cpu_ids(), &entry.cpus);
        for (const auto& devices : container.devices()) {
          AddDevices(devices, &entry.devices);
        }
        for (const auto& memory : container.memory()) {
          AddMemory(memory, &entry.memory);
        }
        for (const auto& claim : container.dynamic_resources()) {
          for (const auto& resource : claim.claim_resources()) {
            entry.dra.push_back({resource.driver_name(), resource.pool_name(),
                                 resource.device_name()});
          }
        }
      }
      out.pods.push_back(std::move(entry));
    }
  } catch (const IdError& error) {
    return OutOfRange(socket, error);
  }
  return out;
}

}  // namespace topology::nrt
