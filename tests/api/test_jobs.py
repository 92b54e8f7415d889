#!/usr/bin/python3
"""Jobs and gangs end to end (docs/JOBS.md): a real server and two real
agents, each running a declared 4-GPU node, and real task processes.

Checked:
  - deadlock: two jobs of 2 members x 4 GPUs on 2 nodes x 4 GPUs. One runs;
    the other waits with no member placed and says why ("gang 0/2
    placeable: ..."); it runs after the first ends;
  - launch: a 4-member job across both nodes rendezvouses over TCP with
    nothing but its environment: every rank connects to rank 0 at
    MASTER_ADDR:MASTER_PORT, sends its rank, and exits 0 only when rank 0
    saw them all; the logs show RANK, WORLD_SIZE, MASTER_ADDR and
    MASTER_PORT, and the {rank} placeholder of the command;
  - failure with fail_job: rank 1 exits 1; the job ends failed and no
    member process keeps running;
  - failure with restart_job: rank 1 fails once; every member restarts once
    (the events say so) and the job succeeds;
  - preemption: a high-priority 2-member job preempts a whole low-priority
    gang, never one rank, and its processes start after every victim's
    process exited, on either node (members start together);
  - a member that succeeded counts towards its gang when the others are
    placed again after an eviction;
  - time limit: a job with time_limit_s 3 ends timed_out within 3 s plus
    the grace period; a task on its own with a limit ends failed, timed out;
  - drain: draining one member's node evicts the whole gang, and it runs
    again once the node is back;
  - cancel: cancelling a job stops every member; a member is not cancelled
    on its own;
  - bad input: min_available above the replicas, zero replicas, a role
    named twice, a task that sets "job" are 400 naming the field; a gang
    larger than the cluster is accepted and waits with its reason.

usage: test_jobs.py HETEROFLOW_BINARY
"""
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   task_processes, wait_until)

NODES = ("job-n1", "job-n2")
GRACE_S = 3
INVENTORY = """\
name: %s
cpu_milli: 16000
memory_mib: 65536
gpus:
  - {index: 0, model: A100-80G, memory_mib: 81920}
  - {index: 1, model: A100-80G, memory_mib: 81920}
  - {index: 2, model: A100-80G, memory_mib: 81920}
  - {index: 3, model: A100-80G, memory_mib: 81920}
"""

