#include "topology/common/safe_file.h"

#include <cerrno>
#include <cstring>
#include <random>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

namespace topology::files {
namespace {

std::string Errno() { return std::strerror(errno); }

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace

StatusOr<std::string> ReadRegularFile(const std::filesystem::path& path,
                                      size_t max_bytes) {
  return ReadBoundedFile(path, max_bytes, /*follow_links=*/false);
}

StatusOr<std::string> ReadMountedFile(const std::filesystem::path& path,
                                      size_t max_bytes) {
  return ReadBoundedFile(path, max_bytes, /*follow_links=*/true);
}

StatusOr<std::string> ReadBoundedFile(const std::filesystem::path& path,
                                      size_t max_bytes, bool follow_links) {
  // O_NONBLOCK: opening a FIFO for reading never waits for a writer.
  Fd fd(open(path.c_str(), O_RDONLY | (follow_links ? 0 : O_NOFOLLOW) |
                               O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT)
      return NotFoundError(path.string() + " does not exist");
    if (errno == ELOOP) {
      return FailedPreconditionError(path.string() +
                                     " is a symbolic link; not followed");
    }
    return InternalError("cannot open " + path.string() + ": " + Errno());
  }
  struct stat info {};
  if (fstat(fd.get(), &info) != 0) {
    return InternalError("cannot stat " + path.string() + ": " + Errno());
  }
  if (!S_ISREG(info.st_mode)) {
    return FailedPreconditionError(path.string() + " is not a regular file");
  }
  if (static_cast<uint64_t>(info.st_size) > max_bytes) {
    return FailedPreconditionError(
        path.string() + " is " + std::to_string(info.st_size) +
        " bytes, more than the " + std::to_string(max_bytes) + " allowed");
  }
  std::string out;
  out.resize(static_cast<size_t>(info.st_size));
  size_t done = 0;
  while (true) {
    if (done == out.size()) {
      if (out.size() >= max_bytes) break;
      // The file may have grown since fstat: read on, within the cap.
      out.resize(std::min(max_bytes, out.size() + 4096));
    }
    const ssize_t n = read(fd.get(), out.data() + done, out.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return InternalError("cannot read " + path.string() + ": " + Errno());
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  if (done >= max_bytes && done == out.size()) {
    char extra = 0;
    if (read(fd.get(), &extra, 1) == 1) {
      return FailedPreconditionError(path.string() + " grew past the " +
                                     std::to_string(max_bytes) +
                                     " bytes allowed");
    }
  }
  out.resize(done);
  return out;
}

bool WriteAll(int fd, std::string_view contents) {
  size_t done = 0;
  while (done < contents.size()) {
    const ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

bool WriteAllAt(int fd, std::string_view contents, size_t offset) {
  while (!contents.empty()) {
    const ssize_t n = pwrite(fd, contents.data(), contents.size(),
                             static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    contents.remove_prefix(static_cast<size_t>(n));
    offset += static_cast<size_t>(n);
  }
  return true;
}

Status WriteFileAtomically(const std::filesystem::path& path,
                           std::string_view contents, mode_t mode) {
  auto fd = CreateFileAtomically(path, contents, mode);
  if (!fd.ok()) return fd.status();
  if (close(*fd) != 0) {
    return InternalError("cannot close " + path.string() + ": " + Errno());
  }
  return OkStatus();
}

StatusOr<int> CreateFileAtomically(const std::filesystem::path& path,
                                   std::string_view contents, mode_t mode) {
  const std::filesystem::path dir = path.parent_path().empty()
                                        ? std::filesystem::path(".")
                                        : path.parent_path();
  const std::string name = path.filename().string();
  if (name.empty() || name == "." || name == "..") {
    return InvalidArgumentError("no file name in " + path.string());
  }
  // Everything below happens relative to the directory opened here: a
  // directory swapped for a link afterwards redirects nothing, and the
  // directory itself must not be a link.
  Fd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.get() < 0) {
    return InternalError("cannot open the directory " + dir.string() + ": " +
                         Errno());
  }
  std::random_device random;
  std::string temporary;
  int raw = -1;
  for (int attempt = 0; attempt < 16 && raw < 0; ++attempt) {
    char suffix[24];
    std::snprintf(suffix, sizeof(suffix), ".%08x%08x", random(), random());
    temporary = "." + name + suffix + ".tmp";
    raw = openat(dir_fd.get(), temporary.c_str(),
                 O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (raw < 0 && errno != EEXIST) break;
  }
  if (raw < 0) {
    return InternalError("cannot create a temporary file in " + dir.string() +
                         ": " + Errno());
  }
  Fd fd(raw);
  const auto fail = [&](const std::string& what) {
    const std::string reason = Errno();
    unlinkat(dir_fd.get(), temporary.c_str(), 0);
    return InternalError(what + " " + (dir / temporary).string() + ": " +
                         reason);
  };
  if (fchmod(fd.get(), mode) != 0) return fail("cannot set the mode of");
  if (!WriteAll(fd.get(), contents)) return fail("cannot write");
  if (fsync(fd.get()) != 0) return fail("cannot sync");
  // rename replaces whatever is at `name`, a planted link included, and
  // never follows it.
  if (renameat(dir_fd.get(), temporary.c_str(), dir_fd.get(), name.c_str()) !=
      0) {
    const std::string reason = Errno();
    unlinkat(dir_fd.get(), temporary.c_str(), 0);
    return InternalError("cannot replace " + path.string() + ": " + reason);
  }
  if (fsync(dir_fd.get()) != 0) {
    return InternalError("cannot sync the directory " + dir.string() + ": " +
                         Errno());
  }
  return fd.Release();
}

Status RefuseLinkedDirectory(std::string_view what,
                             const std::filesystem::path& dir) {
  std::error_code error;
  if (dir.empty() || !std::filesystem::is_symlink(dir, error)) {
    return OkStatus();
  }
  return FailedPreconditionError(
      "the " + std::string(what) + " " + dir.string() +
      " is a symbolic link: files are written there without following "
      "links; give the directory it names");
}

size_t RemoveTemporaryLeftovers(const std::filesystem::path& path) {
  return RemoveTemporaryLeftoversIn(path.parent_path().empty()
                                        ? std::filesystem::path(".")
                                        : path.parent_path(),
                                    path.filename().string(), /*exact=*/true);
}

size_t RemoveTemporaryLeftoversIn(const std::filesystem::path& dir,
                                  const std::string& name_prefix, bool exact) {
  Fd dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (dir_fd.get() < 0) return 0;
  const std::string prefix = "." + name_prefix;
  std::error_code error;
  size_t removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // ".<name>.<16 hex digits>.tmp", as CreateFileAtomically names them.
    constexpr size_t kTail = 1 + 16 + 4;  // ".<hex>.tmp"
    if (!name.starts_with(prefix) || !name.ends_with(".tmp") ||
        name.size() < prefix.size() + kTail ||
        (exact && name.size() != prefix.size() + kTail)) {
      continue;
    }
    const std::string_view tail =
        std::string_view(name).substr(name.size() - kTail);
    if (tail[0] != '.' || tail.substr(1, 16).find_first_not_of(
                              "0123456789abcdef") != std::string_view::npos) {
      continue;
    }
    // unlinkat never follows a link: a planted one is removed, not its
    // target.
    if (unlinkat(dir_fd.get(), name.c_str(), 0) == 0) ++removed;
  }
  return removed;
}

std::optional<FileIdentity> IdentityAt(const std::filesystem::path& path,
                                       mode_t* mode) {
  struct statx info {};
  if (statx(AT_FDCWD, path.c_str(), AT_SYMLINK_NOFOLLOW,
            STATX_TYPE | STATX_MODE | STATX_INO | STATX_BTIME, &info) != 0) {
    return std::nullopt;
  }
  if (mode != nullptr) *mode = info.stx_mode;
  FileIdentity identity{.dev = makedev(info.stx_dev_major, info.stx_dev_minor),
                        .ino = static_cast<ino_t>(info.stx_ino)};
  if ((info.stx_mask & STATX_BTIME) != 0) {
    identity.birth_ns =
        info.stx_btime.tv_sec * 1'000'000'000LL + info.stx_btime.tv_nsec;
  }
  return identity;
}

}  // namespace topology::files
