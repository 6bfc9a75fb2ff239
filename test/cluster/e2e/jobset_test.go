package e2e

// JobSet (kubernetes-sigs/jobset at the release Kueue requires, built beside Kueue and run by
// `cluster.sh jobset`) behind Kueue and draguard: the quota of a ClusterQueue holds for legacy
// JobSets whose Pods draguard converts.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const jobSetNameLabel = "jobset.sigs.k8s.io/jobset-name"

var jobSets = schema.GroupVersionResource{Group: "jobset.x-k8s.io", Version: "v1alpha2", Resource: "jobsets"}

// StartJobSet runs `cluster.sh jobset`: JobSet's manager, CRD and webhooks.
func (c *Cluster) StartJobSet() {
	c.t.Helper()
	if err := script(c.t, "jobset", c.Dir); err != nil {
		c.t.Fatalf("cluster.sh jobset: %v", err)
	}
}

// queuedJobSet is a JobSet in queue `queue` (none when empty) of one replicated Job, `replicas`
// Jobs of one Pod each whose Pod is `spec`.
func queuedJobSet(t *testing.T, name, ns, queue string, replicas int, spec corev1.PodSpec) *unstructured.Unstructured {
	spec.RestartPolicy = corev1.RestartPolicyNever
	podSpec, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	if err != nil {
		t.Fatal(err)
	}
	meta := map[string]any{"name": name, "namespace": ns}
	if queue != "" {
		meta["labels"] = map[string]any{queueNameLabel: queue}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
		"metadata": meta,
		"spec": map[string]any{"replicatedJobs": []any{map[string]any{
			"name": "workers", "replicas": int64(replicas),
			"template": map[string]any{"spec": map[string]any{
				"parallelism": int64(1), "completions": int64(1), "backoffLimit": int64(0),
				"template": map[string]any{"spec": podSpec},
			}},
		}}},
	}}
}

// suspended reports whether a stored JobSet is suspended.
func suspended(c *Cluster, ns, name string) (bool, error) {
	js, err := c.Dynamic.Resource(jobSets).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return false, fmt.Errorf("JobSet %s: %w", name, err)
	}
	s, _, _ := unstructured.NestedBool(js.Object, "spec", "suspend")
	return s, nil
}

// runningJobSets waits until exactly `want` of the JobSets `among` run (unsuspended), the others
// suspended, and returns the running ones.
func runningJobSets(t *testing.T, c *Cluster, ns string, among []string, want int) []string {
	var out []string
	Eventually(t, 90*time.Second, fmt.Sprintf("%d of %v unsuspended", want, among), func() error {
		out = nil
		for _, n := range among {
			s, err := suspended(c, ns, n)
			if err != nil {
				return err
			}
			if !s {
				out = append(out, n)
			}
		}
		if len(out) != want {
			return fmt.Errorf("running %v", out)
		}
		return nil
	})
	return out
}

// podsOfJobSet waits until JobSet `name` has `want` Pods and returns their names.
func podsOfJobSet(t *testing.T, c *Cluster, ns, name string, want int) []string {
	var names []string
	Eventually(t, 90*time.Second, fmt.Sprintf("%d Pods of JobSet %s", want, name), func() error {
		pods, err := c.Kube.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{LabelSelector: jobSetNameLabel + "=" + name})
		if err != nil {
			return err
		}
		names = nil
		for _, p := range pods.Items {
			if p.DeletionTimestamp == nil {
				names = append(names, p.Name)
			}
		}
		if len(names) != want {
			return fmt.Errorf("%d Pods", len(names))
		}
		return nil
	})
	return names
}

