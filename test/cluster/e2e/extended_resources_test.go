package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
)

// extendedResourceClaimAnnotation marks the claim kube-scheduler makes for a Pod's extended
// resources (KEP-5004, resourceapi.ExtendedResourceClaimAnnotation).
const extendedResourceClaimAnnotation = "resource.kubernetes.io/extended-resource-claim"

// schedulerClaim waits until kube-scheduler has bound the legacy Pod ns/name on the claim it made
// for the Pod's extended resources, and returns that claim once allocated.
func schedulerClaim(t *testing.T, c *Cluster, ns, name string) (*corev1.Pod, *resourcev1.ResourceClaim) {
	t.Helper()
	ctx := context.Background()
	var pod *corev1.Pod
	var claim *resourcev1.ResourceClaim
	Eventually(t, 120*time.Second, "legacy Pod "+ns+"/"+name+" bound on kube-scheduler's claim", func() error {
		p, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pod = p
		if p.Spec.NodeName == "" {
			why := "pending"
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodScheduled {
					why = cond.Reason + ": " + cond.Message
				}
			}
			return fmt.Errorf("not bound (%s)", why)
		}
		if p.Status.ExtendedResourceClaimStatus == nil {
			return fmt.Errorf("no status.extendedResourceClaimStatus")
		}
		cl, err := c.Kube.ResourceV1().ResourceClaims(ns).Get(ctx, p.Status.ExtendedResourceClaimStatus.ResourceClaimName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cl.Status.Allocation == nil {
			return fmt.Errorf("claim %s not allocated", cl.Name)
		}
		claim = cl
		return nil
	})
	if claim.Annotations[extendedResourceClaimAnnotation] != "true" {
		t.Errorf("claim %s lacks the annotation %s", claim.Name, extendedResourceClaimAnnotation)
	}
	if len(pod.Spec.ResourceClaims) != 0 {
		t.Errorf("the legacy Pod was converted (resourceClaims %v): the case must leave it legacy", pod.Spec.ResourceClaims)
	}
	return pod, claim
}

