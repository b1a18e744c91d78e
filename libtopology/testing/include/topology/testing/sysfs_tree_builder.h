// SysfsTreeBuilder writes synthetic sysfs trees the way the kernel lays them
// out: devices/system/{cpu,node}, devices/pciDDDD:BB/<bridges>/<function>,
// and bus/pci/devices links, for machines the named ones (machines.h) do
// not cover. Part of the installed test kit. Test code: it throws
// std::filesystem errors, which GoogleTest reports as failures.
#ifndef TOPOLOGY_TESTING_SYSFS_TREE_BUILDER_H_
#define TOPOLOGY_TESTING_SYSFS_TREE_BUILDER_H_

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace topology::testing {

struct PciFunctionSpec {
  // Root bus, e.g. "pci0000:17".
  std::string host_bridge = {};
  // PCI addresses from the root port down to the function itself (the last
  // entry). Bridges on the way are created as directories if missing.
  std::vector<std::string> path = {};
  uint32_t class_code = 0x030200;
  uint16_t vendor = 0x10de;
  uint16_t device = 0x1db4;
  uint16_t subsystem_vendor = 0x10de;
  uint16_t subsystem_device = 0x1212;
  std::optional<int> numa_node = {};              // nullopt: no file
  std::optional<std::string> local_cpulist = {};  // nullopt: no file
  std::optional<std::string> driver = {};         // link into bus/pci/drivers
  std::optional<int> iommu_group = {};
  std::optional<std::string> physfn = {};  // a VF's PF address
  std::optional<int> sriov_totalvfs = {};
  std::string link_speed = "16.0 GT/s PCIe";
  int link_width = 16;
};

class SysfsTreeBuilder {
 public:
  // Writes below root/sys. Creates root.
  explicit SysfsTreeBuilder(std::filesystem::path root);

  // Adds one online node with its cpulist and memory. Distances are written
  // by Finish().
  void AddNode(int id, const std::string& cpulist, uint64_t memory_bytes);
  // Writes nodeN/hugepages/hugepages-<kB>kB/{nr,free,surplus}_hugepages.
  void AddHugePages(int node, uint64_t page_size_bytes, uint64_t total,
                    uint64_t free);
  // SLIT rows in the order of node ids.
  void SetDistances(std::vector<std::vector<int>> rows);
  // Adds a CPU with its topology files.
  void AddCpu(int id, int package, int core, const std::string& siblings);
  // CPU `cpu`'s level 3 cache (cache/index3): sysfs id `id`, shared by
  // `shared` (a cpulist), 32 MiB unified.
  void AddL3Cache(int cpu, int id, const std::string& shared);
  // Adds a PCI function (bridges on the path are written with class 0x0604,
  // vendor 0x10b5 and the function's numa_node/local_cpulist).
  void AddPciFunction(const PciFunctionSpec& spec);
  // Adds a CPU that is present but offline: cpuN/online reads 0 and it is
  // left out of cpu/online (its topology files are gone, as on a kernel
  // that removes them on offlining).
  void AddOfflineCpu(int id);
  // Adds a device the kernel made of a PCI function: a directory
  // <function>/<subpath>/<name> (with its `device` link back to the
  // function) and the link class/<cls>/<name> to it, e.g.
  // ("net", "eth0", "0000:17:00.0", "net") or ("block", "nvme0n1",
  // "0000:3b:00.0", "nvme/nvme0").
  void AddClassDevice(const std::string& cls, const std::string& name,
                      const std::string& function, const std::string& subpath);

  struct FinishOptions {
    // Older kernels have no node/online; nodes are only the nodeN folders.
    bool node_online_file = true;
    // Some kernels have no cpu/online; CPUs are the cpuN folders.
    bool cpu_online_file = true;
  };
  // Writes node/online, possible, has_cpu, distances, each node's cpuN
  // links to its CPUs' directories (as sysfs has them, and cadvisor reads
  // them) and cpu/online (no node folder at all when no node was added: a
  // kernel without NUMA).
  void Finish() { Finish(FinishOptions{}); }
  void Finish(const FinishOptions& options);

  const std::filesystem::path& root() const { return root_; }
  std::filesystem::path Sys(const std::string& relative) const;

  // Writes `text` to root/sys/relative, creating directories.
  void WriteFile(const std::string& relative, const std::string& text) const;

 private:
  std::filesystem::path DeviceDir(const std::string& host_bridge,
                                  const std::vector<std::string>& path,
                                  size_t upto) const;
  void WriteFunctionFiles(const std::filesystem::path& dir,
                          const PciFunctionSpec& spec, bool bridge);
  void LinkBusEntry(const std::string& address,
                    const std::filesystem::path& dir);

  std::filesystem::path root_;
  std::map<int, std::string> node_cpus_;
  std::vector<std::vector<int>> distances_;
  std::vector<int> cpus_;
  std::vector<int> offline_cpus_;
  std::map<int, std::vector<int>> package_cpus_;
};

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_SYSFS_TREE_BUILDER_H_
