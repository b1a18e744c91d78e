// Named synthetic machines written with SysfsTreeBuilder, for testing code
// that reads a node's topology (libtopology, a device plugin, a DRA driver)
// on any machine: point its host root at the directory written. Each mirrors
// a class of real node; `topology-sysfs-fixture --list` and docs/testing.md
// describe them.
//
// Part of the installed test kit (find_package(libtopology COMPONENTS
// testing), pkg-config libtopology-testing). Test code: failures to write
// throw std::filesystem::filesystem_error.
#ifndef TOPOLOGY_TESTING_MACHINES_H_
#define TOPOLOGY_TESTING_MACHINES_H_

#include <filesystem>
#include <string>
#include <vector>

namespace topology::testing {

// 2 sockets x 8 cores x 2 threads, nodes 0/1 (SLIT 10/21). Per socket two
// host bridges, each with a root port and one PCIe switch carrying 2 GPUs
// (10de:20b0 class 030200, driver nvidia) and 1 NIC (15b3:101d class 020000,
// mlx5_core): 8 GPUs behind 4 switches and 4 NICs. Also the NVIDIA driver's
// view of the GPUs: proc/driver/nvidia/gpus/<bdf>/information (minors 0-7
// in address order, UUIDs GPU-5a0c1d2e-7b3f-4c19-9e8a-00001d2e000<minor>)
// and dev/nvidia0-7, dev/nvidiactl, dev/nvidia-uvm, dev/nvidia-uvm-tools
// (regular files).
void WriteDualSocketGpuMachine(const std::filesystem::path& root);

// 2 sockets x 8 cores x 2 threads, nodes 0/1 (SLIT 10/21). Per socket one
// host bridge with a PCIe switch carrying 4 processing accelerators
// (1da3:1020 class 120000, driver habanalabs, each with its
// dev/accel/accel<N> node) and one NIC physical function (15b3:101d,
// mlx5_core, sriov_totalvfs 8) with 4 virtual functions (15b3:101e, bound
// to vfio-pci, one IOMMU group each, with physfn/virtfnN links).
// Accelerators 0000:1a-1d:00.0 and NIC 0000:1e:00.0 on node 0,
// 0000:9a-9d:00.0 and 0000:9e:00.0 on node 1.
void WriteAcceleratorMachine(const std::filesystem::path& root);

// Sub-NUMA clustering: 2 sockets x 2 nodes (SLIT 10/11/21), CPUs 0-15 on
// socket 0 (nodes 0,1) and 16-31 on socket 1 (nodes 2,3), one L3 cache per
// socket (ids 0, 1); one GPU and one NIC per node.
void WriteSubNumaClusterMachine(const std::filesystem::path& root);

// One socket and node, 16 cores x 2 threads (CPU c and c+16), an L3 cache
// per 4 cores (ids 0-3: CPUs 0-3,16-19 share L3 0, ...), as AMD's core
// complexes: the kubelet's uncore caches. One PCIe switch with a GPU
// (bus 0x41) and a NIC.
void WriteSplitL3Machine(const std::filesystem::path& root);

// A VM with 2 virtual NUMA nodes whose devices all report numa_node -1 and
// local_cpulist = every CPU (what the kernel prints then).
void WriteVmMachine(const std::filesystem::path& root);

// 2 sockets plus a CPU-less CXL memory node 2 (SLIT 10/21/14 and 24) with a
// CXL device on it whose local_cpulist is empty.
void WriteCpulessNodeMachine(const std::filesystem::path& root);

// Online nodes 0, 2 and 5 only (sparse ids): distance columns are in online
// order, so node 5 is column 2.
void WriteSparseNodeMachine(const std::filesystem::path& root);

// Where WriteSriovMachine puts each function: PFs in order, each followed
// by its VFs. Every address is distinct and none is a root port's, for up to
// 0xc0 PFs of up to 496 VFs.
struct SriovFunction {
  int node = 0;
  std::string host_bridge = {};  // "pci0000:0f"
  std::string root_port = {};    // "0000:0f:00.0"
  std::string address = {};
  std::string physfn = {};  // empty on a PF
};
std::vector<SriovFunction> SriovLayout(int pfs, int vfs_per_pf);

// 2 sockets, `pfs` SR-IOV physical functions (vfio-pci VFs, one IOMMU group
// each) with `vfs_per_pf` VFs each, PFs alternating between the sockets'
// root ports. "sriov-4096" is 16 PFs x 255 VFs = 4,096 functions.
void WriteSriovMachine(const std::filesystem::path& root, int pfs,
                       int vfs_per_pf);

struct MachineInfo {
  std::string name = {};
  std::string description = {};  // one line
};

// The machines WriteMachine() knows: "dual-socket-8gpu", "dual-socket-accel",
// "snc", "vm", "cpuless-node", "sparse-nodes", "sriov-4096", and the family
// "sriov-<P>x<V>": P physical functions (at most 192) with V virtual
// functions each (at most 496), alternating between two NUMA nodes.
std::vector<MachineInfo> Machines();
std::vector<std::string> MachineNames();

// Writes the named machine below `root` (sys/, and proc/ and dev/ where
// the machine has them); returns false for an unknown name.
bool WriteMachine(const std::string& name, const std::filesystem::path& root);

}  // namespace topology::testing

#endif  // TOPOLOGY_TESTING_MACHINES_H_
