#include "checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <iterator>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "topology/common/checksum.h"
#include "topology/common/json_fields.h"

namespace topology::host {
namespace {

using nlohmann::json;

using files::Fnv1a64;
namespace jf = json_fields;

std::string Checksum(const json& data) {
  return files::ChecksumHex(
      data.dump(-1, ' ', false, json::error_handler_t::replace));
}

json ContainerJson(const manager::Container& c) {
  return {
      {"name", c.name}, {"restartable", c.restartable}, {"limits", c.limits}};
}

manager::Container ContainerFromJson(const json& j) {
  manager::Container c;
  c.name = jf::String(j, "name");
  c.restartable = jf::BoolOr(j, "restartable", false);
  for (const auto& [resource, quantity] : jf::Object(j, "limits").items()) {
    const int64_t value = jf::AsInt(quantity, "limits." + resource);
    if (value < 0) {
      throw std::invalid_argument("negative limit of " + resource);
    }
    c.limits[resource] = value;
  }
  return c;
}

json PodJson(const CheckpointPod& record) {
  json init = json::array();
  for (const auto& c : record.pod.init_containers) {
    init.push_back(ContainerJson(c));
  }
  json app = json::array();
  for (const auto& c : record.pod.containers) app.push_back(ContainerJson(c));
  json containers = json::array();
  for (const CheckpointContainer& c : record.containers) {
    json devices = json::object();
    for (const auto& [resource, ids] : c.devices) devices[resource] = ids;
    json container = {
        {"name", c.name},
        {"devices", std::move(devices)},
        {"cpus", c.cpus.ToList()},
        {"numa_nodes", c.numa_nodes ? json(*c.numa_nodes) : json(nullptr)}};
    if (!c.memory.empty()) {
      json memory = json::array();
      for (const manager::MemoryBlock& block : c.memory) {
        memory.push_back({{"type", block.type},
                          {"size", block.size},
                          {"numa_nodes", block.numa_affinity}});
      }
      container["memory"] = std::move(memory);
    }
    containers.push_back(std::move(container));
  }
  json pod_json = {{"uid", record.pod.uid},
                   {"namespace", record.pod.ns},
                   {"name", record.pod.name},
                   {"guaranteed", record.pod.guaranteed},
                   {"init_containers", init},
                   {"containers", app},
                   {"result", {{"containers", containers}}}};
  if (!record.pod.topology_policy.empty()) {
    pod_json["topology_policy"] = record.pod.topology_policy;
    pod_json["topology_policy_source"] = record.pod.topology_policy_source;
  }
  return pod_json;
}

// Throws (json or std::invalid_argument) on a missing or mistyped field;
// a bad CPU list is an invalid_argument naming the pod.
CheckpointPod PodFromJson(const json& p) {
  CheckpointPod record;
  record.pod.uid = jf::String(p, "uid");
  record.pod.ns = jf::String(p, "namespace");
  record.pod.name = jf::String(p, "name");
  record.pod.guaranteed = jf::Bool(p, "guaranteed");
  record.pod.topology_policy = jf::StringOr(p, "topology_policy", "");
  record.pod.topology_policy_source =
      jf::StringOr(p, "topology_policy_source", "");
  for (const json& c : jf::Array(p, "init_containers")) {
    record.pod.init_containers.push_back(ContainerFromJson(c));
  }
  for (const json& c : jf::Array(p, "containers")) {
    record.pod.containers.push_back(ContainerFromJson(c));
  }
  for (const json& c : jf::Array(jf::Object(p, "result"), "containers")) {
    CheckpointContainer container;
    container.name = jf::String(c, "name");
    for (const auto& [resource, ids] : jf::Object(c, "devices").items()) {
      container.devices[resource] = jf::AsStringList(ids, resource);
    }
    auto cpus = CpuSet::ParseList(jf::String(c, "cpus"));
    if (!cpus.ok()) {
      throw std::invalid_argument("bad CPU list of pod " + record.pod.uid +
                                  ": " + cpus.status().message());
    }
    container.cpus = *cpus;
    if (jf::OptionalField(c, "numa_nodes") != nullptr) {
      container.numa_nodes = jf::IntList(c, "numa_nodes", 0, 1023);
    }
    if (jf::OptionalField(c, "memory") != nullptr) {
      for (const json& block : jf::Array(c, "memory")) {
        container.memory.push_back(manager::MemoryBlock{
            jf::IntList(block, "numa_nodes", 0, 1023),
            jf::String(block, "type"), jf::Uint(block, "size")});
      }
    }
    record.containers.push_back(std::move(container));
  }
  return record;
}

json MemoryJson(const CheckpointMemory& memory) {
  json nodes = json::array();
  for (const auto& [id, node] : memory.machine) {
    json types = json::array();
    for (const auto& [type, table] : node.memory) {
      types.push_back({{"type", type},
                       {"total", table.total},
                       {"system_reserved", table.system_reserved},
                       {"allocatable", table.allocatable}});
    }
    nodes.push_back({{"id", id}, {"types", std::move(types)}});
  }
  return {{"op", "memory"}, {"policy", memory.policy}, {"nodes", nodes}};
}

// Throws on a missing or mistyped field.
CheckpointMemory MemoryFromJson(const json& record) {
  CheckpointMemory memory;
  memory.policy = jf::String(record, "policy");
  for (const json& node : jf::Array(record, "nodes")) {
    const int id = static_cast<int>(jf::Int(node, "id", 0, 1023));
    manager::MemoryNodeState& state = memory.machine[id];
    for (const json& type : jf::Array(node, "types")) {
      manager::MemoryTable& table = state.memory[jf::String(type, "type")];
      table.total = jf::Uint(type, "total");
      table.system_reserved = jf::Uint(type, "system_reserved");
      table.allocatable = jf::Uint(type, "allocatable");
    }
  }
  return memory;
}

// A journal line: 16 hex digits of FNV-1a 64 over the JSON text, a space,
// the JSON text, a newline.
std::string Framed(const json& record) {
  std::string body =
      record.dump(-1, ' ', false, json::error_handler_t::replace);
  char hash[20];
  std::snprintf(hash, sizeof(hash), "%016llx ",
                static_cast<unsigned long long>(Fnv1a64(body)));
  std::string line;
  line.reserve(body.size() + 18);
  line.append(hash).append(body).push_back('\n');
  return line;
}

// The next line of `text` from `*offset`: its record's JSON, or why it is
// not one (`*why`; `*cut_short` when it has no end of line). Advances
// `*offset` past the line.
json ReadFramed(std::string_view text, size_t* offset, std::string* why,
                bool* cut_short) {
  const size_t end = text.find('\n', *offset);
  *cut_short = end == std::string_view::npos;
  if (*cut_short) {
    *why = "cut short (no end of line)";
    *offset = text.size();
    return json();
  }
  const std::string_view line = text.substr(*offset, end - *offset);
  *offset = end + 1;
  if (line.size() < 18 || line[16] != ' ') {
    *why = "not a checksummed record";
    return json();
  }
  uint64_t expected = 0;
  for (char c : line.substr(0, 16)) {
    int digit = -1;
    if (c >= '0' && c <= '9') digit = c - '0';
    if (c >= 'a' && c <= 'f') digit = c - 'a' + 10;
    if (digit < 0) {
      *why = "checksum mismatch";
      return json();
    }
    expected = (expected << 4) | static_cast<uint64_t>(digit);
  }
  const std::string_view body = line.substr(17);
  if (Fnv1a64(body) != expected) {
    *why = "checksum mismatch";
    return json();
  }
  json record = jf::ParseBounded(body, 32);
  if (record.is_discarded() || !record.is_object()) {
    *why = "not a JSON object";
    return json();
  }
  return record;
}

// DATA_LOSS "<where>unknown checkpoint version <v>" unless `doc` has the
// integer version `expected` (a missing or mistyped one included).
Status CheckVersion(const json& doc, int expected, const std::string& where) {
  const json* version = jf::OptionalField(doc, "version");
  if (version != nullptr && version->is_number_integer() &&
      *version == expected) {
    return OkStatus();
  }
  return DataLossError(
      where + "unknown checkpoint version " +
      (version == nullptr
           ? std::string("(none)")
           : version->dump(-1, ' ', false, json::error_handler_t::replace)
                 .substr(0, 32)));
}

// The first version: one JSON document with a checksum of its data.
StatusOr<Checkpoint> DecodeVersion1(std::string_view text) {
  const json doc = jf::ParseBounded(text, 32);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("data") ||
      !doc.contains("checksum")) {
    return DataLossError("not a checkpoint document");
  }
  Checkpoint out;
  try {
    if (Status version = CheckVersion(doc, 1, ""); !version.ok()) {
      return version;
    }
    const json& data = jf::Field(doc, "data");
    const json& checksum = jf::Field(doc, "checksum");
    if (!checksum.is_string() ||
        checksum.get<std::string>() != Checksum(data)) {
      return DataLossError("checksum mismatch");
    }
    for (const json& p : jf::Array(data, "pods")) {
      out.pods.push_back(PodFromJson(p));
    }
    for (const auto& [name, ids] : jf::Object(data, "registered").items()) {
      out.registered[name] = jf::AsStringList(ids, name);
    }
  } catch (const std::exception& e) {
    return DataLossError(e.what());
  }
  return out;
}

constexpr size_t kParallelDecodeBytes = size_t{1} << 20;

// `parse(piece, offset)` over `text` (offset: where piece starts in it): at
// once in two halves cut at a line end when `text` is 1 MiB or more, so
// that no record spans the cut (parsing is nearly all of a restart's
// time); else, or without a second thread to be had, in order.
template <typename Parse>
auto ParseInHalves(std::string_view text, const Parse& parse) {
  std::vector<decltype(parse(text, size_t{0}))> parts;
  const size_t cut = text.size() >= kParallelDecodeBytes
                         ? text.find('\n', text.size() / 2)
                         : std::string_view::npos;
  if (cut == std::string_view::npos || cut + 1 == text.size()) {
    parts.push_back(parse(text, 0));
    return parts;
  }
  const std::string_view first = text.substr(0, cut + 1);
  const std::string_view second = text.substr(cut + 1);
  parts.resize(2);
  try {
    std::thread other([&] { parts[1] = parse(second, cut + 1); });
    parts[0] = parse(first, 0);
    other.join();
  } catch (const std::system_error&) {
    parts[0] = parse(first, 0);
    parts[1] = parse(second, cut + 1);
  }
  return parts;
}

// Records of a snapshot, from record number `first_number` on: record 1
// must be the header, the others admit or resource records. (clang-tidy 14
// cannot see that the json member never throws on destruction or move.)
// NOLINTNEXTLINE(bugprone-exception-escape)
struct SnapshotPart {
  json header;  // record 1's, when this part starts there
  std::vector<CheckpointPod> pods;
  std::vector<std::pair<std::string, std::vector<std::string>>> resources;
  std::optional<CheckpointMemory> memory;
  size_t records = 0;
  std::string error;  // "record N: why"
};

SnapshotPart DecodePart(std::string_view text, size_t first_number) {
  SnapshotPart part;
  size_t offset = 0;
  size_t number = first_number - 1;
  std::string why;
  bool cut_short = false;
  try {
    while (offset < text.size() && why.empty()) {
      ++number;
      ++part.records;
      json record = ReadFramed(text, &offset, &why, &cut_short);
      if (!why.empty()) break;
      const std::string op = jf::String(record, "op");
      if (number == 1) {
        if (op == "snapshot") {
          part.header = std::move(record);
        } else {
          why = "not a checkpoint snapshot";
        }
      } else if (op == "admit") {
        part.pods.push_back(PodFromJson(jf::Field(record, "pod")));
      } else if (op == "resource") {
        part.resources.emplace_back(jf::String(record, "name"),
                                    jf::StringList(record, "healthy"));
      } else if (op == "memory") {
        part.memory = MemoryFromJson(record);
      } else {
        why = "unexpected record " + op.substr(0, 32);
      }
    }
  } catch (const std::exception& e) {
    why = e.what();
  }
  if (!why.empty())
    part.error = "record " + std::to_string(number) + ": " + why;
  return part;
}

}  // namespace

