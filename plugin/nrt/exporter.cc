#include "exporter.h"

#include <algorithm>
#include <set>
#include <utility>

#include <glog/logging.h>
#include <malloc.h>
#include <sys/stat.h>

#include "topology/common/daemon.h"
#include "topology/common/json_fields.h"
#include "topology/common/safe_file.h"
#include "topology/discovery.h"

namespace topology::nrt {

namespace {

using nlohmann::json;
using std::chrono::milliseconds;

constexpr milliseconds kMaxBackoff{30000};
constexpr milliseconds kSlicesAgain{3000};
constexpr milliseconds kTrimAgain{1000};
constexpr char kSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kClassesPath[] = "/apis/resource.k8s.io/v1/deviceclasses";

// The kubelet's state files whose change means a pod's resources changed.
const std::vector<std::string>& StateFiles() {
  static const std::vector<std::string> names = {
      "cpu_manager_state", "memory_manager_state", "dra_manager_state"};
  return names;
}

}  // namespace

Topology ZonesOf(const Topology& topology) {
  Topology::Parts parts;
  parts.numa_nodes = topology.numa_nodes();
  if (topology.has_distances()) {
    for (const NumaNode& from : parts.numa_nodes) {
      std::vector<int> row;
      for (const NumaNode& to : parts.numa_nodes) {
        row.push_back(topology.Distance(from.id, to.id).value_or(0));
      }
      parts.distances.push_back(std::move(row));
    }
  }
  parts.source = topology.source();
  return Topology(std::move(parts));
}

StatusOr<std::unique_ptr<Exporter>> Exporter::Create(
    ExporterOptions options, draplugin::KubeClient* client) {
  if (options.node_name.empty()) {
    return InvalidArgumentError("the node's name is not set (--node-name)");
  }
  if (options.pod_resources_socket.empty()) {
    options.pod_resources_socket =
        options.kubelet_root / "pod-resources" / "kubelet.sock";
  }
  DiscoveryOptions discovery;
  discovery.host_root = options.host_root;
  // NUMA nodes, CPUs and memory only: neither hwloc nor libpci.
  discovery.use_hwloc = false;
  discovery.use_libpci = false;
  auto topology = Discover(discovery);
  if (!topology.ok()) return topology.status();
  if (topology->numa_nodes().empty()) {
    return FailedPreconditionError("no NUMA node found below " +
                                   options.host_root.string());
  }
  auto exporter = std::unique_ptr<Exporter>(
      new Exporter(std::move(options), client, ZonesOf(*topology), {}));
  auto settings = exporter->ReadKubeletSettings();
  if (!settings.ok()) return settings.status();
  exporter->kubelet_ = *settings;
  return exporter;
}

Exporter::Exporter(ExporterOptions options, draplugin::KubeClient* client,
                   Topology machine, KubeletSettings kubelet)
    : options_(std::move(options)),
      client_(client),
      clock_(*options_.clock),
      machine_(std::move(machine)),
      kubelet_(std::move(kubelet)) {
  if (client_ != nullptr) publisher_ = std::make_unique<Publisher>(client_);
}

Exporter::~Exporter() { Stop(); }

StatusOr<KubeletSettings> Exporter::ReadKubeletSettings() {
  if (options_.kubelet_configz) {
    if (client_ == nullptr) {
      return FailedPreconditionError("configz needs the API server");
    }
    const std::string path =
        "/api/v1/nodes/" + options_.node_name + "/proxy/configz";
    auto answer =
        client_->Request("GET", path, {}, {}, {.max_body = kMaxConfigBytes});
    if (!answer.ok()) return answer.status();
    if (Status status = draplugin::StatusOf(*answer, "get " + path);
        !status.ok()) {
      return status;
    }
    return ParseKubeletConfig(answer->body, path);
  }
  if (options_.kubelet_config.empty()) return KubeletSettings();
  // The kubelet's own file, placed by the administrator: read as the
  // kubelet reads it, through links.
  auto text = files::ReadMountedFile(options_.kubelet_config, kMaxConfigBytes);
  if (!text.ok()) return text.status();
  return ParseKubeletConfig(*text, options_.kubelet_config.string());
}

void Exporter::LookUpNode() {
  if (client_ == nullptr || !node_uid_.empty()) return;
  auto node = client_->Request("GET", "/api/v1/nodes/" + options_.node_name, {},
                               {}, {.max_body = draplugin::kMaxObjectBytes});
  if (!node.ok() || node->status != 200) return;
  const json object = json::parse(node->body, nullptr, false);
  try {
    node_uid_ =
        json_fields::String(json_fields::Field(object, "metadata"), "uid");
  } catch (const std::exception& e) {
    LOG(WARNING) << "the Node " << options_.node_name
                 << " has no UID: " << e.what();
  }
}

Status Exporter::ReadSlices() {
  if (!options_.dra || client_ == nullptr) return OkStatus();
  auto slices = client_->Request("GET", std::string(kSlicesPath) +
                                            "?fieldSelector=spec.nodeName%3D" +
                                            options_.node_name);
  if (!slices.ok()) return slices.status();
  if (Status s = draplugin::StatusOf(*slices, "list resourceslices"); !s.ok()) {
    return s;
  }
  auto devices = ParseResourceSlices(slices->body, options_.node_name);
  if (!devices.ok()) return devices.status();
  auto classes = client_->Request("GET", kClassesPath);
  if (!classes.ok()) return classes.status();
  if (Status s = draplugin::StatusOf(*classes, "list deviceclasses"); !s.ok()) {
    return s;
  }
  auto selectors = ParseDeviceClasses(classes->body);
  if (!selectors.ok()) return selectors.status();
  dra_devices_ = std::move(*devices);
  classes_ = std::move(*selectors);
  slices_read_ = true;
  slices_error_.clear();
  return OkStatus();
}

void Exporter::SlicesNotRead(const Status& status) {
  if (status.message() == slices_error_) return;  // said already
  slices_error_ = std::string(status.message());
  LOG(WARNING) << "the node's ResourceSlices and the DeviceClasses were not "
                  "read; DRA devices are counted as last read (none before "
                  "the first read): "
               << status.message();
}

StatusOr<Built> Exporter::BuildNow() {
  LookUpNode();
  if (!slices_read_) {
    // A cluster without DRA (or an exporter not allowed to list slices)
    // still gets its object: without DRA devices, and said so.
    if (Status read = ReadSlices(); !read.ok()) SlicesNotRead(read);
  }
  // Both answers every round: kept between rounds, 10,000 devices would
  // be a megabyte of an idle exporter's memory (docs/performance.md).
  // A connection of the round's own: one kept between rounds keeps gRPC's
  // connection machinery awake, 4 MiB and half again the idle CPU more on
  // the 34-node machine (docs/performance.md).
  auto resources =
      ReadNodeResources(options_.pod_resources_socket, options_.deadline);
  if (!resources.ok()) return resources.status();
  std::optional<MemoryManagerState> memory;
  const auto state_file = options_.kubelet_root / "memory_manager_state";
  auto text = files::ReadRegularFile(state_file, kMaxStateBytes);
  if (text.ok()) {
    auto parsed = ParseMemoryManagerState(*text, state_file.string());
    if (!parsed.ok()) return parsed.status();
    memory = std::move(*parsed);
  } else if (text.status().code() != StatusCode::kNotFound) {
    return text.status();
  }
  // The pods the kubelet still has: their directories.
  std::set<std::string> live_pods;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(
           options_.kubelet_root / "pods", error)) {
    live_pods.insert(entry.path().filename().string());
  }
  Inputs inputs{.topology = &machine_,
                .kubelet = kubelet_,
                .resources = &*resources,
                .memory = memory ? &*memory : nullptr,
                .live_pods = error ? nullptr : &live_pods,
                .dra_devices = &dra_devices_,
                .classes = &classes_,
                .node_name = options_.node_name,
                .node_uid = node_uid_,
                .fingerprint_method = options_.fingerprint_method};
  return Build(inputs);
}

