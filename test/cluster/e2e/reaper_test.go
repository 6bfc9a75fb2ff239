package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// abruptEnv, when set to "panic:FILE" or "kill:FILE", makes TestHarnessLeavesNothingWhenATestEndsAbruptly
// the child it starts: it brings a cluster up with draguard serve installed, writes the pids of
// its processes to FILE, and then panics in a goroutine of its own (as -test.timeout's alarm
// does: no t.Cleanup runs) or waits for the SIGKILL its parent sends.
const abruptEnv = "DRAGUARD_TEST_ABRUPT_END"

// clusterPids are the pids cluster.sh recorded for a cluster (DIR/pids/* and the reaper).
func clusterPids(dir string) []int {
	var pids []int
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*"))
	files = append(files, filepath.Join(dir, "reaper.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// running reports whether process pid exists and has not ended (a zombie has).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(rest) > 0 && rest[0] != "Z"
}

// TestHarnessLeavesNothingWhenATestEndsAbruptly: a cluster test (a child process of this test
// binary) that panics outside its own goroutine, as a -test.timeout does, or is killed (SIGKILL,
// as CTest's timeout does) ends without its t.Cleanup, so cluster.sh down never runs from it; the
// reaper cluster.sh up started must stop every process of the cluster once the test process is
// gone. (A panic in the test's own goroutine runs its cleanups.)
func TestHarnessLeavesNothingWhenATestEndsAbruptly(t *testing.T) {
	if how, file, ok := strings.Cut(os.Getenv(abruptEnv), ":"); ok {
		c := Up(t, g4dn)
		c.Install()
		pids := clusterPids(c.Dir)
		if err := os.WriteFile(file+".tmp", []byte(strings.Trim(fmt.Sprint(pids), "[]")), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(file+".tmp", file); err != nil { // the parent reads whole lists only
			t.Fatal(err)
		}
		if how == "panic" {
			go func() { panic("a goroutine of a cluster test panics with its cluster up") }()
		}
		time.Sleep(10 * time.Minute) // until the panic ends the process, or the parent's SIGKILL
		return
	}
	for _, how := range []string{"panic", "kill"} {
		t.Run(how, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "pids")
			child := exec.Command(os.Args[0], "-test.run", "^TestHarnessLeavesNothingWhenATestEndsAbruptly$", "-test.v")
			// The child cannot remove its own temporary directories (its cleanups never run): they
			// are made inside one of this test's, removed with it.
			child.Env = append(os.Environ(), abruptEnv+"="+how+":"+file, "TMPDIR="+t.TempDir())
			log, err := os.Create(filepath.Join(t.TempDir(), "child.log"))
			if err != nil {
				t.Fatal(err)
			}
			child.Stdout, child.Stderr = log, log
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- child.Wait() }()
			t.Cleanup(func() { _ = child.Process.Kill() })
			var ended error
			exited := false
			childLog := func() string { b, _ := os.ReadFile(log.Name()); return tail(string(b), 30) }
			var pids []int
			Eventually(t, 3*time.Minute, "the child's cluster up", func() error {
				b, err := os.ReadFile(file)
				if err != nil || len(b) == 0 {
					select {
					case ended = <-done:
						exited = true
						t.Fatalf("the child ended before its cluster was up (%v):\n%s", ended, childLog())
					default:
					}
					return fmt.Errorf("no pids yet")
				}
				pids = nil
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil {
						pids = append(pids, pid)
					}
				}
				return nil
			})
			if how == "kill" {
				_ = child.Process.Kill()
			}
			if !exited {
				ended = <-done
			}
			alive := func() []int {
				var left []int
				for _, pid := range pids {
					if running(pid) {
						left = append(left, pid)
					}
				}
				return left
			}
			t.Cleanup(func() { // never leave them behind, even when the reaper failed
				for _, pid := range alive() {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			})
			if how == "panic" && (ended == nil || !strings.Contains(childLog(), "panics with its cluster up")) {
				t.Fatalf("the child did not panic (%v):\n%s", ended, childLog())
			}
			// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, draguard serve, the reaper
			if len(pids) < 6 {
				t.Fatalf("the child's cluster recorded %d pids (%v), want its 5 processes and the reaper", len(pids), pids)
			}
			gone := time.Now()
			Eventually(t, 60*time.Second, "every process of the child's cluster gone", func() error {
				if left := alive(); len(left) > 0 {
					return fmt.Errorf("still running: %v", left)
				}
				return nil
			})
			t.Logf("%s: the child's %d processes were gone %v after it ended", how, len(pids),
				time.Since(gone).Round(time.Millisecond))
		})
	}
}
