// chart_grafana: the Grafana dashboard of charts/draguard (grafana.dashboards.enabled).
//
// Renders the chart with the dashboard on and checks the ConfigMap (the sidecar's label, the
// panels the chart documents), parses every PromQL expression of the dashboard (panel targets and
// the label_values() of template variables) with Prometheus' own parser
// (@prometheus-io/lezer-promql), and checks that every metric an expression names is a family
// on /metrics of a running `draguard serve` (histogram series by their _bucket/_sum/_count
// names). The server runs with the background audit on (its metrics exist only then) against a
// stand-in API endpoint that closes every connection, so nothing leaves the machine.
//
// Usage: node grafana_test.mjs --helm HELM --root REPO --bin DRAGUARD
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import readline from "node:readline";

import { checks } from "../../tools/checks.mjs";

const argv = process.argv.slice(2);
const arg = (name) => {
  const i = argv.indexOf(name);
  if (i < 0 || i + 1 >= argv.length) throw new Error(`missing ${name}`);
  return argv[i + 1];
};
const HELM = arg("--helm");
const ROOT = arg("--root");
const BIN = arg("--bin");
const require = createRequire(path.join(ROOT, "test/tools/package.json"));
const yaml = require("js-yaml");
const { parser } = require("@prometheus-io/lezer-promql");

const { check, assert, finish } = checks("chart_grafana");

// ---- The dashboard ConfigMap ----------------------------------------------------------------
function render(extra) {
  const r = spawnSync(HELM, ["template", "rel", path.join(ROOT, "charts/draguard"), "--namespace", "gpu-system", ...extra],
    { encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0) throw new Error(`helm template failed: ${r.stderr}`);
  return yaml.loadAll(r.stdout).filter(Boolean);
}
const dashboardMaps = (docs) => docs.filter((d) => d.kind === "ConfigMap" && d.metadata.name.endsWith("-grafana-dashboard"));

check("default values: no dashboard ConfigMap", () => assert(dashboardMaps(render([])).length === 0, "dashboard rendered"));
const maps = dashboardMaps(render(["--set", "grafana.dashboards.enabled=true"]));
check("grafana.dashboards.enabled: one ConfigMap labelled grafana_dashboard: \"1\" in the release namespace", () => {
  assert(maps.length === 1, `${maps.length} ConfigMaps`);
  assert(maps[0].metadata.labels.grafana_dashboard === "1", JSON.stringify(maps[0].metadata.labels));
  assert(maps[0].metadata.namespace === "gpu-system", maps[0].metadata.namespace);
  assert(Object.keys(maps[0].data).join() === "draguard.json", Object.keys(maps[0].data).join());
});
check("label, namespace and annotations are configurable", () => {
  const m = dashboardMaps(render(["--set", "grafana.dashboards.enabled=true", "--set", "grafana.dashboards.label=dash",
    "--set", "grafana.dashboards.labelValue=yes", "--set", "grafana.dashboards.namespace=monitoring",
    "--set", "grafana.dashboards.annotations.grafana_folder=GPU"]))[0];
  assert(m.metadata.labels.dash === "yes" && !("grafana_dashboard" in m.metadata.labels), JSON.stringify(m.metadata.labels));
  assert(m.metadata.namespace === "monitoring", m.metadata.namespace);
  assert(m.metadata.annotations.grafana_folder === "GPU", JSON.stringify(m.metadata.annotations));
});
const dashboard = JSON.parse(maps[0].data["draguard.json"]);
check("the ConfigMap carries dashboards/draguard.json unchanged", () => {
  const file = JSON.parse(fs.readFileSync(path.join(ROOT, "charts/draguard/dashboards/draguard.json"), "utf8"));
  assert(JSON.stringify(file) === JSON.stringify(dashboard), "differs");
});

const panels = [];
(function walk(list) {
  for (const p of list || []) {
    panels.push(p);
    walk(p.panels);
  }
})(dashboard.panels);
check("the panels the chart documents", () => {
  const titles = panels.map((p) => p.title);
  for (const t of ["Admissions per second by webhook and decision", "Latency p50 and p99 by webhook",
    "Denials and warnings by rule", "Conversions and refusals on /mutate", "Topology: nodes and shapes",
    "Rejected exports by reason", "Seconds since the last topology reload", "Serving certificate: days to expiry",
    "Audit violations by namespace", "GPU allocations by alignment"]) {
    assert(titles.includes(t), `no panel "${t}"`);
  }
  const ids = panels.map((p) => p.id);
  assert(new Set(ids).size === ids.length, "panel ids not unique");
});

// ---- PromQL ---------------------------------------------------------------------------------
// Grafana's variables, replaced as Grafana would before sending the query.
const substitute = (e) => e.replaceAll("$__rate_interval", "5m").replaceAll("$__interval", "1m")
  .replaceAll("$__range", "6h").replaceAll("${job}", "draguard").replaceAll("$job", "draguard");

// The metric names an expression selects, or throws with the parse error's position.
function metricNames(expr) {
  const text = substitute(expr);
  const tree = parser.parse(text);
  const names = [];
  tree.iterate({
    enter(n) {
      if (n.type.isError) throw new Error(`PromQL parse error at ${n.from} in ${JSON.stringify(text)}`);
      if (n.name === "Identifier" && n.node.parent && n.node.parent.name === "VectorSelector") {
        names.push(text.slice(n.from, n.to));
      }
      if (n.name === "LabelName" && text.slice(n.from, n.to) === "__name__") {
        throw new Error(`a __name__ matcher in ${JSON.stringify(text)}: name the metric`);
      }
    },
  });
  return names;
}

const queries = [];
for (const p of panels) for (const t of p.targets || []) queries.push({ where: `panel "${p.title}" ${t.refId}`, expr: t.expr });
for (const v of dashboard.templating.list) {
  if (v.type !== "query") continue;
  const q = typeof v.query === "string" ? v.query : v.query.query;
  const m = /^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/.exec(q);
  queries.push({ where: `variable ${v.name}`, expr: m ? m[1] : q });
}
check(`the dashboard has queries (${queries.length})`, () => assert(queries.length >= 15, `${queries.length}`));

const named = new Map();  // metric -> where
for (const q of queries) {
  check(`PromQL parses: ${q.where}`, () => {
    const names = metricNames(q.expr);
    assert(names.length > 0, `no metric in ${q.expr}`);
    for (const n of names) named.set(n, q.where);
  });
}
// The parser check can fail: a broken expression and a __name__ matcher are refused.
check("the parser refuses broken PromQL", () => {
  for (const bad of ["sum by (job (rate(x[5m]))", "rate(x[5m]", "x{job=~}", "{__name__=\"x\"}"]) {
    let threw = false;
    try { metricNames(bad); } catch { threw = true; }
    assert(threw, `accepted ${bad}`);
  }
});

// ---- The metrics of a running server --------------------------------------------------------
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "draguard-grafana-"));
// A stand-in API server: accepts and closes at once (the audit's Lease calls fail and retry).
const api = net.createServer((s) => s.destroy());
await new Promise((resolve) => api.listen(0, "127.0.0.1", resolve));
const sa = path.join(tmp, "sa");
fs.mkdirSync(sa);
fs.writeFileSync(path.join(sa, "token"), "test-token");
fs.writeFileSync(path.join(sa, "namespace"), "gpu-system");
fs.writeFileSync(path.join(sa, "ca.crt"), "");

