// LoadHwlocXml(): the hwloc XML front-end of discovery.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <system_error>

#include <hwloc.h>

#include "topology/discovery.h"

#include "affinity.h"
#include "hwloc_support.h"
#include "hwloc_xml_limits.h"
#include "hwloc_xml_v3.h"
#include "kernel_text.h"
#include "pci_path.h"

namespace topology {
namespace {

using internal::CpuSetFromHwloc;

PciAddress AddressOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  PciAddress address;
  address.domain = static_cast<uint32_t>(pci.domain);
  address.bus = pci.bus;
  address.device = pci.dev;
  address.function = pci.func;
  return address;
}

// The kernel gives each CPU exactly one node; hwloc gives nodes attached to
// the same object the same cpuset: GPU and high-bandwidth memory nodes (with
// a subtype) share their package's, and so do the plain nodes of a package
// whose clusters the export does not describe (Cluster-on-Die without
// groups). Memory nodes with a subtype take no CPU that a plain node holds,
// as sysfs gives them none; plain nodes sharing CPUs both keep them, with a
// warning, the rule the sysfs reader applies to nodes that list the same
// CPUs.
std::vector<NumaNode> NodesFromHwloc(hwloc_topology_t topology,
                                     std::vector<std::string>* warnings) {
  std::vector<hwloc_obj_t> objs;
  hwloc_obj_t obj = nullptr;
  while ((obj = hwloc_get_next_obj_by_type(topology, HWLOC_OBJ_NUMANODE,
                                           obj)) != nullptr) {
    objs.push_back(obj);
  }
  std::stable_sort(objs.begin(), objs.end(), [](hwloc_obj_t a, hwloc_obj_t b) {
    const bool a_plain = a->subtype == nullptr;
    const bool b_plain = b->subtype == nullptr;
    if (a_plain != b_plain) return a_plain;
    return a->os_index < b->os_index;
  });
  std::vector<NumaNode> nodes;
  CpuSet taken;  // CPUs of the nodes so far (plain nodes come first)
  for (hwloc_obj_t node_obj : objs) {
    NumaNode node;
    node.id = static_cast<int>(node_obj->os_index);
    const CpuSet cpus = CpuSetFromHwloc(node_obj->cpuset);
    const bool plain = node_obj->subtype == nullptr;
    for (int cpu : cpus.Ids()) {
      if (plain || !taken.Contains(cpu)) node.cpus.Add(cpu);
    }
    taken = taken.Union(node.cpus);
    node.memory_bytes = node_obj->attr->numanode.local_memory;
    node.hugepages = internal::HugePagesFromHwloc(node_obj);
    // A CPU-less node is attached where hwloc found it nearest.
    if (node.cpus.empty()) node.near_cpus = cpus;
    nodes.push_back(std::move(node));
  }
  std::sort(nodes.begin(), nodes.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      if (!nodes[i].cpus.Intersects(nodes[j].cpus)) continue;
      warnings->push_back(
          "nodes " + std::to_string(nodes[i].id) + " and " +
          std::to_string(nodes[j].id) + " both hold CPUs " +
          nodes[i].cpus.Intersection(nodes[j].cpus).ToList() +
          " (the export does not say which is whose); both keep them, "
          "devices near them are placed on both, and each such CPU is "
          "counted on node " +
          std::to_string(nodes[i].id));
    }
  }
  return nodes;
}

std::vector<std::vector<int>> DistancesFromHwloc(
    hwloc_topology_t topology, const std::vector<NumaNode>& nodes,
    std::vector<std::string>* warnings) {
  unsigned count = 1;
  hwloc_distances_s* distances = nullptr;
  if (hwloc_distances_get_by_name(topology, "NUMALatency", &count, &distances,
                                  0) != 0 ||
      count == 0) {
    count = 1;
    if (hwloc_distances_get_by_type(
            topology, HWLOC_OBJ_NUMANODE, &count, &distances,
            HWLOC_DISTANCES_KIND_MEANS_LATENCY, 0) != 0 ||
        count == 0) {
      return {};
    }
  }
  std::map<int, size_t> index_of;
  for (size_t i = 0; i < nodes.size(); ++i) index_of[nodes[i].id] = i;
  std::vector<std::vector<int>> matrix(nodes.size(),
                                       std::vector<int>(nodes.size(), 0));
  size_t filled = 0;
  const unsigned n = distances->nbobjs;
  for (unsigned i = 0; i < n; ++i) {
    for (unsigned j = 0; j < n; ++j) {
      const auto a =
          index_of.find(static_cast<int>(distances->objs[i]->os_index));
      const auto b =
          index_of.find(static_cast<int>(distances->objs[j]->os_index));
      if (a == index_of.end() || b == index_of.end()) continue;
      matrix[a->second][b->second] =
          static_cast<int>(distances->values[i * n + j]);
      ++filled;
    }
  }
  hwloc_distances_release(topology, distances);
  if (filled != nodes.size() * nodes.size()) {
    warnings->push_back(
        "NUMALatency matrix does not cover every NUMA node; "
        "distances dropped");
    return {};
  }
  return matrix;
}

