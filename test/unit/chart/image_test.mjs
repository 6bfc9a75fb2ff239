// chart_image: the chart, the image build (scripts/build-image.sh, deploy/image/Dockerfile) and the
// docs agree on the image. deploy/image/image.env is the one place for the image's repository,
// binary path and user; the tag is the chart's appVersion, which must be the project version.
//   node image_test.mjs --helm PATH --root REPO
// Prints one line per check and a closing "N passed, N failed" line; exits 1 on any failure.
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const args = process.argv.slice(2);
const opt = (name) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : undefined;
};
const HELM = opt("--helm");
const ROOT = opt("--root");
if (!HELM || !ROOT) {
  console.error("usage: image_test.mjs --helm PATH --root REPO");
  process.exit(2);
}
const CHART = path.join(ROOT, "charts", "draguard");
const require = createRequire(path.join(ROOT, "test", "tools", "node_modules", "noop.js"));
const yaml = require("js-yaml");
const read = (...p) => fs.readFileSync(path.join(ROOT, ...p), "utf8");

let passed = 0;
let failed = 0;
function check(name, fn) {
  try {
    fn();
    passed++;
    console.log(`ok   ${name}`);
  } catch (e) {
    failed++;
    console.log(`FAIL ${name}: ${e && e.message ? e.message : e}`);
  }
}
function assert(cond, msg) {
  if (!cond) throw new Error(msg);
}
function eq(actual, expected, msg) {
  const a = JSON.stringify(actual);
  const b = JSON.stringify(expected);
  if (a !== b) throw new Error(`${msg}: got ${a}, want ${b}`);
}
function helm(argv) {
  return spawnSync(HELM, argv, { encoding: "utf8", maxBuffer: 64 << 20 });
}

// deploy/image/image.env: NAME=value lines (sourced by the scripts).
const env = {};
for (const line of read("deploy", "image", "image.env").split("\n")) {
  const m = /^([A-Z_]+)=(\S+)$/.exec(line.trim());
  if (m) env[m[1]] = m[2];
}
const values = yaml.load(read("charts", "draguard", "values.yaml"));
const chart = yaml.load(read("charts", "draguard", "Chart.yaml"));
const uid = Number(env.IMAGE_UID);
const gid = Number(env.IMAGE_GID);

check("image.env defines repository, absolute binary path and a non-root user", () => {
  assert(/^[a-z0-9.\-]+(:[0-9]+)?\/[a-z0-9._\/-]+$/.test(env.IMAGE_REPOSITORY || ""),
    `IMAGE_REPOSITORY ${env.IMAGE_REPOSITORY} is not a repository with a registry host`);
  assert(path.isAbsolute(env.IMAGE_BINARY || ""), `IMAGE_BINARY ${env.IMAGE_BINARY} is not absolute`);
  assert(Number.isInteger(uid) && uid > 0 && Number.isInteger(gid) && gid > 0, "IMAGE_UID/IMAGE_GID non-root integers");
});

