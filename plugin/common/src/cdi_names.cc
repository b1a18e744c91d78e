#include <system_error>

#include "topology/common/cdi.h"

// A runtime reads specs as YAML (nvidia-ctk writes YAML, plugins JSON);
// yaml-cpp reads both.

#include <yaml-cpp/yaml.h>

#include "topology/common/yaml_load.h"
#include "topology/text_file.h"

namespace topology::common {

StatusOr<std::set<std::string>> CdiNamesOf(std::string_view text) {
  std::set<std::string> names;
  auto loaded = yaml::Load(text, "spec");
  if (!loaded.ok()) return loaded.status();
  try {
    const YAML::Node& spec = *loaded;
    const YAML::Node kind = spec.IsMap() ? spec["kind"] : YAML::Node();
    const YAML::Node devices = spec.IsMap() ? spec["devices"] : YAML::Node();
    if (!kind || !kind.IsScalar() || !devices || !devices.IsSequence()) {
      return InvalidArgumentError("no kind or no device list");
    }
    for (const YAML::Node& device : devices) {
      const YAML::Node name = device.IsMap() ? device["name"] : YAML::Node();
      if (name && name.IsScalar()) {
        names.insert(kind.Scalar() + "=" + name.Scalar());
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgumentError(e.msg.substr(0, 200));
  }
  return names;
}

std::set<std::string> CdiDefinedNames(
    const std::vector<std::filesystem::path>& dirs,
    std::vector<std::string>* warnings) {
  std::set<std::string> names;
  for (const std::filesystem::path& dir : dirs) {
    std::error_code error;
    std::filesystem::directory_iterator it(dir, error);
    if (error) continue;
    for (const auto& entry : it) {
      const std::string extension = entry.path().extension().string();
      if (extension != ".json" && extension != ".yaml" && extension != ".yml")
        continue;
      if (!entry.is_regular_file(error)) continue;
      auto text = ReadTextFile(entry.path().string(), size_t{16} << 20);
      if (!text.ok()) {
        warnings->push_back("CDI spec " + text.status().message());
        continue;
      }
      auto defined = CdiNamesOf(*text);
      if (!defined.ok()) {
        warnings->push_back("CDI spec " + entry.path().string() + ": " +
                            defined.status().message());
        continue;
      }
      names.merge(*defined);
    }
  }
  return names;
}

}  // namespace topology::common
