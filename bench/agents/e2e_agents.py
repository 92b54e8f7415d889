#!/usr/bin/python3
"""Submit -> running latency through real agents (standard library only).

  e2e_agents.py --port PORT (--token TOKEN | --token-file FILE) [--count 1000] [--mode steady|burst]
                [--rate 50] [--threads 4] [--batch 100] [--command 'sleep 0.1']
                [--timeout 300]

Subscribes to GET /api/v1/events, then submits `count` tasks of 1 GPU
(cpu_milli 1000, memory_mib 1024) running `command` (split on spaces):

  steady  one task per POST /api/v1/tasks, `rate` a second from `threads`
          threads, each on its own keep-alive connection (open loop: task k is
          due at t0 + k/rate; a late thread sends at once and skips nothing);
  burst   count/batch POST /api/v1/tasks/batch requests of `batch` tasks,
          back to back on one connection.

Each task's time of submission is the client's wall clock (time.time())
just before its request was written. Its "running" time is the `time` field
of the `event: task` with "action":"running" and its id: the server's wall
clock (ms) when the agent's running report was committed to the store, the
same machine's clock as the client's. The stages in between come from the
same stream (`submitted`: the submission committed; `scheduled`: the
scheduling cycle committed). The run ends when every task succeeded or
failed, or after `timeout` s.

Prints one line per figure and a last line `AGENTS_E2E ...` that run.sh reads.
Exit 1 when a task did not run.
"""
import argparse
import calendar
import http.client
import json
import socket
import sys
import threading
import time


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def parse_time(s):
    """'2026-12-02T14:00:00.123Z' -> seconds since the epoch (float)."""
    secs = calendar.timegm(time.strptime(s[:19], "%Y-%m-%dT%H:%M:%S"))
    frac = s[19:].rstrip("Z")
    return secs + (float(frac) if frac.startswith(".") else 0.0)


class EventReader(threading.Thread):
    """Reads the SSE stream; keeps, per task id and action, the server's time
    of the event and the client's time of its arrival."""

    ACTIONS = ("submitted", "scheduled", "running", "succeeded", "failed", "lost", "preempted")

    def __init__(self, port, token):
        super().__init__(daemon=True)
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=None)
        req = ("GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
               "Authorization: Bearer %s\r\nAccept: text/event-stream\r\n\r\n" % (port, token))
        self.sock.sendall(req.encode())
        self.f = self.sock.makefile("rb")
        status = self.f.readline().decode("latin-1")
        if " 200 " not in status:
            sys.exit("GET /api/v1/events: %s" % status.strip())
        while self.f.readline() not in (b"\r\n", b"\n", b""):
            pass  # headers
        self.seen = {}  # (id, action) -> (server time s, client arrival time s)
        self.ended = set()  # ids that succeeded or failed
        self.lock = threading.Lock()
        self.stopped = False

    def run(self):
        event = None
        try:
            for raw in self.f:
                now = time.time()
                line = raw.rstrip(b"\r\n")
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                elif line.startswith(b"data:") and event == b"task":
                    d = json.loads(line[5:])
                    action = d.get("action")
                    if action not in self.ACTIONS or "id" not in d:
                        continue
                    t = parse_time(d["time"]) if "time" in d else now
                    with self.lock:
                        self.seen.setdefault((d["id"], action), (t, now))
                        if action in ("succeeded", "failed"):
                            self.ended.add(d["id"])
                elif not line:
                    event = None
        except (OSError, ValueError):
            if not self.stopped:
                raise

    def close(self):
        self.stopped = True
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def submission(args, k):
    return {"name": "agent-e2e-%d" % k, "group": "bench", "command": args.command.split(),
            "requests": {"cpu_milli": 1000, "memory_mib": 1024, "gpu": 1}}


def post(conn, path, body, headers):
    conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
    r = conn.getresponse()
    return r.status, r.read()


