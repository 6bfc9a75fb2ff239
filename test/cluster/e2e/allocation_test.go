package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
)

// The exports of the allocation tests (relative to test/data).
var (
	dgx2h  = "hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml"
	xe8640 = "hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml"
	g4dn   = "hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml"
	lassen = "hwloc/llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml"
)

// topo is the part of `draguard topology show -o json` the checks read.
type topo struct {
	Node string `json:"node"`
	GPUs []struct {
		PCIBusID  string `json:"pciBusId"`
		PCIeRoot  string `json:"pcieRoot"`
		NUMANodes []int  `json:"numaNodes"`
	} `json:"gpus"`
	NICs []struct {
		Name      string `json:"name"`
		PCIBusID  string `json:"pciBusId"`
		PCIeRoot  string `json:"pcieRoot"`
		NUMANodes []int  `json:"numaNodes"`
		RDMA      bool   `json:"rdma"`
	} `json:"nics"`
	NVLink *struct {
		Peers [][]int64 `json:"peers"`
	} `json:"nvlink"`
}

// device is one allocated device mapped back to its export.
type device struct {
	request string
	pool    string
	name    string
	gpu     int // index into topo.GPUs, or -1
	nic     int // index into topo.NICs, or -1
}

// world is what the checks know of the cluster: each node's topology, and each device's PCI
// address as its ResourceSlice publishes it.
type world struct {
	topo    map[string]*topo             // node -> topology
	address map[string]map[string]string // node -> device name -> PCI address
}

func loadWorld(t *testing.T, c *Cluster, exports []string) *world {
	w := &world{topo: map[string]*topo{}, address: map[string]map[string]string{}}
	for _, e := range exports {
		out, err := Draguard(t, "topology", "show", "-f", exportPath(t, e), "-o", "json")
		if err != nil {
			t.Fatalf("topology show %s: %v", e, err)
		}
		var ts []*topo
		JSON(t, out, &ts)
		w.topo[NodeName(e)] = ts[0]
	}
	slices, err := c.Kube.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range slices.Items {
		node := s.Spec.Pool.Name
		if w.address[node] == nil {
			w.address[node] = map[string]string{}
		}
		for _, d := range s.Spec.Devices {
			for name, v := range d.Attributes {
				n := string(name)
				if (strings.HasSuffix(n, "pciBusID") || strings.HasSuffix(n, "pciAddress")) && v.StringValue != nil {
					w.address[node][d.Name] = *v.StringValue
				}
			}
		}
	}
	return w
}

// resolve maps allocation results to the export's GPUs and NICs.
func (w *world) resolve(t *testing.T, results []resourcev1.DeviceRequestAllocationResult) []device {
	var out []device
	for _, r := range results {
		d := device{request: r.Request, pool: r.Pool, name: r.Device, gpu: -1, nic: -1}
		tp := w.topo[r.Pool]
		addr := w.address[r.Pool][r.Device]
		if tp == nil || addr == "" {
			t.Errorf("allocated device %s/%s is not one of a published export", r.Pool, r.Device)
			continue
		}
		for i, g := range tp.GPUs {
			if strings.EqualFold(g.PCIBusID, addr) {
				d.gpu = i
			}
		}
		for i, n := range tp.NICs {
			if strings.EqualFold(n.PCIBusID, addr) {
				d.nic = i
			}
		}
		if d.gpu < 0 && d.nic < 0 {
			t.Errorf("allocated device %s/%s (PCI %s) is neither a GPU nor a NIC of the export", r.Pool, r.Device, addr)
		}
		out = append(out, d)
	}
	return out
}

func (tp *topo) nvlinked(a, b int) bool {
	if tp.NVLink == nil {
		return false
	}
	for _, p := range tp.NVLink.Peers {
		if len(p) >= 2 && ((int(p[0]) == a && int(p[1]) == b) || (int(p[0]) == b && int(p[1]) == a)) {
			return true
		}
	}
	return false
}

func (tp *topo) shareNUMA(gpus []int) bool {
	count := map[int]int{}
	for _, g := range gpus {
		for _, n := range tp.GPUs[g].NUMANodes {
			count[n]++
		}
	}
	for _, k := range count {
		if k == len(gpus) {
			return true
		}
	}
	return false
}

