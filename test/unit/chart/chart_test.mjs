// Chart test driver: renders charts/draguard with helm in many configurations and checks the
// result. Run through chart_test.sh (which finds helm and the node modules).
//   node chart_test.mjs --helm PATH --root REPO
// Prints one line per check and a closing "N passed, N failed" line; exits 1 on any failure.
import { execFileSync, spawn, spawnSync } from "node:child_process";
import { X509Certificate, createPrivateKey, createPublicKey } from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const HELM = opt("--helm");
const ROOT = opt("--root");
if (!HELM || !ROOT) {
  console.error("usage: chart_test.mjs --helm PATH --root REPO");
  process.exit(2);
}
const CHART = path.join(ROOT, "charts", "draguard");
const TOOLS = path.join(ROOT, "test", "tools", "node_modules");
const require = createRequire(path.join(TOOLS, "noop.js"));
const yaml = require("js-yaml");
const { evaluate: celEvaluate } = await import(
  pathToFileURL(path.join(TOOLS, "@marcbachmann", "cel-js", "lib", "index.js")).href);

let passed = 0;
let failed = 0;
function check(name, fn) {
  try {
    const r = fn();
    if (r === false) throw new Error("returned false");
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
  }
}
// Deep equality independent of object key order.
function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === "object") return Object.fromEntries(Object.keys(v).sort().map((k) => [k, canonical(v[k])]));
  return v;
}
function deepEq(actual, expected, msg) {
  const a = JSON.stringify(canonical(actual));
  const b = JSON.stringify(canonical(expected));
  if (a === b) return;
  let i = 0;
  while (i < a.length && a[i] === b[i]) i++;
  throw new Error(`${msg}: differ at ${i}: got ...${a.slice(Math.max(0, i - 80), i + 120)}, want ...${b.slice(Math.max(0, i - 80), i + 120)}`);
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(actual, expected, msg) {
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  if (a !== b) throw new Error(`${msg}: got ${a}, want ${b}`);
}

// ---------------------------------------------------------------------------------------------
// Rendering helpers

function helm(argv, { allowFail = false } = {}) {
  const r = spawnSync(HELM, argv, { encoding: "utf8", maxBuffer: 64 << 20 });
  if (!allowFail && r.status !== 0) {
    throw new Error(`helm ${argv.join(" ")} failed (${r.status}): ${r.stderr}`);
  }
  return r;
}

function render(setArgs, { release = "draguard", namespace = "draguard-system" } = {}) {
  const r = helm(["template", release, CHART, "--namespace", namespace, ...setArgs]);
  const docs = yaml.loadAll(r.stdout).filter((d) => d !== null && d !== undefined);
  return { text: r.stdout, docs, release, namespace };
}

const find = (docs, kind, name) =>
  docs.filter((d) => d.kind === kind && (name === undefined || d.metadata.name === name));
const one = (docs, kind) => {
  const xs = find(docs, kind);
  if (xs.length !== 1) throw new Error(`expected exactly one ${kind}, found ${xs.length}`);
  return xs[0];
};

// The exporter's policies and the topology collection policy are not the backstop policy.
const notExporter = (d) => !d.metadata.name.includes("exporter") && !d.metadata.name.endsWith("-topology-collect");
const oneBackstopBinding = (docs) => {
  const xs = find(docs, "ValidatingAdmissionPolicyBinding").filter(notExporter);
  if (xs.length !== 1) throw new Error(`expected exactly one backstop ValidatingAdmissionPolicyBinding, found ${xs.length}`);
  return xs[0];
};

// kubernetes-models: the schema of every built-in kind plus cert-manager and prometheus-operator.
const modelCache = new Map();
async function modelFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  let file;
  if (group === "cert-manager.io") {
    file = path.join(TOOLS, "@kubernetes-models", "cert-manager", group, version, `${kind}.js`);
  } else if (group === "monitoring.coreos.com") {
    file = path.join(TOOLS, "@kubernetes-models", "prometheus-operator", group, version, `${kind}.js`);
  } else {
    file = path.join(TOOLS, "kubernetes-models", group === "" ? "" : group, version, `${kind}.js`);
  }
  if (!fs.existsSync(file)) return null;
  if (!modelCache.has(file)) modelCache.set(file, (await import(pathToFileURL(file).href))[kind]);
  return modelCache.get(file);
}

// ---------------------------------------------------------------------------------------------
// Invariants shared by every rendering

async function validateSchemas(r, label) {
  for (const d of r.docs) {
    const id = `${d.kind}/${d.metadata && d.metadata.name}`;
    const Model = await modelFor(d.apiVersion, d.kind);
    check(`${label}: ${id} matches the ${d.apiVersion} schema`, () => {
      assert(Model, `no schema known for ${d.apiVersion} ${d.kind}`);
      new Model(d).validate();
    });
  }
}

// The policy's webhooks (/validate, /mutate); the shape-object webhook has checks of its own.
const TOPOLOGY_WEBHOOK = "shapes.topology.draguard.io";
function webhooksOf(r) {
  const out = [];
  for (const cfg of [...find(r.docs, "ValidatingWebhookConfiguration"), ...find(r.docs, "MutatingWebhookConfiguration")]) {
    for (const w of cfg.webhooks) {
      if (w.name !== TOPOLOGY_WEBHOOK) out.push({ cfg, w, mutating: cfg.kind === "MutatingWebhookConfiguration" });
    }
  }
  return out;
}
const topologyWebhook = (r) =>
  find(r.docs, "ValidatingWebhookConfiguration").flatMap((c) => c.webhooks).find((w) => w.name === TOPOLOGY_WEBHOOK);

