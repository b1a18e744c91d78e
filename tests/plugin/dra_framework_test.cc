// The DRA kubelet-plugin framework against a kubelet's DRA side
// (FakeDraKubelet) over real unix sockets: registration and version
// choice, per-claim answers, idempotent and serialised Prepare/Unprepare,
// the checkpoint of prepared claims across restarts, health streams,
// sockets served again after deletion, Stop.
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <sys/stat.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/draplugin/claim_checkpoint.h"
#include "topology/draplugin/driver.h"
#include "topology/testing/fake_clock.h"
#include "topology/testing/fake_dra_kubelet.h"

#include "gate.h"
#include "status_matchers.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "wait_for.h"

namespace topology::draplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::topology::testing::FakeDraKubelet;
using ::topology::testing::IsOk;
using ::topology::testing::Scaled;
using ::topology::testing::StatusIs;
using namespace std::chrono_literals;

constexpr char kDriver[] = "pci.libtopology.dev";

// Claims as an API server would hold them: by UID, or the error it gives.
class TableSource : public ClaimSource {
 public:
  void Add(const ClaimRef& ref, std::vector<AllocationResult> results) {
    std::lock_guard<std::mutex> lock(mu_);
    claims_[ref.uid] = Claim{ref, std::move(results), {}};
  }
  void Fail(const std::string& uid, Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    errors_.emplace(uid, std::move(status));
  }
  // Get of `uid` waits, as on an API server that does not answer, until
  // Cancel() (or a minute).
  void Hang(const std::string& uid) {
    std::lock_guard<std::mutex> lock(mu_);
    hanging_ = uid;
  }
  void Cancel() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++cancels_;
    }
    cancelled_.notify_all();
  }
  int cancels() const {
    std::lock_guard<std::mutex> lock(mu_);
    return cancels_;
  }
  StatusOr<Claim> Get(const ClaimRef& ref, const std::string& driver) override {
    std::unique_lock<std::mutex> lock(mu_);
    ++gets_;
    if (ref.uid == hanging_) {
      const int before = cancels_;
      if (!cancelled_.wait_for(lock, std::chrono::minutes(1),
                               [&] { return cancels_ != before; })) {
        return UnavailableError("no answer");
      }
      return CancelledError("GET " + ref.name + ": cancelled");
    }
    if (driver != kDriver) return InternalError("asked for another driver");
    if (auto it = errors_.find(ref.uid); it != errors_.end()) return it->second;
    auto it = claims_.find(ref.uid);
    if (it == claims_.end()) {
      return NotFoundError("resourceclaims \"" + ref.name + "\" not found");
    }
    return it->second;
  }
  int gets() const {
    std::lock_guard<std::mutex> lock(mu_);
    return gets_;
  }

 private:
  std::condition_variable cancelled_;
  std::string hanging_;
  int cancels_ = 0;
  mutable std::mutex mu_;
  std::map<std::string, Claim> claims_;
  std::map<std::string, Status> errors_;
  int gets_ = 0;
};

// A driver that prepares every result as one device with a CDI id named
// after the claim, counting its calls; it can be held or made to fail.
class RecordingHandler : public DriverHandler {
 public:
  StatusOr<std::vector<PreparedDevice>> Prepare(const Claim& claim) override {
    ++prepares_;
    held_.Wait();
    std::lock_guard<std::mutex> lock(mu_);
    if (claim.ref.uid == failing_) return InternalError("device is on fire");
    if (claim.ref.uid == throwing_) throw std::runtime_error("boom");
    std::vector<PreparedDevice> devices;
    for (const AllocationResult& result : claim.results) {
      PreparedDevice device{.pool = result.pool, .device = result.device};
      device.cdi_device_ids = {"pci.libtopology.dev/device=" + claim.ref.uid +
                               "-" + result.device};
      // A share the claim holds one of is left for the runner to fill in.
      if (share_ids_ && result.device != "nic-1") {
        device.share_id = result.share_id;
        device.request_names = {result.request};
      }
      devices.push_back(std::move(device));
    }
    prepared_[claim.ref.uid] = devices;
    return devices;
  }
  Status Unprepare(const ClaimRef& claim,
                   const std::vector<PreparedDevice>& devices) override {
    ++unprepares_;
    std::lock_guard<std::mutex> lock(mu_);
    unprepared_[claim.uid] = devices;
    prepared_.erase(claim.uid);
    return OkStatus();
  }
  void Fail(const std::string& uid) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_ = uid;
  }
  void Throw(const std::string& uid) {
    std::lock_guard<std::mutex> lock(mu_);
    throwing_ = uid;
  }
  // Prepare answers each result's share id and request itself (except
  // nic-1's), as a driver of shared devices does.
  void ShareIds(bool on) { share_ids_ = on; }
  // Prepare waits from Hold() until Let() (a slow device).
  void Hold() { held_.Close(); }
  void Let() { held_.Open(); }
  size_t held() const { return held_.waiting(); }
  int prepares() const { return prepares_; }
  int unprepares() const { return unprepares_; }
  std::map<std::string, std::vector<PreparedDevice>> unprepared() const {
    std::lock_guard<std::mutex> lock(mu_);
    return unprepared_;
  }

 private:
  mutable std::mutex mu_;
  std::atomic<int> prepares_{0};
  std::atomic<int> unprepares_{0};
  std::atomic<bool> share_ids_{false};
  ::topology::testing::Gate held_{/*open=*/true};
  std::string failing_;
  std::string throwing_;
  std::map<std::string, std::vector<PreparedDevice>> prepared_;
  std::map<std::string, std::vector<PreparedDevice>> unprepared_;
};

