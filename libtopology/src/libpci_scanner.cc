#include "libpci_scanner.h"

extern "C" {
#include <pci/pci.h>
}

#include <algorithm>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include <dlfcn.h>

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

// Whether a missing file makes libpci's sysfs back-end call the error hook,
// in kLibpciFileNames order.
constexpr bool kLibpciFileMandatory[kLibpciFileCount] = {true, true, true,
                                                         false, false};

// libpci's sysfs back-end formats names as "%04x:%02x:%02x.%d"; an entry
// whose name does not round-trip would be opened under another name.
bool RoundTrips(const std::string& name) {
  auto address = PciAddress::Parse(name);
  return address.ok() && address->ToString() == name &&
         address->domain <= 0x7fffffffU;
}

// What libpci reads is recorded in the plan as it goes: no C++ object with
// a destructor may be created in the frames that libpci can jump out of.
static_assert(std::is_trivially_destructible_v<LibpciIdentity>);

// A function of libpci's list and its index among the plan's entries.
struct Listed {
  size_t index;
  pci_dev* dev;
};

// The index of `name` among the sorted `entries`, or -1.
int64_t IndexOf(const std::vector<std::string>& entries, const char* name) {
  size_t lo = 0;
  size_t hi = entries.size();
  while (lo < hi) {
    const size_t mid = lo + (hi - lo) / 2;
    const int cmp = std::strcmp(entries[mid].c_str(), name);
    if (cmp == 0) return static_cast<int64_t>(mid);
    if (cmp < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return -1;
}

// Records in `plan` what libpci reads; returns false when libpci's error
// hook fired. `listed` has room for as many functions as the plan has
// entries.
bool RunLibpci(const LibpciCalls& pci, const char* sysfs_bus_pci,
               LibpciPlan* plan, Listed* listed) {
  const size_t capacity = plan->entries().size();
  std::jmp_buf target;
  pci_access* volatile access = pci.alloc();
  if (access == nullptr) return false;
  access->error = LibpciError;
  access->warning = LibpciQuiet;
  access->debug = LibpciQuiet;
  access->method = PCI_ACCESS_SYS_BUS_PCI;
  tls_jump_target = &target;
  if (setjmp(target) != 0) {
    tls_jump_target = nullptr;
    pci.cleanup(access);
    return false;
  }
  pci.set_param(access, const_cast<char*>("sysfs.path"),
                const_cast<char*>(sysfs_bus_pci));
  pci.init(access);
  pci.scan_bus(access);
  // Functions libpci found that are among the entries (a name that does
  // not round-trip, or a function that came or went between the two
  // listings, is not), in entry order: what it reads is recorded in plan
  // order.
  size_t n = 0;
  for (pci_dev* dev = access->devices; dev != nullptr && n < capacity;
       dev = dev->next) {
    char name[32];
    std::snprintf(name, sizeof(name), "%04x:%02x:%02x.%d", dev->domain,
                  dev->bus, dev->dev, dev->func);
    const int64_t index = IndexOf(plan->entries(), name);
    if (index >= 0) listed[n++] = Listed{static_cast<size_t>(index), dev};
  }
  std::sort(listed, listed + n,
            [](const Listed& a, const Listed& b) { return a.index < b.index; });
  for (size_t i = 0; i < n; ++i) {
    if (plan->verdict(listed[i].index) != LibpciPlan::Verdict::kIdentity) {
      continue;
    }
    pci_dev* dev = listed[i].dev;
    pci.fill_info(dev, PCI_FILL_IDENT | PCI_FILL_CLASS | PCI_FILL_CLASS_EXT);
    LibpciIdentity id;
    id.address.domain = static_cast<uint32_t>(dev->domain);
    id.address.bus = static_cast<uint8_t>(dev->bus);
    id.address.device = static_cast<uint8_t>(dev->dev);
    id.address.function = static_cast<uint8_t>(dev->func);
    id.class_code = (static_cast<uint32_t>(dev->device_class) << 8) |
                    (static_cast<uint32_t>(dev->prog_if) & 0xffU);
    id.vendor_id = dev->vendor_id;
    id.device_id = dev->device_id;
    id.revision = dev->rev_id;
    plan->Record(id);
  }
  tls_jump_target = nullptr;
  pci.cleanup(access);
  return true;
}

}  // namespace

const char* const kLibpciFileNames[kLibpciFileCount] = {
    "vendor", "device", "class", "revision", "config"};

bool LibpciCanScan(const std::vector<std::string>& entries, std::string* bad) {
  for (const std::string& name : entries) {
    if (name.empty() || name[0] == '.') continue;  // libpci skips these too
    if (!RoundTrips(name)) {
      *bad = name;
      return false;
    }
  }
  return true;
}

bool LibpciFilesSafe(const ListedAs (&files)[kLibpciFileCount],
                     std::string* why) {
  for (size_t i = 0; i < kLibpciFileCount; ++i) {
    if (files[i] == ListedAs::kOther) {
      *why = std::string(kLibpciFileNames[i]) + " is not a regular file";
      return false;
    }
    if (files[i] == ListedAs::kAbsent && kLibpciFileMandatory[i]) {
      *why =
          std::string("libpci would abort on a missing ") + kLibpciFileNames[i];
      return false;
    }
  }
  return true;
}

LibpciPlan::LibpciPlan(const std::vector<std::string>& entries)
    : entries_(entries),
      verdicts_(entries.size(), Verdict::kSkip),
      read_(std::make_unique<LibpciIdentity[]>(entries.size())) {}

Status ScanWithLibpci(const std::filesystem::path& host_root,
                      LibpciPlan* plan) {
  std::string load_error;
  const LibpciCalls* pci = LoadLibpci(&load_error);
  if (pci == nullptr) return UnavailableError(load_error);
  const std::string sysfs = (host_root / "sys" / "bus" / "pci").string();
  std::vector<Listed> listed(plan->entries().size());
  if (!RunLibpci(*pci, sysfs.c_str(), plan, listed.data())) {
    return UnavailableError(std::string("libpci failed: ") + tls_error_message);
  }
  return OkStatus();
}

}  // namespace topology::internal
