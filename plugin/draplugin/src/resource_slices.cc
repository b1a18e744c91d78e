#include "topology/draplugin/resource_slices.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include <glog/logging.h>
#include <malloc.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "checksum.h"
#include "json_fields.h"
#include "k8s_names.h"
#include "slice_validation_json.h"
#include "slice_versions.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
// Hostile or broken answers are read with bounded nesting.
constexpr int kMaxAnswerDepth = 64;
// Slice writes in flight at once (each on a connection of its own).
constexpr size_t kWritesInFlight = 8;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json AttributeJson(const AttributeValue& attribute) {
  if (const auto* text = std::get_if<std::string>(&attribute.value)) {
    return {{attribute.version ? "version" : "string", *text}};
  }
  if (const auto* number = std::get_if<int64_t>(&attribute.value)) {
    return {{"int", *number}};
  }
  if (const auto* ints = std::get_if<std::vector<int64_t>>(&attribute.value)) {
    return {{"ints", *ints}};
  }
  if (const auto* bools = std::get_if<std::vector<bool>>(&attribute.value)) {
    return {{"bools", *bools}};
  }
  if (const auto* texts =
          std::get_if<std::vector<std::string>>(&attribute.value)) {
    return {{attribute.version ? "versions" : "strings", *texts}};
  }
  return {{"bool", std::get<bool>(attribute.value)}};
}

json DeviceJson(const SliceDevice& device) {
  json out = {{"name", device.name}};
  if (!device.attributes.empty()) {
    json attributes = json::object();
    for (const auto& [name, value] : device.attributes) {
      attributes[name] = AttributeJson(value);
    }
    out["attributes"] = std::move(attributes);
  }
  if (!device.capacity.empty()) {
    json capacity = json::object();
    for (const auto& [name, quantity] : device.capacity) {
      capacity[name] = {{"value", quantity}};
    }
    out["capacity"] = std::move(capacity);
  }
  if (!device.taints.empty()) {
    json taints = json::array();
    for (const DeviceTaint& taint : device.taints) {
      json t = {{"key", taint.key}, {"effect", taint.effect}};
      if (!taint.value.empty()) t["value"] = taint.value;
      taints.push_back(std::move(t));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

// What of a device the comparison looks at: the fields this publisher
// sets (a server adds others, such as a taint's timeAdded). Never throws.
json Normal(const json& device) {
  if (!device.is_object()) return json();
  json out = json::object();
  if (const auto name = device.find("name"); name != device.end()) {
    out["name"] = *name;
  }
  if (const auto attributes = device.find("attributes");
      attributes != device.end()) {
    out["attributes"] = *attributes;
  }
  if (const auto capacity = device.find("capacity");
      capacity != device.end() && capacity->is_object()) {
    json normal = json::object();
    for (const auto& [name, value] : capacity->items()) {
      const auto quantity =
          value.is_object() ? value.find("value") : value.end();
      normal[name] = {{"value", value.is_object() && quantity != value.end()
                                    ? *quantity
                                    : json()}};
    }
    out["capacity"] = std::move(normal);
  }
  if (const auto taints = device.find("taints");
      taints != device.end() && taints->is_array()) {
    json normal = json::array();
    for (const json& taint : *taints) {
      if (!taint.is_object()) {
        normal.push_back(taint);
        continue;
      }
      json t = json::object();
      for (const char* key : {"key", "value", "effect"}) {
        const auto it = taint.find(key);
        if (it == taint.end()) continue;
        if (std::string_view(key) == "value" && it->is_string() &&
            it->get<std::string>().empty()) {
          continue;
        }
        t[key] = *it;
      }
      normal.push_back(std::move(t));
    }
    out["taints"] = std::move(normal);
  }
  return out;
}

// The stored taints' times, by device name and taint: a taint this
// publisher sends again keeps the time the server first gave it (the Go
// controller's copyTaintTimeAdded), so a NoExecute toleration's seconds
// do not start again at each republish.
using TaintTimes = std::map<std::string, std::map<std::string, json>>;

std::string TaintKey(const json& taint) {
  const auto field = [&](const char* key) {
    const auto it = taint.find(key);
    return it != taint.end() && it->is_string() ? it->get<std::string>()
                                                : std::string();
  };
  return field("key") + "=" + field("value") + ":" + field("effect");
}

void CollectTaintTimes(const json& device, TaintTimes* times) {
  const auto name = device.find("name");
  const auto taints = device.find("taints");
  if (name == device.end() || !name->is_string() || taints == device.end() ||
      !taints->is_array()) {
    return;
  }
  for (const json& taint : *taints) {
    if (!taint.is_object()) continue;
    const auto added = taint.find("timeAdded");
    if (added != taint.end() && added->is_string()) {
      (*times)[name->get<std::string>()][TaintKey(taint)] = *added;
    }
  }
}

void KeepTaintTimes(const TaintTimes& times, json* devices) {
  for (json& device : *devices) {
    const auto name = device.find("name");
    const auto taints = device.find("taints");
    if (name == device.end() || taints == device.end()) continue;
    const auto known = times.find(name->get<std::string>());
    if (known == times.end()) continue;
    for (json& taint : *taints) {
      const auto added = known->second.find(TaintKey(taint));
      if (added != known->second.end()) taint["timeAdded"] = added->second;
    }
  }
}

// Runs `work(i)` for every i < n on up to kWritesInFlight threads (this one
// included); where no thread can be had, the rest run here. False when a
// `work` threw (what it threw is not lost in a thread: the call fails).
template <typename Work>
bool ParallelFor(size_t n, const Work& work) {
  std::atomic<size_t> next{0};
  std::atomic<bool> threw{false};
  const auto run = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        work(i);
      } catch (...) {
        threw = true;
      }
    }
  };
  std::vector<std::thread> threads;
  try {
    for (size_t k = 1; k < std::min(kWritesInFlight, n); ++k) {
      threads.emplace_back(run);
    }
  } catch (const std::system_error&) {
  }
  run();
  for (std::thread& thread : threads) thread.join();
  return !threw;
}

