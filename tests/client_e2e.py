#!/usr/bin/env python3
"""End-to-end test of the kubectl-style client (docs/CLIENT.md): the real
`heteroflow server` on a free port with a temp data dir, and the real client
commands run against it, checking outputs and exit codes.

usage: client_e2e.py HETEROFLOW_BINARY
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

TOKEN = "hf_client_e2e_token"
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Server:
    def __init__(self, binary, data_dir):
        env = dict(os.environ)
        env["HETEROFLOW_ADMIN_TOKEN"] = TOKEN
        self.proc = subprocess.Popen(
            [binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data_dir],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        while True:
            line = self.proc.stdout.readline()
            if not line:
                fail("server exited before listening: " + self.proc.stderr.read())
            m = re.match(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                return

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=20)


class Client:
    """Runs client commands with a clean environment: no HETEROFLOW_* from
    the caller, and HOME / XDG_CONFIG_HOME in the temp dir."""

    def __init__(self, binary, home):
        self.binary = binary
        self.env = {k: v for k, v in os.environ.items()
                    if not k.startswith("HETEROFLOW_") and k != "XDG_CONFIG_HOME"}
        self.env["HOME"] = home
        self.outputs = []

    def run(self, args, want_rc, env=None, stdin=None):
        e = dict(self.env)
        e.update(env or {})
        p = subprocess.run([self.binary] + args, capture_output=True, text=True, env=e,
                           input=stdin, timeout=30)
        self.outputs.append(p.stdout + p.stderr)
        if p.returncode != want_rc:
            fail("%s: want exit %d, got %d\nstdout: %s\nstderr: %s"
                 % (" ".join(args), want_rc, p.returncode, p.stdout, p.stderr))
        return p.stdout, p.stderr


def expect_in(needle, text, what):
    if needle not in text:
        fail("%s: %r not in:\n%s" % (what, needle, text))


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def main():
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        srv = Server(binary, os.path.join(tmp, "data"))
        try:
            run_checks(binary, srv.url, tmp)
        finally:
            srv.stop()
    print("PASS")


def run_checks(binary, url, tmp):
    c = Client(binary, os.path.join(tmp, "home"))
    auth = ["--server", url, "--token", TOKEN]

    # get plugins: table, json, yaml, one by name.
    out, _ = c.run(["get", "plugins"] + auth, 0)
    lines = out.splitlines()
    if not re.match(r"NAME\s+TYPE\s+ENABLED\s+WEIGHT\s+STATUS\s+MODE$", lines[0]):
        fail("plugins table header: %r" % lines[0])
    if not any(re.match(r"binpack\s+Score\s+true\s+1\s+active\s+<none>$", l) for l in lines):
        fail("plugins table has no binpack row:\n" + out)
    out, _ = c.run(["get", "plugins", "-o", "json"] + auth, 0)
    names = [p["name"] for p in json.loads(out)["plugins"]]
    if "binpack" not in names or "spread" not in names:
        fail("plugins json: %s" % names)
    out, _ = c.run(["get", "plugin", "spread", "-o", "yaml"] + auth, 0)
    expect_in("name: spread\n", out, "get plugin spread -o yaml")
    expect_in("enabled: false\n", out, "get plugin spread -o yaml")
    _, err = c.run(["get", "plugins", "nosuch"] + auth, 1)
    expect_in("not_found", err, "get an unknown plugin")

    # plugins set: only the given fields.
    out, _ = c.run(["plugins", "set", "binpack", "--weight", "2"] + auth, 0)
    if not re.search(r"^binpack\s+Score\s+true\s+2\s+active", out, re.M):
        fail("plugins set output:\n" + out)
    out, _ = c.run(["get", "plugins", "binpack", "-o", "json"] + auth, 0)
    if json.loads(out)["weight"] != 2 or json.loads(out)["enabled"] is not True:
        fail("binpack after set: " + out)

    # config set / get.
    out, _ = c.run(["config", "set", "load_threshold=0.85", "score_weights.binpack=3"] + auth, 0)
    if not re.search(r"^load_threshold\s+0\.85$", out, re.M):
        fail("config set output:\n" + out)
    out, _ = c.run(["config", "get", "-o", "json"] + auth, 0)
    cfg = json.loads(out)
    if cfg["load_threshold"] != 0.85 or cfg["score_weights"]["binpack"] != 3:
        fail("config after set: %s" % cfg)
    out, _ = c.run(["config", "get", "-o", "yaml"] + auth, 0)
    expect_in("load_threshold: 0.85\n", out, "config get -o yaml")
    expect_in("score_weights:\n  binpack: 3\n", out, "config get -o yaml")

    # API errors: exit 1 with the server's status, code and message.
    _, err = c.run(["get", "plugins", "--server", url, "--token", "hf_wrong"], 1)
    expect_in("error: 401 unauthenticated", err, "bad token")
    _, err = c.run(["get", "plugins", "--server", url], 1)
    expect_in("error: 401 unauthenticated", err, "no token")
    expect_in("no token given", err, "no token hint")
    _, err = c.run(["plugins", "set", "spread", "--enabled=true"] + auth, 1)
    expect_in("error: 409 conflict", err, "enabling spread")
    expect_in("binpack", err, "the 409 names binpack")
    out, _ = c.run(["get", "plugins", "spread", "-o", "json"] + auth, 0)
    if json.loads(out)["enabled"]:
        fail("spread enabled after a refused set")
    _, err = c.run(["config", "set", "load_threshold=1.5"] + auth, 1)
    expect_in("error: 400 invalid_argument", err, "bad threshold")
    expect_in("load_threshold", err, "bad threshold names the key")
    _, err = c.run(["plugins", "set", "nosuch", "--weight", "1"] + auth, 1)
    expect_in("error: 404 not_found", err, "unknown plugin")

    # No server: exit 1 and a clear message.
    _, err = c.run(["get", "plugins", "--server", "http://127.0.0.1:%d" % free_port(),
                    "--token", TOKEN], 1)
    expect_in("connection refused", err, "connection refused")

    # Usage errors: exit 2, nothing sent.
    for args in (["get", "pods"], ["get", "plugins", "-o", "wide"], ["config", "set", "x"],
                 ["config", "set"], ["config"], ["plugins", "set", "binpack"],
                 ["plugins", "set", "binpack", "--enabled", "maybe"], ["get", "tasks", "abc"],
                 ["get", "nodes", "--state", "pending"], ["describe", "plugin", "binpack"],
                 ["apply"], ["apply", "-f", os.path.join(tmp, "missing.yaml")],
                 ["get", "plugins", "--server", "https://127.0.0.1:1"],
                 ["describe", "model"], ["describe", "plugin", "x"], ["delete", "pods", "x"]):
        c.run(args, 2)

    # Resolution: flags, then the environment, then the config file.
    xdg = os.path.join(tmp, "xdg")
    os.makedirs(os.path.join(xdg, "heteroflow"))
    with open(os.path.join(xdg, "heteroflow", "config.yaml"), "w") as f:
        f.write("server: %s\ntoken: %s\n" % (url, TOKEN))
    c.run(["config", "get"], 0, env={"XDG_CONFIG_HOME": xdg})
    _, err = c.run(["config", "get"], 1, env={"XDG_CONFIG_HOME": xdg,
                                               "HETEROFLOW_TOKEN": "hf_env_wrong"})
    expect_in("the token came from HETEROFLOW_TOKEN", err, "env beats the file")
    c.run(["config", "get", "--token", TOKEN], 0,
          env={"XDG_CONFIG_HOME": xdg, "HETEROFLOW_TOKEN": "hf_env_wrong"})
    _, err = c.run(["config", "get"], 1,
                   env={"XDG_CONFIG_HOME": xdg, "HETEROFLOW_SERVER": "http://127.0.0.1:%d"
                        % free_port()})
    expect_in("came from HETEROFLOW_SERVER", err, "env server beats the file")
    home_cfg = os.path.join(tmp, "home", ".config", "heteroflow")
    os.makedirs(home_cfg)
    with open(os.path.join(home_cfg, "config.yaml"), "w") as f:
        f.write("server: %s\ntoken: %s\n" % (url, TOKEN))
    c.run(["get", "plugins"], 0)  # ~/.config when XDG_CONFIG_HOME is unset
    with open(os.path.join(home_cfg, "config.yaml"), "w") as f:
        f.write("servr: x\n")
    _, err = c.run(["get", "plugins"], 2)
    expect_in("unknown key", err, "bad config file")
    os.remove(os.path.join(home_cfg, "config.yaml"))

    # apply, get, describe, cordon, delete: nodes and tasks.
    manifest = os.path.join(tmp, "cluster.yaml")
    with open(manifest, "w") as f:
        f.write("kind: node\nname: gpu-a1\ncpu_milli: 64000\nmemory_mib: 524288\n"
                "gpus:\n  - {index: 0, model: A100-80G, memory_mib: 81920}\n"
                "  - {index: 1, model: A100-80G, memory_mib: 81920}\n"
                "topology: {zone: z1, switch: s1, rack: r1}\n"
                "---\n"
                "tasks:\n"
                "  - name: train-a\n    priority: 5\n"
                "    requests: {cpu_milli: 4000, memory_mib: 16384, gpu: 1}\n"
                "    command: [python, train.py, --lr, 0.1]\n"
                "  - name: huge\n    requests: {gpu: 8}\n")
    out, _ = c.run(["apply", "-f", manifest, "--dry-run"], 0)
    expect_in("task train-a checked (dry run)", out, "dry run")
    out, _ = c.run(["apply", "-f", manifest] + auth, 0)
    expect_in("node/gpu-a1 created", out, "apply node")
    m = re.search(r"task/(\d+) created \(train-a\)", out)
    if not m or "created (huge)" not in out:
        fail("apply tasks:\n" + out)
    train_id = m.group(1)
    out, _ = c.run(["apply", "-f", "-", "-o", "json"] + auth, 0,
                   stdin='{"name": "small", "requests": {"gpu": 1, "gpu_milli": 500}}')
    small = json.loads(out)["tasks"][0]
    if small["name"] != "small":
        fail("apply from stdin: " + out)
    _, err = c.run(["apply", "-f", "-"] + auth, 2, stdin="name: x\nrequests: {gpu: two}\n")
    expect_in("requests.gpu", err, "bad manifest names the field")

    out, _ = c.run(["get", "nodes"] + auth, 0)
    if not re.search(r"^gpu-a1\s+Ready\s+2/2 \(1 shared\)\s+nvidia\s+A100-80G\s+4/64\s+16Gi/512Gi\s+r1$", out, re.M):
        fail("nodes table:\n" + out)
    out, _ = c.run(["get", "tasks"] + auth, 0)
    if not re.search(r"^%s\s+train-a\s+scheduled\s+5\s+gpu-a1\s+1\s" % train_id, out, re.M):
        fail("tasks table:\n" + out)
    if not re.search(r"\shuge\s+pending\s.*nodes available", out):
        fail("pending task with its reason:\n" + out)
    out, _ = c.run(["get", "tasks", "--state", "pending", "-o", "json"] + auth, 0)
    if [t["name"] for t in json.loads(out)["tasks"]] != ["huge"]:
        fail("tasks --state pending: " + out)
    out, _ = c.run(["describe", "task", train_id] + auth, 0)
    for needle in ("Name:", "train-a", "State:", "scheduled", "Node:", "gpu-a1",
                   "Allocation:", "Events:", "submitted", "python train.py --lr 0.1"):
        expect_in(needle, out, "describe task")
    out, _ = c.run(["describe", "node", "gpu-a1"] + auth, 0)
    expect_in("Condition:  Ready", out, "describe node")
    expect_in("A100-80G", out, "describe node")
    _, err = c.run(["describe", "task", "9999"] + auth, 1)
    expect_in("error: 404 not_found", err, "describe an unknown task")

    out, _ = c.run(["cordon", "gpu-a1"] + auth, 0)
    expect_in("node/gpu-a1 cordoned", out, "cordon")
    out, _ = c.run(["get", "node", "gpu-a1", "-o", "json"] + auth, 0)
    if json.loads(out)["condition"] != "Draining":
        fail("condition after cordon: " + out)
    c.run(["uncordon", "gpu-a1"] + auth, 0)
    _, err = c.run(["delete", "node", "gpu-a1"] + auth, 1)
    expect_in("error: 422 failed_precondition", err, "delete a busy node")
    out, _ = c.run(["delete", "task", train_id] + auth, 0)
    expect_in("task/%s cancelled" % train_id, out, "delete task")

    # Jobs: apply -f, get, describe, delete (docs/JOBS.md).
    job_file = os.path.join(tmp, "job.yaml")
    with open(job_file, "w") as f:
        f.write("kind: job\nname: big-train\nroles:\n  - name: worker\n    replicas: 3\n"
                "    command: [python, train.py]\n    requests: {gpu: 8}\n")
    out, _ = c.run(["apply", "-f", job_file, "--dry-run"], 0)
    expect_in("job big-train checked (dry run)", out, "apply a job, dry run")
    out, _ = c.run(["apply", "-f", job_file] + auth, 0)
    m = re.search(r"^job/(\d+) created \(big-train, 3 members\)$", out, re.M)
    if not m:
        fail("apply a job:\n" + out)
    job_id = m.group(1)
    for _ in range(50):  # the reason comes with the scheduler's next cycle
        out, _ = c.run(["get", "jobs"] + auth, 0)
        if "placeable" in out:
            break
        time.sleep(0.1)
    if not re.search(r"^%s\s+big-train\s+pending\s+0/3\s+3\s.*gang [0-2]/3 placeable: big-train-"
                     % job_id, out, re.M):
        fail("a gang larger than the cluster waits with its reason; jobs table:\n" + out)
    out, _ = c.run(["describe", "job", job_id] + auth, 0)
    for needle in ("Name:", "big-train", "Gang:", "3 of 3 members, all or none", "Members:",
                   "big-train-worker-2", "Events:", "submitted"):
        expect_in(needle, out, "describe job")
    _, err = c.run(["apply", "-f", "-"] + auth, 2,
                   stdin="kind: job\nname: j\nroles: [{name: w, replicas: 0}]\n")
    expect_in("roles[0].replicas must be >= 1", err, "a bad job is refused before sending")
    out, _ = c.run(["delete", "job", job_id] + auth, 0)
    expect_in("job/%s cancelled" % job_id, out, "delete job")
    out, _ = c.run(["get", "job", job_id, "-o", "json"] + auth, 0)
    if json.loads(out)["state"] != "cancelled":
        fail("job after delete: " + out)

    out, _ = c.run(["get", "tokens"] + auth, 0)
    if not re.search(r"^1\s+admin\s+admin\s+true\s", out, re.M):
        fail("tokens table:\n" + out)

    check_inference(c, auth, url, tmp)

    # The token never appears in anything the client printed.
    for o in c.outputs:
        if TOKEN in o:
            fail("the token was printed:\n" + o)


def api(url, method, path, body=None, want=200):
    req = urllib.request.Request(url + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + TOKEN})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    if status != want:
        fail("%s %s: want %d, got %d: %s" % (method, path, want, status, text))
    return json.loads(text) if text else None


def check_inference(c, auth, url, tmp):
    """Models and endpoints: made through the REST API and through apply, then
    shown by get / describe and removed by delete. No agent runs, so the
    replica stays pending (gpu-a1 is cordoned so that it is not placed)."""
    c.run(["cordon", "gpu-a1"] + auth, 0)
    model = {"name": "e2e-model",
             "command": ["python3", os.path.join(REPO, "tests", "inference", "fake_model.py"),
                         "--port", "{port}"],
             "requests": {"gpu_memory_mib": 1024}}
    api(url, "POST", "/api/v1/inference/models", model, want=201)
    made = api(url, "POST", "/api/v1/inference/endpoints",
               {"name": "e2e-chat", "model": "e2e-model"}, want=201)
    if not made.get("key", {}).get("secret", "").startswith("hfk_"):
        fail("endpoint without a key secret: %s" % made)
    # The controller makes the replica (a task) on its next pass.
    deadline = time.time() + 15
    while not api(url, "GET", "/api/v1/inference/models/e2e-model")["replicas"]:
        if time.time() > deadline:
            fail("no replica for e2e-model after 15 s")
        time.sleep(0.2)

    out, _ = c.run(["get", "models"] + auth, 0)
    lines = out.splitlines()
    if not re.match(r"NAME\s+MODEL\s+STATUS\s+READY\s+INFLIGHT\s+QUEUED\s+MIN-MAX\s+"
                    r"AUTOSCALE\s+REVISION\s+AGE$", lines[0]):
        fail("models table header: %r" % lines[0])
    if not re.search(r"^e2e-model\s+e2e-model\s+deploying\s+0/1\s+0\s+0\s+1-1\s+-\s+1\s+\d+s$",
                     out, re.M):
        fail("models table:\n" + out)
    out, _ = c.run(["get", "mo", "e2e-model", "-o", "json"] + auth, 0)
    view = json.loads(out)
    if view["name"] != "e2e-model" or len(view["replicas"]) != 1 or view["endpoints"] != ["e2e-chat"]:
        fail("get model -o json: " + out)
    out, _ = c.run(["get", "model", "e2e-model", "-o", "yaml"] + auth, 0)
    expect_in("name: e2e-model\n", out, "get model -o yaml")
    _, err = c.run(["get", "model", "nosuch"] + auth, 1)
    expect_in("error: 404 not_found", err, "get an unknown model")

    out, _ = c.run(["get", "endpoints"] + auth, 0)
    if not re.match(r"NAME\s+MODEL\s+PUBLIC\s+KEYS\s+REQ/S\s+REQUESTS\s+ERRORS\s+P50\s+P99\s+"
                    r"INFLIGHT$", out.splitlines()[0]):
        fail("endpoints table header:\n" + out)
    if not re.search(r"^e2e-chat\s+e2e-model\s+false\s+1\s+0\s+0\s+0\s+-\s+-\s+0$", out, re.M):
        fail("endpoints table:\n" + out)
    out, _ = c.run(["get", "ep", "e2e-chat", "-o", "json"] + auth, 0)
    if json.loads(out)["model"] != "e2e-model" or "secret" in out:
        fail("get endpoint -o json: " + out)

    out, _ = c.run(["describe", "model", "e2e-model"] + auth, 0)
    for needle in ("Name:", "e2e-model", "Status:", "deploying", "Reason:", "Replicas:",
                   "0/1 ready (min 1, max 1)", "fake_model.py --port {port}",
                   "Autoscaling:      off", "Endpoints:        e2e-chat", "Replica List:",
                   "e2e-model-", "pending"):
        expect_in(needle, out, "describe model")
    out, _ = c.run(["describe", "endpoint", "e2e-chat"] + auth, 0)
    for needle in ("Model:", "e2e-model", "Public:", "/serve/e2e-chat/", "Keys:", "default"):
        expect_in(needle, out, "describe endpoint")

    # apply: the model exists (PUT), the endpoint is new (its secret printed once).
    manifest = os.path.join(tmp, "inference.yaml")
    with open(manifest, "w") as f:
        f.write("kind: Model\nname: e2e-model\n"
                "command: [python3, %s, --port, '{port}']\n"
                "requests: {gpu_memory_mib: 1024}\nmin_replicas: 1\nmax_replicas: 2\n"
                "autoscaling: {target_inflight_per_replica: 4}\n"
                "---\nkind: Endpoint\nname: e2e-chat2\nmodel: e2e-model\n"
                % os.path.join(REPO, "tests", "inference", "fake_model.py"))
    out, _ = c.run(["apply", "-f", manifest, "--dry-run"], 0)
    expect_in("model/e2e-model checked (dry run)", out, "apply --dry-run model")
    expect_in("endpoint/e2e-chat2 checked (dry run)", out, "apply --dry-run endpoint")
    out, _ = c.run(["apply", "-f", manifest] + auth, 0)
    expect_in("model/e2e-model configured", out, "apply an existing model")
    expect_in("endpoint/e2e-chat2 created", out, "apply a new endpoint")
    if not re.search(r"endpoint/e2e-chat2 key \d+ \(default\) secret: hfk_\w+", out):
        fail("apply endpoint: no secret:\n" + out)
    out, _ = c.run(["get", "models"] + auth, 0)
    if not re.search(r"^e2e-model\s+e2e-model\s+\w+\s+0/1\s+0\s+0\s+1-2\s+4\s+1\s", out, re.M):
        fail("models table after apply:\n" + out)
    out, _ = c.run(["apply", "-f", manifest] + auth, 0)
    expect_in("endpoint/e2e-chat2 unchanged", out, "apply again")
    if "secret" in out:
        fail("a second apply printed a secret:\n" + out)

    # delete: refused while an endpoint routes to the model.
    _, err = c.run(["delete", "model", "e2e-model"] + auth, 1)
    expect_in("error: 422 failed_precondition", err, "delete a routed model")
    out, _ = c.run(["delete", "endpoint", "e2e-chat"] + auth, 0)
    expect_in("endpoint/e2e-chat deleted", out, "delete endpoint")
    out, _ = c.run(["delete", "ep", "e2e-chat2"] + auth, 0)
    expect_in("endpoint/e2e-chat2 deleted", out, "delete endpoint")
    out, _ = c.run(["get", "endpoints", "-o", "json"] + auth, 0)
    if json.loads(out)["endpoints"]:
        fail("endpoints after delete: " + out)
    out, _ = c.run(["delete", "model", "e2e-model"] + auth, 0)
    expect_in("model/e2e-model deleted", out, "delete model")
    _, err = c.run(["describe", "model", "e2e-model"] + auth, 1)
    expect_in("error: 404 not_found", err, "describe a deleted model")
    c.run(["uncordon", "gpu-a1"] + auth, 0)


if __name__ == "__main__":
    main()
