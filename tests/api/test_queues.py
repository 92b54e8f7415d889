#!/usr/bin/python3
"""Queues end to end (docs/QUEUES.md): a real server, two real agents each
running a declared 8-GPU node, and real task processes.

Checked:
  - reclaim: team-a and team-b are each guaranteed 8 GPUs of 16. B is idle;
    A submits 16 one-GPU tasks and all 16 run, 8 of them borrowed (the
    queue view says so). B submits 8: within one scheduling cycle plus the
    victims' grace period, 8 of A's tasks are stopped and queued again, and
    B's 8 run. The victims' events, both queues' events and the queue view
    name the reclaim;
  - the queue view: usage, borrowed, lendable and counts per queue, and
    the same in /metrics and `heteroflow get queues`;
  - backfill: a 16-GPU gang behind sixteen running 1-GPU tasks limited to
    600 s gets a reservation of both nodes from their limits; GET on the job
    and on a member, the queue's waiting list and `heteroflow describe` show
    it, and a `reserved` event names it;
  - submitters: a token a queue does not name may not submit to it (403);
  - bad input: every queue field (wrong types, negative quotas, unknown GPU
    model names, unknown parent, a cycle, children over their parent's
    guarantee, max below guaranteed, unknown roles and fields) is a 400
    naming it and changes nothing; a queue that exists is 409 to create,
    one that holds work is 409 to delete, an unknown one is 404; tasks and
    jobs naming an unknown queue, or one with children, are 400.

usage: test_queues.py HETEROFLOW_BINARY
"""
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, ADMIN_TOKEN, API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   wait_until)

