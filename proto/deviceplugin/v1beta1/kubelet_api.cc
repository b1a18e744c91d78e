#include "deviceplugin/v1beta1/kubelet_api.h"

#include <string>

namespace topology::kubelet {
namespace {

bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool IsAlnum(char c) { return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z'); }

// The name part of a qualified name: 1-63 characters, alphanumeric at both
// ends, [-_.A-Za-z0-9] inside.
bool IsQualifiedNamePart(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  if (!IsAlnum(text.front()) || !IsAlnum(text.back())) return false;
  for (char c : text) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

Status Invalid(std::string_view name, std::string_view why) {
  return InvalidArgumentError("the ResourceName \"" + std::string(name) +
                              "\" is invalid: " + std::string(why));
}

}  // namespace

bool IsDnsSubdomain(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('.', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view label = text.substr(start, end - start);
    if (label.empty() || !IsLowerAlnum(label.front()) ||
        !IsLowerAlnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') return false;
    }
    start = end + 1;
  }
  return true;
}

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
  if (!IsDnsSubdomain(std::string_view{qualified}.substr(0, slash))) {
    return Invalid(name,
                   "the prefix must be a lower-case DNS subdomain of at most "
                   "244 characters");
  }
  if (!IsQualifiedNamePart(std::string_view{qualified}.substr(slash + 1))) {
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
