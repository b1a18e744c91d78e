#include "topology/testing/sysfs_tree_builder.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>
#include <sstream>

namespace topology::testing {
namespace fs = std::filesystem;
namespace {

std::string Hex(uint32_t value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, value);
  return buf;
}

std::string JoinIds(const std::vector<int>& ids) {
  std::string out;
  for (int id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out;
}

// Sorted ids -> the kernel's range list ("0-3,8").
std::string RangeList(const std::vector<int>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ids[i]);
    if (j > i) out += "-" + std::to_string(ids[j]);
    i = j + 1;
  }
  return out;
}

// cpulist -> hex mask in 32-bit words, as the kernel prints cpumap.
// "0-3,8" -> 0 1 2 3 8; empty when the text is not a CPU list.
std::vector<int> ParseCpulist(const std::string& cpulist) {
  std::vector<int> out;
  size_t start = 0;
  while (start < cpulist.size()) {
    size_t end = cpulist.find(',', start);
    if (end == std::string::npos) end = cpulist.size();
    const std::string item = cpulist.substr(start, end - start);
    int first = 0;
    int last = 0;
    int used = 0;
    if (std::sscanf(item.c_str(), "%d-%d%n", &first, &last, &used) == 2 &&
        static_cast<size_t>(used) == item.size()) {
    } else if (std::sscanf(item.c_str(), "%d%n", &first, &used) == 1 &&
               static_cast<size_t>(used) == item.size()) {
      last = first;
    } else {
      return {};
    }
    if (first < 0 || last < first || last - first > 65536) return {};
    for (int cpu = first; cpu <= last; ++cpu) out.push_back(cpu);
    start = end + 1;
  }
  return out;
}

std::string CpulistToMask(const std::string& cpulist) {
  std::vector<uint32_t> words(1, 0);
  std::stringstream in(cpulist);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty()) continue;
    const size_t dash = item.find('-');
    const int first = std::stoi(item.substr(0, dash));
    const int last =
        dash == std::string::npos ? first : std::stoi(item.substr(dash + 1));
    for (int cpu = first; cpu <= last; ++cpu) {
      const auto w = static_cast<size_t>(cpu / 32);
      if (words.size() <= w) words.resize(w + 1, 0);
      words[w] |= 1U << (cpu % 32);
    }
  }
  std::string out;
  for (size_t i = words.size(); i-- > 0;) {
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%08x", words[i]);
    if (!out.empty()) out += ',';
    out += buf;
  }
  return out;
}

}  // namespace

SysfsTreeBuilder::SysfsTreeBuilder(fs::path root) : root_(std::move(root)) {
  fs::create_directories(root_ / "sys" / "bus" / "pci" / "devices");
  fs::create_directories(root_ / "sys" / "devices" / "system" / "cpu");
}

fs::path SysfsTreeBuilder::Sys(const std::string& relative) const {
  return root_ / "sys" / relative;
}

void SysfsTreeBuilder::WriteFile(const std::string& relative,
                                 const std::string& text) const {
  const fs::path path = Sys(relative);
  fs::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw fs::filesystem_error("cannot write", path, std::error_code());
}

void SysfsTreeBuilder::AddNode(int id, const std::string& cpulist,
                               uint64_t memory_bytes) {
  node_cpus_[id] = cpulist;
  const std::string dir = "devices/system/node/node" + std::to_string(id);
  WriteFile(dir + "/cpulist", cpulist + "\n");
  WriteFile(dir + "/cpumap", CpulistToMask(cpulist) + "\n");
  WriteFile(dir + "/meminfo",
            "Node " + std::to_string(id) + " MemTotal:       " +
                std::to_string(memory_bytes / 1024) + " kB\nNode " +
                std::to_string(id) + " MemFree:        1024 kB\n");
}

void SysfsTreeBuilder::AddHugePages(int node, uint64_t page_size_bytes,
                                    uint64_t total, uint64_t free) {
  const std::string dir = "devices/system/node/node" + std::to_string(node) +
                          "/hugepages/hugepages-" +
                          std::to_string(page_size_bytes / 1024) + "kB";
  WriteFile(dir + "/nr_hugepages", std::to_string(total) + "\n");
  WriteFile(dir + "/free_hugepages", std::to_string(free) + "\n");
  WriteFile(dir + "/surplus_hugepages", "0\n");
}

void SysfsTreeBuilder::SetDistances(std::vector<std::vector<int>> rows) {
  distances_ = std::move(rows);
}

