#!/usr/bin/python3
"""A real node agent against the real server (docs/AGENT.md): the agent
registers a declared inventory (2 GPUs, one RDMA device), runs the tasks the
scheduler places on its node as real processes with CUDA_VISIBLE_DEVICES and
NCCL_IB_HCA matching the allocation, reports exit codes, and kills the
process of a cancelled task, ships each task's output to the server, and
adopts the tasks an earlier (killed) agent left running instead of starting
them twice. SIGTERM stops the agent with exit 0.

usage: test_agent.py HETEROFLOW_BINARY
"""
import os
import signal
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import API, Checks, Server, _LIVE, expect, fail, main_guard, wait_until  # noqa: E402

NODE = "agent-n1"
FINAL = ("succeeded", "failed", "cancelled")

INVENTORY = """\
name: %s
labels: {pool: agent-e2e}
cpu_milli: 8000
memory_mib: 16384
gpus:
  - {index: 0, uuid: GPU-e2e-0, model: A100-80G, memory_mib: 81920, numa: 0, pcie_switch: 0, fabric_domain: 0}
  - {index: 1, uuid: GPU-e2e-1, model: A100-80G, memory_mib: 81920, numa: 0, pcie_switch: 0, fabric_domain: 0}
rdma:
  - {name: mlx5_7, numa: 0, pcie_switch: 0}
topology: {zone: z1, switch: s1, rack: r1}
usage_file: usage.yaml
""" % NODE


class Agent:
    """`heteroflow agent` as a child process; killed at exit like the server."""

    def __init__(self, binary, srv, token_file, tmp, tag=""):
        self.inventory = os.path.join(tmp, "inventory.yaml")
        with open(self.inventory, "w") as f:
            f.write(INVENTORY)
        with open(os.path.join(tmp, "usage.yaml"), "w") as f:
            f.write("cpu_load: 0.1\nmemory_used: 0.2\ngpus: [{index: 0, utilization: 0.5}]\n")
        self.work = os.path.join(tmp, "agent-work")
        self.stderr_path = os.path.join(tmp, "agent%s.stderr" % tag)
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(
            [binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port, "--token-file", token_file,
             "--inventory", self.inventory, "--work-dir", self.work, "--grace-period-s", "2"],
            stdout=self._stderr, stderr=self._stderr)
        self.kill = self.proc.kill
        _LIVE.append(self)  # the harness kills it at exit

    def text(self):
        with open(self.stderr_path, "rb") as f:
            return f.read()[-3000:].decode("utf-8", "replace")

    def task_dir(self, task_id):
        return os.path.join(self.work, "tasks", str(task_id))


