// topology-manager serve and topology-device-plugin as separate processes,
// on fixture machines: alignment under every policy and scope, plugin
// crash and return, manager restart, and a long admit/release loop.
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <spawn.h>
#include <sys/wait.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "topology/cpu_set.h"

#include "build_paths.h"
#include "fake_plugin.h"
#include "gate.h"
#include "run_command.h"
#include "seeded_random.h"
#include "synthetic_machines.h"
#include "temp_dir.h"
#include "time_scale.h"
#include "topologymanager/v1alpha1/control.grpc.pb.h"
#include "wait_for.h"

extern char** environ;

namespace topology::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
using ::testing::Contains;
using ::testing::Not;
using ::testing::SizeIs;
namespace tm = topologymanager::v1alpha1;

class Process {
 public:
  explicit Process(std::vector<std::string> args) {
    std::vector<char*> argv;
    argv.reserve(args.size());
    for (auto& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    EXPECT_EQ(
        posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ),
        0);
    posix_spawn_file_actions_destroy(&actions);
  }
  ~Process() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  int Stop(int signal = SIGTERM) {
    kill(pid_, signal);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  size_t Threads() const {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/task")) {
      ++n;
    }
    return n;
  }
  // The names of the process's threads (/proc/<pid>/task/*/comm).
  std::vector<std::string> ThreadNames() const {
    std::vector<std::string> names;
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/task", error)) {
      std::ifstream comm(task.path() / "comm");
      std::string name;
      if (std::getline(comm, name)) names.push_back(name);
    }
    return names;
  }
  size_t Fds() const {
    size_t n = 0;
    for ([[maybe_unused]] auto& e : std::filesystem::directory_iterator(
             "/proc/" + std::to_string(pid_) + "/fd")) {
      ++n;
    }
    return n;
  }

 private:
  pid_t pid_ = -1;
};

struct NodeSetup {
  std::string machine = "dual-socket-8gpu";
  std::string policy = "single-numa-node";
  std::string scope = "container";
  std::vector<std::string> flags = {};  // more flags of serve
};

class EndToEndTest : public ::testing::Test {
 protected:
  void Write(const NodeSetup& setup) {
    setup_ = setup;
    ASSERT_TRUE(WriteMachine(setup.machine, root_.path()));
    std::filesystem::create_directories(plugins());
    std::ofstream(work_.path() / "plugin.yaml")
        << "resources:\n"
           "  - name: example.com/gpu\n"
           "    selectors: [{vendors: [\"10de\"], classes: [\"0302\"]}]\n"
           "  - name: example.com/nic\n"
           "    selectors: [{vendors: [\"15b3\"], classes: [\"0200\"]}]\n";
  }
  std::filesystem::path plugins() const { return work_.path() / "plugins"; }
  std::string control() const {
    return (work_.path() / "control.sock").string();
  }

  // serve over this test's machine, plugin directory and control socket.
  std::vector<std::string> ServeCommand() const {
    return {topology::testing::ProgramPath("topology-manager"),
            "serve",
            "--plugin-dir",
            plugins().string(),
            "--host-root",
            root_.path().string(),
            "--control-socket",
            control()};
  }
  // Starts `command` as the manager; true once its control socket is there.
  bool StartServe(const std::vector<std::string>& command) {
    manager_ = std::make_unique<Process>(command);
    const bool listening =
        WaitFor([&] { return std::filesystem::exists(control()); }, 5s);
    stub_ = tm::Control::NewStub(grpc::CreateChannel(
        "unix:" + control(), grpc::InsecureChannelCredentials()));
    return listening;
  }
  void StartManager() {
    std::vector<std::string> command = ServeCommand();
    for (const std::string& flag :
         {std::string("--topology-manager-policy"), setup_.policy,
          std::string("--topology-manager-scope"), setup_.scope,
          std::string("--cpu-manager-policy"), std::string("static"),
          std::string("--reserved-cpus"), std::string("0"),
          std::string("--grace-period"), std::string("5s"),
          std::string("--node-name"), std::string("e2e")}) {
      command.push_back(flag);
    }
    command.insert(command.end(), setup_.flags.begin(), setup_.flags.end());
    (void)StartServe(command);
  }
  void StartPlugin() {
    plugin_ = std::make_unique<Process>(std::vector<std::string>{
        topology::testing::ProgramPath("topology-device-plugin"), "--config",
        (work_.path() / "plugin.yaml").string(), "--host-root",
        root_.path().string(), "--plugin-dir", plugins().string(),
        "--http-addr", "", "--rescan-interval", "0", "--dra-claims", ""});
  }

  json Status() {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + 5s);
    tm::StatusRequest request;
    tm::JsonReply reply;
    if (!stub_->Status(&context, request, &reply).ok()) return json();
    return json::parse(reply.json());
  }
  size_t Allocatable(const std::string& resource) {
    const json status = Status();
    if (status.is_null()) return 0;
    for (const json& r : status["resources"]) {
      if (r["name"] == resource) return r["allocatable"].get<size_t>();
    }
    return 0;
  }
  // Both resources of the default machine: each registers on its own
  // socket, so a pod asking for both waits for both.
  bool WaitGpusAndNics() {
    return WaitAllocatable("example.com/gpu", 8) &&
           WaitAllocatable("example.com/nic", 4);
  }
  bool WaitAllocatable(const std::string& resource, size_t count,
                       std::chrono::milliseconds timeout = 10s) {
    return WaitFor([&] { return Allocatable(resource) == count; }, timeout);
  }
  // `topology-manager admit FLAGS --control-socket ... MANIFEST`, as a
  // user runs it.
  CommandResult AdmitCommand(const std::string& flags,
                             const std::filesystem::path& manifest) const {
    return RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit " + flags + " --control-socket " + control() +
                      " " + manifest.string());
  }
  json Admit(const std::string& yaml) {
    grpc::ClientContext context;
    tm::AdmitRequest request;
    auto* manifest = request.add_manifests();
    manifest->set_source("test.yaml");
    manifest->set_yaml(yaml);
    tm::JsonReply reply;
    const grpc::Status status = stub_->Admit(&context, request, &reply);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() ? json::parse(reply.json())[0] : json();
  }
  bool Release(const std::string& pod) {
    grpc::ClientContext context;
    tm::ReleaseRequest request;
    request.set_pod(pod);
    tm::JsonReply reply;
    return stub_->Release(&context, request, &reply).ok();
  }

  TempDir root_;
  TempDir work_;
  NodeSetup setup_;
  std::unique_ptr<Process> manager_;
  std::unique_ptr<Process> plugin_;
  std::unique_ptr<tm::Control::Stub> stub_;
};

