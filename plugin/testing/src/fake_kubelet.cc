#include "topology/testing/fake_kubelet.h"

#include <stdexcept>
#include <utility>

#include <sys/stat.h>

#include "topology/plugin/resource_name.h"

namespace topology::testing {

PluginConnection::~PluginConnection() {
  stream_context_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

void PluginConnection::StartStream() {
  stream_opened_ = SteadyClock::now();
  reader_ = std::thread([this] {
    v1beta1::Empty empty;
    auto reader = stub_->ListAndWatch(&stream_context_, empty);
    v1beta1::ListAndWatchResponse response;
    while (reader->Read(&response)) {
      std::lock_guard lock(mu_);
      messages_.push_back({response, SteadyClock::now()});
      changed_.notify_all();
    }
    grpc::Status status = reader->Finish();
    std::lock_guard lock(mu_);
    end_status_ = status;
    changed_.notify_all();
  });
}

bool PluginConnection::WaitForMessages(size_t count,
                                       std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout,
                           [&] { return messages_.size() >= count; });
}

std::vector<PluginConnection::Message> PluginConnection::messages() const {
  std::lock_guard lock(mu_);
  return messages_;
}

std::optional<v1beta1::ListAndWatchResponse> PluginConnection::latest() const {
  std::lock_guard lock(mu_);
  if (messages_.empty()) return std::nullopt;
  return messages_.back().response;
}

void PluginConnection::Cancel() { stream_context_.TryCancel(); }

std::optional<grpc::Status> PluginConnection::WaitForEnd(
    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return end_status_.has_value(); });
  return end_status_;
}

std::optional<v1beta1::ListAndWatchResponse> PluginConnection::WaitForList(
    const std::function<bool(const v1beta1::ListAndWatchResponse&)>& accept,
    std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  std::optional<v1beta1::ListAndWatchResponse> found;
  changed_.wait_for(lock, timeout, [&] {
    if (!messages_.empty() && accept(messages_.back().response)) {
      found = messages_.back().response;
    }
    return found.has_value() || end_status_.has_value();
  });
  return found;
}

namespace {

void SetDeadline(grpc::ClientContext& context) {
  context.set_deadline(std::chrono::system_clock::now() +
                       PluginConnection::kCallTimeout);
}

}  // namespace

grpc::Status PluginConnection::GetPreferredAllocation(
    const std::vector<std::string>& available,
    const std::vector<std::string>& must_include, int size,
    std::vector<std::string>* chosen) {
  v1beta1::PreferredAllocationRequest request;
  v1beta1::ContainerPreferredAllocationRequest* container =
      request.add_container_requests();
  for (const std::string& id : available) {
    container->add_available_deviceids(id);
  }
  for (const std::string& id : must_include) {
    container->add_must_include_deviceids(id);
  }
  container->set_allocation_size(size);
  v1beta1::PreferredAllocationResponse response;
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::Status status =
      stub_->GetPreferredAllocation(&context, request, &response);
  if (!status.ok()) return status;
  if (response.container_responses_size() != 1) {
    return grpc::Status(
        grpc::StatusCode::INTERNAL,
        "GetPreferredAllocation answered " +
            std::to_string(response.container_responses_size()) +
            " container responses for 1 request");
  }
  chosen->assign(response.container_responses(0).deviceids().begin(),
                 response.container_responses(0).deviceids().end());
  return status;
}

grpc::Status PluginConnection::Allocate(
    const std::vector<std::string>& ids,
    v1beta1::ContainerAllocateResponse* response) {
  v1beta1::AllocateRequest request;
  v1beta1::ContainerAllocateRequest* container =
      request.add_container_requests();
  for (const std::string& id : ids) container->add_devices_ids(id);
  v1beta1::AllocateResponse answer;
  grpc::ClientContext context;
  SetDeadline(context);
  grpc::Status status = stub_->Allocate(&context, request, &answer);
  if (!status.ok()) return status;
  if (answer.container_responses_size() != 1) {
    return grpc::Status(grpc::StatusCode::INTERNAL,
                        "Allocate answered " +
                            std::to_string(answer.container_responses_size()) +
                            " container responses for 1 request");
  }
  *response = answer.container_responses(0);
  return status;
}

bool PluginConnection::ended() const {
  std::lock_guard lock(mu_);
  return end_status_.has_value();
}

class FakeKubelet::Service final : public v1beta1::Registration::Service {
 public:
  explicit Service(FakeKubelet* owner) : owner_(owner) {}
  grpc::Status Register(grpc::ServerContext* /*context*/,
                        const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* /*response*/) override {
    return owner_->HandleRegister(*request);
  }

 private:
  FakeKubelet* owner_;
};

FakeKubelet::FakeKubelet(std::filesystem::path dir) : dir_(std::move(dir)) {}

FakeKubelet::~FakeKubelet() { Stop(); }

void FakeKubelet::Start() {
  service_ = std::make_unique<Service>(this);
  std::error_code ignored;
  std::filesystem::remove(socket_path(), ignored);
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket_path().string(),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (!server_) {
    throw std::runtime_error("fake kubelet: cannot serve on " +
                             socket_path().string());
  }
}

