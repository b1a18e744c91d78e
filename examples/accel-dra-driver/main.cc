// accel-dra-driver: a complete DRA driver built on libtopology's DRA
// framework, the program docs/dra-driver-guide.md walks through (the guide
// quotes the parts between the "guide:" markers; a test keeps them
// identical).
//
// It publishes the PCI functions of one class (and optionally one vendor) as
// this node's pool of ResourceSlices, each device with the standard
// topology attributes (resource.kubernetes.io/pciBusID, pcieRoot, numaNode),
// so that a claim can ask for devices under one PCIe root; and it prepares a
// claim's devices as one CDI spec giving the container the chosen addresses
// in an environment variable. With --share-percent, each accelerator is
// shared by capacity: claims get shares of its compute.
//
//   accel-dra-driver --driver-name accel.example.com --class 1200
//                    [--vendor 1ded] [--node-name NODE] [--kubeconfig FILE]
//                    [--host-root /host] [--registry-dir DIR]
//                    [--plugin-dir DIR] [--cdi-dir /var/run/cdi]
//                    [--share-percent 25] [-v N]
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "accel_driver.h"  // the inventory, the claim handler, the includes

namespace {

using accel::AcceleratorDriver;
using accel::Flags;
using accel::InventoryOf;
namespace dra = accel::dra;
namespace common = accel::common;

// Exit codes: 0 stopped by a signal, 1 runtime failure, 2 bad usage.
bool ParseFlags(int argc, char** argv, Flags& flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--version") {
      std::cout << "accel-dra-driver (libtopology DRA framework)\n";
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::cerr << "accel-dra-driver: " << arg
                << ": missing value or unknown flag\n";
      return false;
    }
    const std::string value = argv[++i];
    if (arg == "--driver-name") {
      flags.driver = value;
    } else if (arg == "--class") {
      flags.class_prefix = value;
    } else if (arg == "--vendor") {
      flags.vendor = value;
    } else if (arg == "--node-name") {
      flags.node = value;
    } else if (arg == "--kubeconfig") {
      flags.kubeconfig = value;
    } else if (arg == "--host-root") {
      flags.host_root = value;
    } else if (arg == "--registry-dir") {
      flags.registry_dir = value;
    } else if (arg == "--plugin-dir") {
      flags.plugin_dir = value;
    } else if (arg == "--cdi-dir") {
      flags.cdi_dir = value;
    } else if (arg == "--share-percent") {
      flags.share_percent = std::atoi(value.c_str());
      if (flags.share_percent < 0 || flags.share_percent > 50) {
        std::cerr << "accel-dra-driver: --share-percent: 0 (whole devices) "
                     "to 50\n";
        return false;
      }
    } else if (arg == "-v" || arg == "--v") {
      flags.verbosity = std::atoi(value.c_str());
    } else {
      std::cerr << "accel-dra-driver: unknown flag " << arg << "\n";
      return false;
    }
  }
  if (flags.node.empty()) {
    if (const char* env = std::getenv("NODE_NAME")) flags.node = env;
  }
  if (flags.node.empty()) {
    std::cerr << "accel-dra-driver: --node-name or NODE_NAME is needed\n";
    return false;
  }
  return true;
}

// guide:run
int Run(const Flags& flags, const char* argv0) {
  // Before any thread: gRPC's engine, klog-format logs, signals blocked.
  const common::DaemonProcess process{.verbosity = flags.verbosity};
  common::SetUpDaemon(argv0, process);
  auto topo = topology::Discover({.host_root = flags.host_root});
  if (!topo.ok()) {
    LOG(ERROR) << "discovery: " << topo.status().ToString();
    return 1;
  }
  auto sysfs = topology::NewHostRootReader(flags.host_root);
  std::map<std::string, std::string> addresses;
  std::vector<dra::SliceDevice> devices =
      InventoryOf(*topo, *sysfs, flags, addresses);
  LOG(INFO) << devices.size() << " device(s) of class " << flags.class_prefix
            << "*";

  // The API server: a kubeconfig, else the pod's service account.
  auto credentials = flags.kubeconfig.empty()
                         ? dra::InClusterConfig()
                         : dra::LoadKubeConfig(flags.kubeconfig);
  if (!credentials.ok()) {
    LOG(ERROR) << credentials.status().ToString();
    return 2;
  }
  auto client = dra::KubeClient::Create(std::move(*credentials));
  if (!client.ok()) {
    LOG(ERROR) << client.status().ToString();
    return 2;
  }

  // This node's pool. An unchanged inventory sends nothing; slices that
  // vanish (the kubelet deletes its node's slices at its start) are
  // published again by the resync.
  dra::SlicePublisher publisher(client->get(), flags.driver, flags.node, {});
  if (auto published = publisher.Publish(flags.node, devices);
      !published.ok()) {
    LOG(ERROR) << "publishing: " << published.ToString();  // retried
  }
  publisher.Start();

  // The runtime reads the claims' CDI specs from here (they are 0644).
  std::error_code error;
  std::filesystem::create_directories(flags.cdi_dir, error);
  std::filesystem::permissions(flags.cdi_dir,
                               std::filesystem::perms::owner_all |
                                   std::filesystem::perms::group_read |
                                   std::filesystem::perms::group_exec |
                                   std::filesystem::perms::others_read |
                                   std::filesystem::perms::others_exec,
                               error);
  if (error) {
    LOG(ERROR) << "cannot make " << flags.cdi_dir << ": " << error.message();
    return 1;
  }

  // The kubelet's side: registration, the DRA services, the checkpoint.
  dra::ApiClaimSource source(client->get());
  AcceleratorDriver driver(flags, std::move(addresses));
  auto runner = dra::DriverRunner::Create({.driver_name = flags.driver,
                                           .registry_dir = flags.registry_dir,
                                           .plugin_dir = flags.plugin_dir,
                                           .cdi_dir = flags.cdi_dir},
                                          &source, &driver);
  if (!runner.ok()) {
    LOG(ERROR) << runner.status().ToString();
    return 2;
  }
  if (auto started = (*runner)->Start(); !started.ok()) {
    LOG(ERROR) << "cannot serve: " << started.ToString();
    return 1;
  }

  common::AwaitShutdown(process);  // SIGTERM; the stop has 4.5 s
  (*runner)->Stop();               // removes both sockets; prepared claims stay
  publisher.Stop();
  return 0;
}
// guide:end

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) return 2;
  return Run(flags, argv[0]);
}
