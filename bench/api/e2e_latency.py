#!/usr/bin/python3
"""Submit -> scheduled latency of a running `heteroflow server` (standard library only).

  e2e_latency.py --port PORT --token TOKEN [--rate 200] [--duration 10] [--threads 4]
                 [--cpu-milli 100] [--gpu-milli 0] [--grace 10]

Subscribes to GET /api/v1/events, then submits rate*duration tasks
(POST /api/v1/tasks) at a steady rate from `threads` threads, each on its own
keep-alive connection. Thread i sends submission k*threads+i at
t0 + (k*threads+i)/rate (open loop: a late thread sends at once and does not
skip). Each 201 answer's id is matched to the `event: task` whose data has
"action":"scheduled" and that id; latency = the event's arrival time minus the
client-side time just before the POST was written. The scheduled event may
arrive before the 201 answer; both are kept by id and joined at the end.

Prints one line per figure and a last line `E2E matched=... p50_ms=... p99_ms=...
max_ms=...` that run.sh reads. Exit 1 when nothing could be matched.
"""
import argparse
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


class EventReader(threading.Thread):
    """Reads the SSE stream; records the monotonic arrival time of each
    scheduled task event by id."""

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
        self.scheduled = {}  # id -> arrival (time.monotonic())
        self.lock = threading.Lock()
        self.stopped = False

    def run(self):
        event = None
        try:
            for raw in self.f:
                now = time.monotonic()
                line = raw.rstrip(b"\r\n")
                if line.startswith(b"event:"):
                    event = line[6:].strip()
                elif line.startswith(b"data:") and event == b"task":
                    data = line[5:]
                    if b'"scheduled"' not in data:
                        continue
                    d = json.loads(data)
                    if d.get("action") == "scheduled":
                        with self.lock:
                            self.scheduled.setdefault(d["id"], now)
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


def submitter(idx, args, t0, total, out, errors):
    conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
    requests = {"cpu_milli": args.cpu_milli, "memory_mib": 128}
    if args.gpu_milli > 0:
        requests.update({"gpu": 1, "gpu_milli": args.gpu_milli})
    headers = {"Authorization": "Bearer " + args.token, "Content-Type": "application/json"}
    for k in range(idx, total, args.threads):
        due = t0 + k / args.rate
        delay = due - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        body = json.dumps({"name": "e2e-%d" % k, "group": "bench", "requests": requests}).encode()
        sent = time.monotonic()
        try:
            conn.request("POST", "/api/v1/tasks", body=body, headers=headers)
            r = conn.getresponse()
            raw = r.read()
        except (OSError, http.client.HTTPException) as e:
            errors.append("submission %d: %r" % (k, e))
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", args.port, timeout=60)
            continue
        answered = time.monotonic()
        if r.status != 201:
            errors.append("submission %d: HTTP %d %s" % (k, r.status, raw[:200]))
            continue
        out.append((json.loads(raw)["id"], sent, answered, due))
    conn.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", required=True)
    ap.add_argument("--rate", type=float, default=200.0, help="submissions per second")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds of submitting")
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--cpu-milli", type=int, default=100)
    ap.add_argument("--gpu-milli", type=int, default=0, help="0: no GPU; else a share of one GPU")
    ap.add_argument("--grace", type=float, default=10.0,
                    help="seconds to wait for scheduled events after the last 201")
    args = ap.parse_args()

    reader = EventReader(args.port, args.token)
    reader.start()
    total = int(args.rate * args.duration)
    out, errors = [], []
    t0 = time.monotonic() + 0.2
    threads = [threading.Thread(target=submitter, args=(i, args, t0, total, out, errors))
               for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_end = time.monotonic()
    ids = {i for i, _, _, _ in out}
    deadline = time.monotonic() + args.grace
    while time.monotonic() < deadline:
        with reader.lock:
            if ids <= reader.scheduled.keys():
                break
        time.sleep(0.05)
    reader.close()

    with reader.lock:
        sched = dict(reader.scheduled)
    lat, ack, late = [], [], []
    for i, sent, answered, due in out:
        ack.append((answered - sent) * 1000)
        late.append(max(0.0, sent - due) * 1000)
        if i in sched:
            lat.append((sched[i] - sent) * 1000)
    lat.sort()
    ack.sort()
    late.sort()
    achieved = len(out) / max(1e-9, t_end - t0)
    print("submitted %d of %d (%d errors) in %.2f s: %.0f/s (target %.0f/s, %d threads)"
          % (len(out), total, len(errors), t_end - t0, achieved, args.rate, args.threads))
    for e in errors[:5]:
        print("  error: %s" % e)
    print("send lag behind schedule ms: p50 %.2f  p99 %.2f  max %.2f"
          % (pct(late, 50), pct(late, 99), late[-1] if late else float("nan")))
    print("submit -> 201 answer     ms: p50 %.2f  p99 %.2f  max %.2f"
          % (pct(ack, 50), pct(ack, 99), ack[-1] if ack else float("nan")))
    print("submit -> scheduled event ms: p50 %.2f  p99 %.2f  max %.2f  (matched %d of %d)"
          % (pct(lat, 50), pct(lat, 99), lat[-1] if lat else float("nan"), len(lat), len(out)))
    print("E2E matched=%d/%d rate=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f ack_p50_ms=%.2f ack_p99_ms=%.2f"
          % (len(lat), len(out), achieved, pct(lat, 50), pct(lat, 99),
             lat[-1] if lat else float("nan"), pct(ack, 50), pct(ack, 99)))
    sys.exit(0 if lat else 1)


if __name__ == "__main__":
    main()