class DraFrameworkTest : public ::testing::Test {
 protected:
  DriverOptions Options() const {
    DriverOptions options;
    options.driver_name = kDriver;
    options.registry_dir = dir_.path() / "plugins_registry";
    options.plugin_dir = dir_.path() / "plugins" / kDriver;
    options.socket_check = 50ms;
    options.clock = &clock_;
    return options;
  }
  // One look of the runners at their sockets: the clock moves by the
  // period, and each runner has looked (and served again what was gone)
  // once it waits again.
  void Look() {
    ASSERT_TRUE(clock_.AdvanceAndLetWaitersLook(Options().socket_check));
  }
  void Start(DriverOptions options) {
    auto runner = DriverRunner::Create(std::move(options), &source_, &handler_);
    ASSERT_THAT(runner.status(), IsOk());
    runner_ = std::move(*runner);
    ASSERT_THAT(runner_->Start(), IsOk());
    // Its socket watcher waits on the clock: the test's looks are its.
    ASSERT_TRUE(WaitFor([&] { return clock_.waiters() >= 1; }, 10s));
  }
  void Start() { Start(Options()); }
  // A test that failed with the handler held lets it go: the runner's stop
  // would wait for the call in it.
  void TearDown() override { handler_.Let(); }
  void Restart() {
    runner_.reset();
    Start();
  }

  ClaimRef GpuClaim(const std::string& uid, int devices = 1) {
    ClaimRef ref{"default", uid, "claim-" + uid};
    std::vector<AllocationResult> results;
    for (int i = 0; i < devices; ++i) {
      results.push_back(
          {"gpu", kDriver, "node-a", "gpu-" + uid + "-" + std::to_string(i)});
    }
    source_.Add(ref, results);
    return ref;
  }
  static FakeDraKubelet::Claim Kubelet(const ClaimRef& ref) {
    return {ref.ns, ref.uid, ref.name};
  }

  template <typename Predicate>
  static bool WaitFor(Predicate predicate, std::chrono::milliseconds timeout) {
    return ::topology::testing::WaitFor(predicate, timeout);
  }

  ::topology::testing::TempDir dir_;
  TableSource source_;
  RecordingHandler handler_;
  // The runners' time: socket checks, the kubelet's deadlines, the dates
  // of health reports. Outlives them.
  ::topology::testing::FakeClock clock_;
  std::unique_ptr<DriverRunner> runner_;
  FakeDraKubelet kubelet_{dir_.path() / "plugins_registry"};
};

// Stop keeps its second: a Prepare whose claim is still being read from
// the API server when the calls' grace ends is cancelled there (the claim
// source's Cancel), rather than holding the stop for the client's timeout.
TEST_F(DraFrameworkTest, StopCancelsAClaimStillWaitingOnTheApiServer) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef ref = GpuClaim("hung");
  source_.Hang("hung");
  auto prepare = std::async(std::launch::async, [&] {
    return kubelet_.Prepare({Kubelet(ref)}, "", /*attempts=*/1);
  });
  ASSERT_TRUE(WaitFor([&] { return source_.gets() >= 1; }, 10s));
  const auto start = std::chrono::steady_clock::now();
  runner_->Stop();
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_LT(took, 3s);
  EXPECT_GE(took, 900ms);  // the calls in flight had their second
  EXPECT_EQ(source_.cancels(), 1);
  (void)prepare.get();
  EXPECT_EQ(handler_.prepares(), 0);
}

TEST_F(DraFrameworkTest, RegistersAndTheKubeletChoosesTheFirstItKnows) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  EXPECT_EQ(kubelet_.type(), "DRAPlugin");
  EXPECT_EQ(kubelet_.endpoint(), runner_->dra_socket().string());
  EXPECT_EQ(runner_->dra_socket(),
            dir_.path() / "plugins" / kDriver / "dra.sock");
  EXPECT_THAT(
      kubelet_.supported_versions(),
      ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin", "v1.DRAResourceHealth",
                  "v1alpha1.DRAResourceHealth"));
  EXPECT_EQ(kubelet_.chosen(), "v1.DRAPlugin");
  EXPECT_TRUE(runner_->registered());
  // Sockets for root alone.
  struct stat info {};
  ASSERT_EQ(lstat(runner_->registration_socket().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
  ASSERT_EQ(lstat(runner_->dra_socket().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);
}

TEST_F(DraFrameworkTest, AKubeletThatKnowsNoneOfTheServicesRefusesAndSaysWhy) {
  Start();
  FakeDraKubelet old(dir_.path() / "plugins_registry", {"v1alpha4.Node"});
  EXPECT_THAT(old.Register(kDriver), StatusIs(StatusCode::kFailedPrecondition,
                                              HasSubstr("v1alpha4.Node")));
  EXPECT_FALSE(runner_->registered());
  EXPECT_THAT(runner_->registration_error(), HasSubstr("v1alpha4.Node"));
  // A kubelet of 1.32 (v1beta1 only) is served too.
  FakeDraKubelet beta(dir_.path() / "plugins_registry", {"v1beta1.DRAPlugin"});
  ASSERT_THAT(beta.Register(kDriver), IsOk());
  EXPECT_EQ(beta.chosen(), "v1beta1.DRAPlugin");
  EXPECT_TRUE(runner_->registered());
  const ClaimRef claim = GpuClaim("u1");
  auto answers = beta.Prepare({Kubelet(claim)});
  ASSERT_THAT(answers.status(), IsOk());
  EXPECT_THAT((*answers)["u1"].devices, SizeIs(1));
}

TEST_F(DraFrameworkTest, PrepareAnswersEveryClaimAndRequestNames) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1", 2);
  auto answers = kubelet_.Prepare({Kubelet(claim)});
  ASSERT_THAT(answers.status(), IsOk());
  ASSERT_THAT(*answers, SizeIs(1));
  const auto& answer = answers->at("u1");
  EXPECT_EQ(answer.error, "");
  ASSERT_THAT(answer.devices, SizeIs(2));
  EXPECT_THAT(answer.devices[0].request_names, ElementsAre("gpu"));
  EXPECT_EQ(answer.devices[0].pool, "node-a");
  EXPECT_EQ(answer.devices[0].device, "gpu-u1-0");
  EXPECT_THAT(answer.devices[0].cdi_device_ids,
              ElementsAre("pci.libtopology.dev/device=u1-gpu-u1-0"));
}

// A claim allocated from a prioritized list (firstAvailable) has results
// whose request is "<request>/<subrequest>"; the kubelet picks a
// container's CDI ids by the top-level request name, so the answer names
// the base request (once), whatever the driver wrote.
TEST_F(DraFrameworkTest, SubrequestsAreAnsweredAsTheirTopLevelRequest) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef ref{"default", "u1", "claim-u1"};
  source_.Add(ref, {{"gpu/big", kDriver, "node-a", "gpu-0"},
                    {"nic", kDriver, "node-a", "nic-0"}});
  auto answers = kubelet_.Prepare({Kubelet(ref)});
  ASSERT_THAT(answers.status(), IsOk());
  const auto& answer = answers->at("u1");
  ASSERT_EQ(answer.error, "");
  ASSERT_THAT(answer.devices, SizeIs(2));
  EXPECT_THAT(answer.devices[0].request_names, ElementsAre("gpu"));
  EXPECT_THAT(answer.devices[1].request_names, ElementsAre("nic"));
  EXPECT_THAT(FakeDraKubelet::ContainerCdiIds(answer, "gpu"),
              ElementsAre("pci.libtopology.dev/device=u1-gpu-0"));
  EXPECT_THAT(FakeDraKubelet::ContainerCdiIds(answer, "nic"),
              ElementsAre("pci.libtopology.dev/device=u1-nic-0"));
  EXPECT_EQ(BaseRequestName("gpu/big"), "gpu");
  EXPECT_EQ(BaseRequestName("gpu"), "gpu");
}

