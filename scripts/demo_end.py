#!/usr/bin/python3
"""Ends the demo cluster's work through the API, so that nothing is left to
die with the agents: deletes the demo's endpoint and model (its replicas
drain and stop), cancels every job and every task still pending, scheduled
or running, and waits until the agents have stopped their processes.
./scripts/run.sh calls it when it is stopped (Ctrl-C), before it stops the
agents and the server, and at a start on a kept data dir, for what an
unclean stop left.

usage: demo_end.py BASE_URL [--work-dir DIR] [--timeout S]
The token is read from HETEROFLOW_TOKEN (never from the command line, where
`ps` would show it). --work-dir: the agents' work dirs; it waits until no
process runs in them. Exits 1 when the work could not be ended in time.
"""
import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.dont_write_bytecode = True
LIVE = ("pending", "scheduled", "running")
DEMO_ENDPOINT, DEMO_MODEL = "chat", "qwen-7b-chat"


class Api:
    def __init__(self, base, token):
        self.base, self.token = base.rstrip("/"), token

    def call(self, method, path, body=None):
        req = urllib.request.Request(self.base + "/api/v1" + path, method=method,
                                     data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + self.token,
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def all(self, path, key):
        out, after = [], None
        while True:
            status, page = self.call("GET", "%s?limit=1000%s" % (path, "&after=%d" % after if after else ""))
            if status != 200:
                raise RuntimeError("GET %s: %d %s" % (path, status, page))
            out += page[key]
            after = page.get("next")
            if not after:
                return out


def processes_in(root):
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                if os.readlink("/proc/%s/cwd" % d).startswith(root + os.sep):
                    pids.append(int(d))
            except OSError:
                pass
    return pids


def wait(what, fn, deadline):
    while not fn():
        if time.monotonic() > deadline:
            print("demo_end: %s: not within the time allowed" % what, file=sys.stderr)
            return False
        time.sleep(0.2)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("--work-dir")
    ap.add_argument("--timeout", type=float, default=30)
    args = ap.parse_args()
    token = os.environ.get("HETEROFLOW_TOKEN", "")
    if not token:
        sys.exit("demo_end: HETEROFLOW_TOKEN is not set")
    api = Api(args.base, token)
    deadline = time.monotonic() + args.timeout

    # An endpoint routes to the model until it is deleted (the model's delete
    # is refused while one does); 404 means an earlier stop got there first.
    for method, path in (("DELETE", "/inference/endpoints/" + DEMO_ENDPOINT),
                         ("DELETE", "/inference/models/" + DEMO_MODEL)):
        status, body = api.call(method, path)
        if status not in (200, 404):
            sys.exit("demo_end: %s %s: %d %s" % (method, path, status, body))
    ok = wait("the model %s deleted" % DEMO_MODEL,
              lambda: api.call("GET", "/inference/models/" + DEMO_MODEL)[0] == 404, deadline)

    # A job's members are cancelled with their job (cancelling a member
    # alone is refused), so jobs go first.
    for job in api.all("/jobs", "jobs"):
        if job["state"] not in ("succeeded", "failed", "cancelled"):
            status, body = api.call("POST", "/jobs/%d/cancel" % job["id"])
            if status not in (200, 404, 409):
                sys.exit("demo_end: cancel job %d: %d %s" % (job["id"], status, body))
    for task in api.all("/tasks", "tasks"):
        if task["state"] in LIVE and task.get("job") is None:
            status, body = api.call("POST", "/tasks/%d/cancel" % task["id"])
            if status not in (200, 404, 409, 422):
                sys.exit("demo_end: cancel task %d: %d %s" % (task["id"], status, body))
    ok &= wait("every task ended",
               lambda: not any(t["state"] in LIVE for t in api.all("/tasks", "tasks")), deadline)
    if args.work_dir:
        root = os.path.realpath(args.work_dir)
        ok &= wait("the task processes exited", lambda: not processes_in(root), deadline)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
