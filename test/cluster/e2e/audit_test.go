package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	auditNamespaces   = 6   // namespaces of the audited Pods
	auditPodsPerNS    = 350 // Pods in each
	auditLegacyEvery  = 10  // every 10th Pod requests a GPU through the device plugin (DG001)
	auditLeaseSeconds = 9   // --audit-lease-duration of the test: a takeover within about 12 s
)

var policyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}

// auditPod is one audited Pod: legacy (nvidia.com/gpu) or plain. Its scheduler does not exist, so
// kube-scheduler leaves the Pods Pending instead of retrying them.
func auditPod(ns string, i int) *corev1.Pod {
	c := corev1.Container{Name: "c", Image: "registry.example/app:1"}
	if i%auditLegacyEvery == 0 {
		c.Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1")}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: ns},
		Spec:       corev1.PodSpec{SchedulerName: "draguard-test-unscheduled", Containers: []corev1.Container{c}},
	}
}

// createAuditPods creates the Pods of every namespace (real creates) from 16 clients.
func createAuditPods(t *testing.T, c *Cluster, namespaces []string) {
	t.Helper()
	ctx := context.Background()
	type job struct {
		ns string
		i  int
	}
	jobs := make(chan job)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				if _, err := c.Kube.CoreV1().Pods(j.ns).Create(ctx, auditPod(j.ns, j.i), metav1.CreateOptions{}); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("%s/p-%04d: %w", j.ns, j.i, err)
					}
					mu.Unlock()
				}
			}
		}()
	}
	for _, ns := range namespaces {
		for i := 0; i < auditPodsPerNS; i++ {
			jobs <- job{ns, i}
		}
	}
	close(jobs)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("creating the audited Pods: %v", firstErr)
	}
}

// replicaMetrics reads every sample of a replica's /metrics listener (its address is in the
// replica's "listening" log line), keyed by series ("name{labels}").
func replicaMetrics(r *replica) (map[string]float64, error) {
	f, err := os.Open(r.log.Name())
	if err != nil {
		return nil, err
	}
	defer f.Close()
	addr := ""
	for s := bufio.NewScanner(f); s.Scan(); {
		var line struct {
			Msg     string `json:"msg"`
			Metrics string `json:"metrics"`
		}
		if json.Unmarshal(s.Bytes(), &line) == nil && line.Msg == "listening" {
			addr = line.Metrics
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("no listening line in %s", r.log.Name())
	}
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range regexp.MustCompile(`(?m)^([a-z_]+(?:\{[^}]*\})?) ([0-9.e+-]+)$`).FindAllSubmatch(body, -1) {
		v, err := strconv.ParseFloat(string(m[2]), 64)
		if err == nil {
			out[string(m[1])] = v
		}
	}
	return out, nil
}

// sum adds the samples of one metric whose labels contain every `want` ("k=\"v\"").
func sum(samples map[string]float64, name string, want ...string) float64 {
	total := 0.0
	for series, v := range samples {
		if series != name && !strings.HasPrefix(series, name+"{") {
			continue
		}
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(series, w)
		}
		if ok {
			total += v
		}
	}
	return total
}

// auditRuns counts the "audit run" lines (finished runs) of a replica's log.
func auditRuns(t *testing.T, r *replica) int {
	b, err := os.ReadFile(r.log.Name())
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), `"msg":"audit run"`)
}

// reportState is what the test reads of one namespace's PolicyReport.
type reportState struct {
	rv        string
	pass      int64
	fail      int64
	resources []string // names of the objects with results
}

// reports reads the PolicyReports `draguard` of the namespaces (absent ones are left out).
func reports(t *testing.T, c *Cluster, namespaces []string) map[string]reportState {
	t.Helper()
	out := map[string]reportState{}
	for _, ns := range namespaces {
		r, err := c.Dynamic.Resource(policyReports).Namespace(ns).Get(context.Background(), "draguard", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatalf("PolicyReport %s/draguard: %v", ns, err)
		}
		st := reportState{rv: r.GetResourceVersion()}
		st.pass, _, _ = unstructured.NestedInt64(r.Object, "summary", "pass")
		st.fail, _, _ = unstructured.NestedInt64(r.Object, "summary", "fail")
		results, _, _ := unstructured.NestedSlice(r.Object, "results")
		seen := map[string]bool{}
		for _, res := range results {
			refs, _, _ := unstructured.NestedSlice(res.(map[string]any), "resources")
			for _, ref := range refs {
				if n, _ := ref.(map[string]any)["name"].(string); n != "" && !seen[n] {
					seen[n] = true
					st.resources = append(st.resources, n)
				}
			}
		}
		sort.Strings(st.resources)
		out[ns] = st
	}
	return out
}

