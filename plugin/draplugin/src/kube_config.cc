#include "topology/draplugin/kube_config.h"

#include <cstdlib>
#include <exception>
#include <optional>

#include <yaml-cpp/yaml.h>

#include "safe_file.h"

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

StatusOr<KubeConfig> ParseKubeConfig(std::string_view yaml,
                                     const std::filesystem::path& base_dir,
                                     std::string_view source) {
  const std::string where(source);
  const auto invalid = [&](const std::string& what) {
    return InvalidArgumentError(where + ": " + what);
  };
  YAML::Node doc;
  try {
    doc = YAML::Load(std::string(yaml));
  } catch (const std::exception& e) {
    return invalid(std::string("not YAML: ") + e.what());
  }
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
      auto text = files::ReadRegularFile(path, kMaxFileBytes);
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
    if (!config.server.starts_with("https://") || config.server.size() <= 8) {
      return invalid("cluster \"" + cluster_name + "\": server \"" +
                     config.server + "\" is not an https:// URL");
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
      config.token = Scalar(user, "token").value_or("");
      if (auto file = Scalar(user, "tokenFile")) {
        std::filesystem::path path(*file);
        config.token_file = path.is_relative() ? base_dir / path : path;
        auto token = read("tokenFile", config.token_file.string());
        if (!token.ok()) return token.status();
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
  auto text = files::ReadRegularFile(path, kMaxFileBytes);
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
  const std::filesystem::path dir = root / kServiceAccountDir;
  config.token_file = dir / "token";
  auto token = files::ReadRegularFile(config.token_file, kMaxFileBytes);
  if (!token.ok()) {
    return FailedPreconditionError("in-cluster token " +
                                   config.token_file.string() + ": " +
                                   token.status().message());
  }
  auto ca = files::ReadRegularFile(dir / "ca.crt", kMaxFileBytes);
  if (!ca.ok()) {
    return FailedPreconditionError("in-cluster CA " +
                                   (dir / "ca.crt").string() + ": " +
                                   ca.status().message());
  }
  config.ca_pem = std::move(*ca);
  return config;
}

}  // namespace topology::draplugin
