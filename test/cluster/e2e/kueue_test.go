package e2e

// Kueue (kubernetes-sigs/kueue at the release test/cluster/kueue pins, run by `cluster.sh kueue`)
// in front of draguard: ClusterQueue quota holds for legacy Jobs whose Pods draguard converts,
// for plain Pods that Kueue manages itself (built from the stored, converted Pod and charged by
// DeviceClass), and for DRA-native and converted workloads of one team together. Each test logs
// what it saw: the queue's usage, the Pods bound, the devices allocated.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

const (
	queueNameLabel = "kueue.x-k8s.io/queue-name"
	admissionGate  = "kueue.x-k8s.io/admission"
	gpuDriver      = "gpu.nvidia.com"
)

var (
	clusterQueues   = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "clusterqueues"}
	localQueues     = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "localqueues"}
	resourceFlavors = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "resourceflavors"}
	workloads       = schema.GroupVersionResource{Group: "kueue.x-k8s.io", Version: "v1beta2", Resource: "workloads"}
)

// StartKueue runs `cluster.sh kueue` with the Configuration `config` (extra arguments: e.g.
// --webhook-prefix P); a second call restarts the manager.
func (c *Cluster) StartKueue(config map[string]any, args ...string) {
	c.t.Helper()
	b, err := yaml.Marshal(config)
	if err != nil {
		c.t.Fatal(err)
	}
	path := filepath.Join(c.Dir, "kueue-under-test.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("Kueue Configuration under test:\n%s", b)
	if err := script(c.t, append([]string{"kueue", c.Dir, path}, args...)...); err != nil {
		c.t.Fatalf("cluster.sh kueue: %v", err)
	}
}

// kueueConfiguration is the Configuration of the tests: the given integrations and the
// resources `draguard render --kueue` prints for the installed policy.
func kueueConfiguration(t *testing.T, c *Cluster, frameworks ...string) map[string]any {
	out, err := Draguard(t, "render", "--kueue", "--config", c.PolicyFile())
	if err != nil {
		t.Fatalf("draguard render --kueue: %v\n%s", err, out)
	}
	t.Logf("draguard render --kueue:\n%s", out)
	var fragment map[string]any
	if err := yaml.Unmarshal([]byte(out), &fragment); err != nil {
		t.Fatalf("draguard render --kueue printed no YAML: %v", err)
	}
	if fragment["kind"] != "Configuration" || fragment["resources"] == nil {
		t.Fatalf("draguard render --kueue: not a Configuration with resources: %v", fragment)
	}
	fw := []any{}
	for _, f := range frameworks {
		fw = append(fw, f)
	}
	return map[string]any{
		"apiVersion":   "config.kueue.x-k8s.io/v1beta2",
		"kind":         "Configuration",
		"integrations": map[string]any{"frameworks": fw},
		"resources":    fragment["resources"],
	}
}

// quota is one resource of a ClusterQueue and its nominal quota.
type quota struct{ name, nominal string }

// createQueues makes namespace `ns`, a ClusterQueue `ns` with one flavor and the quotas, and a
// LocalQueue `ns` in the namespace pointing at it; returns once the ClusterQueue is active.
func createQueues(t *testing.T, c *Cluster, ns string, quotas ...quota) {
	ctx := context.Background()
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	flavor := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
		"metadata": map[string]any{"name": "default-flavor"},
	}}
	if _, err := c.Dynamic.Resource(resourceFlavors).Create(ctx, flavor, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	var covered, resources []any
	for _, q := range quotas {
		covered = append(covered, q.name)
		resources = append(resources, map[string]any{"name": q.name, "nominalQuota": q.nominal})
	}
	cq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue",
		"metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"namespaceSelector": map[string]any{},
			"resourceGroups": []any{map[string]any{
				"coveredResources": covered,
				"flavors":          []any{map[string]any{"name": "default-flavor", "resources": resources}},
			}},
		},
	}}
	if _, err := c.Dynamic.Resource(clusterQueues).Create(ctx, cq, metav1.CreateOptions{}); err != nil {
		t.Fatalf("ClusterQueue %s: %v", ns, err)
	}
	lq := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
		"metadata": map[string]any{"name": ns, "namespace": ns},
		"spec":     map[string]any{"clusterQueue": ns},
	}}
	if _, err := c.Dynamic.Resource(localQueues).Namespace(ns).Create(ctx, lq, metav1.CreateOptions{}); err != nil {
		t.Fatalf("LocalQueue %s: %v", ns, err)
	}
	Eventually(t, 60*time.Second, "ClusterQueue "+ns+" active", func() error {
		got, err := c.Dynamic.Resource(clusterQueues).Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if conditionStatus(got, "Active") != "True" {
			return fmt.Errorf("not active: %v", got.Object["status"])
		}
		return nil
	})
}

