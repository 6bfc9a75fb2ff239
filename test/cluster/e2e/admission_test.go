package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// auditResult is one object of `draguard audit -o json`.
type auditResult struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Source     string `json:"source"`
	Verdict    string `json:"verdict"`
	Findings   []struct {
		Action string `json:"action"`
		Rule   string `json:"rule"`
	} `json:"findings"`
}

// manifestDirs are the real manifests of test/data/manifests (provenance there).
var manifestDirs = []string{"legacy", "dra"}

// objectKey names a document: file, kind, namespace, name.
func objectKey(file, kind, ns, name string) string {
	if ns == "" {
		ns = "default"
	}
	return filepath.Base(file) + "|" + kind + "|" + ns + "|" + name
}

// verdicts asks draguard offline (`draguard audit`, the installed policy) what the webhook
// should answer for every document of the manifest directories.
func verdicts(t *testing.T, c *Cluster) map[string]auditResult {
	args := []string{"audit", "-o", "json", "--config", c.PolicyFile(), "--release-namespace", "draguard"}
	for _, d := range manifestDirs {
		args = append(args, "-f", filepath.Join(sourceDir(t), "test", "data", "manifests", d))
	}
	out, _ := Draguard(t, args...) // exit 1 when something would be denied
	var report struct {
		Results []auditResult `json:"results"`
	}
	JSON(t, out, &report)
	if len(report.Results) == 0 {
		t.Fatal("draguard audit judged no object")
	}
	m := map[string]auditResult{}
	for _, r := range report.Results {
		file, _, _ := strings.Cut(r.Source, ":")
		m[objectKey(file, r.Kind, r.Namespace, r.Name)] = r
	}
	return m
}

// builtinGroup: groups the apiserver serves itself or protects (no stand-in CRD possible).
func builtinGroup(g string) bool {
	return g == "" || !strings.Contains(g, ".") || g == "k8s.io" || strings.HasSuffix(g, ".k8s.io") ||
		strings.HasSuffix(g, ".kubernetes.io")
}

var clusterScopedKinds = map[string]bool{"ClusterQueue": true, "ResourceFlavor": true, "ClusterTrainingRuntime": true}

