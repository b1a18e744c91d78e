// topology-info: prints the NUMA and PCIe topology of a host root or an hwloc
// XML export as text, JSON or Graphviz DOT.
#include <cstdio>
#include <iostream>

#include <CLI/CLI.hpp>

#include "topology/discovery.h"

#include "render.h"

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
  if (format == "json") {
    std::cout << topology::tools::RenderJson(*topo, *filter).dump(2) << "\n";
  } else if (format == "dot") {
    std::cout << topology::tools::RenderDot(*topo, *filter);
  } else {
    std::cout << topology::tools::RenderText(*topo, *filter);
  }
  return 0;
}