// setQuota sets the nominal quota of resource `name` in ClusterQueue `cq` (made by createQueues).
func setQuota(t *testing.T, c *Cluster, cq, name, nominal string) {
	Eventually(t, 30*time.Second, fmt.Sprintf("ClusterQueue %s quota %s=%s", cq, name, nominal), func() error {
		got, err := c.Dynamic.Resource(clusterQueues).Get(context.Background(), cq, metav1.GetOptions{})
		if err != nil {
			return err
		}
		groups, _, _ := unstructured.NestedSlice(got.Object, "spec", "resourceGroups")
		found := false
		for _, g := range groups {
			flavors, _ := g.(map[string]any)["flavors"].([]any)
			for _, f := range flavors {
				resources, _ := f.(map[string]any)["resources"].([]any)
				for _, r := range resources {
					if m := r.(map[string]any); m["name"] == name {
						m["nominalQuota"] = nominal
						found = true
					}
				}
			}
		}
		if !found {
			t.Fatalf("ClusterQueue %s has no quota of %s", cq, name)
		}
		if err := unstructured.SetNestedSlice(got.Object, groups, "spec", "resourceGroups"); err != nil {
			return err
		}
		_, err = c.Dynamic.Resource(clusterQueues).Update(context.Background(), got, metav1.UpdateOptions{})
		return err // a conflict is retried
	})
	t.Logf("ClusterQueue %s: nominal quota of %s now %s", cq, name, nominal)
}

// conditionStatus is the status of condition `kind` of a Kueue object ("" when absent).
func conditionStatus(obj *unstructured.Unstructured, kind string) string {
	s, _ := conditionOf(obj, kind)
	return s
}

// conditionOf is the status and message of condition `kind`.
func conditionOf(obj *unstructured.Unstructured, kind string) (string, string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == kind {
			s, _ := m["status"].(string)
			msg, _ := m["message"].(string)
			return s, msg
		}
	}
	return "", ""
}

