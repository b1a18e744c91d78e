// DriverRunner's parts, private to the DRA framework: the runner's state
// and its gRPC services (registration, DRA v1 and v1beta1, health v1 and
// v1alpha1), declared here and defined in driver_runner.cc (start, stop,
// sockets, the facade) and driver_claims.cc (Prepare and Unprepare, the
// claim checkpoint, the instances' lock).
#ifndef TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_
#define TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <exception>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/grpcpp.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "topology/draplugin/claim_checkpoint.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/slice_validation.h"
#include "topology/plugin/guarded.h"
#include "topology/plugin/unix_socket.h"
#include "topology/thread_annotations.h"

#include "checksum.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "k8s_names.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "safe_file.h"

namespace topology::draplugin {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

inline constexpr char kDraV1[] = "v1.DRAPlugin";
inline constexpr char kDraV1beta1[] = "v1beta1.DRAPlugin";
inline constexpr char kHealthV1[] = "v1.DRAResourceHealth";
inline constexpr char kHealthV1alpha1[] = "v1alpha1.DRAResourceHealth";
// Rolling-update instances serialise their calls on this file in the
// plugin directory (the Go helper's lock file).
inline constexpr char kSerializeLock[] = "serialize.lock";

// The kubelet keeps at most this many characters of a health message.
inline constexpr size_t kMaxHealthMessage = 1024;

// The length of the UTF-8 sequence at `text[i]`, 0 when it is not a valid
// one (overlong forms, surrogates and values past U+10FFFF included).
inline size_t Utf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char c = byte(i);
  if (c < 0x80) return 1;
  size_t length = 0;
  uint32_t value = 0;
  if (c >= 0xc2 && c <= 0xdf) {
    length = 2;
    value = c & 0x1fu;
  } else if (c >= 0xe0 && c <= 0xef) {
    length = 3;
    value = c & 0x0fu;
  } else if (c >= 0xf0 && c <= 0xf4) {
    length = 4;
    value = c & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xc0u) != 0x80u) return 0;
    value = (value << 6) | (byte(i + k) & 0x3fu);
  }
  if ((length == 3 && value < 0x800) || (length == 4 && value < 0x10000) ||
      (value >= 0xd800 && value <= 0xdfff) || value > 0x10ffff) {
    return 0;
  }
  return length;
}

using plugin::ConnectionCalls;
using plugin::Listening;
using plugin::SocketAt;
using plugin::SocketIdentity;
using plugin::UnixAcceptor;

inline std::string Describe(const ClaimRef& ref) {
  return "claim " + ref.ns + "/" + ref.name + " (" + ref.uid + ")";
}

// Calls the driver's (or the claim source's) code: what it throws becomes
// an INTERNAL error of that claim, never the end of the process.
template <typename Call>
auto Guarded(Call&& call) -> decltype(call()) {
  return plugin::CallGuarded("the driver", std::forward<Call>(call));
}

// What one claim of a call came to.
struct ClaimOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed
};

// The service names registration advertises, in order.
std::vector<std::string> ServedVersions(bool serve_health);

class DriverRunner::Impl {
 public:
  Impl(DriverOptions options, ClaimSource* source, DriverHandler* handler)
      : options_(std::move(options)),
        source_(source),
        handler_(handler),
        registration_socket_(
            options_.pod_uid.empty()
                ? options_.registry_dir / (options_.driver_name + "-reg.sock")
                : RollingUpdateRegistrationSocket(options_.registry_dir,
                                                  options_.driver_name,
                                                  options_.pod_uid)),
        dra_socket_(options_.pod_uid.empty()
                        ? options_.plugin_dir / kDraSocket
                        : options_.plugin_dir /
                              ("dra-" + options_.pod_uid + ".sock")),
        checkpoint_(options_.state_dir / kClaimCheckpointFile),
        registration_(this),
        dra_v1_(this),
        dra_v1beta1_(this),
        health_v1_(this, "/v1.DRAResourceHealth/NodeWatchResources"),
        health_v1alpha1_(this,
                         "/v1alpha1.DRAResourceHealth/NodeWatchResources") {}

