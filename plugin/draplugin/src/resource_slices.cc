#include "topology/draplugin/resource_slices.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>
#include <variant>

#include <glog/logging.h>
#include <malloc.h>

#include <nlohmann/json.hpp>

#include "topology/common/checksum.h"
#include "topology/common/json_fields.h"
#include "topology/common/k8s_names.h"

#include "dropped_fields.h"
#include "slice_sync.h"
#include "slice_validation_json.h"
#include "slice_versions.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;
using slice_sync::Dump;
using slice_sync::kMaxAnswerDepth;
using slice_sync::kSlices;

// The gate of the pool's partition type attribute (dropped_fields.cc).
constexpr char kPartitionTypeGate[] = "DRAPartitionableDevicesType";

// The Node lookup's one attempt (the slices' owner reference).
constexpr std::chrono::milliseconds kOwnerLookupTimeout{2000};

// What the API server answered to one write of a plan.
struct WrittenSlice {
  StatusOr<HttpResponse> answer = UnavailableError("not sent");
  Status status = OkStatus();  // of the answer
  std::string name;            // as the server stored it
  std::string version;
  std::string stored;  // its content as slice_sync::Content() keeps it
  std::string unreadable;
};

// The plan's creates and updates, several in flight, each on a kept
// connection of its own, their answers read where they arrive: the API
// server works on them at once, and a pool of 10,000 devices goes out at the
// server's pace, not at one round trip a slice. Each body is dropped once
// sent; `*sent` is false when a write threw.
std::vector<WrittenSlice> SendWrites(const ResourceSliceClient& slices,
                                     slice_sync::Plan& plan, bool* sent) {
  std::vector<WrittenSlice> answers(plan.writes.size());
  *sent = slice_sync::ParallelFor(plan.writes.size(), [&](size_t i) {
    slice_sync::Plan::Write& write = plan.writes[i];
    WrittenSlice& out = answers[i];
    out.answer = write.update ? slices.Update(write.name, write.body)
                              : slices.Create(write.body);
    write.body.clear();
    write.body.shrink_to_fit();
    if (!out.answer.ok()) return;
    out.status = StatusOf(*out.answer, write.what, /*create=*/!write.update);
    if (!out.status.ok()) return;
    const json written =
        json_fields::ParseBounded(out.answer->body, kMaxAnswerDepth);
    out.answer->body.clear();
    try {
      namespace jf = json_fields;
      const json& metadata = jf::Object(written, "metadata");
      out.name = jf::String(metadata, "name");
      out.version = jf::StringOr(metadata, "resourceVersion", "");
      out.stored = Dump(slice_sync::Content(jf::Object(written, "spec"),
                                            /*taint_times=*/nullptr));
    } catch (const std::exception& e) {
      out.unreadable = e.what();
    }
  });
  return answers;
}

// Says which feature gates the API server has off, read from the fields it
// dropped of resourceslice `name` (`sent` and `stored`: its content as
// slice_sync::Content() has it), once for this content: the driver keeps
// what was stored and does not send it again until the content changes.
std::vector<DisabledFeature> ReportDroppedFields(const std::string& driver,
                                                 const std::string& name,
                                                 const std::string& sent,
                                                 const std::string& stored) {
  const std::vector<DisabledFeature> gates = DisabledFeatures(
      json::parse(sent, nullptr, false), json::parse(stored, nullptr, false));
  std::string which;
  for (const DisabledFeature& gate : gates) {
    which += (which.empty() ? "" : "; ") + gate.gate + " (" + gate.fields + ")";
  }
  LOG(WARNING) << driver << ": the API server dropped fields of resourceslice "
               << name << ": "
               << (gates.empty() ? std::string("no feature gate this driver "
                                               "knows explains it")
                                 : "feature gate(s) off: " + which)
               << "; kept as stored, not sent again until the devices change";
  return gates;
}

}  // namespace

