#include "topology/discovery.h"

#include <future>
#include <string>
#include <system_error>
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
  internal::NumaFacts numa = internal::ReadNumaFacts(*reader, &parts.warnings);

  const std::optional<std::filesystem::path> root = reader->HostRoot();
  std::optional<internal::HwlocMachine> machine;
  if (options.use_hwloc && root.has_value() && has_system) {
    auto loaded = internal::LoadMachineWithHwloc(*reader, *root);
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
      // libpci scans on a second thread while sysfs is read on this one;
      // identity from libpci is merged afterwards.
      bool use_libpci = options.use_libpci && root.has_value();
      std::future<StatusOr<std::vector<internal::LibpciIdentity>>> scan;
      if (use_libpci) {
        try {
          scan = std::async(
              std::launch::async,
              [&entries,
               &root]() -> StatusOr<std::vector<internal::LibpciIdentity>> {
                Status check = internal::CheckLibpciCanScan(*root, *entries);
                if (!check.ok()) return check;
                return internal::ScanWithLibpci(*root, entries->size());
              });
        } catch (const std::system_error& e) {
          // No thread to be had (a process at its limits): one thread it is.
          use_libpci = false;
          parts.warnings.push_back(std::string("libpci scan not started (") +
                                   e.what() + "); identity read from sysfs");
        }
      }
      auto devices = internal::ReadPciDevices(
          *reader, *entries, /*read_identity=*/!use_libpci, parts.numa_nodes,
          &parts.warnings);
      if (!devices.ok()) {
        if (use_libpci) (void)scan.get();
        return devices.status();
      }
      parts.pci_devices = std::move(*devices);
      internal::ReadOsDevices(*reader, &parts.pci_devices);
      if (use_libpci) {
        auto identities = scan.get();
        if (identities.ok()) {
          internal::ApplyLibpciIdentity(*identities, &parts.pci_devices);
          // libpci reads a malformed id ("0xZZZZ") as 0 without a word;
          // no real function has vendor 0, so those are read again by our
          // own parser, which names the file and the text.
          std::vector<PciDevice> suspicious;
          for (const PciDevice& device : parts.pci_devices) {
            if (device.vendor_id == 0) suspicious.push_back(device);
          }
          if (!suspicious.empty()) {
            internal::ReadPciIdentity(*reader, &suspicious, &parts.warnings);
            for (PciDevice& device : parts.pci_devices) {
              for (const PciDevice& again : suspicious) {
                if (again.address == device.address) device = again;
              }
            }
          }
        } else {
          parts.warnings.push_back(identities.status().message() +
                                   "; PCI identity read from sysfs instead");
          internal::ReadPciIdentity(*reader, &parts.pci_devices,
                                    &parts.warnings);
        }
      }
    }
  }
  return Topology(std::move(parts));
}

}  // namespace topology
