// SysfsReader: the seam through which libtopology reads sysfs.
//
// Paths are relative to the sysfs mount point ("bus/pci/devices",
// "devices/system/node/online"); the reader decides where that is. The real
// reader maps them below <host root>/sys; tests substitute readers that inject
// faults. libpci and hwloc cannot read through this interface, so a reader that
// has a real directory says so through HostRoot() and discovery points both
// libraries at it.
//
// Thread safety: implementations must allow concurrent const calls.
#ifndef TOPOLOGY_SYSFS_READER_H_
#define TOPOLOGY_SYSFS_READER_H_

#include <cstddef>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/export.h"
#include "topology/status.h"

namespace topology {

// A directory of the tree opened once, so that many attributes below it are
// read without resolving the full path each time (a PCI function has a dozen).
// Names are relative paths below it, usually one component ("numa_node";
// "3/address" below bus/pci/slots), of which only the last is refused when
// it is a link. Obtained from
// SysfsReader::OpenDirectory(); must not outlive its reader. One thread at a
// time uses a directory.
class TOPOLOGY_EXPORT SysfsDirectory {
 public:
  // What an entry is, by the listing's word (links are not followed).
  enum class EntryType { kRegular, kDirectory, kLink, kSpecial };

  virtual ~SysfsDirectory();
  // The directory's canonical path relative to the sysfs root.
  virtual const std::string& path() const = 0;
  // As SysfsReader::ReadFile / ReadLink for path() + "/" + name.
  virtual StatusOr<std::string> ReadFile(std::string_view name) const = 0;
  virtual StatusOr<std::string> ReadLink(std::string_view name) const = 0;
  // At most the first `max_bytes` of a file, as ReadFile otherwise. For PCI
  // config space, where every dword read is a hardware access (trapped by
  // the hypervisor in a VM) and the kernel reads only what is asked for.
  // The default reads the whole file and cuts it.
  virtual StatusOr<std::string> ReadFilePrefix(std::string_view name,
                                               std::size_t max_bytes) const;
  // As ReadFile / ReadLink, but an entry that does not exist is an answer
  // (nullopt), not an error, and nothing is built to name it: for the many
  // optional attributes of a PCI function. The defaults map NOT_FOUND.
  virtual StatusOr<std::optional<std::string>> ReadFileIfPresent(
      std::string_view name) const;
  virtual StatusOr<std::optional<std::string>> ReadLinkIfPresent(
      std::string_view name) const;
  // Calls `visit` once per entry (no "." or ".."), unsorted, with its type;
  // an entry the listing gives no type for is looked at without following
  // it. Fails with UNIMPLEMENTED when this directory cannot be listed
  // through its handle (the default; the host-root reader's directories
  // opened without read permission), else like SysfsReader::ListDirectory.
  virtual Status VisitEntries(
      const std::function<void(std::string_view name, EntryType type)>& visit)
      const;
  // Opens the directory that entry `name` is or links to ("0000:00:1f.2"
  // of bus/pci/devices), as SysfsReader::OpenDirectory(path() + "/" + name)
  // would. Fails with UNIMPLEMENTED when this directory cannot do so itself
  // (the default; the host-root reader's when the entry is not a plain
  // kernel link, or the kernel has no openat2): ask the reader then.
  virtual StatusOr<std::unique_ptr<SysfsDirectory>> OpenEntry(
      std::string_view name) const;
};

class TOPOLOGY_EXPORT SysfsReader {
 public:
  // Sysfs attributes are at most a page; anything larger than this is
  // rejected rather than read, so a hostile tree cannot exhaust memory.
  static constexpr std::size_t kMaxFileSize = std::size_t{64} * 1024;

  virtual ~SysfsReader();

  // Returns the contents of a regular file. Fails with NOT_FOUND when it does
  // not exist, FAILED_PRECONDITION when it is not a regular file (a FIFO would
  // block), OUT_OF_RANGE when larger than kMaxFileSize, PERMISSION_DENIED or
  // DATA_LOSS on read errors. Messages name the full path.
  virtual StatusOr<std::string> ReadFile(std::string_view path) const = 0;

  // Returns the entry names of a directory (no "." or ".."), sorted.
  virtual StatusOr<std::vector<std::string>> ListDirectory(
      std::string_view path) const = 0;

  // Returns the text of a symbolic link without resolving it.
  virtual StatusOr<std::string> ReadLink(std::string_view path) const = 0;

  // Resolves every link in `path` and returns the result relative to the
  // sysfs mount point ("devices/pci0000:17/0000:17:00.0"). Fails with
  // FAILED_PRECONDITION when it resolves outside the tree and with
  // INVALID_ARGUMENT on a link loop.
  virtual StatusOr<std::string> CanonicalPath(std::string_view path) const = 0;

  // Opens the directory at `path` (links followed) for reading attributes.
  // Fails like CanonicalPath(), and with NOT_FOUND when it is not a
  // directory. The default implementation reads through this reader's path
  // methods; the host-root reader keeps a directory descriptor.
  virtual StatusOr<std::unique_ptr<SysfsDirectory>> OpenDirectory(
      std::string_view path) const;

  // True when something exists at `path` (links are followed).
  virtual bool Exists(std::string_view path) const = 0;

  // True when `path` exists and is neither a regular file, a directory nor a
  // link (FIFOs, sockets, device nodes): things libraries must not open.
  virtual bool IsSpecialFile(std::string_view path) const = 0;

  // The entries of the directory at `path` that are special files (as
  // IsSpecialFile says), sorted. Fails like ListDirectory. The default
  // implementation asks IsSpecialFile about each entry; the host-root
  // reader takes the types the listing gives and stats only entries of
  // unknown type.
  virtual StatusOr<std::vector<std::string>> ListSpecialFiles(
      std::string_view path) const;

  // The host root directory when the tree is a real directory that libpci
  // and hwloc can read too; nullopt otherwise.
  virtual std::optional<std::filesystem::path> HostRoot() const = 0;

  // A printable location for messages ("<root>/sys/<path>").
  virtual std::string Describe(std::string_view path) const = 0;
};

// Returns a reader for <host_root>/sys. `host_root` "/" reads the live
// system.
TOPOLOGY_EXPORT std::unique_ptr<SysfsReader> NewHostRootReader(
    const std::filesystem::path& host_root);

}  // namespace topology

#endif  // TOPOLOGY_SYSFS_READER_H_
