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
#include <mutex>
#include <optional>
#include <set>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/proto_utils.h>

#include "deviceplugin/v1beta1/api.pb.h"

namespace topology::plugin {

using ListMessage = std::shared_ptr<const grpc::ByteBuffer>;

// The encoded form of `response`, as streams send it.
ListMessage EncodeList(const v1beta1::ListAndWatchResponse& response);

class StreamSet;

class ListAndWatchReactor final
    : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  ListAndWatchReactor(StreamSet* set, uint64_t instance)
      : set_(set), instance_(instance) {}

  uint64_t instance() const { return instance_; }
  // Both are called with the set's lock held.
  void Offer(ListMessage message);
  void Close(const grpc::Status& status);

 private:
  void OnWriteDone(bool ok) override;
  void OnCancel() override;
  void OnDone() override;
  void FinishLocked(const grpc::Status& status);

  StreamSet* const set_;
  const uint64_t instance_;
  std::mutex mu_;
  ListMessage writing_;
  ListMessage pending_;
  std::optional<grpc::Status> finish_after_write_;
  bool finished_ = false;
};

class StreamSet {
 public:
  using Clock = std::chrono::steady_clock;

  // Called (without the lock) whenever the number of open streams changes.
  explicit StreamSet(std::function<void()> on_change)
      : on_change_(std::move(on_change)) {}

  // Stores the latest message and offers it to every stream.
  void Publish(const ListMessage& message);
  ListMessage latest() const;

  // A new stream; it is offered the latest message at once.
  void Add(ListAndWatchReactor* reactor);
  void Remove(ListAndWatchReactor* reactor);

  // Ends the streams served by `instance` (all streams when nullopt).
  void Close(std::optional<uint64_t> instance, const grpc::Status& status);
  // Waits until the streams of `instance` are gone, at most `timeout`.
  bool WaitClosed(std::optional<uint64_t> instance,
                  std::chrono::milliseconds timeout);

  size_t size() const;
  // When no stream is open: since when. nullopt while one is open.
  std::optional<Clock::time_point> empty_since() const;

 private:
  size_t CountLocked(std::optional<uint64_t> instance) const;

  std::function<void()> on_change_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  ListMessage latest_;
  std::set<ListAndWatchReactor*> reactors_;
  std::optional<Clock::time_point> empty_since_ = Clock::now();
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_SRC_LIST_AND_WATCH_H_
