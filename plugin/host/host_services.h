// The host's gRPC services, thin: each call is checked, counted on its
// connection (for the acceptors' caps) and handed to the piece that owns
// the answer. Registration on kubelet.sock goes to the plugin registry;
// Admit, Release and Status on the control socket go to the host.
#ifndef TOPOLOGY_HOST_HOST_SERVICES_H_
#define TOPOLOGY_HOST_HOST_SERVICES_H_

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"

namespace topology::host {

class ConnectionCalls;
class HostManager;
class PluginRegistry;

class RegistrationService final : public v1beta1::Registration::Service {
 public:
  // Neither is owned; both must outlive the service.
  RegistrationService(PluginRegistry* registry, ConnectionCalls* calls)
      : registry_(registry), calls_(calls) {}
  grpc::Status Register(grpc::ServerContext* context,
                        const v1beta1::RegisterRequest* request,
                        v1beta1::Empty* response) override;

 private:
  PluginRegistry* const registry_;
  ConnectionCalls* const calls_;
};

class ControlService final
    : public topologymanager::v1alpha1::Control::Service {
 public:
  // Neither is owned; both must outlive the service.
  ControlService(HostManager* host, ConnectionCalls* calls)
      : host_(host), calls_(calls) {}
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
  HostManager* const host_;
  ConnectionCalls* const calls_;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_SERVICES_H_
