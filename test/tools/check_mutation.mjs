// Independent checks of draguard's Pod mutation (test/integration/mutation_fixtures_test.cc).
//
// Usage: node check_mutation.mjs CASES_DIR  ->  one JSON object on stdout:
//   {"summary": {...counts}, "failures": ["..."], "log": ["..."]}
//
// CASES_DIR/index.json (written by the C++ driver) lists the topologies (per node: the hwloc file,
// the shape fingerprint and the simulated DRA devices) and the converted cases; each case
// directory holds pod.json, patched.json (python3-jsonpatch's result; expected.json otherwise)
// and templates.json. For every case:
//   - the patched Pod (core/v1) and every template (resource.k8s.io/v1 ResourceClaimTemplate)
//     are validated with the npm package kubernetes-models, plus the API server's name, size
//     and reference rules that the OpenAPI schemas do not carry;
//   - every selector is evaluated with @marcbachmann/cel-js over the devices of every node the
//     Pod may be scheduled on (its required node affinity), every device set the scheduler
//     could choose is enumerated (count, firstAvailable in order, distinct devices,
//     matchAttribute constraints) and each one is checked against the ground truth parsed here
//     from test/data/hwloc/ground-truth.md (host bridges, local NUMA nodes, NVLink matrices);
//   - at least one node can allocate the whole claim, and memory floors admit the GPUs whose
//     marketed memory meets them.
//
// CPUs in claims (cases converted under mutation.cpu, "cpuMode" grouped or individual): every
// request of class index.cpuClass is a CPU request of N CPUs (grouped: count 1 and capacity
// dra.cpu/cpu N; individual: count N). CPU devices are NOT enumerated (a node publishes one per
// logical CPU in individual mode: C(80, 8) sets on one NUMA node of lassen); what is checked
// instead, per template with a CPU request:
//   (a) a proof from the constraints: every GPU request a container lists shares a
//       matchAttribute resource.kubernetes.io/numaNode constraint (a request name covers its
//       subrequests) with one of its CPU requests and every CPU request with one of its GPU
//       requests, and every NIC request is tied to such a GPU request by pcieRoot or numaNode;
//       on every node the Pod may use, every GPU device a tied request could receive publishes a
//       numaNode equal to the ground truth's single NUMA node of that GPU (devices without the
//       attribute cannot meet the constraint). CPU devices are assumed to publish their own NUMA
//       node, as dra-driver-cpu does; the CPUs of each NUMA node are the cpuset of its NUMANode
//       object in the hwloc export, read here from the XML and compared with draguard's model
//       (index numaNodes) and with the totals of ground-truth.md (numanodes=, pus=), which does
//       not list PUs per NUMA node;
//   (b) every GPU set (with its NICs) the claim allows, restricted by the numaNode constraint,
//       is enumerated and its GPUs and NICs are local to the NUMA node the CPUs must then come
//       from, per ground truth (with parts, each part on its own);
//   (c) satisfiability per NUMA node: on at least one allowed node the whole claim fits with,
//       on every NUMA node, at most as many CPUs asked for as the node has;
//   (d) the Pod: a container listing CPU requests has requests.cpu = limits.cpu = their sum N,
//       which is the whole cpu the original container asked for, and lists every CPU request
//       tied to its GPUs; a regular container with full GPUs and whole CPUs lists one.
import {readFileSync, existsSync} from 'node:fs'
import {join} from 'node:path'
import {env, Quantity, toCel} from './cel_env.mjs'
import {Pod} from './node_modules/kubernetes-models/v1/Pod.js'
import {ResourceClaimTemplate} from './node_modules/kubernetes-models/resource.k8s.io/v1/ResourceClaimTemplate.js'

// Unknown domains are empty maps in DRA's environment: toCel gives every domain a selector may
// read one (the NIC driver's is added from the index).
let DOMAINS = ['gpu.nvidia.com', 'resource.kubernetes.io', 'dra.net']

// ---- Ground truth ----------------------------------------------------------------------------
// Per file: GPUs by PCI bus id {bridge, numa[], model}, NICs by PCI address, nvml name -> bus id,
// NVLink matrix.
function bridgeRoot (bridge) { // "0000:[17-19]" -> "pci0000:17"
  const m = /^([0-9a-f]{4}):\[([0-9a-f]{2})-[0-9a-f]{2}\]$/.exec(bridge)
  if (!m) throw new Error(`bad host bridge ${bridge}`)
  return `pci${m[1]}:${m[2]}`
}

function numaList (text) {
  const t = text.trim()
  if (t === '' || t === '(none)') return []
  return t.split(/[\s,]+/).map(Number)
}

function parseGroundTruth (text) {
  const files = {}
  let cur = null
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]
    let m = /^### `([^`]+)`/.exec(l)
    if (m) {
      cur = files[m[1]] = {gpus: {}, nics: {}, nvml: {}, nvlink: null, numanodes: undefined, pus: undefined}
      continue
    }
    if (!cur) continue
    m = /^packages=\d+ numanodes=(\d+) pus=(\d+)/.exec(l)
    if (m) { cur.numanodes = Number(m[1]); cur.pus = Number(m[2]); continue }
    if (l.startsWith('| ') && !l.startsWith('| GPU OS devices')) {
      const cols = l.split('|').slice(1, -1).map((s) => s.trim())
      if (cols.length === 8) {
        const [osdevs, model, busid, , , bridge, , numa] = cols
        cur.gpus[busid] = {busid, model, bridge, root: bridgeRoot(bridge), numa: numaList(numa)}
        for (const od of osdevs.split(/\s+/)) if (/^nvml\d+$/.test(od)) cur.nvml[od] = busid
      }
    } else if (l.startsWith('NICs:')) {
      for (const part of l.slice(5).split(';')) {
        m = /^\s*(\S+) @ (\S+) \((\S+)\) -> NUMA ([0-9, ]+)/.exec(part)
        if (m) cur.nics[m[2]] = {names: m[1].split('/'), busid: m[2], bridge: m[3], root: bridgeRoot(m[3]), numa: numaList(m[4])}
      }
    } else if (/^DISTANCES name=NVLinkBandwidth /.test(l)) {
      const objs = lines[i + 1].replace(/^\s*objs:\s*/, '').trim().split(/\s+/)
      const rows = []
      for (let k = 0; k < objs.length; k++) rows.push(lines[i + 2 + k].trim().split(/\s+/).map(Number))
      cur.nvlink = {objs, rows}
    }
  }
  // NVLink pairs by bus id: a direct link, or both GPUs on the NVSwitch fabric.
  for (const f of Object.values(files)) {
    f.linked = new Set()
    if (!f.nvlink) continue
    const {objs, rows} = f.nvlink
    const link = (a, b) => rows[a][b] > 0 || rows[b][a] > 0
    const gpus = objs.map((o, i) => [o, i]).filter(([o]) => /^nvml\d+$/.test(o))
    const switches = objs.map((o, i) => [o, i]).filter(([o]) => o.includes('(NVSwitch)')).map(([, i]) => i)
    // hwloc's transitive closure (ground-truth.md, "NVSwitch matrices") treats the NVSwitches as
    // one fabric: every GPU linked to a switch reaches every other such GPU (DGX-2H: all 16).
    const onFabric = (a) => switches.some((s) => link(a, s))
    for (const [oa, a] of gpus) {
      for (const [ob, b] of gpus) {
        if (a === b) continue
        if (link(a, b) || (onFabric(a) && onFabric(b))) f.linked.add(`${f.nvml[oa]}|${f.nvml[ob]}`)
      }
    }
  }
  return files
}

// Marketed memory of a GPU model in GB (what "16G" / "32Gi" / "80Gi" users mean).
function marketedGB (model) {
  const m = /(\d+)GB/.exec(model)
  if (m) return Number(m[1])
  const table = {'Tesla T4': 16}
  return table[model]
}

