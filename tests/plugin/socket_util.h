// Unix-socket and process helpers shared by the plugin-side and kubelet-side
// fakes.
#ifndef TOPOLOGY_TESTS_PLUGIN_SOCKET_UTIL_H_
#define TOPOLOGY_TESTS_PLUGIN_SOCKET_UTIL_H_

#include <cstddef>
#include <filesystem>
#include <memory>

#include <grpcpp/grpcpp.h>

namespace topology::testing {

// Serves `service` on the unix socket `path`, replacing a leftover file.
std::unique_ptr<grpc::Server> ServeOnUnixSocket(
    const std::filesystem::path& path, grpc::Service* service);

// Leaves a unix socket file at `path` that nobody listens on.
void MakeDeadSocket(const std::filesystem::path& path);

// A loopback TCP port nobody listens on at the time of the call.
int FreeLoopbackPort();

// Threads and open file descriptors of this process.
size_t CountThreads();
size_t CountOpenFds();

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_SOCKET_UTIL_H_
