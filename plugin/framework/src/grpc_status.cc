#include "grpc_status.h"

#include <string>

namespace topology::plugin {

grpc::Status ToGrpcStatus(const Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      status.message());
}

Status FromGrpcStatus(const grpc::Status& status) {
  if (status.ok()) return OkStatus();
  const int code = static_cast<int>(status.error_code());
  // Codes outside google.rpc.Code cannot come from a conforming peer.
  if (code < 0 || code > static_cast<int>(StatusCode::kDataLoss)) {
    return Status(StatusCode::kUnknown, status.error_message());
  }
  return Status(static_cast<StatusCode>(code), status.error_message());
}

}  // namespace topology::plugin