// ---- Name rules (k8s.io/apimachinery validation) -------------------------------------------
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
const isDnsLabel = (s) => typeof s === 'string' && s.length <= 63 && DNS_LABEL.test(s)
const isDnsSubdomain = (s) => typeof s === 'string' && s.length > 0 && s.length <= 253 &&
  s.split('.').every((p) => DNS_LABEL.test(p))
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/
const isLabelValue = (s) => typeof s === 'string' && s.length <= 63 && LABEL_VALUE.test(s)
const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/
function isLabelKey (s) {
  if (typeof s !== 'string') return false
  const parts = s.split('/')
  if (parts.length > 2) return false
  const name = parts[parts.length - 1]
  if (name.length > 63 || !QUALIFIED_NAME.test(name)) return false
  return parts.length === 1 || isDnsSubdomain(parts[0])
}
const MAX_ALTERNATIVES = 8
const MAX_COUNT = 32

function legacyKey (k) {
  return k === 'nvidia.com/gpu' || k === 'nvidia.com/gpu.shared' || k.startsWith('nvidia.com/mig-')
}
function legacyCount (c) {
  let n = 0
  for (const sec of ['limits', 'requests']) {
    for (const [k, v] of Object.entries(c?.resources?.[sec] || {})) {
      if (legacyKey(k) && String(v) !== '0') n++
    }
  }
  return n
}

// ---- Main ---------------------------------------------------------------------------------
const root = process.argv[2]
const index = JSON.parse(readFileSync(join(root, 'index.json'), 'utf8'))
// One ground-truth file or several (the hwloc captures and the synthetic exports).
const truth = Object.assign({}, ...[index.groundTruth].flat().map((f) => parseGroundTruth(readFileSync(f, 'utf8'))))
DOMAINS = [...new Set([...DOMAINS, index.nicDriver])]
const failureMap = new Map() // message -> {first case, count}
const log = []
const summary = {cases: 0, pods: 0, templates: 0, evaluations: 0, sets: 0, nodeChecks: 0, satisfiable: 0,
  numaFiles: 0, cpuCases: 0, cpuTemplates: 0, cpuRequests: 0, cpuProofs: 0, cpuGpuDevicesChecked: 0, cpuGpuDevicesWithoutNuma: 0,
  cpuSets: 0, cpuParts: 0, cpuRails: 0, cpuContainers: 0, cpuSatisfiable: 0, cpuNodesWithoutRoom: 0,
  migEntriesUnchecked: 0, ignoredAffinityKeys: 0, unknownMatches: 0, memoryUnknown: 0, podsInvalidBefore: 0, placements: {}, allowedButUnsatisfiable: 0, memoryChecks: 0, rails: 0}

// Control cases (deliberately broken templates) collect their failures apart: each must fail.
let controlSink = null
function fail (caseName, message) {
  if (controlSink) { controlSink.push(message); return }
  const e = failureMap.get(message)
  if (e) e.count++
  else failureMap.set(message, {first: caseName, count: 1})
}

const CLASS_SELECTORS = {
  [index.gpuClass]: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
  [index.migClass]: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
  [index.nicClass]: `device.driver == '${index.nicDriver}'`,
}

// ---- NUMA nodes and their CPUs ----------------------------------------------------------------
// Logical CPUs in an hwloc bitmap string ("0x00ffffff,0xffffffff,,0x0": 32-bit words, empty = 0).
function bitmapWeight (text) {
  let n = 0
  for (const word of text.split(',')) {
    const hex = word.replace(/^0x/, '')
    for (const ch of hex) {
      let v = parseInt(ch, 16)
      while (v) { n += v & 1; v >>= 1 }
    }
  }
  return n
}

// NUMA node OS index -> CPUs, from the export's NUMANode objects (their cpuset), compared with
// draguard's model (index numaNodes) and with ground-truth.md's totals. Read once per file.
const xmlNumaCache = new Map()
function numaCpusOf (tname, nname, n, gt) {
  const model = new Map((n.numaNodes || []).map((x) => [x.os, x.cpus]))
  if (!n.xml) return model
  let xml = xmlNumaCache.get(n.xml)
  if (!xml) {
    xml = new Map()
    const text = readFileSync(n.xml, 'utf8')
    for (const m of text.matchAll(/<object type="NUMANode"([^>]*)>/g)) {
      const os = /\sos_index="(\d+)"/.exec(m[1])
      const cpuset = /\scpuset="([^"]*)"/.exec(m[1])
      if (os) xml.set(Number(os[1]), cpuset ? bitmapWeight(cpuset[1]) : 0)
    }
    xmlNumaCache.set(n.xml, xml)
    summary.numaFiles++
  }
  const total = [...xml.values()].reduce((a, b) => a + b, 0)
  if (gt.numanodes !== undefined && gt.numanodes !== xml.size) fail(tname, `${n.file}: ${xml.size} NUMANode objects, ground truth numanodes=${gt.numanodes}`)
  if (gt.pus !== undefined && gt.pus !== total) fail(tname, `${n.file}: the NUMA nodes' cpusets hold ${total} CPUs, ground truth pus=${gt.pus}`)
  const show = (m) => JSON.stringify([...m].sort((a, b) => a[0] - b[0]))
  if (show(xml) !== show(model)) fail(tname, `${n.file} (${nname}): CPUs per NUMA node ${show(model)} in draguard's model, ${show(xml)} in the export's NUMANode cpusets`)
  return xml
}

// Nodes with their devices, CEL values and ground truth.
const nodes = {} // topology -> node -> {...}
// Control topologies (names starting with "control-": real ones with a device or a NUMA node's
// CPUs altered on purpose) collect their failures apart, like control cases.
const topologyControls = {}
for (const [tname, topo] of Object.entries(index.topologies)) {
  controlSink = tname.startsWith('control-') ? (topologyControls[tname] = []) : null
  nodes[tname] = {}
  for (const [nname, n] of Object.entries(topo.nodes)) {
    const gt = truth[n.file]
    if (!gt) {
      fail(`${tname}/${nname}`, `ground truth has no section for ${n.file}`)
      continue
    }
    const devices = n.devices.map((d, i) => {
      const dev = {...d, i, key: `${tname}/${nname}/${i}`, cel: toCel(d, DOMAINS), gt: null}
      if (d.kind === 'gpu') {
        const bus = d.attributes['resource.kubernetes.io']?.pciBusID?.string
        dev.gt = gt.gpus[bus]
        dev.bus = bus
      } else {
        const bus = d.attributes[index.nicDriver]?.pciAddress?.string
        dev.gt = gt.nics[bus]
        dev.bus = bus
      }
      const where = `${n.file}: simulated ${d.kind} ${d.name} (${dev.bus})`
      if (!dev.gt) {
        if (d.kind === 'gpu') fail(tname, `${where} is not in the ground truth`)
      } else {
        const attr = d.attributes['resource.kubernetes.io']?.pcieRoot?.string
        if (attr !== undefined && attr !== dev.gt.root) {
          fail(tname, `${where}: pcieRoot attribute ${attr}, ground truth host bridge ${dev.gt.bridge} = ${dev.gt.root}`)
        }
      }
      return dev
    })
    nodes[tname][nname] = {name: nname, file: n.file, shape: n.shape, gt, devices, numaCpus: numaCpusOf(tname, nname, n, gt)}
  }
  controlSink = null
}

const evalCache = new Map()
function evaluate (expr, dev) {
  const key = expr + '\u0000' + dev.key
  let r = evalCache.get(key)
  if (r === undefined) {
    summary.evaluations++
    try {
      const v = env.evaluate(expr, {device: dev.cel})
      r = typeof v === 'boolean' ? {value: v} : {error: `non-bool result ${String(v)}`}
    } catch (e) {
      r = {error: String(e.message).split('\n')[0]}
    }
    evalCache.set(key, r)
  }
  return r
}

function readsUnknown (expr, dev) {
  return (dev.unknown || []).some((u) => {
    const slash = u.indexOf('/')
    const dom = u.slice(0, slash)
    const name = u.slice(slash + 1)
    return expr.includes(`'${dom}'`) && (expr.includes(`.${name}`) || expr.includes(`'${name}'`))
  })
}

