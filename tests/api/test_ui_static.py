#!/usr/bin/python3
"""The server serves the built web UI (docs/UI.md) from --ui-dir: its files
with their content types and caching, the app's own routes as index.html (a
reload of /plugins works), a missing asset as 404, and nothing of the API
shadowed; without a UI folder, GET / says how to build it. GET
/api/v1/whoami tells the app the caller's role.

usage: test_ui_static.py HETEROFLOW_BINARY
"""
import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import API, Checks, Server, expect, fail, main_guard  # noqa: E402

INDEX = b"<!doctype html><title>HeteroFlow</title><div id=app></div>"
SCRIPT = b"console.log('hf')"


def main(binary, tmp):
    ui = os.path.join(tmp, "ui")
    os.makedirs(os.path.join(ui, "assets"))
    with open(os.path.join(ui, "index.html"), "wb") as f:
        f.write(INDEX)
    with open(os.path.join(ui, "assets", "app-1a2b.js"), "wb") as f:
        f.write(SCRIPT)
    srv = Server(binary, os.path.join(tmp, "data"), args=["--ui-dir", ui])
    c = Checks("web UI files")

    def files():
        for path in ("/", "/plugins", "/tasks/17"):
            r = srv.get(path, token=None)
            if r.status != 200 or r.raw != INDEX or not r.header("Content-Type").startswith("text/html"):
                fail("GET %s: %s %r" % (path, r.status, r.raw[:80]))
            if r.header("Cache-Control") != "no-cache":
                fail("index.html caching: %s" % r.header("Cache-Control"))
        js = srv.get("/assets/app-1a2b.js", token=None)
        if js.status != 200 or js.raw != SCRIPT or "javascript" not in js.header("Content-Type"):
            fail("the script: %s %s" % (js.status, js.header("Content-Type")))
        if "immutable" not in js.header("Cache-Control"):
            fail("hashed assets are not cached: %s" % js.header("Cache-Control"))
        again = srv.get("/assets/app-1a2b.js", token=None,
                        headers={"If-None-Match": js.header("ETag")})
        if again.status != 304:
            fail("If-None-Match: %s" % again.status)
        for path in ("/assets/gone-0000.js", "/nope", "/livez/extra", "/API/V1/PLUGINS"):
            r = srv.get(path, token=None)
            if r.status != 404 or r.body is None or "error" not in r.body:
                fail("GET %s: want a JSON 404, got %s" % (path, r.short()))

    def api_not_shadowed():
        if srv.get(API + "/plugins", token=None).status != 401:
            fail("the API answered without a token behind the UI")
        if srv.get(API + "/nope").status != 404 or srv.get("/livez", token=None).status != 200:
            fail("API 404 or /livez changed")
        me = expect(srv.get(API + "/whoami"), 200)
        if me["role"] != "admin":
            fail("whoami (admin): %s" % me)
        viewer = srv.make_token("viewer", name="ui-viewer")["token"]
        me = expect(srv.get(API + "/whoami", token=viewer), 200)
        if me != {"name": "ui-viewer", "role": "viewer"}:
            fail("whoami (viewer): %s" % me)
        if srv.get(API + "/whoami", token="hf_" + "0" * 64).status != 401:
            fail("whoami with a bad token is not 401")

    def without_ui():
        srv.stop()
        bare = Server(binary, os.path.join(tmp, "data2"),
                      args=["--ui-dir", os.path.join(tmp, "missing")])
        r = bare.get("/", token=None)
        if r.status != 404 or "not installed" not in r.body["error"]["message"]:
            fail("GET / without a UI: %s" % r.short())
        expect(bare.get(API + "/plugins"), 200)
        bare.stop()

    c.run("files, app routes and caching", files)
    c.run("the API is not shadowed; whoami", api_not_shadowed)
    c.run("without a UI folder, GET / says how to build it", without_ui)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