Status Exporter::Round(const Due& due) {
  if (due.resync) {
    auto settings = ReadKubeletSettings();
    if (settings.ok()) {
      kubelet_ = *settings;
    } else {
      LOG(WARNING) << "the kubelet's configuration was not read again; the "
                      "last one is kept: "
                   << settings.status().message();
    }
  }
  if (due.slices) {
    if (Status read = ReadSlices(); !read.ok()) SlicesNotRead(read);
  }
  auto built = BuildNow();
  if (!built.ok()) {
    if (built.status().code() == StatusCode::kUnavailable) kubelet_away_ = true;
    return built.status();
  }
  if (Settling()) return OkStatus();
  if (built->notes != notes_) {
    for (const std::string& note : built->notes) LOG(WARNING) << note;
    notes_ = built->notes;
  }
  if (publisher_ == nullptr) return OkStatus();
  const uint64_t before =
      publisher_->stats().creates + publisher_->stats().updates;
  Status published = publisher_->Publish(Render(built->object));
  if (published.ok()) {
    const uint64_t after =
        publisher_->stats().creates + publisher_->stats().updates;
    if (after != before) {
      VLOG(1) << "NodeResourceTopology " << options_.node_name << " written";
      MutexLock lock(mu_);
      stats_.writes += after - before;
    }
    {
      MutexLock lock(mu_);
      stats_.published = true;
    }
    if (!published_once_ || holding_) {
      LOG(INFO) << "NodeResourceTopology " << options_.node_name
                << (after != before ? " written" : " was up to date already")
                << (holding_ ? " after the kubelet's restart" : "");
      published_once_ = true;
      holding_ = false;
    }
  }
  return published;
}