std::string PodYaml(const std::string& name, int gpus, int nics, int cpus) {
  std::string yaml =
      "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
      "}\nspec:\n  containers:\n    - name: c\n      resources:\n"
      "        limits:\n          cpu: \"" +
      std::to_string(cpus) + "\"\n          memory: 1Gi\n";
  if (gpus > 0)
    yaml += "          example.com/gpu: " + std::to_string(gpus) + "\n";
  if (nics > 0)
    yaml += "          example.com/nic: " + std::to_string(nics) + "\n";
  return yaml;
}

// The NUMA node of each GPU/NIC of the dual-socket machine.
int NodeOf(const std::string& address) {
  const int bus = std::stoi(address.substr(5, 2), nullptr, 16);
  return bus < 0x80 ? 0 : 1;
}

class PolicyTest : public EndToEndTest,
                   public ::testing::WithParamInterface<
                       std::tuple<std::string, std::string>> {};

TEST_P(PolicyTest, AlignmentUnderEachPolicyAndScope) {
  const auto& [policy, scope] = GetParam();
  Write({.machine = "dual-socket-8gpu", .policy = policy, .scope = scope});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  // Two GPUs, one NIC and 4 CPUs: one NUMA node whenever the policy aligns.
  const json pod = Admit(PodYaml("aligned", 2, 1, 4));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  const json& c = pod["containers"][0];
  std::set<int> nodes;
  for (const auto& id : c["devices"]["example.com/gpu"])
    nodes.insert(NodeOf(id));
  for (const auto& id : c["devices"]["example.com/nic"])
    nodes.insert(NodeOf(id));
  if (policy != "none") {
    EXPECT_THAT(nodes, SizeIs(1)) << pod.dump();
    ASSERT_FALSE(c["numa_nodes"].is_null());
    EXPECT_EQ(c["numa_nodes"].size(), 1u);
    // The exclusive CPUs are on that node (node 0: CPUs 0-7,16-23).
    const int node = *nodes.begin();
    EXPECT_EQ(c["numa_nodes"][0], node);
  }
  // Six GPUs on one node are impossible.
  const json big = Admit(PodYaml("big", 6, 0, 2));
  if (policy == "single-numa-node" || policy == "restricted") {
    EXPECT_FALSE(big["admitted"].get<bool>());
    EXPECT_EQ(big["reason"], "TopologyAffinityError");
  } else {
    EXPECT_TRUE(big["admitted"].get<bool>()) << big.dump();
  }
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_EQ(manager_->Stop(), 0);
}

// Both daemons run gRPC's poll engine, under which a client connection
// with no call on it is read by nobody: the manager lets go of its
// connection to a plugin whose stream has ended, so the plugin's stop does
// not wait out its servers' 2 s grace for a goodbye nobody reads.
TEST_F(EndToEndTest, PluginStopsPromptlyAfterServingAdmissions) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const json pod = Admit(PodYaml("one", 2, 1, 1));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_LT(std::chrono::steady_clock::now() - start, Scaled(1500ms));
  EXPECT_EQ(manager_->Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    EndToEnd, PolicyTest,
    ::testing::Combine(::testing::Values("none", "best-effort", "restricted",
                                         "single-numa-node"),
                       ::testing::Values("container", "pod")),
    [](const auto& param_info) {
      std::string name =
          std::get<0>(param_info.param) + "_" + std::get<1>(param_info.param);
      std::replace(name.begin(), name.end(), '-', '_');
      return name;
    });

// Beyond the kubelet: under the node policy "dynamic" each pod's own policy
// (spec.topology.policy or the annotation) decides it, with the real plugin
// on the dual-socket machine.
TEST_F(EndToEndTest, DynamicPolicyAppliesEachPodsOwn) {
  Write({.machine = "dual-socket-8gpu",
         .policy = "dynamic",
         .scope = "container"});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const auto with_policy = [](const std::string& name, int gpus,
                              const std::string& how) {
    std::string yaml = PodYaml(name, gpus, 0, 1);
    if (how.starts_with("spec:")) {
      yaml += "  topology: {policy: " + how.substr(5) + "}\n";
    } else if (how.starts_with("annotation:")) {
      yaml.replace(
          yaml.find("metadata: {name: " + name + "}"),
          static_cast<std::string>("metadata: {name: " + name + "}").size(),
          "metadata: {name: " + name +
              ", annotations: {topology.libtopology.dev/policy: " +
              how.substr(11) + "}}");
    }
    return yaml;
  };
  // Six GPUs cannot be on one NUMA node (four per node).
  const json strict = Admit(with_policy("strict", 6, "spec:single-numa-node"));
  EXPECT_FALSE(strict["admitted"].get<bool>());
  EXPECT_EQ(strict["reason"], "TopologyAffinityError");
  EXPECT_EQ(strict["topology_policy"]["policy"], "single-numa-node");
  EXPECT_EQ(strict["topology_policy"]["source"], "spec.topology.policy");
  const json relaxed =
      Admit(with_policy("relaxed", 6, "annotation:best-effort"));
  EXPECT_TRUE(relaxed["admitted"].get<bool>()) << relaxed.dump();
  EXPECT_EQ(relaxed["topology_policy"]["policy"], "best-effort");
  EXPECT_EQ(relaxed["topology_policy"]["source"],
            "annotation topology.libtopology.dev/policy");
  ASSERT_TRUE(Release("relaxed"));
  // No policy stated: the Topology Manager does not intervene.
  const json plain = Admit(with_policy("plain", 6, ""));
  EXPECT_TRUE(plain["admitted"].get<bool>()) << plain.dump();
  EXPECT_EQ(plain["topology_policy"]["policy"], "none");
  EXPECT_EQ(plain["topology_policy"]["source"], "default");
  EXPECT_TRUE(plain["containers"][0]["numa_nodes"].is_null());
  ASSERT_TRUE(Release("plain"));
  // Every container of the pod on one node.
  std::string two = PodYaml("together", 2, 0, 1);
  two +=
      "    - name: d\n      resources:\n        limits: {cpu: \"1\", "
      "memory: 1Gi, example.com/gpu: 2}\n"
      "  topology: {policy: pod-level-single-numa-node}\n";
  const json together = Admit(two);
  ASSERT_TRUE(together["admitted"].get<bool>()) << together.dump();
  EXPECT_EQ(together["topology_policy"]["scope"], "pod");
  std::set<int> nodes;
  for (const json& c : together["containers"]) {
    for (const auto& id : c["devices"]["example.com/gpu"]) {
      nodes.insert(NodeOf(id));
    }
  }
  EXPECT_THAT(nodes, SizeIs(1)) << together.dump();
  // An unknown policy is a clear error naming the pod.
  grpc::ClientContext context;
  tm::AdmitRequest request;
  auto* manifest = request.add_manifests();
  manifest->set_source("bad.yaml");
  manifest->set_yaml(with_policy("odd", 1, "spec:sometimes"));
  tm::JsonReply reply;
  const grpc::Status bad = stub_->Admit(&context, request, &reply);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad.error_message(),
              ::testing::HasSubstr("pod \"odd\": unknown topology policy"));
  EXPECT_EQ(plugin_->Stop(), 0);
  EXPECT_EQ(manager_->Stop(), 0);
}