// Devices a (sub)request may take: class selector and every selector true. A runtime error
// aborts allocation in Kubernetes, so it is a failure here.
function candidates (req, node, caseName, what) {
  const classSel = CLASS_SELECTORS[req.deviceClassName]
  if (!classSel) {
    fail(caseName, `${what}: unknown DeviceClass ${req.deviceClassName}`)
    return []
  }
  const out = []
  for (const dev of node.devices) {
    if (!evaluate(classSel, dev).value) continue
    let ok = true
    let maybe = false
    for (const s of req.selectors || []) {
      const r = evaluate(s.cel.expression, dev)
      if (r.value === true) continue
      // The export cannot tell what the driver would publish for some names (memory of an
      // nvml-only export, driverVersion): a selector reading one of them may match on the node.
      if (readsUnknown(s.cel.expression, dev)) { maybe = true; continue }
      if (r.error !== undefined) fail(caseName, `${what}: selector ${s.cel.expression} fails on ${node.file} ${dev.name}: ${r.error}`)
      ok = false
      break
    }
    if (ok && maybe) summary.unknownMatches++
    if (ok) out.push(dev)
  }
  return out
}

function attrValue (dev, qualified) {
  const slash = qualified.indexOf('/')
  const dom = qualified.slice(0, slash)
  const name = qualified.slice(slash + 1)
  const v = dev.attributes?.[dom]?.[name]
  return v === undefined ? undefined : JSON.stringify(v)
}

// Every k-subset of `list` (as arrays), pruned so that `attrs` values stay equal.
function * subsets (list, k, attrs, start = 0, chosen = [], fixed = null) {
  if (chosen.length === k) { yield chosen.slice(); return }
  for (let i = start; i <= list.length - (k - chosen.length); i++) {
    const d = list[i]
    let vals = fixed
    if (attrs.length) {
      const mine = attrs.map((a) => attrValue(d, a))
      if (mine.some((v) => v === undefined)) continue
      if (fixed && mine.some((v, j) => v !== fixed[j])) continue
      vals = fixed || mine
    }
    chosen.push(d)
    yield * subsets(list, k, attrs, i + 1, chosen, vals)
    chosen.pop()
  }
}

function covers (constraint, names) {
  const reqs = constraint.requests || []
  if (reqs.length === 0) return true
  return reqs.some((r) => names.some((n) => r === n || n.startsWith(r + '/') || r.startsWith(n + '/')))
}

// The alignment the ground truth gives to one set of devices, per placement.
function misaligned (placement, gpus, nic, node) {
  const show = () => gpus.map((g) => `${g.name}@${g.bus}`).join(',') + (nic ? ` + ${nic.name}@${nic.bus}` : '')
  for (const d of [...gpus, ...(nic ? [nic] : [])]) {
    if (!d.gt) return `device ${d.name} (${d.bus}) has no ground truth`
  }
  switch (placement) {
    case 'pcieRoot': {
      const bridges = new Set([...gpus, ...(nic ? [nic] : [])].map((d) => d.gt.bridge))
      if (bridges.size !== 1) return `{${show()}} spans host bridges ${[...bridges].join(' ')}`
      return null
    }
    case 'numa': {
      let common = gpus[0].gt.numa
      for (const g of gpus) common = common.filter((x) => g.gt.numa.includes(x))
      if (nic) common = common.filter((x) => nic.gt.numa.includes(x))
      if (common.length === 0) return `{${show()}} are not local to one NUMA node (${gpus.map((g) => g.gt.numa.join('+')).join(' ')})`
      return null
    }
    case 'nvlink': {
      if (nic && gpus.some((g) => g.gt.bridge !== nic.gt.bridge)) return `{${show()}}: the NIC is not under the GPUs' host bridge`
      for (const a of gpus) {
        for (const b of gpus) {
          if (a !== b && !node.gt.linked.has(`${a.bus}|${b.bus}`)) return `{${show()}}: ${a.bus} and ${b.bus} are not NVLink-connected`
        }
      }
      return null
    }
    case 'none':
      if (gpus.length >= 2 || nic) return `{${show()}}: several devices with no placement`
      return null
    default:
      return `placement ${placement} under the default policy (unaligned: deny)`
  }
}

// ---- CPUs in claims -------------------------------------------------------------------------
const NUMA_ATTR = 'resource.kubernetes.io/numaNode'
const PCIE_ATTR = 'resource.kubernetes.io/pcieRoot'
const requestClasses = (r) => r.exactly ? [r.exactly.deviceClassName] : (r.firstAvailable || []).map((a) => a.deviceClassName)
function numaOf (dev) {
  const v = dev.attributes?.['resource.kubernetes.io']?.numaNode
  return v && Number.isInteger(v.int) ? v.int : undefined
}

// Whole CPUs of a quantity ("16", 16, "16000m"); NaN otherwise.
function wholeCpus (q) {
  const t = String(q ?? '')
  if (/^[0-9]+$/.test(t)) return Number(t)
  const m = /^([0-9]+)m$/.exec(t)
  if (m && Number(m[1]) % 1000 === 0) return Number(m[1]) / 1000
  return NaN
}

// The CPU requests of a template and how its numaNode constraints tie requests (union-find over
// request and subrequest names; a main name stands for all its subrequests): null without CPU
// requests. cpus: name -> CPUs (NaN when not of the mode's form); tiedCpus(name): the CPUs of the
// CPU requests tied to request or subrequest `name` (0 when none).
const tiesCache = new Map()
function cpuTies (tmpl, mode) {
  const key = mode + '\u0000' + JSON.stringify(tmpl.spec?.spec?.devices)
  if (tiesCache.has(key)) return tiesCache.get(key)
  const devices = tmpl.spec.spec.devices
  const reqs = devices.requests || []
  const cpus = new Map()
  for (const r of reqs) {
    if (!requestClasses(r).includes(index.cpuClass)) continue
    const a = r.exactly
    let n = NaN
    if (a && (a.allocationMode || 'ExactCount') === 'ExactCount' && !(a.selectors || []).length) {
      const cap = a.capacity?.requests?.['dra.cpu/cpu']
      if (mode === 'grouped' && (a.count ?? 1) === 1 && cap !== undefined) n = wholeCpus(cap)
      if (mode === 'individual' && cap === undefined && Number.isInteger(a.count)) n = a.count
    }
    cpus.set(r.name, n)
  }
  let out = null
  if (cpus.size) {
    const names = []
    for (const r of reqs) {
      names.push(r.name)
      for (const a of r.firstAvailable || []) names.push(r.name + '/' + a.name)
    }
    const parent = new Map(names.map((x) => [x, x]))
    const find = (x) => { if (!parent.has(x)) return x; while (parent.get(x) !== x) x = parent.get(x); return x }
    const union = (a, b) => { if (parent.has(a) && parent.has(b)) parent.set(find(a), find(b)) }
    for (const c of devices.constraints || []) {
      if (c.matchAttribute !== NUMA_ATTR) continue
      const rs = (c.requests || []).length ? c.requests : reqs.map((r) => r.name)
      for (const x of rs) union(x, rs[0])
    }
    // A main name stands for its subrequests: a subrequest is tied through its main request too.
    const comps = (x) => [find(x), ...(x.includes('/') ? [find(x.split('/')[0])] : [])]
    const cpuComp = new Map()
    for (const [name, n] of cpus) cpuComp.set(find(name), (cpuComp.get(find(name)) || 0) + n)
    const tiedCpus = (x) => comps(x).reduce((acc, k) => acc + (cpuComp.get(k) || 0), 0)
    const tied = (a, b) => comps(a).some((k) => comps(b).includes(k))
    const gpus = new Set(reqs.filter((r) => requestClasses(r).includes(index.gpuClass)).map((r) => r.name))
    out = {cpus, gpus, tiedCpus, tied}
  }
  tiesCache.set(key, out)
  return out
}

// (b): the GPUs (and NICs) of a set whose request is tied to CPUs must be local, per ground truth,
// to the NUMA node they publish, which the CPUs then come from. Returns why not, or null, and
// records the CPUs asked for on that NUMA node in set.cpuDemand.
function cpuNumaProblem (set, gpus, nics, cpus) {
  const v = numaOf(gpus[0])
  if (v === undefined) return `GPU ${gpus[0].name}@${gpus[0].bus} publishes no ${NUMA_ATTR} yet is tied to CPUs`
  for (const d of [...gpus, ...nics]) {
    if (d.kind === 'gpu' && numaOf(d) !== v) return `GPUs of different ${NUMA_ATTR} (${numaOf(d)}, ${v}) under one constraint`
    if (!d.gt || !d.gt.numa.includes(v)) {
      return `{${[...gpus, ...nics].map((x) => `${x.name}@${x.bus}`).join(',')}} with ${cpus} CPUs of NUMA node ${v}: ${d.name}@${d.bus} is local to NUMA ${d.gt ? d.gt.numa.join('+') || '(none)' : '?'}, off the CPUs' NUMA node`
    }
  }
  set.cpuDemand = (set.cpuDemand || []).concat([[v, cpus]])
  if (!controlSink) summary.cpuSets++
  return null
}

