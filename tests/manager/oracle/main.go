// kubelet-oracle: the kubelet's own resource managers (k8s.io/kubernetes at
// the version pinned in go.mod) answering admissions for the differential
// tests of libtopology's managers (tests/manager/kubelet_oracle_test.cc).
// CMake builds it from a copy assembled in the build tree (assemble.cmake):
// the import "libtopology.dev/kubelet-oracle/devicemanager" exists there.
//
// It reads one JSON request per line on stdin and writes one JSON answer
// per line on stdout:
//
//	{"op":"start","machine":{...},"kubelet":{...}}  -> {"ok":true} | {"ok":false,"error":"..."}
//	{"op":"admit","pod":{...},"samples":N}           -> {"ok":true,"outcomes":[...]}
//	{"op":"commit","index":I}                        -> {"ok":true}
//	{"op":"release","uid":"..."}                     -> {"ok":true}
//	{"op":"bench","pod":{...},"iterations":N}        -> {"ok":true,"nsPerOp":F}
//	{"op":"discover"}                                -> {"ok":true,"topology":{...}}
//
// "bench" times the kubelet admitting the pod and removing its containers
// again, N times over the current state (for the benchmarks that compare
// ours with it in the same run).
//
// "discover" is the kubelet's view of the machine this process sees:
// cadvisor's sysinfo.GetNodesInfo over /sys (a test runs the oracle where a
// generated tree is mounted there), then topology.Discover; each CPU's
// core, socket, NUMA node and uncore cache, and the counts.
//
// "admit" runs the kubelet's admission N times, each from the same state,
// and answers every distinct outcome: where the kubelet's choice depends on
// Go's map order, there is more than one. "commit" makes outcome I the
// state the next step starts from (the caller commits the outcome that
// matches its own answer, so that one sequence is followed).
//
// The admission is the kubelet's: topologymanager.NewManager with the
// case's policy, scope and options; as its hint providers, in the kubelet's
// order, the device manager (when the machine has devices: the package
// devicemanager, built from the kubelet's files with one of ours beside
// them, see assemble.cmake; its plugins answer in process), the static CPU
// manager policy (cpumanager.NewStaticPolicy over the
// topology that topology.Discover makes of the case's cadvisor
// MachineInfo) and the Static Memory Manager policy
// (memorymanager.NewPolicyStatic, its configuration first checked by
// memorymanager.NewManager), each over its own state as their managers
// wire them, without the reconcile loops.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	cadvisorapi "github.com/google/cadvisor/lib/model"
	"github.com/google/cadvisor/lib/utils/sysfs"
	"github.com/google/cadvisor/lib/utils/sysinfo"
	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	kubeletconfig "k8s.io/kubernetes/pkg/kubelet/apis/config"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/cpumanager/topology"
	"k8s.io/kubernetes/pkg/kubelet/cm/memorymanager"
	memstate "k8s.io/kubernetes/pkg/kubelet/cm/memorymanager/state"
	"k8s.io/kubernetes/pkg/kubelet/cm/topologymanager"
	"k8s.io/kubernetes/pkg/kubelet/lifecycle"
	"k8s.io/utils/cpuset"
	"libtopology.dev/kubelet-oracle/devicemanager"
)

// The machine as the case describes it.
type machineCPU struct {
	ID     int `json:"id"`
	Socket int `json:"socket"`
	Core   int `json:"core"` // the core's id inside its socket (cadvisor's Core.Id)
	Node   int `json:"node"`
	Uncore int `json:"uncore"` // L3 group id; -1 when unknown
}

type machineHugePages struct {
	PageSize uint64 `json:"pageSize"` // bytes
	Count    uint64 `json:"count"`
}

type machineNode struct {
	ID        int                `json:"id"`
	Distances []uint64           `json:"distances"`
	Memory    uint64             `json:"memory"`
	HugePages []machineHugePages `json:"hugepages"`
}

// A device a device plugin offers: its resource, id and NUMA nodes (none:
// no topology).
type machineDevice struct {
	Resource string `json:"resource"`
	ID       string `json:"id"`
	Nodes    []int  `json:"nodes"`
}

type machine struct {
	Nodes   []machineNode   `json:"nodes"`
	CPUs    []machineCPU    `json:"cpus"`
	Devices []machineDevice `json:"devices"`
}

