// Builds against the installed libtopology::common alone (no framework) and
// runs it: a Go duration parsed, outside text quoted, a file written
// atomically under DIR and read back without following links. Exit 0 when
// all of that held.
//   common-consumer DIR
#include <chrono>
#include <filesystem>
#include <iostream>

#include "topology/common/duration.h"
#include "topology/common/safe_file.h"
#include "topology/common/text_util.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: common-consumer DIR\n";
    return 2;
  }
  const std::filesystem::path dir = std::filesystem::absolute(argv[1]);
  std::filesystem::create_directories(dir);
  auto duration = topology::common::ParseDuration("1m30s");
  if (!duration.ok() || *duration != std::chrono::seconds(90)) {
    std::cerr << "ParseDuration(\"1m30s\") is not 90 s\n";
    return 1;
  }
  if (topology::text::Quoted("a\x01") != "\"a\\x01\"") {
    std::cerr << "Quoted does not escape a control character: "
              << topology::text::Quoted("a\x01") << "\n";
    return 1;
  }
  const std::filesystem::path file = dir / "state";
  if (auto written = topology::files::WriteFileAtomically(file, "ok\n", 0600);
      !written.ok()) {
    std::cerr << written.ToString() << "\n";
    return 1;
  }
  auto read = topology::files::ReadRegularFile(file, 64);
  if (!read.ok() || *read != "ok\n") {
    std::cerr << "the file written is not read back\n";
    return 1;
  }
  return 0;
}