  ~Impl() {
    Stop();
    if (instance_lock_fd_ >= 0) close(instance_lock_fd_);
  }

  Status Start() TOPOLOGY_EXCLUDES(mu_);
  void Stop() TOPOLOGY_EXCLUDES(mu_);

  bool registered() const TOPOLOGY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return registered_;
  }
  std::string registration_error() const TOPOLOGY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    return registration_error_;
  }
  void SetHealth(std::vector<DeviceHealth> devices) TOPOLOGY_EXCLUDES(mu_) {
    HealthList list = HealthList::Of(devices);
    devices.clear();
    devices.shrink_to_fit();
    {
      MutexLock lock(mu_);
      health_ = std::make_shared<const HealthList>(std::move(list));
      health_time_ = static_cast<int64_t>(std::time(nullptr));
      ++health_version_;
    }
    changed_.notify_all();
  }
  void RefreshHealth() TOPOLOGY_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      health_time_ = static_cast<int64_t>(std::time(nullptr));
      ++health_version_;
    }
    changed_.notify_all();
  }
  std::vector<ClaimRef> PreparedClaims() const TOPOLOGY_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    std::vector<ClaimRef> out;
    for (const auto& [uid, claim] : claims_) out.push_back(claim.ref);
    return out;
  }

  const std::filesystem::path& registration_socket() const {
    return registration_socket_;
  }
  const std::filesystem::path& dra_socket() const { return dra_socket_; }

 private:
  // --- gRPC services, each a thin shell over the runner -------------------
  class RegistrationService final
      : public pluginregistration::Registration::Service {
   public:
    explicit RegistrationService(Impl* runner) : runner_(runner) {}
    grpc::Status GetInfo(grpc::ServerContext* /*context*/,
                         const pluginregistration::InfoRequest* /*request*/,
                         pluginregistration::PluginInfo* info) override {
      info->set_type(kPluginType);
      info->set_name(runner_->options_.driver_name);
      info->set_endpoint(runner_->dra_socket_.string());
      for (const std::string& version :
           ServedVersions(runner_->options_.serve_health)) {
        info->add_supported_versions(version);
      }
      return grpc::Status::OK;
    }
    grpc::Status NotifyRegistrationStatus(
        grpc::ServerContext* /*context*/,
        const pluginregistration::RegistrationStatus* status,
        pluginregistration::RegistrationStatusResponse* /*response*/) override {
      runner_->OnRegistrationStatus(status->plugin_registered(),
                                    status->error());
      return grpc::Status::OK;
    }

   private:
    Impl* const runner_;
  };

  template <typename Api>
  class DraService final : public Api::DRAPlugin::Service {
   public:
    explicit DraService(Impl* runner) : runner_(runner) {}
    grpc::Status NodePrepareResources(
        grpc::ServerContext* context,
        const typename Api::NodePrepareResourcesRequest* request,
        typename Api::NodePrepareResourcesResponse* response) override {
      for (const auto& [uid, outcome] : runner_->PrepareClaims(
               Refs(request->claims()), runner_->DeadlineOf(context))) {
        auto& out = (*response->mutable_claims())[uid];
        if (!outcome.error.empty()) {
          out.set_error(outcome.error);
          continue;
        }
        for (const PreparedDevice& device : outcome.devices) {
          auto* d = out.add_devices();
          for (const auto& name : device.request_names) {
            d->add_request_names(name);
          }
          d->set_pool_name(device.pool);
          d->set_device_name(device.device);
          for (const auto& id : device.cdi_device_ids) {
            d->add_cdi_device_ids(id);
          }
        }
      }
      return grpc::Status::OK;
    }
    grpc::Status NodeUnprepareResources(
        grpc::ServerContext* context,
        const typename Api::NodeUnprepareResourcesRequest* request,
        typename Api::NodeUnprepareResourcesResponse* response) override {
      for (const auto& [uid, error] : runner_->UnprepareClaims(
               Refs(request->claims()), runner_->DeadlineOf(context))) {
        (*response->mutable_claims())[uid].set_error(error);
      }
      return grpc::Status::OK;
    }

   private:
    template <typename Claims>
    static std::vector<ClaimRef> Refs(const Claims& claims) {
      std::vector<ClaimRef> refs;
      refs.reserve(static_cast<size_t>(claims.size()));
      for (const auto& claim : claims) {
        refs.push_back({claim.namespace_(), claim.uid(), claim.name()});
      }
      return refs;
    }
    Impl* const runner_;
  };

  struct DraV1 {
    using DRAPlugin = drav1::DRAPlugin;
    using NodePrepareResourcesRequest = drav1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse = drav1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest = drav1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse =
        drav1::NodeUnprepareResourcesResponse;
  };
  struct DraV1beta1 {
    using DRAPlugin = drav1beta1::DRAPlugin;
    using NodePrepareResourcesRequest = drav1beta1::NodePrepareResourcesRequest;
    using NodePrepareResourcesResponse =
        drav1beta1::NodePrepareResourcesResponse;
    using NodeUnprepareResourcesRequest =
        drav1beta1::NodeUnprepareResourcesRequest;
    using NodeUnprepareResourcesResponse =
        drav1beta1::NodeUnprepareResourcesResponse;
  };

  // The health stream, v1 and v1alpha1 alike (the same messages): a raw
  // method that sends the list as protobuf encodes it, written straight
  // from the packed list at every send (HealthList::Encode), instead of a
  // message of a few objects a device built and serialized again at every
  // refresh.
  class HealthService final : public grpc::Service {
   public:
    // `method`: "/<package>.DRAResourceHealth/NodeWatchResources".
    HealthService(Impl* runner, const char* method) : runner_(runner) {
      AddMethod(new grpc::internal::RpcServiceMethod(
          method, grpc::internal::RpcMethod::SERVER_STREAMING,
          new grpc::internal::ServerStreamingHandler<
              HealthService, grpc::ByteBuffer, grpc::ByteBuffer>(
              [](HealthService* service, grpc::ServerContext* context,
                 const grpc::ByteBuffer* /*request: no fields*/,
                 grpc::ServerWriter<grpc::ByteBuffer>* writer) {
                return service->Watch(context, writer);
              },
              this)));
    }

   private:
    grpc::Status Watch(grpc::ServerContext* context,
                       grpc::ServerWriter<grpc::ByteBuffer>* writer) {
      uint64_t sent = 0;
      while (true) {
        std::shared_ptr<const HealthList> list;
        int64_t time = 0;
        {
          MutexLock lock(runner_->mu_);
          // Woken by SetHealth, RefreshHealth and Stop; a cancelled stream
          // (the sync API says so only when asked) is noticed within the
          // wait's bound, a second: an idle stream wakes once a second.
          while (!runner_->stopping_ && runner_->health_version_ == sent &&
                 !context->IsCancelled()) {
            runner_->changed_.wait_for(lock, std::chrono::seconds(1));
          }
          if (runner_->stopping_ || context->IsCancelled()) break;
          sent = runner_->health_version_;
          list = runner_->health_;
          time = runner_->health_time_;
        }
        // Encoded and sent outside the lock: Prepare does not wait on it.
        const grpc::ByteBuffer message =
            list->Encode(time, runner_->options_.health_timeout.count());
        if (!writer->Write(message)) break;
      }
      return grpc::Status::OK;
    }

    Impl* const runner_;
  };

  // --- claims ----------------------------------------------------------------
  using Deadline = Clock::TimePoint;
  // The kubelet's deadline of a call (45 s by default), on the runner's
  // clock.
  Deadline DeadlineOf(const grpc::ServerContext* context) const {
    const auto left = context->deadline() - std::chrono::system_clock::now();
    // No deadline, or one beyond any wait that makes sense.
    constexpr auto kLongest = std::chrono::hours(1);
    return options_.clock->Now() +
           (left > kLongest
                ? std::chrono::duration_cast<Clock::Duration>(kLongest)
                : std::chrono::duration_cast<Clock::Duration>(left));
  }
  std::map<std::string, ClaimOutcome> PrepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  std::map<std::string, std::string> UnprepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  ClaimOutcome PrepareOne(const ClaimRef& ref, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  std::string UnprepareOne(const ClaimRef& ref, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  // Why no call can work on this claim: a UID that could not be a path
  // component, or "" when it is fine.

 public:
  static std::string RefusedUid(const ClaimRef& ref);

 private:
  // Waits until no other call works on `uid`; false when stopping or when
  // `deadline` passes first (`*expired` says which).
  bool AcquireClaim(const std::string& uid, Deadline deadline, bool* expired)
      TOPOLOGY_EXCLUDES(mu_);
  void ReleaseClaim(const std::string& uid) TOPOLOGY_EXCLUDES(mu_);
  // A claim's turn: taken (unless stopping or out of time) and given back
  // at the end of the scope.
  class ClaimTurn {
   public:
    ClaimTurn(Impl* runner, const std::string& uid, Deadline deadline)
        : runner_(runner),
          uid_(uid),
          held_(runner->AcquireClaim(uid, deadline, &expired_)) {}
    ~ClaimTurn() {
      if (held_) runner_->ReleaseClaim(uid_);
    }
    ClaimTurn(const ClaimTurn&) = delete;
    ClaimTurn& operator=(const ClaimTurn&) = delete;
    bool held() const { return held_; }
    // Why the turn was not had.
    std::string why() const {
      return expired_ ? "the kubelet's deadline passed while another call "
                        "worked on the claim"
                      : "the driver is stopping";
    }

   private:
    Impl* const runner_;
    const std::string uid_;
    bool expired_ = false;
    const bool held_;
  };
  // Rolling updates: takes <plugin_dir>/serialize.lock (by `deadline`) and
  // reads the shared checkpoint; an error when it cannot be had.
  // REQUIRES: instance_mu_.
  std::string LockInstances(Deadline deadline) TOPOLOGY_EXCLUDES(mu_);
  // DriverOptions::cdi_dir's specs of claims not prepared, removed.
  Status RemoveUnpreparedSpecs() TOPOLOGY_EXCLUDES(mu_);
  void UnlockInstances();
  // Makes the claim `uid` `claim` (or forgets it) durably, then visibly:
  // the checkpoint is written first, claims_ changed only once it is.
  // Writes are ordered by write_mu_ and each starts from the last durable
  // state, so no write loses another claim's change.
  Status Commit(const std::string& uid, std::optional<PreparedClaim> claim)
      TOPOLOGY_EXCLUDES(mu_);

  void OnRegistrationStatus(bool registered, const std::string& error)
      TOPOLOGY_EXCLUDES(mu_);

  // --- sockets
  // ----------------------------------------------------------------
  Status ServeDra() TOPOLOGY_EXCLUDES(mu_);
  Status ServeRegistration() TOPOLOGY_EXCLUDES(mu_);
  void WatchSockets() TOPOLOGY_EXCLUDES(mu_);

  const DriverOptions options_;
  ClaimSource* const source_;
  DriverHandler* const handler_;
  const std::filesystem::path registration_socket_;
  const std::filesystem::path dra_socket_;
  const std::filesystem::path checkpoint_;

  RegistrationService registration_;
  DraService<DraV1> dra_v1_;
  DraService<DraV1beta1> dra_v1beta1_;
  HealthService health_v1_;
  HealthService health_v1alpha1_;

  mutable Mutex mu_;
  std::condition_variable_any changed_;  // busy_, health_, stopping_
  draplugin::PreparedClaims claims_ TOPOLOGY_GUARDED_BY(mu_);
  std::set<std::string> busy_ TOPOLOGY_GUARDED_BY(mu_);
  // Every device's health as the streams send it, packed: a driver with
  // 10,000 devices keeps about 25 bytes a device, not a DeviceHealth each.
  struct HealthList {
    struct Entry {
      // The name ends here in `names` (and starts where the last ended).
      uint32_t name_end = 0;
      uint32_t pool = 0;  // in `pools`
      HealthStatus health = HealthStatus::kUnknown;
    };
    std::vector<std::string> pools;
    std::string names;
    std::vector<Entry> entries;
    std::map<size_t, std::string> messages;  // entry -> message, when any

    // The NodeWatchResourcesResponse of every device as protobuf encodes it
    // (zero and empty fields left out), in a mapping of its own that is
    // unmapped once gRPC has sent it: about 60 bytes a device, nothing left
    // behind on the heap.
    grpc::ByteBuffer Encode(int64_t time, int64_t timeout) const {
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
      std::vector<std::pair<uint32_t, uint32_t>> sizes(entries.size());
      size_t total = 0;
      uint32_t begin = 0;
      for (size_t i = 0; i < entries.size(); ++i) {
        const Entry& e = entries[i];
        const size_t id = text(pools[e.pool].size()) + text(e.name_end - begin);
        const size_t health =
            text(id) + scalar(wire(e.health)) +
            scalar(static_cast<uint64_t>(time)) +
            scalar(static_cast<uint64_t>(timeout)) +
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
        put_scalar(4, static_cast<uint64_t>(timeout));
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

    static HealthList Of(const std::vector<DeviceHealth>& devices) {
      HealthList list;
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
                                pool->second, device.health});
        if (!device.message.empty()) {
          list.messages[list.entries.size() - 1] =
              HealthMessage(device.message);
        }
      }
      return list;
    }
  };
  std::shared_ptr<const HealthList> health_ TOPOLOGY_GUARDED_BY(mu_) =
      std::make_shared<const HealthList>();
  int64_t health_time_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  uint64_t health_version_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  bool registered_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::string registration_error_ TOPOLOGY_GUARDED_BY(mu_);
  bool started_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;

  Mutex write_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  // The claims as the checkpoint holds them.
  draplugin::PreparedClaims durable_ TOPOLOGY_GUARDED_BY(write_mu_);

  // The servers and the sockets they made; the watcher thread replaces a
  // server whose socket is gone.
  Mutex server_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
  std::unique_ptr<grpc::Server> dra_server_ TOPOLOGY_GUARDED_BY(server_mu_);
  std::unique_ptr<grpc::Server> registration_server_
      TOPOLOGY_GUARDED_BY(server_mu_);
  std::unique_ptr<UnixAcceptor> dra_acceptor_ TOPOLOGY_GUARDED_BY(server_mu_);
  std::unique_ptr<UnixAcceptor> registration_acceptor_
      TOPOLOGY_GUARDED_BY(server_mu_);
  std::optional<SocketIdentity> dra_identity_ TOPOLOGY_GUARDED_BY(server_mu_);
  std::optional<SocketIdentity> registration_identity_
      TOPOLOGY_GUARDED_BY(server_mu_);
  bool taken_warned_ TOPOLOGY_GUARDED_BY(server_mu_) = false;
  std::thread watcher_;
  // Rolling updates: <plugin_dir>/serialize.lock, open while started.
  int instance_lock_fd_ = -1;
  // Calls of this process, one at a time while they hold the instance lock
  // (flock serialises processes, not the threads of one).
  Mutex instance_mu_ TOPOLOGY_ACQUIRED_BEFORE(write_mu_);
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_