// Fills a device's place in the PCI tree from its hwloc ancestors.
void FillPath(hwloc_obj_t obj, PciDevice* device) {
  std::vector<std::optional<internal::PciePortType>> types;
  std::vector<PciAddress> root_first;
  for (hwloc_obj_t parent = obj->parent;
       parent != nullptr && parent->type == HWLOC_OBJ_BRIDGE;
       parent = parent->parent) {
    const hwloc_obj_attr_u::hwloc_bridge_attr_s& bridge = parent->attr->bridge;
    if (bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      root_first.insert(root_first.begin(), AddressOf(bridge.upstream.pci));
    } else if (bridge.downstream_type == HWLOC_OBJ_BRIDGE_PCI) {
      char name[32];
      std::snprintf(name, sizeof(name), "pci%04x:%02x",
                    bridge.downstream.pci.domain,
                    bridge.downstream.pci.secondary_bus);
      device->host_bridge = name;
    }
  }
  types.resize(root_first.size());
  const std::vector<bool> upstream = internal::MarkSwitchUpstreamPorts(types);
  device->upstream_bridges.assign(root_first.rbegin(), root_first.rend());
  device->upstream_is_switch.assign(upstream.rbegin(), upstream.rend());
}

const char* OsDeviceKind(hwloc_obj_osdev_type_e type) {
  switch (type) {
    case HWLOC_OBJ_OSDEV_BLOCK:
      return "block";
    case HWLOC_OBJ_OSDEV_GPU:
      return "gpu";
    case HWLOC_OBJ_OSDEV_NETWORK:
      return "net";
    case HWLOC_OBJ_OSDEV_OPENFABRICS:
      return "openfabrics";
    case HWLOC_OBJ_OSDEV_DMA:
      return "dma";
    case HWLOC_OBJ_OSDEV_COPROC:
      return "coproc";
  }
  return "other";
}

PciDevice DeviceFromHwloc(hwloc_topology_t topology, hwloc_obj_t obj,
                          const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci,
                          const internal::AffinityResolver& resolver) {
  PciDevice device;
  device.address = AddressOf(pci);
  device.class_code = static_cast<uint32_t>(pci.class_id) << 8;
  device.vendor_id = pci.vendor_id;
  device.device_id = pci.device_id;
  device.subsystem_vendor_id = pci.subvendor_id;
  device.subsystem_device_id = pci.subdevice_id;
  device.revision = pci.revision;
  if (pci.linkspeed > 0) {
    char speed[32];
    std::snprintf(speed, sizeof(speed), "%.2f GB/s",
                  static_cast<double>(pci.linkspeed));
    device.link.current_speed = speed;
  }
  FillPath(obj, &device);
  for (hwloc_obj_t child = obj->io_first_child; child != nullptr;
       child = child->next_sibling) {
    if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == nullptr) continue;
    device.os_devices.push_back(
        OsDevice{OsDeviceKind(child->attr->osdev.type), child->name});
  }
  std::sort(device.os_devices.begin(), device.os_devices.end(),
            [](const OsDevice& a, const OsDevice& b) {
              return a.kind != b.kind ? a.kind < b.kind : a.name < b.name;
            });
  // hwloc attaches each PCI tree to the CPU-side object whose cpuset equals
  // the tree's local_cpus: that cpuset is the tree's locality.
  hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topology, obj);
  internal::LocalityFacts facts;
  if (anchor != nullptr) facts.local_cpus = CpuSetFromHwloc(anchor->cpuset);
  device.local_cpus = facts.local_cpus;
  internal::Affinity affinity = resolver.Resolve(facts, {});
  device.numa_nodes = std::move(affinity.nodes);
  device.numa_source = affinity.source;
  device.conflicts = std::move(affinity.conflicts);
  return device;
}

}  // namespace

