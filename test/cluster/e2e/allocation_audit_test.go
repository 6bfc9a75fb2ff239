package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// allocationResult is one `allocation` result of a PolicyReport.
type allocationResult struct {
	pod, container, result, alignment, origin, devices, message string
}

// allocationResults reads the allocation results of the PolicyReport `draguard` of ns.
func allocationResults(c *Cluster, ns string) ([]allocationResult, error) {
	r, err := c.Dynamic.Resource(policyReports).Namespace(ns).Get(context.Background(), "draguard", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	results, _, _ := unstructured.NestedSlice(r.Object, "results")
	var out []allocationResult
	for _, x := range results {
		m := x.(map[string]any)
		if m["rule"] != "allocation" {
			continue
		}
		props, _, _ := unstructured.NestedStringMap(m, "properties")
		refs, _, _ := unstructured.NestedSlice(m, "resources")
		pod := ""
		if len(refs) == 1 {
			pod, _ = refs[0].(map[string]any)["name"].(string)
		}
		msg, _ := m["message"].(string)
		res, _ := m["result"].(string)
		out = append(out, allocationResult{pod: pod, container: props["container"], result: res, alignment: props["alignment"],
			origin: props["origin"], devices: props["devices"], message: msg})
	}
	return out, nil
}

// serverMetrics reads /metrics of the server cluster.sh install started.
func serverMetrics(c *Cluster) (map[string]float64, error) {
	f, err := os.Open(filepath.Join(c.Dir, "logs", "draguard.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return replicaMetrics(&replica{log: f})
}

// allocatedGPUs is the set of GPU devices the claims of ns hold, by device name.
func allocatedGPUs(t *testing.T, c *Cluster, namespaces ...string) map[string]bool {
	out := map[string]bool{}
	for _, ns := range namespaces {
		claims, err := c.Kube.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, cl := range claims.Items {
			if cl.Status.Allocation == nil {
				continue
			}
			for _, r := range cl.Status.Allocation.Devices.Results {
				if r.Driver == "gpu.nvidia.com" {
					out[r.Device] = true
				}
			}
		}
	}
	return out
}

// TestAllocationAudit: what each Pod was really allocated, on the g4dn.metal (8 T4s, 4 per NUMA
// node, no NVLink). A legacy Pod converted by draguard is allocated aligned; then, with every free
// GPU but one per NUMA node taken by a claim in the release namespace, a legacy 2-GPU Pod admitted
// unconverted (audit mode) runs on the claim kube-scheduler makes for its extended resource
// (KEP-5004), spread over both NUMA nodes. The background audit (the chart's RBAC, PolicyReports,
// pages of 2) reports the converted Pod's allocation as aligned (pass) and the scheduler's as
// spread (warn), and counts both in draguard_audit_allocations; `draguard audit` on a kubectl dump
// of the Pods, claims and slices with the node's export says the same.
func TestAllocationAudit(t *testing.T) {
	c := Up(t, g4dn)
	node := NodeName(g4dn)
	ctx := context.Background()
	kubectlOK(t, c, "", "apply", "--server-side", "-f", filepath.Join(sourceDir(t), "test", "data", "crds", "wgpolicyk8s.io_policyreports.yaml"))
	kubectlOK(t, c, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/policyreports.wgpolicyk8s.io")
	audit := []string{"--set", "audit.enabled=true", "--set", "audit.intervalSeconds=10", "--set", "audit.pageSize=2",
		"--set", "audit.leaseDurationSeconds=9"}
	c.Install(audit...)
	w := loadWorld(t, c, []string{g4dn})
	ns := "alloc-audit"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	c.WaitServiceAccount(releaseNS)

	// 1. Converted by /mutate (enforce mode): an aligned claim.
	if out := c.Create(ctx, legacyPod("converted", ns, 2, nil), false); !out.Admitted() {
		t.Fatalf("the converted Pod: %v", out.Err)
	}
	if pod, bound := waitScheduled(t, c, ns, "converted"); !bound || len(pod.Spec.ResourceClaims) == 0 {
		t.Fatalf("converted: bound %v, claims %v", bound, pod.Spec.ResourceClaims)
	}
	Eventually(t, 60*time.Second, "the converted Pod's claim allocated", func() error {
		if n := len(allocatedGPUs(t, c, ns)); n != 2 {
			return fmt.Errorf("%d GPUs allocated", n)
		}
		return nil
	})

	// 2. Every free GPU but one per NUMA node taken by a claim in the release namespace (which
	// draguard does not review), selected by PCI address.
	taken := allocatedGPUs(t, c, ns)
	tp := w.topo[node]
	keep := map[int]string{} // NUMA node -> the free GPU left for the scheduler
	var block []string
	for i, g := range tp.GPUs {
		name := fmt.Sprintf("gpu-%d", i)
		if taken[name] {
			continue
		}
		if _, ok := keep[g.NUMANodes[0]]; !ok {
			keep[g.NUMANodes[0]] = name
			continue
		}
		block = append(block, "'"+g.PCIBusID+"'")
	}
	if len(keep) != 2 || len(block) != 4 {
		t.Fatalf("free GPUs: kept %v, blocking %v (allocated %v)", keep, block, taken)
	}
	blocker := "blocker"
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: blocker, Namespace: releaseNS}, Spec: resourcev1.ResourceClaimSpec{
		Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
			DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: int64(len(block)),
			Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
				Expression: "device.attributes['resource.kubernetes.io'].pciBusID in [" + strings.Join(block, ", ") + "]"}}}}}}}}}
	if _, err := c.Kube.ResourceV1().ResourceClaims(releaseNS).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: blocker, Namespace: releaseNS}, Spec: corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "c", Image: "registry.example/cuda:12", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimName: &blocker}}}}
	if _, err := c.Kube.CoreV1().Pods(releaseNS).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, bound := waitScheduled(t, c, releaseNS, blocker); !bound {
		t.Fatal("the blocking claim's Pod was not scheduled")
	}

	// 3. A legacy 2-GPU Pod admitted unconverted: audit mode (/mutate only warns, the claim
	// webhook admits the scheduler's claim with a warning). kube-scheduler makes its claim from
	// the two GPUs left, one on each NUMA node.
	c.Install(append(audit, "--set", "policy.mode=audit")...)
	// The apiserver applies the backstop policy's new binding when its informer sees it: wait
	// until a server-side dry run is admitted.
	Eventually(t, 60*time.Second, "audit mode in effect for the backstop policy", func() error {
		return c.Create(ctx, legacyPod("legacy", ns, 2, nil), true).Err
	})
	if out := c.Create(ctx, legacyPod("legacy", ns, 2, nil), false); !out.Admitted() {
		t.Fatalf("the legacy Pod in audit mode: %v", out.Err)
	}
	legacy, bound := waitScheduled(t, c, ns, "legacy")
	if !bound || len(legacy.Spec.ResourceClaims) != 0 {
		t.Fatalf("legacy: bound %v, claims %v (want unconverted)", bound, legacy.Spec.ResourceClaims)
	}
	var schedulerClaim string
	Eventually(t, 60*time.Second, "the scheduler's claim of the legacy Pod", func() error {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, "legacy", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.ExtendedResourceClaimStatus == nil {
			return fmt.Errorf("no extendedResourceClaimStatus")
		}
		schedulerClaim = p.Status.ExtendedResourceClaimStatus.ResourceClaimName
		cl, err := c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, schedulerClaim, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cl.Status.Allocation == nil {
			return fmt.Errorf("claim %s not allocated", cl.Name)
		}
		var got []string
		for _, r := range cl.Status.Allocation.Devices.Results {
			got = append(got, r.Device)
		}
		sort.Strings(got)
		want := []string{keep[0], keep[1]}
		sort.Strings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			return fmt.Errorf("allocated %v, want %v", got, want)
		}
		return nil
	})

	// 4. The background audit reports both.
	var results []allocationResult
	Eventually(t, 90*time.Second, "allocation results for both Pods", func() error {
		var err error
		results, err = allocationResults(c, ns)
		if err != nil {
			return err
		}
		byPod := map[string]allocationResult{}
		for _, r := range results {
			byPod[r.pod] = r
		}
		conv, ok1 := byPod["converted"]
		leg, ok2 := byPod["legacy"]
		if !ok1 || !ok2 {
			return fmt.Errorf("results %v", results)
		}
		if conv.result != "pass" || conv.origin != "draguard" || (conv.alignment != "pcie-root" && conv.alignment != "numa") {
			return fmt.Errorf("converted: %+v", conv)
		}
		if leg.result != "warn" || leg.origin != "scheduler" || leg.alignment != "none" || leg.container != "c" {
			return fmt.Errorf("legacy: %+v", leg)
		}
		for _, d := range []string{keep[0], keep[1]} {
			if !strings.Contains(leg.devices, "gpu.nvidia.com/"+node+"/"+d) || !strings.Contains(leg.message, d) {
				return fmt.Errorf("legacy result does not name %s: %+v", d, leg)
			}
		}
		if !strings.Contains(leg.message, "on NUMA nodes 0, 1") {
			return fmt.Errorf("legacy message: %s", leg.message)
		}
		return nil
	})
	for _, r := range results {
		t.Logf("PolicyReport %s: %s/%s %s %s (%s claim): %s", ns, r.pod, r.container, r.result, r.alignment, r.origin, r.message)
	}
	m, err := serverMetrics(c)
	if err != nil {
		t.Fatal(err)
	}
	if v := sum(m, "draguard_audit_allocations", `alignment="none"`, `origin="scheduler"`, `result="warn"`); v != 1 {
		t.Errorf("draguard_audit_allocations of the spread scheduler claim: %v", v)
	}
	if v := sum(m, "draguard_audit_allocations", `origin="draguard"`, `result="pass"`); v != 1 {
		t.Errorf("draguard_audit_allocations of the converted Pod: %v", v)
	}
	if v := sum(m, "draguard_audit_skipped_kinds_total", `ResourceSlice`); v != 0 {
		t.Errorf("ResourceSlices skipped (the chart's RBAC?): %v", v)
	}

	// 5. `draguard audit` on a dump of the same objects, with the node's export.
	dump, _, err := c.Kubectl("", "get", "pods,resourceclaims,resourceslices", "-A", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dumpFile := filepath.Join(dir, "dump.json")
	if err := os.WriteFile(dumpFile, []byte(dump), 0o644); err != nil {
		t.Fatal(err)
	}
	if keepAt := os.Getenv("DRAGUARD_ALLOCATION_DUMP"); keepAt != "" {
		// Where the golden dump of test/data/audit/ comes from.
		if err := os.WriteFile(keepAt, []byte(dump), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	topoDir := filepath.Join(dir, "topology")
	if err := os.MkdirAll(topoDir, 0o755); err != nil {
		t.Fatal(err)
	}
	export, err := os.ReadFile(exportPath(t, g4dn))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(topoDir, node+".xml"), export, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := Draguard(t, "audit", "-f", dumpFile, "--topology-dir", topoDir, "--config", c.PolicyFile(), "-o", "json")
	var report struct {
		Results []struct {
			Name       string `json:"name"`
			Namespace  string `json:"namespace"`
			Allocation *struct {
				Containers []struct {
					Container string `json:"container"`
					Alignment string `json:"alignment"`
					Origin    string `json:"origin"`
					Result    string `json:"result"`
					Message   string `json:"message"`
				} `json:"containers"`
			} `json:"allocation"`
		} `json:"results"`
	}
	JSON(t, out, &report)
	offline := map[string]string{}
	for _, r := range report.Results {
		if r.Allocation == nil {
			continue
		}
		for _, c := range r.Allocation.Containers {
			offline[r.Namespace+"/"+r.Name] = c.Result + " " + c.Alignment + " " + c.Origin
			for _, bg := range results {
				if r.Namespace == ns && bg.pod == r.Name && bg.message != c.Message {
					t.Errorf("%s: draguard audit says %q, the background audit %q", r.Name, c.Message, bg.message)
				}
			}
		}
	}
	for _, r := range results {
		if got, want := offline[ns+"/"+r.pod], r.result+" "+r.alignment+" "+r.origin; got != want {
			t.Errorf("draguard audit of the dump: %s/%s is %q, the background audit says %q", ns, r.pod, got, want)
		}
	}
	if got := offline[releaseNS+"/"+blocker]; !strings.HasPrefix(got, "pass none user") {
		t.Errorf("the blocking claim (4 GPUs, no constraint): %q", got)
	}
}
