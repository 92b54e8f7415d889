#!/usr/bin/python3
"""Preemption meets real processes: a preemptor never starts on a node while
a process it displaces still holds what it was given (docs/AGENT.md,
"Preemption: start after the victim exits").

A real agent (6 s grace period) runs a declared 2-GPU node. Victims trap
SIGTERM and take a while to exit, writing the time they exit; preemptors
write the time they start. Checked:
  - GPU: the preemptor waits, says so ("waiting for task N to exit (it holds
    GPU i)" as its pending_reason and a "waiting" event), and starts after
    the victim exited, within 100 ms of it; meanwhile a task that needs
    nothing the victim holds starts at once;
  - CPU: a preemptor that needs CPU only the victim's exit frees waits too;
  - a victim that ignores SIGTERM is killed after the grace period, and the
    preemptor starts then;
  - an agent restarted while a victim still runs adopts it with what it
    holds, and the preemptor waits for it just the same.

usage: test_agent_preemption.py HETEROFLOW_BINARY
"""
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, API, Checks, Server, expect, fail, main_guard, task_processes,  # noqa: E402
                   wait_until)

NODE = "gate-n1"
GRACE_S = 6
INVENTORY = """\
name: %s
cpu_milli: 8000
memory_mib: 16384
gpus:
  - {index: 0, model: A100-80G, memory_mib: 81920}
  - {index: 1, model: A100-80G, memory_mib: 81920}
""" % NODE


def stamp_cmd(word, rest="while true; do sleep 5 & wait $!; done"):
    """A command that writes '<word> at <epoch seconds>' first."""
    return ["sh", "-c", "echo %s at $(date +%%s.%%N); %s" % (word, rest)]


