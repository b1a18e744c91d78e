// ListAndWatch streams of one resource: every open stream gets the latest
// full device list at once and each later one; a slow stream skips
// intermediate lists (each message is complete, so only the newest matters).
// A list is kept encoded (a ListAndWatchResponse's bytes, shared by every
// stream): 10,000 devices are about 0.5 MB that way against 2.7 MB as a
// message of 40,000 small objects.
#ifndef TOPOLOGY_PLUGIN_SRC_LIST_AND_WATCH_H_
#define TOPOLOGY_PLUGIN_SRC_LIST_AND_WATCH_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "topology/clock.h"
#include "topology/thread_annotations.h"

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "deviceplugin/v1beta1/api.pb.h"

namespace topology::plugin {

using ListMessage = std::shared_ptr<const grpc::ByteBuffer>;

// The encoded form of `response`, as streams send it.
ListMessage EncodeList(const v1beta1::ListAndWatchResponse& response);

class StreamSet;
class ListAndWatchQueue;

// One ListAndWatch call, served on its instance's completion queue
// (ListAndWatchQueue). It deletes itself once its finish has been sent and
// gRPC has said the call is done.
class ListAndWatchCall {
 public:
  // Requests the next call of `queue`'s instance.
  explicit ListAndWatchCall(ListAndWatchQueue* queue);
  ListAndWatchCall(const ListAndWatchCall&) = delete;
  ListAndWatchCall& operator=(const ListAndWatchCall&) = delete;

  uint64_t instance() const;
  // Both are called with the set's lock held.
  void Offer(ListMessage message);
  void Close(const grpc::Status& status);

  // The queue's thread: an operation of this call completed.
  enum class Op { kRequest, kWrite, kFinish, kDone };
  struct Tag {
    ListAndWatchCall* call;
    Op op;
  };
  void Proceed(Op op, bool ok);

 private:
  ~ListAndWatchCall() = default;
  void StartWriteLocked(ListMessage message) TOPOLOGY_REQUIRES(mu_);
  void FinishLocked(const grpc::Status& status) TOPOLOGY_REQUIRES(mu_);
  // Nothing of the call is outstanding: Finish completed and gRPC's done
  // notification came.
  bool OverLocked() const TOPOLOGY_REQUIRES(mu_);
  // Removes and deletes the call (once OverLocked()).
  void End() TOPOLOGY_EXCLUDES(mu_);

  ListAndWatchQueue* const queue_;
  Tag tags_[4];
  grpc::ServerContext context_;
  grpc::ByteBuffer request_;  // Empty: carries nothing to read
  grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_{&context_};
  mutable Mutex mu_;
  ListMessage writing_ TOPOLOGY_GUARDED_BY(mu_);
  ListMessage pending_ TOPOLOGY_GUARDED_BY(mu_);
  std::optional<grpc::Status> finish_after_write_ TOPOLOGY_GUARDED_BY(mu_);
  bool finished_ TOPOLOGY_GUARDED_BY(mu_) = false;     // Finish started
  bool finish_done_ TOPOLOGY_GUARDED_BY(mu_) = false;  // and completed
  // gRPC's done notification came
  bool done_ TOPOLOGY_GUARDED_BY(mu_) = false;
};

// The ListAndWatch calls of one serving instance, on a completion queue of
// their own and one thread that waits on it without a deadline: an idle
// stream wakes nothing (gRPC 1.51's callback API polls its queue every
// second from threads of its own).
class ListAndWatchQueue {
 public:
  using Service = v1beta1::DevicePlugin::WithRawMethod_ListAndWatch<
      v1beta1::DevicePlugin::Service>;

  // `on_stream` runs on the queue's thread for each new stream.
  ListAndWatchQueue(Service* service,
                    std::unique_ptr<grpc::ServerCompletionQueue> cq,
                    StreamSet* set, uint64_t instance,
                    std::function<void()> on_stream);
  ListAndWatchQueue(const ListAndWatchQueue&) = delete;
  ListAndWatchQueue& operator=(const ListAndWatchQueue&) = delete;
  // Stop() if not done.
  ~ListAndWatchQueue();

  // Requests the first call and starts the thread, once the server runs.
  void Start();
  // Once the server has shut down: requests no further call, shuts the
  // queue down, and waits until every call on it has ended.
  void Stop();

 private:
  friend class ListAndWatchCall;
  // A new call is requested unless the queue is stopping.
  void RequestNext();
  void Run();

  Service* const service_;
  const std::unique_ptr<grpc::ServerCompletionQueue> cq_;
  StreamSet* const set_;
  const uint64_t instance_;
  const std::function<void()> on_stream_;
  Mutex mu_;
  bool accepting_ TOPOLOGY_GUARDED_BY(mu_) = true;
  bool stopped_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

class StreamSet {
 public:
  // Called (without the lock) whenever the number of open streams changes.
  // `clock` (not owned) dates empty_since().
  StreamSet(std::function<void()> on_change, const Clock* clock)
      : on_change_(std::move(on_change)),
        clock_(clock),
        empty_since_(clock->Now()) {}

  // Stores the latest message and offers it to every stream.
  void Publish(const ListMessage& message);
  ListMessage latest() const;

  // A new stream; it is offered the latest message at once.
  void Add(ListAndWatchCall* call);
  void Remove(ListAndWatchCall* call);

  // Ends the streams served by `instance` (all streams when nullopt).
  void Close(std::optional<uint64_t> instance, const grpc::Status& status);
  // Waits until the streams of `instance` are gone, at most `timeout`.
  bool WaitClosed(std::optional<uint64_t> instance,
                  std::chrono::milliseconds timeout);

  size_t size() const;
  // When no stream is open: since when. nullopt while one is open.
  std::optional<Clock::TimePoint> empty_since() const;

 private:
  size_t CountLocked(std::optional<uint64_t> instance) const
      TOPOLOGY_REQUIRES(mu_);

  const std::function<void()> on_change_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::condition_variable_any changed_;
  ListMessage latest_ TOPOLOGY_GUARDED_BY(mu_);
  std::set<ListAndWatchCall*> calls_ TOPOLOGY_GUARDED_BY(mu_);
  std::optional<Clock::TimePoint> empty_since_ TOPOLOGY_GUARDED_BY(mu_);
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_SRC_LIST_AND_WATCH_H_
