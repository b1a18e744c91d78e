#include "topology/draplugin/device_metadata.h"

#include <algorithm>
#include <system_error>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "topology/common/cdi.h"
#include "topology/common/k8s_names.h"
#include "topology/common/safe_file.h"
#include "topology/draplugin/driver.h"

namespace topology::draplugin {
namespace {

// Objects keep their members in the order written: the Go structs' field
// order, as encoding/json writes them (a map's keys are sorted, as
// std::map already has them).
using ordered_json = nlohmann::ordered_json;

ordered_json AttributeJson(const AttributeValue& attribute) {
  ordered_json out = ordered_json::object();
  if (const auto* text = std::get_if<std::string>(&attribute.value)) {
    out[attribute.version ? "version" : "string"] = *text;
  } else if (const auto* number = std::get_if<int64_t>(&attribute.value)) {
    out["int"] = *number;
  } else if (const auto* flag = std::get_if<bool>(&attribute.value)) {
    out["bool"] = *flag;
  } else if (const auto* ints =
                 std::get_if<std::vector<int64_t>>(&attribute.value)) {
    out["ints"] = *ints;
  } else if (const auto* bools =
                 std::get_if<std::vector<bool>>(&attribute.value)) {
    out["bools"] = *bools;
  } else if (const auto* texts =
                 std::get_if<std::vector<std::string>>(&attribute.value)) {
    out[attribute.version ? "versions" : "strings"] = *texts;
  }
  return out;
}

// encoding/json's string escaping beyond JSON's: <, >, & (HTML-safe) and
// U+2028, U+2029, outside and inside strings alike (they occur only inside).
std::string GoEscaped(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xe2' && i + 2 < text.size() && text[i + 1] == '\x80' &&
               (text[i + 2] == '\xa8' || text[i + 2] == '\xa9')) {
      out += text[i + 2] == '\xa8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string BaseRequest(const std::string& request) {
  return std::string(BaseRequestName(request));
}

std::filesystem::path ClaimDir(const std::filesystem::path& plugin_dir,
                               const std::string& ns, const std::string& name) {
  return plugin_dir / kMetadataSubDir / (ns + "_" + name);
}

std::string SpecFileName(const std::string& driver, const std::string& uid,
                         const std::string& request) {
  return driver + "_metadata_" + uid + "_" + request + ".json";
}

Status MakeDirectory(const std::filesystem::path& dir) {
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error) {
    return InternalError("cannot create " + dir.string() + ": " +
                         error.message());
  }
  if (Status linked = files::RefuseLinkedDirectory("metadata directory", dir);
      !linked.ok()) {
    return linked;
  }
  if (::chmod(dir.c_str(), 0755) != 0) {
    return InternalError("cannot set the mode of " + dir.string());
  }
  return OkStatus();
}

}  // namespace

StatusOr<std::string> EncodeDeviceMetadata(
    const RequestMetadata& metadata, const std::vector<std::string>& versions) {
  ordered_json devices = ordered_json::array();
  for (const MetadataDevice& device : metadata.devices) {
    ordered_json d = {{"driver", device.driver},
                      {"pool", device.pool},
                      {"name", device.name}};
    if (!device.attributes.empty()) {
      ordered_json attributes = ordered_json::object();
      for (const auto& [name, value] : device.attributes) {
        attributes[name] = AttributeJson(value);
      }
      d["attributes"] = std::move(attributes);
    }
    devices.push_back(std::move(d));
  }
  ordered_json request = {{"name", metadata.request}};
  if (!devices.empty()) request["devices"] = std::move(devices);
  std::string stream;
  for (const std::string& version : versions) {
    const auto& known = MetadataVersions();
    if (std::find(known.begin(), known.end(), version) == known.end()) {
      return InvalidArgumentError("device metadata version \"" + version +
                                  "\" is not one the helper knows");
    }
    ordered_json object = {
        {"kind", "DeviceMetadata"},
        {"apiVersion", "metadata.resource.k8s.io/" + version}};
    ordered_json meta = ordered_json::object();
    if (!metadata.claim_name.empty()) meta["name"] = metadata.claim_name;
    if (!metadata.claim_namespace.empty()) {
      meta["namespace"] = metadata.claim_namespace;
    }
    if (!metadata.claim_uid.empty()) meta["uid"] = metadata.claim_uid;
    if (metadata.generation != 0) meta["generation"] = metadata.generation;
    object["metadata"] = std::move(meta);
    if (!metadata.pod_claim_name.empty()) {
      object["podClaimName"] = metadata.pod_claim_name;
    }
    object["requests"] = ordered_json::array({request});
    stream += GoEscaped(
        object.dump(2, ' ', false, ordered_json::error_handler_t::replace));
    stream += '\n';
  }
  return stream;
}

std::string MetadataContainerPath(const std::string& driver,
                                  const RequestMetadata& metadata) {
  const std::string request = BaseRequest(metadata.request);
  const std::string file = driver + "-metadata.json";
  if (!metadata.pod_claim_name.empty()) {
    return std::string(kMetadataContainerDir) + "/resourceclaimtemplates/" +
           metadata.pod_claim_name + "/" + request + "/" + file;
  }
  return std::string(kMetadataContainerDir) + "/resourceclaims/" +
         metadata.claim_name + "/" + request + "/" + file;
}

