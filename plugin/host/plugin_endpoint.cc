#include "plugin_endpoint.h"

#include <algorithm>
#include <chrono>
#include <map>

#include <glog/logging.h>
#include <google/protobuf/arena.h>

namespace topology::host {

namespace {

// A plugin's error text is shown, but never more than this of it.
constexpr size_t kMaxErrorText = 512;

Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return OkStatus();
  std::string text = status.error_message();
  if (text.size() > kMaxErrorText) {
    text = text.substr(0, kMaxErrorText) + "... (" +
           std::to_string(text.size()) + " bytes)";
  }
  return Status(static_cast<StatusCode>(
                    std::clamp(static_cast<int>(status.error_code()), 1, 15)),
                what + ": " + text);
}

}  // namespace

StatusOr<std::shared_ptr<PluginEndpoint>> PluginEndpoint::Connect(
    const std::string& resource, const std::filesystem::path& socket,
    std::chrono::milliseconds dial_timeout,
    std::chrono::milliseconds rpc_timeout, const Clock* clock) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxListBytes);
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
  context.set_deadline(std::chrono::system_clock::now() + dial_timeout);
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
                              options.get_preferred_allocation_available()},
                         rpc_timeout, clock));
}

PluginEndpoint::PluginEndpoint(std::string resource,
                               std::filesystem::path socket,
                               std::shared_ptr<grpc::Channel> channel,
                               PluginOptions options,
                               std::chrono::milliseconds rpc_timeout,
                               const Clock* clock)
    : resource_(std::move(resource)),
      socket_(std::move(socket)),
      stub_(v1beta1::DevicePlugin::NewStub(std::move(channel))),
      options_(options),
      rpc_timeout_(rpc_timeout),
      clock_(clock) {}

PluginEndpoint::~PluginEndpoint() {
  Stop();
  if (reader_.joinable()) {
    // Never on the reader itself (no reference is held there), so this
    // waits at most for a thread that is cancelled and returning.
    if (reader_.get_id() == std::this_thread::get_id()) {
      reader_.detach();
    } else {
      reader_.join();
    }
  }
}

void PluginEndpoint::Start(ListCallback on_list, EndCallback on_end) {
  finished_.store(false);
  std::shared_ptr<Stub> stub;
  grpc::ClientContext* context = nullptr;
  {
    MutexLock lock(mu_);
    stub = stub_;
    stream_context_ = std::make_unique<grpc::ClientContext>();
    context = stream_context_.get();
    if (stopped()) context->TryCancel();
  }
  reader_ = std::thread([this, stub = std::move(stub), context,
                         on_list = std::move(on_list),
                         on_end = std::move(on_end)]() mutable {
    grpc::Status status(grpc::StatusCode::UNAVAILABLE,
                        "the endpoint has been stopped");
    if (stub != nullptr) {
      auto reader = stub->ListAndWatch(context, v1beta1::Empty());
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
      status = reader->Finish();
    }
    stopped_.store(true);
    std::unique_ptr<grpc::ClientContext> ended;
    {
      MutexLock lock(mu_);
      ended = std::move(stream_context_);
    }
    // The context before the stub: the context drops its reference to the
    // connection inside gRPC's library, and the last one is dropped here,
    // in code ThreadSanitizer sees (it cannot see the library's atomics).
    ended.reset();
    stub.reset();
    Disconnect();
    Status why = status.ok() ? OkStatus() : FromGrpc(status, "ListAndWatch");
    if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      why = Status(why.code(),
                   why.message() + " (a ListAndWatch message is at most " +
                       std::to_string(kMaxListBytes >> 20) +
                       " MiB, as the kubelet accepts; about 40,000 devices "
                       "with their topology)");
    }
    on_end(this, why);
    finished_.store(true);
  });
}

void PluginEndpoint::Stop() {
  stopped_.store(true);
  {
    MutexLock lock(mu_);
    if (stream_context_ != nullptr) stream_context_->TryCancel();
    for (grpc::ClientContext* context : in_flight_) context->TryCancel();
  }
  Disconnect();
}

void PluginEndpoint::Disconnect() {
  std::shared_ptr<Stub> stub;  // released after the lock
  MutexLock lock(mu_);
  stub = std::move(stub_);
}

