#!/usr/bin/python3
"""The inference gateway through the official OpenAI Node SDK: a real server,
a real agent, a replica that is a real process of
tests/inference/fake_model.py behind a keyed endpoint; then
web/e2e/openai-sdk.mjs (the `openai` npm package pinned in
web/package-lock.json) calls, as an application would: models.list,
models.retrieve, chat (plain and streamed with stream_options.include_usage),
completions, embeddings, a wrong key (AuthenticationError) and an unknown
endpoint (NotFoundError). Every call must pass, and every call must be made.

usage: test_openai_sdk.py HETEROFLOW_BINARY
"""
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from hfapi import _LIVE, API, Checks, Server, expect, fail, main_guard, wait_until  # noqa: E402
from test_inference import FAKE, kill_replicas  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(ROOT, "web", "e2e", "openai-sdk.mjs")
CALLS = ["models.list", "models.retrieve", "chat.completions.create", "chat.completions.create stream",
         "completions.create", "embeddings.create", "wrong key -> AuthenticationError",
         "unknown endpoint -> NotFoundError"]


def main(binary, tmp):
    try:
        run(binary, tmp)
    finally:
        kill_replicas(tmp)


def run(binary, tmp):
    node = shutil.which("node")
    if node is None:
        fail("node is not installed (scripts/install-deps.sh installs nodejs)")
    if not os.path.isdir(os.path.join(ROOT, "web", "node_modules", "openai")):
        fail("web/node_modules/openai is missing: the build runs npm ci in web/ (cmake/ui.cmake)")
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("openai_sdk")
    st = {}

    def serve():
        inv = os.path.join(tmp, "sdk-a.yaml")
        with open(inv, "w") as f:
            f.write("name: sdk-a\ncpu_milli: 16000\nmemory_mib: 65536\n"
                    "gpus: [{index: 0, model: T4, memory_mib: 16384}]\n")
        log = open(os.path.join(tmp, "sdk-a.log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file("sdk-a", tmp), "--inventory", inv,
                              "--work-dir", os.path.join(tmp, "work"), "--grace-period-s", "2",
                              "--advertise-address", "127.0.0.1"], stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        wait_until(lambda: srv.get(API + "/nodes/sdk-a").status == 200, 15, "node sdk-a")
        expect(srv.call("POST", API + "/inference/models", {
            "name": "qwen", "model": "Qwen/Qwen2-7B-Instruct",
            "command": ["python3", FAKE, "--port", "{port}", "--host", "127.0.0.1",
                        "--model-id", "Qwen/Qwen2-7B-Instruct", "--chunk-delay-ms", "5"],
            "requests": {"gpu_memory_mib": 4096, "cpu_milli": 500, "memory_mib": 1024},
            "min_replicas": 1, "max_replicas": 1}), 201, "deploy")
        wait_until(lambda: expect(srv.get(API + "/inference/models/qwen"), 200)["ready_replicas"] == 1,
                   30, "the replica ready")
        ep = expect(srv.call("POST", API + "/inference/endpoints",
                             {"name": "chat", "model": "qwen", "public": False}), 201)
        st["key"] = ep["key"]["secret"]

    def sdk():
        r = subprocess.run([shutil.which("node"), SCRIPT, "--base-url",
                            "http://127.0.0.1:%d/inference/v1" % srv.port, "--key", st["key"],
                            "--endpoint", "chat", "--model-id", "Qwen/Qwen2-7B-Instruct"],
                           capture_output=True, timeout=120, cwd=ROOT)
        out = r.stdout.decode(errors="replace")
        for line in out.splitlines():
            print("  " + line)
        if r.returncode != 0:
            fail("openai-sdk.mjs exit %d\n%s%s" % (r.returncode, out, r.stderr.decode(errors="replace")))
        passed = [line[5:].split(":", 1)[0] for line in out.splitlines() if line.startswith("ok   ")]
        if passed != CALLS:
            fail("SDK calls passed %r, want exactly %r" % (passed, CALLS))

    c.run("a replica behind a keyed endpoint", serve)
    c.run("the official OpenAI SDK: every call", sdk)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