TEST_F(EndToEndTest, SubNumaClusteringMachine) {
  Write({.machine = "snc", .policy = "single-numa-node", .scope = "pod"});
  StartManager();
  StartPlugin();
  // Both resources listed (they register separately; a pod asking for one
  // not yet offered is OutOf<resource>, as in the kubelet).
  json status;
  (void)WaitFor(
      [&] {
        status = Status();
        return !status.is_null() && status["resources"].size() == 2 &&
               Allocatable("example.com/gpu") > 0;
      },
      10s);
  ASSERT_FALSE(status["resources"].empty()) << status.dump();
  EXPECT_THAT(status["numa_nodes"], SizeIs(4));
  const json pod = Admit(PodYaml("one", 1, 0, 2));
  ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
  EXPECT_EQ(pod["containers"][0]["numa_nodes"].size(), 1u);
}

TEST_F(EndToEndTest, PluginKilledThenBack) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const json pod = Admit(PodYaml("held", 1, 0, 1));
  ASSERT_TRUE(pod["admitted"].get<bool>());
  const auto killed = std::chrono::steady_clock::now();
  plugin_->Stop(SIGKILL);
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 0, Scaled(1s)));
  EXPECT_LT(std::chrono::steady_clock::now() - killed, 1s);
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const json status = Status();
  EXPECT_EQ(status["pods"][0]["containers"][0]["devices"],
            pod["containers"][0]["devices"]);
}

// With its ListAndWatch streams open and idle, the plugin has no thread
// that polls on a timer for them: gRPC 1.51's callback API would add two
// "nexting_thread"s that wake every 1.1 s whether or not anything happens.
TEST_F(EndToEndTest, IdleStreamsHaveNoPollingThreads) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  const std::vector<std::string> names = plugin_->ThreadNames();
  ASSERT_FALSE(names.empty());
  EXPECT_THAT(names, Not(Contains("nexting_thread")));
}

TEST_F(EndToEndTest, ManagerRestartKeepsAllocationsAndPluginsComeBack) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  std::set<std::string> held;
  for (int i = 0; i < 3; ++i) {
    const json pod = Admit(PodYaml("before-" + std::to_string(i), 2, 0, 1));
    ASSERT_TRUE(pod["admitted"].get<bool>());
    for (const auto& id : pod["containers"][0]["devices"]["example.com/gpu"]) {
      held.insert(id.get<std::string>());
    }
  }
  ASSERT_EQ(manager_->Stop(), 0);
  StartManager();
  // The plugin sees kubelet.sock re-created and registers again.
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 8));
  EXPECT_THAT(Status()["pods"], SizeIs(3));
  const json after = Admit(PodYaml("after", 2, 0, 1));
  ASSERT_TRUE(after["admitted"].get<bool>()) << after.dump();
  for (const auto& id : after["containers"][0]["devices"]["example.com/gpu"]) {
    EXPECT_FALSE(held.contains(id.get<std::string>())) << id;
  }
  EXPECT_FALSE(Admit(PodYaml("too-many", 1, 0, 1))["admitted"].get<bool>());
}

// The Memory Manager across a SIGKILL of serve: the pinned memory comes
// back exactly, and admissions after the restart see it held.
TEST_F(EndToEndTest, MemoryAssignmentsSurviveAKill) {
  Write({.policy = "best-effort",
         .flags = {"--memory-manager-policy", "Static", "--reserved-memory",
                   "0:memory=1Gi", "--reserved-memory", "1:memory=1Gi",
                   "--kube-reserved", "memory=1948Mi"}});
  StartManager();
  const auto pod = [](const std::string& name, const std::string& memory) {
    return "kind: Pod\nmetadata: {name: " + name +
           "}\nspec:\n  containers:\n    - name: c\n      resources:\n"
           "        limits: {cpu: \"2\", memory: " +
           memory + ", hugepages-1Gi: 2Gi}\n";
  };
  // 231 GiB of regular memory per node (256 less 1 reserved and 24 of huge
  // pages): 300 GiB needs both.
  const json big = Admit(pod("big", "300Gi"));
  ASSERT_TRUE(big["admitted"].get<bool>()) << big.dump();
  EXPECT_EQ(big["containers"][0]["numa_nodes"], json::array({0, 1}));
  const json before = Status();
  ASSERT_EQ(manager_->Stop(SIGKILL), 128 + SIGKILL);
  // The killed server's socket stays; the new one serves a fresh one.
  std::filesystem::remove(control());
  StartManager();
  const json after = Status();
  ASSERT_FALSE(after.is_null());
  EXPECT_EQ(after["memory_policy"], "Static");
  EXPECT_EQ(after["pods"], before["pods"]);
  EXPECT_EQ(after["pods"][0]["containers"][0]["memory"],
            json::parse(R"([{"type":"hugepages-1Gi","size":2147483648,
                             "numa_nodes":[0,1]},
                            {"type":"memory","size":322122547200,
                             "numa_nodes":[0,1]}])"));
  // 162 GiB are left in the group [0,1]; nodes of a group are never given
  // alone.
  const json refused = Admit(pod("refused", "170Gi"));
  EXPECT_FALSE(refused["admitted"].get<bool>());
  EXPECT_EQ(refused["reason"], "UnexpectedAdmissionError");
  // --explain says the merge admitted and why the refusal is not a
  // TopologyAffinityError; --format json carries the kubelet's message.
  const auto manifest = root_.path() / "refused.yaml";
  std::ofstream(manifest) << pod("refused", "170Gi");
  const CommandResult explained = AdmitCommand("--explain", manifest);
  EXPECT_EQ(explained.exit_code, 1) << explained.out;
  EXPECT_THAT(explained.out,
              ::testing::HasSubstr("admitted by the Topology Manager"));
  EXPECT_THAT(explained.out,
              ::testing::HasSubstr("then refused: an allocation after the "
                                   "merge failed (the kubelet's "
                                   "UnexpectedAdmissionError, not "
                                   "TopologyAffinityError"));
  const CommandResult as_json = AdmitCommand("--format json", manifest);
  EXPECT_THAT(json::parse(as_json.out)["message"].get<std::string>(),
              ::testing::HasSubstr("Allocate failed due to [memorymanager]"));
  const json fits = Admit(pod("fits", "100Gi"));
  ASSERT_TRUE(fits["admitted"].get<bool>()) << fits.dump();
  EXPECT_EQ(fits["containers"][0]["numa_nodes"], json::array({0, 1}));
}

