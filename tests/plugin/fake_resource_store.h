// ResourceSlices and ResourceClaims in memory, served through
// FakeApiServer as an API server serves them: resourceVersion, 409 for a
// stale update or an existing name, generateName, 422 for a slice the API
// server's validation refuses (ValidateResourceSlice), a taint's timeAdded
// set when absent, field selectors on spec.nodeName, spec.driver and
// spec.pool.name served (each term applied) or refused (400), GET of
// a claim and of the Node. With drop_taints, taints are dropped as a server
// with the DRADeviceTaints gate off drops them.
#ifndef TOPOLOGY_TESTS_PLUGIN_FAKE_RESOURCE_STORE_H_
#define TOPOLOGY_TESTS_PLUGIN_FAKE_RESOURCE_STORE_H_

#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <utility>

#include <nlohmann/json.hpp>

#include "topology/draplugin/slice_validation.h"

#include "fake_api_server.h"

namespace topology::testing {

inline constexpr char kSlicesPath[] = "/apis/resource.k8s.io/v1/resourceslices";

// ResourceSlices in memory, served as the API server serves them.
class FakeResourceStore {
 public:
  FakeResourceStore(std::string node, std::string driver, bool field_selectors)
      : node_(std::move(node)),
        driver_(std::move(driver)),
        selectors_(field_selectors) {}

  // A ResourceClaim served at GET .../namespaces/<ns>/resourceclaims/<name>.
  void AddClaim(const std::string& ns, const std::string& name,
                const nlohmann::json& claim) {
    std::lock_guard<std::mutex> lock(mu_);
    claims_["/apis/resource.k8s.io/v1/namespaces/" + ns + "/resourceclaims/" +
            name] = claim;
  }

  FakeApiServer::Answer Handle(const FakeApiServer::Request& request) {
    if (request.method == "GET" && request.target == "/api/v1/nodes/" + node_) {
      ++node_gets;
      // A server that hangs on the Node (a fake peer's behaviour): no
      // answer for longer than any client waits.
      if (node_hangs) std::this_thread::sleep_for(std::chrono::seconds(3));
    }
    std::lock_guard<std::mutex> lock(mu_);
    const std::string target = request.target;
    if (request.method == "GET" && claims_.contains(target)) {
      return {200, claims_.at(target).dump()};
    }
    if (request.method == "GET" && target == "/api/v1/nodes/" + node_) {
      if (node_uid.empty()) return {404, R"({"kind":"Status"})"};
      nlohmann::json node = {
          {"kind", "Node"}, {"metadata", {{"name", node_}, {"uid", node_uid}}}};
      if (node_padding > 0) {
        node["status"]["images"] = {
            {{"names", {std::string(node_padding.load(), 'i')}}}};
      }
      return {200, node.dump()};
    }
    if (request.method == "GET" && target.starts_with(kSlicesPath)) {
      // The field selector as the API server reads it: "a=b,c=d", every
      // term a field the resource declares selectable (resourceslices:
      // spec.nodeName, spec.driver, spec.pool.name) or 400.
      std::map<std::string, std::string> wanted;
      if (const size_t at = target.find("fieldSelector=");
          at != std::string::npos) {
        std::string selector = target.substr(at + 14);
        selector = selector.substr(0, selector.find('&'));
        for (const auto& [coded, plain] :
             {std::pair<std::string, std::string>{"%3D", "="}, {"%2C", ","}}) {
          for (size_t i = selector.find(coded); i != std::string::npos;
               i = selector.find(coded)) {
            selector.replace(i, coded.size(), plain);
          }
        }
        std::stringstream terms(selector);
        std::string term;
        while (std::getline(terms, term, ',')) {
          const size_t equals = term.find('=');
          const std::string field = term.substr(0, equals);
          if (!selectors_ || equals == std::string::npos ||
              (field != "spec.nodeName" && field != "spec.driver" &&
               field != "spec.pool.name")) {
            return {400,
                    nlohmann::json(
                        {{"kind", "Status"},
                         {"message", "field label not supported: " + field}})
                        .dump()};
          }
          wanted[field] = term.substr(equals + 1);
        }
      }
      nlohmann::json items = nlohmann::json::array();
      for (const auto& [name, slice] : slices_) {
        const nlohmann::json& spec = slice["spec"];
        const auto differs = [&](const std::string& field,
                                 const nlohmann::json& value) {
          const auto it = wanted.find(field);
          return it != wanted.end() &&
                 (!value.is_string() || value.get<std::string>() != it->second);
        };
        if (differs("spec.nodeName",
                    spec.value("nodeName", nlohmann::json())) ||
            differs("spec.driver", spec.value("driver", nlohmann::json())) ||
            differs("spec.pool.name",
                    spec.value("pool", nlohmann::json::object())
                        .value("name", nlohmann::json()))) {
          continue;
        }
        items.push_back(slice);
      }
      return {200,
              nlohmann::json({{"kind", "ResourceSliceList"}, {"items", items}})
                  .dump()};
    }
    const std::string name = target.size() > sizeof(kSlicesPath)
                                 ? target.substr(sizeof(kSlicesPath))
                                 : std::string();
    if (request.method == "POST" || request.method == "PUT") {
      if (topology::Status valid =
              topology::draplugin::ValidateResourceSlice(request.body);
          !valid.ok()) {
        ++refused;
        return {422, nlohmann::json({{"kind", "Status"},
                                     {"reason", "Invalid"},
                                     {"message", valid.message()}})
                         .dump()};
      }
    }
    if (request.method == "POST") {
      nlohmann::json slice = nlohmann::json::parse(request.body);
      auto& metadata = slice["metadata"];
      if (!metadata.contains("name") && metadata.contains("generateName")) {
        metadata["name"] = metadata["generateName"].get<std::string>() +
                           std::to_string(10000 + ++generated_);
      }
      Store(slice);
      const std::string key = metadata["name"];
      if (slices_.contains(key)) {
        return {409, R"({"kind":"Status","message":"already exists"})"};
      }
      slice["metadata"]["resourceVersion"] = std::to_string(++version_);
      slices_[key] = slice;
      ++writes;
      return {201, slice.dump()};
    }
    if (request.method == "PUT") {
      nlohmann::json slice = nlohmann::json::parse(request.body);
      auto it = slices_.find(name);
      if (it == slices_.end()) return {404, "{}"};
      if (conflicts > 0 || slice["metadata"]["resourceVersion"] !=
                               it->second["metadata"]["resourceVersion"]) {
        if (conflicts > 0) --conflicts;
        return {
            409,
            R"({"kind":"Status","message":"the object has been modified"})"};
      }
      Store(slice);
      slice["metadata"]["resourceVersion"] = std::to_string(++version_);
      it->second = slice;
      ++writes;
      return {200, slice.dump()};
    }
    if (request.method == "DELETE") {
      ++writes;
      return slices_.erase(name) > 0 ? FakeApiServer::Answer{200, "{}"}
                                     : FakeApiServer::Answer{404, "{}"};
    }
    return {405, "{}"};
  }

