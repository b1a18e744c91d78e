// The DRA health streams (DRAResourceHealth.NodeWatchResources, v1 and
// v1alpha1: the same messages), apart from the claims and the registration
// as the Go helper keeps them: each health source's last report kept
// packed, sent to every stream as a message of its own when it changes and
// at each refresh (the 1.37 helper's partial reports: the kubelet keeps a
// device a message leaves out until its timeout), each stream ended at
// Stop. Thread-safe. Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_
#define TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include "topology/clock.h"
#include "topology/draplugin/driver.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

class HealthStreams {
 public:
  // `timeout`: sent with every device's health that names none of its
  // own (the kubelet takes Unknown after this long without an update).
  // `clock` dates the reports; not owned.
  HealthStreams(std::chrono::seconds timeout, const Clock* clock);
  ~HealthStreams();
  HealthStreams(const HealthStreams&) = delete;
  HealthStreams& operator=(const HealthStreams&) = delete;

  // `source`'s report, replacing its last, sent to every stream.
  void Report(const std::string& source, std::vector<DeviceHealth> devices)
      TOPOLOGY_EXCLUDES(mu_);
  // Every source's last report sent again, with the time of now.
  void Refresh() TOPOLOGY_EXCLUDES(mu_);
  // Every stream ends, and a stream opened later ends at once. Idempotent.
  void Stop() TOPOLOGY_EXCLUDES(mu_);

  // The services to register ("/v1.DRAResourceHealth/NodeWatchResources",
  // "/v1alpha1.DRAResourceHealth/NodeWatchResources").
  grpc::Service* v1() { return v1_.get(); }
  grpc::Service* v1alpha1() { return v1alpha1_.get(); }

 private:
  struct List;
  class Service;
  grpc::Status Watch(grpc::ServerContext* context,
                     grpc::ServerWriter<grpc::ByteBuffer>* writer)
      TOPOLOGY_EXCLUDES(mu_);

  int64_t Date() const;

  // A source's last report: its list, when it was sent, and the version
  // (of version_) it was last changed or refreshed at.
  struct SourceReport {
    std::shared_ptr<const List> list;
    int64_t time = 0;
    uint64_t version = 0;
  };

  const std::chrono::seconds timeout_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::condition_variable_any changed_;  // reports_, version_, stopping_
  std::map<std::string, SourceReport> reports_ TOPOLOGY_GUARDED_BY(mu_);
  uint64_t version_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha1_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_
