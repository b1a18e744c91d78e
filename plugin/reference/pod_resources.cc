#include "pod_resources.h"

#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"

namespace topology::device_plugin {

namespace {
constexpr int kMaxAnswerBytes = 16 * 1024 * 1024;
}  // namespace

std::filesystem::path PodResourcesSocket(const std::filesystem::path& root) {
  return root / "pod-resources" / "kubelet.sock";
}

StatusOr<std::set<std::string>> ListDevicePluginDeviceIds(
    const std::filesystem::path& socket, std::chrono::milliseconds deadline) {
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(kMaxAnswerBytes);
  const auto channel = grpc::CreateCustomChannel(
      "unix:" + socket.string(), grpc::InsecureChannelCredentials(), arguments);
  const auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + deadline);
  v1::ListPodResourcesResponse answer;
  const grpc::Status status =
      stub->List(&context, v1::ListPodResourcesRequest(), &answer);
  if (!status.ok()) {
    return UnavailableError("the kubelet's pod resources API at " +
                            socket.string() +
                            " did not answer List: " + status.error_message());
  }
  std::set<std::string> ids;
  for (const auto& pod : answer.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        ids.insert(devices.device_ids().begin(), devices.device_ids().end());
      }
    }
  }
  return ids;
}

}  // namespace topology::device_plugin
