package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// cpuNUMA maps each published CPU device (driver dra.cpu) to the NUMA node it publishes
// (resource.kubernetes.io/numaNode), per node: node -> device -> NUMA node.
func cpuNUMA(t *testing.T, c *Cluster) map[string]map[string]int64 {
	slices, err := c.Kube.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]int64{}
	for _, s := range slices.Items {
		if s.Spec.Driver != "dra.cpu" {
			continue
		}
		for _, d := range s.Spec.Devices {
			v, ok := d.Attributes["resource.kubernetes.io/numaNode"]
			if !ok || v.IntValue == nil {
				t.Errorf("CPU device %s/%s publishes no resource.kubernetes.io/numaNode", s.Spec.Pool.Name, d.Name)
				continue
			}
			if out[s.Spec.Pool.Name] == nil {
				out[s.Spec.Pool.Name] = map[string]int64{}
			}
			out[s.Spec.Pool.Name][d.Name] = *v.IntValue
		}
	}
	return out
}

// cpuPod is a legacy Pod whose container asks for `gpus` GPUs and `cpus` CPUs (requests =
// limits) next to a sidecar in the shared pool; with `nic`, an RDMA NIC per GPU too
// (draguard.io/nic: rdma).
func cpuPod(name, ns string, gpus, cpus int, nic bool) *unstructured.Unstructured {
	annotations := map[string]any{}
	if nic {
		annotations["draguard.io/nic"] = "rdma"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": annotations},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "c", "image": "registry.example/cuda:12", "resources": map[string]any{
				"requests": map[string]any{"cpu": fmt.Sprint(cpus), "memory": "8Gi"},
				"limits":   map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus), "cpu": fmt.Sprint(cpus), "memory": "8Gi"}}},
			map[string]any{"name": "log", "image": "registry.example/log:1", "resources": map[string]any{
				"requests": map[string]any{"cpu": "250m"}}},
		}},
	}}
}

// numaTies maps each request a matchAttribute resource.kubernetes.io/numaNode constraint of the
// claim names to that constraint (its index): the GPUs, NICs and CPUs it keeps on one NUMA node
// ("gpu" and "cpu"; "gpu-part-1" and "cpu-part-1"; rails "gpu-rail-0" and "cpu-part-0").
func numaTies(claim *resourcev1.ResourceClaim) map[string]int {
	out := map[string]int{}
	for i, c := range claim.Spec.Devices.Constraints {
		if c.MatchAttribute == nil || string(*c.MatchAttribute) != "resource.kubernetes.io/numaNode" {
			continue
		}
		for _, r := range c.Requests {
			out[r] = i
		}
	}
	return out
}

// tie is the numaNode constraint a result's request (or its main request, for "gpu/numa-1")
// belongs to; -1 for none.
func tie(ties map[string]int, request string) int {
	if i, ok := ties[request]; ok {
		return i
	}
	if i, ok := ties[strings.SplitN(request, "/", 2)[0]]; ok {
		return i
	}
	return -1
}