def victim_cmd(linger_s):
    """Traps SIGTERM, lingers (a checkpoint), writes its exit time, exits.
    The overlap checks linger 3 s: long enough, on a loaded machine, for the
    preemptor to reach the agent while its victim is still exiting."""
    return ["sh", "-c",
            "trap 'sleep %s; echo exited at $(date +%%s.%%N); exit 0' TERM; echo victim up; "
            "while true; do sleep 5 & wait $!; done" % linger_s]


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("agent preemption")
    expect(srv.call("PUT", API + "/plugins/preempt",
                    {"mode": "running", "config": {"min_runtime_seconds": 0}}), 200)
    token_file = srv.agent_token_file(NODE, tmp)
    inv = os.path.join(tmp, "inventory.yaml")
    with open(inv, "w") as f:
        f.write(INVENTORY)
    work = os.path.join(tmp, "work")
    agent = {}

    def start_agent():
        log = open(os.path.join(tmp, "agent.log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", token_file, "--inventory", inv, "--work-dir", work,
                              "--grace-period-s", str(GRACE_S)], stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        agent["proc"] = p
        wait_until(lambda: any(n["name"] == NODE and n["condition"] == "Ready"
                               for n in expect(srv.get(API + "/nodes"), 200)["nodes"]), 15,
                   "the agent registered")

    def get(i):
        return expect(srv.get(API + "/tasks/%d" % i), 200)

    def submit(name, priority, command, gpu=0, cpu=1000, preemptible=True):
        return expect(srv.call("POST", API + "/tasks", {
            "name": name, "priority": priority, "preemptible": preemptible, "command": command,
            "requests": {"gpu": gpu, "cpu_milli": cpu, "memory_mib": 1024}}), 201)["id"]

    def running(i):
        return wait_until(lambda: get(i)["state"] == "running" and get(i), 15, "task %d running" % i)

    def stamp(i, word):
        try:
            with open(os.path.join(work, "tasks", str(i), "output.log")) as f:
                m = re.search(word + r" at (\d+\.\d+)", f.read())
        except OSError:
            return None
        return float(m.group(1)) if m else None

    def cancel_all():
        for t in srv.tasks():
            if t["state"] in ("pending", "scheduled", "running"):
                expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)
        wait_until(lambda: not task_processes(work), GRACE_S + 10, "every task process stopped")

    def waits_then_starts(victim, preemptor, holds):
        t = wait_until(lambda: "waiting for task %d to exit" % victim in get(preemptor)["pending_reason"]
                       and get(preemptor), 5, "the preemptor to say it waits for task %d" % victim)
        if t["state"] != "scheduled" or holds not in t["pending_reason"]:
            fail("while waiting: %s %r" % (t["state"], t["pending_reason"]))
        running(preemptor)
        exited = wait_until(lambda: stamp(victim, "exited"), 10, "the victim's exit time")
        started = wait_until(lambda: stamp(preemptor, "started"), 10, "the preemptor's start time")
        if started < exited:
            fail("the preemptor started %.3f s before its victim exited" % (exited - started))
        if started - exited > 0.1:
            fail("the preemptor started %.3f s after its victim exited (want within 0.1 s)"
                 % (started - exited))
        t = get(preemptor)
        events = [e["kind"] for e in t["events"]]
        if t["pending_reason"] or "waiting" not in events:
            fail("after the start: reason %r, events %s" % (t["pending_reason"], events))
        return started - exited

    start_agent()

    def gpu_overlap():
        filler = submit("filler", 1, ["sh", "-c", "echo filler up; sleep 600"], gpu=1,
                        preemptible=False)
        victim = submit("victim", 1, victim_cmd(3), gpu=1)
        running(filler)
        v = running(victim)
        preemptor = submit("preemptor", 100, stamp_cmd("started"), gpu=1)
        wait_until(lambda: get(victim)["state"] == "pending", 5, "the victim evicted")
        # A task needing nothing the victim holds starts at once.
        bystander = submit("bystander", 0, stamp_cmd("started"), cpu=500)
        running(bystander)
        if stamp(victim, "exited") is not None:
            fail("the bystander waited for the victim")
        gpu = v["allocation"]["gpus"][0]["index"]
        gap = waits_then_starts(victim, preemptor, "it holds GPU %d" % gpu)
        if get(preemptor)["allocation"]["gpus"][0]["index"] != gpu:
            fail("the preemptor did not get the victim's GPU")
        print("     GPU: started %.1f ms after the victim exited" % (gap * 1000), flush=True)
        cancel_all()

    def cpu_overlap():
        keep = submit("cpu-keep", 1, ["sh", "-c", "echo filler up; sleep 600"], cpu=1000,
                      preemptible=False)
        victim = submit("cpu-victim", 1, victim_cmd(3), cpu=6000)
        running(keep)
        running(victim)
        preemptor = submit("cpu-preemptor", 100, stamp_cmd("started"), cpu=4000)
        gap = waits_then_starts(victim, preemptor, "it holds CPU")
        print("     CPU: started %.1f ms after the victim exited" % (gap * 1000), flush=True)
        cancel_all()

    def killed_after_grace():
        victim = submit("stubborn", 1, ["sh", "-c", "trap '' TERM; echo victim up; "
                                        "while true; do sleep 1; done"], gpu=2, cpu=1000)
        running(victim)
        t0 = time.monotonic()
        preemptor = submit("after-kill", 100, stamp_cmd("started"), gpu=2)
        wait_until(lambda: "waiting for task %d" % victim in get(preemptor)["pending_reason"], 5,
                   "the preemptor to wait")
        running(preemptor)
        took = time.monotonic() - t0
        if took < GRACE_S - 0.5:
            fail("the preemptor ran %.1f s after preempting, before the %d s grace ran out"
                 % (took, GRACE_S))
        cancel_all()

    def adopted_victim():
        victim = submit("adopted", 1, victim_cmd(2), gpu=2)
        running(victim)
        agent["proc"].kill()
        agent["proc"].wait()
        preemptor = submit("after-restart", 100, stamp_cmd("started"), gpu=1)
        wait_until(lambda: get(victim)["state"] == "pending", 5, "the victim evicted")
        start_agent()
        waits_then_starts(victim, preemptor, "it holds GPU")
        cancel_all()

    c.run("a preemptor waits for its victim's GPU, and only it waits", gpu_overlap)
    c.run("a preemptor waits for CPU only its victim's exit frees", cpu_overlap)
    c.run("a victim that ignores SIGTERM is killed after the grace period", killed_after_grace)
    c.run("a victim adopted by a restarted agent still holds its GPUs", adopted_victim)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
