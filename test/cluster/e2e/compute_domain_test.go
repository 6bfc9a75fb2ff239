package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
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
)

// computeDomains is the ComputeDomain resource of the NVIDIA DRA driver.
var computeDomains = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// StartComputeDomains runs `cluster.sh compute-domains`: the NVIDIA DRA driver's ComputeDomain
// CRDs, DeviceClasses and controller RBAC from its chart, and its compute-domain controller.
func (c *Cluster) StartComputeDomains() {
	c.t.Helper()
	if err := script(c.t, "compute-domains", c.Dir); err != nil {
		c.t.Fatalf("cluster.sh compute-domains: %v", err)
	}
}

// cliqueExports writes copies of the DGX-2H export into a temporary directory, one per tray, with
// the NVLink clique NVML's fabric info would give its GPUs (info NVIDIAGPUClique, as draguard's
// exporter records it): trays a1 to a4 in one clique, b1 to b4 in another. The cliques are test
// values.
func cliqueExports(t *testing.T) []string {
	b, err := os.ReadFile(exportPath(t, dgx2h))
	if err != nil {
		t.Fatal(err)
	}
	const backend = `<info name="Backend" value="NVML"/>`
	if !strings.Contains(string(b), backend) {
		t.Fatalf("%s has no NVML OS devices", dgx2h)
	}
	dir := t.TempDir()
	var out []string
	for _, tray := range []struct{ name, clique string }{
		{"tray-a1", "1"}, {"tray-a2", "1"}, {"tray-a3", "1"}, {"tray-a4", "1"},
		{"tray-b1", "2"}, {"tray-b2", "2"}, {"tray-b3", "2"}, {"tray-b4", "2"},
	} {
		info := backend + `<info name="NVIDIAGPUClique" value="0c6e5a52-4f7b-4e0a-9d43-3f1b7f2a9c10.` + tray.clique + `"/>`
		p := filepath.Join(dir, tray.name+".xml")
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), backend, info)), 0o644); err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// nodeCliques is each Node's nvidia.com/gpu.clique label; every export's Node must have one (the
// exporter publishes it).
func nodeCliques(t *testing.T, c *Cluster, exports []string) map[string]string {
	nodes, err := c.Kube.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clique := map[string]string{}
	for _, n := range nodes.Items {
		clique[n.Name] = n.Labels["nvidia.com/gpu.clique"]
	}
	for _, e := range exports {
		if clique[NodeName(e)] == "" {
			t.Fatalf("node %s has no nvidia.com/gpu.clique label (published by the exporter): %v", NodeName(e), clique)
		}
	}
	return clique
}

// ncclPod is the Pod of a multi-node NCCL job asking for `gpus` GPUs the device-plugin way.
func ncclPod(gpus int64) corev1.PodSpec {
	zero := int64(0)
	return corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "nccl", Image: "registry.example/nccl-tests:1",
			Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(gpus, resource.DecimalSI)}}}}}
}