// expectReport is nil when the report of ns has `pass` passing objects and results for exactly
// the legacy Pods `legacy`, each with at least one failing result.
func expectReport(got map[string]reportState, ns string, pass int, legacy []string) error {
	r, ok := got[ns]
	if !ok {
		return fmt.Errorf("no PolicyReport in %s", ns)
	}
	if r.pass != int64(pass) {
		return fmt.Errorf("%s: summary.pass %d, want %d", ns, r.pass, pass)
	}
	if r.fail < int64(len(legacy)) {
		return fmt.Errorf("%s: summary.fail %d, want at least %d", ns, r.fail, len(legacy))
	}
	if strings.Join(r.resources, ",") != strings.Join(legacy, ",") {
		return fmt.Errorf("%s: results for %d objects %v, want the %d legacy Pods", ns, len(r.resources), r.resources, len(legacy))
	}
	return nil
}

func legacyNames(n int) []string {
	var out []string
	for i := 0; i < n; i += auditLegacyEvery {
		out = append(out, fmt.Sprintf("p-%04d", i))
	}
	return out
}

// leaseHolder is the holderIdentity of the audit Lease ("" when it does not exist).
func leaseHolder(c *Cluster) (string, error) {
	l, err := c.Kube.CoordinationV1().Leases(releaseNS).Get(context.Background(), "draguard-audit", metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil || l.Spec.HolderIdentity == nil {
		return "", err
	}
	return *l.Spec.HolderIdentity, nil
}

// TestBackgroundAudit: two replicas with the chart's arguments and ServiceAccount token and the
// background audit on elect one leader by the Lease; it lists 2,100 Pods in 6 namespaces page by
// page and writes one PolicyReport (the upstream v1alpha2 CRD) per namespace, rewritten only when
// its content changes; a custom resource kind the chart's RBAC does not grant is skipped and
// counted; the leader killed during a run is replaced by the other replica, whose first run finds
// every report current.
func TestBackgroundAudit(t *testing.T) {
	began := time.Now()
	c := Up(t, g4dn)
	ctx := context.Background()
	kubectlOK(t, c, "", "apply", "--server-side", "-f", filepath.Join(sourceDir(t), "test", "data", "crds", "wgpolicyk8s.io_policyreports.yaml"))
	kubectlOK(t, c, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/policyreports.wgpolicyk8s.io")
	// RayCluster is one of the policy's custom resources; the chart below grants list on
	// serving.kserve.io only, so the audit may not list it. KServe's two kinds are served in
	// different versions of their group, as upstream's CRDs are.
	standInCRDs(t, c, []*unstructured.Unstructured{
		{Object: map[string]any{"apiVersion": "ray.io/v1", "kind": "RayCluster"}},
		{Object: map[string]any{"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService"}},
		{Object: map[string]any{"apiVersion": "serving.kserve.io/v1alpha1", "kind": "LLMInferenceService"}}})
	var namespaces []string
	for i := 0; i < auditNamespaces; i++ {
		ns := fmt.Sprintf("audit-%d", i)
		namespaces = append(namespaces, ns)
		kubectlOK(t, c, "", "create", "namespace", ns)
	}
	for _, ns := range namespaces {
		c.WaitServiceAccount(ns)
	}
	created := time.Now()
	createAuditPods(t, c, namespaces)
	total := auditNamespaces * auditPodsPerNS
	t.Logf("%d Pods created in %d namespaces in %v", total, auditNamespaces, time.Since(created).Round(time.Millisecond))

	lb := newBalancer(t)
	c.Install("--set", "webhook.url=https://127.0.0.1:"+strconv.Itoa(lb.port()),
		"--set", "policy.mode=audit", "--set", "mutation.enabled=false",
		"--set", "audit.enabled=true", "--set", "audit.intervalSeconds=10", "--set", "audit.pageSize=100",
		"--set", "audit.leaseDurationSeconds="+strconv.Itoa(auditLeaseSeconds),
		"--set-json", `validating.crds.resources=[{"apiGroup":"serving.kserve.io","resources":["inferenceservices","llminferenceservices"]}]`)
	c.WaitServiceAccount("default")
	replicas := startReplicas(t, c, lb, 2)
	identities := map[string]*replica{"draguard-0": replicas[0], "draguard-1": replicas[1]}

	// The server cluster.sh install started held the Lease; it was killed, so one replica takes
	// the Lease over once it has expired.
	var leader, follower *replica
	Eventually(t, 60*time.Second, "a replica holds the audit Lease", func() error {
		h, err := leaseHolder(c)
		if err != nil {
			return err
		}
		if identities[h] == nil {
			return fmt.Errorf("held by %q", h)
		}
		leader = identities[h]
		return nil
	})
	for _, r := range replicas {
		if r != leader {
			follower = r
		}
	}

	// The first run: a report per namespace, each legacy Pod a failing result, the rest passing.
	legacy := legacyNames(auditPodsPerNS)
	Eventually(t, 60*time.Second, "a PolicyReport in every namespace", func() error {
		got := reports(t, c, namespaces)
		for _, ns := range namespaces {
			if err := expectReport(got, ns, auditPodsPerNS-len(legacy), legacy); err != nil {
				return err
			}
		}
		return nil
	})
	// The reports are written before the run is counted: wait for the count.
	var m map[string]float64
	Eventually(t, 30*time.Second, "the leader's first run counted", func() error {
		var err error
		if m, err = replicaMetrics(leader); err != nil {
			return err
		}
		if v := sum(m, "draguard_audit_runs_total", `result="partial"`); v < 1 {
			return fmt.Errorf("no partial run counted (a kind was skipped): %v", v)
		}
		return nil
	})
	if v := sum(m, "draguard_audit_leader"); v != 1 {
		t.Errorf("leader: draguard_audit_leader %v, want 1", v)
	}
	if v := sum(m, "draguard_audit_skipped_kinds_total", `kind="RayCluster.ray.io"`, `reason="forbidden"`); v < 1 {
		t.Errorf("the forbidden RayCluster kind was not counted as skipped: %v", v)
	}
	// Every kind of ray.io is forbidden (RBAC answers before the apiserver looks the resource up);
	// any other forbidden kind is one the chart's RBAC misses.
	for series := range m {
		if strings.HasPrefix(series, "draguard_audit_skipped_kinds_total{") && strings.Contains(series, `reason="forbidden"`) &&
			!strings.Contains(series, `.ray.io"`) {
			t.Errorf("skipped as forbidden: %s", series)
		}
	}
	// Both KServe kinds are listed, each in the version of the group that serves it.
	if v := sum(m, "draguard_audit_skipped_kinds_total", `.serving.kserve.io"`); v != 0 {
		t.Errorf("KServe kinds skipped though installed and granted:\n%v", m)
	}
	if v := sum(m, "draguard_audit_objects_total"); v < float64(total) {
		t.Errorf("draguard_audit_objects_total %v, want at least %d", v, total)
	}
	fm, err := replicaMetrics(follower)
	if err != nil {
		t.Fatal(err)
	}
	if sum(fm, "draguard_audit_leader") != 0 || sum(fm, "draguard_audit_runs_total") != 0 {
		t.Errorf("the follower audits too: %v", fm)
	}

	// Written only on change: another run leaves every report as it is.
	first := reports(t, c, namespaces)
	runs := auditRuns(t, leader)
	Eventually(t, 30*time.Second, "another audit run", func() error {
		if n := auditRuns(t, leader); n < runs+1 {
			return fmt.Errorf("%d runs", n)
		}
		return nil
	})
	for ns, r := range reports(t, c, namespaces) {
		if r.rv != first[ns].rv {
			t.Errorf("PolicyReport %s rewritten without a change (resourceVersion %s → %s)", ns, first[ns].rv, r.rv)
		}
	}

	// A change: a new legacy Pod in audit-0 (admitted by the webhook in audit mode; kube-scheduler
	// makes a ResourceClaim for its extended resource, judged with the Pod), every Pod of audit-5
	// gone. Only those two reports change; the other four stay as they are.
	if out := c.Create(ctx, legacyPod("p-new", "audit-0", 1, nil), false); out.Err != nil {
		t.Fatalf("creating a legacy Pod in audit mode: %v", out.Err)
	}
	zero := int64(0)
	if err := c.Kube.CoreV1().Pods("audit-5").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	kept := namespaces[:5]
	Eventually(t, 40*time.Second, "the reports of audit-0 and audit-5 follow the change", func() error {
		got := reports(t, c, namespaces)
		if _, ok := got["audit-5"]; ok {
			return fmt.Errorf("the report of audit-5 (no Pods left) still exists")
		}
		return expectReport(got, "audit-0", auditPodsPerNS-len(legacy), append(append([]string(nil), legacy...), "p-new"))
	})
	changed := reports(t, c, kept)
	for _, ns := range kept[1:] {
		if changed[ns].rv != first[ns].rv {
			t.Errorf("PolicyReport %s rewritten without a change", ns)
		}
	}

	// The leader killed during a run: a run is under way while its objects count grows and no
	// run has ended since.
	var killedAt time.Time
	midRun := false
	Eventually(t, 40*time.Second, "the leader in the middle of a run", func() error {
		before, err := replicaMetrics(leader)
		if err != nil {
			return err
		}
		deadline := time.Now().Add(15 * time.Second)
		for time.Now().Before(deadline) {
			logged := auditRuns(t, leader)
			now, err := replicaMetrics(leader)
			if err != nil {
				return err
			}
			if sum(now, "draguard_audit_objects_total") > sum(before, "draguard_audit_objects_total") &&
				sum(now, "draguard_audit_runs_total") == sum(before, "draguard_audit_runs_total") {
				leader.kill()
				killedAt = time.Now()
				midRun = auditRuns(t, leader) == logged
				return nil
			}
			before = now
			time.Sleep(10 * time.Millisecond) // sampling period of the metrics, not a synchronisation
		}
		return fmt.Errorf("no run observed")
	})
	if !midRun {
		t.Errorf("the leader's run ended before it was killed")
	}
	Eventually(t, time.Duration(4*auditLeaseSeconds)*time.Second, "the other replica takes the Lease over", func() error {
		h, err := leaseHolder(c)
		if err != nil {
			return err
		}
		if identities[h] != follower {
			return fmt.Errorf("held by %q", h)
		}
		return nil
	})
	takeover := time.Since(killedAt)
	Eventually(t, 30*time.Second, "the new leader's first run", func() error {
		if auditRuns(t, follower) < 1 {
			return fmt.Errorf("no run yet")
		}
		return nil
	})
	fm, err = replicaMetrics(follower)
	if err != nil {
		t.Fatal(err)
	}
	if v := sum(fm, "draguard_audit_leader"); v != 1 {
		t.Errorf("new leader: draguard_audit_leader %v", v)
	}
	for _, op := range []string{"create", "update", "delete", "error"} {
		if v := sum(fm, "draguard_audit_report_writes_total", `operation="`+op+`"`); v != 0 {
			t.Errorf("the new leader's run found a report to %s (%v) though nothing changed", op, v)
		}
	}
	if v := sum(fm, "draguard_audit_report_writes_total", `operation="unchanged"`); v < float64(len(kept)) {
		t.Errorf("the new leader found %v reports unchanged, want at least %d", v, len(kept))
	}
	for ns, r := range reports(t, c, namespaces) {
		if ns != "audit-5" && r.rv != changed[ns].rv {
			t.Errorf("PolicyReport %s rewritten by the new leader without a change", ns)
		}
	}
	if b, err := os.ReadFile(follower.log.Name()); err == nil {
		lines := strings.Split(string(b), "\n")
		for i := len(lines) - 1; i >= 0; i-- {
			if strings.Contains(lines[i], `"msg":"audit run"`) {
				t.Logf("the new leader's first run: %s", lines[i])
				break
			}
		}
	}
	// A rolling update: the killed replica starts again, and the leader is stopped with SIGTERM.
	// It releases the Lease as its drain starts, so the other replica takes it before the
	// leader's last renewal would have expired.
	leader.start(t)
	before, err := c.Kube.CoordinationV1().Leases(releaseNS).Get(ctx, "draguard-audit", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sigterm := time.Now()
	follower.terminate(t, 60*time.Second)
	var after *coordinationv1.Lease
	Eventually(t, time.Duration(4*auditLeaseSeconds)*time.Second, "the restarted replica takes the released Lease", func() error {
		l, err := c.Kube.CoordinationV1().Leases(releaseNS).Get(ctx, "draguard-audit", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if l.Spec.HolderIdentity == nil || identities[*l.Spec.HolderIdentity] != leader {
			return fmt.Errorf("held by %v", l.Spec.HolderIdentity)
		}
		after = l
		return nil
	})
	var handover time.Duration // from SIGTERM to the other replica's acquireTime
	if after.Spec.AcquireTime != nil {
		handover = after.Spec.AcquireTime.Time.Sub(sigterm)
	}
	// The stopped holder's last renewal plus the Lease duration: without the release, nobody could
	// take the Lease before then.
	expiry := before.Spec.RenewTime.Add(time.Duration(*before.Spec.LeaseDurationSeconds) * time.Second)
	if after.Spec.AcquireTime == nil || !after.Spec.AcquireTime.Time.Before(expiry) {
		t.Errorf("the Lease was taken at %v, not before the stopped holder's renewal expired (%v): it was not released",
			after.Spec.AcquireTime, expiry)
	}
	if got, want := *after.Spec.LeaseTransitions, *before.Spec.LeaseTransitions+1; got != want {
		t.Errorf("leaseTransitions %d after the handover, want %d", got, want)
	}
	if b, err := os.ReadFile(follower.log.Name()); err != nil || !strings.Contains(string(b), `"msg":"audit Lease released"`) {
		t.Errorf("the stopped leader did not log the release (%v)", err)
	}

	t.Logf("audit: %d Pods, pages of 100; takeover %v after the kill (Lease %d s), %v after SIGTERM; test %v",
		total+1, takeover.Round(time.Millisecond), auditLeaseSeconds, handover.Round(time.Millisecond),
		time.Since(began).Round(time.Second))
}