bool Exporter::Settling() {
  // The socket by its birth too: a kubelet's new socket may get the
  // number of the one it unlinked.
  const std::optional<files::FileIdentity> socket =
      files::IdentityAt(options_.pod_resources_socket);
  const Clock::TimePoint now = clock_.Now();
  if ((socket_ && socket != socket_) || kubelet_away_) {
    hold_until_ = now + options_.kubelet_settle;
    if (!holding_) {
      LOG(INFO) << "the kubelet restarted; its pods are read again in "
                << options_.kubelet_settle.count() << " ms before anything "
                << "is written";
    }
    holding_ = true;
  }
  socket_ = socket;
  kubelet_away_ = false;
  if (!holding_ || now >= hold_until_) return false;
  MutexLock lock(mu_);
  retry_at_ = std::min(retry_at_, hold_until_);
  return true;
}

void Exporter::Watch(const std::filesystem::path& dir,
                     const std::vector<std::string>& names, bool slices) {
  auto watcher = common::DirWatcher::Start(
      dir,
      [this, names, slices](const common::DirEvent& event) {
        if (event.kind == common::DirEvent::Kind::kListed) return;
        if (!names.empty() &&
            std::find(names.begin(), names.end(), event.name) == names.end()) {
          return;
        }
        MutexLock lock(mu_);
        dirty_ = true;
        if (slices) {
          slices_stale_ = true;
          slices_again_at_ = clock_.Now() + kSlicesAgain;
        }
        wake_.notify_all();
      },
      options_.poll);
  if (!watcher.ok()) {
    LOG(WARNING) << dir.string() << " is not watched (rounds come with the "
                 << "resync period only for its changes): "
                 << watcher.status().message();
    return;
  }
  watchers_.push_back(std::move(*watcher));
}

Status Exporter::Start() {
  const auto& root = options_.kubelet_root;
  Watch(root, StateFiles(), /*slices=*/false);
  // The device manager writes its checkpoint when a plugin's devices change
  // (a plugin registered late, a device gone unhealthy) and when it
  // allocates.
  Watch(options_.device_plugin_dir, {"kubelet_internal_checkpoint"}, false);
  Watch(root / "pods", {}, false);
  Watch(root / "plugins_registry", {}, /*slices=*/true);
  Watch(options_.pod_resources_socket.parent_path(),
        {options_.pod_resources_socket.filename().string()}, false);
  {
    MutexLock lock(mu_);
    next_resync_ = clock_.Now();
  }
  thread_ = std::thread([this] { Loop(); });
  return OkStatus();
}

void Exporter::Trigger() {
  MutexLock lock(mu_);
  dirty_ = true;
  wake_.notify_all();
}

