// A DRA kubelet plugin in C++: what a driver implements (DriverHandler),
// where claims come from (ClaimSource: the Kubernetes API, or a table in
// tests), and DriverRunner, which speaks the kubelet's side:
//
//   <registry dir>/<driver>-reg.sock  plugin registration (GetInfo,
//                                     NotifyRegistrationStatus)
//   <plugin dir>/dra.sock             the DRA service v1 and v1beta1
//                                     (NodePrepareResources,
//                                     NodeUnprepareResources) and the device
//                                     health streams v1 and v1alpha1
//
// The runner serialises the calls of one claim, answers a repeated Prepare
// from its checkpoint of prepared claims (durable before answered, written
// as every file of the project: O_EXCL temporary, no link followed, mode
// 0600), gives each bad claim its own error while the others succeed, and
// serves its sockets again when they are deleted.
//
//   class MyDriver : public topology::draplugin::DriverHandler { ... };
//   topology::draplugin::DriverOptions options;
//   options.driver_name = "gpu.example.com";
//   auto runner = topology::draplugin::DriverRunner::Create(options, &source,
//                                                          &driver);
//   (*runner)->Start();
#ifndef TOPOLOGY_DRAPLUGIN_DRIVER_H_
#define TOPOLOGY_DRAPLUGIN_DRIVER_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "topology/clock.h"
#include "topology/draplugin/attribute_value.h"
#include "topology/status.h"

