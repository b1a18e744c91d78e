// ReadTextFile(): a configuration, manifest or data file that a user or an
// operator named, read whole but never past a bound. A directory, a device
// such as /dev/zero, a FIFO fed forever or a file of hundreds of MiB costs at
// most `max_bytes` of memory and gets an error naming the file and the
// limit. Thread safety: a free function, safe from any thread.
#ifndef TOPOLOGY_TEXT_FILE_H_
#define TOPOLOGY_TEXT_FILE_H_

#include <cstddef>
#include <string>

#include "topology/export.h"
#include "topology/status.h"

namespace topology {

// The contents of `path` ("-": standard input). Links are followed, as for
// any file a user names on a command line. INVALID_ARGUMENT, naming `path`,
// when it does not exist, is a directory, cannot be read, or holds more
// than `max_bytes` (a regular file is refused by its size before any read;
// anything else is read up to the bound and no further).
TOPOLOGY_EXPORT StatusOr<std::string> ReadTextFile(const std::string& path,
                                                   size_t max_bytes);

// "4 MiB", "512 KiB", "100 bytes": a limit as error messages give it.
TOPOLOGY_EXPORT std::string ByteSize(size_t bytes);

}  // namespace topology

#endif  // TOPOLOGY_TEXT_FILE_H_
