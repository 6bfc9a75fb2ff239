// Command load POSTs one body to one URL, closed loop (-clients N: each client sends its next
// request when the last is answered) or open loop (-rate R: request i is due at start + i/R
// whatever the answers), for -duration, over HTTP/1.1 keep-alive connections (as wrk does) with an
// optional bearer token. Latencies are taken from when a request was due (open loop: its place in
// the schedule, so a slow server cannot hide its queue) or sent (closed loop) to the end of the
// answer, over 2xx answers only; non-2xx answers and transport errors are counted apart. An
// open-loop request that could not be sent within -late of when it was due (the generator or
// the machine fell behind) is counted late. Open loop uses at most -max-conns connections (an
// overloaded server is not sent a storm of new ones); closed loop one per client. Prints one line:
//
//	RESULT due sent ok non2xx errors late seconds p50_us p95_us p99_us
package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

type result struct {
	mu        sync.Mutex
	latencies []time.Duration // 2xx only
	non2xx    atomic.Int64
	errors    atomic.Int64
	sent      atomic.Int64
	late      atomic.Int64
	codes     sync.Map // status code -> *atomic.Int64, for the log
}

func (r *result) record(due time.Time, resp *http.Response, err error) {
	if err != nil {
		r.errors.Add(1)
		return
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	took := time.Since(due)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		r.non2xx.Add(1)
		c, _ := r.codes.LoadOrStore(resp.StatusCode, new(atomic.Int64))
		c.(*atomic.Int64).Add(1)
		return
	}
	r.mu.Lock()
	r.latencies = append(r.latencies, took)
	r.mu.Unlock()
}

func percentile(sorted []time.Duration, p float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p/100*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i].Microseconds()
}

func main() {
	url := flag.String("url", "", "URL to POST to")
	bodyFile := flag.String("body", "", "file with the request body (JSON)")
	token := flag.String("token", "", "bearer token (optional)")
	clients := flag.Int("clients", 0, "closed loop: concurrent clients")
	rate := flag.Float64("rate", 0, "open loop: requests per second")
	duration := flag.Duration("duration", 5*time.Second, "how long to send")
	timeout := flag.Duration("timeout", 10*time.Second, "per-request timeout (an error when exceeded)")
	lateAfter := flag.Duration("late", 10*time.Millisecond, "open loop: a request sent this long after it was due is late")
	maxInFlight := flag.Int("max-in-flight", 20000, "open loop: requests outstanding at most (more are errors)")
	maxConns := flag.Int("max-conns", 200, "open loop: connections at most (a request waits for one, its wait counted in its latency)")
	flag.Parse()
	if *url == "" || *bodyFile == "" || (*clients > 0) == (*rate > 0) {
		fmt.Fprintln(os.Stderr, "usage: load -url URL -body FILE (-clients N | -rate R) [-duration D] [-token T]")
		os.Exit(2)
	}
	body, err := os.ReadFile(*bodyFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
	conns := *maxConns
	if *clients > 0 {
		conns = *clients // one connection per client, as wrk
	}
	transport := &http.Transport{
		// As wrk: no certificate verification, HTTP/1.1 keep-alive (an empty TLSNextProto map turns
		// HTTP/2 off), enough idle connections that none is closed between requests.
		TLSClientConfig:     &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // a benchmark on loopback
		TLSNextProto:        map[string]func(string, *tls.Conn) http.RoundTripper{},
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns,
		// An overloaded server is not sent a storm of new connections (each a TLS handshake it
		// must make): requests wait for a connection instead, and the wait is in their latency.
		MaxConnsPerHost:    conns,
		IdleConnTimeout:    time.Minute,
		DisableCompression: true,
	}
	client := &http.Client{Transport: transport, Timeout: *timeout}
	send := func(ctx context.Context) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, *url, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		if *token != "" {
			req.Header.Set("Authorization", "Bearer "+*token)
		}
		return client.Do(req)
	}

	var r result
	var wg sync.WaitGroup
	ctx := context.Background()
	start := time.Now()
	end := start.Add(*duration)
	due := int64(0)
	if *clients > 0 {
		for c := 0; c < *clients; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(end) {
					t := time.Now()
					r.sent.Add(1)
					resp, err := send(ctx)
					r.record(t, resp, err)
				}
			}()
		}
		wg.Wait()
		due = r.sent.Load()
	} else {
		interval := time.Duration(float64(time.Second) / *rate)
		var inFlight atomic.Int64
		for i := int64(0); ; i++ {
			at := start.Add(time.Duration(i) * interval)
			if !at.Before(end) {
				break
			}
			due++
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			if time.Since(at) > *lateAfter {
				r.late.Add(1)
			}
			if inFlight.Load() >= int64(*maxInFlight) {
				r.errors.Add(1)
				continue
			}
			inFlight.Add(1)
			r.sent.Add(1)
			wg.Add(1)
			go func(at time.Time) {
				defer wg.Done()
				defer inFlight.Add(-1)
				resp, err := send(ctx)
				r.record(at, resp, err)
			}(at)
		}
		wg.Wait()
	}
	seconds := duration.Seconds() // answers that come after the end belong to the run
	sort.Slice(r.latencies, func(i, j int) bool { return r.latencies[i] < r.latencies[j] })
	r.codes.Range(func(k, v any) bool {
		fmt.Fprintf(os.Stderr, "load: %d answers with status %d\n", v.(*atomic.Int64).Load(), k)
		return true
	})
	fmt.Printf("RESULT %d %d %d %d %d %d %.3f %d %d %d\n", due, r.sent.Load(), len(r.latencies), r.non2xx.Load(),
		r.errors.Load(), r.late.Load(), seconds, percentile(r.latencies, 50), percentile(r.latencies, 95),
		percentile(r.latencies, 99))
}
