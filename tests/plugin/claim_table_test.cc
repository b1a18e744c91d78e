// The DRA runner's claim table (claim_table.h): a change durable before it
// is visible, and one call at a time on a claim, each waiter woken by its
// own claim's release only, within its deadline on the runner's clock.
#include "claim_table.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/testing/fake_clock.h"

#include "status_matchers.h"
#include "temp_dir.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

using namespace std::chrono_literals;
using ::topology::testing::FakeClock;
using ::topology::testing::IsOk;
using ::topology::testing::WaitFor;

PreparedClaim Claim(const std::string& uid) {
  return {.ref = {"ns", uid, "c"}, .devices = {}, .unpreparing = false};
}

// A claim is visible only once the checkpoint holds it; a write that
// fails leaves the table as it was; a table reloaded from the file holds
// what was committed.
TEST(ClaimTableTest, AClaimIsVisibleOnlyOnceItIsDurable) {
  ::topology::testing::TempDir dir;
  FakeClock clock;
  ClaimTable table(dir.path() / "claims.json", &clock);
  ASSERT_THAT(table.Commit("u-1", Claim("u-1")), IsOk());
  EXPECT_TRUE(table.Find("u-1").has_value());

  // The checkpoint cannot be written (its path is a directory now).
  std::filesystem::remove(dir.path() / "claims.json");
  std::filesystem::create_directory(dir.path() / "claims.json");
  EXPECT_FALSE(table.Commit("u-2", Claim("u-2")).ok());
  EXPECT_FALSE(table.Find("u-2").has_value());
  EXPECT_FALSE(table.Commit("u-1", std::nullopt).ok());
  EXPECT_TRUE(table.Find("u-1").has_value());

  std::filesystem::remove(dir.path() / "claims.json");
  ASSERT_THAT(table.Commit("u-3", Claim("u-3")), IsOk());
  ClaimTable again(dir.path() / "claims.json", &clock);
  ASSERT_THAT(again.Reload(), IsOk());
  EXPECT_EQ(again.Uids(), (std::set<std::string>{"u-1", "u-3"}));
}

// One call at a time on a claim: a second waits for the first's release
// (and only for it: another claim's turn is had at once); a waiter whose
// deadline passes gives up, saying so; Stop ends every wait.
TEST(ClaimTableTest, OneTurnAtATimePerClaimWithinTheDeadline) {
  ::topology::testing::TempDir dir;
  FakeClock clock;
  ClaimTable table(dir.path() / "claims.json", &clock);
  auto first =
      std::make_optional<ClaimTable::Turn>(table, "u-1", clock.Now() + 10s);
  ASSERT_TRUE(first->held());
  {
    const ClaimTable::Turn other(table, "u-2", clock.Now() + 10s);
    EXPECT_TRUE(other.held());
  }
  auto second = std::async(std::launch::async, [&] {
    const ClaimTable::Turn turn(table, "u-1", clock.Now() + 10s);
    return turn.held();
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }, 5s));
  first.reset();  // released: the waiter of u-1 has its turn
  EXPECT_TRUE(second.get());

  const ClaimTable::Turn held(table, "u-1", clock.Now() + 10s);
  auto late = std::async(std::launch::async, [&] {
    const ClaimTable::Turn turn(table, "u-1", clock.Now() + 10s);
    return std::pair(turn.held(), turn.why());
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }, 5s));
  clock.Advance(11s);
  const auto [had, why] = late.get();
  EXPECT_FALSE(had);
  EXPECT_THAT(why, ::testing::HasSubstr("deadline passed"));

  auto stopped = std::async(std::launch::async, [&] {
    const ClaimTable::Turn turn(table, "u-1", clock.Now() + 10s);
    return std::pair(turn.held(), turn.why());
  });
  ASSERT_TRUE(WaitFor([&] { return clock.waiters() == 1; }, 5s));
  table.Stop();
  const auto [had_after_stop, why_stopped] = stopped.get();
  EXPECT_FALSE(had_after_stop);
  EXPECT_THAT(why_stopped, ::testing::HasSubstr("stopping"));
}

}  // namespace
}  // namespace topology::draplugin
