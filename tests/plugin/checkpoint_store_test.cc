// The checkpoint journal and its store: records replay idempotently, a
// record cut short by a crash or damaged is where the replay stops, failed
// appends never leave a partial record before later ones, files are 0600
// and never written through links.
#include "checkpoint_store.h"

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include <sys/resource.h>
#include <sys/stat.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "checkpoint.h"
#include "status_matchers.h"
#include "temp_dir.h"

namespace topology::host {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::topology::testing::IsOk;
using ::topology::testing::StatusIs;

CheckpointPod Pod(const std::string& uid, const std::string& gpu) {
  CheckpointPod pod;
  pod.pod.uid = uid;
  pod.pod.ns = "default";
  pod.pod.name = uid;
  pod.pod.guaranteed = true;
  manager::Container container;
  container.name = "main";
  container.limits = {{"example.com/gpu", 1}};
  pod.pod.containers.push_back(container);
  CheckpointContainer result;
  result.name = "main";
  result.devices["example.com/gpu"] = {gpu};
  result.numa_nodes = std::vector<int>{0};
  pod.containers.push_back(result);
  return pod;
}

std::vector<std::string> Uids(const Checkpoint& checkpoint) {
  std::vector<std::string> uids;
  for (const auto& pod : checkpoint.pods) uids.push_back(pod.pod.uid);
  return uids;
}

std::string Read(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(JournalTest, RecordsSetOrRemoveOneKeyAndReplayIdempotently) {
  const std::string journal =
      EncodeAdmitRecord(Pod("a", "gpu-0")) +
      EncodeAdmitRecord(Pod("b", "gpu-1")) + EncodeReleaseRecord("a") +
      EncodeResourceRecord("example.com/gpu", {"gpu-0", "gpu-1"}) +
      EncodeAdmitRecord(Pod("c", "gpu-0"));
  Checkpoint checkpoint;
  const JournalReplay replay = ReplayJournal(journal, checkpoint);
  EXPECT_EQ(replay.applied, 5u);
  EXPECT_EQ(replay.valid_bytes, journal.size());
  EXPECT_THAT(replay.damage, IsEmpty());
  EXPECT_THAT(Uids(checkpoint), ElementsAre("b", "c"));
  EXPECT_THAT(checkpoint.registered.at("example.com/gpu"),
              ElementsAre("gpu-0", "gpu-1"));
  // Replayed again over a snapshot that already holds its effect (a crash
  // after the snapshot, before the journal was emptied): no change.
  const std::string once = EncodeCheckpoint(checkpoint);
  ReplayJournal(journal, checkpoint);
  EXPECT_EQ(EncodeCheckpoint(checkpoint), once);
}

TEST(JournalTest, ReplayStopsAtACutShortOrDamagedRecord) {
  const std::string first = EncodeAdmitRecord(Pod("a", "gpu-0"));
  const std::string second = EncodeAdmitRecord(Pod("b", "gpu-1"));
  const std::string third = EncodeAdmitRecord(Pod("c", "gpu-2"));
  {
    // A crash in the middle of the last write.
    Checkpoint checkpoint;
    const std::string torn = first + second + third.substr(0, third.size() / 2);
    const JournalReplay replay = ReplayJournal(torn, checkpoint);
    EXPECT_TRUE(replay.torn_tail);
    EXPECT_THAT(replay.damage, HasSubstr("record 3"));
    EXPECT_EQ(replay.valid_bytes, first.size() + second.size());
    EXPECT_THAT(Uids(checkpoint), ElementsAre("a", "b"));
  }
  {
    // One byte of the second record changed: it and what follows are
    // ignored.
    std::string damaged = first + second + third;
    damaged[first.size() + 40] ^= 0x01;
    Checkpoint checkpoint;
    const JournalReplay replay = ReplayJournal(damaged, checkpoint);
    EXPECT_FALSE(replay.torn_tail);
    EXPECT_THAT(replay.damage, HasSubstr("record 2"));
    EXPECT_THAT(replay.damage, HasSubstr("checksum mismatch"));
    EXPECT_THAT(Uids(checkpoint), ElementsAre("a"));
  }
  for (const std::string& bad :
       {std::string("garbage\n"), std::string("0123456789abcdef {}\n"),
        first.substr(0, 17) + "x\n"}) {
    Checkpoint checkpoint;
    const JournalReplay replay =
        ReplayJournal(first + bad + second, checkpoint);
    EXPECT_THAT(replay.damage, HasSubstr("record 2")) << bad;
    EXPECT_THAT(Uids(checkpoint), ElementsAre("a"));
  }
}

// Every value a record can hold reads back as written: random pods,
// resources and memory records with each number at its type's edges
// (unsigned 64-bit sizes up to 2^64 - 1, limits up to 2^63 - 1, NUMA ids up
// to 1023, CPU ids up to the last one), strings with quotes, escapes,
// control characters and other scripts, through each record type of the
// journal and through the snapshot.
TEST(JournalTest, EveryRecordRoundTripsAtItsFieldsEdges) {
  std::mt19937_64 random(159);
  const auto pick = [&](const auto& values) {
    return values[random() % std::size(values)];
  };
  const uint64_t u64[] = {0,
                          1,
                          uint64_t{1} << 31,
                          uint64_t{1} << 53,
                          (uint64_t{1} << 63) - 1,
                          uint64_t{1} << 63,
                          8589934592ull << 30,  // 2^33 pages of 1 GiB
                          std::numeric_limits<uint64_t>::max()};
  const int64_t i64[] = {0, 1, 1000, int64_t{1} << 53,
                         std::numeric_limits<int64_t>::max()};
  const std::string text[] = {"",
                              "a",
                              "quote\"d",
                              "back\\slash",
                              "\t\n\x01",
                              "\u00e9t\u00e9",
                              "\u65e5\u672c",
                              "x/y.z-0",
                              std::string(300, 'k')};
  const auto number = [&]() -> uint64_t {
    return random() % 2 == 0 ? pick(u64) : random();
  };
  const auto limit = [&]() -> int64_t {
    return random() % 2 == 0 ? pick(i64) : static_cast<int64_t>(random() >> 1);
  };
  const auto nodes = [&] {
    std::vector<int> ids;
    for (size_t k = random() % 3; k > 0; --k) {
      ids.push_back(random() % 2 == 0 ? 1023 : static_cast<int>(random() % 8));
    }
    return ids;
  };
  const auto container = [&](const std::string& name) {
    manager::Container c;
    c.name = name;
    c.restartable = random() % 2 == 0;
    for (size_t k = random() % 3; k > 0; --k) c.limits[pick(text)] = limit();
    return c;
  };
  for (int round = 0; round < 400; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    CheckpointPod pod;
    pod.pod.uid = pick(text) + std::to_string(round);
    pod.pod.ns = pick(text);
    pod.pod.name = pick(text);
    pod.pod.guaranteed = random() % 2 == 0;
    if (random() % 2 == 0) {
      pod.pod.topology_policy = "single-numa-node";
      pod.pod.topology_policy_source = pick(text);
    }
    for (size_t k = random() % 2; k > 0; --k) {
      pod.pod.init_containers.push_back(container(pick(text)));
    }
    for (size_t k = 1 + random() % 2; k > 0; --k) {
      pod.pod.containers.push_back(container(pick(text)));
    }
    for (const manager::Container& c : pod.pod.containers) {
      CheckpointContainer held;
      held.name = c.name;
      for (size_t k = random() % 3; k > 0; --k) {
        held.devices[pick(text)] = {pick(text), pick(text)};
      }
      for (size_t k = random() % 4; k > 0; --k) {
        held.cpus.Add(random() % 2 == 0 ? CpuSet::kMaxCpus - 1
                                        : static_cast<int>(random() % 256));
      }
      if (random() % 2 == 0) held.numa_nodes = nodes();
      for (size_t k = random() % 3; k > 0; --k) {
        held.memory.push_back({nodes(), pick(text), number()});
      }
      pod.containers.push_back(std::move(held));
    }
    CheckpointMemory memory;
    memory.policy = random() % 2 == 0 ? "Static" : pick(text);
    for (size_t k = random() % 3; k > 0; --k) {
      manager::MemoryNodeState& node =
          memory.machine[random() % 2 == 0 ? 1023 : static_cast<int>(k)];
      for (size_t t = random() % 3; t > 0; --t) {
        manager::MemoryTable& table = node.memory[pick(text)];
        table.total = number();
        table.system_reserved = number();
        table.allocatable = number();
      }
    }
    const std::string resource = pick(text);
    const std::vector<std::string> healthy = {pick(text), pick(text)};

    // Each record type through the journal.
    Checkpoint replayed;
    const std::string journal = EncodeAdmitRecord(pod) +
                                EncodeResourceRecord(resource, healthy) +
                                EncodeMemoryRecord(memory);
    const JournalReplay replay = ReplayJournal(journal, replayed);
    ASSERT_THAT(replay.damage, IsEmpty());
    ASSERT_EQ(replay.applied, 3u);
    ASSERT_EQ(replayed.pods.size(), 1u);
    EXPECT_EQ(replayed.pods[0], pod);
    EXPECT_EQ(replayed.registered.at(resource), healthy);
    EXPECT_EQ(replayed.memory, memory);
    Checkpoint released = replayed;
    ASSERT_THAT(
        ReplayJournal(EncodeReleaseRecord(pod.pod.uid), released).damage,
        IsEmpty());
    EXPECT_THAT(released.pods, IsEmpty());

    // The same through a snapshot.
    const auto decoded = DecodeCheckpoint(EncodeCheckpoint(replayed));
    ASSERT_THAT(decoded.status(), IsOk());
    EXPECT_EQ(*decoded, replayed);
  }
}

// Journals of a MiB and more are parsed in two halves at once: the result
// is the sequential one, damage in either half is named by its record
// number and byte in the whole journal, and damage in the first half keeps
// the second half from being applied.
TEST(JournalTest, LargeJournalsReplayAsIfSequentially) {
  std::string journal;
  std::vector<size_t> starts;
  size_t records = 0;
  while (journal.size() < (size_t{3} << 20)) {
    const std::string uid = "pod-" + std::to_string(records);
    starts.push_back(journal.size());
    journal += EncodeAdmitRecord(Pod(uid, "gpu-" + std::to_string(records)));
    ++records;
    if (records % 3 == 0) {
      starts.push_back(journal.size());
      journal += EncodeReleaseRecord("pod-" + std::to_string(records - 2));
      ++records;
    }
  }
  const size_t total = starts.size();
  const std::string_view all = journal;
  Checkpoint whole;
  const JournalReplay replay = ReplayJournal(journal, whole);
  EXPECT_EQ(replay.applied, total);
  EXPECT_EQ(replay.valid_bytes, journal.size());
  EXPECT_THAT(replay.damage, IsEmpty());
  // The same records in pieces below the parallel size, one after another.
  Checkpoint sequential;
  size_t piece_start = 0;
  for (size_t i = 1; i <= total; ++i) {
    const size_t end = i < total ? starts[i] : journal.size();
    if (end - piece_start > (size_t{1} << 19) || i == total) {
      ReplayJournal(all.substr(piece_start, end - piece_start), sequential);
      piece_start = end;
    }
  }
  EXPECT_EQ(EncodeCheckpoint(whole), EncodeCheckpoint(sequential));
  EXPECT_LT(whole.pods.size(), total);  // releases were applied
  // One byte damaged three quarters in, then one quarter in.
  for (const size_t damaged_record : {total * 3 / 4, total / 4}) {
    std::string damaged = journal;
    damaged[starts[damaged_record] + 30] ^= 0x01;
    Checkpoint checkpoint;
    const JournalReplay cut = ReplayJournal(damaged, checkpoint);
    EXPECT_EQ(cut.applied, damaged_record);
    EXPECT_EQ(cut.valid_bytes, starts[damaged_record]);
    EXPECT_THAT(
        cut.damage,
        HasSubstr("record " + std::to_string(damaged_record + 1) + " (byte " +
                  std::to_string(starts[damaged_record]) + ")"));
    Checkpoint prefix;
    ReplayJournal(all.substr(0, starts[damaged_record]), prefix);
    EXPECT_EQ(EncodeCheckpoint(checkpoint), EncodeCheckpoint(prefix));
  }
}

class StoreTest : public ::testing::Test {
 protected:
  std::filesystem::path snapshot() const { return dir_.path() / "cp"; }
  std::filesystem::path journal() const { return dir_.path() / "cp.journal"; }
  testing::TempDir dir_;
};

TEST_F(StoreTest, AppendsReplayOverTheSnapshotAndCompactionFoldsThemIn) {
  Checkpoint state;
  state.pods.push_back(Pod("a", "gpu-0"));
  {
    CheckpointStore store(snapshot(), 1 << 20);
    std::string warning;
    EXPECT_THAT(store.Load(&warning).status(), StatusIs(StatusCode::kNotFound));
    const mode_t old = umask(0);
    ASSERT_THAT(store.Compact([&] { return EncodeCheckpoint(state); }), IsOk());
    umask(old);
    ASSERT_THAT(store.Append(EncodeAdmitRecord(Pod("b", "gpu-1"))), IsOk());
    ASSERT_THAT(store.Append(EncodeReleaseRecord("a")), IsOk());
    const std::string file = Read(journal());
    EXPECT_EQ(store.journal_bytes(), JournalRecords(file).size());
    EXPECT_EQ(JournalRecords(file),
              EncodeAdmitRecord(Pod("b", "gpu-1")) + EncodeReleaseRecord("a"));
    // The rest of the file is written ahead, in zeros.
    EXPECT_EQ(file.size(), size_t{256} << 10);
    EXPECT_FALSE(store.NeedsCompaction());
  }
  struct stat info {};
  for (const auto& path : {snapshot(), journal()}) {
    ASSERT_EQ(lstat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u) << path;
  }
  CheckpointStore store(snapshot(), 1 << 20);
  std::string warning;
  auto loaded = store.Load(&warning);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_THAT(warning, IsEmpty());
  EXPECT_THAT(Uids(*loaded), ElementsAre("b"));
  // Compaction: everything in the snapshot, the journal empty.
  const std::string old_journal = Read(journal());
  ASSERT_THAT(store.Compact([&] { return EncodeCheckpoint(*loaded); }), IsOk());
  EXPECT_EQ(Read(journal()), "");
  EXPECT_THAT(Uids(*DecodeCheckpoint(Read(snapshot()))), ElementsAre("b"));
  // A crash after the new snapshot but before the new journal: the old
  // journal replays over it to the same state.
  std::ofstream(journal()) << old_journal;
  auto again = CheckpointStore(snapshot(), 1 << 20).Load(&warning);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(EncodeCheckpoint(*again), EncodeCheckpoint(*loaded));
}

// A crash between creating a temporary file and renaming it leaves
// ".<name>.<16 hex>.tmp" beside the file: removed at the next load (a
// link among them removed, its target untouched); other files stay.
TEST_F(StoreTest, TemporaryFilesOfAnInterruptedWriteAreRemovedAtLoad) {
  const auto leftover = dir_.path() / ".cp.0123456789abcdef.tmp";
  const auto journal_leftover =
      dir_.path() / ".cp.journal.fedcba9876543210.tmp";
  const auto victim = dir_.path() / "victim";
  const auto planted = dir_.path() / ".cp.00000000deadbeef.tmp";
  const auto unrelated = dir_.path() / ".cp.not-ours.tmp";
  std::ofstream(leftover) << "half";
  std::ofstream(journal_leftover) << "half";
  std::ofstream(victim) << "precious";
  std::ofstream(unrelated) << "kept";
  std::filesystem::create_symlink(victim, planted);
  CheckpointStore store(snapshot(), 1 << 20);
  std::string warning;
  EXPECT_THAT(store.Load(&warning).status(), StatusIs(StatusCode::kNotFound));
  EXPECT_FALSE(std::filesystem::exists(leftover));
  EXPECT_FALSE(std::filesystem::exists(journal_leftover));
  EXPECT_FALSE(std::filesystem::is_symlink(planted));
  EXPECT_EQ(Read(victim), "precious");
  EXPECT_TRUE(std::filesystem::exists(unrelated));
}

TEST_F(StoreTest, ATornLastRecordIsIgnoredADamagedJournalIsKept) {
  {
    CheckpointStore store(snapshot(), 1 << 20);
    ASSERT_THAT(store.Compact([] { return EncodeCheckpoint({}); }), IsOk());
    ASSERT_THAT(store.Append(EncodeAdmitRecord(Pod("a", "gpu-0"))), IsOk());
  }
  const std::string file = Read(journal());
  const std::string good(JournalRecords(file));
  std::string warning;
  // Cut short in the space written ahead (zeros after it), and at the end
  // of a file with nothing written ahead.
  for (const std::string& torn :
       {good + good.substr(0, 30) +
            std::string(file.size() - good.size(), '\0'),
        good + good.substr(0, 30)}) {
    std::ofstream(journal(), std::ios::trunc) << torn;
    warning.clear();
    auto loaded = CheckpointStore(snapshot(), 1 << 20).Load(&warning);
    ASSERT_THAT(loaded.status(), IsOk());
    EXPECT_THAT(Uids(*loaded), ElementsAre("a"));
    EXPECT_THAT(warning, HasSubstr("cut short by a crash"));
    EXPECT_FALSE(std::filesystem::exists(journal().string() + ".corrupt"));
  }

  std::string damaged = good + good;
  damaged[10] = 'x';
  std::ofstream(journal(), std::ios::trunc) << damaged;
  warning.clear();
  auto loaded = CheckpointStore(snapshot(), 1 << 20).Load(&warning);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_THAT(loaded->pods, IsEmpty());
  EXPECT_THAT(warning, HasSubstr("damaged at record 1"));
  EXPECT_EQ(Read(journal().string() + ".corrupt"), damaged);
}

TEST_F(StoreTest, LinksAndCorruptSnapshotsAreMovedAsideNeverFollowed) {
  const auto victim = dir_.path() / "victim";
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(victim, journal());
  {
    CheckpointStore store(snapshot(), 1 << 20);
    ASSERT_THAT(store.Compact([] { return EncodeCheckpoint({}); }), IsOk());
    ASSERT_THAT(store.Append(EncodeAdmitRecord(Pod("a", "gpu-0"))), IsOk());
  }
  EXPECT_EQ(Read(victim), "precious");  // the link was replaced, not used
  std::filesystem::remove(journal());
  std::filesystem::create_symlink(victim, journal());
  std::string warning;
  auto loaded = CheckpointStore(snapshot(), 1 << 20).Load(&warning);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_THAT(warning, HasSubstr("symbolic link"));
  EXPECT_EQ(Read(victim), "precious");

  std::ofstream(snapshot(), std::ios::trunc) << "garbage";
  std::ofstream(journal()) << EncodeAdmitRecord(Pod("a", "gpu-0"));
  EXPECT_THAT(
      CheckpointStore(snapshot(), 1 << 20).Load(&warning).status(),
      StatusIs(StatusCode::kDataLoss, HasSubstr("the journal is kept as")));
  EXPECT_TRUE(std::filesystem::exists(snapshot().string() + ".corrupt"));
  EXPECT_TRUE(std::filesystem::exists(journal().string() + ".corrupt"));
}

// A write that fails half-way (here: the file size limit) is cut off, so
// the records appended after it are still read back.
TEST_F(StoreTest, AFailedAppendLeavesNoPartialRecord) {
  CheckpointStore store(snapshot(), 1 << 20);
  ASSERT_THAT(store.Compact([] { return EncodeCheckpoint({}); }), IsOk());
  ASSERT_THAT(store.Append(EncodeAdmitRecord(Pod("a", "gpu-0"))), IsOk());
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit old_limit{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit limit = old_limit;
  limit.rlim_cur = store.journal_bytes() + 100;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limit), 0);
  const Status failed = store.Append(EncodeAdmitRecord(Pod("big", "gpu-1")) +
                                     std::string(200, ' '));
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old_limit), 0);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_THAT(failed, StatusIs(StatusCode::kInternal,
                               HasSubstr("cannot append to the checkpoint")));
  ASSERT_THAT(store.Append(EncodeAdmitRecord(Pod("c", "gpu-2"))), IsOk());
  std::string warning;
  auto loaded = CheckpointStore(snapshot(), 1 << 20).Load(&warning);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_THAT(warning, IsEmpty());
  EXPECT_THAT(Uids(*loaded), ElementsAre("a", "c"));
}

