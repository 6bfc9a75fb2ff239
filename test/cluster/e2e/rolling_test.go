package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// replica is one `draguard serve` process of a rolling restart, started by the test with the
// arguments and environment `cluster.sh install` gave the chart's server, on its own port.
type replica struct {
	args []string
	env  []string
	port int
	log  *os.File
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *replica) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = r.env, r.log, r.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting draguard serve: %v", err)
	}
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); close(done) }(r.done)
}

// terminate sends SIGTERM and waits for the drain to end with the process.
func (r *replica) terminate(t *testing.T, limit time.Duration) {
	t.Helper()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(limit):
		_ = r.cmd.Process.Kill()
		<-r.done
		t.Fatalf("draguard serve on port %d did not exit within %v of SIGTERM", r.port, limit)
	}
}

func (r *replica) kill() {
	if r.cmd != nil {
		_ = r.cmd.Process.Kill()
		<-r.done
	}
}

// balancer stands in for the Service: a TCP proxy that sends each new connection to the next
// replica whose /readyz answers 200, polled every 100 ms as endpoints follow readiness. Like
// kube-proxy, it never moves a connection: an open one stays with its replica until it closes.
type balancer struct {
	ln      net.Listener
	mu      sync.Mutex
	ready   map[int]bool
	ports   []int
	next    int
	stop    chan struct{}
	wg      sync.WaitGroup
	probe   *http.Client
	refused atomic.Int64 // connections with no ready replica
}

// newBalancer listens at once (its address goes into the chart); replicas come with setPorts.
func newBalancer(t *testing.T, caFile string) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	b := &balancer{ln: ln, ready: map[int]bool{}, stop: make(chan struct{}),
		probe: &http.Client{Timeout: time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}}
	b.wg.Add(2)
	go b.accept()
	go b.poll()
	return b
}

func (b *balancer) port() int { return b.ln.Addr().(*net.TCPAddr).Port }

func (b *balancer) setPorts(ports []int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.ports = append([]int(nil), ports...)
}

func (b *balancer) isReady(port int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ready[port]
}

func (b *balancer) poll() {
	defer b.wg.Done()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		b.mu.Lock()
		ports := append([]int(nil), b.ports...)
		b.mu.Unlock()
		for _, p := range ports {
			resp, err := b.probe.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", p))
			ok := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			b.mu.Lock()
			b.ready[p] = ok
			b.mu.Unlock()
		}
		select {
		case <-b.stop:
			return
		case <-tick.C:
		}
	}
}

func (b *balancer) pick() (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i := 0; i < len(b.ports); i++ {
		p := b.ports[(b.next+i)%len(b.ports)]
		if b.ready[p] {
			b.next = (b.next + i + 1) % len(b.ports)
			return p, true
		}
	}
	return 0, false
}

func (b *balancer) accept() {
	defer b.wg.Done()
	for {
		in, err := b.ln.Accept()
		if err != nil {
			return
		}
		port, ok := b.pick()
		if !ok {
			b.refused.Add(1)
			in.Close()
			continue
		}
		out, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			b.refused.Add(1)
			in.Close()
			continue
		}
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			pipe(in, out)
		}()
	}
}

// pipe copies both ways until both directions have ended, passing half-closes on.
func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if c, ok := dst.(*net.TCPConn); ok {
			_ = c.CloseWrite()
		}
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
	a.Close()
	b.Close()
}

func (b *balancer) close() {
	close(b.stop)
	b.ln.Close()
}

// serveCommand reads the command line and environment of the `draguard serve` that cluster.sh
// install started.
func serveCommand(t *testing.T, dir string) (args, env []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "pids", "draguard"))
	if err != nil {
		t.Fatal(err)
	}
	pid := strings.TrimSpace(string(b))
	read := func(name string) []string {
		raw, err := os.ReadFile(filepath.Join("/proc", pid, name))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	}
	return read("cmdline"), read("environ")
}

// withFlag returns args with `flag` set to `value` (replaced, or added at the end).
func withFlag(args []string, flag, value string) []string {
	out := append([]string(nil), args...)
	for i := 0; i+1 < len(out); i++ {
		if out[i] == flag {
			out[i+1] = value
			return out
		}
	}
	return append(out, flag, value)
}

