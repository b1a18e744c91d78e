// Text checks shared by every reader of outside input (the host module, the
// device plugin framework): UTF-8 validation (protobuf strings and JSON
// replies require it) and bounded quoting, so that an error message never
// echoes a huge or binary input, nor a line break that forges a log line.
#ifndef TOPOLOGY_COMMON_TEXT_UTIL_H_
#define TOPOLOGY_COMMON_TEXT_UTIL_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace topology::text {

// Whether `text` is well-formed UTF-8 (no overlong forms, no surrogates).
bool IsValidUtf8(std::string_view text);

// The length of the UTF-8 sequence at `text[i]` (i < text.size()), 0 when
// it is not a valid one (overlong forms, surrogates and values past
// U+10FFFF included).
size_t Utf8SequenceLength(std::string_view text, size_t i);

// The line (from 1) holding the first byte that is not valid UTF-8; 0 when
// all of `text` is.
size_t InvalidUtf8Line(std::string_view text);

// `text` in double quotes, cut to at most `limit` bytes on a character
// boundary with the full size appended when longer; bytes that are not
// valid UTF-8 or are control characters are shown as \xNN.
std::string Quoted(std::string_view text, size_t limit = 64);

}  // namespace topology::text

#endif  // TOPOLOGY_COMMON_TEXT_UTIL_H_