// TestCpusAllocatedWithTheirGpus: with mutation.cpu, legacy Pods with CPUs are converted through
// the real apiserver, and kube-scheduler's allocation of their claims (GPUs from the NVIDIA
// driver's simulated slices, CPUs from dra-driver-cpu's in each of its modes) puts every GPU (and
// NIC) and the CPUs its numaNode constraint ties it to on one NUMA node of the export; the CPUs
// allocated are the container's. Once more with the NICs publishing resource.kubernetes.io/numaNode
// (dranet after v1.4.0, mutation.nic.numaAttribute: standard), where they join the constraint.
func TestCpusAllocatedWithTheirGpus(t *testing.T) {
	exports := []string{g4dn, dgx2h, xe8640}
	type cpuCase struct {
		gpus, cpus int
		nic        bool
		refused    bool
	}
	cases := []cpuCase{
		{1, 8, false, false},  // one T4 with 8 of its NUMA node's 48 CPUs
		{2, 16, false, false}, // two T4s of one NUMA node: the DGX-2H export allows 2 CPUs per NUMA node
		{16, 4, false, false}, // the DGX-2H's 16 GPUs in two parts of 8 GPUs and 2 CPUs
		{8, 8, false, true},   // 8 T4s need both NUMA nodes and have no NVLink; 8 CPUs fit no DGX-2H NUMA node
		// Rails on the XE8640-like node, whose GPUs with their NICs are each on a NUMA node of its
		// own (one CPU each): split per NUMA node, a CPU next to each GPU and its NIC.
		{2, 2, true, false},
		{2, 8, true, true}, // 4 CPUs per GPU fit no XE8640 NUMA node: refused naming the NUMA nodes
	}
	runs := []struct{ mode, nicNuma string }{{"grouped", "driver"}, {"individual", "driver"}, {"grouped", "standard"}}
	for _, run := range runs {
		name := run.mode
		if run.nicNuma != "driver" {
			name += "-nic-" + run.nicNuma
		}
		t.Run(name, func(t *testing.T) {
			mode := run.mode
			c := UpWithDrivers(t, mode, run.nicNuma, exports...)
			fillMemoryFromProductName(t, c)
			c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.cpu.mode="+mode,
				"--set", "policy.mutation.nic.numaAttribute="+run.nicNuma)
			w := loadWorld(t, c, exports)
			cpus := cpuNUMA(t, c)
			if len(cpus) != len(exports) {
				t.Fatalf("CPU devices published for %d nodes, want %d", len(cpus), len(exports))
			}
			ctx := context.Background()
			ns := "cpus"
			if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			c.WaitServiceAccount(ns)
			for _, k := range cases {
				if run.nicNuma != "driver" && !k.nic {
					continue // the NIC attribute changes only claims with NICs
				}
				name := fmt.Sprintf("legacy-%dgpu-%dcpu", k.gpus, k.cpus)
				if k.nic {
					name += "-nic"
				}
				out := c.Create(ctx, cpuPod(name, ns, k.gpus, k.cpus, k.nic), false)
				if k.refused {
					if out.Admitted() {
						t.Errorf("%s admitted, want refused", name)
						release(t, c, ns, name)
					} else if !strings.Contains(out.Err.Error(), "mutation.cpu") {
						t.Errorf("%s: refused without the CPU numbers: %v", name, out.Err)
					} else if k.nic && !strings.Contains(out.Err.Error(), "NUMA node of its own") {
						t.Errorf("%s: refused without naming the NUMA nodes of the GPUs with their NICs: %v", name, out.Err)
					} else {
						t.Logf("%s refused: %v", name, out.Err)
					}
					continue
				}
				if !out.Admitted() {
					t.Errorf("%s refused: %v", name, out.Err)
					continue
				}
				pod, bound := waitScheduled(t, c, ns, name)
				if !bound {
					t.Errorf("%s: converted but unschedulable: %v", name, pod.Status.Conditions)
					release(t, c, ns, name)
					continue
				}
				res := pod.Spec.Containers[0].Resources
				if got := res.Requests.Cpu().Value(); got != int64(k.cpus) || res.Limits.Cpu().Value() != int64(k.cpus) {
					t.Errorf("%s: container cpu %v / %v, want %d", name, res.Requests.Cpu(), res.Limits.Cpu(), k.cpus)
				}
				claim := allocation(t, c, pod)
				node := pod.Spec.NodeName
				tp := w.topo[node]
				ties := numaTies(claim)
				var gpuResults []resourcev1.DeviceRequestAllocationResult
				cpuNodes := map[int]map[int64]bool{} // numaNode constraint -> NUMA nodes of its CPUs
				var allocated int64
				for _, r := range claim.Status.Allocation.Devices.Results {
					if r.Driver != "dra.cpu" {
						gpuResults = append(gpuResults, r)
						continue
					}
					numa, ok := cpus[r.Pool][r.Device]
					if !ok {
						t.Errorf("%s: CPU device %s/%s is not published", name, r.Pool, r.Device)
						continue
					}
					p := tie(ties, r.Request)
					if p < 0 {
						t.Errorf("%s: CPU request %s is tied to no GPU", name, r.Request)
					}
					if cpuNodes[p] == nil {
						cpuNodes[p] = map[int64]bool{}
					}
					cpuNodes[p][numa] = true
					if q, ok := r.ConsumedCapacity["dra.cpu/cpu"]; ok {
						allocated += q.Value()
					} else {
						allocated++
					}
				}
				if allocated != int64(k.cpus) {
					t.Errorf("%s: %d CPUs allocated, want %d", name, allocated, k.cpus)
				}
				var gpus, nics int
				var lines []string
				for _, d := range w.resolve(t, gpuResults) {
					lines = append(lines, d.request+"="+d.name)
					var want []int
					switch {
					case d.gpu >= 0:
						gpus++
						want = tp.GPUs[d.gpu].NUMANodes
					case d.nic >= 0:
						nics++
						want = tp.NICs[d.nic].NUMANodes
					default:
						continue
					}
					p := tie(ties, d.request)
					if p < 0 && d.nic >= 0 {
						// Tied to its GPU by pcieRoot only (dranet v1.4.0 publishes no standard
						// numaNode): on the NUMA node of its rail's GPU, checked by the CPUs of that GPU.
						if run.nicNuma == "standard" {
							t.Errorf("%s: NIC request %s is not in a numaNode constraint though the NICs publish it", name, d.request)
						}
						p = tie(ties, strings.TrimSuffix(d.request, "-nic"))
					}
					if len(want) != 1 {
						t.Errorf("%s: device %s is local to NUMA nodes %v", name, d.name, want)
						continue
					}
					if len(cpuNodes[p]) != 1 || !cpuNodes[p][int64(want[0])] {
						t.Errorf("%s on %s: %s (request %s) on NUMA node %d, the CPUs tied to it on %v", name, node, d.name, d.request, want[0], cpuNodes[p])
					}
				}
				if gpus != k.gpus {
					t.Errorf("%s: %d GPUs allocated, want %d", name, gpus, k.gpus)
				}
				if k.nic && nics != k.gpus {
					t.Errorf("%s: %d NICs allocated, want %d", name, nics, k.gpus)
				}
				sort.Strings(lines)
				t.Logf("%s -> %s: %s; CPUs by numaNode constraint and NUMA node %v", name, node, strings.Join(lines, " "), cpuNodes)
				release(t, c, ns, name)
			}
		})
	}
}

