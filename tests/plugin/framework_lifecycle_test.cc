// Part P.f of the device plugin conformance checklist, lifecycle (kubelet
// restarts, denials, stop), and the hardening beyond the checklist (the
// fixture: framework_test_fixture.h).
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <string>

#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "framework_test_fixture.h"
#include "socket_util.h"
#include "wait_for.h"

namespace topology::testing {
namespace {

using namespace std::chrono_literals;

// --- P.f Lifecycle ----------------------------------------------------------

TEST_F(FrameworkTest, P49_KubeletRestartInTheRealOrder) {
  auto first = Connected(MakeDevices(5));
  ASSERT_NE(first, nullptr);
  kubelet_.Restart(1s);
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->request().endpoint(), first->request().endpoint());
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / second->request().endpoint()));
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(1s)));
  EXPECT_THAT(Ids(*second->latest()), SizeIs(5));
}

// A node whose other daemons used up its inotify instances: the runner
// lists the plugin directory instead (what poll_plugin_dir asks for), and
// a kubelet restart is still noticed and registered again.
TEST_F(FrameworkTest, KubeletRestartNoticedWhenThePluginDirectoryIsListed) {
  kubelet_.Start();
  auto options = Options();
  options.poll_plugin_dir = true;
  StartPlugin(MakeDevices(4), options);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  kubelet_.Restart(1s);
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(second->request().endpoint(), first->request().endpoint());
  ASSERT_TRUE(second->WaitForMessages(1, Scaled(2s)));
  EXPECT_THAT(Ids(*second->latest()), SizeIs(4));
  // Only our own socket deleted: a new one, registered again.
  std::filesystem::remove(dir_.path() / second->request().endpoint());
  auto third = Connection(3, 15s);
  ASSERT_NE(third, nullptr);
  EXPECT_TRUE(third->WaitForMessages(1, Scaled(2s)));
}

TEST_F(FrameworkTest, P50_OnlyKubeletSocketRecreated) {
  kubelet_.Start();
  StartPlugin(MakeDevices(2));
  ASSERT_NE(Connection(), nullptr);
  kubelet_.Stop();
  std::filesystem::remove(kubelet_.socket_path());
  kubelet_.Start();
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(1s)));
}

TEST_F(FrameworkTest, P51_OnlyPluginSocketDeleted) {
  auto first = Connected(MakeDevices(3));
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  kubelet_.SetReplyDelay(1s);
  std::filesystem::remove(dir_.path() / first->request().endpoint());
  auto second = Connection(2, 15s);
  ASSERT_NE(second, nullptr);
  // While the new registration is pending the old connection still works.
  EXPECT_TRUE(OptionsAnswer(*first));
  // The kubelet answers the registration after its 1 s delay, then lists.
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(3s)));
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / second->request().endpoint()));
}

TEST_F(FrameworkTest, P52_ReRegistersWhenTheStreamIsGone) {
  kubelet_.Start();
  auto options = Options();
  options.stream_gap = 10min;
  options.clock = &clock_;
  StartPlugin(MakeDevices(2), options);
  auto first = Connection();
  ASSERT_NE(first, nullptr);
  ASSERT_TRUE(first->WaitForMessages(1, Scaled(2s)));
  // As the kubelet, which answers Register before it dials the plugin, the
  // stream may come before the plugin has the answer; the gap starts at the
  // later of the two, so the clock moves only once the plugin has both.
  (void)WaitFor([&] { return publisher_->stats().registrations != 0; }, 5s);
  ASSERT_EQ(publisher_->stats().registrations, 1u);
  first->Cancel();  // the kubelet dropped the stream without a restart
  // The plugin has seen the stream go (the gap starts then).
  (void)WaitFor([&] { return publisher_->stats().open_streams == 0; }, 5s);
  ASSERT_EQ(publisher_->stats().open_streams, 0u);
  // Within the gap the plugin waits, whatever the real time.
  clock_.Advance(9min);
  EXPECT_EQ(Connection(2, 300ms), nullptr);
  clock_.Advance(1min);
  auto second = Connection(2, 5s);
  ASSERT_NE(second, nullptr);
  EXPECT_TRUE(second->WaitForMessages(1, Scaled(1s)));
}

