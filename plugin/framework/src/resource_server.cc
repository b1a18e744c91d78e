// ResourceServer's answers: the device list it publishes, and the
// kubelet's Allocate, GetPreferredAllocation and PreStartContainer calls,
// each checked on the way in and out.
#include "resource_server.h"

namespace topology::plugin::internal {

static Status ValidateDevices(const std::vector<Device>& devices) {
  std::set<std::string_view> seen;
  for (size_t i = 0; i < devices.size(); ++i) {
    const Device& device = devices[i];
    const std::string where = "device " + std::to_string(i);
    if (device.id.empty()) return InvalidArgumentError(where + ": empty id");
    if (device.id.size() > kMaxIdBytes) {
      return InvalidArgumentError(where + ": id " + Quoted(device.id) +
                                  " is longer than 63 bytes");
    }
    if (!seen.insert(device.id).second) {
      return InvalidArgumentError(where + ": id " + Quoted(device.id) +
                                  " appears twice");
    }
    for (int64_t node : device.numa_nodes) {
      if (node < 0) {
        return InvalidArgumentError(where + " (" + device.id +
                                    "): negative NUMA node " +
                                    std::to_string(node));
      }
    }
  }
  return OkStatus();
}

Status ResourceServer::SetDevices(std::vector<Device> devices) {
  Status valid = ValidateDevices(devices);
  if (!valid.ok()) return valid.WithContext(name_);
  ListMessage message;
  {
    // The message lives only to be encoded: on an arena, in a few blocks
    // instead of four allocations per device.
    google::protobuf::Arena arena;
    auto* response =
        google::protobuf::Arena::CreateMessage<v1beta1::ListAndWatchResponse>(
            &arena);
    ToProto(devices, response);
    const size_t bytes = response->ByteSizeLong();
    if (bytes > options_.max_message_bytes) {
      return ResourceExhaustedError(
          name_ + ": the list of " + std::to_string(devices.size()) +
          " devices encodes to " + std::to_string(bytes) +
          " bytes, more than the kubelet receives (" +
          std::to_string(options_.max_message_bytes) + ")");
    }
    message = EncodeList(*response);
    if (!message) {
      return InternalError(name_ + ": cannot encode the list of " +
                           std::to_string(devices.size()) + " devices");
    }
  }
  MutexLock lock(devices_mu_);
  const bool first = !streams_.latest();
  if (!first && devices == devices_) return OkStatus();
  devices_ = std::move(devices);
  devices_.shrink_to_fit();
  by_id_.resize(devices_.size());
  std::iota(by_id_.begin(), by_id_.end(), 0);
  // (The lambdas see the list through a pointer taken under the lock.)
  const Device* const listed = devices_.data();
  std::sort(by_id_.begin(), by_id_.end(), [listed](uint32_t a, uint32_t b) {
    return listed[a].id < listed[b].id;
  });
  if (!first) {
    list_updates_.fetch_add(1);
    VLOG(1) << name_ << ": streaming " << devices_.size() << " devices to "
            << streams_.size() << " ListAndWatch stream(s)";
  }
  streams_.Publish(message);
  return OkStatus();
}

ResourceStats ResourceServer::stats() const {
  ResourceStats stats;
  stats.registrations = registrar_.registrations();
  stats.registration_failures = registrar_.registration_failures();
  stats.server_restarts = registrar_.server_restarts();
  stats.allocate_calls = allocate_calls_.load();
  stats.allocate_errors = allocate_errors_.load();
  stats.preferred_calls = preferred_calls_.load();
  stats.preferred_errors = preferred_errors_.load();
  stats.list_updates = list_updates_.load();
  stats.open_streams = streams_.size();
  stats.preferred_latency = preferred_latency_.Read();
  return stats;
}

Status ResourceServer::CheckIds(const std::vector<std::string>& ids,
                                bool healthy) const {
  MutexLock lock(devices_mu_);
  // Ids in ascending order (what this project's host sends) are found in
  // one walk along the index; others by binary search each (the kubelet
  // sends a Go set's order).
  const bool ascending = std::is_sorted(ids.begin(), ids.end());
  const Device* const listed = devices_.data();
  const auto before = [listed](uint32_t index, const std::string& wanted) {
    return listed[index].id < wanted;
  };
  auto from = by_id_.begin();
  for (const std::string& id : ids) {
    const auto it =
        ascending ? GallopLowerBound(from, by_id_.end(), id, before)
                  : std::lower_bound(by_id_.begin(), by_id_.end(), id, before);
    from = it;
    if (it == by_id_.end() || devices_[*it].id != id) {
      return InvalidArgumentError("unknown device " + Quoted(id) + " for " +
                                  name_);
    }
    if (healthy && devices_[*it].health != Health::kHealthy) {
      return InvalidArgumentError("device " + Quoted(id) + " of " + name_ +
                                  " is unhealthy");
    }
  }
  return OkStatus();
}

static Status CheckAllocation(const ContainerAllocation& allocation) {
  for (const auto& [key, value] : allocation.envs) {
    if (key.empty())
      return InternalError("the plugin returned an empty env name");
  }
  for (const auto& [key, value] : allocation.annotations) {
    if (key.empty()) {
      return InternalError("the plugin returned an empty annotation key");
    }
  }
  for (const common::DeviceNode& node : allocation.devices) {
    if (node.permissions.find_first_not_of("rwm") != std::string::npos) {
      return InternalError("device node " + node.host_path +
                           " has permissions \"" + node.permissions +
                           "\" outside r, w, m");
    }
  }
  return OkStatus();
}

grpc::Status ResourceServer::Allocate(const v1beta1::AllocateRequest& request,
                                      v1beta1::AllocateResponse* response) {
  for (const auto& container : request.container_requests()) {
    allocate_calls_.fetch_add(1);
    std::vector<std::string> ids = Unique(container.devices_ids());
    if (ids.empty()) {
      // Nothing to set up: a well-formed, empty answer (no handler call,
      // so no environment variable with an empty list).
      response->add_container_responses();
      continue;
    }
    Status status =
        listed_.load()
            ? CheckIds(ids, /*healthy=*/true)
            : FailedPreconditionError(
                  "Allocate of " + name_ +
                  " before any ListAndWatch: no device has been offered yet");
    StatusOr<ContainerAllocation> allocation =
        status.ok() ? CallHandler(name_, "Allocate",
                                  [&] { return handler_->Allocate(ids); })
                    : StatusOr<ContainerAllocation>(status);
    if (allocation.ok()) {
      status = CheckAllocation(*allocation);
    } else {
      status = allocation.status();
    }
    if (!status.ok()) {
      allocate_errors_.fetch_add(1);
      LOG(WARNING) << name_ << ": Allocate of " << JoinIds(ids)
                   << " refused: " << status.ToString();
      response->Clear();
      return ToGrpcStatus(status);
    }
    ToProto(*allocation, response->add_container_responses());
    VLOG(2) << name_ << ": allocated " << ids.size() << " device(s)";
  }
  if (const size_t bytes = response->ByteSizeLong();
      bytes > options_.max_message_bytes) {
    allocate_errors_.fetch_add(1);
    response->Clear();
    const Status status = ResourceExhaustedError(
        name_ + ": the Allocate response encodes to " + std::to_string(bytes) +
        " bytes, more than the kubelet receives (" +
        std::to_string(options_.max_message_bytes) + ")");
    LOG(WARNING) << status.message();
    return ToGrpcStatus(status);
  }
  return grpc::Status::OK;
}

// `available` is request.available as SortedViews.
static Status CheckPreferredRequest(
    PreferredAllocationRequest& request,
    const std::vector<std::string_view>& available) {
  if (request.size <= 0) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(request.size) + " is not positive");
  }
  const auto size = static_cast<size_t>(request.size);
  if (size > request.available.size()) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(size) + " exceeds the " +
        std::to_string(request.available.size()) + " available devices");
  }
  if (size < request.must_include.size()) {
    return InvalidArgumentError(
        "allocation_size " + std::to_string(size) + " is smaller than the " +
        std::to_string(request.must_include.size()) + " must-include devices");
  }
  for (const std::string& id : request.must_include) {
    if (!Contains(available, id)) {
      return InvalidArgumentError("must-include device " + Quoted(id) +
                                  " is not available");
    }
  }
  return OkStatus();
}

