"""Shared harness for the end-to-end API tests of `heteroflow server`.

Standard library only (the metrics test adds Debian's python3-prometheus-client).
Each test script imports this module from its own directory and takes the
heteroflow binary as argv[1].

What it offers:
  - Server: starts `heteroflow server --listen 127.0.0.1:0 --data-dir DIR
    [--config FILE]` with HETEROFLOW_ADMIN_TOKEN set, parses the
    "listening on http://127.0.0.1:PORT" line, stops it with SIGTERM, kills it
    with SIGKILL, restarts it on the same data dir, reads its RSS;
  - Server.call: one JSON request on a fresh connection -> Resp(status, body,
    headers) where body is the parsed JSON (or None) and Resp.raw the bytes;
  - Server.raw: bytes over a plain socket (for malformed HTTP) -> RawResp;
  - helpers to create tokens of a role and register nodes, a wait-until loop;
  - Checks: runs named checks one after another, so that one failure does
    not hide the others, prints "FAIL: ..." for each and exits 1 if any failed.

A route that is not there (404 "no route for ...") is reported as
"route missing: METHOD PATH", so that a test written against docs/API.md
fails loudly, never silently, while the route is being written.
"""
import atexit
import glob
import hashlib
import http.client
import json
import os
import queue
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ADMIN_TOKEN = "hf_e2e_admin_" + "0123456789abcdef" * 2
API = "/api/v1"

_LIVE = []  # every Server started, killed at exit so no process outlives a test

# Every credential a test has seen: admin tokens, tokens and endpoint keys
# from the API's answers, secret_env values it submitted. main_guard fails
# the test if any of them appears in a server's or an agent's log.
SECRETS = set()


# A token or endpoint key in an answer of the API.
_SECRET_IN_ANSWER = re.compile(rb'"(hfk?_[A-Za-z0-9_]{17,})"')


def _remember_secrets(doc):
    if isinstance(doc, dict):
        for k, v in doc.items():
            if k == "secret_env" and isinstance(v, dict):
                SECRETS.update(x for x in v.values() if isinstance(x, str) and len(x) >= 8)
            else:
                _remember_secrets(v)
    elif isinstance(doc, list):
        for v in doc:
            _remember_secrets(v)
    elif isinstance(doc, str) and len(doc) >= 20 and (doc.startswith("hf_") or doc.startswith("hfk_")):
        SECRETS.add(doc)


def leaked_secrets(root):
    """(log file, secret prefix) for every remembered secret found in a log
    under `root`: the *.stderr and *.log files of servers and agents (task
    output, under tasks/, is the task's own and may print what it likes)."""
    found = []
    for dirpath, _, files in os.walk(root):
        if os.sep + "tasks" in dirpath:
            continue
        for name in files:
            if not (name.endswith(".stderr") or name.endswith(".log")):
                continue
            path = os.path.join(dirpath, name)
            try:
                with open(path, "rb") as f:
                    text = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            for secret in SECRETS:
                if secret in text:
                    found.append((os.path.relpath(path, root), secret[:6] + "..."))
    return found


def _kill_all():
    for s in _LIVE:
        if s.proc is not None and s.proc.poll() is None:
            s.proc.kill()
            try:
                s.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


atexit.register(_kill_all)


class Failure(Exception):
    """A failed expectation; caught by Checks, fatal outside it."""


def fail(msg):
    raise Failure(msg)


def binary_from_argv():
    if len(sys.argv) < 2:
        print("usage: %s HETEROFLOW_BINARY" % os.path.basename(sys.argv[0]))
        sys.exit(2)
    b = os.path.abspath(sys.argv[1])
    if not os.access(b, os.X_OK):
        print("FAIL: %s is not an executable" % b)
        sys.exit(1)
    return b


