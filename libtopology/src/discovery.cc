#include "topology/discovery.h"

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "helper_thread.h"
#include "hwloc_support.h"
#include "libpci_scanner.h"
#include "sysfs_discovery.h"

namespace topology {
namespace {

// libpci beside the sysfs pass: it loads, scans and then reads each
// function as soon as the pass has found it safe to (internal::LibpciPlan).
// The run is posted to discovery's helper thread and shares its state with
// it. If that thread has not started it by the time the pass is done, the
// caller takes it back and runs it in full (internal::HelperThread); if it
// has, the pass stops it and reads what libpci has not reached itself,
// never waiting for it.
class LibpciRun {
 public:
  LibpciRun() = default;
  LibpciRun(const LibpciRun&) = delete;
  LibpciRun& operator=(const LibpciRun&) = delete;
  ~LibpciRun() {
    if (shared_) shared_->plan.Stop();
    if (job_) job_->TakeBack();
  }

  void Start(internal::HelperThread* helper, const std::filesystem::path& root,
             const std::vector<std::string>& entries) {
    shared_ = std::make_shared<Shared>(root, entries);
    job_ = helper->Post([shared = shared_] { Run(shared.get()); });
  }

  internal::LibpciPlan* plan() { return shared_ ? &shared_->plan : nullptr; }

  // What libpci read, once the pass is done: all of it when it ran here,
  // what it had read by now when it ran on the helper thread.
  StatusOr<std::vector<internal::LibpciIdentity>> Result() {
    if (job_->TakeBack()) {
      shared_->plan.DecideRest();
      Run(shared_.get());
    } else {
      shared_->plan.Stop();
    }
    if (shared_->done.load(std::memory_order_acquire) &&
        !shared_->status.ok()) {
      return shared_->status;
    }
    return shared_->plan.Read();
  }

 private:
  struct Shared {
    Shared(std::filesystem::path root_in, std::vector<std::string> entries_in)
        : root(std::move(root_in)),
          entries(std::move(entries_in)),
          plan(entries) {}
    const std::filesystem::path root;
    const std::vector<std::string> entries;
    internal::LibpciPlan plan;  // refers to `entries`
    Status status;              // set before `done` (release)
    std::atomic<bool> done{false};
  };

  static void Run(Shared* shared) {
    Status status;
    try {
      status = internal::ScanWithLibpci(shared->root, &shared->plan);
    } catch (const std::exception& e) {  // out of memory
      status = UnavailableError(std::string("libpci scan failed: ") + e.what());
    }
    shared->status = std::move(status);
    shared->done.store(true, std::memory_order_release);
  }

