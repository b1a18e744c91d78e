// Which CDI device names the spec files of a node define: every
// "<kind>=<name>" of every *.json, *.yaml and *.yml file in the given
// directories (a runtime's /etc/cdi and /var/run/cdi), read as the runtime
// reads them. nvidia-ctk writes YAML, plugins JSON; yaml-cpp reads both.
#ifndef TOPOLOGY_PLUGIN_YAML_CDI_NAMES_H_
#define TOPOLOGY_PLUGIN_YAML_CDI_NAMES_H_

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

namespace topology::plugin {

// The "<kind>=<name>" names one spec's text defines; INVALID_ARGUMENT when
// it is not YAML (or JSON) or has no kind or no device list.
StatusOr<std::set<std::string>> CdiNamesOf(std::string_view text);

// The names defined in `dirs` (missing directories define none). A file
// that cannot be read or parsed (over 16 MiB, not YAML, no kind) defines
// none and adds a warning naming it, as a runtime skips it.
std::set<std::string> CdiDefinedNames(
    const std::vector<std::filesystem::path>& dirs,
    std::vector<std::string>* warnings);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_YAML_CDI_NAMES_H_
