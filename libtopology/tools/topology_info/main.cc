// topology-info: prints the NUMA and PCIe topology of a host root or an hwloc
// XML export as text, JSON or Graphviz DOT.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <map>

#include <CLI/CLI.hpp>

#include "topology/cost_graph.h"
#include "topology/device_selection.h"
#include "topology/discovery.h"

#include "render.h"

namespace {

// "ADDR,ADDR,..." for flag `flag`; fails naming the flag and the address.
topology::StatusOr<std::vector<topology::PciAddress>> ParseAddressList(
    const std::string& flag, const std::string& text) {
  std::vector<topology::PciAddress> out;
  for (const std::string& item : topology::tools::SplitCommas(text)) {
    auto address = topology::PciAddress::Parse(item);
    if (!address.ok()) {
      return topology::InvalidArgumentError(flag + ": " +
                                            address.status().message());
    }
    out.push_back(*address);
  }
  return out;
}

int RunSelect(const topology::Topology& topo, const std::string& from,
              const std::string& must_include, int count,
              const std::string& format) {
  auto available = ParseAddressList("--from", from);
  if (!available.ok()) {
    std::cerr << "topology-info select: " << available.status().message()
              << "\n";
    return 2;
  }
  auto must = ParseAddressList("--must-include", must_include);
  if (!must.ok()) {
    std::cerr << "topology-info select: " << must.status().message() << "\n";
    return 2;
  }
  const topology::CostModel model(topo);
  topology::SelectionRequest request;
  request.available = *available;
  request.must_include = *must;
  request.size = count;
  request.explain = true;
  auto selection = topology::DeviceSelector(model).Select(request);
  if (!selection.ok()) {
    // Name the flag the problem came from.
    const std::string& message = selection.status().message();
    const char* flag = message.find("must-include") != std::string::npos
                           ? "--must-include"
                       : message.rfind("size", 0) == 0 ? "--count"
                                                       : "--from";
    std::cerr << "topology-info select: " << flag << ": " << message << "\n";
    return 2;
  }
  nlohmann::json devices = nlohmann::json::array();
  for (const auto& a : selection->devices) devices.push_back(a.ToString());
  nlohmann::json runner_up = nlohmann::json::array();
  for (const auto& a : selection->runner_up) runner_up.push_back(a.ToString());
  if (format == "json") {
    nlohmann::json out;
    out["devices"] = devices;
    out["cost"] = selection->cost;
    out["numa_nodes"] = selection->numa_nodes;
    out["exact"] = selection->exact;
    out["explanation"] = {
        {"summary", selection->explanation},
        {"runner_up",
         selection->runner_up_cost >= 0 ? runner_up : nlohmann::json(nullptr)},
        {"runner_up_cost", selection->runner_up_cost >= 0
                               ? nlohmann::json(selection->runner_up_cost)
                               : nlohmann::json(nullptr)}};
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "devices:";
    for (const auto& a : selection->devices) std::cout << " " << a.ToString();
    std::cout << "\ncost: " << selection->cost << "\nnuma nodes:";
    for (int n : selection->numa_nodes) std::cout << " " << n;
    std::cout << "\nwhy: " << selection->explanation << "\n";
  }
  return 0;
}

// "NAME=VALUE" for `flag`.
topology::StatusOr<std::pair<std::string, std::string>> SplitPair(
    const std::string& flag, const std::string& text) {
  const size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) {
    return topology::InvalidArgumentError(flag + ": \"" + text +
                                          "\" is not NAME=VALUE");
  }
  return std::make_pair(text.substr(0, eq), text.substr(eq + 1));
}

// Pool entries: PCI addresses, or "numa:N" / "numa:N*COUNT" for CPU units.
topology::StatusOr<std::vector<topology::GraphInstance>> ParsePool(
    const std::string& name, const std::string& text) {
  std::vector<topology::GraphInstance> pool;
  for (const std::string& item : topology::tools::SplitCommas(text)) {
    if (item.rfind("numa:", 0) == 0) {
      int node = -1;
      int count = 1;
      char extra = 0;
      const int fields =
          std::sscanf(item.c_str() + 5, "%d*%d%c", &node, &count, &extra);
      if (fields < 1 || fields == 3 || node < 0 || count < 1 || count > 4096) {
        return topology::InvalidArgumentError(
            "--pool " + name + ": \"" + item +
            "\" is not numa:N or numa:N*COUNT");
      }
      for (int k = 0; k < count; ++k) pool.push_back({std::nullopt, node});
    } else {
      auto address = topology::PciAddress::Parse(item);
      if (!address.ok()) {
        return topology::InvalidArgumentError("--pool " + name + ": " +
                                              address.status().message());
      }
      pool.push_back({*address, -1});
    }
  }
  return pool;
}

