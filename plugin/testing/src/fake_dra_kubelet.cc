#include "topology/testing/fake_dra_kubelet.h"

#include <algorithm>
#include <utility>

#include <grpcpp/grpcpp.h>

#include <nlohmann/json.hpp>

#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/resource_slices.h"

#include "dra/v1/api.grpc.pb.h"
#include "dra/v1beta1/api.grpc.pb.h"
#include "drahealth/v1/api.grpc.pb.h"
#include "drahealth/v1alpha1/api.grpc.pb.h"
#include "pluginregistration/v1/api.grpc.pb.h"

namespace topology::testing {
namespace {

namespace drav1 = ::k8s::io::kubelet::pkg::apis::dra::v1;
namespace drav1beta1 = ::k8s::io::kubelet::pkg::apis::dra::v1beta1;

// The kubelet's DRA calls have a deadline (defaultClientCallTimeout, 45 s
// in pkg/kubelet/cm/dra/plugin); so do these.
constexpr auto kCallTimeout = std::chrono::seconds(45);

std::shared_ptr<grpc::Channel> Dial(const std::string& socket) {
  return grpc::CreateChannel("unix:" + socket,
                             grpc::InsecureChannelCredentials());
}

void Deadline(grpc::ClientContext& context,
              std::chrono::milliseconds timeout = kCallTimeout) {
  context.set_deadline(std::chrono::system_clock::now() + timeout);
}

Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return OkStatus();
  return Status(static_cast<StatusCode>(status.error_code()),
                what + ": " + status.error_message());
}

// The claims of a request, as the kubelet names them.
template <typename Request>
Request ClaimsRequest(const std::vector<FakeDraKubelet::Claim>& claims) {
  Request request;
  for (const auto& claim : claims) {
    auto* c = request.add_claims();
    c->set_namespace_(claim.ns);
    c->set_uid(claim.uid);
    c->set_name(claim.name);
  }
  return request;
}

template <typename Stub, typename Request, typename Response>
StatusOr<std::map<std::string, FakeDraKubelet::ClaimAnswer>> PrepareWith(
    const std::string& socket, const std::vector<FakeDraKubelet::Claim>& claims,
    int attempts, std::chrono::milliseconds timeout) {
  std::map<std::string, FakeDraKubelet::ClaimAnswer> answers;
  std::vector<FakeDraKubelet::Claim> pending = claims;
  auto stub = Stub::NewStub(Dial(socket));
  for (int attempt = 0; attempt < attempts && !pending.empty(); ++attempt) {
    const Request request = ClaimsRequest<Request>(pending);
    Response response;
    grpc::ClientContext context;
    Deadline(context, timeout);
    const grpc::Status status =
        stub->NodePrepareResources(&context, request, &response);
    if (!status.ok()) return FromGrpc(status, "NodePrepareResources");
    std::vector<FakeDraKubelet::Claim> missing;
    for (const auto& claim : pending) {
      const auto it = response.claims().find(claim.uid);
      if (it == response.claims().end()) {
        missing.push_back(claim);  // the kubelet calls again for these
        continue;
      }
      FakeDraKubelet::ClaimAnswer answer;
      answer.error = it->second.error();
      for (const auto& d : it->second.devices()) {
        FakeDraKubelet::Device device;
        device.request_names.assign(d.request_names().begin(),
                                    d.request_names().end());
        device.pool = d.pool_name();
        device.device = d.device_name();
        device.cdi_device_ids.assign(d.cdi_device_ids().begin(),
                                     d.cdi_device_ids().end());
        if constexpr (requires { d.share_id(); }) {
          device.share_id = d.share_id();
        }
        answer.devices.push_back(std::move(device));
      }
      answers[claim.uid] = std::move(answer);
    }
    pending = std::move(missing);
  }
  if (!pending.empty()) {
    return UnavailableError("claim " + pending.front().uid +
                            " never got an answer");
  }
  return answers;
}

template <typename Stub, typename Request, typename Response>
StatusOr<std::map<std::string, std::string>> UnprepareWith(
    const std::string& socket, const std::vector<FakeDraKubelet::Claim>& claims,
    std::chrono::milliseconds timeout) {
  auto stub = Stub::NewStub(Dial(socket));
  const Request request = ClaimsRequest<Request>(claims);
  Response response;
  grpc::ClientContext context;
  Deadline(context, timeout);
  const grpc::Status status =
      stub->NodeUnprepareResources(&context, request, &response);
  if (!status.ok()) return FromGrpc(status, "NodeUnprepareResources");
  std::map<std::string, std::string> errors;
  for (const auto& claim : claims) {
    const auto it = response.claims().find(claim.uid);
    if (it == response.claims().end()) {
      return UnavailableError("claim " + claim.uid + " has no answer");
    }
    errors[claim.uid] = it->second.error();
  }
  return errors;
}

template <typename Stub, typename Request, typename Response>
std::vector<std::vector<FakeDraKubelet::HealthEntry>> Watch(
    const std::string& socket, size_t count, std::chrono::milliseconds timeout,
    std::atomic<size_t>* received) {
  auto stub = Stub::NewStub(Dial(socket));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  auto reader = stub->NodeWatchResources(&context, Request());
  std::vector<std::vector<FakeDraKubelet::HealthEntry>> messages;
  Response response;
  while (messages.size() < count && reader->Read(&response)) {
    std::vector<FakeDraKubelet::HealthEntry> entries;
    for (const auto& d : response.devices()) {
      entries.push_back({d.device().pool_name(), d.device().device_name(),
                         static_cast<int>(d.health()),
                         d.health_check_timeout_seconds(), d.message(),
                         d.last_updated_time()});
    }
    messages.push_back(std::move(entries));
    received->fetch_add(1);
  }
  context.TryCancel();
  (void)reader->Finish();
  return messages;
}

}  // namespace

