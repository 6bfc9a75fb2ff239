// Exports the cel-spec test data shipped by @bufbuild/cel-spec (cel-spec v0.25.1) as one JSON
// document on stdout, for draguard's C++ conformance test (test/unit/cel/cel_conformance_test.cc).
//
// Output: {"parsing": [case], "comprehension": [case], "conformance": [case]} where a case is
// {"path": "suite/sub/...", "name": ..., "expr": ..., "ast": ..., "error": ..., "original": {...}}
// and `original` is the cel.expr.conformance.test.SimpleTest in protobuf JSON form.
// The data comes from the package's per-suite modules, which are the serialized form behind
// getParsingSuite() / getComprehensionSuite() / getConformanceSuite() of testdata/tests.js.
"use strict";
const path = require("path");
const base = path.join(__dirname, "node_modules", "@bufbuild", "cel-spec");
function load(name) {
  return require(path.join(base, "dist", "cjs", "testdata", name + ".js")).tests;
}
function flatten(suite, prefix, out) {
  const here = prefix ? prefix + "/" + suite.name : suite.name;
  for (const t of suite.tests || []) {
    out.push({
      path: here,
      name: t.original.name || t.original.expr,
      expr: t.original.expr,
      ast: t.ast,
      error: t.error,
      type: t.type,
      original: t.original,
    });
  }
  for (const s of suite.suites || []) flatten(s, here, out);
  return out;
}
const version = require(path.join(base, "package.json")).version;
process.stdout.write(
  JSON.stringify({
    package_version: version,
    parsing: flatten(load("parsing"), "", []),
    comprehension: flatten(load("comprehension"), "", []),
    conformance: flatten(load("conformance"), "", []),
  }),
);
