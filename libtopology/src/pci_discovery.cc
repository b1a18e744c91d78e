#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "affinity.h"
#include "kernel_text.h"
#include "pci_path.h"
#include "sysfs_discovery.h"

namespace topology::internal {
namespace {

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// What is known about one directory in a PCI path (a device or a bridge).
struct DirFacts {
  LocalityFacts locality;
  std::optional<PciePortType> port_type;
};

// Reads the attributes of PCI function directories. Every failure other
// than "absent" becomes a warning naming the file.
class FunctionReader {
 public:
  FunctionReader(const SysfsReader& reader, std::vector<std::string>* warnings)
      : reader_(reader), warnings_(warnings) {}

  // The trimmed text of dir/name, or nullopt when absent or unreadable.
  std::optional<std::string> Text(const SysfsDirectory& dir, const char* name) {
    auto text = dir.ReadFile(name);
    if (!text.ok()) {
      if (text.status().code() != StatusCode::kNotFound) {
        warnings_->push_back(text.status().message());
      }
      return std::nullopt;
    }
    return std::string(TrimKernelText(*text));
  }

  std::optional<int64_t> Decimal(const SysfsDirectory& dir, const char* name) {
    auto text = Text(dir, name);
    if (!text) return std::nullopt;
    auto value = ParseDecimal(*text);
    if (!value.ok()) {
      Warn(dir, name, value.status());
      return std::nullopt;
    }
    return *value;
  }

  std::optional<uint64_t> Hex(const SysfsDirectory& dir, const char* name,
                              int bits) {
    auto text = Text(dir, name);
    if (!text) return std::nullopt;
    auto value = ParseHex(*text, bits);
    if (!value.ok()) {
      Warn(dir, name, value.status());
      return std::nullopt;
    }
    return *value;
  }

  std::optional<std::string> LinkName(const SysfsDirectory& dir,
                                      const char* name) {
    auto target = dir.ReadLink(name);
    if (!target.ok()) return std::nullopt;
    return std::string(Basename(*target));
  }

  LocalityFacts Locality(const SysfsDirectory& dir) {
    LocalityFacts facts;
    if (auto node = Decimal(dir, "numa_node")) {
      if (*node < -1 || *node >= CpuSet::kMaxCpus) {
        Warn(dir, "numa_node",
             InvalidArgumentError("node id " + std::to_string(*node) +
                                  " out of range; ignored"));
      } else {
        facts.numa_node = static_cast<int>(*node);
      }
    }
    if (auto list = Text(dir, "local_cpulist")) {
      auto cpus = CpuSet::ParseList(*list);
      if (cpus.ok()) {
        facts.local_cpus = std::move(*cpus);
      } else {
        Warn(dir, "local_cpulist", cpus.status());
      }
    }
    if (!facts.local_cpus) {
      if (auto mask = Text(dir, "local_cpus")) {
        auto cpus = CpuSet::ParseMask(*mask);
        if (cpus.ok()) {
          facts.local_cpus = std::move(*cpus);
        } else {
          Warn(dir, "local_cpus", cpus.status());
        }
      }
    }
    return facts;
  }

  std::optional<PciePortType> PortType(const SysfsDirectory& dir) {
    auto config = dir.ReadFile("config");
    if (!config.ok()) return std::nullopt;
    return ParsePciePortType(*config);
  }

  void Identity(const SysfsDirectory& dir, PciDevice* device) {
    device->class_code =
        static_cast<uint32_t>(Hex(dir, "class", 24).value_or(0));
    device->vendor_id =
        static_cast<uint16_t>(Hex(dir, "vendor", 16).value_or(0));
    device->device_id =
        static_cast<uint16_t>(Hex(dir, "device", 16).value_or(0));
    device->subsystem_vendor_id =
        static_cast<uint16_t>(Hex(dir, "subsystem_vendor", 16).value_or(0));
    device->subsystem_device_id =
        static_cast<uint16_t>(Hex(dir, "subsystem_device", 16).value_or(0));
    device->revision =
        static_cast<uint8_t>(Hex(dir, "revision", 8).value_or(0));
  }

  void Warn(const SysfsDirectory& dir, const char* name, const Status& status) {
    warnings_->push_back(reader_.Describe(dir.path() + "/" + name) + ": " +
                         status.message());
  }