static Status CheckPreferredAnswer(
    const PreferredAllocationRequest& request,
    const std::vector<std::string_view>& available,
    const std::vector<std::string>& answer) {
  if (answer.size() != static_cast<size_t>(request.size)) {
    return InternalError("the plugin chose " + std::to_string(answer.size()) +
                         " devices instead of " + std::to_string(request.size));
  }
  const std::vector<std::string_view> chosen = SortedViews(answer);
  for (const std::string& id : answer) {
    if (!Contains(available, id)) {
      return InternalError("the plugin chose " + Quoted(id) +
                           ", which is not available or chosen twice");
    }
  }
  if (auto twice = std::adjacent_find(chosen.begin(), chosen.end());
      twice != chosen.end()) {
    return InternalError("the plugin chose " + Quoted(*twice) +
                         ", which is not available or chosen twice");
  }
  for (const std::string& id : request.must_include) {
    if (!Contains(chosen, id)) {
      return InternalError("the plugin left out must-include " + Quoted(id));
    }
  }
  return OkStatus();
}

grpc::Status ResourceServer::GetPreferredAllocation(
    const v1beta1::PreferredAllocationRequest& request,
    v1beta1::PreferredAllocationResponse* response) {
  if (!plugin_options_.get_preferred_allocation_available) {
    return grpc::Status(
        grpc::StatusCode::UNIMPLEMENTED,
        "GetPreferredAllocation is not advertised by the " + name_ + " plugin");
  }
  const auto start = std::chrono::steady_clock::now();
  for (const auto& container : request.container_requests()) {
    preferred_calls_.fetch_add(1);
    PreferredAllocationRequest plain{
        .available = Unique(container.available_deviceids()),
        .must_include = Unique(container.must_include_deviceids()),
        .size = container.allocation_size()};
    const std::vector<std::string_view> available =
        SortedViews(plain.available);
    Status status = CheckIds(plain.available, /*healthy=*/false);
    if (status.ok()) status = CheckPreferredRequest(plain, available);
    StatusOr<std::vector<std::string>> answer =
        status.ok()
            ? CallHandler(
                  name_, "GetPreferredAllocation",
                  [&] { return handler_->GetPreferredAllocation(plain); })
            : StatusOr<std::vector<std::string>>(status);
    if (answer.ok()) {
      status = CheckPreferredAnswer(plain, available, *answer);
    } else {
      status = answer.status();
    }
    if (!status.ok()) {
      preferred_errors_.fetch_add(1);
      LOG(WARNING) << name_
                   << ": GetPreferredAllocation refused: " << status.ToString();
      response->Clear();
      return ToGrpcStatus(status);
    }
    auto* out = response->add_container_responses();
    for (std::string& id : *answer) out->add_deviceids(std::move(id));
  }
  preferred_latency_.Observe(std::chrono::steady_clock::now() - start);
  return grpc::Status::OK;
}

grpc::Status ResourceServer::PreStartContainer(
    const v1beta1::PreStartContainerRequest& request) {
  std::vector<std::string> ids = Unique(request.devices_ids());
  Status status = CheckIds(ids, /*healthy=*/false);
  if (status.ok()) {
    status = CallHandler(name_, "PreStartContainer",
                         [&] { return handler_->PreStartContainer(ids); });
  }
  if (!status.ok()) {
    LOG(WARNING) << name_ << ": PreStartContainer of " << JoinIds(ids)
                 << " failed: " << status.ToString();
  }
  return ToGrpcStatus(status);
}

}  // namespace topology::plugin::internal