namespace topology::draplugin {

// The kubelet's DRA socket and registration names.
inline constexpr char kDefaultRegistryDir[] =
    "/var/lib/kubelet/plugins_registry";
inline constexpr char kDefaultPluginRoot[] = "/var/lib/kubelet/plugins";
inline constexpr char kDraSocket[] = "dra.sock";
inline constexpr char kPluginType[] = "DRAPlugin";

// A claim as the kubelet names it.
struct ClaimRef {
  std::string ns = {};
  std::string uid = {};
  std::string name = {};
  friend bool operator==(const ClaimRef&, const ClaimRef&) = default;
};

// The top-level request of a result's request reference: "gpu" of
// "gpu/big" (a subrequest of a prioritized list, firstAvailable), the name
// itself otherwise. The kubelet gives a container the CDI ids of devices
// whose request_names hold its claim's top-level request name
// (claiminfo.go), so NodePrepareResources answers base names, as the Go
// helper's resourceclaim.BaseRequestRef does.
inline std::string_view BaseRequestName(std::string_view request) {
  return request.substr(0, request.find('/'));
}

// A health message as the health streams send it: valid UTF-8 (a proto3
// string that is not is refused by the kubelet, and the whole message with
// it; each invalid byte becomes U+FFFD) of at most 1,024 characters, a
// longer one cut to 1,021 characters and "..." as the kubelet cuts it
// (characters, never inside one).
std::string HealthMessage(std::string_view message);

// At most this many results in a claim's allocation (k8s.io/api
// resource/v1 AllocationResultsMaxSize: the devices of all its requests,
// every driver's); a claim read with more is refused.
inline constexpr size_t kAllocationResultsMaxSize = 32;

// One entry of a claim's status.allocation.devices.results.
struct AllocationResult {
  // As the API server writes it: "<request>" or "<request>/<subrequest>".
  std::string request = {};
  std::string driver = {};
  std::string pool = {};
  std::string device = {};
  // adminAccess (KEP-5018, GA): the device was allocated for monitoring or
  // maintenance and may be in use by other claims; nothing may be reset or
  // reconfigured for it, and it is no one's exclusively.
  bool admin_access = false;
  // Shared by capacity (KEP-5075): the share of a device that allows
  // multiple allocations (a UID the scheduler chose; empty for a device
  // allocated whole), and what of each capacity this share may use
  // (consumedCapacity: name -> quantity). Several results of one claim may
  // be shares of one device.
  std::string share_id = {};
  std::map<std::string, std::string> consumed_capacity = {};
  friend bool operator==(const AllocationResult&,
                         const AllocationResult&) = default;
};

// One opaque configuration for this driver, from the claim's
// status.allocation.devices.config[] (the API server copies the classes'
// and the claim's there at allocation).
struct OpaqueConfig {
  // "FromClass" or "FromClaim". The API lists the classes' first; where
  // two set the same thing, the later one (a claim's) wins.
  std::string source = {};
  // The requests it applies to: "<request>" (and every subrequest of it)
  // or "<request>/<subrequest>"; empty: every request of the claim.
  std::vector<std::string> requests = {};
  // opaque.parameters as JSON text.
  std::string parameters = {};
  friend bool operator==(const OpaqueConfig&, const OpaqueConfig&) = default;
};

// A claim as allocated: this driver's results, and the opaque
// configurations for this driver, in the API's order.
struct Claim {
  ClaimRef ref = {};
  std::vector<AllocationResult> results = {};
  std::vector<OpaqueConfig> configs = {};
  // The claim's resource.kubernetes.io/pod-claim-name annotation: the
  // pod's name for a claim made from its template (device metadata's
  // container path); empty otherwise.
  std::string pod_claim_name = {};
};

// The configurations of `claim` that apply to the device allocated for
// `request` (a result's request, "<request>" or "<request>/<subrequest>"),
// in order (the classes' before the claim's), as the Go drivers select
// them: a configuration naming no request, the request itself, or its
// top-level request.
std::vector<const OpaqueConfig*> ConfigsFor(const Claim& claim,
                                            std::string_view request);

class ClaimSource {
 public:
  virtual ~ClaimSource() = default;
  // The claim `ref` names, with the results of `driver` only. NOT_FOUND
  // when the object is missing; FAILED_PRECONDITION when its UID differs,
  // it is not allocated, or nothing of it is allocated by `driver`;
  // UNAVAILABLE when the API server cannot answer (the kubelet retries).
  virtual StatusOr<Claim> Get(const ClaimRef& ref,
                              const std::string& driver) = 0;
  // Ends the Get calls under way at once (they fail); later calls work as
  // before. The runner's Stop calls it, so that a claim waiting on the API
  // server does not hold the stop past its deadline.
  virtual void Cancel() {}
};

// One prepared device, as NodePrepareResources answers it.
struct PreparedDevice {
  // The claim's requests this device serves; the runner fills in the
  // allocation result's request when left empty, and answers every name as
  // its top-level request (BaseRequestName), once.
  std::vector<std::string> request_names = {};
  std::string pool = {};
  std::string device = {};
  // The share of the device this is (AllocationResult::share_id): the
  // runner fills it in when left empty and the claim holds one share of the
  // device; a claim prepared with two shares of one device answers each
  // with its own (and its own CDI names).
  std::string share_id = {};
  // Fully qualified CDI names (vendor.com/class=name) whose spec exists.
  std::vector<std::string> cdi_device_ids = {};
  // Prepared for an adminAccess result (the runner sets it from the
  // claim's results): the device is not held exclusively by this claim.
  bool admin_access = false;
  // With DriverOptions::device_metadata: the attributes the container
  // reads in its device metadata file (best practice: the device's slice
  // attributes). The runner writes the file and drops them; not kept in
  // the checkpoint.
  std::map<std::string, AttributeValue> metadata_attributes = {};
  friend bool operator==(const PreparedDevice&,
                         const PreparedDevice&) = default;
};

class DriverHandler {
 public:
  virtual ~DriverHandler() = default;
  // Prepares a claim that is not prepared (the runner answers a repeat
  // from its checkpoint): its devices with CDI ids, or an error for this
  // claim alone. May be called again for the same claim after a crash
  // before the checkpoint was written: it must be idempotent.
  virtual StatusOr<std::vector<PreparedDevice>> Prepare(const Claim& claim) = 0;
  // Undoes Prepare. `devices` are what Prepare answered (from the
  // checkpoint after a restart), empty when the runner knows of none (a
  // crash between Prepare and the checkpoint): per-claim state is then
  // removed by the claim's UID. Idempotent.
  virtual Status Unprepare(const ClaimRef& claim,
                           const std::vector<PreparedDevice>& devices) = 0;
};

enum class HealthStatus : uint8_t { kUnknown, kHealthy, kUnhealthy };

struct DeviceHealth {
  std::string pool = {};
  std::string device = {};
  HealthStatus health = HealthStatus::kUnknown;
  std::string message = {};  // sent as HealthMessage(message)
  // This device's lease: the kubelet takes Unknown after this long without
  // a report naming it (at most 65,535 s). Zero: DriverOptions::health_timeout.
  std::chrono::seconds timeout = std::chrono::seconds(0);
};

struct DriverOptions {
  // A DNS subdomain (lower case, at most 253 characters).
  std::string driver_name = {};
  std::filesystem::path registry_dir = kDefaultRegistryDir;
  // Empty: <kDefaultPluginRoot>/<driver_name>.
  std::filesystem::path plugin_dir = {};
  // Where the checkpoint of prepared claims lives; empty: plugin_dir.
  std::filesystem::path state_dir = {};
  // Where the handler writes claims' CDI specs with WriteClaimCdiSpec
  // (claim_cdi.h). When set, Start removes the specs of this driver whose
  // claim the checkpoint does not hold (RemoveUnpreparedCdiSpecs), under
  // the instances' lock: a spec stays exactly while its claim is prepared.
  std::filesystem::path cdi_dir = {};
  // Device metadata (KEP-5304, beta at 1.37; device_metadata.h): for each
  // request of a prepared claim, a file of its devices and their
  // PreparedDevice::metadata_attributes under <plugin_dir>/
  // dra-device-metadata, bind-mounted into the container by a CDI spec in
  // cdi_dir (or /var/run/cdi), in each of `metadata_versions`. As the Go
  // helper's EnableDeviceMetadata and MetadataVersions; off by default.
  bool device_metadata = false;
  std::vector<std::string> metadata_versions = {"v1alpha1", "v1beta1"};
  // Serve the health streams and advertise them.
  bool serve_health = true;
  // Sent with every device's health: after this long without an update the
  // kubelet takes Unknown.
  std::chrono::seconds health_timeout = std::chrono::seconds(30);
  // How often the sockets are checked (re-created when deleted).
  std::chrono::milliseconds socket_check = std::chrono::seconds(1);
  // The socket checks' time and the kubelet's deadlines on a claim's turn;
  // not owned. Tests give a FakeClock.
  const Clock* clock = &Clock::Real();
  // Rolling updates (kubelet 1.33+), as the Go helper's RollingUpdate: with
  // the pod's UID (from the downward API) the sockets are
  // RollingUpdateRegistrationSocket(...) and dra-<uid>.sock, so that two
  // instances on one node (a rollout with surge) both serve; the kubelet
  // uses the newest. Calls are then serialised across the instances by a
  // lock on <plugin_dir>/serialize.lock, and each call reads the shared
  // claim checkpoint first: the kubelet may prepare a claim through one
  // instance and unprepare it through the other. Empty: the fixed names,
  // one instance.
  std::string pod_uid = {};
};

// The registration socket of a rolling-update instance:
// "<registry_dir>/<driver>-<uid>-reg.sock", or, where that path would be
// longer than a unix socket path may be (107 bytes), a shorter name made
// of the driver name's start and a hash of driver and UID.
std::filesystem::path RollingUpdateRegistrationSocket(
    const std::filesystem::path& registry_dir, const std::string& driver,
    const std::string& pod_uid);

class DriverRunner {
 public:
  // INVALID_ARGUMENT naming the option when the driver name or a directory
  // is unusable. Neither `source` nor `handler` is owned; both must outlive
  // the runner.
  static StatusOr<std::unique_ptr<DriverRunner>> Create(DriverOptions options,
                                                        ClaimSource* source,
                                                        DriverHandler* handler);
  ~DriverRunner();
  DriverRunner(const DriverRunner&) = delete;
  DriverRunner& operator=(const DriverRunner&) = delete;

