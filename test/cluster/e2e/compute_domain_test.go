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

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// computeDomains is the ComputeDomain resource of the NVIDIA DRA driver.
var computeDomains = schema.GroupVersionResource{Group: "resource.nvidia.com", Version: "v1beta1", Resource: "computedomains"}

// standInComputeDomainCRD serves resource.nvidia.com/v1beta1 ComputeDomain with an open schema: a
// stand-in written here for the driver's CRD, whose chart this harness does not install (see
// TestComputeDomainsForMultiNodeJobs).
const standInComputeDomainCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: computedomains.resource.nvidia.com}
spec:
  group: resource.nvidia.com
  scope: Namespaced
  names: {plural: computedomains, singular: computedomain, kind: ComputeDomain, listKind: ComputeDomainList}
  versions:
  - name: v1beta1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// cliqueExports writes copies of the DGX-2H export into a temporary directory, one per tray, with
// the NVLink clique NVML's fabric info would give its GPUs (info NVIDIAGPUClique, as draguard's
// exporter records it): trays a1, a2 in one clique, b1, b2 in another. The cliques are test values.
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
		{"tray-a1", "1"}, {"tray-a2", "1"}, {"tray-b1", "2"}, {"tray-b2", "2"},
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

// simulateComputeDomainController makes, for every ComputeDomain, the channel
// ResourceClaimTemplate the driver's compute-domain controller makes
// (templates/compute-domain-workload-claim-template.tmpl.yaml of sigs.k8s.io/dra-driver-nvidia-gpu
// v0.4.1: request "channel" of class compute-domain-default-channel.nvidia.com with the opaque
// ComputeDomainChannelConfig, the controller's two labels), until ctx ends. Its finalizer is left
// out: no controller would remove it.
func simulateComputeDomainController(ctx context.Context, t *testing.T, c *Cluster) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		made := map[string]bool{}
		for ctx.Err() == nil {
			list, err := c.Dynamic.Resource(computeDomains).List(ctx, metav1.ListOptions{})
			if err == nil {
				for _, cd := range list.Items {
					name, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "resourceClaimTemplate", "name")
					mode, _, _ := unstructured.NestedString(cd.Object, "spec", "channel", "allocationMode")
					key := cd.GetNamespace() + "/" + name
					if name == "" || made[key] {
						continue
					}
					rct := &resourcev1.ResourceClaimTemplate{
						ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: cd.GetNamespace(), Labels: map[string]string{
							"resource.nvidia.com/computeDomain":       string(cd.GetUID()),
							"resource.nvidia.com/computeDomainTarget": "Workload"}},
						Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
							Requests: []resourcev1.DeviceRequest{{Name: "channel", Exactly: &resourcev1.ExactDeviceRequest{
								DeviceClassName: "compute-domain-default-channel.nvidia.com"}}},
							Config: []resourcev1.DeviceClaimConfiguration{{Requests: []string{"channel"},
								DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{
									Driver: "compute-domain.nvidia.com",
									Parameters: runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"resource.nvidia.com/v1beta1",`+
										`"kind":"ComputeDomainChannelConfig","domainID":%q,"allocationMode":%q}`, cd.GetUID(), mode))}}}}},
						}}},
					}
					_, err := c.Kube.ResourceV1().ResourceClaimTemplates(cd.GetNamespace()).Create(ctx, rct, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						made[key] = true
					} else if ctx.Err() == nil {
						t.Logf("simulated controller: %s: %v", key, err)
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return done
}

// TestComputeDomainsForMultiNodeJobs: with mutation.computeDomains on a cluster of two NVLink
// cliques of two trays each, the Pods of a legacy Indexed Job (2 Pods of 2 GPUs, made by
// kube-controller-manager's job controller) are converted with the IMEX channel of one
// ComputeDomain that draguard creates, owned by the Job, and kube-scheduler binds them to trays
// of one clique with their GPUs and channels allocated; a second such Job, which the first
// clique's channels (one per tray) cannot hold, lands whole in the other clique; deleting the
// first Job garbage-collects its ComputeDomain; a Pod with a channel claim of its own keeps it
// and gains the clique affinity.
//
// The NVIDIA driver's chart and compute-domain controller are not in this harness: the
// ComputeDomain CRD is a stand-in with an open schema, and the channel template its controller
// would make is made by simulateComputeDomainController.
func TestComputeDomainsForMultiNodeJobs(t *testing.T) {
	exports := cliqueExports(t)
	c := Up(t, exports...)
	fillMemoryFromProductName(t, c)
	if _, stderr, err := c.Kubectl(standInComputeDomainCRD, "apply", "-f", "-"); err != nil {
		t.Fatalf("ComputeDomain CRD: %v: %s", err, stderr)
	}
	Eventually(t, 30*time.Second, "ComputeDomains served", func() error {
		_, err := c.Dynamic.Resource(computeDomains).Namespace("default").List(context.Background(), metav1.ListOptions{})
		return err
	})
	c.Install("--set", "policy.mutation.computeDomains=auto")
	ctx, cancel := context.WithCancel(context.Background())
	controller := simulateComputeDomainController(ctx, t, c)
	defer func() { cancel(); <-controller }()

	nodes, err := c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
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
	ns := "nvl"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)

	// runJob creates a legacy Indexed Job of two Pods with two GPUs each and returns the clique of
	// its Pods' nodes, checking their claims.
	runJob := func(name string) (string, *batchv1.Job) {
		two, indexed := int32(2), batchv1.IndexedCompletion
		zero := int64(0)
		job := &batchv1.Job{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: batchv1.JobSpec{Parallelism: &two, Completions: &two, CompletionMode: &indexed,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
					TerminationGracePeriodSeconds: &zero,
					Containers: []corev1.Container{{Name: "nccl", Image: "registry.example/nccl-tests:1",
						Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}}}}}}},
		}
		created, err := c.Kube.BatchV1().Jobs(ns).Create(ctx, job, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("Job %s: %v", name, err)
		}
		var pods []corev1.Pod
		Eventually(t, 120*time.Second, "Pods of Job "+name+" bound", func() error {
			list, err := c.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "batch.kubernetes.io/job-name=" + name})
			if err != nil {
				return err
			}
			if len(list.Items) != 2 {
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
			var channel, gpus int
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
						gpus++
					}
				}
			}
			if channel != 1 || gpus != 2 {
				t.Errorf("%s: %d channels and %d GPUs allocated, want 1 and 2", p.Name, channel, gpus)
			}
		}
		sort.Strings(where)
		t.Logf("Job %s: %s", name, strings.Join(where, " "))
		if len(cliques) != 1 {
			t.Errorf("Job %s spans cliques %v", name, cliques)
		}
		for k := range cliques {
			return k, created
		}
		return "", created
	}

	first, job1 := runJob("train-1")
	cds, err := c.Dynamic.Resource(computeDomains).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cds.Items) != 1 {
		t.Fatalf("%d ComputeDomains after one Job, want 1", len(cds.Items))
	}
	cd := cds.Items[0]
	owners := cd.GetOwnerReferences()
	if len(owners) != 1 || owners[0].Kind != "Job" || owners[0].UID != job1.UID {
		t.Errorf("ComputeDomain %s owned by %+v, want Job train-1 (%s)", cd.GetName(), owners, job1.UID)
	}
	second, _ := runJob("train-2")
	if first == second {
		t.Errorf("both Jobs in clique %s; the first holds its two trays' channels", first)
	}
	t.Logf("train-1 in clique %s, train-2 in clique %s", first, second)

	// Deleting the first Job deletes its ComputeDomain (garbage collection through the owner).
	background := metav1.DeletePropagationBackground
	if err := c.Kube.BatchV1().Jobs(ns).Delete(ctx, "train-1", metav1.DeleteOptions{PropagationPolicy: &background}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 90*time.Second, "ComputeDomain of train-1 collected", func() error {
		_, err := c.Dynamic.Resource(computeDomains).Namespace(ns).Get(ctx, cd.GetName(), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
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
