#include "topology/dra_attributes.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topology/cpu_set.h"

namespace topology::dra {
namespace {

bool IsLowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// Go's strconv.Atoi on strings.TrimSpace(text): an optional sign and decimal
// digits, nothing else, within int64.
StatusOr<int64_t> GoAtoi(std::string_view raw) {
  std::string_view text = raw;
  while (!text.empty() && (text.front() == ' ' || text.front() == '\n' ||
                           text.front() == '\t' || text.front() == '\r')) {
    text.remove_prefix(1);
  }
  while (!text.empty() && (text.back() == ' ' || text.back() == '\n' ||
                           text.back() == '\t' || text.back() == '\r')) {
    text.remove_suffix(1);
  }
  std::string_view digits = text;
  if (!digits.empty() && (digits.front() == '+' || digits.front() == '-')) {
    digits.remove_prefix(1);
  }
  const bool all_digits =
      !digits.empty() && std::all_of(digits.begin(), digits.end(), [](char c) {
        return c >= '0' && c <= '9';
      });
  int64_t value = 0;
  if (all_digits) {
    const char* begin = text.data() + (text.front() == '+' ? 1 : 0);
    auto [end, error] =
        std::from_chars(begin, text.data() + text.size(), value);
    if (error == std::errc() && end == text.data() + text.size()) return value;
    if (error == std::errc::result_out_of_range) {
      return OutOfRangeError("strconv.Atoi: parsing \"" + std::string(text) +
                             "\": value out of range");
    }
  }
  return InvalidArgumentError("strconv.Atoi: parsing \"" + std::string(text) +
                              "\": invalid syntax");
}

std::string DevicePath(std::string_view bus_id) {
  return "bus/pci/devices/" + std::string(bus_id);
}

// The physical package of a node's first CPU; nullopt when unknown.
std::optional<int64_t> PackageOfNode(const SysfsReader& sysfs, int node) {
  auto cpulist = sysfs.ReadFile("devices/system/node/node" +
                                std::to_string(node) + "/cpulist");
  if (!cpulist.ok()) return std::nullopt;
  auto cpus = CpuSet::ParseList(*cpulist);
  if (!cpus.ok() || cpus->empty()) return std::nullopt;
  auto package =
      sysfs.ReadFile("devices/system/cpu/cpu" + std::to_string(cpus->Ids()[0]) +
                     "/topology/physical_package_id");
  if (!package.ok()) return std::nullopt;
  auto id = GoAtoi(*package);
  if (!id.ok()) return std::nullopt;
  return *id;
}

// The node itself and the nodes of its package at the smallest distance of
// its SLIT row (column i taken as node i, as the helpers do), sorted.
StatusOr<std::vector<int>> EquidistantNodes(const SysfsReader& sysfs,
                                            int node) {
  auto row = sysfs.ReadFile("devices/system/node/node" + std::to_string(node) +
                            "/distance");
  if (!row.ok()) return row.status();
  std::vector<int64_t> distances;
  std::string_view rest = *row;
  while (true) {
    const size_t start = rest.find_first_not_of(" \t\n\r\v\f");
    if (start == std::string_view::npos) break;
    rest.remove_prefix(start);
    const size_t end = std::min(rest.find_first_of(" \t\n\r\v\f"), rest.size());
    auto value = GoAtoi(rest.substr(0, end));
    if (!value.ok()) return value.status();
    distances.push_back(*value);
    rest.remove_prefix(end);
  }
  if (distances.empty()) {
    return DataLossError("empty distance file for NUMA node " +
                         std::to_string(node));
  }
  if (static_cast<size_t>(node) >= distances.size()) {
    return OutOfRangeError("NUMA node " + std::to_string(node) +
                           " out of range for distance table");
  }
  std::optional<int64_t> nearest;
  for (size_t i = 0; i < distances.size(); ++i) {
    if (static_cast<int>(i) == node) continue;
    if (!nearest || distances[i] < *nearest) nearest = distances[i];
  }
  if (!nearest) return std::vector<int>{node};
  const std::optional<int64_t> package = PackageOfNode(sysfs, node);
  std::vector<int> nodes;
  for (size_t i = 0; i < distances.size(); ++i) {
    const int candidate = static_cast<int>(i);
    if (candidate == node) {
      nodes.push_back(candidate);
      continue;
    }
    if (distances[i] != *nearest) continue;
    if (package) {
      // A candidate of unknown package (CPU-less memory) stays in.
      const std::optional<int64_t> other = PackageOfNode(sysfs, candidate);
      if (other && *other != *package) continue;
    }
    nodes.push_back(candidate);
  }
  std::sort(nodes.begin(), nodes.end());
  return nodes;
}

DeviceAttribute NumaAttribute(const SysfsReader& sysfs, int node,
                              NumaAttributeForm form) {
  if (form == NumaAttributeForm::kScalar) {
    return {kNumaNodeAttribute, int64_t{node}};
  }
  std::vector<int64_t> list = {node};
  auto equidistant = EquidistantNodes(sysfs, node);
  if (equidistant.ok() && equidistant->size() > 1) {
    for (int other : *equidistant) {
      if (other != node) list.push_back(other);
    }
  }
  return {kNumaNodeAttribute, std::move(list)};
}

}  // namespace

Status VerifyPciBusId(std::string_view bus_id) {
  if (bus_id.empty()) return InvalidArgumentError("PCI Bus ID cannot be empty");
  // dddd:bb:dd.f
  const bool ok = bus_id.size() == 12 && bus_id[4] == ':' && bus_id[7] == ':' &&
                  bus_id[10] == '.' &&
                  std::all_of(bus_id.begin(), bus_id.end(), [&](const char& c) {
                    const auto i = static_cast<size_t>(&c - bus_id.data());
                    return i == 4 || i == 7 || i == 10 || IsLowerHex(c);
                  });
  if (!ok) {
    return InvalidArgumentError("invalid PCI Bus ID format: " +
                                std::string(bus_id));
  }
  return OkStatus();
}

StatusOr<DeviceAttribute> PciBusIdAttribute(std::string_view bus_id) {
  if (Status status = VerifyPciBusId(bus_id); !status.ok()) return status;
  return DeviceAttribute{kPciBusIdAttribute, std::string(bus_id)};
}

StatusOr<DeviceAttribute> PcieRootAttribute(const SysfsReader& sysfs,
                                            std::string_view bus_id) {
  if (Status status = VerifyPciBusId(bus_id); !status.ok()) return status;
  const std::string context =
      "failed to resolve PCIe Root Complex for PCI Bus ID " +
      std::string(bus_id) + ": ";
  const std::string link_path = DevicePath(bus_id);
  auto link = sysfs.ReadLink(link_path);
  if (!link.ok()) {
    return Status(link.status().code(),
                  context + "failed to read symlink for PCI Bus ID " +
                      sysfs.Describe(link_path) + ": " +
                      link.status().message());
  }
  // Relative targets are joined to the link's folder and cleaned lexically,
  // as Go's filepath.Join does; absolute ones must lie below the host root.
  namespace fs = std::filesystem;
  const fs::path devices_prefix = "devices/pci";
  std::string target;
  if (fs::path(*link).is_absolute()) {
    const std::optional<fs::path> root = sysfs.HostRoot();
    const fs::path sys = (root ? *root : fs::path("/")) / "sys";
    const fs::path cleaned = fs::path(*link).lexically_normal();
    const fs::path relative = cleaned.lexically_relative(sys);
    target = relative.empty() || *relative.begin() == ".."
                 ? cleaned.string()
                 : relative.generic_string();
  } else {
    target = (fs::path("bus/pci/devices") / *link)
                 .lexically_normal()
                 .generic_string();
  }
  // Go's Clean also drops a trailing slash ("…/0000:17:00.0/"), which
  // lexically_normal keeps as an empty last component.
  while (target.size() > 1 && target.back() == '/') target.pop_back();
  const std::string shown = sysfs.Describe(target);
  if (!target.starts_with(devices_prefix.generic_string())) {
    return FailedPreconditionError(
        context + "symlink target for PCI Bus ID " + std::string(bus_id) +
        " is invalid: it must start with " + sysfs.Describe("devices/pci") +
        ": " + shown);
  }
  const fs::path target_path(target);
  if (target_path.filename() != bus_id) {
    return FailedPreconditionError(
        context + "symlink target for PCI Bus ID " + std::string(bus_id) +
        " is invalid: it must end with " + std::string(bus_id) + ": " + shown);
  }
  // The first folder below devices/.
  auto component = ++target_path.begin();
  return DeviceAttribute{kPcieRootAttribute, component->string()};
}

StatusOr<DeviceAttribute> NumaNodeAttribute(const SysfsReader& sysfs,
                                            std::string_view bus_id,
                                            NumaAttributeForm form) {
  if (Status status = VerifyPciBusId(bus_id); !status.ok()) return status;
  const std::string path = DevicePath(bus_id) + "/numa_node";
  auto text = sysfs.ReadFile(path);
  if (!text.ok()) {
    return Status(text.status().code(),
                  "failed to read NUMA node for PCI Bus ID " +
                      std::string(bus_id) + ": " + text.status().message());
  }
  auto node = GoAtoi(*text);
  if (!node.ok()) {
    return Status(node.status().code(),
                  "failed to read NUMA node for PCI Bus ID " +
                      std::string(bus_id) + ": " + sysfs.Describe(path) + ": " +
                      node.status().message());
  }
  if (*node < 0) {
    return FailedPreconditionError(
        "PCI device " + std::string(bus_id) +
        " has no NUMA affinity (numa_node=" + std::to_string(*node) +
        "); do not publish the numaNode attribute for it");
  }
  if (*node > INT32_MAX) {
    return OutOfRangeError("failed to read NUMA node for PCI Bus ID " +
                           std::string(bus_id) + ": " + sysfs.Describe(path) +
                           ": value out of range");
  }
  return NumaAttribute(sysfs, static_cast<int>(*node), form);
}

StatusOr<DeviceAttribute> NumaNodeAttributeOfNode(const SysfsReader& sysfs,
                                                  int node,
                                                  NumaAttributeForm form) {
  if (node < 0) {
    return InvalidArgumentError(
        "invalid NUMA node " + std::to_string(node) +
        ": do not publish the numaNode attribute for a device with no NUMA "
        "affinity");
  }
  if (node >= kMaxNumaNodes) {
    return InvalidArgumentError("invalid NUMA node " + std::to_string(node) +
                                ": exceeds maximum supported (" +
                                std::to_string(kMaxNumaNodes - 1) + ")");
  }
  return NumaAttribute(sysfs, node, form);
}

PciAttributes StandardPciAttributes(const SysfsReader& sysfs,
                                    std::string_view bus_id,
                                    NumaAttributeForm form) {
  PciAttributes out;
  auto add = [&](const char* name, StatusOr<DeviceAttribute> attribute) {
    if (attribute.ok()) {
      out.attributes.push_back(std::move(*attribute));
    } else {
      out.omitted.emplace_back(name, attribute.status());
    }
  };
  add(kPciBusIdAttribute, PciBusIdAttribute(bus_id));
  add(kPcieRootAttribute, PcieRootAttribute(sysfs, bus_id));
  add(kNumaNodeAttribute, NumaNodeAttribute(sysfs, bus_id, form));
  return out;
}

std::string PciDeviceName(const PciAddress& address) {
  std::string name = "pci-" + address.ToString();
  std::replace(name.begin(), name.end(), ':', '-');
  std::replace(name.begin(), name.end(), '.', '-');
  return name;
}

std::optional<PciAddress> AddressOfPciDeviceName(std::string_view name) {
  // "pci-0000-3b-00-0" -> "0000:3b:00.0"
  if (name.size() != 16 || !name.starts_with("pci-")) return std::nullopt;
  std::string text(name.substr(4));
  if (text[4] != '-' || text[7] != '-' || text[10] != '-') return std::nullopt;
  text[4] = ':';
  text[7] = ':';
  text[10] = '.';
  auto address = PciAddress::Parse(text);
  if (!address.ok() || PciDeviceName(*address) != name) return std::nullopt;
  return *address;
}

}  // namespace topology::dra