// Valid (gpu set, nic) choices of one entry of one alternative on one node.
function entrySets (tmpl, entry, alt, altName, nicReq, node, caseName, ties = null, problems = []) {
  const names = [entry.request + (altName ? '/' + altName : '')]
  if (nicReq) names.push(nicReq.name)
  const constraints = (tmpl.spec.spec.devices.constraints || []).filter((c) => covers(c, names))
  const gpuOnly = constraints.filter((c) => c.matchAttribute && !(nicReq && covers(c, [nicReq.name]) && !covers(c, [names[0]])))
  const attrs = gpuOnly.map((c) => c.matchAttribute)
  const what = `${tmpl.metadata.name} request ${names[0]} on ${node.name}`
  const gpuCands = candidates(alt, node, caseName, what)
  const nicCands = nicReq ? candidates(nicReq.exactly, node, caseName, `${tmpl.metadata.name} request ${nicReq.name} on ${node.name}`) : [null]
  const out = []
  if (alt.allocationMode && alt.allocationMode !== 'ExactCount') {
    fail(caseName, `${what}: allocationMode ${alt.allocationMode}`)
    return out
  }
  const count = alt.count ?? 1
  for (const set of subsets(gpuCands, count, attrs)) {
    for (const nic of nicCands) {
      if (nic && set.includes(nic)) continue
      let ok = true
      for (const c of constraints) {
        if (!c.matchAttribute) continue
        const devs = [...(covers(c, [names[0]]) ? set : []), ...(nic && covers(c, [nicReq.name]) ? [nic] : [])]
        const vals = new Set(devs.map((d) => attrValue(d, c.matchAttribute)))
        if (vals.has(undefined) || vals.size > 1) { ok = false; break }
      }
      if (!ok) continue
      const choice = {gpus: set, nic}
      const cpus = ties ? ties.tiedCpus(names[0]) : 0
      if (cpus) {
        const why = cpuNumaProblem(choice, set, nic ? [nic] : [], cpus)
        if (why) { problems.push(`request ${names[0]} on ${node.name} (${node.file}) may get ${why}`); return out }
      }
      out.push(choice)
    }
  }
  return out
}

// Rails: N single-GPU requests <req>-rail-<i>, each with a NIC request <req>-rail-<i>-nic. Every
// assignment of distinct devices that meets every matchAttribute constraint is enumerated; each
// must have the GPUs aligned as `placement` says and every NIC under its own GPU's host bridge.
function railSets (tmpl, entry, placement, node, caseName, problems, ties = null) {
  if (!controlSink) summary.rails++
  const devices = tmpl.spec.spec.devices
  const rails = []
  for (let i = 0; i < entry.count; i++) {
    const g = devices.requests.find((r) => r.name === `${entry.request}-rail-${i}`)
    const n = devices.requests.find((r) => r.name === `${entry.request}-rail-${i}-nic`)
    if (!g?.exactly || !n?.exactly) { problems.push(`rail ${i} of ${entry.request}: requests missing`); return [] }
    if ((g.exactly.count ?? 1) !== 1 || (n.exactly.count ?? 1) !== 1) problems.push(`rail ${i}: count is not 1`)
    const what = `${tmpl.metadata.name} rail ${i} on ${node.name}`
    rails.push({gname: g.name, nname: n.name, gpus: candidates(g.exactly, node, caseName, what), nics: candidates(n.exactly, node, caseName, what + ' nic')})
  }
  const constraints = (devices.constraints || []).filter((c) => c.matchAttribute)
  const chosen = new Map() // request name -> device
  const holds = () => constraints.every((c) => {
    const names = (c.requests || []).length ? c.requests : [...chosen.keys()]
    const vals = new Set()
    for (const nm of names) {
      const d = chosen.get(nm)
      if (!d) continue
      vals.add(attrValue(d, c.matchAttribute))
    }
    return !vals.has(undefined) && vals.size <= 1
  })
  const out = []
  let steps = 0
  const used = new Set()
  function dfs (i) {
    if (++steps > 2000000) return
    if (i === rails.length) {
      const gpus = rails.map((r) => chosen.get(r.gname))
      const nics = rails.map((r) => chosen.get(r.nname))
      let why = misaligned(placement, gpus, null, node)
      rails.forEach((r, k) => {
        if (!why && (!gpus[k].gt || !nics[k].gt || gpus[k].gt.bridge !== nics[k].gt.bridge)) why = `rail ${k}: NIC ${nics[k].name}@${nics[k].bus} is not under GPU ${gpus[k].bus}'s host bridge`
      })
      if (why) problems.push(`${tmpl.metadata.name} rails (placement ${placement}) on ${node.name} (${node.file}) may get ${why}`)
      const choice = {gpus, nic: null, nics}
      if (ties && rails.some((r) => ties.tiedCpus(r.gname))) {
        // The rails tied to one CPU request (all of them, or a part each when they are split per
        // NUMA node): their GPUs and NICs on the NUMA node of those CPUs.
        if (!controlSink) summary.cpuRails++
        const groups = []
        rails.forEach((r, k) => {
          const g = groups.find((x) => ties.tied(rails[x[0]].gname, r.gname))
          if (g) g.push(k); else groups.push([k])
        })
        for (const g of groups) {
          const cpus = ties.tiedCpus(rails[g[0]].gname)
          if (!cpus) { problems.push(`${tmpl.metadata.name}: rails ${g.map((k) => rails[k].gname).join(', ')} are not tied to CPUs`); continue }
          const cwhy = cpuNumaProblem(choice, g.map((k) => gpus[k]), g.map((k) => nics[k]), cpus)
          if (cwhy) problems.push(`${tmpl.metadata.name} rails on ${node.name} (${node.file}) may get ${cwhy}`)
        }
      }
      out.push(choice)
      return
    }
    for (const g of rails[i].gpus) {
      if (used.has(g)) continue
      chosen.set(rails[i].gname, g); used.add(g)
      if (holds()) {
        for (const n of rails[i].nics) {
          if (used.has(n)) continue
          chosen.set(rails[i].nname, n); used.add(n)
          if (holds()) dfs(i + 1)
          used.delete(n); chosen.delete(rails[i].nname)
          if (problems.length > 20) return
        }
      }
      used.delete(g); chosen.delete(rails[i].gname)
    }
  }
  dfs(0)
  return out
}

// NUMA parts (GPUs that need several NUMA nodes): requests <req>-part-<i>, each with its share of
// the GPUs and tied to its own CPU request. Every assignment of distinct devices meeting every
// matchAttribute constraint is enumerated: all GPUs aligned as `placement` says, and each part's
// GPUs local to the NUMA node its CPUs come from.
function partSets (tmpl, entry, placement, node, caseName, problems, ties) {
  const devices = tmpl.spec.spec.devices
  const parts = []
  for (let i = 0; ; i++) {
    const r = devices.requests.find((x) => x.name === `${entry.request}-part-${i}`)
    if (!r) break
    if (!r.exactly) { problems.push(`${r.name} is not an exactly request`); return [] }
    const what = `${tmpl.metadata.name} ${r.name} on ${node.name}`
    parts.push({name: r.name, count: r.exactly.count ?? 1, cands: candidates(r.exactly, node, caseName, what), cpus: ties ? ties.tiedCpus(r.name) : 0})
  }
  if (!controlSink) summary.cpuParts++
  const total = parts.reduce((a, p) => a + p.count, 0)
  if (total !== entry.count) problems.push(`parts of ${entry.request} hold ${total} GPUs, the container asked for ${entry.count}`)
  const constraints = (devices.constraints || []).filter((c) => c.matchAttribute)
  const chosen = new Map() // part name -> devices
  const holds = () => constraints.every((c) => {
    const vals = new Set()
    for (const [nm, devs] of chosen) {
      if ((c.requests || []).length && !covers(c, [nm])) continue
      for (const d of devs) vals.add(attrValue(d, c.matchAttribute))
    }
    return !vals.has(undefined) && vals.size <= 1
  })
  const out = []
  const used = new Set()
  let steps = 0
  function dfs (i) {
    if (++steps > 2000000 || problems.length > 20) return
    if (i === parts.length) {
      const gpus = parts.flatMap((p) => chosen.get(p.name))
      const choice = {gpus, nic: null}
      let why = misaligned(placement, gpus, null, node)
      for (const p of parts) {
        if (!why && p.cpus) why = cpuNumaProblem(choice, chosen.get(p.name), [], p.cpus)
        if (!why && !p.cpus && ties) why = `${p.name} is tied to no CPU request`
      }
      if (why) problems.push(`${tmpl.metadata.name} parts (placement ${placement}) on ${node.name} (${node.file}) may get ${why}`)
      out.push(choice)
      return
    }
    const p = parts[i]
    for (const set of subsets(p.cands.filter((d) => !used.has(d)), p.count, [])) {
      chosen.set(p.name, set)
      if (holds()) {
        set.forEach((d) => used.add(d))
        dfs(i + 1)
        set.forEach((d) => used.delete(d))
      }
      chosen.delete(p.name)
    }
  }
  dfs(0)
  return out
}

