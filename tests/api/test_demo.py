#!/usr/bin/python3
"""The demo of ./scripts/run.sh: the server started with
examples/demo/server.yaml and four real agents with the declared inventories
of examples/demo/agents/ register the four nodes under the file's policy; the
demo tasks are placed as the README says (the RDMA training group across
both A100 nodes of rack-a, one RDMA NIC each, the inference replicas sharing a
T4 GPU, the H100 task pending with its reason) and run as real processes; the
urgent fine-tune preempts one of the two running low-priority sweep trials,
whose process is stopped and which is pending again with "preempted by task
..." in its events; the fine-tune's process starts only after the trial's
has checkpointed (it traps SIGTERM for a second) and exited, and says
meanwhile that it waits for it. The demo's 2-node job
(examples/demo/job.json) places its two ranks on two nodes, they start
together and rendezvous over TCP. The demo's chat model
(examples/demo/model.json) gets its replica on a T4 and answers through the
"chat" endpoint with its key. At the
end the model is deleted, every task is cancelled and no task process is left
behind.

usage: test_demo.py HETEROFLOW_BINARY
"""
import glob
import json
import os
import re
import subprocess
import sys
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (_LIVE, API, Checks, Server, expect, fail, main_guard, task_processes,  # noqa: E402
                   wait_until)

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO = os.path.join(REPO, "examples", "demo")


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"), config=os.path.join(DEMO, "server.yaml"))
    c = Checks("demo")
    st = {}
    work = os.path.join(tmp, "agents")
    agents = []
    for inv in sorted(glob.glob(os.path.join(DEMO, "agents", "*.yaml"))):
        if inv.endswith("-usage.yaml"):
            continue
        name = os.path.basename(inv)[:-5]
        log = open(os.path.join(tmp, "agent-%s.log" % name), "wb")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file(name, tmp),
                              "--inventory", inv,
                              "--work-dir", os.path.join(work, name), "--grace-period-s", "2"],
                             stdout=log, stderr=log)
        agents.append(p)
        _LIVE.append(type("AgentProc", (), {"proc": p})())  # the harness kills it at exit

    def nodes_and_policy():
        wait_until(lambda: len(expect(srv.get(API + "/nodes"), 200)["nodes"]) == 5, 15,
                   "the five agents registered")
        nodes = {n["name"]: n for n in expect(srv.get(API + "/nodes"), 200)["nodes"]}
        if sorted(nodes) != ["a100-1", "a100-2", "ascend-1", "cpu-1", "t4-1"]:
            fail("declared nodes: %s" % sorted(nodes))
        if {(g["vendor"], g["model"]) for g in nodes["ascend-1"]["gpus"]} != {("huawei", "Ascend910B")}:
            fail("ascend-1 inventory: %s" % nodes["ascend-1"]["gpus"])
        if len(nodes["a100-1"]["gpus"]) != 8 or len(nodes["a100-1"]["rdma"]) != 2:
            fail("a100-1 inventory: %s" % json.dumps(nodes["a100-1"])[:300])
        if nodes["a100-1"]["topology"]["rack"] != "rack-a" or nodes["cpu-1"]["gpus"]:
            fail("topology or CPU-only node wrong")
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        # The product vision's thresholds (seed: 0.8, 0.9, 0.85).
        if (cfg["load_threshold"], cfg["gpu_load_threshold"], cfg["memory_threshold"]) != (0.8, 0.9, 0.85):
            fail("thresholds from the file: %s" % cfg)
        plugins = {p["name"]: p for p in expect(srv.get(API + "/plugins"), 200)["plugins"]}
        if not plugins["binpack"]["enabled"] or plugins["spread"]["enabled"]:
            fail("binpack/spread from the file: %s %s" % (plugins["binpack"], plugins["spread"]))

    def by_name():
        return {t["name"]: t for t in srv.tasks_full()}

    def demo_tasks():
        with open(os.path.join(DEMO, "tasks.json")) as f:
            expect(srv.call("POST", API + "/tasks/batch", json.load(f)), 201)
        sweeps = ["hparam-sweep-a", "hparam-sweep-b"]
        wait_until(lambda: all(by_name()[s]["state"] == "running" for s in sweeps), 15,
                   "sweep trials running")
        st["sweep_gpus"] = {s: (by_name()[s]["node"],
                                [g["index"] for g in by_name()[s]["allocation"]["gpus"]])
                            for s in sweeps}
        wait_until(lambda: all(by_name()[t]["state"] == "running"
                               for t in ("llama-pretrain-0", "llama-pretrain-1")), 15,
                   "training running")
        ts = by_name()
        pre = [ts["llama-pretrain-0"], ts["llama-pretrain-1"]]
        # Six GPUs each: the group spans both A100 nodes of rack-a over RDMA.
        if sorted(t["node"] for t in pre) != ["a100-1", "a100-2"]:
            fail("the RDMA group is not across the two A100 nodes: %s"
                 % [(t["state"], t["node"]) for t in pre])
        if sorted(st["sweep_gpus"][s][0] for s in sweeps) != ["a100-1", "a100-2"]:
            fail("the sweep trials do not fill the two A100 nodes: %s" % st["sweep_gpus"])
        for t in pre:
            if not t["allocation"]["rdma_device"]:
                fail("%s got no RDMA device" % t["name"])
            gpus = ",".join(str(g["index"]) for g in t["allocation"]["gpus"])
            out = os.path.join(work, t["node"], "tasks", str(t["id"]), "output.log")

            def said():
                try:
                    with open(out) as f:
                        return "on GPUs %s via %s" % (gpus, t["allocation"]["rdma_device"]) in f.read()
                except OSError:
                    return False
            wait_until(said, 10, "%s's output names its GPUs and NIC" % t["name"])
        q = [ts["qwen-7b-replica-0"], ts["qwen-7b-replica-1"]]
        if any(t["node"] != "t4-1" for t in q):
            fail("inference replicas not on the T4 node: %s" % [t["node"] for t in q])
        if q[0]["allocation"]["gpus"][0]["index"] != q[1]["allocation"]["gpus"][0]["index"]:
            fail("binpack did not pack the two half-GPU replicas onto one T4")
        # The Ascend task: its NPUs in ASCEND_RT_VISIBLE_DEVICES, no CUDA variable.
        npu = ts["ascend-embed"]
        if npu["node"] != "ascend-1":
            fail("ascend-embed: %s on %s" % (npu["state"], npu["node"]))
        want = "on NPUs %s, CUDA_VISIBLE_DEVICES unset" % ",".join(
            str(g["index"]) for g in npu["allocation"]["gpus"])
        out = os.path.join(work, "ascend-1", "tasks", str(npu["id"]), "output.log")

        def npu_said():
            try:
                with open(out) as f:
                    return want in f.read()
            except OSError:
                return False
        wait_until(npu_said, 10, "ascend-embed's output says %r" % want)
        h = ts["render-h100"]
        if h["state"] != "pending" or "GPU model mismatch" not in h["pending_reason"]:
            fail("render-h100: %s %r" % (h["state"], h["pending_reason"]))
        # Two teams: research runs on its 12 guaranteed A100s and the 4 that
        # product is guaranteed but leaves idle; product lends them.
        queues = {q["name"]: q for q in expect(srv.get(API + "/queues"), 200)["queues"]}
        r, p = queues.get("research"), queues.get("product")
        if not r or not p:
            fail("the demo's teams are missing: %s" % sorted(queues))
        if r["usage"]["gpu"].get("A100-80G") != 16 or r["borrowed"]["gpu"].get("A100-80G") != 4:
            fail("research's usage %s, borrowed %s" % (r["usage"], r["borrowed"]))
        if p["lendable"]["gpu"].get("A100-80G") != 4 or p["usage"]["gpu"].get("T4") != 3:
            fail("product's usage %s, lendable %s" % (p["usage"], p["lendable"]))

    def preemption():
        with open(os.path.join(DEMO, "urgent-task.json")) as f:
            urgent = expect(srv.call("POST", API + "/tasks", json.load(f)), 201)
        wait_until(lambda: by_name()["finetune-70b-urgent"]["state"] == "running", 15,
                   "the urgent task running")
        now = by_name()
        evicted = [s for s in st["sweep_gpus"] if now[s]["state"] != "running"]
        if len(evicted) != 1:
            fail("expected one sweep trial evicted, got %s" % evicted)
        sweep = now[evicted[0]]
        urgent_now = now["finetune-70b-urgent"]
        freed_node, freed = st["sweep_gpus"][evicted[0]]
        got = [g["index"] for g in urgent_now["allocation"]["gpus"]]
        if urgent_now["node"] != freed_node or not set(got) <= set(freed):
            fail("the urgent task is on %s GPUs %s, not on the sweep's freed %s GPUs %s"
                 % (urgent_now["node"], got, freed_node, freed))
        if sweep["state"] != "pending" or sweep["allocation"] is not None:
            fail("the sweep was not evicted: %s" % sweep["state"])
        full = expect(srv.get(API + "/tasks/%d" % sweep["id"]), 200)
        kinds = [e["kind"] for e in full["events"]]
        pre = [e for e in full["events"] if e["kind"] == "preempted"]
        if not pre or "preempted by task %d" % urgent["id"] not in pre[0]["message"]:
            fail("sweep events: %s" % full["events"])
        if kinds[:3] != ["submitted", "scheduled", "running"]:
            fail("sweep events start with %s" % kinds[:3])
        # The preempted run's process is gone; only the urgent task's is on its node.
        sweep_dir = glob.glob(os.path.join(work, "*", "tasks", str(sweep["id"])))
        if not sweep_dir:
            fail("the sweep never ran in an agent's work dir")
        wait_until(lambda: not task_processes(sweep_dir[0]), 10, "the sweep's process stopped")

        # The order on the GPUs: the fine-tune's process started after the
        # trial's had checkpointed and exited, never beside it.
        def stamp(task_id, what):
            path = os.path.join(work, urgent_now["node"], "tasks", str(task_id), "output.log")
            try:
                with open(path) as f:
                    m = re.search(what + r" at (\d+\.\d+)", f.read())
            except OSError:
                return None
            return float(m.group(1)) if m else None
        stopped = wait_until(lambda: stamp(sweep["id"], "stopped"), 10, "the trial's stop time")
        started = wait_until(lambda: stamp(urgent["id"], "started"), 10, "the fine-tune's start time")
        if started < stopped:
            fail("the fine-tune started at %.3f, %.3f s before the trial it preempted exited (%.3f)"
                 % (started, stopped - started, stopped))
        events = expect(srv.get(API + "/tasks/%d" % urgent["id"]), 200)["events"]
        waits = [e for e in events if e["kind"] == "waiting"]
        if not waits or "waiting for task %d to exit" % sweep["id"] not in waits[0]["message"]:
            fail("the fine-tune's events do not say it waited for task %d: %s" % (sweep["id"], events))

    def chat_model():
        with open(os.path.join(DEMO, "model.json")) as f:
            spec = json.loads(f.read().replace(
                "@MODEL_SERVER@", os.path.join(REPO, "tests", "inference", "fake_model.py")))
        expect(srv.call("POST", API + "/inference/models", spec), 201)
        key = expect(srv.call("POST", API + "/inference/endpoints",
                              {"name": "chat", "model": spec["name"]}), 201)["key"]["secret"]

        def ready():
            m = expect(srv.get(API + "/inference/models/" + spec["name"]), 200)
            return m if m["status"] == "running" else None
        m = wait_until(ready, 20, "qwen-7b-chat running") and ready()
        if [r["node"] for r in m["replicas"]] != ["t4-1"]:
            fail("the chat replica is not on the T4 node: %s" % m["replicas"])
        r = expect(srv.call("POST", "/inference/v1/chat/completions", token=key, body={
            "model": "chat", "messages": [{"role": "user", "content": "hello"}]}), 200)
        if r["model"] != "Qwen/Qwen2-7B-Instruct":
            fail("the replica answered for %r" % r["model"])

    def demo_job():
        # README: a 2-node job whose ranks rendezvous over TCP.
        with open(os.path.join(DEMO, "job.json")) as f:
            spec = json.loads(f.read().replace("@RENDEZVOUS@", os.path.join(DEMO, "rendezvous.py")))
        job = expect(srv.call("POST", API + "/jobs", spec), 201)
        got = wait_until(lambda: (lambda j: j["state"] in ("succeeded", "failed") and j)(
            expect(srv.get(API + "/jobs/%d" % job["id"]), 200)), 60, "the demo job ended")
        if got["state"] != "succeeded" or got["restarts"] != 0:
            fail("the demo job: %s after %d restarts: %s" % (got["state"], got["restarts"], got["reason"]))
        members = sorted(got["members"], key=lambda m: m["rank"])
        nodes = {m["id"]: expect(srv.get(API + "/tasks/%d" % m["id"]), 200)["events"] for m in members}
        placed = {}
        for m in members:
            for e in nodes[m["id"]]:
                if e["kind"] == "scheduled":
                    placed[m["rank"]] = e["message"].split("scheduled to node ")[1].split()[0]
        if len(set(placed.values())) != 2:
            fail("the demo job's ranks ran on %s, not two nodes" % placed)
        out = os.path.join(work, placed[0], "tasks", str(members[0]["id"]), "output.log")
        with open(out) as f:
            text = f.read()
        if "rank 0 saw ranks [0, 1]" not in text or "--rank=0" not in text:
            fail("rank 0's output: %r" % text)
        if "released" not in [e["kind"] for e in got["events"]]:
            fail("the demo job's members did not start together: %s" % got["events"])

    def cleanup():
        expect(srv.call("DELETE", API + "/inference/endpoints/chat"), 200)
        expect(srv.call("DELETE", API + "/inference/models/qwen-7b-chat"), 200)
        wait_until(lambda: srv.get(API + "/inference/models/qwen-7b-chat").status == 404, 15,
                   "the chat model deleted")
        for t in srv.tasks_full():
            if t["state"] in ("pending", "scheduled", "running"):
                expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)
        try:
            wait_until(lambda: not task_processes(work), 15, "every task process stopped")
        finally:
            for pid in task_processes(work):
                os.kill(pid, 9)

    def store_wins_over_file():
        expect(srv.call("PUT", API + "/plugins/binpack", {"weight": 3}), 200)
        srv.restart()
        w = {p["name"]: p["weight"] for p in expect(srv.get(API + "/plugins"), 200)["plugins"]}
        if w["binpack"] != 3:
            fail("after a restart with the file, binpack weight is %s, not the stored 3" % w["binpack"])
        log = srv.stderr_text()
        if "plugins.binpack.weight differs (file 1, store 3)" not in log:
            fail("the server did not log the key where file and store differ:\n" + log[-2000:])

    c.run("declared nodes and policy from the file", nodes_and_policy)
    c.run("demo tasks placed", demo_tasks)
    c.run("urgent task preempts the sweep", preemption)
    c.run("the demo's chat model answers through its endpoint", chat_model)
    c.run("the demo's 2-node job rendezvouses", demo_job)
    c.run("cancelled tasks leave no process behind", cleanup)
    c.run("the store wins over the file, and the drift is logged", store_wins_over_file)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