void SysfsTreeBuilder::AddCpu(int id, int package, int core,
                              const std::string& siblings) {
  cpus_.push_back(id);
  package_cpus_[package].push_back(id);
  const std::string dir = "devices/system/cpu/cpu" + std::to_string(id);
  WriteFile(dir + "/online", "1\n");
  WriteFile(dir + "/topology/physical_package_id",
            std::to_string(package) + "\n");
  WriteFile(dir + "/topology/die_id", "0\n");
  WriteFile(dir + "/topology/core_id", std::to_string(core) + "\n");
  WriteFile(dir + "/topology/thread_siblings_list", siblings + "\n");
  WriteFile(dir + "/topology/core_cpus_list", siblings + "\n");
  WriteFile(dir + "/topology/thread_siblings", CpulistToMask(siblings) + "\n");
  WriteFile(dir + "/topology/core_cpus", CpulistToMask(siblings) + "\n");
}

void SysfsTreeBuilder::AddL3Cache(int cpu, int id, const std::string& shared) {
  const std::string dir =
      "devices/system/cpu/cpu" + std::to_string(cpu) + "/cache/index3";
  WriteFile(dir + "/level", "3\n");
  WriteFile(dir + "/id", std::to_string(id) + "\n");
  WriteFile(dir + "/type", "Unified\n");
  WriteFile(dir + "/size", "32768K\n");
  WriteFile(dir + "/coherency_line_size", "64\n");
  WriteFile(dir + "/ways_of_associativity", "16\n");
  WriteFile(dir + "/physical_line_partition", "1\n");
  WriteFile(dir + "/number_of_sets", "32768\n");
  WriteFile(dir + "/shared_cpu_list", shared + "\n");
  WriteFile(dir + "/shared_cpu_map", CpulistToMask(shared) + "\n");
}

fs::path SysfsTreeBuilder::DeviceDir(const std::string& host_bridge,
                                     const std::vector<std::string>& path,
                                     size_t upto) const {
  fs::path dir = Sys("devices") / host_bridge;
  for (size_t i = 0; i <= upto; ++i) dir /= path[i];
  return dir;
}

void SysfsTreeBuilder::LinkBusEntry(const std::string& address,
                                    const fs::path& dir) {
  const fs::path link = Sys("bus/pci/devices") / address;
  if (fs::exists(fs::symlink_status(link))) return;
  fs::create_directory_symlink(
      fs::path("../../..") / fs::relative(dir, Sys("")), link);
}

void SysfsTreeBuilder::WriteFunctionFiles(const fs::path& dir,
                                          const PciFunctionSpec& spec,
                                          bool bridge) {
  const std::string rel = fs::relative(dir, Sys("")).string();
  const auto write = [&](const char* name, const std::string& text) {
    WriteFile(rel + "/" + name, text + "\n");
  };
  write("class", Hex(bridge ? 0x060400 : spec.class_code, 6));
  write("vendor", Hex(bridge ? 0x10b5 : spec.vendor, 4));
  write("device", Hex(bridge ? 0x9797 : spec.device, 4));
  write("subsystem_vendor", Hex(bridge ? 0x10b5 : spec.subsystem_vendor, 4));
  write("subsystem_device", Hex(bridge ? 0 : spec.subsystem_device, 4));
  write("revision", "0x01");
  if (spec.numa_node) write("numa_node", std::to_string(*spec.numa_node));
  if (spec.local_cpulist) {
    write("local_cpulist", *spec.local_cpulist);
    write("local_cpus", CpulistToMask(*spec.local_cpulist));
  }
  write("current_link_speed", spec.link_speed);
  write("current_link_width", std::to_string(spec.link_width));
  write("max_link_speed", spec.link_speed);
  write("max_link_width", std::to_string(spec.link_width));
  // 64 bytes of config space, as an unprivileged reader sees it.
  WriteFile(rel + "/config", std::string(64, '\0'));
  // Relative links from the function directory back to the sysfs root.
  fs::path to_sys;
  for (int64_t i = 0; i <= std::count(rel.begin(), rel.end(), '/'); ++i) {
    to_sys /= "..";
  }
  const std::string driver =
      bridge ? std::string("pcieport") : spec.driver.value_or("");
  if (!driver.empty()) {
    // Dangling, as in recordings that lack bus/pci/drivers.
    fs::create_directory_symlink(to_sys / "bus/pci/drivers" / driver,
                                 dir / "driver");
  }
  if (!bridge && spec.iommu_group) {
    const fs::path target =
        to_sys / "kernel/iommu_groups" / std::to_string(*spec.iommu_group);
    fs::create_directories(
        Sys("kernel/iommu_groups/" + std::to_string(*spec.iommu_group)));
    fs::create_directory_symlink(target, dir / "iommu_group");
  }
  if (!bridge && spec.sriov_totalvfs) {
    write("sriov_totalvfs", std::to_string(*spec.sriov_totalvfs));
    write("sriov_numvfs", std::to_string(*spec.sriov_totalvfs));
  }
}

