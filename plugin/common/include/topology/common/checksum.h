// The checksum of the project's checkpoint records: FNV-1a 64 over the text,
// written as 16 lower-case hex digits. Not a defence against an attacker
// (the files are root's alone); it finds torn and damaged records.
#ifndef TOPOLOGY_COMMON_CHECKSUM_H_
#define TOPOLOGY_COMMON_CHECKSUM_H_

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace topology::files {

inline uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

inline std::string ChecksumHex(std::string_view text) {
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(text)));
  return hex;
}

}  // namespace topology::files

#endif  // TOPOLOGY_COMMON_CHECKSUM_H_
