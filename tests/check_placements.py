#!/usr/bin/env python3
"""Independent checker for `heteroflow simulate --output-placements` on openb CSVs.

Shares no code with the simulator: it re-reads the node list, the pod list and
the placements file and re-adds every placement per GPU and per node. It fails
(exit 1, one line per problem, at most 20) when
  - a GPU holds more than 1000 milli, or a node more CPU or memory than it has;
  - a GPU index is not below the node's GPU count, or a pod holds a GPU twice;
  - a pod holds a different number of GPUs than its num_gpu, or a share other
    than its gpu_milli;
  - a GPU pod sits on a node whose model is not in its gpu_spec;
  - a row names an unknown pod or node, or a pod appears twice.
Sampled pods (fgd) are named "<pod>-<sample>": the suffix is stripped to find
the pod in the pod list.

Replay placements carry placed_s/released_s columns; then a placement holds
its resources over [placed_s, released_s) and only coexisting placements are
added up (releases before placements at equal times, as the simulator orders
them). Without those columns every placement is assumed to coexist (fgd never
deletes).

With --summary (the simulator's --json output) the counts are cross-checked:
rows == pods_total, and placed rows == pods_scheduled when nothing was
preempted. With --tune the sampled GPU demand must reach tune x capacity.
"""

import argparse
import csv
import json
import re
import sys
from collections import defaultdict


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def as_int(row, key, default=0):
    v = row.get(key)
    if v is None or v == "":
        return default
    return int(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", required=True)
    ap.add_argument("--pods", required=True)
    ap.add_argument("--placements", required=True)
    ap.add_argument("--summary", help="the simulator's --json output")
    ap.add_argument("--tune", type=float, help="fgd: demand must reach tune x capacity")
    args = ap.parse_args()

    problems = []

    def problem(msg):
        problems.append(msg)

    nodes = {}
    for r in read_csv(args.nodes):
        nodes[r["sn"]] = {
            "cpu": as_int(r, "cpu_milli"),
            "mem": as_int(r, "memory_mib"),
            "gpus": as_int(r, "gpu"),
            "model": r.get("model") or "",
        }
    pods = {}
    for r in read_csv(args.pods):
        pods[r["name"]] = {
            "cpu": as_int(r, "cpu_milli"),
            "mem": as_int(r, "memory_mib"),
            "num_gpu": as_int(r, "num_gpu"),
            "gpu_milli": as_int(r, "gpu_milli"),
            "spec": [m for m in (r.get("gpu_spec") or "").split("|") if m],
        }
    capacity = sum(n["gpus"] for n in nodes.values()) * 1000

    rows = read_csv(args.placements)
    timed = bool(rows) and "placed_s" in rows[0]
    seen = set()
    placed = []  # (node, cpu, mem, [(index, milli)], start, end)
    demand = 0
    for line, r in enumerate(rows, start=2):
        where = f"{args.placements}:{line}"
        name = r["pod"]
        if name in seen:
            problem(f"{where}: pod {name} listed twice")
            continue
        seen.add(name)
        pod = pods.get(name)
        if pod is None:
            m = re.fullmatch(r"(.*)-(\d+)", name)
            pod = pods.get(m.group(1)) if m else None
        if pod is None:
            problem(f"{where}: unknown pod {name}")
            continue
        if pod["num_gpu"] > 0:
            demand += pod["num_gpu"] * (pod["gpu_milli"] or 1000)
        node_name = r["node"]
        gpus_field = r["gpus"] or ""
        if not node_name:
            if gpus_field:
                problem(f"{where}: unplaced pod {name} holds GPUs {gpus_field}")
            continue
        node = nodes.get(node_name)
        if node is None:
            problem(f"{where}: unknown node {node_name}")
            continue
        grants = []
        for part in gpus_field.split("|") if gpus_field else []:
            try:
                idx, milli = (int(x) for x in part.split(":"))
            except ValueError:
                problem(f"{where}: malformed GPU grant '{part}'")
                continue
            grants.append((idx, milli))
        indices = [i for i, _ in grants]
        if len(set(indices)) != len(indices):
            problem(f"{where}: pod {name} holds a GPU twice: {gpus_field}")
        for idx, milli in grants:
            if idx < 0 or idx >= node["gpus"]:
                problem(f"{where}: GPU index {idx} on {node_name}, which has {node['gpus']} GPUs")
            want = pod["gpu_milli"] or 1000
            if milli != want:
                problem(f"{where}: pod {name} got {milli} milli on GPU {idx}, asked for {want}")
        if len(grants) != pod["num_gpu"]:
            problem(f"{where}: pod {name} asks for {pod['num_gpu']} GPUs, holds {len(grants)}")
        if grants and pod["spec"] and node["model"] not in pod["spec"]:
            problem(f"{where}: pod {name} (gpu_spec {'|'.join(pod['spec'])}) on {node_name} "
                    f"of model {node['model']}")
        start = end = None
        if timed:
            start = float(r["placed_s"]) if r.get("placed_s") else 0.0
            end = float(r["released_s"]) if r.get("released_s") else None
        placed.append((node_name, pod["cpu"], pod["mem"], grants, start, end, where))

    # Re-add placements; in time order when the file says when they held.
    gpu_used = defaultdict(int)
    cpu_used = defaultdict(int)
    mem_used = defaultdict(int)
    events = []
    for p in placed:
        if timed:
            events.append((p[4], 1, p))
            if p[5] is not None:
                events.append((p[5], 0, p))
        else:
            events.append((0.0, 1, p))
    events.sort(key=lambda e: (e[0], e[1]))
    for _, kind, (node_name, cpu, mem, grants, _s, _e, where) in events:
        sign = 1 if kind == 1 else -1
        cpu_used[node_name] += sign * cpu
        mem_used[node_name] += sign * mem
        for idx, milli in grants:
            gpu_used[(node_name, idx)] += sign * milli
        if kind == 0:
            continue
        node = nodes[node_name]
        if cpu_used[node_name] > node["cpu"]:
            problem(f"{where}: node {node_name} CPU {cpu_used[node_name]} > {node['cpu']}")
        if mem_used[node_name] > node["mem"]:
            problem(f"{where}: node {node_name} memory {mem_used[node_name]} > {node['mem']}")
        for idx, _ in grants:
            if gpu_used[(node_name, idx)] > 1000:
                problem(f"{where}: {node_name} GPU {idx} holds {gpu_used[(node_name, idx)]} milli")

    n_placed = len(placed)
    if args.summary:
        with open(args.summary) as f:
            s = json.load(f)
        if s["pods_total"] != len(rows):
            problem(f"summary pods_total {s['pods_total']} != {len(rows)} placement rows")
        if s["preemptions"] == 0 and s["pods_scheduled"] != n_placed:
            problem(f"summary pods_scheduled {s['pods_scheduled']} != {n_placed} placed rows")
        if s["gpu_capacity_milli"] != capacity:
            problem(f"summary gpu_capacity_milli {s['gpu_capacity_milli']} != {capacity}")
    if args.tune is not None and demand < args.tune * capacity:
        problem(f"sampled GPU demand {demand} < tune {args.tune} x capacity {capacity}")

    if problems:
        for p in problems[:20]:
            print(p, file=sys.stderr)
        print(f"FAIL: {len(problems)} problem(s) in {args.placements}", file=sys.stderr)
        return 1
    print(f"OK: {len(rows)} rows, {n_placed} placed, {len(rows) - n_placed} never placed "
          f"({'timed' if timed else 'static'} check)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
