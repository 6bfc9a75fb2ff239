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
// limits) next to a sidecar in the shared pool.
func cpuPod(name, ns string, gpus, cpus int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{"containers": []any{
			map[string]any{"name": "c", "image": "registry.example/cuda:12", "resources": map[string]any{
				"requests": map[string]any{"cpu": fmt.Sprint(cpus), "memory": "8Gi"},
				"limits":   map[string]any{"nvidia.com/gpu": fmt.Sprint(gpus), "cpu": fmt.Sprint(cpus), "memory": "8Gi"}}},
			map[string]any{"name": "log", "image": "registry.example/log:1", "resources": map[string]any{
				"requests": map[string]any{"cpu": "250m"}}},
		}},
	}}
}

// part is the request prefix a GPU or CPU result belongs to: "gpu-part-1" and "cpu-part-1" -> "part-1",
// "gpu" / "gpu/numa-1" and "cpu" -> "".
func part(request string) string {
	main := strings.SplitN(request, "/", 2)[0]
	for _, p := range []string{"gpu-", "cpu-"} {
		if strings.HasPrefix(main, p) {
			return strings.TrimPrefix(main, p)
		}
	}
	return ""
}

// TestCpusAllocatedWithTheirGpus: with mutation.cpu, legacy Pods with CPUs are converted through
// the real apiserver, and kube-scheduler's allocation of their claims (GPUs from the NVIDIA
// driver's simulated slices, CPUs from dra-driver-cpu's in each of its modes) puts every GPU and
// the CPUs of its part on one NUMA node of the export; the CPUs allocated are the container's.
func TestCpusAllocatedWithTheirGpus(t *testing.T) {
	exports := []string{g4dn, dgx2h}
	cases := []struct {
		gpus, cpus int
		refused    bool
	}{
		{1, 8, false},  // one T4 with 8 of its NUMA node's 48 CPUs
		{2, 16, false}, // two T4s of one NUMA node: the DGX-2H export allows 2 CPUs per NUMA node
		{16, 4, false}, // the DGX-2H's 16 GPUs in two parts of 8 GPUs and 2 CPUs
		{8, 8, true},   // 8 T4s need both NUMA nodes and have no NVLink; 8 CPUs fit no DGX-2H NUMA node
	}
	for _, mode := range []string{"grouped", "individual"} {
		t.Run(mode, func(t *testing.T) {
			c := UpWithCPUs(t, mode, exports...)
			fillMemoryFromProductName(t, c)
			c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.cpu.mode="+mode)
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
				name := fmt.Sprintf("legacy-%dgpu-%dcpu", k.gpus, k.cpus)
				out := c.Create(ctx, cpuPod(name, ns, k.gpus, k.cpus), false)
				if k.refused {
					if out.Admitted() {
						t.Errorf("%s admitted, want refused", name)
						release(t, c, ns, name)
					} else if !strings.Contains(out.Err.Error(), "mutation.cpu") {
						t.Errorf("%s: refused without the CPU numbers: %v", name, out.Err)
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
				var gpuResults []resourcev1.DeviceRequestAllocationResult
				cpuNodes := map[string]map[int64]bool{} // part -> NUMA nodes of its CPUs
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
					p := part(r.Request)
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
				var gpus int
				var lines []string
				for _, d := range w.resolve(t, gpuResults) {
					lines = append(lines, d.request+"="+d.name)
					if d.gpu < 0 {
						continue
					}
					gpus++
					p := part(d.request)
					want := tp.GPUs[d.gpu].NUMANodes
					if len(want) != 1 {
						t.Errorf("%s: GPU %s is local to NUMA nodes %v", name, d.name, want)
						continue
					}
					if len(cpuNodes[p]) != 1 || !cpuNodes[p][int64(want[0])] {
						t.Errorf("%s on %s: GPU %s (request %s) on NUMA node %d, the CPUs of its part on %v", name, node, d.name, d.request, want[0], cpuNodes[p])
					}
				}
				if gpus != k.gpus {
					t.Errorf("%s: %d GPUs allocated, want %d", name, gpus, k.gpus)
				}
				sort.Strings(lines)
				t.Logf("%s -> %s: %s; CPUs by part and NUMA node %v", name, node, strings.Join(lines, " "), cpuNodes)
				release(t, c, ns, name)
			}
		})
	}
}