// A result with adminAccess (KEP-5018): the runner marks the device it
// prepared, in the checkpoint too, so that nothing counts it as held
// exclusively (the device plugin beside it keeps offering it).
TEST_F(DraFrameworkTest, AdminAccessResultsAreMarkedInTheCheckpoint) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef ref{"monitoring", "m1", "watch"};
  AllocationResult watched{"gpu", kDriver, "node-a", "gpu-0"};
  watched.admin_access = true;
  source_.Add(ref, {watched, {"nic", kDriver, "node-a", "nic-0"}});
  auto answers = kubelet_.Prepare({Kubelet(ref)});
  ASSERT_THAT(answers.status(), IsOk());
  ASSERT_EQ(answers->at("m1").error, "");
  auto saved =
      LoadClaims(dir_.path() / "plugins" / kDriver / kClaimCheckpointFile);
  ASSERT_THAT(saved.status(), IsOk());
  const auto& devices = saved->at("m1").devices;
  ASSERT_THAT(devices, SizeIs(2));
  EXPECT_TRUE(devices[0].admin_access);
  EXPECT_FALSE(devices[1].admin_access);
}

// Two shares of one shared device in one claim (KEP-5075): the kubelet gets
// each with its share id (v1's Device.share_id), and the checkpoint keeps
// both; a device prepared once as the claim's one share gets its share id
// from the result when the driver left it out.
TEST_F(DraFrameworkTest, SharesAreAnsweredAndCheckpointedByTheirIds) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef ref{"default", "s1", "shares"};
  AllocationResult first{"a", kDriver, "node-a", "nic-0"};
  first.share_id = "0c1d2e3f-4a5b-6c7d-8e9f-0a1b2c3d4e5f";
  AllocationResult second{"b", kDriver, "node-a", "nic-0"};
  second.share_id = "8f7e2c1a-0b9d-4c3e-a5f6-1d2e3f4a5b6c";
  AllocationResult whole{"c", kDriver, "node-a", "gpu-0"};
  AllocationResult one{"d", kDriver, "node-a", "nic-1"};
  one.share_id = "11111111-2222-3333-4444-555555555555";
  source_.Add(ref, {first, second, whole, one});
  handler_.ShareIds(true);
  auto answers = kubelet_.Prepare({Kubelet(ref)});
  ASSERT_THAT(answers.status(), IsOk());
  const auto& answer = answers->at("s1");
  ASSERT_EQ(answer.error, "");
  ASSERT_THAT(answer.devices, SizeIs(4));
  EXPECT_EQ(answer.devices[0].share_id, first.share_id);
  EXPECT_EQ(answer.devices[1].share_id, second.share_id);
  EXPECT_EQ(answer.devices[2].share_id, "");
  EXPECT_EQ(answer.devices[3].share_id, one.share_id);  // filled in
  EXPECT_THAT(answer.devices[0].request_names, ElementsAre("a"));
  EXPECT_THAT(answer.devices[1].request_names, ElementsAre("b"));
  auto saved =
      LoadClaims(dir_.path() / "plugins" / kDriver / kClaimCheckpointFile);
  ASSERT_THAT(saved.status(), IsOk());
  const auto& devices = saved->at("s1").devices;
  ASSERT_THAT(devices, SizeIs(4));
  EXPECT_EQ(devices[0].share_id, first.share_id);
  EXPECT_EQ(devices[1].share_id, second.share_id);
  EXPECT_EQ(devices[3].share_id, one.share_id);
}

