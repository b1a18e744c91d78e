// What the host's gRPC services call, as the kubelet's servers take
// handlers rather than the kubelet: registration on kubelet.sock, and
// admission, release and status on the control socket. The services see
// nothing else of the host (host_services.h).
#ifndef TOPOLOGY_HOST_HOST_HANDLERS_H_
#define TOPOLOGY_HOST_HOST_HANDLERS_H_

#include <functional>
#include <string>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/status.h"

namespace topology::host {

// host_views.h, pod_result.h: plugin_registry.h implements the first
// interface and host_views.h includes it.
struct HostSnapshot;
struct PodResult;

// kubelet.sock's Registration (PluginRegistry).
class RegistrationHandler {
 public:
  // The kubelet's Register: version, endpoint and resource name checked,
  // the plugin dialled. The error's message is the kubelet's.
  virtual Status Register(const std::string& version,
                          const std::string& endpoint,
                          const std::string& resource) = 0;

 protected:
  ~RegistrationHandler() = default;
};

// The control socket's Admit, Release and Status (HostManager).
class AdmissionHandler {
 public:
  // Admits `pods` in order; stops early (the rest answered "Cancelled")
  // once `cancelled` returns true.
  virtual std::vector<PodResult> AdmitAll(
      const std::vector<manager::Pod>& pods, bool explain,
      const std::function<bool()>& cancelled) = 0;
  // By uid, "namespace/name" or unique name.
  virtual Status Release(const std::string& pod) = 0;
  // The state at one instant; the views render it (host_views.h).
  virtual HostSnapshot Snapshot() const = 0;

 protected:
  ~AdmissionHandler() = default;
};

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_HOST_HANDLERS_H_