StatusOr<std::map<std::string, std::string>> WriteDeviceMetadata(
    const std::string& driver, const std::filesystem::path& plugin_dir,
    const std::filesystem::path& cdi_dir,
    const std::vector<std::string>& versions,
    const std::vector<RequestMetadata>& requests) {
  std::map<std::string, std::string> ids;
  for (const RequestMetadata& metadata : requests) {
    // Names that become path segments: what the API server allows them to
    // be (DNS labels and subdomains, a UID), never "..".
    const std::string request = BaseRequest(metadata.request);
    if (!k8s::IsDns1123Label(request) ||
        !k8s::IsDns1123Label(metadata.claim_namespace) ||
        !k8s::IsDns1123Subdomain(metadata.claim_name) ||
        !k8s::IsUid(metadata.claim_uid) ||
        (!metadata.pod_claim_name.empty() &&
         !k8s::IsDns1123Label(metadata.pod_claim_name))) {
      return InvalidArgumentError(
          "device metadata of claim " + metadata.claim_namespace + "/" +
          metadata.claim_name + ", request " + metadata.request +
          ": a name is not one the API server gives");
    }
    auto stream = EncodeDeviceMetadata(metadata, versions);
    if (!stream.ok()) return stream.status();
    const std::filesystem::path dir =
        ClaimDir(plugin_dir, metadata.claim_namespace, metadata.claim_name) /
        request;
    if (Status made = MakeDirectory(dir); !made.ok()) return made;
    const std::filesystem::path file = dir / "metadata.json";
    if (Status written = files::WriteFileAtomically(file, *stream, 0644);
        !written.ok()) {
      return written;
    }
    if (Status made = MakeDirectory(cdi_dir); !made.ok()) return made;
    common::CdiSpec spec;
    spec.kind = driver + "/metadata";
    common::CdiDevice device;
    device.name = metadata.claim_uid + "_" + request;
    device.mounts.push_back(
        {.container_path = MetadataContainerPath(driver, metadata),
         .host_path = file.string(),
         .read_only = true});
    spec.devices.push_back(std::move(device));
    if (Status written = common::WriteCdiSpec(
            cdi_dir, SpecFileName(driver, metadata.claim_uid, request), spec);
        !written.ok()) {
      return written;
    }
    ids[request] = spec.kind + "=" + metadata.claim_uid + "_" + request;
  }
  return ids;
}

Status RemoveDeviceMetadata(const std::string& driver,
                            const std::filesystem::path& plugin_dir,
                            const std::filesystem::path& cdi_dir,
                            const std::string& claim_namespace,
                            const std::string& claim_name,
                            const std::string& claim_uid) {
  if (!k8s::IsDns1123Label(claim_namespace) ||
      !k8s::IsDns1123Subdomain(claim_name) || !k8s::IsUid(claim_uid)) {
    return OkStatus();  // never written for such names
  }
  std::error_code error;
  std::filesystem::remove_all(ClaimDir(plugin_dir, claim_namespace, claim_name),
                              error);
  if (error) {
    return InternalError("cannot remove the device metadata of claim " +
                         claim_namespace + "/" + claim_name + ": " +
                         error.message());
  }
  const std::string prefix = driver + "_metadata_" + claim_uid + "_";
  for (const auto& entry :
       std::filesystem::directory_iterator(cdi_dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(prefix) && name.ends_with(".json")) {
      if (Status removed = common::RemoveCdiSpec(cdi_dir, name);
          !removed.ok()) {
        return removed;
      }
    }
  }
  return OkStatus();
}

StatusOr<std::vector<std::string>> RemoveUnpreparedMetadataSpecs(
    const std::filesystem::path& cdi_dir, const std::string& driver,
    const std::set<std::string>& prepared) {
  std::vector<std::string> removed;
  const std::string prefix = driver + "_metadata_";
  std::error_code error;
  std::filesystem::directory_iterator entries(cdi_dir, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) return removed;
    return InternalError("cannot list " + cdi_dir.string() + ": " +
                         error.message());
  }
  for (const auto& entry : entries) {
    const std::string name = entry.path().filename().string();
    // "<driver>_metadata_" + a 36-character lower-case UUID + "_".
    if (!name.starts_with(prefix) || !name.ends_with(".json") ||
        name.size() < prefix.size() + 37 + 5 ||
        name[prefix.size() + 36] != '_') {
      continue;
    }
    const std::string uid = name.substr(prefix.size(), 36);
    const bool uuid = std::all_of(uid.begin(), uid.end(), [](char c) {
      return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || c == '-';
    });
    if (!uuid || prepared.contains(uid)) continue;
    if (Status gone = common::RemoveCdiSpec(cdi_dir, name); !gone.ok()) {
      return gone;
    }
    removed.push_back(uid);
  }
  return removed;
}

}  // namespace topology::draplugin
