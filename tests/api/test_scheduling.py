#!/usr/bin/python3
"""Scheduling correctness through the API of the real server (nodes and
heartbeats sent as an agent would, tasks through /api/v1/tasks):

  - integer fields take JSON integers only; gpu_models [] means any model;
  - score weights: an unknown plugin is a 400 naming the key; a config file
    gives the same weights whatever the order of its blocks, and refuses one
    weight given two values, naming both keys and lines;
  - thresholds live in the scheduler config only: the plugin route refuses
    them, and a filter has no weight;
  - GPU utilisation: every GPU counts at its last reported value, and a report
    naming a GPU the node does not have is refused;
  - in-flight estimates survive a heartbeat that arrives before the task
    started, and leave once a report taken after its start arrives;
  - registering, replacing or deleting another node keeps every node's
    measured load (load awareness survives a rolling agent restart);
  - a node above gpu_load_threshold whose load comes from preemptible tasks
    takes a preemptor; one loaded by non-preemptible tasks does not;
  - the topology file is watched: a broken file shows `error` within 2 s and
    the fixed one `active`, with nothing submitted; a reload whose file blocks
    is announced on the event stream (configuring, then reloaded), and a file
    that is not a regular file is refused without holding anything up;
  - a deployment's replicas spread over nodes by default; `placement: pack`
    keeps them together.

usage: test_scheduling.py HETEROFLOW_BINARY
"""
import json
import os
import queue
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   next_event, node_inventory, open_stream, wait_until)


