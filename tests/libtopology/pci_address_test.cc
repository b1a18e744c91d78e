#include "topology/pci_address.h"

#include <cstdint>
#include <cstdio>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "status_matchers.h"

namespace topology {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

TEST(PciAddressTest, ParsesFullAndShortForms) {
  auto a = PciAddress::Parse("0000:3B:00.1");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->bus, 0x3b);
  EXPECT_EQ(a->function, 1);
  EXPECT_EQ(a->ToString(), "0000:3b:00.1");
  auto b = PciAddress::Parse("3b:1f.7");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->domain, 0u);
  EXPECT_EQ(b->device, 0x1f);
}

TEST(PciAddressTest, WideDomains) {
  auto a = PciAddress::Parse("10000:00:04.0");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->domain, 0x10000u);
  EXPECT_EQ(a->ToString(), "10000:00:04.0");
  EXPECT_TRUE(PciAddress::Parse("ffffffff:00:00.0").ok());
  EXPECT_FALSE(PciAddress::Parse("100000000:00:00.0").ok());
}

// ToString writes what "%04x:%02x:%02x.%x" prints, for every field value
// the struct can hold (not only those Parse accepts).
TEST(PciAddressTest, ToStringPrintsWhatPrintfWould) {
  int checked = 0;
  for (uint32_t domain : {0x0U, 0x1U, 0xabcU, 0xffffU, 0x10000U, 0xfffffU,
                          0x1234567U, 0x80000000U, 0xffffffffU}) {
    for (uint8_t bus : {uint8_t{0}, uint8_t{0x0a}, uint8_t{0xff}}) {
      for (uint8_t device : {uint8_t{0}, uint8_t{0x1f}, uint8_t{0xc3}}) {
        for (uint8_t function :
             {uint8_t{0}, uint8_t{7}, uint8_t{0x10}, uint8_t{0xff}}) {
          PciAddress a;
          a.domain = domain;
          a.bus = bus;
          a.device = device;
          a.function = function;
          char expected[32];
          std::snprintf(expected, sizeof(expected), "%04x:%02x:%02x.%x", domain,
                        bus, device, function);
          EXPECT_EQ(a.ToString(), expected);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 9 * 3 * 3 * 4);
}

TEST(PciAddressTest, RejectsMalformedAddresses) {
  EXPECT_THAT(PciAddress::Parse("0000:3b:20.0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device")));
  EXPECT_THAT(PciAddress::Parse("0000:3b:00.8"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("function")));
  EXPECT_THAT(PciAddress::Parse("0000:3b0:00.0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("bus")));
  EXPECT_FALSE(PciAddress::Parse("").ok());
  EXPECT_FALSE(PciAddress::Parse(":00:00.0").ok());
  EXPECT_FALSE(PciAddress::Parse("0000:17:00.0:pcie001").ok());
  EXPECT_FALSE(PciAddress::Parse("pci0000:17").ok());
  EXPECT_FALSE(PciAddress::Parse("0000:3b:00.").ok());
  EXPECT_FALSE(PciAddress::Parse("0000:-1:00.0").ok());
}

// DDDD:BB:DD.F is parsed on a fast path; with one more digit of domain the
// same address takes the general parser. Both agree on every address and
// on every one-character corruption of one (but the first character: a
// blank there is trimmed, not the zero put before it).
TEST(PciAddressTest, CanonicalFormAgreesWithTheGeneralParser) {
  const std::string bad = "g:.x -+G";
  int checked = 0;
  for (const char* text : {"0000:00:00.0", "0000:3b:1f.7", "ABCD:EF:1A.3",
                           "ffff:ff:00.1", "0001:80:02.6"}) {
    const std::string canonical = text;
    auto fast = PciAddress::Parse(canonical);
    auto general = PciAddress::Parse("0" + canonical);
    ASSERT_TRUE(fast.ok()) << canonical;
    ASSERT_TRUE(general.ok()) << canonical;
    EXPECT_EQ(*fast, *general) << canonical;
    for (size_t i = 1; i < canonical.size(); ++i) {
      for (char c : bad) {
        std::string changed = canonical;
        changed[i] = c;
        auto a = PciAddress::Parse(changed);
        auto b = PciAddress::Parse("0" + changed);
        EXPECT_EQ(a.ok(), b.ok()) << changed;
        if (a.ok() && b.ok()) {
          EXPECT_EQ(*a, *b) << changed;
        }
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 5 * 11 * 8);
  // Out of range on the fast path: the general parser's messages.
  EXPECT_THAT(PciAddress::Parse("0000:3b:20.0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("device")));
  EXPECT_THAT(PciAddress::Parse("0000:3b:1f.8"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("function")));
}

TEST(PciAddressTest, OrderingAndSlots) {
  const PciAddress a = *PciAddress::Parse("0000:3b:00.0");
  const PciAddress b = *PciAddress::Parse("0000:3b:00.1");
  const PciAddress c = *PciAddress::Parse("0001:00:00.0");
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_TRUE(a.SameSlot(b));
  EXPECT_FALSE(a.SameSlot(c));
}

}  // namespace
}  // namespace topology