 private:
  const SysfsReader& reader_;
  std::vector<std::string>* warnings_;
};

}  // namespace

StatusOr<std::vector<PciDevice>> ReadPciDevices(
    const SysfsReader& reader, const std::vector<std::string>& entries,
    bool read_identity, const std::vector<NumaNode>& nodes,
    std::vector<std::string>* warnings) {
  FunctionReader files(reader, warnings);
  // Bridges are shared by many devices (every VF of a PF): read each once.
  std::unordered_map<std::string, DirFacts> bridge_cache;
  const auto bridge_facts = [&](const std::string& path) -> const DirFacts& {
    auto it = bridge_cache.find(path);
    if (it == bridge_cache.end()) {
      DirFacts facts;
      if (auto dir = reader.OpenDirectory(path); dir.ok()) {
        facts.locality = files.Locality(**dir);
        facts.port_type = files.PortType(**dir);
      }
      it = bridge_cache.emplace(path, std::move(facts)).first;
    }
    return it->second;
  };

  const AffinityResolver resolver(nodes);
  std::vector<PciDevice> devices;
  devices.reserve(entries.size());
  for (const std::string& name : entries) {
    auto address = PciAddress::Parse(name);
    if (!address.ok()) {
      warnings->push_back(reader.Describe("bus/pci/devices/" + name) +
                          ": not a PCI address; skipped");
      continue;
    }
    auto opened = reader.OpenDirectory("bus/pci/devices/" + name);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kUnavailable) {
        return opened.status();
      }
      warnings->push_back(opened.status().message() + "; device skipped");
      continue;
    }
    const SysfsDirectory& dir = **opened;
    PciDevice device;
    device.address = *address;
    if (read_identity) files.Identity(dir, &device);

    const LocalityFacts locality = files.Locality(dir);
    device.sysfs_numa_node = locality.numa_node;
    device.local_cpus = locality.local_cpus;
    device.driver = files.LinkName(dir, "driver");
    if (auto group = files.LinkName(dir, "iommu_group")) {
      if (auto id = ParseDecimal(*group);
          id.ok() && *id >= 0 && *id <= 0x7fffffff) {
        device.iommu_group = static_cast<int>(*id);
      }
    }
    if (auto pf = files.LinkName(dir, "physfn")) {
      if (auto pf_address = PciAddress::Parse(*pf); pf_address.ok()) {
        device.physfn = *pf_address;
      }
    }
    // A VF has no SR-IOV capability of its own: only other functions are
    // asked for one (one failed open less per VF).
    if (auto total = device.physfn ? std::nullopt
                                   : files.Decimal(dir, "sriov_totalvfs")) {
      device.sriov_totalvfs =
          static_cast<int>(std::clamp<int64_t>(*total, 0, 1 << 16));
      if (auto num = files.Decimal(dir, "sriov_numvfs")) {
        device.sriov_numvfs =
            static_cast<int>(std::clamp<int64_t>(*num, 0, 1 << 16));
      }
    }
    device.link.current_speed =
        files.Text(dir, "current_link_speed").value_or("");
    device.link.max_speed = files.Text(dir, "max_link_speed").value_or("");
    device.link.current_width = static_cast<int>(std::clamp<int64_t>(
        files.Decimal(dir, "current_link_width").value_or(0), 0, 64));
    device.link.max_width = static_cast<int>(std::clamp<int64_t>(
        files.Decimal(dir, "max_link_width").value_or(0), 0, 64));

    const PciPath path = ParsePciPath(dir.path());
    device.host_bridge = path.host_bridge;
    std::vector<std::optional<PciePortType>> port_types;
    std::vector<LocalityFacts> bridges_nearest_first;
    for (const std::string& bridge_dir : path.bridge_dirs) {
      port_types.push_back(bridge_facts(bridge_dir).port_type);
    }
    const std::vector<bool> upstream = MarkSwitchUpstreamPorts(port_types);
    for (size_t i = path.bridges_root_first.size(); i-- > 0;) {
      device.upstream_bridges.push_back(path.bridges_root_first[i]);
      device.upstream_is_switch.push_back(upstream[i]);
      bridges_nearest_first.push_back(
          bridge_facts(path.bridge_dirs[i]).locality);
    }
    Affinity affinity = resolver.Resolve(locality, bridges_nearest_first);
    device.numa_nodes = std::move(affinity.nodes);
    device.numa_source = affinity.source;
    device.conflicts = std::move(affinity.conflicts);
    devices.push_back(std::move(device));
  }

  // A PF's VFs, from the VFs' physfn links (in address order, which is the
  // VF index order: VF routing ids grow by the PF's VF stride).
  std::map<PciAddress, size_t> index_of;
  for (size_t i = 0; i < devices.size(); ++i) index_of[devices[i].address] = i;
  for (const auto& [address, i] : index_of) {
    if (!devices[i].physfn) continue;
    if (auto pf = index_of.find(*devices[i].physfn); pf != index_of.end()) {
      devices[pf->second].virtfns.push_back(address);
    }
  }
  return devices;
}

}  // namespace topology::internal