// expectOneClique waits for the `n` Pods that `selector` selects in `ns` to be bound and returns
// the clique of their nodes, checking that there is one and their claims: `gpus` GPUs and
// channel-0 of its node each, and draguard's nvlink-unit label.
func expectOneClique(t *testing.T, c *Cluster, ns string, clique map[string]string, what, selector string, n, gpus int) string {
	ctx := context.Background()
	var pods []corev1.Pod
	Eventually(t, 120*time.Second, "Pods of "+what+" bound", func() error {
		list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return err
		}
		if len(list.Items) != n {
			return fmt.Errorf("%d Pods", len(list.Items))
		}
		for _, p := range list.Items {
			if p.Spec.NodeName == "" {
				return fmt.Errorf("pod %s not bound: %v", p.Name, p.Status.Conditions)
			}
		}
		pods = list.Items
		return nil
	})
	cliques := map[string]bool{}
	var where []string
	for _, p := range pods {
		cliques[clique[p.Spec.NodeName]] = true
		where = append(where, p.Name+"@"+p.Spec.NodeName)
		if p.Labels["draguard.io/nvlink-unit"] == "" {
			t.Errorf("%s has no draguard.io/nvlink-unit label", p.Name)
		}
		var channel, got int
		for _, s := range p.Status.ResourceClaimStatuses {
			if s.ResourceClaimName == nil {
				continue
			}
			cl, err := c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, *s.ResourceClaimName, metav1.GetOptions{})
			if err != nil || cl.Status.Allocation == nil {
				t.Errorf("%s: claim %s not allocated (%v)", p.Name, *s.ResourceClaimName, err)
				continue
			}
			for _, r := range cl.Status.Allocation.Devices.Results {
				switch r.Driver {
				case "compute-domain.nvidia.com":
					channel++
					if r.Device != "channel-0" || r.Pool != p.Spec.NodeName {
						t.Errorf("%s: channel %s/%s, want channel-0 of its node %s", p.Name, r.Pool, r.Device, p.Spec.NodeName)
					}
				case "gpu.nvidia.com":
					got++
				}
			}
		}
		if channel != 1 || got != gpus {
			t.Errorf("%s: %d channels and %d GPUs allocated, want 1 and %d", p.Name, channel, got, gpus)
		}
	}
	sort.Strings(where)
	t.Logf("%s: %s", what, strings.Join(where, " "))
	if len(cliques) != 1 {
		t.Errorf("%s spans cliques %v", what, cliques)
	}
	for k := range cliques {
		return k
	}
	return ""
}

