#include "topology/pci_address.h"

#include <charconv>
#include <cstdio>
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

}  // namespace

StatusOr<PciAddress> PciAddress::Parse(std::string_view text) {
  const std::string_view t = internal::TrimKernelText(text);
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
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", domain, bus, device,
                function);
  return buf;
}

}  // namespace topology
