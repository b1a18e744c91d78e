// The phases of a pool's sync, as the Go controller runs them
// (k8s.io/dynamic-resource-allocation resourceslice, syncPool): what is
// there (ReadObserved), what should be there (DesiredSlices), whether
// the two are in step (InStep), and the writes that bring them in step
// (PlanWrites). Pure functions: SlicePublisher lists, applies the plan and
// keeps the state between syncs. Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_SLICE_SYNC_H_
#define TOPOLOGY_DRAPLUGIN_SLICE_SYNC_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "topology/draplugin/resource_slices.h"
#include "topology/status.h"

namespace topology::draplugin::slice_sync {

using nlohmann::json;

inline constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
// Hostile or broken answers are read with bounded nesting.
inline constexpr int kMaxAnswerDepth = 64;
// Slice writes in flight at once (each on a connection of its own).
inline constexpr size_t kWritesInFlight = 8;

// Compact JSON; invalid UTF-8 replaced, never thrown.
std::string Dump(const json& value);
// A device and a counter set as they are sent.
json DeviceJson(const SliceDevice& device);
json CounterSetJson(const CounterSet& set);
// What of a device the comparison looks at: the fields the publisher sets
// (a server adds others, such as a taint's timeAdded). Never throws.
json Normal(const json& device);

// Slices are created with generateName "<node>-<driver>-" (the server adds
// a random suffix, as for the Go controller's slices): a fixed name could be
// taken by anyone who can create a slice, another node's or driver's
// included, and every create would then fail. Slices are recognised by
// their spec (node and driver), never by their name.
std::string SlicePrefix(const std::string& node, const std::string& driver);

// The one list of this node's and driver's slices: with the field selector
// on spec.nodeName and spec.driver (spec.nodeName alone for an empty
// driver), or, where the server refuses it, without (the caller then keeps
// only ours).
std::string ListPath(const std::string& node, const std::string& driver,
                     bool filter_here);

// One slice of this node and driver as the server has it.
struct Observed {
  std::string name;
  std::string resource_version;
  std::string pool;
  int64_t generation = 0;
  int64_t count = 0;      // resourceSliceCount
  std::string owner_uid;  // of its controller ownerReference
  json content;           // Content() of its spec
};
// The stored taints' times, by device name and taint: a taint sent again
// keeps the time the server first gave it (the Go controller's
// copyTaintTimeAdded), so a NoExecute toleration's seconds do not start
// again at each republish.
using TaintTimes = std::map<std::string, std::map<std::string, json>>;
struct Observation {
  // `pool`'s slices first, by name (they are updated in place, oldest
  // names first); then another pool's, which are obsolete.
  std::vector<Observed> slices;
  size_t in_pool = 0;      // how many of `slices` are `pool`'s
  int64_t generation = 0;  // the highest of `pool`'s
  TaintTimes taint_times;
};
// A pool as the publisher keeps it between syncs: the devices as the JSON
// they are sent as, in blocks of kMaxAdvancedDevicesPerSlice
// ("{...},{...}"), each kept deflated (an idle driver's inventory costs a
// tenth of its JSON), and the counter sets' JSON.
struct EncodedPool {
  struct Block {
    std::string bytes;  // deflated (or, where zlib failed, the text)
    size_t size = 0;    // of the text
    bool deflated = false;
    friend bool operator==(const Block&, const Block&) = default;
  };
  std::vector<Block> blocks;
  size_t count = 0;       // devices
  bool advanced = false;  // a device has taints, counters or a list attribute
  std::vector<std::string> counter_sets;  // each as its JSON
  std::string partition_type;
  friend bool operator==(const EncodedPool&, const EncodedPool&) = default;

