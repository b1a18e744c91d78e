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
// in an environment variable.
//
//   accel-dra-driver --driver-name accel.example.com --class 1200
//                    [--vendor 1ded] [--node-name NODE] [--kubeconfig FILE]
//                    [--host-root /host] [--registry-dir DIR]
//                    [--plugin-dir DIR] [--cdi-dir /var/run/cdi] [-v N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <variant>
#include <vector>

// guide:includes
#include <glog/logging.h>  // LOG(); glog comes with libtopology::draplugin

#include "topology/discovery.h"
#include "topology/dra_attributes.h"
#include "topology/draplugin/claim_cdi.h"
#include "topology/draplugin/driver.h"
#include "topology/draplugin/kube_client.h"
#include "topology/draplugin/kube_config.h"
#include "topology/draplugin/resource_slices.h"
#include "topology/plugin/daemon.h"
#include "topology/plugin/logging.h"
#include "topology/sysfs_reader.h"
// guide:end

namespace dra = topology::draplugin;
namespace plugin = topology::plugin;

namespace {

struct Flags {
  std::string driver = "accel.example.com";
  std::string class_prefix = "1200";  // processing accelerators
  std::string vendor;                 // any
  std::string node;                   // default: NODE_NAME
  std::string kubeconfig;             // default: in-cluster credentials
  std::string host_root = "/";
  std::string registry_dir = dra::kDefaultRegistryDir;
  std::string plugin_dir;  // default: /var/lib/kubelet/plugins/<driver>
  std::string cdi_dir = "/var/run/cdi";
  int verbosity = 0;
};

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

// guide:inventory
// The devices: every PCI function whose class (six hex digits) starts with
// the prefix, as one slice device each, named after its address (a DNS
// label), with the standard attributes the Kubernetes helpers compute
// (libtopology computes them the same way; one it cannot compute is left
// out and logged) and the vendor's own, unqualified (the driver's domain).
std::vector<dra::SliceDevice> InventoryOf(
    const topology::Topology& topo, const topology::SysfsReader& sysfs,
    const Flags& flags, std::map<std::string, std::string>& addresses) {
  std::vector<dra::SliceDevice> devices;
  for (const topology::PciDevice& pci : topo.pci_devices()) {
    char class_hex[8];
    char vendor_hex[8];
    char device_hex[8];
    std::snprintf(class_hex, sizeof(class_hex), "%06x", pci.class_code);
    std::snprintf(vendor_hex, sizeof(vendor_hex), "%04x", pci.vendor_id);
    std::snprintf(device_hex, sizeof(device_hex), "%04x", pci.device_id);
    if (!std::string(class_hex).starts_with(flags.class_prefix)) continue;
    if (!flags.vendor.empty() && flags.vendor != vendor_hex) continue;
    const std::string address = pci.address.ToString();
    dra::SliceDevice device;
    device.name = "accel-" + address;
    for (char& c : device.name) {
      if (c == ':' || c == '.') c = '-';
    }
    const topology::dra::PciAttributes standard =
        topology::dra::StandardPciAttributes(
            sysfs, address, topology::dra::NumaAttributeForm::kScalar);
    for (const topology::dra::DeviceAttribute& a : standard.attributes) {
      if (const auto* text = std::get_if<std::string>(&a.value)) {
        device.attributes[a.name] = {*text, false};
      } else if (const auto* number = std::get_if<int64_t>(&a.value)) {
        device.attributes[a.name] = {*number, false};
      }
    }
    for (const auto& [name, why] : standard.omitted) {
      LOG(WARNING) << address << ": " << name << " left out: " << why.message();
    }
    // "0x10de", as sysfs writes them and topology-dra-driver publishes them.
    device.attributes["vendorID"] = {"0x" + std::string(vendor_hex), false};
    device.attributes["deviceID"] = {"0x" + std::string(device_hex), false};
    addresses[device.name] = address;
    devices.push_back(std::move(device));
  }
  return devices;
}
// guide:end

// guide:handler
// Prepare and Unprepare of one claim. The runner calls them for claims the
// kubelet sends, one call at a time per claim, and answers a repeated
// Prepare from its checkpoint; calls for different claims run
// concurrently, and everything here is read-only after construction.
class AcceleratorDriver : public dra::DriverHandler {
 public:
  AcceleratorDriver(Flags flags, std::map<std::string, std::string> addresses)
      : flags_(std::move(flags)), addresses_(std::move(addresses)) {}

  // One CDI spec for the claim: each device by name, and the claim's
  // addresses in one variable that every device of the claim sets alike.
  topology::StatusOr<std::vector<dra::PreparedDevice>> Prepare(
      const dra::Claim& claim) override {
    std::vector<plugin::CdiDevice> cdi;
    std::string visible;
    for (const dra::AllocationResult& result : claim.results) {
      const auto address = addresses_.find(result.device);
      if (result.pool != flags_.node || address == addresses_.end()) {
        return topology::NotFoundError("no device " + result.pool + "/" +
                                       result.device + " on this node");
      }
      cdi.push_back({.name = result.device});
      visible += (visible.empty() ? "" : ",") + address->second;
    }
    auto ids = dra::WriteClaimCdiSpec(
        flags_.cdi_dir, flags_.driver, flags_.driver + "/accel", claim.ref.uid,
        std::move(cdi), {{"ACCEL_VISIBLE_DEVICES", visible}});
    if (!ids.ok()) return ids.status();
    std::vector<dra::PreparedDevice> prepared;
    for (size_t i = 0; i < claim.results.size(); ++i) {
      prepared.push_back({.pool = claim.results[i].pool,
                          .device = claim.results[i].device,
                          .cdi_device_ids = {(*ids)[i]}});
    }
    return prepared;
  }

  // After a restart the runner passes the checkpointed devices; the spec's
  // name comes from the claim alone, so that is all this needs.
  topology::Status Unprepare(
      const dra::ClaimRef& claim,
      const std::vector<dra::PreparedDevice>& /*devices*/) override {
    return dra::RemoveClaimCdiSpec(flags_.cdi_dir, flags_.driver, claim.uid);
  }

 private:
  const Flags flags_;
  const std::map<std::string, std::string> addresses_;  // name -> address
};
// guide:end

// guide:run
int Run(const Flags& flags) {
  plugin::BlockShutdownSignals();  // before any thread starts
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
                                           .plugin_dir = flags.plugin_dir},
                                          &source, &driver);
  if (!runner.ok()) {
    LOG(ERROR) << runner.status().ToString();
    return 2;
  }
  if (auto started = (*runner)->Start(); !started.ok()) {
    LOG(ERROR) << "cannot serve: " << started.ToString();
    return 1;
  }

  const int signal = plugin::WaitForShutdownSignal();
  LOG(INFO) << "signal " << signal << ": stopping";
  plugin::ExitIfStillRunningAfter(std::chrono::milliseconds(4500), 0);
  (*runner)->Stop();  // removes both sockets; prepared claims stay
  publisher.Stop();
  return 0;
}
// guide:end

}  // namespace

int main(int argc, char** argv) {
  Flags flags;
  if (!ParseFlags(argc, argv, flags)) return 2;
  plugin::InitLogging(argv[0], flags.verbosity);  // klog-format lines
  return Run(flags);
}
