#!/usr/bin/python3
"""GET /api/v1/openapi.json read by Redocly's linter (@redocly/cli, pinned in
web/package-lock.json) with its recommended rules: no error and no warning.
And what the linter does not check: every operation has a unique
operationId, the document names its server and license, and it describes the
inference gateway's routes (which the API's router never sees) with the
endpoint-key credential.

usage: test_openapi_lint.py HETEROFLOW_BINARY
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hfapi import API, Checks, Server, expect, fail, main_guard  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
REDOCLY = os.path.join(ROOT, "web", "node_modules", ".bin", "redocly")
GATEWAY = {
    ("get", "/inference/v1/models"), ("get", "/inference/v1/models/{model}"),
    ("post", "/inference/v1/chat/completions"), ("post", "/inference/v1/completions"),
    ("post", "/inference/v1/embeddings"), ("get", "/serve/{endpoint}/{path}"),
    ("post", "/serve/{endpoint}/{path}"),
}


def main(binary, tmp):
    if not os.access(REDOCLY, os.X_OK):
        fail("%s is missing: the build runs npm ci in web/ (cmake/ui.cmake)" % REDOCLY)
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("openapi_lint")
    st = {}

    def fetch():
        # Public, like the health routes: no token.
        st["doc"] = expect(srv.call("GET", API + "/openapi.json", token=None), 200)
        st["file"] = os.path.join(tmp, "openapi.json")
        with open(st["file"], "w") as f:
            json.dump(st["doc"], f)

    def redocly():
        env = dict(os.environ, REDOCLY_TELEMETRY="off", REDOCLY_SUPPRESS_UPDATE_NOTICE="true")
        r = subprocess.run([REDOCLY, "lint", st["file"], "--format=json"], capture_output=True,
                           timeout=100, env=env)
        try:
            report = json.loads(r.stdout.decode())
        except ValueError:
            fail("redocly lint printed no JSON (exit %d): %s %s" % (
                r.returncode, r.stdout[-2000:], r.stderr[-2000:]))
        totals = report.get("totals", {})
        print("  redocly %s lint (recommended): %d errors, %d warnings" % (
            report.get("version"), totals.get("errors", -1), totals.get("warnings", -1)))
        if r.returncode != 0 or totals.get("errors") != 0 or totals.get("warnings") != 0:
            fail("redocly lint: exit %d, %s\n%s" % (r.returncode, totals, json.dumps(
                [(p.get("ruleId"), p.get("message"), p.get("location")) for p in report.get("problems", [])][:20],
                indent=1)))

    def content():
        doc = st["doc"]
        ops = [(m, p, op) for p, item in doc["paths"].items() for m, op in item.items()]
        ids = [op.get("operationId") for _, _, op in ops]
        if None in ids or len(set(ids)) != len(ids):
            fail("operationIds missing or repeated: %r" % [i for i in ids if i is None or ids.count(i) > 1])
        by = {(m, p): op for m, p, op in ops}
        if by.get(("get", "/api/v1/tasks/{id}"), {}).get("operationId") != "getTasksById":
            fail("GET /api/v1/tasks/{id}: operationId %r" % by.get(("get", "/api/v1/tasks/{id}")))
        if doc.get("servers") != [{"url": "/", "description": "this server"}]:
            fail("servers: %r" % doc.get("servers"))
        if doc["info"].get("license", {}).get("name") != "Apache-2.0":
            fail("info.license: %r" % doc["info"].get("license"))
        missing = sorted(GATEWAY - set(by))
        if missing:
            fail("gateway routes missing from the document: %r" % missing)
        for key in GATEWAY:
            if by[key].get("security") != [{"endpointKey": []}, {}]:
                fail("%s %s: security %r, want an endpoint key or none" % (key[0], key[1], by[key].get("security")))
        if "endpointKey" not in doc["components"]["securitySchemes"]:
            fail("no endpointKey security scheme")
        gateway = sum(op.get("security") == [{"endpointKey": []}, {}] for _, _, op in ops)
        print("  %d operations, %d of the inference gateway" % (len(ops), gateway))

    c.run("GET /api/v1/openapi.json without a token", fetch)
    c.run("Redocly lint, recommended rules: 0 errors, 0 warnings", redocly)
    c.run("operationIds, servers, license, the gateway's routes", content)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
