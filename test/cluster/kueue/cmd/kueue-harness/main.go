// Command kueue-harness prepares what test/cluster/cluster.sh needs to run Kueue's manager and
// JobSet's on the host against the harness's kube-apiserver, from the files of their modules that
// build.sh copied next to the binaries (the same module versions as the managers):
//
//	kueue-harness config -in CONFIG -webhook-port P -health-port H -cert-dir DIR
//	    prints the Configuration to start Kueue's manager with: CONFIG (a
//	    config.kueue.x-k8s.io/v1beta2 Configuration: the settings under test) with what a manager
//	    outside any cluster needs set over it (see hostSettings)
//	kueue-harness manifests -config-dir DIR -url URL -ca-bundle FILE [-prefix kueue-] [-part crds|webhooks]
//	    prints Kueue's CRDs and webhook configurations from DIR (the module's config/components)
//	    as its kustomize overlay (config/default) makes them — configuration names with the prefix,
//	    the job and pod webhooks limited to namespaces other than kube-system and kueue-system, the
//	    conversion webhooks of the CRDs it patches — with every webhook at URL (the manager's
//	    webhook server on the host), trusted through the CA in FILE
//	kueue-harness jobset-config -webhook-port P -health-port H -cert-dir DIR
//	    prints the config.jobset.x-k8s.io/v1alpha1 Configuration of JobSet's manager on the host
//	    (see jobSetSettings)
//	kueue-harness jobset-manifests -config-dir DIR -url URL -ca-bundle FILE [-prefix jobset-] [-part crds|webhooks]
//	    the same for JobSet's config/components: its CRD, and its webhook configurations with the
//	    JSON patches of webhook/kustomization.yaml applied (the Pod webhooks limited to Pods of a
//	    JobSet)
package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "config":
		err = configCommand(os.Args[2:])
	case "manifests":
		err = manifestsCommand(os.Args[2:], "kueue-", kueueWebhooks)
	case "jobset-config":
		err = jobSetConfigCommand(os.Args[2:])
	case "jobset-manifests":
		err = manifestsCommand(os.Args[2:], "jobset-", jobSetWebhooks)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "kueue-harness %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: kueue-harness config -in CONFIG -webhook-port P -health-port H -cert-dir DIR\n"+
		"       kueue-harness manifests -config-dir DIR -url URL -ca-bundle FILE [-prefix kueue-] [-part crds|webhooks]\n"+
		"       kueue-harness jobset-config -webhook-port P -health-port H -cert-dir DIR\n"+
		"       kueue-harness jobset-manifests -config-dir DIR -url URL -ca-bundle FILE [-prefix jobset-] [-part crds|webhooks]")
	os.Exit(2)
}

type object = map[string]any

// configCommand prints the manager's Configuration.
func configCommand(args []string) error {
	fs := flag.NewFlagSet("config", flag.ExitOnError)
	in := fs.String("in", "", "the Configuration under test (YAML)")
	webhookPort := fs.Int("webhook-port", 0, "port of the webhook server on 127.0.0.1")
	healthPort := fs.Int("health-port", 0, "port of /healthz and /readyz on 127.0.0.1")
	certDir := fs.String("cert-dir", "", "directory with the webhook server's tls.crt and tls.key")
	fs.Parse(args)
	if *in == "" || *webhookPort <= 0 || *healthPort <= 0 || *certDir == "" {
		usage()
	}
	text, err := os.ReadFile(*in)
	if err != nil {
		return err
	}
	cfg, err := hostSettings(text, *webhookPort, *healthPort, *certDir)
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(out)
	return err
}

// hostSettings returns the Configuration `text` with the settings of a manager that runs on the
// host of the harness set over it:
//   - the webhook server on 127.0.0.1:webhookPort with the harness's certificate in certDir, and
//     no internal certificate management (it issues certificates for the in-cluster Service and
//     rewrites the webhook configurations' caBundle);
//   - health probes on 127.0.0.1:healthPort (/readyz answers once the webhook server serves);
//   - no metrics server and no leader election (one manager; its Lease would need a Pod);
//   - feature gate VisibilityOnDemand off: its aggregated API server listens on a fixed port
//     with certificates from a fixed path;
//   - namespace kueue-system unless the Configuration names one.
//
// Everything else (integrations, resources, waitForPodsReady, other feature gates) is the
// Configuration's own; the manager rejects unknown keys itself.
func hostSettings(text []byte, webhookPort, healthPort int, certDir string) (object, error) {
	cfg := object{}
	if err := yaml.Unmarshal(text, &cfg); err != nil {
		return nil, err
	}
	if cfg == nil {
		cfg = object{}
	}
	for key, want := range map[string]string{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"} {
		if v, ok := cfg[key]; ok && v != want {
			return nil, fmt.Errorf("%s is %v, want %s", key, v, want)
		}
		cfg[key] = want
	}
	if _, ok := cfg["namespace"]; !ok {
		cfg["namespace"] = "kueue-system"
	}
	cfg["leaderElection"] = object{"leaderElect": false}
	cfg["health"] = object{"healthProbeBindAddress": fmt.Sprintf("127.0.0.1:%d", healthPort)}
	metrics, err := section(cfg, "metrics")
	if err != nil {
		return nil, err
	}
	metrics["bindAddress"] = "0"
	cfg["webhook"] = object{"host": "127.0.0.1", "port": webhookPort, "certDir": certDir}
	cfg["internalCertManagement"] = object{"enable": false}
	gates, err := section(cfg, "featureGates")
	if err != nil {
		return nil, err
	}
	if v, ok := gates["VisibilityOnDemand"]; ok && v != false {
		return nil, errors.New("featureGates.VisibilityOnDemand: the harness cannot serve the visibility API (fixed port and certificate path)")
	}
	gates["VisibilityOnDemand"] = false
	return cfg, nil
}