def pid_alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def marker_pids(marker):
    """Pids of the processes whose cmdline is exactly `marker` (argv words)."""
    want = marker.encode().split(b" ")
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % name, "rb") as f:
                argv = f.read().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if argv == want and pid_alive(int(name)):
            pids.append(int(name))
    return pids


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    token = srv.agent_token_file(NODE, tmp)
    agent = Agent(binary, srv, token, tmp)
    c = Checks("node agent")

    def get_task(tid):
        return expect(srv.get(API + "/tasks/%d" % tid), 200)

    def submit(name, command, requests, rdma=False, preemptible=True):
        body = {"name": name, "requests": requests, "rdma_required": rdma, "command": command,
                "preemptible": preemptible}
        return expect(srv.call("POST", API + "/tasks", body), 201)

    def task_pids(tid):
        """The pids a task's command appended to the file `pids` in its work dir."""
        try:
            with open(os.path.join(agent.task_dir(tid), "pids")) as f:
                return [int(x) for x in f.read().split()]
        except (OSError, ValueError):
            return []

    def final_state(tid, timeout=30):
        return wait_until(lambda: get_task(tid) if get_task(tid)["state"] in FINAL else None,
                          timeout, "task %d to end" % tid)

    def registers():
        def ready():
            r = srv.get(API + "/nodes/" + NODE)
            if r.status != 200:
                if agent.proc.poll() is not None:
                    fail("the agent exited %s: %s" % (agent.proc.returncode, agent.text()))
                return None
            return r.body if r.body.get("condition") == "Ready" else None
        node = wait_until(ready, 20, "the agent to register node %s" % NODE)
        if [g["index"] for g in node["gpus"]] != [0, 1]:
            fail("registered GPUs: %r" % node["gpus"])
        if [d["name"] for d in node["rdma"]] != ["mlx5_7"]:
            fail("registered RDMA devices: %r" % node["rdma"])

    def env_matches_allocation():
        # It lives half a second: a task placed, started and ended within a
        # few milliseconds would leave the loop below no time to see it.
        cmd = ["sh", "-c", "echo CVD=$CUDA_VISIBLE_DEVICES HCA=$NCCL_IB_HCA; sleep 0.5; exit 0"]
        t = submit("env-check", cmd, {"cpu_milli": 1000, "memory_mib": 1024, "gpu": 1}, rdma=True)
        tid = t["id"]
        # The allocation may be released once the task ends: catch it early.
        alloc = t.get("allocation")
        deadline = time.monotonic() + 30
        while not alloc and time.monotonic() < deadline:
            got = get_task(tid)
            alloc = got.get("allocation")
            if got["state"] in FINAL:
                break
            time.sleep(0.01)
        end = final_state(tid)
        alloc = alloc or end.get("allocation")
        if end["state"] != "succeeded":
            fail("task ended %s, want succeeded: %r\nagent: %s" % (end["state"], end, agent.text()))
        if not alloc or not alloc.get("gpus"):
            fail("never saw the task's allocation: %r" % end)
        want = "CVD=%s HCA=%s" % (",".join(str(g["index"]) for g in alloc["gpus"]),
                                  alloc.get("rdma_device") or "")
        if alloc.get("rdma_device") != "mlx5_7":
            fail("rdma_required task got rdma_device %r" % alloc.get("rdma_device"))
        log = os.path.join(agent.task_dir(tid), "output.log")
        with open(log) as f:
            text = f.read()
        if text.strip() != want:
            fail("%s says %r, want %r (allocation %r)" % (log, text, want, alloc))
        # The output was shipped before the task was reported done.
        r = srv.get(API + "/tasks/%d/logs" % tid)
        if r.status != 200:
            fail("GET /tasks/%d/logs: %s" % (tid, r.short()))
        served = r.raw.decode("utf-8", "replace")
        if served != text:
            fail("GET /tasks/%d/logs says %r, the local output.log %r" % (tid, served, text))

    def exit_code_reported():
        t = submit("exit-7", ["sh", "-c", "printf 'bad \\377 byte\\n'; exit 7"],
                   {"cpu_milli": 500})
        end = final_state(t["id"])
        # Invalid UTF-8 in the output reaches the server as U+FFFD.
        r = srv.get(API + "/tasks/%d/logs" % t["id"])
        if r.status != 200 or r.raw != "bad \ufffd byte\n".encode():
            fail("GET /tasks/%d/logs: %s" % (t["id"], r.short()))
        if end["state"] != "failed":
            fail("task ended %s, want failed: %r" % (end["state"], end))
        messages = " | ".join("%s: %s" % (e.get("kind"), e.get("message"))
                              for e in end.get("events", []))
        if "7" not in messages or "exit" not in messages.lower():
            fail("the events do not mention exit code 7: %s" % messages)
        if messages.count("exit code 7") != 1:
            fail("the exit code is not said exactly once: %s" % messages)

    def no_command_fails():
        t = expect(srv.call("POST", API + "/tasks", {"name": "no-command",
                                                      "requests": {"cpu_milli": 100}}), 201)
        end = final_state(t["id"])
        if end["state"] != "failed":
            fail("a task without a command ended %s, want failed: %r" % (end["state"], end))
        if not any("task has no command" in (e.get("message") or "") for e in end.get("events", [])):
            fail("the events do not say 'task has no command': %r" % end.get("events"))

    def cancel_kills_process():
        t = submit("sleeper", ["sh", "-c", "echo $$ > self.pid; exec sleep 60"], {"cpu_milli": 500})
        tid = t["id"]
        wait_until(lambda: get_task(tid)["state"] == "running", 20, "task %d to run" % tid)
        pid_file = os.path.join(agent.task_dir(tid), "self.pid")

        def read_pid():
            try:
                with open(pid_file) as f:
                    return int(f.read().strip() or 0)
            except (OSError, ValueError):
                return 0
        pid = wait_until(read_pid, 10, "the task to write its pid")
        if not pid_alive(pid):
            fail("the task's process %d is not running" % pid)
        expect(srv.call("POST", API + "/tasks/%d/cancel" % tid), 200)
        wait_until(lambda: not pid_alive(pid), 10, "process %d to be killed" % pid)
        time.sleep(0.5)  # a report from the agent would land now: there must be none
        got = get_task(tid)
        if got["state"] != "cancelled":
            fail("cancelled task is now %s: %r" % (got["state"], got))

    def restart_adopts_running_task():
        nonlocal agent
        marker = "sleep 30.123"
        t = submit("adoptee", marker.split(), {"cpu_milli": 500})
        tid = t["id"]
        wait_until(lambda: get_task(tid)["state"] == "running", 20, "task %d to run" % tid)
        pids = wait_until(lambda: marker_pids(marker), 10, "the process %r" % marker)
        if len(pids) != 1:
            fail("%d processes %r before the restart: %r" % (len(pids), marker, pids))
        agent.proc.kill()  # SIGKILL: nothing is cleaned up, the task stays
        agent.proc.wait(timeout=10)
        if marker_pids(marker) != pids:
            fail("killing the agent changed the task's processes: %r" % marker_pids(marker))
        agent = Agent(binary, srv, token, tmp, tag="2")
        wait_until(lambda: "adopted" in agent.text(), 20, "the new agent to adopt task %d" % tid)
        time.sleep(3)  # a few polls and log shipments: nothing may launch it again
        if marker_pids(marker) != pids:
            fail("after the restart the processes %r are %r, want %r\nagent: %s"
                 % (marker, marker_pids(marker), pids, agent.text()))
        got = get_task(tid)
        if got["state"] != "running":
            fail("the adopted task is %s, want running: %r" % (got["state"], got))
        expect(srv.call("POST", API + "/tasks/%d/cancel" % tid), 200)
        wait_until(lambda: not pid_alive(pids[0]), 10, "adopted process %d to be killed" % pids[0])
        got = get_task(tid)
        if got["state"] != "cancelled":
            fail("the cancelled adopted task is now %s: %r" % (got["state"], got))

    def adopted_task_keeps_its_time_limit():
        # The limit counts from the process's start, across an agent restart.
        nonlocal agent
        marker = "sleep 60.321"
        body = {"name": "limited", "requests": {"cpu_milli": 500}, "command": marker.split(),
                "time_limit_s": 4}
        tid = expect(srv.call("POST", API + "/tasks", body), 201)["id"]
        wait_until(lambda: get_task(tid)["state"] == "running", 20, "task %d to run" % tid)
        pids = wait_until(lambda: marker_pids(marker), 10, "the process %r" % marker)
        started = time.monotonic()
        agent.proc.kill()
        agent.proc.wait(timeout=10)
        agent = Agent(binary, srv, token, tmp, tag="3")
        wait_until(lambda: "adopted" in agent.text(), 20, "the new agent to adopt task %d" % tid)
        try:
            got = final_state(tid, timeout=15)
        finally:
            if get_task(tid)["state"] not in FINAL:
                expect(srv.call("POST", API + "/tasks/%d/cancel" % tid), 200)
        took = time.monotonic() - started
        if got["state"] != "failed" or "timed_out" not in [e["kind"] for e in got["events"]]:
            fail("the adopted task ended %s without a timed_out event: %s" % (got["state"], got["events"]))
        if pid_alive(pids[0]):
            fail("the timed-out process %d still runs" % pids[0])
        # 4 s from its start (less what passed before the kill), plus the grace.
        if took > 4 + 2 + 2:
            fail("the adopted task was stopped %.1f s after the restart began" % took)

    def reassigned_while_stopping():
        # A preempted task whose process takes a while to exit is placed back
        # on the same node before it has (its preemptor, waiting for it, is
        # cancelled): the agent starts the new copy once the old one is gone
        # (never two at once, never none), and a cancel afterwards still
        # stops it.
        expect(srv.call("PUT", API + "/plugins/preempt",
                        {"enabled": True, "mode": "running",
                         "config": {"min_runtime_seconds": 0}}), 200)
        slow = ["sh", "-c", "trap 'sleep 1.5; exit 0' TERM; echo $$ >> pids; "
                "while true; do sleep 0.1; done"]
        v = submit("slow-stopper", slow, {"cpu_milli": 500, "gpu": 2}, rdma=False)
        vid = v["id"]
        wait_until(lambda: get_task(vid)["state"] == "running", 20, "victim running")

        def pids():
            return task_pids(vid)
        first = wait_until(lambda: pids(), 10, "the victim's pid")[0]
        hi = expect(srv.call("POST", API + "/tasks", {
            "name": "preemptor", "priority": 100, "requests": {"cpu_milli": 500, "gpu": 2},
            "command": ["sleep", "60"]}), 201)
        wait_until(lambda: "waiting for task %d" % vid in get_task(hi["id"])["pending_reason"], 10,
                   "the preemptor waiting for the victim's old copy")
        if not pid_alive(first):
            fail("the victim's old copy exited before its 1.5 s SIGTERM handler finished")
        expect(srv.call("POST", API + "/tasks/%d/cancel" % hi["id"]), 200)
        # Back on the node at once; the old copy is still in its handler.
        wait_until(lambda: get_task(vid)["state"] in ("scheduled", "running"), 5, "victim placed")
        wait_until(lambda: len(pids()) == 2 and pid_alive(pids()[1]), 10,
                   "a new copy of the victim after the old one exited")
        if pid_alive(first):
            fail("the new copy started while the old one %d still ran" % first)
        wait_until(lambda: get_task(vid)["state"] == "running", 10, "victim running again")
        second = pids()[1]
        expect(srv.call("POST", API + "/tasks/%d/cancel" % vid), 200)
        wait_until(lambda: not pid_alive(second), 10, "the new copy stopped by the cancel")
        expect(srv.call("PUT", API + "/plugins/preempt", {"enabled": False}), 200)

    def drain_evicts_preemptible_and_waits_for_the_rest():
        # Draining: no new placements; a preemptible task is evicted (its
        # process stopped, the task queued again), a non-preemptible one is
        # left to run to its end.
        keeper = submit("drain-keeper", ["sh", "-c", "sleep 2; echo finished"], {"cpu_milli": 500},
                        preemptible=False)
        mover = submit("drain-mover", ["sh", "-c", "echo $$ >> pids; sleep 600"], {"cpu_milli": 500})
        for t in (keeper, mover):
            wait_until(lambda: get_task(t["id"])["state"] == "running", 20, "%s running" % t["name"])

        def pids():
            return task_pids(mover["id"])
        first = wait_until(lambda: pids(), 10, "the preemptible task's pid")[0]
        node = expect(srv.call("POST", API + "/nodes/%s/drain" % NODE), 200)
        if node["condition"] != "Draining" or node["evicted"] != [mover["id"]] or \
                node["waiting_for"] != [keeper["id"]]:
            fail("drain answered %r" % node)
        moved = get_task(mover["id"])
        if moved["state"] != "pending":
            fail("the evicted task is %s (%r)" % (moved["state"], moved["pending_reason"]))
        evicted = [e for e in moved["events"] if e["kind"] == "evicted"]
        if len(evicted) != 1 or "node %s drained by" % NODE not in evicted[0]["message"]:
            fail("the evicted task's events: %r" % moved["events"])
        wait_until(lambda: not pid_alive(first), 15, "the evicted task's process stopped")
        late = submit("after-drain", ["true"], {"cpu_milli": 500})
        wait_until(lambda: "node draining" in get_task(late["id"])["pending_reason"], 10,
                   "the new task refused with 'node draining'")
        done = final_state(keeper["id"], 15)
        if done["state"] != "succeeded":
            fail("the non-preemptible task on the draining node ended %s: %r" % (done["state"], done))
        for t in (late, mover):
            if get_task(t["id"])["state"] != "pending":
                fail("task %s was placed on the draining node" % t["name"])
        expect(srv.call("POST", API + "/nodes/%s/uncordon" % NODE), 200)
        if final_state(late["id"], 15)["state"] != "succeeded":
            fail("after uncordon the waiting task did not run")
        wait_until(lambda: get_task(mover["id"])["state"] == "running" and len(pids()) == 2, 15,
                   "the evicted task running again after uncordon")
        expect(srv.call("DELETE", API + "/tasks/%d" % mover["id"]), 200)
        wait_until(lambda: not pid_alive(pids()[1]), 15, "the evicted task's new copy cancelled")

    def sigterm_exits_zero():
        agent.proc.send_signal(signal.SIGTERM)
        try:
            rc = agent.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("the agent did not exit within 10 s of SIGTERM")
        if rc != 0:
            fail("the agent exited %d after SIGTERM: %s" % (rc, agent.text()))
        # Heartbeats (with the usage file's values) and status reports were
        # all taken: the agent logs every refusal.
        for bad in ("heartbeat:", "refused", "will retry", "usage:"):
            if bad in agent.text():
                fail("the agent logged %r: %s" % (bad, agent.text()))

    if not c.run("agent registers its declared inventory", registers):
        print(agent.text())
        c.finish()
    c.run("a task sees CUDA_VISIBLE_DEVICES and NCCL_IB_HCA of its allocation",
          env_matches_allocation)
    c.run("a non-zero exit is reported as failed with its code", exit_code_reported)
    c.run("a task without a command is reported failed", no_command_fails)
    c.run("cancelling a running task kills its process", cancel_kills_process)
    c.run("a restarted agent adopts a running task instead of starting it again",
          restart_adopts_running_task)
    c.run("a restarted agent keeps an adopted task's time limit", adopted_task_keeps_its_time_limit)
    c.run("a task placed back on its node while still stopping starts again, once",
          reassigned_while_stopping)
    c.run("a drained node takes no new task, evicts a preemptible one, lets the other finish",
          drain_evicts_preemptible_and_waits_for_the_rest)
    c.run("SIGTERM stops the agent with exit 0", sigterm_exits_zero)
    if c.failed:
        print("agent stderr:\n" + agent.text())
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
