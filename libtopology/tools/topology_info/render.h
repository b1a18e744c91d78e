// Renderers of topology-info: text, JSON (a stable contract) and Graphviz DOT.
#ifndef TOPOLOGY_TOOLS_TOPOLOGY_INFO_RENDER_H_
#define TOPOLOGY_TOOLS_TOPOLOGY_INFO_RENDER_H_

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/dra_attributes.h"
#include "topology/pci_device.h"
#include "topology/status.h"
#include "topology/sysfs_reader.h"
#include "topology/topology.h"

namespace topology::tools {

// Splits "a,b,,c" into its non-empty items.
std::vector<std::string> SplitCommas(const std::string& text);

// Which devices to show. Empty lists match everything.
struct DeviceFilter {
  // Class prefixes as hex digit strings of 2, 4 or 6 digits ("03", "0302").
  std::vector<std::string> classes;
  std::vector<uint16_t> vendors;
  std::vector<uint16_t> devices;

  // Parses the comma-separated flag values; fails with INVALID_ARGUMENT
  // naming the flag and value.
  static StatusOr<DeviceFilter> Parse(const std::string& classes,
                                      const std::string& vendors,
                                      const std::string& devices);
  bool Matches(const PciDevice& device) const;
};

// The JSON document of `topology-info --format json`.
nlohmann::json RenderJson(const Topology& topology, const DeviceFilter& filter);
// The same document as RenderJson(...).dump(2) and a newline, written one
// CPU, node and device at a time: what is held at once is one element,
// not the document (which is several times the topology's size).
// Pieces of text in order, to be written where they go (a program's
// stdout without <iostream>: topology-info).
using TextSink = std::function<void(std::string_view)>;
void WriteJson(const TextSink& write, const Topology& topology,
               const DeviceFilter& filter);
void WriteJson(std::ostream& out, const Topology& topology,
               const DeviceFilter& filter);

// Human-readable report: nodes, distances, CPUs, devices, cost matrix.
std::string RenderText(const Topology& topology, const DeviceFilter& filter);

// The standard DRA attributes (pciBusID, pcieRoot, numaNode) of every
// non-bridge function, as YAML shaped like a ResourceSlice's devices; an
// attribute that cannot be computed is listed under "omitted" with the
// reason, as a DRA driver would leave it out.
std::string RenderDra(const SysfsReader& sysfs, const Topology& topology,
                      const DeviceFilter& filter, dra::NumaAttributeForm form);

// The PCI tree as a Graphviz digraph, devices coloured by NUMA node.
std::string RenderDot(const Topology& topology, const DeviceFilter& filter);

}  // namespace topology::tools

#endif  // TOPOLOGY_TOOLS_TOPOLOGY_INFO_RENDER_H_