// TestKueueAdmitsLegacyJobSetsWithinQuota: TestKueueAdmitsLegacyJobsWithinQuota for JobSets,
// Kueue's jobset.x-k8s.io/jobset integration with JobSet's own controller. A ClusterQueue of 8
// nvidia.com/gpu and three legacy JobSets of two Pods with 2 GPUs each (4 per JobSet) on two
// g4dn.metal Nodes (16 T4). Kueue charges each JobSet's template as nvidia.com/gpu, admits two
// (usage 8) and keeps the third suspended, with no Pods; JobSet's controller makes the admitted
// ones' Jobs, whose Pods draguard converts and kube-scheduler binds with their GPUs on one NUMA
// node. Once one admitted JobSet is deleted (its Pods force-deleted), the third is admitted,
// converted and bound. The GPUs allocated to the namespace's claims, sampled every 50 ms
// throughout, never exceed 8.
func TestKueueAdmitsLegacyJobSetsWithinQuota(t *testing.T) {
	exports := twoG4dn(t)
	c := Up(t, exports...)
	c.Install()
	c.StartJobSet()
	c.StartKueue(kueueConfiguration(t, c, "batch/job", "jobset.x-k8s.io/jobset"))
	w := loadWorld(t, c, exports)
	const ns = "team-js"
	createQueues(t, c, ns, quota{"nvidia.com/gpu", "8"})
	watch := watchGPUs(t, c, ns, 8)
	ctx := context.Background()
	names := []string{"pretrain-1", "pretrain-2", "pretrain-3"}
	for _, n := range names {
		js := queuedJobSet(t, n, ns, ns, 2, corev1.PodSpec{Containers: []corev1.Container{legacyContainer(2)}})
		if _, err := c.Dynamic.Resource(jobSets).Namespace(ns).Create(ctx, js, metav1.CreateOptions{}); err != nil {
			t.Fatalf("JobSet %s: %v", n, err)
		}
		if s, err := suspended(c, ns, n); err != nil || !s {
			t.Fatalf("JobSet %s stored unsuspended (%v): Kueue's webhook did not act", n, err)
		}
	}
	// bound checks an admitted JobSet: charged 4 nvidia.com/gpu, two Pods converted and bound
	// with 2 GPUs on one NUMA node each.
	bound := func(name string) []string {
		if u := admittedUsage(t, c, ns, "JobSet", name); count(u, "nvidia.com/gpu") != 4 || len(u) != 1 {
			t.Errorf("JobSet %s charged %s, want nvidia.com/gpu=4", name, formatUsage(u))
		}
		pods := podsOfJobSet(t, c, ns, name, 2)
		for _, p := range pods {
			t.Logf("JobSet %s: Pod %s on %s", name, p, expectBoundOnOneNuma(t, c, w, ns, p, 2))
		}
		return pods
	}
	admitted := runningJobSets(t, c, ns, names, 2)
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	first := bound(admitted[0])
	bound(admitted[1])
	var waiting string
	for _, n := range names {
		if n != admitted[0] && n != admitted[1] {
			waiting = n
		}
	}
	t.Logf("JobSet %s suspended: %s", waiting, pendingMessage(t, c, ns, "JobSet", waiting))
	if pods, _ := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: jobSetNameLabel + "=" + waiting}); len(pods.Items) != 0 {
		t.Errorf("suspended JobSet %s has %d Pods", waiting, len(pods.Items))
	}

	background := metav1.DeletePropagationBackground
	if err := c.Dynamic.Resource(jobSets).Namespace(ns).Delete(ctx, admitted[0], metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	forceDeletePods(t, c, ns, first...)
	t.Logf("JobSet %s deleted, its Pods %s force-deleted", admitted[0], strings.Join(first, " "))
	runningJobSets(t, c, ns, []string{admitted[1], waiting}, 2)
	bound(waiting)
	waitUsage(t, c, ns, "nvidia.com/gpu", 8)
	watch.StopAndExpect(t, ns, 8, 16)
}

