#include "topology/sysfs_reader.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <system_error>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace topology {

SysfsReader::~SysfsReader() = default;
SysfsDirectory::~SysfsDirectory() = default;

StatusOr<std::string> SysfsDirectory::ReadFilePrefix(
    std::string_view name, std::size_t max_bytes) const {
  auto text = ReadFile(name);
  if (text.ok() && text->size() > max_bytes) text->resize(max_bytes);
  return text;
}

namespace {

// A NOT_FOUND answer as an absent entry.
StatusOr<std::optional<std::string>> AbsentAsNullopt(
    StatusOr<std::string> read) {
  if (read.ok()) return std::optional<std::string>(*std::move(read));
  if (read.status().code() == StatusCode::kNotFound) {
    return std::optional<std::string>();
  }
  return read.status();
}

}  // namespace

StatusOr<std::optional<std::string>> SysfsDirectory::ReadFileIfPresent(
    std::string_view name) const {
  return AbsentAsNullopt(ReadFile(name));
}

StatusOr<std::optional<std::string>> SysfsDirectory::ReadLinkIfPresent(
    std::string_view name) const {
  return AbsentAsNullopt(ReadLink(name));
}

Status SysfsDirectory::VisitEntries(
    const std::function<void(std::string_view, EntryType)>& /*visit*/) const {
  return Status(StatusCode::kUnimplemented,
                "cannot list " + path() + " through its handle");
}

StatusOr<std::unique_ptr<SysfsDirectory>> SysfsDirectory::OpenEntry(
    std::string_view name) const {
  return Status(StatusCode::kUnimplemented, "cannot open " + path() + "/" +
                                                std::string(name) +
                                                " through its handle");
}

namespace {

// A directory read through the path methods of its reader.
class PathDirectory final : public SysfsDirectory {
 public:
  PathDirectory(const SysfsReader& reader, std::string path)
      : reader_(reader), path_(std::move(path)) {}
  const std::string& path() const override { return path_; }
  StatusOr<std::string> ReadFile(std::string_view name) const override {
    return reader_.ReadFile(Join(name));
  }
  StatusOr<std::string> ReadLink(std::string_view name) const override {
    return reader_.ReadLink(Join(name));
  }

 private:
  std::string Join(std::string_view name) const {
    std::string full = path_;
    full += '/';
    full += name;
    return full;
  }
  const SysfsReader& reader_;
  std::string path_;
};

}  // namespace

StatusOr<std::vector<std::string>> SysfsReader::ListSpecialFiles(
    std::string_view path) const {
  auto names = ListDirectory(path);
  if (!names.ok()) return names.status();
  std::vector<std::string> special;
  for (const std::string& name : *names) {
    if (IsSpecialFile(std::string(path) + "/" + name)) special.push_back(name);
  }
  return special;
}

StatusOr<std::unique_ptr<SysfsDirectory>> SysfsReader::OpenDirectory(
    std::string_view path) const {
  auto canonical = CanonicalPath(path);
  if (!canonical.ok()) return canonical.status();
  return std::unique_ptr<SysfsDirectory>(
      new PathDirectory(*this, *std::move(canonical)));
}

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

// The errors that mean nothing is there (NOT_FOUND).
bool IsAbsent(int err) { return err == ENOENT || err == ENOTDIR; }

Status ErrnoStatus(int err, const std::string& what) {
  std::string message = what + ": " + std::strerror(err);
  if (IsAbsent(err)) return NotFoundError(std::move(message));
  switch (err) {
    case EACCES:
    case EPERM:
      return PermissionDeniedError(std::move(message));
    case ELOOP:
      return InvalidArgumentError(std::move(message));
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOBUFS:
      // The machine is short of resources: nothing is known about the file.
      return UnavailableError(std::move(message));
    default:
      return DataLossError(std::move(message));
  }
}

// Reads a whole small file, or its first `limit` bytes, from a descriptor
// opened with O_NONBLOCK, so a FIFO or device cannot block. sysfs returns an
// attribute in one read and local files return short reads only at the end,
// so a short read ends the loop; fstat() is only needed to tell an empty
// file from a FIFO. `describe()` names the file, and is only called for an
// error (discovery reads thousands of attributes and names none of them).
template <typename Describe>
StatusOr<std::string> ReadOpenFile(int fd, const Describe& describe,
                                   size_t limit = SIZE_MAX) {
  std::string out;
  char buf[4096];
  while (out.size() < limit) {
    const size_t want = std::min(sizeof(buf), limit - out.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EISDIR) break;  // decided below
      return ErrnoStatus(errno, "cannot read " + describe());
    }
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > SysfsReader::kMaxFileSize) {
      return OutOfRangeError(describe() + " is larger than " +
                             std::to_string(SysfsReader::kMaxFileSize) +
                             " bytes");
    }
    if (static_cast<size_t>(n) < want) break;
  }
  if (out.empty()) {
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      return ErrnoStatus(errno, "cannot stat " + describe());
    }
    if (!S_ISREG(st.st_mode)) {
      return FailedPreconditionError(describe() + " is not a regular file");
    }
  }
  return out;
}

