// Malformed, truncated and hostile sysfs trees: discovery must give a clear
// warning naming the file (or a documented degraded result), never crash,
// hang or end the process (libpci's default error hook calls exit()).
#include <csignal>
#include <fstream>

#include <fcntl.h>
#include <hwloc.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/discovery.h"

#include "synthetic_machines.h"
#include "temp_dir.h"

namespace topology {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

PciAddress A(const char* text) { return *PciAddress::Parse(text); }

class HostileTreeTest : public ::testing::Test {
 protected:
  void SetUp() override { testing::WriteDualSocketGpuMachine(dir_.path()); }

  fs::path Sys(const std::string& rel) const {
    return dir_.path() / "sys" / rel;
  }
  fs::path Gpu() const {
    return fs::canonical(Sys("bus/pci/devices/0000:1a:00.0"));
  }
  static void Write(const fs::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << text;
  }
  Topology Run(bool use_libpci = true) {
    DiscoveryOptions options;
    options.host_root = dir_.path();
    options.use_libpci = use_libpci;
    auto t = Discover(options);
    EXPECT_TRUE(t.ok()) << t.status().ToString();
    return t.ok() ? *std::move(t) : Topology();
  }

  testing::TempDir dir_;
};

TEST_F(HostileTreeTest, GarbageNumaNodeIsNamedAndFallsBackToLocalCpus) {
  Write(Gpu() / "numa_node", "banana\n");
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("0000:1a:00.0/numa_node")));
  const PciDevice* gpu = t.FindDevice(A("0000:1a:00.0"));
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->sysfs_numa_node, std::nullopt);
  EXPECT_THAT(gpu->numa_nodes, ElementsAre(0));
  EXPECT_EQ(gpu->numa_source, NumaSource::kLocalCpus);
}

TEST_F(HostileTreeTest, NulBytesAndTruncatedFiles) {
  Write(Gpu() / "local_cpulist", std::string("0-7,16-23\n\0\0", 12));
  Write(Gpu() / "numa_node", "");
  Write(Sys("devices/system/node/node1/cpulist"),
        std::string("8-15,24-31\n\0", 12));
  const Topology t = Run();
  const PciDevice* gpu = t.FindDevice(A("0000:1a:00.0"));
  ASSERT_NE(gpu, nullptr);
  EXPECT_THAT(gpu->numa_nodes, ElementsAre(0));
  EXPECT_EQ(t.FindNumaNode(1)->cpus.ToList(), "8-15,24-31");
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("numa_node")));
}

TEST_F(HostileTreeTest, ShortDistanceRowDropsMatrixWithWarning) {
  Write(Sys("devices/system/node/node1/distance"), "21\n");
  const Topology t = Run();
  EXPECT_FALSE(t.has_distances());
  EXPECT_THAT(t.warnings(), Contains(AllOf(HasSubstr("node1/distance"),
                                           HasSubstr("1 values for 2 nodes"))));
}

TEST_F(HostileTreeTest, GarbageDistanceRow) {
  Write(Sys("devices/system/node/node0/distance"), "10 twenty-one\n");
  const Topology t = Run();
  EXPECT_FALSE(t.has_distances());
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("twenty-one")));
}

TEST_F(HostileTreeTest, MissingVendorFileDoesNotEndTheProcess) {
  // libpci's default error hook would call exit(1) here.
  fs::remove(Gpu() / "vendor");
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("libpci would abort")));
  EXPECT_EQ(t.pci_devices().size(), 32u);
  EXPECT_EQ(t.FindDevice(A("0000:1a:00.0"))->vendor_id, 0);
  EXPECT_EQ(t.FindDevice(A("0000:1b:00.0"))->vendor_id, 0x10de);
}

TEST_F(HostileTreeTest, UnparsableEntryInDevicesIsSkipped) {
  fs::create_directories(Sys("bus/pci/devices/not-a-device"));
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("not-a-device")));
  EXPECT_EQ(t.pci_devices().size(), 32u);
}

TEST_F(HostileTreeTest, SymlinkLoopIsReportedNotFollowed) {
  fs::create_symlink("loop-b", Sys("bus/pci/devices/loop-a"));
  fs::create_symlink("loop-a", Sys("bus/pci/devices/loop-b"));
  fs::create_symlink("0000:77:00.0", Sys("bus/pci/devices/0000:77:00.0"));
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("0000:77:00.0")));
  EXPECT_EQ(t.FindDevice(A("0000:77:00.0")), nullptr);
}

