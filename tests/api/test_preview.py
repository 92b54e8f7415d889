#!/usr/bin/python3
"""POST /api/v1/scheduler/preview (docs/API.md "Scheduler preview"): on a
prepared cluster (4 nodes x 8 GPUs, some allocations, some pending tasks) a
candidate policy with spread instead of binpack places tasks differently
from the current one, with per-node breakdowns (feasible, per-plugin raw
and weighted scores), the pending queue by default, explain and the
50-task breakdown limit honoured, refused candidates answered as the PUT
routes answer them -- and nothing in the live cluster changes.

usage: test_preview.py HETEROFLOW_BINARY
"""
import os
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   stable_tasks, wait_until)

NODES = ["pv-n%d" % i for i in range(4)]
SPREAD = {"plugins": {"binpack": {"enabled": False}, "spread": {"enabled": True}}}
REQ = {"cpu_milli": 1000, "memory_mib": 4096}


def gpu_task(name, gpus=1, **kw):
    t = {"name": name, "requests": dict(REQ, gpu=gpus)}
    t.update(kw)
    return t


def num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("preview")
    st = {}

    def live_state():
        return {"tasks": stable_tasks(srv.tasks()),
                "nodes": expect(srv.get(API + "/nodes"), 200),
                "plugins": expect(srv.get(API + "/plugins"), 200),
                "config": expect(srv.get(API + "/scheduler/config"), 200)}

    def prepare():
        for name in NODES:
            srv.register_node(name, gpus=8, expect_status=201)
        for i in range(6):
            expect(srv.call("POST", API + "/tasks", gpu_task("live-%d" % i)), 201)
        # Pending: no such GPU model, and more GPUs than any node has.
        for name, prio in (("want-h100-low", 1), ("want-h100-high", 9), ("want-h100-mid", 5)):
            expect(srv.call("POST", API + "/tasks",
                            {"name": name, "priority": prio,
                             "requests": dict(REQ, gpu=1, gpu_models=["H100"])}), 201)
        expect(srv.call("POST", API + "/tasks", gpu_task("want-16", gpus=16, priority=3)), 201)

        def settled():
            ts = srv.tasks_full()
            sched = [t for t in ts if t["state"] == "scheduled"]
            pend = [t for t in ts if t["state"] == "pending" and t["pending_reason"]]
            return len(sched) == 6 and len(pend) == 4 and ts
        tasks = wait_until(settled, 15, "6 scheduled and 4 pending tasks")
        used = {n: 0 for n in NODES}
        for t in tasks:
            if t["state"] == "scheduled":
                used[t["node"]] += len(t["allocation"]["gpus"])
        if max(used.values()) < 2:
            fail("binpack (the default) should have packed the 6 live tasks, got %s" % used)
        st["used"] = used
        st["pending"] = sorted((t for t in tasks if t["state"] == "pending"),
                               key=lambda t: (-t["priority"], t["id"]))
        st["before"] = live_state()

    def placements_differ():
        used = st["used"]
        most = max(used.values())
        least = min(used.values())
        r = srv.call("POST", API + "/scheduler/preview",
                     dict(SPREAD, tasks=[gpu_task("cand-0"), gpu_task("cand-1", gpus=2)]))
        body = expect(r, 200, "POST /scheduler/preview")
        for k in ("current", "candidate", "moved", "tasks"):
            if k not in body:
                fail("preview answer lacks %r: %r" % (k, body))
        for side in ("current", "candidate"):
            s = body[side]
            for k in ("policy", "scheduled", "unschedulable", "gpu_allocation"):
                if k not in s:
                    fail("preview %s lacks %r: %r" % (side, k, s))
            if s["scheduled"] != 2 or s["unschedulable"] != 0:
                fail("preview %s: want 2 scheduled, 0 unschedulable: %r" % (side, s))
            if not num(s["gpu_allocation"]) or not 0 < s["gpu_allocation"] <= 1:
                fail("preview %s gpu_allocation %r" % (side, s["gpu_allocation"]))
        if body["current"]["policy"] == body["candidate"]["policy"]:
            fail("current and candidate policies are the same: %r" % body["current"]["policy"])
        tasks = body["tasks"]
        if [t.get("name") for t in tasks] != ["cand-0", "cand-1"]:
            fail("preview tasks must be the given ones in order: %r" % [t.get("name") for t in tasks])
        moved = 0
        for t in tasks:
            cur, cand = t["current"], t["candidate"]
            for side, p in (("current", cur), ("candidate", cand)):
                if p.get("node") not in NODES or not isinstance(p.get("gpus"), list):
                    fail("%s %s placement: %r" % (t["name"], side, p))
            moved += (cur["node"], cur["gpus"]) != (cand["node"], cand["gpus"])
        # binpack takes the most used node that fits; spread the least used.
        c0 = tasks[0]
        if used[c0["current"]["node"]] != most:
            fail("current (binpack) put cand-0 on %s (%d used), not on the most used (%d): %s"
                 % (c0["current"]["node"], used[c0["current"]["node"]], most, used))
        if used[c0["candidate"]["node"]] != least:
            fail("candidate (spread) put cand-0 on %s (%d used), not on a least used one (%d): %s"
                 % (c0["candidate"]["node"], used[c0["candidate"]["node"]], least, used))
        if len(c0["current"]["gpus"]) != 1 or len(tasks[1]["current"]["gpus"]) != 2:
            fail("GPU counts of the placements: %r" % tasks)
        if c0["current"]["node"] == c0["candidate"]["node"]:
            fail("cand-0 on the same node under both policies: %r" % c0)
        if moved < 1 or body["moved"] != moved:
            fail("moved (tasks placed differently): want %d, got %r" % (moved, body["moved"]))
        # Per-node breakdowns.
        for t in tasks:
            nodes = t.get("nodes")
            if not isinstance(nodes, list) or sorted(n.get("node") for n in nodes) != sorted(NODES):
                fail("%s: want a breakdown for each of %s, got %r" % (t["name"], NODES, nodes))
            for n in nodes:
                for side, plugin, absent in (("current", "binpack", "spread"),
                                             ("candidate", "spread", "binpack")):
                    b = n.get(side)
                    if not isinstance(b, dict) or not isinstance(b.get("feasible"), bool) or \
                            not isinstance(b.get("reason"), str) or not isinstance(b.get("scores"), dict):
                        fail("%s node %s %s breakdown: %r" % (t["name"], n.get("node"), side, b))
                    if not b["feasible"]:
                        # cand-0 (1 GPU) fits everywhere; cand-1 (2 GPUs) comes
                        # after cand-0 and may not fit the fullest node.
                        if t["name"] == "cand-0" or not b["reason"]:
                            fail("%s: node %s %s infeasible (%r)" % (t["name"], n["node"], side, b["reason"]))
                        if b["scores"]:
                            fail("%s: infeasible node %s has scores %r" % (t["name"], n["node"], b["scores"]))
                        continue
                    sc = b["scores"].get(plugin)
                    if not isinstance(sc, dict) or not num(sc.get("raw")) or not num(sc.get("weighted")):
                        fail("%s node %s %s: no %s raw/weighted score: %r" % (t["name"], n["node"], side, plugin, b["scores"]))
                    if not 0 <= sc["raw"] <= 100:
                        fail("%s score out of 0..100: %r" % (plugin, sc))
                    if absent in b["scores"]:
                        fail("%s node %s %s: disabled plugin %s scored" % (t["name"], n["node"], side, absent))
        by_node = {n["node"]: n for n in c0["nodes"]}
        full = max(used, key=lambda k: used[k])
        empty = min(used, key=lambda k: used[k])
        if not by_node[full]["current"]["scores"]["binpack"]["raw"] > by_node[empty]["current"]["scores"]["binpack"]["raw"]:
            fail("binpack must score the fuller node %s above %s: %r" % (full, empty, c0["nodes"]))
        if not by_node[empty]["candidate"]["scores"]["spread"]["raw"] > by_node[full]["candidate"]["scores"]["spread"]["raw"]:
            fail("spread must score the emptier node %s above %s" % (empty, full))

    def default_is_pending_queue():
        body = expect(srv.call("POST", API + "/scheduler/preview", SPREAD), 200)
        want = [t["id"] for t in st["pending"]]
        got = [t.get("id") for t in body["tasks"]]
        if got != want:
            fail("without tasks the preview must run the pending queue by priority then age: "
                 "want ids %s, got %s" % (want, got))
        for t in body["tasks"]:
            for side in ("current", "candidate"):
                p = t[side]
                if p.get("node") is not None or not str(p.get("reason", "")).startswith("0/4 nodes available"):
                    fail("pending task %s under %s: want node null and a '0/4 nodes available' reason, got %r"
                         % (t.get("name"), side, p))
        for side in ("current", "candidate"):
            if body[side]["scheduled"] != 0 or body[side]["unschedulable"] != len(want):
                fail("%s counts for the unplaceable queue: %r" % (side, body[side]))
        if body["moved"] != 0:
            fail("nothing placed, nothing moved: %r" % body["moved"])
        for t in body["tasks"]:
            for n in t.get("nodes", []):
                for side in ("current", "candidate"):
                    if n[side]["feasible"] or not n[side]["reason"]:
                        fail("node %s must be infeasible with a reason for %s: %r" % (n["node"], t["name"], n[side]))

    def explain_and_limits():
        body = expect(srv.call("POST", API + "/scheduler/preview",
                               dict(SPREAD, tasks=[gpu_task("e-0")], explain=False)), 200)
        if body["tasks"][0].get("nodes"):
            fail("explain=false must leave the per-node breakdowns out: %r" % body["tasks"][0]["nodes"])
        many = [{"name": "m-%d" % i, "requests": {"cpu_milli": 100}} for i in range(60)]
        body = expect(srv.call("POST", API + "/scheduler/preview", dict(SPREAD, tasks=many)), 200)
        if len(body["tasks"]) != 60:
            fail("60 tasks in, %d out" % len(body["tasks"]))
        for i, t in enumerate(body["tasks"]):
            has = bool(t.get("nodes"))
            if has != (i < 50):
                fail("per-node breakdowns for the first 50 tasks only; task %d %s one" % (i, "has" if has else "lacks"))
        if body["current"]["scheduled"] != 60 or body["candidate"]["scheduled"] != 60:
            fail("60 small CPU tasks fit: %r / %r" % (body["current"], body["candidate"]))
        # Weights: the candidate's binpack weight 3 (current: 1) triples its
        # weighted score and leaves the raw one alone.
        body = expect(srv.call("POST", API + "/scheduler/preview",
                               {"plugins": {"binpack": {"weight": 3}}, "tasks": [gpu_task("w-0")]}), 200)
        nonzero = 0
        for n in body["tasks"][0]["nodes"]:
            cur = n["current"]["scores"]["binpack"]
            cand = n["candidate"]["scores"]["binpack"]
            nonzero += cur["weighted"] != 0
            if abs(cand["raw"] - cur["raw"]) > 1e-9 or abs(cand["weighted"] - 3 * cur["weighted"]) > 1e-6:
                fail("weights: current (weight 1) %r, candidate (weight 3) %r" % (cur, cand))
        if not nonzero:
            fail("every binpack weighted score is 0: the weight check proves nothing")

    def refused_candidates():
        expect_error(srv.call("POST", API + "/scheduler/preview", {"plugins": {"spread": {"enabled": True}}}),
                     409, "conflict", mentions="binpack")
        expect_error(srv.call("POST", API + "/scheduler/preview", {"plugins": {"nosuch": {"enabled": True}}}),
                     404, "not_found")
        expect_error(srv.call("POST", API + "/scheduler/preview", {"scheduler": {"load_threshold": 1.5}}),
                     400, "invalid_argument", mentions="load_threshold")
        # CPU-heavy: for admins and operators, not viewers.
        viewer = srv.make_token("viewer")["token"]
        expect_error(srv.call("POST", API + "/scheduler/preview", SPREAD, token=viewer), 403,
                     "forbidden")
        operator = srv.make_token("operator")["token"]
        expect(srv.call("POST", API + "/scheduler/preview", SPREAD, token=operator), 200)

    def nothing_changed():
        time.sleep(0.5)
        after = live_state()
        for k in st["before"]:
            if after[k] != st["before"][k]:
                fail("the preview changed the live %s: %s -> %s" % (
                    k, str(st["before"][k])[:400], str(after[k])[:400]))

    if c.run("prepare: 4 nodes x 8 GPUs, 6 placed, 4 pending", prepare):
        c.run("binpack vs spread place differently, with per-node scores", placements_differ)
        c.run("default tasks: the pending queue, by priority", default_is_pending_queue)
        c.run("explain=false, 50-task breakdown limit, weights", explain_and_limits)
        c.run("refused candidates: 409 / 404 / 400", refused_candidates)
        c.run("nothing in the live cluster changed", nothing_changed)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
