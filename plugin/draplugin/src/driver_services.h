// The DRA framework's gRPC services, thin shells over the runner as the
// kubelet's servers are over their handlers: registration
// (pluginregistration v1: GetInfo, NotifyRegistrationStatus) and the DRA
// plugin service (v1 and v1beta1: NodePrepareResources,
// NodeUnprepareResources). They translate messages and the call's deadline;
// the runner (ClaimCalls) decides. Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_DRIVER_SERVICES_H_
#define TOPOLOGY_DRAPLUGIN_DRIVER_SERVICES_H_

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "topology/clock.h"
#include "topology/draplugin/driver.h"

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace topology::draplugin {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// What one claim of a call came to.
struct ClaimOutcome {
  std::vector<PreparedDevice> devices;
  std::string error;  // non-empty: this claim failed
};

// What the DRA services ask of the runner. Calls arrive concurrently.
class ClaimCalls {
 public:
  using Deadline = Clock::TimePoint;
  virtual ~ClaimCalls() = default;
  // One outcome per distinct UID of `refs`, by `deadline`.
  virtual std::map<std::string, ClaimOutcome> PrepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline) = 0;
  // One error per distinct UID ("" when unprepared), by `deadline`.
  virtual std::map<std::string, std::string> UnprepareClaims(
      const std::vector<ClaimRef>& refs, Deadline deadline) = 0;
};

// The kubelet's deadline of a call (45 s by default) on `clock`; an hour at
// most (no deadline, or one beyond any wait that makes sense).
ClaimCalls::Deadline DeadlineOf(const grpc::ServerContext& context,
                                const Clock& clock);

class RegistrationService final
    : public pluginregistration::Registration::Service {
 public:
  // GetInfo's answer; `on_status` hears the kubelet's verdict.
  struct Info {
    std::string driver;
    std::string endpoint;
    std::vector<std::string> versions;
  };
  using StatusCallback =
      std::function<void(bool registered, const std::string& error)>;
  RegistrationService(Info info, StatusCallback on_status)
      : info_(std::move(info)), on_status_(std::move(on_status)) {}

  grpc::Status GetInfo(grpc::ServerContext* context,
                       const pluginregistration::InfoRequest* request,
                       pluginregistration::PluginInfo* info) override;
  grpc::Status NotifyRegistrationStatus(
      grpc::ServerContext* context,
      const pluginregistration::RegistrationStatus* status,
      pluginregistration::RegistrationStatusResponse* response) override;

 private:
  const Info info_;
  const StatusCallback on_status_;
};

// The DRA plugin service of one API version (DraV1, DraV1beta1 below).
template <typename Api>
class DraService final : public Api::DRAPlugin::Service {
 public:
  // Neither is owned.
  DraService(ClaimCalls* calls, const Clock* clock)
      : calls_(calls), clock_(clock) {}

  grpc::Status NodePrepareResources(
      grpc::ServerContext* context,
      const typename Api::NodePrepareResourcesRequest* request,
      typename Api::NodePrepareResourcesResponse* response) override;
  grpc::Status NodeUnprepareResources(
      grpc::ServerContext* context,
      const typename Api::NodeUnprepareResourcesRequest* request,
      typename Api::NodeUnprepareResourcesResponse* response) override;

 private:
  ClaimCalls* const calls_;
  const Clock* const clock_;
};

struct DraV1 {
  using DRAPlugin = drav1::DRAPlugin;
  using NodePrepareResourcesRequest = drav1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = drav1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest = drav1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse = drav1::NodeUnprepareResourcesResponse;
};
struct DraV1beta1 {
  using DRAPlugin = drav1beta1::DRAPlugin;
  using NodePrepareResourcesRequest = drav1beta1::NodePrepareResourcesRequest;
  using NodePrepareResourcesResponse = drav1beta1::NodePrepareResourcesResponse;
  using NodeUnprepareResourcesRequest =
      drav1beta1::NodeUnprepareResourcesRequest;
  using NodeUnprepareResourcesResponse =
      drav1beta1::NodeUnprepareResourcesResponse;
};

extern template class DraService<DraV1>;
extern template class DraService<DraV1beta1>;

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DRIVER_SERVICES_H_