std::string EncodeCheckpoint(const Checkpoint& checkpoint) {
  std::string out = Framed({{"op", "snapshot"},
                            {"version", 2},
                            {"pods", checkpoint.pods.size()},
                            {"resources", checkpoint.registered.size()}});
  for (const CheckpointPod& pod : checkpoint.pods) {
    out += EncodeAdmitRecord(pod);
  }
  for (const auto& [name, ids] : checkpoint.registered) {
    out += EncodeResourceRecord(name, ids);
  }
  if (checkpoint.memory) out += EncodeMemoryRecord(*checkpoint.memory);
  return out;
}

StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text) {
  if (text.starts_with('{')) return DecodeVersion1(text);
  // Record numbers of the second half follow the first half's lines.
  std::vector<SnapshotPart> parts =
      ParseInHalves(text, [&](std::string_view piece, size_t offset) {
        const std::string_view before = text.substr(0, offset);
        return DecodePart(piece, 1 + static_cast<size_t>(std::count(
                                         before.begin(), before.end(), '\n')));
      });
  for (const SnapshotPart& part : parts) {
    if (!part.error.empty()) return DataLossError(part.error);
  }
  if (parts[0].records == 0) return DataLossError("empty checkpoint snapshot");
  const json& header = parts[0].header;
  if (header.is_null()) {
    return DataLossError("record 1: not a checkpoint snapshot");
  }
  Checkpoint out;
  uint64_t pods = 0;
  uint64_t resources = 0;
  try {
    if (Status version = CheckVersion(header, 2, "record 1: "); !version.ok()) {
      return version;
    }
    pods = jf::Uint(header, "pods");
    resources = jf::Uint(header, "resources");
  } catch (const std::exception& e) {
    return DataLossError(std::string("record 1: ") + e.what());
  }
  for (SnapshotPart& part : parts) {
    if (out.pods.empty()) {
      out.pods = std::move(part.pods);
    } else {
      std::move(part.pods.begin(), part.pods.end(),
                std::back_inserter(out.pods));
    }
    for (auto& [name, ids] : part.resources) {
      out.registered[name] = std::move(ids);
    }
    if (part.memory) out.memory = std::move(part.memory);
  }
  if (out.pods.size() != pods || out.registered.size() != resources) {
    return DataLossError(
        "the snapshot holds " + std::to_string(out.pods.size()) + " pods and " +
        std::to_string(out.registered.size()) + " resources, its header says " +
        std::to_string(pods) + " and " + std::to_string(resources));
  }
  return out;
}