type kubeletConfig struct {
	TopologyPolicy        string            `json:"topologyManagerPolicy"`
	TopologyScope         string            `json:"topologyManagerScope"`
	TopologyPolicyOptions map[string]string `json:"topologyManagerPolicyOptions"`
	CPUPolicy             string            `json:"cpuManagerPolicy"`
	CPUPolicyOptions      map[string]string `json:"cpuManagerPolicyOptions"`
	ReservedCPUs          []int             `json:"reservedCPUs"`
	// Without reservedCPUs: numReservedCPUs (kubeReserved + systemReserved
	// cpu, rounded up), the CPUs NewStaticPolicy then chooses.
	ReservedCPUCount int    `json:"reservedCPUCount"`
	MemoryPolicy     string `json:"memoryManagerPolicy"`
	// Per NUMA node, memory type -> bytes (the kubelet's reservedMemory).
	ReservedMemory []struct {
		NUMANode int               `json:"numaNode"`
		Limits   map[string]uint64 `json:"limits"`
	} `json:"reservedMemory"`
	// kube-reserved + system-reserved + hard eviction, per memory type.
	NodeAllocatableReservation map[string]uint64 `json:"nodeAllocatableReservation"`
	FeatureGates               map[string]bool   `json:"featureGates"`
}

type container struct {
	Name        string `json:"name"`
	CPUMilli    int64  `json:"cpuMilli"`
	Memory      int64  `json:"memory"`       // bytes; 64 MiB when not given
	HugePages2M int64  `json:"hugepages2Mi"` // bytes
	Restartable bool   `json:"restartable"`
	// Device plugin resource -> count.
	Devices map[string]int64 `json:"devices"`
}

type pod struct {
	UID            string      `json:"uid"`
	QOS            string      `json:"qos"` // guaranteed, burstable, besteffort
	InitContainers []container `json:"init"`
	Containers     []container `json:"containers"`
}

type request struct {
	Op      string        `json:"op"`
	Machine machine       `json:"machine"`
	Kubelet kubeletConfig `json:"kubelet"`
	Pod     pod           `json:"pod"`
	Samples int           `json:"samples"`
	Index   int           `json:"index"`
	// bench
	Iterations int    `json:"iterations"`
	UID        string `json:"uid"`
}

type hint struct {
	Nodes     []int `json:"nodes"`
	Preferred bool  `json:"preferred"`
}

type memoryBlock struct {
	Type  string `json:"type"`
	Size  uint64 `json:"size"`
	Nodes []int  `json:"nodes"`
}

type outcome struct {
	Admit    bool                     `json:"admit"`
	Reason   string                   `json:"reason"`
	Message  string                   `json:"message"`
	CPUs     map[string]string        `json:"cpus"`
	Memory   map[string][]memoryBlock `json:"memory"`
	Affinity map[string]hint          `json:"affinity"`
	Shared   string                   `json:"shared"`
	// Container -> resource -> device ids, sorted.
	Devices map[string]map[string][]string `json:"devices"`
}

type answer struct {
	OK       bool        `json:"ok"`
	Error    string      `json:"error,omitempty"`
	Outcomes []outcome   `json:"outcomes,omitempty"`
	NsPerOp  float64     `json:"nsPerOp,omitempty"`
	Topology *discovered `json:"topology,omitempty"`
}

type discoveredCPU struct {
	ID     int `json:"id"`
	Core   int `json:"core"`
	Socket int `json:"socket"`
	Node   int `json:"node"`
	Uncore int `json:"uncore"`
}

type discovered struct {
	CPUs           []discoveredCPU `json:"cpus"`
	NumCPUs        int             `json:"numCPUs"`
	NumCores       int             `json:"numCores"`
	NumSockets     int             `json:"numSockets"`
	NumNUMANodes   int             `json:"numNUMANodes"`
	NumUncoreCache int             `json:"numUncoreCache"`
}

// discover reads /sys as the kubelet's cadvisor does and makes of it what
// the CPU manager makes.
func discover(logger klog.Logger) (*discovered, error) {
	nodes, cores, err := sysinfo.GetNodesInfo(sysfs.NewRealSysFs())
	if err != nil {
		return nil, err
	}
	// cadvisor counts the sockets from /proc/cpuinfo's physical ids: the
	// packages of the CPUs sysfs lists.
	sockets := map[int]bool{}
	for _, node := range nodes {
		for _, core := range node.Cores {
			sockets[core.SocketID] = true
		}
	}
	topo, err := topology.Discover(logger, &cadvisorapi.MachineInfo{NumCores: cores, NumSockets: len(sockets), Topology: nodes})
	if err != nil {
		return nil, err
	}
	out := &discovered{
		NumCPUs:        topo.NumCPUs,
		NumCores:       topo.NumCores,
		NumSockets:     topo.NumSockets,
		NumNUMANodes:   topo.NumNUMANodes,
		NumUncoreCache: topo.NumUncoreCache,
	}
	for _, id := range topo.CPUDetails.CPUs().List() {
		info := topo.CPUDetails[id]
		out.CPUs = append(out.CPUs, discoveredCPU{ID: id, Core: info.CoreID, Socket: info.SocketID, Node: info.NUMANodeID, Uncore: info.UncoreCacheID})
	}
	return out, nil
}

