// A uniquely named temporary directory removed with its contents on
// destruction.
#ifndef TOPOLOGY_TESTS_TESTING_TEMP_DIR_H_
#define TOPOLOGY_TESTS_TESTING_TEMP_DIR_H_

#include <filesystem>

namespace topology::testing {

class TempDir {
 public:
  TempDir();
  // Below `parent` (e.g. a tmpfs) instead of the system's temporary
  // directory.
  explicit TempDir(const std::filesystem::path& parent);
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_TESTING_TEMP_DIR_H_