var railRe = regexp.MustCompile(`^(.*)-rail-(\d+)$`)

// checkAligned checks an allocation against the alignment its claim's request names promise:
// a subrequest nvlink-N: the GPUs pairwise NVLink-connected; pcie-N: under one PCIe root; numa-N:
// on one NUMA node; a request X-nic: an RDMA NIC under the root of X's GPU; rails (X-rail-I): each
// GPU with its own NIC under its root. Every device is on the Pod's node. Returns what is wrong.
func checkAligned(tp *topo, node, interconnect string, devs []device) []string {
	var bad []string
	groups := map[string][]int{} // GPU request (parent/sub) -> GPUs
	nics := map[string][]int{}   // NIC request -> NICs
	for _, d := range devs {
		if d.pool != node {
			bad = append(bad, fmt.Sprintf("%s from node %s, Pod on %s", d.name, d.pool, node))
		}
		switch {
		case d.gpu >= 0:
			key := d.request
			if m := railRe.FindStringSubmatch(d.request); m != nil {
				key = m[1] + "-rail"
			}
			groups[key] = append(groups[key], d.gpu)
		case d.nic >= 0:
			nics[d.request] = append(nics[d.request], d.nic)
			if !tp.NICs[d.nic].RDMA {
				bad = append(bad, fmt.Sprintf("NIC %s has no RDMA", tp.NICs[d.nic].Name))
			}
		}
	}
	for req, gpus := range groups {
		_, sub, _ := strings.Cut(req, "/")
		nv := strings.HasPrefix(sub, "nvlink-") || (interconnect == "nvlink" && (sub == "" || strings.HasSuffix(req, "-rail")))
		if nv {
			for i := range gpus {
				for j := i + 1; j < len(gpus); j++ {
					if !tp.nvlinked(gpus[i], gpus[j]) {
						bad = append(bad, fmt.Sprintf("%s: GPUs %s and %s not NVLink-connected", req, tp.GPUs[gpus[i]].PCIBusID, tp.GPUs[gpus[j]].PCIBusID))
					}
				}
			}
		}
		if strings.HasPrefix(sub, "pcie-") {
			for _, g := range gpus {
				if tp.GPUs[g].PCIeRoot != tp.GPUs[gpus[0]].PCIeRoot {
					bad = append(bad, fmt.Sprintf("%s: GPUs under roots %s and %s", req, tp.GPUs[gpus[0]].PCIeRoot, tp.GPUs[g].PCIeRoot))
				}
			}
		}
		if strings.HasPrefix(sub, "numa-") && !tp.shareNUMA(gpus) {
			bad = append(bad, fmt.Sprintf("%s: GPUs on no common NUMA node", req))
		}
	}
	for req, ns := range nics {
		base := strings.TrimSuffix(req, "-nic")
		var gpus []int
		for _, d := range devs {
			if d.gpu >= 0 && (d.request == base || strings.HasPrefix(d.request, base+"/")) {
				gpus = append(gpus, d.gpu)
			}
		}
		for _, n := range ns {
			ok := false
			for _, g := range gpus {
				ok = ok || tp.GPUs[g].PCIeRoot == tp.NICs[n].PCIeRoot
			}
			if !ok {
				bad = append(bad, fmt.Sprintf("%s: NIC %s (root %s) under no root of its GPUs", req, tp.NICs[n].Name, tp.NICs[n].PCIeRoot))
			}
		}
	}
	return bad
}

// aligned reports whether GPUs (and NICs, when asked for) have any alignment draguard accepts
// under the default policy: pairwise NVLink, one PCIe root or one NUMA node; with NICs, one
// RDMA NIC per GPU under its root.
func aligned(tp *topo, devs []device, nic bool) bool {
	var gpus, nicList []int
	for _, d := range devs {
		if d.gpu >= 0 {
			gpus = append(gpus, d.gpu)
		}
		if d.nic >= 0 {
			nicList = append(nicList, d.nic)
		}
	}
	nv, root := true, true
	for i := range gpus {
		for j := i + 1; j < len(gpus); j++ {
			nv = nv && tp.nvlinked(gpus[i], gpus[j])
		}
		root = root && tp.GPUs[gpus[i]].PCIeRoot == tp.GPUs[gpus[0]].PCIeRoot
	}
	gpusOK := nv || root || tp.shareNUMA(gpus)
	if !nic {
		return gpusOK
	}
	used := map[int]bool{}
	for _, g := range gpus {
		found := false
		for _, n := range nicList {
			if !used[n] && tp.NICs[n].RDMA && tp.NICs[n].PCIeRoot == tp.GPUs[g].PCIeRoot {
				used[n], found = true, true
				break
			}
		}
		if !found {
			return false
		}
	}
	return gpusOK
}