// queueUsage is the ClusterQueue's status.flavorsUsage, resource -> total over its flavors.
func queueUsage(t *testing.T, c *Cluster, cq string) map[string]resource.Quantity {
	got, err := c.Dynamic.Resource(clusterQueues).Get(context.Background(), cq, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]resource.Quantity{}
	flavors, _, _ := unstructured.NestedSlice(got.Object, "status", "flavorsUsage")
	for _, f := range flavors {
		rs, _, _ := unstructured.NestedSlice(f.(map[string]any), "resources")
		for _, r := range rs {
			m := r.(map[string]any)
			name, _ := m["name"].(string)
			total, _ := m["total"].(string)
			q, err := resource.ParseQuantity(total)
			if err != nil {
				continue
			}
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// count is the quantity of `name` in a usage, as an integer (0 when absent).
func count(u map[string]resource.Quantity, name string) int64 {
	q := u[name]
	return q.Value()
}

func formatUsage(u map[string]resource.Quantity) string {
	var parts []string
	for name, q := range u {
		parts = append(parts, name+"="+q.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// waitUsage waits until the ClusterQueue uses `want` of resource `name`.
func waitUsage(t *testing.T, c *Cluster, cq, name string, want int64) {
	Eventually(t, 60*time.Second, fmt.Sprintf("ClusterQueue %s using %d %s", cq, want, name), func() error {
		u := queueUsage(t, c, cq)
		if q := u[name]; q.Value() != want {
			return fmt.Errorf("usage %s", formatUsage(u))
		}
		return nil
	})
	t.Logf("ClusterQueue %s usage: %s", cq, formatUsage(queueUsage(t, c, cq)))
}

// workloadOf is the Workload Kueue made for the object of `kind` named `owner`, once it exists.
func workloadOf(t *testing.T, c *Cluster, ns, kind, owner string) *unstructured.Unstructured {
	var wl *unstructured.Unstructured
	Eventually(t, 60*time.Second, "Workload of "+kind+" "+owner, func() error {
		list, err := c.Dynamic.Resource(workloads).Namespace(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			for _, o := range list.Items[i].GetOwnerReferences() {
				if o.Kind == kind && o.Name == owner {
					wl = &list.Items[i]
					return nil
				}
			}
		}
		return fmt.Errorf("none yet")
	})
	return wl
}

// admittedUsage waits until the Workload of the object is admitted and returns what it is
// charged: resource -> quantity, summed over its PodSets.
func admittedUsage(t *testing.T, c *Cluster, ns, kind, owner string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	Eventually(t, 90*time.Second, "admission of "+kind+" "+owner, func() error {
		wl := workloadOf(t, c, ns, kind, owner)
		got, err := c.Dynamic.Resource(workloads).Namespace(ns).Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if s, msg := conditionOf(got, "Admitted"); s != "True" {
			_, reserved := conditionOf(got, "QuotaReserved")
			return fmt.Errorf("not admitted: %s %s", msg, reserved)
		}
		assignments, _, _ := unstructured.NestedSlice(got.Object, "status", "admission", "podSetAssignments")
		for _, a := range assignments {
			usage, _, _ := unstructured.NestedStringMap(a.(map[string]any), "resourceUsage")
			for name, v := range usage {
				q, err := resource.ParseQuantity(v)
				if err != nil {
					return err
				}
				sum := out[name]
				sum.Add(q)
				out[name] = sum
			}
		}
		return nil
	})
	t.Logf("%s %s/%s admitted, charged %s", kind, ns, owner, formatUsage(out))
	return out
}

// pendingMessage waits until the Workload of the object is waiting for quota (QuotaReserved
// False) and returns Kueue's message.
func pendingMessage(t *testing.T, c *Cluster, ns, kind, owner string) string {
	var msg string
	Eventually(t, 60*time.Second, kind+" "+owner+" waiting for quota", func() error {
		wl := workloadOf(t, c, ns, kind, owner)
		got, err := c.Dynamic.Resource(workloads).Namespace(ns).Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, m := conditionOf(got, "QuotaReserved")
		if s != "False" || m == "" {
			return fmt.Errorf("QuotaReserved %q %q", s, m)
		}
		if a, _ := conditionOf(got, "Admitted"); a == "True" {
			return fmt.Errorf("admitted")
		}
		msg = m
		return nil
	})
	return msg
}

// gpuWatch samples, until stopped, the GPUs allocated to the claims of a namespace.
type gpuWatch struct {
	mu      sync.Mutex
	max     int
	samples int
	over    []string // samples above the limit
	stop    chan struct{}
	done    chan struct{}
}

// watchGPUs counts every 50 ms the devices of driver gpu.nvidia.com allocated to the
// ResourceClaims of `ns`; a count above `limit` is recorded with the claims that hold them.
func watchGPUs(t *testing.T, c *Cluster, ns string, limit int) *gpuWatch {
	w := &gpuWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			claims, err := c.Kube.ResourceV1().ResourceClaims(ns).List(context.Background(), metav1.ListOptions{})
			if err == nil {
				n := 0
				var holders []string
				for _, cl := range claims.Items {
					if cl.Status.Allocation == nil {
						continue
					}
					k := 0
					for _, r := range cl.Status.Allocation.Devices.Results {
						if r.Driver == gpuDriver {
							k++
						}
					}
					n += k
					holders = append(holders, fmt.Sprintf("%s=%d", cl.Name, k))
				}
				w.mu.Lock()
				w.samples++
				if n > w.max {
					w.max = n
				}
				if n > limit {
					w.over = append(w.over, fmt.Sprintf("%d GPUs: %s", n, strings.Join(holders, " ")))
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

// Stop ends the sampling and returns the most GPUs seen at once, the number of samples, and the
// samples above the limit.
func (w *gpuWatch) Stop() (int, int, []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.max, w.samples, w.over
}

// StopAndExpect ends the sampling and fails the test unless the most GPUs allocated at once were
// exactly the limit (`onNodes`: how many the Nodes have, for the log).
func (w *gpuWatch) StopAndExpect(t *testing.T, ns string, limit, onNodes int) {
	most, samples, over := w.Stop()
	t.Logf("GPUs allocated to %s's claims: at most %d at once over %d samples (%d on the Nodes)", ns, most, samples, onNodes)
	if len(over) > 0 || most != limit {
		t.Errorf("at most %d GPUs allocated at once, want %d: %v", most, limit, over)
	}
}

// legacyContainer asks for `gpus` GPUs the device-plugin way.
func legacyContainer(gpus int) corev1.Container {
	return corev1.Container{Name: "main", Image: "registry.example/cuda:12", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(int64(gpus), resource.DecimalSI)},
	}}
}

// queuedJob is a one-Pod batch Job in queue `queue` whose Pod is `spec`.
func queuedJob(name, ns, queue string, spec corev1.PodSpec) *batchv1.Job {
	one, none := int32(1), int32(0)
	spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queueNameLabel: queue}},
		Spec: batchv1.JobSpec{Parallelism: &one, Completions: &one, BackoffLimit: &none,
			Template: corev1.PodTemplateSpec{Spec: spec}},
	}
}

// createJob creates a Job; Kueue's webhook makes a queued Job suspended.
func createJob(t *testing.T, c *Cluster, job *batchv1.Job) {
	got, err := c.Kube.BatchV1().Jobs(job.Namespace).Create(context.Background(), job, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Job %s: %v", job.Name, err)
	}
	if got.Spec.Suspend == nil || !*got.Spec.Suspend {
		t.Fatalf("Job %s stored unsuspended: Kueue's webhook did not act", job.Name)
	}
}

// runningJobs waits until exactly the Jobs `want` of `names` run (unsuspended) while the others
// stay suspended, and returns the running ones.
func runningJobs(t *testing.T, c *Cluster, ns string, names []string, want int) []string {
	var running []string
	Eventually(t, 90*time.Second, fmt.Sprintf("%d of %v unsuspended", want, names), func() error {
		running = nil
		for _, n := range names {
			j, err := c.Kube.BatchV1().Jobs(ns).Get(context.Background(), n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if j.Spec.Suspend == nil || !*j.Spec.Suspend {
				running = append(running, n)
			}
		}
		if len(running) != want {
			return fmt.Errorf("running %v", running)
		}
		return nil
	})
	return running
}

// jobPod waits for the one Pod of Job `job` and returns its name.
func jobPod(t *testing.T, c *Cluster, ns, job string) string {
	var name string
	Eventually(t, 60*time.Second, "Pod of Job "+job, func() error {
		pods, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
		if err != nil {
			return err
		}
		if len(pods.Items) != 1 {
			return fmt.Errorf("%d Pods", len(pods.Items))
		}
		name = pods.Items[0].Name
		return nil
	})
	return name
}

// expectConverted checks that a stored Pod asks for no legacy GPUs and references a template of
// draguard's, and returns that template.
func expectConverted(t *testing.T, c *Cluster, pod *corev1.Pod) *resourcev1.ResourceClaimTemplate {
	for _, ctr := range pod.Spec.Containers {
		for _, l := range []corev1.ResourceList{ctr.Resources.Limits, ctr.Resources.Requests} {
			if _, ok := l["nvidia.com/gpu"]; ok {
				t.Errorf("Pod %s still asks for nvidia.com/gpu: not converted", pod.Name)
			}
		}
	}
	for _, rc := range pod.Spec.ResourceClaims {
		if rc.ResourceClaimTemplateName != nil && strings.HasPrefix(*rc.ResourceClaimTemplateName, "draguard-") {
			rct, err := c.Kube.ResourceV1().ResourceClaimTemplates(pod.Namespace).Get(context.Background(), *rc.ResourceClaimTemplateName, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("template of Pod %s: %v", pod.Name, err)
			}
			return rct
		}
	}
	t.Fatalf("Pod %s references no draguard template: %+v", pod.Name, pod.Spec.ResourceClaims)
	return nil
}

// firstAvailable reports whether a template has a request with firstAvailable.
func firstAvailable(rct *resourcev1.ResourceClaimTemplate) bool {
	for _, r := range rct.Spec.Spec.Devices.Requests {
		if len(r.FirstAvailable) > 0 {
			return true
		}
	}
	return false
}

// expectBoundOnOneNuma waits until the Pod is bound with its claim allocated and checks that it
// got `gpus` GPUs local to one NUMA node of its node's export; returns the devices in words.
func expectBoundOnOneNuma(t *testing.T, c *Cluster, w *world, ns, name string, gpus int) string {
	pod, bound := waitScheduled(t, c, ns, name)
	if !bound {
		t.Fatalf("Pod %s not bound: %v", name, pod.Status.Conditions)
	}
	expectConverted(t, c, pod)
	claim := allocation(t, c, pod)
	var idx []int
	var words []string
	for _, d := range w.resolve(t, claim.Status.Allocation.Devices.Results) {
		if d.gpu < 0 {
			continue
		}
		if d.pool != pod.Spec.NodeName {
			t.Errorf("Pod %s on %s got %s of node %s", name, pod.Spec.NodeName, d.name, d.pool)
		}
		idx = append(idx, d.gpu)
		words = append(words, fmt.Sprintf("%s(%s NUMA %v)", d.name, w.topo[d.pool].GPUs[d.gpu].PCIBusID, w.topo[d.pool].GPUs[d.gpu].NUMANodes))
	}
	if len(idx) != gpus {
		t.Errorf("Pod %s: %d GPUs allocated, want %d", name, len(idx), gpus)
	}
	if !w.topo[pod.Spec.NodeName].shareNUMA(idx) {
		t.Errorf("Pod %s: GPUs %v on no common NUMA node", name, words)
	}
	sort.Strings(words)
	return pod.Spec.NodeName + ": " + strings.Join(words, " ")
}

// forceDeletePods deletes Pods at once (grace 0) as a kubelet that has stopped them would let
// them go, and waits until they and their generated claims are gone.
func forceDeletePods(t *testing.T, c *Cluster, ns string, names ...string) {
	ctx := context.Background()
	zero := int64(0)
	for _, n := range names {
		if err := c.Kube.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	Eventually(t, 60*time.Second, fmt.Sprintf("Pods %v and their claims gone", names), func() error {
		for _, n := range names {
			if _, err := c.Kube.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("Pod %s remains (%v)", n, err)
			}
		}
		claims, err := c.Kube.ResourceV1().ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, cl := range claims.Items {
			for _, o := range cl.OwnerReferences {
				for _, n := range names {
					if o.Kind == "Pod" && o.Name == n {
						return fmt.Errorf("claim %s of %s remains", cl.Name, n)
					}
				}
			}
		}
		return nil
	})
}

// deleteJob deletes a Job and, at once, its Pods (grace 0: no kubelet finishes them).
func deleteJob(t *testing.T, c *Cluster, ns, job string) {
	ctx := context.Background()
	pods, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + job})
	if err != nil {
		t.Fatal(err)
	}
	background := metav1.DeletePropagationBackground
	if err := c.Kube.BatchV1().Jobs(ns).Delete(ctx, job, metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range pods.Items {
		names = append(names, p.Name)
	}
	forceDeletePods(t, c, ns, names...)
}

// twoG4dn copies the g4dn.metal export under two names: two Nodes of 8 T4 each (4 per NUMA node).
func twoG4dn(t *testing.T) []string {
	dir := t.TempDir()
	b, err := os.ReadFile(exportPath(t, g4dn))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, n := range []string{"g4dn-a.xml", "g4dn-b.xml"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// TestKueueAdmitsLegacyJobsWithinQuota: a ClusterQueue of 8 nvidia.com/gpu and three legacy Jobs
// of 4 GPUs each, on two g4dn.metal Nodes (16 T4, so the quota and not the hardware is the
// limit), draguard with its default policy. Kueue charges each Job's legacy template as
// nvidia.com/gpu, admits two (usage 8) and keeps the third suspended; the admitted Jobs' Pods
// are converted by draguard and bound with their 4 GPUs on one NUMA node. Once one admitted Job
// is deleted (its Pod force-deleted), the third is admitted, converted and bound. The GPUs
// allocated to the namespace's claims, sampled every 50 ms throughout, never exceed 8.
func TestKueueAdmitsLegacyJobsWithinQuota(t *testing.T) {
	exports := twoG4dn(t)
	c := Up(t, exports...)
	c.Install()
	c.StartKueue(kueueConfiguration(t, c, "batch/job"))
	w := loadWorld(t, c, exports)
	const ns = "team-a"
	createQueues(t, c, ns, quota{"nvidia.com/gpu", "8"})
	watch := watchGPUs(t, c, ns, 8)
	names := []string{"train-1", "train-2", "train-3"}
	for _, n := range names {
		createJob(t, c, queuedJob(n, ns, ns, corev1.PodSpec{Containers: []corev1.Container{legacyContainer(4)}}))
	}
	running := runningJobs(t, c, ns, names, 2)
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	for _, j := range running {
		if u := admittedUsage(t, c, ns, "Job", j); count(u, "nvidia.com/gpu") != 4 || len(u) != 1 {
			t.Errorf("Job %s charged %s, want nvidia.com/gpu=4", j, formatUsage(u))
		}
		t.Logf("Job %s: Pod %s", j, expectBoundOnOneNuma(t, c, w, ns, jobPod(t, c, ns, j), 4))
	}
	var waiting string
	for _, n := range names {
		if n != running[0] && n != running[1] {
			waiting = n
		}
	}
	t.Logf("Job %s suspended: %s", waiting, pendingMessage(t, c, ns, "Job", waiting))
	if pods, _ := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + waiting}); len(pods.Items) != 0 {
		t.Errorf("suspended Job %s has %d Pods", waiting, len(pods.Items))
	}

	deleteJob(t, c, ns, running[0])
	t.Logf("Job %s deleted, its Pod force-deleted", running[0])
	runningJobs(t, c, ns, []string{running[1], waiting}, 2)
	if u := admittedUsage(t, c, ns, "Job", waiting); count(u, "nvidia.com/gpu") != 4 {
		t.Errorf("Job %s charged %s, want nvidia.com/gpu=4", waiting, formatUsage(u))
	}
	t.Logf("Job %s: Pod %s", waiting, expectBoundOnOneNuma(t, c, w, ns, jobPod(t, c, ns, waiting), 4))
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	watch.StopAndExpect(t, ns, 8, 16)
}

// plainPod is a Pod in queue `queue` asking for `gpus` GPUs the device-plugin way.
func plainPod(name, ns, queue string, gpus int) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{queueNameLabel: queue}},
		Spec:       corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{legacyContainer(gpus)}},
	}
}