FakeDraKubelet::FakeDraKubelet(std::filesystem::path registry_dir,
                               std::vector<std::string> known)
    : registry_dir_(std::move(registry_dir)), known_(std::move(known)) {}

Status FakeDraKubelet::Register(const std::string& driver) {
  return RegisterSocket(registry_dir_ / (driver + "-reg.sock"), driver);
}

Status FakeDraKubelet::RegisterSocket(const std::filesystem::path& path,
                                      const std::string& driver) {
  const std::string socket = path.string();
  auto stub = pluginregistration::Registration::NewStub(Dial(socket));
  pluginregistration::PluginInfo info;
  {
    grpc::ClientContext context;
    Deadline(context);
    const grpc::Status status =
        stub->GetInfo(&context, pluginregistration::InfoRequest(), &info);
    if (!status.ok()) return FromGrpc(status, "GetInfo");
  }
  type_ = info.type();
  endpoint_ = info.endpoint();
  versions_.assign(info.supported_versions().begin(),
                   info.supported_versions().end());
  chosen_.clear();
  std::string error;
  if (!refusal_.empty()) {
    error = refusal_;
  } else if (type_ != "DRAPlugin") {
    error = "plugin type \"" + type_ + "\" is not DRAPlugin";
  } else if (info.name() != driver) {
    error = "plugin name \"" + info.name() + "\" is not the socket's driver";
  } else {
    // The first of the plugin's versions the kubelet knows.
    for (const std::string& version : versions_) {
      if (std::find(known_.begin(), known_.end(), version) != known_.end()) {
        chosen_ = version;
        break;
      }
    }
    if (chosen_.empty()) {
      error = "none of the DRA services the kubelet supports (";
      for (size_t i = 0; i < known_.size(); ++i) {
        error += (i == 0 ? "" : ", ") + known_[i];
      }
      error += ") is among those the plugin serves";
    }
  }
  pluginregistration::RegistrationStatus status;
  status.set_plugin_registered(error.empty());
  status.set_error(error);
  pluginregistration::RegistrationStatusResponse response;
  grpc::ClientContext context;
  Deadline(context);
  const grpc::Status notified =
      stub->NotifyRegistrationStatus(&context, status, &response);
  if (!notified.ok()) return FromGrpc(notified, "NotifyRegistrationStatus");
  if (!error.empty()) return FailedPreconditionError(error);
  return OkStatus();
}

StatusOr<std::map<std::string, FakeDraKubelet::ClaimAnswer>>
FakeDraKubelet::Prepare(const std::vector<Claim>& claims,
                        const std::string& version, int attempts) {
  const std::string use = version.empty() ? chosen_ : version;
  if (use == "v1.DRAPlugin") {
    return PrepareWith<drav1::DRAPlugin, drav1::NodePrepareResourcesRequest,
                       drav1::NodePrepareResourcesResponse>(
        endpoint_, claims, attempts, call_timeout_);
  }
  if (use == "v1beta1.DRAPlugin") {
    return PrepareWith<drav1beta1::DRAPlugin,
                       drav1beta1::NodePrepareResourcesRequest,
                       drav1beta1::NodePrepareResourcesResponse>(
        endpoint_, claims, attempts, call_timeout_);
  }
  return FailedPreconditionError("no DRA service version \"" + use + "\"");
}