type oracle struct {
	logger   klog.Logger
	info     *cadvisorapi.MachineInfo
	nodes    []cadvisorapi.Node
	topo     *topology.CPUTopology
	config   kubeletConfig
	reserved cpuset.CPUSet
	state    state.State
	// The Static Memory Manager's state; nil under the None policy.
	memory         memstate.State
	reservedMemory map[int]map[v1.ResourceName]uint64
	machineDevices []machineDevice
	// The device manager's state (nil: the machine has no devices) and
	// the directory its socket and checkpoint live in.
	devices   *devicemanager.OracleState
	deviceDir string
	// The pods admitted and not released: the kubelet's active pods.
	live map[string]*v1.Pod
	// The outcomes of the last admit and the state each left.
	pending []pendingOutcome
}

type pendingOutcome struct {
	outcome outcome
	state   state.State
	memory  memstate.State
	devices *devicemanager.OracleState
	pod     *v1.Pod
}

// devicePlugin is a device plugin as the device manager reaches it: no
// gRPC, the same answers. It advertises GetPreferredAllocation and prefers
// the devices it must include, then the lowest ids, so that the kubelet's
// choice does not rest on Go's map order.
type devicePlugin struct{ resource string }

func (p devicePlugin) API() pluginapi.DevicePluginClient { return p }
func (p devicePlugin) Resource() string                  { return p.resource }
func (p devicePlugin) SocketPath() string                { return p.resource + ".sock" }

func (p devicePlugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty, ...grpc.CallOption) (*pluginapi.DevicePluginOptions, error) {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: true}, nil
}

func (p devicePlugin) ListAndWatch(context.Context, *pluginapi.Empty, ...grpc.CallOption) (pluginapi.DevicePlugin_ListAndWatchClient, error) {
	return nil, fmt.Errorf("the oracle's devices are given, not watched")
}

func (p devicePlugin) GetPreferredAllocation(_ context.Context, r *pluginapi.PreferredAllocationRequest, _ ...grpc.CallOption) (*pluginapi.PreferredAllocationResponse, error) {
	out := &pluginapi.PreferredAllocationResponse{}
	for _, c := range r.ContainerRequests {
		chosen := append([]string{}, c.MustIncludeDeviceIDs...)
		must := map[string]bool{}
		for _, id := range chosen {
			must[id] = true
		}
		rest := []string{}
		for _, id := range c.AvailableDeviceIDs {
			if !must[id] {
				rest = append(rest, id)
			}
		}
		sort.Strings(rest)
		for _, id := range rest {
			if len(chosen) >= int(c.AllocationSize) {
				break
			}
			chosen = append(chosen, id)
		}
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: chosen})
	}
	return out, nil
}

func (p devicePlugin) Allocate(_ context.Context, r *pluginapi.AllocateRequest, _ ...grpc.CallOption) (*pluginapi.AllocateResponse, error) {
	out := &pluginapi.AllocateResponse{}
	for range r.ContainerRequests {
		out.ContainerResponses = append(out.ContainerResponses, &pluginapi.ContainerAllocateResponse{})
	}
	return out, nil
}

func (p devicePlugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest, ...grpc.CallOption) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

