#!/usr/bin/python3
"""The vision's five curl calls (shared/spec/seed-zh.txt, "API 接口"), run with
the real curl binary exactly as the vision writes them -- only the
Authorization header's <token> and the host:port are filled in -- and the
answers checked against the shapes the vision shows. Then the rules around
them: 401 without a token, 403 for a viewer, 409 for spread with binpack,
400 naming the threshold, and persistence across a restart.

usage: test_vision.py HETEROFLOW_BINARY
"""
import json
import os
import shlex
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, expect_error, fail, main_guard,
                   wait_until)  # noqa: E402

# Verbatim from the vision (the lines of each command joined; the vision's
# line breaks lost their backslashes in the rendering).
VISION_CALLS = [
    """curl -X GET http://localhost:3333/api/v1/plugins
  -H "Authorization: Bearer <token>\"""",
    """curl -X PUT http://localhost:3333/api/v1/plugins/binpack
  -H "Authorization: Bearer <token>"
  -H "Content-Type: application/json"
  -d '{"enabled": true, "weight": 2}'""",
    """curl -X GET http://localhost:3333/api/v1/scheduler/config
  -H "Authorization: Bearer <token>\"""",
    """curl -X PUT http://localhost:3333/api/v1/scheduler/config
  -H "Authorization: Bearer <token>"
  -H "Content-Type: application/json"
  -d '{"load_threshold": 0.85, "gpu_load_threshold": 0.9}'""",
    """curl -X GET http://localhost:3333/api/v1/inference/panel
  -H "Authorization: Bearer <token>\"""",
]

PLUGIN_KEYS = {"name": str, "type": str, "enabled": bool, "weight": (int, float),
               "status": str, "config": dict}
STATUSES = {"active", "inactive", "error", "configuring"}


def run_curl(srv, i):
    cmd = VISION_CALLS[i].replace("localhost:3333", srv.base).replace("<token>", srv.token)
    argv = shlex.split(cmd)
    curl = shutil.which("curl") or fail("curl is not installed")
    argv[0] = curl
    p = subprocess.run(argv, capture_output=True, timeout=20)
    if p.returncode != 0:
        fail("vision call %d (%s) exited %d: %s" % (i + 1, cmd.split()[2], p.returncode,
                                                     p.stderr.decode(errors="replace")))
    try:
        return json.loads(p.stdout.decode("utf-8"))
    except ValueError:
        fail("vision call %d: answer is not JSON: %r" % (i + 1, p.stdout[:300]))