class Resp(tuple):
    """(status, body, headers); body is parsed JSON or None; .raw the bytes."""

    def __new__(cls, status, body, headers, raw, what):
        r = tuple.__new__(cls, (status, body, headers))
        r.raw = raw
        r.what = what
        return r

    @property
    def status(self):
        return self[0]

    @property
    def body(self):
        return self[1]

    @property
    def headers(self):
        return self[2]

    def header(self, name):
        for k, v in self[2].items():
            if k.lower() == name.lower():
                return v
        return None

    def short(self):
        text = self.raw[:400].decode("utf-8", "replace")
        return "%s -> %s %s" % (self.what, self.status, text)


class RawResp:
    """A response read off a raw socket. status is None when the server
    closed or reset the connection without answering."""

    def __init__(self, status, headers, body, note=""):
        self.status = status
        self.headers = headers  # lower-case name -> value
        self.raw = body
        self.note = note
        try:
            self.body = json.loads(body.decode("utf-8")) if body else None
        except (ValueError, UnicodeDecodeError):
            self.body = None

    def header(self, name):
        return self.headers.get(name.lower())

    def short(self):
        if self.status is None:
            return "no answer (%s)" % self.note
        return "%s %s" % (self.status, self.raw[:300].decode("utf-8", "replace"))


def is_error_body(body):
    return (isinstance(body, dict) and list(body.keys()) == ["error"]
            and isinstance(body["error"], dict)
            and isinstance(body["error"].get("code"), str) and body["error"]["code"]
            and isinstance(body["error"].get("message"), str) and body["error"]["message"])


def route_missing(resp):
    """True when the server answered "no route for ..." (route not written)."""
    return (resp.status == 404 and is_error_body(resp.body)
            and resp.body["error"]["message"].startswith("no route for"))


def expect(resp, status, what=None):
    """The body when resp has this status (or one of these); fails otherwise."""
    want = status if isinstance(status, (tuple, list, set)) else (status,)
    what = what or resp.what
    if resp.status not in want:
        if route_missing(resp):
            fail("route missing (not implemented?): %s -> %s" % (resp.what, resp.body["error"]["message"]))
        fail("%s: want HTTP %s, got %s" % (what, "/".join(map(str, want)), resp.short()))
    return resp.body


def expect_error(resp, status, code=None, mentions=(), what=None):
    """resp is an error with this status, JSON {"error":{code,message}}, the
    given code, and a message naming every string in `mentions`."""
    what = what or resp.what
    if resp.status != status and route_missing(resp):
        fail("route missing (not implemented?): %s" % resp.what)
    if resp.status != status:
        fail("%s: want HTTP %d, got %s" % (what, status, resp.short()))
    if not is_error_body(resp.body):
        fail("%s: HTTP %d but the body is not {\"error\":{\"code\",\"message\"}}: %r"
             % (what, status, resp.raw[:300]))
    if code is not None:
        codes = code if isinstance(code, (tuple, list, set)) else (code,)
        if resp.body["error"]["code"] not in codes:
            fail("%s: want error code %s, got %s" % (what, "/".join(codes), resp.body))
    if isinstance(mentions, str):
        mentions = (mentions,)
    for m in mentions:
        if m not in resp.body["error"]["message"]:
            fail("%s: the error message must name %r: %s" % (what, m, resp.body))
    return resp.body["error"]


