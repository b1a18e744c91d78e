// The opt-in cost-based device selection of the host (--cost-based-
// selection, beyond the kubelet): when a container asks for several PCI
// device resources together, the device manager hands their candidate pools
// here and the cost graph (topology/cost_graph.h) picks the set with the
// lowest PCIe cost, instead of one resource at a time.
//
// Thread safety: the selector only reads `model`, which must outlive it.
#ifndef TOPOLOGY_HOST_COST_SELECTOR_H_
#define TOPOLOGY_HOST_COST_SELECTOR_H_

#include "topology/cost_model.h"
#include "topology/manager/device_manager.h"

namespace topology::host {

// A joint selector over `model` (not owned). A candidate that is not a PCI
// device of this machine fails the selection (INVALID_ARGUMENT naming it):
// the device manager then falls back to its per-resource choice.
manager::DeviceManager::JointSelector CostBasedSelector(const CostModel* model);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_COST_SELECTOR_H_
