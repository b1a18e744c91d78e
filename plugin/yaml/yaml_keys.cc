#include "yaml_keys.h"

#include <map>
#include <string>

namespace topology::plugin {
namespace {

// Scalar keys are compared by their text; a complex key (a mapping used as
// a key) is left alone, as no reader here looks one up.
Status Check(const YAML::Node& node, const std::string& path,
             std::string_view where) {
  if (node.IsMap()) {
    std::map<std::string, int> seen;  // key -> line (from 1)
    for (const auto& entry : node) {
      const std::string child =
          entry.first.IsScalar()
              ? (path.empty() ? "" : path + ".") + entry.first.Scalar()
              : path;
      if (entry.first.IsScalar()) {
        const int line = entry.first.Mark().line + 1;
        const auto [it, inserted] = seen.emplace(entry.first.Scalar(), line);
        if (!inserted) {
          const std::string shown = entry.first.Scalar().substr(0, 64);
          return InvalidArgumentError(
              std::string(where) + ": " + (path.empty() ? "(top)" : path) +
              ": key \"" + shown + "\" is given twice (lines " +
              std::to_string(it->second) + " and " + std::to_string(line) +
              ")");
        }
      }
      Status status = Check(entry.second, child, where);
      if (!status.ok()) return status;
    }
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) {
      Status status =
          Check(node[i], path + "[" + std::to_string(i) + "]", where);
      if (!status.ok()) return status;
    }
  }
  return OkStatus();
}

}  // namespace

Status CheckNoDuplicateKeys(const YAML::Node& node, std::string_view where) {
  return Check(node, "", where);
}

}  // namespace topology::plugin
