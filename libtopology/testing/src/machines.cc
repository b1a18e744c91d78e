#include "topology/testing/machines.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "topology/testing/sysfs_tree_builder.h"

namespace topology::testing {
namespace {

constexpr uint64_t kMiB = 1024ULL * 1024;
constexpr uint64_t kGiB = 1024ULL * 1024 * 1024;

std::string Bdf(int bus, int dev, int fn = 0) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "0000:%02x:%02x.%d", bus, dev, fn);
  return buf;
}

std::string HostBridge(int bus) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "pci0000:%02x", bus);
  return buf;
}

// sockets x cores x 2 threads; thread t of core c on socket s is CPU
// s*cores + c + t*sockets*cores (Linux's usual numbering).
void AddCpus(SysfsTreeBuilder& b, int sockets, int cores) {
  const int total = sockets * cores;
  for (int s = 0; s < sockets; ++s) {
    for (int c = 0; c < cores; ++c) {
      const int first = s * cores + c;
      const std::string siblings =
          std::to_string(first) + "," + std::to_string(first + total);
      b.AddCpu(first, s, c, siblings);
      b.AddCpu(first + total, s, c, siblings);
    }
  }
}

std::string SocketCpus(int socket, int cores, int sockets) {
  const int first = socket * cores;
  const int total = sockets * cores;
  return std::to_string(first) + "-" + std::to_string(first + cores - 1) + "," +
         std::to_string(first + total) + "-" +
         std::to_string(first + total + cores - 1);
}

// A root port at bus:00.0 with a switch (usp on bus+1, dsps on bus+2) and one
// endpoint per downstream port on bus+3+i.
void AddSwitchTree(SysfsTreeBuilder& b, int bus, int node,
                   const std::string& cpus,
                   const std::vector<PciFunctionSpec>& endpoints) {
  for (size_t i = 0; i < endpoints.size(); ++i) {
    PciFunctionSpec spec = endpoints[i];
    spec.host_bridge = HostBridge(bus);
    const int dsp_dev = static_cast<int>(i + 1) * 4;
    spec.path = {Bdf(bus, 0), Bdf(bus + 1, 0), Bdf(bus + 2, dsp_dev),
                 Bdf(bus + 3 + static_cast<int>(i), 0)};
    spec.numa_node = node;
    spec.local_cpulist = cpus;
    b.AddPciFunction(spec);
  }
}

PciFunctionSpec Gpu(int iommu_group) {
  PciFunctionSpec gpu;
  gpu.class_code = 0x030200;
  gpu.vendor = 0x10de;
  gpu.device = 0x20b0;
  gpu.subsystem_vendor = 0x10de;
  gpu.subsystem_device = 0x134f;
  gpu.driver = "nvidia";
  gpu.iommu_group = iommu_group;
  return gpu;
}

PciFunctionSpec Nic(int iommu_group) {
  PciFunctionSpec nic;
  nic.class_code = 0x020000;
  nic.vendor = 0x15b3;
  nic.device = 0x101d;
  nic.subsystem_vendor = 0x15b3;
  nic.subsystem_device = 0x0047;
  nic.driver = "mlx5_core";
  nic.iommu_group = iommu_group;
  return nic;
}

