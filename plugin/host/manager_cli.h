// The topology-manager command line, shared by its two programs (one main
// each): `topology-manager` (main.cc) links no gRPC, Protocol Buffers or
// glog and hands serve to `topology-manager-grpc` (serve_main.cc) by exec;
// both parse every command line the same way.
//   topology-manager merge [CASE.json] [--engine fast|reference] [--explain]
//   topology-manager serve [kubelet flags...]
//   topology-manager admit POD.yaml... [--format text|json] [--explain]
//   topology-manager release POD
//   topology-manager status [--format text|json|nrt]
#ifndef TOPOLOGY_HOST_MANAGER_CLI_H_
#define TOPOLOGY_HOST_MANAGER_CLI_H_

#include <set>
#include <string>

#include "topology/common/kubelet_names.h"

#include "memory_flags.h"

namespace CLI {
class App;
}  // namespace CLI

namespace topology::host {

inline constexpr int kExitRejected = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitUnreachable = 3;
inline constexpr char kDefaultControlSocket[] = "/run/topology-manager.sock";

// serve's flags as given; the program that serves checks them.
struct ServeFlags {
  std::string plugin_dir = kubelet::kDevicePluginPath;
  std::string host_root = "/";
  std::string hwloc_xml;
  std::string control_socket = kDefaultControlSocket;
  std::string policy = "none";
  std::string scope = "container";
  std::string policy_options;
  std::string cpu_policy = "none";
  std::string cpu_policy_options;  // key=value,...
  std::string feature_gates;       // Name=bool,...
  std::string reserved_cpus;
  // --memory-manager-policy, --reserved-memory, --kube-reserved,
  // --system-reserved, --eviction-hard.
  MemoryFlags memory;
  // Beyond the kubelet (KEP-6232): a quantity; "0" compares exactly.
  std::string memory_drift_tolerance = "0";
  std::string grace_period = "5m";
  std::string rpc_timeout = "30s";
  std::string control_group;
  std::string node_name;
  bool cost_based_selection = false;
  int verbosity = 0;
  // --config: a KubeletConfiguration file (kubelet_config.h); each field it
  // sets applies unless its flag is among `given`.
  std::string kubelet_config;
  // The flags given on the command line ("--reserved-memory").
  std::set<std::string> given;

  // Binds serve's flags, as the kubelet names them, to these fields.
  void AddFlags(CLI::App& serve);
};

// How a program runs serve: the light one execs the full one, the full one
// serves. `argv` is the program's own (for the exec and the log's name).
using ServeCommand = int (*)(const ServeFlags& flags, char** argv);

// Parses the command line and runs the command; the exit status.
int RunManagerCli(int argc, char** argv, ServeCommand serve);

// Runs `command` (RunManagerCli of the program); anything thrown past it
// (out of memory, a library's exception) ends it with one line and exit 1
// rather than an abort.
int RunGuarded(int argc, char** argv, ServeCommand serve);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_MANAGER_CLI_H_