function commonChecks(r, label, { mutation = true, tlsMode = "self", replicas = 3 } = {}) {
  const fullname = r.release.includes("draguard") ? r.release : `${r.release}-draguard`;
  check(`${label}: every object has apiVersion, kind, metadata.name`, () => {
    for (const d of r.docs) assert(d.apiVersion && d.kind && d.metadata && d.metadata.name, JSON.stringify(d).slice(0, 200));
  });
  check(`${label}: namespaced objects are in the release namespace`, () => {
    const clusterScoped = new Set(["ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
      "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"]);
    for (const d of r.docs) {
      if (clusterScoped.has(d.kind)) assert(!d.metadata.namespace, `${d.kind} has a namespace`);
      else eq(d.metadata.namespace, r.namespace, `${d.kind}/${d.metadata.name} namespace`);
    }
  });
  check(`${label}: no duplicate objects`, () => {
    const seen = new Set();
    for (const d of r.docs) {
      const k = `${d.kind}/${d.metadata.namespace || ""}/${d.metadata.name}`;
      assert(!seen.has(k), `duplicate ${k}`);
      seen.add(k);
    }
  });

  const dep = one(r.docs, "Deployment");
  const pod = dep.spec.template.spec;
  const c = pod.containers[0];
  const a = c.args;
  const flag = (f) => {
    const i = a.indexOf(f);
    return i >= 0 ? a[i + 1] : undefined;
  };
  check(`${label}: deployment replicas and rolling update (maxUnavailable 0)`, () => {
    eq(dep.spec.replicas, replicas, "replicas");
    eq(dep.spec.strategy.type, "RollingUpdate", "strategy");
    eq(dep.spec.strategy.rollingUpdate.maxUnavailable, 0, "maxUnavailable");
  });
  check(`${label}: serve flags`, () => {
    eq(a[0], "serve", "subcommand");
    eq(flag("--listen"), "0.0.0.0:8443", "--listen");
    if (tlsMode === "self") {
      eq(flag("--tls-self-secret"), `${fullname}-tls`, "--tls-self-secret");
      eq(flag("--tls-self-validating"), fullname, "--tls-self-validating");
      eq(flag("--tls-self-mutating"), mutation ? fullname : undefined, "--tls-self-mutating");
      eq(flag("--state-dir"), "/tmp/draguard", "--state-dir (the tmp emptyDir)");
      assert(flag("--tls-cert") === undefined && flag("--tls-key") === undefined, "no --tls-cert/--tls-key in self mode");
    } else {
      eq(flag("--tls-cert"), "/tls/tls.crt", "--tls-cert");
      eq(flag("--tls-key"), "/tls/tls.key", "--tls-key");
      assert(flag("--tls-self-secret") === undefined, "no --tls-self-secret");
    }
    eq(flag("--config"), "/etc/draguard/policy.yaml", "--config");
    eq(flag("--namespace"), r.namespace, "--namespace");
    eq(flag("--service-name"), fullname, "--service-name");
    eq(flag("--metrics-listen"), "0.0.0.0:9090", "--metrics-listen");
    assert(/^\d+$/.test(flag("--shutdown-delay")), "--shutdown-delay is a number of seconds");
    for (const x of a) assert(typeof x === "string", `arg ${JSON.stringify(x)} is not a string`);
  });
  check(`${label}: terminationGracePeriodSeconds > shutdown delay + longest webhook timeout`, () => {
    const timeouts = webhooksOf(r).map((x) => x.w.timeoutSeconds);
    assert(pod.terminationGracePeriodSeconds > Number(flag("--shutdown-delay")) + Math.max(...timeouts),
      `${pod.terminationGracePeriodSeconds} <= ${flag("--shutdown-delay")} + ${Math.max(...timeouts)}`);
    // After the delay the process waits for the requests in progress: each is bounded by the
    // API server's ?timeout= or, for other clients, by --request-timeout (default 10 s).
    const requestTimeout = Number(flag("--request-timeout") ?? 10);
    assert(pod.terminationGracePeriodSeconds > Number(flag("--shutdown-delay")) + requestTimeout,
      `${pod.terminationGracePeriodSeconds} <= ${flag("--shutdown-delay")} + --request-timeout ${requestTimeout}`);
    assert(!c.lifecycle || !c.lifecycle.preStop, "no preStop hook: the binary handles the shutdown delay");
  });
  check(`${label}: probes`, () => {
    const clientAuth = a.includes("--client-ca");
    for (const [p, pathWant] of [[c.readinessProbe, "/readyz"], [c.livenessProbe, "/healthz"]]) {
      eq(p.httpGet.path, pathWant, "probe path");
      if (clientAuth) {
        eq([p.httpGet.port, p.httpGet.scheme], ["metrics", "HTTP"], "probe on the metrics listener with mTLS");
      } else {
        eq([p.httpGet.port, p.httpGet.scheme], ["https", "HTTPS"], "probe over HTTPS");
      }
    }
    const ports = Object.fromEntries(c.ports.map((p) => [p.name, p.containerPort]));
    eq(ports.https, 8443, "https containerPort");
  });
  check(`${label}: pod and container security context`, () => {
    const ps = pod.securityContext;
    eq([ps.runAsNonRoot, ps.runAsUser, ps.seccompProfile.type], [true, 65532, "RuntimeDefault"], "pod securityContext");
    const cs = c.securityContext;
    eq([cs.runAsNonRoot, cs.runAsUser, cs.readOnlyRootFilesystem, cs.allowPrivilegeEscalation, cs.privileged],
      [true, 65532, true, false, false], "container securityContext");
    eq(cs.capabilities.drop, ["ALL"], "capabilities.drop");
    assert(!cs.capabilities.add, "no capabilities added");
    eq(cs.seccompProfile.type, "RuntimeDefault", "container seccomp");
    assert(!pod.hostNetwork && !pod.hostPID && !pod.hostIPC, "no host namespaces");
  });
  check(`${label}: resources (requests 100m/64Mi, memory limit 256Mi)`, () => {
    eq(c.resources.requests, { cpu: "100m", memory: "64Mi" }, "requests");
    eq(c.resources.limits.memory, "256Mi", "memory limit");
  });
  check(`${label}: priority class and topology spread across nodes`, () => {
    eq(pod.priorityClassName, "system-cluster-critical", "priorityClassName");
    const tsc = pod.topologySpreadConstraints;
    assert(tsc.some((t) => t.topologyKey === "kubernetes.io/hostname" && t.maxSkew === 1), "hostname spread");
    for (const t of tsc) eq(t.labelSelector.matchLabels, dep.spec.selector.matchLabels, "spread selector");
  });
  check(`${label}: volumes are directory mounts (hot reload needs no subPath)`, () => {
    for (const m of c.volumeMounts) assert(!m.subPath, `${m.name} uses subPath`);
    const tls = pod.volumes.find((v) => v.name === "tls");
    if (tlsMode === "self") assert(!tls, "self mode mounts no TLS Secret (the server reads it through the API)");
    else eq(tls.secret.items.map((i) => i.key).sort(), ["tls.crt", "tls.key"], "only the serving pair is mounted");
    const pol = pod.volumes.find((v) => v.name === "policy");
    eq(pol.configMap.name, `${fullname}-policy`, "policy ConfigMap");
  });
  check(`${label}: no restart on policy change (no checksum annotation by default)`, () => {
    const ann = dep.spec.template.metadata.annotations || {};
    assert(!Object.keys(ann).some((k) => k.startsWith("checksum/")), "pod template has a checksum annotation");
  });

  const pdbs = find(r.docs, "PodDisruptionBudget");
  check(`${label}: PodDisruptionBudget`, () => {
    if (replicas >= 3) eq(pdbs.map((p) => p.spec.minAvailable), [2], "minAvailable with >= 3 replicas");
    else if (replicas === 2) eq(pdbs.map((p) => p.spec.minAvailable), [1], "minAvailable with 2 replicas");
    else eq(pdbs.length, 0, "no PDB for a single replica");
    for (const p of pdbs) eq(p.spec.selector.matchLabels, dep.spec.selector.matchLabels, "PDB selector");
  });

  check(`${label}: Service 443 -> https (8443)`, () => {
    const svc = one(r.docs, "Service");
    eq(svc.metadata.name, fullname, "service name");
    const https = svc.spec.ports.find((p) => p.name === "https");
    eq([https.port, https.targetPort], [443, "https"], "https port");
    eq(svc.spec.selector, dep.spec.selector.matchLabels, "service selector");
  });

  check(`${label}: policy ConfigMap`, () => {
    const cm = find(r.docs, "ConfigMap", `${fullname}-policy`)[0];
    assert(cm, "policy ConfigMap missing");
    const p = yaml.load(cm.data["policy.yaml"]);
    eq([p.apiVersion, p.kind], ["draguard.io/v1alpha1", "Policy"], "policy apiVersion/kind");
    assert(p.exemptions.namespaces.includes("kube-system"), "kube-system exempt");
    assert(p.exemptions.namespaces.includes(r.namespace), "release namespace exempt");
    eq(p.mutation.enabled, mutation, "policy mutation.enabled follows mutation.enabled");
    // Every key must be one the server knows: the bundled default policy uses them all.
    const known = yaml.load(fs.readFileSync(path.join(ROOT, "deploy", "policy", "default-policy.yaml"), "utf8"));
    const keysOf = (o, pre = "") => Object.entries(o).flatMap(([k, v]) =>
      (v && typeof v === "object" && !Array.isArray(v) && !["rules", "labels"].includes(k))
        ? [pre + k, ...keysOf(v, `${pre}${k}.`)] : [pre + k]);
    const knownKeys = new Set(keysOf(known));
    for (const k of keysOf(p)) assert(knownKeys.has(k), `policy key ${k} is not used by deploy/policy/default-policy.yaml`);
    for (const lr of known.legacyResources) assert(p.legacyResources.includes(lr), `legacy resource ${lr} of the default policy missing`);
  });

  check(`${label}: RBAC: templates create/get, claims and templates list/watch, no cluster-wide configmaps, nothing on webhook configurations`, () => {
    const role = find(r.docs, "ClusterRole", fullname)[0];
    assert(role, `ClusterRole ${fullname}`);
    const dra = role.rules.filter((x) => x.apiGroups.includes("resource.k8s.io"));
    const rct = dra.find((x) => x.resources.includes("resourceclaimtemplates"));
    eq(rct.resources, ["resourceclaimtemplates"], "resource.k8s.io resources");
    // list/watch: the claim cache the Pod rules read (DG015, DG016).
    eq(rct.verbs.slice().sort(), mutation ? ["create", "get", "list", "watch"] : ["get", "list", "watch"], "template verbs");
    const rc = dra.find((x) => x.resources.includes("resourceclaims"));
    eq(rc && rc.resources, ["resourceclaims"], "claims grant");
    eq(rc.verbs.slice().sort(), ["list", "watch"], "claim verbs (read only)");
    eq(dra.length, 2, "resource.k8s.io grants");
    const cmr = role.rules.find((x) => x.apiGroups.includes("") && x.resources.includes("configmaps"));
    assert(!cmr, "cluster-wide configmaps grant by default (rbac.topologyConfigMaps is opt-in)");
    for (const x of role.rules) {
      assert(!x.apiGroups.includes("admissionregistration.k8s.io"), "webhook configuration access granted");
      assert(!x.resources.includes("secrets") && !x.resources.includes("*") && !x.verbs.includes("*"), "wildcard or secrets");
    }
    const rb = find(r.docs, "ClusterRoleBinding", fullname)[0];
    eq(rb.subjects, [{ kind: "ServiceAccount", name: fullname, namespace: r.namespace }], "binding subject");
  });
  check(`${label}: RBAC of tls.mode=self: the one Secret and the two webhook configurations by name`, () => {
    const cr = find(r.docs, "ClusterRole", `${fullname}-self-tls`);
    const role = find(r.docs, "Role", `${fullname}-self-tls`);
    if (tlsMode !== "self") {
      eq(cr.length + role.length, 0, "no self-tls RBAC outside self mode");
      return;
    }
    eq(cr[0].rules, [{ apiGroups: ["admissionregistration.k8s.io"],
      resources: mutation ? ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] : ["validatingwebhookconfigurations"],
      resourceNames: [fullname], verbs: ["get", "update"] }], "webhook configuration grant");
    eq(role[0].metadata.namespace, r.namespace, "Role namespace");
    eq(role[0].rules, [{ apiGroups: [""], resources: ["secrets"], resourceNames: [`${fullname}-tls`], verbs: ["get", "update"] },
      { apiGroups: [""], resources: ["secrets"], verbs: ["create"] }], "Secret grant (create cannot be limited by name)");
    for (const kind of ["RoleBinding", "ClusterRoleBinding"]) {
      const b = find(r.docs, kind, `${fullname}-self-tls`)[0];
      eq(b.subjects, [{ kind: "ServiceAccount", name: fullname, namespace: r.namespace }], `${kind} subject`);
      eq(b.roleRef.name, `${fullname}-self-tls`, `${kind} roleRef`);
    }
  });

  check(`${label}: NetworkPolicy (8443 from anywhere, metrics from selector, egress apiserver + DNS)`, () => {
    const np = one(r.docs, "NetworkPolicy");
    eq(np.spec.policyTypes, ["Ingress", "Egress"], "policyTypes");
    const https = np.spec.ingress.find((i) => i.ports.some((p) => p.port === "https"));
    assert(https && !https.from, "webhook port open to all sources");
    const metrics = np.spec.ingress.find((i) => i.ports.some((p) => p.port === "metrics"));
    assert(metrics && metrics.from && metrics.from.length > 0, "metrics port restricted to a selector");
    const egressPorts = np.spec.egress.flatMap((e) => e.ports.map((p) => `${p.protocol}/${p.port}`)).sort();
    eq(egressPorts, ["TCP/443", "TCP/53", "TCP/6443", "UDP/53"], "egress ports");
  });

  // Webhook configurations
  const hooks = webhooksOf(r);
  check(`${label}: webhook set`, () => {
    eq(hooks.filter((h) => !h.mutating).map((h) => h.w.name),
      ["pods.validate.draguard.io", "workloads.validate.draguard.io", "claims.validate.draguard.io", "crds.validate.draguard.io"],
      "validating webhooks");
    eq(hooks.filter((h) => h.mutating).map((h) => h.w.name), mutation ? ["pods.mutate.draguard.io"] : [], "mutating webhooks");
  });
  check(`${label}: every webhook: v1 reviews, NoneOnDryRun, Equivalent, timeouts, service, path`, () => {
    for (const { w, mutating } of hooks) {
      eq(w.admissionReviewVersions, ["v1"], `${w.name} admissionReviewVersions`);
      eq(w.sideEffects, "NoneOnDryRun", `${w.name} sideEffects`);
      eq(w.matchPolicy, "Equivalent", `${w.name} matchPolicy`);
      assert(["Fail", "Ignore"].includes(w.failurePolicy), `${w.name} failurePolicy`);
      eq(w.timeoutSeconds, mutating ? 5 : 3, `${w.name} timeoutSeconds`);
      const s = w.clientConfig.service;
      eq([s.name, s.namespace, s.port, s.path], [fullname, r.namespace, 443, mutating ? "/mutate" : "/validate"], `${w.name} service`);
      assert(!w.clientConfig.url, "no url");
      if (mutating) eq(w.reinvocationPolicy, "IfNeeded", "reinvocationPolicy");
    }
  });
  check(`${label}: namespaceSelector excludes kube-system and the release namespace`, () => {
    for (const { w } of hooks) {
      const e = w.namespaceSelector.matchExpressions.find((x) => x.key === "kubernetes.io/metadata.name");
      eq(e.operator, "NotIn", `${w.name} operator`);
      assert(e.values.includes("kube-system") && e.values.includes(r.namespace), `${w.name} excludes ${e.values}`);
      assert(!w.objectSelector || Object.keys(w.objectSelector).length === 0, "no objectSelector (users could opt out)");
    }
  });
  check(`${label}: rules`, () => {
    const rulesOf = (name) => hooks.find((h) => h.w.name === name).w.rules;
    const flat = (name) => rulesOf(name).flatMap((ru) => ru.apiGroups.flatMap((g) =>
      ru.resources.map((res) => `${g}/${res}:${ru.apiVersions.join(",")}:${ru.operations.join(",")}`))).sort();
    eq(flat("pods.validate.draguard.io"), ["/pods:v1:CREATE"], "pods rules");
    eq(flat("workloads.validate.draguard.io"), [
      "/podtemplates:v1:CREATE,UPDATE", "/replicationcontrollers:v1:CREATE,UPDATE",
      "apps/daemonsets:v1:CREATE,UPDATE", "apps/deployments:v1:CREATE,UPDATE", "apps/replicasets:v1:CREATE,UPDATE",
      "apps/statefulsets:v1:CREATE,UPDATE", "batch/cronjobs:v1:CREATE,UPDATE", "batch/jobs:v1:CREATE,UPDATE"], "workload rules");
    eq(flat("claims.validate.draguard.io"), [
      "resource.k8s.io/resourceclaims:v1,v1beta1,v1beta2:CREATE",
      "resource.k8s.io/resourceclaimtemplates:v1,v1beta1,v1beta2:CREATE"], "claim rules");
    // Every custom resource kind the default policy knows pod templates of has a rule: a kind
    // without one is never sent to draguard by a real apiserver.
    const policy = yaml.load(fs.readFileSync(path.join(ROOT, "deploy", "policy", "default-policy.yaml"), "utf8"));
    eq(flat("crds.validate.draguard.io"),
      [...new Set(policy.customResources.map((c) => `${c.group}/${c.kind.toLowerCase()}s:*:CREATE,UPDATE`))].sort(),
      "CRD rules: the default policy's customResources");
    if (mutation) eq(flat("pods.mutate.draguard.io"), ["/pods:v1:CREATE"], "mutate rules: Pod CREATE only");
    for (const { w } of hooks) {
      for (const ru of w.rules) eq(ru.scope, w.name === "crds.validate.draguard.io" ? "*" : "Namespaced", `${w.name} scope`);
    }
  });
  check(`${label}: TLS wiring (${tlsMode})`, () => {
    const tlsVolume = pod.volumes.find((v) => v.name === "tls");
    const secretName = tlsVolume && tlsVolume.secret.secretName;
    for (const { cfg, w } of hooks) {
      const inject = (cfg.metadata.annotations || {})["cert-manager.io/inject-ca-from"];
      if (tlsMode === "self") {
        assert(!inject, "no inject-ca-from in self mode");
        assert(!w.clientConfig.caBundle, "no static caBundle in self mode (the server injects it)");
      } else if (tlsMode === "cert-manager") {
        eq(inject, `${r.namespace}/${fullname}-tls`, "inject-ca-from");
        assert(!w.clientConfig.caBundle, "no static caBundle with cert-manager");
      } else {
        assert(!inject, "no inject-ca-from outside cert-manager mode");
        assert(w.clientConfig.caBundle, `${w.name} has no caBundle`);
      }
    }
    if (tlsMode === "cert-manager") {
      const cert = find(r.docs, "Certificate", `${fullname}-tls`)[0];
      assert(cert, "serving Certificate missing");
      eq(cert.spec.secretName, secretName, "Certificate secret is the mounted one");
      eq(cert.spec.dnsNames, [`${fullname}.${r.namespace}.svc`, `${fullname}.${r.namespace}.svc.cluster.local`], "dnsNames");
    }
  });
}

