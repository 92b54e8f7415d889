#!/usr/bin/env python3
"""Checks the JSON object `heteroflow simulate --json` prints.

usage: check_sim_json.py FILE [--method M] [--eq KEY=VALUE] [--min KEY=VALUE] [--max KEY=VALUE]

Fails (exit 1) when a required key is missing or a value is not sane:
pods_scheduled + pods_failed == pods_total, ratios within 0..1, latencies
ordered, elapsed > 0, the always-on plugins enabled, the curve increasing.
--eq/--min/--max compare a top-level number (or string, for --eq).
"""

import argparse
import json
import sys

REQUIRED = [
    "method", "seed", "tune", "nodes", "gpus_total", "pods_total", "pods_scheduled",
    "pods_failed", "preemptions", "gpu_alloc_ratio_at_arrived_100", "arrived_100_reached",
    "gpu_alloc_ratio_final", "elapsed_seconds", "decisions", "decisions_per_second",
    "decision_latency_us", "policy", "alloc_curve",
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--method")
    ap.add_argument("--eq", action="append", default=[])
    ap.add_argument("--min", action="append", default=[])
    ap.add_argument("--max", action="append", default=[])
    args = ap.parse_args()

    with open(args.file) as f:
        text = f.read()
    try:
        s = json.loads(text)
    except json.JSONDecodeError as e:
        print(f"FAIL: not one JSON object: {e}\n{text[:500]}", file=sys.stderr)
        return 1
    problems = []
    for k in REQUIRED:
        if k not in s:
            problems.append(f"missing key {k}")
    if problems:
        print("FAIL: " + "; ".join(problems), file=sys.stderr)
        return 1

    def check(cond, msg):
        if not cond:
            problems.append(msg)

    check(s["pods_scheduled"] + s["pods_failed"] == s["pods_total"],
          f"pods_scheduled {s['pods_scheduled']} + pods_failed {s['pods_failed']} != "
          f"pods_total {s['pods_total']}")
    for k in ("gpu_alloc_ratio_at_arrived_100", "gpu_alloc_ratio_final"):
        check(0.0 <= s[k] <= 1.0, f"{k} = {s[k]} not in 0..1")
    lat = s["decision_latency_us"]
    check("p50" in lat and "p99" in lat, "decision_latency_us lacks p50/p99")
    if "p50" in lat and "p99" in lat:
        check(0 <= lat["p50"] <= lat["p99"], f"latency p50 {lat['p50']} > p99 {lat['p99']}")
    check(s["elapsed_seconds"] > 0, "elapsed_seconds must be > 0")
    check(s["decisions_per_second"] >= 0, "decisions_per_second must be >= 0")
    check(s["nodes"] > 0, "nodes must be > 0")
    enabled = s["policy"].get("enabled_plugins", [])
    for p in ("fit", "load_threshold"):
        check(p in enabled, f"always-on plugin {p} not in enabled_plugins {enabled}")
    if args.method:
        check(s["method"] == args.method, f"method {s['method']} != {args.method}")
    if s["method"] == "fgd":
        check(s["decisions"] == s["pods_total"], "fgd decides each sampled pod exactly once")
        check(s["arrived_100_reached"] == (s["tune"] >= 1.0),
              "fgd reaches arrived 100% exactly when tune >= 1")
    prev = -1.0
    for p in s["alloc_curve"]:
        check(p["arrived"] > prev, "alloc_curve arrived must increase")
        check(0.0 <= p["allocated"] <= min(p["arrived"], 1.0) + 1e-9,
              f"alloc_curve point {p}: allocated beyond arrived or capacity")
        prev = p["arrived"]

    def parse(spec):
        key, _, value = spec.partition("=")
        check(key in s, f"missing key {key}")
        return key, value

    for spec in args.eq:
        key, value = parse(spec)
        if key in s:
            got = s[key]
            want = type(got)(json.loads(value)) if isinstance(got, (int, float)) else value
            check(got == want, f"{key} = {got}, expected {want}")
    for spec in args.min:
        key, value = parse(spec)
        if key in s:
            check(s[key] >= float(value), f"{key} = {s[key]}, expected >= {value}")
    for spec in args.max:
        key, value = parse(spec)
        if key in s:
            check(s[key] <= float(value), f"{key} = {s[key]}, expected <= {value}")

    if problems:
        for p in problems:
            print(f"FAIL: {p}", file=sys.stderr)
        return 1
    at = "at arrived 100%" if s["arrived_100_reached"] else "final (arrived 100% not reached)"
    print(f"OK: {s['method']} {s['pods_scheduled']}/{s['pods_total']} scheduled, GPU allocation "
          f"{100 * s['gpu_alloc_ratio_at_arrived_100']:.2f}% {at}, {s['elapsed_seconds']:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
