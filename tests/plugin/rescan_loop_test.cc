// The one rescan loop of topology-device-plugin and topology-dra-driver
// (topology/plugin/rescan_loop.h), on a fake clock: which uevents start a
// pass, one pass per burst after the debounce, periodic passes, and what a
// pass is told.
#include "topology/plugin/rescan_loop.h"

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "topology/testing/fake_clock.h"
#include "topology/thread_annotations.h"

#include "wait_for.h"

namespace topology::plugin {
namespace {

using namespace std::chrono_literals;
using ::topology::testing::FakeClock;
using ::topology::testing::WaitFor;

class RescanLoopTest : public ::testing::Test {
 protected:
  void Start(std::chrono::nanoseconds interval) {
    loop_ = std::make_unique<RescanLoop>(RescanLoop::Options{
        .interval = interval, .debounce = 50ms, .clock = &clock_});
    loop_->Start([this](const RescanLoop::Pass& pass) {
      MutexLock lock(mu_);
      passes_.push_back(pass);
    });
  }
  std::vector<RescanLoop::Pass> passes() {
    MutexLock lock(mu_);
    return passes_;
  }
  // The loop is waiting on the clock (so that an Advance is seen now).
  bool Waiting() {
    return WaitFor([&] { return clock_.waiters() > 0; }, 5s);
  }
  void TearDown() override { loop_.reset(); }

  FakeClock clock_;
  Mutex mu_;
  std::vector<RescanLoop::Pass> passes_ TOPOLOGY_GUARDED_BY(mu_);
  std::unique_ptr<RescanLoop> loop_;
};

TEST_F(RescanLoopTest, ABurstOfUeventsIsOnePassAfterTheDebounce) {
  Start(0s);
  loop_->OnUevent("add", "/devices/pci0000:97/0000:97:01.0/0000:9b:00.0");
  loop_->OnUevent("bind", "/devices/pci0000:97/0000:97:01.0/0000:9b:00.0");
  ASSERT_TRUE(Waiting());
  clock_.Advance(49ms);
  ASSERT_TRUE(Waiting());
  EXPECT_TRUE(passes().empty());
  clock_.Advance(1ms);
  ASSERT_TRUE(WaitFor([&] { return passes().size() == 1; }));
  EXPECT_TRUE(passes()[0].uevent);
  EXPECT_FALSE(passes()[0].periodic);
  // Nothing more is scheduled without another uevent (and no period).
  EXPECT_FALSE(loop_->pending());
}

// The veth pairs of every pod that starts: never a rescan. Both programs
// filter the same way (they used to disagree).
TEST_F(RescanLoopTest, VirtualDevicesAreIgnored) {
  EXPECT_FALSE(RescanLoop::Relevant("/devices/virtual/net/veth1234"));
  EXPECT_TRUE(RescanLoop::Relevant("/devices/pci0000:00/0000:00:01.0"));
  EXPECT_TRUE(RescanLoop::Relevant(""));  // "closed", "overflow"
  Start(0s);
  loop_->OnUevent("add", "/devices/virtual/net/veth1234");
  EXPECT_FALSE(loop_->pending());
  loop_->OnUevent("add", "/devices/pci0000:00/0000:00:01.0");
  EXPECT_TRUE(loop_->pending());
}

TEST_F(RescanLoopTest, PeriodicPassesKeepTheirPeriodAcrossUevents) {
  Start(10s);
  ASSERT_TRUE(Waiting());
  clock_.Advance(5s);
  loop_->OnUevent("remove", "/devices/pci0000:97/0000:97:01.0/0000:9b:00.0");
  clock_.Advance(50ms);
  ASSERT_TRUE(WaitFor([&] { return passes().size() == 1; }));
  EXPECT_TRUE(passes()[0].uevent);
  ASSERT_TRUE(Waiting());
  // The period is not moved by the uevent's pass: due 10 s after the start.
  clock_.Advance(5s);
  ASSERT_TRUE(WaitFor([&] { return passes().size() == 2; }));
  EXPECT_TRUE(passes()[1].periodic);
  EXPECT_FALSE(passes()[1].uevent);
  // Not watching uevents: the pass says so (a full rescan then).
  EXPECT_FALSE(passes()[1].uevents_live);
}

TEST_F(RescanLoopTest, RequestPassRunsAtOnceAndStopEndsTheLoop) {
  Start(0s);
  loop_->RequestPass();
  ASSERT_TRUE(WaitFor([&] { return passes().size() == 1; }));
  EXPECT_TRUE(passes()[0].uevent);
  EXPECT_TRUE(loop_->running());
  loop_->Stop();
  EXPECT_FALSE(loop_->running());
  loop_->RequestPass();
  EXPECT_EQ(passes().size(), 1u);
}

}  // namespace
}  // namespace topology::plugin