TEST_F(HostileTreeTest, LinkEscapingTheRootIsRefused) {
  // An absolute link would read the live machine's sysfs instead.
  fs::create_directory_symlink("/sys/devices",
                               Sys("bus/pci/devices/0000:78:00.0"));
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("resolves outside")));
  EXPECT_EQ(t.FindDevice(A("0000:78:00.0")), nullptr);
}

TEST_F(HostileTreeTest, FifoWouldBlockAndIsRefused) {
  fs::remove(Gpu() / "numa_node");
  ASSERT_EQ(::mkfifo((Gpu() / "numa_node").c_str(), 0600), 0);
  fs::remove(Sys("devices/system/cpu/cpu3/topology/core_id"));
  ASSERT_EQ(
      ::mkfifo(Sys("devices/system/cpu/cpu3/topology/core_id").c_str(), 0600),
      0);
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("not a regular file")));
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("hwloc skipped")));
  const PciDevice* gpu = t.FindDevice(A("0000:1a:00.0"));
  ASSERT_NE(gpu, nullptr);
  EXPECT_THAT(gpu->numa_nodes, ElementsAre(0));  // from local_cpulist
}

TEST_F(HostileTreeTest, HugeFileIsRejected) {
  Write(Gpu() / "local_cpulist", std::string(1 << 20, '1'));
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("larger than")));
}

TEST_F(HostileTreeTest, MissingNodeDirectoryMeansOneNode) {
  fs::remove_all(Sys("devices/system/node"));
  const Topology t = Run();
  ASSERT_EQ(t.numa_nodes().size(), 1u);
  EXPECT_EQ(t.numa_nodes()[0].id, 0);
  EXPECT_EQ(t.numa_nodes()[0].cpus.Count(), 32);
  EXPECT_THAT(t.warnings(),
              Contains(HasSubstr("one node 0 holds every online CPU")));
  // numa_node 1 now names no online node: kept as a conflict.
  const PciDevice* remote = t.FindDevice(A("0000:9a:00.0"));
  ASSERT_NE(remote, nullptr);
  EXPECT_THAT(remote->conflicts,
              Contains(HasSubstr("not an online NUMA node")));
}

TEST_F(HostileTreeTest, OnlineNodeWithoutDirectory) {
  Write(Sys("devices/system/node/online"), "0-2\n");
  const Topology t = Run();
  EXPECT_EQ(t.numa_nodes().size(), 3u);
  EXPECT_FALSE(t.has_distances());
  EXPECT_THAT(t.warnings(), Contains(HasSubstr("node 2 is listed but")));
}

TEST_F(HostileTreeTest, MissingPciDirectory) {
  fs::remove_all(Sys("bus/pci"));
  const Topology t = Run();
  EXPECT_THAT(t.pci_devices(), IsEmpty());
  EXPECT_EQ(t.numa_nodes().size(), 2u);
}

// A reader that fails chosen paths the way an unreadable file does (tests
// run as root, where file modes do not stop reads).
class FaultyReader : public SysfsReader {
 public:
  FaultyReader(std::unique_ptr<SysfsReader> inner, std::string failing)
      : inner_(std::move(inner)), failing_(std::move(failing)) {}
  StatusOr<std::string> ReadFile(std::string_view path) const override {
    if (path.find(failing_) != std::string_view::npos) {
      return PermissionDeniedError("cannot open " + inner_->Describe(path) +
                                   ": Permission denied");
    }
    return inner_->ReadFile(path);
  }
  StatusOr<std::vector<std::string>> ListDirectory(
      std::string_view p) const override {
    return inner_->ListDirectory(p);
  }
  StatusOr<std::string> ReadLink(std::string_view p) const override {
    return inner_->ReadLink(p);
  }
  StatusOr<std::string> CanonicalPath(std::string_view p) const override {
    return inner_->CanonicalPath(p);
  }
  bool Exists(std::string_view p) const override { return inner_->Exists(p); }
  bool IsSpecialFile(std::string_view p) const override {
    return inner_->IsSpecialFile(p);
  }
  std::optional<fs::path> HostRoot() const override { return std::nullopt; }
  std::string Describe(std::string_view p) const override {
    return inner_->Describe(p);
  }

