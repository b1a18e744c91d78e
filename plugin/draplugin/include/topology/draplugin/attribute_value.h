// One typed device attribute value of resource.k8s.io/v1, as a slice
// publishes it and device metadata repeats it.
#ifndef TOPOLOGY_DRAPLUGIN_ATTRIBUTE_VALUE_H_
#define TOPOLOGY_DRAPLUGIN_ATTRIBUTE_VALUE_H_

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace topology::draplugin {

// One typed value. Lists go out in the list form of KEP-5491 (gate
// DRAListTypeAttributes): {"ints": [...]}, {"bools": [...]},
// {"strings": [...]} or, with `version`, {"versions": [...]}.
struct AttributeValue {
  std::variant<std::string, int64_t, bool, std::vector<int64_t>,
               std::vector<bool>, std::vector<std::string>>
      value = {};
  bool version = false;  // strings that are semantic versions
  friend bool operator==(const AttributeValue&,
                         const AttributeValue&) = default;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_ATTRIBUTE_VALUE_H_
