package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const (
	exporterSA         = "draguard-exporter" // <fullname>-exporter
	shapeLabel         = "draguard.io/topology-shape"
	topologyAnnotation = "draguard.io/topology"
)

// exporterToken is a token of the exporter's ServiceAccount bound to an object: a Pod (what the
// kubelet projects into a DaemonSet pod) or a Node (`kubectl create token --bound-object-kind
// Node`), which the API server then names in the user's extra; unbound when bound is nil (plain
// `kubectl create token`).
func exporterToken(t *testing.T, c *Cluster, bound *authenticationv1.BoundObjectReference) string {
	t.Helper()
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600)), BoundObjectRef: bound}}
	tr, err := c.Kube.CoreV1().ServiceAccounts(releaseNS).CreateToken(context.Background(), exporterSA, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s: %v", exporterSA, err)
	}
	return tr.Status.Token
}

func ptr[T any](v T) *T { return &v }

// serviceAccountDir writes token, ca.crt and namespace as a pod has them mounted
// (DRAGUARD_SERVICEACCOUNT_DIR).
func serviceAccountDir(t *testing.T, c *Cluster, token string) string {
	t.Helper()
	dir := t.TempDir()
	ca, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"token": []byte(token), "ca.crt": ca, "namespace": []byte(releaseNS)} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// clientFor is a client of the cluster authenticated by a bearer token only.
func clientFor(t *testing.T, c *Cluster, token string) *kubernetes.Clientset {
	cfg := &rest.Config{Host: c.Config.Host, BearerToken: token, WarningHandler: rest.NoWarnings{},
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(c.Dir, "pki", "ca.crt")}}
	return kubernetes.NewForConfigOrDie(cfg)
}

// exporterPods makes the chart's exporter DaemonSet place a pod on each Node, as on GPU nodes
// with the GPU operator: the nodes get GPU feature discovery's label, the RuntimeClass the pods
// name is created. No kubelet runs them; they exist to bind the exporter's tokens to a node.
func exporterPods(t *testing.T, c *Cluster, nodes ...string) map[string]*corev1.Pod {
	t.Helper()
	ctx := context.Background()
	_, err := c.Kube.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "nvidia"}, Handler: "nvidia"}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	for _, n := range nodes {
		patch := `{"metadata":{"labels":{"nvidia.com/gpu.present":"true"}}}`
		if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pods := map[string]*corev1.Pod{}
	Eventually(t, 60*time.Second, "an exporter pod bound to every node", func() error {
		list, err := c.Kube.CoreV1().Pods(releaseNS).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=draguard-topology-exporter"})
		if err != nil {
			return err
		}
		for i := range list.Items {
			if p := &list.Items[i]; p.Spec.NodeName != "" && p.Spec.ServiceAccountName == exporterSA {
				pods[p.Spec.NodeName] = p
			}
		}
		for _, n := range nodes {
			if pods[n] == nil {
				return fmt.Errorf("no exporter pod on %s (%d pods)", n, len(list.Items))
			}
		}
		return nil
	})
	return pods
}

