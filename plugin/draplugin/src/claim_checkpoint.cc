#include "topology/draplugin/claim_checkpoint.h"

#include <exception>
#include <utility>

#include <nlohmann/json.hpp>

#include "topology/common/checksum.h"
#include "topology/common/json_fields.h"
#include "topology/common/safe_file.h"

namespace topology::draplugin {
namespace {

using nlohmann::json;

// A checkpoint of this many bytes is not ours (a node prepares hundreds of
// claims, a few hundred bytes each).
constexpr size_t kMaxCheckpointBytes = size_t{64} << 20;

std::string Dump(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

json ClaimsJson(const PreparedClaims& claims) {
  json out = json::array();
  for (const auto& [uid, claim] : claims) {
    json devices = json::array();
    for (const PreparedDevice& device : claim.devices) {
      json entry = {{"requests", device.request_names},
                    {"pool", device.pool},
                    {"device", device.device},
                    {"cdi", device.cdi_device_ids}};
      if (device.admin_access) entry["adminAccess"] = true;
      if (!device.share_id.empty()) entry["shareID"] = device.share_id;
      devices.push_back(std::move(entry));
    }
    json entry = {{"uid", uid},
                  {"namespace", claim.ref.ns},
                  {"name", claim.ref.name},
                  {"devices", std::move(devices)}};
    if (claim.unpreparing) entry["state"] = "unpreparing";
    out.push_back(std::move(entry));
  }
  return out;
}

std::vector<std::string> Strings(const json& value, const char* what) {
  if (!value.is_array())
    throw std::invalid_argument(std::string(what) + " is not a list");
  std::vector<std::string> out;
  for (const json& item : value) {
    if (!item.is_string()) {
      throw std::invalid_argument(std::string(what) + " holds a non-string");
    }
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string String(const json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    throw std::invalid_argument(std::string("\"") + key +
                                "\" is missing or not a string");
  }
  return it->get<std::string>();
}

}  // namespace

std::string EncodeClaims(const PreparedClaims& claims) {
  const json list = ClaimsJson(claims);
  return Dump({{"version", 1},
               {"claims", list},
               {"checksum", files::ChecksumHex(Dump(list))}}) +
         "\n";
}

StatusOr<PreparedClaims> DecodeClaims(std::string_view text) {
  const json doc = json_fields::ParseBounded(text, 16);
  if (doc.is_discarded() || !doc.is_object()) {
    return DataLossError("not a JSON object");
  }
  try {
    const auto version = doc.find("version");
    if (version == doc.end() || !version->is_number_integer() ||
        version->get<int64_t>() != 1) {
      return DataLossError("unknown or missing version (1 is read)");
    }
    const auto list = doc.find("claims");
    if (list == doc.end() || !list->is_array()) {
      return DataLossError("\"claims\" is missing or not a list");
    }
    const std::string checksum = String(doc, "checksum");
    if (files::ChecksumHex(Dump(*list)) != checksum) {
      return DataLossError("checksum mismatch");
    }
    PreparedClaims claims;
    size_t index = 0;
    for (const json& entry : *list) {
      const std::string where = "claim " + std::to_string(index++);
      if (!entry.is_object()) return DataLossError(where + " is not an object");
      try {
        PreparedClaim claim;
        claim.ref.uid = String(entry, "uid");
        claim.ref.ns = String(entry, "namespace");
        claim.ref.name = String(entry, "name");
        if (claim.ref.uid.empty()) throw std::invalid_argument("empty uid");
        if (const auto state = entry.find("state"); state != entry.end()) {
          if (!state->is_string() ||
              (*state != "unpreparing" && *state != "prepared")) {
            throw std::invalid_argument("unknown \"state\"");
          }
          claim.unpreparing = *state == "unpreparing";
        }
        const auto devices = entry.find("devices");
        if (devices == entry.end() || !devices->is_array()) {
          throw std::invalid_argument("\"devices\" is missing or not a list");
        }
        for (const json& d : *devices) {
          if (!d.is_object()) {
            throw std::invalid_argument("a device is not an object");
          }
          PreparedDevice device;
          device.request_names =
              Strings(d.value("requests", json()), "requests");
          device.pool = String(d, "pool");
          device.device = String(d, "device");
          device.cdi_device_ids = Strings(d.value("cdi", json()), "cdi");
          if (const auto admin = d.find("adminAccess"); admin != d.end()) {
            if (!admin->is_boolean()) {
              throw std::invalid_argument("\"adminAccess\" is not a boolean");
            }
            device.admin_access = admin->get<bool>();
          }
          if (const auto share = d.find("shareID"); share != d.end()) {
            if (!share->is_string()) {
              throw std::invalid_argument("\"shareID\" is not a string");
            }
            device.share_id = share->get<std::string>();
          }
          claim.devices.push_back(std::move(device));
        }
        const std::string uid = claim.ref.uid;
        if (!claims.emplace(uid, std::move(claim)).second) {
          return DataLossError(where + ": uid " + uid + " listed twice");
        }
      } catch (const std::exception& e) {
        return DataLossError(where + ": " + e.what());
      }
    }
    return claims;
  } catch (const std::exception& e) {
    return DataLossError(e.what());
  }
}

StatusOr<PreparedClaims> LoadClaims(const std::filesystem::path& path) {
  auto text = files::ReadRegularFile(path, kMaxCheckpointBytes);
  if (!text.ok()) return text.status();
  auto claims = DecodeClaims(*text);
  if (!claims.ok()) {
    return DataLossError("checkpoint " + path.string() + ": " +
                         claims.status().message());
  }
  return claims;
}

Status SaveClaims(const std::filesystem::path& path,
                  const PreparedClaims& claims) {
  return files::WriteFileAtomically(path, EncodeClaims(claims), 0600);
}

}  // namespace topology::draplugin
