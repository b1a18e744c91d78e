// How to reach the Kubernetes API server: from a kubeconfig file (its
// current context's cluster and user) or from a pod's in-cluster
// credentials. Only what a node agent needs: an https server, a CA (file or
// data; else the system's), and a bearer token (inline or a file, read
// again at every request, as projected tokens rotate) or a client
// certificate and key.
#ifndef TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_
#define TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_

#include <filesystem>
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

// RFC 4648 base64 (kubeconfig *-data fields); nullopt-like error when not.
StatusOr<std::string> DecodeBase64(std::string_view text);

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_KUBE_CONFIG_H_
