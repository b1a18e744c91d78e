#include "topology/discovery.h"

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
// The run is posted to discovery's helper thread; if that thread has not
// started it by the time the pass is done, the caller takes it back and
// runs it itself (internal::HelperThread). Either way it is finished before
// discovery returns.
class LibpciRun {
 public:
  LibpciRun() = default;
  LibpciRun(const LibpciRun&) = delete;
  LibpciRun& operator=(const LibpciRun&) = delete;
  ~LibpciRun() {
    if (plan_) plan_->DecideRest();
    if (job_) job_->TakeBack();
  }

  void Start(internal::HelperThread* helper, const std::filesystem::path& root,
             const std::vector<std::string>& entries) {
    plan_.emplace(entries);
    root_ = root;
    job_ = helper->Post([this] { Run(); });
  }

  internal::LibpciPlan* plan() { return plan_ ? &*plan_ : nullptr; }

  StatusOr<std::vector<internal::LibpciIdentity>> Result() {
    plan_->DecideRest();
    if (job_->TakeBack()) Run();
    job_.reset();
    return std::move(result_);
  }

 private:
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
  std::shared_ptr<internal::HelperThread::Job> job_;
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
