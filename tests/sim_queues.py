#!/usr/bin/env python3
"""The simulator's queues, measured as docs/QUEUES.md states them.

usage: sim_queues.py HETEROFLOW BACKFILL_YAML

1. Starvation (examples/sim/backfill.yaml): a 64-GPU job behind a stream of
   1-GPU jobs with 10-minute limits on 64 GPUs. With --backfill off it starts
   only once the stream's backlog is gone (after the last arrival, 7200 s);
   with backfill on it starts no later than its first computed reservation,
   and utilisation stays within 90% of the run without reservations.
2. Fair share (--generate teams, weights 1:2:1, demand without limit, one
   simulated day): with --queueing fair each queue's share of GPU-hours is
   within 5% of its weight-entitled share and Jain's index is >= 0.99; with
   fifo, which ignores weights, queue b gets well under its entitlement.
"""
import json
import subprocess
import sys

binary, backfill_yaml = sys.argv[1], sys.argv[2]
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def runs(*args):
    out = subprocess.run([binary, "simulate", *args, "--json"], check=True,
                         capture_output=True, text=True).stdout
    return {(r["queueing"], r["backfill"]): r for r in json.loads(out)["runs"]}


# 1. Starvation.
r = runs("--workload", backfill_yaml, "--queueing", "fifo", "--backfill", "off,on")
off, on = r[("fifo", False)], r[("fifo", True)]
big_off, big_on = off["largest_job"], on["largest_job"]
check(big_off["name"] == "large" and big_off["gpus"] == 64, f"largest job: {big_off}")
check(big_off["start_seconds"] is not None and big_off["start_seconds"] > 7200,
      f"backfill off: the large job should wait out the stream, started {big_off['start_seconds']}")
check(big_off["first_reservation_seconds"] is None, "backfill off: no reservation expected")
check(big_on["first_reservation_seconds"] is not None, "backfill on: a reservation expected")
check(big_on["start_seconds"] is not None and
      big_on["start_seconds"] <= big_on["first_reservation_seconds"],
      f"backfill on: started {big_on['start_seconds']}, after its first reservation "
      f"{big_on['first_reservation_seconds']}")
ratio = on["gpu_alloc_ratio_time_avg"] / off["gpu_alloc_ratio_time_avg"]
check(ratio >= 0.9, f"backfill on: utilisation {ratio:.3f} of the run without reservations")
print(f"starvation: backfill off starts the 64-GPU job at {big_off['start_seconds']:.0f} s; "
      f"on: reserved for {big_on['first_reservation_seconds']:.0f} s, started "
      f"{big_on['start_seconds']:.0f} s; utilisation {100 * on['gpu_alloc_ratio_time_avg']:.2f}% "
      f"vs {100 * off['gpu_alloc_ratio_time_avg']:.2f}% ({ratio:.3f})")

# 2. Fair share over a day.
r = runs("--generate", "teams", "--teams", "a:1,b:2,c:1", "--hours", "24",
         "--queueing", "fifo,fair", "--backfill", "on")
fair, fifo = r[("fair", True)], r[("fifo", True)]
for q in fair["queues"]:
    want = 0.5 if q["name"] == "b" else 0.25
    check(abs(q["entitled_share"] - want) < 1e-9, f"{q['name']}: entitled {q['entitled_share']}")
    check(abs(q["gpu_hours_share"] / want - 1) <= 0.05,
          f"fair: queue {q['name']} got {q['gpu_hours_share']:.4f} of GPU-hours, entitled {want}")
check(fair["jain_index"] >= 0.99, f"fair: Jain's index {fair['jain_index']:.4f}")
b_fifo = next(q for q in fifo["queues"] if q["name"] == "b")
check(b_fifo["gpu_hours_share"] < 0.45, f"fifo: b got {b_fifo['gpu_hours_share']:.4f}")
print("fair share: " + ", ".join(
    f"{q['name']} {100 * q['gpu_hours_share']:.2f}% (entitled {100 * q['entitled_share']:.0f}%)"
    for q in fair["queues"]) + f"; Jain {fair['jain_index']:.4f} (fifo {fifo['jain_index']:.4f})")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