# Every rank connects to rank 0 and sends its rank; rank 0 answers "ok"
# once it has seen every rank, and each exits 0 only then.
RENDEZVOUS = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "examples", "demo", "rendezvous.py")


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("jobs")
    expect(srv.call("PUT", API + "/plugins/preempt",
                    {"mode": "running", "config": {"min_runtime_seconds": 0}}), 200)
    works = {}
    for node in NODES:
        token_file = srv.agent_token_file(node, tmp)
        inv = os.path.join(tmp, node + ".yaml")
        with open(inv, "w") as f:
            f.write(INVENTORY % node)
        works[node] = os.path.join(tmp, "work-" + node)
        log = open(os.path.join(tmp, node + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", token_file, "--inventory", inv, "--work-dir",
                              works[node], "--grace-period-s", str(GRACE_S)],
                             stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
    wait_until(lambda: sum(n["condition"] == "Ready" for n in expect(srv.get(API + "/nodes"), 200)["nodes"]
                           if n["name"] in NODES) == 2, 20, "both agents registered")

    def job(j):
        return expect(srv.get(API + "/jobs/%d" % j), 200)

    def submit(body):
        return expect(srv.call("POST", API + "/jobs", body), 201)

    def role(name, replicas, gpu, command, preemptible=True):
        return {"name": name, "replicas": replicas, "preemptible": preemptible, "command": command,
                "requests": {"gpu": gpu, "cpu_milli": 1000, "memory_mib": 1024}}

    def state(j, want, timeout):
        return wait_until(lambda: job(j)["state"] == want and job(j), timeout,
                          "job %d %s (it is %s)" % (j, want, job(j)["state"]))

    def output(task_id):
        """The task's output on every node it ran on."""
        text = ""
        for w in works.values():
            try:
                with open(os.path.join(w, "tasks", str(task_id), "output.log")) as f:
                    text += f.read()
            except OSError:
                continue
        return text

    def stamp(task_id, word):
        m = re.search(word + r" at (\d+\.\d+)", output(task_id))
        return float(m.group(1)) if m else None

    def no_processes():
        wait_until(lambda: not any(task_processes(w) for w in works.values()), GRACE_S + 15,
                   "every task process stopped")

    def deadlock():
        sleeper = ["sh", "-c", "sleep 3"]
        a = submit({"name": "deadlock-a", "roles": [role("worker", 2, 4, sleeper)]})["id"]
        b = submit({"name": "deadlock-b", "roles": [role("worker", 2, 4, sleeper)]})["id"]
        first = wait_until(lambda: next((j for j in (a, b) if job(j)["state"] in ("starting", "running")),
                                        None), 15, "one of the jobs placed")
        other = b if first == a else a
        # While the first runs, no member of the other holds anything.
        end = time.monotonic() + 2.5
        while time.monotonic() < end and job(first)["state"] != "succeeded":
            o = job(other)
            placed = [m for m in o["members"] if m["state"] != "pending" or m["node"]]
            if placed:
                fail("job %d holds members while its gang waits: %s" % (other, placed))
            time.sleep(0.1)
        o = job(other)
        if not o["reason"].startswith("gang 0/2 placeable: "):
            fail("the waiting job's reason: %r" % o["reason"])
        if not any(m["pending_reason"].startswith("gang 0/2 placeable") for m in o["members"]):
            fail("members' pending reasons: %s" % [m["pending_reason"] for m in o["members"]])
        state(first, "succeeded", 20)
        state(other, "succeeded", 30)
        kinds = [e["kind"] for e in job(other)["events"]]
        for k in ("submitted", "placed", "succeeded"):
            if k not in kinds:
                fail("job events lack %r: %s" % (k, kinds))

    def launch():
        j = submit({"name": "rdv", "roles": [role("worker", 4, 2,
                                                    ["python3", RENDEZVOUS, "--node-rank={node_rank}",
                                                     "--rank={rank}", "--world={world_size}"])]})
        got = state(j["id"], "succeeded", 60)
        nodes = set()
        for m in got["members"]:
            for e in expect(srv.get(API + "/tasks/%d" % m["id"]), 200)["events"]:
                hit = re.match(r"scheduled to node ([a-z0-9.-]+)", e["message"]) if e["kind"] == "scheduled" else None
                if hit:
                    nodes.add(hit.group(1))
        if nodes != set(NODES):
            fail("the 4 ranks ran on %s, not across both nodes" % sorted(nodes))
        members = sorted(got["members"], key=lambda m: m["rank"])
        master = None
        for m in members:
            out = output(m["id"])
            env = re.search(r"env RANK=(\d+) WORLD_SIZE=(\d+) MASTER_ADDR=(\S+) MASTER_PORT=(\d+) "
                            r"argv=\['--node-rank=(\d+)', '--rank=(\d+)', '--world=(\d+)'\]", out)
            if not env:
                fail("rank %d's log: %r" % (m["rank"], out))
            rank, world, addr, port, _, argv_rank, argv_world = env.groups()
            if int(rank) != m["rank"] or int(world) != 4 or argv_rank != rank or argv_world != "4":
                fail("rank %d's env and argv: %s" % (m["rank"], env.groups()))
            if master is None:
                master = (addr, port)
            elif (addr, port) != master:
                fail("ranks disagree on the master: %s vs %s" % ((addr, port), master))
        if "rank 0 saw ranks [0, 1, 2, 3]" not in output(members[0]["id"]):
            fail("rank 0 did not see every rank: %r" % output(members[0]["id"]))
        print("     4 ranks on %d node(s), master %s:%s" % (len(nodes), master[0], master[1]))

    def fail_job():
        cmd = ["sh", "-c", 'if [ "$RANK" = 1 ]; then sleep 1; exit 1; fi; sleep 60']
        j = submit({"name": "fails", "roles": [role("worker", 2, 1, cmd)],
                    "restart": {"on_member_failure": "fail_job"}})["id"]
        got = state(j, "failed", 30)
        if "exit" not in got["reason"] and "failed" not in got["reason"]:
            fail("the failed job's reason: %r" % got["reason"])
        states = sorted(m["state"] for m in got["members"])
        if states != ["cancelled", "failed"]:
            fail("members after the failure: %s" % states)
        no_processes()

    def restart_job():
        marker = os.path.join(tmp, "failed-once")
        cmd = ["sh", "-c", 'echo "rank $RANK start"; '
               'if [ "$RANK" = 1 ] && [ ! -e %s ]; then touch %s; sleep 1; exit 1; fi; '
               'sleep 2' % (marker, marker)]
        j = submit({"name": "restarts", "roles": [role("worker", 2, 1, cmd)],
                    "restart": {"on_member_failure": "restart_job", "max_restarts": 1}})["id"]
        got = state(j, "succeeded", 45)
        if got["restarts"] != 1:
            fail("restarts: %r" % got["restarts"])
        kinds = [e["kind"] for e in got["events"]]
        if kinds.count("restarting") != 1:
            fail("job events: %s" % kinds)
        # Every member ran twice: the one that failed, and the one that was
        # still running, stopped and started afresh (never two copies at once).
        for m in got["members"]:
            starts = output(m["id"]).count("rank %d start" % m["rank"])
            if starts != 2:
                fail("rank %d started %d time(s), want 2:\n%s" % (m["rank"], starts, output(m["id"])))
        for m in got["members"]:
            t = expect(srv.get(API + "/tasks/%d" % m["id"]), 200)
            if "restarting" not in [e["kind"] for e in t["events"]]:
                fail("member %s has no restarting event: %s" % (m["name"], [e["kind"] for e in t["events"]]))

    def preemption():
        # Rank 1's process takes 2 s to exit, rank 0's a moment: the
        # preemptor on rank 0's node must wait for rank 1's too (the start
        # barrier), not only for the victim on its own node.
        victim = ["sh", "-c", "trap 'if [ \"$RANK\" = 1 ]; then sleep 2; else sleep 0.2; fi; "
                  "echo exited at $(date +%s.%N); exit 0' TERM; "
                  "while true; do sleep 5 & wait $!; done"]
        low = submit({"name": "low", "priority": 0, "roles": [role("worker", 2, 4, victim)]})["id"]
        state(low, "running", 20)
        starter = ["sh", "-c", "echo started at $(date +%s.%N); sleep 1"]
        high = submit({"name": "high", "priority": 100, "roles": [role("worker", 2, 4, starter)]})["id"]
        state(high, "succeeded", 40)
        lo = job(low)
        # Evicted whole: both members pending again (or placed again), never one.
        if lo["state"] not in ("pending", "starting", "running", "succeeded"):
            fail("the low job after the preemption: %s %r" % (lo["state"], lo["reason"]))
        for m in lo["members"]:
            kinds = [e["kind"] for e in expect(srv.get(API + "/tasks/%d" % m["id"]), 200)["events"]]
            if "preempted" not in kinds:
                fail("low member %s was not preempted: %s" % (m["name"], kinds))
        exits = [stamp(m["id"], "exited") for m in lo["members"]]
        starts = [stamp(m["id"], "started") for m in job(high)["members"]]
        if None in exits or None in starts:
            fail("stamps: victims exited %s, preemptors started %s" % (exits, starts))
        if min(starts) < max(exits):
            fail("a preemptor started %.3f s before the last victim exited" % (max(exits) - min(starts)))
        expect(srv.call("POST", API + "/jobs/%d/cancel" % low), 200)
        no_processes()

    def finished_member_counts():
        # Rank 1 ends well; rank 0 is then preempted. Placed again, rank 0
        # alone completes the gang with the finished rank 1: it must not wait
        # for a gang of two that can never be whole again.
        cmd = ["sh", "-c", 'if [ "$RANK" = 1 ]; then sleep 1; exit 0; fi; '
               "trap 'exit 0' TERM; while true; do sleep 5 & wait $!; done"]
        low = submit({"name": "part-done", "priority": 0, "roles": [role("worker", 2, 4, cmd)]})["id"]
        state(low, "running", 20)
        member = lambda rank: [m for m in job(low)["members"] if m["rank"] == rank][0]  # noqa: E731
        wait_until(lambda: member(1)["state"] == "succeeded", 15, "rank 1 succeeded")
        high = submit({"name": "displacer", "priority": 100,
                       "roles": [role("worker", 2, 4, ["sh", "-c", "sleep 1"])]})["id"]
        state(high, "succeeded", 40)
        wait_until(lambda: member(0)["state"] == "running", 20,
                   "rank 0 running again (the job: %r)" % job(low)["reason"])
        # Rank 0 running and rank 1 done: the whole gang runs.
        state(low, "running", 10)
        expect(srv.call("POST", API + "/jobs/%d/cancel" % low), 200)
        no_processes()

    def time_limit():
        j = submit({"name": "limited", "time_limit_s": 3,
                    "roles": [role("worker", 2, 1, ["sh", "-c", "sleep 60"])]})["id"]
        state(j, "running", 20)
        t0 = time.monotonic()
        got = state(j, "timed_out", 3 + GRACE_S + 5)
        took = time.monotonic() - t0
        if took > 3 + GRACE_S + 1:
            fail("timed out %.1f s after it ran (limit 3 s, grace %d s)" % (took, GRACE_S))
        if "time limit of 3 s reached" not in got["reason"]:
            fail("the job's reason: %r" % got["reason"])
        kinds = [e["kind"] for m in got["members"]
                 for e in expect(srv.get(API + "/tasks/%d" % m["id"]), 200)["events"]]
        if "timed_out" not in kinds:
            fail("no member has a timed_out event: %s" % kinds)
        no_processes()
        # A task on its own ends failed, with the same event.
        t = expect(srv.call("POST", API + "/tasks", {
            "name": "limited-task", "time_limit_s": 1, "command": ["sh", "-c", "sleep 60"],
            "requests": {"cpu_milli": 100, "memory_mib": 64}}), 201)["id"]
        done = wait_until(lambda: expect(srv.get(API + "/tasks/%d" % t), 200)["state"] == "failed" and
                          expect(srv.get(API + "/tasks/%d" % t), 200), 1 + GRACE_S + 10, "the task timed out")
        if not done["pending_reason"].startswith("timed out: time limit of 1 s reached"):
            fail("the task's reason: %r" % done["pending_reason"])
        if "timed_out" not in [e["kind"] for e in done["events"]]:
            fail("the task's events: %s" % [e["kind"] for e in done["events"]])

    def drain():
        j = submit({"name": "drained", "roles": [role("worker", 2, 3, ["sh", "-c", "sleep 60"])]})["id"]
        got = state(j, "running", 20)
        nodes = {m["node"] for m in got["members"]}
        if nodes != set(NODES):
            fail("the members run on %s" % sorted(nodes))
        r = expect(srv.call("POST", API + "/nodes/%s/drain" % NODES[0]), 200)
        ids = sorted(m["id"] for m in got["members"])
        if sorted(r["evicted"]) != ids:
            fail("drain evicted %s, want the whole gang %s" % (r["evicted"], ids))
        got = state(j, "pending", 10)
        for m in got["members"]:
            kinds = [e["kind"] for e in expect(srv.get(API + "/tasks/%d" % m["id"]), 200)["events"]]
            if "evicted" not in kinds:
                fail("member %s was not evicted: %s" % (m["name"], kinds))
        expect(srv.call("POST", API + "/nodes/%s/uncordon" % NODES[0]), 200)
        state(j, "running", 20)
        expect(srv.call("POST", API + "/jobs/%d/cancel" % j), 200)
        no_processes()

    def cancel():
        j = submit({"name": "cancelled", "roles": [role("worker", 2, 1, ["sh", "-c", "sleep 60"])]})
        got = state(j["id"], "running", 20)
        r = srv.call("POST", API + "/tasks/%d/cancel" % got["members"][0]["id"])
        expect_error(r, 422, mentions=("member of job",))
        got = expect(srv.call("POST", API + "/jobs/%d/cancel" % j["id"]), 200)
        if got["state"] != "cancelled" or any(m["state"] != "cancelled" for m in got["members"]):
            fail("after cancel: %s %s" % (got["state"], [m["state"] for m in got["members"]]))
        expect(srv.call("DELETE", API + "/jobs/%d" % j["id"]), 200)  # again: unchanged
        no_processes()

    def bad_input():
        ok = [role("w", 2, 1, ["true"])]
        for body, mention in (
                ({"name": "x", "roles": ok, "min_available": 3}, "min_available (3) is more than"),
                ({"name": "x", "roles": [role("w", 0, 1, ["true"])]}, "roles[0].replicas must be >= 1"),
                ({"name": "x", "roles": ok + ok}, 'roles[1].name "w" is given twice'),
                ({"name": "x", "roles": []}, "roles must not be empty"),
                ({"name": "x", "roles": [dict(ok[0], priority=5)]}, "roles[0].priority is the job's"),
                ({"name": "x", "roles": ok, "restart": {"on_member_failure": "retry"}},
                 "restart.on_member_failure"),
                ({"name": "x", "roles": ok, "placement": {"gpu_model": "mixed"}},
                 "placement.gpu_model"),
                ({"name": "x", "roles": ok, "bogus": 1}, "bogus")):
            expect_error(srv.call("POST", API + "/jobs", body), 400, mentions=(mention,))
        expect_error(srv.call("POST", API + "/tasks", {"name": "t", "job": {"id": 1}}), 400,
                     mentions=("job is set by the server",))
        if any(j["name"] == "x" for j in expect(srv.get(API + "/jobs"), 200)["jobs"]):
            fail("a refused job was stored")
        big = submit({"name": "too-big", "roles": [role("w", 3, 4, ["true"])]})
        got = wait_until(lambda: job(big["id"])["reason"].startswith("gang 2/3 placeable") and job(big["id"]),
                         15, "the oversized gang's reason (it is %r)" % job(big["id"])["reason"])
        if got["state"] != "pending" or any(m["node"] for m in got["members"]):
            fail("the oversized gang holds something: %s" % got["members"])
        expect(srv.call("POST", API + "/jobs/%d/cancel" % big["id"]), 200)

    c.run("deadlock: one gang runs, the other waits whole", deadlock)
    c.run("launch: 4 ranks rendezvous from their environment", launch)
    c.run("fail_job: a failed rank fails the job and stops the rest", fail_job)
    c.run("restart_job: every member restarts once, then succeeds", restart_job)
    c.run("preemption: a gang is evicted whole, the preemptor starts after", preemption)
    c.run("a finished member counts when its gang is placed again", finished_member_counts)
    c.run("time limit: the job ends timed_out within the limit and the grace", time_limit)
    c.run("drain: a member's whole gang is evicted with it", drain)
    c.run("cancel: the job stops every member", cancel)
    c.run("bad input: 400 naming the field; an oversized gang waits", bad_input)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