void FakeKubelet::Stop() {
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(1));
    server_->Wait();
    server_.reset();
  }
  std::vector<std::shared_ptr<PluginConnection>> connections;
  {
    std::lock_guard lock(mu_);
    connections = connections_;
  }
  for (auto& connection : connections) connection->Cancel();
  for (auto& connection : connections) {
    connection->WaitForEnd(std::chrono::seconds(5));
  }
  // A kubelet that exits forgets its connections; tests holding one keep
  // it alive through their shared_ptr.
  std::lock_guard lock(mu_);
  connections_.clear();
  latest_.clear();
}

void FakeKubelet::DeleteSockets() {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir_, error)) {
    struct stat info {};
    if (lstat(entry.path().c_str(), &info) == 0 && S_ISSOCK(info.st_mode)) {
      std::filesystem::remove(entry.path(), error);
    }
  }
}

void FakeKubelet::Restart(std::chrono::milliseconds gap) {
  Stop();
  DeleteSockets();
  std::this_thread::sleep_for(gap);
  Start();
}

void FakeKubelet::SetReplyDelay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  reply_delay_ = delay;
}

void FakeKubelet::SetDenial(std::optional<grpc::Status> denial) {
  std::lock_guard lock(mu_);
  denial_ = std::move(denial);
}

size_t FakeKubelet::register_attempts() const {
  std::lock_guard lock(mu_);
  return attempts_.size();
}

std::vector<FakeKubelet::SteadyClock::time_point> FakeKubelet::register_times()
    const {
  std::lock_guard lock(mu_);
  return attempts_;
}

size_t FakeKubelet::accepted_registrations() const {
  std::lock_guard lock(mu_);
  size_t total = 0;
  for (const auto& [resource, count] : accepted_) total += count;
  return total;
}

bool FakeKubelet::options_before_reply() const {
  std::lock_guard lock(mu_);
  return options_before_reply_;
}

bool FakeKubelet::first_list_before_reply() const {
  std::lock_guard lock(mu_);
  return first_list_before_reply_;
}

std::shared_ptr<PluginConnection> FakeKubelet::WaitForConnection(
    const std::string& resource, std::chrono::milliseconds timeout,
    size_t min_accepted) {
  std::unique_lock lock(mu_);
  auto ready = [&] {
    auto it = accepted_.find(resource);
    return it != accepted_.end() && it->second >= min_accepted &&
           latest_.contains(resource);
  };
  if (!changed_.wait_for(lock, timeout, ready)) return nullptr;
  return latest_[resource];
}

grpc::Status FakeKubelet::HandleRegister(
    const v1beta1::RegisterRequest& request) {
  std::chrono::milliseconds delay;
  std::optional<grpc::Status> denial;
  {
    std::lock_guard lock(mu_);
    attempts_.push_back(SteadyClock::now());
    delay = reply_delay_;
    denial = denial_;
  }
  changed_.notify_all();
  if (denial) return *denial;
  if (request.version() != "v1beta1") {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "requested API version \"" + request.version() +
                            "\" is not supported by kubelet. Supported "
                            "version is [\"v1beta1\"]");
  }
  if (!plugin::ValidateResourceName(request.resource_name()).ok()) {
    return grpc::Status(
        grpc::StatusCode::UNKNOWN,
        "the ResourceName \"" + request.resource_name() + "\" is invalid");
  }
  if (!plugin::ValidateEndpointName(request.endpoint()).ok()) {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "invalid endpoint " + request.endpoint());
  }
  auto connection = std::shared_ptr<PluginConnection>(new PluginConnection());
  connection->request_ = request;
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  connection->channel_ =
      grpc::CreateCustomChannel("unix:" + (dir_ / request.endpoint()).string(),
                                grpc::InsecureChannelCredentials(), args);
  if (!connection->channel_->WaitForConnected(std::chrono::system_clock::now() +
                                              std::chrono::seconds(10))) {
    return grpc::Status(grpc::StatusCode::UNKNOWN,
                        "failed to dial device plugin: " + request.endpoint());
  }
  connection->stub_ = v1beta1::DevicePlugin::NewStub(connection->channel_);
  {
    grpc::ClientContext context;
    SetDeadline(context);
    v1beta1::Empty empty;
    grpc::Status status = connection->stub_->GetDevicePluginOptions(
        &context, empty, &connection->options_);
    if (!status.ok()) {
      return grpc::Status(
          grpc::StatusCode::UNKNOWN,
          "failed to get device plugin options: " + status.error_message());
    }
  }
  // Like the kubelet: the stream starts before Register returns.
  connection->StartStream();
  {
    std::lock_guard lock(mu_);
    connections_.push_back(connection);
    ++accepted_[request.resource_name()];
    latest_[request.resource_name()] = connection;
  }
  changed_.notify_all();
  std::this_thread::sleep_for(delay);
  {
    std::lock_guard lock(mu_);
    options_before_reply_ = true;
    first_list_before_reply_ = !connection->messages().empty();
  }
  return grpc::Status::OK;
}

}  // namespace topology::testing
