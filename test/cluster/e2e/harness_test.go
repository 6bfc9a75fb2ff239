// Package e2e holds draguard's tests against the real control plane of test/cluster: each test
// starts its own cluster with cluster.sh (up, install, down) and judges draguard by what
// kube-apiserver, kube-controller-manager and kube-scheduler do.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

// sourceDir is the repository root: $DRAGUARD_SOURCE_DIR (CTest sets it; -trimpath leaves no
// source paths in the binary), else found from this file's path.
func sourceDir(t testing.TB) string {
	if d := os.Getenv("DRAGUARD_SOURCE_DIR"); d != "" {
		return d
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		t.Fatal("cannot locate the repository: set DRAGUARD_SOURCE_DIR")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// draguardBin is the draguard binary under test: $DRAGUARD, else the default build's.
func draguardBin(t testing.TB) string {
	if b := os.Getenv("DRAGUARD"); b != "" {
		return b
	}
	return filepath.Join(sourceDir(t), "build", "src", "cli", "draguard")
}

// Cluster is one control plane started by cluster.sh up, stopped at the end of the test.
type Cluster struct {
	t       testing.TB
	Dir     string
	Config  *rest.Config
	Kube    *kubernetes.Clientset
	Dynamic dynamic.Interface
	Mapper  meta.ResettableRESTMapper
}

// exportPath is the path of a repository hwloc export, relative to test/data (an absolute path
// is taken as it is: a copy under another file name gives another Node).
func exportPath(t testing.TB, rel string) string {
	if filepath.IsAbs(rel) {
		return rel
	}
	return filepath.Join(sourceDir(t), "test", "data", rel)
}

// dnsSubdomain is the shape of a Node name (apimachinery's IsDNS1123Subdomain, length aside).
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

// NodeName is the Node name cluster.sh gives an export, the name draguard gives it
// (k8s::NodeNameFrom; Up checks that they agree): the file name without .xml / .hwloc.xml in
// lower case, kept when it is a DNS subdomain, else with every character other than a-z, 0-9 and
// '-' as '-', cut to 63 characters and trimmed of '-' at both ends.
func NodeName(export string) string {
	b := []byte(strings.TrimSuffix(strings.TrimSuffix(filepath.Base(export), ".xml"), ".hwloc"))
	for i, c := range b { // bytes, ASCII only, as draguard and tr do
		if c >= 'A' && c <= 'Z' {
			b[i] = c - 'A' + 'a'
		}
	}
	if len(b) <= 253 && dnsSubdomain.Match(b) {
		return string(b)
	}
	for i, c := range b {
		if !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-' {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.Trim(string(b), "-")
}

// lifeline is a pipe whose write end this process holds until it ends, however it ends (a
// panic, a -test.timeout, a signal): the reaper cluster.sh up starts for each cluster waits on the
// read end (CLUSTER_LIFELINE_FD) and stops the cluster once it closes. The write end is never
// closed, and no child gets it (Go opens every descriptor close-on-exec).
var lifeline struct {
	once sync.Once
	r, w *os.File
	err  error
}

func lifelineReader() (*os.File, error) {
	lifeline.once.Do(func() { lifeline.r, lifeline.w, lifeline.err = os.Pipe() })
	return lifeline.r, lifeline.err
}

// script runs cluster.sh with args; its output goes to the test log.
func script(t testing.TB, args ...string) error {
	cmd := exec.Command(filepath.Join(sourceDir(t), "test", "cluster", "cluster.sh"), args...)
	cmd.Env = append(os.Environ(), "DRAGUARD="+draguardBin(t))
	if r, err := lifelineReader(); err != nil {
		t.Fatalf("lifeline pipe: %v", err)
	} else {
		cmd.ExtraFiles = []*os.File{r} // descriptor 3 of cluster.sh
		cmd.Env = append(cmd.Env, "CLUSTER_LIFELINE_FD=3")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("cluster.sh %s:\n%s", strings.Join(args, " "), out.String())
	return err
}

// Up starts a cluster with one Node per export (paths relative to test/data).
func Up(t testing.TB, exports ...string) *Cluster {
	t.Helper()
	return UpWithCPUs(t, "none", exports...)
}

// UpWithCPUs starts a cluster like Up whose Nodes also publish their CPUs as dra-driver-cpu
// does in `cpuMode` (grouped, individual; none: no CPU devices).
func UpWithCPUs(t testing.TB, cpuMode string, exports ...string) *Cluster {
	t.Helper()
	return UpWithDrivers(t, cpuMode, "driver", exports...)
}

// UpWithDrivers starts a cluster like UpWithCPUs whose NICs publish the NUMA attributes
// `nicNuma` says (driver: dra.net/numaNode, as dranet v1.4.0; standard: also
// resource.kubernetes.io/numaNode, as dranet after v1.4.0).
func UpWithDrivers(t testing.TB, cpuMode, nicNuma string, exports ...string) *Cluster {
	t.Helper()
	dir := t.TempDir()
	args := []string{"up", dir, "--cpu-mode", cpuMode, "--nic-numa-attribute", nicNuma, "--exports"}
	for _, e := range exports {
		args = append(args, exportPath(t, e))
	}
	c := &Cluster{t: t, Dir: dir}
	t.Cleanup(func() {
		if t.Failed() {
			for _, log := range []string{"draguard", "kueue", "kube-scheduler", "kube-controller-manager"} {
				if b, err := os.ReadFile(filepath.Join(dir, "logs", log+".log")); err == nil {
					t.Logf("--- tail of %s.log ---\n%s", log, tail(string(b), 40))
				}
			}
		}
		if err := script(t, "down", dir); err != nil {
			t.Errorf("cluster.sh down: %v", err)
		}
	})
	if err := script(t, args...); err != nil {
		t.Fatalf("cluster.sh up: %v", err)
	}
	// The harness, draguard and the Nodes name each export alike.
	for _, e := range exports {
		out, err := Draguard(t, "topology", "show", "-f", exportPath(t, e), "-o", "json")
		if err != nil {
			t.Fatalf("draguard topology show -f %s: %v", e, err)
		}
		var shown []struct {
			Node string `json:"node"`
		}
		JSON(t, out, &shown)
		if len(shown) != 1 || shown[0].Node != NodeName(e) {
			t.Fatalf("draguard topology show names %s %+v, the harness %q", e, shown, NodeName(e))
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.WarningHandler = rest.NoWarnings{}
	c.Config = cfg
	c.Kube = kubernetes.NewForConfigOrDie(cfg)
	c.Dynamic = dynamic.NewForConfigOrDie(cfg)
	c.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(discovery.NewDiscoveryClientForConfigOrDie(cfg)))
	return c
}

func tail(s string, lines int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > lines {
		l = l[len(l)-lines:]
	}
	return strings.Join(l, "\n")
}

// Install runs cluster.sh install with extra helm arguments ("--set", "k=v", ...).
func (c *Cluster) Install(helmArgs ...string) {
	c.t.Helper()
	if err := script(c.t, append([]string{"install", c.Dir}, helmArgs...)...); err != nil {
		c.t.Fatalf("cluster.sh install: %v", err)
	}
}

// Track records the pid of a process the test started beside the cluster (a server replica, an
// exporter) in DIR/pids/NAME, so that cluster.sh down, and its reaper when this process ends
// abruptly, stop it too; Untrack forgets it once the process has been waited for.
func (c *Cluster) Track(name string, p *os.Process) {
	c.t.Helper()
	if err := os.WriteFile(filepath.Join(c.Dir, "pids", name), []byte(fmt.Sprint(p.Pid)), 0o644); err != nil {
		c.t.Fatalf("recording pid of %s: %v", name, err)
	}
}

// Untrack removes DIR/pids/NAME (see Track).
func (c *Cluster) Untrack(name string) { _ = os.Remove(filepath.Join(c.Dir, "pids", name)) }

// StopServer stops draguard serve (the webhook becomes unreachable).
func (c *Cluster) StopServer() {
	c.t.Helper()
	b, err := os.ReadFile(filepath.Join(c.Dir, "pids", "draguard"))
	if err != nil {
		c.t.Fatalf("no draguard serve running: %v", err)
	}
	var pid int
	fmt.Sscan(string(b), &pid)
	p, err := os.FindProcess(pid)
	if err == nil {
		_ = p.Kill()
		_, _ = p.Wait()
	}
	Eventually(c.t, 20*time.Second, "draguard serve stopped", func() error {
		if exec.Command("kill", "-0", fmt.Sprint(pid)).Run() == nil {
			return fmt.Errorf("pid %d alive", pid)
		}
		return nil
	})
	os.Remove(filepath.Join(c.Dir, "pids", "draguard"))
}

// Kubectl runs the cluster's kubectl; returns stdout, stderr and the error.
func (c *Cluster) Kubectl(stdin string, args ...string) (string, string, error) {
	cmd := exec.Command(filepath.Join(c.Dir, "bin", "kubectl"), append([]string{"--kubeconfig", filepath.Join(c.Dir, "kubeconfig")}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// Draguard runs the draguard binary and returns its stdout (stderr is logged).
func Draguard(t testing.TB, args ...string) (string, error) {
	cmd := exec.Command(draguardBin(t), args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if errb.Len() > 0 {
		t.Logf("draguard %s: %s", strings.Join(args, " "), tail(errb.String(), 10))
	}
	return out.String(), err
}

// WaitServiceAccount waits for the default ServiceAccount of a namespace (made by
// kube-controller-manager; Pods are refused until it exists).
func (c *Cluster) WaitServiceAccount(ns string) {
	c.t.Helper()
	Eventually(c.t, 60*time.Second, "ServiceAccount "+ns+"/default", func() error {
		_, err := c.Kube.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err
	})
}

// PolicyFile is the policy file the installed server reads (the chart's ConfigMap).
func (c *Cluster) PolicyFile() string { return filepath.Join(c.Dir, "serve", "policy.yaml") }

// Eventually polls f until it returns nil or the deadline passes.
func Eventually(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// warningCollector keeps the Warning headers of one client's responses.
type warningCollector struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningCollector) HandleWarningHeader(code int, agent string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

// Outcome is what the apiserver did with one create.
type Outcome struct {
	Err      error
	Warnings []string
	Object   *unstructured.Unstructured
}

// Create creates obj (server-side dry run when dryRun) and reports the answer and warnings.
func (c *Cluster) Create(ctx context.Context, obj *unstructured.Unstructured, dryRun bool) Outcome {
	gvk := obj.GroupVersionKind()
	mapping, err := c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		c.Mapper.Reset()
		if mapping, err = c.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
			return Outcome{Err: fmt.Errorf("not served: %w", err)}
		}
	}
	wc := &warningCollector{}
	cfg := rest.CopyConfig(c.Config)
	cfg.WarningHandler = wc
	dyn := dynamic.NewForConfigOrDie(cfg)
	var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
			obj.SetNamespace(ns)
		}
		ri = dyn.Resource(mapping.Resource).Namespace(ns)
	}
	opts := metav1.CreateOptions{}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	got, err := ri.Create(ctx, obj, opts)
	return Outcome{Err: err, Warnings: wc.msgs, Object: got}
}

// Admitted reports whether admission let the object through (AlreadyExists comes after it).
func (o Outcome) Admitted() bool { return o.Err == nil || apierrors.IsAlreadyExists(o.Err) }

// Documents reads the YAML documents of a file (empty ones skipped).
func Documents(t testing.TB, path string) []*unstructured.Unstructured {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range splitYAML(string(b)) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m == nil {
			out = append(out, nil) // keep document indices aligned with draguard's
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// splitYAML splits a YAML stream at document separators ("---" lines).
func splitYAML(s string) []string {
	var docs []string
	var cur strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if t := strings.TrimRight(line, " \t\r\n"); t == "---" || strings.HasPrefix(t, "--- ") {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	docs = append(docs, cur.String())
	var out []string
	for i, d := range docs {
		if i == 0 && strings.TrimSpace(stripComments(d)) == "" {
			continue // a stream that starts with "---"
		}
		out = append(out, d)
	}
	return out
}

func stripComments(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// JSON decodes draguard's JSON output.
func JSON(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("decoding %q: %v", tail(s, 3), err)
	}
}
