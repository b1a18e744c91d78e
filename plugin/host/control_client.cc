#include "control_client.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "topology/common/text_util.h"

namespace topology::host {

using text::IsValidUtf8;
using text::Quoted;

namespace {

// --- Protocol Buffers wire format -----------------------------------------

constexpr uint32_t kWireVarint = 0;
constexpr uint32_t kWireFixed64 = 1;
constexpr uint32_t kWireLengthDelimited = 2;
constexpr uint32_t kWireFixed32 = 5;

void PutVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7F) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

// A length-delimited field; proto3 leaves out empty ones.
void PutBytes(std::string& out, uint32_t field, std::string_view bytes) {
  if (bytes.empty()) return;
  PutVarint(out, (field << 3) | kWireLengthDelimited);
  PutVarint(out, bytes.size());
  out.append(bytes);
}

// Reads a varint at `*offset`; false when truncated or longer than 10 bytes.
bool GetVarint(std::string_view bytes, size_t* offset, uint64_t* value) {
  *value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*offset >= bytes.size()) return false;
    const auto byte = static_cast<unsigned char>(bytes[(*offset)++]);
    *value |= static_cast<uint64_t>(byte & 0x7F) << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

Status ReplyError(size_t offset, std::string_view what) {
  return DataLossError("control reply: byte " + std::to_string(offset) + ": " +
                       std::string(what));
}

// --- gRPC over HTTP/2 -------------------------------------------------------

// grpc-message is percent-encoded (every byte outside 0x20-0x7E, and '%').
std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned int byte = 0;
    if (text[i] == '%' && i + 2 < text.size() &&
        std::from_chars(text.data() + i + 1, text.data() + i + 3, byte, 16)
                .ptr == text.data() + i + 3) {
      out.push_back(static_cast<char>(byte));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// grpc-timeout: at most eight digits and a unit.
std::string GrpcTimeout(std::chrono::milliseconds timeout) {
  const int64_t ms = std::max<int64_t>(timeout.count(), 1);
  if (ms < 100'000'000) return std::to_string(ms) + "m";
  return std::to_string(std::min<int64_t>(ms / 1000, 99'999'999)) + "S";
}

// What the server sent on the call's stream.
struct Exchange {
  std::string_view request;  // the gRPC-framed message
  size_t request_sent = 0;
  int32_t stream_id = -1;
  bool closed = false;
  uint32_t reset_code = 0;
  std::string http_status;
  std::string content_type;
  std::optional<std::string> grpc_status;
  std::string grpc_message;
  std::string body;
  std::string failure;  // a reply this client refuses
};

int OnHeader(nghttp2_session* /*session*/, const nghttp2_frame* frame,
             const uint8_t* name, size_t name_length, const uint8_t* value,
             size_t value_length, uint8_t /*flags*/, void* user_data) {
  auto* exchange = static_cast<Exchange*>(user_data);
  if (frame->hd.stream_id != exchange->stream_id) return 0;
  const std::string_view key(reinterpret_cast<const char*>(name), name_length);
  const std::string_view text(reinterpret_cast<const char*>(value),
                              value_length);
  if (key == ":status") {
    exchange->http_status = text;
  } else if (key == "content-type") {
    exchange->content_type = text;
  } else if (key == "grpc-status") {
    exchange->grpc_status = std::string(text);
  } else if (key == "grpc-message") {
    exchange->grpc_message = PercentDecode(text.substr(0, 4096));
  }
  return 0;
}

int OnData(nghttp2_session* /*session*/, uint8_t /*flags*/, int32_t stream_id,
           const uint8_t* data, size_t length, void* user_data) {
  auto* exchange = static_cast<Exchange*>(user_data);
  if (stream_id != exchange->stream_id) return 0;
  if (exchange->body.size() + length > kMaxControlReplyBytes + 5) {
    exchange->failure = "the reply is larger than " +
                        std::to_string(kMaxControlReplyBytes >> 20) + " MiB";
    return NGHTTP2_ERR_CALLBACK_FAILURE;
  }
  exchange->body.append(reinterpret_cast<const char*>(data), length);
  return 0;
}

int OnStreamClose(nghttp2_session* /*session*/, int32_t stream_id,
                  uint32_t error_code, void* user_data) {
  auto* exchange = static_cast<Exchange*>(user_data);
  if (stream_id != exchange->stream_id) return 0;
  exchange->closed = true;
  exchange->reset_code = error_code;
  return 0;
}

// nghttp2 answers a protocol error of the server with a GOAWAY and ends
// the session; that frame names what was wrong.
int OnFrameSend(nghttp2_session* /*session*/, const nghttp2_frame* frame,
                void* user_data) {
  auto* exchange = static_cast<Exchange*>(user_data);
  if (frame->hd.type == NGHTTP2_GOAWAY &&
      frame->goaway.error_code != NGHTTP2_NO_ERROR &&
      exchange->failure.empty()) {
    exchange->failure = nghttp2_http2_strerror(frame->goaway.error_code);
  }
  return 0;
}

ssize_t ReadRequest(nghttp2_session* /*session*/, int32_t /*stream_id*/,
                    uint8_t* buffer, size_t length, uint32_t* data_flags,
                    nghttp2_data_source* source, void* /*user_data*/) {
  auto* exchange = static_cast<Exchange*>(source->ptr);
  const size_t n =
      std::min(length, exchange->request.size() - exchange->request_sent);
  std::memcpy(buffer, exchange->request.data() + exchange->request_sent, n);
  exchange->request_sent += n;
  if (exchange->request_sent == exchange->request.size()) {
    *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  }
  return static_cast<ssize_t>(n);
}

struct SessionDeleter {
  void operator()(nghttp2_session* session) const {
    nghttp2_session_del(session);
  }
};
struct CallbacksDeleter {
  void operator()(nghttp2_session_callbacks* callbacks) const {
    nghttp2_session_callbacks_del(callbacks);
  }
};

using SteadyClock = std::chrono::steady_clock;

// Waits for `events` on `fd` until `deadline`: 1 ready, 0 timed out, -1
// error (errno set).
int WaitFor(int fd, decltype(pollfd::events) events,
            SteadyClock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(
        deadline - SteadyClock::now());
    if (left.count() <= 0) return 0;
    pollfd entry{fd, events, 0};
    const int ready =
        poll(&entry, 1,
             static_cast<int>(std::min<int64_t>(left.count(), INT32_MAX)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return ready;
    return 1;
  }
}

Status Deadline(std::chrono::milliseconds timeout) {
  return DeadlineExceededError("no answer within " +
                               std::to_string(timeout.count()) + " ms");
}

// Sends what the session has to send.
Status Flush(nghttp2_session* session, int fd, SteadyClock::time_point deadline,
             std::chrono::milliseconds timeout) {
  for (;;) {
    const uint8_t* data = nullptr;
    const ssize_t length = nghttp2_session_mem_send(session, &data);
    if (length < 0) {
      return InternalError(std::string("HTTP/2: ") +
                           nghttp2_strerror(static_cast<int>(length)));
    }
    if (length == 0) return OkStatus();
    size_t sent = 0;
    while (sent < static_cast<size_t>(length)) {
      const ssize_t n =
          send(fd, data + sent, static_cast<size_t>(length) - sent,
               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n >= 0) {
        sent += static_cast<size_t>(n);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        return UnavailableError(std::string("send: ") + std::strerror(errno));
      }
      const int ready = WaitFor(fd, POLLOUT, deadline);
      if (ready == 0) return Deadline(timeout);
      if (ready < 0) {
        return UnavailableError(std::string("poll: ") + std::strerror(errno));
      }
    }
  }
}

// The call's outcome from what the stream carried.
StatusOr<std::string> Outcome(const Exchange& exchange) {
  if (exchange.grpc_status) {
    int code = -1;
    const std::string& text = *exchange.grpc_status;
    const auto [end, error] =
        std::from_chars(text.data(), text.data() + text.size(), code);
    if (error != std::errc() || end != text.data() + text.size() || code < 0 ||
        code > static_cast<int>(StatusCode::kDataLoss)) {
      return InternalError("the answer's grpc-status " + Quoted(text) +
                           " is not a status code");
    }
    if (code != 0) {
      return Status(static_cast<StatusCode>(code), exchange.grpc_message.empty()
                                                       ? "(no message)"
                                                       : exchange.grpc_message);
    }
  }
  if (!exchange.failure.empty()) {
    return InternalError("the answer breaks HTTP/2: " + exchange.failure);
  }
  if (!exchange.closed) {
    return UnavailableError("the connection closed before the answer");
  }
  if (exchange.reset_code != NGHTTP2_NO_ERROR) {
    return UnavailableError(std::string("the server reset the call: ") +
                            nghttp2_http2_strerror(exchange.reset_code));
  }
  if (exchange.http_status != "200") {
    return InternalError("the answer's HTTP status is " +
                         Quoted(exchange.http_status) + ", not 200");
  }
  if (!exchange.content_type.starts_with("application/grpc")) {
    return InternalError("the answer's content-type is " +
                         Quoted(exchange.content_type) +
                         ", not application/grpc");
  }
  if (!exchange.grpc_status) {
    return InternalError("the answer has no grpc-status");
  }
  // One length-prefixed message: a compression flag and a 32-bit length.
  const std::string& body = exchange.body;
  if (body.size() < 5) {
    return InternalError("the answer carries no message (" +
                         std::to_string(body.size()) + " bytes)");
  }
  if (body[0] != 0) {
    return InternalError("the answer's message is compressed (flag " +
                         std::to_string(static_cast<unsigned char>(body[0])) +
                         "), which this client did not ask for");
  }
  uint32_t length = 0;
  for (size_t i = 1; i <= 4; ++i) {
    length = (length << 8) | static_cast<unsigned char>(body[i]);
  }
  if (length != body.size() - 5) {
    return InternalError("the answer's message says " + std::to_string(length) +
                         " bytes but " + std::to_string(body.size() - 5) +
                         " came");
  }
  return DecodeJsonReply(std::string_view{body}.substr(5));
}

}  // namespace

std::string EncodeAdmitRequest(const std::vector<ManifestText>& manifests,
                               bool explain) {
  std::string out;
  std::string manifest;
  for (const ManifestText& m : manifests) {
    manifest.clear();
    PutBytes(manifest, 1, m.source);
    PutBytes(manifest, 2, m.yaml);
    // An empty sub-message is still an element of the repeated field.
    PutVarint(out, (1u << 3) | kWireLengthDelimited);
    PutVarint(out, manifest.size());
    out += manifest;
  }
  if (explain) {
    PutVarint(out, (2u << 3) | kWireVarint);
    PutVarint(out, 1);
  }
  return out;
}

std::string EncodeReleaseRequest(std::string_view pod) {
  std::string out;
  PutBytes(out, 1, pod);
  return out;
}

std::string EncodeStatusRequest(std::string_view format) {
  std::string out;
  PutBytes(out, 1, format);
  return out;
}

StatusOr<std::string> DecodeJsonReply(std::string_view bytes) {
  std::string json;
  size_t offset = 0;
  while (offset < bytes.size()) {
    const size_t start = offset;
    uint64_t tag = 0;
    if (!GetVarint(bytes, &offset, &tag)) {
      return ReplyError(start, "truncated or overlong field tag");
    }
    const uint64_t field = tag >> 3;
    const auto wire = static_cast<uint32_t>(tag & 7);
    if (field == 0 || field > 0x1FFFFFFF) {
      return ReplyError(start, "field number " + std::to_string(field));
    }
    uint64_t value = 0;
    switch (wire) {
      case kWireVarint:
        if (!GetVarint(bytes, &offset, &value)) {
          return ReplyError(start, "truncated varint");
        }
        break;
      case kWireFixed64:
      case kWireFixed32: {
        const size_t size = wire == kWireFixed64 ? 8 : 4;
        if (bytes.size() - offset < size) {
          return ReplyError(start, "truncated fixed-size field");
        }
        offset += size;
        break;
      }
      case kWireLengthDelimited: {
        if (!GetVarint(bytes, &offset, &value) ||
            value > bytes.size() - offset) {
          return ReplyError(start, "length beyond the message");
        }
        // The last `json` wins; field 1 of another wire type is an
        // unknown field to libprotobuf too.
        if (field == 1) {
          json.assign(bytes.substr(offset, value));
        }
        offset += value;
        break;
      }
      default:
        return ReplyError(start, "wire type " + std::to_string(wire) +
                                     " of field " + std::to_string(field));
    }
  }
  if (!IsValidUtf8(json)) {
    return DataLossError("control reply: json is not valid UTF-8");
  }
  return json;
}

StatusOr<std::string> CallControlOnFd(int fd, std::string_view method,
                                      std::string_view request,
                                      std::chrono::milliseconds timeout) {
  const SteadyClock::time_point deadline = SteadyClock::now() + timeout;
  if (request.size() > UINT32_MAX) {
    return InvalidArgumentError("the request is larger than 4 GiB");
  }
  std::string framed(5, '\0');
  for (int i = 0; i < 4; ++i) {
    framed[static_cast<size_t>(4 - i)] =
        static_cast<char>((request.size() >> (8 * i)) & 0xFF);
  }
  framed.append(request);
  Exchange exchange;
  exchange.request = framed;

  nghttp2_session_callbacks* raw_callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&raw_callbacks) != 0) {
    return ResourceExhaustedError("HTTP/2: out of memory");
  }
  const std::unique_ptr<nghttp2_session_callbacks, CallbacksDeleter> callbacks(
      raw_callbacks);
  nghttp2_session_callbacks_set_on_header_callback(callbacks.get(), OnHeader);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks.get(),
                                                            OnData);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks.get(),
                                                         OnStreamClose);
  nghttp2_session_callbacks_set_on_frame_send_callback(callbacks.get(),
                                                       OnFrameSend);
  nghttp2_session* raw_session = nullptr;
  if (nghttp2_session_client_new(&raw_session, callbacks.get(), &exchange) !=
      0) {
    return ResourceExhaustedError("HTTP/2: out of memory");
  }
  const std::unique_ptr<nghttp2_session, SessionDeleter> session(raw_session);

  // Large windows, so that a big reply does not wait for window updates.
  constexpr int32_t kWindow = 16 << 20;
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, kWindow},
  };
  nghttp2_submit_settings(session.get(), NGHTTP2_FLAG_NONE, settings,
                          std::size(settings));
  nghttp2_session_set_local_window_size(session.get(), NGHTTP2_FLAG_NONE, 0,
                                        kWindow);

  const std::string path =
      "/topologymanager.v1alpha1.Control/" + std::string(method);
  const std::string grpc_timeout = GrpcTimeout(timeout);
  const auto header = [](std::string_view name, std::string_view value) {
    return nghttp2_nv{
        const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(name.data())),
        const_cast<uint8_t*>(reinterpret_cast<const uint8_t*>(value.data())),
        name.size(), value.size(), NGHTTP2_NV_FLAG_NONE};
  };
  const nghttp2_nv headers[] = {
      header(":method", "POST"),
      header(":scheme", "http"),
      header(":path", path),
      header(":authority", "localhost"),
      header("content-type", "application/grpc"),
      header("te", "trailers"),
      header("grpc-timeout", grpc_timeout),
      header("user-agent", "topology-manager"),
  };
  nghttp2_data_provider body{};
  body.source.ptr = &exchange;
  body.read_callback = ReadRequest;
  const int32_t stream_id = nghttp2_submit_request(
      session.get(), nullptr, headers, std::size(headers), &body, nullptr);
  if (stream_id < 0) {
    return InternalError(std::string("HTTP/2: ") + nghttp2_strerror(stream_id));
  }
  exchange.stream_id = stream_id;

  char buffer[64 * 1024];
  while (!exchange.closed) {
    if (Status sent = Flush(session.get(), fd, deadline, timeout); !sent.ok()) {
      return sent;
    }
    if (!nghttp2_session_want_read(session.get())) break;
    const int ready = WaitFor(fd, POLLIN, deadline);
    if (ready == 0) return Deadline(timeout);
    if (ready < 0) {
      return UnavailableError(std::string("poll: ") + std::strerror(errno));
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) continue;
      return UnavailableError(std::string("recv: ") + std::strerror(errno));
    }
    if (n == 0) break;
    const ssize_t used = nghttp2_session_mem_recv(
        session.get(), reinterpret_cast<const uint8_t*>(buffer),
        static_cast<size_t>(n));
    if (used < 0) {
      return InternalError(
          "the answer breaks HTTP/2: " +
          (exchange.failure.empty()
               ? std::string(nghttp2_strerror(static_cast<int>(used)))
               : exchange.failure));
    }
  }
  // A GOAWAY or a settings acknowledgement may still be queued; the call is
  // over either way.
  (void)Flush(session.get(), fd, std::min(deadline, SteadyClock::now()),
              timeout);
  return Outcome(exchange);
}