TEST_F(FrameworkTest, P55_P56_DeniedTwiceThenAcceptedOnce) {
  kubelet_.SetDenial(grpc::Status(grpc::StatusCode::UNKNOWN, "not yet"));
  kubelet_.Start();
  plugin::RunnerOptions options = Options();  // back-off 200 ms, at most 1 s
  options.clock = &clock_;
  StartPlugin(MakeDevices(2), options);
  // The n-th attempt failed and the plugin sleeps on its back-off.
  const auto failed_and_waiting = [&](uint64_t n) {
    return WaitFor([&] {
      return publisher_->stats().registration_failures >= n &&
             clock_.waiters() >= 1;
    });
  };
  ASSERT_TRUE(failed_and_waiting(1));
  ASSERT_TRUE(clock_.AdvanceAndLetWaitersLook(199ms));
  EXPECT_EQ(kubelet_.register_attempts(), 1u);  // initial back-off 200 ms
  clock_.Advance(1ms);
  ASSERT_TRUE(failed_and_waiting(2));
  ASSERT_TRUE(clock_.AdvanceAndLetWaitersLook(399ms));
  EXPECT_EQ(kubelet_.register_attempts(), 2u);  // doubled
  kubelet_.SetDenial(std::nullopt);
  clock_.Advance(1ms);
  auto connection = Connection(1, 5s);
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(WaitFor([&] { return publisher_->registered(); }));
  EXPECT_EQ(kubelet_.register_attempts(), 3u);
  EXPECT_EQ(kubelet_.accepted_registrations(), 1u);
  EXPECT_EQ(publisher_->stats().registrations, 1u);
  EXPECT_EQ(publisher_->stats().registration_failures, 2u);
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / connection->request().endpoint()));
}

TEST_F(FrameworkTest, KubeletRestartsFiftyTimesWithoutLeaks) {
  kubelet_.Start();
  StartPlugin(MakeDevices(4));
  ASSERT_NE(Connection(), nullptr);
  const uint64_t sockets_before = publisher_->stats().server_restarts;
  size_t threads = 0;
  size_t fds = 0;
  for (size_t i = 2; i <= 51; ++i) {
    kubelet_.Restart(50ms);
    auto connection = Connection(i, 15s);
    ASSERT_NE(connection, nullptr) << "restart " << i - 1;
    ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
    if (i == 6) {  // after warm-up
      // The previous kubelet's stream has ended; only this one's is open.
      ASSERT_TRUE(
          WaitFor([&] { return publisher_->stats().open_streams <= 1; }));
      threads = CountThreads();
      fds = CountOpenFds();
    }
  }
  // The fake kubelet keeps its closed connections; allow it their fds.
  // Threads and descriptors of the last restart go as their streams end.
  EXPECT_TRUE(WaitFor(
      [&] {
        return CountThreads() <= threads + 8 && CountOpenFds() <= fds + 8;
      },
      Scaled(5s)))
      << CountThreads() << " threads (" << threads << " after warm-up), "
      << CountOpenFds() << " descriptors (" << fds << ")";
  // One new socket per restart, though the plugin may see its socket gone
  // both by looking and from the directory watch, in either order.
  EXPECT_EQ(publisher_->stats().server_restarts - sockets_before, 50u);
  // Only the live socket (and kubelet.sock) remain.
  size_t sockets = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename() != "kubelet.sock") ++sockets;
  }
  EXPECT_EQ(sockets, 1u);
}

TEST_F(FrameworkTest, P54_StopClosesStreamsAndRemovesSockets) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  ASSERT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  const auto socket = dir_.path() / connection->request().endpoint();
  const auto start = std::chrono::steady_clock::now();
  runner_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 5s);
  auto end = connection->WaitForEnd(2s);
  ASSERT_TRUE(end.has_value());
  EXPECT_FALSE(end->ok());  // never ended with OK
  EXPECT_FALSE(std::filesystem::exists(socket));
}

// --- Hardening ----------------------------------------------------------

// A kubelet (or topology-manager serve) starting at the same moment deletes
// every socket in the directory, the plugin's fresh one included: the
// plugin serves a new socket and registers once kubelet.sock appears.
TEST_F(FrameworkTest, SocketDeletedAtStartupIsServedAgain) {
  StartPlugin(MakeDevices(2));
  kubelet_.DeleteSockets();
  kubelet_.Start();
  auto connection = Connection(1, 10s);
  ASSERT_NE(connection, nullptr);
  EXPECT_TRUE(connection->WaitForMessages(1, Scaled(2s)));
  EXPECT_TRUE(OptionsAnswer(*connection));
  EXPECT_TRUE(
      std::filesystem::exists(dir_.path() / connection->request().endpoint()));
}

