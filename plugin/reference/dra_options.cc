#include "dra_options.h"

#include <cstdlib>
#include <filesystem>

#include "topology/common/duration.h"

#include "dra_driver.h"

namespace topology::device_plugin {

DraDriverOptions::DraDriverOptions() : driver(kDefaultDraDriverName) {}

void DraDriverOptions::AddFlags(CLI::App& app) {
  app.add_option("--driver-name", driver, "DRA driver name (a DNS subdomain)")
      ->capture_default_str();
  app.add_option("--node-name", node, "This node's name (default: NODE_NAME)");
  app.add_option("--config", config_file,
                 "YAML configuration file (topology-device-plugin's)")
      ->required();
  app.add_option("--host-root", host_root, "Directory whose sys/ is the host's")
      ->capture_default_str();
  app.add_option("--kubeconfig", kubeconfig,
                 "kubeconfig file (default: in-cluster credentials)");
  app.add_option("--kubelet-root", kubelet_root,
                 "The kubelet's --root-dir: the registration and plugin "
                 "directories default below it")
      ->capture_default_str();
  app.add_option("--device-plugin-dir", device_plugin_dir,
                 "The kubelet device manager's directory, whose checkpoint "
                 "says which devices pods hold through device plugins (the "
                 "kubelet keeps it here whatever its --root-dir)")
      ->capture_default_str();
  app.add_option("--registry-dir", registry_dir,
                 "The kubelet's plugin registration directory (default: "
                 "<kubelet root>/plugins_registry)");
  app.add_option("--plugin-dir", plugin_dir,
                 "Where dra.sock goes (default: <kubelet root>/plugins/"
                 "<driver>)");
  app.add_option("--cdi-dir", cdi_dir, "Where claims' CDI specs are written")
      ->capture_default_str();
  app.add_option("--state-dir", state_dir,
                 "Where the checkpoint of prepared claims goes (default: the "
                 "plugin directory)");
  app.add_option("--http-addr", http_addr,
                 "host:port of /healthz, /readyz and /metrics (empty "
                 "disables)");
  app.add_option("--numa-node-form", numa_form,
                 "resource.kubernetes.io/numaNode as an int (scalar) or the "
                 "device's node and the nearest ones as a list of ints (list: "
                 "clusters with the DRAListTypeAttributes gate)")
      ->check(CLI::IsMember({"scalar", "list"}))
      ->capture_default_str();
  app.add_option("--rescan-interval", rescan_interval,
                 "How often the devices are discovered again while no "
                 "uevents are watched (Go duration; 0 disables)")
      ->capture_default_str();
  app.add_flag("--uevents,!--no-uevents", watch_uevents,
               "Rescan on PCI uevents (else every --rescan-interval)")
      ->capture_default_str();
  app.add_option("--health-interval", health_interval,
                 "How often AER counters and unhealthy devices are read "
                 "again (Go duration)")
      ->capture_default_str();
  app.add_option("--recovery-period", recovery_period,
                 "Quiet time before a faulted device is Healthy again")
      ->capture_default_str();
  app.add_option("--device-plugin-config", device_plugin_config,
                 "topology-device-plugin's configuration on this node: the "
                 "driver refuses to start when both select a device");
  app.add_option("--pod-uid", pod_uid,
                 "This pod's UID (default: POD_UID, from the downward API): "
                 "per-pod socket names, so that two instances on a node both "
                 "serve during a rolling update (kubelet 1.33+)");
  app.add_flag("--device-metadata", device_metadata,
               "Give each prepared claim's containers its devices' metadata "
               "(KEP-5304: a file per request under "
               "/var/run/kubernetes.io/dra-device-attributes, mounted "
               "through CDI), their attributes as the slices publish them");
  app.add_flag("--print-device-classes", print_device_classes,
               "Print the DeviceClasses of --config's resources (YAML) and "
               "exit");
  app.add_option("-v,--v", verbosity, "Log verbosity (klog -v)")
      ->capture_default_str();
}

Status DraDriverOptions::Complete() {
  if (print_device_classes) return OkStatus();  // only --config is read
  const auto from_environment = [](std::string* value, const char* name) {
    if (!value->empty()) return;
    if (const char* set = std::getenv(name); set != nullptr) *value = set;
  };
  from_environment(&node, "NODE_NAME");
  if (node.empty()) {
    return InvalidArgumentError("--node-name or NODE_NAME is needed");
  }
  from_environment(&pod_uid, "POD_UID");
  for (const auto& [flag, path] :
       {std::pair{"--kubelet-root", &kubelet_root},
        std::pair{"--device-plugin-dir", &device_plugin_dir}}) {
    if (path->empty() || path->front() != '/') {
      return InvalidArgumentError(std::string(flag) +
                                  " must be an absolute path");
    }
  }
  const std::filesystem::path kubelet_dir(kubelet_root);
  if (registry_dir.empty()) {
    registry_dir = (kubelet_dir / "plugins_registry").string();
  }
  if (plugin_dir.empty()) {
    plugin_dir = (kubelet_dir / "plugins" / driver).string();
  }
  numa_attribute_form = numa_form == "list" ? dra::NumaAttributeForm::kList
                                            : dra::NumaAttributeForm::kScalar;
  for (const auto& [flag, text, parsed, positive] :
       {std::tuple{"--rescan-interval", &rescan_interval, &rescan_every, false},
        std::tuple{"--health-interval", &health_interval, &health_every, true},
        std::tuple{"--recovery-period", &recovery_period, &recovery, false}}) {
    auto duration = common::ParseDuration(*text);
    if (!duration.ok()) {
      return InvalidArgumentError(std::string(flag) + ": " +
                                  duration.status().message());
    }
    if (positive && duration->count() <= 0) {
      return InvalidArgumentError(std::string(flag) + ": must be positive");
    }
    *parsed = *duration;
  }
  return OkStatus();
}

}  // namespace topology::device_plugin
