#!/usr/bin/python3
"""The agent protocol of docs/AGENT.md, spoken by the test itself: register,
heartbeats with usage, the long poll of a node's tasks, task status; the
roles that may use it; bad agent input refused with nothing changed; a node
whose heartbeats stop becoming NotReady with its tasks queued again (and
placed elsewhere), and Ready again when heartbeats resume; measured GPU
utilisation above gpu_load_threshold keeping new GPU tasks away.

usage: test_agent_protocol.py HETEROFLOW_BINARY
"""
import os
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   node_inventory, wait_until)

GRACE_S = 2


def main(binary, tmp):
    # Fenced tasks move fence_after + fence_grace + 2 s after the last heartbeat.
    srv = Server(binary, os.path.join(tmp, "data"),
                 args=["--node-grace-period", str(GRACE_S), "--fence-after", "2",
                       "--fence-grace", "0"])
    c = Checks("agent protocol")
    operator = srv.make_token("operator")["token"]
    st = {}
    agent_tokens = {}

    def token_for(node):
        """An agent token bound to `node`, made once."""
        if node not in agent_tokens:
            agent_tokens[node] = srv.make_token("agent", node=node)["token"]
        return agent_tokens[node]

    def call(method, path, body=None, token=None):
        # As an agent does: with the token of the node the request is for.
        node = None
        if isinstance(body, dict):
            node = body.get("node")
            if isinstance(node, dict):
                node = node.get("name")
        elif "node=" in path:
            node = path.split("node=")[1].split("&")[0]
        if token is None and isinstance(node, str) and node:
            token = token_for(node if node != "Bad Name" else "ag-1")
        return srv.call(method, API + path, body, token=token or token_for("ag-1"))

    def task(tid):
        return expect(srv.get(API + "/tasks/%d" % tid), 200)

    def register_and_run():
        got = expect(call("POST", "/agent/register", {"node": node_inventory("ag-1", gpus=2, rdma=True)}), 200)
        if got["node"] != "ag-1" or got["heartbeat_interval_s"] < 1:
            fail("register answer: %s" % got)
        first = expect(call("GET", "/agent/assignments?node=ag-1&version=0&wait_s=1"), 200)
        if first["tasks"]:
            fail("a new node has tasks: %s" % first)
        t = expect(srv.call("POST", API + "/tasks", {"name": "ag-job", "requests": {"gpu": 1},
                                                     "rdma_required": True,
                                                     "command": ["sh", "-c", "true"]}), 201)
        # The long poll wakes when the task is placed, well before wait_s.
        t0 = time.monotonic()
        got = expect(call("GET", "/agent/assignments?node=ag-1&version=%d&wait_s=20" % first["version"]), 200)
        if time.monotonic() - t0 > 5:
            fail("the long poll did not wake on the placement")
        if [a["id"] for a in got["tasks"]] != [t["id"]]:
            fail("assignments: %s" % got)
        a = got["tasks"][0]
        if a["allocation"]["rdma_device"] != "mlx5_0" or len(a["allocation"]["gpus"]) != 1:
            fail("allocation: %s" % a["allocation"])
        if a["task"]["command"] != ["sh", "-c", "true"]:
            fail("task spec: %s" % a["task"])
        # A service task's report carries where it listens (docs/AGENT.md, "Services").
        expect(call("POST", "/agent/status", {"node": "ag-1", "id": t["id"], "state": "running",
                                              "port": 40123, "host": "10.1.2.3"}), 200)
        if task(t["id"])["state"] != "running":
            fail("not running after the report")
        # Output shipped by the agent, read back through the API.
        expect(call("POST", "/agent/logs", {"node": "ag-1", "id": t["id"], "offset": 0,
                                            "data": "line one\n"}), 200)
        got_size = expect(call("POST", "/agent/logs", {"node": "ag-1", "id": t["id"], "offset": 9,
                                                       "data": "line two\n"}), 200)["size"]
        if got_size != 18:
            fail("log size %s" % got_size)
        stale = call("POST", "/agent/logs", {"node": "ag-1", "id": t["id"], "offset": 9, "data": "dup"})
        if stale.status != 409 or stale.body.get("size") != 18:
            fail("a repeated offset: %s" % stale.short())
        logs = srv.get(API + "/tasks/%d/logs" % t["id"], token=srv.make_token("viewer")["token"])
        if logs.status != 200 or logs.raw != b"line one\nline two\n":
            fail("logs: %s %r" % (logs.status, logs.raw))
        cli = subprocess.run([binary, "logs", str(t["id"]), "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token", srv.token], capture_output=True, timeout=20)
        if cli.returncode != 0 or cli.stdout != b"line one\nline two\n":
            fail("heteroflow logs: %d %r %r" % (cli.returncode, cli.stdout, cli.stderr))
        tail = srv.get(API + "/tasks/%d/logs?offset=9" % t["id"])
        if tail.raw != b"line two\n" or tail.header("X-Log-Size") != "18":
            fail("logs from offset 9: %r %s" % (tail.raw, tail.header("X-Log-Size")))
        expect(call("POST", "/agent/status", {"node": "ag-1", "id": t["id"], "state": "failed",
                                              "exit_code": 7}), 200)
        done = task(t["id"])
        if done["state"] != "failed" or done["allocation"] is not None:
            fail("after exit 7: %s" % done["state"])
        if "exit code 7" not in done["events"][-1]["message"]:
            fail("events: %s" % done["events"])
        expect_error(call("POST", "/agent/status", {"node": "ag-1", "id": t["id"], "state": "running"}),
                     409, "conflict")
        follow = subprocess.run([binary, "logs", "-f", str(t["id"]), "--server",
                                 "http://127.0.0.1:%d" % srv.port, "--token", srv.token],
                                capture_output=True, timeout=20)
        if follow.returncode != 0 or follow.stdout != b"line one\nline two\n":
            fail("heteroflow logs -f of an ended task: %d %r" % (follow.returncode, follow.stdout))
        after = expect(call("GET", "/agent/assignments?node=ag-1&version=%d&wait_s=1" % got["version"]), 200)
        if after["tasks"]:
            fail("the ended task is still assigned: %s" % after)

    def gang_barrier():
        # A job's members start together: each is held ("launch.hold") until
        # every placed member's agent reported it ready, then every member's
        # list changes with the hold cleared (docs/JOBS.md, the start barrier).
        nodes = ["gb-1", "gb-2"]
        versions = {}
        for n in nodes:
            expect(call("POST", "/agent/register",
                        {"node": node_inventory(n, gpus=2, model="H100-SXM")}), 200)
            versions[n] = expect(call("GET", "/agent/assignments?node=%s&version=0&wait_s=1" % n),
                                 200)["version"]
        stop = threading.Event()

        def beat():  # both nodes stay Ready
            while not stop.is_set():
                for n in nodes:
                    call("POST", "/agent/heartbeat", {"node": n})
                stop.wait(0.5)
        th = threading.Thread(target=beat, daemon=True)
        th.start()
        try:
            barrier(nodes, versions)
        finally:
            stop.set()
            th.join()

    def barrier(nodes, versions):
        # The earlier checks' tasks leave: the two nodes' GPUs are the jobs'.
        for t in srv.tasks_full():
            if t["state"] in ("pending", "scheduled", "running") and not t.get("job"):
                expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)
        job = expect(srv.call("POST", API + "/jobs", {
            "name": "barrier", "roles": [{"name": "w", "replicas": 2, "command": ["true"],
                                          "requests": {"gpu": 2, "gpu_models": ["H100-SXM"]}}]}),
            201)

        def poll(n, wait_s=20):
            got = expect(call("GET", "/agent/assignments?node=%s&version=%d&wait_s=%d"
                              % (n, versions[n], wait_s)), 200)
            versions[n] = got["version"]
            return got["tasks"]

        held = {}
        for n in nodes:
            tasks = poll(n, wait_s=5)
            if not tasks:
                fail("%s: no member placed: %s" % (n, expect(srv.get(API + "/jobs/%d" % job["id"]), 200)))
            if len(tasks) != 1 or tasks[0]["launch"].get("hold") is not True:
                fail("%s: a placed member is not held: %s" % (n, tasks))
            held[n] = tasks[0]["id"]
        expect(call("POST", "/agent/status", {"node": "gb-1", "id": held["gb-1"], "state": "ready",
                                              "message": "ready"}), 200)
        # One member ready: nothing changes for either node.
        for n in nodes:
            if poll(n, wait_s=1)[0]["launch"]["hold"] is not True:
                fail("%s: released with one member of two ready" % n)
        if task(held["gb-1"])["state"] != "scheduled":
            fail("a ready member is %s" % task(held["gb-1"])["state"])
        expect(call("POST", "/agent/status", {"node": "gb-2", "id": held["gb-2"], "state": "ready",
                                              "message": "ready"}), 200)
        for n in nodes:
            tasks = poll(n, wait_s=5)
            if tasks[0]["launch"]["hold"] is not False:
                fail("%s: still held once every member is ready: %s" % (n, tasks[0]["launch"]))
        got = expect(srv.get(API + "/jobs/%d" % job["id"]), 200)
        if "released" not in [e["kind"] for e in got["events"]]:
            fail("no released event: %s" % got["events"])
        expect_error(call("POST", "/agent/status", {"node": "gb-1", "id": held["gb-1"],
                                                    "state": "ready"}), 400, "invalid_argument",
                     mentions=("message",))
        expect(srv.call("POST", API + "/jobs/%d/cancel" % job["id"], {}), 200)
        # An agent that does not know holds starts its member at once and
        # reports it running: that counts as ready, whichever comes first.
        job = expect(srv.call("POST", API + "/jobs", {
            "name": "mixed-agents", "roles": [{"name": "w", "replicas": 2, "command": ["true"],
                                               "requests": {"gpu": 2, "gpu_models": ["H100-SXM"]}}]}),
            201)
        held = {}
        for n in nodes:
            held[n] = wait_until(lambda: poll(n, wait_s=1), 10, "%s's member" % n)[0]["id"]
        expect(call("POST", "/agent/status", {"node": "gb-1", "id": held["gb-1"], "state": "ready",
                                              "message": "ready"}), 200)
        expect(call("POST", "/agent/status", {"node": "gb-2", "id": held["gb-2"], "state": "running"}),
               200)
        if poll("gb-1", wait_s=5)[0]["launch"]["hold"] is not False:
            fail("a ready member stays held once its mate runs")
        expect(srv.call("POST", API + "/jobs/%d/cancel" % job["id"], {}), 200)

    def address_survives_restart():
        # MASTER_ADDR is the address the node's agent registered with; a
        # restarted server still knows it before the agent registers again.
        addresses = {"gb-1": "10.9.8.7", "gb-2": "fd00::8"}
        for n, a in addresses.items():
            expect(call("POST", "/agent/register", {"node": node_inventory(n, gpus=2, model="H100-SXM"),
                                                    "address": a}), 200)
        srv.restart()
        for n, a in addresses.items():
            if expect(srv.get(API + "/nodes/" + n), 200)["address"] != a:
                fail("%s's address after a restart: %s" % (n, expect(srv.get(API + "/nodes/" + n), 200)))
        job = expect(srv.call("POST", API + "/jobs", {
            "name": "after-restart", "roles": [{"name": "w", "replicas": 1, "command": ["true"],
                                                "requests": {"gpu": 2, "gpu_models": ["H100-SXM"]}}]}),
            201)
        member = wait_until(lambda: (lambda m: m["node"] and m)(
            expect(srv.get(API + "/jobs/%d" % job["id"]), 200)["members"][0]), 10, "the job placed")
        got = [t for t in expect(call("GET", "/agent/assignments?node=%s&version=0&wait_s=1" % member["node"]),
                                 200)["tasks"] if t["id"] == member["id"]]
        env = got[0]["launch"]["env"]
        want = addresses[member["node"]]
        if env["MASTER_ADDR"] != want or env["HETEROFLOW_HOSTS"] != want:
            fail("launch env after a restart on %s: %s" % (member["node"], env))
        expect(srv.call("POST", API + "/jobs/%d/cancel" % job["id"], {}), 200)

    def many_long_polls():
        # Far more waiting polls than the server's 16 handler threads: other
        # requests are still answered at once, and a placement wakes exactly
        # the poll of the node it went to.
        n = 100
        for i in range(n):  # declared by the admin: no heartbeats are expected from them
            srv.register_node("lp-%d" % i, gpus=1, model="LP-GPU")
        # A version the server never gave out is answered at once with the current one.
        versions = [expect(call("GET", "/agent/assignments?node=lp-%d&version=999999999" % i),
                           200)["version"] for i in range(n)]
        answers = {}
        lock = threading.Lock()

        def poll(i):
            t0 = time.monotonic()
            r = call("GET", "/agent/assignments?node=lp-%d&version=%d&wait_s=8" % (i, versions[i]))
            with lock:
                answers[i] = (time.monotonic() - t0, r)
        threads = [threading.Thread(target=poll, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        time.sleep(1.0)  # every poll is waiting now
        with lock:
            if answers:
                fail("polls answered before any change: %s" % sorted(answers))
        t0 = time.monotonic()
        for _ in range(20):
            expect(srv.get("/livez"), 200)
        if time.monotonic() - t0 > 2:
            fail("20 health checks took %.1f s with %d polls waiting" % (time.monotonic() - t0, n))
        # Only node lp-* have LP-GPU GPUs; binpack picks one of them.
        job = expect(srv.call("POST", API + "/tasks", {"name": "lp-job", "requests": {
            "gpu": 1, "gpu_models": ["LP-GPU"]}, "command": ["true"]}), 201)
        where = wait_until(lambda: task(job["id"])["node"], 5, "lp-job placed")
        woken = wait_until(lambda: [i for i in answers if answers[i][0] < 7] or None, 5,
                           "the placement to wake a poll")
        if woken != [int(where[3:])]:
            fail("placed on %s but woke polls %s" % (where, woken))
        got = answers[woken[0]][1]
        if got.status != 200 or [a["id"] for a in got.body["tasks"]] != [job["id"]]:
            fail("the woken poll: %s" % got.short())
        for t in threads:
            t.join(15)
        late = [i for i in range(n) if i not in answers or answers[i][1].status != 200]
        if late:
            fail("polls not answered 200 after their wait: %s" % late[:10])
        expect(srv.call("POST", API + "/tasks/%d/cancel" % job["id"]), 200)
        for i in range(n):
            expect(srv.call("DELETE", API + "/nodes/lp-%d" % i), (200, 204))

    def roles_and_bad_input():
        before = expect(srv.get(API + "/nodes"), 200)
        expect_error(srv.call("POST", API + "/agent/heartbeat", {"node": "ag-1"}, token=operator),
                     403, "forbidden")
        expect_error(srv.call("GET", API + "/tasks", token=token_for("ag-1")), 403, "forbidden")
        expect_error(call("POST", "/agent/register", {"node": {"name": "Bad Name"}}), 400,
                     "invalid_argument")
        expect_error(call("POST", "/agent/register", {"node": {"name": "x", "gpus": [{"index": "zero"}]}}),
                     400, "invalid_argument", mentions=["node.gpus[0].index"])
        expect_error(call("POST", "/agent/heartbeat", {"node": "nope"}), 404, "not_found")
        expect_error(call("POST", "/agent/heartbeat", {"node": "ag-1", "usage": {"cpu_load": 3}}),
                     400, "invalid_argument", mentions=["usage.cpu_load"])
        expect_error(call("POST", "/agent/status", {"node": "ag-1", "id": 1, "state": "done"}),
                     400, "invalid_argument")
        for bad in ({"port": 0}, {"port": 65536}, {"port": "80"}):
            expect_error(call("POST", "/agent/status", dict({"node": "ag-1", "id": 1, "state": "running"}, **bad)),
                         400, "invalid_argument", mentions=["port"])
        for bad in ({"host": "example.com"}, {"host": 10}, {"host": ""}):
            expect_error(call("POST", "/agent/status", dict({"node": "ag-1", "id": 1, "state": "running"}, **bad)),
                         400, "invalid_argument", mentions=["host"])
        expect_error(call("GET", "/agent/assignments?node=ag-1&wait_s=999"), 400, "invalid_argument")
        if expect(srv.get(API + "/nodes"), 200) != before:
            fail("refused agent input changed the nodes")

    def gpu_threshold():
        expect(srv.call("PUT", API + "/scheduler/config", {"gpu_load_threshold": 0.8}), 200)
        expect(call("POST", "/agent/heartbeat", {"node": "ag-1", "usage": {
            "cpu_load": 0.25, "memory_used": 0.5,
            "gpus": [{"index": 0, "utilization": 0.95, "memory_used_mib": 30000},
                     {"index": 1, "utilization": 0.97}]}}), 200)
        # What the agent measured is readable beside what is allocated.
        n = expect(srv.get(API + "/nodes/ag-1"), 200)
        if n["usage"] is None or n["usage"]["cpu_load"] != 0.25 or n["usage"]["memory_used"] != 0.5:
            fail("node usage: %s" % n.get("usage"))
        if [(g["utilization"], g["memory_used_mib"]) for g in n["gpus"]] != [(0.95, 30000), (0.97, 0)]:
            fail("per-GPU usage: %s" % n["gpus"])
        panel = expect(srv.get(API + "/inference/panel"), 200)
        mine = [g for g in panel["gpus"] if g["node"] == "ag-1"]
        if [g["memory_used_mib"] for g in mine] != [30000, 0] or mine[0]["utilization"] != 0.95:
            fail("panel GPUs: %s" % mine)
        t = expect(srv.call("POST", API + "/tasks", {"name": "hot", "requests": {"gpu": 1}}), 201)
        wait_until(lambda: task(t["id"])["pending_reason"], 5, "a pending reason")
        reason = task(t["id"])["pending_reason"]
        if task(t["id"])["state"] != "pending" or "gpu_load_threshold" not in reason:
            fail("hot node: %s %r" % (task(t["id"])["state"], reason))
        expect(call("POST", "/agent/heartbeat", {"node": "ag-1", "usage": {
            "gpus": [{"index": 0, "utilization": 0.1}, {"index": 1, "utilization": 0.1}]}}), 200)
        wait_until(lambda: task(t["id"])["state"] == "scheduled", 5, "placed once the load fell")
        expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)

    def silent_node():
        expect(call("POST", "/agent/register", {"node": node_inventory("ag-2", gpus=1)}), 200)
        stop = threading.Event()

        def beat():  # ag-2 stays alive; ag-1 falls silent
            while not stop.is_set():
                call("POST", "/agent/heartbeat", {"node": "ag-2"})
                stop.wait(0.5)
        th = threading.Thread(target=beat, daemon=True)
        th.start()
        try:
            expect(srv.call("POST", API + "/nodes/ag-2/cordon"), 200)
            t = expect(srv.call("POST", API + "/tasks", {"name": "mover", "requests": {"gpu": 1}}), 201)
            wait_until(lambda: task(t["id"])["node"] == "ag-1", 5, "placed on ag-1")
            expect(srv.call("POST", API + "/nodes/ag-2/uncordon"), 200)
            wait_until(lambda: expect(srv.get(API + "/nodes/ag-1"), 200)["condition"] == "NotReady",
                       GRACE_S + 5, "ag-1 NotReady after the grace period")
            moved = wait_until(lambda: task(t["id"])["node"] != "ag-1" and task(t["id"]), 5,
                               "the lost task off the dead node once fenced")
            if moved["node"] not in (None, "ag-2"):
                fail("the lost task went to %s" % moved["node"])
            if not any(e["kind"] == "lost" for e in moved["events"]):
                fail("no lost event: %s" % moved["events"])
            wait_until(lambda: task(t["id"])["node"] == "ag-2", 5, "the lost task placed on ag-2")
            expect(call("POST", "/agent/heartbeat", {"node": "ag-1"}), 200)
            if expect(srv.get(API + "/nodes/ag-1"), 200)["condition"] != "Ready":
                fail("ag-1 not Ready after a heartbeat")
        finally:
            stop.set()
            th.join()

    c.run("register, long poll, status reports", register_and_run)
    c.run("many waiting long polls hold no handler thread", many_long_polls)
    c.run("roles and bad agent input", roles_and_bad_input)
    c.run("measured GPU load above gpu_load_threshold", gpu_threshold)
    c.run("silent node goes NotReady, its task moves", silent_node)
    c.run("a job's members are held until every one is ready", gang_barrier)
    c.run("a node's address survives a server restart", address_survives_restart)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
