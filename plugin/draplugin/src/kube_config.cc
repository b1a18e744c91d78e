#include "topology/draplugin/kube_config.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <utility>
#include <vector>

#include <arpa/inet.h>
#include <yaml-cpp/yaml.h>

#include "topology/common/safe_file.h"
#include "topology/common/yaml_load.h"

namespace topology::draplugin {
namespace {

// A kubeconfig, a certificate or a token of this size is not one.
constexpr size_t kMaxFileBytes = size_t{4} << 20;

constexpr char kServiceAccountDir[] =
    "var/run/secrets/kubernetes.io/serviceaccount";

// The entry of `list` (clusters, users, contexts) named `name`: its
// `field` map, or an undefined node.
YAML::Node Named(const YAML::Node& list, const std::string& name,
                 const char* field) {
  if (!list || !list.IsSequence()) return YAML::Node(YAML::NodeType::Undefined);
  for (const YAML::Node& entry : list) {
    if (entry.IsMap() && entry["name"] && entry["name"].IsScalar() &&
        entry["name"].as<std::string>() == name) {
      return entry[field];
    }
  }
  return YAML::Node(YAML::NodeType::Undefined);
}

std::optional<std::string> Scalar(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap()) return std::nullopt;
  const YAML::Node value = map[key];
  if (!value || !value.IsScalar()) return std::nullopt;
  return value.as<std::string>();
}

}  // namespace

StatusOr<std::string> DecodeBase64(std::string_view text) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  uint32_t bits = 0;
  int count = 0;
  size_t padding = 0;
  for (char c : text) {
    int value = -1;
    if (c >= 'A' && c <= 'Z') value = c - 'A';
    if (c >= 'a' && c <= 'z') value = c - 'a' + 26;
    if (c >= '0' && c <= '9') value = c - '0' + 52;
    if (c == '+') value = 62;
    if (c == '/') value = 63;
    if (c == '\n' || c == '\r' || c == ' ') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    if (value < 0 || padding > 0) {
      return InvalidArgumentError("not base64");
    }
    bits = (bits << 6) | static_cast<uint32_t>(value);
    if (++count == 4) {
      out.push_back(static_cast<char>((bits >> 16) & 0xff));
      out.push_back(static_cast<char>((bits >> 8) & 0xff));
      out.push_back(static_cast<char>(bits & 0xff));
      bits = 0;
      count = 0;
    }
  }
  if (count == 1 || padding > 2) return InvalidArgumentError("not base64");
  if (count == 2) out.push_back(static_cast<char>((bits >> 4) & 0xff));
  if (count == 3) {
    out.push_back(static_cast<char>((bits >> 10) & 0xff));
    out.push_back(static_cast<char>((bits >> 2) & 0xff));
  }
  return out;
}

StatusOr<std::string> BearerToken(std::string_view text,
                                  std::string_view where) {
  // strings.TrimSpace's ASCII white space; its Unicode spaces (U+0085,
  // U+00A0) are left, as no token contains them.
  constexpr std::string_view kSpace = " \t\n\v\f\r";
  const size_t first = text.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return std::string();
  text = text.substr(first, text.find_last_not_of(kSpace) - first + 1);
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", c);
      return InvalidArgumentError(
          std::string(where) + ": the token has a control character (" + code +
          ") at byte " + std::to_string(first + i) +
          "; it cannot be sent as an HTTP header");
    }
  }
  return std::string(text);
}

std::string EncodeBase64(std::string_view bytes) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t bits = 0;
    for (size_t j = 0; j < 3; ++j) {
      bits =
          (bits << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0U);
    }
    for (size_t j = 0; j < 4; ++j) {
      out.push_back(j <= n ? kAlphabet[(bits >> (18 - 6 * j)) & 0x3f] : '=');
    }
  }
  return out;
}

namespace {

// The bytes of an IPv4 or IPv6 address (4 or 16), or nothing.
std::optional<std::vector<unsigned char>> IpBytes(const std::string& text) {
  unsigned char buffer[16];
  if (inet_pton(AF_INET, text.c_str(), buffer) == 1) {
    return std::vector<unsigned char>(buffer, buffer + 4);
  }
  if (inet_pton(AF_INET6, text.c_str(), buffer) == 1) {
    return std::vector<unsigned char>(buffer, buffer + 16);
  }
  return std::nullopt;
}

bool IsLoopback(const std::string& host) {
  if (host == "localhost") return true;
  const auto ip = IpBytes(host);
  if (!ip) return false;
  if (ip->size() == 4) return (*ip)[0] == 127;
  static constexpr unsigned char kV6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0,
                                                    0, 0, 0, 0, 0, 0, 0, 1};
  return std::equal(ip->begin(), ip->end(), kV6Loopback);
}

