#include "topology/sysfs_reader.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>

namespace topology {

SysfsReader::~SysfsReader() = default;

namespace {

// Closes a file descriptor on scope exit.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return NotFoundError(std::move(message));
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message));
    case ELOOP:
      return InvalidArgumentError(std::move(message));
    default:
      return DataLossError(std::move(message));
  }
}

// Reads below <root>/sys with plain POSIX calls: they are cheap, do not throw
// and let us refuse FIFOs and oversized files before reading them.
class HostRootReader final : public SysfsReader {
 public:
  explicit HostRootReader(std::filesystem::path host_root)
      : host_root_(std::move(host_root)) {
    std::string root = host_root_.lexically_normal().string();
    while (root.size() > 1 && root.back() == '/') root.pop_back();
    sysfs_ = root == "/" ? std::string("/sys") : root + "/sys";
    // The canonical form is what realpath() results are compared with.
    char resolved[PATH_MAX];
    if (::realpath(sysfs_.c_str(), resolved) != nullptr) {
      canonical_sysfs_ = resolved;
    } else {
      canonical_sysfs_ = sysfs_;
    }
  }

  StatusOr<std::string> ReadFile(std::string_view path) const override {
    const std::string full = Full(path);
    const int fd = ::open(full.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus(errno, "cannot open " + full);
    FdCloser closer(fd);
    struct stat st {};
    if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "cannot stat " + full);
    if (!S_ISREG(st.st_mode)) {
      return FailedPreconditionError(full + " is not a regular file");
    }
    std::string out;
    char buf[4096];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "cannot read " + full);
      }
      if (n == 0) break;
      out.append(buf, static_cast<size_t>(n));
      if (out.size() > kMaxFileSize) {
        return OutOfRangeError(full + " is larger than " +
                               std::to_string(kMaxFileSize) + " bytes");
      }
    }
    return out;
  }

  StatusOr<std::vector<std::string>> ListDirectory(
      std::string_view path) const override {
    const std::string full = Full(path);
    DIR* dir = ::opendir(full.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, "cannot list " + full);
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  StatusOr<std::string> ReadLink(std::string_view path) const override {
    const std::string full = Full(path);
    char buf[PATH_MAX];
    const ssize_t n = ::readlink(full.c_str(), buf, sizeof(buf));
    if (n < 0) return ErrnoStatus(errno, "cannot read link " + full);
    return std::string(buf, static_cast<size_t>(n));
  }

  StatusOr<std::string> CanonicalPath(std::string_view path) const override {
    const std::string full = Full(path);
    char resolved[PATH_MAX];
    if (::realpath(full.c_str(), resolved) == nullptr) {
      return ErrnoStatus(errno, "cannot resolve " + full);
    }
    const std::string_view r = resolved;
    const std::string& base = canonical_sysfs_;
    if (r.size() < base.size() || r.compare(0, base.size(), base) != 0 ||
        (r.size() > base.size() && r[base.size()] != '/')) {
      return FailedPreconditionError(full + " resolves outside " + base +
                                     " (to " + std::string(r) + ")");
    }
    std::string_view rel = r.substr(base.size());
    while (!rel.empty() && rel.front() == '/') rel.remove_prefix(1);
    return std::string(rel);
  }

  bool Exists(std::string_view path) const override {
    struct stat st {};
    return ::stat(Full(path).c_str(), &st) == 0;
  }

  bool IsSpecialFile(std::string_view path) const override {
    struct stat st {};
    if (::lstat(Full(path).c_str(), &st) != 0) return false;
    return !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode);
  }

  std::optional<std::filesystem::path> HostRoot() const override {
    return host_root_;
  }

  std::string Describe(std::string_view path) const override {
    return Full(path);
  }

 private:
  std::string Full(std::string_view path) const {
    std::string full = sysfs_;
    if (!path.empty()) {
      full += '/';
      full += path;
    }
    return full;
  }

  std::filesystem::path host_root_;
  std::string sysfs_;
  std::string canonical_sysfs_;
};

}  // namespace

std::unique_ptr<SysfsReader> NewHostRootReader(
    const std::filesystem::path& host_root) {
  return std::make_unique<HostRootReader>(host_root);
}

}  // namespace topology