void SysfsTreeBuilder::AddPciFunction(const PciFunctionSpec& spec) {
  for (size_t i = 0; i < spec.path.size(); ++i) {
    const fs::path dir = DeviceDir(spec.host_bridge, spec.path, i);
    const bool is_function = i + 1 == spec.path.size();
    if (!is_function && fs::exists(dir / "class")) continue;
    fs::create_directories(dir);
    WriteFunctionFiles(dir, spec, !is_function);
    LinkBusEntry(spec.path[i], dir);
    if (is_function && spec.physfn) {
      // physfn -> ../<pf>; the PF gets virtfnN -> ../<vf>.
      const fs::path pf_dir = dir.parent_path() / *spec.physfn;
      fs::create_directory_symlink(fs::path("..") / *spec.physfn,
                                   dir / "physfn");
      size_t index = 0;
      while (fs::exists(
          fs::symlink_status(pf_dir / ("virtfn" + std::to_string(index))))) {
        ++index;
      }
      fs::create_directory_symlink(fs::path("..") / spec.path[i],
                                   pf_dir / ("virtfn" + std::to_string(index)));
    }
  }
}

void SysfsTreeBuilder::AddOfflineCpu(int id) {
  offline_cpus_.push_back(id);
  WriteFile("devices/system/cpu/cpu" + std::to_string(id) + "/online", "0\n");
}

void SysfsTreeBuilder::AddClassDevice(const std::string& cls,
                                      const std::string& name,
                                      const std::string& function,
                                      const std::string& subpath) {
  const fs::path function_dir =
      fs::canonical(Sys("bus/pci/devices") / function);
  const fs::path dir = function_dir / subpath / name;
  fs::create_directories(dir);
  // <class device>/device -> the function, as the kernel links it.
  fs::create_directory_symlink(fs::relative(function_dir, dir), dir / "device");
  fs::create_directories(Sys("class") / cls);
  fs::create_directory_symlink(
      fs::path("../..") / fs::relative(dir, fs::canonical(Sys(""))),
      Sys("class") / cls / name);
}

void SysfsTreeBuilder::Finish(const FinishOptions& options) {
  std::vector<int> ids;
  std::vector<int> with_cpus;
  for (const auto& [id, cpus] : node_cpus_) {
    ids.push_back(id);
    if (!cpus.empty()) with_cpus.push_back(id);
  }
  // Node lists use the cpulist format; ids as given (possibly sparse).
  std::string online;
  for (int id : ids) online += (online.empty() ? "" : ",") + std::to_string(id);
  if (!ids.empty() && options.node_online_file) {
    WriteFile("devices/system/node/online", online + "\n");
    WriteFile("devices/system/node/possible", online + "\n");
    WriteFile("devices/system/node/has_cpu", JoinIds(with_cpus) + "\n");
    WriteFile("devices/system/node/has_memory", online + "\n");
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    std::vector<int> row;
    if (i < distances_.size()) {
      row = distances_[i];
    } else {
      for (size_t j = 0; j < ids.size(); ++j) row.push_back(i == j ? 10 : 20);
    }
    std::string text;
    for (int d : row) text += (text.empty() ? "" : " ") + std::to_string(d);
    WriteFile("devices/system/node/node" + std::to_string(ids[i]) + "/distance",
              text + "\n");
  }
  // Each node's CPUs as links to their directories, as sysfs has them
  // (cadvisor finds a node's CPUs so); a list that is not one is left.
  for (const auto& [id, cpus] : node_cpus_) {
    for (int cpu : ParseCpulist(cpus)) {
      const fs::path link =
          Sys("devices/system/node/node" + std::to_string(id) + "/cpu" +
              std::to_string(cpu));
      if (!fs::exists(fs::symlink_status(link))) {
        fs::create_directory_symlink(
            fs::path("../../cpu/cpu" + std::to_string(cpu)), link);
      }
    }
  }
  for (auto& [package, members] : package_cpus_) {
    std::sort(members.begin(), members.end());
    const std::string list = JoinIds(members);
    for (int cpu : members) {
      const std::string dir =
          "devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
      WriteFile(dir + "package_cpus_list", list + "\n");
      WriteFile(dir + "core_siblings_list", list + "\n");
      WriteFile(dir + "package_cpus", CpulistToMask(list) + "\n");
      WriteFile(dir + "core_siblings", CpulistToMask(list) + "\n");
    }
  }
  std::sort(cpus_.begin(), cpus_.end());
  std::vector<int> present = cpus_;
  present.insert(present.end(), offline_cpus_.begin(), offline_cpus_.end());
  std::sort(present.begin(), present.end());
  if (options.cpu_online_file) {
    WriteFile("devices/system/cpu/online", RangeList(cpus_) + "\n");
  }
  WriteFile("devices/system/cpu/possible", RangeList(present) + "\n");
  WriteFile("devices/system/cpu/present", RangeList(present) + "\n");
}

}  // namespace topology::testing