// Attributes are plain files: a link in their place (which could point at a
// device node outside the tree) is refused, not followed.
constexpr int kAttributeFlags = O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;

// A directory held open, read-only or (without read permission) with
// O_PATH; attributes are opened relative to it.
class FdDirectory final : public SysfsDirectory {
 public:
  // `root_fd`: the tree's sys/ (O_PATH), or -1; with `sysfs`, its path as
  // the reader names it. Both outlive the directory, as the reader does.
  FdDirectory(int fd, bool listable, std::string path, const int& root_fd,
              const std::string& sysfs)
      : fd_(fd),
        listable_(listable),
        path_(std::move(path)),
        full_(path_.empty() ? sysfs : sysfs + "/" + path_),
        root_fd_(root_fd),
        sysfs_(sysfs) {}
  FdDirectory(const FdDirectory&) = delete;
  FdDirectory& operator=(const FdDirectory&) = delete;
  ~FdDirectory() override { ::close(fd_); }

  const std::string& path() const override { return path_; }

  StatusOr<std::string> ReadFile(std::string_view name) const override {
    return ReadFilePrefix(name, SIZE_MAX);
  }

  StatusOr<std::string> ReadFilePrefix(std::string_view name,
                                       size_t max_bytes) const override {
    auto text = Read(name, max_bytes, /*absent_is_an_answer=*/false);
    if (!text.ok()) return text.status();
    return **std::move(text);
  }

  StatusOr<std::optional<std::string>> ReadFileIfPresent(
      std::string_view name) const override {
    return Read(name, SIZE_MAX, /*absent_is_an_answer=*/true);
  }

  StatusOr<std::string> ReadLink(std::string_view name) const override {
    auto target = Link(name, /*absent_is_an_answer=*/false);
    if (!target.ok()) return target.status();
    return **std::move(target);
  }

  StatusOr<std::optional<std::string>> ReadLinkIfPresent(
      std::string_view name) const override {
    return Link(name, /*absent_is_an_answer=*/true);
  }

