// A program under test as a child process: spawned with its arguments (its
// stderr to a log file when given), signalled, waited for with a bound,
// killed if still running when the test ends.
#ifndef TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_
#define TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
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
  // Exit status (or 128+signal), nullopt on timeout.
  std::optional<int> Wait(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return std::nullopt;
  }

 private:
  pid_t pid_ = -1;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_CHILD_PROCESS_H_