// Slices are created with generateName "<node>-<driver>-" (the server adds
// a random suffix, as for the Go controller's slices): a fixed name could be
// taken by anyone who can create a slice, another node's or driver's
// included, and every create would then fail. Slices are recognised by
// their spec (node and driver), never by their name.
std::string SlicePrefix(const std::string& node, const std::string& driver) {
  std::string base = node + "-" + driver;
  if (base.size() > 200) {
    base = base.substr(0, 183) + "-" + files::ChecksumHex(base);
  }
  return base + "-";
}

struct Existing {
  std::string name;
  std::string resource_version;
  std::string pool;
  int64_t generation = 0;
  int64_t count = 0;
  std::string owner_uid;         // of its controller ownerReference
  json devices = json::array();  // normalised
};

}  // namespace

Status ValidateDevices(const std::string& driver,
                       const std::vector<SliceDevice>& devices) {
  if (Status valid = ValidateDriverName(driver); !valid.ok()) {
    return InvalidArgumentError("driver name: " + valid.message());
  }
  std::set<std::string> names;
  for (const SliceDevice& device : devices) {
    const std::string who = "device \"" + device.name.substr(0, 80) + "\"";
    if (Status valid = ValidateDeviceJson(DeviceJson(device)); !valid.ok()) {
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

SlicePublisher::Block SlicePublisher::Deflate(const std::string& text) {
  uLongf size = compressBound(text.size());
  std::string out(size, '\0');
  if (compress2(reinterpret_cast<Bytef*>(out.data()), &size,
                reinterpret_cast<const Bytef*>(text.data()), text.size(),
                Z_BEST_SPEED) != Z_OK) {
    return {text, text.size(), false};  // kept as it is
  }
  out.resize(size);
  out.shrink_to_fit();
  return {std::move(out), text.size(), true};
}

std::string SlicePublisher::Inflate(const Block& block) {
  if (!block.deflated) return block.bytes;
  std::string out(block.size, '\0');
  uLongf size = block.size;
  const int inflated = uncompress(
      reinterpret_cast<Bytef*>(out.data()), &size,
      reinterpret_cast<const Bytef*>(block.bytes.data()), block.bytes.size());
  // Our own deflate of this very size: anything else is a broken process.
  CHECK(inflated == Z_OK && size == block.size)
      << "a deflated block of slice devices does not inflate";
  return out;
}

SlicePublisher::SlicePublisher(KubeClient* client, std::string driver,
                               std::string node, Options options)
    : client_(client),
      driver_(std::move(driver)),
      node_(std::move(node)),
      options_(options) {}

SlicePublisher::~SlicePublisher() { Stop(); }

Status SlicePublisher::Publish(std::string pool,
                               std::vector<SliceDevice> devices) {
  if (!k8s::IsDns1123Subdomain(node_)) {
    return InvalidArgumentError("node name \"" + node_ +
                                "\" is not a DNS subdomain");
  }
  if (!k8s::IsDns1123Subdomain(pool)) {
    return InvalidArgumentError("pool name \"" + pool +
                                "\" is not a DNS subdomain");
  }
  if (Status valid = ValidateDevices(driver_, devices); !valid.ok()) {
    return valid;
  }
  // Kept as the JSON the devices are sent as, deflated by blocks: what the
  // comparisons and the writes need, in a tenth of its size.
  auto encoded = std::make_shared<Encoded>();
  encoded->count = devices.size();
  encoded->blocks.reserve(devices.size() / kMaxAdvancedDevicesPerSlice + 1);
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!text.empty()) text += ',';
    const json device = DeviceJson(devices[i]);
    text += Dump(device);
    encoded->advanced = encoded->advanced || HasAdvancedFeatures(device);
    if ((i + 1) % kMaxAdvancedDevicesPerSlice == 0 || i + 1 == devices.size()) {
      encoded->blocks.push_back(Deflate(text));
      text.clear();
    }
  }
  devices.clear();
  devices.shrink_to_fit();
  bool same = false;
  {
    MutexLock lock(mu_);
    same = have_devices_ && pool_ == pool && devices_ &&
           devices_->count == encoded->count &&
           devices_->blocks == encoded->blocks;
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

bool SlicePublisher::Unchanged() {
  std::map<std::string, std::string> seen;
  bool filter_here = false;
  {
    MutexLock lock(mu_);
    if (seen_.empty() || !published_) return false;
    seen = seen_;
    filter_here = filter_here_;
  }
  const std::string selector =
      "?fieldSelector=spec.nodeName%3D" + node_ + "%2Cspec.driver%3D" + driver_;
  auto listed = client_->Request(
      "GET", std::string(kSlices) + (filter_here ? "" : selector), {},
      "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,"
      "application/json");
  if (!listed.ok() || listed->status != 200) return false;
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
  auto answer = client_->Request("GET", "/api/v1/nodes/" + node_);
  std::string why;
  if (!answer.ok()) {
    why = answer.status().message();
  } else if (answer->status != 200) {
    why = "HTTP " + std::to_string(answer->status);
  } else {
    const json node = json_fields::ParseBounded(answer->body, kMaxAnswerDepth);
    try {
      const json& metadata = json_fields::Object(node, "metadata");
      const std::string uid = json_fields::String(metadata, "uid");
      if (json_fields::String(metadata, "name") != node_ || uid.empty()) {
        throw json_fields::JsonFieldError("metadata: another node's");
      }
      owner_ = Dump(json::array({{{"apiVersion", "v1"},
                                  {"kind", "Node"},
                                  {"name", node_},
                                  {"uid", uid},
                                  {"controller", true}}}));
      return;
    } catch (const std::exception& e) {
      why = std::string("unreadable Node: ") + e.what();
    }
  }
  if (!owner_warned_) {
    owner_warned_ = true;
    LOG(WARNING) << driver_ << ": the Node " << node_ << " cannot be read ("
                 << why
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
  std::shared_ptr<const Encoded> encoded;
  bool filter_here = false;
  {
    MutexLock lock(mu_);
    pool = pool_;
    encoded = devices_;
    filter_here = filter_here_;
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
  const std::string selector =
      "?fieldSelector=spec.nodeName%3D" + node_ + "%2Cspec.driver%3D" + driver_;
  auto listed = client_->Request(
      "GET", std::string(kSlices) + (filter_here ? "" : selector));
  if (listed.ok() && listed->status == 400 && !filter_here) {
    // No field selectors on spec.* here (custom resources): list all and
    // keep ours.
    LOG(INFO) << driver_
              << ": the API server refuses a field selector on "
                 "spec.nodeName; filtering slices here";
    {
      MutexLock lock(mu_);
      filter_here_ = true;
    }
    listed = client_->Request("GET", kSlices);
  }
  if (!listed.ok()) return fail(listed.status());
  if (Status status = StatusOf(*listed, "list resourceslices"); !status.ok()) {
    return fail(status);
  }
  std::vector<Existing> existing;
  TaintTimes taint_times;
  try {
    namespace jf = json_fields;
    const json doc = jf::ParseBounded(listed->body, kMaxAnswerDepth);
    if (doc.is_discarded()) {
      throw jf::JsonFieldError("not JSON, or nested too deep");
    }
    for (const json& item : jf::Array(doc, "items")) {
      const json& spec = jf::Object(item, "spec");
      if (jf::StringOr(spec, "nodeName", "") != node_ ||
          jf::StringOr(spec, "driver", "") != driver_) {
        continue;  // another node's or driver's: never touched
      }
      const json& metadata = jf::Object(item, "metadata");
      Existing e;
      e.name = jf::String(metadata, "name");
      e.resource_version = jf::StringOr(metadata, "resourceVersion", "");
      if (const json* owners = jf::OptionalField(metadata, "ownerReferences");
          owners != nullptr && owners->is_array()) {
        for (const json& owner : *owners) {
          if (owner.is_object() && jf::BoolOr(owner, "controller", false)) {
            e.owner_uid = jf::StringOr(owner, "uid", "");
          }
        }
      }
      const json& pool_json = jf::Object(spec, "pool");
      e.pool = jf::StringOr(pool_json, "name", "");
      e.generation = jf::Int(pool_json, "generation", 0);
      e.count = jf::Int(pool_json, "resourceSliceCount", 0);
      if (const json* devices = jf::OptionalField(spec, "devices")) {
        if (!devices->is_array()) {
          throw jf::JsonFieldError("spec.devices: not a list");
        }
        for (const json& device : *devices) {
          e.devices.push_back(Normal(device));
          CollectTaintTimes(device, &taint_times);
        }
      }
      existing.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    return fail(UnavailableError(std::string("list resourceslices: "
                                             "unreadable answer: ") +
                                 e.what()));
  }
  // This pool's slices first (they are updated in place, oldest names
  // first); another pool's are obsolete and go.
  std::sort(existing.begin(), existing.end(),
            [&](const Existing& a, const Existing& b) {
              return std::pair(a.pool != pool, a.name) <
                     std::pair(b.pool != pool, b.name);
            });
  const size_t updatable = static_cast<size_t>(
      std::count_if(existing.begin(), existing.end(),
                    [&](const Existing& e) { return e.pool == pool; }));

  // Phase 2, what should be there: the devices in slices.
  const size_t per_slice =
      encoded->advanced ? kMaxAdvancedDevicesPerSlice : kMaxDevicesPerSlice;
  const size_t count =
      std::max<size_t>(1, (encoded->count + per_slice - 1) / per_slice);
  const size_t blocks_per_slice = per_slice / kMaxAdvancedDevicesPerSlice;
  // Each slice's devices as the comparison dumps them (a device's JSON as
  // sent is already what Normal() keeps of it).
  std::vector<std::string> wanted;
  wanted.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    std::string list = "[";
    for (size_t b = i * blocks_per_slice;
         b < std::min(encoded->blocks.size(), (i + 1) * blocks_per_slice);
         ++b) {
      if (list.size() > 1) list += ',';
      list += Inflate(encoded->blocks[b]);
    }
    wanted.push_back(list + "]");
  }

  // Phase 3, compare: the same slices (as multisets of device lists, each
  // as the server stores what we send), one generation, owned as they
  // should be.
  int64_t generation = 0;
  for (const Existing& e : existing) {
    if (e.pool == pool) generation = std::max(generation, e.generation);
  }
  bool same = existing.size() == wanted.size();
  {
    std::multiset<std::string> expected;
    for (const std::string& list : wanted) {
      const auto stored = stored_as_.find(list);
      expected.insert(stored == stored_as_.end() ? list : stored->second);
    }
    for (const Existing& e : existing) {
      same = same && e.pool == pool && e.generation == generation &&
             e.count == static_cast<int64_t>(count) && e.owner_uid == owner_uid;
      if (!same) break;
      const auto it = expected.find(Dump(e.devices));
      if (it == expected.end()) {
        same = false;
        break;
      }
      expected.erase(it);
    }
  }
  if (same) {
    std::map<std::string, std::string> seen;
    for (const Existing& e : existing) seen[e.name] = e.resource_version;
    MutexLock lock(mu_);
    published_ = true;
    ++stats_.syncs;
    seen_ = std::move(seen);
    return OkStatus();
  }

  // Phase 4, apply, in the Go controller's order: obsolete slices deleted,
  // then the kept ones updated, then new ones created.
  ++generation;
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  std::map<std::string, std::string> written_versions;
  const size_t kept = std::min(updatable, wanted.size());
  for (size_t i = kept; i < existing.size(); ++i) {
    const Existing& e = existing[i];
    auto answer =
        client_->Request("DELETE", std::string(kSlices) + "/" + e.name);
    if (!answer.ok()) return fail(answer.status());
    if (answer->status != 404) {
      if (Status status = StatusOf(*answer, "delete resourceslice " + e.name);
          !status.ok()) {
        return fail(status);
      }
    }
    ++deletes;
  }
  const std::string prefix = SlicePrefix(node_, driver_);
  // Every slice built and judged as the API server will judge it before
  // any is sent; then several writes in flight, each on a kept connection
  // of its own, their answers read where they arrive: the API server works
  // on them at once, and a pool of 10,000 devices goes out at the server's
  // pace, not at one round trip a slice.
  struct Write {
    bool update = false;
    std::string path;
    std::string body;
    std::string what;
    Status valid = OkStatus();
    StatusOr<HttpResponse> answer = UnavailableError("not sent");
    Status status = OkStatus();  // of the answer
    std::string name;            // as the server stored it
    std::string version;
    std::string stored;  // its devices as Normal() keeps them
    std::string unreadable;
  };
  std::vector<Write> writes(wanted.size());
  const std::string owner = owner_;
  const bool built = ParallelFor(writes.size(), [&](size_t i) {
    Write& write = writes[i];
    write.update = i < kept;
    json slice = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata", json::object()},
                  {"spec",
                   {{"driver", driver_},
                    {"nodeName", node_},
                    {"pool",
                     {{"name", pool},
                      {"generation", generation},
                      {"resourceSliceCount", count}}},
                    {"devices", json::parse(wanted[i])}}}};
    KeepTaintTimes(taint_times, &slice["spec"]["devices"]);
    if (!owner.empty()) {
      slice["metadata"]["ownerReferences"] = json::parse(owner);
    }
    if (write.update) {
      slice["metadata"]["name"] = existing[i].name;
      slice["metadata"]["resourceVersion"] = existing[i].resource_version;
      write.path = std::string(kSlices) + "/" + existing[i].name;
      write.what = "update resourceslice " + existing[i].name;
    } else {
      slice["metadata"]["generateName"] = prefix;
      write.path = kSlices;
      write.what = "create resourceslice " + prefix + "*";
    }
    write.valid = ValidateResourceSliceJson(slice);
    if (write.valid.ok()) write.body = Dump(slice);
  });
  if (!built) {
    return fail(
        InternalError("building the slices of pool " + pool + " failed"));
  }
  for (const Write& write : writes) {
    if (!write.valid.ok()) {
      return fail(InvalidArgumentError("resourceslice of pool " + pool +
                                       " not sent: " + write.valid.message()));
    }
  }
  const bool sent = ParallelFor(writes.size(), [&](size_t i) {
    Write& write = writes[i];
    write.answer =
        client_->Request(write.update ? "PUT" : "POST", write.path, write.body);
    write.body.clear();
    write.body.shrink_to_fit();
    if (!write.answer.ok()) return;
    write.status =
        StatusOf(*write.answer, write.what, /*create=*/!write.update);
    if (!write.status.ok()) return;
    const json written =
        json_fields::ParseBounded(write.answer->body, kMaxAnswerDepth);
    write.answer->body.clear();
    try {
      namespace jf = json_fields;
      const json& metadata = jf::Object(written, "metadata");
      write.name = jf::String(metadata, "name");
      write.version = jf::StringOr(metadata, "resourceVersion", "");
      json stored = json::array();
      const json& spec = jf::Object(written, "spec");
      if (const json* devices = jf::OptionalField(spec, "devices")) {
        for (const json& device : *devices) stored.push_back(Normal(device));
      }
      write.stored = Dump(stored);
    } catch (const std::exception& e) {
      write.unreadable = e.what();
    }
  });
  // An idle driver needs one connection for its resyncs.
  client_->CloseIdle(1);
  Status failed =
      sent ? OkStatus()
           : InternalError("writing the slices of pool " + pool + " failed");
  for (size_t i = 0; i < writes.size(); ++i) {
    Write& write = writes[i];
    if (!write.answer.ok()) {
      if (failed.ok()) failed = write.answer.status();
      continue;
    }
    if (!write.status.ok()) {
      // A conflict: someone changed the slice meanwhile; read again.
      if (failed.ok()) {
        failed = write.status.code() == StatusCode::kAlreadyExists
                     ? Status(StatusCode::kAborted, write.status.message())
                     : write.status;
      }
      continue;
    }
    if (write.update) {
      ++updates;
    } else {
      ++creates;
    }
    if (!write.unreadable.empty()) {
      LOG(WARNING) << driver_ << ": " << write.what
                   << ": unreadable answer: " << write.unreadable;
      continue;
    }
    // What the server stored: its name and version (the resync's cheap
    // look needs no full list to learn them), and the devices as kept,
    // which differ from what was sent when the server dropped fields.
    written_versions[write.name] = write.version;
    if (write.stored != wanted[i]) {
      if (!stored_as_.contains(wanted[i])) {
        LOG(WARNING) << driver_ << ": the API server dropped fields of "
                     << "resourceslice " << write.name
                     << " (a feature gate off?): what it stored differs from "
                        "what was sent; kept as stored, not sent again until "
                        "the devices change";
      }
      stored_as_[wanted[i]] = write.stored;
    }
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
  LOG(INFO) << driver_ << ": pool " << pool << " generation " << generation
            << ": " << encoded->count << " device(s) in " << count
            << " slice(s) (" << creates << " created, " << updates
            << " updated, " << deletes << " deleted)";
  // Every wanted slice was written (a new generation) and no other is
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

}  // namespace topology::draplugin