// The CPU manager's full-pcpus-only option through serve, as the kubelet
// takes it: on a machine of 2 threads per core, an odd request is refused
// with the kubelet's SMTAlignmentError and its message, --explain names the
// option, and an even one gets whole cores. An option the kubelet does not
// know stops serve as it stops the kubelet.
TEST_F(EndToEndTest, FullPcpusOnlyRefusesAsTheKubeletDoes) {
  Write({.policy = "none",
         .flags = {"--cpu-manager-policy-options", "full-pcpus-only=true"}});
  StartManager();
  const json odd = Admit(PodYaml("odd", 0, 0, 3));
  EXPECT_FALSE(odd["admitted"].get<bool>()) << odd.dump();
  EXPECT_EQ(odd["reason"], "SMTAlignmentError");
  EXPECT_EQ(odd["message"],
            "SMT Alignment Error: requested 3 cpus not multiple cpus per core "
            "= 2");
  const auto manifest = root_.path() / "odd.yaml";
  std::ofstream(manifest) << PodYaml("odd", 0, 0, 3);
  const CommandResult explained = AdmitCommand("--explain", manifest);
  EXPECT_EQ(explained.exit_code, 1) << explained.out;
  EXPECT_THAT(explained.out,
              ::testing::HasSubstr("refused by the CPU manager's option "
                                   "full-pcpus-only"));
  const json even = Admit(PodYaml("even", 0, 0, 4));
  ASSERT_TRUE(even["admitted"].get<bool>()) << even.dump();
  ASSERT_EQ(manager_->Stop(), 0);

  const std::string serve = topology::testing::ProgramPath("topology-manager") +
                            " serve --plugin-dir " + plugins().string() +
                            " --host-root " + root_.path().string() +
                            " --control-socket " + control() +
                            " --cpu-manager-policy static --reserved-cpus 0";
  // Refused as the kubelet refuses them; the gate as the kubelet's
  // --feature-gates takes it: past the gate, options that exclude each
  // other are refused.
  const struct {
    std::string flags;
    std::string message;
  } refusals[] = {
      {"--cpu-manager-policy-options fast-cpus=true",
       "unknown CPU Manager Policy option: \"fast-cpus\""},
      {"--cpu-manager-policy-options align-by-socket=true",
       "CPU Manager Policy Alpha-level Options not enabled, but option "
       "\"align-by-socket\""},
      {"--feature-gates CPUManagerPolicyAlphaOptions=true "
       "--cpu-manager-policy-options "
       "full-pcpus-only=true,distribute-cpus-across-cores=true",
       "static policy options full-pcpus-only and "
       "distribute-cpus-across-cores can not be used at the same time"},
      {"--feature-gates CPUManagerPolicyAlphaOptions=on",
       "--feature-gates: invalid value of CPUManagerPolicyAlphaOptions=on"},
      {"--feature-gates PodLevelResourceManagers=true",
       "feature gate PodLevelResourceManagers: pod-level resources in the "
       "Topology, CPU and Memory Managers are not modelled"},
  };
  for (const auto& refusal : refusals) {
    const CommandResult refused = RunCommand(serve + " " + refusal.flags);
    EXPECT_EQ(refused.exit_code, 2) << refusal.flags << "\n" << refused.out;
    EXPECT_THAT(refused.out, ::testing::HasSubstr(refusal.message))
        << refusal.flags;
  }
}

// Without --reserved-cpus the static policy reserves kube- and
// system-reserved cpu, rounded up, choosing the CPUs as the kubelet's
// NewStaticPolicy does (whole cores first: CPU 0 and its sibling); with
// none reserved at all it is refused in the kubelet's words.
TEST_F(EndToEndTest, ReservedCpusByCountAsTheKubeletTakesThem) {
  Write({});
  std::ifstream siblings(root_.path() /
                         "sys/devices/system/cpu/cpu0/topology/"
                         "thread_siblings_list");
  std::string core0;
  std::getline(siblings, core0);
  ASSERT_EQ(CpuSet::ParseList(core0)->Count(), 2) << core0;
  std::vector<std::string> serve = ServeCommand();
  serve.push_back("--cpu-manager-policy");
  serve.push_back("static");
  std::vector<std::string> command = serve;
  for (const char* flag : {"--kube-reserved", "cpu=1500m,memory=1Gi",
                           "--system-reserved", "cpu=0.4"}) {
    command.push_back(flag);
  }
  ASSERT_TRUE(StartServe(command));
  const json status = Status();
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["cpus"]["reserved"], CpuSet::ParseList(core0)->ToList());
  ASSERT_EQ(manager_->Stop(), 0);

  std::string line;
  for (const std::string& part : serve) line += part + " ";
  const CommandResult refused = RunCommand(line);
  EXPECT_EQ(refused.exit_code, 2) << refused.out;
  EXPECT_THAT(refused.out,
              ::testing::HasSubstr("[cpumanager] the static policy requires "
                                   "systemreserved.cpu + kubereserved.cpu to "
                                   "be greater than zero"));
}

// The options that shape the choice of CPUs, with the alpha gate on, as
// serve takes them: 20 CPUs of two 16-CPU nodes are 10 on each
// (distribute-cpus-across-numa), not a whole node and 4 more.
TEST_F(EndToEndTest, AlphaCpuOptionsServeWithTheirGate) {
  Write({.policy = "none",
         .flags = {"--feature-gates", "CPUManagerPolicyAlphaOptions=true",
                   "--cpu-manager-policy-options",
                   "align-by-socket=true,distribute-cpus-across-numa=true"}});
  StartManager();
  const json spread = Admit(PodYaml("spread", 0, 0, 20));
  ASSERT_TRUE(spread["admitted"].get<bool>()) << spread.dump();
  const CpuSet cpus =
      *CpuSet::ParseList(spread["containers"][0]["cpus"].get<std::string>());
  for (int node = 0; node < 2; ++node) {
    std::ifstream list(root_.path() / "sys/devices/system/node" /
                       ("node" + std::to_string(node)) / "cpulist");
    std::string text;
    std::getline(list, text);
    EXPECT_EQ(cpus.Intersection(*CpuSet::ParseList(text)).Count(), 10)
        << cpus.ToList() << " on node " << node;
  }
}