  std::shared_ptr<Shared> shared_;
  std::shared_ptr<internal::HelperThread::Job> job_;
};

}  // namespace

StatusOr<Topology> Discover(const DiscoveryOptions& options) {
  std::shared_ptr<const SysfsReader> reader = options.reader;
  if (reader == nullptr) reader = NewHostRootReader(options.host_root);
  const bool has_system = reader->Exists("devices/system");
  const bool has_pci = reader->Exists("bus/pci");
  if (!has_system && !has_pci) {
    return NotFoundError(reader->Describe("") +
                         " is not a sysfs tree (no devices/system, no "
                         "bus/pci)");
  }

  Topology::Parts parts;
  parts.source =
      "host root " + reader->HostRoot().value_or("(in memory)").string();
  const std::optional<std::filesystem::path> root = reader->HostRoot();

  // One helper thread for what runs beside discovery: hwloc's FIFO watchdog
  // (a host root other than "/"), then libpci's run. Started before either
  // is needed, it sleeps until then (internal::HelperThread).
  const bool watch_hwloc = options.use_hwloc && root.has_value() &&
                           has_system && internal::WatchesForFifos(*root);
  const bool use_libpci = has_pci && options.use_libpci && root.has_value();
  std::optional<internal::HelperThread> helper;
  if (watch_hwloc || use_libpci) helper.emplace();

  internal::NumaFacts numa = internal::ReadNumaFacts(*reader, &parts.warnings);

  std::optional<internal::HwlocMachine> machine;
  if (options.use_hwloc && root.has_value() && has_system) {
    auto loaded =
        internal::LoadMachineWithHwloc(*root, helper ? &*helper : nullptr);
    if (loaded.ok()) {
      machine = std::move(*loaded);
      parts.cpus = std::move(machine->cpus);
    } else {
      parts.warnings.push_back(loaded.status().message() +
                               "; CPU topology unknown");
    }
  }
  internal::ReconcileNumaFacts(*reader, machine ? &*machine : nullptr, &numa,
                               &parts.warnings);
  parts.numa_nodes = std::move(numa.nodes);
  parts.distances = std::move(numa.distances);
  if (parts.cpus.empty()) {
    // Without hwloc, the CPUs are still known from the node lists.
    for (const NumaNode& node : parts.numa_nodes) {
      for (int id : node.cpus.Ids()) {
        CpuInfo cpu;
        cpu.id = id;
        cpu.thread_siblings.Add(id);
        parts.cpus.push_back(std::move(cpu));
      }
    }
  }
  for (CpuInfo& cpu : parts.cpus) {
    for (const NumaNode& node : parts.numa_nodes) {
      if (node.cpus.Contains(cpu.id)) {
        cpu.numa_node = node.id;
        break;
      }
    }
  }

  if (has_pci) {
    auto entries = reader->ListDirectory("bus/pci/devices");
    if (!entries.ok() && entries.status().code() == StatusCode::kUnavailable) {
      return entries.status();
    }
    if (!entries.ok()) {
      parts.warnings.push_back(entries.status().message() + "; no PCI devices");
    } else {
      LibpciRun libpci;  // after `helper`, which runs it
      bool libpci_used = use_libpci;
      // libpci's scan calls its error hook on a name it cannot parse (and a
      // jump out of it leaks what it holds): such a tree is not given to it.
      if (std::string bad;
          libpci_used && !internal::LibpciCanScan(*entries, &bad)) {
        libpci_used = false;
        parts.warnings.push_back(reader->Describe("bus/pci/devices/" + bad) +
                                 ": libpci cannot handle this name; PCI "
                                 "identity read from sysfs");
      }
      if (libpci_used) libpci.Start(&*helper, *root, *entries);
      auto functions = internal::ReadPciDevices(
          *reader, *entries, /*read_identity=*/!libpci_used, parts.numa_nodes,
          libpci.plan(), &parts.warnings);
      if (!functions.ok()) return functions.status();
      std::vector<PciDevice>& devices = functions->devices;
      internal::ReadOsDevices(*reader, &devices);
      // Before libpci is waited for: neither needs identity.
      internal::ReadPhysicalSlots(*reader, &devices);
      if (libpci_used) {
        auto identities = libpci.Result();
        if (identities.ok()) {
          internal::ApplyLibpciIdentity(*identities, &devices);
        } else {
          parts.warnings.push_back(identities.status().message() +
                                   "; PCI identity read from sysfs instead");
        }
        // What neither the pass nor libpci read (refused by the check, gone
        // from libpci's scan, not reached when the pass stopped it, or all
        // of it when it failed) and what libpci read as 0 without a word (a
        // malformed id, "0xZZZZ"; no real function has vendor 0) is read by
        // our own parser, which names the file and the text.
        std::vector<size_t> reread;
        for (size_t i = 0; i < devices.size(); ++i) {
          if (functions->identity_of[i] == i && !functions->identity_read[i] &&
              devices[i].vendor_id == 0) {
            reread.push_back(i);
          }
        }
        internal::ReadPciIdentity(*reader, reread, &devices, &parts.warnings);
      }
      internal::ShareIdentity(&*functions);
      parts.pci_devices = std::move(devices);
    }
  }
  return Topology(std::move(parts));
}

}  // namespace topology
