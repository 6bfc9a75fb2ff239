package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// jobSetConfigCommand prints JobSet's manager Configuration.
func jobSetConfigCommand(args []string) error {
	fs := flag.NewFlagSet("jobset-config", flag.ExitOnError)
	webhookPort := fs.Int("webhook-port", 0, "port of the webhook server on 127.0.0.1")
	healthPort := fs.Int("health-port", 0, "port of /healthz and /readyz on 127.0.0.1")
	certDir := fs.String("cert-dir", "", "directory with the webhook server's tls.crt and tls.key")
	fs.Parse(args)
	if *webhookPort <= 0 || *healthPort <= 0 || *certDir == "" {
		usage()
	}
	out, err := yaml.Marshal(jobSetSettings(*webhookPort, *healthPort, *certDir))
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// jobSetSettings is the Configuration of JobSet's manager on the host of the harness: the
// release's own (config/components/manager/controller_manager_config.yaml) with the webhook
// server on 127.0.0.1:webhookPort serving the harness's certificate from certDir instead of its
// internal certificate management (which issues certificates for the in-cluster Service), health
// probes on 127.0.0.1:healthPort, no metrics server and no leader election (one manager).
func jobSetSettings(webhookPort, healthPort int, certDir string) object {
	return object{
		"apiVersion":             "config.jobset.x-k8s.io/v1alpha1",
		"kind":                   "Configuration",
		"leaderElection":         object{"leaderElect": false},
		"internalCertManagement": object{"enable": false},
		"webhook":                object{"host": "127.0.0.1", "port": webhookPort, "certDir": certDir},
		"health":                 object{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort)},
		"metrics":                object{"bindAddress": "0"},
	}
}

// jobSetWebhooks reads JobSet's webhook configurations with the patches of its
// webhook/kustomization.yaml applied: JSON patches (RFC 6902) that replace whole webhooks
// (`/webhooks/<i>`) of the configuration their target names. Any other kind of patch means a
// layout this reader does not know, and is an error rather than a silently different webhook.
func jobSetWebhooks(dir string) ([]object, error) {
	configs, err := readDocuments(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	k, err := readDocuments(filepath.Join(dir, "kustomization.yaml"))
	if err != nil || len(k) != 1 {
		return nil, fmt.Errorf("webhook/kustomization.yaml: %v", err)
	}
	patches, _ := k[0]["patches"].([]any)
	if len(patches) == 0 {
		return nil, fmt.Errorf("webhook/kustomization.yaml has no patches")
	}
	for _, p := range patches {
		path, _ := lookup(p, "path").(string)
		kind, _ := lookup(p, "target", "kind").(string)
		name, _ := lookup(p, "target", "name").(string)
		if path == "" || kind == "" || name == "" {
			return nil, fmt.Errorf("webhook/kustomization.yaml: a patch without path, target kind or name: %v", p)
		}
		var target object
		for _, c := range configs {
			if c["kind"] == kind && lookup(c, "metadata", "name") == name {
				target = c
			}
		}
		if target == nil {
			return nil, fmt.Errorf("%s: target %s %s not in manifests.yaml", path, kind, name)
		}
		b, err := os.ReadFile(filepath.Join(dir, path))
		if err != nil {
			return nil, err
		}
		var ops []object
		if err := yaml.Unmarshal(b, &ops); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		for _, op := range ops {
			if err := replaceWebhook(target, op); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	return configs, nil
}

// replaceWebhook applies one JSON patch operation `{op: replace, path: /webhooks/<i>, value}`.
func replaceWebhook(config, op object) error {
	path, _ := op["path"].(string)
	index, found := strings.CutPrefix(path, "/webhooks/")
	i, err := strconv.Atoi(index)
	if op["op"] != "replace" || !found || err != nil {
		return fmt.Errorf("operation %v %v: only replace /webhooks/<index> is understood", op["op"], path)
	}
	hooks, _ := config["webhooks"].([]any)
	if i < 0 || i >= len(hooks) {
		return fmt.Errorf("%s: the configuration has %d webhooks", path, len(hooks))
	}
	value, ok := op["value"].(object)
	if !ok {
		return fmt.Errorf("%s: the value is not a webhook", path)
	}
	hooks[i] = value
	return nil
}
