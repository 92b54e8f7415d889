#!/usr/bin/python3
"""A connection flood changes no task's state (docs/SECURITY.md, "Abuse
limits"). A server with its default connection limits (4,096 in all, 1,024
from one address), a 3 s node grace period (heartbeats every second) and two
real agents, each running a task. An attacker with no token holds 4,200 idle
sockets, 1,000 from the agents' own address and 800 from each of four others,
and opens a new one whenever the server closes one, for four grace periods.
Checked:

  - the server is full (over 4,000 connections open) and closes the
    attacker's quiet sockets to make room, counted in /metrics;
  - /livez and /readyz answer 200 throughout, from any address;
  - both nodes stay Ready, heartbeats keep arriving;
  - the tasks keep their state, node, process and events.

usage: test_flood.py HETEROFLOW_BINARY
"""
import os
import re
import resource
import select
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, API, Checks, Server, expect, fail, main_guard,  # noqa: E402
                   task_processes, wait_until)

ARGS = ["--node-grace-period", "3", "--fence-after", "6", "--fence-grace", "1"]
SOURCES = [("127.0.0.1", 1000)] + [("127.0.0.%d" % i, 800) for i in range(2, 6)]
FLOOD_S = 12


class Flood:
    """Idle sockets from several loopback addresses, each reopened when the
    server closes it (at most `rate` reopenings a second)."""

    def __init__(self, port, sources, rate=2000):
        self.port, self.rate = port, rate
        self.poll = select.epoll()
        self.socks = {}  # fd -> (socket, source)
        self.reopened = 0
        self.failed = 0
        self.done = False
        for src, n in sources:
            for _ in range(n):
                self.open(src)
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def open(self, src):
        s = socket.socket()
        try:
            s.bind((src, 0))
            s.connect(("127.0.0.1", self.port))
        except OSError:
            s.close()
            self.failed += 1
            return
        self.socks[s.fileno()] = (s, src)
        self.poll.register(s.fileno(), select.EPOLLIN | select.EPOLLRDHUP)

    def loop(self):
        while not self.done:
            t0 = time.monotonic()
            for fd, _ in self.poll.poll(0.1, self.rate // 10):
                s, src = self.socks.pop(fd)
                self.poll.unregister(fd)
                s.close()  # closed by the server (or answered 503, then closed)
                self.open(src)
                self.reopened += 1
            time.sleep(max(0.0, 0.1 - (time.monotonic() - t0)))

    def stop(self):
        self.done = True
        self.thread.join()
        for s, _ in self.socks.values():
            s.close()
        self.poll.close()


def metric(srv, name, labels=""):
    r = srv.call("GET", "/metrics")
    expect(r, 200, "metrics")
    text = r.raw.decode()
    m = re.search(r"^%s%s (\S+)$" % (re.escape(name), re.escape(labels)), text, re.M)
    return float(m.group(1)) if m else None


def main(binary, tmp):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 6000:
        fail("the test needs 6,000 open files; the hard limit is %d" % hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    srv = Server(binary, os.path.join(tmp, "data"), args=ARGS)
    c = Checks("flood")
    state = {}

    def start_agent(name):
        inv = os.path.join(tmp, name + ".yaml")
        with open(inv, "w") as f:
            f.write("name: %s\ncpu_milli: 8000\nmemory_mib: 16384\n"
                    "gpus: [{index: 0, model: T4, memory_mib: 15360}]\n" % name)
        log = open(os.path.join(tmp, name + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file(name, tmp), "--inventory", inv,
                              "--work-dir", os.path.join(tmp, "work-" + name)],
                             stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())

    def snapshot():
        tasks = {}
        for tid in state["ids"]:
            t = expect(srv.get(API + "/tasks/%d" % tid), 200)
            tasks[tid] = (t["state"], t["node"], [(e["kind"], e["message"]) for e in t["events"]])
        return tasks

    def setup():
        for name in ("fl-a", "fl-b"):
            start_agent(name)
        wait_until(lambda: sum(n["condition"] == "Ready" for n in
                               expect(srv.get(API + "/nodes"), 200)["nodes"]) == 2, 15,
                   "two nodes Ready")
        ids = []
        for i in range(2):
            t = expect(srv.call("POST", API + "/tasks", {
                "name": "steady-%d" % i, "requests": {"gpu": 1},
                "command": ["sleep", "600"]}), 201)
            ids.append(t["id"])
        state["ids"] = ids
        wait_until(lambda: all(expect(srv.get(API + "/tasks/%d" % i), 200)["state"] == "running"
                               for i in ids), 15, "both tasks running")
        nodes = {expect(srv.get(API + "/tasks/%d" % i), 200)["node"] for i in ids}
        if nodes != {"fl-a", "fl-b"}:
            fail("the tasks went to %s, not one on each node" % sorted(nodes))
        state["before"] = snapshot()
        state["pids"] = sorted(task_processes(tmp))
        if not state["pids"]:
            fail("no task process found under " + tmp)

    def flood():
        flood = Flood(srv.port, SOURCES)
        peak = 0
        health_failures = []
        not_ready = []
        t0 = time.monotonic()
        try:
            while time.monotonic() - t0 < FLOOD_S:
                for path in ("/livez", "/readyz"):
                    r = srv.call("GET", path, token=None, timeout=5)
                    if r.status != 200:
                        health_failures.append("%s %s" % (path, r.short()))
                nodes = srv.get(API + "/nodes", timeout=5)
                if nodes.status != 200:
                    health_failures.append("nodes " + nodes.short())
                else:
                    not_ready += ["%s at %.1f s" % (n["name"], time.monotonic() - t0)
                                  for n in nodes.body["nodes"] if n["condition"] != "Ready"]
                peak = max(peak, metric(srv, "heteroflow_http_connections_open") or 0)
                time.sleep(0.5)
        finally:
            evicted = metric(srv, "heteroflow_http_connections_closed_total", '{reason="evicted"}')
            flood.stop()
        print("     %d attacker sockets held, %d reopened, %d connects failed; peak %d "
              "connections open, %d evicted" % (len(flood.socks), flood.reopened, flood.failed,
                                                peak, evicted or 0), flush=True)
        if health_failures:
            fail("during the flood: " + "; ".join(health_failures[:5]))
        if not_ready:
            fail("nodes went NotReady during the flood: " + ", ".join(not_ready[:5]))
        if peak < 4000:
            fail("the flood never filled the server (peak %d connections)" % peak)
        if not evicted:
            fail("no quiet connection was closed to make room")

    def unchanged():
        after = snapshot()
        if after != state["before"]:
            fail("tasks changed: before %s, after %s" % (state["before"], after))
        pids = sorted(task_processes(tmp))
        if pids != state["pids"]:
            fail("task processes changed: before %s, after %s" % (state["pids"], pids))

    c.run("two agents, a task running on each", setup)
    c.run("4,200 idle sockets for %d s: health, nodes and heartbeats unharmed" % FLOOD_S, flood)
    c.run("no task changed state, node, process or events", unchanged)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
