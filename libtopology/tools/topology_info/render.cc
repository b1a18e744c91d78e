#include "render.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <cstdio>
#include <map>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>
#include <string_view>
#include <variant>

#include "topology/cost_model.h"

namespace topology::tools {
namespace {

using nlohmann::json;

// "0x" and `value` in at least `digits` lower-case hex digits, as "0x%0*x"
// prints it (five of these per device in every document).
std::string Hex(uint32_t value, int digits) {
  char hex[8];
  char* const end = std::to_chars(hex, hex + sizeof(hex), value, 16).ptr;
  std::string out = "0x";
  out.append(static_cast<size_t>(std::max<ptrdiff_t>(0, digits - (end - hex))),
             '0');
  out.append(hex, end);
  return out;
}

std::string StripHexPrefix(std::string text) {
  if (text.size() >= 2 && text[0] == '0' &&
      (text[1] == 'x' || text[1] == 'X')) {
    text.erase(0, 2);
  }
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return text;
}

StatusOr<std::vector<uint16_t>> ParseIds(const std::string& flag,
                                         const std::string& text) {
  std::vector<uint16_t> ids;
  for (const std::string& raw : SplitCommas(text)) {
    const std::string digits = StripHexPrefix(raw);
    uint16_t value = 0;
    auto [ptr, ec] = std::from_chars(digits.data(),
                                     digits.data() + digits.size(), value, 16);
    if (digits.empty() || digits.size() > 4 || ec != std::errc() ||
        ptr != digits.data() + digits.size()) {
      return InvalidArgumentError(flag + ": \"" + raw +
                                  "\" is not a 16-bit hex id (e.g. 10de)");
    }
    ids.push_back(value);
  }
  return ids;
}

std::string Gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

std::string JoinInts(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

std::vector<const PciDevice*> Selected(const Topology& topology,
                                       const DeviceFilter& filter) {
  std::vector<const PciDevice*> out;
  for (const PciDevice& d : topology.pci_devices()) {
    if (filter.Matches(d)) out.push_back(&d);
  }
  return out;
}

std::string PadRight(std::string text, size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

}  // namespace

std::vector<std::string> SplitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t from = 0;
  while (from <= text.size()) {
    size_t comma = text.find(',', from);
    if (comma == std::string::npos) comma = text.size();
    if (comma > from) out.push_back(text.substr(from, comma - from));
    from = comma + 1;
  }
  return out;
}

StatusOr<DeviceFilter> DeviceFilter::Parse(const std::string& classes,
                                           const std::string& vendors,
                                           const std::string& devices) {
  DeviceFilter filter;
  for (const std::string& raw : SplitCommas(classes)) {
    const std::string digits = StripHexPrefix(raw);
    const bool hex =
        !digits.empty() &&
        digits.find_first_not_of("0123456789abcdef") == std::string::npos;
    if (!hex ||
        (digits.size() != 2 && digits.size() != 4 && digits.size() != 6)) {
      return InvalidArgumentError(
          "--class: \"" + raw +
          "\" is not a class prefix of 2, 4 or 6 hex digits (e.g. 0302)");
    }
    filter.classes.push_back(digits);
  }
  auto vendor_ids = ParseIds("--vendor", vendors);
  if (!vendor_ids.ok()) return vendor_ids.status();
  filter.vendors = std::move(*vendor_ids);
  auto device_ids = ParseIds("--device", devices);
  if (!device_ids.ok()) return device_ids.status();
  filter.devices = std::move(*device_ids);
  return filter;
}

bool DeviceFilter::Matches(const PciDevice& device) const {
  if (!classes.empty()) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "%06x", device.class_code & 0xffffffU);
    const std::string code = buf;
    if (std::none_of(classes.begin(), classes.end(), [&](const std::string& c) {
          return code.compare(0, c.size(), c) == 0;
        })) {
      return false;
    }
  }
  if (!vendors.empty() && std::find(vendors.begin(), vendors.end(),
                                    device.vendor_id) == vendors.end()) {
    return false;
  }
  if (!devices.empty() && std::find(devices.begin(), devices.end(),
                                    device.device_id) == devices.end()) {
    return false;
  }
  return true;
}

