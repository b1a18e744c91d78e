#include "topology/discovery.h"

#include <future>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include "hwloc_support.h"
#include "libpci_scanner.h"
#include "sysfs_discovery.h"

namespace topology {
namespace {

// libpci beside the sysfs pass. On a tree of kOwnThreadFrom functions or
// more it runs on a second thread: it loads, scans and then reads each
// function as soon as the pass on the first thread has found it safe to
// (internal::LibpciPlan). Below that it runs on the caller's thread once
// the pass is done: its whole work (load, scan, a few reads per function)
// is then shorter than what a second thread costs here, which is not its
// start alone: the scheduler often queues a new thread behind its creator
// until the creator blocks, and with the other core busy the thread shares
// that core for scheduler slices of milliseconds. However discovery ends,
// the thread is released and joined before the entries it reads go away.
class LibpciRun {
 public:
  static constexpr size_t kOwnThreadFrom = 64;

  LibpciRun() = default;
  LibpciRun(const LibpciRun&) = delete;
  LibpciRun& operator=(const LibpciRun&) = delete;
  ~LibpciRun() {
    if (plan_) plan_->DecideRest();
    if (scan_.valid()) scan_.wait();
  }

  // Plans the run, and starts its thread on a large tree; on failure (no
  // thread to be had, a process at its limits) returns a warning and
  // discovery reads identity itself.
  std::optional<std::string> Start(const std::filesystem::path& root,
                                   const std::vector<std::string>& entries) {
    plan_.emplace(entries);
    root_ = root;
    if (entries.size() < kOwnThreadFrom) return std::nullopt;
    try {
      scan_ = std::async(std::launch::async, [this]() {
        return internal::ScanWithLibpci(root_, *plan_);
      });
    } catch (const std::system_error& e) {
      plan_.reset();
      return std::string("libpci scan not started (") + e.what() +
             "); identity read from sysfs";
    }
    return std::nullopt;
  }

  internal::LibpciPlan* plan() { return plan_ ? &*plan_ : nullptr; }

  StatusOr<std::vector<internal::LibpciIdentity>> Result() {
    plan_->DecideRest();
    if (!scan_.valid()) return internal::ScanWithLibpci(root_, *plan_);
    return scan_.get();
  }

 private:
  std::filesystem::path root_;
  std::optional<internal::LibpciPlan> plan_;
  std::future<StatusOr<std::vector<internal::LibpciIdentity>>> scan_;
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
      if (use_libpci) {
        const auto not_started = libpci.Start(*root, *entries);
        use_libpci = !not_started.has_value();
        if (not_started) parts.warnings.push_back(*not_started);
      }
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
