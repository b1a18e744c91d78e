// The one place where library statuses become gRPC statuses and back.
#ifndef TOPOLOGY_PLUGIN_SRC_GRPC_STATUS_H_
#define TOPOLOGY_PLUGIN_SRC_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "topology/status.h"

namespace topology::plugin {

// Codes share google.rpc.Code numbering, so the code passes through and the
// message is kept verbatim.
grpc::Status ToGrpcStatus(const Status& status);
Status FromGrpcStatus(const grpc::Status& status);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_SRC_GRPC_STATUS_H_
