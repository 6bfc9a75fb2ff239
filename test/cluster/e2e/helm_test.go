package e2e

import (
	"encoding/base64"
	"os"
	osexec "os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"
)

// helm runs the chart tests' helm against the cluster; returns its combined output.
func helm(t *testing.T, c *Cluster, args ...string) (string, error) {
	t.Helper()
	find := filepath.Join(sourceDir(t), "test", "unit", "chart", "find-helm.sh")
	bin, err := osexec.Command(find).Output()
	if err != nil {
		t.Fatalf("no helm (scripts/install-test-tools.sh installs it): %v", err)
	}
	cmd := osexec.Command(strings.TrimSpace(string(bin)), append(args, "--kubeconfig", filepath.Join(c.Dir, "kubeconfig"))...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// kubectlOK runs kubectl and fails the test on an error.
func kubectlOK(t *testing.T, c *Cluster, stdin string, args ...string) string {
	t.Helper()
	out, stderr, err := c.Kubectl(stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr)
	}
	return out
}

// uninstallLikeHelm does what `helm uninstall` does with the chart's pre-delete hook, which
// needs a kubelet to run: the hook's ServiceAccount and RBAC are created, the hook Job's command
// runs on the host with that ServiceAccount's token, the hook objects are deleted, then the
// release (--no-hooks).
func uninstallLikeHelm(t *testing.T, c *Cluster) {
	t.Helper()
	hooks, err := helm(t, c, "get", "hooks", "draguard", "-n", releaseNS)
	if err != nil {
		t.Fatalf("helm get hooks: %v: %s", err, hooks)
	}
	var rbac []string
	var args []string
	sa := ""
	for _, doc := range splitYAML(hooks) {
		var obj struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Template struct {
					Spec struct {
						ServiceAccountName string `json:"serviceAccountName"`
						Containers         []struct {
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil || obj.Kind == "" {
			continue
		}
		switch obj.Kind {
		case "Job":
			if !strings.HasSuffix(obj.Metadata.Name, "-uninstall") {
				continue
			}
			sa = obj.Spec.Template.Spec.ServiceAccountName
			args = obj.Spec.Template.Spec.Containers[0].Args
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			rbac = append(rbac, doc)
		}
	}
	if sa == "" || len(args) == 0 {
		t.Fatalf("the release has no uninstall hook Job:\n%s", hooks)
	}
	manifest := strings.Join(rbac, "\n---\n")
	kubectlOK(t, c, manifest, "apply", "-n", releaseNS, "-f", "-")
	token := kubectlOK(t, c, "", "-n", releaseNS, "create", "token", sa, "--duration=10m")
	saDir := filepath.Join(t.TempDir(), "hook-sa")
	if err := os.MkdirAll(saDir, 0o700); err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"token": []byte(strings.TrimSpace(token)), "ca.crt": ca, "namespace": []byte(releaseNS)} {
		if err := os.WriteFile(filepath.Join(saDir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port, err := os.ReadFile(filepath.Join(c.Dir, "apiserver.port"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := osexec.Command(draguardBin(t), args...)
	cmd.Env = append(os.Environ(), "KUBERNETES_SERVICE_HOST=127.0.0.1", "KUBERNETES_SERVICE_PORT="+strings.TrimSpace(string(port)),
		"DRAGUARD_SERVICEACCOUNT_DIR="+saDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the uninstall hook's command (draguard %s) under its ServiceAccount: %v: %s", strings.Join(args, " "), err, out)
	}
	kubectlOK(t, c, manifest, "delete", "-n", releaseNS, "-f", "-")
	if out, err := helm(t, c, "uninstall", "draguard", "-n", releaseNS, "--no-hooks", "--wait"); err != nil {
		t.Fatalf("helm uninstall: %v: %s", err, out)
	}
}

// TestHelmLifecycle: the chart in every TLS mode, with metrics (ServiceMonitor, PrometheusRule),
// NetworkPolicy, exporter, background audit, backstop and the Grafana dashboard on, against the
// real apiserver: every object accepted, an upgrade with changed values converges, uninstall (with
// the pre-delete hook's command under the hook's own ServiceAccount) leaves no webhook
// configuration, Secret or release object behind, and a reinstall works.
func TestHelmLifecycle(t *testing.T) {
	c := Up(t, g4dn)
	// The CRDs of the optional kinds (cert-manager, Prometheus operator, PolicyReport).
	crds, err := filepath.Glob(filepath.Join(sourceDir(t), "test", "data", "crds", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in test/data/crds: %v", err)
	}
	for _, f := range crds {
		kubectlOK(t, c, "", "apply", "--server-side", "-f", f)
	}
	for _, crd := range []string{"certificates.cert-manager.io", "issuers.cert-manager.io", "servicemonitors.monitoring.coreos.com",
		"prometheusrules.monitoring.coreos.com", "policyreports.wgpolicyk8s.io"} {
		kubectlOK(t, c, "", "wait", "--for=condition=Established", "--timeout=60s", "crd/"+crd)
	}
	// A user-provided serving Secret for tls.mode=external (the harness's certificate).
	kubectlOK(t, c, "", "-n", releaseNS, "create", "secret", "tls", "user-tls",
		"--cert", filepath.Join(c.Dir, "pki", "draguard.crt"), "--key", filepath.Join(c.Dir, "pki", "draguard.key"))
	caPEM, err := os.ReadFile(filepath.Join(c.Dir, "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	chart := filepath.Join(sourceDir(t), "charts", "draguard")
	common := []string{"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "networkPolicy.enabled=true", "--set", "exporter.enabled=true", "--set", "audit.enabled=true",
		"--set", "backstop.enabled=true", "--set", "grafana.dashboards.enabled=true"}
	modes := []struct {
		name string
		args []string
	}{
		{"helm", []string{"--set", "tls.mode=helm"}},
		{"self", []string{"--set", "tls.mode=self"}},
		{"cert-manager", []string{"--set", "tls.mode=cert-manager"}},
		{"external", []string{"--set", "tls.mode=external", "--set", "tls.external.secretName=user-tls",
			"--set", "tls.external.caBundle=" + base64.StdEncoding.EncodeToString(caPEM)}},
	}
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			start := time.Now()
			values := append(append([]string{}, common...), m.args...)
			install := func() {
				t.Helper()
				if out, err := helm(t, c, append([]string{"install", "draguard", chart, "-n", releaseNS}, values...)...); err != nil {
					t.Fatalf("helm install (tls.mode=%s): %v: %s", m.name, err, out)
				}
				// Every object of the release is in the apiserver.
				manifest, err := helm(t, c, "get", "manifest", "draguard", "-n", releaseNS)
				if err != nil {
					t.Fatalf("helm get manifest: %v", err)
				}
				kubectlOK(t, c, manifest, "get", "-f", "-")
			}
			install()
			if m.name == "self" {
				// The Secret the server would create on its first start: the hook must delete it.
				kubectlOK(t, c, "", "-n", releaseNS, "create", "secret", "generic", "draguard-tls", "--from-literal=ca.crt=x")
			}

			// An upgrade with changed values converges.
			up := append(append([]string{"upgrade", "draguard", chart, "-n", releaseNS}, values...),
				"--set", "replicaCount=2", "--set", "policy.mode=audit", "--set", "validating.timeoutSeconds=5",
				"--set", "audit.intervalSeconds=300")
			if out, err := helm(t, c, up...); err != nil {
				t.Fatalf("helm upgrade: %v: %s", err, out)
			}
			if got := kubectlOK(t, c, "", "-n", releaseNS, "get", "deployment", "draguard", "-o", "jsonpath={.spec.replicas}"); got != "2" {
				t.Errorf("replicas after the upgrade: %q", got)
			}
			got := kubectlOK(t, c, "", "get", "validatingwebhookconfiguration", "draguard",
				"-o", "jsonpath={range .webhooks[*]}{.name}={.timeoutSeconds}/{.failurePolicy} {end}")
			if len(strings.Fields(got)) == 0 {
				t.Errorf("the validating webhook configuration has no webhooks")
			}
			for _, w := range strings.Fields(got) {
				name, setting, _ := strings.Cut(w, "=")
				// The shape-object webhook refuses whatever the policy's mode (docs/topology.md).
				want := "5/Ignore"
				if name == "shapes.topology.draguard.io" {
					want = "5/Fail"
				}
				if setting != want {
					t.Errorf("validating webhook %s after the upgrade to audit mode: %s (want %s)", name, setting, want)
				}
			}
			policy := kubectlOK(t, c, "", "-n", releaseNS, "get", "configmap", "draguard-policy", "-o", "jsonpath={.data.policy\\.yaml}")
			if !strings.Contains(policy, "mode: audit") {
				t.Errorf("the policy ConfigMap after the upgrade is not in audit mode")
			}
			args := kubectlOK(t, c, "", "-n", releaseNS, "get", "deployment", "draguard", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
			if !strings.Contains(args, `"300"`) {
				t.Errorf("the Deployment's arguments after the upgrade miss --audit-interval 300: %s", args)
			}

			// Uninstall leaves nothing behind; a reinstall works and uninstalls as cleanly.
			for round := 0; round < 2; round++ {
				uninstallLikeHelm(t, c)
				left := kubectlOK(t, c, "", "get", "validatingwebhookconfigurations,mutatingwebhookconfigurations,validatingadmissionpolicies,validatingadmissionpolicybindings,clusterroles,clusterrolebindings",
					"-l", "app.kubernetes.io/instance=draguard", "-o", "name")
				// Pods are left out: without a kubelet a deleted Pod bound to a Node stays Terminating.
				left += kubectlOK(t, c, "", "-n", releaseNS, "get", "deployments,replicasets,daemonsets,jobs,services,configmaps,secrets,serviceaccounts,roles,rolebindings,networkpolicies,poddisruptionbudgets,resourcequotas,issuers.cert-manager.io,certificates.cert-manager.io,servicemonitors,prometheusrules",
					"-l", "app.kubernetes.io/instance=draguard", "-o", "name")
				for _, name := range []string{"validatingwebhookconfiguration/draguard", "mutatingwebhookconfiguration/draguard"} {
					if _, _, err := c.Kubectl("", "get", name); err == nil {
						left += name + "\n"
					}
				}
				if _, _, err := c.Kubectl("", "-n", releaseNS, "get", "secret", "draguard-tls"); err == nil && m.name == "self" {
					left += "secret/draguard-tls (the server's)\n"
				}
				if strings.TrimSpace(left) != "" {
					t.Fatalf("left behind by uninstall (round %d):\n%s", round+1, left)
				}
				if round == 0 {
					install()
				}
			}
			t.Logf("tls.mode=%s: install, upgrade, uninstall, reinstall, uninstall in %v", m.name, time.Since(start).Round(time.Millisecond))
		})
	}
}
