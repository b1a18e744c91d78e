// An in-process fake kubelet for device plugin tests, over real unix
// sockets: the Registration service on <dir>/kubelet.sock with the kubelet's
// validation and dial-back, and a DevicePlugin client per accepted
// registration that keeps one ListAndWatch stream open and records every
// message. Behaves like the kubelet's device manager: it dials and calls
// GetDevicePluginOptions before answering Register, opens ListAndWatch
// before the reply reaches the plugin, and can hold or deny its replies and
// restart like a kubelet (deleting every socket in the directory).
//
// Part of the installed test kit (find_package(libtopology COMPONENTS
// testing), pkg-config libtopology-testing): a plugin started with
// --plugin-dir <dir> (in-process or as a child process) registers with it,
// and the test calls the plugin as the kubelet would. The messages are the
// kubelet API's own (deviceplugin/v1beta1/api.pb.h, installed with the kit).
#ifndef TOPOLOGY_TESTING_FAKE_KUBELET_H_
#define TOPOLOGY_TESTING_FAKE_KUBELET_H_

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "deviceplugin/v1beta1/api.grpc.pb.h"

namespace topology::testing {

class FakeKubelet;

// The fake kubelet's side of one registered plugin.
class PluginConnection {
 public:
  // Arrival times are real: the fake kubelet observes, as the kubelet would.
  using SteadyClock = std::chrono::steady_clock;
  struct Message {
    v1beta1::ListAndWatchResponse response = {};
    SteadyClock::time_point received = {};
  };
  // Every call below has this deadline unless given one.
  static constexpr std::chrono::seconds kCallTimeout{10};

  ~PluginConnection();

  const v1beta1::RegisterRequest& request() const { return request_; }
  const v1beta1::DevicePluginOptions& options() const { return options_; }
  v1beta1::DevicePlugin::Stub& stub() { return *stub_; }
  std::shared_ptr<grpc::Channel> channel() const { return channel_; }
  SteadyClock::time_point stream_opened() const { return stream_opened_; }

  // Waits until at least `count` messages arrived; false on timeout.
  bool WaitForMessages(size_t count, std::chrono::milliseconds timeout);
  std::vector<Message> messages() const;
  std::optional<v1beta1::ListAndWatchResponse> latest() const;
  // Waits for a ListAndWatch message that `accept` takes (checking the
  // latest first) and returns it; nullopt on timeout.
  std::optional<v1beta1::ListAndWatchResponse> WaitForList(
      const std::function<bool(const v1beta1::ListAndWatchResponse&)>& accept,
      std::chrono::milliseconds timeout);

  // The kubelet's calls for one container, with the kubelet's request
  // shapes. GetPreferredAllocation answers the chosen ids.
  grpc::Status GetPreferredAllocation(
      const std::vector<std::string>& available,
      const std::vector<std::string>& must_include, int size,
      std::vector<std::string>* chosen);
  grpc::Status Allocate(const std::vector<std::string>& ids,
                        v1beta1::ContainerAllocateResponse* response);
  // Ends the ListAndWatch stream from the client side.
  void Cancel();
  // Waits for the stream to end; its status, or nullopt on timeout.
  std::optional<grpc::Status> WaitForEnd(std::chrono::milliseconds timeout);
  bool ended() const;

 private:
  friend class FakeKubelet;
  PluginConnection() = default;
  void StartStream();

  v1beta1::RegisterRequest request_;
  v1beta1::DevicePluginOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1beta1::DevicePlugin::Stub> stub_;
  grpc::ClientContext stream_context_;
  SteadyClock::time_point stream_opened_;
  std::thread reader_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Message> messages_;
  std::optional<grpc::Status> end_status_;
};

class FakeKubelet {
 public:
  // Arrival times are real: the fake kubelet observes, as the kubelet would.
  using SteadyClock = std::chrono::steady_clock;

  explicit FakeKubelet(std::filesystem::path dir);
  ~FakeKubelet();

  // Serves Registration on <dir>/kubelet.sock (removing a stale file).
  void Start();
  // Stops serving and closes every plugin connection (a kubelet exit).
  void Stop();
  // Deletes every unix socket in the directory, as a starting kubelet does.
  void DeleteSockets();
  // Stop, delete sockets, wait `gap`, start: the real restart order.
  void Restart(std::chrono::milliseconds gap);

  // Knobs, effective for the next Register calls.
  void SetReplyDelay(std::chrono::milliseconds delay);
  // A non-OK status is returned without dialling (like the kubelet's
  // version and name checks).
  void SetDenial(std::optional<grpc::Status> denial);

  // Register calls seen (accepted or not) and their arrival times.
  size_t register_attempts() const;
  std::vector<SteadyClock::time_point> register_times() const;
  size_t accepted_registrations() const;
  // The newest accepted connection for `resource`, waiting for it.
  std::shared_ptr<PluginConnection> WaitForConnection(
      const std::string& resource, std::chrono::milliseconds timeout,
      size_t min_accepted = 1);
  // Whether GetDevicePluginOptions and the first ListAndWatch message were
  // received before the Register reply of the newest registration.
  bool options_before_reply() const;
  bool first_list_before_reply() const;

  std::filesystem::path socket_path() const { return dir_ / "kubelet.sock"; }

 private:
  class Service;
  grpc::Status HandleRegister(const v1beta1::RegisterRequest& request);

  std::filesystem::path dir_;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;

  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::chrono::milliseconds reply_delay_{0};
  std::optional<grpc::Status> denial_;
  std::vector<SteadyClock::time_point> attempts_;
  std::vector<std::shared_ptr<PluginConnection>> connections_;  // live
  std::map<std::string, size_t> accepted_;  // per resource, ever
  std::map<std::string, std::shared_ptr<PluginConnection>> latest_;
  bool options_before_reply_ = false;
  bool first_list_before_reply_ = false;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_FAKE_KUBELET_H_
