#include "pci_path.h"

#include <cstdint>

namespace topology::internal {

PciPath ParsePciPath(std::string_view canonical_path) {
  PciPath path;
  std::vector<std::pair<PciAddress, size_t>> pci_components;  // (addr, end)
  size_t pos = 0;
  while (pos < canonical_path.size()) {
    size_t slash = canonical_path.find('/', pos);
    if (slash == std::string_view::npos) slash = canonical_path.size();
    const std::string_view component = canonical_path.substr(pos, slash - pos);
    if (pci_components.empty() && component.size() > 3 &&
        component.starts_with("pci") &&
        component.find(':') != std::string_view::npos) {
      path.host_bridge = std::string(component);
    } else if (auto address = PciAddress::Parse(component); address.ok()) {
      // Only full "domain:bus:dev.fn" names are devices; port-service
      // children ("0000:17:00.0:pcie001") fail to parse and are skipped.
      if (component.find(':') != component.rfind(':')) {
        pci_components.emplace_back(*address, slash);
      }
    }
    pos = slash + 1;
  }
  if (pci_components.empty()) return path;
  pci_components.pop_back();  // the device itself
  for (const auto& [address, end] : pci_components) {
    path.bridges_root_first.push_back(address);
    path.bridge_dirs.emplace_back(canonical_path.substr(0, end));
  }
  return path;
}

std::optional<PciePortType> ParsePciePortType(std::string_view config) {
  const auto byte = [&](size_t offset) -> std::optional<uint8_t> {
    if (offset >= config.size()) return std::nullopt;
    return static_cast<uint8_t>(config[offset]);
  };
  const auto status = byte(0x06);
  if (!status || (*status & 0x10) == 0) return std::nullopt;  // no cap list
  auto ptr = byte(0x34);
  // At most 48 capabilities fit in 256 bytes; the bound stops loops.
  for (int hops = 0; ptr && hops < 48; ++hops) {
    const size_t at = *ptr & 0xfcU;
    if (at < 0x40) return std::nullopt;
    const auto id = byte(at);
    const auto next = byte(at + 1);
    const auto flags = byte(at + 2);
    if (!id || !next || !flags) return std::nullopt;
    if (*id == 0x10) {
      const int type = (*flags >> 4) & 0xf;
      switch (type) {
        case 0:
        case 1:
        case 4:
        case 5:
        case 6:
        case 7:
        case 8:
        case 9:
        case 10:
          return static_cast<PciePortType>(type);
        default:
          return std::nullopt;
      }
    }
    if (*next == 0) return std::nullopt;
    ptr = next;
  }
  return std::nullopt;
}

std::vector<bool> MarkSwitchUpstreamPorts(
    const std::vector<std::optional<PciePortType>>& port_types) {
  const size_t n = port_types.size();
  std::vector<bool> upstream(n, false);
  // Index 0 is the root port (its parent is the host bridge).
  size_t i = 1;
  while (i < n) {
    const auto& type = port_types[i];
    if (type.has_value()) {
      upstream[i] = *type == PciePortType::kUpstreamPort;
      ++i;
      continue;
    }
    if (i + 1 < n && (!port_types[i + 1].has_value() ||
                      *port_types[i + 1] == PciePortType::kDownstreamPort)) {
      upstream[i] = true;
      i += 2;
    } else {
      ++i;
    }
  }
  return upstream;
}

}  // namespace topology::internal
