// The host module's checkpoint format: the admitted pods with their
// devices and CPUs, and the resources registered before a restart. JSON
// {"version":1,"checksum":"<FNV-1a 64 of data>","data":{"pods":[...],
// "registered":{resource:[healthy ids]}}}. Decoding checks structure, types
// and checksum only; whether the contents fit the machine (devices held
// twice, unknown CPUs) is the restoring manager's to check.
#ifndef TOPOLOGY_HOST_CHECKPOINT_H_
#define TOPOLOGY_HOST_CHECKPOINT_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "topology/manager/pod.h"
#include "topology/status.h"

#include "host_manager.h"

namespace topology::host {

struct CheckpointPod {
  manager::Pod pod;
  std::vector<ContainerResult> containers;  // what each container holds
};

struct Checkpoint {
  std::vector<CheckpointPod> pods;
  std::map<std::string, std::vector<std::string>> registered;
};

// The document, one line, ending in a newline.
std::string EncodeCheckpoint(const Checkpoint& checkpoint);

// DATA_LOSS naming what is wrong (not JSON, a missing or mistyped field,
// a checksum mismatch, a bad CPU list); never throws.
StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text);

}  // namespace topology::host

#endif  // TOPOLOGY_HOST_CHECKPOINT_H_
