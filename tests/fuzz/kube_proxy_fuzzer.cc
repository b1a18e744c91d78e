// Fuzzes what the DRA framework's API client reads from its environment
// and kubeconfig beside YAML: the server URL (ParseServerUrl) and the
// proxy variables (ProxyFor). The input is three lines: a server URL,
// HTTPS_PROXY and NO_PROXY. Never crashes or throws; refusals are
// INVALID_ARGUMENT; a parsed server has a host, and a loopback server never
// goes through a proxy.
#include <cstdint>
#include <string>
#include <string_view>

#include "topology/draplugin/kube_config.h"

#include "fuzz_check.h"

namespace {

std::string_view Line(std::string_view& text) {
  const size_t end = text.find('\n');
  const std::string_view line = text.substr(0, end);
  text =
      end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
  return line;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace dra = topology::draplugin;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string_view url = Line(text);
  const std::string_view https_proxy = Line(text);
  const std::string_view no_proxy = Line(text);
  auto server = dra::ParseServerUrl(url);
  if (!server.ok()) {
    FUZZ_CHECK(server.status().code() ==
               topology::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(!server->host.empty());
  FUZZ_CHECK(server->port != 0);
  FUZZ_CHECK(!server->path.ends_with('/'));
  auto proxy = dra::ProxyFor(*server, https_proxy, no_proxy);
  if (!proxy.ok()) {
    FUZZ_CHECK(proxy.status().code() == topology::StatusCode::kInvalidArgument);
    return 0;
  }
  if (proxy->has_value()) {
    FUZZ_CHECK(!(*proxy)->host.empty());
    FUZZ_CHECK(server->host != "localhost" && server->host != "127.0.0.1" &&
               server->host != "::1");
  }
  return 0;
}