const enumCache = new Map()

function checkTemplateOnNode (c, tmpl, placements, node, ti) {
  const caseName = c.name
  // Each converted container has a claim of its own: the entries that use this template.
  const entriesOf = c.templateEntries ? c.templateEntries[ti] : c.entries
  const reqs = tmpl.spec.spec.devices.requests
  const ties = c.cpuMode && c.cpuMode !== 'none' ? cpuTies(tmpl, c.cpuMode) : null
  const perEntry = []
  const problems = []
  let sets = 0
  for (let e = 0; e < entriesOf.length; e++) {
    const entry = entriesOf[e]
    const req = reqs.find((r) => r.name === entry.request)
    if (!req && entry.kind === 'gpu' && reqs.some((r) => r.name === `${entry.request}-rail-0`)) {
      const r = railSets(tmpl, entry, placements[0], node, caseName, problems, ties)
      sets += r.length
      perEntry.push(r)
      continue
    }
    if (!req && entry.kind === 'gpu' && reqs.some((r) => r.name === `${entry.request}-part-0`)) {
      const r = partSets(tmpl, entry, placements[0], node, caseName, problems, ties)
      sets += r.length
      perEntry.push(r)
      continue
    }
    if (!req) { problems.push(`request ${entry.request} missing from ${tmpl.metadata.name}`); continue }
    if (entry.kind === 'mig') { summary.migEntriesUnchecked++; perEntry.push(null); continue }
    const nicReq = reqs.find((r) => r.name === entry.request + '-nic') || null
    if (c.nic && entry.kind === 'gpu' && !nicReq) problems.push(`request ${entry.request}: draguard.io/nic rdma but no ${entry.request}-nic request`)
    const alts = req.exactly ? [[null, req.exactly]] : (req.firstAvailable || []).map((a) => [a.name, a])
    // A firstAvailable alternative is named after its class (nvlink-1, pcie-1, numa-1): every
    // allocation it allows must have that class; `exactly` has the entry's placement.
    const CLASS_OF = {nvlink: 'nvlink', pcie: 'pcieRoot', numa: 'numa'}
    const classOf = (altName) => (altName && CLASS_OF[altName.replace(/-\d+$/, '')]) || placements[0]
    let chosenAny = []
    for (const [altName, alt] of alts) {
      const s = entrySets(tmpl, entry, alt, altName, nicReq, node, caseName, ties, problems)
      if (s.length === 0) continue
      chosenAny = chosenAny.concat(s)
      for (const set of s) {
        sets++
        const placement = classOf(altName)
        const why = misaligned(placement, set.gpus, set.nic, node)
        if (why) { problems.push(`request ${entry.request}${altName ? '/' + altName : ''} (placement ${placement}) on ${node.name} (${node.file}) may get ${why}`); break }
      }
      // Every alternative is checked, not only the first that fits an empty node: with other
      // devices allocated, the scheduler takes the first alternative that still fits.
    }
    perEntry.push(chosenAny)
  }
  // The whole claim: disjoint sets for every entry and, with CPUs (c), on every NUMA node at most
  // as many CPUs asked for as it has (CPU devices are not enumerated: a NUMA node with that many
  // CPUs has that many CPU devices, or a grouped device with that capacity).
  let steps = 0
  let undecided = false
  const used = new Set()
  const demand = new Map() // NUMA node -> CPUs asked for
  function dfs (e, withCpus) {
    if (e === perEntry.length) return true
    if (perEntry[e] === null) return dfs(e + 1, withCpus)
    for (const s of perEntry[e]) {
      if (++steps > 2000000) { undecided = true; return false }
      const devs = [...s.gpus, ...(s.nic ? [s.nic] : []), ...(s.nics || [])]
      if (devs.some((d) => used.has(d))) continue
      const cpus = withCpus ? (s.cpuDemand || []) : []
      for (const [v, n] of cpus) demand.set(v, (demand.get(v) || 0) + n)
      if (cpus.every(([v]) => demand.get(v) <= (node.numaCpus.get(v) || 0))) {
        devs.forEach((d) => used.add(d))
        const ok = dfs(e + 1, withCpus)
        devs.forEach((d) => used.delete(d))
        if (ok) {
          for (const [v, n] of cpus) demand.set(v, demand.get(v) - n)
          return true
        }
      }
      for (const [v, n] of cpus) demand.set(v, demand.get(v) - n)
    }
    return false
  }
  const satisfiable = dfs(0, true)
  // Without the CPUs: whether the GPUs alone would fit (a claim that fails only on CPUs).
  const gpuSatisfiable = satisfiable || (ties !== null && dfs(0, false))
  return {problems, sets, satisfiable, gpuSatisfiable, undecided, perEntry}
}

function allowedNodes (pod, tname) {
  const all = Object.values(nodes[tname] || {})
  const required = pod.spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
  if (!required) return all
  const terms = required.nodeSelectorTerms || []
  return all.filter((node) => terms.some((term) => {
    const fields = term.matchFields || []
    const exprs = term.matchExpressions || []
    if (fields.length === 0 && exprs.length === 0) return false // an empty term matches nothing
    for (const f of fields) {
      if (f.key !== 'metadata.name') return false
      const hit = (f.values || []).includes(node.name)
      if ((f.operator === 'In' && !hit) || (f.operator === 'NotIn' && hit)) return false
    }
    for (const x of exprs) {
      if (x.key !== index.shapeLabel) { summary.ignoredAffinityKeys++; continue }
      const hit = (x.values || []).includes(node.shape)
      if (x.operator === 'In' && !hit) return false
      if (x.operator === 'NotIn' && hit) return false
      if (x.operator === 'DoesNotExist') return false
    }
    return true
  }))
}

