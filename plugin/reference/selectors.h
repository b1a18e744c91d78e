// Which resource claims which PCI function.
#ifndef TOPOLOGY_DEVICE_PLUGIN_SELECTORS_H_
#define TOPOLOGY_DEVICE_PLUGIN_SELECTORS_H_

#include <string>
#include <utility>
#include <vector>

#include "topology/pci_device.h"
#include "topology/sysfs_reader.h"
#include "topology/topology.h"

#include "config.h"

namespace topology::device_plugin {

// What selectors look at beyond PciDevice.
struct DeviceFacts {
  std::vector<std::string> pf_netdevs;  // network interfaces of the PF (VFs)
  int vf_index = -1;                    // index among the PF's VFs
};

DeviceFacts GatherFacts(const Topology& topology, const PciDevice& device,
                        const SysfsReader& reader);

bool Matches(const Selector& selector, const PciDevice& device,
             const DeviceFacts& facts);

// Which resource (an index into Config::resources) claims each device:
// entries sorted by address, 16 bytes each (a plugin keeps one per device it
// serves, 10,000 and more).
class Claims {
 public:
  using Entry = std::pair<PciAddress, size_t>;
  using const_iterator = std::vector<Entry>::const_iterator;

  Claims() = default;
  // Sorts; the first entry of an address repeated wins.
  explicit Claims(std::vector<Entry> entries);

  const_iterator begin() const { return entries_.begin(); }
  const_iterator end() const { return entries_.end(); }
  size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  const_iterator find(const PciAddress& address) const;
  bool contains(const PciAddress& address) const {
    return find(address) != end();
  }
  // The resource of `address`; std::out_of_range when none claims it.
  size_t at(const PciAddress& address) const;

 private:
  std::vector<Entry> entries_;
};

// Resource index per claimed device. PCI-to-PCI bridges (class 0604) are
// never claimed; other bridge classes can be. Devices in
// `previous` that still exist keep their resource (a driver unbind must
// mark a device unhealthy, not move it out of its resource); new devices go
// to the first resource with a matching selector.
Claims AssignDevices(const Config& config, const Topology& topology,
                     const SysfsReader& reader, const Claims& previous);

// One message per pfNames entry that names no network interface of any PCI
// function on the host ("resources[1].selectors[0].pfNames[0]: ens9f0 is
// not a network interface of any PCI function (there is: ens1f0, ...)"):
// such an entry matches nothing, which is otherwise silent.
std::vector<std::string> PfNamesWithoutInterface(const Config& config,
                                                 const Topology& topology);

}  // namespace topology::device_plugin

#endif  // TOPOLOGY_DEVICE_PLUGIN_SELECTORS_H_
