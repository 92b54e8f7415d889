#!/usr/bin/python3
"""Tasks and nodes against docs/API.md: a 64-GPU cluster (8 nodes x 8 GPUs)
registered over the API, 200 single-GPU tasks submitted concurrently (each on
its own connection), exactly 64 scheduled and the rest pending with the
"0/8 nodes available" reason; list filters and pagination; task events;
cancel frees the GPU for a pending task; batch submission is all or nothing;
a restart keeps tasks and allocations.

usage: test_tasks.py HETEROFLOW_BINARY
"""
import collections
import os
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, RFC3339, Checks, Server, expect, expect_error, fail,  # noqa: E402
                   main_guard, stable_tasks, wait_until)

NODES = ["gpu-t%d" % i for i in range(8)]
N_TASKS = 200
TASK_FIELDS = ("id", "name", "group", "group_placement", "secret_env", "priority", "kind", "requests", "rdma_required",
               "depends_on", "preemptible", "command", "env", "state", "node", "pending_reason",
               "allocation", "created_at", "updated_at")


def submission(i):
    return {"name": "t-%03d" % i, "group": "ga" if i % 2 == 0 else "gb", "priority": i % 4,
            "kind": "batch", "requests": {"cpu_milli": 1000, "memory_mib": 4096, "gpu": 1},
            "command": ["sleep", "3600"], "env": {"I": str(i)}}


def settle(srv, timeout=25, quiet=1.5):
    """Waits until the task states stop changing; returns the tasks."""
    deadline = time.monotonic() + timeout
    last, since = None, time.monotonic()
    while True:
        tasks = srv.tasks()
        key = sorted((t["id"], t["state"], t.get("node")) for t in tasks)
        now = time.monotonic()
        if key != last:
            last, since = key, now
        elif now - since >= quiet:
            return srv.tasks_full()
        if now > deadline:
            fail("task states still changing after %d s" % timeout)
        time.sleep(0.2)


def by_state(tasks):
    out = collections.defaultdict(list)
    for t in tasks:
        out[t["state"]].append(t)
    return out


def check_task_shape(t, what):
    for k in TASK_FIELDS:
        if k not in t:
            fail("%s: task lacks %r: %r" % (what, k, t))
    if not isinstance(t["id"], int) or isinstance(t["id"], bool):
        fail("%s: id must be an integer: %r" % (what, t["id"]))
    for k in ("created_at", "updated_at"):
        if not isinstance(t[k], str) or not RFC3339.match(t[k]) or not t[k].endswith("Z"):
            fail("%s: %s must be RFC 3339 UTC: %r" % (what, k, t[k]))
    if t["state"] not in ("pending", "scheduled", "running", "succeeded", "failed", "cancelled"):
        fail("%s: state %r" % (what, t["state"]))


