#include "driver_services.h"

namespace topology::draplugin {
namespace {

template <typename Claims>
std::vector<ClaimRef> Refs(const Claims& claims) {
  std::vector<ClaimRef> refs;
  refs.reserve(static_cast<size_t>(claims.size()));
  for (const auto& claim : claims) {
    refs.push_back({claim.namespace_(), claim.uid(), claim.name()});
  }
  return refs;
}

}  // namespace

ClaimCalls::Deadline DeadlineOf(const grpc::ServerContext& context,
                                const Clock& clock) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  constexpr auto kLongest = std::chrono::hours(1);
  return clock.Now() +
         (left > kLongest
              ? std::chrono::duration_cast<Clock::Duration>(kLongest)
              : std::chrono::duration_cast<Clock::Duration>(left));
}

grpc::Status RegistrationService::GetInfo(
    grpc::ServerContext* /*context*/,
    const pluginregistration::InfoRequest* /*request*/,
    pluginregistration::PluginInfo* info) {
  info->set_type(kPluginType);
  info->set_name(info_.driver);
  info->set_endpoint(info_.endpoint);
  for (const std::string& version : info_.versions) {
    info->add_supported_versions(version);
  }
  return grpc::Status::OK;
}

grpc::Status RegistrationService::NotifyRegistrationStatus(
    grpc::ServerContext* /*context*/,
    const pluginregistration::RegistrationStatus* status,
    pluginregistration::RegistrationStatusResponse* /*response*/) {
  on_status_(status->plugin_registered(), status->error());
  return grpc::Status::OK;
}

template <typename Api>
grpc::Status DraService<Api>::NodePrepareResources(
    grpc::ServerContext* context,
    const typename Api::NodePrepareResourcesRequest* request,
    typename Api::NodePrepareResourcesResponse* response) {
  for (const auto& [uid, outcome] : calls_->PrepareClaims(
           Refs(request->claims()), DeadlineOf(*context, *clock_))) {
    auto& out = (*response->mutable_claims())[uid];
    if (!outcome.error.empty()) {
      out.set_error(outcome.error);
      continue;
    }
    for (const PreparedDevice& device : outcome.devices) {
      auto* d = out.add_devices();
      for (const auto& name : device.request_names) d->add_request_names(name);
      d->set_pool_name(device.pool);
      d->set_device_name(device.device);
      for (const auto& id : device.cdi_device_ids) d->add_cdi_device_ids(id);
      // v1 only: v1beta1 has no shares.
      if constexpr (requires { d->set_share_id(device.share_id); }) {
        if (!device.share_id.empty()) d->set_share_id(device.share_id);
      }
    }
  }
  return grpc::Status::OK;
}

template <typename Api>
grpc::Status DraService<Api>::NodeUnprepareResources(
    grpc::ServerContext* context,
    const typename Api::NodeUnprepareResourcesRequest* request,
    typename Api::NodeUnprepareResourcesResponse* response) {
  for (const auto& [uid, error] : calls_->UnprepareClaims(
           Refs(request->claims()), DeadlineOf(*context, *clock_))) {
    (*response->mutable_claims())[uid].set_error(error);
  }
  return grpc::Status::OK;
}

template class DraService<DraV1>;
template class DraService<DraV1beta1>;

}  // namespace topology::draplugin