// TestComputeDomainsForMultiNodeJobs: with mutation.computeDomains on a cluster of two NVLink
// cliques of four trays each, with the NVIDIA DRA driver's ComputeDomain CRDs, DeviceClasses and
// compute-domain controller from its chart and module (v0.4.1; `cluster.sh compute-domains`) and
// JobSet's controller: the Pods of a legacy JobSet (4 Jobs of one Pod with 4 GPUs) are converted
// with the IMEX channel of one ComputeDomain that draguard creates, owned by the JobSet, whose
// channel template the driver's controller makes; kube-scheduler binds the four to trays of one
// clique with their GPUs and channels allocated. A legacy Indexed Job of four such Pods, which
// the first clique's channels (one per tray) can no longer hold, lands whole in the other clique.
// Deleting the JobSet garbage-collects its ComputeDomain, which the controller lets go once it
// has removed what it made. A Pod with a channel claim of its own keeps it and gains the clique
// affinity.
func TestComputeDomainsForMultiNodeJobs(t *testing.T) {
	exports := cliqueExports(t)
	c := Up(t, exports...)
	fillMemoryFromProductName(t, c)
	ctx := context.Background()
	// The ComputeDomain DeviceClasses `draguard topology slices` published (up) are the chart's.
	classes := map[string]resourcev1.DeviceClassSpec{}
	for _, name := range []string{"compute-domain-default-channel.nvidia.com", "compute-domain-daemon.nvidia.com"} {
		dc, err := c.Kube.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("DeviceClass %s from draguard topology slices: %v", name, err)
		}
		classes[name] = dc.Spec
	}
	c.StartComputeDomains()
	for name, ours := range classes {
		dc, err := c.Kube.ResourceV1().DeviceClasses().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(dc.Spec, ours) {
			t.Errorf("DeviceClass %s: draguard topology slices publishes %+v, the driver's chart %+v", name, ours, dc.Spec)
		}
	}
	c.StartJobSet()
	c.Install("--set", "policy.mutation.computeDomains=auto")

	cliques := nodeCliques(t, c, exports)
	ns := "nvl"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	nccl := ncclPod(4)

	js := queuedJobSet(t, "pretrain", ns, "", 4, nccl)
	created, err := c.Dynamic.Resource(jobSets).Namespace(ns).Create(ctx, js, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("JobSet: %v", err)
	}
	first := expectOneClique(t, c, ns, cliques, "JobSet pretrain", jobSetNameLabel+"=pretrain", 4, 4)
	cds, err := c.Dynamic.Resource(computeDomains).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cds.Items) != 1 {
		t.Fatalf("%d ComputeDomains after one JobSet, want 1", len(cds.Items))
	}
	cd := cds.Items[0]
	owners := cd.GetOwnerReferences()
	if len(owners) != 1 || owners[0].Kind != "JobSet" || owners[0].UID != created.GetUID() {
		t.Errorf("ComputeDomain %s owned by %+v, want JobSet pretrain (%s)", cd.GetName(), owners, created.GetUID())
	}
	// What the driver's controller made of it: its finalizer, Ready, and the channel template in
	// the job's namespace, labelled with the domain's UID.
	Eventually(t, 30*time.Second, "ComputeDomain "+cd.GetName()+" Ready", func() error {
		got, err := c.Dynamic.Resource(computeDomains).Namespace(ns).Get(ctx, cd.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		status, _, _ := unstructured.NestedString(got.Object, "status", "status")
		if status != "Ready" || len(got.GetFinalizers()) == 0 {
			return fmt.Errorf("status %q, finalizers %v", status, got.GetFinalizers())
		}
		return nil
	})
	channelTemplate, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "resourceClaimTemplate", "name")
	rct, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, channelTemplate, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("channel template %s: %v", channelTemplate, err)
	}
	if rct.Labels["resource.nvidia.com/computeDomain"] != string(cd.GetUID()) {
		t.Errorf("channel template %s labelled %v, want the controller's label with %s", channelTemplate, rct.Labels, cd.GetUID())
	}
	t.Logf("ComputeDomain %s Ready; the controller's channel template %s (finalizers %v)", cd.GetName(), channelTemplate, rct.Finalizers)

	four := int32(4)
	indexed := batchv1.IndexedCompletion
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "finetune", Namespace: ns},
		Spec: batchv1.JobSpec{Parallelism: &four, Completions: &four, CompletionMode: &indexed,
			Template: corev1.PodTemplateSpec{Spec: nccl}}}
	if _, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatalf("Job: %v", err)
	}
	second := expectOneClique(t, c, ns, cliques, "Indexed Job finetune", "batch.kubernetes.io/job-name=finetune", 4, 4)
	if first == second {
		t.Errorf("both jobs in clique %s; the first holds its four trays' channels", first)
	}
	t.Logf("JobSet pretrain in clique %s, Job finetune in clique %s", first, second)

	// Deleting the JobSet deletes its ComputeDomain (garbage collection through the owner); the
	// driver's controller removes its template and finalizer.
	background := metav1.DeletePropagationBackground
	if err := c.Dynamic.Resource(jobSets).Namespace(ns).Delete(ctx, "pretrain", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 90*time.Second, "ComputeDomain of pretrain and its channel template collected", func() error {
		if _, err := c.Dynamic.Resource(computeDomains).Namespace(ns).Get(ctx, cd.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ComputeDomain still there (%v)", err)
		}
		if _, err := c.Kube.ResourceV1().ResourceClaimTemplates(ns).Get(ctx, channelTemplate, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("channel template still there (%v)", err)
		}
		return nil
	})

	// A Pod of a job that holds a channel of its own (NVIDIA's demo shape) keeps it: the
	// affinity only.
	demo := cpuPod("demo-worker-0", ns, 2, 4, false)
	_ = unstructured.SetNestedStringMap(demo.Object, map[string]string{
		"training.kubeflow.org/job-name": "demo", "training.kubeflow.org/operator-name": "mpi-operator",
		"training.kubeflow.org/job-role": "worker"}, "metadata", "labels")
	_ = unstructured.SetNestedSlice(demo.Object, []any{map[string]any{"name": "compute-domain-channel",
		"resourceClaimTemplateName": "demo-channel"}}, "spec", "resourceClaims")
	out := c.Create(ctx, demo, true)
	if !out.Admitted() {
		t.Fatalf("demo Pod refused: %v", out.Err)
	}
	claims, _, _ := unstructured.NestedSlice(out.Object.Object, "spec", "resourceClaims")
	terms, _, _ := unstructured.NestedSlice(out.Object.Object, "spec", "affinity", "podAffinity", "requiredDuringSchedulingIgnoredDuringExecution")
	if len(claims) != 2 || len(terms) != 1 || strings.Contains(fmt.Sprint(claims), "draguard-channel") {
		t.Errorf("demo Pod: claims %v, clique terms %v; want its channel and draguard's GPUs, one term", claims, terms)
	}
	for _, w := range out.Warnings {
		t.Logf("demo Pod warning: %s", w)
	}
}
