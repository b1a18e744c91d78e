#include "topology/plugin/metrics_text.h"

#include <cstdio>

#include "topology/plugin/types.h"

namespace topology::plugin {

std::string PrometheusLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    if (c == '\\' || c == '"') out += '\\';
    out += c;
  }
  return out;
}

void MetricsText::Family(std::string_view name, std::string_view type,
                         std::string_view help) {
  out_.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out_.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void MetricsText::Name(std::string_view name, const Labels& labels) {
  out_.append(name);
  if (labels.empty()) return;
  out_ += '{';
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out_ += ',';
    out_.append(labels[i].first)
        .append("=\"")
        .append(PrometheusLabelValue(labels[i].second))
        .append("\"");
  }
  out_ += '}';
}

void MetricsText::Sample(std::string_view name, const Labels& labels,
                         double value) {
  Name(name, labels);
  char number[32];
  std::snprintf(number, sizeof(number), " %.9g\n", value);
  out_ += number;
}

void MetricsText::Sample(std::string_view name, const Labels& labels,
                         uint64_t value) {
  Name(name, labels);
  out_.append(" ").append(std::to_string(value)).append("\n");
}

void WriteBuildInfo(MetricsText& text, std::string_view prefix,
                    std::string_view version) {
  const std::string name = std::string(prefix) + "_build_info";
  text.Family(name, "gauge",
              "Always 1; the labels say which build is running.");
  text.Sample(name,
              {{"version", std::string(version)}, {"api_version", kApiVersion}},
              uint64_t{1});
}

void WriteResourceMetrics(MetricsText& text, std::string_view prefix,
                          const std::vector<ResourcePublisher*>& resources) {
  struct Row {
    std::string resource;
    ResourceStats stats;
    uint64_t healthy = 0;
    uint64_t unhealthy = 0;
    bool registered = false;
  };
  std::vector<Row> rows;
  for (const ResourcePublisher* publisher : resources) {
    Row row{.resource = publisher->resource_name(),
            .stats = publisher->stats(),
            .registered = publisher->registered()};
    for (const Device& device : publisher->devices()) {
      (device.health == Health::kHealthy ? row.healthy : row.unhealthy)++;
    }
    rows.push_back(std::move(row));
  }
  const std::string p(prefix);
  text.Family(p + "_devices", "gauge",
              "Devices advertised to the kubelet by resource and health.");
  for (const Row& row : rows) {
    text.Sample(p + "_devices",
                {{"resource", row.resource}, {"health", "Healthy"}},
                row.healthy);
    text.Sample(p + "_devices",
                {{"resource", row.resource}, {"health", "Unhealthy"}},
                row.unhealthy);
  }
  text.Family(p + "_registered", "gauge",
              "1 while the kubelet has accepted the resource's registration.");
  for (const Row& row : rows) {
    text.Sample(p + "_registered", {{"resource", row.resource}},
                uint64_t{row.registered ? 1u : 0u});
  }
  static constexpr struct {
    const char* suffix;
    const char* type;
    const char* help;
    uint64_t ResourceStats::*field;
  } kCounters[] = {
      {"_allocations_total", "counter",
       "Container requests answered by Allocate.",
       &ResourceStats::allocate_calls},
      {"_allocation_errors_total", "counter",
       "Allocate container requests refused.", &ResourceStats::allocate_errors},
      {"_preferred_allocations_total", "counter",
       "GetPreferredAllocation container requests.",
       &ResourceStats::preferred_calls},
      {"_preferred_allocation_errors_total", "counter",
       "GetPreferredAllocation container requests refused.",
       &ResourceStats::preferred_errors},
      {"_registrations_total", "counter",
       "Register calls the kubelet accepted.", &ResourceStats::registrations},
      {"_registration_failures_total", "counter",
       "Register attempts that failed.", &ResourceStats::registration_failures},
      {"_server_restarts_total", "counter",
       "Sockets served anew after the first (kubelet restarts).",
       &ResourceStats::server_restarts},
      {"_list_updates_total", "counter",
       "Device lists streamed after the first.", &ResourceStats::list_updates},
      {"_streams", "gauge", "Open ListAndWatch streams.",
       &ResourceStats::open_streams},
  };
  for (const auto& counter : kCounters) {
    const std::string name = p + counter.suffix;
    text.Family(name, counter.type, counter.help);
    for (const Row& row : rows) {
      text.Sample(name, {{"resource", row.resource}}, row.stats.*counter.field);
    }
  }
  const std::string histogram = p + "_preferred_allocation_seconds";
  text.Family(histogram, "histogram", "GetPreferredAllocation latency.");
  for (const Row& row : rows) {
    const LatencyHistogram::Snapshot& h = row.stats.preferred_latency;
    for (size_t b = 0; b < LatencyHistogram::kBounds.size(); ++b) {
      char bound[32];
      std::snprintf(bound, sizeof(bound), "%g", LatencyHistogram::kBounds[b]);
      text.Sample(histogram + "_bucket",
                  {{"resource", row.resource}, {"le", bound}}, h.cumulative[b]);
    }
    text.Sample(histogram + "_bucket",
                {{"resource", row.resource}, {"le", "+Inf"}}, h.count);
    text.Sample(histogram + "_sum", {{"resource", row.resource}},
                h.sum_seconds);
    text.Sample(histogram + "_count", {{"resource", row.resource}}, h.count);
  }
}

}  // namespace topology::plugin
