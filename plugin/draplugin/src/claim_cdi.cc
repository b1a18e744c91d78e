#include "topology/draplugin/claim_cdi.h"

#include <utility>

namespace topology::draplugin {

std::string ClaimCdiFileName(const std::string& driver,
                             const std::string& claim_uid) {
  return driver + "-" + claim_uid + ".json";
}

StatusOr<std::vector<std::string>> WriteClaimCdiSpec(
    const std::filesystem::path& dir, const std::string& driver,
    const std::string& kind, const std::string& claim_uid,
    std::vector<plugin::CdiDevice> devices,
    const std::map<std::string, std::string>& claim_env) {
  if (Status name = plugin::ValidateCdiDeviceName(claim_uid); !name.ok()) {
    return InvalidArgumentError("claim UID \"" + claim_uid +
                                "\" cannot name a CDI device");
  }
  // Every variable has one value across the claim.
  std::map<std::string, std::pair<std::string, std::string>>
      seen;  // value, who
  for (const auto& [key, value] : claim_env) seen[key] = {value, "the claim"};
  for (const plugin::CdiDevice& device : devices) {
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
  plugin::CdiSpec spec;
  spec.kind = kind;
  std::vector<std::string> ids;
  for (plugin::CdiDevice& device : devices) {
    device.name = claim_uid + "-" + device.name;
    for (const auto& [key, value] : claim_env) device.env[key] = value;
    ids.push_back(kind + "=" + device.name);
    spec.devices.push_back(std::move(device));
  }
  if (Status written =
          plugin::WriteCdiSpec(dir, ClaimCdiFileName(driver, claim_uid), spec);
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
  if (Status name = plugin::ValidateCdiDeviceName(claim_uid); !name.ok()) {
    return InvalidArgumentError("claim UID \"" + claim_uid.substr(0, 64) +
                                "\" cannot name a CDI spec: " + name.message());
  }
  return plugin::RemoveCdiSpec(dir, ClaimCdiFileName(driver, claim_uid));
}

}  // namespace topology::draplugin