namespace {

json NodeJson(const Topology& topology, const NumaNode& node) {
  json n;
  n["id"] = node.id;
  n["cpus"] = node.cpus.ToList();
  n["memory_bytes"] = node.memory_bytes;
  json hugepages = json::array();
  for (const HugePages& pages : node.hugepages) {
    hugepages.push_back(
        {{"page_size_bytes", pages.page_size_bytes},
         {"total_pages", pages.total_pages},
         {"free_pages",
          pages.free_pages ? json(*pages.free_pages) : json(nullptr)}});
  }
  n["hugepages"] = std::move(hugepages);
  n["near_cpus"] =
      node.has_cpus() ? json(nullptr) : json(node.near_cpus.ToList());
  if (topology.has_distances()) {
    json distances = json::object();
    for (const NumaNode& other : topology.numa_nodes()) {
      distances[std::to_string(other.id)] =
          topology.Distance(node.id, other.id).value_or(0);
    }
    n["distances"] = distances;
  } else {
    n["distances"] = nullptr;
  }
  return n;
}

json CpuJson(const CpuInfo& cpu) {
  json c;
  c["id"] = cpu.id;
  c["package"] = cpu.package_id;
  c["core"] = cpu.core_id;
  c["numa_node"] = cpu.numa_node ? json(*cpu.numa_node) : json(nullptr);
  c["thread_siblings"] = cpu.thread_siblings.ToList();
  c["l3_cache"] = cpu.l3_cache_id >= 0 ? json(cpu.l3_cache_id) : json(nullptr);
  return c;
}

json DeviceJson(const PciDevice& device) {
  const PciDevice* d = &device;
  json j;
  j["address"] = d->address.ToString();
  j["class"] = Hex(d->class_code, 6);
  j["vendor"] = Hex(d->vendor_id, 4);
  j["device"] = Hex(d->device_id, 4);
  j["subsystem_vendor"] = Hex(d->subsystem_vendor_id, 4);
  j["subsystem_device"] = Hex(d->subsystem_device_id, 4);
  j["driver"] = d->driver ? json(*d->driver) : json(nullptr);
  j["sysfs_numa_node"] =
      d->sysfs_numa_node ? json(*d->sysfs_numa_node) : json(nullptr);
  j["numa_nodes"] = d->numa_nodes;
  j["numa_source"] = std::string(NumaSourceName(d->numa_source));
  j["local_cpus"] =
      d->local_cpus ? json(d->local_cpus->ToList()) : json(nullptr);
  json bridges = json::array();
  for (const PciAddress& b : d->upstream_bridges) {
    bridges.push_back(b.ToString());
  }
  j["upstream_bridges"] = bridges;
  j["host_bridge"] =
      d->host_bridge.empty() ? json(nullptr) : json(d->host_bridge);
  j["iommu_group"] = d->iommu_group ? json(*d->iommu_group) : json(nullptr);
  j["physfn"] = d->physfn ? json(d->physfn->ToString()) : json(nullptr);
  j["sriov_totalvfs"] =
      d->sriov_totalvfs ? json(*d->sriov_totalvfs) : json(nullptr);
  j["sriov_numvfs"] = d->sriov_numvfs ? json(*d->sriov_numvfs) : json(nullptr);
  j["virtfns"] = d->virtfns.size();
  j["link"] = {{"current_speed", d->link.current_speed},
               {"current_width", d->link.current_width},
               {"max_speed", d->link.max_speed},
               {"max_width", d->link.max_width}};
  j["conflicts"] = d->conflicts;
  json os_devices = json::array();
  for (const OsDevice& os : d->os_devices) {
    os_devices.push_back({{"kind", os.kind}, {"name", os.name}});
  }
  j["os_devices"] = os_devices;
  return j;
}

// `value` as dump(2) writes it `depth` levels down: every line but the
// first indented by 2 * depth more spaces.
void WriteIndented(const TextSink& write, const json& value, size_t depth) {
  const std::string dumped = value.dump(2);
  const std::string_view text = dumped;
  const std::string indent(2 * depth, ' ');
  size_t from = 0;
  for (size_t at = text.find('\n'); at != std::string_view::npos;
       at = text.find('\n', from)) {
    write(text.substr(from, at + 1 - from));
    write(indent);
    from = at + 1;
  }
  write(text.substr(from));
}

// `"key": [` one element at a time `]`, at depth 1, as dump(2) writes it.
template <typename Items, typename ToJson>
void WriteArray(const TextSink& write, std::string_view key, const Items& items,
                const ToJson& to_json) {
  write("  \"");
  write(key);
  write("\": ");
  bool first = true;
  for (const auto& item : items) {
    write(first ? "[\n    " : ",\n    ");
    first = false;
    WriteIndented(write, to_json(item), 2);
  }
  write(first ? "[]" : "\n  ]");
}

// Appends what dump() writes for the string `text`: printable ASCII as it
// is, anything else through nlohmann's own escaping (which also refuses
// invalid UTF-8 as dump() does).
void AppendString(std::string& out, std::string_view text) {
  const bool plain = std::all_of(text.begin(), text.end(), [](char c) {
    return c >= 0x20 && c < 0x7f && c != '"' && c != '\\';
  });
  if (!plain) {
    out += json(std::string(text)).dump();
    return;
  }
  out += '"';
  out += text;
  out += '"';
}

template <typename Int>
void AppendInt(std::string& out, Int value) {
  char buf[24];
  const auto end = std::to_chars(buf, buf + sizeof(buf), value).ptr;
  out.append(buf, end);
}

template <typename T, typename Append>
void AppendOptional(std::string& out, const std::optional<T>& value,
                    const Append& append) {
  if (value) {
    append(out, *value);
  } else {
    out += "null";
  }
}

// Appends `items` as dump(2) writes an array whose opening bracket is at
// `indent`: "[]", or one element per line two spaces further in.
template <typename Items, typename Append>
void AppendArray(std::string& out, const Items& items, std::string_view indent,
                 const Append& append) {
  if (items.empty()) {
    out += "[]";
    return;
  }
  out += '[';
  bool first = true;
  for (const auto& item : items) {
    out += first ? "\n" : ",\n";
    first = false;
    out += indent;
    out += "  ";
    append(out, item);
  }
  out += '\n';
  out += indent;
  out += ']';
}

// Appends DeviceJson(device).dump(2) as it reads at depth 2 of the
// document, without building the object: the keys in dump()'s (sorted)
// order.
void AppendDevice(std::string& out, const PciDevice& d) {
  constexpr std::string_view kIndent = "      ";  // the keys' depth
  bool first = true;
  const auto key = [&](std::string_view name) {
    out += first ? "{\n" : ",\n";
    first = false;
    out += kIndent;
    out += '"';
    out += name;
    out += "\": ";
  };
  const auto hex = [&](uint32_t value, int digits) {
    AppendString(out, Hex(value, digits));
  };
  const auto string = [](std::string& o, const std::string& text) {
    AppendString(o, text);
  };
  const auto integer = [](std::string& o, int value) { AppendInt(o, value); };
  const auto address = [](std::string& o, const PciAddress& a) {
    AppendString(o, a.ToString());
  };
  key("address");
  address(out, d.address);
  key("class");
  hex(d.class_code, 6);
  key("conflicts");
  AppendArray(out, d.conflicts, kIndent, string);
  key("device");
  hex(d.device_id, 4);
  key("driver");
  AppendOptional(out, d.driver, string);
  key("host_bridge");
  if (d.host_bridge.empty()) {
    out += "null";
  } else {
    AppendString(out, d.host_bridge);
  }
  key("iommu_group");
  AppendOptional(out, d.iommu_group, integer);
  key("link");
  out += "{\n        \"current_speed\": ";
  AppendString(out, d.link.current_speed);
  out += ",\n        \"current_width\": ";
  AppendInt(out, d.link.current_width);
  out += ",\n        \"max_speed\": ";
  AppendString(out, d.link.max_speed);
  out += ",\n        \"max_width\": ";
  AppendInt(out, d.link.max_width);
  out += "\n      }";
  key("local_cpus");
  if (d.local_cpus) {
    AppendString(out, d.local_cpus->ToList());
  } else {
    out += "null";
  }
  key("numa_nodes");
  AppendArray(out, d.numa_nodes, kIndent, integer);
  key("numa_source");
  AppendString(out, NumaSourceName(d.numa_source));
  key("os_devices");
  AppendArray(out, d.os_devices, kIndent,
              [](std::string& o, const OsDevice& os) {
                o += "{\n          \"kind\": ";
                AppendString(o, os.kind);
                o += ",\n          \"name\": ";
                AppendString(o, os.name);
                o += "\n        }";
              });
  key("physfn");
  AppendOptional(out, d.physfn, address);
  key("sriov_numvfs");
  AppendOptional(out, d.sriov_numvfs, integer);
  key("sriov_totalvfs");
  AppendOptional(out, d.sriov_totalvfs, integer);
  key("subsystem_device");
  hex(d.subsystem_device_id, 4);
  key("subsystem_vendor");
  hex(d.subsystem_vendor_id, 4);
  key("sysfs_numa_node");
  AppendOptional(out, d.sysfs_numa_node, integer);
  key("upstream_bridges");
  AppendArray(out, d.upstream_bridges, kIndent, address);
  key("vendor");
  hex(d.vendor_id, 4);
  key("virtfns");
  AppendInt(out, d.virtfns.size());
  out += "\n    }";
}

}  // namespace

