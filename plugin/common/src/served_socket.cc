#include "topology/common/served_socket.h"

#include <utility>

#include <grpcpp/grpcpp.h>

namespace topology::common {

StatusOr<std::unique_ptr<ServedSocket>> ServedSocket::Serve(
    ServedSocketOptions options) {
  std::unique_ptr<ServedSocket> served(new ServedSocket());
  served->path_ = options.path;
  served->calls_ = std::make_shared<ConnectionCalls>();
  grpc::ServerBuilder builder;
  if (options.max_receive_bytes > 0) {
    builder.SetMaxReceiveMessageSize(options.max_receive_bytes);
  }
  ConfigureBoundedServer(builder, served->calls_);
  for (grpc::Service* service : options.services) {
    builder.RegisterService(service);
  }
  if (options.configure) options.configure(builder);
  served->server_ = builder.BuildAndStart();
  if (!served->server_) {
    return FailedPreconditionError("cannot build a server for " +
                                   options.path.string());
  }
  options.socket.calls = served->calls_;
  auto acceptor =
      UnixAcceptor::Start(options.path, served->server_.get(), options.socket);
  if (!acceptor.ok()) return acceptor.status();  // the destructor shuts down
  served->acceptor_ = std::move(*acceptor);
  served->identity_ = served->acceptor_->identity();
  return served;
}

ServedSocket::~ServedSocket() {
  StopAccepting();
  if (!shut_down_) Shutdown(std::chrono::system_clock::now());
}

ServedSocket::Look ServedSocket::LookAtPath() const {
  const std::optional<SocketIdentity> now = SocketAt(path_);
  if (now == identity_) return Look::kOurs;
  return now && Listening(path_) ? Look::kTaken : Look::kGone;
}

bool ServedSocket::MayHaveGone(const DirEvent& event) const {
  switch (event.kind) {
    case DirEvent::Kind::kCreated:
      return false;
    case DirEvent::Kind::kDeleted:
      if (event.name != path_.filename().string()) return false;
      break;
    case DirEvent::Kind::kListed:
      break;
  }
  // The server's own replacement of a socket (unlinked, then bound again)
  // is a removal too: by the time it is heard, the path holds the new one.
  return SocketAt(path_) != identity_;
}

void ServedSocket::StopAccepting() { acceptor_.reset(); }

void ServedSocket::Shutdown(std::chrono::system_clock::time_point deadline) {
  if (shut_down_ || !server_) return;
  shut_down_ = true;
  server_->Shutdown(deadline);
  server_->Wait();
}

}  // namespace topology::common
