#!/usr/bin/env python3
"""End-to-end smoke test of `heteroflow server`: auth, plugins, scheduler
config, persistence across a restart, and the one-time admin token.

usage: server_smoke.py HETEROFLOW_BINARY
"""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import tempfile
import urllib.error
import urllib.request

TOKEN = "hf_smoke_test_token"


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Server:
    def __init__(self, binary, data_dir, env_token):
        env = dict(os.environ)
        env.pop("HETEROFLOW_ADMIN_TOKEN", None)
        if env_token:
            env["HETEROFLOW_ADMIN_TOKEN"] = env_token
        self.proc = subprocess.Popen(
            [binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        self.lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail("server exited before listening: " + self.proc.stderr.read())
            self.lines.append(line)
            m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.base = "http://127.0.0.1:" + m.group(1)
                return

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=20)
        if rc != 0:
            fail("server exited %d after SIGTERM" % rc)

    def call(self, method, path, body=None, token=TOKEN):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        if token:
            req.add_header("Authorization", "Bearer " + token)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


def expect(got, status, what):
    if got[0] != status:
        fail("%s: want %d, got %d %s" % (what, status, got[0], got[1]))
    return got[1]


def plugin(srv, name):
    body = expect(srv.call("GET", "/api/v1/plugins"), 200, "GET plugins")
    for p in body["plugins"]:
        if p["name"] == name:
            return p
    fail("no plugin " + name)


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        srv = Server(binary, data, TOKEN)
        if any("token" in l for l in srv.lines):
            fail("a token from the environment must not be printed")
        expect(srv.call("GET", "/livez", token=None), 200, "livez")
        expect(srv.call("GET", "/readyz", token=None), 200, "readyz")
        body = expect(srv.call("GET", "/api/v1/plugins", token=None), 401, "no token")
        if body["error"]["code"] != "unauthenticated":
            fail("401 body: %s" % body)
        expect(srv.call("GET", "/api/v1/plugins", token="hf_wrong"), 401, "bad token")
        binpack = plugin(srv, "binpack")
        vision = {"name": "binpack", "type": "Score", "enabled": True, "weight": 1,
                  "status": "active", "config": {}}
        for k, v in vision.items():
            if binpack.get(k) != v or type(binpack.get(k)) is not type(v):
                fail("binpack.%s: want %r, got %r" % (k, v, binpack.get(k)))
        body = expect(srv.call("PUT", "/api/v1/plugins/binpack", {"enabled": True, "weight": 2}),
                      200, "PUT binpack")
        if body["weight"] != 2:
            fail("binpack weight after PUT: %s" % body)
        body = expect(srv.call("PUT", "/api/v1/plugins/spread", {"enabled": True}), 409,
                      "PUT spread")
        if "binpack" not in body["error"]["message"]:
            fail("409 must name binpack: %s" % body)
        if plugin(srv, "spread")["enabled"]:
            fail("spread enabled after a refused PUT")
        expect(srv.call("PUT", "/api/v1/plugins/nosuch", {"enabled": True}), 404, "unknown plugin")
        expect(srv.call("PUT", "/api/v1/plugins/binpack", {"weight": -1}), 400, "bad weight")
        expect(srv.call("PUT", "/api/v1/scheduler/config",
                        {"load_threshold": 0.85, "gpu_load_threshold": 0.9}), 200, "PUT config")
        body = expect(srv.call("PUT", "/api/v1/scheduler/config", {"load_threshold": 1.5}), 400,
                      "bad threshold")
        if "load_threshold" not in body["error"]["message"]:
            fail("400 must name load_threshold: %s" % body)
        cfg = expect(srv.call("GET", "/api/v1/scheduler/config"), 200, "GET config")
        if cfg["load_threshold"] != 0.85 or cfg["score_weights"].get("binpack") != 2:
            fail("config: %s" % cfg)
        srv.stop()

        srv = Server(binary, data, TOKEN)
        if plugin(srv, "binpack")["weight"] != 2:
            fail("binpack weight lost on restart")
        cfg = expect(srv.call("GET", "/api/v1/scheduler/config"), 200, "GET config after restart")
        if cfg["load_threshold"] != 0.85 or cfg["gpu_load_threshold"] != 0.9:
            fail("config lost on restart: %s" % cfg)
        srv.stop()

        # Generated token: printed once, saved with mode 0600, never again.
        data2 = os.path.join(tmp, "data2")
        srv = Server(binary, data2, None)
        printed = [m.group(0) for l in srv.lines for m in [re.search(r"hf_[0-9a-f]{64}", l)] if m]
        if len(printed) != 1:
            fail("first start must print the generated token once: %s" % srv.lines)
        path = os.path.join(data2, "admin.token")
        if stat.S_IMODE(os.stat(path).st_mode) != 0o600:
            fail("admin.token mode %o" % stat.S_IMODE(os.stat(path).st_mode))
        with open(path) as f:
            if f.read().strip() != printed[0]:
                fail("admin.token differs from the printed token")
        expect(srv.call("GET", "/api/v1/plugins", token=printed[0]), 200, "generated token")
        srv.stop()
        srv = Server(binary, data2, None)
        if any(re.search(r"hf_[0-9a-f]{64}|token", l) for l in srv.lines):
            fail("second start printed a token: %s" % srv.lines)
        expect(srv.call("GET", "/api/v1/plugins", token=printed[0]), 200, "token after restart")
        srv.stop()
    print("PASS")


if __name__ == "__main__":
    main()