  void Put(const std::string& name, const std::string& node,
           const std::string& driver, const std::string& pool, int generation) {
    std::lock_guard<std::mutex> lock(mu_);
    slices_[name] = {
        {"metadata",
         {{"name", name}, {"resourceVersion", std::to_string(++version_)}}},
        {"spec",
         {{"driver", driver},
          {"nodeName", node},
          {"pool",
           {{"name", pool},
            {"generation", generation},
            {"resourceSliceCount", 1}}},
          {"devices", nlohmann::json::array()}}}};
  }
  void Clear() {
    std::lock_guard<std::mutex> lock(mu_);
    slices_.clear();
  }
  std::map<std::string, nlohmann::json> slices() const {
    std::lock_guard<std::mutex> lock(mu_);
    return slices_;
  }

  std::atomic<int> writes{0};
  std::atomic<int> conflicts{0};
  std::atomic<int> refused{0};  // writes refused as invalid (422)
  std::atomic<bool> drop_taints{false};
  std::string node_uid;                 // the Node's, served when set
  std::atomic<int> node_gets{0};        // GETs of the Node
  std::atomic<bool> node_hangs{false};  // the Node's GET hangs for 3 s
  std::atomic<size_t> node_padding{0};  // bytes of images in the Node

 private:
  // What the server does to a slice it stores.
  void Store(nlohmann::json& slice) {
    auto& devices = slice["spec"]["devices"];
    if (!devices.is_array()) return;
    for (auto& device : devices) {
      if (!device.contains("taints")) continue;
      if (drop_taints) {
        device.erase("taints");
        continue;
      }
      for (auto& taint : device["taints"]) {
        if (!taint.contains("timeAdded")) {
          taint["timeAdded"] =
              "2026-01-01T00:00:" + std::to_string(10 + (++version_ % 50)) +
              "Z";
        }
      }
    }
  }

  const std::string node_;
  const std::string driver_;
  const bool selectors_;
  std::map<std::string, nlohmann::json> claims_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> slices_;
  int version_ = 0;
  int generated_ = 0;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTS_PLUGIN_FAKE_RESOURCE_STORE_H_
