#include "health_streams.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/impl/rpc_service_method.h>
#include <grpcpp/impl/service_type.h>
#include <grpcpp/support/method_handler.h>
#include <grpcpp/support/sync_stream.h>
#include <sys/mman.h>

namespace topology::draplugin {

// Every device's health as the streams send it, packed: a driver with
// 10,000 devices keeps about 25 bytes a device, not a DeviceHealth each.
struct HealthStreams::List {
  struct Entry {
    // The name ends here in `names` (and starts where the last ended).
    uint32_t name_end = 0;
    uint32_t pool = 0;  // in `pools`
    // Seconds, at most 65,535 (18 hours); 0: the streams' default. With
    // the health in one byte, an entry stays 12 bytes.
    uint16_t timeout = 0;
    HealthStatus health = HealthStatus::kUnknown;
  };
  static_assert(sizeof(Entry) == 12);
  std::vector<std::string> pools;
  std::string names;
  std::vector<Entry> entries;
  std::map<size_t, std::string> messages;  // entry -> message, when any

  // The NodeWatchResourcesResponse of every device as protobuf encodes it
  // (zero and empty fields left out), in a mapping of its own that is
  // unmapped once gRPC has sent it: about 60 bytes a device, nothing left
  // behind on the heap.
  grpc::ByteBuffer Encode(int64_t time, int64_t default_timeout) const {
    using google::protobuf::io::CodedOutputStream;
    const auto varint = [](uint64_t v) {
      return CodedOutputStream::VarintSize64(v);
    };
    const auto text = [&](size_t size) {  // tag, length, bytes
      return 1 + varint(size) + size;
    };
    const auto scalar = [&](uint64_t v) {  // tag, value; nothing for 0
      return v == 0 ? 0 : 1 + varint(v);
    };
    // HealthStatus on the wire: UNKNOWN 0, HEALTHY 1, UNHEALTHY 2.
    const auto wire = [](HealthStatus health) -> uint64_t {
      switch (health) {
        case HealthStatus::kHealthy:
          return 1;
        case HealthStatus::kUnhealthy:
          return 2;
        case HealthStatus::kUnknown:
          break;
      }
      return 0;
    };
    // Sizes first: each device's DeviceIdentifier and DeviceHealth.
    const auto timeout = [&](const Entry& e) -> uint64_t {
      return e.timeout != 0 ? e.timeout
                            : static_cast<uint64_t>(default_timeout);
    };
    std::vector<std::pair<uint32_t, uint32_t>> sizes(entries.size());
    size_t total = 0;
    uint32_t begin = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      const size_t id = text(pools[e.pool].size()) + text(e.name_end - begin);
      const size_t health =
          text(id) + scalar(wire(e.health)) +
          scalar(static_cast<uint64_t>(time)) + scalar(timeout(e)) +
          (messages.contains(i) ? text(messages.at(i).size()) : 0);
      sizes[i] = {static_cast<uint32_t>(id), static_cast<uint32_t>(health)};
      total += text(health);
      begin = e.name_end;
    }
    struct Mapping {
      void* address;
      size_t size;
    };
    if (total == 0) {  // no device: the empty list
      grpc::Slice empty;
      return grpc::ByteBuffer(&empty, 1);
    }
    void* address = mmap(nullptr, total, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    // Without a mapping, on the heap (copied into gRPC's slice).
    std::unique_ptr<uint8_t[]> heap;
    if (address == MAP_FAILED) {
      heap = std::make_unique<uint8_t[]>(total);
      address = heap.get();
    }
    auto* out = static_cast<uint8_t*>(address);
    const auto put_text = [&](uint32_t field, const char* data, size_t size) {
      *out++ = static_cast<uint8_t>(field << 3 | 2);
      out = CodedOutputStream::WriteVarint64ToArray(size, out);
      std::memcpy(out, data, size);
      out += size;
    };
    const auto put_scalar = [&](uint32_t field, uint64_t v) {
      if (v == 0) return;
      *out++ = static_cast<uint8_t>(field << 3);
      out = CodedOutputStream::WriteVarint64ToArray(v, out);
    };
    begin = 0;
    for (size_t i = 0; i < entries.size(); ++i) {
      const Entry& e = entries[i];
      *out++ = 1 << 3 | 2;  // devices
      out = CodedOutputStream::WriteVarint64ToArray(sizes[i].second, out);
      *out++ = 1 << 3 | 2;  // device
      out = CodedOutputStream::WriteVarint64ToArray(sizes[i].first, out);
      put_text(1, pools[e.pool].data(), pools[e.pool].size());
      put_text(2, names.data() + begin, e.name_end - begin);
      put_scalar(2, wire(e.health));
      put_scalar(3, static_cast<uint64_t>(time));
      put_scalar(4, timeout(e));
      if (const auto it = messages.find(i); it != messages.end()) {
        put_text(5, it->second.data(), it->second.size());
      }
      begin = e.name_end;
    }
    if (heap != nullptr) {
      grpc::Slice copy(heap.get(), total);
      return grpc::ByteBuffer(&copy, 1);
    }
    auto* mapping = new Mapping{address, total};
    grpc::Slice slice(
        address, total,
        [](void* user) {
          auto* m = static_cast<Mapping*>(user);
          munmap(m->address, m->size);
          delete m;
        },
        mapping);
    return grpc::ByteBuffer(&slice, 1);
  }

