#!/usr/bin/env python3
"""Applies draguard's RFC 6902 patches with an independent implementation (python3-jsonpatch).

Used by test/integration/mutation_fixtures_test.cc. Usage:

    apply_json_patch.py CASES_DIR

Every subdirectory of CASES_DIR that holds pod.json (the original Pod), patch.json (the patch
draguard computed) and expected.json (the converted Pod draguard computed) is checked: the patch
must be a list of well-formed operations, apply cleanly to pod.json, leave pod.json itself
untouched and give exactly expected.json. The result is written to patched.json next to them.
Prints one JSON object: {"checked": N, "failures": [{"case": ..., "error": ...}]}.
"""
import copy
import json
import os
import sys

import jsonpatch

OPS = {
    "add": ("path", "value"),
    "remove": ("path",),
    "replace": ("path", "value"),
    "move": ("from", "path"),
    "copy": ("from", "path"),
    "test": ("path", "value"),
}


def well_formed(patch):
    if not isinstance(patch, list):
        return "the patch is not a JSON array"
    for i, op in enumerate(patch):
        if not isinstance(op, dict) or op.get("op") not in OPS:
            return f"operation {i} has no valid op: {op!r}"
        for key in OPS[op["op"]]:
            if key not in op:
                return f"operation {i} ({op['op']}) lacks {key!r}"
        for key in ("path", "from"):
            if key in op and not (isinstance(op[key], str) and (op[key] == "" or op[key].startswith("/"))):
                return f"operation {i} has an invalid JSON Pointer {key}={op[key]!r}"
    return None


def check(case_dir):
    with open(os.path.join(case_dir, "pod.json"), encoding="utf-8") as f:
        pod = json.load(f)
    with open(os.path.join(case_dir, "patch.json"), encoding="utf-8") as f:
        patch = json.load(f)
    with open(os.path.join(case_dir, "expected.json"), encoding="utf-8") as f:
        expected = json.load(f)
    problem = well_formed(patch)
    if problem:
        return problem
    if not patch:
        return "the patch of a converted Pod is empty"
    original = copy.deepcopy(pod)
    try:
        patched = jsonpatch.apply_patch(pod, patch, in_place=False)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, KeyError, IndexError, TypeError) as e:
        return f"the patch does not apply: {type(e).__name__}: {e}"
    if pod != original:
        return "applying the patch modified the input"
    with open(os.path.join(case_dir, "patched.json"), "w", encoding="utf-8") as f:
        json.dump(patched, f)
    if patched != expected:
        diff = jsonpatch.make_patch(expected, patched).patch
        return f"patched Pod differs from the expected converted Pod: {json.dumps(diff)[:1500]}"
    return None


def main():
    root = sys.argv[1]
    checked = 0
    failures = []
    for name in sorted(os.listdir(root)):
        case_dir = os.path.join(root, name)
        if not os.path.isfile(os.path.join(case_dir, "patch.json")):
            continue
        checked += 1
        try:
            error = check(case_dir)
        except Exception as e:  # report, never crash the whole run
            error = f"{type(e).__name__}: {e}"
        if error:
            failures.append({"case": name, "error": error})
    json.dump({"checked": checked, "failures": failures}, sys.stdout)


if __name__ == "__main__":
    main()