// "10.0.0.0/8" holds `ip`.
bool InCidr(const std::string& cidr, const std::vector<unsigned char>& ip) {
  const size_t slash = cidr.find('/');
  const auto net = IpBytes(cidr.substr(0, slash));
  if (!net || net->size() != ip.size()) return false;
  const std::string bits_text = cidr.substr(slash + 1);
  if (bits_text.empty() || bits_text.size() > 3 ||
      bits_text.find_first_not_of("0123456789") != std::string::npos) {
    return false;
  }
  const size_t bits = std::stoul(bits_text);
  if (bits > ip.size() * 8) return false;
  for (size_t i = 0; i < bits; ++i) {
    const unsigned char mask = static_cast<unsigned char>(0x80 >> (i % 8));
    if (((*net)[i / 8] & mask) != (ip[i / 8] & mask)) return false;
  }
  return true;
}

std::string Lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

std::string Trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

// host[:port] or [v6][:port]: the host (brackets removed) and the port
// text (empty when none); nullopt when malformed.
std::optional<std::pair<std::string, std::string>> SplitHostPort(
    std::string_view authority) {
  if (authority.starts_with('[')) {
    const size_t close = authority.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    const std::string_view rest = authority.substr(close + 1);
    if (!rest.empty() && !rest.starts_with(':')) return std::nullopt;
    return std::make_pair(std::string(authority.substr(1, close - 1)),
                          std::string(rest.empty() ? rest : rest.substr(1)));
  }
  const size_t colon = authority.rfind(':');
  if (colon == std::string_view::npos) {
    return std::make_pair(std::string(authority), std::string());
  }
  if (authority.find(':') != colon) return std::nullopt;  // a bare IPv6
  return std::make_pair(std::string(authority.substr(0, colon)),
                        std::string(authority.substr(colon + 1)));
}

std::optional<uint16_t> Port(const std::string& text) {
  if (text.empty() || text.size() > 5 ||
      text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const unsigned long port = std::stoul(text);
  if (port == 0 || port > 65535) return std::nullopt;
  return static_cast<uint16_t>(port);
}

bool IsHostName(const std::string& host) {
  if (host.empty() || host.size() > 253) return false;
  return host.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
             "0123456789-.") == std::string::npos;
}

