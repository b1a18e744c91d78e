// The plugin's /healthz, /readyz and /metrics port against hostile peers on
// loopback: the kubelet's probe must keep being answered however one peer,
// or many, hold and trickle connections.
#include "topology/plugin/http_endpoint.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "http_attack.h"
#include "status_matchers.h"
#include "wait_for.h"

namespace topology::plugin {
namespace {

using namespace std::chrono_literals;
using ::testing::Each;
using ::testing::Eq;
using topology::testing::IsOk;
using topology::testing::ProbeFrom;
using topology::testing::SlowLoris;
using topology::testing::TimeUntilClosed;
using topology::testing::WaitFor;

class HttpEndpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto http = HttpEndpoint::Start(
        "127.0.0.1:0", {.health_problem = [] { return std::string(); },
                        .metrics = [] { return std::string("up 1\n"); }});
    ASSERT_THAT(http.status(), IsOk());
    http_ = std::move(*http);
    port_ = http_->port();
  }

  // `count` probes from `source`, 50 ms apart, as the kubelet sends them:
  // each one's status code.
  std::vector<int> Probes(const std::string& source, int count) const {
    std::vector<int> codes;
    for (int i = 0; i < count; ++i) {
      codes.push_back(ProbeFrom(source, port_, "/healthz", 1000ms));
      std::this_thread::sleep_for(50ms);
    }
    return codes;
  }

  // Waits until `attack` holds `count` connections (the client's view).
  static void WaitForOpen(const SlowLoris& attack, int count) {
    ASSERT_TRUE(WaitFor([&] { return attack.open() >= count; }, 5s))
        << attack.open() << " of " << count << " open";
  }

  std::unique_ptr<HttpEndpoint> http_;
  int port_ = 0;
};

// One pod holding 200 half-sent requests, re-opened as they are closed:
// every probe from the node is answered.
TEST_F(HttpEndpointTest, SlowLorisFromOnePeerNeverFailsTheProbe) {
  SlowLoris attack(port_, "127.0.0.3", 200);
  WaitForOpen(attack, 200);
  EXPECT_THAT(Probes("127.0.0.2", 30), Each(Eq(200)));
  // It was not merely let in: its connections were cut to make room.
  EXPECT_GT(attack.reopened(), 0U);
}

// Twenty pods with ten slow connections each (more than the table holds):
// the probe still gets in, at the cost of the heaviest peer.
TEST_F(HttpEndpointTest, FloodFromManyPeersNeverFailsTheProbe) {
  std::vector<std::unique_ptr<SlowLoris>> attacks;
  attacks.reserve(20);
  for (int i = 0; i < 20; ++i) {
    attacks.push_back(std::make_unique<SlowLoris>(
        port_, "127.0.1." + std::to_string(i + 1), 10));
  }
  for (const auto& attack : attacks) WaitForOpen(*attack, 10);
  EXPECT_THAT(Probes("127.0.0.2", 20), Each(Eq(200)));
}

// A host-network pod shares the node's address with the kubelet, so the
// two cannot be told apart by address: the probe gets in as the newest of
// that address and is answered while the attacker's connections turn over.
// What the kubelet needs holds: never three failed probes in a row (its
// failureThreshold), and nearly every probe answered.
TEST_F(HttpEndpointTest, SlowLorisFromTheProbesOwnAddress) {
  SlowLoris attack(port_, "127.0.0.2", 100);
  WaitForOpen(attack, 100);
  const std::vector<int> codes = Probes("127.0.0.2", 40);
  int answered = 0;
  int failed_in_a_row = 0;
  for (int code : codes) {
    answered += code == 200 ? 1 : 0;
    failed_in_a_row = code == 200 ? 0 : failed_in_a_row + 1;
    EXPECT_LT(failed_in_a_row, 3) << ::testing::PrintToString(codes);
  }
  EXPECT_GE(answered, 36) << ::testing::PrintToString(codes);
}

// A request that does not arrive whole within 2 s is cut, whatever it
// sends; headers over 8 KiB are refused at once.
TEST_F(HttpEndpointTest, RequestsHaveAShortDeadlineAndABoundedSize) {
  const auto slow =
      TimeUntilClosed("127.0.0.4", port_, "GET /healthz HTTP/1.1\r\n", 6000ms);
  EXPECT_GE(slow, 1500ms);
  EXPECT_LE(slow, 3500ms);
  const std::string huge =
      "GET /healthz HTTP/1.1\r\nX-Big: " + std::string(size_t{16} << 10, 'a') +
      "\r\n\r\n";
  EXPECT_LT(TimeUntilClosed("127.0.0.4", port_, huge, 6000ms), 1000ms);
  const std::string body =
      "GET /healthz HTTP/1.1\r\nContent-Length: 4\r\n\r\nabcd";
  EXPECT_LT(TimeUntilClosed("127.0.0.4", port_, body, 6000ms), 1000ms);
}

// The scrape is answered too while a peer attacks.
TEST_F(HttpEndpointTest, MetricsAnsweredDuringAnAttack) {
  SlowLoris attack(port_, "127.0.0.3", 100);
  WaitForOpen(attack, 100);
  auto metrics = HttpGet(port_, "/metrics");
  ASSERT_THAT(metrics.status(), IsOk());
  EXPECT_EQ(metrics->first, 200);
  EXPECT_EQ(metrics->second, "up 1\n");
}

}  // namespace
}  // namespace topology::plugin
