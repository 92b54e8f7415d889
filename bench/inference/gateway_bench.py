#!/usr/bin/python3
"""Inference gateway benchmark, driven by bench/inference/run.sh (standard
library only; the load itself comes from the C++ client http_load).

  gateway_bench.py --binary HETEROFLOW --http-load HTTP_LOAD --echo-replica ECHO_REPLICA

Starts `heteroflow server --listen 127.0.0.1:0` on a temp data dir (admin
token in HETEROFLOW_ADMIN_TOKEN), one `heteroflow agent` with a declared
inventory of one 80 GiB GPU (--advertise-address 127.0.0.1), deploys over the
REST API
  echo   1 replica of echo_replica (C++, the project's HttpServer)   endpoint fast
  fake   1 replica of tests/inference/fake_model.py --chunks 5
         --chunk-delay-ms 20 (Python)                                endpoint slow
  echo2  2 replicas of echo_replica (when REPLICAS2=1)               endpoint fast2
and measures, for the same request sent to the replica's host:port (direct)
and through the server (/inference/v1/chat/completions with "model": the
endpoint, and /serve/<endpoint>/v1/chat/completions), with the endpoint's key:
  1. sequential latency on one keep-alive connection, N after WARMUP;
  2. requests/s at each of CONCURRENCY (closed loop, keep-alive, DURATION s
     after 1 s of warm-up), errors, and the server's CPU per request;
  3. time to first body byte of a streamed answer (fake), STREAM_N
     sequential requests;
  4. the gateway's latency (one connection, DURATION s) alone, then while
     SUBMITTERS clients submit tasks to the REST API as fast as they can
     (POST /api/v1/tasks, one task each, each acknowledged after its fsync;
     the tasks ask for more GPUs than the cluster has, so they wait and no
     process starts).
Prints the tables, then one line `INFERENCE_GATEWAY {json}`. Every process it
started (server, agent, replicas) is stopped on exit, failure and Ctrl-C.

Knobs (environment): N=2000 WARMUP=200 CONCURRENCY="1 8 32 64" DURATION=5
STREAM_N=200 REPLICAS2=1 ECHO_THREADS=2 SUBMITTERS=32 PHASES="1 2 3 4"
QUICKACK=0 (1: the client ACKs every segment at once, which hides the
server's delayed-ACK stall; see docs/BENCHMARKS.md).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "inference", "fake_model.py")
ADMIN = "hf_bench_admin_" + os.urandom(16).hex()
CLK = os.sysconf("SC_CLK_TCK")

N = int(os.environ.get("N", "2000"))
WARMUP = int(os.environ.get("WARMUP", "200"))
CONCURRENCY = [int(x) for x in os.environ.get("CONCURRENCY", "1 8 32 64").split()]
DURATION = float(os.environ.get("DURATION", "5"))
STREAM_N = int(os.environ.get("STREAM_N", "200"))
REPLICAS2 = os.environ.get("REPLICAS2", "1") == "1"
ECHO_THREADS = int(os.environ.get("ECHO_THREADS", "2"))
QUICKACK = os.environ.get("QUICKACK", "0")
SUBMITTERS = int(os.environ.get("SUBMITTERS", "32"))
PHASES = set(os.environ.get("PHASES", "1 2 3 4").split())


class Bench:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.server = None
        self.agent = None
        self.port = 0

    # ---- processes -------------------------------------------------------

    def start(self):
        env = dict(os.environ, HETEROFLOW_ADMIN_TOKEN=ADMIN)
        self.server_log = open(os.path.join(self.tmp, "server.log"), "w")
        self.server = subprocess.Popen(
            [self.args.binary, "server", "--listen", "127.0.0.1:0", "--data-dir",
             os.path.join(self.tmp, "data")],
            stdout=subprocess.PIPE, stderr=self.server_log, text=True, env=env)
        port = {}

        def reader():
            for line in self.server.stdout:
                m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m and "port" not in port:
                    port["port"] = int(m.group(1))
        threading.Thread(target=reader, daemon=True).start()
        deadline = time.monotonic() + 30
        while "port" not in port:
            if self.server.poll() is not None or time.monotonic() > deadline:
                sys.exit("server did not start; see " + self.server_log.name)
            time.sleep(0.05)
        self.port = port["port"]
        self.wait(lambda: self.call("GET", "/readyz")[0] == 200, 30, "server /readyz")
        st, tok = self.call("POST", "/api/v1/tokens",
                            {"name": "bench-agent", "role": "agent", "node": "bench-inf"})
        if st != 201:
            sys.exit("POST /api/v1/tokens: %d %r" % (st, tok))
        token_file = os.path.join(self.tmp, "agent.token")
        fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(tok["token"] + "\n")
        inv = os.path.join(self.tmp, "node.yaml")
        with open(os.path.join(self.tmp, "usage.yaml"), "w") as f:
            f.write("cpu_load: 0.1\nmemory_used: 0.1\ngpus: [{index: 0, utilization: 0.1, "
                    "memory_used_mib: 0}]\n")
        with open(inv, "w") as f:
            f.write("name: bench-inf\ncpu_milli: 64000\nmemory_mib: 262144\n"
                    "gpus: [{index: 0, model: A100-80G, memory_mib: 81920}]\n"
                    "usage_file: usage.yaml\n")
        self.work = os.path.join(self.tmp, "work")
        self.agent_log = open(os.path.join(self.tmp, "agent.log"), "w")
        self.agent = subprocess.Popen(
            [self.args.binary, "agent", "--server", "http://127.0.0.1:%d" % self.port,
             "--token-file", token_file, "--inventory", inv, "--work-dir", self.work,
             "--advertise-address", "127.0.0.1"],
            stdout=self.agent_log, stderr=self.agent_log)
        self.wait(lambda: self.call("GET", "/api/v1/nodes/bench-inf")[0] == 200, 30, "node bench-inf")

    def stop(self):
        for p in (self.agent, self.server):
            if p is not None and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        # Agents leave their tasks running when they stop (docs/AGENT.md):
        # each replica runs in its own process group, recorded in
        # WORK/tasks/<id>/pid as "<pid> <start time>".
        tasks = os.path.join(getattr(self, "work", "/nonexistent"), "tasks")
        if os.path.isdir(tasks):
            for t in os.listdir(tasks):
                try:
                    with open(os.path.join(tasks, t, "pid")) as f:
                        pid = int(f.read().split()[0])
                    os.killpg(pid, signal.SIGKILL)
                except (OSError, ValueError, IndexError):
                    pass

    # ---- REST ------------------------------------------------------------

    def call(self, method, path, body=None, token=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": "Bearer " + (token or ADMIN)}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            r = conn.getresponse()
            raw = r.read()
        except OSError as e:
            return 0, str(e)
        finally:
            conn.close()
        try:
            return r.status, json.loads(raw)
        except ValueError:
            return r.status, raw

    @staticmethod
    def wait(fn, timeout, what):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if fn():
                return
            time.sleep(0.1)
        sys.exit("timed out waiting for " + what)

    def deploy(self, name, command, replicas, endpoint):
        spec = {"name": name, "model": "bench/" + name, "command": command,
                "requests": {"gpu_memory_mib": 10240, "cpu_milli": 500, "memory_mib": 512},
                "min_replicas": replicas, "max_replicas": replicas}
        st, body = self.call("POST", "/api/v1/inference/models", spec)
        if st != 201:
            sys.exit("deploy %s: %d %r" % (name, st, body))
        st, ep = self.call("POST", "/api/v1/inference/endpoints", {"name": endpoint, "model": name})
        if st != 201:
            sys.exit("endpoint %s: %d %r" % (endpoint, st, ep))
        return ep["key"]["secret"]

    def wait_running(self, name, replicas):
        last = {}

        def ok():
            st, m = self.call("GET", "/api/v1/inference/models/" + name)
            last["m"] = m
            return st == 200 and m["status"] == "running" and m["ready_replicas"] == replicas
        deadline = time.monotonic() + 60
        while not ok():
            if time.monotonic() > deadline:
                sys.exit("model %s not running after 60 s: %s" % (name, json.dumps(last.get("m"))[:800]))
            time.sleep(0.2)
        return [r["address"] for r in last["m"]["replicas"]]

    # ---- load ------------------------------------------------------------

    def cpu_s(self, pid):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK

    def load_cmd(self, urls, body, key=None, **kw):
        cmd = [self.args.http_load, "--method", "POST", "--body", json.dumps(body),
               "--quickack", QUICKACK]
        for u in urls:
            cmd += ["--url", u]
        if key:
            cmd += ["--header", "Authorization: Bearer " + key]
        for k, v in kw.items():
            cmd += ["--" + k.replace("_", "-"), str(v)]
        return cmd

    @staticmethod
    def load_result(returncode, stdout, stderr):
        if returncode != 0:
            sys.exit("http_load failed (%d): %s" % (returncode, stderr))
        return json.loads(stdout.strip().splitlines()[-1])

    def load(self, urls, body, key=None, **kw):
        cpu0 = self.cpu_s(self.server.pid)
        out = subprocess.run(self.load_cmd(urls, body, key, **kw), capture_output=True, text=True,
                             timeout=600)
        cpu1 = self.cpu_s(self.server.pid)
        r = self.load_result(out.returncode, out.stdout, out.stderr)
        r["server_cpu_us_per_req"] = round((cpu1 - cpu0) * 1e6 / r["total"], 1) if r["total"] else None
        return r

    def submitting(self, seconds):
        """Starts SUBMITTERS clients submitting tasks for `seconds`; returns the process."""
        task = {"name": "load", "command": ["true"], "requests": {"gpu": 8}}
        cmd = self.load_cmd(["http://127.0.0.1:%d/api/v1/tasks" % self.port], task, ADMIN,
                            concurrency=SUBMITTERS, duration=seconds, warmup_s=0)
        return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def ms(us):
    return "%.3f" % (us / 1000.0)


def run(b):
    echo = [b.args.echo_replica, "--port", "{port}", "--host", "127.0.0.1", "--threads",
            str(ECHO_THREADS), "--model-id", "bench/echo"]
    keys = {"fast": b.deploy("echo", echo, 1, "fast")}
    keys["slow"] = b.deploy("fake", ["python3", FAKE, "--port", "{port}", "--host", "127.0.0.1",
                                     "--model-id", "bench/fake", "--chunks", "5",
                                     "--chunk-delay-ms", "20"], 1, "slow")
    if REPLICAS2:
        echo2 = list(echo)
        echo2[echo2.index("bench/echo")] = "bench/echo2"
        keys["fast2"] = b.deploy("echo2", echo2, 2, "fast2")
    addr = {"echo": b.wait_running("echo", 1), "fake": b.wait_running("fake", 1)}
    if REPLICAS2:
        addr["echo2"] = b.wait_running("echo2", 2)
    gw = "http://127.0.0.1:%d" % b.port
    msgs = [{"role": "user", "content": "hello"}]
    result = {"quickack": QUICKACK == "1", "n": N, "warmup": WARMUP, "duration_s": DURATION, "cpus": os.cpu_count(),
              "latency": {}, "throughput": {}, "stream": {}}

    def paths(model, ep):
        direct = ["http://%s/v1/chat/completions" % a for a in addr[model]]
        return {
            "direct": (direct, {"model": "bench/" + model, "messages": msgs}, None),
            "gateway_openai": ([gw + "/inference/v1/chat/completions"],
                               {"model": ep, "messages": msgs}, keys[ep]),
            "gateway_serve": ([gw + "/serve/%s/v1/chat/completions" % ep],
                              {"model": "bench/" + model, "messages": msgs}, keys[ep]),
        }

    if "1" in PHASES:
        phase1(b, paths, result)
    if "2" in PHASES:
        phase2(b, paths, result)
    if "3" in PHASES:
        phase3(b, paths, result)
    if "4" in PHASES:
        phase4(b, paths, result)
    print()
    print("INFERENCE_GATEWAY " + json.dumps(result, separators=(",", ":")))


def phase1(b, paths, result):
    # 1. Added latency, sequential.
    print("== 1. sequential latency, one keep-alive connection, %d requests after %d warm-up ==" % (N, WARMUP))
    print("%-8s %-16s %9s %9s %9s %9s  %s" % ("replica", "path", "p50 ms", "p90 ms", "p99 ms",
                                            "max ms", "server CPU/req"))
    for model, ep in (("echo", "fast"), ("fake", "slow")):
        rows = {}
        for name, (urls, body, key) in paths(model, ep).items():
            r = b.load(urls[:1], body, key, requests=N, warmup=WARMUP)
            rows[name] = r
            print("%-8s %-16s %9s %9s %9s %9s  %s%s" % (
                model, name, ms(r["p50_us"]), ms(r["p90_us"]), ms(r["p99_us"]), ms(r["max_us"]),
                "%.0f µs" % r["server_cpu_us_per_req"] if name != "direct" else "-",
                "  errors %d (%s)" % (r["errors"], r["first_error"]) if r["errors"] else ""))
        for name in ("gateway_openai", "gateway_serve"):
            d50 = rows[name]["p50_us"] - rows["direct"]["p50_us"]
            d99 = rows[name]["p99_us"] - rows["direct"]["p99_us"]
            rows[name + "_added_p50_us"] = round(d50, 1)
            rows[name + "_added_p99_us"] = round(d99, 1)
            print("%-8s %-16s added p50 %s ms, p99 %s ms" % (model, name, ms(d50), ms(d99)))
        result["latency"][model] = rows


def phase2(b, paths, result):
    # 2. Throughput.
    print()
    print("== 2. requests/s, closed loop, keep-alive, %.0f s after 1 s warm-up ==" % DURATION)
    print("%-8s %-16s %5s %10s %7s %9s %9s  %s" % ("replica", "path", "conc", "req/s", "errors",
                                                 "p50 ms", "p99 ms", "server CPU/req"))
    sets = [("echo", "fast", ("direct", "gateway_openai", "gateway_serve"))]
    if REPLICAS2:
        sets.append(("echo2", "fast2", ("direct", "gateway_openai")))
    for model, ep, names in sets:
        rows = {}
        for name in names:
            urls, body, key = paths(model, ep)[name]
            rows[name] = []
            for c in CONCURRENCY:
                r = b.load(urls, body, key, concurrency=c, duration=DURATION, warmup_s=1)
                rows[name].append(r)
                print("%-8s %-16s %5d %10.0f %7d %9s %9s  %s%s" % (
                    model, name, c, r["rps"], r["errors"], ms(r["p50_us"]), ms(r["p99_us"]),
                    "%.0f µs" % r["server_cpu_us_per_req"] if name != "direct" else "-",
                    "  (%s)" % r["first_error"] if r["errors"] else ""))
        result["throughput"][model] = rows


def phase3(b, paths, result):
    # 3. Streaming time to first byte.
    print()
    print("== 3. streamed answer (fake_model, 5 chunks, 20 ms apart): %d sequential requests ==" % STREAM_N)
    print("%-16s %12s %12s %12s %12s" % ("path", "TTFB p50 ms", "TTFB p99 ms", "total p50 ms",
                                         "total p99 ms"))
    for name, (urls, body, key) in paths("fake", "slow").items():
        body = dict(body, stream=True)
        r = b.load(urls, body, key, requests=STREAM_N, warmup=10)
        result["stream"][name] = r
        print("%-16s %12s %12s %12s %12s%s" % (
            name, ms(r["ttfb_p50_us"]), ms(r["ttfb_p99_us"]), ms(r["p50_us"]), ms(r["p99_us"]),
            "  errors %d (%s)" % (r["errors"], r["first_error"]) if r["errors"] else ""))


def phase4(b, paths, result):
    # 4. The gateway while the REST API takes a flood of fsynced writes.
    print()
    print("== 4. gateway latency (echo, one connection, %.0f s) alone and while %d clients submit tasks ==" %
          (DURATION, SUBMITTERS))
    print("%-22s %10s %9s %9s %9s %9s %12s" % ("", "req/s", "p50 ms", "p90 ms", "p99 ms", "max ms",
                                            "submits/s"))
    urls, body, key = paths("echo", "fast")["gateway_openai"]
    rows = {}
    for name in ("alone", "while_submitting"):
        sub = b.submitting(DURATION + 2) if name == "while_submitting" else None
        if sub:
            time.sleep(1)  # the submitters at full speed first
        r = b.load(urls, body, key, concurrency=1, duration=DURATION, warmup_s=0.5)
        if sub:
            out, err = sub.communicate(timeout=DURATION + 60)
            s = b.load_result(sub.returncode, out, err)
            r["submits_per_s"] = s["rps"]
            r["submit_p99_us"] = s["p99_us"]
            r["submit_errors"] = s["errors"]
        rows[name] = r
        print("%-22s %10.0f %9s %9s %9s %9s %12s%s" % (
            name, r["rps"], ms(r["p50_us"]), ms(r["p90_us"]), ms(r["p99_us"]), ms(r["max_us"]),
            "%.0f" % r["submits_per_s"] if sub else "-",
            "  errors %d (%s)" % (r["errors"], r["first_error"]) if r["errors"] else ""))
    result["under_submissions"] = rows


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--binary", required=True)
    p.add_argument("--http-load", required=True)
    p.add_argument("--echo-replica", required=True)
    p.add_argument("--keep", action="store_true", help="keep the temp dir (logs)")
    args = p.parse_args()
    # The agent runs replicas in their own work dirs: paths must be absolute.
    args.binary, args.http_load, args.echo_replica = (
        os.path.abspath(x) for x in (args.binary, args.http_load, args.echo_replica))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    tmp = tempfile.mkdtemp(prefix="hf-bench-inference-")
    b = Bench(args, tmp)
    try:
        b.start()
        run(b)
    finally:
        b.stop()
        if args.keep:
            print("logs in " + tmp, file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
