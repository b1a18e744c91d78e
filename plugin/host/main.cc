// topology-manager: the kubelet's device manager, CPU manager and Topology
// Manager outside the kubelet (the commands: manager_cli.h). This program
// links no gRPC, Protocol Buffers or glog: it parses every command line,
// runs --help, --version, merge, admit, release and status itself (the
// control socket's client, control_client.h, is gRPC's wire protocol over
// nghttp2), and hands serve to `topology-manager-grpc` (serve_main.cc,
// beside it or in ../libexec/libtopology/) by exec: same process, same
// arguments.
#include <cerrno>
#include <climits>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>

#include <unistd.h>

#include "manager_cli.h"

namespace {

// The full program: beside this one (the build tree, a flat install) or in
// <prefix>/libexec/libtopology/ (cmake --install). Found from
// /proc/self/exe, never from PATH or the environment.
int RunFull(const topology::host::ServeFlags& /*flags*/, char** argv) {
  constexpr char kFull[] = "topology-manager-grpc";
  char self[PATH_MAX];
  const ssize_t length = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (length <= 0) {
    std::cerr << "topology-manager: cannot find its own executable: "
              << std::strerror(errno) << "\n";
    return 1;
  }
  const std::filesystem::path dir =
      std::filesystem::path(std::string(self, static_cast<size_t>(length)))
          .parent_path();
  std::string tried;
  for (const std::filesystem::path& full :
       {dir / kFull, dir / ".." / "libexec" / "libtopology" / kFull}) {
    execv(full.c_str(), argv);
    tried += (tried.empty() ? "" : ", ") + full.lexically_normal().string() +
             " (" + std::strerror(errno) + ")";
  }
  std::cerr << "topology-manager: cannot run " << kFull << ": tried " << tried
            << "\n";
  return 1;
}
}  // namespace

int main(int argc, char** argv) {
  return topology::host::RunGuarded(argc, argv, &RunFull);
}
