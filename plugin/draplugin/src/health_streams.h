// The DRA health streams (DRAResourceHealth.NodeWatchResources, v1 and
// v1alpha1: the same messages), apart from the claims and the registration
// as the Go helper keeps them: every device's health kept packed, sent to
// every stream when it changes and at each refresh, each stream ended at
// Stop. Thread-safe. Private to the DRA framework.
#ifndef TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_
#define TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/service_type.h>

#include "topology/clock.h"
#include "topology/draplugin/driver.h"
#include "topology/thread_annotations.h"

namespace topology::draplugin {

class HealthStreams {
 public:
  // `timeout`: sent with every device's health (the kubelet takes Unknown
  // after this long without an update). `clock` dates the reports; not
  // owned.
  HealthStreams(std::chrono::seconds timeout, const Clock* clock);
  ~HealthStreams();
  HealthStreams(const HealthStreams&) = delete;
  HealthStreams& operator=(const HealthStreams&) = delete;

  // Every device's health, sent to every stream.
  void Set(std::vector<DeviceHealth> devices) TOPOLOGY_EXCLUDES(mu_);
  // The same list sent again, with the time of now.
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

  const std::chrono::seconds timeout_;
  const Clock* const clock_;
  mutable Mutex mu_;
  std::condition_variable_any changed_;  // list_, time_, stopping_
  std::shared_ptr<const List> list_ TOPOLOGY_GUARDED_BY(mu_);
  int64_t time_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  uint64_t version_ TOPOLOGY_GUARDED_BY(mu_) = 0;
  bool stopping_ TOPOLOGY_GUARDED_BY(mu_) = false;
  std::unique_ptr<grpc::Service> v1_;
  std::unique_ptr<grpc::Service> v1alpha1_;
};

}  // namespace topology::draplugin

#endif  // TOPOLOGY_DRAPLUGIN_HEALTH_STREAMS_H_
