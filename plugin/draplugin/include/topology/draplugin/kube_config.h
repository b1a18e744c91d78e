// How to reach the Kubernetes API server: from a kubeconfig file (its
// current context's cluster and user) or from a pod's in-cluster
// credentials. Only what a node agent needs: an https server, a CA (file or
// data; else the system's), and a bearer token (inline or a file, read
// again at every request, as projected tokens rotate) or a client
// certificate and key.
#ifndef TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_
#define TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "topology/status.h"

namespace topology::draplugin {

struct KubeConfig {
  std::string server = {};  // https://host[:port], no trailing slash
  std::string ca_pem = {};  // empty: the system's CAs
  std::string token = {};
  std::filesystem::path token_file = {};  // read at every request
  std::string client_certificate_pem = {};
  std::string client_key_pem = {};
  // Where it came from, for messages ("kubeconfig /root/.kube/config,
  // context ctx", "in-cluster").
  std::string source = {};
};

// The current context of kubeconfig text. Relative file names are taken
// from `base_dir` (the kubeconfig's directory, as kubectl does); files are
// read without following a link in the last component and bounded.
// INVALID_ARGUMENT naming `source` and the key for anything it cannot use:
// not YAML, no current context, a context naming a missing cluster or
// user, a server that is not https, undecodable data, exec and
// auth-provider users, insecure-skip-tls-verify, a certificate without its
// key.
StatusOr<KubeConfig> ParseKubeConfig(std::string_view yaml,
                                     const std::filesystem::path& base_dir,
                                     std::string_view source);
StatusOr<KubeConfig> LoadKubeConfig(const std::filesystem::path& path);

// In-cluster: KUBERNETES_SERVICE_HOST and _PORT, the service account's
// token and CA under <root>/var/run/secrets/kubernetes.io/serviceaccount/.
// FAILED_PRECONDITION naming what is missing.
StatusOr<KubeConfig> InClusterConfig(const std::filesystem::path& root = "/");

// An https:// server URL in parts: the host (a name, or an IP address,
// IPv6 without brackets), the port (443 when none is given) and the path the
// API is served under ("" or "/prefix", as behind some proxies).
struct ServerAddress {
  std::string host = {};
  uint16_t port = 443;
  std::string path = {};
};

// INVALID_ARGUMENT naming the URL for what is not https://host[:port][/path]:
// another scheme, user info, a query or fragment, an empty or malformed
// host, a port that is not 1-65535.
StatusOr<ServerAddress> ParseServerUrl(std::string_view url);

// An HTTP proxy reached with CONNECT; `authorization` is the
// Proxy-Authorization value ("Basic ...") when the proxy URL has user info.
struct ProxyAddress {
  std::string host = {};
  uint16_t port = 80;
  std::string authorization = {};
};

// The proxy for `server` as client-go's transport chooses it from the
// environment: `https_proxy` (HTTPS_PROXY, then https_proxy), unless
// `no_proxy` (NO_PROXY, then no_proxy) exempts the server: "*", an IP
// address, a CIDR, or a host name that matches itself and its subdomains
// (".name" only subdomains), optionally with a port; "localhost" and
// loopback addresses never go through a proxy. nullopt for a direct
// connection; INVALID_ARGUMENT naming the variable for a proxy URL that is
// not http:// (HTTPS and SOCKS proxies are not supported).
StatusOr<std::optional<ProxyAddress>> ProxyFor(const ServerAddress& server,
                                               std::string_view https_proxy,
                                               std::string_view no_proxy);
// The same with the process's environment.
StatusOr<std::optional<ProxyAddress>> ProxyFromEnvironment(
    const ServerAddress& server);

// A bearer token as client-go takes it from its text (an inline token, a
// token file): white space at either end removed, as strings.TrimSpace
// does. INVALID_ARGUMENT naming `where` for a token that cannot be an HTTP
// header value, as Go's net/http refuses it: a control character (a line
// break, NUL...) other than a tab, or DEL. Empty text is an empty token.
StatusOr<std::string> BearerToken(std::string_view text,
                                  std::string_view where);

// RFC 4648 base64 (kubeconfig *-data fields); nullopt-like error when not.
StatusOr<std::string> DecodeBase64(std::string_view text);
std::string EncodeBase64(std::string_view bytes);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_
