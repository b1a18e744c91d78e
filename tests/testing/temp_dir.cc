#include "temp_dir.h"

#include <system_error>

#include <boost/filesystem.hpp>

namespace topology::testing {

// std::filesystem has no unique-name generator; Boost.Filesystem's
// unique_path() is the well-kept one.
TempDir::TempDir()
    : TempDir(boost::filesystem::temp_directory_path().string()) {}

TempDir::TempDir(const std::filesystem::path& parent) {
  const boost::filesystem::path unique =
      boost::filesystem::unique_path(boost::filesystem::path(parent.string()) /
                                     "topology-test-%%%%-%%%%-%%%%");
  path_ = unique.string();
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  // Hostile-tree tests may leave unreadable modes behind.
  std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                               std::filesystem::perm_options::add, ec);
  std::filesystem::remove_all(path_, ec);
}

}  // namespace topology::testing