// createGatedPod creates a queued Pod and checks what both webhooks made of it: converted by
// draguard (one `exactly` request per GPU entry, no firstAvailable) and gated by Kueue.
func createGatedPod(t *testing.T, c *Cluster, pod *corev1.Pod) *resourcev1.ResourceClaimTemplate {
	got, err := c.Kube.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("Pod %s: %v", pod.Name, err)
	}
	rct := expectConverted(t, c, got)
	gated := false
	for _, g := range got.Spec.SchedulingGates {
		gated = gated || g.Name == admissionGate
	}
	if !gated || got.Labels["kueue.x-k8s.io/managed"] != "true" {
		t.Errorf("Pod %s not managed by Kueue: gates %v labels %v", pod.Name, got.Spec.SchedulingGates, got.Labels)
	}
	return rct
}

// mutatingOrder is the names of the MutatingWebhookConfigurations in the order the apiserver
// calls them (sorted by name).
func mutatingOrder(t *testing.T, c *Cluster) []string {
	list, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range list.Items {
		names = append(names, m.Name)
	}
	sort.Strings(names)
	return names
}

// TestKueuePlainPodsChargedAsTheyAsked: Kueue's pod integration (plain Pods with a queue name)
// with draguard's policy mutation.kueue (and numaAlignment numaNode). Kueue builds each Pod's
// Workload from the stored Pod, which draguard has converted: it charges the generated template
// by DeviceClass (deviceClassMappings from `draguard render --kueue`: gpu.nvidia.com counts as
// nvidia.com/gpu), so a Pod of 4 legacy GPUs is charged 4. With a ClusterQueue of 8: two such
// Pods are admitted (ungated, bound with aligned GPUs), the third stays gated until one is
// deleted; never more than 8 GPUs allocated. The same with Kueue's webhooks called before
// draguard's (configuration names sorted the other way). Without mutation.kueue, a Pod of 2 GPUs
// gets a template with firstAvailable, which Kueue refuses to admit.
func TestKueuePlainPodsChargedAsTheyAsked(t *testing.T) {
	exports := twoG4dn(t)
	c := Up(t, exports...)
	c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.kueue=true")
	config := kueueConfiguration(t, c, "batch/job", "pod")
	c.StartKueue(config)
	w := loadWorld(t, c, exports)
	const ns = "team-p"
	createQueues(t, c, ns, quota{"nvidia.com/gpu", "8"})
	order := mutatingOrder(t, c)
	t.Logf("mutating webhook configurations in call order: %v", order)
	if order[0] != "draguard" {
		t.Fatalf("draguard's configuration is not called first: %v", order)
	}

	watch := watchGPUs(t, c, ns, 8)
	names := []string{"pod-1", "pod-2", "pod-3"}
	for _, n := range names {
		rct := createGatedPod(t, c, plainPod(n, ns, ns, 4))
		if firstAvailable(rct) {
			t.Errorf("Pod %s: template %s has firstAvailable under mutation.kueue", n, rct.Name)
		}
	}
	var admitted []string
	var waiting string
	Eventually(t, 90*time.Second, "two Pods admitted", func() error {
		admitted, waiting = nil, ""
		for _, n := range names {
			wl := workloadOf(t, c, ns, "Pod", n)
			got, err := c.Dynamic.Resource(workloads).Namespace(ns).Get(context.Background(), wl.GetName(), metav1.GetOptions{})
			if err != nil {
				return err
			}
			if conditionStatus(got, "Admitted") == "True" {
				admitted = append(admitted, n)
			} else {
				waiting = n
			}
		}
		if len(admitted) != 2 {
			return fmt.Errorf("admitted %v", admitted)
		}
		return nil
	})
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	for _, n := range admitted {
		if u := admittedUsage(t, c, ns, "Pod", n); count(u, "nvidia.com/gpu") != 4 {
			t.Errorf("Pod %s charged %s, want nvidia.com/gpu=4", n, formatUsage(u))
		}
		t.Logf("Pod %s bound: %s", n, expectBoundOnOneNuma(t, c, w, ns, n, 4))
	}
	t.Logf("Pod %s gated: %s", waiting, pendingMessage(t, c, ns, "Pod", waiting))
	if p, err := c.Kube.CoreV1().Pods(ns).Get(context.Background(), waiting, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" || len(p.Spec.SchedulingGates) == 0 {
		t.Errorf("Pod %s should stay gated and unbound: %v", waiting, err)
	}
	forceDeletePods(t, c, ns, admitted[0])
	t.Logf("Pod %s force-deleted", admitted[0])
	if u := admittedUsage(t, c, ns, "Pod", waiting); count(u, "nvidia.com/gpu") != 4 {
		t.Errorf("Pod %s charged %s, want nvidia.com/gpu=4", waiting, formatUsage(u))
	}
	t.Logf("Pod %s bound: %s", waiting, expectBoundOnOneNuma(t, c, w, ns, waiting, 4))
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	watch.StopAndExpect(t, ns, 8, 16)
	forceDeletePods(t, c, ns, admitted[1], waiting)
	waitUsage(t, c, ns, "nvidia.com/gpu", 0)

	// Kueue's webhooks first: its configurations named to sort before draguard's. Kueue's pod
	// webhook does not look at resources and is not called again after draguard's patch
	// (reinvocationPolicy Never); the Workload is built from the stored Pod all the same.
	c.StartKueue(config, "--webhook-prefix", "a-kueue-")
	order = mutatingOrder(t, c)
	t.Logf("mutating webhook configurations in call order: %v", order)
	if !strings.HasPrefix(order[0], "a-kueue-") || order[1] != "draguard" {
		t.Fatalf("Kueue's configuration is not called first: %v", order)
	}
	rct := createGatedPod(t, c, plainPod("pod-after-kueue", ns, ns, 2))
	if firstAvailable(rct) {
		t.Errorf("template %s has firstAvailable under mutation.kueue", rct.Name)
	}
	if u := admittedUsage(t, c, ns, "Pod", "pod-after-kueue"); count(u, "nvidia.com/gpu") != 2 {
		t.Errorf("Pod pod-after-kueue charged %s, want nvidia.com/gpu=2", formatUsage(u))
	}
	t.Logf("Pod pod-after-kueue bound: %s", expectBoundOnOneNuma(t, c, w, ns, "pod-after-kueue", 2))
	waitUsage(t, c, ns, "nvidia.com/gpu", 2)

	// The control: without mutation.kueue, two T4s get one PCIe root first, else one NUMA node
	// (firstAvailable); Kueue leaves that Workload without quota, its Pod gated.
	c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.kueue=false")
	rct = createGatedPod(t, c, plainPod("pod-without-key", ns, ns, 2))
	if !firstAvailable(rct) {
		t.Fatalf("template %s has no firstAvailable without mutation.kueue: the control proves nothing", rct.Name)
	}
	var refusal string
	Eventually(t, 60*time.Second, "Kueue's refusal of firstAvailable", func() error {
		wl := workloadOf(t, c, ns, "Pod", "pod-without-key")
		got, err := c.Dynamic.Resource(workloads).Namespace(ns).Get(context.Background(), wl.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		s, m := conditionOf(got, "QuotaReserved")
		if s != "False" || !strings.Contains(m, "FirstAvailable") {
			return fmt.Errorf("QuotaReserved %q %q", s, m)
		}
		refusal = m
		return nil
	})
	t.Logf("without mutation.kueue, Pod pod-without-key stays gated: %s", refusal)
	waitUsage(t, c, ns, "nvidia.com/gpu", 2)
}

// draClaimTemplate is a hand-written ResourceClaimTemplate: `gpus` GPUs of class gpu.nvidia.com
// on one NUMA node.
func draClaimTemplate(name, ns string, gpus int64) *resourcev1.ResourceClaimTemplate {
	return &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"draguard.io/interconnect": "pcie"}},
			Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
				Requests: []resourcev1.DeviceRequest{{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{
					DeviceClassName: "gpu.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: gpus,
					Selectors: []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{
						Expression: "'memory' in device.capacity['gpu.nvidia.com'] && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('8Gi')) >= 0"}}},
				}}},
				Constraints: []resourcev1.DeviceConstraint{{Requests: []string{"gpu"}, MatchAttribute: ptr(resourcev1.FullyQualifiedName("resource.kubernetes.io/numaNode"))}},
			}}},
	}
}

