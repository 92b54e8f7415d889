#!/usr/bin/python3
"""Inference services end to end: a real server, real agents, and replicas
that are real processes of tests/inference/fake_model.py (a small
OpenAI-compatible server).

  - two 20 GiB replicas pack onto one 80 GiB GPU (binpack), both become
    ready, and the panel shows them with the GPU's memory;
  - an endpoint answers through a replica (OpenAI style and pass-through),
    a streamed answer arrives in pieces, bad keys are 401 and unknown
    endpoints 404; per-endpoint counts and latency in the panel;
  - killing a replica's process takes it out of rotation without a failed
    request, and the model gets its replica back;
  - under N concurrent requests the model scales to ceil(N / target) and
    back down when the load stops; a min_replicas 0 model scales to zero and
    the next request still succeeds after a cold start; a replica that never
    gets ready makes waiting requests end 503 with the reason;
  - a rolling update never drops below the ready count;
  - a higher-priority training task preempts replicas only when the
    preempt plugin's mode allows running victims; the model is degraded and
    recovers once the GPUs are free again;
  - memory used on a GPU by processes outside HeteroFlow is shown and not
    handed out;
  - bad deployments and endpoints are 400 naming the field and change
    nothing; models and endpoints survive a server restart.

usage: test_inference.py HETEROFLOW_BINARY
"""
import json
import math
import os
import signal
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "inference"))
from hfapi import _LIVE, API, Checks, Server, expect, expect_error, fail, main_guard, wait_until  # noqa: E402
import loadgen  # noqa: E402

FAKE = os.path.join(os.path.dirname(HERE), "inference", "fake_model.py")


def fake_command(*extra):
    return ["python3", FAKE, "--port", "{port}", "--host", "127.0.0.1"] + list(extra)


def kill_replicas(tmp):
    """Replica processes started under tmp: agents leave their tasks running
    when they stop (as on a real node), so the test ends them itself."""
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % d, "rb") as f:
                cmd = f.read()
            cwd = os.readlink("/proc/%s/cwd" % d)
        except OSError:
            continue
        if FAKE.encode() in cmd and cwd.startswith(tmp):
            try:
                os.kill(int(d), signal.SIGKILL)
            except OSError:
                pass


def main(binary, tmp):
    try:
        run(binary, tmp)
    finally:
        kill_replicas(tmp)