// exporter is one `draguard topology export --publish` process with the DaemonSet's arguments
// and environment, an export file instead of the machine, and an exporter token's API access.
type exporter struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startExporter(t *testing.T, c *Cluster, node, file, saDir string) *exporter {
	t.Helper()
	port, err := os.ReadFile(filepath.Join(c.Dir, "apiserver.port"))
	if err != nil {
		t.Fatal(err)
	}
	e := &exporter{log: filepath.Join(c.Dir, "logs", "exporter-"+node+".log"), done: make(chan struct{})}
	logf, err := os.Create(e.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	e.cmd = exec.Command(draguardBin(t), "topology", "export", "--publish", "--interval", "10m",
		"--probe-listen", "127.0.0.1:0", "-f", file)
	e.cmd.Env = append(os.Environ(), "NODE_NAME="+node, "POD_NAMESPACE="+releaseNS,
		"KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+strings.TrimSpace(string(port)),
		"DRAGUARD_SERVICEACCOUNT_DIR="+saDir)
	e.cmd.Stdout, e.cmd.Stderr = logf, logf
	if err := e.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c.Track("exporter-"+node, e.cmd.Process)
	go func() { _ = e.cmd.Wait(); c.Untrack("exporter-" + node); close(e.done) }()
	t.Cleanup(func() {
		_ = e.cmd.Process.Kill()
		<-e.done
		if t.Failed() {
			b, _ := os.ReadFile(e.log)
			t.Logf("--- tail of %s ---\n%s", filepath.Base(e.log), tail(string(b), 20))
		}
	})
	return e
}

// reexport sends SIGHUP (re-export now) after checking that the exporter still runs.
func (e *exporter) reexport(t *testing.T) {
	t.Helper()
	select {
	case <-e.done:
		b, _ := os.ReadFile(e.log)
		t.Fatalf("the exporter exited:\n%s", tail(string(b), 20))
	default:
	}
	if err := e.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
}

// copyFile replaces dst by src's content (through a rename, as a ConfigMap volume update does).
func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst+".tmp", b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(dst+".tmp", dst); err != nil {
		t.Fatal(err)
	}
}

// shapeObjectOf is the name of the shape object a Node's publication names ("" without one).
func shapeObjectOf(n *corev1.Node) string {
	var pub struct {
		ShapeObject string `json:"shapeObject"`
	}
	if json.Unmarshal([]byte(n.Annotations[topologyAnnotation]), &pub) != nil || pub.ShapeObject == "" {
		return ""
	}
	return "draguard-shape-" + pub.ShapeObject
}

