#include "slice_sync.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include <glog/logging.h>
#include <zlib.h>

#include "topology/common/checksum.h"
#include "topology/common/json_fields.h"

#include "slice_validation_json.h"

namespace topology::draplugin::slice_sync {
namespace {

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

json CapacityJson(const DeviceCapacity& capacity) {
  json out = {{"value", capacity.value}};
  if (!capacity.request_policy) return out;
  const CapacityRequestPolicy& policy = *capacity.request_policy;
  json request = json::object();
  if (!policy.default_value.empty()) request["default"] = policy.default_value;
  if (!policy.valid_values.empty())
    request["validValues"] = policy.valid_values;
  if (policy.valid_range) {
    json range = {{"min", policy.valid_range->min}};
    if (!policy.valid_range->max.empty())
      range["max"] = policy.valid_range->max;
    if (!policy.valid_range->step.empty()) {
      range["step"] = policy.valid_range->step;
    }
    request["validRange"] = std::move(range);
  }
  out["requestPolicy"] = std::move(request);
  return out;
}

// {name: {value: quantity}}
json CountersJson(const std::map<std::string, std::string>& counters) {
  json out = json::object();
  for (const auto& [name, value] : counters) out[name] = {{"value", value}};
  return out;
}

// A counter map as compared: {name: {value}} of what the server keeps.
json NormalCounters(const json& counters) {
  if (!counters.is_object()) return counters;
  json out = json::object();
  for (const auto& [name, counter] : counters.items()) {
    const auto value =
        counter.is_object() ? counter.find("value") : counter.end();
    out[name] = {{"value", counter.is_object() && value != counter.end()
                               ? *value
                               : json()}};
  }
  return out;
}

// A list of {<key>, counters} (counter sets, consumptions) as compared.
json NormalCounterList(const json& list, const char* key) {
  if (!list.is_array()) return list;
  json out = json::array();
  for (const json& item : list) {
    if (!item.is_object()) {
      out.push_back(item);
      continue;
    }
    json normal = json::object();
    if (const auto name = item.find(key); name != item.end()) {
      normal[key] = *name;
    }
    if (const auto counters = item.find("counters"); counters != item.end()) {
      normal["counters"] = NormalCounters(*counters);
    }
    out.push_back(std::move(normal));
  }
  return out;
}

}  // namespace

json CounterSetJson(const CounterSet& set) {
  return {{"name", set.name}, {"counters", CountersJson(set.counters)}};
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
    for (const auto& [name, value] : device.capacity) {
      capacity[name] = CapacityJson(value);
    }
    out["capacity"] = std::move(capacity);
  }
  if (device.allow_multiple_allocations) {
    out["allowMultipleAllocations"] = true;
  }
  if (!device.consumes_counters.empty()) {
    json uses = json::array();
    for (const CounterConsumption& use : device.consumes_counters) {
      uses.push_back({{"counterSet", use.counter_set},
                      {"counters", CountersJson(use.counters)}});
    }
    out["consumesCounters"] = std::move(uses);
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
      json kept = {{"value", value.is_object() && quantity != value.end()
                                 ? *quantity
                                 : json()}};
      if (value.is_object()) {
        if (const auto policy = value.find("requestPolicy");
            policy != value.end() && !policy->is_null()) {
          kept["requestPolicy"] = *policy;
        }
      }
      normal[name] = std::move(kept);
    }
    out["capacity"] = std::move(normal);
  }
  if (const auto multiple = device.find("allowMultipleAllocations");
      multiple != device.end() && multiple->is_boolean() &&
      multiple->get<bool>()) {
    out["allowMultipleAllocations"] = true;
  }
  if (const auto uses = device.find("consumesCounters");
      uses != device.end() && uses->is_array() && !uses->empty()) {
    out["consumesCounters"] = NormalCounterList(*uses, "counterSet");
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

namespace {

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

}  // namespace

namespace {

EncodedPool::Block Deflate(const std::string& text) {
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

std::string Inflate(const EncodedPool::Block& block) {
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

}  // namespace

EncodedPool EncodedPool::Of(Pool& pool, bool deflate) {
  EncodedPool encoded;
  std::vector<SliceDevice>& devices = pool.devices;
  encoded.count = devices.size();
  encoded.blocks.reserve(devices.size() / kMaxAdvancedDevicesPerSlice + 1);
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!text.empty()) text += ',';
    const json device = DeviceJson(devices[i]);
    devices[i] = SliceDevice();
    text += Dump(device);
    encoded.advanced = encoded.advanced || HasAdvancedFeatures(device);
    if ((i + 1) % kMaxAdvancedDevicesPerSlice == 0 || i + 1 == devices.size()) {
      encoded.blocks.push_back(deflate ? Deflate(text)
                                       : Block{text, text.size(), false});
      text.clear();
    }
  }
  devices.clear();
  devices.shrink_to_fit();
  for (const CounterSet& set : pool.counter_sets) {
    encoded.counter_sets.push_back(Dump(CounterSetJson(set)));
  }
  encoded.partition_type = pool.partition_type_attribute;
  return encoded;
}

std::vector<std::string> EncodedPool::Texts() const {
  std::vector<std::string> texts;
  texts.reserve(blocks.size());
  for (const Block& block : blocks) texts.push_back(Inflate(block));
  return texts;
}

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string SlicePrefix(const std::string& node, const std::string& driver) {
  std::string base = node + "-" + driver;
  if (base.size() > 200) {
    base = base.substr(0, 183) + "-" + files::ChecksumHex(base);
  }
  return base + "-";
}

std::string ListPath(const std::string& node, const std::string& driver,
                     bool filter_here) {
  if (filter_here) return kSlices;
  std::string path =
      std::string(kSlices) + "?fieldSelector=spec.nodeName%3D" + node;
  if (!driver.empty()) path += "%2Cspec.driver%3D" + driver;
  return path;
}

json Content(const json& spec, TaintTimes* taint_times) {
  namespace jf = json_fields;
  json content = json::object();
  const json* sets = jf::OptionalField(spec, "sharedCounters");
  if (sets != nullptr && !sets->is_null() &&
      !(sets->is_array() && sets->empty())) {
    if (!sets->is_array()) {
      throw jf::JsonFieldError("spec.sharedCounters: not a list");
    }
    content["sharedCounters"] = NormalCounterList(*sets, "name");
  } else {
    json devices = json::array();
    if (const json* listed = jf::OptionalField(spec, "devices");
        listed != nullptr && !listed->is_null()) {
      if (!listed->is_array()) {
        throw jf::JsonFieldError("spec.devices: not a list");
      }
      for (const json& device : *listed) {
        devices.push_back(Normal(device));
        if (taint_times != nullptr) CollectTaintTimes(device, taint_times);
      }
    }
    content["devices"] = std::move(devices);
  }
  if (const json* type = jf::OptionalField(spec, "partitionTypeAttribute");
      type != nullptr && type->is_string() &&
      !type->get<std::string>().empty()) {
    content["partitionTypeAttribute"] = *type;
  }
  return content;
}

StatusOr<Observation> ReadObserved(const std::string& body,
                                   const std::string& node,
                                   const std::string& driver,
                                   const std::string& pool) {
  Observation out;
  try {
    namespace jf = json_fields;
    const json doc = jf::ParseBounded(body, kMaxAnswerDepth);
    if (doc.is_discarded()) {
      throw jf::JsonFieldError("not JSON, or nested too deep");
    }
    for (const json& item : jf::Array(doc, "items")) {
      const json& spec = jf::Object(item, "spec");
      if (jf::StringOr(spec, "nodeName", "") != node ||
          jf::StringOr(spec, "driver", "") != driver) {
        continue;  // another node's or driver's: never touched
      }
      const json& metadata = jf::Object(item, "metadata");
      Observed slice;
      slice.name = jf::String(metadata, "name");
      slice.resource_version = jf::StringOr(metadata, "resourceVersion", "");
      if (const json* owners = jf::OptionalField(metadata, "ownerReferences");
          owners != nullptr && owners->is_array()) {
        for (const json& owner : *owners) {
          if (owner.is_object() && jf::BoolOr(owner, "controller", false)) {
            slice.owner_uid = jf::StringOr(owner, "uid", "");
          }
        }
      }
      const json& pool_json = jf::Object(spec, "pool");
      slice.pool = jf::StringOr(pool_json, "name", "");
      slice.generation = jf::Int(pool_json, "generation", 0);
      slice.count = jf::Int(pool_json, "resourceSliceCount", 0);
      slice.content = Content(spec, &out.taint_times);
      out.slices.push_back(std::move(slice));
    }
  } catch (const std::exception& e) {
    return UnavailableError(
        std::string("list resourceslices: unreadable answer: ") + e.what());
  }
  std::sort(out.slices.begin(), out.slices.end(),
            [&](const Observed& a, const Observed& b) {
              return std::pair(a.pool != pool, a.name) <
                     std::pair(b.pool != pool, b.name);
            });
  for (const Observed& slice : out.slices) {
    if (slice.pool != pool) continue;
    ++out.in_pool;
    out.generation = std::max(out.generation, slice.generation);
  }
  return out;
}

std::vector<std::string> DesiredSlices(
    const std::vector<std::string>& blocks, bool advanced,
    const std::vector<std::string>& counter_sets,
    const std::string& partition_type) {
  const size_t blocks_per_slice =
      advanced ? 1 : kMaxDevicesPerSlice / kMaxAdvancedDevicesPerSlice;
  const size_t count = std::max<size_t>(
      1, (blocks.size() + blocks_per_slice - 1) / blocks_per_slice);
  std::vector<std::string> wanted;
  wanted.reserve(count + counter_sets.size() / kResourceSliceMaxCounterSets +
                 1);
  for (size_t i = 0; i < count; ++i) {
    std::string list = "[";
    for (size_t b = i * blocks_per_slice;
         b < std::min(blocks.size(), (i + 1) * blocks_per_slice); ++b) {
      if (list.size() > 1) list += ',';
      list += blocks[b];
    }
    list += ']';
    // The partition type goes only to a slice whose devices consume
    // counters (the API refuses it elsewhere).
    std::string type;
    if (!partition_type.empty()) {
      const json devices = json::parse(list, nullptr, false);
      if (devices.is_array() &&
          std::any_of(devices.begin(), devices.end(), [](const json& d) {
            return d.is_object() && d.contains("consumesCounters");
          })) {
        type = ",\"partitionTypeAttribute\":" + Dump(json(partition_type));
      }
    }
    wanted.push_back("{\"devices\":" + list + type + "}");
  }
  for (size_t i = 0; i < counter_sets.size();
       i += kResourceSliceMaxCounterSets) {
    std::string list = "[";
    for (size_t k = i;
         k < std::min(counter_sets.size(), i + kResourceSliceMaxCounterSets);
         ++k) {
      if (list.size() > 1) list += ',';
      list += counter_sets[k];
    }
    wanted.push_back("{\"sharedCounters\":" + list + "]}");
  }
  return wanted;
}

namespace {

// `content` as the server stores it (where it dropped fields before).
const std::string& StoredAs(
    const std::string& list,
    const std::map<std::string, std::string>& stored_as) {
  const auto stored = stored_as.find(list);
  return stored == stored_as.end() ? list : stored->second;
}

// Whether `slice` is `pool`'s at `observed`'s generation, with `count`
// slices, `owner_uid`'s, and holds exactly `content` as stored.
bool SliceInStep(const Observed& slice, const Observation& observed,
                 const std::string& pool, size_t count,
                 const std::string& owner_uid, const std::string& content) {
  return slice.pool == pool && slice.generation == observed.generation &&
         slice.count == static_cast<int64_t>(count) &&
         slice.owner_uid == owner_uid && Dump(slice.content) == content;
}

}  // namespace

bool InStep(const Observation& observed, const std::vector<std::string>& wanted,
            const std::string& pool, const std::string& owner_uid,
            const std::map<std::string, std::string>& stored_as) {
  if (observed.slices.size() != wanted.size()) return false;
  std::multiset<std::string> expected;
  for (const std::string& list : wanted) {
    expected.insert(StoredAs(list, stored_as));
  }
  for (const Observed& slice : observed.slices) {
    const std::string content = Dump(slice.content);
    if (!SliceInStep(slice, observed, pool, wanted.size(), owner_uid,
                     content)) {
      return false;
    }
    const auto it = expected.find(content);
    if (it == expected.end()) return false;
    expected.erase(it);
  }
  return true;
}

json SliceJson(const std::string& driver, const std::string& node,
               const std::string& pool, int64_t generation, size_t count,
               json content, const std::string& owner) {
  json slice = {{"apiVersion", "resource.k8s.io/v1"},
                {"kind", "ResourceSlice"},
                {"metadata", json::object()},
                {"spec",
                 {{"driver", driver},
                  {"nodeName", node},
                  {"pool",
                   {{"name", pool},
                    {"generation", generation},
                    {"resourceSliceCount", count}}}}}};
  if (content.is_object()) {
    for (auto& [key, value] : content.items()) {
      slice["spec"][key] = std::move(value);
    }
  }
  if (!owner.empty()) {
    slice["metadata"]["ownerReferences"] = json::parse(owner);
  }
  return slice;
}

StatusOr<Plan> PlanWrites(const Observation& observed,
                          const std::vector<std::string>& wanted,
                          const std::string& pool, const std::string& driver,
                          const std::string& node, const std::string& owner,
                          const std::string& owner_uid,
                          const std::map<std::string, std::string>& stored_as) {
  Plan plan;
  // Slices are matched to the wanted lists by content: a slice of this pool
  // at the observed generation, count and owner holding a wanted list as
  // the server stores it is that list's. (The Go controller matches by the
  // index its names encode; ours carry none: "<node>-<driver>-" and the
  // server's suffix.) The rest of this pool's slices take the unmatched
  // lists in order and are updated; those left over are deleted, with every
  // slice of another pool; lists left over are created.
  const size_t candidates = std::min(observed.in_pool, observed.slices.size());
  std::multimap<std::string, size_t> in_step;  // devices as stored -> slice
  for (size_t j = 0; j < candidates; ++j) {
    const Observed& slice = observed.slices[j];
    if (slice.pool == pool && slice.generation == observed.generation &&
        slice.count == static_cast<int64_t>(wanted.size()) &&
        slice.owner_uid == owner_uid) {
      in_step.emplace(Dump(slice.content), j);
    }
  }
  constexpr size_t kNone = static_cast<size_t>(-1);
  std::vector<size_t> slice_of(wanted.size(), kNone);
  std::vector<bool> taken(candidates, false);
  for (size_t i = 0; i < wanted.size(); ++i) {
    const auto match = in_step.find(StoredAs(wanted[i], stored_as));
    if (match == in_step.end()) continue;
    slice_of[i] = match->second;
    taken[match->second] = true;
    in_step.erase(match);
  }
  std::vector<bool> changed(wanted.size(), false);
  size_t changes = 0;
  size_t creates = 0;
  size_t next = 0;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (slice_of[i] != kNone) continue;
    while (next < candidates && taken[next]) ++next;
    changed[i] = true;
    if (next < candidates) {
      slice_of[i] = next;
      taken[next] = true;
      ++changes;
    } else {
      ++creates;
    }
  }
  for (size_t j = 0; j < observed.slices.size(); ++j) {
    if (j >= candidates || !taken[j]) {
      plan.deletes.push_back(observed.slices[j].name);
    }
  }
  // The Go controller's rule: the generation is kept when no slice is new
  // and at most one kept slice changes (one update makes the pool whole
  // again: the scheduler never sees it half written); otherwise the next
  // generation goes to every slice.
  const bool keep_generation =
      observed.generation > 0 && creates == 0 && changes <= 1;
  plan.generation =
      keep_generation ? observed.generation : observed.generation + 1;
  std::vector<size_t> written;
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (keep_generation && !changed[i]) {
      const Observed& slice = observed.slices[slice_of[i]];
      plan.unchanged[slice.name] = slice.resource_version;
    } else {
      written.push_back(i);
    }
  }
  const std::string prefix = SlicePrefix(node, driver);
  plan.writes.resize(written.size());
  const bool built = ParallelFor(plan.writes.size(), [&](size_t w) {
    const size_t i = written[w];
    Plan::Write& write = plan.writes[w];
    write.index = i;
    write.update = slice_of[i] != kNone;
    json slice = SliceJson(driver, node, pool, plan.generation, wanted.size(),
                           json::parse(wanted[i]), owner);
    if (slice["spec"].contains("devices")) {
      KeepTaintTimes(observed.taint_times, &slice["spec"]["devices"]);
    }
    if (write.update) {
      const Observed& existing = observed.slices[slice_of[i]];
      slice["metadata"]["name"] = existing.name;
      slice["metadata"]["resourceVersion"] = existing.resource_version;
      write.name = existing.name;
      write.what = "update resourceslice " + existing.name;
    } else {
      slice["metadata"]["generateName"] = prefix;
      write.what = "create resourceslice " + prefix + "*";
    }
    write.valid = ValidateResourceSliceJson(slice);
    write.body = Dump(slice);
  });
  if (!built) {
    return InternalError("building the slices of pool " + pool + " failed");
  }
  return plan;
}

bool ParallelFor(size_t n, const std::function<void(size_t)>& work) {
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

}  // namespace topology::draplugin::slice_sync
