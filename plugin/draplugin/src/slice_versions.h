// The names and resource versions of a ResourceSlice list's items, read
// from its text without building the document (a resync's list, every 5 s,
// carries every slice's managed fields too). Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_SLICE_VERSIONS_H_
#define TOPOLOGY_DRAPLUGIN_SLICE_VERSIONS_H_

#include <functional>
#include <map>
#include <optional>
#include <string>

namespace topology::draplugin {

// name -> resourceVersion of the items whose name `keep` accepts; nullopt
// when `body` is not JSON. Never throws.
std::optional<std::map<std::string, std::string>> ListedVersions(
    const std::string& body, std::function<bool(const std::string&)> keep);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_SLICE_VERSIONS_H_