  // `pool` encoded; its devices are dropped as they are encoded, so that
  // the inventory is never held twice. `deflate` false keeps the text.
  static EncodedPool Of(Pool& pool, bool deflate = true);
  // The blocks' text, in order.
  std::vector<std::string> Texts() const;
};

// What of a slice's spec the comparisons look at, normalised:
// {"devices": [Normal(device), ...]} or, for a slice of counter sets,
// {"sharedCounters": [...]}, with "partitionTypeAttribute" where set; the
// stored taints' times collected into `taint_times` when not null. Throws
// json_fields::JsonFieldError naming a field that is not a list.
json Content(const json& spec, TaintTimes* taint_times);

// Phase 1, what is there: the slices of `node` and `driver` in a list's
// answer (another node's or driver's are never touched). UNAVAILABLE
// naming what is unreadable.
StatusOr<Observation> ReadObserved(const std::string& body,
                                   const std::string& node,
                                   const std::string& driver,
                                   const std::string& pool);

// Phase 2, what should be there: each slice's content (as Content()
// gives it), from the devices' JSON texts in blocks of
// kMaxAdvancedDevicesPerSlice ("{...},{...}"): at most 64 devices a slice
// when one device has taints, counters or a list attribute (`advanced`),
// else 128, one empty slice for no devices, `partition_type` on those whose
// devices consume counters; then the counter sets (each one's JSON) in
// slices of their own, 8 a slice.
std::vector<std::string> DesiredSlices(
    const std::vector<std::string>& blocks, bool advanced,
    const std::vector<std::string>& counter_sets = {},
    const std::string& partition_type = {});

// Phase 3, compare: the same slices (as multisets of contents, each as the
// server stores what is sent: `stored_as`, where it dropped fields),
// one generation, the right resourceSliceCount and owner.
bool InStep(const Observation& observed, const std::vector<std::string>& wanted,
            const std::string& pool, const std::string& owner_uid,
            const std::map<std::string, std::string>& stored_as);

// The one ResourceSlice body: `content` (as DesiredSlices makes it) of `pool`'s
// generation, owned by `owner` (ownerReferences JSON text; empty: none).
json SliceJson(const std::string& driver, const std::string& node,
               const std::string& pool, int64_t generation, size_t count,
               json content, const std::string& owner);

// Phase 4, plan: in the Go controller's order, the obsolete slices deleted,
// the kept ones (this pool's) updated in place, new ones created with
// generateName; each body built and judged by the API server's rules
// before anything is sent, built on up to kWritesInFlight threads. As the
// Go controller, the generation stays when no slice is new and at most one
// kept slice differs (from `wanted` as stored: `stored_as`, or in
// generation, count or `owner_uid`); then only that slice is written.
// Slices are matched to `wanted` by content, not by name: ours encode no
// index.
struct Plan {
  struct Write {
    bool update = false;
    size_t index = 0;  // in `wanted`
    std::string name;  // the slice updated; empty for a create
    std::string body;
    std::string what;  // "create resourceslice <prefix>*", "update ..."
    Status valid = OkStatus();
  };
  std::vector<std::string> deletes;  // names
  std::vector<Write> writes;         // in the order of `wanted`
  // The kept slices left as they are (name: resourceVersion), when the
  // generation is kept.
  std::map<std::string, std::string> unchanged;
  int64_t generation = 0;  // the new one, or the kept one
};
// INTERNAL when building a body threw.
StatusOr<Plan> PlanWrites(
    const Observation& observed, const std::vector<std::string>& wanted,
    const std::string& pool, const std::string& driver, const std::string& node,
    const std::string& owner, const std::string& owner_uid = {},
    const std::map<std::string, std::string>& stored_as = {});

// Runs `work(i)` for every i < n on up to kWritesInFlight threads (this one
// included); where no thread can be had, the rest run here. False when a
// `work` threw (what it threw is not lost in a thread: the call fails).
bool ParallelFor(size_t n, const std::function<void(size_t)>& work);

}  // namespace topology::draplugin::slice_sync

#endif  // TOPOLOGY_DRAPLUGIN_SLICE_SYNC_H_
