#!/usr/bin/env python3
"""Self-test of check_placements.py: a checker that never fails proves nothing.

Runs the checker on a tiny cluster with one good and several broken
placements files and expects it to pass or fail (with the right message).
"""

import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKER = os.path.join(HERE, "check_placements.py")

NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,16384,2,T4\nn1,8000,16384,1,V100M16\n"
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
        "creation_time,deletion_time,scheduled_time\n"
        "whole,1000,1024,1,1000,,LS,Running,0,100,0\n"
        "half,1000,1024,1,500,T4,LS,Running,0,100,0\n"
        "two,1000,1024,2,1000,,BE,Running,0,100,0\n"
        "cpu,7000,1024,0,0,,BE,Running,0,100,0\n"
        "later,1000,1024,1,1000,,BE,Running,100,200,0\n")

# (name, placements text, expect_ok, expected message fragment)
CASES = [
    ("good", "pod,node,gpus\nwhole,n0,0:1000\nhalf,n0,1:500\ntwo,,\ncpu,n1,\n", True, "OK"),
    ("good_sampled_names", "pod,node,gpus\nwhole-0,n0,0:1000\nwhole-1,n0,1:1000\n", True, "OK"),
    ("gpu_overcommit", "pod,node,gpus\nwhole,n0,0:1000\nhalf,n0,0:500\n", False, "GPU 0 holds 1500"),
    ("cpu_overcommit", "pod,node,gpus\ncpu,n0,\nwhole,n0,0:1000\nhalf,n0,1:500\n", False, "CPU 9000"),
    ("index_out_of_range", "pod,node,gpus\nwhole,n1,1:1000\n", False, "GPU index 1"),
    ("gpu_count", "pod,node,gpus\ntwo,n0,0:1000\n", False, "asks for 2 GPUs"),
    ("model", "pod,node,gpus\nhalf,n1,0:500\n", False, "gpu_spec"),
    ("share", "pod,node,gpus\nhalf,n0,0:1000\n", False, "asked for 500"),
    ("twice", "pod,node,gpus\nwhole,n0,0:1000\nwhole,n0,1:1000\n", False, "listed twice"),
    ("unknown_node", "pod,node,gpus\nwhole,n9,0:1000\n", False, "unknown node"),
    ("unknown_pod", "pod,node,gpus\nghost,n0,0:1000\n", False, "unknown pod"),
    # Timed (replay) files add up only what coexists.
    ("timed_sequential", "pod,node,gpus,placed_s,released_s\nwhole,n1,0:1000,0,100\n"
     "later,n1,0:1000,100,200\n", True, "timed"),
    ("timed_overlap", "pod,node,gpus,placed_s,released_s\nwhole,n1,0:1000,0,150\n"
     "later,n1,0:1000,100,200\n", False, "GPU 0 holds 2000"),
]


def main():
    failures = 0
    with tempfile.TemporaryDirectory() as d:
        nodes = os.path.join(d, "nodes.csv")
        pods = os.path.join(d, "pods.csv")
        with open(nodes, "w") as f:
            f.write(NODES)
        with open(pods, "w") as f:
            f.write(PODS)
        for name, text, expect_ok, fragment in CASES:
            placements = os.path.join(d, name + ".csv")
            with open(placements, "w") as f:
                f.write(text)
            p = subprocess.run([sys.executable, CHECKER, "--nodes", nodes, "--pods", pods,
                                "--placements", placements], capture_output=True, text=True)
            out = p.stdout + p.stderr
            ok = (p.returncode == 0) == expect_ok and fragment in out
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode}: {out.strip()[:200]}")
            failures += not ok
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
