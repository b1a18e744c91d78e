// accel-plugin: a complete device plugin built on libtopology's framework,
// the program docs/plugin-author-guide.md walks through (the guide quotes
// the parts between the "guide:" markers; a test keeps them identical).
//
// It advertises the PCI functions of one class (and optionally one vendor)
// as an extended resource with their NUMA nodes, answers
// GetPreferredAllocation with the cheapest set by PCIe and NUMA cost, hands
// out the chosen addresses in an environment variable and CDI names, and
// marks a device Unhealthy while its driver is unbound or its AER fatal
// counter rises, Healthy again after a quiet minute.
//
//   accel-plugin --resource example.com/accel --class 1200 [--vendor 1ded]
//                [--host-root /host] [--plugin-dir DIR]
//                [--http-addr 127.0.0.1:8082] [-v N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

// guide:includes
#include <glog/logging.h>  // LOG(); glog comes with libtopology::deviceplugin

#include "topology/common/logging.h"
#include "topology/cost_model.h"
#include "topology/device_selection.h"
#include "topology/discovery.h"
#include "topology/plugin/health.h"
#include "topology/plugin/http_endpoint.h"
#include "topology/plugin/metrics_text.h"
#include "topology/plugin/plugin_runner.h"
#include "topology/plugin/rescan_loop.h"
#include "topology/sysfs_reader.h"
// guide:end

namespace common = topology::common;
namespace plugin = topology::plugin;

namespace {

struct Flags {
  std::string resource = "example.com/accel";
  std::string class_prefix = "1200";  // processing accelerators
  std::string vendor;                 // any
  std::string host_root = "/";
  std::string plugin_dir = plugin::kDefaultPluginDir;
  std::string http_addr;  // /healthz, /readyz, /metrics; empty: none
  int verbosity = 0;
};

// Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad usage.
bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--version") {
      std::cout << "accel-plugin (libtopology framework)\n";
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::cerr << "accel-plugin: " << arg
                << ": missing value or unknown flag\n";
      return false;
    }
    const std::string value = argv[++i];
    if (arg == "--resource") {
      flags.resource = value;
    } else if (arg == "--class") {
      flags.class_prefix = value;
    } else if (arg == "--vendor") {
      flags.vendor = value;
    } else if (arg == "--host-root") {
      flags.host_root = value;
    } else if (arg == "--http-addr") {
      flags.http_addr = value;
    } else if (arg == "--plugin-dir") {
      flags.plugin_dir = value;
    } else if (arg == "-v" || arg == "--v") {
      flags.verbosity = std::atoi(value.c_str());
    } else {
      std::cerr << "accel-plugin: unknown flag " << arg << "\n";
      return false;
    }
  }
  return true;
}

// guide:discover
// The devices: every PCI function whose class (six hex digits) starts with
// the prefix, with the NUMA nodes libtopology resolved for it (sysfs
// numa_node, else local_cpulist, else the bridges above it).
std::vector<plugin::Device> DevicesOf(const topology::Topology& topo,
                                      const Flags& flags) {
  std::vector<plugin::Device> devices;
  for (const topology::PciDevice& pci : topo.pci_devices()) {
    char class_hex[8];
    char vendor_hex[8];
    std::snprintf(class_hex, sizeof(class_hex), "%06x", pci.class_code);
    std::snprintf(vendor_hex, sizeof(vendor_hex), "%04x", pci.vendor_id);
    if (!std::string(class_hex).starts_with(flags.class_prefix)) continue;
    if (!flags.vendor.empty() && flags.vendor != vendor_hex) continue;
    plugin::Device device{.id = pci.address.ToString()};
    for (int node : pci.numa_nodes) device.numa_nodes.push_back(node);
    devices.push_back(std::move(device));
  }
  return devices;
}
// guide:end