// A call with bad claims still succeeds: each bad one has its own error
// naming it, the good ones are prepared.
TEST_F(DraFrameworkTest, EachBadClaimHasItsOwnErrorAndTheOthersArePrepared) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef good = GpuClaim("good");
  const ClaimRef burning = GpuClaim("burning");
  handler_.Fail("burning");
  const ClaimRef throwing = GpuClaim("throwing");
  handler_.Throw("throwing");
  source_.Fail("other-uid",
               FailedPreconditionError("UID other-uid differs from the "
                                       "object's"));
  source_.Fail("unallocated",
               FailedPreconditionError("claim is not allocated"));
  const std::vector<FakeDraKubelet::Claim> claims = {
      Kubelet(good),
      Kubelet(burning),
      Kubelet(throwing),
      {"default", "missing", "gone"},
      {"default", "other-uid", "c"},
      {"default", "unallocated", "d"},
      {"default", "", "no-uid"}};
  auto answers = kubelet_.Prepare(claims, "", 1);
  ASSERT_THAT(answers.status(), IsOk());
  EXPECT_EQ(answers->at("good").error, "");
  EXPECT_THAT(answers->at("good").devices, SizeIs(1));
  EXPECT_THAT(answers->at("burning").error,
              HasSubstr("claim default/claim-burning (burning): device is on "
                        "fire"));
  EXPECT_THAT(answers->at("throwing").error, HasSubstr("the driver threw"));
  EXPECT_THAT(answers->at("missing").error,
              HasSubstr("claim default/gone (missing): resourceclaims"));
  EXPECT_THAT(answers->at("other-uid").error, HasSubstr("differs"));
  EXPECT_THAT(answers->at("unallocated").error, HasSubstr("not allocated"));
  EXPECT_THAT(answers->at("").error, HasSubstr("has no UID"));
  EXPECT_THAT(answers->at("burning").devices, IsEmpty());
  // Only the good claim is prepared (and checkpointed).
  ASSERT_THAT(runner_->PreparedClaims(), SizeIs(1));
  EXPECT_EQ(runner_->PreparedClaims()[0].uid, "good");
}

TEST_F(DraFrameworkTest, PrepareIsIdempotentAndUnprepareToo) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1");
  auto first = kubelet_.Prepare({Kubelet(claim)});
  auto again = kubelet_.Prepare({Kubelet(claim), Kubelet(claim)});
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(handler_.prepares(), 1);
  EXPECT_EQ(source_.gets(), 1);
  EXPECT_EQ(again->at("u1").devices[0].cdi_device_ids,
            first->at("u1").devices[0].cdi_device_ids);
  for (int i = 0; i < 2; ++i) {
    auto undone = kubelet_.Unprepare({Kubelet(claim)});
    ASSERT_THAT(undone.status(), IsOk());
    EXPECT_EQ(undone->at("u1"), "");
  }
  EXPECT_THAT(runner_->PreparedClaims(), IsEmpty());
  // The second Unprepare still reached the driver (with no devices: it
  // removes by UID whatever a crash may have left).
  EXPECT_EQ(handler_.unprepares(), 2);
}

// Calls for one claim are serialised: two kubelet calls at once prepare
// it once.
TEST_F(DraFrameworkTest, ConcurrentCallsForOneClaimPrepareItOnce) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1");
  const ClaimRef other = GpuClaim("u2");
  handler_.Hold();
  auto a = std::async(std::launch::async,
                      [&] { return kubelet_.Prepare({Kubelet(claim)}); });
  auto b = std::async(std::launch::async, [&] {
    return kubelet_.Prepare({Kubelet(claim), Kubelet(other)});
  });
  // One call prepares u1; the other waits for u1's turn (on the clock,
  // beside the socket watcher).
  ASSERT_TRUE(WaitFor(
      [&] { return handler_.held() == 1 && clock_.waiters() == 2; }, 10s));
  handler_.Let();
  ASSERT_THAT(a.get().status(), IsOk());
  auto both = b.get();
  ASSERT_THAT(both.status(), IsOk());
  EXPECT_EQ(both->at("u1").error, "");
  EXPECT_EQ(both->at("u2").error, "");
  EXPECT_EQ(handler_.prepares(), 2);  // u1 once, u2 once
}

// Prepared claims survive a restart of the driver: a repeated Prepare is
// answered from the checkpoint, and Unprepare after a restart with no
// Prepare in between gives the driver the devices it prepared.
TEST_F(DraFrameworkTest, PreparedClaimsSurviveARestart) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1", 2);
  auto prepared = kubelet_.Prepare({Kubelet(claim)});
  ASSERT_THAT(prepared.status(), IsOk());
  const std::filesystem::path checkpoint =
      dir_.path() / "plugins" / kDriver / "prepared-claims.json";
  struct stat info {};
  ASSERT_EQ(lstat(checkpoint.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u);

  Restart();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  ASSERT_THAT(runner_->PreparedClaims(), SizeIs(1));
  auto again = kubelet_.Prepare({Kubelet(claim)});
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(handler_.prepares(), 1);
  Restart();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  auto undone = kubelet_.Unprepare({Kubelet(claim)});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at("u1"), "");
  const auto unprepared = handler_.unprepared();
  ASSERT_TRUE(unprepared.contains("u1"));
  ASSERT_THAT(unprepared.at("u1"), SizeIs(2));
  EXPECT_EQ(unprepared.at("u1")[1].device, "gpu-u1-1");
  EXPECT_THAT(unprepared.at("u1")[1].request_names, ElementsAre("gpu"));
  Restart();
  EXPECT_THAT(runner_->PreparedClaims(), IsEmpty());
}

// A prepared claim that cannot be made durable is not answered as
// prepared: the driver's work is undone and the claim gets an error.
TEST_F(DraFrameworkTest, AClaimThatCannotBeCheckpointedIsUndone) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  // Something that is not a file where the checkpoint goes (after the
  // start, which writes it once to know the directory can hold it).
  const auto checkpoint =
      dir_.path() / "plugins" / kDriver / "prepared-claims.json";
  std::filesystem::remove(checkpoint);
  std::filesystem::create_directories(checkpoint / "x");
  const ClaimRef claim = GpuClaim("u1");
  auto answers = kubelet_.Prepare({Kubelet(claim)}, "", 1);
  ASSERT_THAT(answers.status(), IsOk());
  EXPECT_THAT(answers->at("u1").error, HasSubstr("cannot checkpoint"));
  EXPECT_THAT(runner_->PreparedClaims(), IsEmpty());
  EXPECT_EQ(handler_.unprepares(), 1);
}