std::string EncodeAdmitRecord(const CheckpointPod& pod) {
  return Framed({{"op", "admit"}, {"pod", PodJson(pod)}});
}

std::string EncodeReleaseRecord(std::string_view uid) {
  return Framed({{"op", "release"}, {"uid", uid}});
}

std::string EncodeResourceRecord(std::string_view name,
                                 const std::vector<std::string>& healthy) {
  return Framed({{"op", "resource"}, {"name", name}, {"healthy", healthy}});
}

std::string EncodeMemoryRecord(const CheckpointMemory& memory) {
  return Framed(MemoryJson(memory));
}

namespace {

// One journal record, parsed but not applied: parsing is nearly all of a
// replay's time and needs no state, so a large journal is parsed in two
// halves at once and applied in order afterwards.
struct ParsedRecord {
  enum class Op { kAdmit, kRelease, kResource, kMemory };
  Op op = Op::kAdmit;
  CheckpointPod pod;                 // kAdmit
  std::string key;                   // the uid (kRelease) or resource name
  std::vector<std::string> healthy;  // kResource
  CheckpointMemory memory;           // kMemory
  size_t start = 0;                  // byte offsets in the whole journal
  size_t end = 0;
  std::string error;  // why this record cannot be applied; it is the last
  bool cut_short = false;
};

// The records of `text` (which starts at byte `base` of the journal), up to
// and including the first one that cannot be applied.
std::vector<ParsedRecord> ParseJournal(std::string_view text, size_t base) {
  std::vector<ParsedRecord> out;
  size_t offset = 0;
  while (offset < text.size()) {
    ParsedRecord& parsed = out.emplace_back();
    parsed.start = base + offset;
    std::string why;
    json record = ReadFramed(text, &offset, &why, &parsed.cut_short);
    parsed.end = base + offset;
    if (!why.empty()) {
      parsed.error = std::move(why);
      break;
    }
    try {
      const std::string op = jf::String(record, "op");
      if (op == "admit") {
        parsed.op = ParsedRecord::Op::kAdmit;
        parsed.pod = PodFromJson(jf::Field(record, "pod"));
      } else if (op == "release") {
        parsed.op = ParsedRecord::Op::kRelease;
        parsed.key = jf::String(record, "uid");
      } else if (op == "resource") {
        parsed.op = ParsedRecord::Op::kResource;
        parsed.healthy = jf::StringList(record, "healthy");
        parsed.key = jf::String(record, "name");
      } else if (op == "memory") {
        parsed.op = ParsedRecord::Op::kMemory;
        parsed.memory = MemoryFromJson(record);
      } else {
        throw std::invalid_argument("unknown operation " + op.substr(0, 32));
      }
    } catch (const std::exception& e) {
      parsed.error = e.what();
      break;
    }
  }
  return out;
}

}  // namespace