check("Chart appVersion (the image tag) is the project version", () => {
  const m = /project\(draguard VERSION ([0-9.]+)/.exec(read("CMakeLists.txt"));
  assert(m, "no project VERSION in CMakeLists.txt");
  eq(String(chart.appVersion), m[1], "appVersion");
});

check("values.yaml defaults name the image the script builds", () => {
  eq(values.image.repository, env.IMAGE_REPOSITORY, "image.repository");
  eq(values.image.tag, "", "image.tag (empty = appVersion)");
  eq(values.image.pullPolicy, "IfNotPresent", "image.pullPolicy (a locally loaded image is used)");
  eq(values.command, [env.IMAGE_BINARY], "command");
  for (const [key, sc] of [["podSecurityContext", values.podSecurityContext], ["securityContext", values.securityContext]]) {
    eq([sc.runAsNonRoot, sc.runAsUser, sc.runAsGroup], [true, uid, gid], key);
  }
  eq(values.securityContext.readOnlyRootFilesystem, true, "readOnlyRootFilesystem");
});

// Every container of the default render that runs the draguard image (the Deployment and any
// hook, test or DaemonSet Pod) uses the image's reference, binary path and user.
check("rendered containers of the draguard image use its reference, command path and user", () => {
  const r = helm(["template", "draguard", CHART, "--namespace", "draguard-system"]);
  assert(r.status === 0, `helm template failed: ${r.stderr}`);
  const docs = yaml.loadAll(r.stdout).filter(Boolean);
  const ref = `${env.IMAGE_REPOSITORY}:${chart.appVersion}`;
  let seen = 0;
  for (const d of docs) {
    const spec = d.kind === "Pod" ? d.spec : d.spec && d.spec.template && d.spec.template.spec;
    if (!spec) continue;
    for (const c of [...(spec.initContainers || []), ...(spec.containers || [])]) {
      if (!String(c.image).startsWith(env.IMAGE_REPOSITORY)) continue;
      seen++;
      const id = `${d.kind}/${d.metadata.name} container ${c.name}`;
      eq(c.image, ref, `${id} image`);
      assert(c.command && c.command[0] === env.IMAGE_BINARY, `${id} command ${JSON.stringify(c.command)} does not start with ${env.IMAGE_BINARY}`);
      const user = (c.securityContext && c.securityContext.runAsUser) ?? (spec.securityContext && spec.securityContext.runAsUser);
      eq(user, uid, `${id} runAsUser`);
    }
  }
  assert(seen >= 1, "no container runs the draguard image");
  const deploy = docs.find((d) => d.kind === "Deployment");
  eq(deploy.spec.template.spec.containers[0].image, ref, "Deployment image");
});

check("Dockerfile builds the same image (user, entrypoint, working directory, the script's rootfs)", () => {
  const df = read("deploy", "image", "Dockerfile");
  const directive = (name) => df.split("\n").filter((l) => l.startsWith(`${name} `)).map((l) => l.slice(name.length + 1).trim());
  eq(directive("USER"), [`${uid}:${gid}`], "USER");
  eq(directive("ENTRYPOINT"), [JSON.stringify([env.IMAGE_BINARY])], "ENTRYPOINT");
  eq(directive("WORKDIR").slice(-1), ["/tmp"], "final WORKDIR");
  assert(/^glibc\.malloc\.[a-z_]+=[0-9]+(:glibc\.malloc\.[a-z_]+=[0-9]+)*$/.test(env.IMAGE_GLIBC_TUNABLES || ""),
    `IMAGE_GLIBC_TUNABLES ${env.IMAGE_GLIBC_TUNABLES} is not a list of glibc.malloc tunables`);
  assert(directive("ENV").includes(`GLIBC_TUNABLES=${env.IMAGE_GLIBC_TUNABLES}`), "ENV GLIBC_TUNABLES as image.env sets it");
  assert(/^FROM debian:12 AS build$/m.test(df), "builder is debian:12");
  assert(/^FROM scratch$/m.test(df), "runtime stage from scratch");
  assert(/scripts\/build-image\.sh --binary \S+ --rootfs \/rootfs/.test(df), "root filesystem from scripts/build-image.sh --rootfs");
  assert(/^COPY --from=build \/rootfs\/ \/$/m.test(df), "copies that root filesystem");
});

check("build-image.sh and smoke-image.sh take the image settings from image.env", () => {
  const build = read("scripts", "build-image.sh");
  assert(build.includes('. "$root/deploy/image/image.env"'), "build-image.sh sources image.env");
  for (const needle of ['--user "$IMAGE_UID:$IMAGE_GID"', '--entrypoint "[\\"$IMAGE_BINARY\\"]"', 'ref="$IMAGE_REPOSITORY:$tag"', "--workingdir /tmp",
                        '--env GLIBC_TUNABLES="$IMAGE_GLIBC_TUNABLES"']) {
    assert(build.includes(needle), `build-image.sh lacks ${needle}`);
  }
  const smoke = read("scripts", "smoke-image.sh");
  assert(smoke.includes('. "$root/deploy/image/image.env"'), "smoke-image.sh sources image.env");
});

check("values.schema.json logLevel: rejects trace, accepts off (the binary's levels)", () => {
  const bad = helm(["template", "draguard", CHART, "--namespace", "draguard-system", "--set", "logLevel=trace"]);
  assert(bad.status !== 0, "logLevel=trace rendered");
  const good = helm(["template", "draguard", CHART, "--namespace", "draguard-system", "--set", "logLevel=off"]);
  assert(good.status === 0, `logLevel=off refused: ${good.stderr}`);
  assert(/--log-level\n\s+- "off"/.test(good.stdout), "--log-level off not passed");
});

// Drift between the chart README and the values/code.
check("chart README: legacyResources default is values.yaml's list", () => {
  const row = read("charts", "draguard", "README.md").split("\n").find((l) => l.startsWith("| `policy.legacyResources` |"));
  assert(row, "no policy.legacyResources row");
  const listed = [...row.split("|")[2].matchAll(/`([^`]+)`/g)].map((m) => m[1]);
  eq(listed, values.policy.legacyResources, "README default");
});

check("chart README: image defaults and user are image.env's", () => {
  const readme = read("charts", "draguard", "README.md");
  assert(readme.includes(`| \`${env.IMAGE_REPOSITORY}\` / appVersion /`), "image.repository default");
  assert(readme.includes(`\`["${env.IMAGE_BINARY}"]\``), "command default");
  assert(readme.includes(`${uid}:${gid}`), "security context user");
  assert(!/No public image is published yet|distroless/.test(read("charts", "draguard", "values.yaml")), "stale image advice in values.yaml");
});

check("chart README: policy reload metric uses the result labels the server emits", () => {
  const readme = read("charts", "draguard", "README.md");
  const serve = read("src", "cli", "serve.cc");
  assert(/policy_reloads\.Inc\(\{st\.ok\(\) \? "success" : "failure"\}\)/.test(serve), "serve.cc no longer counts success/failure");
  for (const m of readme.matchAll(/draguard_policy_reload_total\{result="([^"]+)"\}/g)) {
    assert(["success", "failure"].includes(m[1]), `README uses result="${m[1]}"`);
  }
});

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