 private:
  std::unique_ptr<SysfsReader> inner_;
  std::string failing_;
};

// The host reader's listing of special files (from the types the directory
// listing gives) agrees with asking IsSpecialFile about every entry (the
// default, here through FaultyReader, which forwards everything else).
TEST_F(HostileTreeTest, SpecialFilesListedFromTypesAsByStat) {
  const fs::path node = Sys("devices/system/node/node0");
  ASSERT_EQ(::mkfifo((node / "fifo").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo((node / "another").c_str(), 0600), 0);
  fs::create_symlink("cpu0", node / "link");
  const auto host = NewHostRootReader(dir_.path());
  const FaultyReader by_stat(NewHostRootReader(dir_.path()), "none");
  for (const char* dir : {"devices/system/node/node0", "devices/system/cpu",
                          "devices/system/cpu/cpu3/topology"}) {
    auto fast = host->ListSpecialFiles(dir);
    auto slow = by_stat.ListSpecialFiles(dir);
    ASSERT_TRUE(fast.ok()) << fast.status().ToString();
    ASSERT_TRUE(slow.ok()) << slow.status().ToString();
    EXPECT_EQ(*fast, *slow) << dir;
  }
  EXPECT_THAT(*host->ListSpecialFiles("devices/system/node/node0"),
              ElementsAre("another", "fifo"));
  EXPECT_FALSE(host->ListSpecialFiles("devices/system/node/absent").ok());
  // FIFOs nobody opens stop nothing: hwloc still gives the packages.
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Not(Contains(HasSubstr("hwloc skipped"))));
  EXPECT_EQ(t.cpus()[0].package_id, 0);
}

// hwloc reads more than cpuN/topology: caches, and whatever a link leads
// to. A FIFO there blocked it for good; it is now interrupted and named.
TEST_F(HostileTreeTest, FifoAnywhereHwlocReadsIsInterrupted) {
  const fs::path cache = Sys("devices/system/cpu/cpu0/cache/index0");
  fs::create_directories(cache);
  Write(cache / "level", "1\n");
  Write(cache / "type", "Data\n");
  Write(cache / "size", "32K\n");
  ASSERT_EQ(::mkfifo((cache / "shared_cpu_map").c_str(), 0600), 0);
  ASSERT_EQ(::mkfifo(Sys("elsewhere").c_str(), 0600), 0);
  const fs::path core_id = Sys("devices/system/cpu/cpu5/topology/core_id");
  fs::remove(core_id);
  fs::create_symlink("../../../../../elsewhere", core_id);
  const Topology t = Run();
  EXPECT_THAT(t.warnings(),
              Contains(AllOf(HasSubstr("hwloc skipped"),
                             HasSubstr("is not a regular file (a FIFO"))));
  EXPECT_EQ(t.cpus().size(), 32u);  // from the node lists
  EXPECT_EQ(t.pci_devices().size(), 32u);
}