StatusOr<std::shared_ptr<PluginEndpoint::Stub>> PluginEndpoint::Track(
    grpc::ClientContext* context, std::chrono::milliseconds timeout,
    const std::string& call) {
  context->set_deadline(std::chrono::system_clock::now() + timeout);
  MutexLock lock(mu_);
  if (stopped() || stub_ == nullptr) return Stopped();
  if (unanswered_since_) {
    const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
        clock_->Now() - *unanswered_since_);
    if (waited < rpc_timeout_ || trial_in_flight_) {
      return DeadlineExceededError(
          call + ": the " + resource_ + " plugin at " + socket_.string() +
          " left a call unanswered for " +
          std::to_string(rpc_timeout_.count()) + " ms " +
          std::to_string(waited.count()) +
          " ms ago; it is not called again until " +
          (trial_in_flight_ ? "the call being tried answers"
                            : std::to_string((rpc_timeout_ - waited).count()) +
                                  " ms from now"));
    }
    trial_in_flight_ = true;  // this call tries whether it answers again
  }
  in_flight_.insert(context);
  return stub_;
}

void PluginEndpoint::Untrack(grpc::ClientContext* context, bool unanswered) {
  MutexLock lock(mu_);
  in_flight_.erase(context);
  trial_in_flight_ = false;
  if (unanswered) {
    unanswered_since_ = clock_->Now();
  } else {
    unanswered_since_.reset();
  }
}

std::string PluginEndpoint::Timeout(const std::string& call) const {
  return call + ": the " + resource_ + " plugin at " + socket_.string() +
         " did not answer within " + std::to_string(rpc_timeout_.count()) +
         " ms";
}

Status PluginEndpoint::Stopped() const {
  return UnavailableError("endpoint " + socket_.string() + " (" + resource_ +
                          ") has been stopped");
}

StatusOr<std::vector<std::string>> PluginEndpoint::GetPreferredAllocation(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size) {
  if (stopped()) return Stopped();
  // Offers run to thousands of ids: one arena holds them all instead of a
  // heap allocation per id.
  google::protobuf::Arena arena;
  auto& request = *google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationRequest>(&arena);
  auto* container = request.add_container_requests();
  container->mutable_available_deviceids()->Reserve(
      static_cast<int>(available.size()));
  for (const auto& id : available) container->add_available_deviceids(id);
  for (const auto& id : must_include) container->add_must_include_deviceids(id);
  container->set_allocation_size(size);
  // Beyond the kubelet (which sets no deadline): a hung plugin fails only
  // the admissions that need it.
  std::shared_ptr<Stub> stub;  // outlives the context (see Start())
  grpc::ClientContext context;
  auto tracked = Track(&context, rpc_timeout_, "GetPreferredAllocation");
  if (!tracked.ok()) return tracked.status();
  stub = std::move(*tracked);
  auto& response = *google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationResponse>(&arena);
  const grpc::Status status =
      stub->GetPreferredAllocation(&context, request, &response);
  Untrack(&context, status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return DeadlineExceededError(Timeout("GetPreferredAllocation"));
  }
  if (!status.ok()) return FromGrpc(status, "GetPreferredAllocation");
  std::vector<std::string> ids;
  if (response.container_responses_size() > 0) {
    ids.reserve(
        static_cast<size_t>(response.container_responses(0).deviceids_size()));
    for (const auto& id : response.container_responses(0).deviceids()) {
      ids.push_back(id);
    }
  }
  return ids;
}

StatusOr<std::string> PluginEndpoint::Allocate(
    const std::vector<std::string>& device_ids) {
  if (stopped()) return Stopped();
  v1beta1::AllocateRequest request;
  auto* container = request.add_container_requests();
  for (const auto& id : device_ids) container->add_devices_ids(id);
  std::shared_ptr<Stub> stub;  // outlives the context (see Start())
  grpc::ClientContext context;
  auto tracked = Track(&context, rpc_timeout_, "Allocate");
  if (!tracked.ok()) return tracked.status();
  stub = std::move(*tracked);
  v1beta1::AllocateResponse response;
  const grpc::Status status = stub->Allocate(&context, request, &response);
  Untrack(&context, status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return DeadlineExceededError(Timeout("Allocate"));
  }
  if (!status.ok()) return FromGrpc(status, "Allocate");
  if (response.container_responses_size() == 0) {
    return InternalError("no containers return in allocation response");
  }
  return response.container_responses(0).SerializeAsString();
}

Status PluginEndpoint::PreStartContainer(
    const std::vector<std::string>& device_ids) {
  if (!options_.pre_start_required) return OkStatus();
  if (stopped()) return Stopped();
  v1beta1::PreStartContainerRequest request;
  for (const auto& id : device_ids) request.add_devices_ids(id);
  std::shared_ptr<Stub> stub;  // outlives the context (see Start())
  grpc::ClientContext context;
  auto tracked = Track(&context, std::chrono::seconds(30), "PreStartContainer");
  if (!tracked.ok()) return tracked.status();
  stub = std::move(*tracked);
  v1beta1::PreStartContainerResponse response;
  const grpc::Status status =
      stub->PreStartContainer(&context, request, &response);
  Untrack(&context, status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  return FromGrpc(status, "PreStartContainer");
}

}  // namespace topology::host
