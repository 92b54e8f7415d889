#!/usr/bin/env python3
"""Packing quality and speed of node sampling (percentage_of_nodes_to_score).

For each cluster size (the openb GPU node list repeated, as bench/targets.sh
builds it) and each percentage, runs `heteroflow simulate --method fgd` on
the openb default pods for every seed and prints the mean GPU allocation at
arrived 100% and the mean decisions per second, next to the full scan (100).
Not a test: run on purpose.

  bench/sampling/run.py [--bin build/heteroflow] [--sizes 10000,50000]
                        [--percentages 100,0,2] [--seeds 42-51] [--tune 1.3]
                        [--policy FILE]   (a plugins: block; default binpack)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))


def nodes_csv(src, count, path):
    rows = open(src).read().splitlines()
    with open(path, "w") as f:
        f.write(rows[0] + "\n")
        for i in range(count):
            f.write(",".join(["n-%05d" % i] + rows[1 + i % (len(rows) - 1)].split(",")[1:]) + "\n")


def seeds(spec):
    lo, _, hi = spec.partition("-")
    return list(range(int(lo), int(hi or lo) + 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(root, "build", "heteroflow"))
    ap.add_argument("--trace-dir", default=os.environ.get(
        "HETEROFLOW_TRACE_DIR", os.path.join(root, "..", "shared", "traces", "alibaba-openb")))
    ap.add_argument("--sizes", default="10000,50000")
    ap.add_argument("--percentages", default="100,0")
    ap.add_argument("--seeds", default="42-51")
    ap.add_argument("--tune", default="1.3")
    ap.add_argument("--policy", default="")
    a = ap.parse_args()
    plugins = open(a.policy).read() if a.policy else "plugins:\n  binpack: {enabled: true, weight: 1}\n"
    pin = ["taskset", "-c", "0"] if subprocess.call(["sh", "-c", "command -v taskset"],
                                                   stdout=subprocess.DEVNULL) == 0 else []
    pods = os.path.join(a.trace_dir, "openb_pod_list_default.csv")
    print("%8s %6s %14s %14s %14s" % ("nodes", "pct", "alloc@100 %", "vs full (pt)", "decisions/s"))
    with tempfile.TemporaryDirectory() as tmp:
        for size in [int(s) for s in a.sizes.split(",")]:
            csv = os.path.join(tmp, "nodes.csv")
            if size == 0:  # the openb cluster itself
                csv = os.path.join(a.trace_dir, "openb_node_list_gpu_node.csv")
            else:
                nodes_csv(os.path.join(a.trace_dir, "openb_node_list_gpu_node.csv"), size, csv)
            full = None
            for pct in [int(p) for p in a.percentages.split(",")]:
                policy = os.path.join(tmp, "policy.yaml")
                with open(policy, "w") as f:
                    f.write(plugins + "scheduler:\n  percentage_of_nodes_to_score: %d\n" % pct)
                allocs, rates = [], []
                for seed in seeds(a.seeds):
                    out = subprocess.run(pin + [a.bin, "simulate", "--nodes", csv, "--pods", pods,
                                                "--method", "fgd", "--tune", a.tune, "--seed", str(seed),
                                                "--policy", policy, "--json"],
                                         check=True, capture_output=True, text=True).stdout
                    r = json.loads(out)
                    allocs.append(100 * r["gpu_alloc_ratio_at_arrived_100"])
                    rates.append(r["decisions_per_second"])
                mean = statistics.mean(allocs)
                if pct == 100:
                    full = mean
                diff = "" if full is None else "%+.3f" % (mean - full)
                print("%8s %6s %14.3f %14s %14.0f" % (size or "openb", pct or "auto", mean, diff,
                                                     statistics.mean(rates)), flush=True)


if __name__ == "__main__":
    sys.exit(main())