function validatePod (c, orig, pod, templates) {
  const n = c.name
  const schemaErrors = (p) => {
    try {
      new Pod(p).validate()
      return []
    } catch (e) {
      return String(e.message).split('\n')[0].split(', ').map((x) => x.trim())
    }
  }
  // Errors the original already has (unexpanded template variables such as "$GPU_PER_NODE")
  // are not the mutation's.
  const before = new Set(schemaErrors(orig))
  const added = schemaErrors(pod).filter((e) => !before.has(e))
  if (added.length) fail(n, `kubernetes-models rejects the patched Pod: ${added.join(', ')}`)
  if (before.size) summary.podsInvalidBefore++
  const spec = pod.spec || {}
  const claims = spec.resourceClaims || []
  const claimNames = new Set()
  for (const rc of claims) {
    if (!isDnsLabel(rc.name)) fail(n, `spec.resourceClaims name ${JSON.stringify(rc.name)} is not a DNS label`)
    if (claimNames.has(rc.name)) fail(n, `spec.resourceClaims name ${rc.name} repeats`)
    claimNames.add(rc.name)
    if (('resourceClaimName' in rc) === ('resourceClaimTemplateName' in rc)) fail(n, `spec.resourceClaims ${rc.name}: exactly one of resourceClaimName / resourceClaimTemplateName`)
  }
  const byName = new Map(templates.map((t) => [t.metadata.name, t]))
  const generated = claims.filter((rc) => rc.resourceClaimTemplateName && byName.has(rc.resourceClaimTemplateName))
  for (const t of templates) {
    if (!generated.some((rc) => rc.resourceClaimTemplateName === t.metadata.name)) fail(n, `the Pod does not reference generated template ${t.metadata.name}`)
  }
  for (const t of templates) {
    if (t.metadata.namespace !== c.namespace) fail(n, `template ${t.metadata.name} in namespace ${t.metadata.namespace}, Pod in ${c.namespace}`)
  }
  const claimTemplate = new Map(generated.map((rc) => [rc.name, byName.get(rc.resourceClaimTemplateName)]))
  for (const list of ['containers', 'initContainers']) {
    const before = orig.spec?.[list] || []
    ;(spec[list] || []).forEach((ct, i) => {
      const where = `${list}[${i}] ${ct.name}`
      const seen = new Set()
      for (const cl of ct.resources?.claims || []) {
        if (!claimNames.has(cl.name)) fail(n, `${where}: resources.claims name ${cl.name} is not in spec.resourceClaims`)
        if (cl.request !== undefined && cl.request !== '') {
          if (!isDnsLabel(cl.request)) fail(n, `${where}: request ${JSON.stringify(cl.request)} is not a DNS label`)
          const t = claimTemplate.get(cl.name)
          if (t && !t.spec.spec.devices.requests.some((r) => r.name === cl.request)) fail(n, `${where}: request ${cl.request} is not a main request of ${t.metadata.name}`)
        }
        const key = cl.name + '/' + (cl.request || '')
        if (seen.has(key) || seen.has(cl.name + '/') || (!cl.request && [...seen].some((s) => s.startsWith(cl.name + '/')))) fail(n, `${where}: claim ${key} repeats`)
        seen.add(key)
      }
      for (const sec of ['limits', 'requests']) {
        for (const k of Object.keys(ct.resources?.[sec] || {})) if (legacyKey(k)) fail(n, `${where}: legacy ${sec} ${k} left after conversion`)
      }
      const had = before.find((b) => b.name === ct.name)
      if (had && legacyCount(had) > 0 && !(ct.resources?.claims || []).some((cl) => claimTemplate.has(cl.name))) {
        fail(n, `${where}: had a legacy GPU request but does not reference the generated claim`)
      }
    })
  }
  for (const ec of spec.ephemeralContainers || []) {
    if (ec.resources) fail(n, `ephemeral container ${ec.name} has resources`)
  }
  const required = spec.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
  for (const [ti, term] of (required?.nodeSelectorTerms || []).entries()) {
    for (const f of term.matchFields || []) {
      const where = `nodeSelectorTerms[${ti}].matchFields ${f.key} ${f.operator} ${JSON.stringify(f.values)}`
      if (f.key !== 'metadata.name') fail(n, `${where}: not a valid field selector key`)
      if ((f.operator === 'In' || f.operator === 'NotIn') && (f.values || []).length !== 1) {
        fail(n, `${where}: the API server requires exactly one value for a node field selector (In/NotIn)`)
      }
      for (const v of f.values || []) if (!isDnsSubdomain(v)) fail(n, `${where}: ${v} is not a node name`)
    }
    for (const x of term.matchExpressions || []) {
      if (!isLabelKey(x.key)) fail(n, `matchExpressions key ${x.key} is not a label key`)
      if ((x.operator === 'In' || x.operator === 'NotIn') && !(x.values || []).length) fail(n, `matchExpressions ${x.key} ${x.operator} without values`)
      for (const v of x.values || []) if (!isLabelValue(v)) fail(n, `matchExpressions ${x.key}: ${v} is not a label value`)
    }
  }
}

function validateTemplate (c, t) {
  const n = c.name
  try {
    new ResourceClaimTemplate(t).validate()
  } catch (e) {
    fail(n, `kubernetes-models rejects template ${t.metadata?.name}: ${String(e.message).split('\n')[0]}`)
  }
  if (t.apiVersion !== 'resource.k8s.io/v1' || t.kind !== 'ResourceClaimTemplate') fail(n, `template is ${t.apiVersion} ${t.kind}`)
  if (!isDnsSubdomain(t.metadata?.name)) fail(n, `template name ${t.metadata?.name} is not a DNS subdomain (<= 253)`)
  for (const k of Object.keys(t.spec?.metadata || {})) {
    if (k !== 'labels' && k !== 'annotations') fail(n, `template spec.metadata.${k} is not allowed (labels/annotations only)`)
  }
  for (const [k, v] of Object.entries(t.spec?.metadata?.labels || {})) {
    if (!isLabelKey(k) || !isLabelValue(v)) fail(n, `template claim label ${k}=${v} is invalid`)
  }
  const devices = t.spec?.spec?.devices || {}
  const reqs = devices.requests || []
  if (reqs.length === 0) fail(n, `template ${t.metadata.name} has no requests`)
  const names = new Set()
  let total = 0
  const validRefs = new Set()
  for (const r of reqs) {
    if (!isDnsLabel(r.name)) fail(n, `request name ${r.name} is not a DNS label`)
    if (names.has(r.name)) fail(n, `request name ${r.name} repeats`)
    names.add(r.name)
    validRefs.add(r.name)
    if (!!r.exactly === !!r.firstAvailable) fail(n, `request ${r.name}: exactly one of exactly / firstAvailable`)
    const alts = r.exactly ? [r.exactly] : (r.firstAvailable || [])
    if (r.firstAvailable) {
      if (r.firstAvailable.length < 1 || r.firstAvailable.length > MAX_ALTERNATIVES) fail(n, `request ${r.name}: ${r.firstAvailable.length} firstAvailable alternatives (max ${MAX_ALTERNATIVES})`)
      const sub = new Set()
      for (const a of r.firstAvailable) {
        if (!isDnsLabel(a.name)) fail(n, `subrequest name ${r.name}/${a.name} is not a DNS label`)
        if (sub.has(a.name)) fail(n, `subrequest ${r.name}/${a.name} repeats`)
        sub.add(a.name)
        validRefs.add(r.name + '/' + a.name)
      }
    }
    let most = 0
    for (const a of alts) {
      if (!isDnsSubdomain(a.deviceClassName)) fail(n, `request ${r.name}: deviceClassName ${a.deviceClassName} is not a DNS subdomain`)
      const mode = a.allocationMode || 'ExactCount'
      if (mode === 'ExactCount') {
        const count = a.count ?? 1
        if (!Number.isInteger(count) || count < 1 || count > MAX_COUNT) fail(n, `request ${r.name}: count ${count} outside 1..${MAX_COUNT}`)
        most = Math.max(most, count)
      } else if (mode === 'All') {
        fail(n, `request ${r.name}: allocationMode All`)
      }
      if ((a.selectors || []).length > 32) fail(n, `request ${r.name}: more than 32 selectors`)
      for (const s of a.selectors || []) {
        if (!s.cel?.expression) fail(n, `request ${r.name}: empty selector`)
        else if (s.cel.expression.length > 10 * 1024) fail(n, `request ${r.name}: selector longer than 10Ki`)
      }
    }
    total += most
  }
  if (total > MAX_COUNT) fail(n, `template ${t.metadata.name} asks for ${total} devices; a claim holds at most ${MAX_COUNT}`)
  for (const c2 of devices.constraints || []) {
    if (!!c2.matchAttribute === !!c2.distinctAttribute) fail(n, `constraint needs exactly one of matchAttribute / distinctAttribute`)
    if (c2.matchAttribute && !/^[^/]+\/[^/]+$/.test(c2.matchAttribute)) fail(n, `matchAttribute ${c2.matchAttribute} is not fully qualified`)
    for (const r of c2.requests || []) if (!validRefs.has(r)) fail(n, `constraint names unknown request ${r}`)
  }
  for (const cfg of devices.config || []) {
    for (const r of cfg.requests || []) if (!validRefs.has(r)) fail(n, `config names unknown request ${r}`)
    if (cfg.opaque && (typeof cfg.opaque.parameters !== 'object' || Array.isArray(cfg.opaque.parameters))) fail(n, 'opaque parameters are not an object')
  }
}