// ---------------------------------------------------------------------------------------------
// TLS material generated in helm mode

function checkHelmTLS(r, label) {
  const fullname = r.release.includes("draguard") ? r.release : `${r.release}-draguard`;
  check(`${label}: generated CA and serving certificate`, () => {
    const s = find(r.docs, "Secret", `${fullname}-tls`)[0];
    assert(s, "TLS Secret missing");
    eq(s.type, "kubernetes.io/tls", "secret type");
    const b = (k) => Buffer.from(s.data[k], "base64");
    const ca = new X509Certificate(b("ca.crt"));
    const leaf = new X509Certificate(b("tls.crt"));
    assert(ca.ca, "ca.crt is a CA certificate");
    assert(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), "serving certificate is signed by the CA");
    assert(leaf.checkPrivateKey(createPrivateKey(b("tls.key"))), "tls.key matches tls.crt");
    assert(ca.checkPrivateKey(createPrivateKey(b("ca.key"))), "ca.key matches ca.crt");
    const sans = leaf.subjectAltName.split(",").map((x) => x.trim()).sort();
    eq(sans, [`DNS:${fullname}.${r.namespace}.svc`, `DNS:${fullname}.${r.namespace}.svc.cluster.local`], "SANs");
    eq(createPublicKey(b("tls.key")).asymmetricKeyType, "ec", "ECDSA key");
    const days = (new Date(leaf.validTo) - Date.now()) / 86400000;
    assert(days > 700 && days < 740, `serving certificate valid ~730 days (got ${days.toFixed(0)})`);
    for (const { w } of webhooksOf(r)) eq(w.clientConfig.caBundle, s.data["ca.crt"], `${w.name} caBundle is the generated CA`);
  });
}

// ---------------------------------------------------------------------------------------------
// matchConditions, evaluated with an independent CEL implementation on sample requests

const GPU = { "nvidia.com/gpu": "1" };
const podOf = (spec) => ({ apiVersion: "v1", kind: "Pod", metadata: { name: "p" }, spec });
const ctr = (resources) => ({ name: "c", image: "i", ...(resources ? { resources } : {}) });
const req = (kind, operation = "CREATE", group = "") =>
  ({ kind: { group, version: "v1", kind }, operation, namespace: "team", name: "x", userInfo: { username: "u" } });

const POD_CASES = [
  // [name, pod spec, validate expected, mutate expected]
  ["plain pod", { containers: [ctr()] }, false, false],
  ["cpu/memory only", { containers: [ctr({ limits: { cpu: "1", memory: "1Gi" }, requests: { cpu: "1" } })] }, false, false],
  ["empty resources", { containers: [ctr({})] }, false, false],
  ["other vendor", { containers: [ctr({ limits: { "amd.com/gpu": "1" } })] }, false, false],
  ["nvidia.com/gpu limit", { containers: [ctr(), ctr({ limits: GPU })] }, true, true],
  ["requests-only legacy", { containers: [ctr({ requests: { "nvidia.com/gpu.shared": "2" } })] }, true, true],
  ["MIG in init container", { containers: [ctr()], initContainers: [ctr({ limits: { "nvidia.com/mig-1g.10gb": 1 } })] }, true, true],
  ["HAMi gpumem", { containers: [ctr({ limits: { "nvidia.com/gpumem": "1000" } })] }, true, true],
  ["pod-level legacy resources", { resources: { limits: GPU }, containers: [ctr()] }, true, true],
  ["implicit GPU class name (KEP-5004)", { containers: [ctr({ limits: { "deviceclass.resource.kubernetes.io/gpu.nvidia.com": "1" } })] }, true, true],
  ["implicit MIG class name in requests", { containers: [ctr({ requests: { "deviceclass.resource.kubernetes.io/mig.nvidia.com": 1 } })] }, true, true],
  ["DRA claim pod", { resourceClaims: [{ name: "gpu", resourceClaimTemplateName: "t" }], containers: [ctr({ claims: [{ name: "gpu" }] })] }, true, false],
  ["empty resourceClaims", { resourceClaims: [], containers: [ctr()] }, false, false],
];

function celCheck(expr, vars, want, what) {
  let got;
  try {
    got = celEvaluate(expr, vars);
  } catch (e) {
    throw new Error(`${what}: evaluation error: ${e.message}`);
  }
  eq(got, want, what);
}

function checkMatchConditions(r, label) {
  const hook = (name) => webhooksOf(r).find((h) => h.w.name === name).w;
  const cond = (name, cname) => {
    const mc = (hook(name).matchConditions || []).find((m) => m.name === cname);
    if (!mc) throw new Error(`${name} has no matchCondition ${cname}`);
    return mc.expression;
  };
  check(`${label}: matchConditions: Pods (validate and mutate)`, () => {
    const v = cond("pods.validate.draguard.io", "gpu-resources-or-claims");
    const m = cond("pods.mutate.draguard.io", "legacy-gpu-resources");
    for (const [name, spec, wantV, wantM] of POD_CASES) {
      const vars = { object: podOf(spec), oldObject: null, request: req("Pod") };
      celCheck(v, vars, wantV, `validate ${name}`);
      celCheck(m, vars, wantM, `mutate ${name}`);
    }
  });
  check(`${label}: matchConditions: workload pod templates`, () => {
    const e = cond("workloads.validate.draguard.io", "template-gpu-resources-or-claims");
    const dep = (spec) => ({ spec: { replicas: 1, template: { spec } } });
    const cron = (spec) => ({ spec: { schedule: "* * * * *", jobTemplate: { spec: { template: { spec } } } } });
    const cases = [
      ["Deployment", dep({ containers: [ctr({ limits: GPU })] }), true],
      ["Deployment", dep({ containers: [ctr()] }), false],
      ["StatefulSet", dep({ containers: [ctr()], initContainers: [ctr({ requests: { "nvidia.com/mig-3g.40gb": "1" } })] }), true],
      ["Job", dep({ resourceClaims: [{ name: "g", resourceClaimTemplateName: "t" }], containers: [ctr({ claims: [{ name: "g" }] })] }), true],
      ["CronJob", cron({ containers: [ctr({ limits: GPU })] }), true],
      ["CronJob", cron({ containers: [ctr({ limits: { cpu: "1" } })] }), false],
      ["PodTemplate", { template: { spec: { containers: [ctr({ limits: GPU })] } } }, true],
      ["PodTemplate", { template: { spec: { containers: [ctr()] } } }, false],
      ["Deployment", { spec: { replicas: 1 } }, true], // template not found: call the webhook
    ];
    for (const [kind, obj, want] of cases) {
      celCheck(e, { object: obj, oldObject: null, request: req(kind) }, want, `${kind} ${JSON.stringify(obj).slice(0, 80)}`);
    }
  });
  check(`${label}: matchConditions: kube-scheduler's own extended-resource claims are not sent`, () => {
    const e = cond("claims.validate.draguard.io", "not-scheduler-extended-resource-claim");
    const claim = (annotations) => ({ apiVersion: "resource.k8s.io/v1", kind: "ResourceClaim",
      metadata: { generateName: "p-extended-resources-", ...(annotations ? { annotations } : {}) },
      spec: { devices: { requests: [{ name: "container-0-request-0", exactly: { deviceClassName: "gpu.nvidia.com", allocationMode: "ExactCount", count: 1 } }] } } });
    const ann = { "resource.kubernetes.io/extended-resource-claim": "true" };
    const claimReq = (username, resource = "resourceclaims", kind = "ResourceClaim") => ({
      kind: { group: "resource.k8s.io", version: "v1", kind }, resource: { group: "resource.k8s.io", version: "v1", resource },
      operation: "CREATE", namespace: "team", userInfo: { username } });
    const cases = [
      ["the scheduler's claim", claim(ann), claimReq("system:kube-scheduler"), false],
      ["the annotation from a tenant", claim(ann), claimReq("alice"), true],
      ["a claim of the scheduler without the annotation", claim(), claimReq("system:kube-scheduler"), true],
      ["another annotation value", claim({ "resource.kubernetes.io/extended-resource-claim": "false" }), claimReq("system:kube-scheduler"), true],
      ["a template with the annotation", { ...claim(ann), kind: "ResourceClaimTemplate" }, claimReq("system:kube-scheduler", "resourceclaimtemplates", "ResourceClaimTemplate"), true],
    ];
    for (const [name, object, request, want] of cases) celCheck(e, { object, oldObject: null, request }, want, name);
  });
  check(`${label}: matchConditions: UPDATEs that leave spec alone are skipped`, () => {
    for (const name of ["workloads.validate.draguard.io", "crds.validate.draguard.io"]) {
      const e = cond(name, "spec-changed");
      const a = { metadata: { name: "x", finalizers: ["f"] }, spec: { template: { spec: { containers: [ctr({ limits: GPU })] } } } };
      const b = { metadata: { name: "x" }, spec: JSON.parse(JSON.stringify(a.spec)) };
      const c = { metadata: { name: "x" }, spec: { template: { spec: { containers: [ctr({ limits: { "nvidia.com/gpu": "2" } })] } } } };
      celCheck(e, { object: a, oldObject: null, request: req("Deployment", "CREATE") }, true, `${name} CREATE`);
      celCheck(e, { object: a, oldObject: b, request: req("Deployment", "UPDATE") }, false, `${name} metadata-only UPDATE`);
      celCheck(e, { object: c, oldObject: b, request: req("Deployment", "UPDATE") }, true, `${name} spec UPDATE`);
      celCheck(e, { object: { template: {} }, oldObject: { template: {} }, request: req("PodTemplate", "UPDATE") }, true, `${name} object without spec`);
    }
  });
}

// ---------------------------------------------------------------------------------------------
// Scenarios

function helmLint() {
  check("helm lint (default values)", () => {
    const r = helm(["lint", CHART, "--strict"], { allowFail: true });
    assert(r.status === 0, r.stdout + r.stderr);
  });
  for (const [mode, extra] of [["self", []], ["cert-manager", []], ["helm", []],
    ["external", ["--set", "tls.external.secretName=my-tls", "--set", `tls.external.caBundle=${FAKE_CA}`]]]) {
    check(`helm lint --strict (tls.mode=${mode})`, () => {
      const r = helm(["lint", CHART, "--strict", "--set", `tls.mode=${mode}`, ...extra], { allowFail: true });
      assert(r.status === 0, r.stdout + r.stderr);
    });
  }
  check("helm lint (helm TLS, mutation off, monitoring on)", () => {
    const r = helm(["lint", CHART, "--strict", "--set", "tls.mode=helm", "--set", "mutation.enabled=false",
      "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"], { allowFail: true });
    assert(r.status === 0, r.stdout + r.stderr);
  });
}

const FAKE_CA = Buffer.from("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n").toString("base64");
const FAKE_CA_PEM = FAKE_CA;

