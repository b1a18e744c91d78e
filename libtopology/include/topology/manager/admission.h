// The outcome of admitting a pod. A rejection is a successful call carrying
// admit = false, never an error Status.
//
// Thread safety: a value type.
#ifndef TOPOLOGY_MANAGER_ADMISSION_H_
#define TOPOLOGY_MANAGER_ADMISSION_H_

#include <string>

namespace topology::manager {

inline constexpr char kTopologyAffinityError[] = "TopologyAffinityError";
inline constexpr char kTopologyAffinityMessage[] =
    "Resources cannot be allocated with Topology locality";
inline constexpr char kUnexpectedAdmissionError[] = "UnexpectedAdmissionError";

struct AdmitResult {
  bool admit = true;
  std::string reason = {};   // empty when admitted
  std::string message = {};  // empty when admitted
};

}  // namespace topology::manager

#endif  // TOPOLOGY_MANAGER_ADMISSION_H_