// Memory floors: every GPU whose marketed memory meets the annotation must pass the memory
// selectors of the template.
function checkMemory (c, templates) {
  if (!c.memoryAnnotation) return
  let want
  try { want = new Quantity(c.memoryAnnotation).bytes() } catch { return }
  for (const node of Object.values(nodes[c.topology])) {
    for (const dev of node.devices) {
      if (dev.kind !== 'gpu' || !dev.gt) continue
      const gb = marketedGB(dev.gt.model)
      if (gb === undefined || BigInt(gb) * (1n << 30n) < want) continue
      for (const t of templates) {
        for (const r of t.spec.spec.devices.requests) {
          for (const a of r.exactly ? [r.exactly] : r.firstAvailable) {
            for (const s of a.selectors || []) {
              if (!s.cel.expression.includes('memory')) continue
              if (readsUnknown(s.cel.expression, dev)) { summary.memoryUnknown++; continue }
              summary.memoryChecks++
              const v = evaluate(s.cel.expression, dev)
              if (!v.value) fail(c.name, `memory floor ${c.memoryAnnotation}: ${dev.gt.model} (${node.file}) is excluded by ${s.cel.expression}`)
            }
          }
        }
      }
    }
  }
}

// (a) and (d): the constraints prove the alignment, the GPU devices publish the ground truth's NUMA
// node, and the Pod accounts the claim's CPUs once.
const proofCache = new Map()
function checkCpus (c, orig, pod, templates, allowed) {
  const n = c.name
  if (!controlSink) summary.cpuCases++
  const byName = new Map(templates.map((t) => [t.metadata.name, t]))
  const claimTemplate = new Map((pod.spec?.resourceClaims || [])
    .filter((rc) => byName.has(rc.resourceClaimTemplateName)).map((rc) => [rc.name, byName.get(rc.resourceClaimTemplateName)]))
  const listed = new Map() // template name -> CPU requests some container lists
  for (const t of templates) {
    const ties = cpuTies(t, c.cpuMode)
    if (!ties) continue
    if (!controlSink) { summary.cpuTemplates++; summary.cpuRequests += ties.cpus.size }
    listed.set(t.metadata.name, new Set())
    for (const [name, cpus] of ties.cpus) {
      if (!(cpus >= 1)) fail(n, `${t.metadata.name}: CPU request ${name} is not of the ${c.cpuMode} form: ${JSON.stringify(t.spec.spec.devices.requests.find((r) => r.name === name))}`)
    }
    // On every node the Pod may use, the GPU devices a tied request could receive publish the
    // ground truth's NUMA node.
    for (const node of allowed) {
      const key = JSON.stringify([c.topology, node.name, c.cpuMode, t.spec.spec.devices])
      if (proofCache.has(key)) { for (const p of proofCache.get(key)) fail(n, p); continue }
      const problems = []
      for (const r of t.spec.spec.devices.requests) {
        if (!ties.gpus.has(r.name)) continue
        for (const [alt, altName] of r.exactly ? [[r.exactly, r.name]] : (r.firstAvailable || []).map((a) => [a, r.name + '/' + a.name])) {
          if (!ties.tiedCpus(altName)) continue
          for (const dev of candidates(alt, node, n, `${t.metadata.name} ${altName} on ${node.name}`)) {
            const v = numaOf(dev)
            if (!controlSink) summary.cpuGpuDevicesChecked++
            if (v === undefined) { if (!controlSink) summary.cpuGpuDevicesWithoutNuma++; continue }
            if (!dev.gt || dev.gt.numa.length !== 1 || dev.gt.numa[0] !== v) {
              problems.push(`${t.metadata.name}: ${altName} on ${node.name} (${node.file}) may receive GPU ${dev.name}@${dev.bus}, which publishes ${NUMA_ATTR} ${v}; ground truth: local to NUMA ${dev.gt ? dev.gt.numa.join('+') || '(none)' : '?'}`)
            }
            if (!node.numaCpus.has(v)) problems.push(`${t.metadata.name}: GPU ${dev.name} on ${node.name} publishes NUMA node ${v}, which has no CPUs in the export`)
          }
        }
      }
      proofCache.set(key, problems)
      for (const p of problems) fail(n, p)
    }
  }
  for (const list of ['containers', 'initContainers']) {
    (pod.spec?.[list] || []).forEach((ct, i) => {
      const where = `${list}[${i}] ${ct.name}`
      const byClaim = new Map()
      for (const cl of ct.resources?.claims || []) {
        if (!claimTemplate.has(cl.name)) continue
        if (!byClaim.has(cl.name)) byClaim.set(cl.name, [])
        byClaim.get(cl.name).push(cl.request || '')
      }
      let total = 0
      let anyCpu = false
      let anyGpu = false
      for (const [claim, names0] of byClaim) {
        const t = claimTemplate.get(claim)
        const reqs = t.spec.spec.devices.requests
        const names = names0.includes('') ? reqs.map((r) => r.name) : names0
        if (reqs.some((r) => requestClasses(r).includes(index.gpuClass) && names.includes(r.name))) anyGpu = true
        const ties = cpuTies(t, c.cpuMode)
        if (!ties) continue
        const gpuL = names.filter((x) => ties.gpus.has(x))
        const cpuL = names.filter((x) => ties.cpus.has(x))
        for (const x of cpuL) { listed.get(t.metadata.name).add(x); total += ties.cpus.get(x); anyCpu = true }
        if (!controlSink) summary.cpuProofs++
        // (a) Each GPU request with a CPU request of the container, each CPU request with a GPU
        // request, by a numaNode constraint (every alternative of a firstAvailable request).
        for (const g of gpuL) {
          const r = reqs.find((x) => x.name === g)
          const alts = r.exactly ? [g] : (r.firstAvailable || []).map((a) => g + '/' + a.name)
          for (const a of alts) {
            if (!cpuL.some((x) => ties.tied(a, x))) fail(n, `${t.metadata.name}: ${where}: GPU request ${a} is not tied to a CPU request it lists by matchAttribute ${NUMA_ATTR}: its CPUs may land off the GPUs' NUMA node`)
          }
        }
        for (const x of cpuL) {
          if (!gpuL.some((g) => ties.tied(g, x) || (reqs.find((r) => r.name === g).firstAvailable || []).every((a) => ties.tied(g + '/' + a.name, x)))) {
            fail(n, `${t.metadata.name}: ${where}: CPU request ${x} is not tied to a GPU request it lists by matchAttribute ${NUMA_ATTR}: its CPUs may land off the GPUs' NUMA node`)
          }
        }
        // NICs: tied to a GPU request that is tied to CPUs, by pcieRoot (the ground truth puts a
        // host bridge's devices on its NUMA nodes; (b) checks each set) or numaNode.
        for (const r of reqs) {
          if (!requestClasses(r).includes(index.nicClass) || !names.includes(r.name)) continue
          const ok = (t.spec.spec.devices.constraints || []).some((k) => (k.matchAttribute === PCIE_ATTR || k.matchAttribute === NUMA_ATTR) &&
            covers(k, [r.name]) && gpuL.some((g) => covers(k, [g]) && ties.tiedCpus(g)))
          if (!ok) fail(n, `${t.metadata.name}: ${where}: NIC request ${r.name} is tied to no GPU request that is tied to CPUs: the NIC may come from another NUMA node`)
        }
      }
      // (d) The container accounts the claim's CPUs once: requests.cpu = limits.cpu = N, which is
      // the whole cpu the original container asked for.
      const before = (orig.spec?.[list] || []).find((b) => b.name === ct.name)
      const origCpus = wholeCpus(before?.resources?.requests?.cpu ?? before?.resources?.limits?.cpu)
      if (anyCpu) {
        if (!controlSink) summary.cpuContainers++
        const req = wholeCpus(ct.resources?.requests?.cpu)
        const lim = wholeCpus(ct.resources?.limits?.cpu)
        if (req !== total || lim !== total) fail(n, `${where}: requests.cpu ${ct.resources?.requests?.cpu} / limits.cpu ${ct.resources?.limits?.cpu}, its claim's CPUs ${total}`)
        if (origCpus !== total) fail(n, `${where}: asked for cpu ${before?.resources?.requests?.cpu ?? before?.resources?.limits?.cpu}, its claim's CPUs ${total}`)
      } else if (list === 'containers' && anyGpu && origCpus >= 1 && Number.isInteger(origCpus) &&
                 [...byClaim.keys()].some((cl) => cpuTies(claimTemplate.get(cl), c.cpuMode) === null) &&
                 ['limits', 'requests'].some((sec) => Number(before?.resources?.[sec]?.['nvidia.com/gpu'] || 0) >= 1)) {
        fail(n, `${where}: full GPUs and ${origCpus} whole CPUs, yet its claim has no CPU request (mutation.cpu ${c.cpuMode})`)
      }
    })
  }
  for (const [tname, set] of listed) {
    const ties = cpuTies(byName.get(tname), c.cpuMode)
    for (const x of ties.cpus.keys()) if (!set.has(x)) fail(n, `${tname}: no container lists CPU request ${x}: its CPUs would be allocated to no container`)
  }
}

