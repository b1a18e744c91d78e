#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <ctime>
#include <exception>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string_view>
#include <thread>
#include <utility>

#include <glog/logging.h>
#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/grpcpp.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <unistd.h>

#include "topology/draplugin/driver.h"
#include "topology/draplugin/slice_validation.h"
#include "topology/thread_annotations.h"

#include "checksum.h"
#include "claim_checkpoint.h"
#include "deviceplugin/v1beta1/kubelet_api.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"
#include "safe_file.h"

namespace topology::draplugin {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

constexpr char kDraV1[] = "v1.DRAPlugin";
constexpr char kDraV1beta1[] = "v1beta1.DRAPlugin";
constexpr char kHealthV1[] = "v1.DRAResourceHealth";
constexpr char kHealthV1alpha1[] = "v1alpha1.DRAResourceHealth";
// Rolling-update instances serialise their calls on this file in the
// plugin directory (the Go helper's lock file).
constexpr char kSerializeLock[] = "serialize.lock";

// The kubelet keeps at most this many characters of a health message.
constexpr size_t kMaxHealthMessage = 1024;

// The length of the UTF-8 sequence at `text[i]`, 0 when it is not a valid
// one (overlong forms, surrogates and values past U+10FFFF included).
size_t Utf8Length(std::string_view text, size_t i) {
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

struct SocketIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  bool operator==(const SocketIdentity&) const = default;
};

std::optional<SocketIdentity> SocketAt(const std::filesystem::path& path) {
  struct stat info {};
  if (lstat(path.c_str(), &info) != 0 || !S_ISSOCK(info.st_mode)) {
    return std::nullopt;
  }
  return SocketIdentity{info.st_dev, info.st_ino};
}

std::string Describe(const ClaimRef& ref) {
  return "claim " + ref.ns + "/" + ref.name + " (" + ref.uid + ")";
}

// Calls the driver's (or the claim source's) code: what it throws becomes
// an INTERNAL error of that claim, never the end of the process.
template <typename Call>
auto Guarded(Call call) -> decltype(call()) {
  try {
    return call();
  } catch (const std::exception& e) {
    return InternalError(std::string("the driver threw: ") + e.what());
  } catch (...) {
    return InternalError("the driver threw");
  }
}

// What one claim of a call came to.
struct ClaimOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed
};

}  // namespace