Status ValidateDevices(const std::string& driver,
                       const std::vector<SliceDevice>& devices) {
  if (Status valid = ValidateDriverName(driver); !valid.ok()) {
    return InvalidArgumentError("driver name: " + valid.message());
  }
  std::set<std::string> names;
  for (const SliceDevice& device : devices) {
    const std::string who = "device \"" + device.name.substr(0, 80) + "\"";
    if (Status valid = ValidateDeviceJson(slice_sync::DeviceJson(device));
        !valid.ok()) {
      // "device.attributes[x]: ..." -> "device "gpu-0": attributes[x]: ..."
      std::string message = valid.message();
      if (message.starts_with("device.")) {
        message = message.substr(7);
      } else if (message.starts_with("device: ")) {
        message = message.substr(8);
      }
      return InvalidArgumentError(who + ": " + message);
    }
    if (!names.insert(device.name).second) {
      return InvalidArgumentError(who + ": listed twice");
    }
  }
  return OkStatus();
}

Status ValidatePool(const std::string& driver, const Pool& pool) {
  if (Status valid = ValidateDevices(driver, pool.devices); !valid.ok()) {
    return valid;
  }
  std::map<std::string, const CounterSet*> sets;
  for (const CounterSet& set : pool.counter_sets) {
    const std::string who = "counter set \"" + set.name.substr(0, 80) + "\"";
    json slice = slice_sync::SliceJson(driver, "node", "pool", 1, 1,
                                       {{"sharedCounters", json::array()}}, "");
    slice["spec"]["sharedCounters"].push_back(slice_sync::CounterSetJson(set));
    if (Status valid = ValidateResourceSliceJson(slice); !valid.ok()) {
      std::string message = valid.message();
      if (message.starts_with("spec.sharedCounters[0]")) {
        message = message.substr(22);
        if (message.starts_with(".")) message = message.substr(1);
        if (message.starts_with(": ")) message = message.substr(2);
      }
      return InvalidArgumentError(who + ": " + message);
    }
    if (!sets.emplace(set.name, &set).second) {
      return InvalidArgumentError(who + ": listed twice in pool " + pool.name);
    }
  }
  for (const SliceDevice& device : pool.devices) {
    const std::string who = "device \"" + device.name + "\"";
    for (const CounterConsumption& use : device.consumes_counters) {
      const auto set = sets.find(use.counter_set);
      if (set == sets.end()) {
        return InvalidArgumentError(who + " consumes counter set \"" +
                                    use.counter_set + "\", which pool " +
                                    pool.name + " does not have");
      }
      for (const auto& [counter, value] : use.counters) {
        if (!set->second->counters.contains(counter)) {
          return InvalidArgumentError(who + " consumes counter \"" + counter +
                                      "\" of set \"" + use.counter_set +
                                      "\", which that set does not have");
        }
      }
    }
    if (pool.partition_type_attribute.empty() ||
        device.consumes_counters.empty()) {
      continue;
    }
    // Found by its qualified name, or bare in the driver's domain, as the
    // API server looks it up (lookupQualifiedAttribute).
    const std::string& type = pool.partition_type_attribute;
    auto it = device.attributes.find(type);
    if (it == device.attributes.end() && type.starts_with(driver + "/")) {
      it = device.attributes.find(type.substr(driver.size() + 1));
    }
    if (it == device.attributes.end()) {
      return InvalidArgumentError(
          who + " consumes counters but has no attribute " + type +
          ", the pool's partition type attribute");
    }
    if (!std::holds_alternative<std::string>(it->second.value) ||
        it->second.version) {
      return InvalidArgumentError(who + ": attribute " + type +
                                  " (the pool's partition type attribute) "
                                  "must be a string");
    }
  }
  if (!pool.partition_type_attribute.empty() &&
      std::none_of(pool.devices.begin(), pool.devices.end(),
                   [](const SliceDevice& device) {
                     return !device.consumes_counters.empty();
                   })) {
    return InvalidArgumentError(
        "pool " + pool.name + ": partition type attribute " +
        pool.partition_type_attribute +
        " is set, but no device of the pool consumes counters");
  }
  return OkStatus();
}

