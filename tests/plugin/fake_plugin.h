// A programmable device plugin for testing the kubelet side, behaving like
// the kubelet's own test stub (plugin/v1beta1/stub.go): settable device list
// and options (also different in Register and GetDevicePluginOptions),
// pluggable Allocate / GetPreferredAllocation / PreStartContainer, delays and
// errors, every call recorded. Raw v1beta1 messages: it can send what a
// well-behaved plugin never would (duplicates, odd health strings).
#ifndef TOPOLOGY_TESTS_PLUGIN_FAKE_PLUGIN_H_
#define TOPOLOGY_TESTS_PLUGIN_FAKE_PLUGIN_H_

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace topology::testing {

class FakePlugin {
 public:
  using AllocateFn = std::function<grpc::Status(const v1beta1::AllocateRequest&,
                                                v1beta1::AllocateResponse*)>;
  using PreferredFn =
      std::function<grpc::Status(const v1beta1::PreferredAllocationRequest&,
                                 v1beta1::PreferredAllocationResponse*)>;
  using PreStartFn =
      std::function<grpc::Status(const v1beta1::PreStartContainerRequest&)>;

  FakePlugin(std::filesystem::path dir, std::string resource,
             std::string endpoint);
  ~FakePlugin();

  // Serves DevicePlugin on <dir>/<endpoint>.
  void Start();
  // Ends every stream and stops serving (a plugin exit).
  void Stop();
  // Registers with <dir>/kubelet.sock; fields can be overridden.
  grpc::Status Register(
      const std::optional<std::string>& version = std::nullopt,
      const std::optional<std::string>& resource = std::nullopt,
      const std::optional<std::string>& endpoint = std::nullopt);

  // Replaces the list and streams it to every open stream.
  void SetDevices(std::vector<v1beta1::Device> devices);
  // Options returned by GetDevicePluginOptions (default: none set) and, when
  // SetRegisterOptions was not called, sent in Register.
  void SetOptions(v1beta1::DevicePluginOptions options);
  void SetRegisterOptions(const v1beta1::DevicePluginOptions& options);
  void SetOptionsError(std::optional<grpc::Status> error);
  void SetAllocate(AllocateFn fn);
  void SetPreferred(PreferredFn fn);
  void SetPreStart(PreStartFn fn);
  // Ends the open streams with `status` (OK = the plugin returned).
  void EndStreams(grpc::Status status);
  // A silent plugin opens ListAndWatch but never sends a list.
  void SetSilent(bool silent);

  // Records.
  int options_calls() const { return options_calls_.load(); }
  int stream_opens() const { return stream_opens_.load(); }
  std::vector<v1beta1::AllocateRequest> allocate_requests() const;
  std::vector<v1beta1::PreferredAllocationRequest> preferred_requests() const;
  std::vector<v1beta1::PreStartContainerRequest> pre_start_requests() const;

  const std::string& endpoint() const { return endpoint_; }
  std::filesystem::path socket_path() const { return dir_ / endpoint_; }

 private:
  class Service;
  friend class Service;

  std::filesystem::path dir_;
  std::string resource_;
  std::string endpoint_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  uint64_t generation_ = 0;
  uint64_t end_generation_ = 0;
  grpc::Status end_status_;
  bool stopping_ = false;
  bool silent_ = false;
  std::vector<v1beta1::Device> devices_;
  v1beta1::DevicePluginOptions options_;
  std::optional<v1beta1::DevicePluginOptions> register_options_;
  std::optional<grpc::Status> options_error_;
  AllocateFn allocate_;
  PreferredFn preferred_;
  PreStartFn pre_start_;
  std::atomic<int> options_calls_{0};
  std::atomic<int> stream_opens_{0};
  std::vector<v1beta1::AllocateRequest> allocate_requests_;
  std::vector<v1beta1::PreferredAllocationRequest> preferred_requests_;
  std::vector<v1beta1::PreStartContainerRequest> pre_start_requests_;
};

// A device for FakePlugin lists.
v1beta1::Device MakeDevice(const std::string& id,
                           const std::vector<int64_t>& nodes,
                           const std::string& health = "Healthy");

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_FAKE_PLUGIN_H_
