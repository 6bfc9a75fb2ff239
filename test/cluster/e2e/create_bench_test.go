package e2e

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// draPod is a compliant Pod: one GPU through a ResourceClaimTemplate (sent to draguard by the
// webhooks' matchConditions, validated, left unchanged).
func draPod(name, ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "registry.example/cuda:12",
				"resources": map[string]any{"claims": []any{map[string]any{"name": "gpu"}}}}},
			"resourceClaims": []any{map[string]any{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}},
		},
	}}
}

// createRate creates Pods (server-side dry run) from `clients` goroutines for `d` and returns the
// rate and the latency percentiles of the create calls.
func createRate(b *testing.B, c *Cluster, clients int, d time.Duration, pod func(i int) *unstructured.Unstructured) (rate float64, p50, p99 time.Duration) {
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	var failed int
	var firstErr error
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				start := time.Now()
				out := c.Create(ctx, pod(w*1000000+i), true)
				el := time.Since(start)
				mu.Lock()
				if out.Err != nil {
					if failed == 0 {
						firstErr = out.Err
					}
					failed++
				} else {
					lat = append(lat, el)
				}
				mu.Unlock()
			}
		}(w)
	}
	wg.Wait()
	if failed > 0 || len(lat) == 0 {
		b.Fatalf("%d creates failed (first: %v), %d succeeded", failed, firstErr, len(lat))
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	return float64(len(lat)) / d.Seconds(), lat[len(lat)/2], lat[len(lat)*99/100]
}

// toggle creates (on) or deletes (off) copies of cluster-scoped objects listed before.
func toggle[T any, P interface {
	*T
	metav1.Object
}](ctx context.Context, on bool, items []T,
	create func(context.Context, P, metav1.CreateOptions) (P, error), del func(context.Context, string, metav1.DeleteOptions) error) error {
	for i := range items {
		o := P(&items[i])
		var err error
		if on {
			o.SetResourceVersion("")
			_, err = create(ctx, o, metav1.CreateOptions{})
		} else {
			err = del(ctx, o.GetName(), metav1.DeleteOptions{})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkPodCreate: Pods per second through kube-apiserver with draguard's webhooks (and
// backstop policy) registered and without (the same cluster, rounds alternating), at 50
// concurrent clients: the cost draguard adds to Pod creation, for a compliant DRA Pod (validated)
// and a legacy 1-GPU Pod (converted by /mutate, then validated). Not run by CTest; bench/cluster-create.sh runs it.
func BenchmarkPodCreate(b *testing.B) {
	c := Up(b, g4dn)
	c.Install()
	ctx := context.Background()
	c.WaitServiceAccount("default")
	kinds := []struct {
		name string
		pod  func(i int) *unstructured.Unstructured
	}{
		{"dra-pod", func(i int) *unstructured.Unstructured { return draPod(fmt.Sprintf("p%d", i), "default") }},
		{"legacy-pod", func(i int) *unstructured.Unstructured { return legacyPod(fmt.Sprintf("p%d", i), "default", 1, nil) }},
	}
	vwc, err := c.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	mwc, err := c.Kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// "none" is a cluster without draguard: its backstop policy binding goes too.
	vapb, err := c.Kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=draguard"})
	if err != nil {
		b.Fatal(err)
	}
	register := func(on bool) {
		adm := c.Kube.AdmissionregistrationV1()
		for _, err := range []error{
			toggle(ctx, on, vapb.Items, adm.ValidatingAdmissionPolicyBindings().Create, adm.ValidatingAdmissionPolicyBindings().Delete),
			toggle(ctx, on, vwc.Items, adm.ValidatingWebhookConfigurations().Create, adm.ValidatingWebhookConfigurations().Delete),
			toggle(ctx, on, mwc.Items, adm.MutatingWebhookConfigurations().Create, adm.MutatingWebhookConfigurations().Delete),
		} {
			if err != nil {
				b.Fatal(err)
			}
		}
		time.Sleep(2 * time.Second) // the apiserver's webhook informer picks the change up
	}
	const rounds, clients = 3, 50
	const d = 5 * time.Second
	for _, k := range kinds {
		results := map[string][]float64{}
		p99s := map[string][]time.Duration{}
		registered := true
		for r := 0; r < rounds; r++ {
			for _, mode := range []string{"draguard", "none"} {
				if (mode == "draguard") != registered {
					register(mode == "draguard")
					registered = mode == "draguard"
				}
				rate, p50, p99 := createRate(b, c, clients, d, k.pod)
				results[mode] = append(results[mode], rate)
				p99s[mode] = append(p99s[mode], p99)
				b.Logf("%s %s round %d: %.0f Pods/s, p50 %v, p99 %v", k.name, mode, r+1, rate, p50, p99)
			}
		}
		med := func(v []float64) float64 { s := append([]float64(nil), v...); sort.Float64s(s); return s[len(s)/2] }
		medD := func(v []time.Duration) time.Duration {
			s := append([]time.Duration(nil), v...)
			sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
			return s[len(s)/2]
		}
		fmt.Printf("%s clients %d: draguard %.0f Pods/s (p99 %v), none %.0f Pods/s (p99 %v): ratio %.2f\n", k.name, clients,
			med(results["draguard"]), medD(p99s["draguard"]), med(results["none"]), medD(p99s["none"]),
			med(results["draguard"])/med(results["none"]))
		if !registered {
			register(true)
			registered = true
		}
	}
}