// A FIFO that a writer holds open lets hwloc's open through and blocks its
// read instead; no writer opening it and closing again could end that
// read. The load is interrupted all the same, and the FIFO named.
TEST_F(HostileTreeTest, FifoHeldOpenByAWriterIsInterrupted) {
  const fs::path core_id = Sys("devices/system/cpu/cpu3/topology/core_id");
  fs::remove(core_id);
  ASSERT_EQ(::mkfifo(core_id.c_str(), 0600), 0);
  // Read-write: a writer that never writes, opened without blocking.
  const int held = ::open(core_id.c_str(), O_RDWR | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(held, 0);
  const Topology t = Run();
  ::close(held);
  EXPECT_THAT(t.warnings(),
              Contains(AllOf(HasSubstr("hwloc skipped"), HasSubstr("core_id"),
                             HasSubstr("is not a regular file (a FIFO"),
                             HasSubstr("blocked until interrupted"))));
  EXPECT_EQ(t.cpus().size(), 32u);  // from the node lists
}

// The load is interrupted by a signal to the discovering thread, which a
// program may have blocked and may have a handler of its own for: the
// handler and the mask are the program's again afterwards, and the load is
// interrupted even with every signal blocked.
volatile std::sig_atomic_t program_handler_calls = 0;
void ProgramHandler(int /*signal*/) { program_handler_calls = 1; }

TEST_F(HostileTreeTest, FifoIsInterruptedWithSignalsBlockedAndHandlersKept) {
  const fs::path core_id = Sys("devices/system/cpu/cpu3/topology/core_id");
  fs::remove(core_id);
  ASSERT_EQ(::mkfifo(core_id.c_str(), 0600), 0);
  sigset_t all;
  sigset_t before;
  sigset_t blocked;  // all, as the system took it
  sigfillset(&all);
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &all, &before), 0);
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, nullptr, &blocked), 0);
  struct sigaction mine {};
  mine.sa_handler = ProgramHandler;
  sigemptyset(&mine.sa_mask);
  for (int signal = SIGRTMIN; signal <= SIGRTMAX; ++signal) {
    ASSERT_EQ(::sigaction(signal, &mine, nullptr), 0) << signal;
  }
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Contains(AllOf(HasSubstr("hwloc skipped"),
                                           HasSubstr("core_id"))));
  sigset_t after;
  ASSERT_EQ(::pthread_sigmask(SIG_SETMASK, &before, &after), 0);
  for (int signal = 1; signal <= SIGRTMAX; ++signal) {
    EXPECT_EQ(sigismember(&after, signal), sigismember(&blocked, signal))
        << signal;
  }
  for (int signal = SIGRTMIN; signal <= SIGRTMAX; ++signal) {
    struct sigaction now {};
    ASSERT_EQ(::sigaction(signal, nullptr, &now), 0);
    EXPECT_EQ(now.sa_handler, &ProgramHandler) << signal;
    struct sigaction restore {};
    restore.sa_handler = SIG_DFL;
    ::sigaction(signal, &restore, nullptr);
  }
  EXPECT_EQ(program_handler_calls, 0);
}

// Without a timer to be had (no signal may be queued), the tree is searched
// for FIFOs before hwloc loads, and one found keeps hwloc from loading.
TEST_F(HostileTreeTest, FifoIsFoundBeforeTheLoadWithoutATimer) {
  const fs::path core_id = Sys("devices/system/cpu/cpu3/topology/core_id");
  fs::remove(core_id);
  ASSERT_EQ(::mkfifo(core_id.c_str(), 0600), 0);
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_SIGPENDING, &before), 0);
  rlimit none = before;
  none.rlim_cur = 0;
  ASSERT_EQ(::setrlimit(RLIMIT_SIGPENDING, &none), 0);
  const Topology t = Run();
  ASSERT_EQ(::setrlimit(RLIMIT_SIGPENDING, &before), 0);
  EXPECT_THAT(
      t.warnings(),
      Contains(AllOf(HasSubstr("hwloc skipped"), HasSubstr("core_id"),
                     HasSubstr("hwloc would block on it: not loaded"))));
  EXPECT_EQ(t.cpus().size(), 32u);  // from the node lists
  // And a tree without one loads as ever.
  fs::remove(core_id);
  Write(core_id, "3\n");
  ASSERT_EQ(::setrlimit(RLIMIT_SIGPENDING, &none), 0);
  const Topology sound = Run();
  ASSERT_EQ(::setrlimit(RLIMIT_SIGPENDING, &before), 0);
  EXPECT_THAT(sound.warnings(), Not(Contains(HasSubstr("hwloc skipped"))));
  ASSERT_EQ(sound.cpus().size(), 32u);
  EXPECT_EQ(sound.cpus()[0].package_id, 0);  // from hwloc
}

