#include "topology/text_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace topology {

std::string ByteSize(size_t bytes) {
  if (bytes >= (1U << 20) && bytes % (1U << 20) == 0) {
    return std::to_string(bytes >> 20) + " MiB";
  }
  if (bytes >= (1U << 10) && bytes % (1U << 10) == 0) {
    return std::to_string(bytes >> 10) + " KiB";
  }
  return std::to_string(bytes) + " bytes";
}

StatusOr<std::string> ReadTextFile(const std::string& path, size_t max_bytes) {
  const bool standard_input = path == "-";
  const std::string name = standard_input ? "standard input" : path;
  const int fd =
      standard_input ? STDIN_FILENO : open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return InvalidArgumentError("cannot read " + name + ": " +
                                std::strerror(errno));
  }
  struct Closer {
    int fd;
    bool own;
    ~Closer() {
      if (own) close(fd);
    }
  } closer{fd, !standard_input};
  struct stat info {};
  if (fstat(fd, &info) != 0) {
    return InvalidArgumentError("cannot read " + name + ": " +
                                std::strerror(errno));
  }
  if (S_ISDIR(info.st_mode)) {
    return InvalidArgumentError(name + " is a directory, not a file");
  }
  const std::string too_large =
      name + " is larger than " + ByteSize(max_bytes) + ", the limit";
  if (S_ISREG(info.st_mode) &&
      static_cast<uint64_t>(info.st_size) > max_bytes) {
    return InvalidArgumentError(too_large);
  }
  std::string text;
  char buffer[16384];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return InvalidArgumentError("cannot read " + name + ": " +
                                  std::strerror(errno));
    }
    if (n == 0) break;
    if (text.size() + static_cast<size_t>(n) > max_bytes) {
      return InvalidArgumentError(too_large);
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  return text;
}

}  // namespace topology