// The checkpoint is written like every file of the project: a link
// planted at its name is replaced, never written through.
TEST_F(DraFrameworkTest, TheCheckpointNeverFollowsAPlantedLink) {
  const auto plugin_dir = dir_.path() / "plugins" / kDriver;
  std::filesystem::create_directories(plugin_dir);
  const auto target = dir_.path() / "victim";
  std::ofstream(target) << "precious\n";
  std::filesystem::create_symlink(target, plugin_dir / "prepared-claims.json");
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  ASSERT_THAT(kubelet_.Prepare({Kubelet(GpuClaim("u1"))}).status(), IsOk());
  std::ifstream in(target);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  EXPECT_EQ(text, "precious\n");
  EXPECT_FALSE(
      std::filesystem::is_symlink(plugin_dir / "prepared-claims.json"));
}

TEST_F(DraFrameworkTest, ADamagedCheckpointIsKeptAsideAndTheDriverStarts) {
  const auto plugin_dir = dir_.path() / "plugins" / kDriver;
  std::filesystem::create_directories(plugin_dir);
  std::ofstream(plugin_dir / "prepared-claims.json") << "{\"version\":1,";
  Start();
  EXPECT_THAT(runner_->PreparedClaims(), IsEmpty());
  EXPECT_TRUE(
      std::filesystem::exists(plugin_dir / "prepared-claims.json.damaged"));
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
}

TEST_F(DraFrameworkTest, HealthStreamsSendTheCompleteList) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  runner_->SetHealth(
      {{"node-a", "gpu-0", HealthStatus::kHealthy, ""},
       {"node-a", "gpu-1", HealthStatus::kUnhealthy, std::string(2000, 'x')}});
  for (const char* version : {"v1", "v1alpha1"}) {
    auto first = kubelet_.FirstHealth(version, 5s);
    ASSERT_THAT(first.status(), IsOk()) << version;
    ASSERT_THAT(*first, SizeIs(2));
    EXPECT_EQ((*first)[0].device, "gpu-0");
    EXPECT_EQ((*first)[0].health, 1);
    EXPECT_EQ((*first)[1].health, 2);
    EXPECT_EQ((*first)[1].timeout_seconds, 30);
    // Cut as the kubelet cuts it: 1,021 characters and "...".
    EXPECT_EQ((*first)[1].message, std::string(1021, 'x') + "...");
  }
  // A change reaches an open stream.
  const size_t seen = kubelet_.health_messages();
  auto watching = std::async(std::launch::async,
                             [&] { return kubelet_.WatchHealth("v1", 2, 5s); });
  // The stream is open once its first message has come.
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_.health_messages() > seen; }, Scaled(5s)));
  runner_->SetHealth({{"node-a", "gpu-0", HealthStatus::kUnhealthy, "gone"}});
  const auto messages = watching.get();
  ASSERT_THAT(messages, SizeIs(2));
  ASSERT_THAT(messages[1], SizeIs(1));
  EXPECT_EQ(messages[1][0].health, 2);
  EXPECT_EQ(messages[1][0].message, "gone");
}

// Partial reports, as the 1.37 Go helper sends them: each health source's
// report is a message of its own naming only its devices (the kubelet
// keeps a device a message leaves out until the device's timeout), each
// device with its own timeout; a stream that opens gets every source's
// last report; a refresh sends them all again.
TEST_F(DraFrameworkTest, HealthReportsArePerSourceWithEachDevicesTimeout) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  runner_->ReportHealth("monitor",
                        {{"node-a", "gpu-0", HealthStatus::kHealthy, "", 10s}});
  runner_->ReportHealth(
      "prober", {{"node-a", "nic-0", HealthStatus::kUnhealthy, "link down"}});
  const auto opened = kubelet_.WatchHealth("v1", 2, 5s);
  ASSERT_THAT(opened, SizeIs(2));
  ASSERT_THAT(opened[0], SizeIs(1));  // the sources in name order
  EXPECT_EQ(opened[0][0].device, "gpu-0");
  EXPECT_EQ(opened[0][0].timeout_seconds, 10);
  ASSERT_THAT(opened[1], SizeIs(1));
  EXPECT_EQ(opened[1][0].device, "nic-0");
  EXPECT_EQ(opened[1][0].health, 2);
  EXPECT_EQ(opened[1][0].timeout_seconds, 30);  // the driver's default
  // A new report of one source reaches an open stream alone.
  const size_t seen = kubelet_.health_messages();
  auto watching = std::async(std::launch::async,
                             [&] { return kubelet_.WatchHealth("v1", 3, 5s); });
  ASSERT_TRUE(WaitFor([&] { return kubelet_.health_messages() >= seen + 2; },
                      Scaled(5s)));
  runner_->ReportHealth(
      "monitor", {{"node-a", "gpu-0", HealthStatus::kUnhealthy, "xid 79"}});
  const auto messages = watching.get();
  ASSERT_THAT(messages, SizeIs(3));
  ASSERT_THAT(messages[2], SizeIs(1));
  EXPECT_EQ(messages[2][0].device, "gpu-0");
  EXPECT_EQ(messages[2][0].health, 2);
  EXPECT_EQ(messages[2][0].message, "xid 79");
  // A refresh sends every source's last report again.
  const size_t before = kubelet_.health_messages();
  auto refreshed = std::async(
      std::launch::async, [&] { return kubelet_.WatchHealth("v1", 4, 5s); });
  ASSERT_TRUE(WaitFor([&] { return kubelet_.health_messages() >= before + 2; },
                      Scaled(5s)));
  runner_->RefreshHealth();
  const auto again = refreshed.get();
  ASSERT_THAT(again, SizeIs(4));
  EXPECT_EQ(again[2][0].device, "gpu-0");
  EXPECT_EQ(again[3][0].device, "nic-0");
}