// What hwloc is told not to read (hwloc 2.8 and later): CPU kinds (the
// frequency and capacity files of every CPU), memory attributes (each
// node's initiators' bandwidth and latency) and distances (the SLIT, which
// discovery reads itself). A FIFO in any of them would block hwloc if it
// still opened them: the timer would interrupt it after its grace and
// discovery would drop hwloc's result. The SLIT itself must then still be
// read by discovery, without blocking (its own reads never block).
#if HWLOC_API_VERSION >= 0x00020800
TEST_F(HostileTreeTest, FilesHwlocDoesNotReadCannotBlockIt) {
  for (const char* file :
       {"cpu_capacity", "cpufreq/cpuinfo_max_freq", "cpufreq/base_frequency"}) {
    const fs::path path = Sys("devices/system/cpu/cpu0") / file;
    fs::create_directories(path.parent_path());
    ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0) << path;
  }
  const fs::path initiators =
      Sys("devices/system/node/node0/access0/initiators");
  fs::create_directories(initiators);
  fs::create_symlink("../../../node0", initiators / "node0");  // as the kernel
  for (const char* file : {"read_bandwidth", "read_latency"}) {
    ASSERT_EQ(::mkfifo((initiators / file).c_str(), 0600), 0) << file;
  }
  const Topology t = Run();
  EXPECT_THAT(t.warnings(), Not(Contains(HasSubstr("hwloc skipped"))));
  EXPECT_THAT(t.warnings(), Not(Contains(HasSubstr("cpu_capacity"))));
  EXPECT_EQ(t.cpus().size(), 32u);
  ASSERT_EQ(t.cpus()[0].package_id, 0);  // from hwloc
  EXPECT_TRUE(t.has_distances());
}
#endif

// Config space is read only as far as asked (each dword is a hardware
// access on a real function), and without blocking.
TEST_F(HostileTreeTest, ConfigSpaceIsReadOnlyAsFarAsAsked) {
  Write(Gpu() / "config", std::string(4096, '\x11'));
  const auto reader = NewHostRootReader(dir_.path());
  auto dir = reader->OpenDirectory("bus/pci/devices/0000:1a:00.0");
  ASSERT_TRUE(dir.ok()) << dir.status().ToString();
  // The bytes this process has read so far (/proc/self/io "rchar").
  const auto bytes_read = [] {
    std::ifstream io("/proc/self/io");
    std::string key;
    uint64_t value = 0;
    while (io >> key >> value) {
      if (key == "rchar:") return value;
    }
    return uint64_t{0};
  };
  const uint64_t before = bytes_read();
  auto head = (*dir)->ReadFilePrefix("config", 256);
  const uint64_t after = bytes_read();
  ASSERT_TRUE(head.ok()) << head.status().ToString();
  EXPECT_EQ(head->size(), 256u);
  // 256 bytes of config and one reading of /proc/self/io, not 4,096.
  EXPECT_LT(after - before, 1024u);
  EXPECT_EQ((*dir)->ReadFile("config")->size(), 4096u);
  Write(Gpu() / "config", std::string(64, '\0'));
  EXPECT_EQ((*dir)->ReadFilePrefix("config", 256)->size(), 64u);
  fs::remove(Gpu() / "config");
  ASSERT_EQ(::mkfifo((Gpu() / "config").c_str(), 0600), 0);
  EXPECT_EQ((*dir)->ReadFilePrefix("config", 256).status().code(),
            StatusCode::kFailedPrecondition);
}

// libpci is not asked for slots: they are read without blocking.
TEST_F(HostileTreeTest, FifoSlotAddressDoesNotBlock) {
  fs::create_directories(Sys("bus/pci/slots/7"));
  fs::create_directories(Sys("bus/pci/slots/8"));
  ASSERT_EQ(::mkfifo(Sys("bus/pci/slots/7/address").c_str(), 0600), 0);
  Write(Sys("bus/pci/slots/8/address"), "0000:1a:00\n");
  const Topology t = Run();
  EXPECT_EQ(t.FindDevice(A("0000:1a:00.0"))->physical_slot, "8");
  EXPECT_EQ(t.FindDevice(A("0000:1b:00.0"))->physical_slot, std::nullopt);
}

TEST_F(HostileTreeTest, UnreadableFilesAreNamed) {
  DiscoveryOptions options;
  options.reader = std::make_shared<FaultyReader>(
      NewHostRootReader(dir_.path()), "local_cpulist");
  auto t = Discover(options);
  ASSERT_TRUE(t.ok());
  EXPECT_THAT(t->warnings(),
              Contains(HasSubstr("local_cpulist: Permission denied")));
  // The reader has no real root: libpci and hwloc are not used.
  EXPECT_EQ(t->cpus()[0].package_id, -1);
  EXPECT_EQ(t->FindDevice(A("0000:1a:00.0"))->vendor_id, 0x10de);
}

