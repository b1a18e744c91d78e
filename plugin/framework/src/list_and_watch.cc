#include "list_and_watch.h"

#include <utility>

namespace topology::plugin {

ListMessage EncodeList(const v1beta1::ListAndWatchResponse& response) {
  auto buffer = std::make_shared<grpc::ByteBuffer>();
  bool own_buffer = false;
  const grpc::Status status =
      grpc::SerializationTraits<v1beta1::ListAndWatchResponse>::Serialize(
          response, buffer.get(), &own_buffer);
  // Serializing an initialised message into memory fails only when the
  // message is over 2 GiB, which SetDevices refuses first.
  if (!status.ok()) return nullptr;
  return buffer;
}

void ListAndWatchReactor::Offer(ListMessage message) {
  std::lock_guard lock(mu_);
  if (finished_ || finish_after_write_) return;
  if (writing_) {
    pending_ = std::move(message);  // newer lists replace older pending ones
    return;
  }
  writing_ = std::move(message);
  StartWrite(writing_.get());
}

void ListAndWatchReactor::Close(const grpc::Status& status) {
  std::lock_guard lock(mu_);
  if (finished_) return;
  pending_.reset();
  if (writing_) {
    finish_after_write_ = status;
    return;
  }
  FinishLocked(status);
}

void ListAndWatchReactor::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  Finish(status);
}

void ListAndWatchReactor::OnWriteDone(bool ok) {
  std::lock_guard lock(mu_);
  writing_.reset();
  if (!ok) {
    // The client went away; the stream is over.
    FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
    return;
  }
  if (finish_after_write_) {
    FinishLocked(*finish_after_write_);
    return;
  }
  if (pending_) {
    writing_ = std::move(pending_);
    StartWrite(writing_.get());
  }
}

void ListAndWatchReactor::OnCancel() {
  std::lock_guard lock(mu_);
  pending_.reset();
  const grpc::Status cancelled(grpc::StatusCode::CANCELLED, "cancelled");
  if (writing_) {
    finish_after_write_ = cancelled;
    return;
  }
  FinishLocked(cancelled);
}

void ListAndWatchReactor::OnDone() {
  set_->Remove(this);
  delete this;
}

void StreamSet::Publish(const ListMessage& message) {
  std::lock_guard lock(mu_);
  latest_ = message;
  for (ListAndWatchReactor* reactor : reactors_) reactor->Offer(message);
}

ListMessage StreamSet::latest() const {
  std::lock_guard lock(mu_);
  return latest_;
}

void StreamSet::Add(ListAndWatchReactor* reactor) {
  {
    std::lock_guard lock(mu_);
    reactors_.insert(reactor);
    empty_since_.reset();
    if (latest_) reactor->Offer(latest_);
  }
  changed_.notify_all();
  on_change_();
}

void StreamSet::Remove(ListAndWatchReactor* reactor) {
  {
    std::lock_guard lock(mu_);
    reactors_.erase(reactor);
    if (reactors_.empty()) empty_since_ = Clock::now();
  }
  changed_.notify_all();
  on_change_();
}

void StreamSet::Close(std::optional<uint64_t> instance,
                      const grpc::Status& status) {
  std::lock_guard lock(mu_);
  for (ListAndWatchReactor* reactor : reactors_) {
    if (!instance || reactor->instance() == *instance) reactor->Close(status);
  }
}

size_t StreamSet::CountLocked(std::optional<uint64_t> instance) const {
  size_t count = 0;
  for (const ListAndWatchReactor* reactor : reactors_) {
    if (!instance || reactor->instance() == *instance) ++count;
  }
  return count;
}

bool StreamSet::WaitClosed(std::optional<uint64_t> instance,
                           std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  return changed_.wait_for(lock, timeout,
                           [&] { return CountLocked(instance) == 0; });
}

size_t StreamSet::size() const {
  std::lock_guard lock(mu_);
  return reactors_.size();
}

std::optional<StreamSet::Clock::time_point> StreamSet::empty_since() const {
  std::lock_guard lock(mu_);
  return empty_since_;
}

}  // namespace topology::plugin
