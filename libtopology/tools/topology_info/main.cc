// topology-info: prints the NUMA and PCIe topology of a host root or an hwloc
// XML export as text, JSON or Graphviz DOT.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "topology/device_selection.h"
#include "topology/discovery.h"

#include "render.h"

namespace {

// "ADDR,ADDR,..." for flag `flag`; fails naming the flag and the address.
topology::StatusOr<std::vector<topology::PciAddress>> ParseAddressList(
    const std::string& flag, const std::string& text) {
  std::vector<topology::PciAddress> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(
        start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!item.empty()) {
      auto address = topology::PciAddress::Parse(item);
      if (!address.ok()) {
        return topology::InvalidArgumentError(flag + ": " +
                                              address.status().message());
      }
      out.push_back(*address);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "Show the NUMA and PCIe topology of a machine, a recorded "
      "sysfs tree or an hwloc XML export."};
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
      ->check(CLI::IsMember({"text", "json", "dot"}))
      ->capture_default_str();
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
  select->add_option("--from", from, "Available devices: ADDR,ADDR,...")
      ->required();
  select->add_option("--count", count, "How many devices to choose")
      ->required();
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
    return RunSelect(*topo, from, must_include, count,
                     format == "dot" ? "text" : format);
  }
  if (format == "json") {
    std::cout << topology::tools::RenderJson(*topo, *filter).dump(2) << "\n";
  } else if (format == "dot") {
    std::cout << topology::tools::RenderDot(*topo, *filter);
  } else {
    std::cout << topology::tools::RenderText(*topo, *filter);
  }
  return 0;
}
