// Part P.b of the device plugin conformance checklist: ListAndWatch (the
// fixture: framework_test_fixture.h).
#include <chrono>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework_test_fixture.h"
#include "socket_util.h"
#include "wait_for.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;

// --- P.b ListAndWatch -------------------------------------------------------

TEST_F(FrameworkTest, P16_FirstMessageIsImmediateAndFull) {
  auto connection = Connected(MakeDevices(16));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(1s)));
  const auto first = connection->messages()[0];
  EXPECT_LT(first.received - connection->stream_opened(), 1s);
  EXPECT_THAT(Ids(first.response), SizeIs(16));
}

TEST_F(FrameworkTest, P17_P18_HealthStringsIdsAndTopology) {
  kubelet_.Start();
  auto devices = MakeDevices(6);
  devices[1].health = plugin::Health::kUnhealthy;
  devices[2].numa_nodes.clear();
  devices[3].numa_nodes = {0, 1};
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  std::set<std::string> ids;
  const v1beta1::ListAndWatchResponse latest = *connection->latest();
  for (const auto& device : latest.devices()) {
    EXPECT_TRUE(device.health() == "Healthy" || device.health() == "Unhealthy");
    EXPECT_FALSE(device.id().empty());
    EXPECT_LE(device.id().size(), 63u);
    EXPECT_TRUE(ids.insert(device.id()).second);
    if (device.has_topology()) {
      EXPECT_GE(device.topology().nodes_size(), 1);
      for (const auto& node : device.topology().nodes())
        EXPECT_GE(node.id(), 0);
    }
  }
  EXPECT_EQ(latest.devices(1).health(), "Unhealthy");
  EXPECT_FALSE(latest.devices(2).has_topology());
  EXPECT_EQ(latest.devices(3).topology().nodes_size(), 2);

  // The publisher refuses what the kubelet would mis-read, keeping the list.
  auto bad = MakeDevices(2);
  bad[1].numa_nodes = {-1};
  EXPECT_THAT(
      publisher_->SetDevices(bad),
      StatusIs(StatusCode::kInvalidArgument, HasSubstr("negative NUMA")));
  bad = MakeDevices(2);
  bad[1].id = std::string(64, 'x');
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("63 bytes")));
  bad = MakeDevices(2);
  bad[1].id = bad[0].id;
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("twice")));
  bad[1].id = "";
  EXPECT_THAT(publisher_->SetDevices(bad),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("empty id")));
  EXPECT_THAT(publisher_->devices(), SizeIs(6));
}

TEST_F(FrameworkTest, P19_HealthChangeStreamsTheFullList) {
  kubelet_.Start();
  auto devices = MakeDevices(8);
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  devices[5].health = plugin::Health::kUnhealthy;
  const auto changed = std::chrono::steady_clock::now();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(1s)));
  const auto messages = connection->messages();
  EXPECT_LT(messages[1].received - changed, 1s);
  ASSERT_EQ(messages[1].response.devices_size(), 8);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(messages[1].response.devices(i).id(),
              messages[0].response.devices(i).id());
    EXPECT_EQ(messages[1].response.devices(i).health(),
              i == 5 ? "Unhealthy" : "Healthy");
  }
  // An unchanged list is not streamed again: the next message is the next
  // change (the stream keeps the order of the lists).
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(3, Scaled(2s)));
  EXPECT_EQ(connection->messages()[2].response.devices_size(), 7);
}

TEST_F(FrameworkTest, P20_RemovalSendsTheRemainingDevices) {
  kubelet_.Start();
  auto devices = MakeDevices(4);
  StartPlugin(devices);
  auto connection = Connection();
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  devices.erase(devices.begin() + 1);
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(1s)));
  EXPECT_THAT(Ids(*connection->latest()),
              ElementsAre("dev-0", "dev-2", "dev-3"));
}