// TestKueueQuotaSharedByDraAndConvertedWorkloads: Kueue's DRA integration with the
// deviceClassMappings of `draguard render --kueue`. In one ClusterQueue of 8 nvidia.com/gpu, a
// DRA-native Job (a hand-written template of 4 GPUs of gpu.nvidia.com) and a legacy Job of 4 are
// admitted together (usage 8) and a second legacy Job waits until the DRA Job is deleted: claims
// and legacy requests count against one quota. Every other class draguard may put into a claim is
// mapped: a plain Pod converted with an RDMA NIC and its CPUs (dranet, dra.cpu in grouped mode)
// is charged draguard.io/nic-devices and draguard.io/cpu-devices beside its GPU and bound with
// them aligned, and a Pod with an IMEX channel claim (compute-domain-default-channel.nvidia.com)
// is admitted, charged draguard.io/imex-channels.
func TestKueueQuotaSharedByDraAndConvertedWorkloads(t *testing.T) {
	exports := append(twoG4dn(t), xe8640)
	c := UpWithCPUs(t, "grouped", exports...)
	fillMemoryFromProductName(t, c)
	c.Install("--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.kueue=true",
		"--set", "policy.mutation.cpu.mode=grouped")
	c.StartKueue(kueueConfiguration(t, c, "batch/job", "pod"))
	w := loadWorld(t, c, exports)
	const ns = "team-d"
	createQueues(t, c, ns, quota{"nvidia.com/gpu", "8"}, quota{"draguard.io/nic-devices", "2"},
		quota{"draguard.io/cpu-devices", "2"}, quota{"draguard.io/imex-channels", "2"}, quota{"cpu", "64"})
	ctx := context.Background()

	watch := watchGPUs(t, c, ns, 8)
	if _, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, draClaimTemplate("four-gpus", ns, 4), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	draSpec := corev1.PodSpec{
		Containers:     []corev1.Container{{Name: "main", Image: "registry.example/cuda:12", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpus"}}}}},
		ResourceClaims: []corev1.PodResourceClaim{{Name: "gpus", ResourceClaimTemplateName: ptr("four-gpus")}},
	}
	createJob(t, c, queuedJob("dra", ns, ns, draSpec))
	createJob(t, c, queuedJob("legacy", ns, ns, corev1.PodSpec{Containers: []corev1.Container{legacyContainer(4)}}))
	runningJobs(t, c, ns, []string{"dra", "legacy"}, 2)
	for _, j := range []string{"dra", "legacy"} {
		if u := admittedUsage(t, c, ns, "Job", j); count(u, "nvidia.com/gpu") != 4 || len(u) != 1 {
			t.Errorf("Job %s charged %s, want nvidia.com/gpu=4", j, formatUsage(u))
		}
	}
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	draPod := jobPod(t, c, ns, "dra")
	if pod, bound := waitScheduled(t, c, ns, draPod); !bound {
		t.Errorf("DRA Job's Pod %s not bound: %v", draPod, pod.Status.Conditions)
	} else {
		claim := allocation(t, c, pod)
		t.Logf("Job dra: Pod %s on %s, %d devices allocated from its own template", draPod, pod.Spec.NodeName, len(claim.Status.Allocation.Devices.Results))
	}
	t.Logf("Job legacy: Pod %s", expectBoundOnOneNuma(t, c, w, ns, jobPod(t, c, ns, "legacy"), 4))
	createJob(t, c, queuedJob("legacy-2", ns, ns, corev1.PodSpec{Containers: []corev1.Container{legacyContainer(4)}}))
	t.Logf("Job legacy-2 suspended: %s", pendingMessage(t, c, ns, "Job", "legacy-2"))
	deleteJob(t, c, ns, "dra")
	t.Logf("Job dra deleted, its Pod force-deleted")
	runningJobs(t, c, ns, []string{"legacy", "legacy-2"}, 2)
	t.Logf("Job legacy-2: Pod %s", expectBoundOnOneNuma(t, c, w, ns, jobPod(t, c, ns, "legacy-2"), 4))
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	watch.StopAndExpect(t, ns, 8, 20)
	deleteJob(t, c, ns, "legacy")
	deleteJob(t, c, ns, "legacy-2")
	waitUsage(t, c, ns, "nvidia.com/gpu", 0)

	// A plain Pod with an RDMA NIC and its CPUs in the claim: three classes, each mapped.
	nicPod := plainPod("gpu-nic-cpus", ns, ns, 1)
	nicPod.Annotations = map[string]string{"draguard.io/nic": "rdma"}
	nicPod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{"cpu": resource.MustParse("1")} // the XE8640-like export: 1 CPU on the NUMA node of each GPU with its NIC
	nicPod.Spec.Containers[0].Resources.Limits["cpu"] = resource.MustParse("1")
	rct := createGatedPod(t, c, nicPod)
	classes := map[string]bool{}
	for _, r := range rct.Spec.Spec.Devices.Requests {
		if r.Exactly == nil {
			t.Errorf("template %s: request %s is not `exactly`", rct.Name, r.Name)
			continue
		}
		classes[r.Exactly.DeviceClassName] = true
	}
	if !classes["gpu.nvidia.com"] || !classes["dranet"] || !classes["dra.cpu"] {
		t.Errorf("template %s has classes %v, want gpu.nvidia.com, dranet and dra.cpu", rct.Name, classes)
	}
	u := admittedUsage(t, c, ns, "Pod", "gpu-nic-cpus")
	for name, want := range map[string]int64{"nvidia.com/gpu": 1, "draguard.io/nic-devices": 1, "draguard.io/cpu-devices": 1, "cpu": 1} {
		if got := u[name]; got.Value() != want {
			t.Errorf("Pod gpu-nic-cpus charged %s=%s, want %d (usage %s)", name, got.String(), want, formatUsage(u))
		}
	}
	pod, bound := waitScheduled(t, c, ns, "gpu-nic-cpus")
	if !bound {
		t.Fatalf("Pod gpu-nic-cpus not bound: %v", pod.Status.Conditions)
	}
	claim := allocation(t, c, pod)
	var gpuNIC []resourcev1.DeviceRequestAllocationResult
	var lines []string
	for _, r := range claim.Status.Allocation.Devices.Results {
		lines = append(lines, r.Request+"="+r.Driver+"/"+r.Device)
		if r.Driver != "dra.cpu" {
			gpuNIC = append(gpuNIC, r)
		}
	}
	devs := w.resolve(t, gpuNIC)
	if !aligned(w.topo[pod.Spec.NodeName], devs, true) {
		t.Errorf("Pod gpu-nic-cpus: GPU and NIC not aligned: %v", lines)
	}
	sort.Strings(lines)
	t.Logf("Pod gpu-nic-cpus bound on %s: %s", pod.Spec.NodeName, strings.Join(lines, " "))
	forceDeletePods(t, c, ns, "gpu-nic-cpus")

	// An IMEX channel (the class the NVIDIA driver's chart installs, which the harness creates from
	// `topology slices --device-classes`; no node of the harness is in an NVLink clique, so none
	// publishes channels: the Pod is admitted and then waits for a device).
	if _, err := c.Kube.ResourceV1().DeviceClasses().Get(ctx, "compute-domain-default-channel.nvidia.com", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	channelTemplate := &resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: "imex-channel", Namespace: ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "channel", Exactly: &resourcev1.ExactDeviceRequest{
				DeviceClassName: "compute-domain-default-channel.nvidia.com", AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}}
	if _, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).Create(ctx, channelTemplate, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	imex := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "imex", Namespace: ns, Labels: map[string]string{queueNameLabel: ns}},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers:     []corev1.Container{{Name: "main", Image: "registry.example/cuda:12", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "channel"}}}}},
			ResourceClaims: []corev1.PodResourceClaim{{Name: "channel", ResourceClaimTemplateName: ptr("imex-channel")}}},
	}
	if _, err := c.Kube.CoreV1().Pods(ns).Create(ctx, imex, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u := admittedUsage(t, c, ns, "Pod", "imex"); count(u, "draguard.io/imex-channels") != 1 {
		t.Errorf("Pod imex charged %s, want draguard.io/imex-channels=1", formatUsage(u))
	}
	waitUsage(t, c, ns, "draguard.io/imex-channels", 1)
}