// power9GPUMemory is an IBM POWER9 export whose GPUs' memory is a NUMA node of its own (CPU nodes 0
// and 8, three V100 each, memory nodes 250-255): the layout of a Grace tray, where the GPU driver
// publishes that memory node as the GPU's resource.kubernetes.io/numaNode and no CPU shares it.
const power9GPUMemory = "hwloc-derived/ibm-power9-8335gtw_2s_6xV100_gpu-numa-nodes.xml"

// TestCpusOnTheSocketOfGpusWithMemoryNodes: with mutation.cpu on a node whose GPUs' memory is a
// NUMA node of its own, legacy Pods are converted into per-GPU and CPU requests with one
// subrequest per socket, and kube-scheduler allocates every GPU and the CPUs on one socket: the
// GPUs' CPU-local node (by the export) is the node of the CPUs. A first Pod that takes a whole
// socket's GPUs leaves the second socket to the next Pod, which kube-scheduler then finds.
func TestCpusOnTheSocketOfGpusWithMemoryNodes(t *testing.T) {
	exports := []string{power9GPUMemory}
	c := UpWithCPUs(t, "grouped", exports...)
	// The derived export records no GPU memory size; the test publishes the 16 GiB of the AC922's
	// V100 SXM2 16GB so that the memory floor of the converted claims can be read.
	fillGPUMemory(t, c, "the AC922's V100 SXM2 16GB", func(*resourcev1.Device) string { return "16Gi" })
	ctx := context.Background()
	c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.cpu.mode=grouped")
	w := loadWorld(t, c, exports)
	cpus := cpuNUMA(t, c)
	ns := "sockets"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	// place creates a legacy Pod of `gpus` GPUs and `cpus` CPUs and returns the CPU-local NUMA node
	// of its GPUs, checking that the CPUs are there too.
	place := func(name string, gpus, ncpu int) int {
		out := c.Create(ctx, cpuPod(name, ns, gpus, ncpu, false), false)
		if !out.Admitted() {
			t.Fatalf("%s refused: %v", name, out.Err)
		}
		pod, bound := waitScheduled(t, c, ns, name)
		if !bound {
			t.Fatalf("%s: converted but unschedulable: %v", name, pod.Status.Conditions)
		}
		claim := allocation(t, c, pod)
		tp := w.topo[pod.Spec.NodeName]
		cpuNodes := map[int64]bool{}
		var gpuResults []resourcev1.DeviceRequestAllocationResult
		var allocated int64
		for _, r := range claim.Status.Allocation.Devices.Results {
			if r.Driver != "dra.cpu" {
				gpuResults = append(gpuResults, r)
				continue
			}
			cpuNodes[cpus[r.Pool][r.Device]] = true
			if q, ok := r.ConsumedCapacity["dra.cpu/cpu"]; ok {
				allocated += q.Value()
			}
		}
		if allocated != int64(ncpu) || len(cpuNodes) != 1 {
			t.Fatalf("%s: %d CPUs allocated on NUMA nodes %v, want %d on one", name, allocated, cpuNodes, ncpu)
		}
		socket := -1
		var lines []string
		for _, d := range w.resolve(t, gpuResults) {
			if d.gpu < 0 {
				continue
			}
			local := tp.GPUs[d.gpu].NUMANodes
			lines = append(lines, fmt.Sprintf("%s=%s(CPU node %v)", d.request, d.name, local))
			if len(local) != 1 || !cpuNodes[int64(local[0])] {
				t.Errorf("%s: GPU %s (request %s) is local to NUMA nodes %v, its CPUs are on %v", name, d.name, d.request, local, cpuNodes)
				continue
			}
			socket = local[0]
		}
		if len(lines) != gpus {
			t.Errorf("%s: %d GPUs allocated, want %d", name, len(lines), gpus)
		}
		sort.Strings(lines)
		t.Logf("%s -> %s: %s; %d CPUs on %v", name, pod.Spec.NodeName, strings.Join(lines, " "), allocated, cpuNodes)
		return socket
	}
	one := place("one-gpu", 1, 8)
	release(t, c, ns, "one-gpu")
	first := place("socket-a", 3, 16)
	second := place("socket-b", 2, 8)
	if first < 0 || second < 0 || first == second {
		t.Errorf("a socket's three GPUs taken, the next Pod's GPUs are on socket %d beside %d; want the other socket", second, first)
	}
	t.Logf("one GPU on socket %d; three GPUs on socket %d, then two on socket %d", one, first, second)
	// Four GPUs fit no socket: refused with the reason.
	if out := c.Create(ctx, cpuPod("four", ns, 4, 8, false), false); out.Admitted() {
		t.Errorf("four GPUs with CPUs admitted, want refused")
	} else if !strings.Contains(out.Err.Error(), "at most 3 of them on one socket") {
		t.Errorf("four GPUs refused without the socket numbers: %v", out.Err)
	}
}