// TestLegacyPodsThatDraguardAdmitsRun: every way of admitting a legacy Pod (audit mode,
// extendedResourceMapping warn and allow, an exceptions entry, an allowed draguard.io/exempt
// annotation, an exempt user) ends with the Pod bound on the claim kube-scheduler makes for it
// (KEP-5004; the harness's gpu.nvidia.com DeviceClass names nvidia.com/gpu), which draguard's
// claim webhook admits. A claim with the same annotation from anyone else is still judged (DG003),
// and a Pod asking for the class's implicit name is converted like nvidia.com/gpu.
func TestLegacyPodsThatDraguardAdmitsRun(t *testing.T) {
	c := Up(t, g4dn)
	ctx := context.Background()
	const ns = "team"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	// An exempt user of its own: the admin impersonating "ci-bot" (with the admin's group).
	botCfg := rest.CopyConfig(c.Config)
	botCfg.Impersonate = rest.ImpersonationConfig{UserName: "ci-bot", Groups: []string{"system:masters", "system:authenticated"}}
	bot := &Cluster{t: t, Dir: c.Dir, Config: botCfg, Mapper: c.Mapper}

	type path struct {
		name   string
		values []string
		pod    func() *unstructured.Unstructured
		as     *Cluster
	}
	legacy := func(name string, labels map[string]string, annotations map[string]any) func() *unstructured.Unstructured {
		return func() *unstructured.Unstructured {
			p := legacyPod(name, ns, 1, annotations)
			if labels != nil {
				p.SetLabels(labels)
			}
			return p
		}
	}
	paths := []path{
		{"audit-mode", []string{"--set", "policy.mode=audit"}, legacy("audit", nil, nil), c},
		{"mapping-warn", []string{"--set", "policy.extendedResourceMapping=warn", "--set", "mutation.enabled=false"}, legacy("warn", nil, nil), c},
		// matchConditions off: the server itself must recognise the scheduler's claim.
		{"mapping-allow-no-matchconditions", []string{"--set", "policy.extendedResourceMapping=allow", "--set", "mutation.enabled=false",
			"--set", "webhook.matchConditions=false"}, legacy("allow", nil, nil), c},
		{"exception", []string{"--set-json", `policy.exceptions=[{"name":"legacy-bench","rules":["DG001"],"namespaces":["team"],"objectSelector":{"matchLabels":{"bench":"legacy"}},"reason":"vendor benchmark"}]`},
			legacy("exception", map[string]string{"bench": "legacy"}, nil), c},
		{"exempt-annotation", []string{"--set-json", `policy.annotationExceptions=[{"namespaces":["team"],"rules":["DG001"]}]`},
			legacy("annotated", nil, map[string]any{"draguard.io/exempt": "DG001", "draguard.io/exempt-reason": "driver smoke test"}), c},
		{"exempt-user", []string{"--set-json", `policy.exemptions.users=["ci-bot"]`}, legacy("bot", nil, nil), bot},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			c.t = t
			c.Install(p.values...)
			pod := p.pod()
			var out Outcome
			// The policy reaches the server when the harness's install returns; the chart's
			// webhook configuration is in force once the apiserver has seen it.
			Eventually(t, 30*time.Second, "legacy Pod admitted", func() error {
				out = p.as.Create(ctx, pod.DeepCopy(), false)
				if !out.Admitted() {
					return out.Err
				}
				return nil
			})
			bound, claim := schedulerClaim(t, c, ns, pod.GetName())
			owner := metav1.GetControllerOf(claim)
			if owner == nil || owner.Kind != "Pod" || owner.UID != bound.UID {
				t.Errorf("claim %s is not controlled by Pod %s: %v", claim.Name, bound.Name, claim.OwnerReferences)
			}
			if len(claim.Spec.Devices.Requests) != 1 || claim.Spec.Devices.Requests[0].Exactly == nil ||
				claim.Spec.Devices.Requests[0].Exactly.DeviceClassName != "gpu.nvidia.com" {
				t.Errorf("claim %s is not kube-scheduler's one gpu.nvidia.com request: %+v", claim.Name, claim.Spec.Devices.Requests)
			}
			if n := len(claim.Status.Allocation.Devices.Results); n != 1 {
				t.Errorf("claim %s allocated %d devices, want 1", claim.Name, n)
			}
			t.Logf("%s: Pod %s bound to %s on claim %s (device %s)", p.name, bound.Name, bound.Spec.NodeName, claim.Name,
				claim.Status.Allocation.Devices.Results[0].Device)
			if p.name == "mapping-allow-no-matchconditions" {
				// The claim reached the server, which admitted it as the scheduler's and counted it.
				Eventually(t, 10*time.Second, "scheduler claim counted", func() error {
					v, err := metricValue(t, c, `draguard_extended_resource_claims_total{creator="scheduler"}`)
					if err != nil {
						return err
					}
					if v < 1 {
						return fmt.Errorf("draguard_extended_resource_claims_total{creator=\"scheduler\"} = %v", v)
					}
					return nil
				})
			}
			release(t, c, ns, pod.GetName())
		})
	}
	c.t = t

	t.Run("annotation-from-anyone-else", func(t *testing.T) {
		c.t = t
		c.Install()
		claim := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
			"metadata": map[string]any{"name": "forged", "namespace": ns,
				"annotations": map[string]any{extendedResourceClaimAnnotation: "true"}},
			"spec": map[string]any{"devices": map[string]any{"requests": []any{map[string]any{
				"name": "container-0-request-0", "exactly": map[string]any{"deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": int64(1)}}}}},
		}}
		var out Outcome
		Eventually(t, 30*time.Second, "forged scheduler claim denied", func() error {
			out = c.Create(ctx, claim.DeepCopy(), false)
			if out.Admitted() {
				_ = c.Kube.ResourceV1().ResourceClaims(ns).Delete(ctx, "forged", metav1.DeleteOptions{})
				return fmt.Errorf("admitted")
			}
			return nil
		})
		if !strings.Contains(out.Err.Error(), "DG003") {
			t.Errorf("the forged claim was refused, but not by DG003: %v", out.Err)
		}
		if !strings.Contains(strings.Join(out.Warnings, "\n"), "ignored") {
			t.Errorf("no warning that the annotation was ignored: %v", out.Warnings)
		}
	})

	// The server's claim cache (chart RBAC: list and watch of both kinds) shows a Pod its
	// hand-written claims: DG016 for exclusive CPUs outside a hand-written GPU template, DG015 for a
	// template that does not exist. Until the cache has listed them the findings cannot appear.
	t.Run("hand-written-claims-seen", func(t *testing.T) {
		c.t = t
		tmpl := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
			"metadata": map[string]any{"name": "single-gpu", "namespace": ns},
			"spec": map[string]any{"spec": map[string]any{"devices": map[string]any{"requests": []any{map[string]any{
				"name": "gpu", "exactly": map[string]any{"deviceClassName": "gpu.nvidia.com", "selectors": []any{map[string]any{
					"cel": map[string]any{"expression": "'memory' in device.capacity['gpu.nvidia.com'] && device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('8Gi')) >= 0"}}}}}}}}},
		}}
		if out := c.Create(ctx, tmpl, false); !out.Admitted() {
			t.Fatalf("hand-written template refused: %v", out.Err)
		}
		pod := func(name, template string) *unstructured.Unstructured {
			cpus := map[string]any{"cpu": "4", "memory": "8Gi"}
			return &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": name, "namespace": ns},
				"spec": map[string]any{
					"resourceClaims": []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": template}},
					"containers": []any{map[string]any{"name": "c", "image": "registry.example/cuda:12",
						"resources": map[string]any{"requests": cpus, "limits": cpus, "claims": []any{map[string]any{"name": "gpu"}}}}}},
			}}
		}
		expect := func(name, template, rule, text string) {
			Eventually(t, 30*time.Second, rule+" for "+name, func() error {
				out := c.Create(ctx, pod(name, template), true)
				if !out.Admitted() {
					return fmt.Errorf("refused: %v", out.Err)
				}
				w := strings.Join(out.Warnings, "\n")
				if !strings.Contains(w, rule) || !strings.Contains(w, text) {
					return fmt.Errorf("warnings %q lack %s %q", w, rule, text)
				}
				t.Logf("%s: %s", name, w)
				return nil
			})
		}
		expect("cpus-outside", "single-gpu", "DG016", `outside claim "gpu" of its GPUs (template "single-gpu")`)
		expect("missing", "no-such-template", "DG015", "does not exist")
		for _, kind := range []string{"ResourceClaimTemplate", "ResourceClaim"} {
			v, err := metricValue(t, c, `draguard_claim_cache_synced{kind="`+kind+`"}`)
			if err != nil || v != 1 {
				t.Errorf("draguard_claim_cache_synced{kind=%q} = %v (%v), want 1", kind, v, err)
			}
		}
	})

	t.Run("implicit-name-converted", func(t *testing.T) {
		c.t = t
		pod := legacyPod("implicit", ns, 0, nil)
		limits := map[string]any{"deviceclass.resource.kubernetes.io/gpu.nvidia.com": "2"}
		containers, _, _ := unstructured.NestedSlice(pod.Object, "spec", "containers")
		containers[0].(map[string]any)["resources"] = map[string]any{"limits": limits}
		_ = unstructured.SetNestedSlice(pod.Object, containers, "spec", "containers")
		out := c.Create(ctx, pod, false)
		if !out.Admitted() {
			t.Fatalf("Pod with the implicit name refused: %v", out.Err)
		}
		got, bound := waitScheduled(t, c, ns, "implicit")
		if !bound {
			t.Fatalf("converted Pod not bound: %v", got.Status.Conditions)
		}
		if len(got.Spec.ResourceClaims) == 0 || got.Status.ExtendedResourceClaimStatus != nil {
			t.Fatalf("the Pod was not converted (resourceClaims %v, extendedResourceClaimStatus %v)",
				got.Spec.ResourceClaims, got.Status.ExtendedResourceClaimStatus)
		}
		for _, ctr := range got.Spec.Containers {
			for name := range ctr.Resources.Limits {
				if strings.HasPrefix(string(name), "deviceclass.resource.kubernetes.io/") {
					t.Errorf("container %s still asks for %s", ctr.Name, name)
				}
			}
		}
		claim := allocation(t, c, got)
		if n := len(claim.Status.Allocation.Devices.Results); n != 2 {
			t.Errorf("converted claim %s allocated %d devices, want 2", claim.Name, n)
		}
		t.Logf("implicit name: Pod bound to %s on converted claim %s", got.Spec.NodeName, claim.Name)
	})
}