async function scenarios() {
  // Default values: self-managed TLS, mutation on.
  const def = render([]);
  commonChecks(def, "default");
  await validateSchemas(def, "default");
  checkMatchConditions(def, "default");
  check("default: failurePolicy Fail in enforce mode (validate and mutate)", () => {
    for (const { w } of webhooksOf(def)) eq(w.failurePolicy, "Fail", w.name);
  });
  check("policy.trustedSchedulers follows into the claims webhook's matchCondition (none when empty)", () => {
    const claimsHook = (r) => webhooksOf(r).find((h) => h.w.name === "claims.validate.draguard.io").w;
    const custom = render(["--set-json", 'policy.trustedSchedulers=["system:serviceaccount:kube-system:my-scheduler"]']);
    const e = claimsHook(custom).matchConditions[0].expression;
    const object = { metadata: { annotations: { "resource.kubernetes.io/extended-resource-claim": "true" } } };
    const request = (username) => ({ resource: { resource: "resourceclaims" }, operation: "CREATE", userInfo: { username } });
    celCheck(e, { object, oldObject: null, request: request("system:serviceaccount:kube-system:my-scheduler") }, false, "the listed scheduler");
    celCheck(e, { object, oldObject: null, request: request("system:kube-scheduler") }, true, "a scheduler not listed");
    eq(claimsHook(render(["--set-json", "policy.trustedSchedulers=[]"])).matchConditions, undefined, "no scheduler trusted");
    assert(find(custom.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"].includes("system:serviceaccount:kube-system:my-scheduler"),
      "the policy lists the same scheduler");
  });
  check("default: no ServiceMonitor / PrometheusRule", () => {
    eq(find(def.docs, "ServiceMonitor").length + find(def.docs, "PrometheusRule").length, 0, "monitoring objects");
  });
  check("default: tls.mode=self renders no Secret, Certificate or Issuer (stable helm template output)", () => {
    eq(find(def.docs, "Secret").length + find(def.docs, "Certificate").length + find(def.docs, "Issuer").length, 0, "TLS objects");
    eq(render([]).text, def.text, "two renders are identical");
    const a = one(def.docs, "Deployment").spec.template.spec.containers[0].args;
    const flag = (f) => a[a.indexOf(f) + 1];
    eq([flag("--tls-self-ca-days"), flag("--tls-self-cert-days"), flag("--tls-self-resync")], ["3650", "365", "60"], "lifetimes");
  });

  // cert-manager TLS
  const cm = render(["--set", "tls.mode=cert-manager"]);
  commonChecks(cm, "tls=cert-manager", { tlsMode: "cert-manager" });
  await validateSchemas(cm, "tls=cert-manager");
  check("tls=cert-manager: issuer chain (self-signed root -> CA issuer -> serving cert)", () => {
    eq(find(cm.docs, "Issuer").map((i) => i.metadata.name).sort(), ["draguard-ca", "draguard-selfsigned"], "issuers");
    const ca = find(cm.docs, "Certificate", "draguard-ca")[0];
    assert(ca && ca.spec.isCA, "CA certificate");
    eq(find(cm.docs, "Certificate", "draguard-tls")[0].spec.issuerRef.name, "draguard-ca", "leaf issuer");
  });

  // helm-generated TLS, with another release name and namespace.
  const h = render(["--set", "tls.mode=helm"], { release: "gpu-policy", namespace: "platform" });
  commonChecks(h, "tls=helm", { tlsMode: "helm" });
  await validateSchemas(h, "tls=helm");
  checkHelmTLS(h, "tls=helm");

  // external TLS
  const ext = render(["--set", "tls.mode=external", "--set", "tls.external.secretName=my-tls", "--set", `tls.external.caBundle=${FAKE_CA}`]);
  commonChecks(ext, "tls=external", { tlsMode: "external" });
  check("tls=external: mounts the given Secret, caBundle from values, no generated TLS objects", () => {
    eq(one(ext.docs, "Deployment").spec.template.spec.volumes.find((v) => v.name === "tls").secret.secretName, "my-tls", "secret");
    for (const { w } of webhooksOf(ext)) eq(w.clientConfig.caBundle, FAKE_CA, "caBundle");
    eq(find(ext.docs, "Secret").length + find(ext.docs, "Certificate").length + find(ext.docs, "Issuer").length, 0, "TLS objects");
  });

  // webhook.url: a webhook server outside the cluster (local development); caBundle as with the
  // Service in each TLS mode.
  const extArgs = ["--set", "tls.mode=external", "--set", "tls.external.secretName=my-tls", "--set", `tls.external.caBundle=${FAKE_CA}`];
  const urlExt = render([...extArgs, "--set", "webhook.url=https://127.0.0.1:8443/"]);
  await validateSchemas(urlExt, "webhook.url, tls=external");
  check("webhook.url, tls=external: every webhook calls <url>/validate or /mutate, caBundle from values", () => {
    const hooks = webhooksOf(urlExt);
    eq(hooks.length, 5, "webhooks");
    for (const { w, mutating } of hooks) {
      deepEq(w.clientConfig, { url: `https://127.0.0.1:8443${mutating ? "/mutate" : "/validate"}`, caBundle: FAKE_CA },
        `${w.name} clientConfig`);
    }
  });
  check("webhook.url, tls=external: nothing else changes", () => {
    const strip = (docs) => docs.map((d) => JSON.parse(JSON.stringify(d, (k, v) => (k === "clientConfig" ? undefined : v))));
    deepEq(strip(urlExt.docs), strip(ext.docs), "objects without clientConfig");
  });
  const urlSelf = render(["--set", "webhook.url=https://dev-box.example:9443/prefix"]);
  check("webhook.url, tls=self: url with the base path kept, no static caBundle (the server injects it)", () => {
    for (const { w, mutating } of webhooksOf(urlSelf)) {
      deepEq(w.clientConfig, { url: `https://dev-box.example:9443/prefix${mutating ? "/mutate" : "/validate"}` }, w.name);
    }
  });
  const urlHelm = render(["--set", "tls.mode=helm", "--set", "webhook.url=https://[::1]:8443"]);
  check("webhook.url, tls=helm: IPv6 literal host, the generated CA as caBundle", () => {
    const s = find(urlHelm.docs, "Secret", "draguard-tls")[0];
    for (const { w, mutating } of webhooksOf(urlHelm)) {
      eq(w.clientConfig.url, `https://[::1]:8443${mutating ? "/mutate" : "/validate"}`, `${w.name} url`);
      eq(w.clientConfig.caBundle, s.data["ca.crt"], `${w.name} caBundle`);
      assert(!w.clientConfig.service, `${w.name} has no service`);
    }
  });
  check("webhook.url unset or empty: the Service, output identical to the default", () => {
    eq(render(["--set", "webhook.url="]).text, def.text, "render with webhook.url=\"\"");
    for (const { w } of webhooksOf(def)) assert(w.clientConfig.service && !w.clientConfig.url, `${w.name} uses the Service`);
  });
  for (const [name, url, why] of [
    ["http", "http://127.0.0.1:8443", "must start with https://"],
    ["no scheme", "127.0.0.1:8443", "must start with https://"],
    ["query", "https://127.0.0.1:8443?x=1", "must not have a query"],
    ["fragment", "https://127.0.0.1:8443#f", "must not have a fragment"],
    ["user info", "https://user:pw@127.0.0.1:8443", "must not contain user info"],
    ["no host", "https:///validate", "has no host"],
    ["white space", "https://127.0.0.1 :8443", "contains white space"],
  ]) {
    check(`webhook.url refused with a clear message: ${name}`, () => {
      const res = helm(["template", "draguard", CHART, "--namespace", "draguard-system", "--set-string", `webhook.url=${url}`],
        { allowFail: true });
      assert(res.status !== 0, "helm template succeeded");
      assert(res.stderr.includes(`webhook.url "${url}" ${why}`), `unexpected error text: ${res.stderr.slice(0, 300)}`);
    });
  }

  // Mutation off
  const nm = render(["--set", "mutation.enabled=false"]);
  commonChecks(nm, "mutation=off", { mutation: false });
  check("mutation=off: no MutatingWebhookConfiguration", () => eq(find(nm.docs, "MutatingWebhookConfiguration").length, 0, "count"));

  // Audit mode: auto failurePolicy becomes Ignore
  const au = render(["--set", "policy.mode=audit"]);
  check("policy.mode=audit: failurePolicy auto -> Ignore; policy says audit", () => {
    for (const { w } of webhooksOf(au)) eq(w.failurePolicy, "Ignore", w.name);
    eq(yaml.load(find(au.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]).mode, "audit", "mode");
  });
  const fp = render(["--set", "policy.mode=audit", "--set", "validating.failurePolicy=Fail", "--set", "mutation.failurePolicy=Ignore"]);
  check("explicit failurePolicy wins over auto", () => {
    for (const { w, mutating } of webhooksOf(fp)) eq(w.failurePolicy, mutating ? "Ignore" : "Fail", w.name);
  });

  // mTLS from the apiserver
  const ca = render(["--set", "tls.clientAuth.enabled=true", "--set", "tls.clientAuth.caSecretName=apiserver-client-ca"]);
  commonChecks(ca, "clientAuth");
  check("clientAuth: --client-ca and --client-cn kube-apiserver, CA mounted", () => {
    const c = one(ca.docs, "Deployment").spec.template.spec.containers[0];
    const i = c.args.indexOf("--client-ca");
    assert(i > 0 && c.args[i + 1] === "/client-ca/ca.crt", "--client-ca");
    const j = c.args.indexOf("--client-cn");
    assert(j > 0 && c.args[j + 1] === "kube-apiserver", "--client-cn kube-apiserver");
    assert(c.volumeMounts.some((m) => m.mountPath === "/client-ca"), "client CA mount");
  });

  // Monitoring objects
  const mon = render(["--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true"]);
  await validateSchemas(mon, "monitoring");
  check("monitoring: ServiceMonitor and PrometheusRule alerts", () => {
    eq(one(mon.docs, "ServiceMonitor").spec.endpoints[0].port, "metrics", "ServiceMonitor port");
    const rules = one(mon.docs, "PrometheusRule").spec.groups.flatMap((g) => g.rules);
    const expr = (a) => rules.find((x) => x.alert === a).expr;
    assert(expr("DraguardWebhookFailOpen").includes("apiserver_admission_webhook_fail_open_count"), "fail-open alert");
    assert(/apiserver_admission_webhook_rejection_count\{error_type="calling_webhook_error"/.test(expr("DraguardWebhookCallErrors")), "call error alert");
    assert(expr("DraguardCertificateExpiringSoon").includes("draguard_tls_cert_expiry_timestamp_seconds") &&
      expr("DraguardCertificateExpiringSoon").includes(String(30 * 86400)), "cert expiry < 30 days");
    for (const { w } of webhooksOf(mon)) {
      assert(new RegExp(`^(${expr("DraguardWebhookFailOpen").match(/name=~"([^"]+)"/)[1].replace(/\\\\/g, "\\")})$`).test(w.name),
        `alert name regex matches ${w.name}`);
    }
  });

  // Replica counts and the PDB
  for (const n of [1, 2, 5]) commonChecks(render(["--set", `replicaCount=${n}`]), `replicas=${n}`, { replicas: n });

  // Options
  const opts = render(["--set", "webhook.matchConditions=false", "--set", "validating.crds.enabled=false",
    "--set", "validating.claims=false", "--set-json", 'topology.volume={"configMap":{"name":"gpu-topology"}}',
    "--set-json", 'webhook.excludeNamespaces=["gpu-operator"]', "--set", "restartOnPolicyChange=true"]);
  check("options: matchConditions off, CRD and claim webhooks off, topology dir, extra exclusions, checksum", () => {
    const names = webhooksOf(opts).map((x) => x.w.name);
    eq(names, ["pods.validate.draguard.io", "workloads.validate.draguard.io", "pods.mutate.draguard.io"], "webhooks");
    for (const { w } of webhooksOf(opts)) {
      assert(!w.matchConditions, `${w.name} has matchConditions`);
      assert(w.namespaceSelector.matchExpressions[0].values.includes("gpu-operator"), "extra exclusion");
    }
    const dep = one(opts.docs, "Deployment");
    const c = dep.spec.template.spec.containers[0];
    eq(c.args[c.args.indexOf("--topology-dir") + 1], "/topology", "--topology-dir");
    assert(dep.spec.template.metadata.annotations["checksum/policy"], "checksum annotation");
  });
  // Topology from ConfigMaps through the API: a Role in the topology namespace, the flag, no volume.
  const cmTopo = render(["--set", "topology.source=configmaps", "--set", "topology.configMaps.namespace=gpu-topology"]);
  check("topology.source=configmaps: Role/RoleBinding in the topology namespace, --topology-configmaps, no volume", () => {
    const role = cmTopo.docs.find((d) => d.kind === "Role" && d.metadata.name === "draguard-topology");
    assert(role, "topology Role");
    eq(role.metadata.namespace, "gpu-topology", "Role namespace");
    eq(role.rules, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["get", "list", "watch", "delete"] }], "Role rules");
    eq(find(cmTopo.docs, "ClusterRole", "draguard-topology-nodes")[0].rules,
      [{ apiGroups: [""], resources: ["nodes"], verbs: ["list", "watch"] }], "Nodes: list and watch (metadata)");
    eq(find(cmTopo.docs, "ClusterRoleBinding", "draguard-topology-nodes")[0].subjects,
      [{ kind: "ServiceAccount", name: "draguard", namespace: cmTopo.namespace }], "Nodes binding");
    const rb = cmTopo.docs.find((d) => d.kind === "RoleBinding" && d.metadata.name === "draguard-topology");
    assert(rb, "topology RoleBinding");
    eq(rb.metadata.namespace, "gpu-topology", "RoleBinding namespace");
    eq(rb.roleRef, { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "draguard-topology" }, "roleRef");
    eq(rb.subjects, [{ kind: "ServiceAccount", name: "draguard", namespace: cmTopo.namespace }], "RoleBinding subject");
    const cr = find(cmTopo.docs, "ClusterRole", "draguard")[0];
    assert(!cr.rules.some((x) => x.resources.includes("configmaps")), "no cluster-wide configmaps grant");
    const c = one(cmTopo.docs, "Deployment").spec.template.spec.containers[0];
    eq(c.args[c.args.indexOf("--topology-configmaps") + 1], "gpu-topology", "--topology-configmaps");
    assert(!c.args.includes("--topology-dir"), "no --topology-dir");
    eq(c.args[c.args.indexOf("--kube") + 1], "auto", "--kube");
    assert(!(c.volumeMounts || []).some((m) => m.name === "topology"), "no topology mount");
  });
  check("topology.source=configmaps: the webhook's ServiceAccount may delete only shape objects", () => {
    const vap = find(cmTopo.docs, "ValidatingAdmissionPolicy", "draguard-topology-collect")[0];
    assert(vap, "collection policy");
    eq(find(cmTopo.docs, "ValidatingAdmissionPolicyBinding", "draguard-topology-collect")[0].spec,
      { policyName: vap.metadata.name, validationActions: ["Deny"] }, "binding");
    eq(vap.spec.matchConstraints.resourceRules[0].operations, ["DELETE"], "deletes only");
    const who = (u) => celEvaluate(vap.spec.matchConditions[0].expression, { request: { userInfo: { username: u } } });
    eq(who(`system:serviceaccount:${cmTopo.namespace}:draguard`), true, "matches the webhook's ServiceAccount");
    eq(who(`system:serviceaccount:${cmTopo.namespace}:draguard-exporter`), false, "not the exporter's");
    const deletes = (labels) => vap.spec.validations.every((v) =>
      celEvaluate(v.expression, { request: { operation: "DELETE" }, oldObject: { metadata: { name: "x", labels } }, object: null }) === true);
    eq(deletes({ "draguard.io/topology": "shape", "draguard.io/topology-shape": "0123456789abcdef" }), true, "a shape object");
    eq(deletes({ "draguard.io/topology": "hwloc" }), false, "a per-node ConfigMap");
    eq(deletes(undefined), false, "the policy ConfigMap");
  });
  const cmTopoDefault = render(["--set", "topology.source=configmaps"]);
  check("topology.source=configmaps: the shape-object webhook (its namespaces, shape label, Fail, own path)", () => {
    const w = topologyWebhook(cmTopo);
    assert(w, "webhook");
    eq(w.clientConfig.service.path, "/validate-topology", "path");
    eq(w.failurePolicy, "Fail", "failurePolicy");
    eq(w.sideEffects, "None", "sideEffects");
    eq(w.namespaceSelector, { matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In",
      values: [cmTopo.namespace, "gpu-topology"] }] }, "the release namespace (the exporter writes there) and the topology namespace");
    eq(topologyWebhook(cmTopoDefault).namespaceSelector.matchExpressions[0].values, [cmTopoDefault.namespace], "one namespace by default");
    eq(w.objectSelector, { matchLabels: { "draguard.io/topology": "shape" } }, "shape objects only");
    eq(w.rules, [{ apiGroups: [""], apiVersions: ["v1"], resources: ["configmaps"], operations: ["CREATE", "UPDATE"], scope: "Namespaced" }], "rules");
    assert(!topologyWebhook(render(["--set", "exporter.enabled=false"])), "no webhook without the API source");
  });
  const cmTopoDefaultNs = render(["--set", "topology.source=configmaps"]);
  check("topology.source=configmaps: namespace defaults to the release namespace", () => {
    const role = cmTopoDefaultNs.docs.find((d) => d.kind === "Role" && d.metadata.name === "draguard-topology");
    eq(role.metadata.namespace, cmTopoDefaultNs.namespace, "Role namespace");
  });
  check("default values: --kube auto, topology from the exporter's ConfigMaps in the release namespace", () => {
    const r0 = render([]);
    const c = one(r0.docs, "Deployment").spec.template.spec.containers[0];
    eq(c.args[c.args.indexOf("--kube") + 1], "auto", "--kube");
    eq(c.args[c.args.indexOf("--topology-configmaps") + 1], r0.namespace, "--topology-configmaps");
    assert(find(r0.docs, "Role", "draguard-topology")[0], "webhook topology Role");
  });
  check("exporter.enabled=false: no exporter objects, bundled topology", () => {
    const r0 = render(["--set", "exporter.enabled=false"]);
    assert(!r0.docs.some((d) => d.kind === "Role" && d.metadata.name === "draguard-topology"), "no topology Role");
    assert(!r0.docs.some((d) => d.kind === "DaemonSet" || d.metadata.name.includes("exporter")), "no exporter");
    const c = one(r0.docs, "Deployment").spec.template.spec.containers[0];
    eq(c.args[c.args.indexOf("--kube") + 1], "auto", "--kube");
    eq(c.args[c.args.indexOf("--kube-timeout") + 1], "10", "--kube-timeout");
    assert(!c.args.includes("--topology-configmaps") && !c.args.includes("--topology-dir"), "bundled topology");
  });
  exporterChecks();
  const optIn = render(["--set", "rbac.topologyConfigMaps=true"]);
  check("rbac.topologyConfigMaps=true: cluster-wide configmaps list/watch", () => {
    const cmr = find(optIn.docs, "ClusterRole", "draguard")[0].rules.find((x) => x.resources.includes("configmaps"));
    eq(cmr.verbs.slice().sort(), ["list", "watch"], "configmap verbs");
  });

  check("policy.mutation.computeDomains: ComputeDomains get/create only when it is on", () => {
    const grant = (rr) => find(rr.docs, "ClusterRole", "draguard")[0].rules.find((x) => x.apiGroups.includes("resource.nvidia.com"));
    assert(!grant(render([])), "ComputeDomain grant with computeDomains off");
    for (const mode of ["auto", "required"]) {
      const on = render(["--set", `policy.mutation.computeDomains=${mode}`]);
      const g = grant(on);
      assert(g, `no ComputeDomain grant with computeDomains ${mode}`);
      eq(g.resources, ["computedomains"], "ComputeDomain resources");
      eq(g.verbs.slice().sort(), ["create", "get"], "ComputeDomain verbs");
      const pol = yaml.load(find(on.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]);
      eq(pol.mutation.computeDomains, mode, "policy value");
    }
    assert(!grant(render(["--set", "policy.mutation.computeDomains=auto", "--set", "mutation.enabled=false"])),
      "ComputeDomain grant without mutation");
  });

  check("audit is off by default: no --audit flags, no audit RBAC", () => {
    const r0 = render([]);
    const c = one(r0.docs, "Deployment").spec.template.spec.containers[0];
    assert(!c.args.some((a) => a.startsWith("--audit")), "no --audit flags");
    assert(!r0.docs.some((d) => d.metadata.name.endsWith("-audit") || d.metadata.name.endsWith("-audit-lease")), "no audit RBAC");
  });
  const aud = render(["--set", "audit.enabled=true", "--set", "audit.intervalSeconds=300", "--set", "audit.policyReports=false"]);
  commonChecks(aud, "audit.enabled");
  await validateSchemas(aud, "audit.enabled");
  check("audit.enabled: serve flags, read-only list RBAC (with ResourceSlices), and the Lease Role", () => {
    const c = one(aud.docs, "Deployment").spec.template.spec.containers[0];
    const arg = (f) => c.args[c.args.indexOf(f) + 1];
    eq(arg("--audit-interval"), "300", "--audit-interval");
    eq(arg("--audit-page-size"), "500", "--audit-page-size");
    eq(arg("--audit-max-results"), "1000", "--audit-max-results");
    eq(arg("--audit-policy-reports"), "off", "--audit-policy-reports");
    eq(arg("--audit-lease-duration"), "60", "--audit-lease-duration");
    const cr = find(aud.docs, "ClusterRole", "draguard-audit")[0];
    assert(cr, "ClusterRole draguard-audit");
    for (const rule of cr.rules) eq(rule.verbs, ["list"], `verbs of ${rule.resources}`);
    const listed = cr.rules.flatMap((x) => x.resources);
    for (const res of ["pods", "deployments", "cronjobs", "resourceclaims", "resourceclaimtemplates", "pytorchjobs"]) {
      assert(listed.includes(res), `lists ${res}`);
    }
    // The allocation audit reads what each allocated device is from the (cluster-scoped) slices.
    const dra = cr.rules.find((x) => x.resources.includes("resourceslices"));
    assert(dra && dra.apiGroups.join() === "resource.k8s.io", "lists resource.k8s.io resourceslices");
    assert(!listed.includes("policyreports"), "no report access with policyReports=false");
    const role = find(aud.docs, "Role", "draguard-audit-lease")[0];
    eq(role.rules[1].resourceNames, ["draguard-audit"], "Lease name (= --service-name + -audit)");
    eq(role.rules[1].verbs, ["get", "update"], "Lease verbs");
    eq(find(aud.docs, "RoleBinding", "draguard-audit-lease")[0].subjects[0].name, "draguard", "bound to the ServiceAccount");
  });
  const audRep = render(["--set", "audit.enabled=true"]);
  check("audit.enabled with policyReports: PolicyReports get/list/create/update/delete", () => {
    const cr = find(audRep.docs, "ClusterRole", "draguard-audit")[0];
    const rep = cr.rules.find((x) => x.resources.includes("policyreports"));
    eq(rep.apiGroups, ["wgpolicyk8s.io"], "group");
    eq(rep.verbs, ["get", "list", "create", "update", "delete"], "verbs");
    const c = one(audRep.docs, "Deployment").spec.template.spec.containers[0];
    eq(c.args[c.args.indexOf("--audit-interval") + 1], "600", "default interval");
    eq(c.args[c.args.indexOf("--audit-policy-reports") + 1], "on", "reports on");
  });

  const cpu = render(["--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.cpu.mode=grouped"]);
  check("policy.mutation.cpu reaches the policy file", () => {
    const p = yaml.load(find(cpu.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]);
    eq(p.mutation.numaAlignment, "numaNode", "numaAlignment");
    eq(p.mutation.cpu, { deviceClass: "dra.cpu", mode: "grouped" }, "cpu");
    eq(p.mutation.kueue, false, "kueue off by default");
  });
  const kueue = render(["--set", "policy.mutation.numaAlignment=numaNode", "--set", "policy.mutation.kueue=true"]);
  check("policy.mutation.kueue reaches the policy file", () => {
    const p = yaml.load(find(kueue.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]);
    eq(p.mutation.kueue, true, "kueue");
  });
  const glob = render(["--set-json", 'policy.legacyResources=["amd.com/*","example.com/gpu"]']);
  check("matchConditions follow policy.legacyResources (glob prefix)", () => {
    const m = webhooksOf(glob).find((x) => x.w.name === "pods.mutate.draguard.io").w.matchConditions[0].expression;
    const vars = (limits) => ({ object: podOf({ containers: [ctr({ limits })] }), oldObject: null, request: req("Pod") });
    celCheck(m, vars({ "amd.com/gpu": "1" }), true, "amd.com/gpu");
    celCheck(m, vars({ "example.com/gpu": "1" }), true, "example.com/gpu");
    celCheck(m, vars({ "nvidia.com/gpu": "1" }), false, "nvidia.com/gpu not listed");
  });
  const star = render(["--set-json", 'policy.legacyResources=["*gpu"]']);
  check("matchConditions: a glob without a literal prefix matches every resource (never skips)", () => {
    const m = webhooksOf(star).find((x) => x.w.name === "pods.mutate.draguard.io").w.matchConditions[0].expression;
    celCheck(m, { object: podOf({ containers: [ctr({ limits: { "foo/bar": "1" } })] }), oldObject: null, request: req("Pod") }, true, "any resource");
  });
}

