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
      // The slice's first device, to say where it is (read with checks:
      // the body is ours, but never trusted).
      std::string first;
      const auto slice = nlohmann::json::parse(body, nullptr, false);
      const nlohmann::json* listed = nullptr;
      if (slice.is_object() && slice.contains("spec") &&
          slice.at("spec").is_object() &&
          slice.at("spec").contains("devices")) {
        listed = &slice.at("spec").at("devices");
      }
      if (listed != nullptr && listed->is_array() && !listed->empty() &&
          listed->at(0).is_object() && listed->at(0).contains("name") &&
          listed->at(0).at("name").is_string()) {
        first = ", from device " + listed->at(0).at("name").get<std::string>();
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
