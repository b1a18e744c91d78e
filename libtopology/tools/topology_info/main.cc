// topology-info: prints the NUMA and PCIe topology of a host root or an hwloc
// XML export as text, JSON or Graphviz DOT.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <map>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include <getopt.h>

#include "topology/cost_graph.h"
#include "topology/device_selection.h"
#include "topology/discovery.h"
#include "topology/text_file.h"

#include "render.h"

namespace {

// Output goes through C stdio: <iostream>'s static initializer and the
// locale it builds were 8 % of the instructions of a run on a small machine.
void Print(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
}
void PrintError(std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
}

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
    PrintError("topology-info select: " + available.status().message() + "\n");
    return 2;
  }
  auto must = ParseAddressList("--must-include", must_include);
  if (!must.ok()) {
    PrintError("topology-info select: " + must.status().message() + "\n");
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
    PrintError(std::string("topology-info select: ") + flag + ": " + message +
               "\n");
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
    Print(out.dump(2) + "\n");
  } else {
    std::string text = "devices:";
    for (const auto& a : selection->devices) text += " " + a.ToString();
    text += "\ncost: " + std::to_string(selection->cost) + "\nnuma nodes:";
    for (int n : selection->numa_nodes) text += " " + std::to_string(n);
    text += "\nwhy: " + selection->explanation + "\n";
    Print(text);
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
    PrintError("topology-info select: " + message + "\n");
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
    // A pair costs some 60 bytes: 64 MiB is a million pairs.
    const auto text = topology::ReadTextFile(cost_table, size_t{64} << 20);
    if (!text.ok()) return fail("--cost-table: " + text.status().message());
    const nlohmann::json table = nlohmann::json::parse(*text, nullptr, false);
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
    Print(out.dump(2) + "\n");
  } else {
    std::string text;
    for (const auto& [name, list] : chosen.items()) {
      text += name + ":";
      for (const auto& i : list) text += " " + i.get<std::string>();
      text += "\n";
    }
    text += "cost: " + std::to_string(selection->cost) +
            "\nwhy: " + selection->explanation + "\n";
    Print(text);
  }
  return 0;
}

// The command line, parsed with glibc's getopt_long: CLI11's options and
// their validators were a sixth of the instructions of a whole run on a
// small machine (docs/performance.md). Options of the command and of
// `select` may come in any order around the word `select`, as before.
struct CommandLine {
  std::string host_root = "/";
  bool host_root_given = false;
  std::string hwloc_xml;
  std::string format = "text";
  bool dra_numa_list = false;
  bool libpci = false;
  std::string classes;
  std::string vendors;
  std::string devices;
  bool select = false;
  std::string from;
  int count = 0;
  std::string must_include;
  std::vector<std::string> requests;
  std::vector<std::string> pools;
  std::string cost_table;
  std::vector<std::string> select_options;  // given, for the check
};

constexpr char kUsage[] =
    "Show the NUMA and PCIe topology of a machine, a recorded sysfs tree or "
    "an hwloc XML export.\n"
    "Usage: topology-info [OPTIONS] [select SELECT-OPTIONS]\n"
    "\n"
    "Options:\n"
    "  -h, --help             Print this help message and exit\n"
    "  --version              Print the version and exit\n"
    "  --host-root DIR        Directory below which sys/ is read (default /)\n"
    "  --hwloc-xml FILE       Read an hwloc XML export (lstopo --of xml) "
    "instead\n"
    "  --format FORMAT        text, json, dot or dra (default text)\n"
    "  --dra-numa-list        --format dra: numaNode as a list "
    "(DRAListTypeAttributes):\n"
    "                         the device's node, then its package's nearest "
    "nodes\n"
    "  --libpci               Read PCI class, ids and revision through "
    "libpci, as\n"
    "                         libtopology does by default (else the sysfs "
    "pass reads\n"
    "                         the same files itself: no libpci to load)\n"
    "  --class HEX,...        Only devices whose class starts with these hex "
    "digits\n"
    "                         (e.g. 0302,0200)\n"
    "  --vendor HEX,...       Only these vendor ids\n"
    "  --device HEX,...       Only these device ids\n"
    "\n"
    "select: choose K devices with the lowest summed pairwise cost\n"
    "  --from ADDR,...        One resource: available devices\n"
    "  --count K              One resource: how many to choose\n"
    "  --must-include ADDR,...\n"
    "                         Devices that must be chosen\n"
    "  --request NAME=COUNT   Several resources (repeatable)\n"
    "  --pool NAME=ADDR,...,numa:N*COUNT\n"
    "                         Several resources (repeatable)\n"
    "  --cost-table FILE      Several resources: JSON list of extra pair "
    "costs\n"
    "                         [{\"a\":ADDR,\"b\":ADDR,\"cost\":N}]\n";

