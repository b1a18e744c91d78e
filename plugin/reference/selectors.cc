#include "selectors.h"

#include <algorithm>
#include <cstdio>
#include <set>
#include <stdexcept>

namespace topology::device_plugin {
namespace {

template <typename T, typename U>
bool AnyOf(const std::vector<T>& list, const U& value) {
  return list.empty() ||
         std::find(list.begin(), list.end(), value) != list.end();
}

std::string ClassHex(uint32_t class_code) {
  char text[8];
  std::snprintf(text, sizeof(text), "%06x", class_code & 0xffffffu);
  return text;
}

}  // namespace

DeviceFacts GatherFacts(const Topology& topology, const PciDevice& device,
                        const SysfsReader& reader) {
  DeviceFacts facts;
  if (!device.physfn) return facts;
  const PciDevice* pf = topology.FindDevice(*device.physfn);
  if (pf != nullptr) {
    auto it = std::find(pf->virtfns.begin(), pf->virtfns.end(), device.address);
    if (it != pf->virtfns.end()) {
      facts.vf_index = static_cast<int>(it - pf->virtfns.begin());
    }
  }
  auto names = reader.ListDirectory("bus/pci/devices/" +
                                    device.physfn->ToString() + "/net");
  if (names.ok()) facts.pf_netdevs = *names;
  return facts;
}

bool Matches(const Selector& selector, const PciDevice& device,
             const DeviceFacts& facts) {
  if (!AnyOf(selector.vendors, device.vendor_id)) return false;
  if (!AnyOf(selector.devices, device.device_id)) return false;
  if (!selector.classes.empty()) {
    const std::string hex = ClassHex(device.class_code);
    if (std::none_of(selector.classes.begin(), selector.classes.end(),
                     [&](const std::string& prefix) {
                       return hex.starts_with(prefix);
                     })) {
      return false;
    }
  }
  if (!selector.drivers.empty() &&
      (!device.driver || !AnyOf(selector.drivers, *device.driver))) {
    return false;
  }
  if (!AnyOf(selector.pci_addresses, device.address)) return false;
  if (!selector.pf_names.empty()) {
    const bool any = std::any_of(
        selector.pf_names.begin(), selector.pf_names.end(),
        [&](const PfNameSelector& pf) {
          if (!AnyOf(facts.pf_netdevs, pf.name) || facts.pf_netdevs.empty()) {
            return false;
          }
          return !pf.vf_range || (facts.vf_index >= pf.vf_range->first &&
                                  facts.vf_index <= pf.vf_range->second);
        });
    if (!any) return false;
  }
  return true;
}

Claims::Claims(std::vector<Entry> entries) : entries_(std::move(entries)) {
  std::stable_sort(
      entries_.begin(), entries_.end(),
      [](const Entry& a, const Entry& b) { return a.first < b.first; });
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const Entry& a, const Entry& b) {
                               return a.first == b.first;
                             }),
                 entries_.end());
  entries_.shrink_to_fit();
}

Claims::const_iterator Claims::find(const PciAddress& address) const {
  auto it = std::lower_bound(
      entries_.begin(), entries_.end(), address,
      [](const Entry& entry, const PciAddress& a) { return entry.first < a; });
  return it != entries_.end() && it->first == address ? it : entries_.end();
}

size_t Claims::at(const PciAddress& address) const {
  auto it = find(address);
  if (it == end()) {
    throw std::out_of_range("no resource claims " + address.ToString());
  }
  return it->second;
}

Claims AssignDevices(const Config& config, const Topology& topology,
                     const SysfsReader& reader, const Claims& previous) {
  std::vector<Claims::Entry> claims;
  for (const PciDevice& device : topology.pci_devices()) {
    if (device.is_bridge()) continue;
    if (auto it = previous.find(device.address); it != previous.end()) {
      claims.emplace_back(device.address, it->second);
      continue;
    }
    const DeviceFacts facts = GatherFacts(topology, device, reader);
    for (size_t r = 0; r < config.resources.size(); ++r) {
      const auto& selectors = config.resources[r].selectors;
      if (std::any_of(
              selectors.begin(), selectors.end(),
              [&](const Selector& s) { return Matches(s, device, facts); })) {
        claims.emplace_back(device.address, r);
        break;
      }
    }
  }
  return Claims(std::move(claims));
}

std::vector<std::string> PfNamesWithoutInterface(const Config& config,
                                                 const Topology& topology) {
  std::set<std::string> interfaces;
  for (const PciDevice& device : topology.pci_devices()) {
    for (const OsDevice& os : device.os_devices) {
      if (os.kind == "net") interfaces.insert(os.name);
    }
  }
  std::string known;
  for (const std::string& name : interfaces) {
    if (known.size() > 200) {
      known += ", ...";
      break;
    }
    known += (known.empty() ? "" : ", ") + name;
  }
  std::vector<std::string> out;
  for (size_t r = 0; r < config.resources.size(); ++r) {
    const auto& selectors = config.resources[r].selectors;
    for (size_t s = 0; s < selectors.size(); ++s) {
      const auto& pf_names = selectors[s].pf_names;
      for (size_t p = 0; p < pf_names.size(); ++p) {
        if (interfaces.contains(pf_names[p].name)) continue;
        out.push_back("resources[" + std::to_string(r) + "].selectors[" +
                      std::to_string(s) + "].pfNames[" + std::to_string(p) +
                      "]: " + pf_names[p].name +
                      " is not a network interface of any PCI function, so "
                      "it matches nothing (there is: " +
                      (known.empty() ? std::string("none") : known) + ")");
      }
    }
  }
  return out;
}

}  // namespace topology::device_plugin
