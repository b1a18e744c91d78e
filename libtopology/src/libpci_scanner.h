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

#include <atomic>
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
// order by the sysfs pass while libpci scans on its own thread, and what
// libpci has read so far. A verdict is stored before the count of decided
// entries passes it (release), and read after the count is seen past it
// (acquire); the same holds for what libpci read and its count.
//
// The pass never waits for a scan that has started. It reads the identity
// of a function itself, relative to the directory it has open, once libpci
// has fallen too far behind (LeftBehind: its thread then gets only a share
// of a busy core); when it is done, it stops the scan (Stop) and takes
// what libpci has read (Read), and discovery reads the rest itself.
class LibpciPlan {
 public:
  enum class Verdict : uint8_t {
    kIdentity,  // class, ids and revision
    kSkip,      // nothing: identity comes from elsewhere
  };

  // `entries`: bus/pci/devices, sorted, as listed; must outlive the plan.
  explicit LibpciPlan(const std::vector<std::string>& entries);

  const std::vector<std::string>& entries() const { return entries_; }

  // Sysfs pass: the verdict for entries()[index]; indices in order.
  void Decide(size_t index, Verdict verdict);
  // Sysfs pass, on every way out: entries not decided get kSkip.
  void DecideRest();
  // Sysfs pass: whether libpci has fallen so far behind entries()[index]
  // that the pass should read that function's identity itself (and decide
  // kSkip): libpci has not passed the entry 32 entries before it, or two
  // wake-ups' worth if more (see the constructor).
  bool LeftBehind(size_t index) const {
    return index >= passed_.load(std::memory_order_relaxed) + lag_limit_;
  }
  // Sysfs pass, when done: libpci reads no further function (the one it is
  // reading may still be recorded, after Read has been taken). Decides the
  // rest.
  void Stop();
  // What libpci has read so far, in plan order.
  std::vector<LibpciIdentity> Read() const;

  // Scanning thread: waits until entries()[index] is decided.
  Verdict Await(size_t index) const;
  // Scanning thread: whether the pass has stopped the scan.
  bool Stopped() const { return stopped_.load(std::memory_order_acquire); }
  // Scanning thread: records one function's identity (at most one per
  // entry).
  void Record(const LibpciIdentity& identity);
  // Scanning thread: it is done with entries()[index] (read or skipped).
  void Passed(size_t index) {
    passed_.store(static_cast<uint32_t>(index + 1), std::memory_order_relaxed);
  }

 private:
  const std::vector<std::string>& entries_;
  // The scanning thread is woken once per `wake_every_` verdicts (and at
  // the end): see the constructor.
  const size_t wake_every_;
  // How far libpci may lag behind the pass: see the constructor.
  const size_t lag_limit_;
  std::unique_ptr<Verdict[]> verdicts_;
  std::atomic<uint32_t> decided_{0};
  std::atomic<bool> stopped_{false};
  std::atomic<uint32_t> passed_{0};
  std::unique_ptr<LibpciIdentity[]> read_;
  std::atomic<uint32_t> read_count_{0};
};

// Scans <host_root>/sys/bus/pci with libpci and records in `plan` the
// functions the plan lets it read, until the plan is stopped. Fails with
// UNAVAILABLE carrying libpci's own message if its error hook fires anyway
// (what was recorded before stays true).
Status ScanWithLibpci(const std::filesystem::path& host_root, LibpciPlan* plan);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_LIBPCI_SCANNER_H_
