// Watches one directory with inotify and reports files created and deleted
// there, from a thread of its own: how the device plugin framework notices
// a kubelet restart and the DRA framework a socket removed, as the
// kubelet's plugin watcher notices sockets (fsnotify).
#ifndef TOPOLOGY_COMMON_DIR_WATCHER_H_
#define TOPOLOGY_COMMON_DIR_WATCHER_H_

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include <sys/types.h>

#include "topology/common/safe_file.h"
#include "topology/status.h"

namespace topology::common {

struct DirEvent {
  // kListed: polling only, after every listing (no name): a file made and
  // removed between two listings shows in none, so a consumer that knows
  // of such a file (its own socket) checks it then.
  enum class Kind { kCreated, kDeleted, kListed };
  Kind kind;
  std::string name;  // file name inside the directory; empty for kListed
};

class DirWatcher {
 public:
  using Callback = std::function<void(const DirEvent&)>;

  // Starts watching `dir` (which must exist). Renames count as a delete of
  // the old name and a create of the new one. When no inotify instance or
  // watch can be had (fs.inotify.max_user_instances or max_user_watches
  // reached by the node's other daemons), or with `poll`, the directory is
  // listed every `kPollInterval` instead and the same events are derived
  // from two listings (a name gone, a name new, a name whose inode changed:
  // deleted, then created): later, never missed and never fatal.
  static constexpr std::chrono::milliseconds kPollInterval{1000};
  static StatusOr<std::unique_ptr<DirWatcher>> Start(
      const std::filesystem::path& dir, Callback callback, bool poll = false);

  // Whether the directory is listed rather than watched.
  bool polling() const { return inotify_fd_ < 0; }

  ~DirWatcher();  // stops and joins
  DirWatcher(const DirWatcher&) = delete;
  DirWatcher& operator=(const DirWatcher&) = delete;

 private:
  DirWatcher(int inotify_fd, int stop_fd, std::filesystem::path dir,
             Callback callback);
  void Loop();
  void PollLoop();
  // The directory's entries by name, with their identities (inode and
  // birth time: a file replaced under the same inode number is news).
  std::map<std::string, files::FileIdentity> List() const;

  int inotify_fd_;
  int stop_fd_;
  std::filesystem::path dir_;
  Callback callback_;
  // Polling: the last listing.
  std::map<std::string, files::FileIdentity> listed_;
  std::thread thread_;
};

}  // namespace topology::common

#endif  // TOPOLOGY_COMMON_DIR_WATCHER_H_
