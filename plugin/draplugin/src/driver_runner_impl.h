// DriverRunner's parts, private to the DRA framework, split as the Go
// helper splits them: the runner (start, stop, sockets, registration: here
// and in driver_runner.cc), its gRPC services (registration, DRA v1 and
// v1beta1: thin shells over the runner, below), the claim table
// (claim_table.h: durable before visible, a turn per claim), Prepare and
// Unprepare over it with the instances' lock (driver_claims.cc), and the
// health streams (health_streams.h).
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
#include <grpcpp/grpcpp.h>
#include <sys/file.h>
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
#include "claim_table.h"
#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "health_streams.h"
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
        claims_(checkpoint_, options_.clock),
        health_(options_.health_timeout) {}

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
  void SetHealth(std::vector<DeviceHealth> devices) {
    health_.Set(std::move(devices));
  }
  void RefreshHealth() { health_.Refresh(); }
  std::vector<ClaimRef> PreparedClaims() const { return claims_.Refs(); }

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
  // Rolling updates: takes <plugin_dir>/serialize.lock (by `deadline`) and
  // reads the shared checkpoint; an error when it cannot be had.
  // REQUIRES: instance_mu_.
  std::string LockInstances(Deadline deadline) TOPOLOGY_EXCLUDES(mu_);
  // DriverOptions::cdi_dir's specs of claims not prepared, removed.
  Status RemoveUnpreparedSpecs() TOPOLOGY_EXCLUDES(mu_);
  void UnlockInstances();
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

  // The prepared claims and their turns; the health streams.
  ClaimTable claims_;
  HealthStreams health_;

  mutable Mutex mu_;
  std::condition_variable_any changed_;  // stopping_ (the socket watcher)
  bool registered_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::string registration_error_ TOPOLOGY_GUARDED_BY(mu_);
  bool started_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;

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
  Mutex instance_mu_ TOPOLOGY_ACQUIRED_BEFORE(mu_);
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_