// guide:handler
// What the kubelet may ask about one resource. Calls arrive concurrently on
// gRPC threads; everything here is read-only after construction.
class AcceleratorHandler : public plugin::ResourceHandler {
 public:
  AcceleratorHandler(std::shared_ptr<const topology::Topology> topo,
                     std::string resource)
      : topo_(std::move(topo)),
        model_(*topo_),
        resource_(std::move(resource)) {}

  plugin::DevicePluginOptions Options() const override {
    return {.pre_start_required = false,
            .get_preferred_allocation_available = true};
  }

  // The cheapest set by PCIe and NUMA distance. Any failure falls back to a
  // valid answer: an error here would fail the pod's admission.
  topology::StatusOr<std::vector<std::string>> GetPreferredAllocation(
      const plugin::PreferredAllocationRequest& request) override {
    topology::SelectionRequest selection{.size = request.size};
    for (const std::string& id : request.available) {
      auto address = topology::PciAddress::Parse(id);
      if (!address.ok()) return plugin::MustIncludeThenInOrder(request);
      selection.available.push_back(*address);
    }
    for (const std::string& id : request.must_include) {
      auto address = topology::PciAddress::Parse(id);
      if (!address.ok()) return plugin::MustIncludeThenInOrder(request);
      selection.must_include.push_back(*address);
    }
    auto chosen = topology::DeviceSelector(model_).Select(selection);
    if (!chosen.ok()) {
      LOG(WARNING) << resource_ << ": no cost-based choice ("
                   << chosen.status().message() << "); answering in order";
      return plugin::MustIncludeThenInOrder(request);
    }
    std::vector<std::string> ids;
    for (const topology::PciAddress& address : chosen->devices) {
      ids.push_back(address.ToString());
    }
    return ids;
  }

  // What the container gets: the addresses in an environment variable and
  // one CDI device per function. A CDI-enabled runtime refuses a name that
  // no spec defines: the accelerator's driver package installs the spec
  // for example.com/accel in /etc/cdi (or write one at start with
  // common::WriteCdiSpec, topology/common/cdi.h).
  topology::StatusOr<plugin::ContainerAllocation> Allocate(
      const std::vector<std::string>& ids) override {
    plugin::ContainerAllocation out;
    std::string list;
    for (const std::string& id : ids) {
      list += (list.empty() ? "" : ",") + id;
      out.cdi_devices.push_back("example.com/accel=" + id);
    }
    out.envs["ACCEL_VISIBLE_DEVICES"] = list;
    return out;
  }

 private:
  std::shared_ptr<const topology::Topology> topo_;
  topology::CostModel model_;  // refers to *topo_
  std::string resource_;
};
// guide:end

// guide:health
// Re-reads each device's driver binding and AER counter on every pass of
// the framework's rescan loop (every few seconds) and publishes the list
// when a health changes. HealthTracker keeps a faulted device Unhealthy
// until a quiet period has passed. Passes run one at a time on the loop's
// thread, so the tracker needs no lock.
class HealthCheck {
 public:
  HealthCheck(const topology::SysfsReader& sysfs,
              plugin::ResourcePublisher& publisher)
      : sysfs_(sysfs), publisher_(publisher) {}

  void Pass(const plugin::RescanLoop::Pass& pass) {
    std::vector<plugin::Device> devices = publisher_.devices();
    for (plugin::Device& device : devices) {
      auto address = topology::PciAddress::Parse(device.id);
      if (!address.ok()) continue;
      const plugin::HealthVerdict verdict = tracker_.Observe(
          *address, plugin::ReadPciHealth(sysfs_, *address), pass.now);
      if (verdict.health != device.health) {
        LOG(INFO) << device.id << " is " << plugin::HealthName(verdict.health)
                  << (verdict.reason.empty() ? "" : ": " + verdict.reason);
      }
      device.health = verdict.health;
    }
    const topology::Status published = publisher_.SetDevices(devices);
    if (!published.ok()) {
      LOG(ERROR) << publisher_.resource_name()
                 << ": cannot publish devices: " << published.ToString();
    }
  }

