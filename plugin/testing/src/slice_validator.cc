#include "topology/testing/slice_validator.h"

#include <nlohmann/json.hpp>

#include "topology/draplugin/slice_validation.h"

namespace topology::testing {

Status ValidatePublishedSlices(
    const std::string& driver, const std::string& node,
    const std::vector<draplugin::SliceDevice>& devices) {
  auto bodies = draplugin::NewPoolSliceBodies(driver, node, node, devices);
  if (!bodies.ok()) return bodies.status();
  for (size_t i = 0; i < bodies->size(); ++i) {
    const std::string& body = (*bodies)[i];
    if (Status valid = draplugin::ValidateResourceSlice(body); !valid.ok()) {
      std::string first;
      const auto slice = nlohmann::json::parse(body, nullptr, false);
      if (slice.is_object()) {
        const auto& listed = slice["spec"]["devices"];
        if (listed.is_array() && !listed.empty() &&
            listed[0].contains("name") && listed[0]["name"].is_string()) {
          first = ", from device " + listed[0]["name"].get<std::string>();
        }
      }
      return InvalidArgumentError("resourceslice " + std::to_string(i + 1) +
                                  " of " + std::to_string(bodies->size()) +
                                  first + ": " + valid.message());
    }
  }
  return OkStatus();
}

Status ValidateResourceSlice(std::string_view slice_json) {
  return draplugin::ValidateResourceSlice(slice_json);
}

}  // namespace topology::testing
