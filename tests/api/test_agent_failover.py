#!/usr/bin/python3
"""Node failure with real agents: two agents run declared nodes; the one
running a task is killed with SIGKILL. After the server's grace period its
node is NotReady; the task's supervisor, no longer seeing its lease renewed,
stops the old copy; only then is the task lost and run again on the other
node, so there is never more than one copy. A task with
requeue_on_node_loss false fails with its node instead and is not run
again. A usage file above gpu_load_threshold keeps new GPU tasks away, with
the reason.

usage: test_agent_failover.py HETEROFLOW_BINARY
"""
import glob
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import _LIVE, API, Checks, Server, expect, fail, main_guard, wait_until  # noqa: E402

MARKER = "sleep 300.4242"


def copies():
    """Pids of processes running the task's command."""
    out = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            with open(d + "/cmdline", "rb") as f:
                if f.read().replace(b"\0", b" ").strip() == MARKER.encode():
                    out.append(int(d[6:]))
        except OSError:
            pass
    return out


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"),
                 args=["--node-grace-period", "3", "--fence-after", "4", "--fence-grace", "1"])
    c = Checks("agent failover")
    procs = {}

    def start_agent(name, util=0.1):
        inv = os.path.join(tmp, name + ".yaml")
        with open(inv, "w") as f:
            f.write("name: %s\ncpu_milli: 8000\nmemory_mib: 16384\n"
                    "gpus: [{index: 0, model: T4, memory_mib: 15360}]\n"
                    "usage_file: %s-usage.yaml\n" % (name, name))
        set_util(name, util)
        log = open(os.path.join(tmp, name + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file(name, tmp),
                              "--inventory", inv, "--work-dir",
                              os.path.join(tmp, "work-" + name), "--grace-period-s", "2"],
                             stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        procs[name] = p

    def set_util(name, util):
        with open(os.path.join(tmp, name + "-usage.yaml"), "w") as f:
            f.write("cpu_load: 0.1\nmemory_used: 0.1\ngpus: [{index: 0, utilization: %s}]\n" % util)

    def node(name):
        return expect(srv.get(API + "/nodes/" + name), 200)

    def task(tid):
        return expect(srv.get(API + "/tasks/%d" % tid), 200)

    def failover():
        start_agent("fo-a")
        wait_until(lambda: node("fo-a")["condition"] == "Ready", 10, "fo-a registered")
        t = expect(srv.call("POST", API + "/tasks", {"name": "survivor", "requests": {"gpu": 1},
                                                     "command": MARKER.split()}), 201)
        wait_until(lambda: task(t["id"])["state"] == "running", 10, "running on fo-a")
        # "running" is reported once the supervisor has started; the task's
        # own command is exec'd a moment later (longer on a busy machine).
        wait_until(lambda: copies(), 10, "the task's process on fo-a")
        first = copies()
        if len(first) != 1 or task(t["id"])["node"] != "fo-a":
            fail("before the failure: copies %s on %s" % (first, task(t["id"])["node"]))
        start_agent("fo-b")
        wait_until(lambda: node("fo-b")["condition"] == "Ready", 10, "fo-b registered")
        procs["fo-a"].kill()
        procs["fo-a"].wait()
        wait_until(lambda: node("fo-a")["condition"] == "NotReady", 10, "fo-a NotReady")
        # Never two copies: the old one is stopped by its supervisor before
        # the task is queued again.
        seen = []

        def moved():
            seen.append(len(copies()))
            return task(t["id"])["node"] == "fo-b" and task(t["id"])["state"] == "running"
        wait_until(moved, 15, "the task running again on fo-b", interval=0.05)
        if max(seen) > 1:
            fail("two copies ran at once while the task moved: %s" % seen)
        if not any(e["kind"] == "lost" for e in task(t["id"])["events"]):
            fail("no lost event: %s" % task(t["id"])["events"])
        wait_until(lambda: copies(), 10, "the task's process on fo-b")
        now = copies()
        if len(now) != 1 or first[0] in now:
            fail("after the move: copies %s (the old one was %d)" % (now, first[0]))
        start_agent("fo-a")  # comes back: nothing of the task is left there
        wait_until(lambda: node("fo-a")["condition"] == "Ready", 10, "fo-a Ready again")
        if len(copies()) != 1 or task(t["id"])["node"] != "fo-b":
            fail("after the return: copies %s, task on %s" % (copies(), task(t["id"])["node"]))
        expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)
        wait_until(lambda: not copies(), 10, "no copy after cancel")

    def not_requeued():
        t = expect(srv.call("POST", API + "/tasks", {"name": "run-once", "requests": {"gpu": 1},
                                                     "requeue_on_node_loss": False,
                                                     "command": MARKER.split()}), 201)
        if t.get("requeue_on_node_loss") is not False and \
                task(t["id"]).get("requeue_on_node_loss") is not False:
            fail("requeue_on_node_loss not kept: %s" % task(t["id"]))
        wait_until(lambda: task(t["id"])["state"] == "running", 10, "run-once running")
        where = task(t["id"])["node"]
        other = "fo-b" if where == "fo-a" else "fo-a"
        procs[where].kill()
        procs[where].wait()
        wait_until(lambda: task(t["id"])["state"] == "failed", 10, "failed when its node was lost")
        got = task(t["id"])
        if "requeue_on_node_loss" not in got["pending_reason"] + str(got["events"]):
            fail("the failure does not say why: %s" % got)
        if not any(e["kind"] == "lost" for e in got["events"]):
            fail("no lost event: %s" % got["events"])
        if node(other)["condition"] != "Ready" or len(copies()) > 1:
            fail("run-once started again: copies %s" % copies())
        # Its supervisor stops the orphaned copy on its own.
        wait_until(lambda: not copies(), 15, "the orphaned copy stopped")
        start_agent(where)
        wait_until(lambda: node(where)["condition"] == "Ready", 10, where + " Ready again")
        if task(t["id"])["state"] != "failed":
            fail("run-once is %s after its agent returned" % task(t["id"])["state"])

    def hot_gpu():
        expect(srv.call("PUT", API + "/scheduler/config", {"gpu_load_threshold": 0.8}), 200)
        set_util("fo-a", 0.95)
        set_util("fo-b", 0.95)
        t = None
        # Heartbeats every few seconds carry the new usage; wait for a task to be refused for it.
        for _ in range(30):
            t = expect(srv.call("POST", API + "/tasks", {"name": "hot", "requests": {"gpu": 1},
                                                         "command": ["sleep", "30.4343"]}), 201)
            try:
                wait_until(lambda: "gpu_load_threshold" in task(t["id"])["pending_reason"], 2,
                           "refused for GPU load")
                break
            except Exception:
                expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)
        else:
            fail("GPU utilisation from the usage files never kept a task away")
        if task(t["id"])["state"] != "pending":
            fail("hot task state %s" % task(t["id"])["state"])
        set_util("fo-a", 0.1)
        wait_until(lambda: task(t["id"])["state"] == "running", 20, "placed once fo-a cooled down")
        expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)

    c.run("SIGKILLed agent: NotReady, task moves, one copy after its return", failover)
    c.run("requeue_on_node_loss false: the task fails with its node, and stays failed",
          not_requeued)
    c.run("usage file above gpu_load_threshold", hot_gpu)
    for p in procs.values():
        p.terminate()
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
