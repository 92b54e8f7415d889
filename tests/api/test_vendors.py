#!/usr/bin/python3
"""Accelerators of four vendors through real agents (docs/ACCELERATORS.md): a
declared cluster of an NVIDIA, an AMD, a Huawei Ascend and an Intel Gaudi
node, each served by its own `heteroflow agent` whose environment carries
stale binding variables of every vendor.

- Binding: one task per vendor runs on its vendor's node and prints its
  environment; each log shows its vendor's variable (CUDA_VISIBLE_DEVICES,
  ROCR_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES; HABANA_VISIBLE_MODULES
  with HABANA_VISIBLE_DEVICES) with exactly its devices, and no other
  vendor's variable.
- Scheduling: tasks asking gpu_vendors [amd] land only on the AMD node; one
  that cannot fit there stays pending with a reason naming the vendor it
  wants and what the other nodes have. A share of an Ascend GPU is refused
  while huawei is in exclusive_gpu_vendors (the default), and placed once the
  policy lets Ascend GPUs be shared.
- Bad input: vendor names that are not names are refused (400, naming the
  field), changing nothing.

usage: test_vendors.py HETEROFLOW_BINARY
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, _LIVE, expect, expect_error, fail, main_guard,  # noqa: E402
                   wait_until)

# name -> (vendor, model, GPUs, GPU memory, the variables its tasks get)
NODES = {
    "v-nvidia": ("nvidia", "A100-80G", 2, 81920, ("CUDA_VISIBLE_DEVICES",)),
    "v-amd": ("amd", "MI300X", 2, 196608, ("ROCR_VISIBLE_DEVICES",)),
    "v-ascend": ("huawei", "Ascend910B", 4, 65536, ("ASCEND_RT_VISIBLE_DEVICES",)),
    "v-gaudi": ("habana", "HL-225", 2, 98304, ("HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES")),
}
VARIABLES = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
             "GPU_DEVICE_ORDINAL", "ASCEND_RT_VISIBLE_DEVICES", "ASCEND_VISIBLE_DEVICES",
             "HABANA_VISIBLE_MODULES", "HABANA_VISIBLE_DEVICES")
PRINT_ENV = ["sh", "-c", "env | sort; exec sleep 60"]


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("vendors")
    st = {}

    def start_agents():
        # Every vendor's variable set in the agents' own environment, as a
        # shell profile might: none may reach a task unchanged.
        env = dict(os.environ)
        for v in VARIABLES:
            env[v] = "7"
        for name, (vendor, model, gpus, mem, _) in NODES.items():
            inv = os.path.join(tmp, name + ".yaml")
            with open(inv, "w") as f:
                f.write("name: %s\ncpu_milli: 16000\nmemory_mib: 65536\ngpus:\n" % name)
                for i in range(gpus):
                    f.write("  - {index: %d, vendor: %s, model: %s, memory_mib: %d, fabric_domain: 0}\n"
                            % (i, vendor, model, mem))
            log = open(os.path.join(tmp, name + ".log"), "ab")
            p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                                  "--token-file", srv.agent_token_file(name, tmp), "--inventory", inv,
                                  "--work-dir", os.path.join(tmp, "work-" + name)],
                                 stdout=log, stderr=log, env=env)
            _LIVE.append(type("AgentProc", (), {"proc": p})())
        wait_until(lambda: sum(n["condition"] == "Ready" for n in
                               expect(srv.get(API + "/nodes"), 200)["nodes"]) == len(NODES), 20,
                   "four nodes Ready")
        for n in expect(srv.get(API + "/nodes"), 200)["nodes"]:
            vendor, model = NODES[n["name"]][:2]
            if {(g["vendor"], g["model"]) for g in n["gpus"]} != {(vendor, model)}:
                fail("node %s shows GPUs %s, not %s %s" % (n["name"], n["gpus"], vendor, model))

    def binding():
        ids = {}
        for name, (vendor, _, gpus, _, _) in NODES.items():
            t = expect(srv.call("POST", API + "/tasks", {
                "name": "env-" + vendor, "command": PRINT_ENV,
                "requests": {"cpu_milli": 100, "memory_mib": 64, "gpu": 2, "gpu_vendors": [vendor]}}), 201)
            ids[name] = t["id"]
        seen = {}

        def printed():
            # Running, on its node, with its environment shipped (the agent
            # ships output every second).
            for name, tid in ids.items():
                if name in seen:
                    continue
                t = expect(srv.get(API + "/tasks/%d" % tid), 200)
                if t["state"] != "running":
                    continue
                log = srv.get(API + "/tasks/%d/logs" % tid)
                if log.status == 200 and b"HETEROFLOW_TASK_ID=" in log.raw:
                    seen[name] = (t, log.raw.decode("utf-8", "replace"))
            return len(seen) == len(ids)
        wait_until(printed, 30, "the four tasks running with their environment printed")
        for name, (t, text) in sorted(seen.items()):
            vendor, _, _, _, variables = NODES[name]
            if t["node"] != name:
                fail("task %s runs on %s, want %s" % (t["name"], t["node"], name))
            got = {}
            for line in text.splitlines():
                k, _, v = line.partition("=")
                if k in VARIABLES:
                    got[k] = v
            # Declared devices bind by their rank among the node's devices
            # of the vendor: here, their index.
            want = ",".join(str(g["index"]) for g in t["allocation"]["gpus"])
            if len(t["allocation"]["gpus"]) != 2 or got != {v: want for v in variables}:
                fail("task on %s (%s): binding variables %s, want exactly %s=%s"
                     % (name, vendor, got, "/".join(variables), want))
            print("  %-9s %s" % (name, " ".join("%s=%s" % (v, want) for v in variables)))
        for tid in ids.values():
            expect(srv.call("POST", API + "/tasks/%d/cancel" % tid, {}), (200, 409))
        wait_until(lambda: all(expect(srv.get(API + "/tasks/%d" % i), 200)["state"] == "cancelled"
                               for i in ids.values()), 15, "the four tasks cancelled")

    def by_vendor():
        ids = []
        for i in range(3):
            t = expect(srv.call("POST", API + "/tasks", {
                "name": "amd-%d" % i, "command": ["sleep", "60"],
                "requests": {"cpu_milli": 100, "memory_mib": 64, "gpu": 1, "gpu_vendors": ["amd"]}}), 201)
            ids.append(t["id"])
        st["amd"] = ids

        def placed():
            # Two placed, and the third tried: the POSTs are separate, so
            # the third may reach the scheduler a cycle after the others.
            ts = [expect(srv.get(API + "/tasks/%d" % i), 200) for i in ids]
            tried = all(t["state"] != "pending" or t["pending_reason"] for t in ts)
            return sum(t["state"] in ("scheduled", "running") for t in ts) == 2 and tried and ts
        ts = wait_until(placed, 15, "two of the three amd tasks placed, the third tried")
        for t in ts:
            if t["state"] in ("scheduled", "running") and t["node"] != "v-amd":
                fail("an amd task landed on %s" % t["node"])
        pending = [t for t in ts if t["state"] == "pending"]
        if len(pending) != 1:
            fail("want one amd task pending, got %s" % [(t["name"], t["state"]) for t in ts])
        reason = pending[0]["pending_reason"]
        for want in ("GPU vendor amd", "GPU model mismatch (nvidia A100-80G)",
                     "GPU model mismatch (huawei Ascend910B)", "GPU model mismatch (habana HL-225)"):
            if want not in reason:
                fail("the pending reason does not say %r: %r" % (want, reason))
        print("  pending: %s" % reason)
        for i in ids:
            expect(srv.call("POST", API + "/tasks/%d/cancel" % i, {}), (200, 409))

    def exclusive():
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if cfg.get("exclusive_gpu_vendors") != ["huawei", "habana"]:
            fail("default exclusive_gpu_vendors: %r" % cfg.get("exclusive_gpu_vendors"))
        t = expect(srv.call("POST", API + "/tasks", {
            "name": "npu-share", "command": ["sleep", "60"],
            "requests": {"cpu_milli": 100, "memory_mib": 64, "gpu": 1, "gpu_milli": 500,
                         "gpu_vendors": ["huawei"]}}), 201)

        def pending_with_reason():
            r = expect(srv.get(API + "/tasks/%d" % t["id"]), 200)
            return r["state"] == "pending" and "GPU not shared" in r["pending_reason"] and r
        r = wait_until(pending_with_reason, 10, "the Ascend share pending: GPU not shared")
        print("  pending: %s" % r["pending_reason"])
        expect(srv.call("PUT", API + "/scheduler/config", {"exclusive_gpu_vendors": ["habana"]}), 200)
        r = wait_until(lambda: (lambda x: x["state"] in ("scheduled", "running") and x)(
            expect(srv.get(API + "/tasks/%d" % t["id"]), 200)), 10, "the share placed once allowed")
        if r["node"] != "v-ascend":
            fail("the Ascend share landed on %s" % r["node"])
        expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"], {}), (200, 409))

    def bad_input():
        before = expect(srv.get(API + "/tasks"), 200)["tasks"]
        for body, field in (
                ({"name": "b", "command": ["true"], "requests": {"gpu": 1, "gpu_vendors": ["AMD"]}},
                 "requests.gpu_vendors[0]"),
                ({"name": "b", "command": ["true"], "requests": {"gpu": 1, "gpu_vendors": "amd"}},
                 "requests.gpu_vendors"),
                ({"name": "b", "command": ["true"], "requests": {"gpu": 1, "gpu_vendors": [""]}},
                 "requests.gpu_vendors[0]")):
            expect_error(srv.call("POST", API + "/tasks", body), 400, mentions=(field,))
        expect_error(srv.call("PUT", API + "/scheduler/config", {"exclusive_gpu_vendors": ["x y"]}), 400,
                     mentions=("exclusive_gpu_vendors[0]",))
        if expect(srv.get(API + "/tasks"), 200)["tasks"] != before:
            fail("a refused submission changed the task list")
        if expect(srv.get(API + "/scheduler/config"), 200)["exclusive_gpu_vendors"] != ["habana"]:
            fail("a refused config update changed exclusive_gpu_vendors")

    if c.run("four agents, four vendors, Ready", start_agents):
        c.run("each task gets its vendor's variable with its devices, and no other", binding)
        c.run("gpu_vendors [amd]: only the AMD node; the pending reason names the vendor", by_vendor)
        c.run("exclusive_gpu_vendors: no share of an Ascend GPU until the policy allows it", exclusive)
        c.run("malformed vendor names are refused, naming the field", bad_input)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