NODES = ("q-n1", "q-n2")
GRACE_S = 2
INVENTORY = "name: %s\ncpu_milli: 32000\nmemory_mib: 65536\ngpus:\n" + "".join(
    "  - {index: %d, model: A100-80G, memory_mib: 81920}\n" % i for i in range(8))


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("queues")
    # Reclaim respects the minimum runtime; these tasks are young.
    expect(srv.call("PUT", API + "/plugins/preempt", {"config": {"min_runtime_seconds": 0}}), 200)
    for node in NODES:
        token_file = srv.agent_token_file(node, tmp)
        inv = os.path.join(tmp, node + ".yaml")
        with open(inv, "w") as f:
            f.write(INVENTORY % node)
        log = open(os.path.join(tmp, node + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", token_file, "--inventory", inv, "--work-dir",
                              os.path.join(tmp, "work-" + node), "--grace-period-s", str(GRACE_S)],
                             stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
    wait_until(lambda: sum(n["condition"] == "Ready" for n in expect(srv.get(API + "/nodes"), 200)["nodes"]
                           if n["name"] in NODES) == 2, 20, "both agents registered")

    def queue(name):
        return expect(srv.get(API + "/queues/" + name), 200)

    def tasks_of(queue_name):
        return [t for t in srv.list_all(API + "/tasks", "tasks") if t.get("queue") == queue_name]

    def submit(queue_name, n, command):
        body = {"tasks": [{"name": "%s-%d" % (queue_name, i), "queue": queue_name, "command": command,
                           "requests": {"gpu": 1, "cpu_milli": 500, "memory_mib": 256}}
                          for i in range(n)]}
        return [t["id"] for t in expect(srv.call("POST", API + "/tasks/batch", body), 201)["tasks"]]

    def running(ids):
        states = {t["id"]: t["state"] for t in srv.list_all(API + "/tasks", "tasks")}
        return sum(states.get(i) == "running" for i in ids)

    def reclaim():
        for name in ("team-a", "team-b"):
            expect(srv.call("POST", API + "/queues",
                            {"name": name, "guaranteed": {"gpu": {"A100-80G": 8}}}), 201)
        a = submit("team-a", 16, ["sleep", "120"])
        wait_until(lambda: running(a) == 16, 30, "all 16 of team-a's tasks running")
        qa = queue("team-a")
        if qa["usage"]["gpu"].get("A100-80G") != 16 or qa["borrowed"]["gpu"].get("A100-80G") != 8:
            fail("team-a's usage and borrowed: %s / %s" % (qa["usage"], qa["borrowed"]))
        if qa["running"] != 16 or qa["pending"] != 0:
            fail("team-a's counts: %s" % qa)
        qb = queue("team-b")
        if qb["lendable"]["gpu"].get("A100-80G") != 8:
            fail("team-b lends its idle guarantee: %s" % qb["lendable"])

        t0 = time.monotonic()
        b = submit("team-b", 8, ["sleep", "120"])
        wait_until(lambda: running(b) == 8, GRACE_S + 15, "team-b's 8 tasks running")
        took = time.monotonic() - t0
        print("     team-b's 8 tasks ran %.1f s after submission (grace %d s)" % (took, GRACE_S))
        if took > GRACE_S + 8:
            fail("reclaim took %.1f s; want one cycle plus the %d s grace" % (took, GRACE_S))
        states = {t["id"]: t["state"] for t in srv.list_all(API + "/tasks", "tasks")}
        still = [i for i in a if states[i] == "running"]
        back = [i for i in a if states[i] == "pending"]
        if len(still) != 8 or len(back) != 8:
            fail("team-a after the reclaim: %d running, %d pending; want 8 and 8" % (len(still), len(back)))
        for i in back:
            events = expect(srv.get(API + "/tasks/%d" % i), 200)["events"]
            if not any(e["kind"] == "reclaimed" and "reclaimed by queue team-b" in e["message"]
                       for e in events):
                fail("task %d's events do not name the reclaim: %s" % (i, events))
        for name in ("team-a", "team-b"):
            ev = [e for e in queue(name)["events"] if e["action"] == "reclaimed"]
            if len(ev) != 8 or any(e["queue"] != "team-a" or e["by_queue"] != "team-b" for e in ev):
                fail("%s's events: %s" % (name, ev))
        qa, qb = queue("team-a"), queue("team-b")
        # The waiting list: A's 8 victims, in the order they will be tried.
        waiting = qa["waiting"]
        if [w["position"] for w in waiting] != list(range(1, 9)) or sorted(w["id"] for w in waiting) != sorted(back):
            fail("team-a's waiting list: %s" % waiting)
        if qa["usage"]["gpu"].get("A100-80G") != 8 or qa["borrowed"]["gpu"]:
            fail("team-a after the reclaim: %s, borrowed %s" % (qa["usage"], qa["borrowed"]))
        if qb["usage"]["gpu"].get("A100-80G") != 8 or qa["pending"] != 8:
            fail("team-b after the reclaim: %s; team-a pending %d" % (qb["usage"], qa["pending"]))
        # /metrics has the same per queue.
        text = srv.call("GET", "/metrics").raw.decode("utf-8")
        for line in ('heteroflow_queue_gpus_used{queue="team-a",model="A100-80G"} 8',
                     'heteroflow_queue_gpus_borrowed{queue="team-a",model="A100-80G"} 0',
                     'heteroflow_queue_gpus_guaranteed{queue="team-b",model="A100-80G"} 8',
                     'heteroflow_queue_tasks{queue="team-a",state="pending"} 8',
                     'heteroflow_queue_tasks{queue="team-b",state="running"} 8'):
            if line not in text:
                fail("/metrics lacks %r:\n%s" % (line, "\n".join(
                    l for l in text.splitlines() if l.startswith("heteroflow_queue"))))
        # heteroflow get queues shows it too.
        env = dict(os.environ, HETEROFLOW_SERVER="http://127.0.0.1:%d" % srv.port,
                   HETEROFLOW_TOKEN=ADMIN_TOKEN)
        out = subprocess.run([binary, "get", "queues"], env=env, capture_output=True, text=True,
                             timeout=20)
        rows = {line.split()[0]: line.split() for line in out.stdout.splitlines()[1:] if line.strip()}
        if out.returncode != 0 or rows.get("team-a", [])[3:7] != ["8", "A100-80G:8", "-", "0"]:
            fail("heteroflow get queues (rc %d):\n%s%s" % (out.returncode, out.stdout, out.stderr))
        # A queue that holds work cannot go.
        expect_error(srv.call("DELETE", API + "/queues/team-a"), 409, mentions=("holds work",))
        for i in a + b:
            expect(srv.call("POST", API + "/tasks/%d/cancel" % i), 200)

    def submitters():
        expect(srv.call("POST", API + "/queues",
                        {"name": "private", "submitters": {"tokens": ["ci-bot"]}}), 201)
        other = srv.make_token("operator")
        bot = srv.make_token("operator", name="ci-bot")
        task = {"name": "p", "queue": "private", "command": ["true"]}
        expect_error(srv.call("POST", API + "/tasks", task, token=other["token"]), 403,
                     mentions=("private",))
        expect(srv.call("POST", API + "/tasks", task, token=bot["token"]), 201)

    def bad_input():
        expect(srv.call("POST", API + "/queues",
                        {"name": "org", "guaranteed": {"gpu": {"A100-80G": 4}}}), 201)
        expect(srv.call("POST", API + "/queues", {"name": "org-x", "parent": "org"}), 201)
        before = expect(srv.get(API + "/queues"), 200)["queues"]
        cases = [
            ({"name": "q1", "weight": "heavy"}, "queues.q1.weight"),
            ({"name": "q1", "weight": -1}, "queues.q1.weight"),
            ({"name": "q1", "guaranteed": {"gpu": {"A100-80G": -2}}}, "queues.q1.guaranteed.gpu.A100-80G"),
            ({"name": "q1", "max": {"cpu_milli": -1}}, "queues.q1.max.cpu_milli"),
            ({"name": "q1", "max": {"memory_mib": "lots"}}, "queues.q1.max.memory_mib"),
            ({"name": "q1", "max": {"gpu": {"B200": 4}}}, "queues.q1.max.gpu.B200"),
            ({"name": "q1", "guaranteed": {"gpu": {"A100-80G": 4}}, "max": {"gpu": {"A100-80G": 2}}},
             "queues.q1.max.gpu.A100-80G"),
            ({"name": "q1", "parent": "nowhere"}, "queues.q1.parent"),
            ({"name": "q1", "parent": "org", "guaranteed": {"gpu": {"A100-80G": 8}}},
             "queues.org.guaranteed.gpu.A100-80G"),
            ({"name": "q1", "submitters": {"roles": ["wizard"]}}, "queues.q1.submitters.roles[0]"),
            ({"name": "q1", "submitters": ["admin"]}, "queues.q1.submitters"),
            ({"name": "q1", "colour": "red"}, "queues.q1.colour"),
            ({"name": "Q 1"}, "name"),
            ([], "must be a JSON object"),
        ]
        for body, mention in cases:
            expect_error(srv.call("POST", API + "/queues", body), 400, mentions=(mention,))
        # A cycle: org under its own child.
        expect_error(srv.call("PUT", API + "/queues/org", {"parent": "org-x"}), 400,
                     mentions=("queues.org.parent makes a cycle",))
        expect_error(srv.call("POST", API + "/queues", {"name": "org"}), 409)
        expect_error(srv.call("DELETE", API + "/queues/nowhere"), 404)
        expect_error(srv.call("DELETE", API + "/queues/org"), 409, mentions=("child queues",))
        expect_error(srv.call("DELETE", API + "/queues/root"), 409)
        expect_error(srv.call("PUT", API + "/queues/nowhere", {}), 404)
        after = expect(srv.get(API + "/queues"), 200)["queues"]
        strip = lambda qs: [{k: q[k] for k in ("name", "parent", "weight", "guaranteed", "max")} for q in qs]
        if strip(after) != strip(before):
            fail("a refused change changed the tree:\n%s\n%s" % (strip(before), strip(after)))
        # Work names a leaf that exists.
        expect_error(srv.call("POST", API + "/tasks", {"name": "t", "queue": "nowhere", "command": ["true"]}),
                     400, mentions=("no queue named \"nowhere\"",))
        expect_error(srv.call("POST", API + "/tasks", {"name": "t", "queue": "org", "command": ["true"]}),
                     400, mentions=("child queues",))
        expect_error(srv.call("POST", API + "/jobs", {"name": "j", "queue": "nowhere", "roles": [
            {"name": "w", "command": ["true"]}]}), 400, mentions=("queue",))
        expect_error(srv.call("POST", API + "/tasks", {"name": "t", "queue": 7}), 400, mentions=("queue",))
        # Changes that hold are stored and shown.
        changed = expect(srv.call("PUT", API + "/queues/org-x", {"parent": "org", "weight": 3}), 200)
        if changed["weight"] != 3 or changed["parent"] != "org":
            fail("PUT answer: %s" % changed)
        expect(srv.call("DELETE", API + "/queues/org-x"), 200)
        expect(srv.call("DELETE", API + "/queues/org"), 200)

    def backfill():
        body = {"tasks": [{"name": "fill-%d" % i, "command": ["sleep", "120"], "time_limit_s": 600,
                           "requests": {"gpu": 1, "cpu_milli": 500, "memory_mib": 256}}
                          for i in range(16)]}
        small = [t["id"] for t in expect(srv.call("POST", API + "/tasks/batch", body), 201)["tasks"]]
        wait_until(lambda: running(small) == 16, 30, "the 16 limited tasks running")
        t0 = time.time()
        job = expect(srv.call("POST", API + "/jobs", {"name": "wide", "roles": [
            {"name": "w", "replicas": 2, "command": ["true"],
             "requests": {"gpu": 8, "cpu_milli": 500, "memory_mib": 256}}]}), 201)

        def reserved():
            return expect(srv.get(API + "/jobs/%d" % job["id"]), 200).get("reservation")
        wait_until(lambda: reserved() is not None, 10, "the gang's reservation")
        r = reserved()
        start = time.mktime(time.strptime(r["start"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
        if not (t0 + 590 <= start <= t0 + 610):
            fail("reservation starts %s, %.0f s after submission; want about 600 s" % (r["start"], start - t0))
        if sorted(n["node"] for n in r["nodes"]) != sorted(NODES) or any(n["members"] != 1 for n in r["nodes"]):
            fail("reservation nodes: %s" % r)
        member = next(t for t in srv.list_all(API + "/tasks", "tasks")
                      if t.get("job", {}) and t["job"].get("id") == job["id"])
        got = expect(srv.get(API + "/tasks/%d" % member["id"]), 200)
        if got.get("reservation") != r:
            fail("the member's reservation: %s, the job's %s" % (got.get("reservation"), r))
        if not any(e["kind"] == "reserved" for e in got["events"]):
            fail("no reserved event: %s" % got["events"])
        waiting = queue("default")["waiting"]
        if not any(w["job"] == job["id"] and w["reservation"] == r for w in waiting):
            fail("the waiting list does not show the reservation: %s" % waiting)
        if any(w["job"] != job["id"] and w["reservation"] is not None for w in waiting):
            fail("a reservation on another waiting task: %s" % waiting)
        env = dict(os.environ, HETEROFLOW_SERVER="http://127.0.0.1:%d" % srv.port,
                   HETEROFLOW_TOKEN=ADMIN_TOKEN)
        out = subprocess.run([binary, "describe", "task", str(member["id"])], env=env,
                             capture_output=True, text=True, timeout=20)
        if out.returncode != 0 or not re.search(r"^Reservation:\s+room held from " + re.escape(r["start"]),
                                                out.stdout, re.M):
            fail("heteroflow describe task (rc %d):\n%s%s" % (out.returncode, out.stdout, out.stderr))
        expect(srv.call("POST", API + "/jobs/%d/cancel" % job["id"]), 200)
        for i in small:
            expect(srv.call("POST", API + "/tasks/%d/cancel" % i), 200)

    c.run("reclaim: a guaranteed queue takes back what another borrowed", reclaim)
    c.run("backfill: the reservation is shown on the job, its members and the queue", backfill)
    c.run("submitters: only named tokens submit to a private queue", submitters)
    c.run("bad input: 400 naming the field, nothing changed", bad_input)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