// Parses argv into `line`. Returns -1 to go on, else the exit code (help
// and version printed: 0; a usage error printed: 2).
int ParseCommandLine(int argc, char** argv, CommandLine* line) {
  enum : int {
    kHostRoot = 256,
    kHwlocXml,
    kFormat,
    kDraNumaList,
    kLibpci,
    kClass,
    kVendor,
    kDevice,
    kVersion,
    kFrom,  // the options of select from here on
    kCount,
    kMustInclude,
    kRequest,
    kPool,
    kCostTable,
  };
  static const option kOptions[] = {
      {"help", no_argument, nullptr, 'h'},
      {"version", no_argument, nullptr, kVersion},
      {"host-root", required_argument, nullptr, kHostRoot},
      {"hwloc-xml", required_argument, nullptr, kHwlocXml},
      {"format", required_argument, nullptr, kFormat},
      {"dra-numa-list", no_argument, nullptr, kDraNumaList},
      {"libpci", no_argument, nullptr, kLibpci},
      {"class", required_argument, nullptr, kClass},
      {"vendor", required_argument, nullptr, kVendor},
      {"device", required_argument, nullptr, kDevice},
      {"from", required_argument, nullptr, kFrom},
      {"count", required_argument, nullptr, kCount},
      {"must-include", required_argument, nullptr, kMustInclude},
      {"request", required_argument, nullptr, kRequest},
      {"pool", required_argument, nullptr, kPool},
      {"cost-table", required_argument, nullptr, kCostTable},
      {nullptr, 0, nullptr, 0},
  };
  const auto usage_error = [](const std::string& message) {
    PrintError("topology-info: " + message +
               "\nRun with --help for more information.\n");
    return 2;
  };
  // "-": words that are not options come back in order (code 1), whatever
  // POSIXLY_CORRECT says; ":": a missing value is told from an unknown
  // option.
  opterr = 0;
  int code = 0;
  int index = 0;
  while ((code = getopt_long(argc, argv, "-:h", kOptions, &index)) != -1) {
    const char* value = optarg;
    if (code >= kFrom) {
      line->select_options.push_back(std::string("--") + kOptions[index].name);
    }
    switch (code) {
      case 1:
        if (std::strcmp(value, "select") != 0 || line->select) {
          return usage_error(std::string("unexpected argument '") + value +
                             "'");
        }
        line->select = true;
        break;
      case 'h':
        Print(kUsage);
        return 0;
      case kVersion:
        Print("topology-info " TOPOLOGY_VERSION "\n");
        return 0;
      case kHostRoot:
        line->host_root = value;
        line->host_root_given = true;
        break;
      case kHwlocXml:
        line->hwloc_xml = value;
        break;
      case kFormat:
        line->format = value;
        if (line->format != "text" && line->format != "json" &&
            line->format != "dot" && line->format != "dra") {
          return usage_error("--format: '" + line->format +
                             "' is not one of text, json, dot, dra");
        }
        break;
      case kDraNumaList:
        line->dra_numa_list = true;
        break;
      case kLibpci:
        line->libpci = true;
        break;
      case kClass:
        line->classes = value;
        break;
      case kVendor:
        line->vendors = value;
        break;
      case kDevice:
        line->devices = value;
        break;
      case kFrom:
        line->from = value;
        break;
      case kCount: {
        const char* end = value + std::strlen(value);
        const auto parsed = std::from_chars(value, end, line->count);
        if (parsed.ec != std::errc() || parsed.ptr != end) {
          return usage_error(std::string("--count: '") + value +
                             "' is not a whole number");
        }
        break;
      }
      case kMustInclude:
        line->must_include = value;
        break;
      case kRequest:
        line->requests.emplace_back(value);
        break;
      case kPool:
        line->pools.emplace_back(value);
        break;
      case kCostTable:
        line->cost_table = value;
        break;
      case ':':
        return usage_error(std::string(argv[optind - 1]) + " needs a value");
      default:
        return usage_error(std::string("unknown option '") + argv[optind - 1] +
                           "'");
    }
  }
  if (!line->hwloc_xml.empty() && line->host_root_given) {
    return usage_error("--hwloc-xml excludes --host-root");
  }
  if (!line->hwloc_xml.empty() && line->libpci) {
    return usage_error("--libpci excludes --hwloc-xml");
  }
  if (!line->select && !line->select_options.empty()) {
    return usage_error(line->select_options.front() +
                       " is an option of select");
  }
  if (!line->requests.empty() && (!line->from.empty() || line->count != 0)) {
    return usage_error(std::string(line->from.empty() ? "--count" : "--from") +
                       " excludes --request");
  }
  return -1;
}

}  // namespace

