// Parsers for the small text formats the kernel prints in sysfs. Every
// function here is total: it never crashes on any input and reports malformed
// text as INVALID_ARGUMENT naming the offending token. Each has a fuzz target.
#ifndef TOPOLOGY_SRC_KERNEL_TEXT_H_
#define TOPOLOGY_SRC_KERNEL_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

namespace topology::internal {

// Quotes at most 40 characters of untrusted text for an error message,
// escaping anything unprintable.
std::string QuoteText(std::string_view text);

// Strips leading/trailing whitespace and NUL bytes (some recorded files end
// with "\n\0").
std::string_view TrimKernelText(std::string_view text);

// Parses a decimal integer (optional sign) that fills the whole text after
// trimming.
StatusOr<int64_t> ParseDecimal(std::string_view text);

// Parses an unsigned hex number with optional "0x" prefix that fills the
// whole trimmed text and fits in `max_bits` bits.
StatusOr<uint64_t> ParseHex(std::string_view text, int max_bits);

// Parses a node distance row: whitespace-separated positive decimals.
StatusOr<std::vector<int>> ParseDistanceRow(std::string_view text);

// Reads "MemTotal" from a node meminfo file ("Node 0 MemTotal: 123 kB") and
// returns bytes.
StatusOr<uint64_t> ParseNodeMemTotal(std::string_view text);

// True for a number as the kernel names entries with it: decimal digits,
// no sign, no leading zero ("0", "12"; not "012" or "+1"). A name with
// another spelling ("node01", "hugepages-02048kB") is not the kernel's and
// would alias the entry it parses to.
bool IsCanonicalDecimal(std::string_view digits);

// The page size in bytes of a nodeN/hugepages entry ("hugepages-2048kB");
// only the canonical spelling of the number is one.
StatusOr<uint64_t> ParseHugePagesDirName(std::string_view name);

}  // namespace topology::internal

#endif  // TOPOLOGY_SRC_KERNEL_TEXT_H_
