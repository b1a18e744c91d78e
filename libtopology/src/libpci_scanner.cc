#include "libpci_scanner.h"

extern "C" {
#include <pci/pci.h>
}

#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <mutex>
#include <string>
#include <type_traits>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

namespace topology::internal {
namespace {

// libpci is loaded on the first scan, not at program start: commands that
// never discover (topology-info --help, topology-manager merge) do not map
// it and the libraries it needs (libz, libudev), about a fifth of an empty
// program's start-up. Its soname has been libpci.so.3 since pciutils 3.0;
// the structures come from the headers it was built against, as when
// linked.
struct LibpciCalls {
  decltype(&::pci_alloc) alloc = nullptr;
  decltype(&::pci_cleanup) cleanup = nullptr;
  decltype(&::pci_set_param) set_param = nullptr;
  decltype(&::pci_init) init = nullptr;
  decltype(&::pci_scan_bus) scan_bus = nullptr;
  decltype(&::pci_fill_info) fill_info = nullptr;
};

constexpr char kLibpciSoname[] = "libpci.so.3";

// Loaded once per process and never unloaded; the error names the library
// or the missing function.
const LibpciCalls* LoadLibpci(std::string* error) {
  static std::string load_error;
  static const LibpciCalls* const kCalls = []() -> const LibpciCalls* {
    void* handle = ::dlopen(kLibpciSoname, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = ::dlerror();
      load_error = std::string("cannot load ") + kLibpciSoname + ": " +
                   (why != nullptr ? why : "unknown error");
      return nullptr;
    }
    static LibpciCalls loaded;
    bool complete = true;
    const auto bind = [&](auto& slot, const char* name) {
      void* symbol = ::dlsym(handle, name);
      if (symbol == nullptr) {
        complete = false;
        load_error = std::string(kLibpciSoname) + " has no " + name;
      }
      // A function pointer from dlsym, as POSIX requires to work.
      slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(symbol);
    };
    bind(loaded.alloc, "pci_alloc");
    bind(loaded.cleanup, "pci_cleanup");
    bind(loaded.set_param, "pci_set_param");
    bind(loaded.init, "pci_init");
    bind(loaded.scan_bus, "pci_scan_bus");
    bind(loaded.fill_info, "pci_fill_info");
    return complete ? &loaded : nullptr;
  }();
  if (kCalls == nullptr) *error = load_error;
  return kCalls;
}

// libpci has no user pointer in its hooks, so the jump target and the
// message live in thread-local storage. Only trivially destructible objects
// are live between setjmp and longjmp, which keeps the jump well defined.
thread_local std::jmp_buf* tls_jump_target = nullptr;
thread_local char tls_error_message[512];

// Never returns: it jumps back to RunLibpci (libpci declares the hook
// noreturn).
extern "C" __attribute__((noreturn)) void LibpciError(char* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(tls_error_message, sizeof(tls_error_message), format, args);
  va_end(args);
  if (tls_jump_target != nullptr) std::longjmp(*tls_jump_target, 1);
  // Unreachable in practice: every libpci call below runs with a target.
  std::abort();
}

extern "C" void LibpciQuiet(char* /*format*/, ...) {}

// The files libpci's sysfs back-end opens for the fields we request, and
// whether a missing one makes it call the error hook.
struct LibpciFile {
  const char* name;
  bool mandatory;
};
constexpr LibpciFile kLibpciFiles[] = {
    {"vendor", true},
    {"device", true},
    {"class", true},
    {"revision", false},
    {"subsystem_vendor", false},
    {"subsystem_device", false},
    {"config", false},
};

// libpci's sysfs back-end formats names as "%04x:%02x:%02x.%d"; an entry
// whose name does not round-trip would be opened under another name.
bool RoundTrips(const std::string& name) {
  auto address = PciAddress::Parse(name);
  return address.ok() && address->ToString() == name &&
         address->domain <= 0x7fffffffU;
}

// Copies plain fields out of libpci's list. No C++ object with a destructor
// may be created in the frames that libpci can jump out of, so results go to
// a caller-owned, pre-sized array of PODs.
struct RawIdentity {
  int domain;
  unsigned bus, dev, func;
  unsigned vendor, device, device_class, prog_if, rev;
  unsigned subsys_vendor, subsys_device;
  char slot[64];
};

// Returns the number of devices written to `out` (at most `capacity`), or -1
// when libpci's error hook fired.
int RunLibpci(const LibpciCalls& pci, const char* sysfs_bus_pci,
              RawIdentity* out, size_t capacity, size_t* total) {
  std::jmp_buf target;
  pci_access* volatile access = pci.alloc();
  if (access == nullptr) return -1;
  access->error = LibpciError;
  access->warning = LibpciQuiet;
  access->debug = LibpciQuiet;
  access->method = PCI_ACCESS_SYS_BUS_PCI;
  tls_jump_target = &target;
  if (setjmp(target) != 0) {
    tls_jump_target = nullptr;
    pci.cleanup(access);
    return -1;
  }
  pci.set_param(access, const_cast<char*>("sysfs.path"),
                const_cast<char*>(sysfs_bus_pci));
  pci.init(access);
  pci.scan_bus(access);
  size_t n = 0;
  size_t seen = 0;
  for (pci_dev* dev = access->devices; dev != nullptr; dev = dev->next) {
    ++seen;
    if (n >= capacity) continue;
    pci.fill_info(dev, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT |
                           PCI_FILL_SUBSYS | PCI_FILL_PHYS_SLOT);
    RawIdentity& r = out[n++];
    r.domain = dev->domain;
    r.bus = dev->bus;
    r.dev = dev->dev;
    r.func = dev->func;
    r.vendor = dev->vendor_id;
    r.device = dev->device_id;
    r.device_class = dev->device_class;
    r.prog_if = dev->prog_if;
    r.rev = dev->rev_id;
    r.subsys_vendor = dev->subsys_vendor_id;
    r.subsys_device = dev->subsys_id;
    r.slot[0] = '\0';
    if (dev->phy_slot != nullptr) {
      std::snprintf(r.slot, sizeof(r.slot), "%s", dev->phy_slot);
    }
  }
  *total = seen;
  tls_jump_target = nullptr;
  pci.cleanup(access);
  return static_cast<int>(n);
}

}  // namespace

Status CheckLibpciCanScan(const std::filesystem::path& host_root,
                          const std::vector<std::string>& entries) {
  const std::string devices = (host_root / "sys/bus/pci/devices").string();
  for (const std::string& name : entries) {
    if (name.empty() || name[0] == '.') continue;  // libpci skips these too
    const std::string dir_path = devices + "/" + name;
    if (!RoundTrips(name)) {
      return FailedPreconditionError("libpci cannot handle entry " + dir_path);
    }
    // One directory read per device gives every entry's type.
    DIR* dir = ::opendir(dir_path.c_str());
    if (dir == nullptr) {
      return FailedPreconditionError("libpci would abort on " + dir_path +
                                     " (cannot list it)");
    }
    bool found[std::size(kLibpciFiles)] = {};
    std::string offender;
    while (const dirent* entry = ::readdir(dir)) {
      for (size_t i = 0; i < std::size(kLibpciFiles); ++i) {
        if (std::strcmp(entry->d_name, kLibpciFiles[i].name) != 0) continue;
        unsigned char type = entry->d_type;
        if (type == DT_UNKNOWN || type == DT_LNK) {
          struct stat st {};
          type = ::fstatat(::dirfd(dir), entry->d_name, &st, 0) == 0 &&
                         S_ISREG(st.st_mode)
                     ? DT_REG
                     : DT_UNKNOWN;
        }
        if (type == DT_REG) {
          found[i] = true;
        } else {
          offender = dir_path + "/" + entry->d_name;
        }
      }
    }
    ::closedir(dir);
    if (!offender.empty()) {
      return FailedPreconditionError(offender + " is not a regular file");
    }
    for (size_t i = 0; i < std::size(kLibpciFiles); ++i) {
      if (kLibpciFiles[i].mandatory && !found[i]) {
        return FailedPreconditionError("libpci would abort on " + dir_path +
                                       "/" + kLibpciFiles[i].name +
                                       " (missing)");
      }
    }
  }
  return OkStatus();
}

StatusOr<std::vector<LibpciIdentity>> ScanWithLibpci(
    const std::filesystem::path& host_root, size_t expected_devices) {
  std::string load_error;
  const LibpciCalls* pci = LoadLibpci(&load_error);
  if (pci == nullptr) return UnavailableError(load_error);
  const std::string sysfs = (host_root / "sys" / "bus" / "pci").string();
  std::vector<RawIdentity> raw(expected_devices + 16);
  size_t total = 0;
  int n = 0;
  // Grow the buffer once should devices appear between listing and scan.
  for (int attempt = 0; attempt < 2; ++attempt) {
    n = RunLibpci(*pci, sysfs.c_str(), raw.data(), raw.size(), &total);
    if (n < 0) {
      return UnavailableError(std::string("libpci failed: ") +
                              tls_error_message);
    }
    if (total <= raw.size()) break;
    raw.resize(total + 64);
  }
  std::vector<LibpciIdentity> out;
  out.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const RawIdentity& r = raw[static_cast<size_t>(i)];
    LibpciIdentity id;
    id.address.domain = static_cast<uint32_t>(r.domain);
    id.address.bus = static_cast<uint8_t>(r.bus);
    id.address.device = static_cast<uint8_t>(r.dev);
    id.address.function = static_cast<uint8_t>(r.func);
    id.class_code = (r.device_class << 8) | (r.prog_if & 0xffU);
    id.vendor_id = static_cast<uint16_t>(r.vendor);
    id.device_id = static_cast<uint16_t>(r.device);
    id.subsystem_vendor_id = static_cast<uint16_t>(r.subsys_vendor);
    id.subsystem_device_id = static_cast<uint16_t>(r.subsys_device);
    id.revision = static_cast<uint8_t>(r.rev);
    if (r.slot[0] != '\0') id.physical_slot = std::string(r.slot);
    out.push_back(std::move(id));
  }
  return out;
}

}  // namespace topology::internal
