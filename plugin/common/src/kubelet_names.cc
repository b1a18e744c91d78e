#include "topology/common/kubelet_names.h"

#include <string>

#include "topology/common/k8s_names.h"

namespace topology::kubelet {
namespace {

Status Invalid(std::string_view name, std::string_view why) {
  return InvalidArgumentError("the ResourceName \"" + std::string(name) +
                              "\" is invalid: " + std::string(why));
}

}  // namespace

Status ValidateResourceName(std::string_view name) {
  if (name.find('/') == std::string_view::npos) {
    return Invalid(name,
                   "an extended resource name needs a domain prefix "
                   "(\"example.com/name\")");
  }
  if (name.find("kubernetes.io/") != std::string_view::npos) {
    return Invalid(name, "the kubernetes.io domain is reserved");
  }
  if (name.starts_with("requests.")) {
    return Invalid(name, "it must not start with \"requests.\"");
  }
  // The kubelet checks "requests." + name as a qualified name.
  const std::string qualified = "requests." + std::string(name);
  const size_t slash = qualified.find('/');
  if (qualified.find('/', slash + 1) != std::string::npos) {
    return Invalid(name, "it must contain exactly one '/'");
  }
  if (!k8s::IsDns1123Subdomain(std::string_view{qualified}.substr(0, slash))) {
    return Invalid(name,
                   "the prefix must be a lower-case DNS subdomain of at most "
                   "244 characters");
  }
  if (!k8s::IsQualifiedNamePart(
          std::string_view{qualified}.substr(slash + 1))) {
    return Invalid(name,
                   "the name must be 1-63 characters of [A-Za-z0-9-_.], "
                   "starting and ending alphanumeric");
  }
  return OkStatus();
}

Status ValidateEndpointName(std::string_view endpoint) {
  if (endpoint.empty()) return InvalidArgumentError("the endpoint is empty");
  if (endpoint.find('/') != std::string_view::npos || endpoint == "." ||
      endpoint == "..") {
    return InvalidArgumentError("endpoint \"" + std::string(endpoint) +
                                "\" must be a file name inside the device "
                                "plugin directory");
  }
  if (endpoint == kKubeletSocket || endpoint == kKubeletCheckpoint) {
    return InvalidArgumentError("endpoint \"" + std::string(endpoint) +
                                "\" is reserved for the kubelet");
  }
  return OkStatus();
}

bool IsExtendedResourceName(std::string_view name) {
  // Not native (the kubelet's IsNativeResource: no domain, or one in
  // kubernetes.io), and not a quota's "requests." form.
  return name.find('/') != std::string_view::npos &&
         name.find("kubernetes.io/") == std::string_view::npos &&
         !name.starts_with("requests.");
}

}  // namespace topology::kubelet
