#include <algorithm>
#include <array>
#include <bit>
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

// Class, ids, subsystem ids and revision, from another device.
void CopyIdentity(const PciDevice& from, PciDevice* to) {
  to->class_code = from.class_code;
  to->vendor_id = from.vendor_id;
  to->device_id = from.device_id;
  to->subsystem_vendor_id = from.subsystem_vendor_id;
  to->subsystem_device_id = from.subsystem_device_id;
  to->revision = from.revision;
}

std::string_view Basename(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

// What is known about one directory in a PCI path (a device or a bridge).
struct DirFacts {
  LocalityFacts locality;
  std::optional<PciePortType> port_type;
};

// The attributes of a function's directory that discovery may read.
enum Attr : uint8_t {
  kNumaNode,
  kLocalCpulist,
  kLocalCpus,
  kDriver,
  kIommuGroup,
  kSriovTotalvfs,
  kSriovNumvfs,
  kCurrentLinkSpeed,
  kCurrentLinkWidth,
  kMaxLinkSpeed,
  kMaxLinkWidth,
  kVendor,
  kDevice,
  kClass,
  kRevision,
  kSubsystemVendor,
  kSubsystemDevice,
  kConfig,
  kAttrCount,
};
// Each a literal: data() is its NUL-terminated text.
constexpr std::string_view kAttrNames[kAttrCount] = {"numa_node",
                                                     "local_cpulist",
                                                     "local_cpus",
                                                     "driver",
                                                     "iommu_group",
                                                     "sriov_totalvfs",
                                                     "sriov_numvfs",
                                                     "current_link_speed",
                                                     "current_link_width",
                                                     "max_link_speed",
                                                     "max_link_width",
                                                     "vendor",
                                                     "device",
                                                     "class",
                                                     "revision",
                                                     "subsystem_vendor",
                                                     "subsystem_device",
                                                     "config"};
// For each name length, the attributes of that length (a bit per Attr): a
// directory lists some 30 names, and each is compared with the one to three
// attributes of its length only.
static_assert(kAttrCount <= 32);
constexpr auto kAttrsOfLength = [] {
  std::array<uint32_t, 24> of{};
  for (uint8_t a = 0; a < kAttrCount; ++a) {
    of[kAttrNames[a].size()] |= uint32_t{1} << a;
  }
  return of;
}();
// libpci's files (kLibpciFileNames order) among them.
constexpr Attr kLibpciAttrs[kLibpciFileCount] = {kVendor, kDevice, kClass,
                                                 kRevision, kConfig};

// What one listing of a directory says about the attributes: a file it
// does not list is not opened (a failed open saved per absent attribute).
// Without a listing, every attribute may be there.
class Listing {
 public:
  static Listing Of(const SysfsDirectory& dir) {
    Listing listing;
    const Status listed = dir.VisitEntries([&](std::string_view name,
                                               SysfsDirectory::EntryType type) {
      if (name.size() >= kAttrsOfLength.size()) return;
      for (uint32_t of = kAttrsOfLength[name.size()]; of != 0; of &= of - 1) {
        const auto a = static_cast<size_t>(std::countr_zero(of));
        if (name != kAttrNames[a]) continue;
        listing.listed_[a] = true;
        listing.regular_[a] = type == SysfsDirectory::EntryType::kRegular;
        break;
      }
    });
    listing.known_ = listed.ok();
    return listing;
  }

  bool known() const { return known_; }
  bool MayHave(Attr a) const { return !known_ || listed_[a]; }
  ListedAs As(Attr a) const {
    if (!listed_[a]) return ListedAs::kAbsent;
    return regular_[a] ? ListedAs::kRegular : ListedAs::kOther;
  }

 private:
  bool known_ = false;
  bool listed_[kAttrCount] = {};
  bool regular_[kAttrCount] = {};
};

// Reads the attributes of PCI function directories. Every failure other
// than "absent" becomes a warning naming the file.
class FunctionReader {
 public:
  FunctionReader(const SysfsReader& reader, std::vector<std::string>* warnings)
      : reader_(reader), warnings_(warnings) {}

  // The attribute when the listing lets it exist.
  std::optional<std::string> Text(const SysfsDirectory& dir,
                                  const Listing& listing, Attr a) {
    if (!listing.MayHave(a)) return std::nullopt;
    return Text(dir, kAttrNames[a].data());
  }
  std::optional<int64_t> Decimal(const SysfsDirectory& dir,
                                 const Listing& listing, Attr a) {
    if (!listing.MayHave(a)) return std::nullopt;
    return Decimal(dir, kAttrNames[a].data());
  }
  std::optional<uint64_t> Hex(const SysfsDirectory& dir, const Listing& listing,
                              Attr a, int bits) {
    if (!listing.MayHave(a)) return std::nullopt;
    return Hex(dir, kAttrNames[a].data(), bits);
  }
  std::optional<std::string> LinkName(const SysfsDirectory& dir,
                                      const Listing& listing, Attr a) {
    if (!listing.MayHave(a)) return std::nullopt;
    return LinkName(dir, kAttrNames[a].data());
  }

  // The trimmed text of dir/name, or nullopt when absent or unreadable.
  std::optional<std::string> Text(const SysfsDirectory& dir, const char* name) {
    auto text = dir.ReadFileIfPresent(name);
    if (!text.ok()) {
      warnings_->push_back(text.status().message());
      return std::nullopt;
    }
    if (!text->has_value()) return std::nullopt;
    return std::string(TrimKernelText(**text));
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
    auto target = dir.ReadLinkIfPresent(name);
    if (!target.ok() || !target->has_value()) return std::nullopt;
    return std::string(Basename(**target));
  }

  LocalityFacts Locality(const SysfsDirectory& dir,
                         const Listing& listing = Listing()) {
    LocalityFacts facts;
    if (auto node = Decimal(dir, listing, kNumaNode)) {
      if (*node < -1 || *node >= CpuSet::kMaxCpus) {
        Warn(dir, "numa_node",
             InvalidArgumentError("node id " + std::to_string(*node) +
                                  " out of range; ignored"));
      } else {
        facts.numa_node = static_cast<int>(*node);
      }
    }
    if (auto list = Text(dir, listing, kLocalCpulist)) {
      auto cpus = CpuSet::ParseList(*list);
      if (cpus.ok()) {
        facts.local_cpus = std::move(*cpus);
      } else {
        Warn(dir, "local_cpulist", cpus.status());
      }
    }
    if (!facts.local_cpus) {
      if (auto mask = Text(dir, listing, kLocalCpus)) {
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

  // From the first 256 bytes of config space, where the capability list is:
  // as root the file has 4,096, each dword a hardware access.
  std::optional<PciePortType> PortType(const SysfsDirectory& dir) {
    auto config = dir.ReadFilePrefix("config", 256);
    if (!config.ok()) return std::nullopt;
    return ParsePciePortType(*config);
  }

  void Identity(const SysfsDirectory& dir, const Listing& listing,
                PciDevice* device) {
    ClassIdsAndRevision(dir, listing, device);
    SubsystemIds(dir, listing, device);
  }

  // What libpci is asked for: class, ids and revision.
  void ClassIdsAndRevision(const SysfsDirectory& dir, const Listing& listing,
                           PciDevice* device) {
    device->class_code =
        static_cast<uint32_t>(Hex(dir, listing, kClass, 24).value_or(0));
    device->vendor_id =
        static_cast<uint16_t>(Hex(dir, listing, kVendor, 16).value_or(0));
    device->device_id =
        static_cast<uint16_t>(Hex(dir, listing, kDevice, 16).value_or(0));
    device->revision = Revision(dir, listing);
  }

  // The revision file, else (kernels before 4.10) byte 8 of config space,
  // as libpci reads it.
  uint8_t Revision(const SysfsDirectory& dir, const Listing& listing) {
    if (listing.MayHave(kRevision)) {
      const size_t warned = warnings_->size();
      if (auto rev = Hex(dir, kAttrNames[kRevision].data(), 8)) {
        return static_cast<uint8_t>(*rev);
      }
      // There but unreadable or malformed (warned), with or without a
      // listing: not replaced by config space.
      if (warnings_->size() != warned) return 0;
    }
    if (!listing.MayHave(kConfig)) return 0;
    auto config = dir.ReadFilePrefix("config", 12);
    if (!config.ok()) {
      if (config.status().code() != StatusCode::kNotFound) {
        warnings_->push_back(config.status().message());
      }
      return 0;
    }
    if (config->size() <= 8) return 0;  // the kernel gives at least 64
    return static_cast<uint8_t>((*config)[8]);
  }

  // What libpci is not asked for: the pass has the directory open, and a
  // relative open costs half of libpci's from the root through the
  // bus/pci/devices link.
  void SubsystemIds(const SysfsDirectory& dir, const Listing& listing,
                    PciDevice* device) {
    device->subsystem_vendor_id = static_cast<uint16_t>(
        Hex(dir, listing, kSubsystemVendor, 16).value_or(0));
    device->subsystem_device_id = static_cast<uint16_t>(
        Hex(dir, listing, kSubsystemDevice, 16).value_or(0));
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

StatusOr<PciFunctions> ReadPciDevices(const SysfsReader& reader,
                                      const std::vector<std::string>& entries,
                                      bool read_identity,
                                      const std::vector<NumaNode>& nodes,
                                      LibpciPlan* plan,
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
  // Per PF, the device index of its first VF: the one whose identity is read.
  std::map<PciAddress, size_t> first_vf_of;

  const AffinityResolver resolver(nodes);
  // Each function's directory through its link in bus/pci/devices, opened
  // relative to that directory where it can be (SysfsDirectory::OpenEntry).
  const auto devices_dir = reader.OpenDirectory("bus/pci/devices");
  PciFunctions out;
  std::vector<PciDevice>& devices = out.devices;
  devices.reserve(entries.size());
  out.identity_of.reserve(entries.size());
  out.identity_read.reserve(entries.size());
  // Reads one entry; returns libpci's verdict for it, or an error that ends
  // the pass.
  const auto read_entry = [&](size_t index) -> StatusOr<LibpciPlan::Verdict> {
    const std::string& name = entries[index];
    constexpr auto kSkip = LibpciPlan::Verdict::kSkip;
    auto address = PciAddress::Parse(name);
    if (!address.ok()) {
      warnings->push_back(reader.Describe("bus/pci/devices/" + name) +
                          ": not a PCI address; skipped");
      return kSkip;
    }
    auto opened =
        devices_dir.ok()
            ? (*devices_dir)->OpenEntry(name)
            : StatusOr<std::unique_ptr<SysfsDirectory>>(devices_dir.status());
    if (!opened.ok()) opened = reader.OpenDirectory("bus/pci/devices/" + name);
    if (!opened.ok()) {
      if (opened.status().code() == StatusCode::kUnavailable) {
        return opened.status();
      }
      warnings->push_back(opened.status().message() + "; device skipped");
      return kSkip;
    }
    const SysfsDirectory& dir = **opened;
    PciDevice device;
    device.address = *address;
    // A VF first: a VF whose PF already has one read needs no listing and
    // no identity of its own.
    if (auto pf = files.LinkName(dir, "physfn")) {
      if (auto pf_address = PciAddress::Parse(*pf); pf_address.ok()) {
        device.physfn = *pf_address;
      }
    }
    size_t identity_of = devices.size();
    if (device.physfn) {
      identity_of =
          first_vf_of.emplace(*device.physfn, devices.size()).first->second;
    }
    const bool own_identity = identity_of == devices.size();
    // libpci opens its files without O_NONBLOCK and ends the process on a
    // missing one: before it is let read a function, the directory is
    // listed. Else nothing is listed: a listing costs a dozen failed opens
    // (3.3 us against 0.27 on a recording), more than a function has files
    // absent, and each read names what it finds wrong.
    const Listing listing =
        own_identity && plan != nullptr ? Listing::Of(dir) : Listing();

    LibpciPlan::Verdict verdict = kSkip;
    // Identity is read here, with the directory open, unless libpci is to
    // read it.
    const bool identity_here = own_identity && read_identity;
    if (identity_here) {
      files.Identity(dir, listing, &device);
    } else if (own_identity) {
      files.SubsystemIds(dir, listing, &device);
      // libpci opens files without O_NONBLOCK and ends the process on a
      // missing one: it reads only what the listing shows is safe.
      std::string why = "the directory cannot be listed";
      ListedAs libpci_files[kLibpciFileCount];
      for (size_t i = 0; i < kLibpciFileCount; ++i) {
        libpci_files[i] = listing.As(kLibpciAttrs[i]);
      }
      if (listing.known() && LibpciFilesSafe(libpci_files, &why)) {
        verdict = LibpciPlan::Verdict::kIdentity;
      } else {
        warnings->push_back(reader.Describe(dir.path()) + ": " + why +
                            "; identity read without libpci");
      }
    }

    const LocalityFacts locality = files.Locality(dir, listing);
    device.sysfs_numa_node = locality.numa_node;
    device.local_cpus = locality.local_cpus;
    device.driver = files.LinkName(dir, listing, kDriver);
    if (auto group = files.LinkName(dir, listing, kIommuGroup)) {
      if (auto id = ParseDecimal(*group);
          id.ok() && *id >= 0 && *id <= 0x7fffffff) {
        device.iommu_group = static_cast<int>(*id);
      }
    }
    // A VF has no SR-IOV capability of its own: only other functions are
    // asked for one (one failed open less per VF).
    if (auto total = device.physfn
                         ? std::nullopt
                         : files.Decimal(dir, listing, kSriovTotalvfs)) {
      device.sriov_totalvfs =
          static_cast<int>(std::clamp<int64_t>(*total, 0, 1 << 16));
      if (auto num = files.Decimal(dir, listing, kSriovNumvfs)) {
        device.sriov_numvfs =
            static_cast<int>(std::clamp<int64_t>(*num, 0, 1 << 16));
      }
    }
    device.link.current_speed =
        files.Text(dir, listing, kCurrentLinkSpeed).value_or("");
    device.link.max_speed =
        files.Text(dir, listing, kMaxLinkSpeed).value_or("");
    device.link.current_width = static_cast<int>(std::clamp<int64_t>(
        files.Decimal(dir, listing, kCurrentLinkWidth).value_or(0), 0, 64));
    device.link.max_width = static_cast<int>(std::clamp<int64_t>(
        files.Decimal(dir, listing, kMaxLinkWidth).value_or(0), 0, 64));

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
    out.identity_of.push_back(identity_of);
    out.identity_read.push_back(identity_here);
    return verdict;
  };
  for (size_t i = 0; i < entries.size(); ++i) {
    auto verdict = read_entry(i);
    if (!verdict.ok()) return verdict.status();
    if (plan != nullptr) plan->Decide(i, *verdict);
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
  return out;
}

}  // namespace topology::internal

namespace topology::internal {

void ReadPciIdentity(const SysfsReader& reader,
                     const std::vector<size_t>& indices,
                     std::vector<PciDevice>* devices,
                     std::vector<std::string>* warnings) {
  if (indices.empty()) return;
  FunctionReader files(reader, warnings);
  // As the pass opens them: through their links in one open directory.
  // Subsystem ids were read by the pass, and the attributes are read
  // without a listing (an absent one costs a failed open, less than the
  // listing; none of these opens can block).
  auto devices_dir = reader.OpenDirectory("bus/pci/devices");
  for (size_t i : indices) {
    PciDevice& device = (*devices)[i];
    const std::string name = device.address.ToString();
    auto dir =
        devices_dir.ok()
            ? (*devices_dir)->OpenEntry(name)
            : StatusOr<std::unique_ptr<SysfsDirectory>>(devices_dir.status());
    if (!dir.ok()) dir = reader.OpenDirectory("bus/pci/devices/" + name);
    if (dir.ok()) files.ClassIdsAndRevision(**dir, Listing(), &device);
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
    device.revision = id.revision;
  }
}

void ReadPhysicalSlots(const SysfsReader& reader,
                       std::vector<PciDevice>* devices) {
  // The slots directory is opened once and each slot's "address" read
  // relative to it (a tree has dozens of slots, most of them empty).
  auto opened = reader.OpenDirectory("bus/pci/slots");
  if (!opened.ok()) return;  // no hot-plug or slot driver
  const SysfsDirectory& dir = **opened;
  std::vector<std::string> slots;
  const Status listed = dir.VisitEntries(
      [&](std::string_view name, SysfsDirectory::EntryType type) {
        if (type == SysfsDirectory::EntryType::kDirectory ||
            type == SysfsDirectory::EntryType::kLink) {
          slots.emplace_back(name);
        }
      });
  if (listed.code() == StatusCode::kUnimplemented) {
    auto names = reader.ListDirectory("bus/pci/slots");
    if (!names.ok()) return;
    slots = std::move(*names);
  } else if (!listed.ok()) {
    return;
  }
  // Sorted, so that of two slots naming one device the same one wins on
  // every file system.
  std::sort(slots.begin(), slots.end());
  // Each slot's "address" names a device ("0000:3b:00", every function of
  // it); a slot without one (empty until a card is inserted) is skipped.
  // Read with the reader (a FIFO there cannot block), as libpci would.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, std::string> slot_of;
  for (const std::string& slot : slots) {
    auto text = dir.ReadFileIfPresent(slot + "/address");
    if (!text.ok() || !text->has_value()) continue;
    const std::string_view address = TrimKernelText(**text);
    if (std::count(address.begin(), address.end(), ':') != 2) continue;
    auto parsed = PciAddress::Parse(std::string(address) + ".0");
    if (!parsed.ok()) continue;
    slot_of.emplace(std::make_tuple(parsed->domain, uint32_t{parsed->bus},
                                    uint32_t{parsed->device}),
                    slot);
  }
  for (PciDevice& device : *devices) {
    const auto it = slot_of.find(
        std::make_tuple(device.address.domain, uint32_t{device.address.bus},
                        uint32_t{device.address.device}));
    if (it != slot_of.end()) device.physical_slot = it->second;
  }
}

void ShareIdentity(PciFunctions* functions) {
  std::vector<PciDevice>& devices = functions->devices;
  for (size_t i = 0; i < devices.size(); ++i) {
    const size_t from = functions->identity_of[i];
    if (from == i) continue;
    CopyIdentity(devices[from], &devices[i]);
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
