// topology-nrt-exporter's work: one node's NodeResourceTopology kept
// fresh. A round reads the kubelet's pod resources (what the node can give
// and what pods hold), its Memory Manager's state and (when stale) the
// node's ResourceSlices and the DeviceClasses,
// builds the object (build.h) and publishes it when it changed
// (publisher.h). Rounds run on one thread of the exporter's own, which
// alone owns what the rounds read:
//   - when the kubelet writes cpu_manager_state, memory_manager_state,
//     dra_manager_state or device-plugins/kubelet_internal_checkpoint (a
//     pod admitted or removed, a device plugin registered or its devices
//     changed), or a pod's directory comes or goes (inotify, or listing
//     when no watch can be had);
//   - when a plugin registers in plugins_registry (a DRA driver): its
//     slices are read again then, and once more a little later, for those
//     it publishes after registering;
//   - every resync period (the machine's memory and the kubelet's
//     configuration too);
//   - at most one round per min_interval: a burst of events is one round;
//   - a failed publish is retried with a back-off doubling to 30 s; the
//     newest object is what is written when the API server is back;
//   - after the kubelet restarted (its pod resources socket is a new one,
//     or it did not answer), nothing is written for a settle period: a
//     kubelet that has just started lists its pods only once it has them
//     back, and a restart changes nothing.
// No lock is held across a call or a file read.
#ifndef TOPOLOGY_NRT_EXPORTER_H_
#define TOPOLOGY_NRT_EXPORTER_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "topology/clock.h"
#include "topology/common/dir_watcher.h"
#include "topology/common/safe_file.h"
#include "topology/draplugin/kube_client.h"
#include "topology/status.h"
#include "topology/thread_annotations.h"
#include "topology/topology.h"

#include "build.h"
#include "publisher.h"

namespace topology::nrt {

struct ExporterOptions {
  std::string node_name;
  std::filesystem::path host_root = "/";  // sysfs below it
  std::filesystem::path kubelet_root = "/var/lib/kubelet";
  // The device manager's directory (its checkpoint), which the kubelet
  // keeps here whatever its --root-dir.
  std::filesystem::path device_plugin_dir = "/var/lib/kubelet/device-plugins";
  // Empty: <kubelet_root>/pod-resources/kubelet.sock.
  std::filesystem::path pod_resources_socket = {};
  // The kubelet's configuration file; empty with kubelet_configz.
  std::filesystem::path kubelet_config = {};
  // Read the configuration from the kubelet's configz, through the API
  // server (nodes/proxy).
  bool kubelet_configz = false;
  std::string fingerprint_method = "all";
  bool dra = true;  // count DRA devices (ResourceSlices, DeviceClasses)
  std::chrono::milliseconds resync{std::chrono::seconds(60)};
  std::chrono::milliseconds min_interval{100};
  std::chrono::milliseconds kubelet_settle{std::chrono::seconds(10)};
  // The deadline of each call to the kubelet.
  std::chrono::milliseconds deadline{std::chrono::seconds(5)};
  // List the watched directories instead of inotify.
  bool poll = false;
  // Once the first round's object is written, give the start-up code back
  // (common::ReleaseStartupCode): the program, not tests linking this.
  bool release_startup_code = false;
  const Clock* clock = &Clock::Real();
};

class Exporter {
 public:
  // Reads the machine (libtopology, at host_root) and the kubelet's
  // configuration; `client` (not owned, may be null: no API server) is
  // used for the slices, the classes, the Node and the writes.
  static StatusOr<std::unique_ptr<Exporter>> Create(
      ExporterOptions options, draplugin::KubeClient* client);
  ~Exporter();
  Exporter(const Exporter&) = delete;
  Exporter& operator=(const Exporter&) = delete;

  // One round's object, read and built now, not published (--once, and
  // tests); the slices and classes are read first when never read.
  StatusOr<Built> BuildNow();

