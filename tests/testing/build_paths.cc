#include "build_paths.h"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace topology::testing {
namespace {

struct BuildPaths {
  std::string source_dir;
  std::string fixture_cache_dir;
  std::map<std::string, std::string, std::less<>> programs;
};

const BuildPaths& Paths() {
  static const BuildPaths paths = [] {
    BuildPaths p;
    // Written by CMake: p.source_dir, p.fixture_cache_dir and one
    // p.programs entry per program target this build makes.
#include "build_paths_table.inc"
    return p;
  }();
  return paths;
}

}  // namespace

const std::string& SourceDir() { return Paths().source_dir; }

const std::string& FixtureCacheDir() { return Paths().fixture_cache_dir; }

const std::string& ProgramPath(std::string_view target) {
  const auto& programs = Paths().programs;
  const auto it = programs.find(target);
  if (it == programs.end() || it->second.empty()) {
    std::fprintf(stderr, "build_paths: this build makes no program \"%.*s\"\n",
                 static_cast<int>(target.size()), target.data());
    std::abort();
  }
  return it->second;
}

}  // namespace topology::testing