// serve with the kubelet's memory flags refuses to start (exit 2, the
// kubelet's words) where the kubelet refuses, and starts where it starts.
TEST_F(EndToEndTest, ServeRefusesMemoryFlagsTheKubeletRefuses) {
  Write({});
  const std::string serve = topology::testing::ProgramPath("topology-manager") +
                            " serve --plugin-dir " + plugins().string() +
                            " --host-root " + root_.path().string() +
                            " --control-socket " + control() +
                            " --memory-manager-policy Static";
  struct Refusal {
    std::string flags;
    std::string message;
  };
  const Refusal refusals[] = {
      {"",
       "the total amount \"0\" of type \"memory\" is not equal to the "
       "value \"100Mi\""},
      {" --reserved-memory 0:memory=50Mi --reserved-memory 7:memory=50Mi",
       "references a NUMA node 7 that does not exist on this machine"},
      {" --reserved-memory 0:memory=1Gi",
       "the total amount \"1Gi\" of type "
       "\"memory\" is not equal to the "
       "value \"100Mi\""},
      {" --reserved-memory 0:memory=1Gi --memory-drift-tolerance lots",
       "--memory-drift-tolerance"},
  };
  for (const Refusal& r : refusals) {
    const CommandResult result = RunCommand(serve + r.flags);
    EXPECT_EQ(result.exit_code, 2) << r.flags << "\n" << result.out;
    EXPECT_THAT(result.out, ::testing::HasSubstr(r.message)) << r.flags;
  }
  // The kubelet's configuration file, pasted: its reservations refused as
  // the flags are, and a flag given as well overrides it.
  const auto config = root_.path() / "kubelet-config.yaml";
  std::ofstream(config) << "apiVersion: kubelet.config.k8s.io/v1beta1\n"
                           "kind: KubeletConfiguration\n"
                           "memoryManagerPolicy: Static\n"
                           "reservedMemory:\n"
                           "  - numaNode: 0\n"
                           "    limits: {memory: 1Gi}\n";
  const std::string with_config =
      topology::testing::ProgramPath("topology-manager") +
      " serve --plugin-dir " + plugins().string() + " --host-root " +
      root_.path().string() + " --control-socket " + control() + " --config " +
      config.string();
  CommandResult result = RunCommand(with_config);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("the total amount \"1Gi\" of type "
                                   "\"memory\" is not equal to the value "
                                   "\"100Mi\""));
  result = RunCommand(with_config +
                      " --memory-manager-policy None"
                      " --cpu-manager-policy nonsense");
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr("nonsense"));
  // Adds up: 50Mi + 50Mi reserved = the default eviction's 100Mi, from the
  // file.
  std::ofstream(config, std::ios::trunc)
      << "apiVersion: kubelet.config.k8s.io/v1beta1\n"
         "kind: KubeletConfiguration\n"
         "memoryManagerPolicy: Static\n"
         "topologyManagerPolicy: single-numa-node\n"
         "reservedMemory:\n"
         "  - {numaNode: 0, limits: {memory: 50Mi}}\n"
         "  - {numaNode: 1, limits: {memory: 50Mi}}\n";
  setup_.flags = {"--config", config.string()};
  StartManager();
  const json status = Status();
  ASSERT_FALSE(status.is_null());
  EXPECT_EQ(status["memory_policy"], "Static");
}

TEST_F(EndToEndTest, ThousandPodsAdmittedAndReleasedWithoutLeaks) {
  Write({.machine = "dual-socket-8gpu",
         .policy = "single-numa-node",
         .scope = "pod"});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  size_t threads = 0;
  size_t fds = 0;
  const int rounds = static_cast<int>(
      std::max<int64_t>(100, std::strtol(std::getenv("TOPOLOGY_E2E_PODS")
                                             ? std::getenv("TOPOLOGY_E2E_PODS")
                                             : "1000",
                                         nullptr, 10)));
  for (int i = 0; i < rounds; ++i) {
    const std::string name = "pod-" + std::to_string(i);
    const json pod = Admit(PodYaml(name, 1 + i % 4, i % 2, 1 + i % 3));
    ASSERT_TRUE(pod["admitted"].get<bool>()) << pod.dump();
    ASSERT_TRUE(Release(name));
    if (i == 50) {
      threads = manager_->Threads();
      fds = manager_->Fds();
    }
  }
  const json status = Status();
  EXPECT_THAT(status["pods"], SizeIs(0));
  for (const json& r : status["resources"])
    EXPECT_EQ(r["in_use"], 0) << r.dump();
  // gRPC's pools vary by a few threads with the load; a leak would grow
  // with the 950 cycles after the measurement.
  EXPECT_LE(manager_->Threads(), threads + 8);
  EXPECT_LE(manager_->Fds(), fds + 4);
}

