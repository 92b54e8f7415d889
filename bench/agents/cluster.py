#!/usr/bin/python3
"""Helpers for bench/agents/run.sh (standard library only).

  cluster.py agent-token PORT ADMIN_TOKEN NODE FILE
                                                   creates an agent token bound to NODE (POST
                                                   /api/v1/tokens) and writes it to FILE (0600)
  cluster.py inventories DIR NODES GPUS           writes DIR/agent-<i>.yaml, declared inventories
                                                   of NODES nodes (bench-a0..) with GPUS A100-80G
                                                   GPUs, 96 cores, 1 TiB, and an idle usage file
  cluster.py ready PORT TOKEN NODES [TIMEOUT_S]   waits until NODES nodes are Ready
                                                   (GET /api/v1/nodes); exit 1 on timeout
"""
import http.client
import json
import os
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


def agent_token(port, admin, node, path):
    status, raw = call(port, admin, "POST", "/api/v1/tokens",
                       {"name": "bench-agent-" + node, "role": "agent", "node": node})
    if status != 201:
        sys.exit("POST /api/v1/tokens: HTTP %d %s" % (status, raw[:300]))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(json.loads(raw)["token"] + "\n")


def inventories(folder, nodes, gpus):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "idle-usage.yaml"), "w") as f:
        f.write("cpu_load: 0.05\nmemory_used: 0.1\n")
    for n in range(nodes):
        lines = [
            "name: bench-a%d" % n,
            "labels: {pool: bench}",
            "cpu_milli: 96000",
            "memory_mib: 1048576",
            "topology: {zone: z1, switch: sw%d, rack: rack-%d}" % (n // 4, n // 2),
            "gpus:",
        ]
        for i in range(gpus):
            lines.append("- {index: %d, model: A100-80G, memory_mib: 81920, numa: %d, "
                         "pcie_switch: %d, nvlink_domain: 0}" % (i, i // 4, i // 2))
        lines += ["rdma:", "- {name: mlx5_0, numa: 0, pcie_switch: 0}",
                  "usage_file: idle-usage.yaml", ""]
        with open(os.path.join(folder, "agent-%d.yaml" % n), "w") as f:
            f.write("\n".join(lines))


def ready(port, tok, nodes, timeout):
    deadline = time.monotonic() + timeout
    n = 0
    while time.monotonic() < deadline:
        status, raw = call(port, tok, "GET", "/api/v1/nodes")
        if status == 200:
            n = sum(1 for x in json.loads(raw)["nodes"] if x.get("condition") == "Ready")
            if n >= nodes:
                return
        time.sleep(0.2)
    sys.exit("only %d of %d nodes Ready after %.0f s" % (n, nodes, timeout))


def main():
    a = sys.argv
    if len(a) == 6 and a[1] == "agent-token":
        agent_token(int(a[2]), a[3], a[4], a[5])
    elif len(a) == 5 and a[1] == "inventories":
        inventories(a[2], int(a[3]), int(a[4]))
    elif len(a) in (5, 6) and a[1] == "ready":
        ready(int(a[2]), a[3], int(a[4]), float(a[5]) if len(a) == 6 else 60)
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
