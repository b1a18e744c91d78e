#include "fake_plugin.h"

#include <chrono>
#include <thread>
#include <utility>

#include "socket_util.h"

namespace topology::testing {

v1beta1::Device MakeDevice(const std::string& id,
                           const std::vector<int64_t>& nodes,
                           const std::string& health) {
  v1beta1::Device device;
  device.set_id(id);
  device.set_health(health);
  if (!nodes.empty()) {
    for (int64_t node : nodes)
      device.mutable_topology()->add_nodes()->set_id(node);
  }
  return device;
}

class FakePlugin::Service final : public v1beta1::DevicePlugin::Service {
 public:
  explicit Service(FakePlugin* owner) : owner_(owner) {}

  grpc::Status GetDevicePluginOptions(
      grpc::ServerContext*, const v1beta1::Empty*,
      v1beta1::DevicePluginOptions* out) override {
    owner_->options_calls_.fetch_add(1);
    std::lock_guard lock(owner_->mu_);
    if (owner_->options_error_) return *owner_->options_error_;
    *out = owner_->options_;
    return grpc::Status::OK;
  }

  grpc::Status ListAndWatch(
      grpc::ServerContext* context, const v1beta1::Empty*,
      grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override {
    owner_->stream_opens_.fetch_add(1);
    std::unique_lock lock(owner_->mu_);
    uint64_t sent = 0;
    const uint64_t ends = owner_->end_generation_;
    bool first = true;
    while (true) {
      if (owner_->stopping_)
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "stopping");
      if (owner_->end_generation_ != ends) return owner_->end_status_;
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      if (!owner_->silent_ && (first || owner_->generation_ != sent)) {
        first = false;
        sent = owner_->generation_;
        v1beta1::ListAndWatchResponse response;
        for (const auto& device : owner_->devices_)
          *response.add_devices() = device;
        lock.unlock();
        const bool ok = writer->Write(response);
        lock.lock();
        if (!ok) return grpc::Status::CANCELLED;
        continue;
      }
      owner_->changed_.wait_for(lock, std::chrono::milliseconds(20));
    }
  }

  grpc::Status GetPreferredAllocation(
      grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* request,
      v1beta1::PreferredAllocationResponse* response) override {
    PreferredFn fn;
    {
      std::lock_guard lock(owner_->mu_);
      owner_->preferred_requests_.push_back(*request);
      fn = owner_->preferred_;
    }
    if (fn) return fn(*request, response);
    return grpc::Status::OK;  // empty answer, as the stub's default
  }

  grpc::Status Allocate(grpc::ServerContext*,
                        const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override {
    AllocateFn fn;
    {
      std::lock_guard lock(owner_->mu_);
      owner_->allocate_requests_.push_back(*request);
      fn = owner_->allocate_;
    }
    if (fn) return fn(*request, response);
    for (const auto& container : request->container_requests()) {
      auto* out = response->add_container_responses();
      std::string ids;
      for (const auto& id : container.devices_ids())
        ids += (ids.empty() ? "" : ",") + id;
      (*out->mutable_envs())["FAKE_DEVICES"] = ids;
    }
    return grpc::Status::OK;
  }

  grpc::Status PreStartContainer(
      grpc::ServerContext*, const v1beta1::PreStartContainerRequest* request,
      v1beta1::PreStartContainerResponse*) override {
    PreStartFn fn;
    {
      std::lock_guard lock(owner_->mu_);
      owner_->pre_start_requests_.push_back(*request);
      fn = owner_->pre_start_;
    }
    return fn ? fn(*request) : grpc::Status::OK;
  }

 private:
  FakePlugin* owner_;
};

FakePlugin::FakePlugin(std::filesystem::path dir, std::string resource,
                       std::string endpoint)
    : dir_(std::move(dir)),
      resource_(std::move(resource)),
      endpoint_(std::move(endpoint)) {}

FakePlugin::~FakePlugin() { Stop(); }

void FakePlugin::Start() {
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  service_ = std::make_unique<Service>(this);
  server_ = ServeOnUnixSocket(socket_path(), service_.get());
}

void FakePlugin::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
}

grpc::Status FakePlugin::Register(const std::optional<std::string>& version,
                                  const std::optional<std::string>& resource,
                                  const std::optional<std::string>& endpoint) {
  auto channel = grpc::CreateChannel("unix:" + (dir_ / "kubelet.sock").string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(version.value_or("v1beta1"));
  request.set_resource_name(resource.value_or(resource_));
  request.set_endpoint(endpoint.value_or(endpoint_));
  {
    std::lock_guard lock(mu_);
    *request.mutable_options() = register_options_.value_or(options_);
  }
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(30));
  v1beta1::Empty reply;
  return stub->Register(&context, request, &reply);
}

void FakePlugin::SetDevices(std::vector<v1beta1::Device> devices) {
  {
    std::lock_guard lock(mu_);
    devices_ = std::move(devices);
    ++generation_;
  }
  changed_.notify_all();
}

void FakePlugin::SetOptions(v1beta1::DevicePluginOptions options) {
  std::lock_guard lock(mu_);
  options_ = std::move(options);
}

void FakePlugin::SetRegisterOptions(
    const v1beta1::DevicePluginOptions& options) {
  std::lock_guard lock(mu_);
  register_options_ = options;
}

void FakePlugin::SetOptionsError(std::optional<grpc::Status> error) {
  std::lock_guard lock(mu_);
  options_error_ = std::move(error);
}

void FakePlugin::SetAllocate(AllocateFn fn) {
  std::lock_guard lock(mu_);
  allocate_ = std::move(fn);
}

void FakePlugin::SetPreferred(PreferredFn fn) {
  std::lock_guard lock(mu_);
  preferred_ = std::move(fn);
}

void FakePlugin::SetPreStart(PreStartFn fn) {
  std::lock_guard lock(mu_);
  pre_start_ = std::move(fn);
}

void FakePlugin::EndStreams(grpc::Status status) {
  {
    std::lock_guard lock(mu_);
    end_status_ = std::move(status);
    ++end_generation_;
  }
  changed_.notify_all();
}

std::vector<v1beta1::AllocateRequest> FakePlugin::allocate_requests() const {
  std::lock_guard lock(mu_);
  return allocate_requests_;
}

std::vector<v1beta1::PreferredAllocationRequest>
FakePlugin::preferred_requests() const {
  std::lock_guard lock(mu_);
  return preferred_requests_;
}

std::vector<v1beta1::PreStartContainerRequest> FakePlugin::pre_start_requests()
    const {
  std::lock_guard lock(mu_);
  return pre_start_requests_;
}

void FakePlugin::SetSilent(bool silent) {
  std::lock_guard lock(mu_);
  silent_ = silent;
}

}  // namespace topology::testing