def check_number(v, want, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or abs(v - want) > 1e-9:
        fail("%s: want %r, got %r" % (what, want, v))


def check_plugin_shape(p, what):
    if not isinstance(p, dict):
        fail("%s: a plugin must be an object, got %r" % (what, p))
    for k, t in PLUGIN_KEYS.items():
        if k not in p:
            fail("%s: plugin lacks %r: %r" % (what, k, p))
        # A plugin that only filters has no weight: null.
        if k == "weight" and p["type"] == "Filter" and p.get("extension_points") == "Filter":
            if p[k] is not None:
                fail("%s: filter %s has a weight: %r" % (what, p["name"], p[k]))
            continue
        if not isinstance(p[k], t) or (t is not bool and isinstance(p[k], bool)):
            fail("%s: plugin %s.%s has the wrong type: %r" % (what, p.get("name"), k, p[k]))
    if p["status"] not in STATUSES:
        fail("%s: plugin %s status %r not in %s" % (what, p["name"], p["status"], STATUSES))
    if not p["enabled"] and p["status"] != "inactive":
        fail("%s: plugin %s is disabled but %r" % (what, p["name"], p["status"]))


def plugins_by_name(srv):
    body = expect(srv.get(API + "/plugins"), 200)
    return {p["name"]: p for p in body["plugins"]}


def main(binary, tmp):
    data = os.path.join(tmp, "data")
    srv = Server(binary, data)
    c = Checks("vision")
    state = {}

    def call1_get_plugins():
        body = run_curl(srv, 0)
        if not isinstance(body, dict) or not isinstance(body.get("plugins"), list):
            fail("GET /plugins: want {\"plugins\": [...]}, got %r" % (body,))
        names = [p.get("name") for p in body["plugins"]]
        for want in ("binpack", "spread", "preempt", "rdma", "topology"):
            if want not in names:
                fail("GET /plugins: no plugin %r among %s" % (want, names))
        if len(set(names)) != len(names):
            fail("GET /plugins: a plugin is listed twice: %s" % names)
        for p in body["plugins"]:
            check_plugin_shape(p, "GET /plugins")
        byname = {p["name"]: p for p in body["plugins"]}
        # The two plugins the vision shows, exactly as shown.
        vision = {"binpack": {"name": "binpack", "type": "Score", "enabled": True, "weight": 1,
                              "status": "active", "config": {}},
                  "spread": {"name": "spread", "type": "Score", "enabled": False, "weight": 1,
                             "status": "inactive", "config": {}}}
        for name, want in vision.items():
            for k, v in want.items():
                got = byname[name][k]
                if got != v or type(got) is not type(v):
                    fail("GET /plugins: %s.%s: the vision shows %r, got %r" % (name, k, v, got))

    def call2_put_binpack():
        body = run_curl(srv, 1)
        check_plugin_shape(body, "PUT /plugins/binpack answer")
        if body["name"] != "binpack" or body["enabled"] is not True or body["weight"] != 2:
            fail("PUT /plugins/binpack: want binpack enabled weight 2, got %r" % body)
        if body["status"] != "active":
            fail("PUT /plugins/binpack: binpack must stay active: %r" % body)
        if plugins_by_name(srv)["binpack"]["weight"] != 2:
            fail("GET /plugins after the PUT: binpack weight is not 2")
        state["binpack_weight"] = 2

    def call3_get_config():
        body = run_curl(srv, 2)
        if not isinstance(body, dict):
            fail("GET /scheduler/config: want an object, got %r" % (body,))
        keys = {"load_threshold", "gpu_load_threshold", "memory_threshold",
                "percentage_of_nodes_to_score", "score_weights",
                "exclusive_gpu_vendors"}
        if set(body) != keys:
            fail("GET /scheduler/config: want keys %s, got %s" % (sorted(keys), sorted(body)))
        if body["exclusive_gpu_vendors"] != ["huawei", "habana"]:
            fail("default exclusive_gpu_vendors: want ['huawei', 'habana'], got %r"
                 % (body["exclusive_gpu_vendors"],))
        check_number(body["load_threshold"], 0.8, "default load_threshold")
        check_number(body["gpu_load_threshold"], 0.9, "default gpu_load_threshold")
        check_number(body["memory_threshold"], 0.85, "default memory_threshold")
        if body["percentage_of_nodes_to_score"] != 0:
            fail("default percentage_of_nodes_to_score: want 0 (adaptive), got %r"
                 % (body["percentage_of_nodes_to_score"],))
        w = body["score_weights"]
        if not isinstance(w, dict) or "binpack" not in w or "spread" not in w:
            fail("score_weights must be an object with binpack and spread: %r" % (w,))
        for name, v in w.items():
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                fail("score_weights.%s: %r" % (name, v))
        # One source of truth: the plugin weight set by the vision's call 2.
        check_number(w["binpack"], state.get("binpack_weight", 1), "score_weights.binpack")

    def call4_put_config():
        body = run_curl(srv, 3)
        if not isinstance(body, dict) or "score_weights" not in body:
            fail("PUT /scheduler/config must answer the whole config, got %r" % (body,))
        check_number(body["load_threshold"], 0.85, "load_threshold after PUT")
        check_number(body["gpu_load_threshold"], 0.9, "gpu_load_threshold after PUT")
        check_number(body["memory_threshold"], 0.85, "memory_threshold (untouched)")
        got = expect(srv.get(API + "/scheduler/config"), 200)
        if got != body:
            fail("GET after PUT differs from the PUT's answer: %r vs %r" % (got, body))
        state["config"] = body

    def call5_inference_panel():
        body = run_curl(srv, 4)
        if isinstance(body, dict) and str(body.get("error", {}).get("message")).startswith("no route"):
            fail("route missing (not implemented?): GET /api/v1/inference/panel: %r" % body)
        if not isinstance(body, dict) or "error" in body:
            fail("GET /inference/panel: %r" % (body,))
        for k in ("models", "endpoints", "gpus"):
            if not isinstance(body.get(k), list):
                fail("GET /inference/panel: %r must be a list: %r" % (k, body))
        if body["gpus"]:
            fail("GET /inference/panel on a cluster without nodes lists GPUs: %r" % body["gpus"])

    def panel_lists_gpus():
        # With a node: one entry per GPU, memory side by side.
        srv.register_node("panel-n1", gpus=2, model="A100-80G", gpu_memory_mib=81920)
        body = expect(srv.get(API + "/inference/panel"), 200)
        gpus = sorted(body["gpus"], key=lambda g: (g.get("node"), g.get("index")))
        if [(g.get("node"), g.get("index")) for g in gpus] != [("panel-n1", 0), ("panel-n1", 1)]:
            fail("panel gpus: want panel-n1 GPUs 0 and 1, got %r" % gpus)
        for g in gpus:
            for k in ("node", "index", "model", "memory_total_mib", "memory_allocated_mib",
                      "memory_used_mib", "utilization", "tasks"):
                if k not in g:
                    fail("panel gpu lacks %r: %r" % (k, g))
            if g["model"] != "A100-80G" or g["memory_total_mib"] != 81920:
                fail("panel gpu model/memory: %r" % g)
            if g["memory_allocated_mib"] != 0 or g["tasks"] != []:
                fail("panel gpu of an idle node: %r" % g)
            if g["memory_used_mib"] is not None or g["utilization"] is not None:
                fail("panel gpu: measured values must be null until measured: %r" % g)
        # A shared GPU holds what its tasks asked for; a whole GPU all its memory.
        share = expect(srv.call("POST", API + "/tasks", {"name": "panel-share", "requests": {
            "gpu": 1, "gpu_milli": 500, "gpu_memory_mib": 20480}}), 201)
        whole = expect(srv.call("POST", API + "/tasks", {"name": "panel-whole",
                                                         "requests": {"gpu": 1}}), 201)
        wait_until(lambda: all(expect(srv.get(API + "/tasks/%d" % t["id"]), 200)["state"] ==
                               "scheduled" for t in (share, whole)), 5, "both placed")
        gpus = sorted(expect(srv.get(API + "/inference/panel"), 200)["gpus"],
                      key=lambda g: g["memory_allocated_mib"])
        if [(g["memory_allocated_mib"], g["tasks"]) for g in gpus] != \
                [(20480, [share["id"]]), (81920, [whole["id"]])]:
            fail("panel memory for a shared and a whole GPU: %r" % gpus)
        node = expect(srv.get(API + "/nodes/panel-n1"), 200)
        if sorted(g["allocated_memory_mib"] for g in node["gpus"]) != [20480, 81920]:
            fail("node GPU memory allocated: %r" % node["gpus"])
        for t in (share, whole):
            expect(srv.call("POST", API + "/tasks/%d/cancel" % t["id"]), 200)

    def no_token_401():
        for method, path in (("GET", "/plugins"), ("PUT", "/plugins/binpack"),
                             ("GET", "/scheduler/config"), ("PUT", "/scheduler/config"),
                             ("GET", "/inference/panel")):
            body = {"enabled": True} if path == "/plugins/binpack" else (
                {"load_threshold": 0.5} if method == "PUT" else None)
            r = srv.call(method, API + path, body, token=None)
            expect_error(r, 401, "unauthenticated")
            r = srv.call(method, API + path, body, token="hf_" + "0" * 64)
            expect_error(r, 401, "unauthenticated", what="%s %s with an unknown token" % (method, path))
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if cfg["load_threshold"] == 0.5:
            fail("an unauthenticated PUT changed the config")

    def viewer_403():
        viewer = srv.make_token("viewer")["token"]
        before = plugins_by_name(srv)
        cfg_before = expect(srv.get(API + "/scheduler/config"), 200)
        # A viewer reads ...
        expect(srv.call("GET", API + "/plugins", token=viewer), 200, "viewer GET /plugins")
        expect(srv.call("GET", API + "/scheduler/config", token=viewer), 200, "viewer GET config")
        # ... but may not change anything.
        r = srv.call("PUT", API + "/plugins/binpack", {"weight": 7}, token=viewer)
        expect_error(r, 403, "forbidden", what="viewer PUT /plugins/binpack")
        r = srv.call("PUT", API + "/scheduler/config", {"load_threshold": 0.5}, token=viewer)
        expect_error(r, 403, "forbidden", what="viewer PUT /scheduler/config")
        # Operators run tasks, not policy.
        operator = srv.make_token("operator")["token"]
        r = srv.call("PUT", API + "/plugins/spread", {"weight": 3}, token=operator)
        expect_error(r, 403, "forbidden", what="operator PUT /plugins/spread")
        if plugins_by_name(srv) != before or expect(srv.get(API + "/scheduler/config"), 200) != cfg_before:
            fail("a refused PUT changed something")

    def spread_with_binpack_409():
        before = plugins_by_name(srv)
        if not before["binpack"]["enabled"] or before["spread"]["enabled"]:
            fail("precondition: binpack enabled, spread disabled; got %r %r"
                 % (before["binpack"], before["spread"]))
        for body in ({"enabled": True}, {"enabled": True, "weight": 5}):
            r = srv.call("PUT", API + "/plugins/spread", body)
            expect_error(r, 409, "conflict", mentions="binpack", what="PUT spread %s" % body)
        after = plugins_by_name(srv)
        if after != before:
            fail("a refused PUT changed plugins: %r -> %r" % (before["spread"], after["spread"]))
        if after["spread"]["enabled"] or after["spread"]["status"] != "inactive":
            fail("spread after the refusal: %r" % after["spread"])

    def thresholds_400():
        cfg_before = expect(srv.get(API + "/scheduler/config"), 200)
        for field in ("load_threshold", "gpu_load_threshold", "memory_threshold"):
            for bad in (0, -0.1, 1.0001, 1.5, 100, "0.5", None, True, [0.5], {"v": 0.5}):
                r = srv.call("PUT", API + "/scheduler/config", {field: bad})
                expect_error(r, 400, "invalid_argument", mentions=field,
                             what="PUT config %s=%r" % (field, bad))
            # A good value next to a bad one: all or nothing.
            r = srv.call("PUT", API + "/scheduler/config", {"memory_threshold": 0.5, field: 2})
            expect_error(r, 400, "invalid_argument", mentions=field)
        r = srv.call("PUT", API + "/scheduler/config", {"score_weights": {"binpack": -1}})
        expect_error(r, 400, "invalid_argument", mentions="score_weights.binpack")
        # (0, 1]: 1 itself is allowed.
        ok = expect(srv.call("PUT", API + "/scheduler/config", {"memory_threshold": 1}), 200)
        check_number(ok["memory_threshold"], 1, "memory_threshold=1")
        back = expect(srv.call("PUT", API + "/scheduler/config",
                               {"memory_threshold": cfg_before["memory_threshold"]}), 200)
        if back != cfg_before:
            fail("a refused PUT changed the config: %r -> %r" % (cfg_before, back))

    def survives_restart():
        want_cfg = expect(srv.get(API + "/scheduler/config"), 200)
        want_plugins = plugins_by_name(srv)
        if want_cfg.get("load_threshold") != 0.85:
            fail("precondition: the vision's PUT set load_threshold 0.85: %r" % want_cfg)
        srv.stop()
        srv.start()
        got_cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if got_cfg != want_cfg:
            fail("config after restart: want %r, got %r" % (want_cfg, got_cfg))
        got_plugins = plugins_by_name(srv)
        if got_plugins != want_plugins:
            fail("plugins after restart differ: %r vs %r" % (want_plugins, got_plugins))
        # And the curl calls still read the same.
        body = run_curl(srv, 2)
        if body != want_cfg:
            fail("vision call 3 after restart: %r" % body)

    c.run("vision call 1: GET /plugins", call1_get_plugins)
    c.run("vision call 2: PUT /plugins/binpack", call2_put_binpack)
    c.run("vision call 3: GET /scheduler/config", call3_get_config)
    c.run("vision call 4: PUT /scheduler/config", call4_put_config)
    c.run("vision call 5: GET /inference/panel", call5_inference_panel)
    c.run("inference panel lists a registered node's GPUs", panel_lists_gpus)
    c.run("no or unknown token: 401", no_token_401)
    c.run("viewer/operator on a config PUT: 403", viewer_403)
    c.run("spread while binpack enabled: 409, nothing changed", spread_with_binpack_409)
    c.run("thresholds out of range: 400 naming the field", thresholds_400)
    c.run("config survives a restart", survives_restart)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