StatusOr<std::map<std::string, std::string>> FakeDraKubelet::Unprepare(
    const std::vector<Claim>& claims, const std::string& version) {
  const std::string use = version.empty() ? chosen_ : version;
  if (use == "v1.DRAPlugin") {
    return UnprepareWith<drav1::DRAPlugin, drav1::NodeUnprepareResourcesRequest,
                         drav1::NodeUnprepareResourcesResponse>(
        endpoint_, claims, call_timeout_);
  }
  if (use == "v1beta1.DRAPlugin") {
    return UnprepareWith<drav1beta1::DRAPlugin,
                         drav1beta1::NodeUnprepareResourcesRequest,
                         drav1beta1::NodeUnprepareResourcesResponse>(
        endpoint_, claims, call_timeout_);
  }
  return FailedPreconditionError("no DRA service version \"" + use + "\"");
}

std::vector<std::vector<FakeDraKubelet::HealthEntry>>
FakeDraKubelet::WatchHealth(const std::string& version, size_t count,
                            std::chrono::milliseconds timeout) {
  if (version == "v1") {
    return Watch<::v1::DRAResourceHealth, ::v1::NodeWatchResourcesRequest,
                 ::v1::NodeWatchResourcesResponse>(endpoint_, count, timeout,
                                                   &health_messages_);
  }
  return Watch<::v1alpha1::DRAResourceHealth,
               ::v1alpha1::NodeWatchResourcesRequest,
               ::v1alpha1::NodeWatchResourcesResponse>(
      endpoint_, count, timeout, &health_messages_);
}

StatusOr<std::vector<FakeDraKubelet::HealthEntry>> FakeDraKubelet::FirstHealth(
    const std::string& version, std::chrono::milliseconds timeout) {
  auto messages = WatchHealth(version, 1, timeout);
  if (messages.empty()) {
    return DeadlineExceededError("no health message within " +
                                 std::to_string(timeout.count()) + " ms");
  }
  return messages.front();
}

std::vector<std::string> FakeDraKubelet::ContainerCdiIds(
    const ClaimAnswer& answer, const std::string& request) {
  std::vector<std::string> ids;
  for (const Device& device : answer.devices) {
    if (!device.request_names.empty() &&
        std::find(device.request_names.begin(), device.request_names.end(),
                  request) == device.request_names.end()) {
      continue;
    }
    ids.insert(ids.end(), device.cdi_device_ids.begin(),
               device.cdi_device_ids.end());
  }
  return ids;
}

StatusOr<size_t> FakeDraKubelet::WipeSlices(draplugin::KubeClient& client,
                                            const std::string& node,
                                            const std::string& driver) {
  constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
  // As the kubelet lists them; a server without the field selector is
  // filtered below.
  bool filter_here = false;
  auto listed = draplugin::ListNodeSlices(client, node, driver, &filter_here);
  if (!listed.ok()) return listed.status();
  if (Status status = draplugin::StatusOf(*listed, "listing resourceslices");
      !status.ok()) {
    return status;
  }
  const nlohmann::json list =
      nlohmann::json::parse(listed->body, nullptr, /*allow_exceptions=*/false);
  if (!list.is_object() || !list.contains("items") ||
      !list["items"].is_array()) {
    return InvalidArgumentError("the resourceslices list is no list");
  }
  size_t deleted = 0;
  for (const nlohmann::json& item : list["items"]) {
    const nlohmann::json spec = item.value("spec", nlohmann::json::object());
    const nlohmann::json meta =
        item.value("metadata", nlohmann::json::object());
    if (!spec.is_object() || !meta.is_object()) continue;
    // A server that ignores the selector: filtered here.
    if (spec.value("nodeName", std::string()) != node) continue;
    if (!driver.empty() && spec.value("driver", std::string()) != driver) {
      continue;
    }
    const std::string name = meta.value("name", std::string());
    if (name.empty()) continue;
    auto answer = client.Request("DELETE", std::string(kSlices) + "/" + name);
    if (!answer.ok()) return answer.status();
    if (answer->status == 404) continue;  // gone meanwhile
    if (Status status =
            draplugin::StatusOf(*answer, "deleting resourceslice " + name);
        !status.ok()) {
      return status;
    }
    ++deleted;
  }
  return deleted;
}

}  // namespace topology::testing