StatusOr<Topology> LoadHwlocXml(const std::filesystem::path& file) {
  // Read here rather than by hwloc: the version decides how, and a FIFO or
  // a huge file must not block or exhaust the caller. Exports of the largest
  // machines are a few MiB; the pre-scan below bounds what hwloc does with
  // the rest.
  constexpr std::uintmax_t kMaxXmlBytes = 64ULL << 20;
  std::error_code ec;
  const auto status = std::filesystem::status(file, ec);
  if (ec || !std::filesystem::is_regular_file(status)) {
    return InvalidArgumentError(
        "hwloc XML file " + file.string() +
        (ec ? ": " + ec.message() : std::string(" is not a regular file")));
  }
  const std::uintmax_t size = std::filesystem::file_size(file, ec);
  if (ec || size > kMaxXmlBytes) {
    return InvalidArgumentError(
        "hwloc XML file " + file.string() + ": " +
        (ec ? ec.message()
            : "larger than " + std::to_string(kMaxXmlBytes >> 20) + " MiB"));
  }
  std::string text;
  {
    std::ifstream in(file, std::ios::binary);
    std::ostringstream buffer;
    buffer << in.rdbuf();
    if (!in && !in.eof()) {
      return InvalidArgumentError("cannot read hwloc XML file " +
                                  file.string());
    }
    text = std::move(buffer).str();
  }
  auto version = internal::HwlocXmlVersion(text);
  if (!version.ok()) {
    return InvalidArgumentError(file.string() + ": " +
                                version.status().message());
  }
  const std::string shown = internal::QuoteText(*version);
  if (Status shape = internal::CheckHwlocXmlLimits(text); !shape.ok()) {
    return InvalidArgumentError(file.string() + ": " + shape.message());
  }
  std::vector<std::string> warnings;
  if (version->starts_with("3.")) {
    auto converted = internal::ConvertHwlocXml3To2(text);
    if (!converted.ok()) {
      return InvalidArgumentError(
          file.string() + " is hwloc XML format " + shown +
          " (hwloc 3.x) and could not be converted to format 2.0 (" +
          converted.status().message() +
          "); export a 2.0 file with hwloc 3's lstopo --of xml "
          "--export-xml-flags 2");
    }
    text = std::move(*converted);
    warnings.push_back(file.string() + " is hwloc XML format " + shown +
                       "; read as format 2.0 (what hwloc 3 exports with "
                       "--export-xml-flags 2)");
  } else if (!version->starts_with("1.") && !version->starts_with("2.")) {
    return InvalidArgumentError(
        file.string() + " is hwloc XML format " + shown +
        "; libtopology reads formats 1.x, 2.0 and 3.0 (export 2.0 with "
        "lstopo --of xml, or --export-xml-flags 2 with hwloc 3)");
  }
  internal::HwlocTopology topology;
  if (text.size() > static_cast<size_t>(INT32_MAX) ||
      hwloc_topology_set_xmlbuffer(topology.get(), text.data(),
                                   static_cast<int>(text.size()) + 1) != 0) {
    return InvalidArgumentError("hwloc cannot use XML file " + file.string());
  }
  hwloc_topology_set_io_types_filter(topology.get(),
                                     HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_flags(topology.get(),
                           HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED);
  if (hwloc_topology_load(topology.get()) != 0) {
    return InvalidArgumentError(
        "hwloc cannot load XML file " + file.string() + " (format " + shown +
        "; want an lstopo --of xml export, format 2.0)");
  }
  Topology::Parts parts;
  parts.warnings = std::move(warnings);
  parts.source = "hwloc XML " + file.string();
  parts.numa_nodes = NodesFromHwloc(topology.get(), &parts.warnings);
  parts.distances =
      DistancesFromHwloc(topology.get(), parts.numa_nodes, &parts.warnings);
  parts.cpus = internal::CpusFromHwloc(topology.get());
  for (CpuInfo& cpu : parts.cpus) {
    // The lowest node holding it, as the sysfs reader counts shared CPUs.
    for (const NumaNode& node : parts.numa_nodes) {
      if (node.cpus.Contains(cpu.id)) {
        cpu.numa_node = node.id;
        break;
      }
    }
  }
  const internal::AffinityResolver resolver(parts.numa_nodes);
  hwloc_obj_t obj = nullptr;
  while ((obj = hwloc_get_next_pcidev(topology.get(), obj)) != nullptr) {
    parts.pci_devices.push_back(
        DeviceFromHwloc(topology.get(), obj, obj->attr->pcidev, resolver));
  }
  obj = nullptr;
  while ((obj = hwloc_get_next_bridge(topology.get(), obj)) != nullptr) {
    if (obj->attr->bridge.upstream_type != HWLOC_OBJ_BRIDGE_PCI) continue;
    parts.pci_devices.push_back(DeviceFromHwloc(
        topology.get(), obj, obj->attr->bridge.upstream.pci, resolver));
  }
  return Topology(std::move(parts));
}

}  // namespace topology