namespace topology::internal {

void ReadPciIdentity(const SysfsReader& reader, std::vector<PciDevice>* devices,
                     std::vector<std::string>* warnings) {
  FunctionReader files(reader, warnings);
  for (PciDevice& device : *devices) {
    auto dir =
        reader.OpenDirectory("bus/pci/devices/" + device.address.ToString());
    if (dir.ok()) files.Identity(**dir, &device);
  }
}

void ApplyLibpciIdentity(const std::vector<LibpciIdentity>& identities,
                         std::vector<PciDevice>* devices) {
  std::map<PciAddress, const LibpciIdentity*> identity_of;
  for (const LibpciIdentity& id : identities) identity_of[id.address] = &id;
  for (PciDevice& device : *devices) {
    const auto it = identity_of.find(device.address);
    if (it == identity_of.end()) continue;
    const LibpciIdentity& id = *it->second;
    device.class_code = id.class_code;
    device.vendor_id = id.vendor_id;
    device.device_id = id.device_id;
    device.subsystem_vendor_id = id.subsystem_vendor_id;
    device.subsystem_device_id = id.subsystem_device_id;
    device.revision = id.revision;
    device.physical_slot = id.physical_slot;
  }
}

}  // namespace topology::internal

namespace topology::internal {
namespace {

// The sysfs classes whose entries hwloc shows as OS devices, with hwloc's
// type for them.
struct OsDeviceClass {
  const char* directory;
  const char* kind;
};
constexpr OsDeviceClass kOsDeviceClasses[] = {
    {"net", "net"},
    {"block", "block"},
    {"infiniband", "openfabrics"},
    {"bxi", "openfabrics"},  // Atos BXI adapters
    {"drm", "gpu"},
    {"dma", "dma"},
    {"ve", "coproc"},  // NEC SX-Aurora Vector Engines
};

// The PCI function a class entry's link leads to: the last path component
// that is a full PCI address ("../../devices/pci0000:00/0000:00:1f.2/host4/
// target4:0:0/4:0:0:0/block/sda" -> 0000:00:1f.2). nullopt for virtual
// devices (lo, loop0) and anything not below a PCI function.
std::optional<PciAddress> FunctionOfLink(std::string_view link) {
  std::optional<PciAddress> last;
  size_t start = 0;
  while (start <= link.size()) {
    size_t end = link.find('/', start);
    if (end == std::string_view::npos) end = link.size();
    const std::string_view part = link.substr(start, end - start);
    // Full addresses only ("DDDD:BB:DD.F"): SCSI ids such as "4:0:0:0" and
    // port services such as "0000:17:00.0:pcie001" are not functions.
    if (std::count(part.begin(), part.end(), ':') == 2 &&
        part.find('.') != std::string_view::npos) {
      if (auto address = PciAddress::Parse(part); address.ok()) last = *address;
    }
    start = end + 1;
  }
  return last;
}

// The component before the last one ("block" in ".../block/sda").
std::string_view ParentComponent(std::string_view link) {
  const size_t last = link.rfind('/');
  if (last == std::string_view::npos) return {};
  const size_t before = link.rfind('/', last - (last > 0 ? 1 : 0));
  const size_t from = before == std::string_view::npos ? 0 : before + 1;
  return link.substr(from, last - from);
}

bool IsDrmNode(std::string_view name) {
  // card0, renderD128, controlD64; not connectors (card0-DP-1) or "version".
  for (std::string_view prefix : {"card", "renderD", "controlD"}) {
    if (name.starts_with(prefix) && name.size() > prefix.size() &&
        name.find('-') == std::string_view::npos) {
      return std::all_of(name.begin() + static_cast<int64_t>(prefix.size()),
                         name.end(),
                         [](char c) { return c >= '0' && c <= '9'; });
    }
  }
  return false;
}

}  // namespace

void ReadOsDevices(const SysfsReader& reader, std::vector<PciDevice>* devices) {
  std::map<PciAddress, PciDevice*> by_address;
  for (PciDevice& device : *devices) by_address[device.address] = &device;
  for (const OsDeviceClass& cls : kOsDeviceClasses) {
    const std::string dir = std::string("class/") + cls.directory;
    auto entries = reader.ListDirectory(dir);
    if (!entries.ok()) continue;  // the class does not exist on this kernel
    const std::set<std::string_view> names(entries->begin(), entries->end());
    for (const std::string& entry : *entries) {
      if (std::string_view(cls.directory) == "drm" && !IsDrmNode(entry)) {
        continue;
      }
      auto link = reader.ReadLink(dir + "/" + entry);
      if (!link.ok()) continue;  // not a device (drm/version)
      // A partition's link ends in its disk: ".../block/sda/sda1", or
      // ".../nvme0/nvme0n1/nvme0n1p1"; hwloc shows disks only.
      if (std::string_view(cls.directory) == "block" &&
          names.contains(ParentComponent(*link))) {
        continue;
      }
      const auto function = FunctionOfLink(*link);
      if (!function) continue;
      const auto it = by_address.find(*function);
      if (it == by_address.end()) continue;
      it->second->os_devices.push_back(OsDevice{cls.kind, entry});
    }
  }
  for (PciDevice& device : *devices) {
    std::sort(device.os_devices.begin(), device.os_devices.end(),
              [](const OsDevice& a, const OsDevice& b) {
                return std::tie(a.kind, a.name) < std::tie(b.kind, b.name);
              });
  }
}

}  // namespace topology::internal