json RenderJson(const Topology& topology, const DeviceFilter& filter) {
  json doc;
  doc["source"] = topology.source();
  json nodes = json::array();
  for (const NumaNode& node : topology.numa_nodes()) {
    nodes.push_back(NodeJson(topology, node));
  }
  doc["numa_nodes"] = nodes;
  json cpus = json::array();
  for (const CpuInfo& cpu : topology.cpus()) cpus.push_back(CpuJson(cpu));
  doc["cpus"] = cpus;
  json devices = json::array();
  for (const PciDevice* d : Selected(topology, filter)) {
    devices.push_back(DeviceJson(*d));
  }
  doc["pci_devices"] = devices;
  doc["warnings"] = topology.warnings();
  return doc;
}

void WriteJson(const TextSink& write, const Topology& topology,
               const DeviceFilter& filter) {
  // The keys in the order dump() writes an object's: sorted.
  write("{\n");
  WriteArray(write, "cpus", topology.cpus(), CpuJson);
  write(",\n");
  WriteArray(write, "numa_nodes", topology.numa_nodes(),
             [&](const NumaNode& node) { return NodeJson(topology, node); });
  write(",\n");
  // Devices, the bulk of a large machine, are written straight to text
  // (the same bytes as WriteArray with DeviceJson), a buffer at a time.
  write("  \"pci_devices\": ");
  const std::vector<const PciDevice*> devices = Selected(topology, filter);
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    text += i == 0 ? "[\n    " : ",\n    ";
    AppendDevice(text, *devices[i]);
    if (text.size() >= size_t{64} * 1024) {
      write(text);
      text.clear();
    }
  }
  text += devices.empty() ? "[]" : "\n  ]";
  write(text);
  write(",\n  \"source\": ");
  WriteIndented(write, json(topology.source()), 1);
  write(",\n  \"warnings\": ");
  WriteIndented(write, json(topology.warnings()), 1);
  write("\n}\n");
}

