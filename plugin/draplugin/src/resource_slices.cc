#include "topology/draplugin/resource_slices.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <set>
#include <utility>

#include <glog/logging.h>
#include <malloc.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "checksum.h"
#include "deviceplugin/v1beta1/kubelet_api.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;

constexpr char kSlices[] = "/apis/resource.k8s.io/v1/resourceslices";
constexpr char kStandardDomain[] = "resource.kubernetes.io";
constexpr size_t kMaxValueLength = 64;
constexpr size_t kMaxAttributesAndCapacity = 32;
constexpr size_t kMaxIdentifier = 32;
constexpr size_t kMaxListLength = 64;
constexpr size_t kMaxTaintValue = 63;

bool IsDnsLabel(std::string_view text) {
  return text.size() <= 63 && text.find('.') == std::string_view::npos &&
         kubelet::IsDnsSubdomain(text);
}

bool IsCIdentifier(std::string_view text) {
  if (text.empty() || text.size() > kMaxIdentifier) return false;
  if (!std::isalpha(static_cast<unsigned char>(text[0])) && text[0] != '_') {
    return false;
  }
  return std::all_of(text.begin(), text.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
  });
}

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
  if (const auto* list = std::get_if<std::vector<int64_t>>(&attribute.value)) {
    return {{"list", {{"int", *list}}}};
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
// sets (a server adds others, such as a taint's timeAdded).
json Normal(const json& device) {
  json out = {{"name", device.value("name", std::string())}};
  if (device.contains("attributes")) out["attributes"] = device["attributes"];
  if (device.contains("capacity") && device["capacity"].is_object()) {
    json capacity = json::object();
    for (const auto& [name, value] : device["capacity"].items()) {
      capacity[name] = {{"value", value.is_object()
                                      ? value.value("value", std::string())
                                      : std::string()}};
    }
    out["capacity"] = std::move(capacity);
  }
  if (device.contains("taints") && device["taints"].is_array()) {
    json taints = json::array();
    for (const json& taint : device["taints"]) {
      if (!taint.is_object()) continue;
      json t = {{"key", taint.value("key", std::string())},
                {"effect", taint.value("effect", std::string())}};
      if (!taint.value("value", std::string()).empty()) {
        t["value"] = taint["value"];
      }
      taints.push_back(std::move(t));
    }
    out["taints"] = std::move(taints);
  }
  return out;
}

// Slice names: "<node>-<driver>-<index>"; a DNS subdomain when both are.
std::string SliceBase(const std::string& node, const std::string& driver) {
  std::string base = node + "-" + driver;
  if (base.size() > 240) {
    base = base.substr(0, 223) + "-" + files::ChecksumHex(base);
  }
  return base;
}

struct Existing {
  std::string name;
  std::string resource_version;
  std::string pool;
  int64_t generation = 0;
  int64_t count = 0;
  json devices = json::array();  // normalised
};

// The names and resource versions of a list's items (items[].metadata),
// read without building the document: a resync's list, every 5 s, has the
// managed fields of every slice too. nullopt when it is not JSON.
class VersionsReader {
 public:
  explicit VersionsReader(std::function<bool(const std::string&)> keep)
      : keep_(std::move(keep)) {}
  using string_t = json::string_t;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const string_t&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool string(string_t& value) {
    if (InItemMetadata()) {
      if (key_ == "name") name_ = value;
      if (key_ == "resourceVersion") version_ = value;
    }
    return true;
  }
  bool key(string_t& key) {
    key_ = key;
    return true;
  }
  bool start_object(std::size_t) { return Open(false); }
  bool start_array(std::size_t) { return Open(true); }
  bool end_object() {
    // An item ends: ["$", "items", "[]"].
    if (path_.size() == 3 && path_[1] == "items" && !name_.empty() &&
        keep_(name_)) {
      versions_[name_] = version_;
    }
    if (path_.size() == 3) {
      name_.clear();
      version_.clear();
    }
    return Close();
  }
  bool end_array() { return Close(); }
  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception&) {
    return false;
  }
  std::map<std::string, std::string> versions() && {
    return std::move(versions_);
  }

 private:
  bool Open(bool array) {
    // Where the container is: its key in an object, "[]" in an array,
    // "$" at the top.
    path_.push_back(path_.empty() ? "$" : array_.back() ? "[]" : key_);
    array_.push_back(array);
    key_.clear();
    return true;
  }
  bool Close() {
    path_.pop_back();
    array_.pop_back();
    key_.clear();
    return true;
  }
  bool InItemMetadata() const {
    return path_.size() == 4 && path_[1] == "items" && path_[2] == "[]" &&
           path_[3] == "metadata";
  }

  std::function<bool(const std::string&)> keep_;
  std::vector<std::string> path_;
  std::vector<bool> array_;
  std::string key_;
  std::string name_;
  std::string version_;
  std::map<std::string, std::string> versions_;
};

