#include "host_services.h"

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/common/text_util.h"

#include "host_handlers.h"
#include "host_views.h"
#include "pod_manifest.h"
#include "pod_result.h"

namespace topology::host {

using text::InvalidUtf8Line;
using text::Quoted;

using nlohmann::json;

grpc::Status RegistrationService::Register(
    grpc::ServerContext* /*context*/, const v1beta1::RegisterRequest* request,
    v1beta1::Empty* /*response*/) {
  const topology::Status status = registry_->Register(
      request->version(), request->endpoint(), request->resource_name());
  // The kubelet answers with plain Go errors: status UNKNOWN.
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(grpc::StatusCode::UNKNOWN, status.message());
}

grpc::Status ControlService::Admit(
    grpc::ServerContext* context,
    const topologymanager::v1alpha1::AdmitRequest* request,
    topologymanager::v1alpha1::JsonReply* reply) {
  std::vector<manager::Pod> pods;
  for (const auto& manifest : request->manifests()) {
    auto parsed = ParsePodManifests(manifest.yaml(), manifest.source());
    if (!parsed.ok()) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          parsed.status().message());
    }
    // Names were checked field by field; anything else (a comment) is
    // still text the replies may quote.
    if (const size_t line = InvalidUtf8Line(manifest.yaml()); line != 0) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          manifest.source() + " line " + std::to_string(line) +
                              ": not valid UTF-8");
    }
    pods.insert(pods.end(), parsed->begin(), parsed->end());
  }
  // A client that gave up (deadline, Ctrl-C) stops the batch: pods not
  // yet admitted are not admitted.
  const auto cancelled = [context] {
    return context->IsCancelled() ||
           std::chrono::system_clock::now() > context->deadline();
  };
  json results = json::array();
  for (const PodResult& result :
       host_->AdmitAll(pods, request->explain(), cancelled)) {
    results.push_back(ToJson(result, request->explain()));
  }
  if (cancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED,
                        "the client cancelled the admission");
  }
  reply->set_json(results.dump(-1, ' ', false, json::error_handler_t::replace));
  return grpc::Status::OK;
}

grpc::Status ControlService::Release(
    grpc::ServerContext* /*context*/,
    const topologymanager::v1alpha1::ReleaseRequest* request,
    topologymanager::v1alpha1::JsonReply* reply) {
  const topology::Status status = host_->Release(request->pod());
  if (!status.ok()) {
    return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                        status.message());
  }
  reply->set_json(json({{"released", request->pod()}}).dump());
  return grpc::Status::OK;
}

grpc::Status ControlService::Status(
    grpc::ServerContext* /*context*/,
    const topologymanager::v1alpha1::StatusRequest* request,
    topologymanager::v1alpha1::JsonReply* reply) {
  if (request->format() == "nrt") {
    reply->set_json(NodeResourceTopologyJson(host_->Snapshot())
                        .dump(-1, ' ', false, json::error_handler_t::replace));
  } else if (request->format().empty() || request->format() == "json" ||
             request->format() == "text") {
    reply->set_json(StatusJson(host_->Snapshot())
                        .dump(-1, ' ', false, json::error_handler_t::replace));
  } else {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "unknown status format " + Quoted(request->format()) +
                            " (text, json or nrt)");
  }
  return grpc::Status::OK;
}

}  // namespace topology::host