// TestRollingRestartLosesNoAdmission: two replicas behind a Service stand-in, the webhooks with
// failurePolicy Fail pointing at it, a steady stream of Pod creations (legacy, converted by
// /mutate, and DRA, validated) through kube-apiserver, and the replicas restarted one after the
// other (SIGTERM, drain, start) as a Deployment's rolling update does: no create may fail.
func TestRollingRestartLosesNoAdmission(t *testing.T) {
	c := Up(t, g4dn)
	lb := newBalancer(t, filepath.Join(c.Dir, "pki", "ca.crt"))
	t.Cleanup(lb.close)
	c.Install("--set", "webhook.url=https://127.0.0.1:"+strconv.Itoa(lb.port()),
		"--set", "validating.failurePolicy=Fail", "--set", "mutation.failurePolicy=Fail", "--set", "shutdownDelaySeconds=3")
	c.WaitServiceAccount("default")
	args, env := serveCommand(t, c.Dir)
	c.StopServer()
	replicas := make([]*replica, 2)
	ports := make([]int, 2)
	for i := range replicas {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		l.Close()
		state := filepath.Join(c.Dir, "serve", fmt.Sprintf("state-%d", i))
		if err := os.MkdirAll(state, 0o700); err != nil {
			t.Fatal(err)
		}
		log, err := os.Create(filepath.Join(c.Dir, "logs", fmt.Sprintf("replica-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		a := withFlag(args, "--listen", fmt.Sprintf("127.0.0.1:%d", ports[i]))
		a = withFlag(a, "--state-dir", state)
		replicas[i] = &replica{args: a, env: append(env, fmt.Sprintf("POD_NAME=draguard-%d", i)), port: ports[i], log: log}
	}
	t.Cleanup(func() {
		for _, r := range replicas {
			r.kill()
			r.log.Close()
		}
	})
	for _, r := range replicas {
		r.start(t)
	}
	lb.setPorts(ports)
	bothReady := func() error {
		for _, p := range ports {
			if !lb.isReady(p) {
				return fmt.Errorf("replica on %d not ready", p)
			}
		}
		return nil
	}
	Eventually(t, 60*time.Second, "both replicas ready", bothReady)

	ctx := context.Background()
	pods := []func(i int) *unstructured.Unstructured{
		func(i int) *unstructured.Unstructured { return legacyPod(fmt.Sprintf("legacy-%d", i), "default", 1, nil) },
		func(i int) *unstructured.Unstructured { return draPod(fmt.Sprintf("dra-%d", i), "default") },
	}
	// What each kind gets when nothing restarts: the answers a restart must not change.
	Eventually(t, 30*time.Second, "the webhooks answer through the balancer", func() error {
		for k, pod := range pods {
			if out := c.Create(ctx, pod(k), true); out.Err != nil {
				return fmt.Errorf("kind %d: %v", k, out.Err)
			}
		}
		return nil
	})

	var sent, failed atomic.Int64
	var errMu sync.Mutex
	var errs []string
	stop := make(chan struct{})
	var load sync.WaitGroup
	const workers, perSecond = 8, 40
	tick := time.NewTicker(time.Second / perSecond)
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		for i := 0; ; i++ {
			select {
			case <-stop:
				tick.Stop()
				return
			case <-tick.C:
				jobs <- i
			}
		}
	}()
	for w := 0; w < workers; w++ {
		load.Add(1)
		go func() {
			defer load.Done()
			for i := range jobs {
				out := c.Create(ctx, pods[i%len(pods)](i), true)
				sent.Add(1)
				if out.Err != nil {
					failed.Add(1)
					errMu.Lock()
					if len(errs) < 5 {
						errs = append(errs, out.Err.Error())
					}
					errMu.Unlock()
				}
			}
		}()
	}
	started := time.Now()
	Eventually(t, 30*time.Second, "load running", func() error {
		if sent.Load() < 100 {
			return fmt.Errorf("%d sent", sent.Load())
		}
		return nil
	})
	for i, r := range replicas {
		before := sent.Load()
		r.terminate(t, 30*time.Second)
		r.start(t)
		Eventually(t, 60*time.Second, fmt.Sprintf("replica %d ready again", i), bothReady)
		t.Logf("replica %d restarted: %d creates meanwhile", i, sent.Load()-before)
	}
	// Some more load on the restarted pair, then stop.
	after := sent.Load()
	Eventually(t, 30*time.Second, "load after the restarts", func() error {
		if sent.Load() < after+100 {
			return fmt.Errorf("%d sent since", sent.Load()-after)
		}
		return nil
	})
	close(stop)
	load.Wait()
	elapsed := time.Since(started)
	t.Logf("rolling restart: %d Pod creates in %v (%.0f/s), %d failed, %d connections found no ready replica",
		sent.Load(), elapsed.Round(time.Millisecond), float64(sent.Load())/elapsed.Seconds(), failed.Load(), lb.refused.Load())
	if failed.Load() != 0 {
		t.Fatalf("%d of %d creates failed during the rolling restart; first: %s", failed.Load(), sent.Load(), strings.Join(errs, " | "))
	}
	if rate := float64(sent.Load()) / elapsed.Seconds(); rate < 20 {
		t.Fatalf("only %.1f creates/s: the load was not steady", rate)
	}
}