TEST_F(EndToEndTest, CommandLine) {
  Write({});
  StartManager();
  StartPlugin();
  ASSERT_TRUE(WaitGpusAndNics());
  const auto file = [&](const std::string& name, const std::string& text) {
    const auto path = work_.path() / name;
    std::ofstream(path) << text;
    return path.string();
  };
  const std::string good = file("good.yaml", PodYaml("good", 2, 1, 2));
  CommandResult result = AdmitCommand("--format json", good);
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const json line = json::parse(result.out);
  EXPECT_EQ(line["pod"], "good");
  EXPECT_EQ(line["admitted"], true);
  EXPECT_TRUE(line["reason"].is_null());
  EXPECT_EQ(line["containers"][0]["devices"]["example.com/gpu"].size(), 2u);
  EXPECT_EQ(line["containers"][0]["numa_nodes"].size(), 1u);
  EXPECT_FALSE(line["containers"][0]["cpus"].get<std::string>().empty());

  result =
      AdmitCommand("--format json", file("six.yaml", PodYaml("six", 6, 0, 1)));
  EXPECT_EQ(result.exit_code, 1) << result.out;
  EXPECT_EQ(json::parse(result.out)["reason"], "TopologyAffinityError");
  // The kubelet's message beside its reason, as status and the table say.
  EXPECT_EQ(json::parse(result.out)["message"],
            "Resources cannot be allocated with Topology locality");

  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit --control-socket " + control() + " " +
                      file("bad.yaml",
                           "kind: Pod\nmetadata: {name: b}\nspec: "
                           "{containers: [{name: c, resources: {limits: "
                           "{cpu: lots}}}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("spec.containers[0].resources.limits.cpu"));

  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " status --format nrt --control-socket " + control());
  ASSERT_EQ(result.exit_code, 0) << result.out;
  const json nrt = json::parse(result.out);
  EXPECT_EQ(nrt["kind"], "NodeResourceTopology");
  EXPECT_THAT(nrt["zones"], SizeIs(2));

  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " release good --control-socket " + control());
  EXPECT_EQ(result.exit_code, 0) << result.out;
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " release good --control-socket " + control());
  EXPECT_EQ(result.exit_code, 2) << result.out;
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " status --control-socket " +
                      (work_.path() / "nope.sock").string());
  EXPECT_EQ(result.exit_code, 3) << result.out;

  // A pod name that is not UTF-8 is bad input (2), named, never "cannot
  // reach" (3).
  result = RunCommand(
      topology::testing::ProgramPath("topology-manager") +
      " admit --control-socket " + control() + " " +
      file("latin1.yaml",
           "kind: Pod\nmetadata: {name: \"caf\xe9\"}\nspec: {containers: "
           "[{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("metadata.name: is not valid UTF-8"));
  // Elsewhere (a comment), the server names the file and line.
  result = RunCommand(
      topology::testing::ProgramPath("topology-manager") +
      " admit --control-socket " + control() + " " +
      file("comment.yaml",
           "kind: Pod\nmetadata: {name: c}\n# caf\xe9\nspec: {containers: "
           "[{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("comment.yaml line 3: not valid UTF-8"));
  // Manifests are bounded before anything is sent: exit 2 naming the file
  // and the limit, never "cannot reach" or an exception's text.
  const std::string big = file("big.yaml", std::string(20u << 20, '#'));
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit --control-socket " + control() + " " + big);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr(big + " is larger than 4 MiB"));
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit --control-socket " + control() + " " +
                      work_.path().string());
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr("is a directory"));
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit --control-socket " + control() + " /dev/zero");
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("/dev/zero is larger than 4 MiB"));
  const std::string part = file("part.yaml", std::string(4u << 20, '#'));
  result = RunCommand(topology::testing::ProgramPath("topology-manager") +
                      " admit --control-socket " + control() + " " + part +
                      " " + part + " " + part + " " + good);
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out, ::testing::HasSubstr("larger than 12 MiB"));
  // A key given twice is refused, as the API server refuses it.
  result =
      RunCommand(topology::testing::ProgramPath("topology-manager") +
                 " admit --control-socket " + control() + " " +
                 file("twice.yaml",
                      "kind: Pod\nmetadata:\n  name: twice\n  annotations:\n"
                      "    topology.libtopology.dev/policy: none\n"
                      "    topology.libtopology.dev/policy: single-numa-node\n"
                      "spec: {containers: [{name: c}]}\n"));
  EXPECT_EQ(result.exit_code, 2) << result.out;
  EXPECT_THAT(result.out,
              ::testing::HasSubstr("metadata.annotations: key "
                                   "\"topology.libtopology.dev/policy\" is "
                                   "given twice (lines 5 and 6)"));
  // The server refuses a status format it does not know.
  {
    grpc::ClientContext context;
    tm::StatusRequest request;
    request.set_format("yaml");
    tm::JsonReply reply;
    const grpc::Status status = stub_->Status(&context, request, &reply);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(status.error_message(),
                ::testing::HasSubstr("unknown status format"));
  }
}

}  // namespace
}  // namespace topology::testing

