#include "topology/common/quantity.h"

#include <algorithm>
#include <array>

namespace topology::k8s {
namespace {

// |nanos| stays below this (10^28 units): a sum of two and one more digit
// of scaling still fit in 128 bits (about 1.7 * 10^38).
constexpr QuantityInt kLimit =
    static_cast<QuantityInt>(1000000000000000000LL) * 10000000000000000000ULL;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

std::optional<Quantity> Quantity::Parse(std::string_view text) {
  size_t i = 0;
  bool minus = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) {
    minus = text[i] == '-';
    ++i;
  }
  // The digits as an integer and the power of ten they are scaled by.
  QuantityInt mantissa = 0;
  int scale = 0;  // value = mantissa * 10^scale
  size_t digits = 0;
  bool dot = false;
  bool overflow = false;
  for (; i < text.size() && (IsDigit(text[i]) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (dot) return std::nullopt;
      dot = true;
      continue;
    }
    ++digits;
    if (mantissa >= kLimit / 10) {
      // The mantissa stays below kLimit, so that every step below stays in
      // range: a further zero only scales (an integer part's) or is
      // dropped (a fraction's); a further significant digit (more than 37
      // of them) cannot be kept exactly and the text is refused.
      if (text[i] != '0') overflow = true;
      if (!dot) ++scale;
      if (!dot && scale > 40) overflow = true;
      continue;
    }
    mantissa = mantissa * 10 + (text[i] - '0');
    if (dot) --scale;
  }
  if (digits == 0 || overflow) return std::nullopt;
  const std::string_view suffix = text.substr(i);
  int exponent10 = 0;
  int exponent2 = 0;
  static constexpr std::array<std::pair<std::string_view, int>, 10> kDecimal = {
      {{"n", -9},
       {"u", -6},
       {"m", -3},
       {"", 0},
       {"k", 3},
       {"M", 6},
       {"G", 9},
       {"T", 12},
       {"P", 15},
       {"E", 18}}};
  static constexpr std::array<std::pair<std::string_view, int>, 6> kBinary = {
      {{"Ki", 10}, {"Mi", 20}, {"Gi", 30}, {"Ti", 40}, {"Pi", 50}, {"Ei", 60}}};
  bool known = false;
  for (const auto& [name, power] : kDecimal) {
    if (suffix == name) {
      exponent10 = power;
      known = true;
    }
  }
  for (const auto& [name, power] : kBinary) {
    if (suffix == name) {
      exponent2 = power;
      known = true;
    }
  }
  if (!known) {
    if (suffix.empty() || (suffix[0] != 'e' && suffix[0] != 'E')) {
      return std::nullopt;
    }
    std::string_view exponent = suffix.substr(1);
    bool negative = false;
    if (!exponent.empty() && (exponent[0] == '+' || exponent[0] == '-')) {
      negative = exponent[0] == '-';
      exponent.remove_prefix(1);
    }
    if (exponent.empty() || exponent.size() > 4) return std::nullopt;
    for (char c : exponent) {
      if (!IsDigit(c)) return std::nullopt;
      exponent10 = exponent10 * 10 + (c - '0');
    }
    if (negative) exponent10 = -exponent10;
  }
  // nanos = mantissa * 10^(scale + exponent10 + 9) * 2^exponent2, rounded
  // up where the power of ten is negative (the API rounds up below 1n).
  QuantityInt value = mantissa;
  for (int b = 0; b < exponent2; ++b) {
    value *= 2;
    if (value >= kLimit) return std::nullopt;
  }
  int power = scale + exponent10 + 9;
  for (; power > 0; --power) {
    if (value == 0) break;
    value *= 10;
    if (value >= kLimit) return std::nullopt;
  }
  bool rest = false;
  for (; power < 0; ++power) {
    rest = rest || value % 10 != 0;
    value /= 10;
  }
  if (rest) ++value;
  if (value >= kLimit) return std::nullopt;
  return Quantity(minus ? -value : value);
}

std::optional<Quantity> Quantity::Plus(const Quantity& other) const {
  const QuantityInt sum = nanos_ + other.nanos_;
  if (sum >= kLimit || sum <= -kLimit) return std::nullopt;
  return Quantity(sum);
}

bool Quantity::OnStep(const Quantity& min, const Quantity& step) const {
  if (step.nanos_ <= 0 || nanos_ < min.nanos_) return false;
  return (nanos_ - min.nanos_) % step.nanos_ == 0;
}

Quantity Quantity::RoundUpToStep(const Quantity& min,
                                 const Quantity& step) const {
  if (step.nanos_ <= 0 || nanos_ <= min.nanos_) return min;
  const QuantityInt over = (nanos_ - min.nanos_) % step.nanos_;
  return over == 0 ? *this : Quantity(nanos_ + step.nanos_ - over);
}

std::string Quantity::ToString() const {
  QuantityInt value = nanos_ < 0 ? -nanos_ : nanos_;
  QuantityInt whole = value / kNano;
  QuantityInt fraction = value % kNano;
  std::string digits;
  do {
    digits.push_back(static_cast<char>('0' + static_cast<int>(whole % 10)));
    whole /= 10;
  } while (whole > 0);
  if (nanos_ < 0) digits.push_back('-');
  std::reverse(digits.begin(), digits.end());
  if (fraction == 0) return digits;
  std::string tail(9, '0');
  for (int k = 8; k >= 0; --k) {
    tail[static_cast<size_t>(k)] =
        static_cast<char>('0' + static_cast<int>(fraction % 10));
    fraction /= 10;
  }
  tail.erase(tail.find_last_not_of('0') + 1);
  return digits + "." + tail;
}

}  // namespace topology::k8s