def wait_until(fn, timeout, what, interval=0.1):
    """Calls fn until it returns a truthy value; fails after `timeout` s."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
        except Failure as e:
            last = e
            if time.monotonic() >= deadline:
                raise
        else:
            if last:
                return last
        if time.monotonic() >= deadline:
            fail("timed out after %.0f s waiting for %s (last: %r)" % (timeout, what, last))
        time.sleep(interval)


# --- PostgreSQL and replicas (docs/STORE.md, docs/HA.md) ----------------------
PG_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                         "scripts", "test-postgres.sh")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def psql(base, dbname, sql):
    """One statement through psql on database `dbname` of the server `base`
    (a URI with a query string and no database); its unaligned output."""
    out = subprocess.run(["psql", "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", base + "&dbname=" + dbname,
                          "-c", sql], capture_output=True, text=True, timeout=30)
    if out.returncode != 0:
        fail("psql %r: %s" % (sql, out.stderr.strip()))
    return out.stdout.strip()


def postgres_server():
    """(base URI, folder to stop or None): the server HF_TEST_POSTGRES names,
    as scripts/test.sh starts it, or one started here, in /tmp itself (it may
    run as the postgres user, who cannot enter a test's private folder)."""
    base = os.environ.get("HF_TEST_POSTGRES", "")
    if base:
        return base, None
    own = tempfile.mkdtemp(prefix="hf-pg-")
    base = subprocess.run([PG_SCRIPT, "start", own], capture_output=True, text=True, check=True).stdout.strip()
    return base, own


def stop_postgres(own):
    if own:
        subprocess.run([PG_SCRIPT, "stop", own], capture_output=True)


def replica_role(srv):
    """(role, body) from a server's /readyz: its role among the control
    plane's replicas, "unready" on a non-200 answer; (None, {}) when it does
    not answer."""
    if not srv.alive():
        return None, {}
    try:
        r = srv.call("GET", "/readyz", token=None, timeout=2)
    except Failure:
        return None, {}
    body = r.body if isinstance(r.body, dict) else {}
    return (body.get("role") if r.status == 200 else "unready"), body


class Server:
    def __init__(self, binary, data_dir, token=ADMIN_TOKEN, config=None, start=True, env=None,
                 args=None, port=0):
        self.binary = binary
        self.listen_port = port  # 0: any free port, a new one at each start
        self.args = list(args or [])
        self.extra_env = dict(env or {})
        self.data_dir = data_dir
        self.token = token
        if token:
            SECRETS.add(token)
        self.config = config
        self.proc = None
        self.port = None
        self.lines = []
        self.starts = 0
        _LIVE.append(self)
        if start:
            self.start()

    # --- process lifecycle -------------------------------------------------
    def start(self, timeout=30):
        if self.proc is not None and self.proc.poll() is None:
            fail("server already running")
        env = dict(os.environ)
        env.pop("HETEROFLOW_ADMIN_TOKEN", None)
        if self.token:
            env["HETEROFLOW_ADMIN_TOKEN"] = self.token
        env.update(self.extra_env)
        cmd = [self.binary, "server", "--listen", "127.0.0.1:%d" % self.listen_port, "--data-dir",
               self.data_dir]
        if self.config:
            cmd += ["--config", self.config]
        cmd += self.args
        self.starts += 1
        os.makedirs(self.data_dir, exist_ok=True)
        self.stderr_path = os.path.join(os.path.dirname(os.path.abspath(self.data_dir)),
                                        "server-%s-%d.stderr" % (os.path.basename(self.data_dir),
                                                                 self.starts))
        self._stderr = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.lines = []
        port_box = []
        ready = threading.Event()

        def reader(proc=self.proc, lines=self.lines):
            for raw in proc.stdout:
                line = raw.decode("utf-8", "replace")
                lines.append(line)
                m = re.match(r"listening on http://127\.0\.0\.1:(\d+)", line)
                if m and not port_box:
                    port_box.append(int(m.group(1)))
                    ready.set()
            ready.set()

        threading.Thread(target=reader, daemon=True).start()
        if not ready.wait(timeout) or not port_box:
            rc = self.proc.poll()
            if rc is None:
                self.proc.kill()
                self.proc.wait()
            fail("server did not print 'listening on http://127.0.0.1:PORT' (exit %s): %s %s"
                 % (rc, "".join(self.lines), self.stderr_text()))
        self.port = port_box[0]
        self.base = "127.0.0.1:%d" % self.port
        return self

    def stderr_text(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read()[-3000:].decode("utf-8", "replace")
        except OSError:
            return ""

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout=20):
        """SIGTERM; the server must exit 0."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("server did not exit within %d s of SIGTERM" % timeout)
        self._stderr.close()
        if rc != 0:
            fail("server exited %d after SIGTERM: %s" % (rc, self.stderr_text()))

    def kill(self):
        """SIGKILL, no grace."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=20)
        self._stderr.close()

    def restart(self, hard=False):
        if self.alive():
            self.kill() if hard else self.stop()
        return self.start()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        fail("no VmRSS for pid %d" % self.proc.pid)

    def db_path(self):
        return os.path.join(self.data_dir, "heteroflow.db")

    # --- HTTP --------------------------------------------------------------
    def call(self, method, path, body=None, token="admin", raw_body=None, headers=None,
             timeout=15):
        """One request on its own connection. token: "admin" (default) for the
        admin token, None for no Authorization header, or a token string."""
        hdrs = {}
        if token == "admin":
            token = self.token
        if token is not None:
            hdrs["Authorization"] = "Bearer " + token
        data = raw_body
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        if body is not None and b'"secret_env"' in data:
            _remember_secrets(body)
        if token:
            _remember_secrets(token)
        if headers:
            hdrs.update(headers)
        what = "%s %s" % (method, path)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=data, headers=hdrs)
            r = conn.getresponse()
            raw = r.read()
            rheaders = {k: v for k, v in r.getheaders()}
            status = r.status
        except (OSError, http.client.HTTPException) as e:
            fail("%s: no answer from the server: %r" % (what, e))
        finally:
            conn.close()
        parsed = None
        if raw:
            try:
                parsed = json.loads(raw.decode("utf-8"))
            except (ValueError, UnicodeDecodeError):
                parsed = None
        if b'"hf' in raw:  # cheap enough not to slow timed calls
            SECRETS.update(m.decode() for m in _SECRET_IN_ANSWER.findall(raw))
        return Resp(status, parsed, rheaders, raw, what)

    def get(self, path, **kw):
        return self.call("GET", path, **kw)

    def raw(self, data, timeout=10, trickle=None):
        """Sends bytes over a fresh socket and reads one response.

        trickle: a list of byte strings sent one by one, stopping as soon as
        the server answers (for bodies that grow until refused)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        try:
            note = ""
            try:
                if data:
                    s.sendall(data)
                for piece in trickle or ():
                    r, _, _ = select.select([s], [], [], 0.02)
                    if r:
                        break
                    s.sendall(piece)
            except OSError as e:  # the server answered and closed before we finished
                note = "send: %r" % e
            return _read_response(s, timeout, note)
        finally:
            s.close()

    # --- convenience -------------------------------------------------------
    def livez(self):
        return self.call("GET", "/livez", token=None)

    def make_token(self, role, name=None, expires_in_s=None, node=None):
        """Creates a token of `role` via POST /api/v1/tokens; returns the
        creation answer (with "token", the secret). An agent token is bound
        to `node`."""
        name = name or "e2e-%s-%d-%d" % (role, os.getpid(), next(_counter))
        body = {"name": name, "role": role}
        if node is not None:
            body["node"] = node
        if expires_in_s is not None:
            body["expires_in_s"] = expires_in_s
        r = self.call("POST", API + "/tokens", body)
        got = expect(r, 201, "create a %s token" % role)
        if not isinstance(got, dict) or not re.fullmatch(r"hf_[0-9a-f]{64}", str(got.get("token"))):
            fail("token creation answer lacks an hf_<64 hex> token: %r" % (got,))
        for k in ("id", "name", "role", "created_at", "expires_at"):
            if k not in got:
                fail("token creation answer lacks %r: %r" % (k, got))
        if got["role"] != role or got["name"] != name:
            fail("token creation answer: want role %s name %s, got %r" % (role, name, got))
        return got

    def agent_token_file(self, node, folder):
        """A token bound to `node`, in a 0600 file under `folder` (for
        `heteroflow agent --token-file`); returns the file's path."""
        token = self.make_token("agent", node=node)["token"]
        path = os.path.join(folder, "agent-%s.token" % node)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
        return path

    def register_node(self, name, gpus=8, model="A100-80G", gpu_memory_mib=81920,
                      cpu_milli=96000, memory_mib=786432, rdma=False, topology=None,
                      labels=None, expect_status=(200, 201)):
        inv = node_inventory(name, gpus, model, gpu_memory_mib, cpu_milli, memory_mib, rdma,
                             topology, labels)
        r = self.call("POST", API + "/nodes", inv)
        return expect(r, expect_status, "register node %s" % name)

    def list_all(self, path, key, limit=1000, max_pages=10000):
        """Follows ?limit=&after= paging (for /tasks) and returns every item."""
        items, after = [], None
        sep = "&" if "?" in path else "?"
        for _ in range(max_pages):
            url = "%s%slimit=%d" % (path, sep, limit)
            if after is not None:
                url += "&after=%s" % after
            body = expect(self.get(url), 200)
            if not isinstance(body, dict) or not isinstance(body.get(key), list):
                fail("GET %s: want {\"%s\": [...]}, got %r" % (url, key, body))
            items.extend(body[key])
            nxt = body.get("next", None) if "next" in body else fail(
                "GET %s: no \"next\" key in %r" % (url, str(body)[:200]))
            if nxt is None:
                return items
            after = nxt
        fail("GET %s: more than %d pages" % (path, max_pages))

    def tasks(self, query=""):
        return self.list_all(API + "/tasks" + query, "tasks")

    def tasks_full(self, query=""):
        """Like tasks(), but a list entry without the "allocation" key (the
        contract's task has it) gets it from GET /tasks/{id}, so that checks
        of placements still run; test_tasks reports the missing key itself."""
        out = self.tasks(query)
        for t in out:
            if "allocation" not in t:
                got = expect(self.get(API + "/tasks/%d" % t["id"]), 200)
                t["allocation"] = got.get("allocation")
        return out