void WriteJson(std::ostream& out, const Topology& topology,
               const DeviceFilter& filter) {
  WriteJson(
      [&](std::string_view text) {
        out.write(text.data(), static_cast<std::streamsize>(text.size()));
      },
      topology, filter);
}

std::string RenderText(const Topology& topology, const DeviceFilter& filter) {
  std::ostringstream out;
  out << "Topology of " << topology.source() << "\n\n";
  out << "NUMA nodes (" << topology.numa_nodes().size() << ")\n";
  out << "  node  memory      cpus\n";
  for (const NumaNode& node : topology.numa_nodes()) {
    out << "  " << PadRight(std::to_string(node.id), 6)
        << PadRight(Gib(node.memory_bytes), 12);
    if (node.has_cpus()) {
      out << node.cpus.ToList() << "\n";
    } else {
      out << "(no CPUs; near "
          << (node.near_cpus.empty() ? "unknown" : node.near_cpus.ToList())
          << ")\n";
    }
  }
  bool any_hugepages = false;
  for (const NumaNode& node : topology.numa_nodes()) {
    any_hugepages = any_hugepages || !node.hugepages.empty();
  }
  if (any_hugepages) {
    out << "\nHuge pages\n  node  size        pages     free\n";
    for (const NumaNode& node : topology.numa_nodes()) {
      for (const HugePages& pages : node.hugepages) {
        out << "  " << PadRight(std::to_string(node.id), 6)
            << PadRight(BinaryQuantity(pages.page_size_bytes), 12)
            << PadRight(std::to_string(pages.total_pages), 10)
            << (pages.free_pages ? std::to_string(*pages.free_pages) : "?")
            << "\n";
      }
    }
  }
  if (topology.has_distances()) {
    out << "\nNUMA distances (SLIT)\n      ";
    for (const NumaNode& to : topology.numa_nodes()) {
      out << PadRight(std::to_string(to.id), 5);
    }
    out << "\n";
    for (const NumaNode& from : topology.numa_nodes()) {
      out << "  " << PadRight(std::to_string(from.id), 4);
      for (const NumaNode& to : topology.numa_nodes()) {
        out << PadRight(
            std::to_string(topology.Distance(from.id, to.id).value_or(0)), 5);
      }
      out << "\n";
    }
  }
  std::set<int> packages;
  std::set<std::pair<int, int>> cores;
  for (const CpuInfo& cpu : topology.cpus()) {
    packages.insert(cpu.package_id);
    cores.insert({cpu.package_id, cpu.core_id});
  }
  out << "\nCPUs: " << topology.cpus().size() << " in " << packages.size()
      << " package(s), " << cores.size() << " core(s)\n";
  // L3 caches: the kubelet's uncore caches where one serves part of a
  // NUMA node (prefer-align-cpus-by-uncorecache).
  std::map<int, CpuSet> l3;
  for (const CpuInfo& cpu : topology.cpus()) {
    if (cpu.l3_cache_id >= 0) l3[cpu.l3_cache_id] = cpu.l3_shared;
  }
  if (!l3.empty()) {
    out << "L3 caches: " << l3.size() << " (";
    const char* separator = "";
    for (const auto& [id, cpus] : l3) {
      out << separator << id << ": CPUs " << cpus.ToList();
      separator = "; ";
    }
    out << ")\n";
  }

  const std::vector<const PciDevice*> selected = Selected(topology, filter);
  out << "\nPCI devices (" << selected.size() << " of "
      << topology.pci_devices().size() << ")\n";
  out << "  address         class     ids          driver        numa    "
         "source      host bridge  upstream bridges\n";
  for (const PciDevice* d : selected) {
    char ids[16];
    std::snprintf(ids, sizeof(ids), "%04x:%04x", d->vendor_id, d->device_id);
    std::string bridges;
    for (const PciAddress& b : d->upstream_bridges) {
      if (!bridges.empty()) bridges += " <- ";
      bridges += b.ToString();
    }
    out << "  " << PadRight(d->address.ToString(), 16)
        << PadRight(Hex(d->class_code, 6).substr(2), 10) << PadRight(ids, 13)
        << PadRight(d->driver.value_or("-"), 14)
        << PadRight(d->numa_nodes.empty() ? "-" : JoinInts(d->numa_nodes), 8)
        << PadRight(std::string(NumaSourceName(d->numa_source)), 12)
        << PadRight(d->host_bridge.empty() ? "-" : d->host_bridge, 13)
        << (bridges.empty() ? "-" : bridges) << "\n";
    if (!d->os_devices.empty()) {
      out << "      os devices:";
      for (const OsDevice& os : d->os_devices) {
        out << " " << os.kind << ":" << os.name;
      }
      out << "\n";
    }
    for (const std::string& conflict : d->conflicts) {
      out << "      conflict: " << conflict << "\n";
    }
  }

  std::vector<size_t> matrix_devices;
  for (size_t i = 0; i < topology.pci_devices().size(); ++i) {
    const PciDevice& d = topology.pci_devices()[i];
    if (!d.is_bridge() && filter.Matches(d)) matrix_devices.push_back(i);
  }
  constexpr size_t kMaxMatrix = 32;
  if (matrix_devices.size() > kMaxMatrix) {
    out << "\nCost matrix omitted: " << matrix_devices.size()
        << " devices selected; narrow with --class, --vendor or --device to "
        << kMaxMatrix << " or fewer.\n";
  } else if (matrix_devices.size() > 1) {
    const CostModel model(topology);
    // Row labels: the address without the common domain 0000, whole
    // otherwise (10000:00:04.0 behind a VMD or Hyper-V bridge).
    std::vector<std::string> labels;
    size_t label_width = 15;
    for (size_t i = 0; i < matrix_devices.size(); ++i) {
      const std::string address =
          topology.pci_devices()[matrix_devices[i]].address.ToString();
      labels.push_back(
          "d" + std::to_string(i) + " " +
          (address.starts_with("0000:") ? address.substr(5) : address));
      label_width = std::max(label_width, labels.back().size() + 2);
    }
    out << "\nDevice cost matrix (level/cost 0..100)\n"
        << PadRight("", label_width);
    for (size_t j = 0; j < matrix_devices.size(); ++j) {
      out << PadRight("d" + std::to_string(j), 9);
    }
    out << PadRight("NUMA", 8) << "CPU affinity\n";
    for (size_t i = 0; i < matrix_devices.size(); ++i) {
      const PciDevice& d = topology.pci_devices()[matrix_devices[i]];
      out << PadRight(labels[i], label_width);
      for (size_t j : matrix_devices) {
        const DeviceCost c = model.BetweenIndexes(matrix_devices[i], j);
        std::string cell = std::string(CostLevelLabel(c.level));
        if (c.level != CostLevel::kSelf) cell += "/" + std::to_string(c.cost);
        if (!c.locality_known) cell += "?";
        out << PadRight(cell, 9);
      }
      // As nvidia-smi topo -m: the CPUs near the device (its local CPUs
      // when they single out part of the machine, else its nodes' CPUs).
      CpuSet near;
      if (d.local_cpus && !d.local_cpus->empty() &&
          !topology.AllCpus().IsSubsetOf(*d.local_cpus)) {
        near = *d.local_cpus;
      } else {
        for (int id : d.numa_nodes) {
          if (const NumaNode* node = topology.FindNumaNode(id)) {
            near = near.Union(node->has_cpus() ? node->cpus : node->near_cpus);
          }
        }
      }
      out << PadRight(d.numa_nodes.empty() ? "-" : JoinInts(d.numa_nodes), 8)
          << (near.empty() ? "-" : near.ToList()) << "\n";
    }
    out << "\nLegend:\n"
           "  X    = same device\n"
           "  BRD  = functions of one device\n"
           "  PIX  = at most one PCIe bridge or switch between them\n"
           "  PXB  = several PCIe switches, no host bridge crossed\n"
           "  PHB  = through a PCIe host bridge (root complex)\n"
           "  NODE = different host bridges of one NUMA node\n"
           "  SYS  = across NUMA nodes (cost grows with the SLIT distance)\n"
           "  ?    = a device's NUMA node is unknown; cost assumed\n";
  }
  if (!topology.warnings().empty()) {
    out << "\nWarnings (" << topology.warnings().size() << ")\n";
    for (const std::string& w : topology.warnings()) out << "  " << w << "\n";
  }
  return out.str();
}

