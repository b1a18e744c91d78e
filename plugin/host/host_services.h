// The host's gRPC services, thin: each call is checked and handed to the
// piece that owns the answer (the servers' interceptor counts it on its
// connection, for the acceptors' caps). Registration on kubelet.sock goes to
// the plugin registry; Admit, Release and Status on the control socket go to
// the host's admission; status is rendered by the views (host_views.h).
#ifndef TOPOLOGY_HOST_HOST_SERVICES_H_
#define TOPOLOGY_HOST_HOST_SERVICES_H_

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"

namespace topology::host {

class AdmissionHandler;
class RegistrationHandler;

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  // Not owned; must outlive the service.
  explicit RegistrationService(RegistrationHandler* registry)
      : registry_(registry) {}
  grpc::Status Register(grpc::ServerContext* context,
                        const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* response) override;

 private:
  RegistrationHandler* const registry_;
};

class ControlService final
    : public topologymanager::v1alpha1::Control::Service {
 public:
  // Not owned; must outlive the service.
  explicit ControlService(AdmissionHandler* host) : host_(host) {}
  grpc::Status Admit(grpc::ServerContext* context,
                     const topologymanager::v1alpha1::AdmitRequest* request,
                     topologymanager::v1alpha1::JsonReply* reply) override;
  grpc::Status Release(grpc::ServerContext* context,
                       const topologymanager::v1alpha1::ReleaseRequest* request,
                       topologymanager::v1alpha1::JsonReply* reply) override;
  grpc::Status Status(grpc::ServerContext* context,
                      const topologymanager::v1alpha1::StatusRequest* request,
                      topologymanager::v1alpha1::JsonReply* reply) override;

 private:
  AdmissionHandler* const host_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_SERVICES_H_
