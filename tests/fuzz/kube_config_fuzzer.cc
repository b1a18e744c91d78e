// Fuzzes the kubeconfig reader of the DRA framework: never crashes or
// throws; refusals are INVALID_ARGUMENT naming the source; what it accepts
// has an https server. File references are read relative to a directory
// that does not exist, so a reference is refused, never followed.
#include <cstdint>
#include <string_view>

#include "topology/draplugin/kube_config.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = topology::draplugin::ParseKubeConfig(
      text, "/nonexistent-kubeconfig-dir", "fuzz");
  if (!config.ok()) {
    FUZZ_CHECK(config.status().code() ==
               topology::StatusCode::kInvalidArgument);
    FUZZ_CHECK(config.status().message().starts_with("fuzz"));
    return 0;
  }
  FUZZ_CHECK(config->server.starts_with("https://"));
  FUZZ_CHECK(config->client_certificate_pem.empty() ==
             config->client_key_pem.empty());
  return 0;
}