// waitScheduled waits until the Pod is bound (nil) or the scheduler reports it unschedulable.
func waitScheduled(t *testing.T, c *Cluster, ns, name string) (*corev1.Pod, bool) {
	var pod *corev1.Pod
	var bound bool
	Eventually(t, 90*time.Second, "scheduling of "+ns+"/"+name, func() error {
		p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		if p.Spec.NodeName != "" {
			bound = true
			return nil
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				return nil
			}
		}
		return fmt.Errorf("pending")
	})
	return pod, bound
}

// allocation is the claim of a bound Pod, once allocated.
func allocation(t *testing.T, c *Cluster, pod *corev1.Pod) *resourcev1.ResourceClaim {
	var claim *resourcev1.ResourceClaim
	Eventually(t, 60*time.Second, "allocated claim of "+pod.Name, func() error {
		p, err := c.Kube.CoreV1().Pods(pod.Namespace).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		// A claim made from a template is named in the status; a claim referenced by name is not.
		var names []string
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName != nil {
				names = append(names, *s.ResourceClaimName)
			}
		}
		for _, rc := range p.Spec.ResourceClaims {
			if rc.ResourceClaimName != nil {
				names = append(names, *rc.ResourceClaimName)
			}
		}
		for _, name := range names {
			cl, err := c.Kube.ResourceV1().ResourceClaims(p.Namespace).Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cl.Status.Allocation == nil {
				return fmt.Errorf("claim %s not allocated", cl.Name)
			}
			claim = cl
			return nil
		}
		return fmt.Errorf("no claim status yet")
	})
	return claim
}

// release force-deletes a Pod (no kubelet finishes a graceful deletion) and waits until its
// generated claims are gone, so the next Pod finds every device free.
func release(t *testing.T, c *Cluster, ns, name string) {
	ctx := context.Background()
	zero := int64(0)
	if err := c.Kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	Eventually(t, 60*time.Second, "claims of "+name+" released", func() error {
		claims, err := c.Kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, cl := range claims.Items {
			for _, o := range cl.OwnerReferences {
				if o.Kind == "Pod" && o.Name == name {
					return fmt.Errorf("claim %s remains", cl.Name)
				}
			}
			if len(cl.Status.ReservedFor) > 0 && cl.Status.ReservedFor[0].Name == name {
				return fmt.Errorf("claim %s still reserved", cl.Name)
			}
		}
		return nil
	})
}