std::optional<std::map<std::string, std::string>> ListedVersions(
    const std::string& body, std::function<bool(const std::string&)> keep) {
  VersionsReader reader(std::move(keep));
  try {
    if (!json::sax_parse(body, &reader)) return std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return std::move(reader).versions();
}

}  // namespace

Status ValidateDevices(const std::string& driver,
                       const std::vector<SliceDevice>& devices) {
  std::set<std::string> names;
  for (const SliceDevice& device : devices) {
    const std::string who = "device \"" + device.name + "\"";
    const auto invalid = [&](const std::string& what) {
      return InvalidArgumentError(who + ": " + what);
    };
    if (!IsDnsLabel(device.name)) {
      return invalid(
          "the name is not a DNS label (lower case, digits, '-', "
          "at most 63 characters)");
    }
    if (!names.insert(device.name).second) return invalid("listed twice");
    if (device.attributes.size() + device.capacity.size() >
        kMaxAttributesAndCapacity) {
      return invalid("more than 32 attributes and capacities");
    }
    for (const auto& [name, value] : device.attributes) {
      const size_t slash = name.find('/');
      const std::string domain =
          slash == std::string::npos ? driver : name.substr(0, slash);
      const std::string id =
          slash == std::string::npos ? name : name.substr(slash + 1);
      if (!IsCIdentifier(id)) {
        return invalid("attribute \"" + name +
                       "\": the name is not a C identifier of at most 32 "
                       "characters");
      }
      if (domain == kStandardDomain) {
        if (id != "pciBusID" && id != "pcieRoot" && id != "numaNode") {
          return invalid("attribute \"" + name +
                         "\": resource.kubernetes.io "
                         "holds only the standard attributes");
        }
      } else if (domain != driver) {
        return invalid("attribute \"" + name +
                       "\": a driver's own attributes are unqualified or "
                       "under its domain " +
                       driver);
      }
      if (const auto* text = std::get_if<std::string>(&value.value);
          text != nullptr && text->size() > kMaxValueLength) {
        return invalid("attribute \"" + name +
                       "\": the value is longer than "
                       "64 characters");
      }
      if (const auto* list = std::get_if<std::vector<int64_t>>(&value.value);
          list != nullptr && (list->empty() || list->size() > kMaxListLength)) {
        return invalid("attribute \"" + name +
                       "\": a list holds 1 to 64 values");
      }
    }
    for (const auto& [name, quantity] : device.capacity) {
      if (!IsCIdentifier(name.substr(name.find('/') + 1)) || quantity.empty()) {
        return invalid("capacity \"" + name + "\" is not a name and quantity");
      }
    }
    for (const DeviceTaint& taint : device.taints) {
      if (taint.key.empty() || taint.key.size() > 253 ||
          (taint.effect != "NoSchedule" && taint.effect != "NoExecute")) {
        return invalid("taint \"" + taint.key +
                       "\": needs a key and the effect NoSchedule or "
                       "NoExecute");
      }
      if (taint.value.size() > kMaxTaintValue) {
        return invalid("taint \"" + taint.key +
                       "\": the value is longer than 63 characters");
      }
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
  if (!kubelet::IsDnsSubdomain(node_)) {
    return InvalidArgumentError("node name \"" + node_ +
                                "\" is not a DNS subdomain");
  }
  if (!kubelet::IsDnsSubdomain(pool)) {
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
  encoded->blocks.reserve(devices.size() / kMaxTaintedDevicesPerSlice + 1);
  std::string text;
  for (size_t i = 0; i < devices.size(); ++i) {
    if (!text.empty()) text += ',';
    text += Dump(DeviceJson(devices[i]));
    encoded->tainted = encoded->tainted || !devices[i].taints.empty();
    if ((i + 1) % kMaxTaintedDevicesPerSlice == 0 || i + 1 == devices.size()) {
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
    wake_.wait_for(lock, published_
                             ? options_.resync
                             : std::min<std::chrono::milliseconds>(
                                   options_.resync, std::chrono::seconds(1)));
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
  // Without the field selector every node's slices come: ours are the
  // ones named after this node and driver.
  const std::string base = SliceBase(node_, driver_) + "-";
  const auto ours = [&](const std::string& name) {
    return !filter_here ||
           (name.starts_with(base) && name.size() > base.size() &&
            name.find_first_not_of("0123456789", base.size()) ==
                std::string::npos);
  };
  auto now = ListedVersions(listed->body, ours);
  if (!now) return false;
  return *now == seen;
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
  // This node's and driver's slices.
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
  try {
    const json doc = json::parse(listed->body);
    for (const json& item : doc.at("items")) {
      const json& spec = item.at("spec");
      if (spec.value("nodeName", std::string()) != node_ ||
          spec.value("driver", std::string()) != driver_) {
        continue;  // another node's or driver's: never touched
      }
      Existing e;
      e.name = item.at("metadata").at("name").get<std::string>();
      e.resource_version =
          item.at("metadata").value("resourceVersion", std::string());
      const json pool_json = spec.value("pool", json::object());
      e.pool = pool_json.value("name", std::string());
      e.generation = pool_json.value("generation", int64_t{0});
      e.count = pool_json.value("resourceSliceCount", int64_t{0});
      for (const json& device : spec.value("devices", json::array())) {
        e.devices.push_back(Normal(device));
      }
      existing.push_back(std::move(e));
    }
  } catch (const std::exception& e) {
    return fail(UnavailableError(std::string("list resourceslices: "
                                             "unreadable answer: ") +
                                 e.what()));
  }

  // What should be there.
  const size_t per_slice =
      encoded->tainted ? kMaxTaintedDevicesPerSlice : kMaxDevicesPerSlice;
  const size_t count =
      std::max<size_t>(1, (encoded->count + per_slice - 1) / per_slice);
  const size_t blocks_per_slice = per_slice / kMaxTaintedDevicesPerSlice;
  const std::string base = SliceBase(node_, driver_);
  // name -> the slice's devices as the comparison dumps them (a device's
  // JSON as sent is already what Normal() keeps of it).
  std::map<std::string, std::string> wanted;
  for (size_t i = 0; i < count; ++i) {
    std::string list = "[";
    for (size_t b = i * blocks_per_slice;
         b < std::min(encoded->blocks.size(), (i + 1) * blocks_per_slice);
         ++b) {
      if (list.size() > 1) list += ',';
      list += Inflate(encoded->blocks[b]);
    }
    wanted[base + "-" + std::to_string(i)] = list + "]";
  }

  int64_t generation = 0;
  bool same = existing.size() == wanted.size();
  for (const Existing& e : existing) {
    if (e.pool == pool) generation = std::max(generation, e.generation);
  }
  for (const Existing& e : existing) {
    const auto it = wanted.find(e.name);
    same = same && e.pool == pool && e.generation == generation &&
           e.count == static_cast<int64_t>(count) && it != wanted.end() &&
           it->second == Dump(e.devices);
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
  ++generation;
  uint64_t creates = 0;
  uint64_t updates = 0;
  uint64_t deletes = 0;
  std::map<std::string, std::string> written_versions;
  for (const auto& [name, list] : wanted) {
    json slice = {{"apiVersion", "resource.k8s.io/v1"},
                  {"kind", "ResourceSlice"},
                  {"metadata", {{"name", name}}},
                  {"spec",
                   {{"driver", driver_},
                    {"nodeName", node_},
                    {"pool",
                     {{"name", pool},
                      {"generation", generation},
                      {"resourceSliceCount", count}}},
                    {"devices", json::array()}}}};
    // The devices as sent (not normalised: the same fields).
    slice["spec"]["devices"] = json::parse(list);
    const std::string& slice_name =
        name;  // (a lambda cannot capture a binding)
    const auto found =
        std::find_if(existing.begin(), existing.end(),
                     [&](const Existing& e) { return e.name == slice_name; });
    StatusOr<HttpResponse> answer = UnavailableError("not sent");
    if (found != existing.end()) {
      slice["metadata"]["resourceVersion"] = found->resource_version;
      answer = client_->Request("PUT", std::string(kSlices) + "/" + name,
                                Dump(slice));
      ++updates;
    } else {
      answer = client_->Request("POST", kSlices, Dump(slice));
      ++creates;
    }
    if (!answer.ok()) return fail(answer.status());
    if (Status status = StatusOf(*answer, "write resourceslice " + name,
                                 /*create=*/found == existing.end());
        !status.ok()) {
      // A conflict or a slice created meanwhile: read again and retry.
      if (status.code() == StatusCode::kAlreadyExists) {
        return fail(Status(StatusCode::kAborted, status.message()));
      }
      return fail(status);
    }
    // The version the server gave it: the resync's cheap look needs no
    // full list to learn what was just written.
    const json written =
        json::parse(answer->body, nullptr, /*allow_exceptions=*/false);
    if (written.is_object() && written.contains("metadata") &&
        written["metadata"].is_object()) {
      written_versions[name] =
          written["metadata"].value("resourceVersion", std::string());
    }
  }
  for (const Existing& e : existing) {
    if (wanted.contains(e.name)) continue;
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
