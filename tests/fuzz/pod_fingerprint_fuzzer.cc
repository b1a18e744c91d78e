// Fuzzes the reader of a NodeResourceTopology's pod fingerprint
// (PodFingerprint::Check, topology/common/pod_fingerprint.h) over the pods
// the input's lines name ("<namespace> <name>", the first line the
// signature checked): never crashes; a refusal is INVALID_ARGUMENT,
// FAILED_PRECONDITION or ABORTED; what it accepts is the set's own
// signature, and the set's own signature is always accepted.
#include <cstdint>
#include <string>
#include <string_view>

#include "topology/common/pod_fingerprint.h"

#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t first = text.find('\n');
  const std::string_view signature = text.substr(0, first);
  text = first == std::string_view::npos ? std::string_view()
                                         : text.substr(first + 1);
  topology::common::PodFingerprint fingerprint;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    const size_t space = line.find(' ');
    fingerprint.Add(line.substr(0, space), space == std::string_view::npos
                                               ? std::string_view()
                                               : line.substr(space + 1));
    text = end == std::string_view::npos ? std::string_view()
                                         : text.substr(end + 1);
  }
  const std::string own = fingerprint.Sign();
  FUZZ_CHECK(own.size() == 24 && own.starts_with("pfp0v001"));
  FUZZ_CHECK(fingerprint.Check(own).ok());
  const topology::Status checked = fingerprint.Check(signature);
  if (checked.ok()) {
    FUZZ_CHECK(signature.substr(8) == std::string_view(own).substr(8));
  } else {
    FUZZ_CHECK(checked.code() == topology::StatusCode::kInvalidArgument ||
               checked.code() == topology::StatusCode::kFailedPrecondition ||
               checked.code() == topology::StatusCode::kAborted);
  }
  return 0;
}
