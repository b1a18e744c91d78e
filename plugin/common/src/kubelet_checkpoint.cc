#include "topology/common/kubelet_checkpoint.h"

#include <algorithm>
#include <exception>
#include <string>

#include <nlohmann/json.hpp>

#include "topology/common/json_fields.h"
#include "topology/common/safe_file.h"

namespace topology::kubelet {
namespace {

namespace jf = json_fields;

// Entries beyond any node's (the kubelet admits at most a few hundred pods).
constexpr size_t kMaxEntries = 100000;

std::vector<std::string> DeviceIds(const nlohmann::json& ids,
                                   const std::string& where) {
  std::vector<std::string> out;
  if (ids.is_array()) {  // before 1.20: a flat list
    out = jf::AsStringList(ids, where + ".DeviceIDs");
  } else if (ids.is_object()) {
    for (const auto& [numa, list] : ids.items()) {
      const std::vector<std::string> node =
          jf::AsStringList(list, where + ".DeviceIDs[" + numa + "]");
      out.insert(out.end(), node.begin(), node.end());
    }
  } else if (!ids.is_null()) {
    jf::Fail(where + ".DeviceIDs", std::string("is ") + jf::TypeName(ids) +
                                       ", not a map of NUMA nodes to lists");
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// The string member `key` of an entry; errors name its whole path.
std::string StringAt(const nlohmann::json& entry, const std::string& where,
                     const char* key) {
  const std::string path = where + "." + key;
  const nlohmann::json* value = jf::OptionalField(entry, key);
  if (value == nullptr) jf::Fail(path, "missing");
  return jf::AsString(*value, path);
}

}  // namespace

StatusOr<std::vector<PodDevices>> ParseDeviceCheckpoint(std::string_view text) {
  // The checkpoint nests four deep; anything much deeper is not one.
  const nlohmann::json doc = jf::ParseBounded(text, /*max_depth=*/16);
  if (doc.is_discarded()) {
    return InvalidArgumentError(
        "the device manager checkpoint is not JSON (or nests too deep)");
  }
  try {
    const nlohmann::json& data = jf::Object(doc, "Data");
    std::vector<PodDevices> out;
    const nlohmann::json* entries = jf::OptionalField(data, "PodDeviceEntries");
    if (entries == nullptr || entries->is_null()) return out;
    if (!entries->is_array()) {
      jf::Fail("Data.PodDeviceEntries",
               std::string("is ") + jf::TypeName(*entries) + ", not a list");
    }
    if (entries->size() > kMaxEntries) {
      jf::Fail("Data.PodDeviceEntries", "has " +
                                            std::to_string(entries->size()) +
                                            " entries, more than any node's");
    }
    out.reserve(entries->size());
    for (size_t i = 0; i < entries->size(); ++i) {
      const nlohmann::json& entry = (*entries)[i];
      const std::string where =
          "Data.PodDeviceEntries[" + std::to_string(i) + "]";
      if (!entry.is_object()) {
        jf::Fail(where,
                 std::string("is ") + jf::TypeName(entry) + ", not an object");
      }
      PodDevices devices;
      devices.pod_uid = StringAt(entry, where, "PodUID");
      devices.container = StringAt(entry, where, "ContainerName");
      devices.resource = StringAt(entry, where, "ResourceName");
      const nlohmann::json* ids = jf::OptionalField(entry, "DeviceIDs");
      if (ids != nullptr) devices.device_ids = DeviceIds(*ids, where);
      out.push_back(std::move(devices));
    }
    return out;
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("the device manager checkpoint: ") +
                                e.what());
  }
}

StatusOr<std::vector<PodDevices>> ReadDeviceCheckpoint(
    const std::filesystem::path& file) {
  auto text = files::ReadRegularFile(file, kMaxDeviceCheckpointBytes);
  if (!text.ok()) return text.status();
  auto parsed = ParseDeviceCheckpoint(*text);
  if (!parsed.ok()) {
    return Status(parsed.status().code(),
                  file.string() + ": " + parsed.status().message());
  }
  return parsed;
}

}  // namespace topology::kubelet