std::string RenderDot(const Topology& topology, const DeviceFilter& filter) {
  static constexpr const char* kPalette[] = {
      "#8dd3c7", "#ffffb3", "#bebada", "#fb8072", "#80b1d3", "#fdb462",
      "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5", "#ffed6f"};
  std::map<int, const char*> colour_of;
  for (const NumaNode& node : topology.numa_nodes()) {
    colour_of[node.id] = kPalette[colour_of.size() % std::size(kPalette)];
  }
  const auto colour = [&](const std::vector<int>& nodes) -> std::string {
    if (nodes.size() != 1) return "#eeeeee";
    return colour_of.count(nodes[0]) ? colour_of[nodes[0]] : "#eeeeee";
  };
  std::ostringstream out;
  out << "digraph pci {\n  rankdir=LR;\n  node [style=filled, "
         "fontname=\"monospace\"];\n";
  out << "  subgraph cluster_legend {\n    label=\"NUMA nodes\";\n";
  for (const auto& [id, c] : colour_of) {
    out << "    \"numa" << id << "\" [label=\"node " << id
        << "\", shape=note, fillcolor=\"" << c << "\"];\n";
  }
  out << "    \"numa_unknown\" [label=\"unknown\", shape=note, "
         "fillcolor=\"#eeeeee\"];\n  }\n";
  std::set<std::string> declared;
  std::set<std::pair<std::string, std::string>> edges;
  const auto declare = [&](const std::string& id, const std::string& label,
                           const std::string& shape, const std::string& fill) {
    if (declared.insert(id).second) {
      out << "  \"" << id << "\" [label=\"" << label << "\", shape=" << shape
          << ", fillcolor=\"" << fill << "\"];\n";
    }
  };
  for (const PciDevice* d : Selected(topology, filter)) {
    char label[96];
    std::snprintf(label, sizeof(label), "%s\\n%06x %04x:%04x",
                  d->address.ToString().c_str(), d->class_code, d->vendor_id,
                  d->device_id);
    declare(d->address.ToString(), label, d->is_bridge() ? "ellipse" : "box",
            colour(d->numa_nodes));
    std::string child = d->address.ToString();
    for (const PciAddress& b : d->upstream_bridges) {
      const PciDevice* bridge = topology.FindDevice(b);
      declare(b.ToString(), b.ToString(), "ellipse",
              bridge ? colour(bridge->numa_nodes) : colour(d->numa_nodes));
      edges.insert({b.ToString(), child});
      child = b.ToString();
    }
    const std::string host = d->host_bridge.empty() ? "host" : d->host_bridge;
    declare(host, host, "house", colour(d->numa_nodes));
    edges.insert({host, child});
  }
  for (const auto& [from, to] : edges) {
    out << "  \"" << from << "\" -> \"" << to << "\";\n";
  }
  out << "}\n";
  return out.str();
}