// standInCRDs creates, for every custom resource kind of the documents, a CRD that accepts any
// content, so that the apiserver serves it and calls the webhooks registered for it.
func standInCRDs(t *testing.T, c *Cluster, docs []*unstructured.Unstructured) {
	ctx := context.Background()
	versions := map[schema.GroupKind][]string{}
	for _, d := range docs {
		gvk := d.GroupVersionKind()
		if builtinGroup(gvk.Group) {
			continue
		}
		gk := gvk.GroupKind()
		if !contains(versions[gk], gvk.Version) {
			versions[gk] = append(versions[gk], gvk.Version)
		}
	}
	crdRes := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	var names []string
	for gk, vs := range versions {
		sort.Strings(vs)
		plural := strings.ToLower(gk.Kind) + "s"
		scope := "Namespaced"
		if clusterScopedKinds[gk.Kind] {
			scope = "Cluster"
		}
		var vlist []any
		for i, v := range vs {
			vlist = append(vlist, map[string]any{"name": v, "served": true, "storage": i == 0,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}}})
		}
		crd := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": plural + "." + gk.Group},
			"spec": map[string]any{"group": gk.Group, "scope": scope, "versions": vlist,
				"names": map[string]any{"plural": plural, "singular": strings.ToLower(gk.Kind), "kind": gk.Kind, "listKind": gk.Kind + "List"}},
		}}
		if _, err := c.Dynamic.Resource(crdRes).Create(ctx, crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("stand-in CRD %s: %v", crd.GetName(), err)
		}
		names = append(names, crd.GetName())
	}
	for _, n := range names {
		Eventually(t, 60*time.Second, "CRD "+n+" established", func() error {
			got, err := c.Dynamic.Resource(crdRes).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, co := range conds {
				if m, ok := co.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("not established")
		})
	}
	c.Mapper.Reset()
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// isInvalidForKubernetes: refused by the apiserver's validation, not by an admission check.
func isInvalidForKubernetes(err error) bool {
	if err == nil || !apierrors.IsInvalid(err) {
		return false
	}
	m := err.Error()
	return !strings.Contains(m, "admission webhook") && !strings.Contains(m, "ValidatingAdmissionPolicy")
}

// draguardWarnings are the warnings that carry one of draguard's rule ids.
func draguardWarnings(ws []string) []string {
	var out []string
	for _, w := range ws {
		if strings.Contains(w, "DG0") {
			out = append(out, w)
		}
	}
	return out
}

// checkManifests creates (server-side dry run) every document of the real manifests through the
// apiserver and compares the answer with draguard's offline verdict for the installed policy.
// Returns the number of documents judged by the webhook path.
func checkManifests(t *testing.T, c *Cluster, expect map[string]auditResult) (denied, warned, allowed int) {
	ctx := context.Background()
	missingRefs := 0 // DG015 warnings of the server's claim cache
	type doc struct {
		file string
		obj  *unstructured.Unstructured
	}
	var docs []doc
	var all []*unstructured.Unstructured
	for _, d := range manifestDirs {
		files, _ := filepath.Glob(filepath.Join(sourceDir(t), "test", "data", "manifests", d, "*.yaml"))
		for _, f := range files {
			for _, o := range Documents(t, f) {
				if o != nil {
					docs = append(docs, doc{f, o})
					all = append(all, o)
				}
			}
		}
	}
	standInCRDs(t, c, all)
	// Namespaces first, for real: the dry-run creates below need them.
	nss := map[string]bool{}
	for _, d := range docs {
		if ns := d.obj.GetNamespace(); ns != "" {
			nss[ns] = true
		}
		if d.obj.GetKind() == "Namespace" {
			nss[d.obj.GetName()] = true
		}
	}
	for ns := range nss {
		// Labelled as a cluster admin labels namespaces allowed DRA admin access, so that the
		// manifests asking for it reach draguard instead of stopping at the apiserver's check.
		o := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns,
			"labels": map[string]any{"resource.kubernetes.io/admin-access": "true"}}}}
		if out := c.Create(ctx, o, false); !out.Admitted() {
			t.Fatalf("namespace %s: %v", ns, out.Err)
		}
	}
	for ns := range nss {
		c.WaitServiceAccount(ns)
	}
	notServed, invalid := 0, 0
	for _, d := range docs {
		if d.obj.GetKind() == "Namespace" {
			continue
		}
		name := d.obj.GetName()
		if name == "" {
			name = d.obj.GetGenerateName() // as draguard audit names it
		}
		key := objectKey(d.file, d.obj.GetKind(), d.obj.GetNamespace(), name)
		want, judged := expect[key]
		out := c.Create(ctx, d.obj.DeepCopy(), true)
		if out.Err != nil && strings.HasPrefix(out.Err.Error(), "not served") {
			notServed++
			t.Logf("%s: %v (an API version this release does not serve)", key, out.Err)
			continue
		}
		if isInvalidForKubernetes(out.Err) {
			// The apiserver's own validation (before validating admission) refuses it: such a
			// manifest cannot be created with or without draguard.
			invalid++
			t.Logf("%s: invalid for Kubernetes itself: %v", key, out.Err)
			continue
		}
		var denyRules, warnRules []string
		if judged {
			for _, f := range want.Findings {
				switch f.Action {
				case "deny":
					denyRules = append(denyRules, f.Rule)
				case "warn":
					warnRules = append(warnRules, f.Rule)
				}
			}
		}
		switch {
		case judged && want.Verdict == "deny":
			denied++
			if out.Admitted() {
				t.Errorf("%s: admitted, draguard denies it (%v)", key, denyRules)
				continue
			}
			if !apierrors.IsForbidden(out.Err) && !apierrors.IsInvalid(out.Err) && !strings.Contains(out.Err.Error(), "denied the request") {
				t.Errorf("%s: refused, but not by admission: %v", key, out.Err)
			}
			for _, r := range denyRules {
				if !strings.Contains(out.Err.Error(), r) {
					t.Errorf("%s: refusal does not name %s: %v", key, r, out.Err)
				}
			}
		default:
			if !out.Admitted() {
				t.Errorf("%s: refused (%v), draguard's verdict is %q", key, out.Err, want.Verdict)
				continue
			}
			// The server's claim cache sees that no referenced template or claim exists (a dry run
			// creates none); draguard audit, offline, has no cache to ask.
			var own []string
			for _, w := range draguardWarnings(out.Warnings) {
				// Under the installed policy (DG015 denies) a DG015 warning that the offline verdict
				// lacks can only be the cache's, whose findings are capped at warn (kube-apiserver
				// shortens long warnings, so the text is not matched).
				if strings.Contains(w, "DG015") && !slices.Contains(warnRules, "DG015") {
					missingRefs++
					continue
				}
				own = append(own, w)
			}
			ws := strings.Join(own, "\n")
			for _, r := range warnRules {
				if !strings.Contains(ws, r) {
					t.Errorf("%s: admitted without the %s warning (warnings: %q)", key, r, out.Warnings)
				}
			}
			if len(warnRules) > 0 {
				warned++
			} else {
				allowed++
				if ws != "" && (!judged || want.Verdict == "allow") {
					t.Errorf("%s: draguard allows it, but the apiserver returned warnings %q", key, ws)
				}
			}
		}
	}
	t.Logf("%d documents: %d refused, %d admitted with warnings, %d admitted; %d invalid for Kubernetes itself, %d of kinds this release does not serve; %d references to a template or claim that does not exist (the server's claim cache)",
		len(docs), denied, warned, allowed, invalid, notServed, missingRefs)
	// In enforce mode (something refused); in audit mode DG015's action is audit, and its findings
	// are audit annotations, not warnings.
	if missingRefs == 0 && denied > 0 {
		t.Errorf("no DG015 warning for a reference to a template or claim that does not exist: the server's claim cache is not in use")
	}
	if invalid > len(docs)/10 {
		t.Errorf("%d of %d documents were invalid for the apiserver", invalid, len(docs))
	}
	if notServed > len(docs)/10 {
		t.Errorf("%d of %d documents were not served", notServed, len(docs))
	}
	return
}