// deviceManager is the kubelet's device manager over the committed state,
// the case's plugins registered and their devices listed; `admitting` is
// active with the pods admitted.
func (o *oracle) deviceManager(store topologymanager.Store, admitting *v1.Pod) (*devicemanager.ManagerImpl, error) {
	active := func() []*v1.Pod {
		pods := []*v1.Pod{}
		for _, p := range o.live {
			pods = append(pods, p)
		}
		if admitting != nil {
			pods = append(pods, admitting)
		}
		return pods
	}
	dm, err := devicemanager.NewOracleManager(o.logger, o.deviceDir, o.nodes, store, active, o.devices)
	if err != nil {
		return nil, err
	}
	ctx := klog.NewContext(context.Background(), o.logger)
	byResource := map[string][]*pluginapi.Device{}
	resources := []string{}
	for _, d := range o.machineDevices {
		if _, ok := byResource[d.Resource]; !ok {
			resources = append(resources, d.Resource)
		}
		device := &pluginapi.Device{ID: d.ID, Health: pluginapi.Healthy}
		if len(d.Nodes) > 0 {
			device.Topology = &pluginapi.TopologyInfo{}
			for _, n := range d.Nodes {
				device.Topology.Nodes = append(device.Topology.Nodes, &pluginapi.NUMANode{ID: int64(n)})
			}
		}
		byResource[d.Resource] = append(byResource[d.Resource], device)
	}
	for _, r := range resources {
		if err := dm.PluginConnected(ctx, r, devicePlugin{resource: r}); err != nil {
			return nil, err
		}
		dm.PluginListAndWatchReceiver(o.logger, r, &pluginapi.ListAndWatchResponse{Devices: byResource[r]})
	}
	return dm, nil
}

// memoryProvider is memorymanager's manager as a hint provider.
type memoryProvider struct {
	policy memorymanager.Policy
	state  memstate.State
}

func (p *memoryProvider) GetTopologyHints(logger klog.Logger, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(logger, p.state, pod, c, op)
}

func (p *memoryProvider) GetPodTopologyHints(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(logger, p.state, pod, op)
}

func (p *memoryProvider) AllocatePod(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) error {
	return p.policy.AllocatePod(logger, p.state, pod, op)
}

func (p *memoryProvider) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) error {
	return p.policy.Allocate(ctx, p.state, pod, c, op)
}

func cloneMemory(logger klog.Logger, s memstate.State) memstate.State {
	if s == nil {
		return nil
	}
	c := memstate.NewMemoryState(logger)
	c.SetMachineState(s.GetMachineState())
	c.SetMemoryAssignments(s.GetMemoryAssignments())
	c.SetPodMemoryAssignments(s.GetPodMemoryAssignments())
	return c
}

// cpuProvider is cpumanager's manager as a hint provider: the policy over
// one state.
type cpuProvider struct {
	policy cpumanager.Policy
	state  state.State
}

func (p *cpuProvider) GetTopologyHints(logger klog.Logger, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetTopologyHints(logger, p.state, pod, c, op)
}

func (p *cpuProvider) GetPodTopologyHints(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) map[string][]topologymanager.TopologyHint {
	return p.policy.GetPodTopologyHints(logger, p.state, pod, op)
}

func (p *cpuProvider) AllocatePod(logger klog.Logger, pod *v1.Pod, op lifecycle.Operation) error {
	return p.policy.AllocatePod(logger, p.state, pod, op)
}

func (p *cpuProvider) Allocate(ctx context.Context, pod *v1.Pod, c *v1.Container, op lifecycle.Operation) error {
	return p.policy.Allocate(klog.FromContext(ctx), p.state, pod, c, op)
}

func cloneState(logger klog.Logger, s state.State) state.State {
	c := state.NewMemoryState(logger)
	c.SetDefaultCPUSet(s.GetDefaultCPUSet())
	c.SetCPUAssignments(s.GetCPUAssignments())
	c.SetPodCPUAssignments(s.GetPodCPUAssignments())
	c.SetCPUBaselines(s.GetCPUBaselines())
	return c
}

// The gates cases set, at their defaults: a case starts from them, not
// from the gates of the case before it.
var caseGates = map[string]bool{
	"CPUManagerPolicyAlphaOptions": false,
	"CPUManagerPolicyBetaOptions":  true,
}

