#!/usr/bin/env python3
"""Writes a kubectl-style List dump of N objects for measuring `draguard audit`.

  bench/audit_dump.py N json|yaml > dump

Pods (every tenth requests a legacy GPU) with every tenth object a Deployment, as in
bench/audit_bench.cc. Streams its output, so N can be large.
"""
import json
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


def main():
    n, fmt = int(sys.argv[1]), sys.argv[2]
    out = sys.stdout
    if fmt == "json":
        out.write('{"apiVersion":"v1","kind":"List","items":[')
        for i in range(n):
            out.write(("," if i else "") + json.dumps(obj(i)))
        out.write('],"metadata":{"resourceVersion":""}}\n')
        return
    # YAML as kubectl writes it: flow-style JSON values are valid YAML, one item per "- " entry.
    out.write("apiVersion: v1\nitems:\n")
    for i in range(n):
        out.write("- " + json.dumps(obj(i)) + "\n")
    out.write('kind: List\nmetadata:\n  resourceVersion: ""\n')


if __name__ == "__main__":
    main()