int RunGraphSelect(const topology::Topology& topo,
                   const std::vector<std::string>& requests,
                   const std::vector<std::string>& pools,
                   const std::string& cost_table, const std::string& format) {
  const auto fail = [](const std::string& message) {
    std::cerr << "topology-info select: " << message << "\n";
    return 2;
  };
  topology::GraphRequest request;
  std::map<std::string, std::vector<topology::GraphInstance>> pool_of;
  for (const std::string& p : pools) {
    auto kv = SplitPair("--pool", p);
    if (!kv.ok()) return fail(kv.status().message());
    auto pool = ParsePool(kv->first, kv->second);
    if (!pool.ok()) return fail(pool.status().message());
    auto& into = pool_of[kv->first];
    into.insert(into.end(), pool->begin(), pool->end());
  }
  for (const std::string& r : requests) {
    auto kv = SplitPair("--request", r);
    if (!kv.ok()) return fail(kv.status().message());
    int count = 0;
    char extra = 0;
    if (std::sscanf(kv->second.c_str(), "%d%c", &count, &extra) != 1) {
      return fail("--request " + kv->first + ": \"" + kv->second +
                  "\" is not a count");
    }
    const auto pool = pool_of.find(kv->first);
    if (pool == pool_of.end()) {
      return fail("--request " + kv->first + ": no --pool " + kv->first +
                  "=...");
    }
    request.resources.push_back({kv->first, count, pool->second});
  }
  for (const auto& entry : pool_of) {
    const std::string& name = entry.first;
    if (std::none_of(request.resources.begin(), request.resources.end(),
                     [&](const auto& r) { return r.name == name; })) {
      return fail("--pool " + name + ": no --request " + name + "=COUNT");
    }
  }
  if (!cost_table.empty()) {
    std::ifstream in(cost_table);
    if (!in) return fail("--cost-table: cannot read " + cost_table);
    const nlohmann::json table = nlohmann::json::parse(in, nullptr, false);
    if (!table.is_array()) {
      return fail(
          "--cost-table: want a JSON list of "
          "{\"a\":ADDR,\"b\":ADDR,\"cost\":N}");
    }
    for (size_t i = 0; i < table.size(); ++i) {
      const nlohmann::json& e = table[i];
      const std::string at = "--cost-table[" + std::to_string(i) + "]";
      if (!e.is_object() || !e.contains("a") || !e["a"].is_string() ||
          !e.contains("b") || !e["b"].is_string() || !e.contains("cost") ||
          !e["cost"].is_number_integer()) {
        return fail(at + R"(: want {"a":ADDR,"b":ADDR,"cost":N})");
      }
      auto a = topology::PciAddress::Parse(e["a"].get<std::string>());
      auto b = topology::PciAddress::Parse(e["b"].get<std::string>());
      if (!a.ok()) return fail(at + ".a: " + a.status().message());
      if (!b.ok()) return fail(at + ".b: " + b.status().message());
      const auto cost = e["cost"].get<int64_t>();
      if (cost < -100 || cost > 100) return fail(at + ".cost: want -100..100");
      request.extra_costs.push_back({*a, *b, static_cast<int>(cost)});
    }
  }
  const topology::CostModel model(topo);
  auto selection = topology::CostGraphSelector(model).Select(request);
  if (!selection.ok())
    return fail("--request: " + selection.status().message());
  nlohmann::json chosen = nlohmann::json::object();
  for (const auto& [name, instances] : selection->selection) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& i : instances) list.push_back(i.ToString());
    chosen[name] = list;
  }
  if (format == "json") {
    nlohmann::json out;
    out["selection"] = chosen;
    out["cost"] = selection->cost;
    out["greedy_cost"] = selection->greedy_cost;
    out["numa_nodes"] = selection->numa_nodes;
    out["explanation"] = selection->explanation;
    std::cout << out.dump(2) << "\n";
  } else {
    for (const auto& [name, list] : chosen.items()) {
      std::cout << name << ":";
      for (const auto& i : list) std::cout << " " << i.get<std::string>();
      std::cout << "\n";
    }
    std::cout << "cost: " << selection->cost
              << "\nwhy: " << selection->explanation << "\n";
  }
  return 0;
}

}  // namespace