 private:
  const topology::SysfsReader& sysfs_;
  plugin::ResourcePublisher& publisher_;
  plugin::HealthTracker tracker_{std::chrono::minutes(1)};
};
// guide:end

// guide:http
// /healthz (alive), /readyz (registered with the kubelet) and /metrics:
// what the framework counts per resource, plus the build.
topology::StatusOr<std::unique_ptr<plugin::HttpEndpoint>> ServeHttp(
    const Flags& flags, plugin::PluginRunner& runner) {
  return plugin::HttpEndpoint::Start(
      flags.http_addr,
      {.health_problem = [] { return std::string(); },
       .readiness_problem =
           [&runner] {
             std::string problem;
             for (const plugin::ResourcePublisher* resource :
                  runner.resources()) {
               if (!resource->registered()) {
                 problem += resource->resource_name() + " is not registered; ";
               }
             }
             return problem;
           },
       .metrics =
           [&runner] {
             plugin::MetricsText text;
             plugin::WriteBuildInfo(text, "accel_plugin", "1.0.0");
             plugin::WriteResourceMetrics(text, "accel_plugin",
                                          runner.resources());
             return text.str();
           },
       .server_name = "accel-plugin"});
}
// guide:end

// guide:main
int Run(const Flags& flags, const char* argv0) {
  // Before any thread: gRPC's engine, klog-format logs, signals blocked.
  const common::DaemonProcess process{.verbosity = flags.verbosity};
  common::SetUpDaemon(argv0, process);

  topology::DiscoveryOptions options;
  options.host_root = flags.host_root;  // the host's sys/ in a container
  options.use_hwloc = false;            // CPU topology is not needed here
  auto discovered = topology::Discover(options);
  if (!discovered.ok()) {
    LOG(ERROR) << "cannot read the topology below " << flags.host_root << ": "
               << discovered.status().ToString();
    return 1;
  }
  auto topo =
      std::make_shared<const topology::Topology>(std::move(*discovered));
  std::vector<plugin::Device> devices = DevicesOf(*topo, flags);
  LOG(INFO) << flags.resource << ": " << devices.size()
            << " device(s) of class " << flags.class_prefix << "*";

  plugin::PluginRunner runner(
      {.plugin_dir = flags.plugin_dir, .socket_prefix = "accel"});
  auto publisher = runner.AddResource(
      flags.resource,
      std::make_shared<AcceleratorHandler>(topo, flags.resource),
      std::move(devices));
  if (!publisher.ok()) {
    LOG(ERROR) << "cannot add " << flags.resource << ": "
               << publisher.status().ToString();
    return 2;
  }
  if (const topology::Status started = runner.Start(); !started.ok()) {
    LOG(ERROR) << "cannot serve in " << flags.plugin_dir << ": "
               << started.ToString();
    return 1;
  }

  std::unique_ptr<plugin::HttpEndpoint> http;
  if (!flags.http_addr.empty()) {
    auto endpoint = ServeHttp(flags, runner);
    if (!endpoint.ok()) {
      LOG(ERROR) << "cannot serve " << flags.http_addr << ": "
                 << endpoint.status().ToString();
      runner.Stop();
      return 1;
    }
    http = std::move(*endpoint);
  }

  auto sysfs = topology::NewHostRootReader(flags.host_root);
  HealthCheck health(*sysfs, **publisher);
  plugin::RescanLoop loop({.interval = std::chrono::seconds(5)});
  loop.RequestPass();  // the first check at once
  loop.Start([&](const plugin::RescanLoop::Pass& pass) { health.Pass(pass); });

  common::AwaitShutdown(process);  // SIGTERM; the stop has 4.5 s
  loop.Stop();
  http.reset();
  runner.Stop();  // ends the streams, removes the socket
  return 0;
}
// guide:end

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) return 2;
  return Run(flags, argv[0]);
}
