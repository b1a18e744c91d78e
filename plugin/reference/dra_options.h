// topology-dra-driver's options: its flags, their defaults from the
// environment and from each other, and their validation, apart from what
// the driver does with them (dra_main.cc), in the pattern of the kubelet's
// cmd/kubelet/app/options.
#ifndef TOPOLOGY_DEVICE_PLUGIN_DRA_OPTIONS_H_
#define TOPOLOGY_DEVICE_PLUGIN_DRA_OPTIONS_H_

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "topology/dra_attributes.h"
#include "topology/status.h"

namespace topology::device_plugin {

struct DraDriverOptions {
  std::string driver;  // default: kDefaultDraDriverName
  std::string node;    // default: NODE_NAME
  std::string config_file;
  std::string host_root = "/";
  std::string kubeconfig;  // empty: in-cluster credentials
  std::string kubelet_root = "/var/lib/kubelet";
  // The kubelet's device manager keeps its socket and checkpoint here
  // whatever its --root-dir (pluginapi.DevicePluginPath).
  std::string device_plugin_dir = "/var/lib/kubelet/device-plugins";
  std::string registry_dir;  // default: <kubelet root>/plugins_registry
  std::string plugin_dir;    // default: <kubelet root>/plugins/<driver>
  std::string cdi_dir = "/var/run/cdi";
  std::string state_dir;  // default: the plugin directory
  std::string http_addr;  // empty: no HTTP endpoint
  std::string numa_form = "scalar";
  std::string rescan_interval = "30s";
  bool watch_uevents = true;
  std::string health_interval = "10s";
  std::string recovery_period = "1m";
  std::string device_plugin_config;  // empty: no overlap check
  std::string pod_uid;               // default: POD_UID
  bool print_device_classes = false;
  bool device_metadata = false;  // KEP-5304 files, mirroring the slices
  int verbosity = 0;

  // Set by Complete() from the text above.
  dra::NumaAttributeForm numa_attribute_form = dra::NumaAttributeForm::kScalar;
  std::chrono::nanoseconds rescan_every{0};
  std::chrono::nanoseconds health_every{0};
  std::chrono::nanoseconds recovery{0};

  DraDriverOptions();

  // Binds every flag to its field; the help shows the defaults.
  void AddFlags(CLI::App& app);
  // Fills what the environment and the other flags default, parses the
  // durations and checks the paths. INVALID_ARGUMENT names the flag.
  Status Complete();
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_DRA_OPTIONS_H_