// published checks node's publication: the shape label, and the annotation naming a shape object
// that is immutable, labelled with that shape, and whose content is what its name says (the first
// 16 bytes of the SHA-256 of the decompressed record, in hex).
func published(c *Cluster, node, shape string) error {
	ctx := context.Background()
	n, err := c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := n.Labels[shapeLabel]; got != shape {
		return fmt.Errorf("Node label %s=%q, want %q", shapeLabel, got, shape)
	}
	name := shapeObjectOf(n)
	if name == "" {
		return fmt.Errorf("Node annotation %s=%q names no shape object", topologyAnnotation, n.Annotations[topologyAnnotation])
	}
	cm, err := c.Kube.CoreV1().ConfigMaps(releaseNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if cm.Labels["draguard.io/topology"] != "shape" || cm.Labels[shapeLabel] != shape {
		return fmt.Errorf("shape object %s labels %v", name, cm.Labels)
	}
	if cm.Immutable == nil || !*cm.Immutable {
		return fmt.Errorf("shape object %s is not immutable", name)
	}
	zr, err := gzip.NewReader(bytes.NewReader(cm.BinaryData["shape.gz"]))
	if err != nil {
		return fmt.Errorf("shape object %s: %v", name, err)
	}
	record, err := io.ReadAll(zr)
	if err != nil {
		return fmt.Errorf("shape object %s: %v", name, err)
	}
	if sum := sha256.Sum256(record); "draguard-shape-"+hex.EncodeToString(sum[:16]) != name {
		return fmt.Errorf("shape object %s holds a record of digest %x", name, sum[:16])
	}
	return nil
}

// unpublish removes a node's publication (label and annotation) as a cluster admin would.
func unpublish(t testing.TB, c *Cluster, node string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:null},"annotations":{%q:null}}}`, shapeLabel, topologyAnnotation)
	if _, err := c.Kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// gauges waits until serve's topology model has `nodes` nodes in `shapes` shapes.
func gauges(t *testing.T, c *Cluster, nodes, shapes float64) {
	t.Helper()
	Eventually(t, 30*time.Second, fmt.Sprintf("serve's topology at %v nodes, %v shapes", nodes, shapes), func() error {
		n, err := metricValue(t, c, "draguard_topology_nodes")
		if err != nil {
			return err
		}
		s, err := metricValue(t, c, "draguard_topology_shapes")
		if err != nil {
			return err
		}
		if n != nodes || s != shapes {
			return fmt.Errorf("%v nodes, %v shapes", n, s)
		}
		return nil
	})
}

// The two machines of the exporter tests.
const (
	dgxExport  = "hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml"
	g4dnExport = "hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml"
)

// upDgxAndG4dn starts a cluster of the DGX-2H and the g4dn.metal with the chart's defaults
// (exporter and its policies on) and returns it with the shape label `up` published on each Node
// (as cluster-admin): two distinct shapes.
func upDgxAndG4dn(t *testing.T) (c *Cluster, dgx, g4dn string, shapeOf map[string]string) {
	t.Helper()
	c = Up(t, dgxExport, g4dnExport)
	c.Install()
	dgx, g4dn = NodeName(dgxExport), NodeName(g4dnExport)
	shapeOf = map[string]string{}
	for _, n := range []string{dgx, g4dn} {
		node, err := c.Kube.CoreV1().Nodes().Get(context.Background(), n, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		shapeOf[n] = node.Labels[shapeLabel]
	}
	if shapeOf[dgx] == "" || shapeOf[g4dn] == "" || shapeOf[dgx] == shapeOf[g4dn] {
		t.Fatalf("up published shapes %v, want two distinct", shapeOf)
	}
	return c, dgx, g4dn, shapeOf
}

// TestExporterUnderItsServiceAccount: `draguard topology export --publish -f` under the exporter
// ServiceAccount of the chart, with a token bound to its DaemonSet pod as the kubelet projects
// it: it publishes the node's shape label and annotation (the shape object exists already: `up`
// published both nodes), a changed export reaches draguard serve through its watches (metrics and
// the conversion of a 16-GPU Pod), and the chart's ValidatingAdmissionPolicies and its
// shape-object webhook refuse every other Node or ConfigMap write the exporter's identity attempts.
func TestExporterUnderItsServiceAccount(t *testing.T) {
	c, dgx, g4dn, shapeOf := upDgxAndG4dn(t)
	ctx := context.Background()
	pods := exporterPods(t, c, dgx, g4dn)
	podToken := exporterToken(t, c, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pods[dgx].Name, UID: pods[dgx].UID})
	ns := "exporter-test"
	if _, err := c.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.WaitServiceAccount(ns)
	// Only the DGX-2H has 16 GPUs: a legacy 16-GPU Pod converts while serve knows its shape.
	converts := func(want bool) func() error {
		return func() error {
			out := c.Create(ctx, legacyPod("gpu16", ns, 16, map[string]any{}), true)
			switch {
			case want && !out.Admitted():
				return fmt.Errorf("refused: %v", out.Err)
			case want:
				if claims, _, _ := unstructured.NestedSlice(out.Object.Object, "spec", "resourceClaims"); len(claims) == 0 {
					return fmt.Errorf("admitted unconverted")
				}
			case out.Admitted():
				return fmt.Errorf("converted, want refused")
			case !strings.Contains(out.Err.Error(), "DG001") || !strings.Contains(out.Err.Error(), "no node has 16 GPUs"):
				return fmt.Errorf("refused, but not for want of 16 GPUs: %v", out.Err)
			}
			return nil
		}
	}
	gauges(t, c, 2, 2)
	Eventually(t, 30*time.Second, "16-GPU Pod converted with the DGX-2H's topology", converts(true))

	// The exporter takes over the DGX-2H's publication: its label and annotation are gone first,
	// so that what is there afterwards is the exporter's own write.
	unpublish(t, c, dgx)
	gauges(t, c, 1, 1)
	file := filepath.Join(t.TempDir(), "export.xml")
	copyFile(t, exportPath(t, dgxExport), file)
	start := time.Now()
	e := startExporter(t, c, dgx, file, serviceAccountDir(t, c, podToken))
	Eventually(t, 30*time.Second, "shape label and annotation published by the exporter", func() error { return published(c, dgx, shapeOf[dgx]) })
	gauges(t, c, 2, 2)
	t.Logf("published and seen by serve: %v", time.Since(start).Round(time.Millisecond))

	// A changed export (the g4dn's hardware on the DGX-2H's node) points the node at the g4dn's
	// shape object; serve's watch drops the 16-GPU shape, and the 16-GPU Pod no longer converts.
	copyFile(t, exportPath(t, g4dnExport), file)
	start = time.Now()
	e.reexport(t)
	Eventually(t, 30*time.Second, "publication updated", func() error { return published(c, dgx, shapeOf[g4dn]) })
	gauges(t, c, 2, 1)
	Eventually(t, 30*time.Second, "16-GPU Pod refused with the changed topology", converts(false))
	t.Logf("changed export seen by serve: %v", time.Since(start).Round(time.Millisecond))
	copyFile(t, exportPath(t, dgxExport), file)
	e.reexport(t)
	Eventually(t, 30*time.Second, "publication restored", func() error { return published(c, dgx, shapeOf[dgx]) })
	gauges(t, c, 2, 2)
	Eventually(t, 30*time.Second, "16-GPU Pod converted again", converts(true))

	// An NVLink clique (the infos `topology export` writes from NVML's fabric info on every nvml
	// OS device): the exporter labels the node nvidia.com/gpu.clique through the chart's policy,
	// beside the unchanged shape label, and removes its label when the clique is gone.
	const clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044"
	raw, err := os.ReadFile(exportPath(t, dgxExport))
	if err != nil {
		t.Fatal(err)
	}
	withClique := regexp.MustCompile(`(<object type="OSDev"[^>]* name="nvml\d+"[^>]*>)`).
		ReplaceAllString(string(raw), `$1<info name="NVIDIAGPUClique" value="`+clique+`"/>`)
	if strings.Count(withClique, "NVIDIAGPUClique") != 16 {
		t.Fatalf("clique added to %d nvml devices, want 16", strings.Count(withClique, "NVIDIAGPUClique"))
	}
	if err := os.WriteFile(file, []byte(withClique), 0o644); err != nil {
		t.Fatal(err)
	}
	cliqueOf := func() (label, fact string, err error) {
		n, err := c.Kube.CoreV1().Nodes().Get(ctx, dgx, metav1.GetOptions{})
		if err != nil {
			return "", "", err
		}
		var facts struct {
			NvlinkClique string `json:"nvlinkClique"`
		}
		if err := json.Unmarshal([]byte(n.Annotations[topologyAnnotation]), &facts); err != nil {
			return "", "", err
		}
		return n.Labels["nvidia.com/gpu.clique"], facts.NvlinkClique, nil
	}
	e.reexport(t)
	Eventually(t, 30*time.Second, "clique label and fact published", func() error {
		label, fact, err := cliqueOf()
		if err == nil && (label != clique || fact != clique) {
			err = fmt.Errorf("label %q, fact %q, want %q", label, fact, clique)
		}
		if err == nil {
			err = published(c, dgx, shapeOf[dgx])
		}
		return err
	})
	copyFile(t, exportPath(t, dgxExport), file)
	e.reexport(t)
	Eventually(t, 30*time.Second, "clique label removed with the clique", func() error {
		label, fact, err := cliqueOf()
		if err == nil && (label != "" || fact != "") {
			err = fmt.Errorf("label %q, fact %q, want none", label, fact)
		}
		return err
	})

	// Every other write of the exporter's identity is refused: by the policies (vap), the
	// shape-object webhook or RBAC. The pod-bound and node-bound tokens name the DGX-2H's node, so
	// the g4dn's publication and ConfigMap are refused to them; an unbound token is refused
	// everything else alike.
	const (
		onlyLabel      = "may change only the labels draguard.io/topology-shape and nvidia.com/gpu.clique"
		onlyAnnotation = "may change only the annotation draguard.io/topology"
		noSpec         = "may not change a Node's spec"
		noMeta         = "may not change a Node's owners or finalizers"
		boundNode      = "may publish only on the Node its token is bound to"
		onlyTopoCM     = "may write only topology ConfigMaps"
		boundCM        = "may write only the topology ConfigMap of the Node its token is bound to"
		createOnly     = "may only create shape objects, immutable, never change or delete one"
		notShape       = "not a valid shape object"
		immutable      = "immutable"
		rbac           = "cannot"
	)
	type attempt struct {
		what  string
		do    func(k *kubernetes.Clientset) error
		want  string
		bound bool // refused only to a token bound to the DGX-2H's node
	}
	patchNode := func(node, patch string, sub ...string) func(k *kubernetes.Clientset) error {
		return func(k *kubernetes.Clientset) error {
			_, err := k.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, sub...)
			return err
		}
	}
	topoCM := func(node string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "draguard-topology-" + node, Namespace: releaseNS,
			Labels: map[string]string{"draguard.io/topology": "hwloc", "draguard.io/node": node}}, Data: map[string]string{"topology.xml": "<topology/>"}}
	}
	updateCM := func(name string, change func(*corev1.ConfigMap)) func(k *kubernetes.Clientset) error {
		return func(k *kubernetes.Clientset) error {
			cm, err := k.CoreV1().ConfigMaps(releaseNS).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get (allowed to the exporter): %w", err)
			}
			change(cm)
			_, err = k.CoreV1().ConfigMaps(releaseNS).Update(ctx, cm, metav1.UpdateOptions{})
			return err
		}
	}
	createCM := func(cm *corev1.ConfigMap) func(k *kubernetes.Clientset) error {
		return func(k *kubernetes.Clientset) error {
			_, err := k.CoreV1().ConfigMaps(releaseNS).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}
	}
	deleteCM := func(name string) func(k *kubernetes.Clientset) error {
		return func(k *kubernetes.Clientset) error {
			return k.CoreV1().ConfigMaps(releaseNS).Delete(ctx, name, metav1.DeleteOptions{})
		}
	}
	otherCM := topoCM(g4dn)
	otherCM.Name += "-x"
	// Shape objects: the DGX-2H's, and copies of the g4dn's record under names it does not match.
	dgxNow, err := c.Kube.CoreV1().Nodes().Get(ctx, dgx, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dgxObject := shapeObjectOf(dgxNow)
	g4dnNode, err := c.Kube.CoreV1().Nodes().Get(ctx, g4dn, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	g4dnObject, err := c.Kube.CoreV1().ConfigMaps(releaseNS).Get(ctx, shapeObjectOf(g4dnNode), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	squat := func(name string, immutable bool) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: releaseNS, Labels: g4dnObject.Labels},
			Immutable: ptr(immutable), BinaryData: g4dnObject.BinaryData}
	}
	otherDigest := sha256.Sum256([]byte("another shape"))
	attempts := []attempt{
		{"another label", patchNode(dgx, `{"metadata":{"labels":{"example.com/rack":"r1"}}}`), onlyLabel, false},
		{"another label beside the shape label", patchNode(dgx, fmt.Sprintf(`{"metadata":{"labels":{%q:"0000000000000000","example.com/rack":"r1"}}}`, shapeLabel)), onlyLabel, false},
		{"removing a label", patchNode(dgx, `{"metadata":{"labels":{"kubernetes.io/hostname":null}}}`), onlyLabel, false},
		{"an annotation", patchNode(dgx, `{"metadata":{"annotations":{"example.com/a":"b"}}}`), onlyAnnotation, false},
		{"a finalizer", patchNode(dgx, `{"metadata":{"finalizers":["example.com/f"]}}`), noMeta, false},
		{"a taint", patchNode(dgx, `{"spec":{"taints":[{"key":"example.com/t","effect":"NoSchedule"}]}}`), noSpec, false},
		{"cordoning", patchNode(dgx, `{"spec":{"unschedulable":true}}`), noSpec, false},
		{"a podCIDR", patchNode(dgx, `{"spec":{"podCIDR":"10.244.0.0/24"}}`), noSpec, false},
		{"the status", patchNode(dgx, `{"status":{"capacity":{"cpu":"1"}}}`, "status"), rbac, false},
		{"deleting the Node", func(k *kubernetes.Clientset) error {
			return k.CoreV1().Nodes().Delete(ctx, dgx, metav1.DeleteOptions{})
		}, rbac, false},
		{"another node's shape label", patchNode(g4dn, fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, shapeLabel, shapeOf[dgx])), boundNode, true},
		{"another node's topology annotation", patchNode(g4dn, fmt.Sprintf(`{"metadata":{"annotations":{%q:"{}"}}}`, topologyAnnotation)), boundNode, true},
		{"the webhook's policy ConfigMap", updateCM("draguard-policy", func(cm *corev1.ConfigMap) { cm.Data["policy.yaml"] += "\n# changed\n" }), onlyTopoCM, false},
		{"deleting the webhook's policy ConfigMap", deleteCM("draguard-policy"), onlyTopoCM, false},
		{"a ConfigMap of its own", createCM(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: releaseNS}}), onlyTopoCM, false},
		{"a topology ConfigMap named for another node", createCM(otherCM), onlyTopoCM, false},
		{"a shape object whose content is not its name's", createCM(squat("draguard-shape-"+hex.EncodeToString(otherDigest[:16]), true)), notShape, false},
		{"a mutable shape object", createCM(squat(g4dnObject.Name, false)), immutable, false},
		{"changing a shape object", updateCM(dgxObject, func(cm *corev1.ConfigMap) { cm.Labels["example.com/team"] = "x" }), createOnly, false},
		{"deleting a shape object", deleteCM(dgxObject), createOnly, false},
		{"another node's topology ConfigMap", createCM(topoCM(g4dn)), boundCM, true},
		{"a topology ConfigMap for a new node", createCM(topoCM("example-node")), boundCM, true},
		{"deleting another node's topology ConfigMap", deleteCM("draguard-topology-" + g4dn), boundCM, true},
	}
	// A per-node ConfigMap of an earlier release for the g4dn (its Node's publication takes
	// precedence), for the attempt to delete another node's.
	if _, err := c.Kube.CoreV1().ConfigMaps(releaseNS).Create(ctx, topoCM(g4dn), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dgxNode, err := c.Kube.CoreV1().Nodes().Get(ctx, dgx, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	nodeToken := exporterToken(t, c, &authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: dgx, UID: dgxNode.UID})
	for _, tok := range []struct {
		name  string
		token string
		bound bool
	}{{"pod-bound", podToken, true}, {"node-bound", nodeToken, true}, {"unbound", exporterToken(t, c, nil), false}} {
		k := clientFor(t, c, tok.token)
		for _, a := range attempts {
			if a.bound && !tok.bound {
				continue
			}
			err := a.do(k)
			switch {
			case err == nil:
				t.Errorf("%s token: %s: allowed", tok.name, a.what)
			case a.want == rbac && !apierrors.IsForbidden(err):
				t.Errorf("%s token: %s: want refused by RBAC, got %v", tok.name, a.what, err)
			case !strings.Contains(err.Error(), a.want):
				t.Errorf("%s token: %s: want %q, got %v", tok.name, a.what, a.want, err)
			}
		}
	}
	// Nothing of it got through: the publications and shape objects are the exporters'.
	if err := published(c, dgx, shapeOf[dgx]); err != nil {
		t.Errorf("after the refused writes: %v", err)
	}
	if err := published(c, g4dn, shapeOf[g4dn]); err != nil {
		t.Errorf("after the refused writes: %v", err)
	}
	node, err := c.Kube.CoreV1().Nodes().Get(ctx, dgx, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if node.Spec.Unschedulable || len(node.Spec.Taints) > 0 || node.Spec.PodCIDR != "" || node.Annotations["example.com/a"] != "" ||
		len(node.Finalizers) > 0 || node.Labels["example.com/rack"] != "" || node.Labels["kubernetes.io/hostname"] != dgx {
		t.Errorf("a refused change reached Node %s: %+v %+v", dgx, node.ObjectMeta, node.Spec)
	}
}

// TestExporterUpgradeFromPerNodeConfigMaps: a cluster whose exporters are of the earlier release
// (each node's whole export in its ConfigMap draguard-topology-<node>, owned by the Node, and the
// shape label) keeps its topology through the upgrade. draguard serve reads those ConfigMaps; the
// chart's policies let the old exporters keep writing them under their pod-bound tokens; and when
// a node's exporter is upgraded it publishes the current way and deletes its ConfigMap, while serve
// knows both nodes at every moment.
func TestExporterUpgradeFromPerNodeConfigMaps(t *testing.T) {
	c, dgx, g4dn, shapeOf := upDgxAndG4dn(t)
	ctx := context.Background()
	pods := exporterPods(t, c, dgx, g4dn)
	tokens := map[string]string{}
	// The earlier release's state, written through the API calls its exporter made, under tokens
	// bound to the exporter pods: the ConfigMap (created, then updated on a change) and the label.
	oldExporter := func(node, export string, update bool) error {
		k := clientFor(t, c, tokens[node])
		n, err := k.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		xml, err := os.ReadFile(exportPath(t, export))
		if err != nil {
			return err
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "draguard-topology-" + node, Namespace: releaseNS,
			Labels:          map[string]string{"draguard.io/topology": "hwloc", "draguard.io/node": node},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node, UID: n.UID}}},
			Data: map[string]string{"topology.xml": string(xml)}}
		if update {
			cur, err := k.CoreV1().ConfigMaps(releaseNS).Get(ctx, cm.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Data = map[string]string{"topology.xml": string(xml) + "\n<!-- re-exported -->\n"}
			_, err = k.CoreV1().ConfigMaps(releaseNS).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}
		if _, err := k.CoreV1().ConfigMaps(releaseNS).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			return err
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, shapeLabel, shapeOf[node])
		_, err = k.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
		return err
	}
	exports := map[string]string{dgx: dgxExport, g4dn: g4dnExport}
	for _, n := range []string{dgx, g4dn} {
		tokens[n] = exporterToken(t, c, &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pods[n].Name, UID: pods[n].UID})
		unpublish(t, c, n)
		if err := oldExporter(n, exports[n], false); err != nil {
			t.Fatalf("the earlier release's exporter on %s: %v", n, err)
		}
	}
	gauges(t, c, 2, 2)
	Eventually(t, 30*time.Second, "serve reads both per-node ConfigMaps", func() error {
		if v, err := metricValue(t, c, "draguard_topology_legacy_configmaps"); err != nil || v != 2 {
			return fmt.Errorf("draguard_topology_legacy_configmaps %v (%v)", v, err)
		}
		return nil
	})
	// An old exporter's re-export (an update of its ConfigMap) is still allowed.
	if err := oldExporter(dgx, dgxExport, true); err != nil {
		t.Fatalf("the earlier release's exporter updating its ConfigMap: %v", err)
	}

	// The DGX-2H's exporter is upgraded, while serve's node count is watched.
	stop, done := make(chan struct{}), make(chan struct{})
	lowest := 2.0
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			if v, err := metricValue(t, c, "draguard_topology_nodes"); err == nil && v < lowest {
				lowest = v
			}
		}
	}()
	file := filepath.Join(t.TempDir(), "export.xml")
	copyFile(t, exportPath(t, dgxExport), file)
	startExporter(t, c, dgx, file, serviceAccountDir(t, c, tokens[dgx]))
	Eventually(t, 30*time.Second, "the upgraded exporter's publication", func() error { return published(c, dgx, shapeOf[dgx]) })
	Eventually(t, 30*time.Second, "its per-node ConfigMap deleted, serve on the publication", func() error {
		if _, err := c.Kube.CoreV1().ConfigMaps(releaseNS).Get(ctx, "draguard-topology-"+dgx, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("draguard-topology-%s still there (%v)", dgx, err)
		}
		if v, err := metricValue(t, c, "draguard_topology_legacy_configmaps"); err != nil || v != 1 {
			return fmt.Errorf("draguard_topology_legacy_configmaps %v (%v)", v, err)
		}
		return nil
	})
	gauges(t, c, 2, 2)
	close(stop)
	<-done
	if lowest < 2 {
		t.Errorf("serve's topology dropped to %v nodes during the upgrade", lowest)
	}
	// The g4dn's old exporter keeps working beside the upgraded one.
	if err := oldExporter(g4dn, g4dnExport, true); err != nil {
		t.Errorf("the earlier release's exporter on %s after the other's upgrade: %v", g4dn, err)
	}
}
