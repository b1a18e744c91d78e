// StartHost: a HostManager started the way topology-manager serve starts
// one (serve_main.cc): the checkpoint restored, then a HostServer built for
// it and handed over. Header-only: only targets that link host_manager
// include it.
#ifndef TOPOLOGY_TESTING_HOST_START_H_
#define TOPOLOGY_TESTING_HOST_START_H_

#include <memory>
#include <utility>

#include "topology/status.h"

#include "host_manager.h"
#include "host_server.h"

namespace topology::testing {

inline Status StartHost(host::HostManager& host) {
  if (Status restored = host.Restore(); !restored.ok()) return restored;
  auto server =
      host::HostServer::Start(host.ServerOptions(), host.registry(), &host);
  if (!server.ok()) return server.status();
  host.Serve(std::move(*server));
  return OkStatus();
}

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_HOST_START_H_