def task(name, gpu=1, priority=0, model=None, **extra):
    t = {"name": name, "priority": priority, "command": ["true"],
         "requests": {"gpu": gpu, "cpu_milli": 1000, "memory_mib": 1024}}
    if model:
        t["requests"]["gpu_models"] = [model]
    t.update(extra)
    return t


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("scheduling correctness")

    def get_task(i):
        return expect(srv.get(API + "/tasks/%d" % i), 200)

    def submit(t):
        return expect(srv.call("POST", API + "/tasks", t), 201)["id"]

    def heartbeat(node, gpus, cpu=0.1, mem=0.1, running=None, status=200):
        usage = {"cpu_load": cpu, "memory_used": mem,
                 "gpus": [{"index": i, "utilization": u} for i, u in gpus]}
        if running is not None:
            usage["running_tasks"] = running
        r = srv.call("POST", API + "/agent/heartbeat", {"node": node, "usage": usage})
        if status != 200:
            return r
        return expect(r, 200)

    def report_running(node, i):
        expect(srv.call("POST", API + "/agent/status", {"node": node, "id": i, "state": "running"}),
               200)

    def settled(i, state):
        return wait_until(lambda: get_task(i)["state"] == state and get_task(i), 10,
                          "task %d %s" % (i, state))

    def reason_of(i, text):
        return wait_until(lambda: text in get_task(i)["pending_reason"] and get_task(i), 10,
                          "task %d pending with %r" % (i, text))

    def cancel_all():
        for t in srv.tasks():
            if t["state"] in ("pending", "scheduled", "running"):
                expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)

    def integers_only():
        before = len(srv.tasks())
        head = '{"name": "ints", "command": ["true"], '
        for raw, field in ((head + '"priority": 2.0}', "priority"),
                           (head + '"requests": {"gpu": -0.0}}', "requests.gpu"),
                           (head + '"requests": {"cpu_milli": 1e-400}}', "requests.cpu_milli")):
            r = srv.call("POST", API + "/tasks", raw_body=raw.encode())
            expect_error(r, 400, mentions=(field + " must be an integer",))
        if len(srv.tasks()) != before:
            fail("a refused submission was stored")
        # gpu_models [] is no restriction: the task is placed as one without it.
        srv.register_node("ints-t4", gpus=1, model="T4", gpu_memory_mib=15360)
        i = submit(dict(task("any-model"), requests={"gpu": 1, "gpu_models": []}))
        t = settled(i, "scheduled")
        if t["requests"]["gpu_models"] != [] or t["node"] != "ints-t4":
            fail("gpu_models [] placed as %s on %s" % (t["requests"], t["node"]))
        cancel_all()
        expect(srv.call("DELETE", API + "/nodes/ints-t4"), 200)

    def score_weights_unknown_plugin():
        audit = expect(srv.get(API + "/audit"), 200)["entries"]
        expect_error(srv.call("PUT", API + "/scheduler/config",
                              {"score_weights": {"bogus": 1}}), 400,
                     mentions=("score_weights.bogus",))
        expect_error(srv.call("PUT", API + "/scheduler/config",
                              {"score_weights": {"rdma": 2, "bogus": 1}}), 400,
                     mentions=("score_weights.bogus",))
        w = expect(srv.get(API + "/scheduler/config"), 200)["score_weights"]
        if w["rdma"] != 1:
            fail("a refused change applied a weight: %s" % w)
        if expect(srv.get(API + "/audit"), 200)["entries"] != audit:
            fail("a refused change was audited")

    def thresholds_one_source():
        audit = expect(srv.get(API + "/audit"), 200)["entries"]
        err = expect_error(srv.call("PUT", API + "/plugins/load_threshold",
                                    {"config": {"load_threshold": 0.3}}), 400,
                           mentions=("PUT /api/v1/scheduler/config",))
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if cfg["load_threshold"] != 0.8:
            fail("load_threshold is %s after a refused plugin change (%s)" % (cfg, err))
        plugins = {p["name"]: p for p in expect(srv.get(API + "/plugins"), 200)["plugins"]}
        if plugins["load_threshold"]["config"].get("load_threshold") != 0.8:
            fail("the plugin shows another threshold than the config: %s" % plugins["load_threshold"])
        for name in ("fit", "load_threshold"):
            expect_error(srv.call("PUT", API + "/plugins/" + name, {"weight": 7}), 400,
                         mentions=("no weight",))
            if plugins[name]["weight"] is not None:
                fail("%s shows a weight: %s" % (name, plugins[name]))
        if expect(srv.get(API + "/audit"), 200)["entries"] != audit:
            fail("a refused change was audited")
        # The scheduler config route changes it, persists it and audits it.
        expect(srv.call("PUT", API + "/scheduler/config", {"load_threshold": 0.7}), 200)
        srv.restart()
        plugins = {p["name"]: p for p in expect(srv.get(API + "/plugins"), 200)["plugins"]}
        if plugins["load_threshold"]["config"]["load_threshold"] != 0.7:
            fail("after a restart the filter uses %s" % plugins["load_threshold"]["config"])
        if expect(srv.get(API + "/audit"), 200)["entries"][0]["key"] != "scheduler":
            fail("the threshold change was not audited")
        expect(srv.call("PUT", API + "/scheduler/config", {"load_threshold": 0.8}), 200)

    def percentage_of_nodes_to_score():
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if cfg.get("percentage_of_nodes_to_score") != 0:
            fail("the default percentage_of_nodes_to_score is not 0 (adaptive): %s" % cfg)
        for bad in (101, -1, 2.5, "5", None):
            expect_error(srv.call("PUT", API + "/scheduler/config",
                                  {"percentage_of_nodes_to_score": bad}), 400,
                         mentions=("percentage_of_nodes_to_score",))
        if expect(srv.get(API + "/scheduler/config"), 200) != cfg:
            fail("a refused percentage changed the config")
        got = expect(srv.call("PUT", API + "/scheduler/config",
                              {"percentage_of_nodes_to_score": 20}), 200)
        if got["percentage_of_nodes_to_score"] != 20 or got["load_threshold"] != cfg["load_threshold"]:
            fail("PUT answered %s" % got)
        srv.restart()
        if expect(srv.get(API + "/scheduler/config"), 200)["percentage_of_nodes_to_score"] != 20:
            fail("percentage_of_nodes_to_score did not survive a restart")
        plugins = {p["name"]: p for p in expect(srv.get(API + "/plugins"), 200)["plugins"]}
        if "percentage_of_nodes_to_score" in plugins["load_threshold"]["config"]:
            fail("the threshold filter's config holds the percentage: %s" % plugins["load_threshold"])
        expect(srv.call("PUT", API + "/scheduler/config", {"percentage_of_nodes_to_score": 0}), 200)

    def config_file_weights():
        for i, text in enumerate(("scheduler:\n  score_weights: {binpack: 3}\n"
                                  "plugins:\n  binpack: {enabled: true}\n",
                                  "plugins:\n  binpack: {enabled: true}\n"
                                  "scheduler:\n  score_weights: {binpack: 3}\n")):
            path = os.path.join(tmp, "weights-%d.yaml" % i)
            with open(path, "w") as f:
                f.write(text)
            s = Server(binary, os.path.join(tmp, "weights-%d" % i), config=path)
            w = {p["name"]: p["weight"] for p in expect(s.get(API + "/plugins"), 200)["plugins"]}
            s.stop()
            if w["binpack"] != 3:
                fail("with %r binpack's weight is %s, not 3" % (text, w["binpack"]))
        path = os.path.join(tmp, "weights-conflict.yaml")
        with open(path, "w") as f:
            f.write("scheduler:\n  score_weights:\n    binpack: 3\n"
                    "plugins:\n  binpack: {enabled: true, weight: 2}\n")
        p = subprocess.run([binary, "server", "--listen", "127.0.0.1:0", "--data-dir",
                            os.path.join(tmp, "weights-conflict"), "--config", path],
                           capture_output=True, timeout=30)
        err = p.stderr.decode("utf-8", "replace")
        if p.returncode == 0:
            fail("a config giving binpack two weights started")
        for want in (path + ":3: scheduler.score_weights.binpack", path + ":5: plugins.binpack.weight"):
            if want not in err:
                fail("the start-up error must name %r: %s" % (want, err))

    def gpu_utilisation():
        srv.register_node("util-4", gpus=4, model="L4", gpu_memory_mib=24576)
        # Only GPU 0 is reported, busy: the node's GPU load is the mean over
        # its four GPUs (0.95 / 4), not 0.95.
        heartbeat("util-4", [(0, 0.95)])
        i = submit(task("util-a", model="L4"))
        settled(i, "scheduled")
        # The last value of each GPU stands until it is reported again.
        heartbeat("util-4", [(1, 0.95), (2, 0.95), (3, 0.95)])
        node = expect(srv.get(API + "/nodes/util-4"), 200)
        if [g["utilization"] for g in node["gpus"]] != [0.95] * 4:
            fail("per-GPU utilisation after two partial reports: %s" % node["gpus"])
        j = submit(task("util-b", model="L4"))
        reason_of(j, "above gpu_load_threshold")
        # A report naming a GPU the node does not have is refused, and changes nothing.
        r = heartbeat("util-4", [(0, 0.0), (7, 0.1)], status=400)
        expect_error(r, 400, mentions=("usage.gpus[1].index", "7"))
        node = expect(srv.get(API + "/nodes/util-4"), 200)
        if node["gpus"][0]["utilization"] != 0.95:
            fail("a refused report changed GPU 0: %s" % node["gpus"][0])
        expect_error(heartbeat("util-4", [(0, 0.1), (0, 0.2)], status=400), 400,
                     mentions=("usage.gpus[1].index",))
        cancel_all()
        expect(srv.call("DELETE", API + "/nodes/util-4"), 200)

    def inflight_survives_early_heartbeat():
        srv.register_node("fly-2", gpus=2, model="V100", gpu_memory_mib=32768)
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)])
        a = submit(task("fly-a", model="V100"))
        settled(a, "scheduled")
        # A heartbeat between placement and start: the agent has not started
        # task a, so what it measured does not hold it yet.
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)])
        b = submit(task("fly-b", model="V100"))
        reason_of(b, "above gpu_load_threshold")
        # Started, then a report: the measurement now holds task a (still 0.5
        # here), so the estimate drops and b fits.
        report_running("fly-2", a)
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)])
        settled(b, "scheduled")
        cancel_all()
        # An agent that says which tasks ran when it measured: a task
        # reported running but not in that list keeps its estimate.
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)], running=[])
        a = submit(task("fly-c", model="V100"))
        settled(a, "scheduled")
        report_running("fly-2", a)
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)], running=[])
        b = submit(task("fly-d", model="V100"))
        reason_of(b, "above gpu_load_threshold")
        heartbeat("fly-2", [(0, 0.5), (1, 0.5)], running=[a])
        settled(b, "scheduled")
        expect_error(heartbeat("fly-2", [(0, 0.5)], running=[a, "x"], status=400), 400,
                     mentions=("usage.running_tasks[1]",))
        cancel_all()
        expect(srv.call("DELETE", API + "/nodes/fly-2"), 200)

    def node_changes_keep_load():
        srv.register_node("hot-1", gpus=2, model="H20", gpu_memory_mib=98304)
        srv.register_node("cool-1", gpus=2, model="A10", gpu_memory_mib=24576)
        srv.register_node("spare-1", gpus=1, model="A10", gpu_memory_mib=24576)
        heartbeat("hot-1", [(0, 0.97), (1, 0.97)])
        held = submit(task("held-back", model="H20"))
        reason_of(held, "above gpu_load_threshold")
        # Another node's agent restarts (it registers again, the same spec),
        # another is replaced with a changed spec, a third is deleted.
        expect(srv.call("POST", API + "/agent/register",
                        {"node": node_inventory("cool-1", 2, "A10", 24576)}), 200)
        expect(srv.call("POST", API + "/nodes", node_inventory("cool-1", 4, "A10", 24576)), (200, 201))
        expect(srv.call("DELETE", API + "/nodes/spare-1"), 200)
        # Retries run at once after node changes: the task must stay held back.
        time.sleep(1.5)
        t = get_task(held)
        if t["state"] != "pending" or "above gpu_load_threshold" not in t["pending_reason"]:
            fail("after changes to other nodes the held-back task is %s (%s)"
                 % (t["state"], t["pending_reason"]))
        node = expect(srv.get(API + "/nodes/hot-1"), 200)
        if [g["utilization"] for g in node["gpus"]] != [0.97, 0.97]:
            fail("hot-1's measured usage was dropped: %s" % node["gpus"])
        # Replacing the loaded node itself keeps its measurement too.
        expect(srv.call("POST", API + "/nodes", dict(node_inventory("hot-1", 2, "H20", 98304),
                                                     labels={"pool": "relabelled"})), (200, 201))
        time.sleep(1.5)
        if get_task(held)["state"] != "pending":
            fail("replacing hot-1's spec dropped its measured load")
        cancel_all()
        for n in ("hot-1", "cool-1"):
            expect(srv.call("DELETE", API + "/nodes/" + n), 200)

    def preemption_on_busy_nodes():
        expect(srv.call("PUT", API + "/plugins/preempt",
                        {"mode": "running", "config": {"min_runtime_seconds": 0}}), 200)
        for node, preemptible in (("busy-p", True), ("busy-np", False)):
            srv.register_node(node, gpus=4, model="A800", gpu_memory_mib=81920)
            low = [submit(task("%s-low-%d" % (node, k), model="A800", priority=1,
                               preemptible=preemptible)) for k in range(4)]
            for i in low:
                settled(i, "scheduled")
                report_running(node, i)
            heartbeat(node, [(k, 0.95) for k in range(4)])
            high = submit(task(node + "-high", model="A800", priority=100))
            if preemptible:
                t = settled(high, "scheduled")
                if t["node"] != node:
                    fail("the preemptor went to %s" % t["node"])
                evicted = [i for i in low if get_task(i)["state"] == "pending"]
                if len(evicted) != 1:
                    fail("want one victim, got %s" % evicted)
            else:
                t = reason_of(high, "above gpu_load_threshold")
                if t["pending_reason"] != "0/1 nodes available: 1 above gpu_load_threshold":
                    fail("reason: %r" % t["pending_reason"])
                if any(get_task(i)["state"] != "running" for i in low):
                    fail("a non-preemptible task was evicted")
            cancel_all()
            expect(srv.call("DELETE", API + "/nodes/" + node), 200)

    def topology_file_watched():
        path = os.path.join(tmp, "topology.yaml")
        good = "zones:\n  - name: z1\n    switches:\n      - name: s1\n        racks:\n" \
               "          - {name: r1, nodes: [topo-a]}\n"

        def write(text):
            # Replaced, as editors and config managers do.
            with open(path + ".new", "w") as f:
                f.write(text)
            os.replace(path + ".new", path)

        def status():
            return {p["name"]: p for p in
                    expect(srv.get(API + "/plugins"), 200)["plugins"]}["topology"]["status"]

        def becomes(want, within):
            t0 = time.monotonic()
            wait_until(lambda: status() == want, within, "topology %s" % want, interval=0.05)
            return time.monotonic() - t0
        write(good)
        expect(srv.call("PUT", API + "/plugins/topology", {"config": {"topology_config": path}}), 200)
        if status() != "active":
            fail("a good file: %s" % status())
        # Nothing is submitted: the file is watched on its own.
        write("zones: {")
        took = becomes("error", 2)
        write(good)
        took = max(took, becomes("active", 2))
        print("     seen within %.2f s" % took, flush=True)
        # A reload reads without the framework's lock and is seen: the event
        # stream says `configuring`, then `reloaded` with the new status.
        events = queue.Queue()
        stream = open_stream(srv, srv.token, events)
        write("zones: {")
        seen = []
        while not seen or seen[-1].get("action") != "reloaded":
            e = next_event(events, "plugin", timeout=5)
            if e.get("name") == "topology":
                seen.append(e)
        stream.close()
        if [e["action"] for e in seen] != ["configuring", "reloaded"] or seen[-1]["status"] != "error":
            fail("reload events: %s" % seen)
        # A file that is not a regular file (a FIFO nobody writes) is refused
        # at once, and the watcher goes on: fixed, the plugin is active again.
        fifo = os.path.join(tmp, "topology.fifo")
        os.mkfifo(fifo)
        os.replace(fifo, path)
        def topology_message():
            return {p["name"]: p for p in
                    expect(srv.get(API + "/plugins"), 200)["plugins"]}["topology"].get("message", "")
        wait_until(lambda: "not a regular file" in topology_message(), 3, "the FIFO refused")
        srv.register_node("topo-a", gpus=1, model="T4", gpu_memory_mib=15360)
        i = submit(task("after-fifo", model="T4"))
        settled(i, "scheduled")
        write(good)
        becomes("active", 3)
        expect(srv.call("PUT", API + "/plugins/topology", {"config": {"topology_config": ""}}), 200)
        os.remove(path)
        cancel_all()
        expect(srv.call("DELETE", API + "/nodes/topo-a"), 200)

    def replicas_spread():
        for n in ("inf-a", "inf-b", "inf-c"):
            srv.register_node(n, gpus=2, model="L40S", gpu_memory_mib=46080)

        def replica_nodes(model, count):
            def placed():
                ts = [t for t in srv.tasks_full() if t["group"] == "inference." + model
                      and t["state"] in ("scheduled", "running")]
                return ts if len(ts) == count else None
            ts = wait_until(placed, 10, "%d replicas of %s placed" % (count, model))
            return ts
        base = {"command": ["srv", "--port", "{port}"], "min_replicas": 3,
                "requests": {"gpu": 1, "gpu_milli": 300, "gpu_models": ["L40S"]}}
        # By default a deployment's replicas go to different nodes.
        m = expect(srv.call("POST", API + "/inference/models", dict(base, name="spread-m")), 201)
        ts = replica_nodes("spread-m", 3)
        if len({t["node"] for t in ts}) != 3:
            fail("replicas of a deployment went to %s" % [t["node"] for t in ts])
        if m.get("placement") != "spread" or any(t.get("group_placement") != "spread" for t in ts):
            fail("the default placement is %r (replicas: %s)"
                 % (m.get("placement"), [t.get("group_placement") for t in ts]))
        expect(srv.call("DELETE", API + "/inference/models/spread-m"), 200)
        # placement: pack keeps them together.
        expect(srv.call("POST", API + "/inference/models",
                        dict(base, name="pack-m", placement="pack")), 201)
        ts = replica_nodes("pack-m", 3)
        if len({t["node"] for t in ts}) != 1:
            fail("replicas of a packed deployment went to %s" % [t["node"] for t in ts])
        expect(srv.call("DELETE", API + "/inference/models/pack-m"), 200)
        expect_error(srv.call("POST", API + "/inference/models",
                              dict(base, name="bad-m", placement="apart")), 400,
                     mentions=("placement",))
        wait_until(lambda: not [t for t in srv.tasks() if t["group"].startswith("inference.")
                                and t["state"] in ("pending", "scheduled", "running")], 15,
                   "the replicas cancelled")
        for n in ("inf-a", "inf-b", "inf-c"):
            expect(srv.call("DELETE", API + "/nodes/" + n), 200)

    c.run("integer fields take JSON integers only; gpu_models [] is any model", integers_only)
    c.run("an unknown plugin in score_weights is a 400 naming the key", score_weights_unknown_plugin)
    c.run("thresholds live in the scheduler config only; filters have no weight",
          thresholds_one_source)
    c.run("percentage_of_nodes_to_score: an integer in [0, 100], stored, not the filter's",
          percentage_of_nodes_to_score)
    c.run("config files merge score_weights whatever the block order", config_file_weights)
    c.run("GPU utilisation counts every GPU; unknown GPUs are refused", gpu_utilisation)
    c.run("in-flight estimates survive a heartbeat before the start", inflight_survives_early_heartbeat)
    c.run("node registration, replacement and deletion keep measured load", node_changes_keep_load)
    c.run("preemption on nodes above gpu_load_threshold", preemption_on_busy_nodes)
    c.run("the topology file is watched while nothing is scheduled", topology_file_watched)
    c.run("a deployment's replicas spread over nodes unless it packs them", replicas_spread)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