func (o *oracle) start(r *request) error {
	if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(caseGates); err != nil {
		return err
	}
	for name, on := range r.Kubelet.FeatureGates {
		if err := utilfeature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{name: on}); err != nil {
			return err
		}
	}
	info := &cadvisorapi.MachineInfo{NumCores: len(r.Machine.CPUs)}
	sockets := map[int]bool{}
	for _, n := range r.Machine.Nodes {
		node := cadvisorapi.Node{Id: n.ID, Memory: n.Memory, Distances: n.Distances}
		for _, h := range n.HugePages {
			node.HugePages = append(node.HugePages, cadvisorapi.HugePagesInfo{PageSize: h.PageSize / 1024, NumPages: h.Count})
		}
		// Threads grouped by (socket, core), in the order of their first CPU.
		type key struct{ socket, core int }
		index := map[key]int{}
		for _, c := range r.Machine.CPUs {
			if c.Node != n.ID {
				continue
			}
			sockets[c.Socket] = true
			k := key{c.Socket, c.Core}
			i, ok := index[k]
			if !ok {
				i = len(node.Cores)
				index[k] = i
				core := cadvisorapi.Core{Id: c.Core, SocketID: c.Socket}
				if c.Uncore >= 0 {
					core.UncoreCaches = []cadvisorapi.Cache{{Id: c.Uncore, Size: 32 << 20, Type: "Unified", Level: 3}}
				}
				node.Cores = append(node.Cores, core)
			}
			node.Cores[i].Threads = append(node.Cores[i].Threads, c.ID)
		}
		info.Topology = append(info.Topology, node)
	}
	info.NumSockets = len(sockets)
	for _, n := range info.Topology {
		info.MemoryCapacity += n.Memory
	}
	o.info = info
	topo, err := topology.Discover(o.logger, info)
	if err != nil {
		return err
	}
	o.nodes = info.Topology
	o.topo = topo
	o.machineDevices = r.Machine.Devices
	o.live = map[string]*v1.Pod{}
	if len(o.machineDevices) > 0 {
		dir, err := os.MkdirTemp("", "kubelet-oracle-devices-")
		if err != nil {
			return err
		}
		o.deviceDir = dir
	}
	o.config = r.Kubelet
	o.reserved = cpuset.New(r.Kubelet.ReservedCPUs...)
	// The kubelet's checks of its configuration: the Topology Manager's
	// (options, the number of NUMA nodes, policy and scope names) and the
	// CPU manager's (options, reserved CPUs), as NewManager and
	// NewStaticPolicy make them.
	if _, err := o.topologyManager(); err != nil {
		return err
	}
	if err := o.startMemory(); err != nil {
		return err
	}
	o.state = state.NewMemoryState(o.logger)
	if o.config.CPUPolicy == "static" {
		policy, err := o.cpuPolicy(nil)
		if err != nil {
			return err
		}
		if err := policy.Start(o.logger, o.state); err != nil {
			return err
		}
		// The CPUs it chose, kept for every later policy of this case.
		o.reserved = o.topo.CPUDetails.CPUs().Difference(policy.GetAllocatableCPUs(o.state))
	} else {
		o.state.SetDefaultCPUSet(topo.CPUDetails.CPUs())
	}
	return nil
}

// startMemory checks the Memory Manager's configuration as the kubelet's
// NewManager does (the reservations add up to Node Allocatable's, name
// nodes that exist) and starts the Static policy's state.
func (o *oracle) startMemory() error {
	policyName := o.config.MemoryPolicy
	if policyName == "" {
		policyName = "None"
	}
	reservation := v1.ResourceList{}
	for name, bytes := range o.config.NodeAllocatableReservation {
		reservation[v1.ResourceName(name)] = *resource.NewQuantity(int64(bytes), resource.BinarySI)
	}
	var reserved []kubeletconfig.MemoryReservation
	o.reservedMemory = map[int]map[v1.ResourceName]uint64{}
	for _, n := range o.info.Topology {
		o.reservedMemory[n.Id] = map[v1.ResourceName]uint64{}
	}
	for _, r := range o.config.ReservedMemory {
		limits := v1.ResourceList{}
		for name, bytes := range r.Limits {
			limits[v1.ResourceName(name)] = *resource.NewQuantity(int64(bytes), resource.BinarySI)
			if o.reservedMemory[r.NUMANode] == nil {
				o.reservedMemory[r.NUMANode] = map[v1.ResourceName]uint64{}
			}
			o.reservedMemory[r.NUMANode][v1.ResourceName(name)] = bytes
		}
		reserved = append(reserved, kubeletconfig.MemoryReservation{NumaNode: int32(r.NUMANode), Limits: limits})
	}
	tm, err := o.topologyManager()
	if err != nil {
		return err
	}
	if _, err := memorymanager.NewManager(o.logger, policyName, o.info, reservation, reserved, os.TempDir(), tm); err != nil {
		return err
	}
	if policyName != "Static" {
		return nil
	}
	policy, err := o.memoryPolicy(tm)
	if err != nil {
		return err
	}
	o.memory = memstate.NewMemoryState(o.logger)
	return policy.Start(o.logger, o.memory)
}

func (o *oracle) memoryPolicy(affinity topologymanager.Store) (memorymanager.Policy, error) {
	return memorymanager.NewPolicyStatic(o.logger, o.info, o.reservedMemory, affinity)
}

func (o *oracle) topologyManager() (topologymanager.Manager, error) {
	return topologymanager.NewManager(o.logger, o.nodes, o.config.TopologyPolicy, o.config.TopologyScope, o.config.TopologyPolicyOptions)
}

