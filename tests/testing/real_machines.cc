#include "real_machines.h"

#include <cstdlib>
#include <string>
#include <system_error>

#include <unistd.h>

#include "build_paths.h"

namespace topology::testing {

std::optional<std::filesystem::path> RealMachinesDir() {
  std::error_code ec;
  if (const char* env = std::getenv("TOPOLOGY_REAL_MACHINES")) {
    if (std::filesystem::is_directory(env, ec))
      return std::filesystem::path(env);
    return std::nullopt;
  }
  // The recordings live in the repository, so a fresh clone runs every test.
  const std::filesystem::path dir =
      std::filesystem::path(SourceDir()) / "tests" / "data" / "real-machines";
  if (std::filesystem::is_directory(dir, ec)) return dir.lexically_normal();
  return std::nullopt;
}

std::optional<std::filesystem::path> UnpackRealMachine(
    const std::string& tarball) {
  const auto dir = RealMachinesDir();
  if (!dir) return std::nullopt;
  std::error_code ec;
  // Unpacked once per build tree: each test runs in its own process, and the
  // trees are read-only to the tests. Extraction goes to a private folder that
  // is renamed into place, so parallel tests never see half a tree.
  const std::filesystem::path cache = FixtureCacheDir();
  const std::filesystem::path target = cache / (tarball + ".d");
  if (!std::filesystem::exists(target, ec)) {
    const std::filesystem::path staging =
        cache / (tarball + ".tmp." + std::to_string(::getpid()));
    std::filesystem::remove_all(staging, ec);
    std::filesystem::create_directories(staging, ec);
    const std::string command = "tar -xjf '" + (*dir / tarball).string() +
                                "' -C '" + staging.string() + "'";
    if (std::system(command.c_str()) != 0) return std::nullopt;
    std::filesystem::rename(staging, target, ec);
    if (ec) std::filesystem::remove_all(staging, ec);  // another test won
  }
  for (const auto& entry : std::filesystem::directory_iterator(target, ec)) {
    if (entry.is_directory() &&
        std::filesystem::exists(entry.path() / "sys", ec)) {
      return entry.path();
    }
  }
  return std::nullopt;
}

}  // namespace topology::testing