// What the NVIDIA driver adds outside sys/: /proc/driver/nvidia/gpus/<bdf>/
// information per GPU bound to "nvidia" (minors in address order) and the
// /dev/nvidia* nodes (regular files here).
void WriteNvidiaDriverEntries(const std::filesystem::path& root) {
  namespace fs = std::filesystem;
  std::vector<std::string> gpus;
  for (const auto& entry :
       fs::directory_iterator(root / "sys/bus/pci/devices")) {
    std::error_code error;
    const fs::path driver = fs::read_symlink(entry.path() / "driver", error);
    if (!error && driver.filename() == "nvidia") {
      gpus.push_back(entry.path().filename().string());
    }
  }
  std::sort(gpus.begin(), gpus.end());
  fs::create_directories(root / "dev");
  for (size_t minor = 0; minor < gpus.size(); ++minor) {
    const fs::path dir = root / "proc/driver/nvidia/gpus" / gpus[minor];
    fs::create_directories(dir);
    char uuid[64];
    std::snprintf(uuid, sizeof(uuid), "GPU-5a0c1d2e-7b3f-4c19-9e8a-%012zx",
                  0x1d2e0000 + minor);
    std::ofstream(dir / "information")
        << "Model: \t\t NVIDIA A100-SXM4-40GB\n"
        << "IRQ:   \t\t " << 120 + minor << "\n"
        << "GPU UUID: \t " << uuid << "\n"
        << "Video BIOS: \t 92.00.36.00.10\n"
        << "Bus Type: \t PCIe\n"
        << "DMA Size: \t 47 bits\n"
        << "DMA Mask: \t 0x7fffffffffff\n"
        << "Bus Location: \t " << gpus[minor] << "\n"
        << "Device Minor: \t " << minor << "\n"
        << "GPU Excluded:\t No\n";
    std::ofstream node(root / "dev" / ("nvidia" + std::to_string(minor)));
  }
  for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    std::ofstream file(root / "dev" / node);
  }
}

}  // namespace

void WriteDualSocketGpuMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  AddCpus(b, 2, 8);
  b.AddNode(0, SocketCpus(0, 8, 2), 256 * kGiB);
  b.AddNode(1, SocketCpus(1, 8, 2), 256 * kGiB);
  // Huge pages as a DPDK or training node sets them aside: 2 MiB pages on
  // both sockets, 1 GiB pages on each, some in use on node 0.
  b.AddHugePages(0, 2 * kMiB, 4096, 4096);
  b.AddHugePages(0, kGiB, 16, 12);
  b.AddHugePages(1, 2 * kMiB, 4096, 4096);
  b.AddHugePages(1, kGiB, 16, 16);
  b.SetDistances({{10, 21}, {21, 10}});
  int group = 10;
  // Socket 0: host bridges 0x17 and 0x3a; socket 1: 0x97 and 0xb7.
  const int buses[] = {0x17, 0x3a, 0x97, 0xb7};
  for (int i = 0; i < 4; ++i) {
    const int node = i / 2;
    AddSwitchTree(b, buses[i], node, SocketCpus(node, 8, 2),
                  {Gpu(group), Gpu(group + 1), Nic(group + 2)});
    group += 3;
  }
  b.Finish();
  WriteNvidiaDriverEntries(root);
}

void WriteAcceleratorMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  AddCpus(b, 2, 8);
  b.AddNode(0, SocketCpus(0, 8, 2), 256 * kGiB);
  b.AddNode(1, SocketCpus(1, 8, 2), 256 * kGiB);
  b.SetDistances({{10, 21}, {21, 10}});
  constexpr int kAccelerators = 4;
  constexpr int kVfs = 4;
  int group = 60;
  int minor = 0;
  const int buses[] = {0x17, 0x97};
  for (int node = 0; node < 2; ++node) {
    const int bus = buses[node];
    const std::string cpus = SocketCpus(node, 8, 2);
    std::vector<PciFunctionSpec> endpoints;
    for (int i = 0; i < kAccelerators; ++i) {
      PciFunctionSpec accel;
      accel.class_code = 0x120000;
      accel.vendor = 0x1da3;
      accel.device = 0x1020;
      accel.subsystem_vendor = 0x1da3;
      accel.subsystem_device = 0x0001;
      accel.driver = "habanalabs";
      accel.iommu_group = group++;
      endpoints.push_back(accel);
    }
    PciFunctionSpec pf = Nic(group++);
    pf.sriov_totalvfs = kVfs;
    endpoints.push_back(pf);
    AddSwitchTree(b, bus, node, cpus, endpoints);
    // AddSwitchTree's layout: endpoint i on bus + 3 + i behind the
    // downstream port (i + 1) * 4 of the switch.
    const int pf_bus = bus + 3 + kAccelerators;
    for (int vf = 0; vf < kVfs; ++vf) {
      PciFunctionSpec v = Nic(group++);
      v.device = 0x101e;
      v.driver = "vfio-pci";
      v.host_bridge = HostBridge(bus);
      v.path = {Bdf(bus, 0), Bdf(bus + 1, 0),
                Bdf(bus + 2, (kAccelerators + 1) * 4), Bdf(pf_bus, 0, 2 + vf)};
      v.numa_node = node;
      v.local_cpulist = cpus;
      v.physfn = Bdf(pf_bus, 0);
      b.AddPciFunction(v);
    }
    for (int i = 0; i < kAccelerators; ++i, ++minor) {
      const std::string name = "accel" + std::to_string(minor);
      b.AddClassDevice("accel", name, Bdf(bus + 3 + i, 0), "accel");
      std::filesystem::create_directories(root / "dev/accel");
      std::ofstream(root / "dev/accel" / name);
    }
  }
  b.Finish();
}

void WriteSubNumaClusterMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  // 2 sockets x 8 cores, no SMT: node = 2*socket + (core / 4).
  // One L3 cache a socket, over both its nodes (the kubelet's uncore
  // cache then spans them).
  for (int cpu = 0; cpu < 32; ++cpu) {
    b.AddCpu(cpu, cpu / 16, cpu % 16, std::to_string(cpu));
    b.AddL3Cache(cpu, cpu / 16, cpu < 16 ? "0-15" : "16-31");
  }
  for (int node = 0; node < 4; ++node) {
    const int first = node * 8;
    b.AddNode(node, std::to_string(first) + "-" + std::to_string(first + 7),
              128 * kGiB);
  }
  b.SetDistances(
      {{10, 11, 21, 21}, {11, 10, 21, 21}, {21, 21, 10, 11}, {21, 21, 11, 10}});
  const int buses[] = {0x17, 0x3a, 0x97, 0xb7};
  for (int node = 0; node < 4; ++node) {
    const int first = node * 8;
    AddSwitchTree(b, buses[node], node,
                  std::to_string(first) + "-" + std::to_string(first + 7),
                  {Gpu(20 + 2 * node), Nic(21 + 2 * node)});
  }
  b.Finish();
}

void WriteSplitL3Machine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  // 1 socket, 1 node, 16 cores x 2 threads (CPU c and c+16); an L3 cache
  // per 4 cores (CPUs 4k-4k+3 and their siblings), ids 0-3.
  for (int cpu = 0; cpu < 32; ++cpu) {
    const int core = cpu % 16;
    b.AddCpu(cpu, 0, core,
             std::to_string(core) + "," + std::to_string(core + 16));
    const int first = core / 4 * 4;
    b.AddL3Cache(cpu, core / 4,
                 std::to_string(first) + "-" + std::to_string(first + 3) + "," +
                     std::to_string(first + 16) + "-" +
                     std::to_string(first + 19));
  }
  b.AddNode(0, "0-31", 256 * kGiB);
  b.SetDistances({{10}});
  AddSwitchTree(b, 0x41, 0, "0-31", {Gpu(20), Nic(21)});
  b.Finish();
}

void WriteVmMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  for (int cpu = 0; cpu < 8; ++cpu)
    b.AddCpu(cpu, cpu / 4, cpu % 4, std::to_string(cpu));
  b.AddNode(0, "0-3", 16 * kGiB);
  b.AddNode(1, "4-7", 16 * kGiB);
  b.SetDistances({{10, 20}, {20, 10}});
  for (int i = 0; i < 4; ++i) {
    PciFunctionSpec spec = i % 2 == 0 ? Gpu(30 + i) : Nic(30 + i);
    spec.host_bridge = "pci0000:00";
    spec.path = {Bdf(0, 3 + i)};
    spec.numa_node = -1;
    spec.local_cpulist = "0-7";
    b.AddPciFunction(spec);
  }
  b.Finish();
}

void WriteCpulessNodeMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  AddCpus(b, 2, 4);
  // One L3 cache a socket, so a whole NUMA node's (cadvisor names no uncore
  // cache there: the CPU manager's is the socket, not the cache's id, which
  // is numbered apart from the sockets here).
  for (int socket = 0; socket < 2; ++socket) {
    for (int i = 0; i < 4; ++i) {
      for (int cpu : {socket * 4 + i, socket * 4 + i + 8}) {
        b.AddL3Cache(cpu, socket + 2, SocketCpus(socket, 4, 2));
      }
    }
  }
  b.AddNode(0, SocketCpus(0, 4, 2), 64 * kGiB);
  b.AddNode(1, SocketCpus(1, 4, 2), 64 * kGiB);
  b.AddNode(2, "", 512 * kGiB);
  b.SetDistances({{10, 21, 14}, {21, 10, 24}, {14, 24, 10}});
  AddSwitchTree(b, 0x17, 0, SocketCpus(0, 4, 2), {Gpu(40), Nic(41)});
  PciFunctionSpec cxl;
  cxl.class_code = 0x050210;  // CXL memory device
  cxl.vendor = 0x8086;
  cxl.device = 0x0d93;
  cxl.driver = "cxl_pci";
  cxl.host_bridge = HostBridge(0x38);
  cxl.path = {Bdf(0x38, 0), Bdf(0x39, 0)};
  cxl.numa_node = 2;
  cxl.local_cpulist = "";
  b.AddPciFunction(cxl);
  b.Finish();
}

void WriteSparseNodeMachine(const std::filesystem::path& root) {
  SysfsTreeBuilder b(root);
  for (int cpu = 0; cpu < 12; ++cpu)
    b.AddCpu(cpu, cpu / 4, cpu % 4, std::to_string(cpu));
  b.AddNode(0, "0-3", 32 * kGiB);
  b.AddNode(2, "4-7", 32 * kGiB);
  b.AddNode(5, "8-11", 32 * kGiB);
  b.SetDistances({{10, 20, 30}, {20, 10, 25}, {30, 25, 10}});
  AddSwitchTree(b, 0x17, 0, "0-3", {Gpu(50)});
  AddSwitchTree(b, 0x3a, 2, "4-7", {Gpu(51)});
  AddSwitchTree(b, 0x5d, 5, "8-11", {Gpu(52)});
  b.Finish();
}

std::vector<SriovFunction> SriovLayout(int pfs, int vfs_per_pf) {
  std::vector<SriovFunction> out;
  for (int pf = 0; pf < pfs; ++pf) {
    SriovFunction f;
    f.node = pf % 2;
    // Each PF sits on its own bus below its socket's root port, and its VFs
    // reach into the next bus (routing ids past 255), so a PF takes buses
    // 0x10 + 2k and 0x11 + 2k: 0x10-0xcf for 96 PFs a domain. The root
    // ports sit outside that range (0x0f and 0xe0).
    const int bus = 0x10 + (pf % 0x60) * 2;
    const int domain = pf / 0x60;
    const int root_bus = f.node == 0 ? 0x0f : 0xe0;
    char text[32];
    std::snprintf(text, sizeof(text), "pci%04x:%02x", domain, root_bus);
    f.host_bridge = text;
    std::snprintf(text, sizeof(text), "%04x:%02x:00.0", domain, root_bus);
    f.root_port = text;
    std::snprintf(text, sizeof(text), "%04x:%02x:00.0", domain, bus);
    f.address = text;
    const std::string pf_address = f.address;
    out.push_back(f);
    for (int vf = 0; vf < vfs_per_pf; ++vf) {
      // VF routing ids start at the PF's + 16 (first VF on device 2).
      const int rid = 16 + vf;
      std::snprintf(text, sizeof(text), "%04x:%02x:%02x.%d", domain,
                    bus + rid / 256, (rid % 256) / 8, rid % 8);
      f.address = text;
      f.physfn = pf_address;
      out.push_back(f);
    }
  }
  return out;
}

