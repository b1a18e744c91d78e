// Enumeration and identity of PCI functions through libpci, pointed at
// <host root>/sys/bus/pci and kept from ending the process.
//
// libpci's error hook is declared no-return and its default calls exit(1),
// e.g. on a device directory without a vendor file, and it opens files
// without O_NONBLOCK, so a FIFO would block it. Two guards keep a linked
// plugin alive: libpci reads a function only after the sysfs pass has
// listed that function's directory and found every file libpci would open
// safe (LibpciFilesSafe), and the error hook jumps back out of libpci should
// anything else go wrong.
#ifndef TOPOLOGY_SRC_LIBPCI_SCANNER_H_
#define TOPOLOGY_SRC_LIBPCI_SCANNER_H_

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "topology/pci_address.h"
#include "topology/status.h"

namespace topology::internal {

struct LibpciIdentity {
  PciAddress address;
  uint32_t class_code = 0;  // 24-bit
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint8_t revision = 0;
};

// The files libpci's sysfs back-end may open for the fields we ask for
// (class, ids and revision; subsystem ids are read by the sysfs pass, which
// has the directory open): vendor, device, class, revision, and config
// for the revision where the kernel has no revision file (before 4.10).
inline constexpr size_t kLibpciFileCount = 5;
extern const char* const kLibpciFileNames[kLibpciFileCount];

// What a listing of a function's directory says about one of those files.
enum class ListedAs { kAbsent, kRegular, kOther };

// Whether libpci's scan can take every entry of bus/pci/devices: it calls
// its error hook on a name it cannot parse, and one that does not print back
// the same would be opened under another name. On refusal, `bad` is the
// entry.
bool LibpciCanScan(const std::vector<std::string>& entries, std::string* bad);

// Whether libpci may read a function whose directory lists `files` (in
// kLibpciFileNames order): the files it must open exist, and none it may
// open is anything but a regular file (a link could lead to a FIFO). On
// refusal, `why` names the file.
bool LibpciFilesSafe(const ListedAs (&files)[kLibpciFileCount],
                     std::string* why);

// What libpci is to do with each entry of bus/pci/devices, decided in entry
// order by the sysfs pass, which lists each function's directory first
// (LibpciFilesSafe), and what libpci then read. libpci runs after the pass,
// on the same thread.
class LibpciPlan {
 public:
  enum class Verdict : uint8_t {
    kIdentity,  // class, ids and revision
    kSkip,      // nothing: identity comes from elsewhere
  };

  // `entries`: bus/pci/devices, sorted, as listed; must outlive the plan.
  // Every entry starts as kSkip.
  explicit LibpciPlan(const std::vector<std::string>& entries);

  const std::vector<std::string>& entries() const { return entries_; }

  // Sysfs pass: the verdict for entries()[index].
  void Decide(size_t index, Verdict verdict) { verdicts_[index] = verdict; }
  Verdict verdict(size_t index) const { return verdicts_[index]; }

  // Scan: records one function's identity (at most one per entry). Room
  // for all of them is made up front: the scan runs in frames libpci's
  // error hook may jump out of.
  void Record(const LibpciIdentity& identity) {
    if (read_count_ < entries_.size()) read_[read_count_++] = identity;
  }
  // What libpci read, in plan order.
  std::vector<LibpciIdentity> Read() const {
    return std::vector<LibpciIdentity>(read_.get(), read_.get() + read_count_);
  }

 private:
  const std::vector<std::string>& entries_;
  std::vector<Verdict> verdicts_;
  std::unique_ptr<LibpciIdentity[]> read_;
  size_t read_count_ = 0;
};

// Scans <host_root>/sys/bus/pci with libpci and records in `plan` the
// functions the plan lets it read. Fails with
// UNAVAILABLE carrying libpci's own message if its error hook fires anyway
// (what was recorded before stays true).
Status ScanWithLibpci(const std::filesystem::path& host_root, LibpciPlan* plan);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_LIBPCI_SCANNER_H_