const child = spawn(BIN, ["serve", "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--state-dir",
  path.join(tmp, "state"), "--kube=on", "--audit-interval", "3600", "--namespace", "gpu-system", "--shutdown-delay", "0"], {
  stdio: ["ignore", "pipe", "pipe"],
  env: { ...process.env, KUBERNETES_SERVICE_HOST: "127.0.0.1", KUBERNETES_SERVICE_PORT: String(api.address().port),
    DRAGUARD_SERVICEACCOUNT_DIR: sa },
});
const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
child.stderr.resume();
// The metrics port from the "listening" log line (JSON lines on stdout), within 30 s.
async function metricsPort() {
  const seen = [];
  const deadline = new Promise((_, reject) => setTimeout(() => reject(new Error(`no "listening" line in 30 s: ${seen.slice(-5).join("\n")}`)), 30000).unref());
  const scan = (async () => {
    for await (const line of readline.createInterface({ input: child.stdout })) {
      seen.push(line);
      if (!line.includes('"listening"')) continue;
      const metrics = JSON.parse(line).metrics;
      return Number(String(metrics).split(":").pop());
    }
    throw new Error(`server exited (${JSON.stringify(await exited)}): ${seen.slice(-5).join("\n")}`);
  })();
  return Promise.race([scan, deadline]);
}
const get = (port, p) => new Promise((resolve, reject) => {
  http.get({ host: "127.0.0.1", port, path: p, timeout: 5000 }, (res) => {
    let body = "";
    res.setEncoding("utf8");
    res.on("data", (c) => (body += c));
    res.on("end", () => resolve({ status: res.statusCode, body }));
  }).on("error", reject);
});

let exposition = "";
try {
  const port = await metricsPort();
  child.stdout.resume();  // keep draining the log
  const r = await get(port, "/metrics");
  exposition = r.status === 200 ? r.body : "";
  check("server: /metrics answers 200", () => assert(r.status === 200, `status ${r.status}`));
} catch (e) {
  check("server: starts and serves /metrics", () => { throw e; });
} finally {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  const kill = setTimeout(() => child.kill("SIGKILL"), 15000);
  await exited;
  clearTimeout(kill);
  api.close();
  fs.rmSync(tmp, { recursive: true, force: true });
}

const families = new Map();  // name -> type
for (const line of exposition.split("\n")) {
  const m = /^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (\w+)$/.exec(line);
  if (m) families.set(m[1], m[2]);
}
function exported(name) {
  if (families.has(name)) return true;
  const m = /^(.*)_(bucket|sum|count)$/.exec(name);
  return m !== null && families.get(m[1]) === "histogram";
}
check(`server: /metrics lists the audit families (${families.size} families)`, () =>
  assert(families.has("draguard_audit_violations") && families.has("draguard_audit_allocations") &&
    families.has("draguard_admission_requests_total"), [...families.keys()].join(" ")));
for (const [name, where] of [...named.entries()].sort()) {
  check(`exported by draguard serve: ${name}`, () => assert(exported(name), `named in ${where}, not on /metrics`));
}
check("the metric check can fail: an unknown name is not exported", () =>
  assert(!exported("draguard_no_such_metric") && !exported("draguard_ready_bucket"), "accepted"));

finish();
