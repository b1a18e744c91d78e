// A program under test as a child process: spawned with its arguments (its
// stderr to a log file when given), signalled, waited for with a bound,
// killed if still running when the test ends.
#ifndef TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_
#define TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_

#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

extern char** environ;

namespace topology::testing {

class ChildProcess {
 public:
  // `binary` with `args`; with `log`, its stderr goes to that file
  // (`append`: added to what is there).
  ChildProcess(const std::string& binary, std::vector<std::string> args,
               const std::string& log = "", bool append = false) {
    args.insert(args.begin(), binary);
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    if (!log.empty()) {
      posix_spawn_file_actions_addopen(
          &actions, STDERR_FILENO, log.c_str(),
          O_WRONLY | O_CREAT | (append ? O_APPEND : O_TRUNC), 0600);
      // Its stdout too: a child that outlives a crashed test must not hold
      // the test's output pipe open, or ctest waits for it forever.
      posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
    }
    EXPECT_EQ(posix_spawn(&pid_, binary.c_str(), &actions, nullptr, argv.data(),
                          environ),
              0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~ChildProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait(std::chrono::seconds(5));
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  void Signal(int signal) { kill(pid_, signal); }
  // Exit status (or 128+signal), nullopt on timeout. Woken by the exit
  // itself: a pidfd is readable once the process has ended.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return std::nullopt;
    const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid_, 0));
    if (pidfd < 0) {
      ADD_FAILURE() << "pidfd_open(" << pid_ << "): " << std::strerror(errno);
      return std::nullopt;
    }
    pollfd ended{pidfd, POLLIN, 0};
    int ready = 0;
    do {
      ready = poll(&ended, 1, static_cast<int>(timeout.count()));
    } while (ready < 0 && errno == EINTR);
    close(pidfd);
    if (ready <= 0) return std::nullopt;
    int status = 0;
    if (waitpid(pid_, &status, 0) != pid_) return std::nullopt;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_