StatusOr<std::string> CallControl(const std::string& socket_path,
                                  std::string_view method,
                                  std::string_view request,
                                  std::chrono::milliseconds timeout) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (socket_path.empty() || socket_path.size() >= sizeof(address.sun_path)) {
    return InvalidArgumentError("control socket path " + Quoted(socket_path) +
                                " is empty or longer than " +
                                std::to_string(sizeof(address.sun_path) - 1) +
                                " bytes");
  }
  std::memcpy(address.sun_path, socket_path.data(), socket_path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return UnavailableError(std::string("socket: ") + std::strerror(errno));
  }
  // connect() waits while the server's backlog is full: not past the
  // deadline.
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(timeout);
  timeval limit{};
  limit.tv_sec = seconds.count();
  limit.tv_usec = static_cast<suseconds_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(timeout - seconds)
          .count());
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  int connected = 0;
  do {
    connected = connect(fd, reinterpret_cast<const sockaddr*>(&address),
                        sizeof(address));
  } while (connected != 0 && errno == EINTR);
  if (connected != 0) {
    const int error = errno;
    close(fd);
    if (error == EAGAIN || error == EINPROGRESS) return Deadline(timeout);
    return UnavailableError("connect " + socket_path + ": " +
                            std::strerror(error));
  }
  StatusOr<std::string> reply = CallControlOnFd(fd, method, request, timeout);
  close(fd);
  return reply;
}

}  // namespace topology::host
