// topology-device-plugin's options: its flags, their parsing and
// validation, apart from what the plugin does with them (main.cc), in the
// pattern of the kubelet's cmd/kubelet/app/options.
#ifndef TOPOLOGY_DEVICE_PLUGIN_PLUGIN_OPTIONS_H_
#define TOPOLOGY_DEVICE_PLUGIN_PLUGIN_OPTIONS_H_

#include <chrono>
#include <string>

#include <CLI/CLI.hpp>

#include "topology/common/cdi.h"
#include "topology/status.h"

#include "reference_plugin.h"

namespace topology::device_plugin {

struct DevicePluginOptions {
  std::string config_file;
  std::string plugin_dir = plugin::kDefaultPluginDir;
  std::string host_root = "/";
  std::string rescan_interval = "10s";
  std::string recovery_period = "1m";
  std::string http_addr = "127.0.0.1:8081";  // empty: no HTTP endpoint
  std::string cdi_dir = common::kDefaultCdiDir;
  std::string dra_claims =
      "/var/lib/kubelet/plugins/pci.libtopology.dev/prepared-claims.json";
  bool print_matches = false;
  bool watch_uevents = true;
  int verbosity = 0;

  // Set by Complete() from the text above.
  std::chrono::nanoseconds rescan_every{0};
  std::chrono::nanoseconds recovery{0};

  // Binds every flag to its field; the help shows the defaults.
  void AddFlags(CLI::App& app);
  // Parses the durations. INVALID_ARGUMENT names the flag.
  Status Complete();
  // The plugin's options with `config` loaded from --config.
  PluginOptions ToPluginOptions(Config config) const;
};

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_PLUGIN_OPTIONS_H_
