// The kubelet's DRA side, for tests, over real unix sockets: its plugin
// watcher (finds <driver>-reg.sock in the registry directory, GetInfo,
// chooses the first version it supports in the plugin's order, answers
// NotifyRegistrationStatus, refusing a plugin that offers no DRA service it
// knows and naming them) and its DRA manager (NodePrepareResources and
// NodeUnprepareResources per claim UID with a deadline, calling again for
// the claims a response left out, as the kubelet retries them; the health
// stream).
#ifndef TOPOLOGY_TESTING_FAKE_DRA_KUBELET_H_
#define TOPOLOGY_TESTING_FAKE_DRA_KUBELET_H_

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "topology/status.h"

namespace topology::draplugin {
class KubeClient;
}  // namespace topology::draplugin

namespace topology::testing {

class FakeDraKubelet {
 public:
  struct Claim {
    std::string ns;
    std::string uid;
    std::string name;
  };
  struct Device {
    std::vector<std::string> request_names;
    std::string pool;
    std::string device;
    std::vector<std::string> cdi_device_ids;
    std::string share_id;  // v1 only
  };
  struct ClaimAnswer {
    std::vector<Device> devices;
    std::string error;
  };
  struct HealthEntry {
    std::string pool;
    std::string device;
    int health = 0;  // 0 unknown, 1 healthy, 2 unhealthy
    int64_t timeout_seconds = 0;
    std::string message;
    int64_t last_updated = 0;  // seconds since the epoch
  };

  // The DRA service versions this kubelet knows, in its own terms.
  explicit FakeDraKubelet(std::filesystem::path registry_dir,
                          std::vector<std::string> known = {
                              "v1.DRAPlugin", "v1beta1.DRAPlugin"});

  // What the plugin watcher does for `driver`'s registration socket:
  // GetInfo, the version choice, NotifyRegistrationStatus. The error says
  // why the plugin was refused (also sent to it).
  Status Register(const std::string& driver);
  // The same for the registration socket at `socket` (a rolling-update
  // instance's "<driver>-<uid>-reg.sock": the watcher takes any *.sock).
  Status RegisterSocket(const std::filesystem::path& socket,
                        const std::string& driver);
  // Every registration is refused with `error`, as a kubelet without the
  // DRA handler refuses it ("no handler registered for plugin type:
  // DRAPlugin", pluginwatcher).
  void set_refusal(std::string error) { refusal_ = std::move(error); }
  // After Register: what GetInfo said and what was chosen.
  std::string type() const { return type_; }
  std::string endpoint() const { return endpoint_; }
  std::vector<std::string> supported_versions() const { return versions_; }
  std::string chosen() const { return chosen_; }

  // The deadline of each Prepare and Unprepare call: the kubelet's 45 s
  // unless a test shortens it.
  void set_call_timeout(std::chrono::milliseconds timeout) {
    call_timeout_ = timeout;
  }

  // NodePrepareResources over the chosen version (or `version`), claims a
  // response leaves out asked again (at most `attempts` calls).
  StatusOr<std::map<std::string, ClaimAnswer>> Prepare(
      const std::vector<Claim>& claims, const std::string& version = "",
      int attempts = 3);
  StatusOr<std::map<std::string, std::string>> Unprepare(
      const std::vector<Claim>& claims, const std::string& version = "");

  // The CDI ids the kubelet gives a container that names `request` of the
  // claim (its top-level request name, as a pod's resourceClaims entry
  // does): those of every device whose request_names hold it, or that has
  // none (all requests). claiminfo.go, cdiDevicesAsList.
  static std::vector<std::string> ContainerCdiIds(const ClaimAnswer& answer,
                                                  const std::string& request);

  // The first message of a health stream ("v1" or "v1alpha1"), or an
  // error when none comes within `timeout`.
  StatusOr<std::vector<HealthEntry>> FirstHealth(
      const std::string& version, std::chrono::milliseconds timeout);
  // The messages of one health stream until `count` have come or
  // `timeout` has passed.
  std::vector<std::vector<HealthEntry>> WatchHealth(
      const std::string& version, size_t count,
      std::chrono::milliseconds timeout);
  // Health messages received on every stream so far (a test waits for a
  // stream's first one to know the stream is open).
  size_t health_messages() const { return health_messages_.load(); }

  // The kubelet's wipes of ResourceSlices (pkg/kubelet/cm/dra/manager.go and
  // plugin/registration.go): at its start every slice of `node`; 30 s
  // (defaultWipingDelay) after a driver deregistered, that driver's slices
  // of `node` (`driver` given). Through `client`, as the kubelet's node
  // credentials would delete them; a server without field selectors on
  // spec.nodeName or spec.driver (it answers 400) is listed whole and
  // filtered here, as draplugin::ListNodeSlices lists. The number deleted; the
  // API server's refusal otherwise. A driver's test calls it to see its slices
  // come back.
  static StatusOr<size_t> WipeSlices(draplugin::KubeClient& client,
                                     const std::string& node,
                                     const std::string& driver = "");

 private:
  std::filesystem::path registry_dir_;
  std::vector<std::string> known_;
  std::string type_;
  std::string endpoint_;
  std::vector<std::string> versions_;
  std::string chosen_;
  std::chrono::milliseconds call_timeout_ = std::chrono::seconds(45);
  std::string refusal_;
  std::atomic<size_t> health_messages_{0};
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_FAKE_DRA_KUBELET_H_
