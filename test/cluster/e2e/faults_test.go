package e2e

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// serverClient is an HTTPS client of the harness's draguard serve (its certificate is signed by
// the harness CA) and the server's address.
func serverClient(t testing.TB, c *Cluster) (*http.Client, string) {
	t.Helper()
	pem, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	port, err := os.ReadFile(filepath.Join(c.Dir, "serve.port"))
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		"https://127.0.0.1:" + strings.TrimSpace(string(port))
}

// metricValue reads one unlabelled sample of draguard's /metrics listener (its address is in the
// server's "listening" log line).
func metricValue(t testing.TB, c *Cluster, name string) (float64, error) {
	t.Helper()
	f, err := os.Open(filepath.Join(c.Dir, "logs", "draguard.log"))
	if err != nil {
		return 0, err
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
		return 0, fmt.Errorf("no listening line in draguard.log")
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		return 0, fmt.Errorf("no sample %s", name)
	}
	var v float64
	_, err = fmt.Sscan(string(m[1]), &v)
	return v, err
}

// mutateReview posts a Pod CREATE AdmissionReview to draguard's /mutate with the apiserver's
// ?timeout= and returns the response part.
func mutateReview(t *testing.T, client *http.Client, base string, pod *unstructured.Unstructured, timeout string) (map[string]any, error) {
	review := map[string]any{
		"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{
			"uid":       "fault-" + pod.GetName(),
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"namespace": pod.GetNamespace(), "operation": "CREATE",
			"userInfo": map[string]any{"username": "cluster-test"},
			"object":   pod.Object,
		},
	}
	body, _ := json.Marshal(review)
	resp, err := client.Post(base+"/mutate?timeout="+timeout, "application/json", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, raw)
	}
	var out struct {
		Response map[string]any `json:"response"`
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out.Response, nil
}

// publishNode creates Node `name` and publishes the topology of `export` (relative to test/data)
// for it as the exporter does, with the setup ServiceAccount of cluster.sh up.
func publishNode(t testing.TB, c *Cluster, export, name string) {
	t.Helper()
	node := "apiVersion: v1\nkind: Node\nmetadata:\n  name: " + name + "\n  labels: {draguard.io/cluster-test: \"true\"}\n"
	if _, stderr, err := c.Kubectl(node, "apply", "-f", "-"); err != nil {
		t.Fatalf("creating Node %s: %v: %s", name, err, stderr)
	}
	exportOnce(t, c, export, name)
}

