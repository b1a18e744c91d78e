#include "topology/discovery.h"

#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "hwloc_support.h"
#include "libpci_scanner.h"
#include "sysfs_discovery.h"

namespace topology {

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

  // Discovery runs on the caller's thread alone: a program's first thread
  // would cost every later allocation and unmapping in it (malloc's and
  // the kernel's single-thread paths), and on a small machine more than the
  // work it could take over (docs/performance.md).
  const bool use_libpci = has_pci && options.use_libpci && root.has_value();

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
      std::optional<internal::LibpciPlan> plan;
      if (libpci_used) plan.emplace(*entries);
      auto functions = internal::ReadPciDevices(
          *reader, *entries, /*read_identity=*/!libpci_used, parts.numa_nodes,
          plan ? &*plan : nullptr, &parts.warnings);
      if (!functions.ok()) return functions.status();
      std::vector<PciDevice>& devices = functions->devices;
      internal::ReadOsDevices(*reader, &devices);
      internal::ReadPhysicalSlots(*reader, &devices);
      if (libpci_used) {
        Status scanned;
        try {
          scanned = internal::ScanWithLibpci(*root, &*plan);
        } catch (const std::exception& e) {  // out of memory
          scanned =
              UnavailableError(std::string("libpci scan failed: ") + e.what());
        }
        // What it read before failing stays true.
        internal::ApplyLibpciIdentity(plan->Read(), &devices);
        if (!scanned.ok()) {
          parts.warnings.push_back(scanned.message() +
                                   "; PCI identity read from sysfs instead");
        }
        // What neither the pass nor libpci read (refused by the check, gone
        // from libpci's scan, or all of it when it failed) and what libpci
        // read as 0 without a word (a
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