// TestKueueQuotaForMultiNodeJobSetsWithComputeDomains: the stack of a GB200-class cluster
// together — Kueue's quota, JobSet's controller, the NVIDIA DRA driver's compute-domain controller
// and draguard with mutation.computeDomains — on two NVLink cliques of four trays, and three legacy
// JobSets of four Pods with 4 GPUs each (16 per JobSet). Kueue charges each JobSet's template as
// nvidia.com/gpu=16 (it never sees the channel claims draguard adds to the Pods). Under a
// ClusterQueue quota of 16 one JobSet is admitted and lands whole in one clique; the quota raised
// to 32, a second is admitted and lands whole in the other clique (the first holds every channel
// of its own), while the third stays suspended. (Two JobSets admitted at the same moment could
// start in the same clique and hold its channels between them: required pod affinity is no gang
// placement; see docs/deployment.md.) Once the first JobSet is deleted (its Pods force-deleted),
// its ComputeDomain is collected and the third is admitted and lands whole in the freed clique.
// The GPUs allocated to the namespace's claims never exceed the quota.
func TestKueueQuotaForMultiNodeJobSetsWithComputeDomains(t *testing.T) {
	exports := cliqueExports(t)
	c := Up(t, exports...)
	fillMemoryFromProductName(t, c)
	c.StartComputeDomains()
	c.StartJobSet()
	c.Install("--set", "policy.mutation.computeDomains=auto")
	c.StartKueue(kueueConfiguration(t, c, "batch/job", "jobset.x-k8s.io/jobset"))
	cliques := nodeCliques(t, c, exports)
	const ns = "team-nvl"
	createQueues(t, c, ns, quota{"nvidia.com/gpu", "16"})
	watch := watchGPUs(t, c, ns, 32)
	ctx := context.Background()
	names := []string{"pretrain-1", "pretrain-2", "pretrain-3"}
	for _, n := range names {
		if _, err := c.Dynamic.Resource(jobSets).Namespace(ns).Create(ctx, queuedJobSet(t, n, ns, ns, 4, ncclPod(4)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("JobSet %s: %v", n, err)
		}
	}
	// landed checks an admitted JobSet: charged nvidia.com/gpu=16 only, its four Pods in one
	// clique with their GPUs and channels; returns the clique and the Pods.
	landed := func(name string) (string, []string) {
		if u := admittedUsage(t, c, ns, "JobSet", name); count(u, "nvidia.com/gpu") != 16 || len(u) != 1 {
			t.Errorf("JobSet %s charged %s, want nvidia.com/gpu=16", name, formatUsage(u))
		}
		where := expectOneClique(t, c, ns, cliques, "JobSet "+name, jobSetNameLabel+"="+name, 4, 4)
		return where, podsOfJobSet(t, c, ns, name, 4)
	}
	first := runningJobSets(t, c, ns, names, 1)
	waitUsage(t, c, ns, "nvidia.com/gpu", 16)
	firstClique, firstPods := landed(first[0])
	setQuota(t, c, ns, "nvidia.com/gpu", "32")
	admitted := runningJobSets(t, c, ns, names, 2)
	waitUsage(t, c, ns, "nvidia.com/gpu", 32)
	if admitted[0] != first[0] {
		admitted[0], admitted[1] = admitted[1], admitted[0]
	}
	if secondClique, _ := landed(admitted[1]); firstClique == secondClique {
		t.Errorf("JobSets %v both in clique %s", admitted, firstClique)
	}
	var waiting string
	for _, n := range names {
		if n != admitted[0] && n != admitted[1] {
			waiting = n
		}
	}
	t.Logf("JobSet %s suspended: %s", waiting, pendingMessage(t, c, ns, "JobSet", waiting))

	cds, err := c.Dynamic.Resource(computeDomains).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var firstCD string
	for _, cd := range cds.Items {
		for _, o := range cd.GetOwnerReferences() {
			if o.Kind == "JobSet" && o.Name == admitted[0] {
				firstCD = cd.GetName()
			}
		}
	}
	if len(cds.Items) != 2 || firstCD == "" {
		t.Fatalf("%d ComputeDomains, want one per admitted JobSet (the first's: %q)", len(cds.Items), firstCD)
	}
	background := metav1.DeletePropagationBackground
	if err := c.Dynamic.Resource(jobSets).Namespace(ns).Delete(ctx, admitted[0], metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	forceDeletePods(t, c, ns, firstPods...)
	Eventually(t, 90*time.Second, "ComputeDomain "+firstCD+" collected", func() error {
		if _, err := c.Dynamic.Resource(computeDomains).Namespace(ns).Get(ctx, firstCD, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	t.Logf("JobSet %s deleted: its Pods force-deleted, its ComputeDomain %s collected", admitted[0], firstCD)
	if third, _ := landed(waiting); third != firstClique {
		t.Errorf("JobSet %s in clique %s, want the freed clique %s", waiting, third, firstClique)
	}
	waitUsage(t, c, ns, "nvidia.com/gpu", 32)
	watch.StopAndExpect(t, ns, 32, 128)
}