// A message is cut in characters, never inside one, and always valid UTF-8
// (a proto3 string that is not would make the kubelet refuse the whole
// stream message).
TEST_F(DraFrameworkTest, HealthMessagesAreCutInCharactersAndValidUtf8) {
  std::string accents;
  for (int i = 0; i < 1100; ++i) accents += "\xc3\xa9";  // é
  std::string expected;
  for (int i = 0; i < 1021; ++i) expected += "\xc3\xa9";
  EXPECT_EQ(HealthMessage(accents), expected + "...");
  EXPECT_EQ(HealthMessage(std::string(1024, 'x')), std::string(1024, 'x'));
  EXPECT_EQ(HealthMessage(std::string(1025, 'x')),
            std::string(1021, 'x') + "...");
  EXPECT_EQ(HealthMessage("bad \xff byte, cut \xe2\x82"),
            "bad \xef\xbf\xbd byte, cut \xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_EQ(HealthMessage("\xed\xa0\x80"),  // a surrogate
            "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  runner_->SetHealth(
      {{"node-a", "gpu-0", HealthStatus::kUnhealthy, accents},
       {"node-a", "gpu-1", HealthStatus::kUnhealthy, "bad \xff byte"}});
  auto first = kubelet_.FirstHealth("v1", 5s);
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(*first, SizeIs(2));
  EXPECT_EQ((*first)[0].message, expected + "...");
  EXPECT_EQ((*first)[1].message, "bad \xef\xbf\xbd byte");
}

// A refresh sends the same list (every pool, every device, in order) with a
// new time, so that the kubelet does not take Unknown.
TEST_F(DraFrameworkTest, ARefreshSendsTheListAgainUpdated) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  runner_->SetHealth({{"node-a", "gpu-0", HealthStatus::kHealthy, ""},
                      {"node-b", "nic-long-device-name-7",
                       HealthStatus::kUnhealthy, "link down"},
                      {"node-a", "gpu-2", HealthStatus::kUnknown, ""}});
  const size_t seen = kubelet_.health_messages();
  auto watching = std::async(std::launch::async,
                             [&] { return kubelet_.WatchHealth("v1", 2, 5s); });
  // The stream has its first list; the refresh is a second later (the
  // time has a second's grain).
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_.health_messages() > seen; }, Scaled(5s)));
  clock_.Advance(1s);
  runner_->RefreshHealth();
  const auto messages = watching.get();
  ASSERT_THAT(messages, SizeIs(2));
  for (const auto& message : messages) {
    ASSERT_THAT(message, SizeIs(3));
    EXPECT_EQ(message[0].pool, "node-a");
    EXPECT_EQ(message[0].device, "gpu-0");
    EXPECT_EQ(message[0].health, 1);
    EXPECT_EQ(message[0].message, "");
    EXPECT_EQ(message[1].pool, "node-b");
    EXPECT_EQ(message[1].device, "nic-long-device-name-7");
    EXPECT_EQ(message[1].health, 2);
    EXPECT_EQ(message[1].message, "link down");
    EXPECT_EQ(message[2].pool, "node-a");
    EXPECT_EQ(message[2].device, "gpu-2");
    EXPECT_EQ(message[2].health, 0);
  }
  EXPECT_GT(messages[1][0].last_updated, messages[0][0].last_updated);
}

TEST_F(DraFrameworkTest, AnEmptyListIsSentAsAnEmptyMessage) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  runner_->SetHealth({});
  for (const char* version : {"v1", "v1alpha1"}) {
    auto first = kubelet_.FirstHealth(version, 5s);
    ASSERT_THAT(first.status(), IsOk()) << version;
    EXPECT_THAT(*first, IsEmpty());
  }
}

TEST_F(DraFrameworkTest, WithoutHealthNoHealthServiceIsAdvertised) {
  auto options = Options();
  options.serve_health = false;
  Start(options);
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  EXPECT_THAT(kubelet_.supported_versions(),
              ElementsAre("v1.DRAPlugin", "v1beta1.DRAPlugin"));
}

// A kubelet (or an operator) that removes the sockets gets them back:
// served again at once (the directories are watched: no look of the clock's
// is needed) and registered again.
TEST_F(DraFrameworkTest, DeletedSocketsAreServedAgain) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  std::filesystem::remove(runner_->dra_socket());
  std::filesystem::remove(runner_->registration_socket());
  EXPECT_TRUE(WaitFor(
      [&] {
        return std::filesystem::exists(runner_->dra_socket()) &&
               std::filesystem::exists(runner_->registration_socket());
      },
      Scaled(5s)));
  EXPECT_FALSE(runner_->registered());
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_.Register(kDriver).ok(); }, Scaled(3s)));
  EXPECT_TRUE(runner_->registered());
  auto answers = kubelet_.Prepare({Kubelet(GpuClaim("u1"))});
  ASSERT_THAT(answers.status(), IsOk());
  EXPECT_EQ(answers->at("u1").error, "");
}

TEST_F(DraFrameworkTest, StopRemovesTheSocketsPromptly) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  // An open health stream does not hold the stop up. (A list to send, so
  // that the stream's first message says it is open.)
  runner_->SetHealth({{"node-a", "gpu-0", HealthStatus::kHealthy, ""}});
  const size_t seen = kubelet_.health_messages();
  auto watching = std::async(
      std::launch::async, [&] { return kubelet_.WatchHealth("v1", 5, 10s); });
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_.health_messages() > seen; }, Scaled(5s)));
  const auto start = std::chrono::steady_clock::now();
  runner_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, 3s);
  EXPECT_FALSE(std::filesystem::exists(runner_->dra_socket()));
  EXPECT_FALSE(std::filesystem::exists(runner_->registration_socket()));
  watching.get();
}

TEST_F(DraFrameworkTest, BadOptionsAreRefusedNamingThem) {
  DriverOptions options = Options();
  options.driver_name = "Not_A_Domain";
  EXPECT_THAT(DriverRunner::Create(options, &source_, &handler_).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("\"Not_A_Domain\" is not one the API server "
                                 "accepts")));
  // The API server allows driver names of at most 63 characters: a longer
  // one would register and then fail every slice write.
  options.driver_name = std::string(60, 'a') + ".dev";
  EXPECT_THAT(DriverRunner::Create(options, &source_, &handler_).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("at most 63 characters")));
  options = Options();
  options.plugin_dir = "relative/dir";
  EXPECT_THAT(DriverRunner::Create(options, &source_, &handler_).status(),
              StatusIs(StatusCode::kInvalidArgument,
                       HasSubstr("plugin directory relative/dir")));
  options = Options();
  options.registry_dir = "/" + std::string(120, 'r');
  EXPECT_THAT(DriverRunner::Create(options, &source_, &handler_).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("107 bytes")));
}

