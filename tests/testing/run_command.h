// Runs a shell command as a user would and captures its output.
#ifndef TOPOLOGY_TESTS_TESTING_RUN_COMMAND_H_
#define TOPOLOGY_TESTS_TESTING_RUN_COMMAND_H_

#include <string>

namespace topology::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when the command did not exit normally
  std::string out;     // stdout and stderr together
};

CommandResult RunCommand(const std::string& command);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_RUN_COMMAND_H_