  static List Of(const std::vector<DeviceHealth>& devices) {
    List list;
    size_t bytes = 0;
    for (const DeviceHealth& device : devices) bytes += device.device.size();
    list.names.reserve(bytes);
    list.entries.reserve(devices.size());
    std::map<std::string_view, uint32_t> pool_index;
    for (const DeviceHealth& device : devices) {
      auto [pool, added] = pool_index.try_emplace(
          device.pool, static_cast<uint32_t>(list.pools.size()));
      if (added) list.pools.push_back(device.pool);
      list.names += device.device;
      list.entries.push_back({static_cast<uint32_t>(list.names.size()),
                              pool->second,
                              static_cast<uint16_t>(std::clamp<int64_t>(
                                  device.timeout.count(), 0, 65535)),
                              device.health});
      if (!device.message.empty()) {
        list.messages[list.entries.size() - 1] = HealthMessage(device.message);
      }
    }
    return list;
  }
};

// The health stream, v1 and v1alpha1 alike (the same messages): a raw
// method that sends the list as protobuf encodes it, written straight
// from the packed list at every send (List::Encode), instead of a
// message of a few objects a device built and serialized again at every
// refresh.
class HealthStreams::Service final : public grpc::Service {
 public:
  // `method`: "/<package>.DRAResourceHealth/NodeWatchResources".
  Service(HealthStreams* streams, const char* method) : streams_(streams) {
    AddMethod(new grpc::internal::RpcServiceMethod(
        method, grpc::internal::RpcMethod::SERVER_STREAMING,
        new grpc::internal::ServerStreamingHandler<Service, grpc::ByteBuffer,
                                                   grpc::ByteBuffer>(
            [](Service* service, grpc::ServerContext* context,
               const grpc::ByteBuffer* /*request: no fields*/,
               grpc::ServerWriter<grpc::ByteBuffer>* writer) {
              return service->streams_->Watch(context, writer);
            },
            this)));
  }

 private:
  HealthStreams* const streams_;
};

HealthStreams::HealthStreams(std::chrono::seconds timeout, const Clock* clock)
    : timeout_(timeout),
      clock_(clock),
      v1_(std::make_unique<Service>(
          this, "/v1.DRAResourceHealth/NodeWatchResources")),
      v1alpha1_(std::make_unique<Service>(
          this, "/v1alpha1.DRAResourceHealth/NodeWatchResources")) {}

HealthStreams::~HealthStreams() { Stop(); }

// Seconds since the epoch, as the kubelet reads lastUpdatedTime.
int64_t HealthStreams::Date() const {
  return std::chrono::duration_cast<std::chrono::seconds>(
             clock_->WallNow().time_since_epoch())
      .count();
}

void HealthStreams::Report(const std::string& source,
                           std::vector<DeviceHealth> devices) {
  List list = List::Of(devices);
  devices.clear();
  devices.shrink_to_fit();
  {
    MutexLock lock(mu_);
    SourceReport& report = reports_[source];
    report.list = std::make_shared<const List>(std::move(list));
    report.time = Date();
    report.version = ++version_;
  }
  changed_.notify_all();
}

void HealthStreams::Refresh() {
  {
    MutexLock lock(mu_);
    // Before any report: the empty one of the default source, which tells
    // an open stream that the driver is there.
    if (reports_.empty()) reports_[""].list = std::make_shared<const List>();
    const int64_t now = Date();
    ++version_;
    for (auto& [source, report] : reports_) {
      report.time = now;
      report.version = version_;
    }
  }
  changed_.notify_all();
}

void HealthStreams::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
}

grpc::Status HealthStreams::Watch(
    grpc::ServerContext* context,
    grpc::ServerWriter<grpc::ByteBuffer>* writer) {
  uint64_t sent = 0;  // every report of a version up to this was sent
  while (true) {
    // The reports changed since the last send, one message each.
    std::vector<std::pair<std::shared_ptr<const List>, int64_t>> changed;
    {
      MutexLock lock(mu_);
      // Woken by Report, Refresh and Stop; a cancelled stream
      // (the sync API says so only when asked) is noticed within the
      // wait's bound, a second: an idle stream wakes once a second.
      while (!stopping_ && version_ == sent && !context->IsCancelled()) {
        changed_.wait_for(lock, std::chrono::seconds(1));
      }
      if (stopping_ || context->IsCancelled()) break;
      for (const auto& [source, report] : reports_) {
        if (report.version > sent)
          changed.emplace_back(report.list, report.time);
      }
      sent = version_;
    }
    // Encoded and sent outside the lock: Prepare does not wait on it.
    for (const auto& [list, time] : changed) {
      if (!writer->Write(list->Encode(time, timeout_.count()))) {
        return grpc::Status::OK;
      }
    }
  }
  return grpc::Status::OK;
}

}  // namespace topology::draplugin