// NO_PROXY exempts `server` (Go's httpproxy rules).
bool Exempt(const ServerAddress& server, std::string_view no_proxy) {
  const std::string host = Lower(server.host);
  const auto ip = IpBytes(host);
  size_t start = 0;
  while (start <= no_proxy.size()) {
    size_t comma = no_proxy.find(',', start);
    if (comma == std::string_view::npos) comma = no_proxy.size();
    std::string entry = Lower(Trim(no_proxy.substr(start, comma - start)));
    start = comma + 1;
    if (entry.empty()) continue;
    if (entry == "*") return true;
    if (entry.find('/') != std::string::npos) {
      if (ip && InCidr(entry, *ip)) return true;
      continue;
    }
    if (const auto entry_ip = IpBytes(entry)) {
      if (ip && *entry_ip == *ip) return true;
      continue;
    }
    std::string name = entry;
    if (auto split = SplitHostPort(entry); split && !split->second.empty()) {
      const auto port = Port(split->second);
      if (!port || *port != server.port) continue;
      name = split->first;
    }
    if (auto entry_ip = IpBytes(name)) {  // "[::1]:443", "10.0.0.1:443"
      if (ip && *entry_ip == *ip) return true;
      continue;
    }
    if (name.starts_with("*.")) name = name.substr(1);
    if (name.empty()) continue;
    const bool subdomains_only = name.front() == '.';
    const std::string suffix = subdomains_only ? name : "." + name;
    if (host.ends_with(suffix) ||
        (!subdomains_only && host == suffix.substr(1))) {
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<ServerAddress> ParseServerUrl(std::string_view url) {
  const auto invalid = [&](std::string_view why) {
    return InvalidArgumentError(
        "server \"" + std::string(url) +
        "\" is not an https:// URL: " + std::string(why));
  };
  constexpr std::string_view kScheme = "https://";
  if (url.size() < kScheme.size() ||
      Lower(url.substr(0, kScheme.size())) != kScheme) {
    return invalid("another scheme");
  }
  std::string_view rest = url.substr(kScheme.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return invalid("a query or fragment");
  }
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string path(slash == std::string_view::npos ? std::string_view()
                                                   : rest.substr(slash));
  while (!path.empty() && path.back() == '/') path.pop_back();
  // The path prefixes every request line: printable ASCII without spaces.
  if (std::any_of(path.begin(), path.end(), [](char c) {
        const auto byte = static_cast<unsigned char>(c);
        return byte <= ' ' || byte >= 0x7f;
      })) {
    return invalid("a space or control character in the path");
  }
  if (authority.find('@') != std::string_view::npos) {
    return invalid("user info in the URL");
  }
  const auto split = SplitHostPort(authority);
  if (!split || split->first.empty()) return invalid("no host");
  ServerAddress address;
  address.host = split->first;
  address.path = std::move(path);
  if (!IsHostName(address.host) && !IpBytes(address.host)) {
    return invalid("a malformed host");
  }
  if (IpBytes(address.host) && IpBytes(address.host)->size() == 16 &&
      !authority.starts_with('[')) {
    return invalid("an IPv6 address without brackets");
  }
  if (!split->second.empty()) {
    const auto port = Port(split->second);
    if (!port) return invalid("a port that is not 1-65535");
    address.port = *port;
  } else if (authority.ends_with(':')) {
    return invalid("an empty port");
  }
  return address;
}

StatusOr<std::optional<ProxyAddress>> ProxyFor(const ServerAddress& server,
                                               std::string_view https_proxy,
                                               std::string_view no_proxy) {
  const std::string value = Trim(https_proxy);
  if (value.empty() || IsLoopback(Lower(server.host)) ||
      Exempt(server, no_proxy)) {
    return std::optional<ProxyAddress>();
  }
  const auto invalid = [&](std::string_view why) {
    return InvalidArgumentError("HTTPS_PROXY \"" + value +
                                "\": " + std::string(why));
  };
  std::string_view rest = value;
  if (const size_t scheme = rest.find("://"); scheme != std::string::npos) {
    if (Lower(rest.substr(0, scheme)) != "http") {
      return invalid("only http:// proxies are supported");
    }
    rest = rest.substr(scheme + 3);
  }
  rest = rest.substr(0, rest.find('/'));
  ProxyAddress proxy;
  if (const size_t at = rest.rfind('@'); at != std::string_view::npos) {
    proxy.authorization = "Basic " + EncodeBase64(rest.substr(0, at));
    rest = rest.substr(at + 1);
  }
  const auto split = SplitHostPort(rest);
  if (!split || split->first.empty() ||
      (!IsHostName(split->first) && !IpBytes(split->first))) {
    return invalid("no host");
  }
  proxy.host = split->first;
  if (!split->second.empty()) {
    const auto port = Port(split->second);
    if (!port) return invalid("a port that is not 1-65535");
    proxy.port = *port;
  }
  return std::optional<ProxyAddress>(std::move(proxy));
}

StatusOr<std::optional<ProxyAddress>> ProxyFromEnvironment(
    const ServerAddress& server) {
  const auto first = [](const char* upper, const char* lower) {
    const char* value = std::getenv(upper);
    if (value == nullptr || *value == '\0') value = std::getenv(lower);
    return std::string(value == nullptr ? "" : value);
  };
  return ProxyFor(server, first("HTTPS_PROXY", "https_proxy"),
                  first("NO_PROXY", "no_proxy"));
}

StatusOr<KubeConfig> ParseKubeConfig(std::string_view yaml,
                                     const std::filesystem::path& base_dir,
                                     std::string_view source) {
  const std::string where(source);
  const auto invalid = [&](const std::string& what) {
    return InvalidArgumentError(where + ": " + what);
  };
  auto loaded = yaml::Load(yaml, where);
  if (!loaded.ok()) return loaded.status();
  const YAML::Node doc = *loaded;
  if (!doc.IsMap()) return invalid("not a kubeconfig (no mapping)");
  try {
    std::string context_name = Scalar(doc, "current-context").value_or("");
    const YAML::Node contexts = doc["contexts"];
    if (context_name.empty() && contexts && contexts.IsSequence() &&
        contexts.size() == 1) {
      context_name = Scalar(contexts[0], "name").value_or("");
    }
    if (context_name.empty()) return invalid("no current-context");
    const YAML::Node context = Named(contexts, context_name, "context");
    if (!context || !context.IsMap()) {
      return invalid("context \"" + context_name + "\" is not defined");
    }
    const std::string cluster_name = Scalar(context, "cluster").value_or("");
    const std::string user_name = Scalar(context, "user").value_or("");
    const YAML::Node cluster = Named(doc["clusters"], cluster_name, "cluster");
    if (!cluster || !cluster.IsMap()) {
      return invalid("cluster \"" + cluster_name + "\" of context \"" +
                     context_name + "\" is not defined");
    }
    KubeConfig config;
    config.source = where + ", context " + context_name;
    const auto read = [&](const std::string& key,
                          const std::string& file) -> StatusOr<std::string> {
      std::filesystem::path path(file);
      if (path.is_relative()) path = base_dir / path;
      auto text = files::ReadMountedFile(path, kMaxFileBytes);
      if (!text.ok()) {
        return invalid(key + ": " + path.string() + ": " +
                       text.status().message());
      }
      return text;
    };
    // One of <key>-data (base64) or <key> (a file); empty when neither.
    const auto material = [&](const YAML::Node& map,
                              const std::string& key) -> StatusOr<std::string> {
      if (auto data = Scalar(map, (key + "-data").c_str())) {
        auto decoded = DecodeBase64(*data);
        if (!decoded.ok()) return invalid(key + "-data is not base64");
        return decoded;
      }
      if (auto file = Scalar(map, key.c_str())) return read(key, *file);
      return std::string();
    };

    config.server = Scalar(cluster, "server").value_or("");
    while (!config.server.empty() && config.server.back() == '/') {
      config.server.pop_back();
    }
    if (auto address = ParseServerUrl(config.server); !address.ok()) {
      return invalid("cluster \"" + cluster_name +
                     "\": " + address.status().message());
    }
    if (Scalar(cluster, "insecure-skip-tls-verify").value_or("false") ==
        "true") {
      return invalid("cluster \"" + cluster_name +
                     "\": insecure-skip-tls-verify is not supported (give "
                     "certificate-authority)");
    }
    auto ca = material(cluster, "certificate-authority");
    if (!ca.ok()) return ca.status();
    config.ca_pem = std::move(*ca);

    const YAML::Node user = Named(doc["users"], user_name, "user");
    if (!user_name.empty() && !user) {
      return invalid("user \"" + user_name + "\" of context \"" + context_name +
                     "\" is not defined");
    }
    if (user && user.IsMap()) {
      if (user["exec"] || user["auth-provider"]) {
        return invalid("user \"" + user_name +
                       "\": exec and auth-provider credentials are not "
                       "supported (give a token or a client certificate)");
      }
      auto inline_token = BearerToken(Scalar(user, "token").value_or(""),
                                      where + ": user \"" + user_name + "\"");
      if (!inline_token.ok()) return inline_token.status();
      config.token = std::move(*inline_token);
      if (auto file = Scalar(user, "tokenFile")) {
        std::filesystem::path path(*file);
        config.token_file = path.is_relative() ? base_dir / path : path;
        auto token = read("tokenFile", config.token_file.string());
        if (!token.ok()) return token.status();
        auto checked = BearerToken(
            *token, where + ": tokenFile " + config.token_file.string());
        if (!checked.ok()) return checked.status();
      }
      auto cert = material(user, "client-certificate");
      if (!cert.ok()) return cert.status();
      auto key = material(user, "client-key");
      if (!key.ok()) return key.status();
      if (cert->empty() != key->empty()) {
        return invalid("user \"" + user_name +
                       "\": a client certificate needs its key and a key "
                       "its certificate");
      }
      config.client_certificate_pem = std::move(*cert);
      config.client_key_pem = std::move(*key);
    }
    return config;
  } catch (const std::exception& e) {
    return invalid(std::string("unreadable: ") + e.what());
  }
}

StatusOr<KubeConfig> LoadKubeConfig(const std::filesystem::path& path) {
  auto text = files::ReadMountedFile(path, kMaxFileBytes);
  if (!text.ok()) {
    return Status(text.status().code(), "kubeconfig " + path.string() + ": " +
                                            text.status().message());
  }
  return ParseKubeConfig(*text, path.parent_path(),
                         "kubeconfig " + path.string());
}

StatusOr<KubeConfig> InClusterConfig(const std::filesystem::path& root) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (host == nullptr || *host == '\0' || port == nullptr || *port == '\0') {
    return FailedPreconditionError(
        "not in a cluster: KUBERNETES_SERVICE_HOST and "
        "KUBERNETES_SERVICE_PORT are not set (give --kubeconfig)");
  }
  KubeConfig config;
  config.source = "in-cluster";
  const std::string h(host);
  config.server = "https://" +
                  (h.find(':') != std::string::npos ? "[" + h + "]" : h) + ":" +
                  port;
  if (auto address = ParseServerUrl(config.server); !address.ok()) {
    return FailedPreconditionError(
        "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT: " +
        address.status().message());
  }
  const std::filesystem::path dir = root / kServiceAccountDir;
  config.token_file = dir / "token";
  auto token = files::ReadMountedFile(config.token_file, kMaxFileBytes);
  if (!token.ok()) {
    return FailedPreconditionError("in-cluster token " +
                                   config.token_file.string() + ": " +
                                   token.status().message());
  }
  if (auto checked =
          BearerToken(*token, "in-cluster token " + config.token_file.string());
      !checked.ok()) {
    return FailedPreconditionError(checked.status().message());
  }
  auto ca = files::ReadMountedFile(dir / "ca.crt", kMaxFileBytes);
  if (!ca.ok()) {
    return FailedPreconditionError("in-cluster CA " +
                                   (dir / "ca.crt").string() + ": " +
                                   ca.status().message());
  }
  config.ca_pem = std::move(*ca);
  return config;
}

}  // namespace topology::draplugin