function checkCase (c) {
  if (!controlSink) for (const p of c.placements.flat()) summary.placements[p] = (summary.placements[p] || 0) + 1
  const dir = join(root, c.id)
  const orig = JSON.parse(readFileSync(join(dir, 'pod.json'), 'utf8'))
  const patchedPath = existsSync(join(dir, 'patched.json')) ? join(dir, 'patched.json') : join(dir, 'expected.json')
  const pod = JSON.parse(readFileSync(patchedPath, 'utf8'))
  const templates = JSON.parse(readFileSync(join(dir, 'templates.json'), 'utf8'))
  summary.pods++
  validatePod(c, orig, pod, templates)
  for (const t of templates) { summary.templates++; validateTemplate(c, t) }
  checkMemory(c, templates)
  const allowed = allowedNodes(pod, c.topology)
  if (allowed.length === 0) {
    fail(c.name, 'the patched Pod may be scheduled on no node of the topology')
    return
  }
  if (c.cpuMode && c.cpuMode !== 'none') checkCpus(c, orig, pod, templates, allowed)
  const perNode = new Map() // node name -> per template the enumeration result
  templates.forEach((t, ti) => {
    let satisfiable = false
    let gpuSatisfiable = false
    for (const node of allowed) {
      summary.nodeChecks++
      const key = JSON.stringify([c.topology, node.name, t.spec, c.templateEntries ? c.templateEntries[ti] : c.entries, c.nic, c.placements[ti], c.cpuMode || 'none'])
      let r = enumCache.get(key)
      if (!r) {
        r = checkTemplateOnNode(c, t, c.placements[ti], node, ti)
        enumCache.set(key, r)
        summary.sets += r.sets
      }
      if (!perNode.has(node.name)) perNode.set(node.name, [])
      perNode.get(node.name).push(r)
      for (const p of r.problems) fail(c.name, `${t.metadata.name}: ${p}`)
      if (r.undecided) log.push(`${c.name}: ${t.metadata.name} on ${node.name}: search budget exhausted`)
      if (r.satisfiable) satisfiable = true
      else summary.allowedButUnsatisfiable++
      if (r.gpuSatisfiable) gpuSatisfiable = true
      if (r.gpuSatisfiable && !r.satisfiable && !controlSink) summary.cpuNodesWithoutRoom++
    }
    const tiesT = c.cpuMode && c.cpuMode !== 'none' ? cpuTies(t, c.cpuMode) : null
    if (satisfiable) {
      summary.satisfiable++
      if (tiesT && !controlSink) summary.cpuSatisfiable++
    } else if (tiesT && gpuSatisfiable) {
      fail(c.name, `${t.metadata.name} (${t.metadata.annotations?.['draguard.io/profile']}): on no allowed node (${allowed.map((x) => x.name).join(', ')}) do the GPUs fit with their CPUs on a NUMA node that has them (CPUs per NUMA node: ${allowed.map((x) => `${x.name} ${JSON.stringify([...x.numaCpus])}`).join('; ')})`)
    } else if (!c.entries.every((e) => e.kind === 'mig')) {
      fail(c.name, `${t.metadata.name} (${t.metadata.annotations?.['draguard.io/profile']}) cannot be allocated on any allowed node (${allowed.map((x) => x.name).join(', ')})`)
    }
  })
  // Several templates: the Pod's claims are allocated on one node together, with distinct devices
  // and, with CPUs, within each NUMA node's CPUs.
  if (templates.length < 2) return
  let together = false
  let undecided = false
  for (const node of allowed) {
    const rs = perNode.get(node.name) || []
    if (rs.length !== templates.length || !rs.every((r) => r.satisfiable)) continue
    const lists = rs.flatMap((r) => r.perEntry)
    const used = new Set()
    const demand = new Map()
    let steps = 0
    const dfs = (e) => {
      if (e === lists.length) return true
      if (lists[e] === null) return dfs(e + 1)
      for (const s of lists[e]) {
        if (++steps > 2000000) { undecided = true; return false }
        const devs = [...s.gpus, ...(s.nic ? [s.nic] : []), ...(s.nics || [])]
        if (devs.some((d) => used.has(d))) continue
        const cpus = s.cpuDemand || []
        for (const [v, n] of cpus) demand.set(v, (demand.get(v) || 0) + n)
        let ok = false
        if (cpus.every(([v]) => demand.get(v) <= (node.numaCpus.get(v) || 0))) {
          devs.forEach((d) => used.add(d))
          ok = dfs(e + 1)
          devs.forEach((d) => used.delete(d))
        }
        for (const [v, n] of cpus) demand.set(v, demand.get(v) - n)
        if (ok) return true
      }
      return false
    }
    if (dfs(0)) { together = true; break }
  }
  if (!controlSink) summary.podsTogether = (summary.podsTogether || 0) + (together ? 1 : 0)
  if (!together && !undecided && templates.every((t, ti) => allowed.some((node) => (perNode.get(node.name) || [])[ti]?.satisfiable))) {
    fail(c.name, `the Pod's ${templates.length} claims (${templates.map((t) => t.metadata.name).join(', ')}) fit each on some allowed node, but on none together (${allowed.map((x) => x.name).join(', ')})`)
  }
}

for (const c of index.cases) {
  summary.cases++
  checkCase(c)
}
const controls = {...topologyControls}
for (const c of index.controls || []) {
  controlSink = []
  checkCase(c)
  controls[c.id] = controlSink
  controlSink = null
}

const failures = []
for (const [msg, {first, count}] of failureMap) {
  failures.push(`${first}: ${msg}` + (count > 1 ? ` [and ${count - 1} more cases]` : ''))
}
log.push(`checked ${summary.cases} cases: ${summary.pods} pods, ${summary.templates} templates, ${summary.evaluations} CEL evaluations, ` +
  `${summary.sets} device sets on ${summary.nodeChecks} (case, node) pairs; ${summary.satisfiable} templates satisfiable; ` +
  `${summary.allowedButUnsatisfiable} allowed nodes cannot allocate; ${summary.migEntriesUnchecked} MIG entries not enumerated (no MIG devices simulated); ` +
  `${summary.ignoredAffinityKeys} non-draguard affinity requirements ignored; ${summary.memoryChecks} memory-floor checks ` +
  `(${summary.memoryUnknown} skipped: memory unknown in the export); ${summary.unknownMatches} device matches rest on data the export lacks; ` +
  `${summary.podsInvalidBefore} original Pods already fail the schema (template variables); ` +
  `${summary.podsTogether || 0} Pods with several claims fit one node together; ` +
  `entries by placement: ${JSON.stringify(summary.placements)}`)
if (summary.cpuCases) {
  log.push(`CPUs in claims (CPU devices not enumerated): ${summary.cpuCases} cases, ${summary.cpuTemplates} templates with ` +
    `${summary.cpuRequests} CPU requests, ${summary.cpuProofs} (container, claim) constraint proofs, ${summary.cpuContainers} containers ` +
    `accounting their claim's CPUs; ${summary.cpuGpuDevicesChecked} (GPU device, request, node) numaNode checks against the ground truth ` +
    `(${summary.cpuGpuDevicesWithoutNuma} devices without the attribute, excluded by the constraint); ${summary.cpuSets} GPU sets tied ` +
    `to CPUs checked against their NUMA node (${summary.cpuParts} part and ${summary.cpuRails} rail enumerations); ${summary.cpuSatisfiable} ` +
    `templates fit with their CPUs on some allowed node; ${summary.cpuNodesWithoutRoom} allowed nodes fit the GPUs but not the CPUs; ` +
    `CPUs per NUMA node read from ${summary.numaFiles} exports`)
}
process.stdout.write(JSON.stringify({summary, failures, log, controls}))