void Exporter::Stop() {
  {
    MutexLock lock(mu_);
    if (stop_ && !thread_.joinable()) return;
    stop_ = true;
    wake_.notify_all();
  }
  if (client_ != nullptr) client_->Cancel();
  watchers_.clear();
  if (thread_.joinable()) thread_.join();
}

Exporter::Stats Exporter::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

std::string Exporter::HealthProblem() const {
  MutexLock lock(mu_);
  if (stop_) return "";
  const auto idle = clock_.Now() - last_round_;
  if (last_round_ != Clock::TimePoint() && idle > 3 * options_.resync) {
    return "no round for " +
           std::to_string(
               std::chrono::duration_cast<std::chrono::seconds>(idle).count()) +
           " s";
  }
  return "";
}

std::string Exporter::ReadinessProblem() const {
  MutexLock lock(mu_);
  if (!stats_.last_error.empty()) return stats_.last_error;
  if (!stats_.published) return "the NodeResourceTopology is not written yet";
  return "";
}

std::string Exporter::Metrics() const {
  const Stats s = stats();
  return "# TYPE topology_nrt_rounds_total counter\n"
         "topology_nrt_rounds_total " +
         std::to_string(s.rounds) +
         "\n# TYPE topology_nrt_writes_total counter\n"
         "topology_nrt_writes_total " +
         std::to_string(s.writes) +
         "\n# TYPE topology_nrt_failed_rounds_total counter\n"
         "topology_nrt_failed_rounds_total " +
         std::to_string(s.failed_rounds) + "\n";
}

std::optional<Exporter::Due> Exporter::NextRound() {
  MutexLock lock(mu_);
  for (;;) {
    if (stop_) return std::nullopt;
    const Clock::TimePoint now = clock_.Now();
    if (now >= slices_again_at_) {
      slices_again_at_ = Clock::TimePoint::max();
      slices_stale_ = true;
      dirty_ = true;
    }
    // gRPC tears a round's connection down on its own threads, after the
    // round: what that frees goes back to the system a second later.
    if (now >= trim_at_) {
      trim_at_ = Clock::TimePoint::max();
      const bool release = options_.release_startup_code && stats_.published &&
                           !std::exchange(startup_code_released_, true);
      lock.unlock();
      malloc_trim(0);
      // Start-up (gRPC's plugins registering, flags, the configuration,
      // the first connections) touched most of the program's text: the
      // rounds' own code is mapped again as they run.
      if (release) common::ReleaseStartupCode();
      lock.lock();
      continue;
    }
    Clock::TimePoint at =
        std::min({next_resync_, retry_at_, slices_again_at_, trim_at_});
    if (dirty_) at = std::min(at, last_round_ + options_.min_interval);
    if (now >= at) {
      Due due{.resync = now >= next_resync_, .slices = slices_stale_};
      due.slices = due.slices || due.resync;
      if (due.resync) next_resync_ = now + options_.resync;
      dirty_ = false;
      slices_stale_ = false;
      retry_at_ = Clock::TimePoint::max();
      last_round_ = now;
      return due;
    }
    clock_.WaitUntil(wake_, lock, at);
  }
}

void Exporter::Loop() {
  while (const auto due = NextRound()) {
    Status status = Round(*due);
    // A round's answers (10,000 devices are megabytes while parsed) go
    // back to the system: an idle exporter's resident memory is what it
    // keeps, not its last round.
    malloc_trim(0);
    MutexLock lock(mu_);
    trim_at_ = clock_.Now() + kTrimAgain;
    ++stats_.rounds;
    if (status.ok()) {
      backoff_ = milliseconds(0);
      stats_.last_error.clear();
      continue;
    }
    if (stop_) break;
    ++stats_.failed_rounds;
    backoff_ = std::min(kMaxBackoff, std::max(milliseconds(500), backoff_ * 2));
    retry_at_ = clock_.Now() + backoff_;
    if (stats_.last_error != status.message()) {
      LOG(WARNING) << "the NodeResourceTopology of " << options_.node_name
                   << " is not up to date (tried again in " << backoff_.count()
                   << " ms): " << status.message();
    }
    stats_.last_error = std::string(status.message());
  }
}

}  // namespace topology::nrt