// The file grows ahead of the records, a step at a time, and whatever it
// holds past them is zeros that replay as nothing.
TEST_F(StoreTest, TheJournalIsWrittenAheadInZeros) {
  constexpr size_t kStep = size_t{256} << 10;
  CheckpointStore store(snapshot(), 64 << 20);
  ASSERT_THAT(store.Compact([] { return EncodeCheckpoint({}); }), IsOk());
  EXPECT_EQ(Read(journal()), "");
  std::string expected;
  std::vector<std::string> uids;
  size_t steps = 0;
  for (int i = 0; store.journal_bytes() < 2 * kStep + 1000; ++i) {
    std::string records;  // eight at a time, as one admission of 8 pods
    for (int j = 0; j < 8; ++j) {
      const std::string uid = "pod-" + std::to_string(i * 8 + j);
      records += EncodeAdmitRecord(Pod(uid, "gpu-0"));
      uids.push_back(uid);
    }
    ASSERT_THAT(store.Append(records), IsOk());
    expected += records;
    const std::string file = Read(journal());
    ASSERT_EQ(file.size() % kStep, 0u);
    ASSERT_GT(file.size(), expected.size());
    ASSERT_EQ(file.substr(0, expected.size()), expected);
    ASSERT_EQ(file.find_first_not_of('\0', expected.size()), std::string::npos);
    steps = file.size() / kStep;
  }
  EXPECT_EQ(steps, 3u);
  std::string warning;
  auto loaded = CheckpointStore(snapshot(), 64 << 20).Load(&warning);
  ASSERT_THAT(loaded.status(), IsOk());
  EXPECT_THAT(warning, IsEmpty());
  std::vector<std::string> got = Uids(*loaded);
  std::sort(got.begin(), got.end());
  std::sort(uids.begin(), uids.end());
  EXPECT_EQ(got, uids);
}

TEST_F(StoreTest, CompactionIsDueWhenTheJournalOutgrowsTheSnapshot) {
  CheckpointStore store(snapshot(), 64 << 20);
  EXPECT_TRUE(store.NeedsCompaction());  // no journal open yet
  ASSERT_THAT(store.Compact([] { return EncodeCheckpoint({}); }), IsOk());
  EXPECT_FALSE(store.NeedsCompaction());
  std::string records;
  for (int i = 0; i < 200; ++i) records += EncodeAdmitRecord(Pod("a", "gpu-0"));
  while (store.journal_bytes() <= (size_t{1} << 20)) {
    EXPECT_FALSE(store.NeedsCompaction());
    ASSERT_THAT(store.Append(records), IsOk());
  }
  EXPECT_TRUE(store.NeedsCompaction());
}

}  // namespace
}  // namespace topology::host