def alloc_gpus(t):
    a = t.get("allocation")
    if not isinstance(a, dict):
        fail("task %s (%s) has no allocation object: %r" % (t["id"], t["state"], a))
    node = a.get("node", t.get("node"))
    if node != t.get("node"):
        fail("task %s: allocation.node %r != node %r" % (t["id"], node, t.get("node")))
    gpus = a.get("gpus")
    if not isinstance(gpus, list):
        fail("task %s: allocation.gpus must be a list: %r" % (t["id"], a))
    return [(node, g["index"], g["milli"]) for g in gpus]


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("tasks")
    st = {}

    def register():
        for i, name in enumerate(NODES):
            body = srv.register_node(name, gpus=8, topology={"zone": "z1", "switch": "s1",
                                                             "rack": "r%d" % (i // 4)},
                                     expect_status=201)
            if body.get("name") != name or len(body.get("gpus", [])) != 8:
                fail("POST /nodes answer: %r" % body)
            if body.get("condition") != "Ready":
                fail("a registered node must be Ready: %r" % body.get("condition"))
        # Registering again replaces (200), never duplicates.
        srv.register_node(NODES[0], gpus=8, topology={"zone": "z1", "switch": "s1", "rack": "r0"},
                          expect_status=200)
        nodes = expect(srv.get(API + "/nodes"), 200)["nodes"]
        if sorted(n["name"] for n in nodes) != sorted(NODES):
            fail("GET /nodes: %s" % [n["name"] for n in nodes])
        if sum(len(n["gpus"]) for n in nodes) != 64:
            fail("the cluster must have 64 GPUs")

    def submit_concurrently():
        results = [None] * N_TASKS
        errors = []
        lock = threading.Lock()
        next_i = [0]

        def worker():
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= N_TASKS:
                    return
                try:
                    results[i] = srv.call("POST", API + "/tasks", submission(i))
                except Exception as e:  # noqa: BLE001
                    with lock:
                        errors.append("t-%03d: %s" % (i, e))

        threads = [threading.Thread(target=worker) for _ in range(40)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        print("  200 submissions in %.1f s" % (time.monotonic() - t0))
        if errors:
            fail("submissions without an answer: %s" % errors[:5])
        ids = {}
        for i, r in enumerate(results):
            body = expect(r, 201, "submit t-%03d" % i)
            if not isinstance(body.get("id"), int) or body.get("state") is None:
                fail("submission answer without id/state: %r" % body)
            if body["name"] != "t-%03d" % i or body["group"] != submission(i)["group"]:
                fail("submission answer for t-%03d: %r" % (i, body))
            if body["state"] not in ("pending", "scheduled"):
                fail("a new task is %r" % body["state"])
            ids[body["id"]] = body["name"]
        if len(ids) != N_TASKS:
            fail("task ids must be unique: %d distinct of %d" % (len(ids), N_TASKS))
        st["ids"] = ids
        st["answers"] = [r.body for r in results]

    def task_documents():
        # Every place a task is answered carries the documented fields.
        problems = []
        first = min(st["ids"])
        for what, doc in (("POST /tasks answer", st["answers"][0]),
                          ("GET /tasks list entry", expect(srv.get(API + "/tasks?limit=1"), 200)["tasks"][0]),
                          ("GET /tasks/{id}", expect(srv.get(API + "/tasks/%d" % first), 200))):
            try:
                check_task_shape(doc, what)
            except Exception as e:  # noqa: BLE001 - collect them all
                problems.append(str(e))
        if problems:
            fail("; ".join(problems))

    def exactly_64_scheduled():
        tasks = settle(srv)
        st["tasks"] = tasks
        groups = by_state(tasks)
        counts = {k: len(v) for k, v in groups.items()}
        if len(tasks) != N_TASKS or counts.get("scheduled") != 64 or counts.get("pending") != 136:
            fail("want 64 scheduled and 136 pending of 200, got %s (total %d)" % (counts, len(tasks)))
        for t in groups["pending"]:
            if not str(t["pending_reason"]).startswith("0/8 nodes available"):
                fail("pending task %s: reason %r must start with '0/8 nodes available'"
                     % (t["id"], t["pending_reason"]))
            if t["node"] is not None or t["allocation"] is not None:
                fail("pending task %s has a node or an allocation: %r" % (t["id"], t))
        seen = collections.Counter()
        per_node = collections.Counter()
        for t in groups["scheduled"]:
            if t["node"] not in NODES:
                fail("scheduled task %s on unknown node %r" % (t["id"], t["node"]))
            g = alloc_gpus(t)
            if len(g) != 1 or g[0][2] != 1000:
                fail("task %s wants one whole GPU, got %r" % (t["id"], g))
            seen[g[0][:2]] += 1
            per_node[t["node"]] += 1
        twice = [k for k, n in seen.items() if n > 1]
        if twice:
            fail("GPUs allocated twice: %s" % twice)
        if any(per_node[n] != 8 for n in NODES):
            fail("each node must hold 8 tasks: %s" % dict(per_node))
        nodes = {n["name"]: n for n in expect(srv.get(API + "/nodes"), 200)["nodes"]}
        for name in NODES:
            n = nodes[name]
            if n.get("allocated", {}).get("gpu_milli") != 8000:
                fail("node %s allocated: %r" % (name, n.get("allocated")))
            if sorted(n.get("tasks", [])) != sorted(t["id"] for t in groups["scheduled"]
                                                     if t["node"] == name):
                fail("node %s tasks %r do not match the tasks scheduled on it" % (name, n.get("tasks")))
            for g in n["gpus"]:
                if g.get("allocated_milli") != 1000:
                    fail("node %s GPU %s allocated_milli %r" % (name, g["index"], g.get("allocated_milli")))

    def pagination():
        all_ids = set(st["ids"])
        for limit in (1, 7, 64, 100, 1000):
            pages = 0
            got = []
            after = None
            while True:
                url = API + "/tasks?limit=%d" % limit + ("&after=%s" % after if after is not None else "")
                body = expect(srv.get(url), 200)
                pages += 1
                if len(body["tasks"]) > limit:
                    fail("%s returned %d tasks" % (url, len(body["tasks"])))
                got.extend(t["id"] for t in body["tasks"])
                if body.get("next") is None:
                    break
                after = body["next"]
                if pages > 250:
                    fail("pagination does not end (limit %d)" % limit)
            dups = [i for i, n in collections.Counter(got).items() if n > 1]
            if dups or set(got) != all_ids:
                fail("limit=%d: %d ids, %d duplicates, missing %s, extra %s" % (
                    limit, len(got), len(dups), sorted(all_ids - set(got))[:5],
                    sorted(set(got) - all_ids)[:5]))
            if limit == 7 and pages != 29:
                fail("200 tasks at 7 a page must take 29 pages, took %d" % pages)
        # Default limit 100.
        body = expect(srv.get(API + "/tasks"), 200)
        if len(body["tasks"]) != 100 or body.get("next") is None:
            fail("GET /tasks (default limit 100): %d tasks, next %r" % (len(body["tasks"]), body.get("next")))

    def filters():
        tasks = st["tasks"]
        cases = [("state=scheduled", lambda t: t["state"] == "scheduled"),
                 ("state=pending", lambda t: t["state"] == "pending"),
                 ("node=" + NODES[3], lambda t: t["node"] == NODES[3]),
                 ("group=ga", lambda t: t["group"] == "ga"),
                 ("priority=2", lambda t: t["priority"] == 2),
                 ("state=pending&group=gb", lambda t: t["state"] == "pending" and t["group"] == "gb"),
                 ("state=scheduled&priority=0", lambda t: t["state"] == "scheduled" and t["priority"] == 0),
                 ("group=nosuch", lambda t: False)]
        for q, pred in cases:
            want = sorted(t["id"] for t in tasks if pred(t))
            for limit in (9, 1000):
                got = srv.list_all(API + "/tasks?" + q, "tasks", limit=limit)
                ids = [t["id"] for t in got]
                if sorted(ids) != want or len(set(ids)) != len(ids):
                    fail("GET /tasks?%s&limit=%d: want %d tasks, got %d (%d distinct)"
                         % (q, limit, len(want), len(ids), len(set(ids))))
                if not all(pred(t) for t in got):
                    fail("GET /tasks?%s returned a task that does not match" % q)
        if not any(t["node"] == NODES[3] for t in tasks):
            fail("precondition: tasks on %s" % NODES[3])

    def task_events():
        groups = by_state(st["tasks"])
        for t in (groups["scheduled"][0], groups["pending"][0]):
            body = expect(srv.get(API + "/tasks/%d" % t["id"]), 200)
            check_task_shape(body, "GET /tasks/%d" % t["id"])
            ev = body.get("events")
            if not isinstance(ev, list) or not ev:
                fail("GET /tasks/%d: want a non-empty events list, got %r" % (t["id"], ev))
            for e in ev:
                if not isinstance(e, dict) or set(("time", "kind", "message")) - set(e):
                    fail("event lacks time/kind/message: %r" % e)
                if not RFC3339.match(str(e["time"])):
                    fail("event time is not RFC 3339: %r" % e)
            for k in ("name", "state", "node", "allocation", "priority", "group"):
                if body[k] != t[k]:
                    fail("GET /tasks/%d %s %r differs from the list's %r" % (t["id"], k, body[k], t[k]))
            if body["requests"].get("gpu") != 1 or body["command"] != ["sleep", "3600"]:
                fail("GET /tasks/%d does not echo the submission: %r" % (t["id"], body))
        expect_error(srv.get(API + "/tasks/987654321"), 404, "not_found")

    def cancel_frees_gpu():
        tasks = st["tasks"]
        groups = by_state(tasks)
        victim = groups["scheduled"][0]
        (node, index, _), = alloc_gpus(victim)
        pending_before = {t["id"] for t in groups["pending"]}
        body = expect(srv.call("POST", API + "/tasks/%d/cancel" % victim["id"], raw_body=b""), 200)
        if body.get("state") != "cancelled" or body.get("allocation") is not None:
            fail("cancel answer: want state cancelled and no allocation, got %r" % body)

        def replaced():
            now = srv.tasks_full()
            for t in now:
                if t["id"] in pending_before and t["state"] == "scheduled":
                    return t
            return None
        newcomer = wait_until(replaced, 15, "a pending task to take the cancelled task's GPU")
        (n2, i2, _), = alloc_gpus(newcomer)
        if (n2, i2) != (node, index):
            fail("the freed GPU was %s/%s but the pending task went to %s/%s (no other GPU was free)"
                 % (node, index, n2, i2))
        got = expect(srv.get(API + "/tasks/%d" % victim["id"]), 200)
        if got["state"] != "cancelled" or got["allocation"] is not None:
            fail("cancelled task after the fact: %r" % got)
        # DELETE is the same as cancel; cancelling a pending task just removes it from the queue.
        second = [t for t in by_state(srv.tasks_full())["scheduled"] if t["id"] != newcomer["id"]][0]
        expect(srv.call("DELETE", API + "/tasks/%d" % second["id"]), 200)
        wait_until(lambda: len(by_state(srv.tasks())["scheduled"]) == 64, 15,
                   "64 scheduled again after DELETE")
        p = [t for t in by_state(srv.tasks())["pending"]][0]
        body = expect(srv.call("POST", API + "/tasks/%d/cancel" % p["id"], raw_body=b""), 200)
        if body.get("state") != "cancelled":
            fail("cancel of a pending task: %r" % body)
        # Roles: a viewer may not cancel, an operator may.
        viewer = srv.make_token("viewer")["token"]
        operator = srv.make_token("operator")["token"]
        q = by_state(srv.tasks())["pending"][0]
        expect_error(srv.call("POST", API + "/tasks/%d/cancel" % q["id"], raw_body=b"", token=viewer),
                     403, "forbidden")
        expect_error(srv.call("POST", API + "/tasks", {"name": "by-viewer"}, token=viewer), 403,
                     "forbidden")
        expect(srv.call("POST", API + "/tasks/%d/cancel" % q["id"], raw_body=b"", token=operator), 200)
        expect(srv.call("GET", API + "/tasks?limit=1", token=viewer), 200)
        final = by_state(settle(srv))
        if len(final["scheduled"]) != 64 or len(final["cancelled"]) != 4:
            fail("after the cancels: %s" % {k: len(v) for k, v in final.items()})

    def batch_all_or_nothing():
        before = stable_tasks(srv.tasks())
        good = [{"name": "batch-%d" % i, "requests": {"gpu": 1}} for i in range(3)]
        for bad_index, bad, field in [
                (2, {"name": "batch-bad", "requests": {"gpu": "one"}}, "tasks[2].requests.gpu"),
                (0, {"name": "Batch Bad"}, "tasks[0].name"),
                (1, {"name": "batch-x", "kind": "service"}, "tasks[1].kind"),
                (3, {"name": "batch-y", "requests": {"gpu": 1, "gpu_milli": 1001}},
                 "tasks[3].requests.gpu_milli")]:
            tasks = list(good)
            tasks.insert(bad_index, bad)
            r = srv.call("POST", API + "/tasks/batch", {"tasks": tasks})
            expect_error(r, 400, "invalid_argument", mentions=field,
                         what="batch with a bad tasks[%d]" % bad_index)
        after = stable_tasks(srv.tasks())
        if after != before:
            fail("a refused batch created or changed tasks: %d -> %d tasks" % (len(before), len(after)))
        big = [{"name": "big-%d" % i} for i in range(1001)]
        expect_error(srv.call("POST", API + "/tasks/batch", {"tasks": big}), 400, "invalid_argument",
                     mentions="tasks")
        r = srv.call("POST", API + "/tasks/batch", {"tasks": good + [{"name": "batch-cpu"}]})
        body = expect(r, 201, "a valid batch")
        got = body.get("tasks")
        if not isinstance(got, list) or [t.get("name") for t in got] != \
                ["batch-0", "batch-1", "batch-2", "batch-cpu"]:
            fail("batch answer must list the tasks in order: %r" % body)
        if len({t["id"] for t in got}) != 4:
            fail("batch ids not distinct: %r" % [t["id"] for t in got])
        if len(srv.tasks()) != len(before) + 4:
            fail("a batch of 4 must create 4 tasks")
        # The CPU-only task fits; the GPU ones wait.
        final = {t["name"]: t for t in settle(srv)}
        if final["batch-cpu"]["state"] != "scheduled":
            fail("a CPU-only task must be placed on a full-GPU cluster: %r" % final["batch-cpu"])
        for i in range(3):
            t = final["batch-%d" % i]
            if t["state"] != "pending" or not t["pending_reason"].startswith("0/8 nodes available"):
                fail("batch-%d: %r %r" % (i, t["state"], t["pending_reason"]))
        for t in got:  # last, so that a missing field does not hide the rest
            check_task_shape(t, "batch answer")

    def restart_keeps_state():
        def view():
            return sorted((t["id"], t["name"], t["state"], t["node"],
                           str(sorted(alloc_gpus(t))) if t["allocation"] else None)
                          for t in srv.tasks_full())
        before = view()
        nodes_before = {n["name"]: (n["allocated"], sorted(n["tasks"]))
                        for n in expect(srv.get(API + "/nodes"), 200)["nodes"]}
        for hard in (False, True):
            srv.restart(hard=hard)
            wait_until(lambda: srv.get("/readyz", token=None).status == 200, 15, "/readyz")
            time.sleep(1.0)  # give a (wrong) rescheduling the chance to show
            after = view()
            if after != before:
                diff = sorted(set(before) ^ set(after))[:6]
                fail("tasks after a %s restart differ: %s" % ("kill -9" if hard else "SIGTERM", diff))
            nodes_after = {n["name"]: (n["allocated"], sorted(n["tasks"]))
                           for n in expect(srv.get(API + "/nodes"), 200)["nodes"]}
            if nodes_after != nodes_before:
                fail("node allocations after a restart differ")
        # And it still schedules: cancel one, a pending one takes its place.
        sched = [t for t in srv.tasks_full() if t["state"] == "scheduled" and t["allocation"]["gpus"]][0]
        expect(srv.call("POST", API + "/tasks/%d/cancel" % sched["id"], raw_body=b""), 200)
        wait_until(lambda: sum(1 for t in srv.tasks_full() if t["state"] == "scheduled"
                               and t["allocation"]["gpus"]) == 64, 15,
                   "a pending task scheduled after the restart")

    ok = c.run("register 8 nodes x 8 GPUs", register)
    ok = ok and c.run("200 concurrent submissions answered 201", submit_concurrently)
    ok = ok and c.run("exactly 64 scheduled, 136 pending with the reason", exactly_64_scheduled)
    if ok:
        c.run("task documents carry every documented field", task_documents)
        c.run("pagination returns every task once", pagination)
        c.run("list filters", filters)
        c.run("GET /tasks/{id} with events", task_events)
        c.run("cancel frees the GPU for a pending task", cancel_frees_gpu)
        c.run("batch is all or nothing", batch_all_or_nothing)
        c.run("restart keeps tasks and allocations", restart_keeps_state)
    else:
        for name in ("pagination returns every task once", "list filters", "GET /tasks/{id} with events",
                     "cancel frees the GPU for a pending task", "batch is all or nothing",
                     "restart keeps tasks and allocations"):
            c.failed.append(name)
            print("FAIL: %s: not run, an earlier step failed" % name)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