_counter_lock = threading.Lock()


def _count():
    n = 0
    while True:
        with _counter_lock:
            n += 1
            v = n
        yield v


_counter = _count()


def node_inventory(name, gpus=8, model="A100-80G", gpu_memory_mib=81920, cpu_milli=96000,
                   memory_mib=786432, rdma=False, topology=None, labels=None):
    inv = {
        "name": name,
        "labels": labels or {"pool": "e2e"},
        "cpu_milli": cpu_milli,
        "memory_mib": memory_mib,
        "gpus": [{"index": i, "model": model, "vendor": "nvidia", "memory_mib": gpu_memory_mib,
                  "numa": i // 4, "pcie_switch": i // 2, "fabric_domain": 0}
                 for i in range(gpus)],
        "rdma": [{"name": "mlx5_0", "numa": 0, "pcie_switch": 0}] if rdma else [],
    }
    if topology:
        inv["topology"] = topology
    return inv


def _read_response(s, timeout, note=""):
    buf = b""
    deadline = time.monotonic() + timeout
    head_end = -1
    while True:
        if head_end < 0:
            head_end = buf.find(b"\r\n\r\n")
        if head_end >= 0:
            head = buf[:head_end].decode("latin-1")
            lines = head.split("\r\n")
            m = re.match(r"HTTP/1\.[01] (\d{3})", lines[0])
            if not m:
                return RawResp(None, {}, buf, "not an HTTP response: %r" % buf[:100])
            headers = {}
            for line in lines[1:]:
                k, _, v = line.partition(":")
                headers[k.strip().lower()] = v.strip()
            body = buf[head_end + 4:]
            length = headers.get("content-length")
            if length is not None and len(body) >= int(length):
                return RawResp(int(m.group(1)), headers, body[:int(length)], note)
        left = deadline - time.monotonic()
        if left <= 0:
            return RawResp(None, {}, buf, (note + " timeout").strip())
        s.settimeout(left)
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            return RawResp(None, {}, buf, (note + " timeout").strip())
        except OSError as e:
            chunk = b""
            note = (note + " recv: %r" % e).strip()
        if not chunk:
            if head_end >= 0:
                headers_ok = RawResp(int(m.group(1)), headers, buf[head_end + 4:], note)
                return headers_ok
            return RawResp(None, {}, buf, (note + " closed").strip())
        buf += chunk


class Checks:
    """Runs named checks; one failure does not stop the others. A check that
    raises Failure (or anything else) is reported as FAIL with its name."""

    def __init__(self, title):
        self.title = title
        self.failed = []
        self.passed = []
        self.t0 = time.monotonic()

    def run(self, name, fn, *args):
        t = time.monotonic()
        try:
            fn(*args)
        except Failure as e:
            self.failed.append(name)
            print("FAIL: %s: %s" % (name, e), flush=True)
            return False
        except Exception:  # a bug in the test, or an unexpected answer shape
            self.failed.append(name)
            print("FAIL: %s: unexpected error:\n%s" % (name, traceback.format_exc()), flush=True)
            return False
        self.passed.append(name)
        print("ok   %s (%.1f s)" % (name, time.monotonic() - t), flush=True)
        return True

    def finish(self):
        took = time.monotonic() - self.t0
        if self.failed:
            print("FAIL: %s: %d of %d checks failed (%s) in %.1f s"
                  % (self.title, len(self.failed), len(self.failed) + len(self.passed),
                     ", ".join(self.failed), took))
            sys.exit(1)
        print("PASS: %s: %d checks in %.1f s" % (self.title, len(self.passed), took))
        sys.exit(0)


def main_guard(fn):
    """Runs fn(binary, tmpdir); a Failure outside Checks is fatal."""
    binary = binary_from_argv()
    tmp = tempfile.mkdtemp(prefix="hf-e2e-")
    try:
        try:
            fn(binary, tmp)
        except SystemExit as e:  # Checks.finish ends the test with sys.exit
            if e.code not in (0, None):
                raise
        _kill_all()
        leaks = leaked_secrets(tmp)
        if leaks:
            print("FAIL: a secret reached a log: %s" % ", ".join("%s holds %s" % x for x in leaks))
            sys.exit(1)
    except Failure as e:
        print("FAIL: %s" % e)
        _kill_all()
        sys.exit(1)
    finally:
        _kill_all()
        shutil.rmtree(tmp, ignore_errors=True)


def open_stream(srv, token, events):
    """Reads GET /api/v1/events on a thread, putting (event, data) pairs on
    `events` (a queue.Queue); returns the connection (close it to stop)."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=30)
    conn.request("GET", API + "/events", headers={"Authorization": "Bearer " + token})
    r = conn.getresponse()
    if r.status != 200 or not r.getheader("Content-Type", "").startswith("text/event-stream"):
        fail("events: %d %s" % (r.status, r.getheader("Content-Type")))

    def reader():
        name, data = None, []
        try:
            for raw in r:
                line = raw.decode().rstrip("\n")
                if line.startswith("event: "):
                    name = line[7:]
                elif line.startswith("data: "):
                    data.append(line[6:])
                elif line == "" and name is not None:
                    events.put((name, json.loads("\n".join(data))))
                    name, data = None, []
        except (OSError, ValueError, http.client.HTTPException):
            pass
    threading.Thread(target=reader, daemon=True).start()
    return conn


def next_event(events, want, timeout=10):
    """The next event of type `want` (others, e.g. ping, are skipped)."""
    while True:
        try:
            name, data = events.get(timeout=timeout)
        except queue.Empty:
            fail("no %s event within %d s" % (want, timeout))
        if name == want:
            return data


def HashToken(token):
    """What the server stores of a token: SHA-256, 64 lower-case hex digits."""
    return hashlib.sha256(token.encode()).hexdigest()


def task_processes(root):
    """Pids of processes whose working directory is under `root` (a task's
    processes run in its agent's work dir)."""
    pids = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if os.readlink(d + "/cwd").startswith(root):
                pids.append(int(d[6:]))
        except OSError:
            pass
    return pids


def stable_tasks(tasks):
    """Tasks without updated_at, which a scheduler retry of a pending task
    may touch; what a refused request must not change is the rest."""
    return sorted(({k: v for k, v in t.items() if k != "updated_at"} for t in tasks),
                  key=lambda t: t.get("id", 0))


RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
