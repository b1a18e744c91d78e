// Fuzzes the control socket's light client with what a server could send:
// the input is the whole byte stream of the server's side of a real call
// (through a socket pair), and, on its own, a JsonReply message. Never
// crashes or waits past the call's deadline; a reply is valid UTF-8; an
// error says what was wrong in a bounded message.
#include <cstdint>
#include <string_view>
#include <thread>

#include <sys/socket.h>
#include <unistd.h>

#include "topology/common/text_util.h"

#include "control_client.h"
#include "fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using topology::text::IsValidUtf8;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto decoded = topology::host::DecodeJsonReply(bytes);
  if (decoded.ok()) {
    FUZZ_CHECK(IsValidUtf8(*decoded));
  } else {
    FUZZ_CHECK(decoded.status().code() == topology::StatusCode::kDataLoss);
    FUZZ_CHECK(decoded.status().message().size() < 256);
  }

  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  // The server's side: all of the input, then the end of the stream.
  std::thread server([&] {
    size_t sent = 0;
    while (sent < size) {
      const ssize_t n = send(fds[1], data + sent, size - sent, MSG_NOSIGNAL);
      if (n <= 0) break;
      sent += static_cast<size_t>(n);
    }
    shutdown(fds[1], SHUT_WR);
  });
  const auto reply = topology::host::CallControlOnFd(
      fds[0], "Status", topology::host::EncodeStatusRequest("json"),
      std::chrono::seconds(2));
  shutdown(fds[0], SHUT_RDWR);
  server.join();
  close(fds[0]);
  close(fds[1]);
  if (reply.ok()) {
    FUZZ_CHECK(IsValidUtf8(*reply));
  } else {
    FUZZ_CHECK(!reply.status().message().empty());
    FUZZ_CHECK(reply.status().message().size() < 8192);
  }
  return 0;
}