std::string_view JournalRecords(std::string_view text) {
  const size_t last = text.find_last_not_of('\0');
  return text.substr(0, last == std::string_view::npos ? 0 : last + 1);
}

JournalReplay ReplayJournal(std::string_view text, Checkpoint& checkpoint) {
  text = JournalRecords(text);
  // A damaged record in the first half ends the replay before the second
  // half is used.
  std::vector<std::vector<ParsedRecord>> parts =
      ParseInHalves(text, ParseJournal);
  JournalReplay replay;
  // Pods by uid, in the snapshot's order; released ones are tombstones
  // until the end.
  std::map<std::string, size_t, std::less<>> index;
  std::vector<bool> released(checkpoint.pods.size(), false);
  for (size_t i = 0; i < checkpoint.pods.size(); ++i) {
    index[checkpoint.pods[i].pod.uid] = i;
  }
  size_t line_number = 0;
  bool stopped = false;
  for (std::vector<ParsedRecord>& part : parts) {
    for (ParsedRecord& record : part) {
      ++line_number;
      if (!record.error.empty()) {
        replay.damage = "record " + std::to_string(line_number) + " (byte " +
                        std::to_string(record.start) + "): " + record.error;
        replay.torn_tail = record.cut_short;
        stopped = true;
        break;
      }
      switch (record.op) {
        case ParsedRecord::Op::kAdmit:
          if (auto it = index.find(record.pod.pod.uid); it != index.end()) {
            checkpoint.pods[it->second] = std::move(record.pod);
            released[it->second] = false;
          } else {
            index.emplace(record.pod.pod.uid, checkpoint.pods.size());
            checkpoint.pods.push_back(std::move(record.pod));
            released.push_back(false);
          }
          break;
        case ParsedRecord::Op::kRelease:
          if (auto it = index.find(record.key); it != index.end()) {
            released[it->second] = true;
          }
          break;
        case ParsedRecord::Op::kResource:
          checkpoint.registered[record.key] = std::move(record.healthy);
          break;
        case ParsedRecord::Op::kMemory:
          checkpoint.memory = std::move(record.memory);
          break;
      }
      ++replay.applied;
      replay.valid_bytes = record.end;
    }
    if (stopped) break;
  }
  if (std::find(released.begin(), released.end(), true) != released.end()) {
    std::vector<CheckpointPod> kept;
    kept.reserve(checkpoint.pods.size());
    for (size_t i = 0; i < checkpoint.pods.size(); ++i) {
      if (!released[i]) kept.push_back(std::move(checkpoint.pods[i]));
    }
    checkpoint.pods = std::move(kept);
  }
  return replay;
}

}  // namespace topology::host