int RunMain(int argc, char** argv) {
  CommandLine line;
  if (const int done = ParseCommandLine(argc, argv, &line); done >= 0) {
    return done;
  }
  const std::string& host_root = line.host_root;
  const std::string& hwloc_xml = line.hwloc_xml;
  const std::string& format = line.format;

  auto filter = topology::tools::DeviceFilter::Parse(line.classes, line.vendors,
                                                     line.devices);
  if (!filter.ok()) {
    PrintError("topology-info: " + filter.status().message() + "\n");
    return 2;
  }
  if (format == "dra" && !hwloc_xml.empty()) {
    PrintError(
        "topology-info: --format dra reads sysfs links and files; it cannot "
        "work from --hwloc-xml\n");
    return 2;
  }
  topology::DiscoveryOptions options;
  options.host_root = host_root;
  options.use_libpci = line.libpci;
  topology::StatusOr<topology::Topology> topo =
      hwloc_xml.empty() ? topology::Discover(options)
                        : topology::LoadHwlocXml(hwloc_xml);
  if (!topo.ok()) {
    PrintError("topology-info: " + topo.status().ToString() + "\n");
    return 1;
  }
  if (line.select) {
    const std::string select_format =
        format == "dot" || format == "dra" ? "text" : format;
    if (!line.requests.empty()) {
      return RunGraphSelect(*topo, line.requests, line.pools, line.cost_table,
                            select_format);
    }
    if (line.from.empty() || line.count == 0) {
      PrintError(
          "topology-info select: --from: give --from and --count (one "
          "resource) or --request and --pool (several)\n");
      return 2;
    }
    return RunSelect(*topo, line.from, line.must_include, line.count,
                     select_format);
  }
  if (format == "json") {
    topology::tools::WriteJson(Print, *topo, *filter);
  } else if (format == "dot") {
    Print(topology::tools::RenderDot(*topo, *filter));
  } else if (format == "dra") {
    const auto sysfs = topology::NewHostRootReader(host_root);
    Print(topology::tools::RenderDra(
        *sysfs, *topo, *filter,
        line.dra_numa_list ? topology::dra::NumaAttributeForm::kList
                           : topology::dra::NumaAttributeForm::kScalar));
  } else {
    Print(topology::tools::RenderText(*topo, *filter));
  }
  // A full disk or a closed output must not pass for a complete document.
  if (std::fflush(stdout) != 0 || std::ferror(stdout) != 0) {
    PrintError(std::string("topology-info: cannot write the output: ") +
               std::strerror(errno) + "\n");
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
    PrintError(std::string("topology-info: ") + e.what() + "\n");
  } catch (...) {
    PrintError("topology-info: unknown exception\n");
  }
  return 1;
}
