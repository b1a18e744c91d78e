// serve's flags as the host's configuration (the options' completion, in
// the pattern of the kubelet's cmd/kubelet/app/options): the kubelet's
// key=value lists and gates parsed, the reservations, memory and durations
// checked, the control group resolved. Only the program that serves links
// it.
#ifndef TOPOLOGY_HOST_SERVE_OPTIONS_H_
#define TOPOLOGY_HOST_SERVE_OPTIONS_H_

#include "topology/status.h"
#include "topology/topology.h"

#include "host_manager.h"
#include "manager_cli.h"

namespace topology::host {

// `flags` after LoadKubeletConfiguration; `topology` the machine served
// (its memory bounds the reservations). INVALID_ARGUMENT names the flag.
StatusOr<HostConfig> HostConfigFromFlags(const ServeFlags& flags,
                                         const Topology& topology);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_SERVE_OPTIONS_H_
