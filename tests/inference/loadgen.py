#!/usr/bin/env python3
"""A bounded HTTP load generator (stdlib only).

    python3 loadgen.py --url URL [--key KEY] [--concurrency N] [--duration S | --requests R]
                       [--body JSON] [--stream] [--timeout S]

N worker threads, each with its own keep-alive http.client connection, POST the body to
URL (Authorization: Bearer KEY when given) until the duration is over or R requests were
sent in all. Prints one JSON line:

    {"requests": .., "ok": .., "errors": {"<status or error>": count}, "rps": ..,
     "latency_ms": {"p50": .., "p90": .., "p99": .., "max": ..},
     "replicas": {"<X-Replica-Port>": count}}

"ok" counts 2xx answers whose body was read in full; latency is measured to the end of
the body (for --stream, to the last byte of the event stream). Importable:
run(url, ...) -> the same dict, so a test can drive load from a thread.
"""

import argparse
import http.client
import json
import sys
import threading
import time
import urllib.parse

DEFAULT_BODY = {"model": "fake-model",
                "messages": [{"role": "user", "content": "hello"}]}


def _percentile(sorted_values, q):
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[i]


class _Tally:
    def __init__(self):
        self.lock = threading.Lock()
        self.sent = 0
        self.ok = 0
        self.errors = {}
        self.replicas = {}
        self.latencies = []

    def add(self, ok, error, replica, latency_ms):
        with self.lock:
            if ok:
                self.ok += 1
                self.latencies.append(latency_ms)
            else:
                self.errors[error] = self.errors.get(error, 0) + 1
            if replica is not None:
                self.replicas[replica] = self.replicas.get(replica, 0) + 1


def run(url, key=None, concurrency=4, duration=None, requests=None, body=None,
        stream=False, timeout=30.0):
    """Sends load; returns the summary dict (see the module docstring).

    With neither duration nor requests it runs for 10 seconds. body: a dict, a list, or
    a JSON string (default: a one-message chat request); stream=True adds
    "stream": true to a dict body.
    """
    if duration is None and requests is None:
        duration = 10.0
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise ValueError("url must be http://HOST[:PORT]/PATH: %r" % url)
    path = parsed.path or "/"
    if parsed.query:
        path += "?" + parsed.query
    if body is None:
        body = dict(DEFAULT_BODY)
    elif isinstance(body, (str, bytes)):
        body = json.loads(body)
    if stream and isinstance(body, dict):
        body = dict(body, stream=True)
    payload = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", "Content-Length": str(len(payload))}
    if key:
        headers["Authorization"] = "Bearer " + key
    if stream:
        headers["Accept"] = "text/event-stream"

    tally = _Tally()
    budget_lock = threading.Lock()
    budget = [requests]  # remaining requests, None when unbounded
    deadline = time.monotonic() + duration if duration is not None else None

    def take():
        if deadline is not None and time.monotonic() >= deadline:
            return False
        with budget_lock:
            if budget[0] is None:
                tally.sent += 1
                return True
            if budget[0] <= 0:
                return False
            budget[0] -= 1
            tally.sent += 1
            return True

    def connect():
        cls = (http.client.HTTPSConnection if parsed.scheme == "https"
               else http.client.HTTPConnection)
        return cls(parsed.hostname, parsed.port, timeout=timeout)

    def worker():
        conn = None
        while take():
            if conn is None:
                conn = connect()
            start = time.monotonic()
            try:
                conn.request("POST", path, body=payload, headers=headers)
                resp = conn.getresponse()
                resp.read()  # to the end, chunked or not
                latency = (time.monotonic() - start) * 1000.0
                replica = resp.getheader("X-Replica-Port")
                good = 200 <= resp.status < 300
                tally.add(good, None if good else str(resp.status), replica, latency)
                if resp.will_close:
                    conn.close()
                    conn = None
            except Exception as e:  # noqa: BLE001 - every failure is counted by kind
                tally.add(False, type(e).__name__, None, 0.0)
                conn.close()
                conn = None
        if conn is not None:
            conn.close()

    started = time.monotonic()
    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = max(time.monotonic() - started, 1e-9)
    lat = sorted(tally.latencies)
    return {
        "requests": tally.sent,
        "ok": tally.ok,
        "errors": tally.errors,
        "rps": round(tally.sent / elapsed, 2),
        "latency_ms": {"p50": round(_percentile(lat, 0.50), 2),
                       "p90": round(_percentile(lat, 0.90), 2),
                       "p99": round(_percentile(lat, 0.99), 2),
                       "max": round(lat[-1], 2) if lat else 0.0},
        "replicas": tally.replicas,
    }


def main(argv=None):
    p = argparse.ArgumentParser(description="bounded HTTP POST load generator")
    p.add_argument("--url", required=True)
    p.add_argument("--key", help="sent as Authorization: Bearer KEY")
    p.add_argument("--concurrency", type=int, default=4)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--duration", type=float, help="seconds to run (default 10)")
    g.add_argument("--requests", type=int, help="requests to send in all")
    p.add_argument("--body", help="JSON request body (default: a one-message chat request)")
    p.add_argument("--stream", action="store_true", help='add "stream": true to the body')
    p.add_argument("--timeout", type=float, default=30.0, help="per-request timeout, seconds")
    a = p.parse_args(argv)
    try:
        body = json.loads(a.body) if a.body is not None else None
    except ValueError as e:
        p.error("--body is not valid JSON: %s" % e)
    result = run(a.url, key=a.key, concurrency=a.concurrency, duration=a.duration,
                 requests=a.requests, body=body, stream=a.stream, timeout=a.timeout)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