func (o *oracle) cpuPolicy(affinity topologymanager.Store) (cpumanager.Policy, error) {
	if affinity == nil {
		tm, err := o.topologyManager()
		if err != nil {
			return nil, err
		}
		affinity = tm
	}
	count := o.reserved.Size()
	if count == 0 {
		count = o.config.ReservedCPUCount
	}
	return cpumanager.NewStaticPolicy(o.logger, o.topo, count, o.reserved, affinity, o.config.CPUPolicyOptions)
}

func quantity(milli int64) resource.Quantity {
	return *resource.NewMilliQuantity(milli, resource.DecimalSI)
}

func (c container) spec(qos string) v1.Container {
	out := v1.Container{Name: c.Name}
	if c.Restartable {
		always := v1.ContainerRestartPolicyAlways
		out.RestartPolicy = &always
	}
	memory := resource.MustParse("64Mi")
	if c.Memory > 0 {
		memory = *resource.NewQuantity(c.Memory, resource.BinarySI)
	}
	switch qos {
	case "guaranteed":
		out.Resources.Limits = v1.ResourceList{v1.ResourceCPU: quantity(c.CPUMilli), v1.ResourceMemory: memory}
		out.Resources.Requests = v1.ResourceList{v1.ResourceCPU: quantity(c.CPUMilli), v1.ResourceMemory: memory}
	case "burstable":
		out.Resources.Requests = v1.ResourceList{v1.ResourceCPU: quantity(c.CPUMilli), v1.ResourceMemory: memory}
	}
	for name, count := range c.Devices {
		// Extended resources: requests equal limits in every QoS class.
		n := *resource.NewQuantity(count, resource.DecimalSI)
		if out.Resources.Limits == nil {
			out.Resources.Limits = v1.ResourceList{}
		}
		if out.Resources.Requests == nil {
			out.Resources.Requests = v1.ResourceList{}
		}
		out.Resources.Limits[v1.ResourceName(name)] = n
		out.Resources.Requests[v1.ResourceName(name)] = n
	}
	if c.HugePages2M > 0 && qos != "besteffort" {
		// Huge pages: requests equal limits in every QoS class.
		pages := *resource.NewQuantity(c.HugePages2M, resource.BinarySI)
		if out.Resources.Limits == nil {
			out.Resources.Limits = v1.ResourceList{}
		}
		if out.Resources.Requests == nil {
			out.Resources.Requests = v1.ResourceList{}
		}
		out.Resources.Limits["hugepages-2Mi"] = pages
		out.Resources.Requests["hugepages-2Mi"] = pages
	}
	return out
}

func (p pod) spec() *v1.Pod {
	out := &v1.Pod{}
	out.UID = types.UID(p.UID)
	out.Name = p.UID
	out.Namespace = "default"
	for _, c := range p.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, c.spec(p.QOS))
	}
	for _, c := range p.Containers {
		out.Spec.Containers = append(out.Spec.Containers, c.spec(p.QOS))
	}
	return out
}

func nodesOf(h topologymanager.TopologyHint) hint {
	out := hint{Preferred: h.Preferred, Nodes: []int{}}
	if h.NUMANodeAffinity != nil {
		out.Nodes = append(out.Nodes, h.NUMANodeAffinity.GetBits()...)
	}
	sort.Ints(out.Nodes)
	return out
}

