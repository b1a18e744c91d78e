#include "topology/common/dir_watcher.h"

#include <array>
#include <cerrno>
#include <cstring>
#include <utility>

#include <glog/logging.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

namespace topology::common {

namespace {

// inotify_init1's and inotify_add_watch's errors that say the node's
// instances or watches are used up, not that the directory is wrong.
bool OutOfWatches(int error) {
  return error == EMFILE || error == ENFILE || error == ENOMEM ||
         error == ENOSPC;
}

}  // namespace

StatusOr<std::unique_ptr<DirWatcher>> DirWatcher::Start(
    const std::filesystem::path& dir, Callback callback, bool poll) {
  std::error_code error_code;
  if (!std::filesystem::is_directory(dir, error_code)) {
    return FailedPreconditionError("cannot watch " + dir.string() +
                                   ": not a directory");
  }
  int inotify_fd = -1;
  std::string why_polling = poll ? "as asked" : "";
  if (!poll) {
    inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd < 0) {
      const int error = errno;
      if (!OutOfWatches(error)) {
        return InternalError(std::string("inotify_init1: ") +
                             std::strerror(error));
      }
      why_polling = std::string("inotify_init1: ") + std::strerror(error);
    }
  }
  constexpr uint32_t kMask = IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                             IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF;
  if (inotify_fd >= 0 &&
      inotify_add_watch(inotify_fd, dir.c_str(), kMask) < 0) {
    const int error = errno;
    close(inotify_fd);
    inotify_fd = -1;
    if (!OutOfWatches(error)) {
      return FailedPreconditionError("cannot watch " + dir.string() + ": " +
                                     std::strerror(error));
    }
    why_polling = std::string("inotify_add_watch: ") + std::strerror(error);
  }
  const int stop_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (stop_fd < 0) {
    const int error = errno;
    if (inotify_fd >= 0) close(inotify_fd);
    return InternalError(std::string("eventfd: ") + std::strerror(error));
  }
  if (inotify_fd < 0 && !poll) {
    LOG(WARNING) << "cannot watch " << dir.string() << " with inotify ("
                 << why_polling << ": the node's inotify instances or "
                 << "watches are used up, fs.inotify.max_user_instances and "
                 << "max_user_watches); it is listed every "
                 << kPollInterval.count() << " ms instead";
  }
  return std::unique_ptr<DirWatcher>(
      new DirWatcher(inotify_fd, stop_fd, dir, std::move(callback)));
}

DirWatcher::DirWatcher(int inotify_fd, int stop_fd, std::filesystem::path dir,
                       Callback callback)
    : inotify_fd_(inotify_fd),
      stop_fd_(stop_fd),
      dir_(std::move(dir)),
      callback_(std::move(callback)) {
  // What is there now is not news: only later changes are reported.
  if (inotify_fd_ < 0) listed_ = List();
  thread_ = std::thread([this] { inotify_fd_ < 0 ? PollLoop() : Loop(); });
}

std::map<std::string, files::FileIdentity> DirWatcher::List() const {
  std::map<std::string, files::FileIdentity> entries;
  std::error_code error;
  for (std::filesystem::directory_iterator it(dir_, error), end;
       !error && it != end; it.increment(error)) {
    if (auto identity = files::IdentityAt(it->path())) {
      entries[it->path().filename().string()] = *identity;
    }
  }
  return entries;
}

void DirWatcher::PollLoop() {
  while (true) {
    pollfd stop{stop_fd_, POLLIN, 0};
    const int ready = poll(&stop, 1, static_cast<int>(kPollInterval.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready != 0) return;  // stopped (or poll failed: nothing to wait on)
    const std::map<std::string, files::FileIdentity> now = List();
    for (const auto& [name, identity] : listed_) {
      const auto it = now.find(name);
      if (it == now.end() || it->second != identity) {
        callback_({DirEvent::Kind::kDeleted, name});
      }
    }
    for (const auto& [name, identity] : now) {
      const auto it = listed_.find(name);
      if (it == listed_.end() || it->second != identity) {
        callback_({DirEvent::Kind::kCreated, name});
      }
    }
    listed_ = now;
    callback_({DirEvent::Kind::kListed, ""});
  }
}

DirWatcher::~DirWatcher() {
  const uint64_t one = 1;
  if (write(stop_fd_, &one, sizeof(one)) < 0) {
    PLOG(ERROR) << "cannot stop the watcher of " << dir_;
  }
  thread_.join();
  if (inotify_fd_ >= 0) close(inotify_fd_);
  close(stop_fd_);
}

void DirWatcher::Loop() {
  alignas(inotify_event) std::array<char, size_t{16} * 1024> buffer{};
  while (true) {
    std::array<pollfd, 2> fds = {pollfd{inotify_fd_, POLLIN, 0},
                                 pollfd{stop_fd_, POLLIN, 0}};
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      PLOG(ERROR) << "poll on the watch of " << dir_;
      return;
    }
    if ((fds[1].revents & POLLIN) != 0) return;
    if ((fds[0].revents & POLLIN) == 0) continue;
    const ssize_t length = read(inotify_fd_, buffer.data(), buffer.size());
    if (length <= 0) continue;
    for (ssize_t offset = 0; offset < length;) {
      inotify_event event{};
      std::memcpy(&event, buffer.data() + offset, sizeof(event));
      std::string name;
      if (event.len > 0) {
        name.assign(buffer.data() + offset + sizeof(inotify_event));
      }
      offset += static_cast<ssize_t>(sizeof(inotify_event) + event.len);
      if ((event.mask & (IN_DELETE_SELF | IN_MOVE_SELF)) != 0) {
        LOG(WARNING) << "the watched directory " << dir_
                     << " was removed; restart detection stops";
        continue;
      }
      if ((event.mask & IN_Q_OVERFLOW) != 0) {
        LOG(WARNING) << "inotify queue overflow on " << dir_;
        continue;
      }
      if ((event.mask & (IN_CREATE | IN_MOVED_TO)) != 0) {
        callback_({DirEvent::Kind::kCreated, name});
      } else if ((event.mask & (IN_DELETE | IN_MOVED_FROM)) != 0) {
        callback_({DirEvent::Kind::kDeleted, name});
      }
    }
  }
}

}  // namespace topology::common
