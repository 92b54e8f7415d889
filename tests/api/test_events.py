#!/usr/bin/python3
"""GET /api/v1/events streams state changes as server-sent events (task,
node, plugin, config), in order, to a client holding the stream open; and
GET /api/v1/openapi.json describes routes that all exist: each documented
method and path is routed (never 404/405) and, unless public, refuses a
request without a token with 401.

usage: test_events.py HETEROFLOW_BINARY
"""
import http.client
import os
import queue
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, fail, main_guard, next_event, open_stream,  # noqa: E402
                   route_missing)


def main(binary, tmp):
    # Every route is tried without a token: failed authentications are not
    # what this test limits (test_security does).
    srv = Server(binary, os.path.join(tmp, "data"), args=["--auth-failure-burst", "1000000"])
    c = Checks("events")
    viewer = srv.make_token("viewer")["token"]

    def stream():
        events = queue.Queue()
        conn = open_stream(srv, viewer, events)
        next_event(events, "hello")
        srv.register_node("ev-n1", gpus=1, expect_status=201)
        node = next_event(events, "node")
        if node.get("action") != "registered" or node.get("name") != "ev-n1" or "time" not in node:
            fail("node event: %s" % node)
        a = expect(srv.call("POST", API + "/tasks", {"name": "ev-a", "requests": {"gpu": 1}}), 201)
        b = expect(srv.call("POST", API + "/tasks", {"name": "ev-b", "requests": {"gpu": 1}}), 201)
        seen = [next_event(events, "task") for _ in range(4)]
        got = {(e["action"], e["id"]) for e in seen}
        want = {("submitted", a["id"]), ("scheduled", a["id"]), ("submitted", b["id"]),
                ("unschedulable", b["id"])}
        if got != want:
            fail("task events: %s, want %s" % (sorted(got), sorted(want)))
        sched = [e for e in seen if e["action"] == "scheduled"][0]
        if sched["node"] != "ev-n1" or sched["allocation"]["gpus"][0]["index"] != 0:
            fail("scheduled event: %s" % sched)
        order = [(e["action"], e["id"]) for e in seen]
        if order.index(("submitted", a["id"])) > order.index(("scheduled", a["id"])):
            fail("scheduled before submitted: %s" % order)
        expect(srv.call("POST", API + "/tasks/%d/cancel" % a["id"]), 200)
        cancelled = next_event(events, "task")
        if (cancelled["action"], cancelled["id"]) != ("cancelled", a["id"]):
            fail("cancel event: %s" % cancelled)
        b_sched = next_event(events, "task")
        if (b_sched["action"], b_sched["id"]) != ("scheduled", b["id"]):
            fail("the freed GPU went to %s" % b_sched)
        expect(srv.call("PUT", API + "/plugins/binpack", {"weight": 2}), 200)
        p = next_event(events, "plugin")
        if p.get("name") != "binpack" or p["plugin"]["weight"] != 2:
            fail("plugin event: %s" % p)
        expect(srv.call("PUT", API + "/scheduler/config", {"load_threshold": 0.7}), 200)
        cfg = next_event(events, "config")
        if cfg["config"]["load_threshold"] != 0.7:
            fail("config event: %s" % cfg)
        conn.close()

    def openapi():
        doc = expect(srv.get(API + "/openapi.json", token=None), 200)
        if not doc.get("openapi", "").startswith("3.") or not doc.get("paths"):
            fail("not an OpenAPI 3 document")
        needed = {("get", "/api/v1/plugins"), ("put", "/api/v1/plugins/{name}"),
                  ("post", "/api/v1/tasks"), ("get", "/api/v1/tasks/{id}"),
                  ("post", "/api/v1/scheduler/preview"), ("get", "/api/v1/events"),
                  ("get", "/api/v1/inference/panel"), ("post", "/api/v1/tokens"),
                  ("post", "/api/v1/nodes/{name}/cordon"), ("get", "/metrics")}
        have = {(m, p) for p, ops in doc["paths"].items() for m in ops}
        if needed - have:
            fail("undocumented routes: %s" % sorted(needed - have))
        for path, ops in doc["paths"].items():
            concrete = path.replace("{name}", "x").replace("{id}", "1")
            for method, op in ops.items():
                if method == "get" and path.endswith("/events"):
                    continue  # a stream; checked above
                r = srv.call(method.upper(), concrete, token=None)
                if op.get("security") == [{"endpointKey": []}, {}]:
                    # The inference gateway: an endpoint's key or none, so
                    # no token to refuse; it answers for itself (here: no
                    # such endpoint, no model in the body, or the list).
                    if route_missing(r) or r.status == 405:
                        fail("%s %s is documented but not answered by the gateway (%d)" % (method, path, r.status))
                    continue
                public = op.get("security") == []
                if r.status in (404, 405) and not public:
                    fail("%s %s is documented but not routed (%d)" % (method, path, r.status))
                if not public and r.status != 401:
                    fail("%s %s without a token: %d, want 401" % (method, path, r.status))

    def recent():
        # What a page opened now has missed: the stream's events, oldest first.
        got = expect(srv.get(API + "/events/recent?limit=200", token=viewer), 200)["events"]
        types = [e["type"] for e in got]
        if types[0] != "node" or types[-1] != "config" or "task" not in types:
            fail("recent event types: %s" % types)
        if got[0]["data"]["name"] != "ev-n1" or "time" not in got[0]["data"]:
            fail("first recent event: %s" % got[0])
        last2 = expect(srv.get(API + "/events/recent?limit=2", token=viewer), 200)["events"]
        if last2 != got[-2:]:
            fail("limit=2 is not the last two: %s" % last2)
        for bad in ("limit=0", "limit=201", "limit=x", "since=1"):
            r = srv.get(API + "/events/recent?" + bad)
            if r.status != 400:
                fail("GET /events/recent?%s: %s" % (bad, r.short()))

    c.run("event stream", stream)
    c.run("recent events", recent)
    c.run("openapi describes routes that exist", openapi)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
