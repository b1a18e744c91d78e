// A check yaml-cpp does not make: a mapping that gives one key twice. The
// API server refuses such an object ("mapping key already defined") and
// YAML 1.2 forbids it; yaml-cpp keeps both entries and a lookup silently
// takes the first. Shared by the readers of the plugin's configuration and
// of Pod manifests.
#ifndef TOPOLOGY_PLUGIN_YAML_YAML_KEYS_H_
#define TOPOLOGY_PLUGIN_YAML_YAML_KEYS_H_

#include <string_view>

#include <yaml-cpp/yaml.h>

#include "topology/status.h"

namespace topology::plugin {

// OK when no mapping in `node` (at any depth) gives a key twice; else
// INVALID_ARGUMENT "<where>: <path>: key \"k\" is given twice (lines a and
// b)".
Status CheckNoDuplicateKeys(const YAML::Node& node, std::string_view where);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_YAML_YAML_KEYS_H_