// section returns cfg[key] as a map, creating it when absent.
func section(cfg object, key string) (object, error) {
	v, ok := cfg[key]
	if !ok || v == nil {
		m := object{}
		cfg[key] = m
		return m, nil
	}
	m, ok := v.(object)
	if !ok {
		return nil, fmt.Errorf("%s is not a mapping", key)
	}
	return m, nil
}

// manifestsCommand prints the CRDs and webhook configurations of one manager: `prefix` is the
// configurations' default name prefix, `webhooks` reads them as that project's overlay makes them.
func manifestsCommand(args []string, defaultPrefix string, webhooks webhookReader) error {
	fs := flag.NewFlagSet("manifests", flag.ExitOnError)
	dir := fs.String("config-dir", "", "the Kueue module's config/components")
	url := fs.String("url", "", "base URL of the manager's webhook server")
	caFile := fs.String("ca-bundle", "", "PEM file of the CA that signed the webhook server's certificate")
	prefix := fs.String("prefix", defaultPrefix, "prefix of the webhook configurations' names")
	part := fs.String("part", "", "crds or webhooks: only those (default: both)")
	fs.Parse(args)
	if *dir == "" || *url == "" || *caFile == "" || (*part != "" && *part != "crds" && *part != "webhooks") {
		usage()
	}
	ca, err := os.ReadFile(*caFile)
	if err != nil {
		return err
	}
	objs, err := manifests(*dir, strings.TrimRight(*url, "/"), ca, *prefix, webhooks)
	if err != nil {
		return err
	}
	for _, o := range objs {
		crd := o["kind"] == "CustomResourceDefinition"
		if (*part == "crds" && !crd) || (*part == "webhooks" && crd) {
			continue
		}
		out, err := yaml.Marshal(o)
		if err != nil {
			return err
		}
		fmt.Printf("---\n%s", out)
	}
	return nil
}

// webhookReader returns the webhook configurations of a config/components/webhook directory as
// the project's overlay makes them, still pointing at its in-cluster Service.
type webhookReader func(dir string) ([]object, error)

// manifests builds the objects: CRDs (crd/bases) first, then the webhook configurations
// (webhook/manifests.yaml, read by `webhooks`), as config/default's kustomization would, served
// at url.
func manifests(dir, url string, ca []byte, prefix string, webhooks webhookReader) ([]object, error) {
	caBundle := base64.StdEncoding.EncodeToString(ca)
	converted, err := conversionCRDs(filepath.Join(dir, "crd"))
	if err != nil {
		return nil, err
	}
	crdFiles, err := filepath.Glob(filepath.Join(dir, "crd", "bases", "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(crdFiles) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", filepath.Join(dir, "crd", "bases"))
	}
	sort.Strings(crdFiles)
	var out []object
	for _, f := range crdFiles {
		docs, err := readDocuments(f)
		if err != nil {
			return nil, err
		}
		for _, crd := range docs {
			name, _ := lookup(crd, "metadata", "name").(string)
			if converted[name] {
				spec, _ := crd["spec"].(object)
				if spec == nil {
					return nil, fmt.Errorf("%s: CRD %s has no spec", f, name)
				}
				spec["conversion"] = object{
					"strategy": "Webhook",
					"webhook": object{
						"clientConfig":             object{"url": url + "/convert", "caBundle": caBundle},
						"conversionReviewVersions": []any{"v1"},
					},
				}
				delete(converted, name)
			}
			out = append(out, crd)
		}
	}
	if len(converted) > 0 {
		return nil, fmt.Errorf("conversion patches for CRDs not in crd/bases: %v", keys(converted))
	}
	configs, err := webhooks(filepath.Join(dir, "webhook"))
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		meta, _ := c["metadata"].(object)
		if meta == nil {
			return nil, errors.New("webhook/manifests.yaml: a configuration without metadata")
		}
		meta["name"] = prefix + fmt.Sprint(meta["name"])
		hooks, _ := c["webhooks"].([]any)
		for _, h := range hooks {
			hook, _ := h.(object)
			path, _ := lookup(hook, "clientConfig", "service", "path").(string)
			if path == "" {
				return nil, fmt.Errorf("webhook %v has no service path", hook["name"])
			}
			hook["clientConfig"] = object{"url": url + path, "caBundle": caBundle}
		}
		out = append(out, c)
	}
	return out, nil
}

