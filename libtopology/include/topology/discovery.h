// Discover(): builds a Topology snapshot from a host root (the live system or
// a recorded/generated sysfs tree), and LoadHwlocXml() from an hwloc XML
// export, so a machine one does not have can be inspected and tested.
//
// Discovery degrades rather than fails: an unreadable or malformed file is
// reported in Topology::warnings() (naming the file) and the affected value is
// left unknown. Only a missing tree fails.
//
// Thread safety: Discover() may run concurrently with itself. hwloc takes its
// file-system root from the process environment, so the hwloc step of
// concurrent discoveries is serialised by an internal lock.
#ifndef TOPOLOGY_DISCOVERY_H_
#define TOPOLOGY_DISCOVERY_H_

#include <filesystem>
#include <memory>

#include "topology/export.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"
#include "topology/topology.h"

namespace topology {

struct DiscoveryOptions {
  // Directory below which sys/ is read, with hwloc's fsroot meaning.
  // Default: "/" (the live system).
  std::filesystem::path host_root = "/";

  // Reader for sysfs files. Default: nullptr, meaning a reader rooted at
  // host_root. A reader without a HostRoot() disables libpci and hwloc.
  std::shared_ptr<const SysfsReader> reader = {};

  // Read each PCI function's class, ids and revision with libpci, which runs
  // after the sysfs pass on the calling thread. When libpci cannot read the
  // tree or a function (an entry or a missing file it would abort on),
  // discovery reads those from sysfs and says so in the warnings. Without
  // it, the pass reads the same files itself, relative to each function's
  // open directory: the same identity, without loading libpci or resolving
  // a path from the root per file (docs/performance.md). Default: true.
  bool use_libpci = true;

  // Read the CPU topology (packages, cores, SMT siblings) with hwloc.
  // Default: true.
  bool use_hwloc = true;
};

// Discovers the topology below options.host_root. Fails with NOT_FOUND when
// the tree has no sys/devices/system and no sys/bus/pci (not a sysfs tree).
TOPOLOGY_EXPORT StatusOr<Topology> Discover(const DiscoveryOptions& options);

// Loads an hwloc XML export (format 2.0, `lstopo --of xml --whole-io`).
// Device affinity comes from the CPU-side object each PCI tree is attached to
// (source kLocalCpus, or kUnknown when attached to the whole machine). Fails
// with INVALID_ARGUMENT when hwloc rejects the file.
TOPOLOGY_EXPORT StatusOr<Topology> LoadHwlocXml(
    const std::filesystem::path& file);

}  // namespace topology

#endif  // TOPOLOGY_DISCOVERY_H_