SlicePublisher::SlicePublisher(KubeClient* client, std::string driver,
                               std::string node, Options options)
    : client_(client),
      slices_(client),
      driver_(std::move(driver)),
      node_(std::move(node)),
      options_(options) {}

SlicePublisher::~SlicePublisher() { Stop(); }

Status SlicePublisher::Publish(std::string pool,
                               std::vector<SliceDevice> devices) {
  return Publish(Pool{.name = std::move(pool), .devices = std::move(devices)});
}

Status SlicePublisher::Publish(Pool content) {
  std::string& pool = content.name;
  if (!k8s::IsDns1123Subdomain(node_)) {
    return InvalidArgumentError("node name \"" + node_ +
                                "\" is not a DNS subdomain");
  }
  if (!k8s::IsDns1123Subdomain(pool)) {
    return InvalidArgumentError("pool name \"" + pool +
                                "\" is not a DNS subdomain");
  }
  if (Status valid = ValidatePool(driver_, content); !valid.ok()) {
    return valid;
  }
  // Kept as the JSON the devices are sent as, deflated by blocks: what the
  // comparisons and the writes need, in a tenth of its size.
  auto encoded = std::make_shared<const slice_sync::EncodedPool>(
      slice_sync::EncodedPool::Of(content));
  bool same = false;
  {
    MutexLock lock(mu_);
    same = have_devices_ && pool_ == pool && devices_ && *devices_ == *encoded;
    if (!same) {
      pool_ = std::move(pool);
      devices_ = std::move(encoded);
      have_devices_ = true;
    }
  }
  // The inventory as published and the slices as last seen: nothing to do
  // but the metadata-only look.
  if (same && Unchanged()) {
    MutexLock lock(mu_);
    ++stats_.checks;
    return OkStatus();
  }
  Status synced = Sync();
  // A conflict: someone changed the slices between the list and the write.
  if (synced.code() == StatusCode::kAborted) synced = Sync();
  return synced;
}

void SlicePublisher::Start() {
  MutexLock lock(mu_);
  if (stopping_ || loop_.joinable()) return;
  loop_ = std::thread([this] { Loop(); });
}

void SlicePublisher::Stop() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (loop_.joinable()) loop_.join();
}

bool SlicePublisher::published() const {
  MutexLock lock(mu_);
  return published_;
}

SlicePublisher::Stats SlicePublisher::stats() const {
  MutexLock lock(mu_);
  return stats_;
}

void SlicePublisher::Loop() {
  MutexLock lock(mu_);
  while (!stopping_) {
    // Sooner again after a failure.
    const Clock& clock = *options_.clock;
    const Clock::TimePoint next =
        clock.Now() + (published_
                           ? options_.resync
                           : std::min<std::chrono::milliseconds>(
                                 options_.resync, std::chrono::seconds(1)));
    while (!stopping_ && clock.Now() < next) {
      clock.WaitUntil(wake_, lock, next);
    }
    if (stopping_) break;
    if (!have_devices_) continue;
    lock.unlock();
    if (Unchanged()) {
      lock.lock();
      ++stats_.checks;
      continue;
    }
    const Status synced = Sync();
    if (!synced.ok()) LOG(WARNING) << driver_ << ": " << synced.message();
    lock.lock();
  }
}

StatusOr<HttpResponse> SlicePublisher::ListOurs(bool metadata_only) {
  const std::string_view accept =
      metadata_only
          ? "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
            "application/json"
          : "";
  bool filter_here = false;
  {
    MutexLock lock(mu_);
    filter_here = filter_here_;
  }
  const bool before = filter_here;
  auto listed = slices_.ListNode(node_, driver_, &filter_here, accept);
  if (filter_here && !before) {
    // No field selectors on spec.* here (custom resources): list all and
    // keep ours, from now on.
    LOG(INFO) << driver_
              << ": the API server refuses a field selector on "
                 "spec.nodeName; filtering slices here";
    MutexLock lock(mu_);
    filter_here_ = true;
  }
  return listed;
}

