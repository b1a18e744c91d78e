// Device metadata (KEP-5304, beta at 1.37) as the Go helper writes it
// (k8s.io/dynamic-resource-allocation kubeletplugin, metadataWriter): for
// each request of a prepared claim, a file the container reads at
//   /var/run/kubernetes.io/dra-device-attributes/resourceclaims/<claim>/
//       <request>/<driver>-metadata.json
// (resourceclaimtemplates/<pod claim name>/... for a claim made from a
// template) describing the request's devices, their attributes as the
// driver gives them (best practice: the slice's), encoded once for each
// metadata API version (metadata.resource.k8s.io/v1alpha1, v1beta1) in one
// JSON stream; bind-mounted read-only by a CDI spec of its own
// (<driver>/metadata=<claim uid>_<request>). The DriverRunner writes them
// when DriverOptions::device_metadata is set.
#ifndef TOPOLOGY_DRAPLUGIN_DEVICE_METADATA_H_
#define TOPOLOGY_DRAPLUGIN_DEVICE_METADATA_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "topology/draplugin/resource_slices.h"
#include "topology/status.h"

namespace topology::draplugin {

inline constexpr char kMetadataContainerDir[] =
    "/var/run/kubernetes.io/dra-device-attributes";
// The host directory under the plugin's data directory.
inline constexpr char kMetadataSubDir[] = "dra-device-metadata";

struct MetadataDevice {
  std::string driver = {};
  std::string pool = {};
  std::string name = {};
  std::map<std::string, AttributeValue> attributes = {};
};

// One request's metadata.
struct RequestMetadata {
  std::string claim_namespace = {};
  std::string claim_name = {};
  std::string claim_uid = {};
  // The claim's resource.kubernetes.io/pod-claim-name annotation (a claim
  // made from a template); empty for a claim the pod names directly.
  std::string pod_claim_name = {};
  int64_t generation = 1;
  std::string request = {};  // as the result names it ("gpu" or "gpu/big")
  std::vector<MetadataDevice> devices = {};
};

// The metadata API versions the helper knows.
inline const std::vector<std::string>& MetadataVersions() {
  static const std::vector<std::string> versions = {"v1alpha1", "v1beta1"};
  return versions;
}

// The file's bytes: the DeviceMetadata object encoded for each of
// `versions` as the API machinery's pretty JSON serializer writes it (the
// Go field order, two-space indent, <, > and & escaped), each followed by a
// newline. INVALID_ARGUMENT for a version the helper does not know.
StatusOr<std::string> EncodeDeviceMetadata(
    const RequestMetadata& metadata, const std::vector<std::string>& versions);

// Where the container finds the file of `metadata`'s base request.
std::string MetadataContainerPath(const std::string& driver,
                                  const RequestMetadata& metadata);

// Writes the files and CDI specs of a prepared claim's requests (each
// request's devices, by base request name: "gpu" for "gpu/big") and
// returns, per base request name, the CDI id of its metadata, which the
// caller adds to each device of that request. Files 0644 in directories
// 0755 under <plugin_dir>/dra-device-metadata/<ns>_<name>/<request>/, as
// every file of the project (no link followed, atomic); the specs
// "<driver>_metadata_<uid>_<request>.json" in `cdi_dir`.
StatusOr<std::map<std::string, std::string>> WriteDeviceMetadata(
    const std::string& driver, const std::filesystem::path& plugin_dir,
    const std::filesystem::path& cdi_dir,
    const std::vector<std::string>& versions,
    const std::vector<RequestMetadata>& requests);

// Removes a claim's metadata files and specs; OK when there are none.
Status RemoveDeviceMetadata(const std::string& driver,
                            const std::filesystem::path& plugin_dir,
                            const std::filesystem::path& cdi_dir,
                            const std::string& claim_namespace,
                            const std::string& claim_name,
                            const std::string& claim_uid);

// Removes this driver's metadata specs in `cdi_dir`
// ("<driver>_metadata_<uid>_<request>.json", the UID in the API server's
// form) whose claim is not in `prepared`: what a Prepare interrupted before
// its claim was recorded left behind. The UIDs removed.
StatusOr<std::vector<std::string>> RemoveUnpreparedMetadataSpecs(
    const std::filesystem::path& cdi_dir, const std::string& driver,
    const std::set<std::string>& prepared);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_DEVICE_METADATA_H_
