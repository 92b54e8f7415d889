#!/usr/bin/python3
"""./scripts/run.sh as a user runs it: started, stopped with Ctrl-C (SIGINT
to the terminal's whole foreground process group: the script and everything
it started in that group), then started again on the kept data dir, stopped
again, and started once more with --fresh.

- Ctrl-C ends the demo's work before anything stops: no task process, no
  agent and no server is left, and the first run's work reads cancelled, not
  failed.
- The second start on the kept data shows a healthy demo: the demo's tasks
  are submitted anew and run, no task reads failed (none "died while the
  agent was down"), the chat model answers again with the key in chat.key.
- --fresh starts on an empty store: only the demo's own tasks are there.

The script runs the binary under test (HETEROFLOW_BINARY) instead of
building one.

usage: test_demo_restart.py HETEROFLOW_BINARY
"""
import glob
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import ADMIN_TOKEN, Checks, fail, main_guard, task_processes, wait_until  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEMO_TASKS = 10 + 1   # examples/demo/tasks.json and urgent-task.json
LIVE = ("pending", "scheduled", "running")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Demo:
    def __init__(self, binary, tmp):
        self.binary = os.path.abspath(binary)
        self.data = os.path.join(tmp, "data")
        self.port = free_port()
        self.proc = None
        self.log = None
        self.runs = 0

    def start(self, *args):
        self.runs += 1
        self.log = os.path.join(os.path.dirname(self.data), "run-%d.log" % self.runs)
        env = dict(os.environ, HETEROFLOW_BINARY=self.binary, HETEROFLOW_DATA_DIR=self.data,
                   HETEROFLOW_LISTEN="127.0.0.1:%d" % self.port, HETEROFLOW_ADMIN_TOKEN=ADMIN_TOKEN)
        # A terminal's job: its own process group, which Ctrl-C signals whole.
        self.proc = subprocess.Popen([os.path.join(REPO, "scripts", "run.sh")] + list(args),
                                     cwd=REPO, env=env, stdout=open(self.log, "wb"),
                                     stderr=subprocess.STDOUT, start_new_session=True)
        wait_until(lambda: "HeteroFlow is running" in self.output() or self.proc.poll() is not None,
                   60, "run.sh says the demo is running")
        if self.proc.poll() is not None:
            fail("run.sh exited %d:\n%s" % (self.proc.returncode, self.output()[-3000:]))

    def output(self):
        try:
            with open(self.log, errors="replace") as f:
                return f.read()
        except OSError:
            return ""

    def ctrl_c(self):
        os.killpg(self.proc.pid, signal.SIGINT)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            fail("run.sh still running 60 s after Ctrl-C:\n" + self.output()[-3000:])

    def call(self, method, path, body=None, token=ADMIN_TOKEN):
        req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def tasks(self):
        out, after = [], None
        while True:
            status, page = self.call("GET", "/api/v1/tasks?limit=1000" +
                                     ("&after=%d" % after if after else ""))
            if status != 200:
                fail("GET tasks: %d %s" % (status, page))
            out += page["tasks"]
            after = page["next"]
            if not after:
                return out

    def leftovers(self):
        """Task processes under the demo's agents' work dirs, and processes
        (server, agents) started on the data dir."""
        left = task_processes(os.path.join(self.data, "agents"))
        for d in glob.glob("/proc/[0-9]*"):
            try:
                with open(d + "/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if self.data.encode() in b" ".join(argv) and os.path.basename(argv[0]) != b"python3":
                left.append(int(d[6:]))
        return sorted(set(left))


def main(binary, tmp):
    c = Checks("demo restart")
    demo = Demo(binary, tmp)

    def healthy(first_id):
        """The demo's tasks of this run (ids from first_id) run, and nothing
        of any run reads failed."""
        def up():
            ts = {t["name"]: t for t in demo.tasks() if t["id"] >= first_id}
            want = ("llama-pretrain-0", "llama-pretrain-1", "finetune-70b-urgent")
            return all(ts.get(n, {}).get("state") == "running" for n in want)
        wait_until(up, 30, "this run's training and fine-tune running")
        failed = [(t["id"], t["name"], t["pending_reason"]) for t in demo.tasks()
                  if t["state"] == "failed"]
        if failed:
            events = [demo.call("GET", "/api/v1/tasks/%d" % i)[1]["events"][-1] for i, _, _ in failed]
            fail("failed tasks: %s; last events %s" % (failed, events))

        def chat():
            status, m = demo.call("GET", "/api/v1/inference/models/qwen-7b-chat")
            return status == 200 and m["status"] == "running"
        wait_until(chat, 30, "the chat model running")
        with open(os.path.join(demo.data, "chat.key")) as f:
            key = f.read().strip()
        status, r = demo.call("POST", "/inference/v1/chat/completions", token=key, body={
            "model": "chat", "messages": [{"role": "user", "content": "hello"}]})
        if status != 200 or "echo: hello" not in r["choices"][0]["message"]["content"]:
            fail("chat with the key in chat.key: %d %s" % (status, r))

    def stopped_clean(what):
        demo.ctrl_c()
        try:
            wait_until(lambda: not demo.leftovers(), 5, "nothing left running after Ctrl-C")
        except Exception:
            left = demo.leftovers()
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            fail("%s: left running after Ctrl-C: %s\n%s" % (what, left, demo.output()[-2000:]))

    st = {}

    def first_run():
        demo.start()
        healthy(1)
        st["last_id"] = max(t["id"] for t in demo.tasks())
        stopped_clean("first run")

    def second_run():
        demo.start()
        firsts = [t for t in demo.tasks() if t["id"] <= st["last_id"]]
        if any(t["state"] == "failed" for t in firsts):
            fail("the first run's work reads failed: %s"
                 % [(t["name"], t["state"]) for t in firsts if t["state"] == "failed"])
        if not any(t["state"] == "cancelled" for t in firsts):
            fail("the first run's work does not read cancelled: %s"
                 % [(t["name"], t["state"]) for t in firsts])
        healthy(st["last_id"] + 1)
        old = [t for t in demo.tasks() if t["id"] <= st["last_id"] and t["state"] in LIVE]
        if old:
            fail("the first run's work is live again: %s" % [(t["name"], t["state"]) for t in old])
        stopped_clean("second run")

    def fresh_run():
        demo.start("--fresh")
        healthy(1)
        ts = demo.tasks()
        names = [t["name"] for t in ts if not t["name"].startswith(("qwen-7b-chat", "ddp-rendezvous"))]
        if len(names) != DEMO_TASKS:
            fail("--fresh: %d demo tasks in the store, not %d: %s" % (len(names), DEMO_TASKS, names))
        stopped_clean("fresh run")

    if c.run("Ctrl-C ends the demo's work and leaves nothing running", first_run):
        c.run("a second start on the kept data is a healthy demo", second_run)
        c.run("--fresh starts on an empty store", fresh_run)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