StatusOr<HttpResponse> ResourceSliceClient::ListNode(
    const std::string& node, const std::string& driver, bool* filter_here,
    std::string_view accept) const {
  if (!*filter_here) {
    auto listed = client_->Request(
        "GET", slice_sync::ListPath(node, driver, false), {}, accept);
    if (!listed.ok() || listed->status != 400) return listed;
    *filter_here = true;
  }
  return client_->Request("GET", slice_sync::ListPath(node, driver, true), {},
                          accept);
}

StatusOr<HttpResponse> ResourceSliceClient::Create(
    std::string_view body) const {
  return client_->Request("POST", kSlices, body);
}

StatusOr<HttpResponse> ResourceSliceClient::Update(
    const std::string& name, std::string_view body) const {
  return client_->Request("PUT", std::string(kSlices) + "/" + name, body);
}

StatusOr<HttpResponse> ResourceSliceClient::Delete(
    const std::string& name) const {
  return client_->Request("DELETE", std::string(kSlices) + "/" + name);
}

StatusOr<std::string> ResourceSliceClient::NodeOwnerReference(
    const std::string& node) const {
  // One try, briefly, and a Node's size at most: the owner reference is a
  // nicety, and an API server that hangs or answers without end must not
  // hold up or swell the publish that follows.
  auto answer = client_->Request("GET", "/api/v1/nodes/" + node, {}, {},
                                 {.timeout = kOwnerLookupTimeout,
                                  .attempts = 1,
                                  .max_body = kMaxObjectBytes});
  if (!answer.ok()) return answer.status();
  if (answer->status != 200) {
    return UnavailableError("HTTP " + std::to_string(answer->status));
  }
  const json read = json_fields::ParseBounded(answer->body, kMaxAnswerDepth);
  try {
    const json& metadata = json_fields::Object(read, "metadata");
    const std::string uid = json_fields::String(metadata, "uid");
    if (json_fields::String(metadata, "name") != node) {
      throw json_fields::JsonFieldError("metadata: another node's");
    }
    if (!k8s::IsUid(uid)) {
      throw json_fields::JsonFieldError(
          "metadata.uid: not a Kubernetes UID (letters, digits and '-', "
          "at most 128)");
    }
    return Dump(json::array({{{"apiVersion", "v1"},
                              {"kind", "Node"},
                              {"name", node},
                              {"uid", uid},
                              {"controller", true}}}));
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("unreadable Node: ") + e.what());
  }
}

StatusOr<HttpResponse> ListNodeSlices(KubeClient& client,
                                      const std::string& node,
                                      const std::string& driver,
                                      bool* filter_here,
                                      std::string_view accept) {
  return ResourceSliceClient(&client).ListNode(node, driver, filter_here,
                                               accept);
}

bool SlicePublisher::Unchanged() {
  std::map<std::string, std::string> seen;
  {
    MutexLock lock(mu_);
    if (seen_.empty() || !published_) return false;
    seen = seen_;
  }
  auto listed = ListOurs(/*metadata_only=*/true);
  if (!listed.ok() || listed->status != 200) return false;
  bool filter_here = false;
  {
    MutexLock lock(mu_);
    filter_here = filter_here_;
  }
  // Without the field selector every node's slices come, and names say
  // nothing of whose they are: ours are those the last full list found
  // (their spec said so). A slice of ours created by someone else is found
  // by the next full list, after any change.
  const auto ours = [&](const std::string& name) {
    return !filter_here || seen.contains(name);
  };
  auto now = ListedVersions(listed->body, ours);
  if (!now) return false;
  return *now == seen;
}

void SlicePublisher::LookUpOwner() {
  if (!owner_.empty()) return;
  auto owner = slices_.NodeOwnerReference(node_);
  if (owner.ok()) {
    owner_ = std::move(*owner);
    return;
  }
  if (!owner_warned_) {
    owner_warned_ = true;
    LOG(WARNING) << driver_ << ": the Node " << node_ << " cannot be read ("
                 << owner.status().message()
                 << "); slices are published without an owner reference "
                    "and outlive a deleted Node (the driver needs \"get "
                    "nodes\")";
  }
}

