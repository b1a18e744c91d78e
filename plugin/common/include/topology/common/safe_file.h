// Files in directories that others can write (the device plugin directory
// is writable by every plugin): read without following links and only when
// regular and bounded; written to a fresh temporary file (O_EXCL), with an
// explicit mode, fsynced and renamed into place. Files Kubernetes mounts
// for us are read through their links (ReadMountedFile), still regular and
// bounded.
#ifndef TOPOLOGY_COMMON_SAFE_FILE_H_
#define TOPOLOGY_COMMON_SAFE_FILE_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

#include "topology/status.h"

namespace topology::files {

// The contents of `path`. NOT_FOUND when it does not exist;
// FAILED_PRECONDITION when it is a link, not a regular file (a FIFO, a
// device) or larger than `max_bytes`; INTERNAL on a read error. Never
// blocks on a FIFO and never follows a link in the last component.
StatusOr<std::string> ReadRegularFile(const std::filesystem::path& path,
                                      size_t max_bytes);

// As ReadRegularFile, but links are followed: for files Kubernetes mounts
// for us (the service-account token and CA, projected volumes, ConfigMaps
// and Secrets), which are symbolic links into "..data/" that the kubelet
// swaps atomically. Only what an administrator or the kubelet placed, never
// a file in a directory others can write.
StatusOr<std::string> ReadMountedFile(const std::filesystem::path& path,
                                      size_t max_bytes);

// The two above: `follow_links` chooses.
StatusOr<std::string> ReadBoundedFile(const std::filesystem::path& path,
                                      size_t max_bytes, bool follow_links);

// Replaces `path` with `contents` atomically: a new temporary file beside it
// (created with O_EXCL|O_NOFOLLOW relative to the directory, opened once
// with O_NOFOLLOW, so a planted link or file is never written through),
// mode `mode` whatever the umask, fsync, rename over `path` (a link there is
// replaced, not followed), fsync of the directory. The temporary file is
// removed on error.
Status WriteFileAtomically(const std::filesystem::path& path,
                           std::string_view contents, mode_t mode);

// As WriteFileAtomically, but the new file stays open for writing (its
// offset at the end) and its descriptor is returned, the caller's to close.
StatusOr<int> CreateFileAtomically(const std::filesystem::path& path,
                                   std::string_view contents, mode_t mode);

// Removes the temporary files a write of `path` left behind when its
// process was killed between creating and renaming them (".<name>.<16 hex
// digits>.tmp" beside it); links among them are removed, never followed.
// Returns how many were removed. For a daemon's start.
size_t RemoveTemporaryLeftovers(const std::filesystem::path& path);
// The same for every file of `dir` whose name starts with `name_prefix`
// (`exact`: whose name is `name_prefix`), such as every CDI spec of one
// driver.
size_t RemoveTemporaryLeftoversIn(const std::filesystem::path& dir,
                                  const std::string& name_prefix,
                                  bool exact = false);

// One rule for every directory a daemon writes into (its state, CDI specs,
// sockets): FAILED_PRECONDITION, naming `what` and the path, when the last
// component of `dir` is a symbolic link. Files there are written without
// following links, so a linked directory would start and then fail every
// write; it is refused at start instead ("give the directory it names").
// OK when `dir` is empty, missing or a directory.
Status RefuseLinkedDirectory(std::string_view what,
                             const std::filesystem::path& dir);

// Which file a path names (the link itself, never followed): device, inode
// and birth time. The birth time tells a file from the one that replaced it
// under the same inode number (ext4 gives a freed number to the next file
// made near it, so a socket unlinked and bound again often keeps its
// number); it is 0 where the file system keeps none.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  int64_t birth_ns = 0;
  bool operator==(const FileIdentity&) const = default;
};

// The identity of the file at `path` and its type and mode (`mode`, may be
// null), or nothing when there is none.
std::optional<FileIdentity> IdentityAt(const std::filesystem::path& path,
                                       mode_t* mode = nullptr);

// Writes all of `contents` at the descriptor's offset, retrying short
// writes and EINTR; false with errno set on failure.
bool WriteAll(int fd, std::string_view contents);
// The same at `offset` (pwrite), leaving the descriptor's offset alone.
bool WriteAllAt(int fd, std::string_view contents, size_t offset);

}  // namespace topology::files

#endif  // TOPOLOGY_COMMON_SAFE_FILE_H_