// exportOnce publishes the topology of `export` (relative to test/data) for the existing Node
// `name` with `draguard topology export --publish --once`, under the setup ServiceAccount of
// cluster.sh up.
func exportOnce(t testing.TB, c *Cluster, export, name string) {
	t.Helper()
	port, err := os.ReadFile(filepath.Join(c.Dir, "apiserver.port"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(draguardBin(t), "topology", "export", "--publish", "-f", exportPath(t, export), "--node", name,
		"--namespace", releaseNS, "--once")
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+strings.TrimSpace(string(port)),
		"DRAGUARD_SERVICEACCOUNT_DIR="+filepath.Join(c.Dir, "setup-sa"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("publishing the topology of %s: %v: %s", name, err, out)
	}
}

// TestApiServerRestartWhileServing: kube-apiserver stops and starts again while draguard serves.
// A conversion whose ResourceClaimTemplate must be created while the apiserver is down is
// answered within its deadline, by retrying until the apiserver is back; the topology watch
// resumes by itself (a Node published after the restart reaches the model); draguard never
// restarts.
func TestApiServerRestartWhileServing(t *testing.T) {
	ctx := context.Background()
	c := Up(t, g4dn)
	c.Install()
	c.WaitServiceAccount("default")
	client, base := serverClient(t, c)
	// Template creation may take the whole review (mutation.apiTimeoutMs: 3 s by default) and a
	// review 25 s (--request-timeout, 10 s by default): together longer than an apiserver restart
	// (about 10 s here: graceful stop, start, RBAC caches). The server is started again with both.
	var pol map[string]any
	raw, err := os.ReadFile(c.PolicyFile())
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &pol); err != nil {
		t.Fatal(err)
	}
	mut, _ := pol["mutation"].(map[string]any)
	if mut == nil {
		mut = map[string]any{}
		pol["mutation"] = mut
	}
	mut["apiTimeoutMs"] = 25000
	out, err := yaml.Marshal(pol)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c.PolicyFile(), out, 0o644); err != nil {
		t.Fatal(err)
	}
	args, env := serveCommand(t, c.Dir)
	c.StopServer()
	log, err := os.OpenFile(filepath.Join(c.Dir, "logs", "draguard.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	server := &replica{c: c, name: "draguard", args: withFlag(args, "--request-timeout", "25"), env: env, log: log}
	server.start(t)
	t.Cleanup(func() {
		server.kill()
		log.Close()
	})
	Eventually(t, 30*time.Second, "draguard serve ready", func() error {
		resp, err := client.Get(base + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz %d", resp.StatusCode)
		}
		return nil
	})
	Eventually(t, 30*time.Second, "one node in the topology model", func() error {
		if v, err := metricValue(t, c, "draguard_topology_nodes"); err != nil || v != 1 {
			return fmt.Errorf("nodes %v (%v)", v, err)
		}
		return nil
	})

	// The apiserver restarts while a conversion that needs a new template is under review.
	pod := legacyPod("during-restart", "default", 2, nil)
	type answer struct {
		resp    map[string]any
		err     error
		elapsed time.Duration
	}
	restarted := make(chan error, 1)
	go func() { restarted <- script(t, "restart-apiserver", c.Dir) }()
	// The review is sent once the apiserver is gone (its port refuses), so that the template's
	// creation meets the outage.
	apiPort, err := os.ReadFile(filepath.Join(c.Dir, "apiserver.port"))
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "kube-apiserver stopped", func() error {
		resp, err := (&http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}).
			Get("https://127.0.0.1:" + strings.TrimSpace(string(apiPort)) + "/readyz")
		if err == nil {
			resp.Body.Close()
			return fmt.Errorf("still answering")
		}
		return nil
	})
	got := make(chan answer, 1)
	go func() {
		start := time.Now()
		r, err := mutateReview(t, client, base, pod, "25s")
		got <- answer{r, err, time.Since(start)}
	}()
	sent := time.Now()
	if err := <-restarted; err != nil {
		t.Fatalf("restart-apiserver: %v", err)
	}
	t.Logf("kube-apiserver ready again %v after the review was sent", time.Since(sent).Round(time.Millisecond))
	a := <-got
	if a.err != nil {
		t.Fatalf("the review during the restart: %v", a.err)
	}
	t.Logf("review during the apiserver restart answered after %v: allowed %v", a.elapsed.Round(time.Millisecond), a.resp["allowed"])
	if a.resp["allowed"] != true || a.resp["patch"] == nil {
		t.Fatalf("the conversion during the restart was not answered with a patch: %v", a.resp)
	}
	if a.elapsed > 25*time.Second {
		t.Fatalf("answered after %v, past the review's deadline", a.elapsed)
	}
	templates := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates"}
	list, err := c.Dynamic.Resource(templates).Namespace("default").List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) == 0 {
		t.Fatalf("no ResourceClaimTemplate was created through the restart (err %v)", err)
	}

	// The topology watch resumes: a Node published after the restart reaches the model.
	publishNode(t, c, "hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml", "late-node")
	Eventually(t, 60*time.Second, "the node published after the restart in the model", func() error {
		if v, err := metricValue(t, c, "draguard_topology_nodes"); err != nil || v != 2 {
			return fmt.Errorf("nodes %v (%v)", v, err)
		}
		return nil
	})
	select {
	case <-server.done:
		t.Fatalf("draguard serve exited")
	default:
	}
	if resp, err := client.Get(base + "/readyz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("draguard serve not ready after the apiserver restart: %v", err)
	}
}
