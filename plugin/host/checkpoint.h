// The host module's checkpoint: a snapshot and a journal of what changed
// since, in one format.
//
// Both are lines of records: 16 hex digits of FNV-1a 64 over the record's
// JSON text, a space, the JSON text, a newline. A record sets one pod
// ({"op":"admit","pod":{...}}: the pod's containers with their limits and
// what each holds: devices, exclusive CPUs, NUMA affinity), removes one
// ({"op":"release","uid":...}) or sets one resource's healthy devices
// ({"op":"resource","name":...,"healthy":[...]}) or records the memory
// manager's policy and machine ({"op":"memory","policy":"Static","nodes":
// [...]}, what validateState compares on restart). Each sets or removes one
// key, so replaying records whose effect is already in the snapshot changes
// nothing: a crash between writing a new snapshot and emptying the journal
// loses nothing and adds nothing.
//
// The snapshot (version 2) starts with {"op":"snapshot","version":2,
// "pods":N,"resources":M} followed by N admit and M resource records and
// at most one memory record; the
// first version (one JSON document {"version":1,"checksum":...,"data":
// {"pods":[...],"registered":{...}}}) is still read. Decoding checks
// structure, types and checksums only; whether the contents fit the
// machine (devices held twice, unknown CPUs) is the restoring manager's to
// check.
#ifndef TOPOLOGY_HOST_CHECKPOINT_H_
#define TOPOLOGY_HOST_CHECKPOINT_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "topology/cpu_set.h"
#include "topology/manager/memory_manager.h"
#include "topology/manager/pod.h"
#include "topology/status.h"

namespace topology::host {

// What one container holds. The format is the checkpoint's own: it does
// not depend on what the daemon shows or answers.
struct CheckpointContainer {
  std::string name = {};
  std::map<std::string, std::vector<std::string>> devices = {};  // by resource
  CpuSet cpus = {};  // exclusive CPUs; empty = shared pool
  std::optional<std::vector<int>> numa_nodes = {};  // nullopt = no affinity
  // Memory pinned by the memory manager (Static), by type.
  std::vector<manager::MemoryBlock> memory = {};
  friend bool operator==(const CheckpointContainer&,
                         const CheckpointContainer&) = default;
};

// The memory manager's policy and, for Static, each node's total, system
// reserved and allocatable memory per type (reserved and free are left 0):
// what the kubelet's validateState compares with the machine on restart.
struct CheckpointMemory {
  std::string policy = {};
  manager::MemoryMachineState machine = {};
  friend bool operator==(const CheckpointMemory&,
                         const CheckpointMemory&) = default;
};

struct CheckpointPod {
  manager::Pod pod = {};
  std::vector<CheckpointContainer> containers = {};
  friend bool operator==(const CheckpointPod&, const CheckpointPod&) = default;
};

struct Checkpoint {
  std::vector<CheckpointPod> pods = {};
  // Each resource's healthy devices, by resource.
  std::map<std::string, std::vector<std::string>> registered = {};
  std::optional<CheckpointMemory> memory = {};
  friend bool operator==(const Checkpoint&, const Checkpoint&) = default;
};

// The document, one line, ending in a newline.
std::string EncodeCheckpoint(const Checkpoint& checkpoint);

// DATA_LOSS naming what is wrong (not JSON, a missing or mistyped field,
// a checksum mismatch, a bad CPU list); never throws.
StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text);

// One journal line each, ending in a newline.
std::string EncodeAdmitRecord(const CheckpointPod& pod);
std::string EncodeReleaseRecord(std::string_view uid);
std::string EncodeResourceRecord(std::string_view name,
                                 const std::vector<std::string>& healthy);
std::string EncodeMemoryRecord(const CheckpointMemory& memory);

struct JournalReplay {
  size_t applied = 0;      // records applied
  size_t valid_bytes = 0;  // length of the prefix that was applied
  // Empty when every record applied; else which record is damaged and why
  // ("record 7 (byte 2310): checksum mismatch"). Nothing after it is used.
  std::string damage;
  bool torn_tail = false;  // the damage is a last line without its newline
};

// The journal's records without the zero bytes that may follow them: the
// store writes the journal's file ahead of its records, in zeros, so that
// syncing a record does not also commit a new file size.
std::string_view JournalRecords(std::string_view text);

// Applies the records of `text` (JournalRecords) to `checkpoint` in order,
// up to the first damaged one (a cut-short line, a checksum mismatch, a
// record that is not one of the four). Never throws.
JournalReplay ReplayJournal(std::string_view text, Checkpoint& checkpoint);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_CHECKPOINT_H_
