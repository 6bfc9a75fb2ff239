#!/usr/bin/env python3
"""Writes a kubectl-style List dump of N objects for measuring `draguard audit`.

  bench/audit_dump.py N json|yaml|yaml-block > dump

yaml writes one flow-style (JSON) item per "- " entry; yaml-block writes block style as
`kubectl get -o yaml` does (sequence dashes at the parent key's indentation).

Pods (every tenth requests a legacy GPU) with every tenth object a Deployment, as in
bench/audit_bench.cc. Streams its output, so N can be large.
"""
import json
import re
import sys


def obj(i):
    limits = {"cpu": "4", "memory": "16Gi"}
    if i % 10 == 0:
        limits["nvidia.com/gpu"] = 1
    container = {
        "name": "worker",
        "image": "registry.example.com/team/app:1.2.%d" % (i % 50),
        "env": [{"name": "MODE", "value": "serve"}, {"name": "PORT", "value": "8080"}],
        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        "resources": {"limits": limits, "requests": dict(limits)},
    }
    spec = {"containers": [container], "restartPolicy": "Always", "serviceAccountName": "default",
            "nodeName": "node-%d" % (i % 100)}
    metadata = {"name": "app-%d" % i, "namespace": "team-%d" % (i % 40),
                "uid": "0b7f3c1e-0000-4000-8000-%012d" % i,
                "labels": {"app": "app", "pod-template-hash": "5d8f7c9b4"}, "resourceVersion": str(1000 + i)}
    if i % 10 == 5:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata,
                "spec": {"replicas": 2, "template": {"metadata": {"labels": {"app": "app"}}, "spec": spec}}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec,
            "status": {"phase": "Running", "podIP": "10.0.0.1", "qosClass": "Guaranteed"}}


PLAIN = re.compile(r"^[A-Za-z][A-Za-z0-9./_-]*$")
RETYPED = {"true", "false", "null", "yes", "no", "on", "off", "y", "n"}


def block(v, indent, out):
    """Block-style YAML lines for a map or list value at `indent` spaces."""
    pad = " " * indent
    if isinstance(v, dict):
        for k, x in v.items():
            if isinstance(x, dict) and x:
                out.append("%s%s:" % (pad, k))
                block(x, indent + 2, out)
            elif isinstance(x, list) and x:
                out.append("%s%s:" % (pad, k))
                block(x, indent, out)
            else:
                out.append("%s%s: %s" % (pad, k, scalar(x)))
        return
    for x in v:
        if isinstance(x, dict) and x:
            sub = []
            block(x, indent + 2, sub)
            sub[0] = pad + "- " + sub[0][indent + 2:]
            out.extend(sub)
        else:
            out.append("%s- %s" % (pad, scalar(x)))


def scalar(x):
    if isinstance(x, str):
        return x if PLAIN.match(x) and x.lower() not in RETYPED else json.dumps(x)
    return json.dumps(x)


def main():
    n, fmt = int(sys.argv[1]), sys.argv[2]
    out = sys.stdout
    if fmt == "json":
        out.write('{"apiVersion":"v1","kind":"List","items":[')
        for i in range(n):
            out.write(("," if i else "") + json.dumps(obj(i)))
        out.write('],"metadata":{"resourceVersion":""}}\n')
        return
    if fmt == "yaml-block":
        out.write("apiVersion: v1\nitems:\n")
        for i in range(n):
            lines = []
            block([obj(i)], 0, lines)
            out.write("\n".join(lines) + "\n")
        out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')
        return
    # YAML with flow-style items: flow-style JSON values are valid YAML, one item per "- " entry.
    out.write("apiVersion: v1\nitems:\n")
    for i in range(n):
        out.write("- " + json.dumps(obj(i)) + "\n")
    out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


if __name__ == "__main__":
    main()