def steady(idx, args, t0, out, errors):
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
    headers = {"Authorization": "Bearer " + args.token, "Content-Type": "application/json"}
    for k in range(idx, args.count, args.threads):
        delay = t0 + k / args.rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        sent = time.time()
        try:
            status, raw = post(conn, "/api/v1/tasks", submission(args, k), headers)
        except (OSError, http.client.HTTPException) as e:
            errors.append("submission %d: %r" % (k, e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            continue
        if status != 201:
            errors.append("submission %d: HTTP %d %s" % (k, status, raw[:200]))
            continue
        out.append((json.loads(raw)["id"], sent))
    conn.close()


def burst(args, out, errors):
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=120)
    headers = {"Authorization": "Bearer " + args.token, "Content-Type": "application/json"}
    for start in range(0, args.count, args.batch):
        tasks = [submission(args, k) for k in range(start, min(args.count, start + args.batch))]
        body = json.dumps({"tasks": tasks}).encode()
        sent = time.time()
        conn.request("POST", "/api/v1/tasks/batch", body=body, headers=headers)
        r = conn.getresponse()
        raw = r.read()
        if r.status != 201:
            errors.append("batch at %d: HTTP %d %s" % (start, r.status, raw[:200]))
            continue
        for t in json.loads(raw)["tasks"]:
            out.append((t["id"], sent))
    conn.close()


def ms(vals):
    v = sorted(x * 1000 for x in vals)
    return v, "p50 %7.1f  p90 %7.1f  p99 %7.1f  max %7.1f" % (
        pct(v, 50), pct(v, 90), pct(v, 99), v[-1] if v else float("nan"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token")
    ap.add_argument("--token-file")
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--mode", choices=("steady", "burst"), default="steady")
    ap.add_argument("--rate", type=float, default=50.0, help="steady: submissions per second")
    ap.add_argument("--threads", type=int, default=4, help="steady: submitting threads")
    ap.add_argument("--batch", type=int, default=100, help="burst: tasks per batch request")
    ap.add_argument("--command", default="sleep 0.1", help="the tasks' command, split on spaces")
    ap.add_argument("--timeout", type=float, default=300.0,
                    help="seconds to wait for every task to end")
    args = ap.parse_args()
    if args.token_file:
        with open(args.token_file) as f:
            args.token = f.read().strip()
    if not args.token:
        ap.error("--token or --token-file is required")

    reader = EventReader(args.port, args.token)
    reader.start()
    out, errors = [], []
    wall0 = time.time()
    t0 = time.monotonic() + 0.2
    if args.mode == "steady":
        threads = [threading.Thread(target=steady, args=(i, args, t0, out, errors), daemon=True)
                   for i in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        time.sleep(0.2)
        burst(args, out, errors)
    submit_s = time.monotonic() - t0
    first_sent = min((s for _, s in out), default=wall0)

    ids = {i for i, _ in out}
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline:
        with reader.lock:
            if ids <= reader.ended:
                break
        time.sleep(0.05)
    reader.close()
    with reader.lock:
        seen = dict(reader.seen)

    def stage(a, b):
        return [seen[(i, b)][0] - seen[(i, a)][0] for i in ids if (i, a) in seen and (i, b) in seen]

    run_lat = [seen[(i, "running")][0] - s for i, s in out if (i, "running") in seen]
    run_arrival = [seen[(i, "running")][1] - s for i, s in out if (i, "running") in seen]
    sched_lat = [seen[(i, "scheduled")][0] - s for i, s in out if (i, "scheduled") in seen]
    succeeded = [i for i in ids if (i, "succeeded") in seen]
    failed = [i for i in ids if (i, "failed") in seen]
    lost = sum(1 for i in ids if (i, "lost") in seen or (i, "preempted") in seen)
    ends = [seen[(i, a)][0] for i in ids for a in ("succeeded", "failed") if (i, a) in seen]
    all_done_s = (max(ends) - first_sent) if len(ends) == len(ids) and ids else float("nan")

    print("mode %s: submitted %d of %d (%d errors) in %.2f s (%.0f/s)%s"
          % (args.mode, len(out), args.count, len(errors), submit_s, len(out) / max(1e-9, submit_s),
             "" if args.mode == "burst" else ", target %.0f/s from %d threads" % (args.rate, args.threads)))
    for e in errors[:5]:
        print("  error: %s" % e)
    r, line = ms(run_lat)
    print("submit -> running (server event time)  ms: %s  (%d of %d)" % (line, len(r), len(out)))
    print("  submit -> scheduled                   ms: %s" % ms(sched_lat)[1])
    print("  submitted -> scheduled (server)       ms: %s" % ms(stage("submitted", "scheduled"))[1])
    print("  scheduled -> running (server)         ms: %s" % ms(stage("scheduled", "running"))[1])
    print("  submit -> running event at the client ms: %s" % ms(run_arrival)[1])
    print("  running -> ended (server)             ms: %s"
          % ms(stage("running", "succeeded") + stage("running", "failed"))[1])
    print("succeeded %d, failed %d, lost/preempted %d; all %d ended %.2f s after the first submission"
          % (len(succeeded), len(failed), lost, len(ids), all_done_s))
    print("AGENTS_E2E mode=%s ran=%d/%d p50_ms=%.1f p90_ms=%.1f p99_ms=%.1f max_ms=%.1f "
          "succeeded=%d failed=%d all_done_s=%.2f submit_s=%.2f"
          % (args.mode, len(r), len(out), pct(r, 50), pct(r, 90), pct(r, 99),
             r[-1] if r else float("nan"), len(succeeded), len(failed), all_done_s, submit_s))
    sys.exit(0 if out and len(r) == len(out) else 1)


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        sys.exit(130)  # the submitting threads are daemons: they end with us
