// The API machinery's name and value rules (k8s.io/apimachinery
// pkg/util/validation: IsDNS1123Label, IsDNS1123Subdomain,
// IsQualifiedName, IsValidLabelValue, IsCIdentifier; semver 2.0.0 as the
// resource API checks a version attribute), written once for every part
// of the project that names Kubernetes objects or checks what the API
// server would refuse. Header-only, pure functions.
#ifndef TOPOLOGY_COMMON_K8S_NAMES_H_
#define TOPOLOGY_COMMON_K8S_NAMES_H_

#include <cstddef>
#include <string_view>

namespace topology::k8s {

inline bool IsLowerAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}
inline bool IsAlnum(char c) {
  return IsLowerAlnum(c) || (c >= 'A' && c <= 'Z');
}
inline bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters.
inline bool IsDns1123Label(std::string_view text) {
  if (text.empty() || text.size() > 63) return false;
  if (!IsLowerAlnum(text.front()) || !IsLowerAlnum(text.back())) return false;
  for (char c : text) {
    if (!IsLowerAlnum(c) && c != '-') return false;
  }
  return true;
}

// An object UID as this project accepts one from outside (a claim's, a
// Node's): the API server's are RFC 4122 UUIDs; letters, digits and '-',
// 1 to 128 characters, so that it can name a file and is never a path or
// a megabyte copied into every object that refers to it.
inline bool IsUid(std::string_view text) {
  if (text.empty() || text.size() > 128) return false;
  for (char c : text) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}

// Dot-separated DNS-1123 labels, at most 253 characters in all.
inline bool IsDns1123Subdomain(std::string_view text) {
  if (text.empty() || text.size() > 253) return false;
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    const std::string_view label = text.substr(start, dot - start);
    if (label.empty() || !IsLowerAlnum(label.front()) ||
        !IsLowerAlnum(label.back())) {
      return false;
    }
    for (char c : label) {
      if (!IsLowerAlnum(c) && c != '-') return false;
    }
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

// ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9], at most `max` characters,
// not empty: the name part of a qualified name, a non-empty label value.
inline bool IsQualifiedNamePart(std::string_view text, size_t max = 63) {
  if (text.empty() || text.size() > max) return false;
  if (!IsAlnum(text.front()) || !IsAlnum(text.back())) return false;
  for (char c : text) {
    if (!IsAlnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// "[prefix/]name": an optional DNS-1123 subdomain prefix and a name part
// (IsQualifiedName: label keys, taint keys).
inline bool IsQualifiedName(std::string_view text) {
  const size_t slash = text.find('/');
  if (slash == std::string_view::npos) return IsQualifiedNamePart(text);
  const std::string_view prefix = text.substr(0, slash);
  const std::string_view name = text.substr(slash + 1);
  return IsDns1123Subdomain(prefix) && IsQualifiedNamePart(name);
}

// Empty, or a name part of at most 63 characters (IsValidLabelValue).
inline bool IsLabelValue(std::string_view text) {
  return text.empty() || IsQualifiedNamePart(text);
}

// [A-Za-z_][A-Za-z0-9_]* (IsCIdentifier), without a length bound.
inline bool IsCIdentifier(std::string_view text) {
  if (text.empty()) return false;
  if (!IsAlnum(text.front()) && text.front() != '_') return false;
  if (IsDigit(text.front())) return false;
  for (char c : text) {
    if (!IsAlnum(c) && c != '_') return false;
  }
  return true;
}

namespace internal {
// (0|[1-9][0-9]*)
inline bool IsNumericIdentifier(std::string_view part) {
  if (part.empty()) return false;
  for (char c : part) {
    if (!IsDigit(c)) return false;
  }
  return part.size() == 1 || part.front() != '0';
}
// (0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)
inline bool IsPreReleaseIdentifier(std::string_view part) {
  if (part.empty()) return false;
  bool non_digit = false;
  for (char c : part) {
    if (!IsAlnum(c) && c != '-') return false;
    if (!IsDigit(c)) non_digit = true;
  }
  return non_digit || IsNumericIdentifier(part);
}
// [0-9a-zA-Z-]+
inline bool IsBuildIdentifier(std::string_view part) {
  if (part.empty()) return false;
  for (char c : part) {
    if (!IsAlnum(c) && c != '-') return false;
  }
  return true;
}
template <typename Check>
bool AllDotted(std::string_view text, const Check& check) {
  size_t start = 0;
  while (true) {
    const size_t dot = text.find('.', start);
    if (!check(text.substr(start, dot - start))) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}
}  // namespace internal

// Semantic Versioning 2.0.0 (the resource API's semverRe): MAJOR.MINOR.PATCH
// with optional -prerelease and +build.
inline bool IsSemver(std::string_view text) {
  const size_t plus = text.find('+');
  if (plus != std::string_view::npos &&
      !internal::AllDotted(text.substr(plus + 1),
                           internal::IsBuildIdentifier)) {
    return false;
  }
  text = text.substr(0, plus);
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos &&
      !internal::AllDotted(text.substr(dash + 1),
                           internal::IsPreReleaseIdentifier)) {
    return false;
  }
  const std::string_view core = text.substr(0, dash);
  size_t parts = 0;
  const bool numeric = internal::AllDotted(core, [&](std::string_view part) {
    ++parts;
    return internal::IsNumericIdentifier(part);
  });
  return numeric && parts == 3;
}

}  // namespace topology::k8s

#endif  // TOPOLOGY_COMMON_K8S_NAMES_H_
