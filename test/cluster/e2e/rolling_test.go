package e2e

import (
	"context"
	"crypto/tls"
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
	c    *Cluster
	name string // its file in DIR/pids (Cluster.Track)
	args []string
	env  []string
	port int
	log  *os.File
	cmd  *exec.Cmd
	done chan struct{}
}

func (r *replica) start(t testing.TB) {
	t.Helper()
	cmd := exec.Command(r.args[0], r.args[1:]...)
	cmd.Env, cmd.Stdout, cmd.Stderr = r.env, r.log, r.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting draguard serve: %v", err)
	}
	r.c.Track(r.name, cmd.Process)
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); r.c.Untrack(r.name); close(done) }(r.done)
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
// Its readiness probes, like the kubelet's, do not verify the serving certificate.
func newBalancer(t *testing.T) *balancer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &balancer{ln: ln, ready: map[int]bool{}, stop: make(chan struct{}),
		probe: &http.Client{Timeout: time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, DisableKeepAlives: true}}}
	t.Cleanup(b.close)
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
func serveCommand(t testing.TB, dir string) (args, env []string) {
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

// startReplicas replaces the server `cluster.sh install` started by n replicas of it (each its own
// port and state directory, killed at the end of the test) behind lb, and waits until lb sees
// every one ready.
func startReplicas(t *testing.T, c *Cluster, lb *balancer, n int) []*replica {
	t.Helper()
	args, env := serveCommand(t, c.Dir)
	c.StopServer()
	replicas := make([]*replica, n)
	ports := make([]int, n)
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
		replicas[i] = &replica{c: c, name: fmt.Sprintf("replica-%d", i), args: a,
			env: append(env, fmt.Sprintf("POD_NAME=draguard-%d", i)), port: ports[i], log: log}
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
	Eventually(t, 60*time.Second, "every replica ready", lb.allReady)
	return replicas
}

// allReady is nil when every replica answers /readyz.
func (b *balancer) allReady() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.ports {
		if !b.ready[p] {
			return fmt.Errorf("replica on %d not ready", p)
		}
	}
	return nil
}

// load is a steady stream of Pod creates (server-side dry run) through the apiserver: legacy Pods
// (converted by /mutate) and DRA Pods (validated), alternating, `perSecond` from 8 clients.
type load struct {
	sent, failed atomic.Int64
	mu           sync.Mutex
	errs         []string
	stop         chan struct{}
	wg           sync.WaitGroup
	started      time.Time
}

// loadPods are the kinds of Pods the stream alternates.
var loadPods = []func(i int) *unstructured.Unstructured{
	func(i int) *unstructured.Unstructured {
		return legacyPod(fmt.Sprintf("legacy-%d", i), "default", 1, nil)
	},
	func(i int) *unstructured.Unstructured { return draPod(fmt.Sprintf("dra-%d", i), "default") },
}

// startLoad first waits until each kind of Pod is admitted, then starts the stream.
func startLoad(t *testing.T, c *Cluster, perSecond int) *load {
	t.Helper()
	ctx := context.Background()
	Eventually(t, 30*time.Second, "the webhooks answer through the balancer", func() error {
		for k, pod := range loadPods {
			if out := c.Create(ctx, pod(k), true); out.Err != nil {
				return fmt.Errorf("kind %d: %v", k, out.Err)
			}
		}
		return nil
	})
	l := &load{stop: make(chan struct{}), started: time.Now()}
	tick := time.NewTicker(time.Second / time.Duration(perSecond))
	jobs := make(chan int)
	go func() {
		defer close(jobs)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-l.stop:
				return
			case <-tick.C:
				jobs <- i
			}
		}
	}()
	for w := 0; w < 8; w++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := range jobs {
				out := c.Create(ctx, loadPods[i%len(loadPods)](i), true)
				l.sent.Add(1)
				if out.Err != nil {
					l.failed.Add(1)
					l.mu.Lock()
					if len(l.errs) < 5 {
						l.errs = append(l.errs, out.Err.Error())
					}
					l.mu.Unlock()
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

// waitSent waits until n more creates have been sent.
func (l *load) waitSent(t *testing.T, n int64) {
	t.Helper()
	target := l.sent.Load() + n
	Eventually(t, 60*time.Second, fmt.Sprintf("%d more creates", n), func() error {
		if l.sent.Load() < target {
			return fmt.Errorf("%d to go", target-l.sent.Load())
		}
		return nil
	})
}

func (l *load) end() {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
}

// finish stops the stream and fails the test if a create failed or the rate fell below 20/s.
func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	l.end()
	elapsed := time.Since(l.started)
	rate := float64(l.sent.Load()) / elapsed.Seconds()
	t.Logf("%s: %d Pod creates in %v (%.0f/s), %d failed", what, l.sent.Load(), elapsed.Round(time.Millisecond), rate, l.failed.Load())
	if l.failed.Load() != 0 {
		t.Fatalf("%s: %d of %d creates failed; first: %s", what, l.failed.Load(), l.sent.Load(), strings.Join(l.errs, " | "))
	}
	if rate < 20 {
		t.Fatalf("%s: only %.1f creates/s: the load was not steady", what, rate)
	}
}

// TestRollingRestartLosesNoAdmission: two replicas behind a Service stand-in, the webhooks with
// failurePolicy Fail pointing at it, a steady stream of Pod creations (legacy, converted by
// /mutate, and DRA, validated) through kube-apiserver, and the replicas restarted one after the
// other (SIGTERM, drain, start) as a Deployment's rolling update does: no create may fail.
func TestRollingRestartLosesNoAdmission(t *testing.T) {
	c := Up(t, g4dn)
	lb := newBalancer(t)
	c.Install("--set", "webhook.url=https://127.0.0.1:"+strconv.Itoa(lb.port()),
		"--set", "validating.failurePolicy=Fail", "--set", "mutation.failurePolicy=Fail", "--set", "shutdownDelaySeconds=3")
	c.WaitServiceAccount("default")
	replicas := startReplicas(t, c, lb, 2)
	l := startLoad(t, c, 40)
	l.waitSent(t, 100)
	for i, r := range replicas {
		before := l.sent.Load()
		r.terminate(t, 30*time.Second)
		r.start(t)
		Eventually(t, 60*time.Second, fmt.Sprintf("replica %d ready again", i), lb.allReady)
		t.Logf("replica %d restarted: %d creates meanwhile", i, l.sent.Load()-before)
	}
	l.waitSent(t, 100)
	l.finish(t, "rolling restart")
	t.Logf("%d connections found no ready replica", lb.refused.Load())
}