std::vector<std::string> ServedVersions(bool serve_health) {
  std::vector<std::string> versions = {kDraV1, kDraV1beta1};
  if (serve_health) {
    versions.emplace_back(kHealthV1);
    versions.emplace_back(kHealthV1alpha1);
  }
  return versions;
}

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
               Refs(request->claims()), DeadlineOf(context))) {
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
               Refs(request->claims()), DeadlineOf(context))) {
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
  using Deadline = std::chrono::steady_clock::time_point;
  // The kubelet's deadline of a call (45 s by default), as a steady time.
  static Deadline DeadlineOf(const grpc::ServerContext* context) {
    const auto left = context->deadline() - std::chrono::system_clock::now();
    // No deadline, or one beyond any wait that makes sense.
    constexpr auto kLongest = std::chrono::hours(1);
    return std::chrono::steady_clock::now() +
           (left > kLongest ? kLongest
                            : std::chrono::duration_cast<
                                  std::chrono::steady_clock::duration>(left));
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

// --- start and stop ----------------------------------------------------------

Status DriverRunner::Impl::Start() {
  {
    MutexLock lock(mu_);
    if (started_) return FailedPreconditionError("already started");
    started_ = true;
  }
  for (const auto& dir :
       {options_.registry_dir, options_.plugin_dir, options_.state_dir}) {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error || !std::filesystem::is_directory(dir)) {
      return FailedPreconditionError("cannot create the directory " +
                                     dir.string() +
                                     (error ? ": " + error.message() : ""));
    }
  }
  if (chmod(options_.plugin_dir.c_str(), 0750) != 0) {
    return FailedPreconditionError("cannot set the mode of " +
                                   options_.plugin_dir.string());
  }
  for (const auto& [what, dir] :
       {std::pair<const char*, const std::filesystem::path*>{
            "registry directory", &options_.registry_dir},
        {"plugin directory", &options_.plugin_dir},
        {"state directory", &options_.state_dir}}) {
    std::error_code error;
    if (std::filesystem::is_symlink(*dir, error)) {
      return FailedPreconditionError(
          std::string("the ") + what + " " + dir->string() +
          " is a symbolic link: files are written there without following "
          "links; give the directory it names");
    }
  }
  if (!options_.pod_uid.empty()) {
    const std::filesystem::path lock = options_.plugin_dir / kSerializeLock;
    instance_lock_fd_ = open(lock.c_str(),
                             O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (instance_lock_fd_ < 0) {
      return FailedPreconditionError("cannot open " + lock.string() + ": " +
                                     std::strerror(errno));
    }
  }
  if (const size_t removed = files::RemoveTemporaryLeftovers(checkpoint_);
      removed > 0) {
    LOG(INFO) << options_.driver_name << ": removed " << removed
              << " temporary file(s) an interrupted write left beside "
              << checkpoint_.string();
  }
  auto loaded = LoadClaims(checkpoint_);
  if (loaded.ok()) {
    MutexLock write(write_mu_);
    durable_ = *loaded;
    MutexLock lock(mu_);
    claims_ = std::move(*loaded);
    LOG(INFO) << options_.driver_name << ": " << claims_.size()
              << " prepared claim(s) restored from " << checkpoint_.string();
  } else if (loaded.status().code() != StatusCode::kNotFound) {
    // Kept aside for a human; the claims it held are unprepared by UID
    // when the kubelet asks (DriverHandler::Unprepare with no devices).
    const std::filesystem::path aside = checkpoint_.string() + ".damaged";
    auto text = files::ReadRegularFile(checkpoint_, size_t{64} << 20);
    if (text.ok()) (void)files::WriteFileAtomically(aside, *text, 0600);
    LOG(ERROR) << loaded.status().message() << "; starting without it"
               << (text.ok() ? " (a copy is at " + aside.string() + ")" : "");
  }
  // The state directory can hold the checkpoint: found now, not at the
  // first Prepare.
  {
    MutexLock write(write_mu_);
    if (Status saved = SaveClaims(checkpoint_, durable_); !saved.ok()) {
      return FailedPreconditionError("the state directory " +
                                     options_.state_dir.string() +
                                     " cannot hold the claim checkpoint: " +
                                     saved.message());
    }
  }
  if (Status served = ServeDra(); !served.ok()) return served;
  if (Status served = ServeRegistration(); !served.ok()) {
    Stop();
    return served;
  }
  watcher_ = std::thread([this] { WatchSockets(); });
  LOG(INFO) << options_.driver_name << ": serving " << dra_socket_.string()
            << ", registration at " << registration_socket_.string();
  return OkStatus();
}

void DriverRunner::Impl::Stop() {
  {
    MutexLock lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  changed_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  std::unique_ptr<grpc::Server> registration;
  std::unique_ptr<grpc::Server> dra;
  std::optional<SocketIdentity> registration_identity;
  std::optional<SocketIdentity> dra_identity;
  {
    MutexLock servers(server_mu_);
    registration = std::move(registration_server_);
    dra = std::move(dra_server_);
    registration_identity = registration_identity_;
    dra_identity = dra_identity_;
  }
  // Calls in flight get a second; health streams end at once (stopping_).
  const auto deadline =
      std::chrono::system_clock::now() + std::chrono::seconds(1);
  if (registration) registration->Shutdown(deadline);
  if (dra) dra->Shutdown(deadline);
  // Only the sockets this runner made (a newer instance's stay).
  std::error_code ignored;
  if (registration_identity &&
      SocketAt(registration_socket_) == registration_identity) {
    std::filesystem::remove(registration_socket_, ignored);
  }
  if (dra_identity && SocketAt(dra_socket_) == dra_identity) {
    std::filesystem::remove(dra_socket_, ignored);
  }
}

namespace {

// A server on `socket`: a stale socket there is removed first (only a
// socket); the new one gets `mode` whatever the umask.
// Someone accepts connections on `socket` (a live server, not a stale
// file a killed process left).
bool Listening(const std::filesystem::path& socket) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = socket.string();
  if (path.size() >= sizeof(address.sun_path)) {
    close(fd);
    return false;
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const bool live =
      connect(fd, reinterpret_cast<const sockaddr*>(&address),
              sizeof(address)) == 0;
  close(fd);
  return live;
}

StatusOr<std::pair<std::unique_ptr<grpc::Server>, SocketIdentity>> Serve(
    const std::filesystem::path& socket,
    const std::vector<grpc::Service*>& services, mode_t mode) {
  if (SocketAt(socket)) {
    // Another instance's socket is never replaced: two drivers on one
    // node would take the kubelet's registration from each other.
    if (Listening(socket)) {
      return FailedPreconditionError(
          "another process serves " + socket.string() +
          "; two instances on one node need their own sockets (give each "
          "its pod UID: --pod-uid, from the downward API)");
    }
    std::error_code ignored;
    std::filesystem::remove(socket, ignored);
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort("unix:" + socket.string(),
                           grpc::InsecureServerCredentials());
  builder.SetMaxReceiveMessageSize(16 << 20);
  for (grpc::Service* service : services) builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (!server)
    return FailedPreconditionError("cannot serve " + socket.string());
  const auto identity = SocketAt(socket);
  if (!identity || chmod(socket.c_str(), mode) != 0) {
    server->Shutdown();
    return FailedPreconditionError("cannot set the mode of " + socket.string());
  }
  return std::make_pair(std::move(server), *identity);
}

}  // namespace

Status DriverRunner::Impl::ServeDra() {
  std::vector<grpc::Service*> services = {&dra_v1_, &dra_v1beta1_};
  if (options_.serve_health) {
    services.push_back(&health_v1_);
    services.push_back(&health_v1alpha1_);
  }
  // The old server (its socket is gone) first: a socket path has one
  // listener.
  std::unique_ptr<grpc::Server> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(dra_server_);
    dra_identity_.reset();
  }
  if (old) old->Shutdown(std::chrono::system_clock::now());
  old.reset();
  auto served = Serve(dra_socket_, services, 0600);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  dra_server_ = std::move(served->first);
  dra_identity_ = served->second;
  return OkStatus();
}

Status DriverRunner::Impl::ServeRegistration() {
  std::unique_ptr<grpc::Server> old;
  {
    MutexLock servers(server_mu_);
    old = std::move(registration_server_);
    registration_identity_.reset();
  }
  if (old) old->Shutdown(std::chrono::system_clock::now());
  old.reset();
  {
    MutexLock lock(mu_);
    // A new socket is a new registration: the kubelet's watcher calls
    // GetInfo again.
    registered_ = false;
  }
  auto served = Serve(registration_socket_, {&registration_}, 0600);
  if (!served.ok()) return served.status();
  MutexLock servers(server_mu_);
  registration_server_ = std::move(served->first);
  registration_identity_ = served->second;
  return OkStatus();
}

void DriverRunner::Impl::WatchSockets() {
  MutexLock lock(mu_);
  while (!stopping_) {
    changed_.wait_for(lock, options_.socket_check);
    if (stopping_) break;
    lock.unlock();
    // Served again when the socket is gone, or when serving it failed
    // before (its directory missing for a moment): retried at every look.
    // A socket another process put at the path is left alone.
    bool dra_gone = false;
    bool registration_gone = false;
    {
      MutexLock servers(server_mu_);
      const auto dra_now = SocketAt(dra_socket_);
      const auto registration_now = SocketAt(registration_socket_);
      dra_gone = !dra_server_ ? !dra_now || !Listening(dra_socket_)
                              : dra_now != dra_identity_ &&
                                    (!dra_now || !Listening(dra_socket_));
      registration_gone =
          !registration_server_
              ? !registration_now || !Listening(registration_socket_)
              : registration_now != registration_identity_ &&
                    (!registration_now || !Listening(registration_socket_));
      const bool taken =
          (dra_server_ && dra_now && dra_now != dra_identity_ && !dra_gone) ||
          (registration_server_ && registration_now &&
           registration_now != registration_identity_ && !registration_gone);
      if (taken && !taken_warned_) {
        taken_warned_ = true;
        LOG(ERROR) << options_.driver_name
                   << ": another process replaced this driver's socket; it "
                      "is left alone (run each instance with its pod UID)";
      }
    }
    // The DRA socket first: registration names it.
    if (dra_gone) {
      LOG(WARNING) << options_.driver_name << ": " << dra_socket_.string()
                   << " was removed; serving it again";
      if (Status served = ServeDra(); !served.ok()) {
        LOG(ERROR) << served.message();
      }
    }
    if (registration_gone || dra_gone) {
      LOG(WARNING) << options_.driver_name << ": "
                   << registration_socket_.string()
                   << (registration_gone ? " was removed" : "")
                   << "; registering again";
      if (Status served = ServeRegistration(); !served.ok()) {
        LOG(ERROR) << served.message();
      }
    }
    lock.lock();
  }
}

void DriverRunner::Impl::OnRegistrationStatus(bool registered,
                                              const std::string& error) {
  {
    MutexLock lock(mu_);
    registered_ = registered;
    registration_error_ = registered ? std::string() : error;
  }
  if (registered) {
    LOG(INFO) << options_.driver_name << ": registered with the kubelet";
  } else {
    LOG(ERROR) << options_.driver_name
               << ": the kubelet refused the registration: " << error;
  }
}

// --- claims ------------------------------------------------------------------

bool DriverRunner::Impl::AcquireClaim(const std::string& uid,
                                      Deadline deadline, bool* expired) {
  MutexLock lock(mu_);
  while (busy_.contains(uid) && !stopping_) {
    if (changed_.wait_until(lock, deadline) == std::cv_status::timeout &&
        busy_.contains(uid) && !stopping_) {
      *expired = true;
      return false;
    }
  }
  if (stopping_) return false;
  busy_.insert(uid);
  return true;
}

void DriverRunner::Impl::ReleaseClaim(const std::string& uid) {
  {
    MutexLock lock(mu_);
    busy_.erase(uid);
  }
  changed_.notify_all();
}

Status DriverRunner::Impl::Commit(const std::string& uid,
                                  std::optional<PreparedClaim> claim) {
  MutexLock write(write_mu_);
  draplugin::PreparedClaims next = durable_;
  if (claim) {
    next[uid] = *claim;
  } else {
    next.erase(uid);
  }
  if (Status saved = SaveClaims(checkpoint_, next); !saved.ok()) return saved;
  durable_ = std::move(next);
  MutexLock lock(mu_);
  if (claim) {
    claims_[uid] = std::move(*claim);
  } else {
    claims_.erase(uid);
  }
  return OkStatus();
}

std::string DriverRunner::Impl::RefusedUid(const ClaimRef& ref) {
  // A UID names files (CDI specs, the checkpoint's entries): the API
  // server's are RFC 4122 UUIDs; anything that could leave a directory or
  // is not printable is refused before any handler sees it.
  const std::string who = "claim " + ref.ns + "/" + ref.name;
  if (ref.uid.empty()) return who + " has no UID";
  if (ref.uid.size() > 128 ||
      ref.uid.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                                "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-") !=
          std::string::npos) {
    return who + ": the UID is not a Kubernetes UID (letters, digits and "
                 "'-', at most 128): " +
           "\"" + ref.uid.substr(0, 64) + "\"";
  }
  return "";
}

std::string DriverRunner::Impl::LockInstances(Deadline deadline) {
  // flock's wait cannot be bounded; polled, with the kubelet's deadline.
  while (flock(instance_lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK && errno != EINTR) {
      return std::string("cannot lock ") +
             (options_.plugin_dir / kSerializeLock).string() + ": " +
             std::strerror(errno);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return "the kubelet's deadline passed while another instance of the "
             "driver held " +
             (options_.plugin_dir / kSerializeLock).string();
    }
    MutexLock lock(mu_);
    if (stopping_) return "the driver is stopping";
    changed_.wait_for(lock, std::chrono::milliseconds(5));
  }
  // What the other instance did since: the checkpoint is the truth.
  auto loaded = LoadClaims(checkpoint_);
  if (!loaded.ok() && loaded.status().code() != StatusCode::kNotFound) {
    LOG(ERROR) << loaded.status().message()
               << "; the claims this instance knows are kept";
    return "";
  }
  draplugin::PreparedClaims claims =
      loaded.ok() ? std::move(*loaded) : draplugin::PreparedClaims();
  MutexLock write(write_mu_);
  durable_ = claims;
  MutexLock lock(mu_);
  claims_ = std::move(claims);
  return "";
}

void DriverRunner::Impl::UnlockInstances() {
  (void)flock(instance_lock_fd_, LOCK_UN);
}

std::map<std::string, ClaimOutcome> DriverRunner::Impl::PrepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, ClaimOutcome> out;
  std::optional<MutexLock> instances;
  if (instance_lock_fd_ >= 0) {
    instances.emplace(instance_mu_);
    if (std::string error = LockInstances(deadline); !error.empty()) {
      for (const ClaimRef& ref : refs) out[ref.uid].error = error;
      return out;
    }
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;  // listed twice: one answer
    out[ref.uid] = PrepareOne(ref, deadline);
  }
  if (instances) UnlockInstances();
  return out;
}

std::map<std::string, std::string> DriverRunner::Impl::UnprepareClaims(
    const std::vector<ClaimRef>& refs, Deadline deadline) {
  std::map<std::string, std::string> out;
  std::optional<MutexLock> instances;
  if (instance_lock_fd_ >= 0) {
    instances.emplace(instance_mu_);
    if (std::string error = LockInstances(deadline); !error.empty()) {
      for (const ClaimRef& ref : refs) out[ref.uid] = error;
      return out;
    }
  }
  for (const ClaimRef& ref : refs) {
    if (out.contains(ref.uid)) continue;
    out[ref.uid] = UnprepareOne(ref, deadline);
  }
  if (instances) UnlockInstances();
  return out;
}

ClaimOutcome DriverRunner::Impl::PrepareOne(const ClaimRef& ref,
                                            Deadline deadline) {
  ClaimOutcome outcome;
  if (std::string refused = RefusedUid(ref); !refused.empty()) {
    outcome.error = std::move(refused);
    return outcome;
  }
  const ClaimTurn turn(this, ref.uid, deadline);
  if (!turn.held()) {
    outcome.error = Describe(ref) + ": " + turn.why();
    return outcome;
  }
  std::optional<PreparedClaim> known;
  {
    MutexLock lock(mu_);
    if (auto it = claims_.find(ref.uid); it != claims_.end()) {
      known = it->second;
    }
  }
  if (known && !known->unpreparing) {
    outcome.devices = known->devices;  // prepared before: the same
    return outcome;
  }
  if (known) {
    // An unprepare that was cut short (the process was killed): finished
    // first, so that nothing of the old preparation is answered again.
    const Status undone =
        Guarded([&] { return handler_->Unprepare(known->ref, known->devices); });
    Status forgotten = undone.ok() ? Commit(ref.uid, std::nullopt) : undone;
    if (!forgotten.ok()) {
      outcome.error = Describe(ref) +
                      ": an earlier unprepare could not be finished: " +
                      forgotten.message();
      return outcome;
    }
  }
  const StatusOr<Claim> claim =
      Guarded([&] { return source_->Get(ref, options_.driver_name); });
  if (!claim.ok()) {
    outcome.error = Describe(ref) + ": " + claim.status().message();
    return outcome;
  }
  StatusOr<std::vector<PreparedDevice>> devices =
      Guarded([&] { return handler_->Prepare(*claim); });
  if (!devices.ok()) {
    outcome.error = Describe(ref) + ": " + devices.status().message();
    return outcome;
  }
  // request_names: the allocation result's request, when the driver left
  // them out; each as its top-level request, as the kubelet matches them.
  for (PreparedDevice& device : *devices) {
    if (device.request_names.empty()) {
      for (const AllocationResult& result : claim->results) {
        if (result.pool == device.pool && result.device == device.device) {
          device.request_names.push_back(result.request);
        }
      }
    }
    std::vector<std::string> base;
    for (const std::string& name : device.request_names) {
      const std::string top(BaseRequestName(name));
      if (std::find(base.begin(), base.end(), top) == base.end()) {
        base.push_back(top);
      }
    }
    device.request_names = std::move(base);
  }
  // Durable before answered (and before another call can see it).
  if (Status saved = Commit(ref.uid, PreparedClaim{ref, *devices, false});
      !saved.ok()) {
    const Status undone =
        Guarded([&] { return handler_->Unprepare(ref, *devices); });
    LOG(ERROR) << Describe(ref) << ": " << saved.message()
               << (undone.ok() ? "; its preparation was undone"
                               : "; undoing it failed: " + undone.message());
    outcome.error = Describe(ref) + ": cannot checkpoint the prepared claim (" +
                    saved.message() + ")";
    return outcome;
  }
  outcome.devices = std::move(*devices);
  return outcome;
}

std::string DriverRunner::Impl::UnprepareOne(const ClaimRef& ref,
                                             Deadline deadline) {
  if (std::string refused = RefusedUid(ref); !refused.empty()) return refused;
  const ClaimTurn turn(this, ref.uid, deadline);
  if (!turn.held()) return Describe(ref) + ": " + turn.why();
  std::optional<PreparedClaim> known;
  {
    MutexLock lock(mu_);
    if (auto it = claims_.find(ref.uid); it != claims_.end()) {
      known = it->second;
    }
  }
  // Said durably before anything is undone: a process killed halfway finds
  // the claim "unpreparing", never "prepared" with its CDI spec gone.
  if (known && !known->unpreparing) {
    known->unpreparing = true;
    if (Status marked = Commit(ref.uid, *known); !marked.ok()) {
      return Describe(ref) + ": cannot checkpoint the unprepare (" +
             marked.message() + ")";
    }
  }
  const Status undone = Guarded([&] {
    return handler_->Unprepare(
        known ? known->ref : ref,
        known ? known->devices : std::vector<PreparedDevice>{});
  });
  if (!undone.ok()) return Describe(ref) + ": " + undone.message();
  if (!known) return "";  // not prepared (any more): nothing to forget
  if (Status saved = Commit(ref.uid, std::nullopt); !saved.ok()) {
    return Describe(ref) + ": cannot checkpoint the unprepared claim (" +
           saved.message() + ")";
  }
  return "";
}

std::filesystem::path RollingUpdateRegistrationSocket(
    const std::filesystem::path& registry_dir, const std::string& driver,
    const std::string& pod_uid) {
  const std::filesystem::path plain =
      registry_dir / (driver + "-" + pod_uid + "-reg.sock");
  if (plain.string().size() <= 107) return plain;
  const std::string hash = files::ChecksumHex(driver + "/" + pod_uid);
  return registry_dir / (driver.substr(0, 16) + "-" + hash + "-reg.sock");
}

std::string HealthMessage(std::string_view message) {
  std::string out;
  out.reserve(std::min(message.size(), kMaxHealthMessage * 4));
  std::vector<size_t> ends;  // where each character ends in `out`
  size_t characters = 0;
  for (size_t i = 0; i < message.size();) {
    const size_t length = Utf8Length(message, i);
    if (length == 0) {
      out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
    } else {
      out.append(message.substr(i, length));
      i += length;
    }
    ++characters;
    if (characters <= kMaxHealthMessage - 3) ends.push_back(out.size());
    if (characters > kMaxHealthMessage) {
      out.resize(ends.back());
      return out + "...";
    }
  }
  return out;
}

// --- DriverRunner ------------------------------------------------------------

StatusOr<std::unique_ptr<DriverRunner>> DriverRunner::Create(
    DriverOptions options, ClaimSource* source, DriverHandler* handler) {
  if (Status valid = ValidateDriverName(options.driver_name); !valid.ok() ||
      !kubelet::IsDnsSubdomain(options.driver_name)) {
    return InvalidArgumentError(
        "driver name \"" + options.driver_name.substr(0, 80) +
        "\" is not one the API server accepts (a lower-case DNS subdomain of "
        "at most 63 characters)" +
        (valid.ok() ? std::string() : ": " + valid.message()));
  }
  if (source == nullptr || handler == nullptr) {
    return InvalidArgumentError("a claim source and a handler are needed");
  }
  if (options.plugin_dir.empty()) {
    options.plugin_dir =
        std::filesystem::path(kDefaultPluginRoot) / options.driver_name;
  }
  if (options.state_dir.empty()) options.state_dir = options.plugin_dir;
  for (const auto& [what, dir] :
       {std::pair<const char*, const std::filesystem::path*>{
            "registry directory", &options.registry_dir},
        {"plugin directory", &options.plugin_dir},
        {"state directory", &options.state_dir}}) {
    if (!dir->is_absolute()) {
      return InvalidArgumentError(std::string("the ") + what + " " +
                                  dir->string() + " is not absolute");
    }
  }
  if (!options.pod_uid.empty() &&
      !Impl::RefusedUid({"", options.pod_uid, "pod"}).empty()) {
    return InvalidArgumentError("pod UID \"" + options.pod_uid.substr(0, 64) +
                                "\" is not a Kubernetes UID");
  }
  // A unix socket path is at most 107 bytes.
  const auto longest = std::max(
      (options.pod_uid.empty()
           ? options.registry_dir / (options.driver_name + "-reg.sock")
           : RollingUpdateRegistrationSocket(options.registry_dir,
                                             options.driver_name,
                                             options.pod_uid))
          .string()
          .size(),
      (options.plugin_dir / (options.pod_uid.empty()
                                 ? std::string(kDraSocket)
                                 : "dra-" + options.pod_uid + ".sock"))
          .string()
          .size());
  if (longest > 107) {
    return InvalidArgumentError(
        "socket paths of at most 107 bytes are "
        "possible; the directories make one of " +
        std::to_string(longest));
  }
  return std::unique_ptr<DriverRunner>(new DriverRunner(
      std::make_unique<Impl>(std::move(options), source, handler)));
}

DriverRunner::DriverRunner(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}
DriverRunner::~DriverRunner() = default;
Status DriverRunner::Start() { return impl_->Start(); }
void DriverRunner::Stop() { impl_->Stop(); }
bool DriverRunner::registered() const { return impl_->registered(); }
std::string DriverRunner::registration_error() const {
  return impl_->registration_error();
}
void DriverRunner::SetHealth(std::vector<DeviceHealth> devices) {
  impl_->SetHealth(std::move(devices));
}

void DriverRunner::RefreshHealth() { impl_->RefreshHealth(); }
std::vector<ClaimRef> DriverRunner::PreparedClaims() const {
  return impl_->PreparedClaims();
}
const std::filesystem::path& DriverRunner::registration_socket() const {
  return impl_->registration_socket();
}
const std::filesystem::path& DriverRunner::dra_socket() const {
  return impl_->dra_socket();
}

}  // namespace topology::draplugin
