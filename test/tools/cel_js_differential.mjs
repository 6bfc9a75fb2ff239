// Evaluates DRA selectors with an independent CEL implementation, @marcbachmann/cel-js (MIT),
// for draguard's differential test (test/unit/cel/differential_test.cc).
//
// Usage: node cel_js_differential.mjs CASES.json  ->  JSON array on stdout, one entry per case:
//   {"value": true|false} or {"error": "..."}.
// CASES.json: {"devices": [device JSON as in include/draguard/cel/device.h],
//              "cases": [{"expr": "...", "device": index}]}
//
// The environment (quantity() and semver() with a small, separate implementation) and the device
// values come from cel_env.mjs, shared with check_mutation.mjs.
import {readFileSync} from 'node:fs'
import {env, toCel} from './cel_env.mjs'

// cel-js 8.0.0 rejects has() whose select operand is an index expression
// (`has(m['k'].f)`, "has() invalid argument"), which cel-go accepts. For a map operand CEL defines
// has(m.f) as key presence, i.e. 'f' in m, so that form is rewritten before evaluation.
function rewriteHas (expr) {
  return expr.replace(/has\((device\.(?:attributes|capacity)\['[^']*'\])\.([A-Za-z_][A-Za-z0-9_]*)\)/g,
    (_, map, field) => `('${field}' in ${map})`)
}

const input = JSON.parse(readFileSync(process.argv[2], 'utf8'))
const devices = input.devices.map((d) => toCel(d))
const out = input.cases.map(({expr, device}) => {
  try {
    const v = env.evaluate(rewriteHas(expr), {device: devices[device]})
    if (typeof v !== 'boolean') return {error: `non-bool result ${String(v)}`}
    return {value: v}
  } catch (e) {
    return {error: String(e.message).split('\n')[0]}
  }
})
process.stdout.write(JSON.stringify(out))