// mutateAgain posts the stored Pod to the running server's /mutate as a CREATE review (as a
// reinvocation would) and returns the patch, if any.
func mutateAgain(t *testing.T, c *Cluster, pod *corev1.Pod) string {
	port, err := os.ReadFile(filepath.Join(c.Dir, "serve.port"))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	p := pod.DeepCopy()
	p.APIVersion, p.Kind = "v1", "Pod"
	raw, _ := json.Marshal(p)
	review := map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": map[string]any{
		"uid": string(uuid.NewUUID()), "kind": map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"namespace": p.Namespace, "name": p.Name, "operation": "CREATE", "object": json.RawMessage(raw),
		"userInfo": map[string]any{"username": "cluster-admin"}, "dryRun": true}}
	body, _ := json.Marshal(review)
	resp, err := client.Post("https://127.0.0.1:"+strings.TrimSpace(string(port))+"/mutate", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatalf("posting to /mutate: %v", err)
	}
	defer resp.Body.Close()
	var answer struct {
		Response struct {
			Allowed bool   `json:"allowed"`
			Patch   string `json:"patch"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil {
		t.Fatalf("decoding /mutate answer: %v", err)
	}
	return answer.Response.Patch
}

// allocCase is one legacy request: GPUs and whether an RDMA NIC per GPU is asked for.
type allocCase struct {
	gpus int
	nic  bool
}

func (a allocCase) String() string {
	if a.nic {
		return fmt.Sprintf("%dgpu-rdma", a.gpus)
	}
	return fmt.Sprintf("%dgpu", a.gpus)
}

var allocCases = []allocCase{{1, false}, {2, false}, {3, false}, {4, false}, {8, false}, {16, false}, {2, true}, {4, true}}

// runAllocations creates each legacy Pod through the apiserver with mutation on and judges
// the outcome: converted Pods are bound with an aligned allocation; refused ones are ones the
// scheduler cannot place aligned either.
func runAllocations(t *testing.T, c *Cluster, w *world, exports []string) (converted, refused int) {
	ctx := context.Background()
	ns := "alloc"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	for _, ac := range allocCases {
		name := "legacy-" + ac.String()
		ann := map[string]any{}
		if ac.nic {
			ann["draguard.io/nic"] = "rdma"
		}
		out := c.Create(ctx, legacyPod(name, ns, ac.gpus, ann), false)
		if !out.Admitted() {
			refused++
			t.Logf("%s refused: %v", name, out.Err)
			if !strings.Contains(out.Err.Error(), "DG0") {
				t.Errorf("%s: refused, but not by draguard: %v", name, out.Err)
			}
			if len(exports) == 1 {
				checkRefusal(t, c, w, ns, ac, NodeName(exports[0]))
			}
			continue
		}
		converted++
		pod, bound := waitScheduled(t, c, ns, name)
		if len(pod.Spec.ResourceClaims) == 0 {
			t.Errorf("%s admitted unconverted", name)
			continue
		}
		for _, rc := range pod.Spec.ResourceClaims {
			if rc.ResourceClaimTemplateName == nil {
				continue
			}
			if _, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, *rc.ResourceClaimTemplateName, metav1.GetOptions{}); err != nil {
				t.Errorf("%s: template %s: %v", name, *rc.ResourceClaimTemplateName, err)
			}
		}
		if patch := mutateAgain(t, c, pod); patch != "" {
			t.Errorf("%s: a second /mutate of the stored Pod changes it again: %s", name, patch)
		}
		if !bound {
			t.Errorf("%s: converted but unschedulable: %v", name, pod.Status.Conditions)
			release(t, c, ns, name)
			continue
		}
		claim := allocation(t, c, pod)
		devs := w.resolve(t, claim.Status.Allocation.Devices.Results)
		interconnect := claim.Annotations["draguard.io/interconnect"]
		var gpus int
		for _, d := range devs {
			if d.gpu >= 0 {
				gpus++
			}
		}
		if gpus != ac.gpus {
			t.Errorf("%s: %d GPUs allocated, want %d", name, gpus, ac.gpus)
		}
		tp := w.topo[pod.Spec.NodeName]
		if bad := checkAligned(tp, pod.Spec.NodeName, interconnect, devs); len(bad) > 0 {
			t.Errorf("%s on %s: allocation breaks its template's promise: %s", name, pod.Spec.NodeName, strings.Join(bad, "; "))
		}
		var reqs []string
		for _, d := range devs {
			reqs = append(reqs, d.request+"="+d.name)
		}
		sort.Strings(reqs)
		t.Logf("%s -> %s: %s", name, pod.Spec.NodeName, strings.Join(reqs, " "))
		release(t, c, ns, name)
	}
	return
}

// checkRefusal writes the refused request as an unconstrained claim: the real scheduler must
// either find no place for it or allocate it unaligned.
func checkRefusal(t *testing.T, c *Cluster, w *world, _ string, ac allocCase, node string) {
	ctx := context.Background()
	// In the release namespace, which draguard never reviews: a plain claim is exactly what it
	// refuses (DG003 and DG005 would deny it elsewhere).
	ns := "draguard"
	c.WaitServiceAccount(ns)
	name := "plain-" + ac.String()
	// The request's memory floor (the policy's 1Gi) wherever a device publishes its memory.
	floor := []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: "!('memory' in device.capacity['gpu.nvidia.com']) || device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('1Gi')) >= 0"}}}
	reqs := []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(ac.gpus), Selectors: floor}}}
	if ac.nic {
		reqs = append(reqs, resourcev1.DeviceRequest{Name: "nic", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: "dranet", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(ac.gpus)}})
	}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}}
	if _, err := c.Kube.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "c", Image: "registry.example/cuda:12", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "devices"}}}}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "devices", ResourceClaimName: &name}}}}
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got, bound := waitScheduled(t, c, ns, name)
	if bound {
		cl := allocation(t, c, got)
		devs := w.resolve(t, cl.Status.Allocation.Devices.Results)
		if aligned(w.topo[node], devs, ac.nic) {
			t.Errorf("draguard refused %s, but the scheduler allocated it aligned on %s: %v", ac, node, devs)
		} else {
			t.Logf("refusal confirmed: the unconstrained %s was allocated unaligned", ac)
		}
	} else {
		t.Logf("refusal confirmed: the unconstrained %s is unschedulable", ac)
	}
	release(t, c, ns, name)
	if err := c.Kube.ResourceV1().ResourceClaims(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "claim "+name+" deleted", func() error {
		_, err := c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
}

var gbInName = regexp.MustCompile(`(\d+)GB`)

// fillMemoryFromProductName gives every published GPU without a capacity `memory` the size its
// product name states ("Tesla V100-SXM3-32GB-H": 32Gi), as the driver would publish the GPU's
// memory; the test's stand-in for a figure the export lacks (logged).
func fillMemoryFromProductName(t *testing.T, c *Cluster) {
	fillGPUMemory(t, c, "the product name", func(d *resourcev1.Device) string {
		name := d.Attributes["productName"].StringValue
		if name == nil {
			return ""
		}
		if m := gbInName.FindStringSubmatch(*name); m != nil {
			return m[1] + "Gi"
		}
		return ""
	})
}

// fillGPUMemory gives every published GPU without a capacity `memory` the size `size` names for it
// ("" leaves it without), from `source` (logged).
func fillGPUMemory(t *testing.T, c *Cluster, source string, size func(d *resourcev1.Device) string) {
	ctx := context.Background()
	slices, err := c.Kube.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range slices.Items {
		s := &slices.Items[i]
		if s.Spec.Driver != "gpu.nvidia.com" {
			continue
		}
		changed := 0
		for j := range s.Spec.Devices {
			d := &s.Spec.Devices[j]
			if _, ok := d.Capacity["memory"]; ok {
				continue
			}
			q := size(d)
			if q == "" {
				continue
			}
			if d.Capacity == nil {
				d.Capacity = map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
			}
			d.Capacity["memory"] = resourcev1.DeviceCapacity{Value: resource.MustParse(q)}
			changed++
		}
		if changed == 0 {
			continue
		}
		if _, err := c.Kube.ResourceV1().ResourceSlices().Update(ctx, s, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Logf("slice %s: capacity memory from %s for %d GPUs the export gives no memory size", s.Name, source, changed)
	}
}

// TestMutationAllocatedByTheScheduler: legacy Pods converted by draguard through the real
// apiserver, their claims made by kube-controller-manager and allocated by kube-scheduler, the
// allocation checked against the export; refusals checked against an unconstrained claim.
func TestMutationAllocatedByTheScheduler(t *testing.T) {
	// The DGX-2H export carries no GPU memory figure, so its simulated slices publish no capacity
	// `memory` (listed as unknown by `topology slices`); the real driver always publishes it.
	// draguard converts anyway (a selector that reads what the export cannot tell may match the
	// real device); fillMemoryFromProductName stands in for the driver here.
	sets := []struct {
		name    string
		exports []string
		helm    []string
	}{
		{"dgx2h", []string{dgx2h}, nil},
		{"xe8640", []string{xe8640}, nil},
		{"g4dn", []string{g4dn}, nil},
		{"lassen", []string{lassen}, nil},
		{"mixed", []string{dgx2h, xe8640, g4dn, lassen}, nil},
	}
	for _, s := range sets {
		t.Run(s.name, func(t *testing.T) {
			c := Up(t, s.exports...)
			fillMemoryFromProductName(t, c)
			c.Install(s.helm...)
			w := loadWorld(t, c, s.exports)
			converted, refused := runAllocations(t, c, w, s.exports)
			t.Logf("%s: %d converted and allocated, %d refused", s.name, converted, refused)
			if converted == 0 {
				t.Error("nothing was converted")
			}
		})
	}
}