  // Creates the directories (0750), loads the checkpoint (a damaged one is
  // kept aside and reported), serves dra.sock, then the registration
  // socket.
  Status Start();
  // Stops serving (streams end, calls in flight are answered or cancelled
  // within a second) and removes both sockets. Idempotent.
  void Stop();

  // The kubelet said plugin_registered in its last NotifyRegistrationStatus.
  bool registered() const;
  // What it said when it refused the plugin; empty otherwise.
  std::string registration_error() const;
  // The report of one health source (an event-driven monitor, a prober),
  // covering that source's devices only, as the 1.37 Go helper's
  // DeviceHealthReport: sent to every health stream now as a message of
  // its own, and to every stream that opens later (each source's last
  // report). The kubelet keeps a device absent from a report at its last
  // health until the device's timeout, then takes Unknown: a source that
  // fails decays exactly its devices. A report replaces its source's last.
  void ReportHealth(const std::string& source,
                    std::vector<DeviceHealth> devices);
  // ReportHealth of the one default source ("").
  void SetHealth(std::vector<DeviceHealth> devices);
  // Every source's last report sent again to every stream, updated now:
  // what a driver calls well within each device's timeout when nothing
  // changed, so that the kubelet never takes Unknown.
  void RefreshHealth();
  // The claims prepared now (from the checkpoint and this run).
  std::vector<ClaimRef> PreparedClaims() const;

  const std::filesystem::path& registration_socket() const;
  const std::filesystem::path& dra_socket() const;

 private:
  class Impl;
  explicit DriverRunner(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The gRPC service names the runner serves, in the order registration
// advertises them.
std::vector<std::string> ServedVersions(bool serve_health);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_H_