namespace {

// A YAML double-quoted scalar.
std::string YamlQuoted(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", byte);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

std::string RenderDra(const SysfsReader& sysfs, const Topology& topology,
                      const DeviceFilter& filter, dra::NumaAttributeForm form) {
  std::ostringstream out;
  out << "# Standard DRA device attributes, as "
         "k8s.io/dynamic-resource-allocation/deviceattribute computes them\n";
  out << "devices:";
  bool any = false;
  for (const PciDevice& device : topology.pci_devices()) {
    if (device.is_bridge() || !filter.Matches(device)) continue;
    any = true;
    const std::string id = device.address.ToString();
    const dra::PciAttributes attributes =
        dra::StandardPciAttributes(sysfs, id, form);
    out << "\n- name: " << dra::PciDeviceName(device.address)
        << "\n  attributes:";
    if (attributes.attributes.empty()) out << " {}";
    for (const dra::DeviceAttribute& attribute : attributes.attributes) {
      out << "\n    " << attribute.name << ":\n      ";
      if (const auto* text = std::get_if<std::string>(&attribute.value)) {
        out << "string: " << YamlQuoted(*text);
      } else if (const auto* number = std::get_if<int64_t>(&attribute.value)) {
        out << "int: " << *number;
      } else {
        out << "ints: [";
        const auto& list = std::get<std::vector<int64_t>>(attribute.value);
        for (size_t i = 0; i < list.size(); ++i) {
          out << (i == 0 ? "" : ", ") << list[i];
        }
        out << "]";
      }
    }
    if (!attributes.omitted.empty()) {
      out << "\n  omitted:";
      for (const auto& [name, status] : attributes.omitted) {
        out << "\n    " << name << ": " << YamlQuoted(status.message());
      }
    }
  }
  out << (any ? "\n" : " []\n");
  return out.str();
}

}  // namespace topology::tools