Status SlicePublisher::Sync() {
  // A full list of 10,000 devices is tens of megabytes while it is
  // compared; give them back to the system when done, so that an idle
  // driver's resident memory is its inventory, not its last list.
  struct Trim {
    ~Trim() { malloc_trim(0); }
  } const trim;
  MutexLock sync(sync_mu_);
  std::string pool;
  std::shared_ptr<const slice_sync::EncodedPool> encoded;
  std::string partition_type;
  {
    MutexLock lock(mu_);
    pool = pool_;
    encoded = devices_;
    // A server that dropped the partition type once (its gate off) is not
    // sent it again: the slices stay as it stores them.
    if (!stats_.disabled_features.contains(kPartitionTypeGate)) {
      partition_type = encoded->partition_type;
    }
  }
  const auto fail = [this](Status status) {
    MutexLock lock(mu_);
    published_ = false;
    seen_.clear();
    ++stats_.syncs;
    return status;
  };
  LookUpOwner();
  std::string owner_uid;
  if (!owner_.empty()) {
    owner_uid = json::parse(owner_)[0]["uid"].get<std::string>();
  }

  // Phase 1, what is there: this node's and driver's slices.
  auto listed = ListOurs(/*metadata_only=*/false);
  if (!listed.ok()) return fail(listed.status());
  if (Status status = StatusOf(*listed, "list resourceslices"); !status.ok()) {
    return fail(status);
  }
  auto observed = slice_sync::ReadObserved(listed->body, node_, driver_, pool);
  listed->body.clear();
  if (!observed.ok()) return fail(observed.status());

  // Phase 2, what should be there: the devices in slices.
  const std::vector<std::string> wanted =
      slice_sync::DesiredSlices(encoded->Texts(), encoded->advanced,
                                encoded->counter_sets, partition_type);

  // Phase 3, compare.
  if (slice_sync::InStep(*observed, wanted, pool, owner_uid, stored_as_)) {
    std::map<std::string, std::string> seen;
    for (const slice_sync::Observed& slice : observed->slices) {
      seen[slice.name] = slice.resource_version;
    }
    MutexLock lock(mu_);
    published_ = true;
    ++stats_.syncs;
    seen_ = std::move(seen);
    return OkStatus();
  }

  // Phase 4, plan: every slice built and judged as the API server will
  // judge it before any is sent.
  auto plan = slice_sync::PlanWrites(*observed, wanted, pool, driver_, node_,
                                     owner_, owner_uid, stored_as_);
  if (!plan.ok()) return fail(plan.status());
  for (const slice_sync::Plan::Write& write : plan->writes) {
    if (!write.valid.ok()) {
      return fail(InvalidArgumentError("resourceslice of pool " + pool +
                                       " not sent: " + write.valid.message()));
    }
  }
  return Apply(std::move(*plan), pool, wanted, encoded->count, fail);
}

