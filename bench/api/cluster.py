#!/usr/bin/python3
"""Helpers for bench/api/run.sh (standard library only).

  cluster.py register PORT TOKEN NODES GPUS   registers NODES nodes of GPUS A100-80G
                                               GPUs, 96 cores, 768 GiB (POST /api/v1/nodes)
  cluster.py submit PORT TOKEN COUNT          submits COUNT tasks (cpu_milli 100, memory_mib
                                               128) in one POST /api/v1/tasks/batch
  cluster.py settle PORT TOKEN [TIMEOUT_S]    waits until the scheduler's active queue is
                                               empty, then prints "scheduled=N pending=M
                                               settle_s=S" from GET /metrics
"""
import http.client
import json
import re
import sys
import time


def call(port, token, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read()
    conn.close()
    return r.status, raw


def register(port, token, nodes, gpus):
    for n in range(nodes):
        inv = {
            "name": "bench-%03d" % n,
            "labels": {"pool": "bench"},
            "cpu_milli": 96000,
            "memory_mib": 786432,
            "gpus": [{"index": i, "model": "A100-80G", "vendor": "nvidia", "memory_mib": 81920,
                      "numa": i // 4, "pcie_switch": i // 2, "nvlink_domain": 0}
                     for i in range(gpus)],
            "rdma": [{"name": "mlx5_0", "numa": 0, "pcie_switch": 0}],
            "topology": {"zone": "z%d" % (n // 32), "switch": "s%d" % (n // 8), "rack": "r%d" % (n // 4)},
        }
        status, raw = call(port, token, "POST", "/api/v1/nodes", inv)
        if status not in (200, 201):
            sys.exit("register node %s: HTTP %d %s" % (inv["name"], status, raw[:300]))


def submit(port, token, count):
    tasks = [{"name": "read-%d" % i, "requests": {"cpu_milli": 100, "memory_mib": 128}, "command": ["true"]}
             for i in range(count)]
    status, raw = call(port, token, "POST", "/api/v1/tasks/batch", {"tasks": tasks})
    if status not in (200, 201):
        sys.exit("submit %d tasks: HTTP %d %s" % (count, status, raw[:300]))


def metric(text, name, labels):
    m = re.search(r"^%s\{%s\} (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else 0.0


def settle(port, token, timeout):
    t0 = time.monotonic()
    while True:
        status, raw = call(port, token, "GET", "/metrics")
        if status != 200:
            sys.exit("GET /metrics: HTTP %d" % status)
        text = raw.decode()
        active = metric(text, "heteroflow_scheduler_pending_tasks", 'queue="active"')
        if active == 0 or time.monotonic() - t0 > timeout:
            break
        time.sleep(0.2)
    sched = metric(text, "heteroflow_scheduler_schedule_attempts_total", 'result="scheduled"')
    pending = active + metric(text, "heteroflow_scheduler_pending_tasks", 'queue="unschedulable"')
    print("scheduled=%d pending=%d settle_s=%.1f" % (sched, pending, time.monotonic() - t0))


def main():
    if len(sys.argv) >= 6 and sys.argv[1] == "register":
        register(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) >= 5 and sys.argv[1] == "submit":
        submit(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
    elif len(sys.argv) >= 4 and sys.argv[1] == "settle":
        settle(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 120)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
