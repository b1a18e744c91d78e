#include "manager_cli.h"

#include <charconv>
#include <chrono>
#include <exception>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <sstream>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "topology/common/go_flags.h"
#include "topology/common/guarded.h"
#include "topology/common/json_fields.h"
#include "topology/common/text_util.h"
#include "topology/numa_node.h"
#include "topology/text_file.h"

#include "control_client.h"
#include "merge_case.h"
#include "pod_manifest.h"

namespace topology::host {

using text::IsValidUtf8;

namespace {

using nlohmann::json;

int RunMerge(const std::string& file, const std::string& engine, bool explain) {
  // A merge case is a few hint lists: 16 MiB is far beyond any.
  const auto text =
      topology::ReadTextFile(file.empty() ? "-" : file, size_t{16} << 20);
  if (!text.ok()) {
    std::cerr << "topology-manager merge: " << text.status().message() << "\n";
    return kExitUsage;
  }
  const json doc = json_fields::ParseBounded(*text, 64);
  if (doc.is_discarded()) {
    std::cerr << "topology-manager merge: input: not valid JSON\n";
    return kExitUsage;
  }
  auto merge_case = ParseMergeCase(doc);
  if (!merge_case.ok()) {
    std::cerr << "topology-manager merge: " << merge_case.status().message()
              << "\n";
    return kExitUsage;
  }
  auto result = RunMergeCase(*merge_case,
                             engine == "reference"
                                 ? topology::manager::MergeEngine::kReference
                                 : topology::manager::MergeEngine::kFast,
                             explain);
  if (!result.ok()) {
    std::cerr << "topology-manager merge: " << result.status().message()
              << "\n";
    return kExitUsage;
  }
  std::cout << result->dump() << "\n";
  return 0;
}

// One call on the control socket: the reply's JSON, or the call's status.
topology::StatusOr<json> Call(const std::string& socket,
                              std::string_view method,
                              const std::string& request,
                              std::chrono::milliseconds timeout) {
  auto reply = CallControl(socket, method, request, timeout);
  if (!reply.ok()) return reply.status();
  json doc = json_fields::ParseBounded(*reply, 64);
  if (doc.is_discarded()) {
    return topology::InternalError("the " + std::string(method) +
                                   " reply is not JSON");
  }
  return doc;
}

// A refused request is the caller's error (2); anything else means the
// server is not there or not working (3).
int Unreachable(const std::string& what, const topology::Status& status,
                const std::string& socket) {
  if (status.code() == topology::StatusCode::kInvalidArgument ||
      status.code() == topology::StatusCode::kNotFound ||
      (status.code() == topology::StatusCode::kUnavailable &&
       status.message().find("try again") != std::string::npos)) {
    std::cerr << "topology-manager " << what << ": " << status.message()
              << "\n";
    return kExitUsage;
  }
  std::cerr << "topology-manager " << what << ": cannot reach " << socket
            << " (is `topology-manager serve` running?): "
            << topology::StatusCodeName(status.code()) << ": "
            << status.message() << "\n";
  return kExitUnreachable;
}

std::string Join(const json& list, const char* separator = ",") {
  std::string out;
  for (const auto& item : list) {
    if (!out.empty()) out += separator;
    out += item.is_string() ? item.get<std::string>() : item.dump();
  }
  return out;
}

// What each plugin's Allocate returned, one indented line per item.
void PrintAllocateResponses(const json& responses) {
  for (const auto& [resource, response] : responses.items()) {
    std::cout << "  " << resource << " Allocate:";
    bool any = false;
    for (const auto& [key, value] : response["envs"].items()) {
      std::cout << "\n    env " << key << "=" << value.get<std::string>();
      any = true;
    }
    for (const json& device : response["devices"]) {
      std::cout << "\n    device " << device["host_path"].get<std::string>()
                << " -> " << device["container_path"].get<std::string>() << " ("
                << device["permissions"].get<std::string>() << ")";
      any = true;
    }
    for (const json& mount : response["mounts"]) {
      std::cout << "\n    mount " << mount["host_path"].get<std::string>()
                << " -> " << mount["container_path"].get<std::string>()
                << (mount["read_only"].get<bool>() ? " (ro)" : "");
      any = true;
    }
    for (const json& name : response["cdi_devices"]) {
      std::cout << "\n    cdi " << name.get<std::string>();
      any = true;
    }
    for (const auto& [key, value] : response["annotations"].items()) {
      std::cout << "\n    annotation " << key << "="
                << value.get<std::string>();
      any = true;
    }
    std::cout << (any ? "\n" : " (empty)\n");
  }
}

// One container's row: NUMA nodes, CPUs, devices and pinned memory
// (type=size@nodes), then the plugins' Allocate answers when given.
void PrintContainerRow(const std::string& pod, const json& c) {
  std::string devices;
  for (const auto& [resource, ids] : c["devices"].items()) {
    devices += (devices.empty() ? "" : " ") + resource + "=" + Join(ids);
  }
  if (c.contains("memory") && c["memory"].is_array()) {
    for (const json& block : c["memory"]) {
      if (!block.is_object() ||
          !block.value("size", json()).is_number_unsigned()) {
        continue;
      }
      devices += (devices.empty() ? "" : " ") +
                 block.value("type", std::string("?")) + "=" +
                 BinaryQuantity(block["size"].get<uint64_t>()) + "@" +
                 Join(block.value("numa_nodes", json::array()));
    }
  }
  const std::string numa =
      c["numa_nodes"].is_null() ? "-" : Join(c["numa_nodes"]);
  const std::string cpus = c["cpus"].get<std::string>();
  std::cout << std::setw(18) << pod << std::setw(14)
            << c["name"].get<std::string>() << std::setw(8) << numa
            << std::setw(14) << (cpus.empty() ? "shared" : cpus) << devices
            << "\n";
  if (c.contains("allocate_responses")) {
    PrintAllocateResponses(c["allocate_responses"]);
  }
}

// The topology policy a pod was admitted under, and where it came from.
void PrintPodPolicy(const json& pod, const json& policy) {
  std::cout << "  topology policy of " << pod["pod"].get<std::string>() << ": "
            << policy["policy"].get<std::string>() << " ("
            << policy["scope"].get<std::string>() << " scope), from "
            << policy["source"].get<std::string>();
  if (policy["requested"].is_string()) {
    std::cout << (policy["source"] == "node" ? "; the pod asked for "
                                             : "; asked as ")
              << policy["requested"].get<std::string>();
  }
  std::cout << "\n";
}

// Each provider's hints for one resource: "{0} preferred, {0,1}".
void PrintHints(const std::string& resource, const json& hints) {
  std::cout << "    " << std::setw(18) << resource << " ";
  if (hints.is_null()) {
    std::cout << "any NUMA node (no preference)\n";
    return;
  }
  if (hints.empty()) std::cout << "cannot be satisfied";
  bool first = true;
  for (const json& hint : hints) {
    std::cout << (first ? "" : ", ") << "{"
              << (hint["mask"].is_null() ? "any" : Join(hint["mask"])) << "}"
              << (hint["preferred"].get<bool>() ? " preferred" : "");
    first = false;
  }
  std::cout << "\n";
}

// One merge of the explanation: the hints, the merged hint and the
// decision, and the Memory Manager's lines.
void PrintMerge(const json& pod, const json& merge) {
  std::cout << "  hints"
            << (merge["container"].is_null()
                    ? std::string(" for the pod")
                    : " for container " + merge["container"].get<std::string>())
            << ":\n";
  for (const json& provider : merge["providers"]) {
    for (const auto& [resource, hints] : provider.items()) {
      PrintHints(resource, hints);
    }
  }
  std::cout << "  merged: {"
            << (merge["merged"]["mask"].is_null()
                    ? std::string("any")
                    : Join(merge["merged"]["mask"]))
            << "}"
            << (merge["merged"]["preferred"].get<bool>() ? " preferred"
                                                         : " not preferred")
            << (merge["admit"].get<bool>()
                    ? ", admitted by the Topology Manager"
                    : ", rejected")
            << ": " << merge["reason"].get<std::string>() << "\n";
  // The merge admitted, the pod is refused all the same: a hint provider's
  // Allocate failed after it, which the kubelet reports as
  // UnexpectedAdmissionError, not TopologyAffinityError.
  if (merge["admit"].get<bool>() && !pod["admitted"].get<bool>() &&
      pod["reason"] == "UnexpectedAdmissionError") {
    std::cout << "  then refused: an allocation after the merge failed "
                 "(the kubelet's UnexpectedAdmissionError, not "
                 "TopologyAffinityError: the merge itself admitted): "
              << pod.value("message", std::string()) << "\n";
  }
  if (merge.contains("memory") && merge["memory"].is_array()) {
    std::cout << "  memory:\n";
    for (const json& line : merge["memory"]) {
      if (line.is_string()) {
        std::cout << "    " << line.get<std::string>() << "\n";
      }
    }
  }
}

void PrintPodTable(const json& pods, bool explain, bool show_policy = false) {
  std::cout << std::left << std::setw(18) << "POD" << std::setw(14)
            << "CONTAINER" << std::setw(8) << "NUMA" << std::setw(14) << "CPUS"
            << "DEVICES\n";
  for (const json& pod : pods) {
    if (!pod["admitted"].get<bool>()) {
      std::cout << std::setw(18) << pod["pod"].get<std::string>() << "REJECTED "
                << pod["reason"].get<std::string>() << ": "
                << pod["message"].get<std::string>() << "\n";
    }
    for (const json& c : pod["containers"]) {
      PrintContainerRow(pod["pod"].get<std::string>(), c);
    }
    const json& policy = pod.value("topology_policy", json(nullptr));
    if ((explain || show_policy) && policy.is_object()) {
      PrintPodPolicy(pod, policy);
    }
    if (explain && pod.contains("explanation")) {
      for (const json& merge : pod["explanation"]) PrintMerge(pod, merge);
    }
    // The CPU manager's full-pcpus-only option refused it (the kubelet's
    // SMTAlignmentError), whatever the merge said.
    if (explain && !pod["admitted"].get<bool>() &&
        pod["reason"] == "SMTAlignmentError") {
      std::cout << "  refused by the CPU manager's option full-pcpus-only "
                   "(exclusive CPUs only as whole cores): "
                << pod.value("message", std::string()) << "\n";
    }
  }
}

int RunAdmit(const std::vector<std::string>& files, const std::string& format,
             bool explain, const std::string& socket) {
  std::vector<ManifestText> manifests;
  size_t total = 0;
  for (const std::string& file : files) {
    auto text = topology::ReadTextFile(file, kMaxManifestBytes);
    if (!text.ok()) {
      std::cerr << "topology-manager admit: " << text.status().message()
                << " (a Pod manifest is a few KiB)\n";
      return kExitUsage;
    }
    total += text->size();
    if (total > kMaxAdmitRequestBytes) {
      std::cerr << "topology-manager admit: the manifests together are larger "
                   "than "
                << topology::ByteSize(kMaxAdmitRequestBytes)
                << ", the limit of one call; admit them in several\n";
      return kExitUsage;
    }
    // The server checks each manifest and names the field or line of a
    // bad one (a usage error, never a transport failure).
    manifests.push_back(
        {IsValidUtf8(file) ? file : "(file)", std::move(*text)});
  }
  const auto pods =
      Call(socket, "Admit", EncodeAdmitRequest(manifests, explain),
           std::chrono::minutes(5));
  if (!pods.ok()) return Unreachable("admit", pods.status(), socket);
  if (format == "json") {
    for (const json& pod : *pods) {
      json out = {{"pod", pod["pod"]},
                  {"admitted", pod["admitted"]},
                  {"reason", pod["reason"]},
                  {"message", pod["message"]},
                  {"topology_policy", pod["topology_policy"]},
                  {"containers", json::array()}};
      for (const json& c : pod["containers"]) {
        json container = {{"name", c["name"]},
                          {"devices", c["devices"]},
                          {"cpus", c["cpus"]},
                          {"numa_nodes", c["numa_nodes"]},
                          {"memory", c.value("memory", json::array())}};
        if (c.contains("allocate_responses")) {
          container["allocate_responses"] = c["allocate_responses"];
        }
        out["containers"].push_back(std::move(container));
      }
      if (explain) out["explanation"] = pod["explanation"];
      std::cout << out.dump() << "\n";
    }
  } else {
    PrintPodTable(*pods, explain);
  }
  for (const json& pod : *pods) {
    if (!pod["admitted"].get<bool>()) return kExitRejected;
  }
  return 0;
}

int RunRelease(const std::string& pod, const std::string& socket) {
  if (!IsValidUtf8(pod)) {
    std::cerr << "topology-manager release: the pod name is not valid UTF-8\n";
    return kExitUsage;
  }
  const auto reply = Call(socket, "Release", EncodeReleaseRequest(pod),
                          std::chrono::seconds(30));
  if (!reply.ok()) return Unreachable("release", reply.status(), socket);
  std::cout << "released " << pod << "\n";
  return 0;
}

int RunStatus(const std::string& format, const std::string& socket) {
  const auto reply = Call(socket, "Status",
                          EncodeStatusRequest(format == "nrt" ? "nrt" : "json"),
                          std::chrono::seconds(30));
  if (!reply.ok()) return Unreachable("status", reply.status(), socket);
  const json& doc = *reply;
  if (format != "text") {
    std::cout << doc.dump(2) << "\n";
    return 0;
  }
  std::cout << "node " << doc["node"].get<std::string>() << ": policy "
            << doc["policy"].get<std::string>() << ", scope "
            << doc["scope"].get<std::string>() << ", CPU policy "
            << doc["cpu_policy"].get<std::string>() << ", memory policy "
            << doc.value("memory_policy", std::string("None")) << "\n";
  for (const json& node : doc["numa_nodes"]) {
    std::cout << "  NUMA node " << node["id"] << ": CPUs "
              << node["cpus"].get<std::string>() << "\n";
  }
  std::cout << "resources:\n";
  for (const json& r : doc["resources"]) {
    std::cout << "  " << r["name"].get<std::string>() << ": capacity "
              << r["capacity"] << ", allocatable " << r["allocatable"]
              << ", in use " << r["in_use"]
              << (r["connected"].get<bool>() ? "" : " (plugin disconnected)")
              << "\n";
    for (const auto& [node, counts] : r["numa_nodes"].items()) {
      std::cout << "    node " << node << ": " << counts["available"]
                << " available of " << counts["capacity"] << "\n";
    }
  }
  std::cout << "pods:\n";
  PrintPodTable(doc["pods"], false, /*show_policy=*/true);
  return 0;
}

}  // namespace

void ServeFlags::AddFlags(CLI::App& serve) {
  serve.add_option("--plugin-dir", plugin_dir, "Device plugin directory")
      ->capture_default_str();
  serve
      .add_option("--host-root", host_root,
                  "Directory whose sys/ is the machine's")
      ->capture_default_str();
  serve.add_option("--hwloc-xml", hwloc_xml,
                   "Act for the machine of this hwloc XML export");
  serve
      .add_option("--control-socket", control_socket,
                  "Socket of the admit/release/status commands")
      ->capture_default_str();
  serve
      .add_option("--topology-manager-policy", policy,
                  "none, best-effort, restricted, single-numa-node, or "
                  "dynamic: each pod's own policy (beyond the kubelet)")
      ->capture_default_str();
  serve.add_option("--topology-manager-scope", scope, "container or pod")
      ->capture_default_str();
  serve.add_option("--topology-manager-policy-options", policy_options,
                   "key=value,... (e.g. prefer-closest-numa-nodes=true)");
  serve.add_option("--cpu-manager-policy", cpu_policy, "none or static")
      ->capture_default_str();
  serve.add_option("--cpu-manager-policy-options", cpu_policy_options,
                   "key=value,... (e.g. full-pcpus-only=true), as the "
                   "kubelet's flag");
  serve.add_option("--feature-gates", feature_gates,
                   "Name=true|false,..., as the kubelet's flag (read: "
                   "CPUManagerPolicyAlphaOptions, CPUManagerPolicyBetaOptions; "
                   "PodLevelResourceManagers=true is refused)");
  serve.add_option("--reserved-cpus", reserved_cpus,
                   "CPUs kept for the system (cpulist); without it the "
                   "static policy keeps as many as --kube-reserved plus "
                   "--system-reserved cpu, rounded up, chosen as the "
                   "kubelet chooses them");
  serve
      .add_option("--memory-manager-policy", memory.policy,
                  "None or Static (the kubelet's Memory Manager)")
      ->capture_default_str();
  serve.add_option("--reserved-memory", memory.reserved_memory,
                   "Memory reserved per NUMA node, repeatable "
                   "(0:memory=1Gi with --kube-reserved memory=924Mi): per "
                   "type the reservations add up to --kube-reserved + "
                   "--system-reserved + the --eviction-hard memory, as the "
                   "kubelet requires (so huge pages cannot be reserved)");
  serve.add_option("--kube-reserved", memory.kube_reserved,
                   "The kubelet's --kube-reserved (cpu=1,memory=2Gi,...)");
  serve.add_option("--system-reserved", memory.system_reserved,
                   "The kubelet's --system-reserved (cpu=1,memory=2Gi,...)");
  serve.add_option(
      "--eviction-hard", memory.eviction_hard,
      "The kubelet's --eviction-hard; its memory.available counts in the "
      "reservation (default memory.available<100Mi)");
  serve
      .add_option("--memory-drift-tolerance", memory_drift_tolerance,
                  "On restart, accept a NUMA node's memory total that moved "
                  "by up to this much (KEP-6232; beyond the kubelet)")
      ->capture_default_str();
  serve
      .add_option("--grace-period", grace_period,
                  "Removal delay of a disconnected plugin's resource")
      ->capture_default_str();
  serve.add_option(
      "--node-name", node_name,
      "Name in status and NodeResourceTopology (default: host name)");
  serve.add_flag("--cost-based-selection", cost_based_selection,
                 "Choose a multi-resource container's PCI devices together by "
                 "PCIe cost (beyond the kubelet)");
  serve
      .add_option("--plugin-rpc-timeout", rpc_timeout,
                  "Deadline of GetPreferredAllocation and Allocate calls "
                  "(Go duration; the kubelet has none)")
      ->capture_default_str();
  serve.add_option("--control-group", control_group,
                   "Group (name or id) allowed to use the control socket "
                   "(mode 0660); default: root only (0600)");
  serve.add_option("-v,--v", verbosity, "Log verbosity");
  serve.add_option(
      "--config", kubelet_config,
      "A KubeletConfiguration file (kubelet.config.k8s.io/v1beta1), as the "
      "kubelet's --config: the fields of the four managers and Node "
      "Allocatable apply; flags given as well override them");
}

int RunManagerCli(int argc, char** argv, ServeCommand serve_command) {
  CLI::App app{
      "The kubelet's device manager, CPU manager and Topology "
      "Manager, outside the kubelet."};
  app.set_version_flag("--version",
                       std::string("topology-manager ") + TOPOLOGY_VERSION);
  app.require_subcommand(1);
  std::string control_socket = kDefaultControlSocket;

  auto* merge = app.add_subcommand(
      "merge", "Merge one case of topology hints (JSON on stdin or in FILE)");
  std::string file;
  std::string engine = "fast";
  bool explain = false;
  merge->add_option("file", file, "JSON case file (default: stdin)");
  merge->add_option("--engine", engine, "Merge engine")
      ->check(CLI::IsMember({"fast", "reference"}))
      ->capture_default_str();
  merge->add_flag("--explain", explain, "Say why the merged hint won");

  ServeFlags serve_flags;
  auto* serve = app.add_subcommand(
      "serve", "Accept device plugins on kubelet.sock and admit pods");
  serve_flags.AddFlags(*serve);

  std::vector<std::string> pod_files;
  std::string admit_format = "text";
  bool admit_explain = false;
  auto* admit = app.add_subcommand("admit", "Admit pods (Pod YAML manifests)");
  admit->add_option("pods", pod_files, "Pod manifests")->required();
  admit->add_option("--format", admit_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  admit->add_flag("--explain", admit_explain,
                  "Show each provider's hints and why the merge won");
  admit->add_option("--control-socket", control_socket, "Control socket")
      ->capture_default_str();

  std::string pod_name;
  auto* release =
      app.add_subcommand("release", "Release a pod's devices and CPUs");
  release->add_option("pod", pod_name, "uid, namespace/name or name")
      ->required();
  release->add_option("--control-socket", control_socket, "Control socket")
      ->capture_default_str();

  std::string status_format = "text";
  auto* status = app.add_subcommand("status", "Resources, NUMA nodes and pods");
  status->add_option("--format", status_format, "text, json or nrt")
      ->check(CLI::IsMember({"text", "json", "nrt"}))
      ->capture_default_str();
  status->add_option("--control-socket", control_socket, "Control socket")
      ->capture_default_str();

  try {
    // "-v=2" and "-config=..." as Go's flags take them.
    std::vector<std::string> go_style =
        topology::common::GoStyleArguments(argc, argv);
    std::vector<const char*> args;
    args.reserve(go_style.size());
    for (const std::string& arg : go_style) args.push_back(arg.c_str());
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : kExitUsage;
  }
  if (merge->parsed()) return RunMerge(file, engine, explain);
  if (admit->parsed()) {
    return RunAdmit(pod_files, admit_format, admit_explain, control_socket);
  }
  if (release->parsed()) return RunRelease(pod_name, control_socket);
  if (status->parsed()) return RunStatus(status_format, control_socket);
  if (serve->parsed()) {
    for (const CLI::Option* option : serve->get_options()) {
      if (option->count() > 0) serve_flags.given.insert(option->get_name());
    }
    return serve_command(serve_flags, argv);
  }
  return kExitUsage;
}

int RunGuarded(int argc, char** argv, ServeCommand serve) {
  return common::RunGuarded("topology-manager",
                            [&] { return RunManagerCli(argc, argv, serve); });
}

}  // namespace topology::host
