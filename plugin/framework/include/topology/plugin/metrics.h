// Counters and a latency histogram that the framework keeps per resource,
// shaped for the Prometheus text format.
#ifndef TOPOLOGY_PLUGIN_METRICS_H_
#define TOPOLOGY_PLUGIN_METRICS_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

#include "topology/export.h"  // C++20 check

namespace topology::plugin {

// Fixed buckets in seconds: 0.25 ms .. 1 s, then +Inf. Lock-free.
class LatencyHistogram {
 public:
  static constexpr std::array<double, 10> kBounds = {
      0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0};

  void Observe(std::chrono::nanoseconds latency);

  struct Snapshot {
    std::array<uint64_t, kBounds.size() + 1> cumulative{};  // last = +Inf
    uint64_t count = 0;
    double sum_seconds = 0;
  };
  Snapshot Read() const;

 private:
  std::array<std::atomic<uint64_t>, kBounds.size() + 1> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_nanos_{0};
};

struct ResourceStats {
  uint64_t registrations = 0;          // accepted Register calls
  uint64_t registration_failures = 0;  // failed Register attempts
  uint64_t server_restarts = 0;        // new sockets after the first
  uint64_t allocate_calls = 0;         // container requests answered
  uint64_t allocate_errors = 0;
  uint64_t preferred_calls = 0;
  uint64_t preferred_errors = 0;
  uint64_t list_updates = 0;  // device lists published after the first
  uint64_t open_streams = 0;
  LatencyHistogram::Snapshot preferred_latency = {};
};

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_METRICS_H_