// ---------------------------------------------------------------------------------------------
// The DG001 backstop, the pre-delete hook and the helm test Pod

function checkHooks(r, label, { tlsMode = "self", mutation = true, audit = false } = {}) {
  const fullname = r.release.includes("draguard") ? r.release : `${r.release}-draguard`;
  const hookOf = (d) => (d.metadata.annotations || {})["helm.sh/hook"];
  check(`${label}: pre-delete hook Job deletes both webhook configurations, with its own minimal RBAC`, () => {
    const hooks = r.docs.filter((d) => hookOf(d) === "pre-delete");
    const names = hooks.map((d) => `${d.kind}/${d.metadata.name}`).sort();
    const want = ["ClusterRole", "ClusterRoleBinding", "Job", "ServiceAccount", ...(tlsMode === "self" ? ["Role", "RoleBinding"] : [])]
      .map((k) => `${k}/${fullname}-uninstall`).sort();
    eq(names, want, "pre-delete hook objects");
    for (const d of hooks) {
      eq(d.metadata.annotations["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded", `${d.kind} delete policy`);
      eq(d.metadata.annotations["helm.sh/hook-weight"], d.kind === "Job" ? "0" : "-10", `${d.kind} weight (RBAC before the Job)`);
    }
    const job = hooks.find((d) => d.kind === "Job");
    const pod = job.spec.template.spec;
    eq(pod.serviceAccountName, `${fullname}-uninstall`, "hook service account");
    const c = pod.containers[0];
    const dep = one(r.docs, "Deployment").spec.template.spec.containers[0];
    eq([c.image, c.command], [dep.image, dep.command], "same image and command as the server");
    const wantArgs = ["uninstall-webhooks", "--validating", fullname, ...(mutation ? ["--mutating", fullname] : []),
      ...(tlsMode === "self" ? ["--secret", `${fullname}-tls`, "--namespace", r.namespace] : [])];
    eq(c.args, wantArgs, "hook args");
    eq(c.securityContext, dep.securityContext, "hook securityContext");
    const cr = hooks.find((d) => d.kind === "ClusterRole");
    eq(cr.rules, [{ apiGroups: ["admissionregistration.k8s.io"],
      resources: mutation ? ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"] : ["validatingwebhookconfigurations"],
      resourceNames: [fullname], verbs: ["delete"] }], "hook ClusterRole");
    const role = hooks.find((d) => d.kind === "Role");
    if (role) eq(role.rules, [{ apiGroups: [""], resources: ["secrets"], resourceNames: [`${fullname}-tls`], verbs: ["delete"] }], "hook Role");
  });
  check(`${label}: helm test Pod posts a legacy GPU review over verified TLS`, () => {
    const tests = r.docs.filter((d) => hookOf(d) === "test");
    const pod = tests.find((d) => d.kind === "Pod");
    assert(pod, "no test Pod");
    eq(pod.metadata.annotations["helm.sh/hook-delete-policy"], "before-hook-creation,hook-succeeded", "delete policy");
    const c = pod.spec.containers[0];
    eq(c.args, ["selftest", "--url", `https://${fullname}.${r.namespace}.svc:443`, "--ca-file", "/ca/ca.crt",
      "--expect", audit ? "audit" : "deny"], "selftest args");
    eq(pod.spec.automountServiceAccountToken, false, "no API token in the test Pod");
    const vol = pod.spec.volumes.find((v) => v.name === "ca");
    if (tlsMode === "external") {
      eq(vol.configMap.name, `${fullname}-selftest-ca`, "external: CA from tls.external.caBundle");
      const cm = tests.find((d) => d.kind === "ConfigMap");
      assert(cm && cm.data["ca.crt"].includes("BEGIN CERTIFICATE"), "CA ConfigMap");
    } else {
      eq([vol.secret.secretName, vol.secret.items], [`${fullname}-tls`, [{ key: "ca.crt", path: "ca.crt" }]], "CA from the TLS Secret only");
    }
  });
}

// The backstop rendered by the chart equals what `draguard backstop` prints for the chart's policy.
function checkBackstop(r, label, { enabled = true } = {}) {
  const fullname = r.release.includes("draguard") ? r.release : `${r.release}-draguard`;
  const vap = find(r.docs, "ValidatingAdmissionPolicy").filter(notExporter);
  const vapb = find(r.docs, "ValidatingAdmissionPolicyBinding").filter(notExporter);
  if (!enabled) {
    check(`${label}: no backstop`, () => eq(vap.length + vapb.length, 0, "backstop objects"));
    return;
  }
  check(`${label}: backstop ValidatingAdmissionPolicy + binding`, () => {
    eq([vap.length, vapb.length], [1, 1], "one policy, one binding");
    eq([vap[0].metadata.name, vapb[0].spec.policyName], [`${fullname}-backstop`, `${fullname}-backstop`], "names");
    const vwc = one(r.docs, "ValidatingWebhookConfiguration");
    eq(vapb[0].spec.matchResources.namespaceSelector, vwc.webhooks[0].namespaceSelector, "binding namespaces = the webhook's");
  });
  const bin = process.env.DRAGUARD_BIN;
  if (!bin || !fs.existsSync(bin)) {
    console.log(`skip ${label}: backstop generator comparison (draguard binary not built)`);
    return;
  }
  check(`${label}: backstop equals \`draguard backstop\` for the chart's policy (CEL compiled by the project's front end)`, () => {
    const cm = find(r.docs, "ConfigMap", `${fullname}-policy`)[0];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "draguard-backstop-"));
    try {
      fs.writeFileSync(path.join(dir, "policy.yaml"), cm.data["policy.yaml"]);
      const g = spawnSync(bin, ["backstop", "--config", path.join(dir, "policy.yaml"), "--name", `${fullname}-backstop`,
        "--namespace", r.namespace, "-o", "json"], { encoding: "utf8" });
      assert(g.status === 0, `draguard backstop failed (${g.status}): ${g.stderr}`);
      const items = JSON.parse(g.stdout).items;
      eq(items.map((i) => i.kind), ["ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"], "generated kinds");
      deepEq(vap[0].spec, items[0].spec, "policy spec");
      const { matchResources, ...bindingSpec } = vapb[0].spec;
      deepEq(bindingSpec, items[1].spec, "binding spec");
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
}

async function installSafety() {
  for (const [mode, extra] of [["self", []], ["cert-manager", []], ["helm", []],
    ["external", ["--set", "tls.external.secretName=my-tls", "--set", `tls.external.caBundle=${FAKE_CA_PEM}`]]]) {
    const r = render(["--set", `tls.mode=${mode}`, ...extra]);
    checkHooks(r, `tls=${mode}`, { tlsMode: mode });
    checkBackstop(r, `tls=${mode}`);
  }
  const nm = render(["--set", "mutation.enabled=false"], { release: "gpu", namespace: "platform" });
  checkHooks(nm, "mutation=off", { mutation: false });
  await validateSchemas(nm, "mutation=off (hooks)");
  const au = render(["--set", "policy.mode=audit"]);
  checkHooks(au, "policy.mode=audit", { audit: true });
  checkBackstop(au, "policy.mode=audit");
  check("policy.mode=audit: backstop validationActions Warn + Audit", () =>
    eq(oneBackstopBinding(au.docs).spec.validationActions, ["Warn", "Audit"], "actions"));
  check("default: backstop validationActions Deny", () =>
    eq(oneBackstopBinding(render([]).docs).spec.validationActions, ["Deny"], "actions"));
  const varied = render(["--set-json", 'policy.legacyResources=["nvidia.com/gpu","amd.com/*","example.com/xpu-?1","*.vendor.io/npu"]',
    "--set", "policy.extendedResourceMapping=allow", "--set-json", 'policy.exemptions.users=["system:serviceaccount:ci:*"]',
    "--set-json", 'policy.exemptions.groups=["gpu-admins"]',
    "--set-json", 'policy.exemptions.objectSelectors=[{"matchLabels":{"tier":"infra","b":"x"}},{"matchExpressions":[{"key":"team","operator":"In","values":["ml","cv"]},{"key":"gone","operator":"DoesNotExist"},{"key":"t","operator":"NotIn","values":["a"]},{"key":"e","operator":"Exists"}]}]']);
  checkBackstop(varied, "backstop: globs, extendedResourceMapping=allow, user/group/label exemptions");
  const excepted = render(["--set-json", 'policy.exceptions=[{"name":"bench","rules":["DG001","DG005"],"namespaces":["team-a","lab-*"],"objectNames":["bench","bench-*"],"reason":"vendor benchmark","expires":"2099-01-01T00:00:00Z"},{"rules":["DG001"],"namespaces":["infra"],"objectSelector":{"matchLabels":{"tier":"infra"}},"reason":"burn-in"},{"rules":["DG001"],"namespaces":["lab"],"objectSelector":{},"reason":"lab"},{"rules":["DG003"],"namespaces":["x"],"objectSelector":{},"reason":"r"}]',
    "--set-json", 'policy.annotationExceptions=[{"namespaces":["research-*"]},{"namespaces":["team-a"],"users":["alice"],"groups":["gpu-admins"],"rules":["DG001"]},{"namespaces":["team-b"],"rules":["DG005"]}]']);
  checkBackstop(excepted, "backstop: policy exceptions and annotationExceptions");
  check("default: the backstop honours no draguard.io/exempt annotation", () =>
    eq(find(render([]).docs, "ValidatingAdmissionPolicy").filter(notExporter)[0].spec.matchConditions
      .map((c) => c.name).filter((n) => n.startsWith("no-dg001")), [], "exception conditions"));
  const warnMap = render(["--set", "policy.extendedResourceMapping=warn", "--set-json", 'policy.deviceClasses={"gpu":["g.example.com"]}']);
  checkBackstop(warnMap, "backstop: extendedResourceMapping=warn, custom device classes");
  const custom = render(["--set-json", 'policy.deviceClasses={"gpu":["g.example.com"],"mig":["m.example.com"],"passthrough":[]}']);
  checkBackstop(custom, "backstop: custom device classes");
  const warn = render(["--set", "policy.rules.DG001.action=warn"]);
  checkBackstop(warn, "backstop: DG001 warn");
  check("backstop: DG001 warn -> Warn + Audit", () =>
    eq(oneBackstopBinding(warn.docs).spec.validationActions, ["Warn", "Audit"], "actions"));
  checkBackstop(render(["--set", "policy.rules.DG001.action=off"]), "backstop: DG001 off", { enabled: false });
  checkBackstop(render(["--set", "backstop.enabled=false"]), "backstop.enabled=false", { enabled: false });
  check("uninstallHook.enabled=false / selftest.enabled=false: no hooks", () => {
    const r = render(["--set", "uninstallHook.enabled=false", "--set", "selftest.enabled=false"]);
    eq(r.docs.filter((d) => (d.metadata.annotations || {})["helm.sh/hook"]).length, 0, "hook objects");
  });
}

// values.schema.json and template guards must reject bad values.
// The topology exporter DaemonSet, its RBAC and the node-label ValidatingAdmissionPolicy.
function exporterChecks() {
  const r = render([]);
  const sa = "system:serviceaccount:draguard-system:draguard-exporter";
  check("exporter: DaemonSet on GPU nodes, tolerations, runtimeClass, NVML env, restricted and read-only", () => {
    const ds = one(r.docs, "DaemonSet");
    const spec = ds.spec.template.spec;
    eq(spec.nodeSelector, { "nvidia.com/gpu.present": "true" }, "nodeSelector");
    assert(spec.tolerations.some((t) => t.key === "nvidia.com/gpu" && t.operator === "Exists"), "GPU toleration");
    eq(spec.runtimeClassName, "nvidia", "runtimeClassName");
    eq(spec.serviceAccountName, "draguard-exporter", "serviceAccountName");
    const c = spec.containers[0];
    eq(c.args.slice(0, 3), ["topology", "export", "--publish"], "args");
    eq(c.args[c.args.indexOf("--interval") + 1], "10m", "--interval");
    const env = Object.fromEntries(c.env.map((e) => [e.name, e.value ?? e.valueFrom]));
    eq(env.NVIDIA_VISIBLE_DEVICES, "all", "NVIDIA_VISIBLE_DEVICES");
    eq(env.NVIDIA_DRIVER_CAPABILITIES, "utility", "NVIDIA_DRIVER_CAPABILITIES");
    eq(env.NODE_NAME, { fieldRef: { fieldPath: "spec.nodeName" } }, "NODE_NAME");
    eq(c.securityContext.readOnlyRootFilesystem, true, "read-only root");
    eq(c.securityContext.allowPrivilegeEscalation, false, "no privilege escalation");
    eq(c.securityContext.capabilities.drop, ["ALL"], "capabilities");
    eq(spec.securityContext.runAsNonRoot, true, "runAsNonRoot");
    assert(c.resources.requests && c.resources.limits.memory, "resources");
    eq(c.readinessProbe.httpGet.path, "/readyz", "readiness");
    assert(!c.resources.limits["nvidia.com/gpu"], "no GPU requested");
  });
  check("exporter: pods are not selected by the webhook's Deployment, Service or PDB", () => {
    const pod = one(r.docs, "DaemonSet").spec.template.metadata.labels;
    const sel = one(r.docs, "Deployment").spec.selector.matchLabels;
    assert(!Object.entries(sel).every(([k, v]) => pod[k] === v), "Deployment selector matches exporter pods");
    for (const svc of find(r.docs, "Service")) {
      assert(!Object.entries(svc.spec.selector).every(([k, v]) => pod[k] === v), `Service ${svc.metadata.name} selects exporter pods`);
    }
  });
  check("exporter: RBAC get/patch nodes, create/get/update/delete configmaps in the release namespace only", () => {
    eq(find(r.docs, "ClusterRole", "draguard-exporter")[0].rules, [{ apiGroups: [""], resources: ["nodes"], verbs: ["get", "patch"] }], "ClusterRole");
    const role = find(r.docs, "Role", "draguard-exporter")[0];
    eq(role.metadata.namespace, "draguard-system", "Role namespace");
    eq(role.rules, [{ apiGroups: [""], resources: ["configmaps"], verbs: ["create", "get", "update", "delete"] }], "Role");
    eq(find(r.docs, "RoleBinding", "draguard-exporter")[0].subjects, [{ kind: "ServiceAccount", name: "draguard-exporter", namespace: "draguard-system" }], "RoleBinding");
    eq(find(r.docs, "ClusterRoleBinding", "draguard-exporter")[0].subjects[0].name, "draguard-exporter", "ClusterRoleBinding");
  });
  // Requests as the API server builds them: subResource absent for the object itself, userInfo.extra
  // absent for an unbound token; a Pod- or Node-bound token names its node in extra.
  const unbound = { userInfo: { username: sa } };
  const boundTo = (node) => ({ userInfo: { username: sa, extra: { "authentication.kubernetes.io/node-name": [node] } } });
  const admits = (vap, request, oldObject, object) => {
    const vars = { request, object, oldObject };
    const variables = {};
    for (const v of vap.spec.variables) variables[v.name] = celEvaluate(v.expression, { ...vars, variables });
    return vap.spec.validations.every((v) => celEvaluate(v.expression, { ...vars, variables }) === true);
  };
  check("exporter: the node policy allows only the shape and clique labels and topology annotation, of the node a bound token names", () => {
    const vap = find(r.docs, "ValidatingAdmissionPolicy", "draguard-exporter-node-label")[0];
    eq(vap.apiVersion, "admissionregistration.k8s.io/v1", "apiVersion");
    eq(find(r.docs, "ValidatingAdmissionPolicyBinding", "draguard-exporter-node-label")[0].spec, { policyName: vap.metadata.name, validationActions: ["Deny"] }, "binding");
    const user = (u) => celEvaluate(vap.spec.matchConditions[0].expression, { request: { userInfo: { username: u } } });
    eq(user(sa), true, "matches the exporter");
    eq(user("system:serviceaccount:kube-system:node-controller"), false, "not others");
    const node = (labels, extra = {}) => ({ metadata: { name: "n", labels, ...extra }, spec: { podCIDR: "10.0.0.0/24" } });
    const run = (oldObject, object, request = unbound) => admits(vap, request, oldObject, object);
    const base = node({ zone: "a" });
    const shaped = node({ zone: "a", "draguard.io/topology-shape": "0123456789abcdef" });
    eq(run(base, shaped), true, "adding the shape label");
    eq(run(node({ zone: "a", "draguard.io/topology-shape": "x" }), node({ zone: "a", "draguard.io/topology-shape": "y" })), true, "changing it");
    eq(run(base, node({ zone: "b" })), false, "changing another label");
    eq(run(base, node({})), false, "removing a label");
    eq(run(base, node({ zone: "a", extra: "1" })), false, "adding another label");
    const clique = "3183419e-9edc-4f0e-86e8-d895a9fb06be.17044";
    eq(run(base, node({ zone: "a", "nvidia.com/gpu.clique": clique })), true, "adding the NVLink clique label");
    eq(run(node({ zone: "a", "nvidia.com/gpu.clique": clique }), base), true, "removing it");
    eq(run(base, node({ zone: "a", "nvidia.com/gpu.clique": "rack-1" })), false, "setting it to something else");
    eq(run(node({ zone: "a", "nvidia.com/gpu.clique": "set-by-hand" }), node({ zone: "a", "nvidia.com/gpu.clique": "set-by-hand", "draguard.io/topology-shape": "0123456789abcdef" })), true, "publishing beside a clique label it leaves alone");
    eq(run(base, node({ zone: "a" }, { annotations: { a: "b" } })), false, "adding another annotation");
    const published = node({ zone: "a", "draguard.io/topology-shape": "0123456789abcdef" }, { annotations: { "draguard.io/topology": "{}" } });
    eq(run(base, published), true, "label and topology annotation in one write");
    eq(run(node({ zone: "a" }, { annotations: { keep: "1" } }), node({ zone: "a" }, { annotations: { keep: "1", "draguard.io/topology": "{}" } })), true, "keeping other annotations");
    eq(run(node({ zone: "a" }, { annotations: { keep: "1" } }), node({ zone: "a" }, { annotations: { "draguard.io/topology": "{}" } })), false, "dropping another annotation");
    eq(run(base, { ...base, metadata: { ...base.metadata, finalizers: ["x"] } }), false, "adding a finalizer");
    eq(run(base, { ...base, spec: { unschedulable: true } }), false, "changing the spec");
    eq(run(base, shaped, { ...unbound, subResource: "status" }), false, "through the status subresource");
    eq(run(base, shaped, boundTo("n")), true, "the shape label of the node the token is bound to");
    eq(run(base, shaped, boundTo("m")), false, "the shape label of another node");
    eq(run(base, published, boundTo("m")), false, "the publication of another node");
  });
  check("exporter: the ConfigMap policy allows only topology ConfigMaps, of the node a bound token names", () => {
    const vap = find(r.docs, "ValidatingAdmissionPolicy", "draguard-exporter-configmaps")[0];
    eq(vap.spec.matchConstraints.resourceRules, [{ apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE", "UPDATE", "DELETE"], resources: ["configmaps"] }], "matches ConfigMap writes and deletes");
    eq(celEvaluate(vap.spec.matchConditions[0].expression, { request: unbound }), true, "matches the exporter");
    eq(find(r.docs, "ValidatingAdmissionPolicyBinding", "draguard-exporter-configmaps")[0].spec, { policyName: vap.metadata.name, validationActions: ["Deny"] }, "binding");
    const as = (op, base = unbound) => ({ ...base, operation: op });
    const cm = (name, labels, extra = {}) => ({ metadata: labels ? { name, labels } : { name }, data: { "topology.xml": "<topology/>" }, ...extra });
    const topo = (node) => cm(`draguard-topology-${node}`, { "draguard.io/topology": "hwloc", "draguard.io/node": node });
    const shape = (name = `draguard-shape-${"0".repeat(32)}`, immutable = true) =>
      cm(name, { "draguard.io/topology": "shape", "draguard.io/topology-shape": "0123456789abcdef" }, immutable ? { immutable: true } : {});
    // Shape objects: create only, immutable, named by a digest; never changed or deleted.
    eq(admits(vap, as("CREATE"), null, shape()), true, "creating a shape object");
    eq(admits(vap, as("CREATE", boundTo("n")), null, shape()), true, "creating a shape object with a bound token");
    eq(admits(vap, as("CREATE"), null, shape(undefined, false)), false, "a mutable shape object");
    eq(admits(vap, as("CREATE"), null, shape("draguard-shape-xyz")), false, "a shape object not named by a digest");
    eq(admits(vap, as("UPDATE"), shape(), shape()), false, "updating a shape object");
    eq(admits(vap, as("DELETE"), shape(), null), false, "deleting a shape object");
    eq(admits(vap, as("UPDATE"), shape(), cm(shape().metadata.name)), false, "relabelling a shape object");
    // Per-node ConfigMaps of earlier releases: written by old exporters, deleted by new ones.
    eq(admits(vap, as("CREATE"), null, topo("n")), true, "a topology ConfigMap");
    eq(admits(vap, as("UPDATE", boundTo("n")), topo("n"), topo("n")), true, "the bound node's topology ConfigMap");
    eq(admits(vap, as("UPDATE", boundTo("m")), topo("n"), topo("n")), false, "another node's, with a bound token");
    eq(admits(vap, as("DELETE", boundTo("n")), topo("n"), null), true, "deleting the bound node's old ConfigMap");
    eq(admits(vap, as("DELETE", boundTo("m")), topo("n"), null), false, "deleting another node's");
    eq(admits(vap, as("DELETE"), cm("draguard-policy"), null), false, "deleting the webhook's policy ConfigMap");
    eq(admits(vap, as("UPDATE"), cm("draguard-policy"), cm("draguard-policy")), false, "the webhook's policy ConfigMap");
    eq(admits(vap, as("CREATE"), null, cm("draguard-topology-n")), false, "without the topology labels");
    eq(admits(vap, as("CREATE"), null, cm("draguard-topology-m", { "draguard.io/topology": "hwloc", "draguard.io/node": "n" })), false, "name and node label disagree");
  });
  check("exporter: off by values, no label policy when disabled", () => {
    const noVap = render(["--set", "exporter.labelPolicy=false"]);
    eq(find(noVap.docs, "ValidatingAdmissionPolicy", "draguard-exporter-node-label").length, 0, "no policy");
    const other = render(["--set", "exporter.runtimeClassName=", "--set-json", 'exporter.nodeSelector={"gpu":"yes"}']);
    const spec = one(other.docs, "DaemonSet").spec.template.spec;
    assert(!("runtimeClassName" in spec), "no runtimeClassName");
    // Helm merges maps: the default key stays unless set to null.
    eq(spec.nodeSelector, { gpu: "yes", "nvidia.com/gpu.present": "true" }, "nodeSelector from values");
  });
}

function rejections() {
  const bad = [
    ["replicaCount=abc", ["--set", "replicaCount=abc"]],
    ["replicaCount=0", ["--set", "replicaCount=0"]],
    ["tls.mode=selfsigned", ["--set", "tls.mode=selfsigned"]],
    ["policy.mode=strict", ["--set", "policy.mode=strict"]],
    ["validating.failurePolicy=Sometimes", ["--set", "validating.failurePolicy=Sometimes"]],
    ["validating.timeoutSeconds=31", ["--set", "validating.timeoutSeconds=31"]],
    ["mutation.reinvocationPolicy=Always", ["--set", "mutation.reinvocationPolicy=Always"]],
    ["unknown top-level key", ["--set", "replicas=3"]],
    ["policy rule action", ["--set", "policy.rules.DG001.action=block"]],
    ["policy rule id", ["--set", "policy.rules.XYZ.action=deny"]],
    ["legacy resource with a quote", ["--set-json", `policy.legacyResources=["nvidia.com/gpu' || true || '"]`]],
    ["templates mode", ["--set", "policy.mutation.templates=maybe"]],
    ["cpu mode", ["--set", "policy.mutation.cpu.mode=pinned"]],
    ["numa alignment", ["--set", "policy.mutation.numaAlignment=socket"]],
    ["kueue not a boolean", ["--set", "policy.mutation.kueue=sometimes"]],
    ["grace period too short", ["--set", "terminationGracePeriodSeconds=12"]],
    ["external TLS without secret", ["--set", "tls.mode=external", "--set", `tls.external.caBundle=${FAKE_CA}`]],
    ["external TLS without caBundle", ["--set", "tls.mode=external", "--set", "tls.external.secretName=x"]],
    ["self TLS without API access", ["--set", "kube.mode=off"]],
    ["self TLS lifetime 0", ["--set", "tls.self.certValidityDays=0"]],
    ["clientAuth without CA secret", ["--set", "tls.clientAuth.enabled=true"]],
    ["podOperations DELETE", ["--set-json", 'validating.podOperations=["DELETE"]']],
    ["audit interval too short", ["--set", "audit.enabled=true", "--set", "audit.intervalSeconds=5"]],
    ["audit without API access", ["--set", "audit.enabled=true", "--set", "kube.mode=off"]],
    ["audit unknown key", ["--set", "audit.schedule=daily"]],
  ];
  for (const [name, setArgs] of bad) {
    check(`rejects bad values: ${name}`, () => {
      const r = helm(["template", "draguard", CHART, "--namespace", "draguard-system", ...setArgs], { allowFail: true });
      assert(r.status !== 0, "helm template succeeded");
      assert(/schema|required|must|fail|invalid|error/i.test(r.stderr), `unexpected error text: ${r.stderr.slice(0, 300)}`);
    });
  }
}


// ---------------------------------------------------------------------------------------------
// The real server with the chart's arguments, TLS material and policy (when the binary is built;
// CTest passes it as DRAGUARD_BIN).

const REVIEW = (ns, resources) => JSON.stringify({
  apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview",
  request: {
    uid: "6f1d3c2a-0000-4000-8000-00000000c4a7", kind: { group: "", version: "v1", kind: "Pod" },
    resource: { group: "", version: "v1", resource: "pods" }, namespace: ns, operation: "CREATE",
    userInfo: { username: "alice" }, dryRun: false, oldObject: null,
    object: { apiVersion: "v1", kind: "Pod", metadata: { name: "train", namespace: ns },
      spec: { containers: [{ name: "main", image: "cuda", resources: { limits: resources } }] } },
  },
});

function request(mod, options, body) {
  return new Promise((resolve, reject) => {
    const req = mod.request({ timeout: 5000, ...options }, (res) => {
      let data = "";
      res.on("data", (c) => (data += c));
      res.on("end", () => resolve({ status: res.statusCode, body: data }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", reject);
    if (body) req.end(body);
    else req.end();
  });
}

function startServer(bin, args) {
  const child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const listening = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "listening" log line within 20 s: ${out.slice(-800)}`)), 20000);
    const onData = (chunk) => {
      out += chunk;
      for (const line of out.split("\n")) {
        if (!line.includes('"listening"')) continue;
        try {
          const j = JSON.parse(line);
          clearTimeout(timer);
          resolve({ https: Number(j.address.split(":").pop()), metrics: Number(String(j.metrics).split(":").pop()) });
          return;
        } catch { /* partial line */ }
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then((e) => reject(new Error(`server exited early (${JSON.stringify(e)}): ${out.slice(-800)}`)));
  });
  return { child, listening, exited, log: () => out };
}

async function stopServer(srv) {
  if (srv.child.exitCode !== null || srv.child.signalCode !== null) return srv.exited;
  srv.child.kill("SIGTERM");
  const t = setTimeout(() => srv.child.kill("SIGKILL"), 15000);
  const e = await srv.exited;
  clearTimeout(t);
  return e;
}

// Rewrites the Deployment's arguments for a local run: files from `files`, ephemeral loopback ports.
function localArgs(r, files) {
  const a = one(r.docs, "Deployment").spec.template.spec.containers[0].args.slice();
  const set = (flag, v) => {
    const i = a.indexOf(flag);
    if (i < 0) throw new Error(`chart does not pass ${flag}`);
    a[i + 1] = v;
  };
  set("--listen", "127.0.0.1:0");
  set("--metrics-listen", "127.0.0.1:0");
  set("--tls-cert", files.crt);
  set("--tls-key", files.key);
  set("--config", files.policy);
  set("--shutdown-delay", "1");
  if (a.includes("--client-ca")) set("--client-ca", files.ca);
  // No API server here: the exporter ConfigMaps (the default topology source) become the bundled examples.
  const t = a.indexOf("--topology-configmaps");
  if (t >= 0) a.splice(t, 2);
  return a;
}

async function serverSmoke() {
  const bin = process.env.DRAGUARD_BIN;
  if (!bin || !fs.existsSync(bin)) {
    console.log(`skip server smoke checks: draguard binary not built (DRAGUARD_BIN=${bin || ""})`);
    return;
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "draguard-chart-"));
  try {
    const r = render(["--set", "tls.mode=helm"]);
    const secret = find(r.docs, "Secret", "draguard-tls")[0];
    const files = { crt: path.join(dir, "tls.crt"), key: path.join(dir, "tls.key"), ca: path.join(dir, "ca.crt"), policy: path.join(dir, "policy.yaml") };
    fs.writeFileSync(files.crt, Buffer.from(secret.data["tls.crt"], "base64"));
    fs.writeFileSync(files.key, Buffer.from(secret.data["tls.key"], "base64"), { mode: 0o600 });
    fs.writeFileSync(files.ca, Buffer.from(secret.data["ca.crt"], "base64"));
    fs.writeFileSync(files.policy, find(r.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]);
    const ca = fs.readFileSync(files.ca);

    const srv = startServer(bin, localArgs(r, files));
    let ports;
    try {
      ports = await srv.listening;
    } catch (e) {
      check("server: starts with the chart's arguments, certificate and policy", () => { throw e; });
      await stopServer(srv);
      return;
    }
    check("server: starts with the chart's arguments, certificate and policy", () => true);
    const tlsOpts = (servername, pathName, method = "GET") => ({
      host: "127.0.0.1", port: ports.https, path: pathName, method, servername, ca,
      headers: method === "POST" ? { "Content-Type": "application/json" } : {},
    });
    let ready = false;
    for (let i = 0; i < 50 && !ready; i++) {
      try {
        ready = (await request(https, tlsOpts("draguard.draguard-system.svc", "/readyz"))).status === 200;
      } catch { /* not yet */ }
      if (!ready) await new Promise((res) => setTimeout(res, 200));
    }
    check("server: /readyz 200 over HTTPS, certificate verified for draguard.draguard-system.svc", () => ready);
    const local = await request(https, tlsOpts("draguard.draguard-system.svc.cluster.local", "/healthz")).catch((e) => ({ error: e.message }));
    check("server: certificate also valid for draguard.draguard-system.svc.cluster.local", () => eq(local.status, 200, JSON.stringify(local)));
    const wrong = await request(https, tlsOpts("draguard.other.svc", "/healthz")).catch((e) => ({ error: e.message }));
    check("server: certificate not valid for another name", () => assert(wrong.error, "a wrong name was accepted"));

    const verdict = async (ns, resources) => {
      const res = await request(https, tlsOpts("draguard.draguard-system.svc", "/validate", "POST"), REVIEW(ns, resources));
      eq(res.status, 200, "HTTP status");
      return JSON.parse(res.body).response;
    };
    const legacy = await verdict("team-a", { "nvidia.com/gpu": "1" }).catch((e) => ({ error: e.message }));
    check("server: chart policy denies a legacy GPU Pod (DG001)", () => {
      eq(legacy.allowed, false, `allowed (${JSON.stringify(legacy).slice(0, 200)})`);
      assert(legacy.status.message.startsWith("DG001"), legacy.status.message);
    });
    const hami = await verdict("team-a", { "nvidia.com/gpumem": "4000" }).catch((e) => ({ error: e.message }));
    check("server: chart policy's legacyResources are in effect (nvidia.com/gpumem denied)", () => eq(hami.allowed, false, JSON.stringify(hami).slice(0, 200)));
    const own = await verdict("draguard-system", { "nvidia.com/gpu": "1" }).catch((e) => ({ error: e.message }));
    check("server: release namespace is exempt", () => eq(own.allowed, true, JSON.stringify(own).slice(0, 200)));
    const plain = await verdict("team-a", { cpu: "1" }).catch((e) => ({ error: e.message }));
    check("server: a plain Pod is allowed", () => eq(plain.allowed, true, JSON.stringify(plain).slice(0, 200)));

    const m = await request(http, { host: "127.0.0.1", port: ports.metrics, path: "/metrics" }).catch((e) => ({ error: e.message }));
    check("server: metrics listener serves draguard_tls_cert_expiry_timestamp_seconds (used by the alert)", () => {
      eq(m.status, 200, "status");
      assert(/^draguard_tls_cert_expiry_timestamp_seconds(\{[^}]*\})? \d/m.test(m.body), "gauge missing");
    });
    const e = await stopServer(srv);
    check("server: SIGTERM -> exit 0", () => eq(e, { code: 0, signal: null }, `exit (${srv.log().slice(-300)})`));

    // Client-certificate mode: the probes move to the metrics listener because the kubelet has
    // no client certificate; HTTPS without one must be refused.
    const rc = render(["--set", "tls.mode=helm", "--set", "tls.clientAuth.enabled=true", "--set", "tls.clientAuth.caSecretName=apiserver-ca"]);
    const srv2 = startServer(bin, localArgs(rc, files));
    try {
      const p2 = await srv2.listening;
      let probe = { status: 0 };
      for (let i = 0; i < 50 && probe.status !== 200; i++) {
        probe = await request(http, { host: "127.0.0.1", port: p2.metrics, path: "/readyz" }).catch(() => ({ status: 0 }));
        if (probe.status !== 200) await new Promise((res) => setTimeout(res, 200));
      }
      check("server (clientAuth): --client-ca/--client-cn accepted; /readyz 200 on the metrics listener", () => eq(probe.status, 200, "probe"));
      const noCert = await request(https, { host: "127.0.0.1", port: p2.https, path: "/readyz", servername: "draguard.draguard-system.svc", ca })
        .catch((err) => ({ error: err.message }));
      check("server (clientAuth): HTTPS without a client certificate is refused", () => assert(noCert.error || noCert.status !== 200, JSON.stringify(noCert)));
    } catch (err) {
      check("server (clientAuth): starts", () => { throw err; });
    } finally {
      await stopServer(srv2);
    }

    // Audit mode policy: the legacy Pod is admitted (draguard review, same policy file format).
    const au = render(["--set", "policy.mode=audit"]);
    fs.writeFileSync(files.policy, find(au.docs, "ConfigMap", "draguard-policy")[0].data["policy.yaml"]);
    const reviewFile = path.join(dir, "review.json");
    fs.writeFileSync(reviewFile, REVIEW("team-a", { "nvidia.com/gpu": "1" }));
    check("review: audit-mode chart policy admits a legacy GPU Pod", () => {
      const out = execFileSync(bin, ["review", "--config", files.policy, "-f", reviewFile], { encoding: "utf8" });
      eq(JSON.parse(out).response.allowed, true, "allowed");
    });
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

function deployManifests() {
  check("deploy/kubernetes/draguard.yaml equals a fresh default render", () => {
    const file = path.join(ROOT, "deploy", "kubernetes", "draguard.yaml");
    assert(fs.existsSync(file), "deploy/kubernetes/draguard.yaml missing (run scripts/render-deploy-manifests.sh)");
    const fresh = execFileSync("bash", [path.join(ROOT, "scripts", "render-deploy-manifests.sh"), "--stdout"],
      { encoding: "utf8", env: { ...process.env, HELM }, maxBuffer: 64 << 20 });
    const committed = fs.readFileSync(file, "utf8");
    if (committed !== fresh) {
      const a = committed.split("\n");
      const b = fresh.split("\n");
      let i = 0;
      while (i < a.length && a[i] === b[i]) i++;
      const tmp = path.join(os.tmpdir(), `draguard-render-${process.pid}.yaml`);
      fs.writeFileSync(tmp, fresh);
      throw new Error(`stale at line ${i + 1}: committed ${JSON.stringify(a[i])} vs fresh ${JSON.stringify(b[i])}; ` +
        `fresh render in ${tmp}; run scripts/render-deploy-manifests.sh`);
    }
  });
}

for (const step of [helmLint, scenarios, installSafety, rejections, deployManifests, serverSmoke]) {
  try {
    await step();
  } catch (e) {
    failed++;
    console.log(`FAIL ${step.name} aborted: ${e && e.message ? e.message : e}`);
  }
}
console.log(`chart_render (helm ${helm(["version", "--short"]).stdout.trim()})`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
