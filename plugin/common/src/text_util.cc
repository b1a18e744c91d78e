#include "topology/common/text_util.h"

#include <cstdio>

namespace topology::text {
namespace {

// Length of the UTF-8 sequence starting at text[i], or 0 if invalid.
size_t SequenceLength(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) {
    return static_cast<unsigned char>(text[k]);
  };
  const unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length = 0;
  unsigned int min = 0;
  unsigned int code = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min = 0x80, code = lead & 0x1Fu;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min = 0x800, code = lead & 0x0Fu;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min = 0x10000, code = lead & 0x07u;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3Fu);
  }
  if (code < min || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) {
    return 0;
  }
  return length;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t i) {
  return SequenceLength(text, i);
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = SequenceLength(text, i);
    if (length == 0) return false;
    i += length;
  }
  return true;
}

size_t InvalidUtf8Line(std::string_view text) {
  size_t line = 1;
  for (size_t i = 0; i < text.size();) {
    const size_t length = SequenceLength(text, i);
    if (length == 0) return line;
    if (text[i] == '\n') ++line;
    i += length;
  }
  return 0;
}

std::string Quoted(std::string_view text, size_t limit) {
  std::string out = "\"";
  size_t i = 0;
  while (i < text.size() && out.size() < limit + 1) {
    const size_t length = SequenceLength(text, i);
    const auto lead = static_cast<unsigned char>(text[i]);
    if (length == 0 || (length == 1 && (lead < 0x20 || lead == 0x7F))) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\x%02x", lead);
      out += escaped;
      ++i;
    } else {
      out.append(text.substr(i, length));
      i += length;
    }
  }
  out += "\"";
  if (i < text.size()) {
    out += "... (" + std::to_string(text.size()) + " bytes)";
  }
  return out;
}

}  // namespace topology::text