Status SlicePublisher::Apply(slice_sync::Plan plan, const std::string& pool,
                             const std::vector<std::string>& wanted,
                             size_t devices,
                             const std::function<Status(Status)>& fail) {
  // Phase 5, apply, in the Go controller's order: obsolete slices deleted,
  // then the kept ones updated, then new ones created.
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  for (const std::string& name : plan.deletes) {
    auto answer = slices_.Delete(name);
    if (!answer.ok()) return fail(answer.status());
    if (answer->status != 404) {
      if (Status status = StatusOf(*answer, "delete resourceslice " + name);
          !status.ok()) {
        return fail(status);
      }
    }
    ++deletes;
  }
  bool sent = false;
  const std::vector<WrittenSlice> answers = SendWrites(slices_, plan, &sent);
  // An idle driver needs one connection for its resyncs.
  client_->CloseIdle(1);
  Status failed =
      sent ? OkStatus()
           : InternalError("writing the slices of pool " + pool + " failed");
  // The slices left as they were count as known.
  std::map<std::string, std::string> written_versions = plan.unchanged;
  std::set<std::string> disabled;  // feature gates read from dropped fields
  for (size_t w = 0; w < answers.size(); ++w) {
    const slice_sync::Plan::Write& write = plan.writes[w];
    const WrittenSlice& out = answers[w];
    const std::string& sent_devices = wanted[write.index];
    if (!out.answer.ok()) {
      if (failed.ok()) failed = out.answer.status();
      continue;
    }
    if (!out.status.ok()) {
      // A conflict: someone changed the slice meanwhile; read again.
      if (failed.ok()) {
        failed = out.status.code() == StatusCode::kAlreadyExists
                     ? Status(StatusCode::kAborted, out.status.message())
                     : out.status;
      }
      continue;
    }
    if (write.update) {
      ++updates;
    } else {
      ++creates;
    }
    if (!out.unreadable.empty()) {
      LOG(WARNING) << driver_ << ": " << write.what
                   << ": unreadable answer: " << out.unreadable;
      continue;
    }
    // What the server stored: its name and version (the resync's cheap
    // look needs no full list to learn them), and the devices as kept,
    // which differ from what was sent when the server dropped fields.
    written_versions[out.name] = out.version;
    if (out.stored != sent_devices) {
      if (!stored_as_.contains(sent_devices)) {
        for (const DisabledFeature& gate :
             ReportDroppedFields(driver_, out.name, sent_devices, out.stored)) {
          disabled.insert(gate.gate);
        }
      }
      stored_as_[sent_devices] = out.stored;
    }
  }
  if (!disabled.empty()) {
    MutexLock lock(mu_);
    stats_.disabled_features.insert(disabled.begin(), disabled.end());
  }
  if (!failed.ok()) {
    {
      MutexLock lock(mu_);
      stats_.creates += creates;
      stats_.updates += updates;
      stats_.deletes += deletes;
    }
    return fail(failed);
  }
  // Forget stored forms of device lists no longer published.
  for (auto it = stored_as_.begin(); it != stored_as_.end();) {
    it = std::find(wanted.begin(), wanted.end(), it->first) == wanted.end()
             ? stored_as_.erase(it)
             : std::next(it);
  }
  LOG(INFO) << driver_ << ": pool " << pool << " generation " << plan.generation
            << ": " << devices << " device(s) in " << wanted.size()
            << " slice(s) (" << creates << " created, " << updates
            << " updated, " << deletes << " deleted)";
  // Every wanted slice was written or left as it was, and no other is
  // left: the node's slices are exactly these versions. Unknown versions
  // make the next resync list in full.
  const bool all_known =
      written_versions.size() == wanted.size() &&
      std::none_of(written_versions.begin(), written_versions.end(),
                   [](const auto& entry) { return entry.second.empty(); });
  MutexLock lock(mu_);
  published_ = true;
  if (all_known) {
    seen_ = std::move(written_versions);
  } else {
    seen_.clear();
  }
  ++stats_.syncs;
  stats_.creates += creates;
  stats_.updates += updates;
  stats_.deletes += deletes;
  return OkStatus();
}

StatusOr<std::vector<std::string>> NewPoolSliceBodies(
    const std::string& driver, const std::string& node, const std::string& pool,
    const std::vector<SliceDevice>& devices) {
  return NewPoolSliceBodies(driver, node,
                            Pool{.name = pool, .devices = devices});
}

StatusOr<std::vector<std::string>> NewPoolSliceBodies(const std::string& driver,
                                                      const std::string& node,
                                                      const Pool& pool) {
  Pool copy = pool;
  const slice_sync::EncodedPool encoded =
      slice_sync::EncodedPool::Of(copy, /*deflate=*/false);
  auto plan = slice_sync::PlanWrites(
      slice_sync::Observation(),
      slice_sync::DesiredSlices(encoded.Texts(), encoded.advanced,
                                encoded.counter_sets, encoded.partition_type),
      pool.name, driver, node, /*owner=*/"");
  if (!plan.ok()) return plan.status();
  std::vector<std::string> bodies;
  for (slice_sync::Plan::Write& write : plan->writes) {
    bodies.push_back(std::move(write.body));
  }
  return bodies;
}

}  // namespace topology::draplugin
