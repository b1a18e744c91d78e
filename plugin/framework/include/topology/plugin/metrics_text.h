// Prometheus text exposition (format 0.0.4) of what the framework counts, for
// a plugin's /metrics:
//
//   MetricsText text;
//   WriteBuildInfo(text, "example_accel_plugin", "1.2.0");
//   WriteResourceMetrics(text, "example_accel_plugin", runner.resources());
//   text.Family("example_accel_plugin_rescans_total", "counter", "...");
//   text.Sample("example_accel_plugin_rescans_total", {}, rescans);
//   return text.str();
#ifndef TOPOLOGY_PLUGIN_METRICS_TEXT_H_
#define TOPOLOGY_PLUGIN_METRICS_TEXT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "topology/plugin/plugin_runner.h"

namespace topology::plugin {

// Escapes a label value: backslash, double quote and newline.
std::string PrometheusLabelValue(std::string_view value);

class MetricsText {
 public:
  using Labels = std::vector<std::pair<std::string, std::string>>;

  // # HELP and # TYPE lines; type is counter, gauge or histogram.
  void Family(std::string_view name, std::string_view type,
              std::string_view help);
  // name{label="value",...} value. Label values are escaped here.
  void Sample(std::string_view name, const Labels& labels, double value);
  void Sample(std::string_view name, const Labels& labels, uint64_t value);

  const std::string& str() const { return out_; }

 private:
  void Name(std::string_view name, const Labels& labels);
  std::string out_;
};

// <prefix>_build_info{version="...",api_version="v1beta1"} 1.
void WriteBuildInfo(MetricsText& text, std::string_view prefix,
                    std::string_view version);

// Per resource (label resource="<name>"): <prefix>_devices{health},
// _registered, _allocations_total, _allocation_errors_total,
// _preferred_allocations_total, _preferred_allocation_errors_total,
// _registrations_total, _registration_failures_total, _server_restarts_total,
// _list_updates_total, _streams and the _preferred_allocation_seconds
// histogram.
void WriteResourceMetrics(MetricsText& text, std::string_view prefix,
                          const std::vector<ResourcePublisher*>& resources);

}  // namespace topology::plugin

#endif  // TOPOLOGY_PLUGIN_METRICS_TEXT_H_