  // Starts the watchers and the rounds' thread; the first round at once.
  Status Start();
  // Asks for a round (rate-limited). Thread-safe.
  void Trigger();
  // Ends the rounds (a call under way is cancelled) and joins. Idempotent.
  void Stop();

  struct Stats {
    uint64_t rounds = 0;
    uint64_t writes = 0;          // creates and updates
    uint64_t failed_rounds = 0;   // read or publish failed
    bool published = false;       // the API server held the object once
    std::string last_error = {};  // empty after a good round
  };
  Stats stats() const;
  // /healthz: "" while rounds come (none for three resync periods: the
  // problem); /readyz: "" once the object was published and the last round
  // went well. /metrics: the counters above in Prometheus text.
  std::string HealthProblem() const;
  std::string ReadinessProblem() const;
  std::string Metrics() const;

 private:
  Exporter(ExporterOptions options, draplugin::KubeClient* client,
           Topology machine, KubeletSettings kubelet);
  struct Due {
    bool resync = false;
    bool slices = false;
  };
  void Loop();
  // Waits for the next round; nullopt once stopped.
  std::optional<Due> NextRound() TOPOLOGY_EXCLUDES(mu_);
  Status Round(const Due& due);
  // Whether writes wait for a restarted kubelet to settle (and until when).
  bool Settling();
  Status ReadSlices();
  void SlicesNotRead(const Status& status);
  StatusOr<KubeletSettings> ReadKubeletSettings();
  void LookUpNode();
  void Watch(const std::filesystem::path& dir,
             const std::vector<std::string>& names, bool slices);

  const ExporterOptions options_;
  draplugin::KubeClient* const client_;
  const Clock& clock_;

  // The rounds' thread's own.
  Topology machine_;  // NUMA nodes, CPUs, memory and distances only
  KubeletSettings kubelet_;
  std::string node_uid_;
  std::vector<DraDevice> dra_devices_;
  std::vector<ClassSelector> classes_;
  bool slices_read_ = false;
  std::string slices_error_;  // the last read's error, said once
  bool published_once_ = false;
  // The kubelet's pod resources socket at the last round, and whether the
  // kubelet did not answer then.
  std::optional<files::FileIdentity> socket_;
  bool kubelet_away_ = false;
  Clock::TimePoint hold_until_ = {};
  bool holding_ = false;
  std::vector<std::string> notes_;
  std::unique_ptr<Publisher> publisher_;
  std::chrono::milliseconds backoff_{0};

  mutable Mutex mu_;
  std::condition_variable_any wake_;
  bool stop_ TOPOLOGY_GUARDED_BY(mu_) = false;
  bool dirty_ TOPOLOGY_GUARDED_BY(mu_) = true;
  bool slices_stale_ TOPOLOGY_GUARDED_BY(mu_) = true;
  Clock::TimePoint last_round_ TOPOLOGY_GUARDED_BY(mu_) = {};
  Clock::TimePoint next_resync_ TOPOLOGY_GUARDED_BY(mu_) = {};
  Clock::TimePoint retry_at_ TOPOLOGY_GUARDED_BY(mu_) = Clock::TimePoint::max();
  // A registration's second look at the slices.
  Clock::TimePoint slices_again_at_ TOPOLOGY_GUARDED_BY(mu_) =
      Clock::TimePoint::max();
  // When the memory a round's connection left is given back.
  Clock::TimePoint trim_at_ TOPOLOGY_GUARDED_BY(mu_) = Clock::TimePoint::max();
  // The start-up code is released at the trim after the object was first
  // published (ExporterOptions::release_startup_code).
  bool startup_code_released_ TOPOLOGY_GUARDED_BY(mu_) = false;
  Stats stats_ TOPOLOGY_GUARDED_BY(mu_);

  std::vector<std::unique_ptr<common::DirWatcher>> watchers_;
  std::thread thread_;
};

// The NUMA nodes of `topology` with their distances, nothing else: what
// the exporter keeps of a discovery (no PCI devices, no CPU details).
Topology ZonesOf(const Topology& topology);

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_EXPORTER_H_