namespace topology::testing {
namespace {

// Every binary names itself and the project's version, and exits 0.
TEST(CommandLineTest, EveryBinaryPrintsItsVersion) {
  for (const std::string& binary :
       {topology::testing::ProgramPath("topology-manager"),
        topology::testing::ProgramPath("topology-device-plugin")}) {
    const CommandResult result = RunCommand(binary + " --version");
    EXPECT_EQ(result.exit_code, 0) << binary << ": " << result.out;
    const std::string name = std::filesystem::path(binary).filename().string();
    EXPECT_EQ(result.out, name + " " + TOPOLOGY_PROJECT_VERSION + "\n");
  }
}

// Calls on one connection to the serving process are served concurrently:
// a status and a release sent on the channel of an admission that waits
// for its plugin are answered at once, not after the admission (the
// client reuses its channel, as every gRPC client does).
TEST_F(EndToEndTest, CallsOnOneConnectionDoNotWaitForEachOther) {
  Write({});
  StartManager();
  Gate open(/*open=*/true);
  std::promise<void> allocating;
  std::atomic<bool> first{true};
  FakePlugin plugin(plugins(), "example.com/gpu", "slow.sock");
  plugin.SetDevices({MakeDevice("gpu-0", {0}), MakeDevice("gpu-1", {0})});
  plugin.SetAllocate([&](const v1beta1::AllocateRequest& request,
                         v1beta1::AllocateResponse* response) {
    if (!open.is_open() && first.exchange(false)) allocating.set_value();
    open.Wait();
    for (int i = 0; i < request.container_requests_size(); ++i) {
      response->add_container_responses();
    }
    return grpc::Status::OK;
  });
  plugin.Start();
  ASSERT_TRUE(plugin.Register().ok());
  ASSERT_TRUE(WaitAllocatable("example.com/gpu", 2));
  ASSERT_TRUE(Admit(PodYaml("held", 1, 0, 0))["admitted"].get<bool>());
  open.Close();
  // A fresh connection whose first call is the slow admission.
  stub_ = tm::Control::NewStub(grpc::CreateChannel(
      "unix:" + control(), grpc::InsecureChannelCredentials()));
  auto slow = std::async(std::launch::async,
                         [&] { return Admit(PodYaml("slow", 1, 0, 0)); });
  allocating.get_future().wait();
  for (int round = 0; round < 3; ++round) {
    const auto start = std::chrono::steady_clock::now();
    EXPECT_FALSE(Status().is_null()) << "round " << round;
    EXPECT_LT(std::chrono::steady_clock::now() - start, 1s)
        << "round " << round;
  }
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(Release("held"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, 1s);
  open.Open();
  EXPECT_TRUE(slow.get()["admitted"].get<bool>());
  plugin.Stop();
}

// The randomised model test: clients admit (one pod or a batch) and release
// over the control socket while plugins re-register, and the serving
// process is killed (SIGKILL) at a random moment of each round. After every
// restart the state is checked against what the clients were answered:
// every pod answered admitted is present with the devices it was given,
// every pod answered released is absent, no device is held twice, and the
// devices in use are exactly those the pods hold. Calls cut by the kill may
// have happened or not; the restored state settles them. Storms: a pod is
// admitted by every client at once (every admitted answer names the same
// devices), then released by every client at once (at most one release
// succeeds), and the process is never found dead of anything but the kill.
// Rounds:
// TOPOLOGY_MODEL_ROUNDS (CI: a few; the "long" label runs many), seed:
// TOPOLOGY_MODEL_SEED.
TEST_F(EndToEndTest, RandomisedCrashesKeepEveryAnswer) {
  const int64_t rounds = EnvOr("TOPOLOGY_MODEL_ROUNDS", 6);
  const uint64_t seed = static_cast<uint64_t>(EnvOr(
      "TOPOLOGY_MODEL_SEED", static_cast<int64_t>(std::random_device()())));
  SCOPED_TRACE("TOPOLOGY_MODEL_SEED=" + std::to_string(seed));
  SeededRandom random(seed);
  Write({.policy = "best-effort"});
  constexpr int kDevices = 8;
  std::vector<v1beta1::Device> devices;
  for (int i = 0; i < kDevices; ++i) {
    devices.push_back(MakeDevice("dev-" + std::to_string(i), {i % 2}));
  }
  // The model: pods whose last answer was "admitted" (uid -> devices), and
  // those whose last answer was "released" or "rejected".
  std::mutex mu;
  // Notified when a storm's admission returns (under `mu`).
  std::condition_variable storm_settled;
  std::map<std::string, std::vector<std::string>> present;
  std::set<std::string> absent;
  std::set<std::string> unsure;  // a call cut by the kill
  int next_pod = 0;
  std::vector<std::unique_ptr<FakePlugin>> fakes;
  int endpoints = 0;
  const auto register_plugin = [&] {
    auto plugin = std::make_unique<FakePlugin>(
        plugins(), "example.com/gpu",
        "model-" + std::to_string(endpoints++) + ".sock");
    plugin->SetDevices(devices);
    plugin->Start();
    EXPECT_TRUE(plugin->Register().ok());
    fakes.push_back(std::move(plugin));
  };
  size_t admitted_total = 0;
  size_t released_total = 0;
  for (int64_t round = 0; round < rounds; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // The previous round's plugins, and the sockets the kill left behind:
    // StartManager waits for a fresh control socket.
    fakes.clear();
    std::filesystem::remove(control());
    StartManager();
    register_plugin();
    // Restored (the control socket answers), then the plugin is back.
    json restored;
    (void)WaitFor(
        [&] {
          restored = Status();
          return !restored.is_null();
        },
        10s);
    ASSERT_FALSE(restored.is_null()) << "serve did not come back";
    size_t held_total = 0;
    for (const json& pod : restored["pods"]) {
      for (const json& container : pod["containers"]) {
        held_total += container["devices"]["example.com/gpu"].size();
      }
    }
    ASSERT_LE(held_total, static_cast<size_t>(kDevices));
    ASSERT_TRUE(WaitAllocatable("example.com/gpu", kDevices))
        << Status().dump();
    // Check the restored state against the answers.
    const json status = Status();
    ASSERT_THAT(status["resources"], SizeIs(1));
    EXPECT_EQ(status["resources"][0]["in_use"].get<size_t>(), held_total);
    std::map<std::string, std::string> holder;
    std::set<std::string> uids;
    for (const json& pod : status["pods"]) {
      const std::string uid = pod["uid"];
      uids.insert(uid);
      std::vector<std::string> held;
      for (const json& c : pod["containers"]) {
        for (const json& id : c["devices"]["example.com/gpu"]) {
          held.push_back(id);
          auto [it, fresh] = holder.emplace(id.get<std::string>(), uid);
          EXPECT_TRUE(fresh)
              << id << " held by " << it->second << " and " << uid;
        }
      }
      std::sort(held.begin(), held.end());
      if (auto it = present.find(uid); it != present.end()) {
        EXPECT_EQ(held, it->second) << uid;
      }
    }
    {
      std::lock_guard lock(mu);
      for (const auto& [uid, held] : present) {
        EXPECT_TRUE(uids.contains(uid)) << uid << " was answered admitted";
      }
      for (const std::string& uid : absent) {
        EXPECT_FALSE(uids.contains(uid)) << uid << " was answered released";
      }
      // The cut calls settle as the restored state says.
      for (const std::string& uid : unsure) {
        if (!uids.contains(uid)) absent.insert(uid);
      }
      unsure.clear();
      for (const json& pod : status["pods"]) {
        const std::string uid = pod["uid"];
        if (present.contains(uid)) continue;
        std::vector<std::string> held;
        for (const json& c : pod["containers"]) {
          for (const json& id : c["devices"]["example.com/gpu"]) {
            held.push_back(id);
          }
        }
        std::sort(held.begin(), held.end());
        present[uid] = held;
        absent.erase(uid);
      }
    }
    if (::testing::Test::HasFailure()) return;

    // Clients until the kill.
    std::atomic<bool> killed{false};
    std::atomic<int> answers{0};  // calls answered OK this round
    // The storm of this round: one pod every client admits, then every
    // client releases. Its answers settle at the restart like cut calls.
    struct Storm {
      std::string uid;
      bool releasing = false;  // no admission of it starts any more
      int admitting = 0;       // admissions of it in flight
      int releasing_now = 0;   // releases in flight
      int released = 0;        // releases answered OK
      int gone = 0;            // releases answered NOT_FOUND
      // An admission whose call was cut (it may still take effect on the
      // server after any release): the storm's answers prove nothing.
      bool cut = false;
      std::optional<std::vector<std::string>> held;
    };
    std::shared_ptr<Storm> current_storm;
    int storms = 0;
    // One storm step of a client: true when it took its turn.
    const auto storm_step = [&](SeededRandom& mine, tm::Control::Stub& stub) {
      std::unique_lock lock(mu);
      if (!current_storm ||
          (current_storm->releasing && current_storm->admitting == 0 &&
           current_storm->releasing_now == 0 &&
           current_storm->released + current_storm->gone > 0)) {
        current_storm = std::make_shared<Storm>();
        current_storm->uid = "uid-storm-" + std::to_string(round) + "-" +
                             std::to_string(storms++);
        unsure.insert(current_storm->uid);
      }
      const std::shared_ptr<Storm> storm = current_storm;
      const std::string uid = storm->uid;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() + 5s);
      tm::JsonReply reply;
      if (!storm->releasing && !mine.Chance(25)) {
        ++storm->admitting;
        lock.unlock();
        tm::AdmitRequest request;
        auto* manifest = request.add_manifests();
        manifest->set_source("storm.yaml");
        manifest->set_yaml(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: " + uid.substr(4) +
            ", uid: " + uid +
            "}\nspec:\n  containers:\n  - name: main\n    resources:\n"
            "      limits: {example.com/gpu: 1}\n");
        const grpc::Status done = stub.Admit(&context, request, &reply);
        if (done.ok()) ++answers;
        lock.lock();
        --storm->admitting;
        storm_settled.notify_all();
        if (!done.ok()) {
          storm->cut = true;
          return;
        }
        const json results = json::parse(reply.json(), nullptr, false);
        if (!results.is_array() || results.size() != 1) {
          ADD_FAILURE() << reply.json();
          return;
        }
        const json& result = results[0];
        if (!result.value("admitted", false)) return;
        std::vector<std::string> held;
        for (const json& id :
             result["containers"][0]["devices"]["example.com/gpu"]) {
          held.push_back(id);
        }
        if (storm->held) {
          EXPECT_EQ(held, *storm->held) << uid << ": two answers disagree";
        }
        storm->held = held;
        ++admitted_total;
        return;
      }
      // Releases start once no admission of the pod is in flight: from
      // then on the pod can only go.
      storm->releasing = true;
      storm_settled.wait(
          lock, [&] { return storm->admitting == 0 || killed.load(); });
      ++storm->releasing_now;
      lock.unlock();
      tm::ReleaseRequest request;
      request.set_pod(uid);
      const grpc::Status done = stub.Release(&context, request, &reply);
      if (done.ok()) ++answers;
      lock.lock();
      --storm->releasing_now;
      if (done.ok()) {
        ++storm->released;
        ++released_total;
        if (!storm->cut) {
          EXPECT_EQ(storm->released, 1)
              << uid << " released twice: " << storm->released;
          unsure.erase(uid);
          absent.insert(uid);
        }
      } else if (done.error_code() == grpc::StatusCode::NOT_FOUND) {
        ++storm->gone;  // never admitted, or released by another client
      } else if (done.error_code() == grpc::StatusCode::UNKNOWN ||
                 done.error_code() == grpc::StatusCode::INTERNAL) {
        ADD_FAILURE() << uid << ": release answered "
                      << static_cast<int>(done.error_code()) << " "
                      << done.error_message();
      }
    };
    auto channel = grpc::CreateChannel("unix:" + control(),
                                       grpc::InsecureChannelCredentials());
    std::vector<std::thread> clients;
    std::vector<uint64_t> client_seeds;
    for (int c = 0; c < 3; ++c) client_seeds.push_back(random.engine()());
    for (size_t client = 0; client < 3; ++client) {
      clients.emplace_back([&, client] {
        SeededRandom mine(client_seeds[client]);
        auto stub = tm::Control::NewStub(channel);
        while (!killed.load()) {
          if (mine.Chance(30)) {
            storm_step(mine, *stub);
            continue;
          }
          grpc::ClientContext context;
          context.set_deadline(std::chrono::system_clock::now() + 5s);
          tm::JsonReply reply;
          std::string release_uid;
          {
            std::lock_guard lock(mu);
            if (!present.empty() && mine.Chance(40)) {
              auto it = present.begin();
              std::advance(
                  it, mine.Uniform(0, static_cast<int>(present.size()) - 1));
              release_uid = it->first;
              present.erase(it);
              unsure.insert(release_uid);
            }
          }
          if (!release_uid.empty()) {
            tm::ReleaseRequest request;
            request.set_pod(release_uid);
            const grpc::Status done = stub->Release(&context, request, &reply);
            if (done.ok()) ++answers;
            std::lock_guard lock(mu);
            if (done.ok()) {
              unsure.erase(release_uid);
              absent.insert(release_uid);
              ++released_total;
            }
            continue;
          }
          tm::AdmitRequest request;
          std::vector<std::string> batch;
          const int pods = mine.Chance(30) ? mine.Uniform(2, 4) : 1;
          {
            std::lock_guard lock(mu);
            for (int p = 0; p < pods; ++p) {
              batch.push_back("model-" + std::to_string(next_pod++));
              unsure.insert("uid-" + batch.back());
            }
          }
          for (const std::string& name : batch) {
            auto* manifest = request.add_manifests();
            manifest->set_source(name + ".yaml");
            manifest->set_yaml(
                "apiVersion: v1\nkind: Pod\nmetadata: {name: " + name +
                ", uid: uid-" + name +
                "}\nspec:\n  containers:\n  - name: main\n    resources:\n"
                "      limits: {example.com/gpu: " +
                std::to_string(mine.Uniform(1, 2)) + "}\n");
          }
          const grpc::Status done = stub->Admit(&context, request, &reply);
          if (done.ok()) ++answers;
          if (!done.ok()) continue;  // cut: the restart settles them
          const json results = json::parse(reply.json(), nullptr, false);
          std::lock_guard lock(mu);
          for (const json& result : results) {
            const std::string uid = result.value("uid", "");
            unsure.erase(uid);
            if (result.value("admitted", false)) {
              std::vector<std::string> held;
              for (const json& container : result["containers"]) {
                for (const json& id : container["devices"]["example.com/gpu"]) {
                  held.push_back(id);
                }
              }
              std::sort(held.begin(), held.end());
              present[uid] = held;
              ++admitted_total;
            } else {
              absent.insert(uid);
            }
          }
        }
      });
    }
    // Plugins re-register now and then; then the crash. Both come after a
    // number of answers the round draws, not after a time.
    // (No ASSERT until the clients are joined.)
    const int crash_after = random.Uniform(5, 80);
    bool answering = true;
    for (int answered = random.Uniform(1, 10);
         answering && answered < crash_after;
         answered += random.Uniform(1, 10)) {
      answering = WaitFor([&] { return answers.load() >= answered; });
      if (random.Chance(30)) register_plugin();
    }
    EXPECT_TRUE(answering &&
                WaitFor([&] { return answers.load() >= crash_after; }))
        << "round " << round << ": " << answers.load() << " answers";
    EXPECT_EQ(manager_->Stop(SIGKILL), 128 + SIGKILL)
        << "serve died before the kill";
    {
      std::lock_guard lock(mu);
      killed.store(true);
    }
    storm_settled.notify_all();
    for (std::thread& client : clients) client.join();
  }
  RecordProperty("admitted", static_cast<int>(admitted_total));
  RecordProperty("released", static_cast<int>(released_total));
  EXPECT_GT(admitted_total, 0u);
}
}  // namespace
}  // namespace topology::testing
