#include "cost_selector.h"

#include <map>
#include <string>
#include <vector>

#include <glog/logging.h>

#include "topology/cost_graph.h"
#include "topology/pci_address.h"

namespace topology::host {

manager::DeviceManager::JointSelector CostBasedSelector(
    const CostModel* model) {
  return
      [model](
          const std::map<std::string, manager::DeviceManager::JointPool>& pools)
          -> StatusOr<std::map<std::string, std::vector<std::string>>> {
        GraphRequest request;
        for (const auto& [resource, pool] : pools) {
          ResourceRequest r;
          r.name = resource;
          r.count = pool.count;
          for (const std::string& id : pool.candidates) {
            auto address = PciAddress::Parse(id);
            if (!address.ok() ||
                model->topology().FindDevice(*address) == nullptr) {
              return InvalidArgumentError(id + " is not a PCI device here");
            }
            r.pool.push_back(GraphInstance{.device = *address});
          }
          request.resources.push_back(std::move(r));
        }
        auto selection = CostGraphSelector(*model).Select(request);
        if (!selection.ok()) return selection.status();
        std::map<std::string, std::vector<std::string>> out;
        for (const auto& [resource, instances] : selection->selection) {
          for (const GraphInstance& instance : instances) {
            out[resource].push_back(instance.device->ToString());
          }
        }
        VLOG(1) << "cost-based selection: " << selection->explanation;
        return out;
      };
}

}  // namespace topology::host