  // getdents64 on the descriptor itself: no second open, no DIR buffer.
  Status VisitEntries(const std::function<void(std::string_view, EntryType)>&
                          visit) const override {
    if (!listable_) return SysfsDirectory::VisitEntries(visit);
    if (listed_ && ::lseek(fd_, 0, SEEK_SET) != 0) {
      return ErrnoStatus(errno, "cannot list " + full_);
    }
    listed_ = true;
    alignas(dirent64) char buf[16384];
    while (true) {
      const ssize_t n = ::getdents64(fd_, buf, sizeof(buf));
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus(errno, "cannot list " + full_);
      }
      if (n == 0) return OkStatus();
      for (ssize_t at = 0; at < n;) {
        const auto* entry = reinterpret_cast<const dirent64*>(buf + at);
        at += entry->d_reclen;
        const std::string_view name = entry->d_name;
        if (name == "." || name == "..") continue;
        visit(name, TypeOf(*entry));
      }
    }
  }

 private:
  EntryType TypeOf(const dirent64& entry) const {
    switch (entry.d_type) {
      case DT_REG:
        return EntryType::kRegular;
      case DT_DIR:
        return EntryType::kDirectory;
      case DT_LNK:
        return EntryType::kLink;
      case DT_UNKNOWN: {
        struct stat st {};
        if (::fstatat(fd_, entry.d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
          return EntryType::kSpecial;  // gone or unreadable: not to be opened
        }
        if (S_ISREG(st.st_mode)) return EntryType::kRegular;
        if (S_ISDIR(st.st_mode)) return EntryType::kDirectory;
        if (S_ISLNK(st.st_mode)) return EntryType::kLink;
        return EntryType::kSpecial;
      }
      default:
        return EntryType::kSpecial;
    }
  }

  // At most `max_bytes` of the attribute `name`; nullopt for one that is
  // not there when `absent_is_an_answer` (no message built), else NOT_FOUND.
  StatusOr<std::optional<std::string>> Read(std::string_view name,
                                            size_t max_bytes,
                                            bool absent_is_an_answer) const {
    const std::string n(name);
    const int fd = ::openat(fd_, n.c_str(), kAttributeFlags);
    if (fd < 0) {
      if (absent_is_an_answer && IsAbsent(errno)) {
        return std::optional<std::string>();
      }
      return ErrnoStatus(errno, "cannot open " + Describe(n));
    }
    FdCloser closer(fd);
    auto text = ReadOpenFile(
        fd, [&] { return Describe(n); }, max_bytes);
    if (!text.ok()) return text.status();
    return std::optional<std::string>(*std::move(text));
  }

  // The text of the link `name`, as Read answers for an absent one.
  StatusOr<std::optional<std::string>> Link(std::string_view name,
                                            bool absent_is_an_answer) const {
    const std::string n(name);
    char buf[PATH_MAX];
    const ssize_t len = ::readlinkat(fd_, n.c_str(), buf, sizeof(buf));
    if (len < 0) {
      if (absent_is_an_answer && IsAbsent(errno)) {
        return std::optional<std::string>();
      }
      return ErrnoStatus(errno, "cannot read link " + Describe(n));
    }
    return std::optional<std::string>(std::in_place, buf,
                                      static_cast<size_t>(len));
  }

  std::string Describe(const std::string& name) const {
    return full_ + "/" + name;
  }

  // The kernel's links in sysfs are relative, some "../" and then plain
  // components ("../../../devices/pci0000:00/0000:00:1f.2"). Such a link's
  // target is this directory's canonical path with that many components
  // dropped and the rest appended; opened with openat2 refusing every link
  // and any way out of the tree, it is the canonical path of the result by
  // construction. That spares the /proc readlink OpenDirectory needs (half
  // the cost of opening a function's directory). Anything else, and any
  // failure, is left to the reader.
  StatusOr<std::unique_ptr<SysfsDirectory>> OpenEntry(
      std::string_view name) const override {
    const auto unimplemented = [&] {
      return Status(StatusCode::kUnimplemented,
                    "cannot open " + Describe(std::string(name)) +
                        " through its directory");
    };
    if (root_fd_ < 0 || name.empty() || name == "." || name == ".." ||
        name.find('/') != std::string_view::npos) {
      return unimplemented();
    }
    const std::string n(name);
    char text[PATH_MAX];
    const ssize_t len = ::readlinkat(fd_, n.c_str(), text, sizeof(text));
    std::string target;
    if (len < 0 && errno == EINVAL) {
      target = path_ + "/" + n;  // a directory, not a link
    } else if (len <= 0 || static_cast<size_t>(len) >= sizeof(text)) {
      return unimplemented();
    } else {
      std::string_view rest(text, static_cast<size_t>(len));
      std::string_view base = path_;
      while (rest.substr(0, 3) == "../") {
        if (base.empty()) return unimplemented();  // above sys/
        const size_t slash = base.rfind('/');
        base = slash == std::string_view::npos ? std::string_view()
                                               : base.substr(0, slash);
        rest.remove_prefix(3);
      }
      // Plain components only: no ".", "..", empty or absolute ones left.
      for (size_t at = 0; at <= rest.size();) {
        const size_t end = std::min(rest.find('/', at), rest.size());
        const std::string_view part = rest.substr(at, end - at);
        if (part.empty() || part == "." || part == "..") return unimplemented();
        at = end + 1;
      }
      target = base.empty() ? std::string(rest)
                            : std::string(base) + "/" + std::string(rest);
    }
    open_how how{};
    how.flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                  RESOLVE_BENEATH | RESOLVE_NO_XDEV;
    const long fd =  // NOLINT(google-runtime-int): syscall's type
        ::syscall(SYS_openat2, root_fd_, target.c_str(), &how, sizeof(how));
    if (fd < 0) return unimplemented();
    return std::unique_ptr<SysfsDirectory>(new FdDirectory(
        static_cast<int>(fd), true, std::move(target), root_fd_, sysfs_));
  }

  int fd_;
  bool listable_;
  mutable bool listed_ = false;
  std::string path_;
  std::string full_;
  const int& root_fd_;
  const std::string& sysfs_;
};

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
    // Where directories open their entries' links (FdDirectory::OpenEntry);
    // without it they leave that to OpenDirectory.
    root_fd_ = ::open(sysfs_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  }
  HostRootReader(const HostRootReader&) = delete;
  HostRootReader& operator=(const HostRootReader&) = delete;
  ~HostRootReader() override {
    if (root_fd_ >= 0) ::close(root_fd_);
  }

  StatusOr<std::string> ReadFile(std::string_view path) const override {
    const std::string full = Full(path);
    const int fd = ::open(full.c_str(), kAttributeFlags);
    if (fd < 0) return ErrnoStatus(errno, "cannot open " + full);
    FdCloser closer(fd);
    return ReadOpenFile(fd, [&] { return std::string(full); });
  }

  StatusOr<std::vector<std::string>> ListDirectory(
      std::string_view path) const override {
    return ListEntries(path, [](DIR*, const dirent&) { return true; });
  }

  StatusOr<std::vector<std::string>> ListSpecialFiles(
      std::string_view path) const override {
    return ListEntries(path, [](DIR* dir, const dirent& entry) {
      switch (entry.d_type) {
        case DT_REG:
        case DT_DIR:
        case DT_LNK:
          return false;
        case DT_UNKNOWN: {
          struct stat st {};
          // An entry gone since the listing is not special.
          return ::fstatat(::dirfd(dir), entry.d_name, &st,
                           AT_SYMLINK_NOFOLLOW) == 0 &&
                 IsSpecialMode(st.st_mode);
        }
        default:
          return true;
      }
    });
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
    return RelativeToSysfs(full, resolved);
  }

  StatusOr<std::unique_ptr<SysfsDirectory>> OpenDirectory(
      std::string_view path) const override {
    const std::string full = Full(path);
    // Read-only, so that the same descriptor can list the entries; a
    // directory we may search but not read is still opened for attributes.
    bool listable = true;
    int fd = ::open(full.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
      listable = false;
      fd = ::open(full.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    }
    if (fd < 0) return ErrnoStatus(errno, "cannot open directory " + full);
    // The kernel knows where the descriptor landed: one readlink instead of
    // realpath()'s walk over every component.
    char resolved[PATH_MAX];
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t len =
        ::readlink(proc.c_str(), resolved, sizeof(resolved) - 1);
    StatusOr<std::string> relative = InternalError("unresolved");
    if (len > 0 && resolved[0] == '/') {
      resolved[len] = '\0';
      relative = RelativeToSysfs(full, resolved);
    } else {
      relative = CanonicalPath(path);  // no /proc: resolve by walking
    }
    if (!relative.ok()) {
      ::close(fd);
      return relative.status();
    }
    return std::unique_ptr<SysfsDirectory>(
        new FdDirectory(fd, listable, *relative, root_fd_, sysfs_));
  }

  bool Exists(std::string_view path) const override {
    struct stat st {};
    return ::stat(Full(path).c_str(), &st) == 0;
  }

  bool IsSpecialFile(std::string_view path) const override {
    struct stat st {};
    return ::lstat(Full(path).c_str(), &st) == 0 && IsSpecialMode(st.st_mode);
  }

  std::optional<std::filesystem::path> HostRoot() const override {
    return host_root_;
  }

  std::string Describe(std::string_view path) const override {
    return Full(path);
  }

 private:
  // Neither a regular file, a directory nor a link.
  static bool IsSpecialMode(mode_t mode) {
    return !S_ISREG(mode) && !S_ISDIR(mode) && !S_ISLNK(mode);
  }

  // The names of the entries of the directory at `path` (no "." or "..")
  // that `keep` accepts, sorted.
  template <typename Keep>
  StatusOr<std::vector<std::string>> ListEntries(std::string_view path,
                                                 Keep keep) const {
    const std::string full = Full(path);
    DIR* dir = ::opendir(full.c_str());
    if (dir == nullptr) return ErrnoStatus(errno, "cannot list " + full);
    std::vector<std::string> names;
    while (const dirent* entry = ::readdir(dir)) {
      const std::string_view name = entry->d_name;
      if (name == "." || name == ".." || !keep(dir, *entry)) continue;
      names.emplace_back(name);
    }
    ::closedir(dir);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::string Full(std::string_view path) const {
    std::string full = sysfs_;
    if (!path.empty()) {
      full += '/';
      full += path;
    }
    return full;
  }

  // Checks that `resolved` lies below the tree and strips the tree's prefix.
  StatusOr<std::string> RelativeToSysfs(const std::string& full,
                                        std::string_view r) const {
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

  std::filesystem::path host_root_;
  std::string sysfs_;
  std::string canonical_sysfs_;
  int root_fd_ = -1;
};

}  // namespace

std::unique_ptr<SysfsReader> NewHostRootReader(
    const std::filesystem::path& host_root) {
  return std::make_unique<HostRootReader>(host_root);
}

}  // namespace topology