// One kubelet restart (sockets deleted, then kubelet.sock created): one
// new socket and exactly one registration, whichever event is seen first.
TEST_F(FrameworkTest, OneKubeletRestartIsOneRegistration) {
  auto first = Connected(MakeDevices(2));
  ASSERT_NE(first, nullptr);
  // The events of a restart are handled in order, before those of the next
  // one: a redundant registration for restart n arrives before restart n+1
  // is registered, and is counted with one of the two. The sixth restart
  // closes the count of the fifth.
  size_t before = kubelet_.register_attempts();
  for (int restart = 1; restart <= 6; ++restart) {
    SCOPED_TRACE(restart);
    kubelet_.Restart(std::chrono::milliseconds(restart % 2 == 0 ? 0 : 300));
    ASSERT_NE(Connection(1, 10s), nullptr);
    const size_t now = kubelet_.register_attempts();
    EXPECT_EQ(now - before, 1u);
    before = now;
  }
}

// An empty container request is answered with an empty response; the
// handler is not asked (no PCIDEVICE_...= variable with an empty list).
TEST_F(FrameworkTest, EmptyContainerRequestGetsAnEmptyResponse) {
  auto connection = Connected(MakeDevices(2));
  ASSERT_NE(connection, nullptr);
  v1beta1::AllocateRequest request;
  request.add_container_requests();
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  ASSERT_TRUE(connection->stub().Allocate(&context, request, &response).ok());
  ASSERT_EQ(response.container_responses_size(), 1);
  EXPECT_EQ(response.container_responses(0).envs_size(), 0);
  EXPECT_EQ(handler_->allocate_calls.load(), 0);
}

// Before any ListAndWatch the kubelet has been offered no device: an
// Allocate then comes from something else and is refused.
TEST_F(FrameworkTest, AllocateBeforeAnyListAndWatchIsRefused) {
  StartPlugin(MakeDevices(2));
  std::filesystem::path socket;
  for (const auto& entry : std::filesystem::directory_iterator(dir_.path())) {
    if (entry.path().filename().string() != "kubelet.sock")
      socket = entry.path();
  }
  ASSERT_FALSE(socket.empty());
  auto channel = grpc::CreateChannel("unix:" + socket.string(),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1beta1::DevicePlugin::NewStub(channel);
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(MakeDevices(2)[0].id);
  v1beta1::AllocateResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + 5s);
  const grpc::Status status = stub->Allocate(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(handler_->allocate_calls.load(), 0);
}

// Sockets get mode 0600 whatever the umask.
TEST_F(FrameworkTest, SocketModeIsExplicit) {
  const mode_t old = umask(0);
  auto connection = Connected(MakeDevices(1));
  umask(old);
  ASSERT_NE(connection, nullptr);
  struct stat info {};
  ASSERT_EQ(
      lstat((dir_.path() / connection->request().endpoint()).c_str(), &info),
      0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

// Kilobytes of this program's own code resident (its executable mappings in
// /proc/self/smaps).
size_t ResidentCodeKilobytes() {
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  std::ifstream smaps("/proc/self/smaps");
  size_t total = 0;
  bool code = false;
  for (std::string line; std::getline(smaps, line);) {
    if (line.empty()) continue;
    if (std::isxdigit(static_cast<unsigned char>(line[0])) != 0 &&
        line.find('-') < line.find(' ')) {
      const std::string perms = line.substr(line.find(' ') + 1, 4);
      code = perms[2] == 'x' && line.ends_with(self);
    } else if (code && line.starts_with("Rss:")) {
      total += std::stoul(line.substr(4));
    }
  }
  return total;
}

// The start-up code a daemon gives back (ReleaseStartupCode): the program's
// code leaves its resident memory; what runs afterwards (the second count)
// and the constants it reads are as they were.
TEST(ProcessSetupTest, StartupCodeIsReleasedAndRunsAgain) {
  static constexpr char kConstant[] = "a constant in a read-only segment";
  const std::string before_text(kConstant);
  const size_t before = ResidentCodeKilobytes();
  ASSERT_GT(before, 64u);
  const size_t released = common::ReleaseStartupCode();
  const size_t after = ResidentCodeKilobytes();
  EXPECT_GT(released, before * 1024);
  EXPECT_LT(after, before / 2) << before << " kB before";
  EXPECT_EQ(std::string(kConstant), before_text);
}

// The daemons' gRPC engine: "poll", unless the operator named one.
TEST(ProcessSetupTest, PollEngineUnlessTheOperatorChoseOne) {
  constexpr char kVariable[] = "GRPC_POLL_STRATEGY";
  const char* before = std::getenv(kVariable);
  const std::optional<std::string> saved =
      before != nullptr ? std::optional<std::string>(before) : std::nullopt;
  unsetenv(kVariable);
  EXPECT_EQ(common::ChooseGrpcPollEngine(), "poll");
  EXPECT_STREQ(std::getenv(kVariable), "poll");
  setenv(kVariable, "", 1);  // set, but naming nothing
  EXPECT_EQ(common::ChooseGrpcPollEngine(), "poll");
  setenv(kVariable, "epoll1", 1);
  EXPECT_EQ(common::ChooseGrpcPollEngine(), "epoll1");
  EXPECT_STREQ(std::getenv(kVariable), "epoll1");
  // A daemon that prefers another engine (topology-manager serve: epoll1)
  // gets it unless the operator named one.
  unsetenv(kVariable);
  EXPECT_EQ(common::ChooseGrpcPollEngine("epoll1"), "epoll1");
  setenv(kVariable, "poll", 1);
  EXPECT_EQ(common::ChooseGrpcPollEngine("epoll1"), "poll");
  if (saved) {
    setenv(kVariable, saved->c_str(), 1);
  } else {
    unsetenv(kVariable);
  }
}

// A stop stuck past the limit ends the process with the code given, and
// says so on stderr in the log's ERROR format.
TEST(ProcessSetupTest, StuckStopEndsAtTheLimit) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        common::ExitIfStillRunningAfter(std::chrono::milliseconds(50), 3);
        // A stop that never ends.
        std::promise<void> never;
        never.get_future().wait();
        std::exit(0);
      },
      ::testing::ExitedWithCode(3),
      "^E[0-9]{4} [0-9:.]+ +[0-9]+ plugin_runner.cc\\] shutdown did not "
      "finish within 50 ms; exiting now");
}

