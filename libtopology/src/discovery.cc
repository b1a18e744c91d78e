#include "topology/discovery.h"

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

#include "hwloc_support.h"
#include "libpci_scanner.h"
#include "sysfs_discovery.h"

namespace topology {
namespace {

// libpci beside the sysfs pass: it loads, scans and then reads each
// function as soon as the pass has found it safe to (internal::LibpciPlan).
// The run is offered to a second thread, which claims it when it starts;
// if it has not started by the time the pass is done, the caller claims
// it and runs it itself. A new thread does not always start at once: the
// scheduler often queues it behind its creator until the creator blocks
// (a millisecond or more, as long as discovering a small machine takes),
// and with every other core busy it waits for a time slice there. Whoever
// claims the run finishes it before discovery returns; a thread that starts
// later finds it taken and touches nothing but the shared claim.
class LibpciRun {
 public:
  LibpciRun() = default;
  LibpciRun(const LibpciRun&) = delete;
  LibpciRun& operator=(const LibpciRun&) = delete;
  ~LibpciRun() {
    if (!plan_) return;
    plan_->DecideRest();
    if (!claim_->TryClaim()) claim_->WaitFinished();
  }

  // Plans the run and offers it to a second thread (without one to be had,
  // the caller runs it).
  void Start(const std::filesystem::path& root,
             const std::vector<std::string>& entries) {
    plan_.emplace(entries);
    root_ = root;
    claim_ = std::make_shared<Claim>();
    try {
      std::thread([claim = claim_, this] {
        if (!claim->TryClaim()) return;  // `this` may be gone by now
        Run();
        claim->Finish();
      }).detach();
    } catch (const std::system_error&) {
    }
  }

  internal::LibpciPlan* plan() { return plan_ ? &*plan_ : nullptr; }

  StatusOr<std::vector<internal::LibpciIdentity>> Result() {
    plan_->DecideRest();
    if (claim_->TryClaim()) {
      Run();
      claim_->Finish();
    } else {
      claim_->WaitFinished();
    }
    return std::move(result_);
  }

 private:
  // Who runs libpci, shared with the thread so that it outlives the run.
  class Claim {
   public:
    bool TryClaim() {
      std::lock_guard<std::mutex> lock(mutex_);
      return !std::exchange(claimed_, true);
    }
    void Finish() {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        finished_ = true;
      }
      done_.notify_all();
    }
    void WaitFinished() {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return finished_; });
    }

   private:
    std::mutex mutex_;
    std::condition_variable done_;
    bool claimed_ = false;
    bool finished_ = false;
  };

  void Run() {
    try {
      result_ = internal::ScanWithLibpci(root_, *plan_);
    } catch (const std::exception& e) {  // out of memory
      result_ =
          UnavailableError(std::string("libpci scan failed: ") + e.what());
    }
  }

  std::filesystem::path root_;
  std::optional<internal::LibpciPlan> plan_;
  std::shared_ptr<Claim> claim_;
  StatusOr<std::vector<internal::LibpciIdentity>> result_ =
      UnavailableError("libpci scan did not run");
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

  internal::NumaFacts numa = internal::ReadNumaFacts(*reader, &parts.warnings);

  std::optional<internal::HwlocMachine> machine;
  if (options.use_hwloc && root.has_value() && has_system) {
    auto loaded = internal::LoadMachineWithHwloc(*root);
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
      LibpciRun libpci;
      bool use_libpci = options.use_libpci && root.has_value();
      // libpci's scan calls its error hook on a name it cannot parse (and a
      // jump out of it leaks what it holds): such a tree is not given to it.
      if (std::string bad;
          use_libpci && !internal::LibpciCanScan(*entries, &bad)) {
        use_libpci = false;
        parts.warnings.push_back(reader->Describe("bus/pci/devices/" + bad) +
                                 ": libpci cannot handle this name; PCI "
                                 "identity read from sysfs");
      }
      if (use_libpci) libpci.Start(*root, *entries);
      auto functions = internal::ReadPciDevices(
          *reader, *entries, /*read_identity=*/!use_libpci, parts.numa_nodes,
          libpci.plan(), &parts.warnings);
      if (!functions.ok()) return functions.status();
      std::vector<PciDevice>& devices = functions->devices;
      internal::ReadOsDevices(*reader, &devices);
      // Before libpci is waited for: neither needs identity.
      internal::ReadPhysicalSlots(*reader, &devices);
      if (use_libpci) {
        auto identities = libpci.Result();
        if (identities.ok()) {
          internal::ApplyLibpciIdentity(*identities, &devices);
        } else {
          parts.warnings.push_back(identities.status().message() +
                                   "; PCI identity read from sysfs instead");
        }
        // What libpci did not read (refused by the check, gone from its
        // scan, or all of it when it failed) and what it read as 0 without a
        // word (a malformed id, "0xZZZZ"; no real function has vendor 0) is
        // read by our own parser, which names the file and the text.
        std::vector<size_t> reread;
        for (size_t i = 0; i < devices.size(); ++i) {
          if (functions->identity_of[i] == i && devices[i].vendor_id == 0) {
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