def run(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"), args=["--node-grace-period", "5"])
    c = Checks("inference")

    def start_agent(name, gpus, model="A100-80G", memory=81920, used=None):
        inv = os.path.join(tmp, name + ".yaml")
        rows = ", ".join("{index: %d, model: %s, memory_mib: %d}" % (i, model, memory)
                         for i in range(gpus))
        with open(inv, "w") as f:
            f.write("name: %s\ncpu_milli: 64000\nmemory_mib: 262144\ngpus: [%s]\n"
                    "usage_file: %s-usage.yaml\n" % (name, rows, name))
        set_usage(name, gpus, used or [0] * gpus)
        log = open(os.path.join(tmp, name + ".log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file(name, tmp),
                              "--inventory", inv, "--work-dir",
                              os.path.join(tmp, "work-" + name), "--grace-period-s", "2",
                              "--advertise-address", "127.0.0.1"],
                             stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        wait_until(lambda: srv.get(API + "/nodes/" + name).status == 200, 15, "node " + name)
        return p

    def set_usage(name, gpus, used):
        with open(os.path.join(tmp, name + "-usage.yaml"), "w") as f:
            f.write("cpu_load: 0.1\nmemory_used: 0.1\ngpus: [%s]\n" % ", ".join(
                "{index: %d, utilization: 0.1, memory_used_mib: %d}" % (i, used[i])
                for i in range(gpus)))

    def model(name):
        return expect(srv.get(API + "/inference/models/" + name), 200)

    def deploy(spec, status=201):
        return expect(srv.call("POST", API + "/inference/models", spec), status, "deploy")

    def wait_model(name, pred, timeout, what):
        last = {}

        def ok():
            last["m"] = model(name)
            return pred(last["m"])
        try:
            wait_until(ok, timeout, what)
            return last["m"]
        except Exception:
            m = last.get("m", {})
            fail("%s: model %s is %s (%s), %s/%s ready, replicas %s" % (
                what, name, m.get("status"), m.get("reason"), m.get("ready_replicas"),
                m.get("desired_replicas"), json.dumps(m.get("replicas"))))

    def running(n):
        return lambda m: m["status"] == "running" and m["ready_replicas"] == n

    def endpoint(name, model_name, public=False):
        return expect(srv.call("POST", API + "/inference/endpoints",
                               {"name": name, "model": model_name, "public": public}), 201)

    def chat(ep, key, content="hi", stream=False, timeout=30):
        body = {"model": ep, "messages": [{"role": "user", "content": content}]}
        if stream:
            body["stream"] = True
        return srv.call("POST", "/inference/v1/chat/completions", body, token=key,
                        timeout=timeout)

    def panel():
        return expect(srv.get(API + "/inference/panel"), 200)

    def events(action):
        evs = expect(srv.get(API + "/events/recent?limit=200"), 200)["events"]
        return [e["data"] for e in evs if e["type"] == "inference" and e["data"].get("action") == action]

    state = {}

    def pack_and_serve():
        start_agent("inf-a", 2)
        deploy({"name": "echo", "model": "test/echo", "command": fake_command("--model-id", "test/echo"),
                "requests": {"gpu_memory_mib": 20480, "cpu_milli": 500, "memory_mib": 1024},
                "min_replicas": 2, "max_replicas": 2})
        m = wait_model("echo", running(2), 30, "two replicas ready")
        p = panel()
        pm = [x for x in p["models"] if x["name"] == "echo"]
        if not pm or pm[0]["ready_replicas"] != 2:
            fail("panel models: %r" % p["models"])
        ids = sorted(r["task"] for r in m["replicas"])
        gpus = [g for g in p["gpus"] if any(r["task"] in ids for r in g["replicas"])]
        if len(gpus) != 1:
            fail("the two replicas are on %d GPUs, not packed on one: %r" % (len(gpus), gpus))
        g = gpus[0]
        if sorted(r["task"] for r in g["replicas"]) != ids or g["memory_allocated_mib"] != 40960:
            fail("GPU %s/%d: replicas %r, allocated %r (want 40960)" % (
                g["node"], g["index"], g["replicas"], g["memory_allocated_mib"]))
        if g["memory_total_mib"] != 81920 or "memory_used_mib" not in g:
            fail("GPU memory fields: %r" % g)
        ep = endpoint("chat", "echo")
        state["key"] = ep["key"]["secret"]
        if not state["key"].startswith("hfk_"):
            fail("endpoint key %r" % ep["key"])

    def requests_and_keys():
        key = state["key"]
        r = expect(chat("chat", key, "ping"), 200)
        if r["model"] != "test/echo" or "ping" not in r["choices"][0]["message"]["content"]:
            fail("answer %r: the replica should see model test/echo and echo the message" % r)
        got = expect(srv.call("GET", "/serve/chat/v1/models", token=key), 200)
        if got["data"][0]["id"] != "test/echo":
            fail("pass-through /serve/chat/v1/models answered %r" % got)
        expect_error(chat("chat", "hfk_wrong"), 401, mentions=["chat"])
        expect_error(chat("chat", None), 401)
        expect_error(chat("nope", key), 404, mentions=["nope"])
        expect_error(srv.call("GET", "/serve/nope/v1/models", token=key), 404)
        expect_error(srv.call("POST", "/inference/v1/chat/completions", raw_body=b"{not json",
                              token=key), 400)
        expect_error(srv.call("POST", "/inference/v1/chat/completions", {"messages": []},
                              token=key), 400, mentions=["model"])
        # A decoded path cannot smuggle a header or a second request to the
        # replica: it reaches the replica as one (unknown) path, and the
        # next call on the pooled connection gets its own answer.
        smuggle = "/serve/chat/x%20HTTP/1.1%0D%0AX-A:%20b%0D%0A%0D%0AGET%20/v1/models%20HTTP/1.1"
        r = srv.call("GET", smuggle, token=key)
        if r.status != 404 or b"GET /x%20HTTP/1.1%0D%0AX-A%3A%20b%0D%0A" not in r.raw:
            fail("the replica should see one encoded path: %s" % r.short())
        for _ in range(4):
            got = expect(chat("chat", key, "after"), 200)
            if "after" not in got["choices"][0]["message"]["content"]:
                fail("a call after the smuggling attempt got another answer: %r" % got)
        # A deeply nested body is refused, not parsed into a stack overflow.
        deep = b'{"model": "chat", "x": ' + b"[" * 100000 + b"]" * 100000 + b"}"
        expect_error(srv.call("POST", "/inference/v1/chat/completions", raw_body=deep, token=key), 400)
        if not srv.alive():
            fail("the server died on a deeply nested body")
        # A chat request carrying an image (3 MiB of base64) passes the
        # gateway, whose body limit is 32 MiB; the REST API keeps 1 MiB.
        image = "data:image/png;base64," + "iVBORw0KGgo" * (3 * 1024 * 1024 // 11)
        big = {"model": "chat", "messages": [{"role": "user", "content": [
            {"type": "text", "text": "big-image"}, {"type": "image_url", "image_url": {"url": image}}]}]}
        r = srv.call("POST", "/inference/v1/chat/completions", big, token=key, timeout=60)
        if r.status != 200 or b"big-image" not in r.raw:
            fail("a 3 MiB chat request: %s" % r.short())
        # The REST API refuses the same size from the header alone (and may
        # close the connection before the body is sent).
        big_task = json.dumps({"name": "big", "command": ["true"], "env": {"IMAGE": image}}).encode()
        r = srv.raw(b"POST " + API.encode() + b"/tasks HTTP/1.1\r\nHost: t\r\n"
                    b"Authorization: Bearer " + srv.token.encode() + b"\r\n"
                    b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(big_task))
        if r.status != 413:
            fail("a 3 MiB task submission: %s" % r.short())
        # An admin token is not an endpoint key.
        expect_error(chat("chat", "admin"), 401)
        listed = expect(srv.call("GET", "/inference/v1/models", token=key), 200)
        if [d["id"] for d in listed["data"]] != ["chat"]:
            fail("/inference/v1/models with the key: %r" % listed)
        # Least outstanding requests spreads concurrent load over both replicas.
        res = loadgen.run("http://127.0.0.1:%d/inference/v1/chat/completions" % srv.port, key=key,
                          concurrency=4, requests=40, body={"model": "chat", "messages": [
                              {"role": "user", "content": "x"}]})
        if res["ok"] != 40 or len(res["replicas"]) != 2:
            fail("40 requests over 4 connections: %r" % res)
        ep = expect(srv.get(API + "/inference/endpoints/chat"), 200)
        if ep["requests"] < 42 or ep["latency_ms"]["p50"] <= 0 or ep["requests_per_s"] <= 0:
            fail("endpoint counts: %r" % ep)
        state["errors"] = ep["errors"]
        metrics = srv.call("GET", "/metrics").raw.decode()
        for line in ('heteroflow_inference_replicas_ready{model="echo"} 2',
                     'heteroflow_inference_replicas_desired{model="echo"} 2',
                     'heteroflow_inference_endpoint_requests_total{endpoint="chat",outcome="ok"} %d'
                     % (ep["requests"] - ep["errors"])):
            if line not in metrics.splitlines():
                fail("/metrics lacks %r" % line)

    def streaming():
        # Five chunks 300 ms apart: the first must arrive long before the last.
        deploy({"name": "slowstream", "command": fake_command("--chunks", "5", "--chunk-delay-ms", "300"),
                "requests": {"gpu_memory_mib": 1024}})
        wait_model("slowstream", running(1), 30, "streaming model ready")
        ep = endpoint("stream", "slowstream", public=True)
        if "key" in ep:
            fail("a public endpoint got a key: %r" % ep)
        body = json.dumps({"model": "stream", "stream": True,
                           "messages": [{"role": "user", "content": "s"}]}).encode()
        s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
        t0 = time.monotonic()
        s.sendall(b"POST /inference/v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
                  b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        arrivals, data = [], b""
        while b"[DONE]" not in data:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
            if b"data: {" in chunk:
                arrivals.append(time.monotonic() - t0)
        s.close()
        if b"text/event-stream" not in data.split(b"\r\n\r\n")[0] or data.count(b"data: {") != 5:
            fail("stream answer: %r" % data[:400])
        if len(arrivals) < 3 or arrivals[-1] - arrivals[0] < 0.8:
            fail("chunks arrived at %r s: buffered, not streamed" % arrivals)

    def kill_replica():
        key = state["key"]
        m = model("echo")
        first = expect(chat("chat", key), 200)
        victim_pid = None
        for _ in range(10):
            r = chat("chat", key)
            pid = r.header("X-Replica-Pid")
            if pid:
                victim_pid = int(pid)
                break
        if victim_pid is None:
            fail("no X-Replica-Pid header in %r" % (first,))
        os.kill(victim_pid, signal.SIGKILL)
        statuses = []
        for _ in range(30):
            r = chat("chat", key)
            statuses.append(r.status if r.status == 200 else (r.status, r.body))
            time.sleep(0.05)
        if any(s != 200 for s in statuses):
            fail("requests after the kill: %r" % statuses)
        old = {r["task"] for r in m["replicas"]}
        m2 = wait_model("echo", lambda m: running(2)(m) and {r["task"] for r in m["replicas"]} != old,
                        40, "a new replica replaces the killed one")
        killed = (old - {r["task"] for r in m2["replicas"]}).pop()
        t = expect(srv.get(API + "/tasks/%d" % killed), 200)
        if t["state"] != "failed":
            fail("the killed replica's task is %s" % t["state"])
        if not events("replica_ended"):
            fail("no replica_ended event")

    def autoscale():
        deploy({"name": "auto", "command": fake_command("--latency-ms", "400"),
                "requests": {"gpu_memory_mib": 2048},
                "min_replicas": 1, "max_replicas": 4,
                "autoscaling": {"target_inflight_per_replica": 2, "upscale_delay_s": 1,
                                "downscale_delay_s": 2, "window_s": 2}})
        wait_model("auto", running(1), 30, "one replica")
        endpoint("auto", "auto", public=True)
        n = 6
        want = math.ceil(n / 2)
        result = {}
        url = "http://127.0.0.1:%d/inference/v1/chat/completions" % srv.port
        th = threading.Thread(target=lambda: result.update(loadgen.run(
            url, concurrency=n, duration=14, body={"model": "auto", "messages": [
                {"role": "user", "content": "load"}]})))
        th.start()
        t0 = time.monotonic()
        wait_model("auto", lambda m: m["desired_replicas"] == want, 10,
                   "desired %d under %d concurrent requests" % (want, n))
        up = time.monotonic() - t0
        wait_model("auto", running(want), 30, "%d replicas ready" % want)
        th.join()
        if result.get("ok", 0) == 0 or result.get("errors"):
            fail("load run: %r" % result)
        scaled = [e for e in events("scaled") if e["model"] == "auto"]
        if not scaled or scaled[-1]["to"] != want or "mean_inflight" not in scaled[-1]["inputs"]:
            fail("scale-up decision event: %r" % scaled)
        wait_model("auto", running(1), 20, "back to one replica after the load")
        d = model("auto")["last_decision"]
        if d["to"] != 1 or d["inputs"]["target_inflight_per_replica"] != 2:
            fail("last decision %r" % d)
        print("     scaled to %d in %.1f s under load" % (want, up), flush=True)

    def scale_to_zero():
        deploy({"name": "zero", "command": fake_command("--ready-after", "1"),
                "requests": {"gpu_memory_mib": 2048},
                "min_replicas": 0, "max_replicas": 2,
                "autoscaling": {"target_inflight_per_replica": 4, "upscale_delay_s": 0,
                                "downscale_delay_s": 1, "window_s": 1,
                                "cold_start_timeout_s": 60}})
        m = model("zero")
        if m["status"] != "stopped" or m["replicas"]:
            fail("a min_replicas 0 model starts stopped, got %s %r" % (m["status"], m["replicas"]))
        endpoint("zero", "zero", public=True)
        for attempt in range(2):
            t0 = time.monotonic()
            r = expect(chat("zero", None, "cold", timeout=60), 200)
            took = time.monotonic() - t0
            if took < 0.9:
                fail("a cold start answered in %.2f s: the replica cannot have been ready" % took)
            wait_model("zero", lambda m: m["status"] == "stopped" and not m["replicas"], 20,
                       "scaled to zero again (round %d)" % attempt)
        if "cold" not in r["choices"][0]["message"]["content"]:
            fail("cold answer %r" % r)
        # A replica that never becomes ready: the waiting request ends 503.
        deploy({"name": "never", "command": fake_command("--ready-after", "1000"),
                "requests": {"gpu_memory_mib": 1024}, "min_replicas": 0, "max_replicas": 1,
                "autoscaling": {"target_inflight_per_replica": 1, "cold_start_timeout_s": 2}})
        endpoint("never", "never", public=True)
        r = chat("never", None, timeout=30)
        expect_error(r, 503, mentions=["never", "gave up"])

    def rolling_update():
        m = model("echo")
        spec = {k: m[k] for k in ("name", "model", "command", "requests", "min_replicas", "max_replicas")}
        spec["env"] = {"ROLL": "2"}
        seen = []
        stop = threading.Event()

        def watch():
            while not stop.is_set():
                seen.append(model("echo")["ready_replicas"])
                time.sleep(0.05)
        th = threading.Thread(target=watch)
        th.start()
        try:
            got = expect(srv.call("PUT", API + "/inference/models/echo", spec), 200)
            if got["revision"] != m["revision"] + 1:
                fail("revision %r after a new env (was %r)" % (got["revision"], m["revision"]))
            wait_model("echo", lambda x: running(2)(x) and all(
                r["revision"] == got["revision"] for r in x["replicas"]), 60, "rolled to revision 2")
        finally:
            stop.set()
            th.join()
        if min(seen) < 2:
            fail("ready replicas dropped to %d during the rolling update" % min(seen))
        # Scaling limits alone do not roll.
        spec["max_replicas"] = 3
        got = expect(srv.call("PUT", API + "/inference/models/echo", spec), 200)
        if got["revision"] != m["revision"] + 1:
            fail("a max_replicas change rolled the replicas")

    def preemption():
        # No L4 anywhere yet: the replica waits, and the status says why.
        deploy({"name": "victim2", "command": fake_command(), "priority": 0,
                "requests": {"gpu_memory_mib": 10240, "gpu_models": ["L4"]}})
        wait_model("victim2", lambda m: m["status"] == "deploying" and "pending" in m["reason"], 10,
                   "pending with its reason")
        start_agent("inf-l4", 1, model="L4", memory=23034)
        wait_model("victim2", running(1), 30, "replica on the L4")
        expect(srv.call("PUT", API + "/plugins/preempt",
                        {"enabled": True, "mode": "scheduled", "config": {"min_runtime_seconds": 0}}), 200)
        train = expect(srv.call("POST", API + "/tasks", {
            "name": "train-l4", "priority": 100, "requests": {"gpu": 1, "gpu_models": ["L4"]},
            "command": ["sleep", "300"]}), 201)
        time.sleep(2)
        t = expect(srv.get(API + "/tasks/%d" % train["id"]), 200)
        if t["state"] != "pending" or model("victim2")["status"] != "running":
            fail("mode scheduled: training %s, model %s" % (t["state"], model("victim2")["status"]))
        expect(srv.call("PUT", API + "/plugins/preempt",
                        {"enabled": True, "mode": "running", "config": {"min_runtime_seconds": 0}}), 200)
        wait_until(lambda: expect(srv.get(API + "/tasks/%d" % train["id"]), 200)["state"] == "running",
                   20, "training task running after preempting the replica")
        m = wait_model("victim2", lambda m: m["status"] == "degraded", 10, "model degraded")
        if "preempted" not in m["reason"] and "pending" not in m["reason"]:
            fail("degraded reason %r" % m["reason"])
        expect(srv.call("POST", API + "/tasks/%d/cancel" % train["id"]), 200)
        wait_model("victim2", running(1), 30, "model recovers when the GPU is free")
        expect(srv.call("PUT", API + "/plugins/preempt", {"enabled": True, "mode": "scheduled"}), 200)

    def outside_memory():
        # 40 GiB of the 46 GiB GPU used by something HeteroFlow did not start.
        start_agent("inf-o", 1, model="L40S", memory=46068, used=[40960])
        wait_until(lambda: any(g["node"] == "inf-o" and g["memory_outside_mib"] == 40960
                               for g in panel()["gpus"]), 15, "outside memory in the panel")
        deploy({"name": "squeezed", "command": fake_command(),
                "requests": {"gpu_memory_mib": 10240, "gpu_models": ["L40S"]}})
        time.sleep(1.5)
        m = model("squeezed")
        if m["ready_replicas"] != 0 or m["replicas"][0]["state"] != "pending":
            fail("a 10 GiB replica placed on a GPU with 5 GiB left: %r" % m["replicas"])
        set_usage("inf-o", 1, [1024])
        wait_model("squeezed", running(1), 30, "placed once the outside process freed its memory")
        expect(srv.call("DELETE", API + "/inference/models/squeezed"), 200)

    def bad_input():
        before = expect(srv.get(API + "/inference/models"), 200)
        good = {"name": "bad", "command": fake_command(), "requests": {"gpu_memory_mib": 1024}}
        cases = [
            (dict(good, min_replicas=3, max_replicas=2), ["min_replicas"]),
            (dict(good, requests={"gpu_memory_mib": -5}), ["requests.gpu_memory_mib"]),
            (dict(good, command=["python3", "x.py"]), ["{port}"]),
            (dict(good, colour="blue"), ["colour"]),
            (dict(good, min_replicas="two"), ["min_replicas"]),
            (dict(good, health_path="health"), ["health_path"]),
            (dict(good, autoscaling={"target_inflight_per_replica": 0}), ["target_inflight_per_replica"]),
            (dict(good, min_replicas=0, max_replicas=1, autoscaling={"queue_size": 0}), ["queue_size"]),
            ({k: v for k, v in good.items() if k != "command"}, ["command"]),
            (dict(good, name="Bad Name"), ["name"]),
        ]
        for body, words in cases:
            expect_error(srv.call("POST", API + "/inference/models", body), 400, mentions=words)
        expect_error(srv.call("POST", API + "/inference/models", raw_body=b"{\"name\":"), 400)
        expect_error(srv.call("PUT", API + "/inference/models/ghost", dict(good, name="ghost")), 404)
        expect_error(srv.call("POST", API + "/inference/endpoints", {"name": "e", "model": "ghost"}),
                     400, mentions=["model", "ghost"])
        expect_error(srv.call("POST", API + "/inference/endpoints", {"name": "e"}), 400, mentions=["model"])
        expect_error(srv.call("POST", API + "/inference/models", dict(good, name="echo")), 409)
        expect_error(srv.call("DELETE", API + "/inference/models/echo"), 422, mentions=["chat"])
        viewer = srv.make_token("viewer")["token"]
        expect_error(srv.call("POST", API + "/inference/models", good, token=viewer), 403)
        expect_error(srv.call("POST", API + "/inference/models", good, token=None), 401)
        after = expect(srv.get(API + "/inference/models"), 200)
        if [m["name"] for m in before["models"]] != [m["name"] for m in after["models"]]:
            fail("refused requests changed the models: %r" % after)
        if srv.get(API + "/inference/endpoints/e").status != 404:
            fail("a refused endpoint exists")

    def keys_and_restart():
        k2 = expect(srv.call("POST", API + "/inference/endpoints/chat/keys", {"name": "second"}), 201)
        expect(chat("chat", k2["secret"]), 200)
        expect(srv.call("DELETE", API + "/inference/endpoints/chat/keys/%d" % k2["id"]), 200)
        expect_error(chat("chat", k2["secret"]), 401)
        srv.restart()
        m = wait_model("echo", running(2), 30, "echo ready again after a server restart")
        if m["revision"] != 2:
            fail("revision after restart: %r" % m["revision"])
        expect(chat("chat", state["key"]), 200)
        ep = expect(srv.get(API + "/inference/endpoints/chat"), 200)
        if [k["name"] for k in ep["keys"]] != ["default"]:
            fail("keys after restart: %r" % ep["keys"])

    c.run("two 20 GiB replicas pack on one GPU, ready, in the panel", pack_and_serve)
    c.run("endpoint answers, keys 401, unknown 404, counts", requests_and_keys)
    c.run("a streamed answer arrives in pieces", streaming)
    c.run("a killed replica leaves the rotation without a failed request", kill_replica)
    c.run("autoscaling up to ceil(N/target) and back down", autoscale)
    c.run("scale to zero, cold start, cold-start timeout 503", scale_to_zero)
    c.run("rolling update keeps the ready count", rolling_update)
    c.run("preemption only in the mode that allows it; degraded, then recovers", preemption)
    c.run("GPU memory used outside HeteroFlow is not handed out", outside_memory)
    c.run("bad input 400 naming the field, nothing changed", bad_input)
    c.run("endpoint keys; models and endpoints survive a restart", keys_and_restart)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
