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

ListAndWatchCall::ListAndWatchCall(ListAndWatchQueue* queue)
    : queue_(queue),
      tags_{{this, Op::kRequest},
            {this, Op::kWrite},
            {this, Op::kFinish},
            {this, Op::kDone}} {
  // Before the request: gRPC says when the call is over (the client gone,
  // the server shut down, or finished), once it has started.
  context_.AsyncNotifyWhenDone(&tags_[static_cast<int>(Op::kDone)]);
  queue_->service_->RequestListAndWatch(&context_, &request_, &writer_,
                                        queue_->cq_.get(), queue_->cq_.get(),
                                        &tags_[static_cast<int>(Op::kRequest)]);
}

uint64_t ListAndWatchCall::instance() const { return queue_->instance_; }

void ListAndWatchCall::Offer(ListMessage message) {
  MutexLock lock(mu_);
  if (finished_ || finish_after_write_) return;
  if (writing_) {
    pending_ = std::move(message);  // newer lists replace older pending ones
    return;
  }
  StartWriteLocked(std::move(message));
}

void ListAndWatchCall::Close(const grpc::Status& status) {
  MutexLock lock(mu_);
  if (finished_) return;
  pending_.reset();
  if (writing_) {
    finish_after_write_ = status;
    return;
  }
  FinishLocked(status);
}

void ListAndWatchCall::StartWriteLocked(ListMessage message) {
  writing_ = std::move(message);
  writer_.Write(*writing_, &tags_[static_cast<int>(Op::kWrite)]);
}

void ListAndWatchCall::FinishLocked(const grpc::Status& status) {
  if (finished_) return;
  finished_ = true;
  writer_.Finish(status, &tags_[static_cast<int>(Op::kFinish)]);
}

void ListAndWatchCall::Proceed(Op op, bool ok) {
  switch (op) {
    case Op::kRequest:
      if (!ok) {
        // The server shut down before a client came: the call never
        // started, and gRPC sends nothing more for it.
        delete this;
        return;
      }
      queue_->RequestNext();
      queue_->on_stream_();
      queue_->set_->Add(this);  // offers the latest list
      return;
    case Op::kWrite: {
      MutexLock lock(mu_);
      writing_.reset();
      if (!ok) {
        // The client went away; the stream is over.
        FinishLocked(
            grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
      } else if (finish_after_write_) {
        FinishLocked(*finish_after_write_);
      } else if (pending_) {
        StartWriteLocked(std::move(pending_));
      }
      return;
    }
    case Op::kFinish: {
      bool over = false;
      {
        MutexLock lock(mu_);
        finish_done_ = true;
        over = OverLocked();
      }
      if (over) End();
      return;
    }
    case Op::kDone: {
      bool over = false;
      {
        MutexLock lock(mu_);
        done_ = true;
        if (context_.IsCancelled() && !finished_) {
          pending_.reset();
          const grpc::Status cancelled(grpc::StatusCode::CANCELLED,
                                       "cancelled");
          if (writing_) {
            finish_after_write_ = cancelled;
          } else {
            FinishLocked(cancelled);
          }
        }
        over = OverLocked();
      }
      if (over) End();
      return;
    }
  }
}

bool ListAndWatchCall::OverLocked() const { return finish_done_ && done_; }

void ListAndWatchCall::End() {
  queue_->set_->Remove(this);
  delete this;
}

ListAndWatchQueue::ListAndWatchQueue(
    Service* service, std::unique_ptr<grpc::ServerCompletionQueue> cq,
    StreamSet* set, uint64_t instance, std::function<void()> on_stream)
    : service_(service),
      cq_(std::move(cq)),
      set_(set),
      instance_(instance),
      on_stream_(std::move(on_stream)) {}

ListAndWatchQueue::~ListAndWatchQueue() { Stop(); }

void ListAndWatchQueue::Start() {
  RequestNext();
  thread_ = std::thread([this] { Run(); });
}

void ListAndWatchQueue::RequestNext() {
  MutexLock lock(mu_);
  if (accepting_) new ListAndWatchCall(this);
}

void ListAndWatchQueue::Stop() {
  {
    MutexLock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    accepting_ = false;
  }
  cq_->Shutdown();
  if (thread_.joinable()) {
    thread_.join();
  } else {
    Run();  // never started: drains what was requested
  }
}

void ListAndWatchQueue::Run() {
  void* tag = nullptr;
  bool ok = false;
  while (cq_->Next(&tag, &ok)) {
    auto* t = static_cast<ListAndWatchCall::Tag*>(tag);
    t->call->Proceed(t->op, ok);
  }
}

void StreamSet::Publish(const ListMessage& message) {
  MutexLock lock(mu_);
  latest_ = message;
  for (ListAndWatchCall* call : calls_) call->Offer(message);
}

ListMessage StreamSet::latest() const {
  MutexLock lock(mu_);
  return latest_;
}

void StreamSet::Add(ListAndWatchCall* call) {
  {
    MutexLock lock(mu_);
    calls_.insert(call);
    empty_since_.reset();
    if (latest_) call->Offer(latest_);
  }
  changed_.notify_all();
  on_change_();
}

void StreamSet::Remove(ListAndWatchCall* call) {
  {
    MutexLock lock(mu_);
    calls_.erase(call);
    if (calls_.empty()) empty_since_ = clock_->Now();
  }
  changed_.notify_all();
  on_change_();
}

void StreamSet::Close(std::optional<uint64_t> instance,
                      const grpc::Status& status) {
  MutexLock lock(mu_);
  for (ListAndWatchCall* call : calls_) {
    if (!instance || call->instance() == *instance) call->Close(status);
  }
}

size_t StreamSet::CountLocked(std::optional<uint64_t> instance) const {
  size_t count = 0;
  for (const ListAndWatchCall* call : calls_) {
    if (!instance || call->instance() == *instance) ++count;
  }
  return count;
}

bool StreamSet::WaitClosed(std::optional<uint64_t> instance,
                           std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(mu_);
  while (CountLocked(instance) != 0) {
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout) {
      return CountLocked(instance) == 0;
    }
  }
  return true;
}

size_t StreamSet::size() const {
  MutexLock lock(mu_);
  return calls_.size();
}

std::optional<Clock::TimePoint> StreamSet::empty_since() const {
  MutexLock lock(mu_);
  return empty_since_;
}

}  // namespace topology::plugin
