#include "topology/draplugin/claim_cdi.h"

#include <system_error>
#include <utility>

namespace topology::draplugin {

std::string ClaimCdiFileName(const std::string& driver,
                             const std::string& claim_uid) {
  return driver + "-" + claim_uid + ".json";
}

StatusOr<std::vector<std::string>> WriteClaimCdiSpec(
    const std::filesystem::path& dir, const std::string& driver,
    const std::string& kind, const std::string& claim_uid,
    std::vector<common::CdiDevice> devices,
    const std::map<std::string, std::string>& claim_env) {
  if (Status name = common::ValidateCdiDeviceName(claim_uid); !name.ok()) {
    return InvalidArgumentError("claim UID \"" + claim_uid +
                                "\" cannot name a CDI device");
  }
  // Every variable has one value across the claim.
  std::map<std::string, std::pair<std::string, std::string>>
      seen;  // value, who
  for (const auto& [key, value] : claim_env) seen[key] = {value, "the claim"};
  for (const common::CdiDevice& device : devices) {
    for (const auto& [key, value] : device.env) {
      auto [it, fresh] = seen.emplace(key, std::pair{value, device.name});
      if (!fresh && it->second.first != value) {
        return InvalidArgumentError(
            "claim " + claim_uid + ": " + key + " is \"" + it->second.first +
            "\" for " + it->second.second + " and \"" + value + "\" for " +
            device.name + "; a container would get one of them");
      }
    }
  }
  common::CdiSpec spec;
  spec.kind = kind;
  std::vector<std::string> ids;
  for (common::CdiDevice& device : devices) {
    device.name = claim_uid + "-" + device.name;
    for (const auto& [key, value] : claim_env) device.env[key] = value;
    ids.push_back(kind + "=" + device.name);
    spec.devices.push_back(std::move(device));
  }
  if (Status written =
          common::WriteCdiSpec(dir, ClaimCdiFileName(driver, claim_uid), spec);
      !written.ok()) {
    return written;
  }
  return ids;
}

Status RemoveClaimCdiSpec(const std::filesystem::path& dir,
                          const std::string& driver,
                          const std::string& claim_uid) {
  // The UID names a file: one that could leave `dir` ("x/../../victim") is
  // refused as the writer refuses it.
  if (Status name = common::ValidateCdiDeviceName(claim_uid); !name.ok()) {
    return InvalidArgumentError("claim UID \"" + claim_uid.substr(0, 64) +
                                "\" cannot name a CDI spec: " + name.message());
  }
  return common::RemoveCdiSpec(dir, ClaimCdiFileName(driver, claim_uid));
}

namespace {

// 8-4-4-4-12 lower-case hexadecimal digits: the UIDs the API server makes.
bool IsApiServerUid(std::string_view uid) {
  if (uid.size() != 36) return false;
  for (size_t i = 0; i < uid.size(); ++i) {
    const char c = uid[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

StatusOr<std::vector<std::string>> RemoveUnpreparedCdiSpecs(
    const std::filesystem::path& dir, const std::string& driver,
    const std::set<std::string>& prepared) {
  std::vector<std::string> removed;
  const std::string prefix = driver + "-";
  constexpr std::string_view kSuffix = ".json";
  std::error_code error;
  std::filesystem::directory_iterator it(dir, error);
  if (error) {
    if (error == std::errc::no_such_file_or_directory) return removed;
    return FailedPreconditionError("cannot list the CDI directory " +
                                   dir.string() + ": " + error.message());
  }
  for (; !error && it != std::filesystem::directory_iterator();
       it.increment(error)) {
    const std::string name = it->path().filename().string();
    if (!name.starts_with(prefix) || !name.ends_with(kSuffix)) continue;
    const std::string uid = name.substr(
        prefix.size(), name.size() - prefix.size() - kSuffix.size());
    if (!IsApiServerUid(uid) || prepared.contains(uid)) continue;
    // A directory of that name is not a spec; a link is removed, never
    // followed.
    std::error_code type_error;
    if (it->symlink_status(type_error).type() ==
        std::filesystem::file_type::directory) {
      continue;
    }
    if (std::filesystem::remove(it->path(), type_error)) {
      removed.push_back(uid);
    } else if (type_error) {
      return FailedPreconditionError("cannot remove " + it->path().string() +
                                     ": " + type_error.message());
    }
  }
  if (error) {
    return FailedPreconditionError("cannot list the CDI directory " +
                                   dir.string() + ": " + error.message());
  }
  return removed;
}

}  // namespace topology::draplugin
