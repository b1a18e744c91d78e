#include "topology/pci_address.h"

#include <algorithm>
#include <charconv>
#include <cstddef>
#include <string>

#include "kernel_text.h"

namespace topology {
namespace {

using internal::QuoteText;

bool ParseHexField(std::string_view field, size_t max_digits, uint32_t* out) {
  if (field.empty() || field.size() > max_digits) return false;
  auto [ptr, ec] =
      std::from_chars(field.data(), field.data() + field.size(), *out, 16);
  return ec == std::errc() && ptr == field.data() + field.size();
}

// 0-15 for a hex digit of either case, -1 otherwise.
constexpr int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The canonical form DDDD:BB:DD.F, as the kernel and the kubelet write it:
// what every device id of a request looks like, parsed without splitting.
// False (and nothing stored) for anything else, which the general parser
// takes.
bool ParseCanonical(std::string_view t, PciAddress* out) {
  if (t.size() != 12 || t[4] != ':' || t[7] != ':' || t[10] != '.') {
    return false;
  }
  uint32_t value[12] = {};
  for (size_t i : {0U, 1U, 2U, 3U, 5U, 6U, 8U, 9U, 11U}) {
    const int digit = HexDigit(t[i]);
    if (digit < 0) return false;
    value[i] = static_cast<uint32_t>(digit);
  }
  const uint32_t device = value[8] << 4 | value[9];
  if (device > 0x1f || value[11] > 7) return false;
  out->domain = value[0] << 12 | value[1] << 8 | value[2] << 4 | value[3];
  out->bus = static_cast<uint8_t>(value[5] << 4 | value[6]);
  out->device = static_cast<uint8_t>(device);
  out->function = static_cast<uint8_t>(value[11]);
  return true;
}

}  // namespace

StatusOr<PciAddress> PciAddress::Parse(std::string_view text) {
  const std::string_view t = internal::TrimKernelText(text);
  if (PciAddress address; ParseCanonical(t, &address)) return address;
  const auto fail = [&](std::string_view what) -> Status {
    return InvalidArgumentError("bad PCI address " + QuoteText(t) + ": " +
                                std::string(what) +
                                " (want DDDD:BB:DD.F or BB:DD.F)");
  };
  const size_t dot = t.rfind('.');
  if (dot == std::string_view::npos) return fail("no '.' before function");
  const std::string_view head = t.substr(0, dot);
  const std::string_view func_text = t.substr(dot + 1);
  const size_t last_colon = head.rfind(':');
  if (last_colon == std::string_view::npos) return fail("no ':' before device");
  const std::string_view dev_text = head.substr(last_colon + 1);
  std::string_view bus_text = head.substr(0, last_colon);
  std::string_view domain_text;
  const size_t first_colon = bus_text.rfind(':');
  if (first_colon != std::string_view::npos) {
    domain_text = bus_text.substr(0, first_colon);
    bus_text = bus_text.substr(first_colon + 1);
    if (domain_text.empty()) return fail("empty domain");
  }
  uint32_t domain = 0;
  uint32_t bus = 0;
  uint32_t dev = 0;
  uint32_t func = 0;
  if (!domain_text.empty() && !ParseHexField(domain_text, 8, &domain)) {
    return fail("domain must be 1 to 8 hex digits");
  }
  if (!ParseHexField(bus_text, 2, &bus))
    return fail("bus must be 2 hex digits");
  if (!ParseHexField(dev_text, 2, &dev) || dev > 0x1f) {
    return fail("device must be 00 to 1f");
  }
  if (!ParseHexField(func_text, 1, &func) || func > 7) {
    return fail("function must be 0 to 7");
  }
  PciAddress address;
  address.domain = domain;
  address.bus = static_cast<uint8_t>(bus);
  address.device = static_cast<uint8_t>(dev);
  address.function = static_cast<uint8_t>(func);
  return address;
}

std::string PciAddress::ToString() const {
  // What "%04x:%02x:%02x.%x" prints, without printf's parsing of the
  // format: every device's address is written this way in every document.
  char buf[24];
  char* at = buf;
  const auto hex = [&](uint32_t value, ptrdiff_t min_digits) {
    char digits[8];
    char* const end =
        std::to_chars(digits, digits + sizeof(digits), value, 16).ptr;
    at = std::fill_n(at, std::max<ptrdiff_t>(0, min_digits - (end - digits)),
                     '0');
    at = std::copy(digits, end, at);
  };
  hex(domain, 4);
  *at++ = ':';
  hex(bus, 2);
  *at++ = ':';
  hex(device, 2);
  *at++ = '.';
  hex(function, 1);
  return std::string(buf, at);
}

}  // namespace topology
