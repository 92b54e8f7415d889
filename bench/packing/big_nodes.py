#!/usr/bin/python3
"""A cluster of large nodes for the fragment plugin's path without the memo
(nodes of more than 16 GPUs), as a simulator workload on stdout (a
benchmark input, not a test):

  bench/packing/big_nodes.py [--nodes 40] [--gpus 128] [--tasks 4000] [--seed 1] > big.yaml
  taskset -c 0 build/heteroflow simulate --workload big.yaml --json

Nodes alternate T4 and A100 models; each task is one GPU of 250, 500, 750
or 1,000 milli, drawn at random. The policy is fragment alone, as
examples/policies/fragment.yaml has it.
"""
import argparse
import random


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=40)
    ap.add_argument("--gpus", type=int, default=128)
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    out = ["plugins:", "  binpack: {enabled: false}", "  spread: {enabled: false}",
           "  fragment: {enabled: true, weight: 1}", "nodes:"]
    for n in range(args.nodes):
        model = "A100" if n % 2 else "T4"
        out += [f"  - name: n{n}", "    cpu_milli: 4096000", "    memory_mib: 16777216", "    gpus:"]
        out += [f"      - {{index: {g}, model: {model}, memory_mib: 81920}}" for g in range(args.gpus)]
    out.append("tasks:")
    for i in range(args.tasks):
        milli = rng.choice([250, 500, 750, 1000])
        out += [f"  - name: t{i}",
                f"    requests: {{cpu_milli: 1000, memory_mib: 1024, gpu: 1, gpu_milli: {milli}}}"]
    print("\n".join(out))


if __name__ == "__main__":
    main()
