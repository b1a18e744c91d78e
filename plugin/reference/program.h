// What the reference programs (topology-device-plugin, topology-dra-driver)
// do alike around their work: read the command line as Go's flags take it,
// and end with one line rather than an abort when something is thrown.
#ifndef TOPOLOGY_DEVICE_PLUGIN_PROGRAM_H_
#define TOPOLOGY_DEVICE_PLUGIN_PROGRAM_H_

#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "topology/common/go_flags.h"
#include "topology/common/guarded.h"

namespace topology::device_plugin {

// Parses `argv` into `app`, "-v=2" and "-config=..." as Go's flags take
// them. nullopt to go on; else the exit status: 0 after --help or
// --version, `usage_exit` after a bad command line (said by CLI11).
inline std::optional<int> ParseCommandLine(CLI::App& app, int argc, char** argv,
                                           int usage_exit) {
  try {
    std::vector<std::string> go_style = common::GoStyleArguments(argc, argv);
    std::vector<const char*> args;
    args.reserve(go_style.size());
    for (const std::string& arg : go_style) args.push_back(arg.c_str());
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : usage_exit;
  }
  return std::nullopt;
}

// The project's one program guard (topology/common/guarded.h): anything
// thrown past `run` ends the program with one line naming it and exit 1.
using common::RunGuarded;

// A program's main, in the pattern of the kubelet's cmd/kubelet/app: the
// Options' flags bound (AddFlags) and parsed, the Options completed
// (Complete: defaults, validation; a refusal said on stderr as
// "<program>: ...", exit `usage_exit`), then `run(options, argv[0])`.
template <typename Options, typename Run>
int ParseCompleteAndRun(const char* program, CLI::App& app, int argc,
                        char** argv, int usage_exit, Run run) {
  Options options;
  options.AddFlags(app);
  if (auto done = ParseCommandLine(app, argc, argv, usage_exit)) return *done;
  if (auto completed = options.Complete(); !completed.ok()) {
    std::cerr << program << ": " << completed.message() << "\n";
    return usage_exit;
  }
  return run(options, argv[0]);
}

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_PROGRAM_H_
