#include "checkpoint.h"

#include <cstdio>
#include <exception>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace topology::host {
namespace {

using nlohmann::json;

uint64_t Fnv1a64(std::string_view text) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : text) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

std::string Checksum(const json& data) {
  const std::string body =
      data.dump(-1, ' ', false, json::error_handler_t::replace);
  char text[32];
  std::snprintf(text, sizeof(text), "%016llx",
                static_cast<unsigned long long>(Fnv1a64(body)));
  return text;
}

json ContainerJson(const manager::Container& c) {
  return {
      {"name", c.name}, {"restartable", c.restartable}, {"limits", c.limits}};
}

manager::Container ContainerFromJson(const json& j) {
  manager::Container c;
  c.name = j.at("name").get<std::string>();
  c.restartable = j.value("restartable", false);
  c.limits = j.at("limits").get<std::map<std::string, int64_t>>();
  for (const auto& [resource, quantity] : c.limits) {
    if (quantity < 0) {
      throw std::invalid_argument("negative limit of " + resource);
    }
  }
  return c;
}

}  // namespace

std::string EncodeCheckpoint(const Checkpoint& checkpoint) {
  json pods = json::array();
  for (const CheckpointPod& record : checkpoint.pods) {
    json init = json::array();
    for (const auto& c : record.pod.init_containers) {
      init.push_back(ContainerJson(c));
    }
    json app = json::array();
    for (const auto& c : record.pod.containers) app.push_back(ContainerJson(c));
    json containers = json::array();
    for (const ContainerResult& c : record.containers) {
      containers.push_back(ToJson(c));
    }
    json pod_json = {{"uid", record.pod.uid},
                     {"namespace", record.pod.ns},
                     {"name", record.pod.name},
                     {"guaranteed", record.pod.guaranteed},
                     {"init_containers", init},
                     {"containers", app},
                     {"result", {{"containers", containers}}}};
    if (!record.pod.topology_policy.empty()) {
      pod_json["topology_policy"] = record.pod.topology_policy;
      pod_json["topology_policy_source"] = record.pod.topology_policy_source;
    }
    pods.push_back(std::move(pod_json));
  }
  json registered = json::object();
  for (const auto& [name, ids] : checkpoint.registered) registered[name] = ids;
  const json data = {{"pods", pods}, {"registered", registered}};
  const json doc = {
      {"version", 1}, {"checksum", Checksum(data)}, {"data", data}};
  return doc.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

StatusOr<Checkpoint> DecodeCheckpoint(std::string_view text) {
  const json doc = json::parse(text, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("data") ||
      !doc.contains("checksum")) {
    return DataLossError("not a checkpoint document");
  }
  if (doc.value("version", 0) != 1) {
    return DataLossError("unknown checkpoint version " +
                         doc["version"].dump().substr(0, 32));
  }
  if (doc["checksum"] != Checksum(doc["data"])) {
    return DataLossError("checksum mismatch");
  }
  Checkpoint out;
  try {
    const json& data = doc["data"];
    for (const json& p : data.at("pods")) {
      CheckpointPod record;
      record.pod.uid = p.at("uid").get<std::string>();
      record.pod.ns = p.at("namespace").get<std::string>();
      record.pod.name = p.at("name").get<std::string>();
      record.pod.guaranteed = p.at("guaranteed").get<bool>();
      record.pod.topology_policy = p.value("topology_policy", std::string());
      record.pod.topology_policy_source =
          p.value("topology_policy_source", std::string());
      for (const json& c : p.at("init_containers")) {
        record.pod.init_containers.push_back(ContainerFromJson(c));
      }
      for (const json& c : p.at("containers")) {
        record.pod.containers.push_back(ContainerFromJson(c));
      }
      for (const json& c : p.at("result").at("containers")) {
        ContainerResult container;
        container.name = c.at("name").get<std::string>();
        container.devices =
            c.at("devices")
                .get<std::map<std::string, std::vector<std::string>>>();
        auto cpus = CpuSet::ParseList(c.at("cpus").get<std::string>());
        if (!cpus.ok()) {
          return DataLossError("bad CPU list of pod " + record.pod.uid + ": " +
                               cpus.status().message());
        }
        container.cpus = *cpus;
        if (!c.at("numa_nodes").is_null()) {
          container.numa_nodes = c.at("numa_nodes").get<std::vector<int>>();
        }
        record.containers.push_back(std::move(container));
      }
      out.pods.push_back(std::move(record));
    }
    for (const auto& [name, ids] : data.at("registered").items()) {
      out.registered[name] = ids.get<std::vector<std::string>>();
    }
  } catch (const std::exception& e) {
    return DataLossError(e.what());
  }
  return out;
}

}  // namespace topology::host
