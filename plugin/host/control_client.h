// The control socket's client without gRPC: what `topology-manager admit`,
// `release` and `status` send to `topology-manager serve`.
//
// The control socket speaks gRPC (topologymanager.v1alpha1.Control) and
// stays that way: any gRPC client can use it. This client makes the same
// unary calls with the HTTP/2 library nghttp2 (HPACK, flow control, framing)
// and encodes the three small request messages and the one reply message
// by hand, so that the command loads neither gRPC, Protocol Buffers, abseil
// nor OpenSSL: it starts like an empty program, not like a 17 MB one.
// Tests hold it to libprotobuf's encoding and to a real gRPC server.
#ifndef TOPOLOGY_HOST_CONTROL_CLIENT_H_
#define TOPOLOGY_HOST_CONTROL_CLIENT_H_

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

#include "topology/status.h"

namespace topology::host {

// One file of Pod manifests: its name (for error messages) and its text.
struct ManifestText {
  std::string source;
  std::string yaml;
};

// topologymanager.v1alpha1 messages in the Protocol Buffers wire format,
// byte for byte what libprotobuf writes for them.
std::string EncodeAdmitRequest(const std::vector<ManifestText>& manifests,
                               bool explain);
std::string EncodeReleaseRequest(std::string_view pod);
std::string EncodeStatusRequest(std::string_view format);

// The `json` field of a JsonReply. Unknown fields are skipped as
// libprotobuf skips them; a truncated or malformed message, a group (which
// no proto3 server sends), or a `json` that is not UTF-8 is DATA_LOSS
// naming the byte offset.
StatusOr<std::string> DecodeJsonReply(std::string_view bytes);

// The largest reply accepted (gRPC's own default is 4 MiB; the status of a
// full node is larger).
inline constexpr size_t kMaxControlReplyBytes = 256u << 20;

// One unary call of topologymanager.v1alpha1.Control (`method`: "Admit",
// "Release" or "Status") over a connected stream socket `fd`, which it does
// not close. Returns the reply's JSON, or the call's gRPC status (code and
// percent-decoded grpc-message) as the server sent it, or: UNAVAILABLE when
// the connection ends before the answer, DEADLINE_EXCEEDED when `timeout`
// passes first (the deadline is also sent as grpc-timeout), INTERNAL for an
// answer that breaks HTTP/2 or gRPC, each naming what was wrong.
StatusOr<std::string> CallControlOnFd(int fd, std::string_view method,
                                      std::string_view request,
                                      std::chrono::milliseconds timeout);

// Connects to the unix socket `socket_path` (UNAVAILABLE naming the socket
// and errno when that fails) and makes the call.
StatusOr<std::string> CallControl(const std::string& socket_path,
                                  std::string_view method,
                                  std::string_view request,
                                  std::chrono::milliseconds timeout);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_CONTROL_CLIENT_H_
