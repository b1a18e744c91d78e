// topology-manager-grpc: the program that serves (topology-manager execs
// it for serve, with the same arguments); the other commands run as in
// topology-manager (manager_cli.h).
#include <iostream>
#include <string>
#include <utility>

#include <glog/logging.h>

#include "topology/common/daemon.h"
#include "topology/discovery.h"

#include "host_manager.h"
#include "host_server.h"
#include "kubelet_config.h"
#include "manager_cli.h"
#include "serve_options.h"

namespace {

int Usage(const std::string& what) {
  std::cerr << "topology-manager serve: " << what << "\n";
  return topology::host::kExitUsage;
}

int RunServe(const topology::host::ServeFlags& given, char** argv) {
  // The kubelet's own configuration file first, the flags given over it.
  topology::host::ServeFlags flags = given;
  if (topology::Status loaded =
          topology::host::LoadKubeletConfiguration(&flags);
      !loaded.ok()) {
    return Usage(loaded.message());
  }
  // epoll1, not the plugins' poll: the servers here are handed their
  // connections by descriptor (UnixAcceptor), and under poll a second call
  // on a connection waits until the first has been answered.
  const topology::common::DaemonProcess process{.verbosity = flags.verbosity,
                                                .grpc_engine = "epoll1"};
  topology::common::SetUpDaemon(argv[0], process);
  topology::DiscoveryOptions discovery;
  discovery.host_root = flags.host_root;
  topology::StatusOr<topology::Topology> topology =
      flags.hwloc_xml.empty() ? topology::Discover(discovery)
                              : topology::LoadHwlocXml(flags.hwloc_xml);
  if (!topology.ok()) return Usage(topology.status().message());
  auto config = topology::host::HostConfigFromFlags(flags, *topology);
  if (!config.ok()) return Usage(config.status().message());
  auto host =
      topology::host::HostManager::Create(*config, std::move(*topology));
  if (!host.ok()) return Usage(host.status().message());
  // Admission state first, then the sockets that expose it.
  if (auto restored = (*host)->Restore(); !restored.ok()) {
    LOG(ERROR) << "cannot start: " << restored.message();
    return 1;
  }
  auto server = topology::host::HostServer::Start(
      (*host)->ServerOptions(), (*host)->registry(), host->get());
  if (!server.ok()) {
    LOG(ERROR) << "cannot start: " << server.status().message();
    return 1;
  }
  (*host)->Serve(std::move(*server));
  topology::common::AwaitShutdown(process);
  (*host)->Stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  return topology::host::RunGuarded(argc, argv, &RunServe);
}
