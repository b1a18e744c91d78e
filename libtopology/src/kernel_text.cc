#include "kernel_text.h"

#include <algorithm>
#include <charconv>
#include <limits>
#include <string>

namespace topology::internal {
namespace {

bool IsSpaceOrNul(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' ||
         c == '\f' || c == '\0';
}

}  // namespace

std::string QuoteText(std::string_view text) {
  std::string out = "\"";
  for (char c : text.substr(0, 40)) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f && c != '"' && c != '\\') {
      out += c;
    } else {
      static constexpr char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 0xf];
    }
  }
  if (text.size() > 40) out += "...";
  out += "\"";
  return out;
}

std::string_view TrimKernelText(std::string_view text) {
  while (!text.empty() && IsSpaceOrNul(text.front())) text.remove_prefix(1);
  while (!text.empty() && IsSpaceOrNul(text.back())) text.remove_suffix(1);
  return text;
}

StatusOr<int64_t> ParseDecimal(std::string_view text) {
  const std::string_view t = TrimKernelText(text);
  std::string_view digits = t;
  if (!digits.empty() && digits.front() == '+') digits.remove_prefix(1);
  int64_t value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value);
  if (digits.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgumentError("not a decimal integer: " + QuoteText(t));
  }
  return value;
}

StatusOr<uint64_t> ParseHex(std::string_view text, int max_bits) {
  std::string_view t = TrimKernelText(text);
  std::string_view digits = t;
  if (digits.size() >= 2 && digits[0] == '0' &&
      (digits[1] == 'x' || digits[1] == 'X')) {
    digits.remove_prefix(2);
  }
  uint64_t value = 0;
  const char* end = digits.data() + digits.size();
  auto [ptr, ec] = std::from_chars(digits.data(), end, value, 16);
  if (digits.empty() || ec != std::errc() || ptr != end) {
    return InvalidArgumentError("not a hex number: " + QuoteText(t));
  }
  if (max_bits < 64 && (value >> max_bits) != 0) {
    return InvalidArgumentError("hex number wider than " +
                                std::to_string(max_bits) +
                                " bits: " + QuoteText(t));
  }
  return value;
}

StatusOr<std::vector<int>> ParseDistanceRow(std::string_view text) {
  std::vector<int> row;
  std::string_view rest = TrimKernelText(text);
  while (!rest.empty()) {
    size_t len = 0;
    while (len < rest.size() && !IsSpaceOrNul(rest[len])) ++len;
    const std::string_view token = rest.substr(0, len);
    int value = 0;
    auto [ptr, ec] =
        std::from_chars(token.data(), token.data() + token.size(), value);
    if (ec != std::errc() || ptr != token.data() + token.size() || value <= 0) {
      return InvalidArgumentError("bad distance " + QuoteText(token) +
                                  " (want a positive integer)");
    }
    row.push_back(value);
    rest.remove_prefix(len);
    while (!rest.empty() && IsSpaceOrNul(rest.front())) rest.remove_prefix(1);
  }
  if (row.empty()) return InvalidArgumentError("empty distance row");
  return row;
}

StatusOr<uint64_t> ParseNodeMemTotal(std::string_view text) {
  static constexpr std::string_view kKey = "MemTotal:";
  const size_t at = text.find(kKey);
  if (at == std::string_view::npos) {
    return InvalidArgumentError("no MemTotal line");
  }
  std::string_view rest = text.substr(at + kKey.size());
  while (!rest.empty() && IsSpaceOrNul(rest.front())) rest.remove_prefix(1);
  uint64_t kib = 0;
  auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), kib);
  if (ec != std::errc() || ptr == rest.data()) {
    return InvalidArgumentError("bad MemTotal value " +
                                QuoteText(rest.substr(0, rest.find('\n'))));
  }
  if (kib > std::numeric_limits<uint64_t>::max() / 1024) {
    return InvalidArgumentError("MemTotal overflows");
  }
  return kib * 1024;
}

bool IsCanonicalDecimal(std::string_view digits) {
  if (digits.empty() || (digits.size() > 1 && digits.front() == '0')) {
    return false;
  }
  return std::all_of(digits.begin(), digits.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

StatusOr<uint64_t> ParseHugePagesDirName(std::string_view name) {
  static constexpr std::string_view kPrefix = "hugepages-";
  static constexpr std::string_view kSuffix = "kB";
  if (!name.starts_with(kPrefix) || !name.ends_with(kSuffix) ||
      name.size() <= kPrefix.size() + kSuffix.size()) {
    return InvalidArgumentError(QuoteText(name) +
                                " is not a hugepages-<size>kB entry");
  }
  const std::string_view digits = name.substr(
      kPrefix.size(), name.size() - kPrefix.size() - kSuffix.size());
  uint64_t kib = 0;
  auto [ptr, ec] =
      std::from_chars(digits.data(), digits.data() + digits.size(), kib);
  if (!IsCanonicalDecimal(digits) || ec != std::errc() ||
      ptr != digits.data() + digits.size() || kib == 0 ||
      kib > std::numeric_limits<uint64_t>::max() / 1024) {
    return InvalidArgumentError("bad page size in " + QuoteText(name));
  }
  return kib * 1024;
}

}  // namespace topology::internal
