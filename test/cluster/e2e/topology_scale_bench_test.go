package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// scaleExports are the eight hardware shapes of the benchmark's nodes (node i has shape i mod 8),
// scaleSpare the ninth, which one node switches to.
var (
	scaleExports = []string{
		"hwloc/aws_g4dn-metal_2s-8259CL_8xT4_cuda-nvml-opencl_efa.xml",
		"hwloc/hwloc_nvidia-dgx2h_2s-xeon8174_16xV100-SXM3_12xNVSwitch_nvlink-hetero.xml",
		"hwloc/llnl_lassen_ibm-ac922_2s-power9_4xV100-SXM2_cuda-nvml_4xmlx5.xml",
		"hwloc/llnl_tioga_hpe-ex235a_epyc7a53_4numa_8xMI250X-GCD_rsmi_xgmi.xml",
		"hwloc/clemson-palmetto_dell-r740_2s-gold6248_2xV100-PCIe_cuda-nvml_mlx5.xml",
		"hwloc/llnl_corona_supermicro-4124gs_2s-epyc7402_8xMI50_rsmi-opencl.xml",
		"hwloc/llnl_pascal_relion-x1904gt_2s-e5-2695v4_2xP100-PCIe_cuda-nvml-opencl.xml",
		"hwloc/hwloc_ibm-power8-minsky_2s_4xP100-SXM2_nvlink-gpu-cpu-hetero.xml",
	}
	scaleSpare = "hwloc-synthetic/xe8640-like_4xH100-SXM_4numa_nvlink-all_3xmlx5.xml"
)

// etcdBytesInUse compacts etcd's history up to now and returns the bytes its database holds in
// use: what the live objects take, without the old revisions kube-apiserver would compact later.
func etcdBytesInUse(b *testing.B, c *Cluster) int64 {
	b.Helper()
	url, err := os.ReadFile(filepath.Join(c.Dir, "etcd.url"))
	if err != nil {
		b.Fatal(err)
	}
	endpoint := strings.TrimSpace(string(url))
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{endpoint}, DialTimeout: 10 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got, err := cli.Get(ctx, "/", clientv3.WithCountOnly())
	if err != nil {
		b.Fatal(err)
	}
	if _, err := cli.Compact(ctx, got.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		b.Fatal(err)
	}
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		b.Fatal(err)
	}
	return st.DbSizeInUse
}

// parallel runs f(i) for i in [0, n) on `workers` goroutines; the first error fails the benchmark.
func parallel(b *testing.B, n, workers int, f func(i int) error) {
	b.Helper()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
}

// withOwnUUIDs is a copy of a node's topology annotation whose GPU UUIDs are new random ones, as
// another node of the same shape has.
func withOwnUUIDs(annotation string) (string, error) {
	var a map[string]any
	if err := json.Unmarshal([]byte(annotation), &a); err != nil {
		return "", err
	}
	if uuids, ok := a["gpuUUIDs"].([]any); ok {
		for i := range uuids {
			var r [16]byte
			_, _ = rand.Read(r[:])
			h := hex.EncodeToString(r[:])
			uuids[i] = "GPU-" + h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
		}
	}
	out, err := json.Marshal(a)
	return string(out), err
}

// publicationPatch is the exporter's one write: the shape label and the topology annotation.
func publicationPatch(shape, annotation string) []byte {
	p, _ := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{shapeLabel: shape}, "annotations": map[string]string{topologyAnnotation: annotation}}})
	return p
}

// vmHWM is the peak resident set of process `pid` in bytes.
func vmHWM(b *testing.B, pid int) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM")
	return 0
}

