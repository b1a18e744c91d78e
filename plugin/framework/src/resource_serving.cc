// ResourceRegistrar: one resource's sockets and registration: an instance
// served per socket, registration with the kubelet with backoff, re-serving
// when the socket is removed or the kubelet restarts, supervision, shutdown.
#include "resource_server.h"

namespace topology::plugin::internal {

StatusOr<std::unique_ptr<ServingInstance>> ResourceRegistrar::NewInstance() {
  auto instance = std::make_unique<ServingInstance>();
  {
    MutexLock lock(state_mu_);
    instance->id = next_instance_++;
  }
  instance->endpoint = OwnPrefix() + std::to_string(instance->id) + ".sock";
  instance->path = options_.plugin_dir / instance->endpoint;
  // Never another instance's: the name holds this instance's random token,
  // so a file already there is not ours to delete.
  std::error_code ignored;
  if (std::filesystem::symlink_status(instance->path, ignored).type() !=
      std::filesystem::file_type::not_found) {
    return FailedPreconditionError(instance->path.string() +
                                   " exists and is not this instance's");
  }

  instance->service = std::make_unique<DevicePluginService>(owner_);
  std::unique_ptr<grpc::ServerCompletionQueue> cq;
  // Only the kubelet (root) connects, whatever the umask; the socket
  // appears once it accepts.
  auto served = common::ServedSocket::Serve(
      {.path = instance->path,
       .services = {instance->service.get()},
       .socket = {.mode = 0600, .max_connections = kMaxConnections},
       .configure = [&cq](grpc::ServerBuilder& builder) {
         using Option = grpc::ServerBuilder::SyncServerOption;
         builder.SetSyncServerOption(Option::NUM_CQS, 1);
         builder.SetSyncServerOption(Option::MIN_POLLERS, 1);
         builder.SetSyncServerOption(Option::MAX_POLLERS, 2);
         cq = builder.AddCompletionQueue();
       }});
  if (!served.ok()) {
    return FailedPreconditionError(std::string(served.status().message()) +
                                   " (is the directory writable?)");
  }
  instance->served = std::move(*served);
  instance->list_and_watch = std::make_unique<ListAndWatchQueue>(
      instance->service.get(), std::move(cq), &owner_->streams(), instance->id,
      [owner = owner_] { owner->MarkListed(); });
  instance->list_and_watch->Start();
  return instance;
}

Status ResourceRegistrar::StartServing() {
  StatusOr<std::unique_ptr<ServingInstance>> instance = NewInstance();
  if (!instance.ok()) return instance.status();
  // A socket removed right after binding (a kubelet or topology-manager
  // starting at the same moment deletes every socket in the directory) is
  // not a reason to exit: the supervisor serves a new one before it
  // registers.
  LOG(INFO) << name_ << ": serving on " << (*instance)->path.string();
  MutexLock lock(state_mu_);
  current_ = std::move(*instance);
  backoff_ = options_.initial_backoff;
  next_attempt_ = options_.clock->Now();
  return OkStatus();
}

void ResourceRegistrar::Retire(
    std::vector<std::unique_ptr<ServingInstance>> instances,
    std::chrono::system_clock::time_point grace_end) {
  const grpc::Status superseded(grpc::StatusCode::UNAVAILABLE,
                                "the device plugin moved to a new socket");
  for (auto& instance : instances) {
    // No new connection; the socket goes if it is still this instance's.
    instance->served->StopAccepting();
    owner_->streams().Close(instance->id, superseded);
    instance->served->Shutdown(grace_end);
    instance->list_and_watch->Stop();
    owner_->streams().WaitClosed(instance->id, Remaining(grace_end));
    VLOG(1) << name_ << ": retired " << instance->endpoint;
  }
}

Status ResourceRegistrar::Register(const std::string& endpoint) {
  const std::filesystem::path kubelet = options_.plugin_dir / kKubeletSocket;
  auto channel = grpc::CreateChannel("unix:" + kubelet.string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::Registration::NewStub(channel);
  v1beta1::RegisterRequest request;
  request.set_version(kApiVersion);
  request.set_endpoint(endpoint);
  request.set_resource_name(name_);
  *request.mutable_options() = ToProto(owner_->plugin_options());
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       options_.register_timeout);
  {
    MutexLock lock(state_mu_);
    if (stopping_) return Status(StatusCode::kCancelled, "stopping");
    // Our socket was deleted since the supervisor picked this endpoint.
    if (restart_requested_) {
      return Status(StatusCode::kCancelled, "socket replaced");
    }
    pending_register_ = &context;
  }
  v1beta1::Empty reply;
  const grpc::Status status = stub->Register(&context, request, &reply);
  {
    MutexLock lock(state_mu_);
    pending_register_ = nullptr;
  }
  return FromGrpcStatus(status);
}

void ResourceRegistrar::OnDirEvent(const common::DirEvent& event) {
  MutexLock lock(state_mu_);
  if (stopping_) return;
  if (event.kind == common::DirEvent::Kind::kCreated &&
      event.name == kKubeletSocket) {
    kubelet_created_ = true;
  } else if (event.name.starts_with(EndpointPrefix()) &&
             !event.name.starts_with(OwnPrefix()) &&
             event.name.ends_with(".sock")) {
    // Another instance's socket for this resource (a rollout's new pod, a
    // second DaemonSet, a manual run).
    if (event.kind == common::DirEvent::Kind::kCreated) {
      if (!registered_ && superseding_.empty()) return;  // it is the older
      if (superseding_.empty()) {
        next_liveness_check_ = options_.clock->Now() + kSupersededCheck;
      }
      if (superseding_.insert(event.name).second) {
        LOG(INFO) << name_ << ": another instance serves " << event.name
                  << "; the kubelet uses it once it registers, and this "
                     "instance registers again when it is gone";
      }
      registered_ = false;
      ++wakes_;
      wake_.notify_all();  // the supervisor now checks that socket
      return;
    }
    // Gone: if it was what the kubelet used (the newer instance, or the
    // last to register after a kubelet restart), nothing serves the
    // resource any more. Registering again costs one call when it was not.
    superseding_.erase(event.name);
    if (!superseding_.empty() || restart_requested_) return;
    LOG(INFO) << name_ << ": another instance's socket " << event.name
              << " is gone; registering again";
    registered_ = false;
    next_attempt_ = options_.clock->Now();
    backoff_ = options_.initial_backoff;
  } else if (current_ && !replacing_ &&
             ((event.kind == common::DirEvent::Kind::kDeleted &&
               event.name == current_->endpoint) ||
              (event.kind == common::DirEvent::Kind::kListed &&
               !restart_requested_)) &&
             !common::IsSocket(current_->path)) {
    // (A delete of a leftover file at our path before binding is not ours:
    // our socket still exists then. A directory that is listed, not
    // watched, shows no socket of ours made and removed between two
    // listings: checked at every listing.)
    LOG(INFO) << name_ << ": socket " << current_->endpoint
              << " was deleted (kubelet restart); serving a new socket";
    restart_requested_ = true;
    deletion_restart_at_ = options_.clock->Now();
    // A Register of the deleted socket in flight would only make the
    // kubelet wait for its dial timeout: give it up now.
    if (pending_register_ != nullptr) pending_register_->TryCancel();
  } else {
    return;
  }
  ++wakes_;
  wake_.notify_all();
}

void ResourceRegistrar::Supervise() {
  MutexLock lock(state_mu_);
  while (!stopping_) {
    if (kubelet_created_) {
      kubelet_created_ = false;
      const bool same_restart =
          deletion_restart_at_ &&
          options_.clock->Now() - *deletion_restart_at_ < kRestartCoalescing;
      if (same_restart && restart_requested_) {
        // The pending restart covers it.
      } else if (same_restart && current_ && common::IsSocket(current_->path)) {
        if (!registered_) {
          VLOG(1) << name_ << ": kubelet.sock is back; registering now";
          next_attempt_ = options_.clock->Now();
          backoff_ = options_.initial_backoff;
        }
      } else {
        LOG(INFO) << name_ << ": kubelet.sock was created (kubelet restart); "
                  << "serving a new socket and registering again";
        restart_requested_ = true;
      }
    }
    if (!restart_requested_ && current_ && !common::IsSocket(current_->path)) {
      // Our socket is gone (a kubelet's start-up cleanup, perhaps before
      // the watch saw it): registering it would only fail.
      LOG(INFO) << name_ << ": socket " << current_->endpoint
                << " is gone; serving a new socket";
      restart_requested_ = true;
      deletion_restart_at_ = options_.clock->Now();
    }
    if (restart_requested_) {
      restart_requested_ = false;
      replacing_ = true;
      lock.unlock();
      StatusOr<std::unique_ptr<ServingInstance>> instance = NewInstance();
      lock.lock();
      replacing_ = false;
      if (stopping_) {
        if (instance.ok()) {
          lock.unlock();
          std::vector<std::unique_ptr<ServingInstance>> one;
          one.push_back(std::move(*instance));
          Retire(std::move(one), GraceEnd());
          lock.lock();
        }
        break;
      }
      if (!instance.ok()) {
        LOG(ERROR) << name_ << ": " << instance.status().message()
                   << "; trying again in " << backoff_.count() << " ms";
        restart_requested_ = true;
        // Until the back-off ends, or something happens (a Wake()).
        const auto retry_at = options_.clock->Now() + backoff_;
        const uint64_t wakes = wakes_;
        while (!stopping_ && wakes_ == wakes &&
               options_.clock->Now() < retry_at) {
          options_.clock->WaitUntil(wake_, lock, retry_at);
        }
        backoff_ = std::min(backoff_ * 2, options_.max_backoff);
        continue;
      }
      server_restarts_.fetch_add(1);
      LOG(INFO) << name_ << ": serving on " << (*instance)->path.string();
      if (current_) retiring_.push_back(std::move(current_));
      current_ = std::move(*instance);
      registered_ = false;
      backoff_ = options_.initial_backoff;
      next_attempt_ = options_.clock->Now();
      continue;
    }

    if (!superseding_.empty() &&
        options_.clock->Now() >= next_liveness_check_) {
      // A newer instance that died without removing its socket would keep
      // this one silent for good: drop what nobody serves (outside the lock:
      // it connects).
      const std::vector<std::string> others(superseding_.begin(),
                                            superseding_.end());
      lock.unlock();
      std::vector<std::string> dead;
      for (const std::string& other : others) {
        if (!Listening(options_.plugin_dir / other)) dead.push_back(other);
      }
      lock.lock();
      if (stopping_) break;
      next_liveness_check_ = options_.clock->Now() + kSupersededCheck;
      for (const std::string& other : dead) superseding_.erase(other);
      if (superseding_.empty() && !dead.empty()) {
        LOG(INFO) << name_ << ": the other instance's socket " << dead.front()
                  << " is served by nobody; registering again";
        next_attempt_ = options_.clock->Now();
      }
      continue;
    }

    const auto now = options_.clock->Now();
    if (!registered_ && superseding_.empty() && now >= next_attempt_) {
      const std::string endpoint = current_->endpoint;
      lock.unlock();
      const Status status = Register(endpoint);
      lock.lock();
      if (stopping_) break;
      if (restart_requested_) continue;
      if (status.ok()) {
        failures_in_a_row_ = 0;
        registered_ = true;
        registered_at_ = options_.clock->Now();
        backoff_ = options_.initial_backoff;
        // Counted once dated: whoever sees the count sees the stream gap
        // measured from this registration.
        registrations_.fetch_add(1);
        LOG(INFO) << name_ << ": registered endpoint " << endpoint
                  << " with the kubelet";
        if (!retiring_.empty()) {
          auto old = std::move(retiring_);
          retiring_.clear();
          lock.unlock();
          Retire(std::move(old), GraceEnd());
          lock.lock();
        }
      } else {
        // The next attempt is set before the failure is counted: whoever
        // sees the count sees the back-off in force.
        next_attempt_ = options_.clock->Now() + backoff_;
        const uint64_t failures = registration_failures_.fetch_add(1) + 1;
        ++failures_in_a_row_;
        // The kubelet is often just restarting: warn on the 1st, 2nd, 4th,
        // 8th... failure in a row, keep the rest for -v=1.
        const bool warn = (failures_in_a_row_ & (failures_in_a_row_ - 1)) == 0;
        LOG_IF(WARNING, warn || VLOG_IS_ON(1))
            << name_ << ": Register with "
            << (options_.plugin_dir / kKubeletSocket).string() << " failed ("
            << failures_in_a_row_ << " in a row, " << failures
            << " in all): " << status.ToString() << "; retrying in "
            << backoff_.count() << " ms";
        backoff_ = std::min(backoff_ * 2, options_.max_backoff);
      }
      continue;
    }

    std::optional<Clock::TimePoint> wake_at;
    if (!superseding_.empty()) {
      // Another instance serves: wait for its socket to go.
      wake_at = next_liveness_check_;
    } else if (!registered_) {
      wake_at = next_attempt_;
    } else if (options_.stream_gap.count() > 0) {
      if (auto empty_since = owner_->streams().empty_since()) {
        const auto gap_start = std::max(*empty_since, registered_at_);
        if (now - gap_start >= options_.stream_gap) {
          LOG(WARNING) << name_ << ": no ListAndWatch stream for "
                       << options_.stream_gap.count()
                       << " ms; registering again on a new socket";
          restart_requested_ = true;
          continue;
        }
        wake_at = gap_start + options_.stream_gap;
      }
    }
    if (wake_at) {
      // (A wait may end early, notified or spuriously: the loop looks again.)
      options_.clock->WaitUntil(wake_, lock, *wake_at);
    } else {
      wake_.wait(lock);
    }
  }
}

void ResourceRegistrar::Stop() {
  {
    MutexLock lock(state_mu_);
    if (stopping_ && !supervisor_.joinable() && !current_ &&
        retiring_.empty()) {
      return;
    }
    stopping_ = true;
    if (pending_register_ != nullptr) pending_register_->TryCancel();
  }
  wake_.notify_all();
  if (supervisor_.joinable()) supervisor_.join();
  std::vector<std::unique_ptr<ServingInstance>> all;
  {
    MutexLock lock(state_mu_);
    all = std::move(retiring_);
    retiring_.clear();
    if (current_) all.push_back(std::move(current_));
    registered_ = false;
  }
  const grpc::Status closing(grpc::StatusCode::UNAVAILABLE,
                             "the device plugin is shutting down");
  owner_->streams().Close(std::nullopt, closing);
  const auto grace_end = GraceEnd();
  Retire(std::move(all), grace_end);
  owner_->streams().WaitClosed(std::nullopt, Remaining(grace_end));
}

grpc::Status DevicePluginService::GetDevicePluginOptions(
    grpc::ServerContext* /*context*/, const v1beta1::Empty* /*request*/,
    v1beta1::DevicePluginOptions* response) {
  *response = ToProto(owner_->plugin_options());
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::StreamedGetPreferredAllocation(
    grpc::ServerContext* /*context*/,
    grpc::ServerUnaryStreamer<v1beta1::PreferredAllocationRequest,
                              v1beta1::PreferredAllocationResponse>* streamer) {
  google::protobuf::Arena arena;
  auto* request = google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationRequest>(&arena);
  if (!streamer->Read(request)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "GetPreferredAllocation: the request could not be "
                        "read (not a PreferredAllocationRequest, or the "
                        "caller went away)");
  }
  auto* response = google::protobuf::Arena::CreateMessage<
      v1beta1::PreferredAllocationResponse>(&arena);
  grpc::Status status = owner_->GetPreferredAllocation(*request, response);
  // Exactly one write for a streamed unary call, and only with an answer;
  // as the last message it goes out with the status, and the handler does
  // not wait for it on its own (one hand-off fewer per call).
  if (status.ok() &&
      !streamer->Write(*response, grpc::WriteOptions().set_last_message())) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "GetPreferredAllocation: the caller went away");
  }
  return status;
}

grpc::Status DevicePluginService::Allocate(
    grpc::ServerContext* /*context*/, const v1beta1::AllocateRequest* request,
    v1beta1::AllocateResponse* response) {
  return owner_->Allocate(*request, response);
}

grpc::Status DevicePluginService::PreStartContainer(
    grpc::ServerContext* /*context*/,
    const v1beta1::PreStartContainerRequest* request,
    v1beta1::PreStartContainerResponse* /*response*/) {
  return owner_->PreStartContainer(*request);
}

}  // namespace topology::plugin::internal
