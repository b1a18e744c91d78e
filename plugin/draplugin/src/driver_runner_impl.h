// DriverRunner's parts, private to the DRA framework, split as the Go
// helper splits them: the runner (start, stop, sockets, registration: here
// and in driver_runner.cc), its gRPC services (registration, DRA v1 and
// v1beta1: thin shells over the runner, driver_services.h), the claim table
// (claim_table.h: durable before visible, a turn per claim), Prepare and
// Unprepare over it (driver_claims.cc) with the instances' lock
// (instance_lock.h), and the health streams (health_streams.h).
#ifndef TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_
#define TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "topology/common/checksum.h"
#include "topology/common/dir_watcher.h"
#include "topology/common/guarded.h"
#include "topology/common/k8s_names.h"
#include "topology/common/safe_file.h"
#include "topology/common/served_socket.h"
#include "topology/common/unix_socket.h"
#include "topology/draplugin/claim_checkpoint.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/slice_validation.h"
#include "topology/thread_annotations.h"

#include "claim_table.h"
#include "driver_services.h"
#include "driver_sockets.h"
#include "health_streams.h"
#include "instance_lock.h"

namespace topology::draplugin {

inline constexpr char kDraV1[] = "v1.DRAPlugin";
inline constexpr char kDraV1beta1[] = "v1beta1.DRAPlugin";
inline constexpr char kHealthV1[] = "v1.DRAResourceHealth";
inline constexpr char kHealthV1alpha1[] = "v1alpha1.DRAResourceHealth";
// Rolling-update instances serialise their calls on this file in the
// plugin directory (the Go helper's lock file).
inline constexpr char kSerializeLock[] = "serialize.lock";

// The kubelet keeps at most this many characters of a health message.
inline constexpr size_t kMaxHealthMessage = 1024;

inline std::string Describe(const ClaimRef& ref) {
  return "claim " + ref.ns + "/" + ref.name + " (" + ref.uid + ")";
}

// Calls the driver's (or the claim source's) code: what it throws becomes
// an INTERNAL error of that claim, never the end of the process.
template <typename Call>
auto Guarded(Call&& call) -> decltype(call()) {
  return common::CallGuarded("the driver", std::forward<Call>(call));
}

// The service names registration advertises, in order.
std::vector<std::string> ServedVersions(bool serve_health);

class DriverRunner::Impl final : private ClaimCalls {
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
        registration_({options_.driver_name, dra_socket_.string(),
                       ServedVersions(options_.serve_health)},
                      [this](bool registered, const std::string& error) {
                        OnRegistrationStatus(registered, error);
                      }),
        dra_v1_(this, options_.clock),
        dra_v1beta1_(this, options_.clock),
        claims_(checkpoint_, options_.clock),
        health_(options_.health_timeout, options_.clock) {}

  ~Impl() { Stop(); }

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
  void ReportHealth(const std::string& source,
                    std::vector<DeviceHealth> devices) {
    health_.Report(source, std::move(devices));
  }
  void RefreshHealth() { health_.Refresh(); }
  std::vector<ClaimRef> PreparedClaims() const { return claims_.Refs(); }

  const std::filesystem::path& registration_socket() const {
    return registration_socket_;
  }
  const std::filesystem::path& dra_socket() const { return dra_socket_; }

 private:
  // --- claims ----------------------------------------------------------------
  // ClaimCalls: the DRA services' calls (driver_services.h).
  std::map<std::string, ClaimOutcome> PrepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline) override
      TOPOLOGY_EXCLUDES(mu_);
  std::map<std::string, std::string> UnprepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline) override
      TOPOLOGY_EXCLUDES(mu_);
  ClaimOutcome PrepareOne(const ClaimRef& ref, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  std::string UnprepareOne(const ClaimRef& ref, Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  // DriverOptions::device_metadata: the claim's files and specs written,
  // each device given its request's metadata CDI id.
  Status WriteMetadata(const Claim& claim, std::vector<PreparedDevice>* devices)
      TOPOLOGY_EXCLUDES(mu_);
  // Where the metadata specs go: the CDI directory, or /var/run/cdi.
  std::filesystem::path MetadataCdiDir() const;
  // Why no call can work on this claim: a UID that could not be a path
  // component, or "" when it is fine.

 public:
  static std::string RefusedUid(const ClaimRef& ref);

 private:
  // Rolling updates: the instances' lock by `deadline`, and the shared
  // checkpoint read again under it; an error saying why it cannot be had.
  // REQUIRES: instances_.
  StatusOr<std::unique_ptr<InstanceLock::Held>> LockInstances(Deadline deadline)
      TOPOLOGY_EXCLUDES(mu_);
  // DriverOptions::cdi_dir's specs of claims not prepared, removed.
  Status RemoveUnpreparedSpecs() TOPOLOGY_EXCLUDES(mu_);
  void OnRegistrationStatus(bool registered, const std::string& error)
      TOPOLOGY_EXCLUDES(mu_);

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
  bool registered_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::string registration_error_ TOPOLOGY_GUARDED_BY(mu_);
  bool started_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;

  // The DRA and registration sockets (driver_sockets.h).
  std::unique_ptr<DriverSockets> sockets_;
  // Rolling updates: <plugin_dir>/serialize.lock, open from Start (with a
  // pod UID only). Taken before mu_.
  std::unique_ptr<InstanceLock> instances_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_RUNNER_IMPL_H_