// A claim UID names files (CDI specs): one that could leave its directory
// is refused before any handler sees it, in Prepare and in Unprepare.
TEST_F(DraFrameworkTest, AUidThatCouldLeaveItsDirectoryIsRefused) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const FakeDraKubelet::Claim hostile{"default", "x/../../victim", "c"};
  auto unprepared = kubelet_.Unprepare({hostile});
  ASSERT_THAT(unprepared.status(), IsOk());
  EXPECT_THAT(unprepared->at("x/../../victim"),
              HasSubstr("the UID is not a Kubernetes UID"));
  auto prepared = kubelet_.Prepare({hostile});
  ASSERT_THAT(prepared.status(), IsOk());
  EXPECT_THAT(prepared->at("x/../../victim").error,
              HasSubstr("the UID is not a Kubernetes UID"));
  EXPECT_EQ(handler_.unprepares(), 0);
  EXPECT_EQ(handler_.prepares(), 0);
  EXPECT_EQ(source_.gets(), 0);
}

// Each kubelet call has a deadline (45 s): a call that waits for another
// call on the same claim waits no longer than its own deadline, and says
// why; the kubelet calls again.
TEST_F(DraFrameworkTest, AWaitForTheClaimEndsAtTheKubeletsDeadline) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1");
  handler_.Hold();
  auto slow = std::async(std::launch::async,
                         [&] { return kubelet_.Prepare({Kubelet(claim)}); });
  ASSERT_TRUE(WaitFor([&] { return handler_.held() == 1; }, 10s));
  FakeDraKubelet hurried(dir_.path() / "plugins_registry");
  ASSERT_THAT(hurried.Register(kDriver), IsOk());
  hurried.set_call_timeout(30s);
  auto waiting = std::async(std::launch::async, [&] {
    return hurried.Prepare({Kubelet(claim)}, "", 1);
  });
  // The second call waits for the claim's turn (beside the socket watcher)
  // until its deadline, 30 s on the runner's clock.
  ASSERT_TRUE(WaitFor([&] { return clock_.waiters() == 2; }, 10s));
  clock_.Advance(31s);  // past it, whatever margin gRPC gave the deadline
  auto answer = waiting.get();
  ASSERT_THAT(answer.status(), IsOk());
  EXPECT_THAT(answer->at("u1").error,
              HasSubstr("the kubelet's deadline passed"));
  handler_.Let();
  ASSERT_THAT(slow.get().status(), IsOk());
  EXPECT_EQ(handler_.prepares(), 1);
}

// Unprepare is said durably before the handler undoes anything: a process
// killed between the undo (the CDI spec removed) and the checkpoint write
// finds the claim "unpreparing", finishes the undo, and prepares it afresh
// instead of answering CDI ids no runtime can resolve.
TEST_F(DraFrameworkTest, AnUnprepareCutShortIsFinishedBeforeAPrepare) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const ClaimRef claim = GpuClaim("u1");
  ASSERT_THAT(kubelet_.Prepare({Kubelet(claim)}).status(), IsOk());
  runner_.reset();
  // The checkpoint as a kill after the handler's undo leaves it.
  const auto checkpoint =
      dir_.path() / "plugins" / kDriver / "prepared-claims.json";
  std::ifstream in(checkpoint);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  in.close();
  auto claims = DecodeClaims(text);
  ASSERT_THAT(claims.status(), IsOk());
  claims->at("u1").unpreparing = true;
  ASSERT_THAT(SaveClaims(checkpoint, *claims), IsOk());
  // And a temporary file of a write that was killed.
  const auto leftover =
      checkpoint.parent_path() / ".prepared-claims.json.0123456789abcdef.tmp";
  std::ofstream(leftover) << "{";
  Start();
  EXPECT_FALSE(std::filesystem::exists(leftover));
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  auto again = kubelet_.Prepare({Kubelet(claim)});
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(again->at("u1").error, "");
  EXPECT_EQ(handler_.unprepares(), 1);  // the undo finished
  EXPECT_EQ(handler_.prepares(), 2);    // and prepared again
  auto reloaded = LoadClaims(checkpoint);
  ASSERT_THAT(reloaded.status(), IsOk());
  EXPECT_FALSE(reloaded->at("u1").unpreparing);
}

// A state or CDI directory that is a link would fail every Prepare (files
// there are written without following links): one rule for both, refused
// at start, saying which.
TEST_F(DraFrameworkTest, AStateOrCdiDirectoryThatIsALinkIsRefusedAtStart) {
  const auto real = dir_.path() / "real-dir";
  std::filesystem::create_directories(real);
  std::filesystem::create_directory_symlink(real, dir_.path() / "linked");
  for (const char* which : {"state directory", "CDI directory"}) {
    DriverOptions options = Options();
    (std::string(which) == "CDI directory" ? options.cdi_dir
                                           : options.state_dir) =
        dir_.path() / "linked";
    auto runner = DriverRunner::Create(options, &source_, &handler_);
    ASSERT_THAT(runner.status(), IsOk());
    EXPECT_THAT((*runner)->Start(),
                StatusIs(StatusCode::kFailedPrecondition,
                         HasSubstr(std::string("the ") + which + " " +
                                   (dir_.path() / "linked").string() +
                                   " is a symbolic link")));
  }
}

