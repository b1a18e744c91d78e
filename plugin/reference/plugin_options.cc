#include "plugin_options.h"

#include <tuple>
#include <utility>

#include "topology/common/duration.h"

namespace topology::device_plugin {

void DevicePluginOptions::AddFlags(CLI::App& app) {
  app.add_option("--config", config_file, "YAML configuration file")
      ->required();
  app.add_option("--plugin-dir", plugin_dir,
                 "Directory of kubelet.sock and the plugin sockets")
      ->capture_default_str();
  app.add_option("--host-root", host_root,
                 "Directory whose sys/ (and dev/) are the host's")
      ->capture_default_str();
  app.add_option("--rescan-interval", rescan_interval,
                 "Period of the reconcile: AER counters while uevents are "
                 "watched, full rescans without (Go duration; 0 disables)")
      ->capture_default_str();
  app.add_option("--recovery-period", recovery_period,
                 "Quiet time before a faulted device is Healthy again")
      ->capture_default_str();
  app.add_option("--cdi-dir", cdi_dir,
                 "Where the CDI specs of resources with a cdiKind are written "
                 "(empty: none, and no CDI names returned for them)")
      ->capture_default_str();
  app.add_option("--http-addr", http_addr,
                 "host:port of /healthz, /readyz and /metrics (empty "
                 "disables)")
      ->capture_default_str();
  app.add_option("--dra-claims", dra_claims,
                 "topology-dra-driver's checkpoint of prepared claims on this "
                 "node: the devices its claims hold are not offered (empty: "
                 "not read)")
      ->capture_default_str();
  // Two flags rather than CLI11's "--uevents,!--no-uevents", whose help
  // shows the negated name's "{false}" for what is on by default.
  app.add_flag_callback(
      "--uevents", [this] { watch_uevents = true; },
      "Watch kernel uevents for hot-plug and driver changes (the default)");
  app.add_flag_callback(
      "--no-uevents", [this] { watch_uevents = false; },
      "Periodic full rescans instead of uevents: for a recorded --host-root, "
      "where no uevent arrives");
  app.add_flag("--print-matches", print_matches,
               "Print the devices each resource claims and exit");
  app.add_option("-v,--v", verbosity, "Log verbosity (klog -v)")
      ->capture_default_str();
}

Status DevicePluginOptions::Complete() {
  for (const auto& [flag, text, parsed] :
       {std::tuple{"--rescan-interval", &rescan_interval, &rescan_every},
        std::tuple{"--recovery-period", &recovery_period, &recovery}}) {
    auto duration = common::ParseDuration(*text);
    if (!duration.ok()) {
      return InvalidArgumentError(std::string(flag) + ": " +
                                  duration.status().message());
    }
    *parsed = *duration;
  }
  return OkStatus();
}

PluginOptions DevicePluginOptions::ToPluginOptions(Config config) const {
  PluginOptions options;
  options.config = std::move(config);
  options.host_root = host_root;
  options.runner.plugin_dir = plugin_dir;
  // --print-matches only looks: it writes no spec.
  options.cdi_dir = print_matches ? std::string() : cdi_dir;
  options.watch_uevents = watch_uevents && !print_matches;
  options.dra_claims = dra_claims;
  options.rescan_interval = rescan_every;
  options.recovery_period = recovery;
  return options;
}

}  // namespace topology::device_plugin