void WriteSriovMachine(const std::filesystem::path& root, int pfs,
                       int vfs_per_pf) {
  SysfsTreeBuilder b(root);
  AddCpus(b, 2, 8);
  b.AddNode(0, SocketCpus(0, 8, 2), 256 * kGiB);
  b.AddNode(1, SocketCpus(1, 8, 2), 256 * kGiB);
  b.SetDistances({{10, 21}, {21, 10}});
  int group = 100;
  PciFunctionSpec spec;
  for (const SriovFunction& f : SriovLayout(pfs, vfs_per_pf)) {
    if (f.physfn.empty()) {
      spec = Nic(group++);
      spec.host_bridge = f.host_bridge;
      spec.path = {f.root_port, f.address};
      spec.numa_node = f.node;
      spec.local_cpulist = SocketCpus(f.node, 8, 2);
      spec.sriov_totalvfs = vfs_per_pf;
      b.AddPciFunction(spec);
      continue;
    }
    PciFunctionSpec v = spec;
    v.device = 0x101e;
    v.driver = "vfio-pci";
    v.iommu_group = group++;
    v.sriov_totalvfs.reset();
    v.physfn = f.physfn;
    v.path = {f.root_port, f.address};
    b.AddPciFunction(v);
  }
  b.Finish();
}

std::vector<MachineInfo> Machines() {
  return {
      {"dual-socket-8gpu",
       "2 sockets, 8 NVIDIA GPUs and 4 NICs behind 4 PCIe switches, with the "
       "driver's /proc and /dev entries"},
      {"dual-socket-accel",
       "2 sockets, 8 processing accelerators (class 1200, /dev/accel) and 2 "
       "SR-IOV NICs with 4 VFs each behind 2 PCIe switches"},
      {"snc", "sub-NUMA clustering: 2 sockets x 2 nodes, a GPU and a NIC each"},
      {"split-l3",
       "1 socket x 16 cores x 2 threads, an L3 cache per 4 cores (uncore "
       "caches), a GPU and a NIC"},
      {"vm", "a VM with 2 NUMA nodes whose devices report numa_node -1"},
      {"cpuless-node",
       "2 sockets (an L3 cache each) and a CPU-less CXL memory node"},
      {"sparse-nodes", "online NUMA nodes 0, 2 and 5 only, a GPU on each"},
      {"sriov-4096", "16 SR-IOV NICs x 255 VFs: 4,096 functions"},
      {"sriov-<P>x<V>",
       "P SR-IOV NICs (<= 192) with V VFs each (<= 496) on 2 sockets"},
  };
}

std::vector<std::string> MachineNames() {
  std::vector<std::string> names;
  for (const MachineInfo& machine : Machines()) {
    if (machine.name.find('<') == std::string::npos) {
      names.push_back(machine.name);
    }
  }
  return names;
}

bool WriteMachine(const std::string& name, const std::filesystem::path& root) {
  if (name == "dual-socket-8gpu") {
    WriteDualSocketGpuMachine(root);
  } else if (name == "dual-socket-accel") {
    WriteAcceleratorMachine(root);
  } else if (name == "snc") {
    WriteSubNumaClusterMachine(root);
  } else if (name == "split-l3") {
    WriteSplitL3Machine(root);
  } else if (name == "vm") {
    WriteVmMachine(root);
  } else if (name == "cpuless-node") {
    WriteCpulessNodeMachine(root);
  } else if (name == "sparse-nodes") {
    WriteSparseNodeMachine(root);
  } else if (name == "sriov-4096") {
    WriteSriovMachine(root, 16, 255);
  } else if (int pfs = 0, vfs = 0, used = 0;
             std::sscanf(name.c_str(), "sriov-%dx%d%n", &pfs, &vfs, &used) ==
                 2 &&
             used == static_cast<int>(name.size()) && pfs > 0 && pfs <= 0xc0 &&
             vfs > 0 && vfs <= 496) {
    WriteSriovMachine(root, pfs, vfs);
  } else {
    return false;
  }
  return true;
}

}  // namespace topology::testing
