// Writes a node's NodeResourceTopology: only when what it says changed
// (at the first write the object the API server holds is read, so a
// restarted exporter writes nothing when nothing changed), created when
// missing, updated on the resourceVersion of the last write (one request);
// a conflict (someone else wrote it meanwhile) is retried from a fresh
// read. Labels and annotations others set on it are kept.
#ifndef TOPOLOGY_NRT_PUBLISHER_H_
#define TOPOLOGY_NRT_PUBLISHER_H_

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "topology/draplugin/kube_client.h"
#include "topology/status.h"

namespace topology::nrt {

class Publisher {
 public:
  explicit Publisher(draplugin::KubeClient* client) : client_(client) {}

  // OK once the API server holds `object` (rendered by Render()); the
  // error otherwise (the caller keeps it and tries again). Not
  // thread-safe: one caller.
  Status Publish(const nlohmann::json& object);

  struct Stats {
    uint64_t creates = 0;
    uint64_t updates = 0;
    uint64_t unchanged = 0;  // the stored object said the same already
    uint64_t conflicts = 0;
  };
  const Stats& stats() const { return stats_; }

  // The fields a write sets, for comparing two objects.
  static bool SameContent(const nlohmann::json& a, const nlohmann::json& b);

 private:
  Status Write(const nlohmann::json& object);
  // One PUT of `current` with `object`'s fields; what the server answered
  // becomes stored_ (forgotten on an error).
  Status Update(const std::string& path, const nlohmann::json& current,
                const nlohmann::json& object);
  // `current` (as stored) with the fields `object` sets.
  static nlohmann::json Updated(nlohmann::json current,
                                const nlohmann::json& object);

  // What the API server was last known to hold, as it sent it (text: a
  // tenth of the memory of its parsed form, which an idle exporter would
  // keep); empty when unknown.
  std::string stored_;
  draplugin::KubeClient* client_;
  Stats stats_;
};

}  // namespace topology::nrt

#endif  // TOPOLOGY_NRT_PUBLISHER_H_