func (o *oracle) admitOnce(p pod) (outcome, state.State, memstate.State, *devicemanager.OracleState, error) {
	st := cloneState(o.logger, o.state)
	mem := cloneMemory(o.logger, o.memory)
	tm, err := o.topologyManager()
	if err != nil {
		return outcome{}, nil, nil, nil, err
	}
	spec := p.spec()
	// The kubelet's order of providers: the device manager, the CPU
	// manager, the Memory Manager.
	var dm *devicemanager.ManagerImpl
	if len(o.machineDevices) > 0 {
		if dm, err = o.deviceManager(tm, spec); err != nil {
			return outcome{}, nil, nil, nil, err
		}
		tm.AddHintProvider(o.logger, dm)
	}
	var memPolicy memorymanager.Policy
	if o.config.CPUPolicy == "static" {
		policy, err := o.cpuPolicy(tm)
		if err != nil {
			return outcome{}, nil, nil, nil, err
		}
		tm.AddHintProvider(o.logger, &cpuProvider{policy: policy, state: st})
	}
	if mem != nil {
		memPolicy, err = o.memoryPolicy(tm)
		if err != nil {
			return outcome{}, nil, nil, nil, err
		}
		tm.AddHintProvider(o.logger, &memoryProvider{policy: memPolicy, state: mem})
	}
	ctx := klog.NewContext(context.Background(), o.logger)
	result := tm.Admit(ctx, &lifecycle.PodAdmitAttributes{Pod: spec, Operation: lifecycle.AddOperation})
	out := outcome{Admit: result.Admit, Reason: result.Reason, Message: result.Message,
		CPUs: map[string]string{}, Memory: map[string][]memoryBlock{}, Affinity: map[string]hint{},
		Devices: map[string]map[string][]string{}}
	for _, c := range append(append([]container{}, p.InitContainers...), p.Containers...) {
		if set, ok := st.GetCPUSet(p.UID, c.Name); ok && !set.IsEmpty() {
			out.CPUs[c.Name] = set.String()
		}
		if mem != nil {
			for _, b := range mem.GetMemoryBlocks(p.UID, c.Name) {
				nodes := append([]int{}, b.NUMAAffinity...)
				sort.Ints(nodes)
				out.Memory[c.Name] = append(out.Memory[c.Name], memoryBlock{Type: string(b.Type), Size: b.Size, Nodes: nodes})
			}
			sort.Slice(out.Memory[c.Name], func(i, j int) bool { return out.Memory[c.Name][i].Type < out.Memory[c.Name][j].Type })
		}
		if dm != nil {
			for resource, devices := range dm.GetDevices(p.UID, c.Name) {
				ids := []string{}
				for id := range devices {
					ids = append(ids, id)
				}
				sort.Strings(ids)
				if len(ids) > 0 {
					if out.Devices[c.Name] == nil {
						out.Devices[c.Name] = map[string][]string{}
					}
					out.Devices[c.Name][resource] = ids
				}
			}
		}
		if o.config.TopologyPolicy != "none" {
			if h := tm.GetAffinity(o.logger, p.UID, c.Name); h.NUMANodeAffinity != nil {
				out.Affinity[c.Name] = nodesOf(h)
			}
		}
	}
	if !result.Admit {
		// The kubelet forgets a refused pod's state (its containers never
		// start; the reconcile loop removes what they were given).
		policy, err := o.cpuPolicyOrNil(tm)
		if err != nil {
			return outcome{}, nil, nil, nil, err
		}
		for _, c := range append(append([]container{}, p.InitContainers...), p.Containers...) {
			if policy != nil {
				_ = policy.RemoveContainer(o.logger, st, p.UID, c.Name)
			}
			if memPolicy != nil {
				memPolicy.RemoveContainer(o.logger, mem, p.UID, c.Name)
			}
		}
		out.CPUs = map[string]string{}
		out.Memory = map[string][]memoryBlock{}
		out.Affinity = map[string]hint{}
		// Its devices go back when the pod is found inactive, before the
		// next hints.
		out.Devices = map[string]map[string][]string{}
	}
	out.Shared = st.GetDefaultCPUSet().String()
	var devices *devicemanager.OracleState
	if dm != nil {
		devices = dm.OracleSave(o.logger)
	}
	return out, st, mem, devices, nil
}

func (o *oracle) cpuPolicyOrNil(tm topologymanager.Store) (cpumanager.Policy, error) {
	if o.config.CPUPolicy != "static" {
		return nil, nil
	}
	return o.cpuPolicy(tm)
}

func sameOutcome(a, b outcome) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func (o *oracle) admit(r *request) ([]outcome, error) {
	samples := r.Samples
	if samples <= 0 {
		samples = 1
	}
	o.pending = nil
	var outcomes []outcome
	for i := 0; i < samples; i++ {
		out, st, mem, devices, err := o.admitOnce(r.Pod)
		if err != nil {
			return nil, err
		}
		seen := false
		for _, p := range o.pending {
			if sameOutcome(p.outcome, out) {
				seen = true
				break
			}
		}
		if !seen {
			o.pending = append(o.pending, pendingOutcome{outcome: out, state: st, memory: mem, devices: devices, pod: r.Pod.spec()})
			outcomes = append(outcomes, out)
		}
	}
	return outcomes, nil
}