TEST_F(FrameworkTest, P21_IdleStreamStaysOpen) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  // Nothing changes for a while: the stream neither ends nor repeats.
  EXPECT_FALSE(connection->WaitForEnd(3s).has_value());
  EXPECT_THAT(connection->messages(), SizeIs(1));
}

TEST_F(FrameworkTest, P22_P23_NewStreamsGetTheCurrentList) {
  kubelet_.Start();
  auto devices = MakeDevices(3);
  StartPlugin(devices);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  // A second stream on the same socket while the first lives (takeover).
  grpc::ClientContext context;
  auto second = first->stub().ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse response;
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(3));
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(2));
  ASSERT_TRUE(first->WaitForMessages(2, Scaled(1s)));
  EXPECT_EQ(publisher_->stats().open_streams, 2u);
  // The first stream is cancelled; later changes reach the second.
  first->Cancel();
  ASSERT_TRUE(first->WaitForEnd(2s).has_value());
  devices.pop_back();
  ASSERT_THAT(publisher_->SetDevices(devices), IsOk());
  ASSERT_TRUE(second->Read(&response));
  EXPECT_THAT(Ids(response), SizeIs(1));
  context.TryCancel();
  second->Finish().IgnoreError();
}

TEST_F(FrameworkTest, P24_CancelCyclesDoNotLeak) {
  auto connection = Connected(MakeDevices(4));
  ASSERT_NE(connection, nullptr);
  auto cycle = [&](int n) {
    for (int i = 0; i < n; ++i) {
      grpc::ClientContext context;
      auto stream = connection->stub().ListAndWatch(&context, v1beta1::Empty());
      v1beta1::ListAndWatchResponse response;
      ASSERT_TRUE(stream->Read(&response));
      context.TryCancel();
      (void)stream->Finish();
    }
  };
  cycle(50);  // warm up gRPC's lazily created threads
  // The warm-up's streams have ended (each cancelled stream is counted
  // closed once its server side has let go of it).
  ASSERT_TRUE(WaitFor([&] { return publisher_->stats().open_streams <= 1; }));
  const size_t threads = CountThreads();
  const size_t fds = CountOpenFds();
  cycle(1000);
  (void)WaitFor([&] { return publisher_->stats().open_streams <= 1; }, 1s);
  EXPECT_EQ(publisher_->stats().open_streams, 1u);  // the fake kubelet's
  // gRPC sizes its own thread pools with the load (a few threads either
  // way); a leak would grow with the 1,000 cycles.
  EXPECT_LE(CountThreads(), threads + 8);
  EXPECT_LE(CountOpenFds(), fds + 4);
}

TEST_F(FrameworkTest, P25_TenThousandDevicesInOneMessage) {
  auto connection = Connected(LongIdDevices(10000));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  const auto first = connection->messages()[0];
  EXPECT_EQ(first.response.devices_size(), 10000);
  EXPECT_LT(first.response.ByteSizeLong(), 4u << 20);
  EXPECT_LT(first.received - connection->stream_opened(), 1s);
}

TEST_F(FrameworkTest, P26_OversizedListIsRefusedNotSent) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_THAT(publisher_->SetDevices(LongIdDevices(60000)),
              StatusIs(StatusCode::kResourceExhausted,
                       HasSubstr("more than the kubelet receives")));
  EXPECT_THAT(publisher_->devices(), SizeIs(2));
  // Not sent: the next message is the next list accepted (the stream keeps
  // the order of the lists).
  ASSERT_THAT(publisher_->SetDevices(MakeDevices(3)), IsOk());
  ASSERT_TRUE(connection->WaitForMessages(2, Scaled(2s)));
  EXPECT_EQ(connection->messages()[1].response.devices_size(), 3);
  // And at start-up, before anything is served.
  plugin::PluginRunner runner(Options());
  EXPECT_THAT(
      runner
          .AddResource("example.com/other", std::make_shared<ScriptedHandler>(),
                       LongIdDevices(60000))
          .status(),
      StatusIs(StatusCode::kResourceExhausted));
}

}  // namespace
}  // namespace topology::testing