// BenchmarkTopologyScale (bench/topology-scale.sh, not run by CTest): N Node objects
// ($TOPOLOGY_SCALE_NODES, default 1000) of the eight shapes of scaleExports, published the way
// the exporter publishes: `draguard topology export --publish --once` itself for the first node of
// each shape (which creates the shape objects), and for every other node the exporter's single
// write (a merge patch of the shape label and the annotation, with GPU UUIDs of its own). It
// prints one line:
//
//	topology-scale nodes N etcd-bytes B rss-bytes R ready-s T propagate-s P
//
// B: what the topology adds to etcd (bytes in use after a compaction, before and after
// publishing); R: the peak RSS (VmHWM) of a draguard serve started afresh once it knows all N
// nodes; T: from its start to /readyz answering 200 with all N nodes in its model; P: from one
// node's write (it switches to a ninth shape) to that shape in the running server's model.
func BenchmarkTopologyScale(b *testing.B) {
	n := 1000
	if v := os.Getenv("TOPOLOGY_SCALE_NODES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < len(scaleExports) {
			b.Fatalf("TOPOLOGY_SCALE_NODES=%q: a number of at least %d", v, len(scaleExports))
		}
	}
	ctx := context.Background()
	c := Up(b, scaleExports[0])
	c.Install()
	seeds := make([]string, len(scaleExports))
	for i, e := range scaleExports {
		seeds[i] = NodeName(e)
	}
	names := append([]string(nil), seeds...)
	for i := len(seeds); i < n; i++ {
		names = append(names, fmt.Sprintf("gpu-%05d", i))
	}
	// The Nodes (the first exists), plain API objects.
	start := time.Now()
	parallel(b, n-1, 32, func(i int) error {
		name := names[i+1]
		_, err := c.Kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"kubernetes.io/hostname": name, "draguard.io/cluster-test": "true"}}}, metav1.CreateOptions{})
		return err
	})
	b.Logf("%d Nodes created in %v", n-1, time.Since(start).Round(time.Millisecond))
	// No topology in etcd before the baseline: `up` published the first node's.
	unpublish(b, c, seeds[0])
	if err := c.Kube.CoreV1().ConfigMaps(releaseNS).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "draguard.io/topology=shape"}); err != nil {
		b.Fatal(err)
	}
	before := etcdBytesInUse(b, c)

	start = time.Now()
	for i, e := range scaleExports {
		exportOnce(b, c, e, seeds[i])
	}
	type publication struct{ shape, annotation string }
	pubs := make([]publication, len(seeds))
	for i, s := range seeds {
		node, err := c.Kube.CoreV1().Nodes().Get(ctx, s, metav1.GetOptions{})
		if err != nil {
			b.Fatal(err)
		}
		pubs[i] = publication{node.Labels[shapeLabel], node.Annotations[topologyAnnotation]}
	}
	parallel(b, n-len(seeds), 32, func(i int) error {
		k := len(seeds) + i
		pub := pubs[k%len(pubs)]
		annotation, err := withOwnUUIDs(pub.annotation)
		if err != nil {
			return err
		}
		_, err = c.Kube.CoreV1().Nodes().Patch(ctx, names[k], types.MergePatchType, publicationPatch(pub.shape, annotation), metav1.PatchOptions{})
		return err
	})
	b.Logf("%d nodes published in %v", n, time.Since(start).Round(time.Millisecond))
	etcdBytes := etcdBytesInUse(b, c) - before

	// The ninth shape: its object is published for a Node deleted at once (the object stays).
	publishNode(b, c, scaleSpare, "spare")
	spareNode, err := c.Kube.CoreV1().Nodes().Get(ctx, "spare", metav1.GetOptions{})
	if err != nil {
		b.Fatal(err)
	}
	spare := publication{spareNode.Labels[shapeLabel], spareNode.Annotations[topologyAnnotation]}
	if err := c.Kube.CoreV1().Nodes().Delete(ctx, "spare", metav1.DeleteOptions{}); err != nil {
		b.Fatal(err)
	}

	// A replica started afresh: the server cluster.sh started is replaced by one with its
	// arguments and environment.
	args, env := serveCommand(b, c.Dir)
	c.StopServer()
	log, err := os.OpenFile(filepath.Join(c.Dir, "logs", "draguard.log"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		b.Fatal(err)
	}
	server := &replica{args: args, env: env, log: log}
	b.Cleanup(func() {
		server.kill()
		log.Close()
	})
	client, base := serverClient(b, c)
	client.Timeout = time.Second
	known := func(nodes, shapes float64) bool {
		v, err := metricValue(b, c, "draguard_topology_nodes")
		if err != nil || v != nodes {
			return false
		}
		s, err := metricValue(b, c, "draguard_topology_shapes")
		return err == nil && s == shapes
	}
	start = time.Now()
	server.start(b)
	for {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("draguard serve not ready with %d nodes after 5 minutes", n)
		}
		if resp, err := client.Get(base + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && known(float64(n), float64(len(scaleExports))) {
				break
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	ready := time.Since(start)
	rss := vmHWM(b, server.cmd.Process.Pid)

	// One node's change reaches the running server.
	moved := names[len(names)-1]
	start = time.Now()
	if _, err := c.Kube.CoreV1().Nodes().Patch(ctx, moved, types.MergePatchType, publicationPatch(spare.shape, spare.annotation), metav1.PatchOptions{}); err != nil {
		b.Fatal(err)
	}
	for !known(float64(n), float64(len(scaleExports)+1)) {
		if time.Since(start) > time.Minute {
			b.Fatalf("the change of node %s did not reach draguard serve within a minute", moved)
		}
		time.Sleep(5 * time.Millisecond)
	}
	propagate := time.Since(start)
	fmt.Printf("topology-scale nodes %d etcd-bytes %d rss-bytes %d ready-s %.2f propagate-s %.2f\n",
		n, etcdBytes, rss, ready.Seconds(), propagate.Seconds())
}