// A malformed id is named, with and without libpci (which reads it as 0
// silently).
TEST_F(HostileTreeTest, MalformedVendorIsNamedNotReadAsZero) {
  Write(Gpu() / "vendor", "0xZZZZ\n");
  for (bool use_libpci : {true, false}) {
    SCOPED_TRACE(use_libpci);
    const Topology t = Run(use_libpci);
    EXPECT_THAT(t.warnings(), Contains(HasSubstr("0000:1a:00.0/vendor")));
  }
}

// Running out of file descriptors is not the machine losing its devices:
// discovery fails (UNAVAILABLE) instead of reporting fewer devices, so a
// rescan keeps the last good snapshot.
TEST_F(HostileTreeTest, NoFileDescriptorsFailsInsteadOfDroppingDevices) {
  // Read once with descriptors to spare, which also lets UBSan's type checks
  // (which need a pipe the first time they look at an object's memory) set
  // up before there are none.
  const size_t devices = Run(false).pci_devices().size();
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  // Leave the standard descriptors and a handful more, then use them up.
  std::vector<int> held;
  rlimit low = old;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  while (true) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd < 0) break;
    held.push_back(fd);
  }
  for (int i = 0; i < 3 && !held.empty(); ++i) {
    close(held.back());
    held.pop_back();
  }
  DiscoveryOptions options;
  options.host_root = dir_.path();
  options.use_libpci = false;
  auto t = Discover(options);
  for (int fd : held) close(fd);
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  if (t.ok()) {
    // Whatever was read, no device may be missing.
    EXPECT_EQ(t->pci_devices().size(), devices);
  } else {
    EXPECT_THAT(t.status().message(), Not(IsEmpty()));
  }
}

// A directory opens a kernel link's target relative to the tree, with no
// link on the way; anything else it leaves to the reader, which then opens
// what the kernel resolves (or refuses it).
TEST_F(HostileTreeTest, OpenEntryTakesOnlyPlainKernelLinks) {
  const auto reader = NewHostRootReader(dir_.path());
  auto devices = reader->OpenDirectory("bus/pci/devices");
  ASSERT_TRUE(devices.ok()) << devices.status().ToString();
  const auto canonical = [&](const std::string& entry) {
    auto dir = reader->OpenDirectory("bus/pci/devices/" + entry);
    return dir.ok() ? (*dir)->path() : dir.status().ToString();
  };

  auto gpu = (*devices)->OpenEntry("0000:1a:00.0");
  ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
  EXPECT_EQ((*gpu)->path(), canonical("0000:1a:00.0"));
  EXPECT_EQ((*gpu)->path(),
            fs::relative(Gpu(), fs::canonical(dir_.path() / "sys")).string());
  EXPECT_TRUE((*gpu)->ReadFile("vendor").ok());

  // A plain directory in place of the link.
  fs::create_directory(Sys("bus/pci/devices/0000:f9:00.0"));
  auto plain = (*devices)->OpenEntry("0000:f9:00.0");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ((*plain)->path(), "bus/pci/devices/0000:f9:00.0");

  const auto left_to_reader = [&](const std::string& entry,
                                  const std::string& target) {
    fs::create_symlink(target, Sys("bus/pci/devices/" + entry));
    return (*devices)->OpenEntry(entry).status().code() ==
           StatusCode::kUnimplemented;
  };
  // Through a link on the way: the reader opens what the kernel resolves.
  fs::create_directory_symlink(Gpu().parent_path(), Sys("devices/via-link"));
  EXPECT_TRUE(
      left_to_reader("0000:f8:00.0", "../../../devices/via-link/0000:1a:00.0"));
  EXPECT_EQ(canonical("0000:f8:00.0"), canonical("0000:1a:00.0"));
  // ".." after a component, above sys/, absolute: left to the reader.
  EXPECT_TRUE(left_to_reader(
      "0000:f7:00.0", "../../../devices/x/../" +
                          Gpu().lexically_relative(Sys("devices")).string()));
  EXPECT_TRUE(left_to_reader("0000:f6:00.0", "../../../../../outside"));
  EXPECT_TRUE(left_to_reader("0000:f5:00.0", Gpu().string()));
  EXPECT_TRUE((*devices)->OpenEntry("0000:f4:00.0").status().code() ==
              StatusCode::kUnimplemented);  // absent
}

}  // namespace
}  // namespace topology
