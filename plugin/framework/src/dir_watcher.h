// Watches one directory with inotify and reports files created and deleted
// there, from a thread of its own.
#ifndef TOPOLOGY_PLUGIN_SRC_DIR_WATCHER_H_
#define TOPOLOGY_PLUGIN_SRC_DIR_WATCHER_H_

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "topology/status.h"

namespace topology::plugin {

struct DirEvent {
  enum class Kind { kCreated, kDeleted };
  Kind kind;
  std::string name;  // file name inside the directory
};

class DirWatcher {
 public:
  using Callback = std::function<void(const DirEvent&)>;

  // Starts watching `dir` (which must exist). Renames count as a delete of
  // the old name and a create of the new one.
  static StatusOr<std::unique_ptr<DirWatcher>> Start(
      const std::filesystem::path& dir, Callback callback);

  ~DirWatcher();  // stops and joins
  DirWatcher(const DirWatcher&) = delete;
  DirWatcher& operator=(const DirWatcher&) = delete;

 private:
  DirWatcher(int inotify_fd, int stop_fd, std::filesystem::path dir,
             Callback callback);
  void Loop();

  int inotify_fd_;
  int stop_fd_;
  std::filesystem::path dir_;
  Callback callback_;
  std::thread thread_;
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_SRC_DIR_WATCHER_H_
