#!/usr/bin/python3
"""Fencing: a task never runs in two places at once (docs/AGENT.md,
"Fencing"). A server with a 3 s node grace period, tasks fenced after 4 s
without a lease renewal and killed 1 s after SIGTERM (so a silent node's
tasks are queued again after 4 + 1 + 2 s); two real agents. The task writes
when it starts and, on SIGTERM, when it exits. Checked:

  - an agent frozen with SIGSTOP: its copy exits before the new copy on the
    other node starts (no overlap);
  - an agent cut off from the server (its connection goes through a TCP
    proxy that the test stops): the same;
  - an agent killed and restarted within the fence: the task lives on, one
    copy, the same process, and is not queued again;
  - three of four agents frozen at once (a "storm"): the server holds their
    tasks' requeues (metric, event) while the supervisors still stop the
    copies; once the agents are back, each reports its task fenced and the
    task runs again, one copy each.

usage: test_fencing.py HETEROFLOW_BINARY
"""
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, API, Checks, Server, expect, fail, main_guard,  # noqa: E402
                   next_event, open_stream, wait_until)

FENCE = ["--node-grace-period", "3", "--fence-after", "4", "--fence-grace", "1"]
# Writes its start, and its exit on SIGTERM; a marker in argv finds it.
COMMAND = ["sh", "-c", "echo started at $(date +%s.%N); "
           "trap 'echo exited at $(date +%s.%N); exit 0' TERM; "
           "while true; do sleep 0.2; done", "fence-marker"]


