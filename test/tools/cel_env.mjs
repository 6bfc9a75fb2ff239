// The DRA selector environment for @marcbachmann/cel-js, shared by the test tools that evaluate
// draguard's selectors independently (cel_js_differential.mjs, check_mutation.mjs).
//
// quantity() and semver() are registered here with a small, separate implementation: exact
// BigInt decimals (no Kubernetes rounding/capping: the generated quantities never need it) and
// MAJOR.MINOR.PATCH versions (the generated versions have no pre-release part).
import {Environment} from './node_modules/@marcbachmann/cel-js/lib/index.js'

const SUFFIX = {
  '': [0n, 0n], n: [-9n, 0n], u: [-6n, 0n], m: [-3n, 0n], k: [3n, 0n], M: [6n, 0n], G: [9n, 0n],
  T: [12n, 0n], P: [15n, 0n], E: [18n, 0n],
  Ki: [0n, 10n], Mi: [0n, 20n], Gi: [0n, 30n], Ti: [0n, 40n], Pi: [0n, 50n], Ei: [0n, 60n],
}

// value = mant * 10^e10 (BigInt mantissa, BigInt exponent)
export class Quantity {
  constructor (text) {
    const m = /^([+-]?)(\d*)(?:\.(\d*))?([a-zA-Z]*)$/.exec(text)
    if (!m || (m[2] === '' && (m[3] === undefined || m[3] === '')) || !(m[4] in SUFFIX)) {
      throw new Error(`invalid quantity ${text}`)
    }
    const frac = m[3] || ''
    let mant = BigInt((m[2] || '0') + frac)
    const [e10, e2] = SUFFIX[m[4]]
    mant = mant * (2n ** e2)
    if (m[1] === '-') mant = -mant
    this.mant = mant
    this.e10 = e10 - BigInt(frac.length)
  }

  cmp (o) {
    const e = this.e10 < o.e10 ? this.e10 : o.e10
    const a = this.mant * 10n ** (this.e10 - e)
    const b = o.mant * 10n ** (o.e10 - e)
    return a < b ? -1n : a > b ? 1n : 0n
  }

  bytes () { // rounded down; only for non-negative exponents after scaling
    return this.e10 >= 0n ? this.mant * 10n ** this.e10 : this.mant / 10n ** (-this.e10)
  }
}

export class Semver {
  constructor (text) {
    const m = /^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)$/.exec(text)
    if (!m) throw new Error(`invalid semver ${text}`)
    this.v = [BigInt(m[1]), BigInt(m[2]), BigInt(m[3])]
  }

  cmp (o) {
    for (let i = 0; i < 3; i++) {
      if (this.v[i] !== o.v[i]) return this.v[i] < o.v[i] ? -1n : 1n
    }
    return 0n
  }
}

// `device` (a map) and the Kubernetes quantity / semver library.
export const env = new Environment({homogeneousAggregateLiterals: false})
  .registerType('kubernetes.Quantity', Quantity)
  .registerType('kubernetes.Semver', Semver)
  .registerVariable('device', 'map')
  .registerFunction('quantity(string): kubernetes.Quantity', (s) => new Quantity(s))
  .registerFunction('kubernetes.Quantity.compareTo(kubernetes.Quantity): int', (a, b) => a.cmp(b))
  .registerFunction('kubernetes.Quantity.isGreaterThan(kubernetes.Quantity): bool', (a, b) => a.cmp(b) > 0n)
  .registerFunction('kubernetes.Quantity.isLessThan(kubernetes.Quantity): bool', (a, b) => a.cmp(b) < 0n)
  .registerFunction('semver(string): kubernetes.Semver', (s) => new Semver(s))
  .registerFunction('kubernetes.Semver.compareTo(kubernetes.Semver): int', (a, b) => a.cmp(b))
  .registerFunction('kubernetes.Semver.isGreaterThan(kubernetes.Semver): bool', (a, b) => a.cmp(b) > 0n)
  .registerFunction('kubernetes.Semver.isLessThan(kubernetes.Semver): bool', (a, b) => a.cmp(b) < 0n)
  .registerFunction('kubernetes.Semver.major(): int', (a) => a.v[0])
  .registerFunction('kubernetes.Semver.minor(): int', (a) => a.v[1])
  .registerFunction('kubernetes.Semver.patch(): int', (a) => a.v[2])

// A device attribute as a CEL value: the typed form ({"int": ...}, {"bool": ...}, {"string": ...},
// {"version": ...}) or a bare JSON boolean / string / number.
export function attributeValue (v) {
  if (typeof v === 'boolean' || typeof v === 'string') return v
  if (typeof v === 'number') return BigInt(v)
  if ('int' in v) return BigInt(v.int)
  if ('bool' in v) return v.bool
  if ('string' in v) return v.string
  if ('version' in v) return new Semver(v.version)
  throw new Error('bad attribute ' + JSON.stringify(v))
}

// The `device` variable for a device (JSON as in include/draguard/cel/device.h; a capacity is a
// quantity string or {"value": quantity}). Every domain in `domains` missing from the device gets
// an empty attributes / capacity map, as unknown domains have in DRA's environment.
export function toCel (d, domains = []) {
  const attributes = {}
  for (const [dom, names] of Object.entries(d.attributes || {})) {
    attributes[dom] = {}
    for (const [n, v] of Object.entries(names)) attributes[dom][n] = attributeValue(v)
  }
  const capacity = {}
  for (const [dom, names] of Object.entries(d.capacity || {})) {
    capacity[dom] = {}
    for (const [n, v] of Object.entries(names)) capacity[dom][n] = new Quantity(typeof v === 'string' ? v : v.value)
  }
  for (const dom of domains) {
    if (!(dom in attributes)) attributes[dom] = {}
    if (!(dom in capacity)) capacity[dom] = {}
  }
  return {driver: d.driver || '', attributes, capacity}
}