// The daemons' one sequence (daemon.h): set up before any thread, the
// process has a umask of 077, SIGTERM and SIGINT blocked (for
// AwaitShutdown), and its open-file limit raised to the hard one; a
// SIGTERM then ends AwaitShutdown, said in the log.
TEST(ProcessSetupTest, TheDaemonSequenceSetsUpAndWaitsForTheSignal) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        common::SetUpDaemon("daemon-test", {.verbosity = 0});
        const mode_t mask = umask(077);
        sigset_t blocked;
        sigemptyset(&blocked);
        pthread_sigmask(SIG_BLOCK, nullptr, &blocked);
        rlimit files{};
        getrlimit(RLIMIT_NOFILE, &files);
        if (mask != 077 || sigismember(&blocked, SIGTERM) != 1 ||
            sigismember(&blocked, SIGINT) != 1 ||
            files.rlim_cur != files.rlim_max) {
          std::exit(1);
        }
        // Pending until AwaitShutdown takes it.
        pthread_kill(pthread_self(), SIGTERM);
        common::AwaitShutdown({.stop_limit = std::chrono::seconds(5)});
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "received signal 15; shutting down");
}

// glibc's allocator (the sanitizers replace it, and its thresholds with it).
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
// Whether a block of `size` just allocated and freed before leaves the next
// one of that size mapped on its own (mallinfo2's hblks), as a fixed
// threshold below it keeps it, where glibc's dynamic one, raised by the
// free, would carve it from the heap.
bool MappedAfterAFreeOfTheSameSize(size_t size) {
  // volatile: the compiler may not leave out an allocation only freed.
  void* volatile first = std::malloc(size);
  std::free(first);
  const size_t before = mallinfo2().hblks;
  void* volatile second = std::malloc(size);
  const bool mapped = mallinfo2().hblks > before;
  std::free(second);
  return mapped;
}

// A daemon that gives big blocks back whole (malloc_release_threshold):
// a freed answer's buffer does not raise the threshold for what follows.
TEST(ProcessSetupTest, MallocThresholdsStayFixedWhenTheDaemonAsks) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        common::SetUpDaemon("daemon-test",
                            {.malloc_release_threshold = 128 << 10});
        std::exit(MappedAfterAFreeOfTheSameSize(4 << 20) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  // Without it, glibc's dynamic threshold (what the other daemons keep).
  EXPECT_EXIT(
      {
        common::SetUpDaemon("daemon-test", {});
        std::exit(MappedAfterAFreeOfTheSameSize(4 << 20) ? 0 : 1);
      },
      ::testing::ExitedWithCode(1), "");
}
#endif

}  // namespace
}  // namespace topology::testing