// Rolling updates: two instances with their pod UIDs in one plugin
// directory both serve, on their own sockets, and neither replaces the
// other's; a claim prepared through one is unprepared through the other
// (each call reads the shared checkpoint under serialize.lock); stopping one
// leaves the other serving.
TEST_F(DraFrameworkTest, TwoInstancesWithTheirPodUidsBothServe) {
  DriverOptions a = Options();
  a.pod_uid = "0a0a0a0a-0000-4000-8000-00000000000a";
  DriverOptions b = Options();
  b.pod_uid = "0b0b0b0b-0000-4000-8000-00000000000b";
  auto first = DriverRunner::Create(a, &source_, &handler_);
  auto second = DriverRunner::Create(b, &source_, &handler_);
  ASSERT_THAT(first.status(), IsOk());
  ASSERT_THAT(second.status(), IsOk());
  ASSERT_THAT((*first)->Start(), IsOk());
  ASSERT_THAT((*second)->Start(), IsOk());
  ASSERT_TRUE(WaitFor([&] { return clock_.waiters() >= 2; }, 10s));
  EXPECT_EQ((*first)->registration_socket(),
            RollingUpdateRegistrationSocket(dir_.path() / "plugins_registry",
                                            kDriver, a.pod_uid));
  // "<driver>-<uid>-reg.sock"; shorter, hashed, where a socket path could
  // not hold it.
  EXPECT_EQ(RollingUpdateRegistrationSocket("/r", kDriver, a.pod_uid),
            "/r/" + std::string(kDriver) + "-" + a.pod_uid + "-reg.sock");
  EXPECT_LE(RollingUpdateRegistrationSocket("/" + std::string(60, 'r'), kDriver,
                                            a.pod_uid)
                .string()
                .size(),
            107u);
  EXPECT_EQ((*second)->dra_socket(),
            dir_.path() / "plugins" / kDriver / ("dra-" + b.pod_uid + ".sock"));
  FakeDraKubelet through_a(dir_.path() / "plugins_registry");
  FakeDraKubelet through_b(dir_.path() / "plugins_registry");
  ASSERT_THAT(
      through_a.RegisterSocket((*first)->registration_socket(), kDriver),
      IsOk());
  ASSERT_THAT(
      through_b.RegisterSocket((*second)->registration_socket(), kDriver),
      IsOk());
  EXPECT_TRUE((*first)->registered());
  EXPECT_TRUE((*second)->registered());
  struct stat before_a {};
  struct stat before_b {};
  ASSERT_EQ(lstat((*first)->dra_socket().c_str(), &before_a), 0);
  ASSERT_EQ(lstat((*second)->dra_socket().c_str(), &before_b), 0);
  const ClaimRef claim = GpuClaim("u1", 2);
  auto prepared = through_a.Prepare({Kubelet(claim)});
  ASSERT_THAT(prepared.status(), IsOk());
  ASSERT_EQ(prepared->at("u1").error, "");
  // Prepared through a: b answers the repeat from the shared checkpoint.
  auto repeat = through_b.Prepare({Kubelet(claim)});
  ASSERT_THAT(repeat.status(), IsOk());
  EXPECT_EQ(handler_.prepares(), 1);
  auto undone = through_b.Unprepare({Kubelet(claim)});
  ASSERT_THAT(undone.status(), IsOk());
  EXPECT_EQ(undone->at("u1"), "");
  ASSERT_TRUE(handler_.unprepared().contains("u1"));
  EXPECT_THAT(handler_.unprepared().at("u1"), SizeIs(2));
  EXPECT_THAT((*first)->PreparedClaims(), SizeIs(1));  // until it looks
  // A few socket checks later neither socket was replaced.
  for (int look = 0; look < 3; ++look) Look();
  struct stat after_a {};
  struct stat after_b {};
  ASSERT_EQ(lstat((*first)->dra_socket().c_str(), &after_a), 0);
  ASSERT_EQ(lstat((*second)->dra_socket().c_str(), &after_b), 0);
  EXPECT_EQ(after_a.st_ino, before_a.st_ino);
  EXPECT_EQ(after_b.st_ino, before_b.st_ino);
  // Stopping one removes its own sockets only; the other still serves.
  first->reset();
  EXPECT_TRUE(std::filesystem::exists((*second)->dra_socket()));
  EXPECT_TRUE(std::filesystem::exists((*second)->registration_socket()));
  const ClaimRef next = GpuClaim("u2");
  auto later = through_b.Prepare({Kubelet(next)});
  ASSERT_THAT(later.status(), IsOk());
  EXPECT_EQ(later->at("u2").error, "");
}

// Without pod UIDs a second instance does not take the first one's live
// sockets: it refuses to start, saying how to run two.
TEST_F(DraFrameworkTest, ASecondInstanceNeverReplacesALiveSocket) {
  Start();
  struct stat before {};
  ASSERT_EQ(lstat(runner_->dra_socket().c_str(), &before), 0);
  auto second = DriverRunner::Create(Options(), &source_, &handler_);
  ASSERT_THAT(second.status(), IsOk());
  EXPECT_THAT((*second)->Start(),
              StatusIs(StatusCode::kFailedPrecondition,
                       HasSubstr("another process serves")));
  struct stat after {};
  ASSERT_EQ(lstat(runner_->dra_socket().c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
}

// A socket that could not be served again once (its directory gone for a
// moment) is tried again at the next look, and registration follows.
TEST_F(DraFrameworkTest, ASocketThatFailedToBeServedAgainIsRetried) {
  Start();
  ASSERT_THAT(kubelet_.Register(kDriver), IsOk());
  const auto plugin_dir = dir_.path() / "plugins" / kDriver;
  // The directory goes (and with it the socket) and comes back a little
  // later: the first attempts fail.
  std::filesystem::rename(plugin_dir, dir_.path() / "moved");
  Look();  // the socket cannot be served
  EXPECT_FALSE(std::filesystem::exists(runner_->dra_socket()));
  std::filesystem::create_directories(plugin_dir);
  Look();
  EXPECT_TRUE(std::filesystem::exists(runner_->dra_socket()));
  ASSERT_TRUE(
      WaitFor([&] { return kubelet_.Register(kDriver).ok(); }, Scaled(3s)));
  EXPECT_TRUE(runner_->registered());
}

}  // namespace
}  // namespace topology::draplugin