int RunMain(int argc, char** argv) {
  CLI::App app{
      "Show the NUMA and PCIe topology of a machine, a recorded "
      "sysfs tree or an hwloc XML export."};
  app.set_version_flag("--version",
                       std::string("topology-info ") + TOPOLOGY_VERSION);
  std::string host_root = "/";
  std::string hwloc_xml;
  std::string format = "text";
  std::string classes;
  std::string vendors;
  std::string devices;
  auto* root_opt = app.add_option("--host-root", host_root,
                                  "Directory below which sys/ is read")
                       ->capture_default_str();
  app.add_option("--hwloc-xml", hwloc_xml,
                 "Read an hwloc XML export (lstopo --of xml) instead")
      ->excludes(root_opt);
  app.add_option("--format", format, "Output format")
      ->check(CLI::IsMember({"text", "json", "dot", "dra"}))
      ->capture_default_str();
  bool dra_numa_list = false;
  app.add_flag("--dra-numa-list", dra_numa_list,
               "--format dra: numaNode as a list (DRAListTypeAttributes): "
               "the device's node, then its package's nearest nodes");
  app.add_option("--class", classes,
                 "Only devices whose class starts with these hex digits "
                 "(comma-separated, e.g. 0302,0200)");
  app.add_option("--vendor", vendors,
                 "Only these vendor ids (hex, comma-separated)");
  app.add_option("--device", devices,
                 "Only these device ids (hex, comma-separated)");
  app.fallthrough();

  auto* select = app.add_subcommand(
      "select", "Choose K devices with the lowest summed pairwise cost");
  std::string from;
  std::string must_include;
  int count = 0;
  std::vector<std::string> requests;
  std::vector<std::string> pools;
  std::string cost_table;
  auto* from_opt = select->add_option(
      "--from", from, "One resource: available devices ADDR,ADDR,...");
  auto* count_opt =
      select->add_option("--count", count, "One resource: how many to choose");
  auto* request_opt = select->add_option(
      "--request", requests, "Several resources: NAME=COUNT (repeatable)");
  select->add_option(
      "--pool", pools,
      "Several resources: NAME=ADDR,...,numa:N*COUNT (repeatable)");
  select->add_option("--cost-table", cost_table,
                     "Several resources: JSON list of extra pair costs "
                     "[{\"a\":ADDR,\"b\":ADDR,\"cost\":N}]");
  from_opt->excludes(request_opt);
  count_opt->excludes(request_opt);
  select->add_option("--must-include", must_include,
                     "Devices that must be chosen: ADDR,...");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  auto filter = topology::tools::DeviceFilter::Parse(classes, vendors, devices);
  if (!filter.ok()) {
    std::cerr << "topology-info: " << filter.status().message() << "\n";
    return 2;
  }
  if (format == "dra" && !hwloc_xml.empty()) {
    std::cerr << "topology-info: --format dra reads sysfs links and files; it "
                 "cannot work from --hwloc-xml\n";
    return 2;
  }
  topology::DiscoveryOptions options;
  options.host_root = host_root;
  topology::StatusOr<topology::Topology> topo =
      hwloc_xml.empty() ? topology::Discover(options)
                        : topology::LoadHwlocXml(hwloc_xml);
  if (!topo.ok()) {
    std::cerr << "topology-info: " << topo.status().ToString() << "\n";
    return 1;
  }
  if (select->parsed()) {
    const std::string select_format =
        format == "dot" || format == "dra" ? "text" : format;
    if (!requests.empty()) {
      return RunGraphSelect(*topo, requests, pools, cost_table, select_format);
    }
    if (from.empty() || count == 0) {
      std::cerr << "topology-info select: --from: give --from and --count (one "
                   "resource) or --request and --pool (several)\n";
      return 2;
    }
    return RunSelect(*topo, from, must_include, count, select_format);
  }
  if (format == "json") {
    topology::tools::WriteJson(std::cout, *topo, *filter);
  } else if (format == "dot") {
    std::cout << topology::tools::RenderDot(*topo, *filter);
  } else if (format == "dra") {
    const auto sysfs = topology::NewHostRootReader(host_root);
    std::cout << topology::tools::RenderDra(
        *sysfs, *topo, *filter,
        dra_numa_list ? topology::dra::NumaAttributeForm::kList
                      : topology::dra::NumaAttributeForm::kScalar);
  } else {
    std::cout << topology::tools::RenderText(*topo, *filter);
  }
  // A full disk or a closed output must not pass for a complete document.
  std::cout.flush();
  if (!std::cout) {
    std::cerr << "topology-info: cannot write the output: "
              << std::strerror(errno) << "\n";
    return 1;
  }
  return 0;
}

// Anything thrown past the command (out of memory, a library's exception)
// ends it with one line and exit 1 rather than an abort.
int main(int argc, char** argv) {
  try {
    return RunMain(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "topology-info: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "topology-info: unknown exception\n";
  }
  return 1;
}