// kueueWebhooks reads Kueue's webhook configurations: the namespaceSelector of its overlay set on
// the webhooks it selects.
func kueueWebhooks(dir string) ([]object, error) {
	selector, selected, err := namespaceSelectors(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	configs, err := readDocuments(filepath.Join(dir, "manifests.yaml"))
	if err != nil {
		return nil, err
	}
	for _, c := range configs {
		hooks, _ := c["webhooks"].([]any)
		for _, h := range hooks {
			hook, _ := h.(object)
			if name, _ := hook["name"].(string); selected[name] {
				hook["namespaceSelector"] = selector
				delete(selected, name)
			}
		}
	}
	// Webhooks the overlay selects that this release does not have would mean a different layout.
	if len(selected) > 0 {
		return nil, fmt.Errorf("webhook/kustomization.yaml selects webhooks not in manifests.yaml: %v", keys(selected))
	}
	return configs, nil
}

// conversionCRDs reads crd/kustomization.yaml: the names of the CRDs its patches give a
// conversion webhook (patches/webhook_in_*.yaml).
func conversionCRDs(dir string) (map[string]bool, error) {
	k, err := readDocuments(filepath.Join(dir, "kustomization.yaml"))
	if err != nil || len(k) != 1 {
		return nil, fmt.Errorf("crd/kustomization.yaml: %v", err)
	}
	out := map[string]bool{}
	patches, _ := k[0]["patches"].([]any)
	for _, p := range patches {
		path, _ := lookup(p, "path").(string)
		if !strings.HasPrefix(filepath.Base(path), "webhook_in_") {
			continue
		}
		docs, err := readDocuments(filepath.Join(dir, path))
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			if lookup(d, "spec", "conversion", "strategy") != "Webhook" {
				return nil, fmt.Errorf("%s: not a conversion webhook patch", path)
			}
			out[fmt.Sprint(lookup(d, "metadata", "name"))] = true
		}
	}
	if len(out) == 0 {
		return nil, errors.New("crd/kustomization.yaml patches no CRD with a conversion webhook")
	}
	return out, nil
}

var fieldPathRe = regexp.MustCompile(`^webhooks\.\[name=([^\]]+)\]\.namespaceSelector$`)

// namespaceSelectors reads webhook/kustomization.yaml: the namespaceSelector its patch gives
// webhook vpod.kb.io, and the webhooks its replacements copy it to (vpod.kb.io included).
func namespaceSelectors(path string) (any, map[string]bool, error) {
	k, err := readDocuments(path)
	if err != nil || len(k) != 1 {
		return nil, nil, fmt.Errorf("%s: %v", path, err)
	}
	var selector any
	selected := map[string]bool{}
	patches, _ := k[0]["patches"].([]any)
	for _, p := range patches {
		text, _ := lookup(p, "patch").(string)
		patch := object{}
		if err := yaml.Unmarshal([]byte(text), &patch); err != nil {
			return nil, nil, fmt.Errorf("%s: patch: %w", path, err)
		}
		hooks, _ := patch["webhooks"].([]any)
		for _, h := range hooks {
			if s := lookup(h, "namespaceSelector"); s != nil {
				selector = s
				selected[fmt.Sprint(lookup(h, "name"))] = true
			}
		}
	}
	replacements, _ := k[0]["replacements"].([]any)
	for _, r := range replacements {
		targets, _ := lookup(r, "targets").([]any)
		for _, t := range targets {
			paths, _ := lookup(t, "fieldPaths").([]any)
			for _, fp := range paths {
				if m := fieldPathRe.FindStringSubmatch(fmt.Sprint(fp)); m != nil {
					selected[m[1]] = true
				}
			}
		}
	}
	if selector == nil || len(selected) < 2 {
		return nil, nil, fmt.Errorf("%s: no namespaceSelector patch and replacements found", path)
	}
	return selector, selected, nil
}

// readDocuments reads the non-empty YAML documents of a file.
func readDocuments(path string) ([]object, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []object
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		o := object{}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(o) > 0 {
			out = append(out, o)
		}
	}
	return out, nil
}

// lookup follows keys through nested maps; nil when a step is missing.
func lookup(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(object)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
