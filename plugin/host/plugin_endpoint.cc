#include "plugin_endpoint.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <glog/logging.h>

namespace topology::host {

namespace {

Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(
                    std::clamp(static_cast<int>(status.error_code()), 1, 15)),
                what + ": " + status.error_message());
}

}  // namespace

StatusOr<std::shared_ptr<PluginEndpoint>> PluginEndpoint::Connect(
    const std::string& resource, const std::filesystem::path& socket,
    std::chrono::milliseconds dial_timeout) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);  // grpc-go's default, as the kubelet
  auto channel = grpc::CreateCustomChannel(
      "unix:" + socket.string(), grpc::InsecureChannelCredentials(), args);
  if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                 dial_timeout)) {
    return UnavailableError("failed to dial device plugin: " + socket.string() +
                            ": no connection within " +
                            std::to_string(dial_timeout.count()) + " ms");
  }
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  v1beta1::DevicePluginOptions options;
  const grpc::Status status =
      stub->GetDevicePluginOptions(&context, v1beta1::Empty(), &options);
  if (!status.ok()) {
    return UnavailableError("failed to get device plugin options: " +
                            status.error_message());
  }
  return std::shared_ptr<PluginEndpoint>(
      new PluginEndpoint(resource, socket, channel,
                         {.pre_start_required = options.pre_start_required(),
                          .get_preferred_allocation_available =
                              options.get_preferred_allocation_available()}));
}

PluginEndpoint::PluginEndpoint(std::string resource,
                               std::filesystem::path socket,
                               std::shared_ptr<grpc::Channel> channel,
                               plugin::DevicePluginOptions options)
    : resource_(std::move(resource)),
      socket_(std::move(socket)),
      channel_(std::move(channel)),
      stub_(v1beta1::DevicePlugin::NewStub(channel_)),
      options_(options) {}

PluginEndpoint::~PluginEndpoint() {
  Stop();
  if (reader_.joinable()) reader_.join();
}

void PluginEndpoint::Start(ListCallback on_list, EndCallback on_end) {
  reader_ = std::thread(
      [this, on_list = std::move(on_list), on_end = std::move(on_end)] {
        auto reader = stub_->ListAndWatch(&stream_context_, v1beta1::Empty());
        v1beta1::ListAndWatchResponse response;
        while (reader->Read(&response)) {
          std::vector<manager::Device> devices;
          devices.reserve(static_cast<size_t>(response.devices_size()));
          for (const auto& device : response.devices()) {
            manager::Device d;
            d.id = device.id();
            // Only the exact string counts as healthy.
            d.healthy = device.health() == "Healthy";
            if (device.has_topology()) {
              for (const auto& node : device.topology().nodes()) {
                d.numa_nodes.push_back(static_cast<int>(node.id()));
              }
            }
            devices.push_back(std::move(d));
          }
          on_list(this, std::move(devices));
        }
        const grpc::Status status = reader->Finish();
        stopped_.store(true);
        on_end(this, status);
      });
}

void PluginEndpoint::Stop() {
  stopped_.store(true);
  stream_context_.TryCancel();
}

Status PluginEndpoint::Stopped() const {
  return UnavailableError("endpoint " + socket_.string() + " (" + resource_ +
                          ") has been stopped");
}

StatusOr<std::vector<std::string>> PluginEndpoint::GetPreferredAllocation(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  if (stopped()) return Stopped();
  v1beta1::PreferredAllocationRequest request;
  auto* container = request.add_container_requests();
  for (const auto& id : available) container->add_available_deviceids(id);
  for (const auto& id : must_include) container->add_must_include_deviceids(id);
  container->set_allocation_size(size);
  grpc::ClientContext context;  // no deadline, as the kubelet
  v1beta1::PreferredAllocationResponse response;
  const grpc::Status status =
      stub_->GetPreferredAllocation(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, "GetPreferredAllocation");
  std::vector<std::string> ids;
  if (response.container_responses_size() > 0) {
    for (const auto& id : response.container_responses(0).deviceids()) {
      ids.push_back(id);
    }
  }
  return ids;
}

Status PluginEndpoint::Allocate(const std::vector<std::string>& device_ids) {
  if (stopped()) return Stopped();
  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();
  for (const auto& id : device_ids) container->add_devices_ids(id);
  grpc::ClientContext context;  // no deadline, as the kubelet
  v1beta1::AllocateResponse response;
  const grpc::Status status = stub_->Allocate(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, "Allocate");
  if (response.container_responses_size() == 0) {
    return InternalError("no containers return in allocation response");
  }
  std::vector<std::string> key = device_ids;
  std::sort(key.begin(), key.end());
  std::lock_guard lock(mu_);
  responses_[key] = response.container_responses(0).SerializeAsString();
  return OkStatus();
}

std::string PluginEndpoint::TakeAllocateResponse(
    const std::vector<std::string>& ids) {
  std::vector<std::string> key = ids;
  std::sort(key.begin(), key.end());
  std::lock_guard lock(mu_);
  auto it = responses_.find(key);
  if (it == responses_.end()) return "";
  std::string out = std::move(it->second);
  responses_.erase(it);
  return out;
}

Status PluginEndpoint::PreStartContainer(
    const std::vector<std::string>& device_ids) {
  if (!options_.pre_start_required) return OkStatus();
  if (stopped()) return Stopped();
  v1beta1::PreStartContainerRequest request;
  for (const auto& id : device_ids) request.add_devices_ids(id);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1beta1::PreStartContainerResponse response;
  return FromGrpc(stub_->PreStartContainer(&context, request, &response),
                  "PreStartContainer");
}

}  // namespace topology::host