class Proxy:
    """A TCP forwarder to the server that can be cut: stop() closes the
    listener and every connection, as a network partition would."""

    def __init__(self, port):
        self.target = port
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.conns = []
        self.cut = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.cut:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                s = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                c.close()
                continue
            self.conns += [c, s]
            for a, b in ((c, s), (s, c)):
                threading.Thread(target=self.pump, args=(a, b), daemon=True).start()

    def pump(self, a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for x in (a, b):
            try:
                x.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def stop(self):
        self.cut = True
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


def copies():
    """Pids of the task's shell (argv holds the marker), not counting its
    subshells (the shell forks one for each $(date), with the same argv)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if args[:1] == [b"sh"] and b"fence-marker" in args:
            try:
                with open("/proc/%s/stat" % d) as f:
                    out[int(d)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    return sorted(pid for pid, parent in out.items() if parent not in out)


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"), args=FENCE)
    c = Checks("fencing")
    agents = {}

    def start_agent(name, server_port=None):
        inv = os.path.join(tmp, name + ".yaml")
        with open(inv, "w") as f:
            f.write("name: %s\ncpu_milli: 8000\nmemory_mib: 16384\n"
                    "gpus: [{index: 0, model: T4, memory_mib: 15360}]\n" % name)
        log = open(os.path.join(tmp, name + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server",
                              "http://127.0.0.1:%d" % (server_port or srv.port),
                              "--token-file", srv.agent_token_file(name, tmp), "--inventory", inv,
                              "--work-dir", os.path.join(tmp, "work-" + name),
                              "--grace-period-s", "1"], stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        agents[name] = p
        wait_until(lambda: node(name)["condition"] == "Ready", 10, name + " Ready")

    def stop_agent(name):
        p = agents.pop(name)
        if p.poll() is None:
            p.send_signal(signal.SIGCONT)
            p.kill()
            p.wait()
        # Gone for good: it no longer counts among the nodes (a storm is a
        # share of them silent at once).
        wait_until(lambda: srv.call("DELETE", API + "/nodes/" + name).status in (200, 204), 10,
                   "node %s deleted" % name)

    def node(name):
        r = srv.get(API + "/nodes/" + name)
        return r.body if r.status == 200 else {"condition": None}

    def task(tid):
        return expect(srv.get(API + "/tasks/%d" % tid), 200)

    def stamp(name, tid, what):
        try:
            with open(os.path.join(tmp, "work-" + name, "tasks", str(tid), "output.log")) as f:
                m = re.search(what + r" at (\d+\.\d+)", f.read())
        except OSError:
            return None
        return float(m.group(1)) if m else None

    def submit_on(name):
        t = expect(srv.call("POST", API + "/tasks", {
            "name": "fenced-job", "requests": {"gpu": 1}, "command": COMMAND}), 201)
        wait_until(lambda: task(t["id"])["state"] == "running", 10, "the task running")
        if task(t["id"])["node"] != name:
            fail("the task went to %s, not %s" % (task(t["id"])["node"], name))
        return t["id"]

    def moves_without_overlap(tid, old, new, lose):
        seen = []
        lose()

        def moved():
            seen.append(len(copies()))
            return task(tid)["node"] == new and task(tid)["state"] == "running"
        t0 = time.monotonic()
        wait_until(moved, 20, "the task running on %s" % new, interval=0.05)
        took = time.monotonic() - t0
        exited = wait_until(lambda: stamp(old, tid, "exited"), 5, "the old copy's exit time")
        started = wait_until(lambda: stamp(new, tid, "started"), 5, "the new copy's start time")
        if started < exited or max(seen) > 1:
            fail("the new copy started at %.3f, the old one exited at %.3f (copies seen: %s)"
                 % (started, exited, sorted(set(seen))))
        print("     moved after %.1f s; the new copy started %.2f s after the old one exited"
              % (took, started - exited), flush=True)
        expect(srv.call("POST", API + "/tasks/%d/cancel" % tid), 200)
        wait_until(lambda: not copies(), 10, "no copy left")

    def frozen_agent():
        start_agent("fz-a")
        tid = submit_on("fz-a")
        start_agent("fz-b")
        moves_without_overlap(tid, "fz-a", "fz-b",
                              lambda: agents["fz-a"].send_signal(signal.SIGSTOP))
        stop_agent("fz-a")
        stop_agent("fz-b")

    def cut_agent():
        proxy = Proxy(srv.port)
        start_agent("cut-a", proxy.port)
        tid = submit_on("cut-a")
        start_agent("cut-b")
        moves_without_overlap(tid, "cut-a", "cut-b", proxy.stop)
        stop_agent("cut-a")
        stop_agent("cut-b")

    def restart_within_fence():
        start_agent("rs-a")
        tid = submit_on("rs-a")
        before = copies()
        agents["rs-a"].kill()
        agents["rs-a"].wait()
        time.sleep(1)
        start_agent("rs-a")
        time.sleep(6)  # past the fence had the lease not been renewed
        if copies() != before or task(tid)["state"] != "running" or task(tid)["node"] != "rs-a":
            fail("after the restart: copies %s (before %s), task %s on %s"
                 % (copies(), before, task(tid)["state"], task(tid)["node"]))
        if any(e["kind"] == "lost" for e in task(tid)["events"]):
            fail("the task was queued again: %s" % task(tid)["events"])
        expect(srv.call("POST", API + "/tasks/%d/cancel" % tid), 200)
        wait_until(lambda: not copies(), 10, "no copy left")
        stop_agent("rs-a")

    def held():
        r = srv.call("GET", "/metrics")
        m = re.search(r"^heteroflow_node_requeue_held (\S+)$", r.raw.decode(), re.M)
        return float(m.group(1)) if m else None

    def storm():
        names = ["st-a", "st-b", "st-c", "st-d"]
        for name in names:
            start_agent(name)
        ids = [expect(srv.call("POST", API + "/tasks", {
            "name": "storm-%d" % i, "requests": {"gpu": 1}, "command": COMMAND}), 201)["id"]
            for i in range(4)]
        wait_until(lambda: all(task(t)["state"] == "running" for t in ids), 15, "4 tasks running")
        on = {task(t)["node"]: t for t in ids}
        if sorted(on) != names:
            fail("the tasks are on %s, not one per node" % sorted(on))
        wait_until(lambda: len(copies()) == 4, 10, "4 copies")
        events = queue.Queue()
        stream = open_stream(srv, srv.token, events)
        frozen = names[1:]
        for name in frozen:
            agents[name].send_signal(signal.SIGSTOP)
        t0 = time.monotonic()
        ev = next_event(events, "node", timeout=10)
        while ev.get("action") == "condition":
            ev = next_event(events, "node", timeout=10)
        if ev.get("action") != "requeue_held" or ev.get("silent") != 3 or ev.get("nodes") != 4:
            fail("expected a requeue_held event for 3 of 4 nodes, got %s" % ev)
        if held() != 1:
            fail("heteroflow_node_requeue_held is %s while held" % held())
        # Past the point where a lone lost node's tasks are queued again
        # (4 + 1 + 2 s after its last heartbeat).
        time.sleep(max(0.0, 10 - (time.monotonic() - t0)))
        for name in frozen:
            t = task(on[name])
            if t["state"] != "running" or t["node"] != name or any(
                    e["kind"] == "lost" for e in t["events"]):
                fail("task %d moved during the storm: %s on %s, events %s"
                     % (on[name], t["state"], t["node"], t["events"]))
            if node(name)["condition"] != "NotReady":
                fail("%s is %s during the storm" % (name, node(name)["condition"]))
        if len(copies()) != 1:
            fail("the frozen nodes' supervisors did not stop their copies: %d copies"
                 % len(copies()))
        for name in frozen:
            agents[name].send_signal(signal.SIGCONT)
        wait_until(lambda: held() == 0, 10, "requeues resumed")
        resumed = next_event(events, "node", timeout=10)
        while resumed.get("action") == "condition":
            resumed = next_event(events, "node", timeout=10)
        if resumed.get("action") != "requeue_resumed":
            fail("expected a requeue_resumed event, got %s" % resumed)
        stream.close()
        seen = {}

        def rerun():
            seen["tasks"] = {n: (task(on[n])["state"], task(on[n])["node"]) for n in frozen}
            seen["copies"] = len(copies())
            return all(s == "running" for s, _ in seen["tasks"].values()) and seen["copies"] == 4
        try:
            wait_until(rerun, 20, "the fenced tasks running again, one copy each")
        except Exception:
            print("     last seen: %s; events: %s" % (seen, {n: task(on[n])["events"][-4:]
                                                           for n in frozen}), flush=True)
            for n in frozen:
                with open(os.path.join(tmp, n + ".log"), errors="replace") as f:
                    print("     %s log tail: %s" % (n, f.read()[-1500:]), flush=True)
            raise
        for name in frozen:
            lost = [e for e in task(on[name])["events"] if e["kind"] == "lost"]
            if len(lost) != 1 or "fenced" not in lost[0]["message"]:
                fail("task %d: expected one 'lost' event saying it was fenced, got %s"
                     % (on[name], task(on[name])["events"]))
        if "requeues held: 3 of 4 nodes silent" not in srv.stderr_text():
            fail("the server's log does not say requeues were held")
        for t in ids:
            expect(srv.call("POST", API + "/tasks/%d/cancel" % t), 200)
        wait_until(lambda: not copies(), 10, "no copy left")
        for name in names:
            stop_agent(name)

    c.run("an agent frozen with SIGSTOP: the old copy exits before the new one starts",
          frozen_agent)
    c.run("an agent cut off from the server: the old copy exits before the new one starts",
          cut_agent)
    c.run("an agent restarted within the fence: one copy, the same process", restart_within_fence)
    c.run("three of four agents frozen at once: requeues held, copies fenced, then rerun",
          storm)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