// bench admits p and removes its containers, n times, over the current
// state with one Topology Manager and its providers, as the kubelet runs
// them; the time per admission and removal.
func (o *oracle) bench(p pod, n int) (float64, error) {
	if n <= 0 {
		return 0, fmt.Errorf("iterations must be positive")
	}
	tm, err := o.topologyManager()
	if err != nil {
		return 0, err
	}
	var cpuPolicy cpumanager.Policy
	if o.config.CPUPolicy == "static" {
		if cpuPolicy, err = o.cpuPolicy(tm); err != nil {
			return 0, err
		}
		tm.AddHintProvider(o.logger, &cpuProvider{policy: cpuPolicy, state: o.state})
	}
	var memPolicy memorymanager.Policy
	if o.memory != nil {
		if memPolicy, err = o.memoryPolicy(tm); err != nil {
			return 0, err
		}
		tm.AddHintProvider(o.logger, &memoryProvider{policy: memPolicy, state: o.memory})
	}
	spec := p.spec()
	ctx := klog.NewContext(context.Background(), o.logger)
	attrs := &lifecycle.PodAdmitAttributes{Pod: spec, Operation: lifecycle.AddOperation}
	names := []string{}
	for _, c := range append(append([]container{}, p.InitContainers...), p.Containers...) {
		names = append(names, c.Name)
	}
	start := time.Now()
	for i := 0; i < n; i++ {
		if result := tm.Admit(ctx, attrs); !result.Admit {
			return 0, fmt.Errorf("not admitted: %s: %s", result.Reason, result.Message)
		}
		for _, name := range names {
			if cpuPolicy != nil {
				if err := cpuPolicy.RemoveContainer(o.logger, o.state, p.UID, name); err != nil {
					return 0, err
				}
			}
			if memPolicy != nil {
				memPolicy.RemoveContainer(o.logger, o.memory, p.UID, name)
			}
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

func (o *oracle) removeDeviceDir() {
	if o.deviceDir != "" {
		_ = os.RemoveAll(o.deviceDir)
		o.deviceDir = ""
	}
}

func (o *oracle) release(uid string) error {
	// The device manager frees a pod's devices once it is no longer active.
	delete(o.live, uid)
	if o.memory != nil {
		policy, err := o.memoryPolicy(nil)
		if err != nil {
			return err
		}
		for name := range o.memory.GetMemoryAssignments()[uid] {
			policy.RemoveContainer(o.logger, o.memory, uid, name)
		}
	}
	policy, err := o.cpuPolicyOrNil(nil)
	if err != nil || policy == nil {
		return err
	}
	for name := range o.state.GetCPUAssignments()[uid] {
		if err := policy.RemoveContainer(o.logger, o.state, uid, name); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	verbose := flag.Bool("v", false, "log the kubelet's messages on stderr")
	flag.Parse()
	// The Topology Manager's merge allocates a slice per permutation and
	// keeps little: collecting less often saves a seventh of the time.
	debug.SetGCPercent(400)
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	if !*verbose {
		_ = klogFlags.Set("logtostderr", "false")
		_ = klogFlags.Set("alsologtostderr", "false")
		_ = klogFlags.Set("stderrthreshold", "FATAL")
		klog.SetOutput(io.Discard)
	} else {
		_ = klogFlags.Set("v", "4")
	}
	// Without -v the managers log to a logger that discards before it
	// formats: their V(0) lines ("Allocate start", the affinity) would
	// otherwise cost more than the decisions.
	logger := logr.Discard()
	if *verbose {
		logger = klog.Background()
	}
	o := &oracle{logger: logger}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 64<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for in.Scan() {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		var r request
		var a answer
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			a.Error = "bad request: " + err.Error()
		} else {
			var err error
			switch r.Op {
			case "start":
				o.removeDeviceDir()
				*o = oracle{logger: o.logger}
				err = o.start(&r)
			case "admit":
				a.Outcomes, err = o.admit(&r)
			case "commit":
				if r.Index < 0 || r.Index >= len(o.pending) {
					err = fmt.Errorf("no outcome %d", r.Index)
				} else {
					chosen := o.pending[r.Index]
					o.state = chosen.state
					o.memory = chosen.memory
					o.devices = chosen.devices
					if chosen.outcome.Admit {
						o.live[string(chosen.pod.UID)] = chosen.pod
					}
					o.pending = nil
				}
			case "release":
				err = o.release(r.UID)
			case "bench":
				a.NsPerOp, err = o.bench(r.Pod, r.Iterations)
			case "discover":
				a.Topology, err = discover(o.logger)
			default:
				err = fmt.Errorf("unknown op %q", r.Op)
			}
			if err != nil {
				a.Error = err.Error()
			} else {
				a.OK = true
			}
		}
		if err := encoder.Encode(&a); err != nil {
			o.removeDeviceDir()
			os.Exit(1)
		}
		if err := out.Flush(); err != nil {
			os.Exit(1)
		}
	}
}
