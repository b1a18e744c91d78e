// A Kubernetes quantity (k8s.io/apimachinery resource.Quantity) read
// exactly enough to compare, add and step: "80Gi", "1.5", "500m", "1e3".
// The value is kept in nano units (what the API rounds to: an amount
// finer than 1n rounds up, as the API machinery's does) in 128 bits, so
// every quantity below 10^28 of at most 37 significant digits compares and
// adds exactly; any other is refused rather than rounded. Pure; no allocation.
#ifndef TOPOLOGY_COMMON_QUANTITY_H_
#define TOPOLOGY_COMMON_QUANTITY_H_

#include <compare>
#include <optional>
#include <string>
#include <string_view>

namespace topology::k8s {

// 128 bits, GCC's and Clang's (__extension__: no pedantic warning).
__extension__ typedef __int128 QuantityInt;

class Quantity {
 public:
  // The value of `text` in the API's grammar ("[+-]digits[.digits]" then
  // a suffix: n u m "" k M G T P E, Ki Mi Gi Ti Pi Ei, or e<exponent>);
  // nullopt when it is not one or too large to hold exactly.
  static std::optional<Quantity> Parse(std::string_view text);
  static Quantity FromInt(long long value) {
    return Quantity(static_cast<QuantityInt>(value) * kNano);
  }

  Quantity() = default;
  friend auto operator<=>(const Quantity&, const Quantity&) = default;
  friend bool operator==(const Quantity&, const Quantity&) = default;
  // Nullopt where the sum leaves the range.
  std::optional<Quantity> Plus(const Quantity& other) const;
  Quantity Minus(const Quantity& other) const {
    return Quantity(nanos_ - other.nanos_);
  }
  bool negative() const { return nanos_ < 0; }
  bool zero() const { return nanos_ == 0; }
  // Whether this is min + k * step for some k >= 0 (step > 0).
  bool OnStep(const Quantity& min, const Quantity& step) const;
  // The smallest min + k * step at or above this one (step > 0).
  Quantity RoundUpToStep(const Quantity& min, const Quantity& step) const;
  // Plain decimal text ("10737418240", "1.5", "0.001"), no suffix: what a
  // CDI environment variable or a log says.
  std::string ToString() const;

 private:
  static constexpr QuantityInt kNano = 1000000000;
  explicit Quantity(QuantityInt nanos) : nanos_(nanos) {}
  QuantityInt nanos_ = 0;
};

}  // namespace topology::k8s

#endif  // TOPOLOGY_COMMON_QUANTITY_H_