const legacyPodFile = "NVIDIA-gpu-operator__gpu-pod.yaml"

// TestAdmissionThroughTheAPIServer: every real manifest through kube-apiserver, with mutation off
// in enforce and in audit mode; kubectl prints draguard's refusal and warnings.
func TestAdmissionThroughTheAPIServer(t *testing.T) {
	c := Up(t, "hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml")
	legacy := filepath.Join(sourceDir(t), "test", "data", "manifests", "legacy", legacyPodFile)

	t.Run("enforce", func(t *testing.T) {
		c.t = t
		c.Install("--set", "mutation.enabled=false")
		denied, _, _ := checkManifests(t, c, verdicts(t, c))
		if denied == 0 {
			t.Error("no document was refused in enforce mode")
		}
		_, stderr, err := c.Kubectl("", "apply", "--dry-run=server", "-f", legacy)
		if err == nil || !strings.Contains(stderr, "DG001") {
			t.Errorf("kubectl apply of %s: want draguard's DG001 refusal, got err=%v stderr=%q", legacyPodFile, err, stderr)
		}
	})
	t.Run("audit", func(t *testing.T) {
		c.t = t
		c.Install("--set", "mutation.enabled=false", "--set", "policy.mode=audit")
		denied, warned, _ := checkManifests(t, c, verdicts(t, c))
		if denied != 0 || warned == 0 {
			t.Errorf("audit mode: %d refused (want 0), %d warned (want some)", denied, warned)
		}
		_, stderr, err := c.Kubectl("", "apply", "--dry-run=server", "-f", legacy)
		if err != nil || !strings.Contains(stderr, "Warning:") || !strings.Contains(stderr, "DG001") {
			t.Errorf("kubectl apply of %s in audit mode: want admitted with a DG001 warning, got err=%v stderr=%q", legacyPodFile, err, stderr)
		}
	})
}

// legacyPod is a Pod requesting n GPUs through the device plugin resource.
func legacyPod(name, ns string, n int, annotations map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": annotations},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.example/cuda:12",
			"resources": map[string]any{"limits": map[string]any{"nvidia.com/gpu": fmt.Sprint(n)}}}}},
	}}
}

// TestBackstop: with the webhook unreachable and failurePolicy Ignore, the chart's
// ValidatingAdmissionPolicy denies a legacy Pod in enforce mode and warns in audit mode.
func TestBackstop(t *testing.T) {
	c := Up(t, "hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml")
	ctx := context.Background()
	ignore := []string{"--set", "validating.failurePolicy=Ignore", "--set", "mutation.failurePolicy=Ignore"}
	for _, mode := range []string{"enforce", "audit"} {
		t.Run(mode, func(t *testing.T) {
			c.t = t
			c.Install(append(ignore, "--set", "policy.mode="+mode)...)
			// The policy is type-checked by the apiserver when created: no type-checking warnings.
			vap, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().List(ctx, metav1.ListOptions{})
			if err != nil || len(vap.Items) == 0 {
				t.Fatalf("no ValidatingAdmissionPolicy installed: %v", err)
			}
			for _, p := range vap.Items {
				Eventually(t, 30*time.Second, "type check of "+p.Name, func() error {
					got, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, p.Name, metav1.GetOptions{})
					if err != nil {
						return err
					}
					if got.Status.TypeChecking == nil {
						return fmt.Errorf("not type-checked yet")
					}
					if len(got.Status.TypeChecking.ExpressionWarnings) > 0 {
						t.Errorf("%s: type-checking warnings %v", p.Name, got.Status.TypeChecking.ExpressionWarnings)
					}
					return nil
				})
			}
			c.StopServer()
			var out Outcome
			// The policy's binding reaches the apiserver's admission plugin within its resync.
			Eventually(t, 60*time.Second, "backstop in force", func() error {
				out = c.Create(ctx, legacyPod("backstop", "default", 1, nil), true)
				if mode == "enforce" && out.Admitted() {
					return fmt.Errorf("legacy Pod admitted")
				}
				if mode == "audit" && len(draguardWarnings(out.Warnings)) == 0 {
					return fmt.Errorf("no warning (err %v)", out.Err)
				}
				return nil
			})
			if mode == "enforce" && (!strings.Contains(out.Err.Error(), "DG001") || !strings.Contains(out.Err.Error(), "ValidatingAdmissionPolicy")) {
				t.Errorf("refusal is not the backstop's DG001: %v", out.Err)
			}
			if mode == "audit" && !out.Admitted() {
				t.Errorf("audit mode refused the legacy Pod: %v", out.Err)
			}
		})
	}
}
