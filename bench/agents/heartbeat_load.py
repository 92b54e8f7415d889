#!/usr/bin/python3
"""Server CPU per agent heartbeat, with simulated agents (standard library only).

  heartbeat_load.py --port PORT --token AGENT_TOKEN --server-pid PID
                    [--nodes 1000] [--polls 1000] [--duration 60] [--interval 0]
                    [--conns 32] [--gpus 8] [--wait-s 30]

1. Registers `nodes` nodes (bench-h0000..) with POST /api/v1/agent/register,
   each with `gpus` A100-80G GPUs, over the shared connections.
2. Opens `polls` assignment long polls, one connection each, for the first
   `polls` nodes (GET /api/v1/agent/assignments?node=N&version=V&wait_s=30),
   re-issued with the answered version whenever one returns, as agents do.
3. Every node sends POST /api/v1/agent/heartbeat with usage (cpu, memory and
   one entry per GPU) every `interval` s (0: the heartbeat_interval_s the
   server answered at registration), node i offset by i*interval/nodes so the
   load is even. Heartbeats share `conns` HTTP/1.1 keep-alive connections.
4. Before 2 and 3, measures the server's CPU for `idle_s` s with nothing sent.
   After one interval of warm-up (or `warmup` s), reads the server's utime+stime from
   /proc/PID/stat, runs `duration` s, reads it again.

Prints server CPU per heartbeat answered in the window (all of the server's
CPU, the long polls' and the scheduler's included, divided by heartbeats),
heartbeats/s, heartbeat latency (request written -> response read, on an
idle connection taken from the pool), long polls answered, and the load
generator's own CPU. Last line `AGENTS_HB ...` is what run.sh reads.
Exit 1 when a heartbeat failed.
"""
import argparse
import asyncio
import json
import os
import sys
import time

CLK_TCK = os.sysconf("SC_CLK_TCK")


def pct(sorted_vals, p):
    if not sorted_vals:
        return float("nan")
    i = min(len(sorted_vals) - 1, max(0, int(round(p / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[i]


def proc_cpu_s(pid):
    """utime + stime of a process, in seconds (fields 14 and 15 of /proc/PID/stat)."""
    with open("/proc/%d/stat" % pid) as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK


class HttpError(Exception):
    pass


class Conn:
    """One HTTP/1.1 keep-alive connection; one request at a time."""

    def __init__(self, port, token):
        self.port = port
        self.head = ("Host: 127.0.0.1:%d\r\nAuthorization: Bearer %s\r\n" % (port, token)).encode()
        self.reader = self.writer = None

    async def open(self):
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)

    def close(self):
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    async def request(self, method, path, body=None):
        """-> (status, body bytes). Reconnects once when the connection was closed."""
        for attempt in (0, 1):
            if self.writer is None:
                await self.open()
            req = b"%s %s HTTP/1.1\r\n" % (method.encode(), path.encode()) + self.head
            if body is not None:
                req += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body) + body
            else:
                req += b"\r\n"
            try:
                self.writer.write(req)
                head = await self.reader.readuntil(b"\r\n\r\n")
            except (ConnectionError, asyncio.IncompleteReadError, OSError):
                self.close()
                if attempt == 1:
                    raise
                continue
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            length, close = 0, False
            for h in lines[1:]:
                k, _, v = h.partition(":")
                k = k.strip().lower()
                if k == "content-length":
                    length = int(v)
                elif k == "connection" and v.strip().lower() == "close":
                    close = True
                elif k == "transfer-encoding":
                    raise HttpError("chunked answers are not handled: %s %s" % (method, path))
            data = await self.reader.readexactly(length) if length else b""
            if close:
                self.close()
            return status, data
        raise HttpError("unreachable")


def usage_body(name, gpus, i, k):
    # Values move a little from beat to beat, as measured usage does.
    return json.dumps({
        "node": name,
        "usage": {"cpu_load": round(0.2 + 0.01 * ((i + k) % 50), 3),
                  "memory_used": round(0.3 + 0.01 * (k % 20), 3),
                  "gpus": [{"index": g, "utilization": round(0.5 + 0.01 * ((g + k) % 40), 3),
                            "memory_used_mib": 20000 + 100 * ((g + k) % 50)} for g in range(gpus)]},
    }, separators=(",", ":")).encode()


def inventory(name, n, gpus):
    return {"name": name, "labels": {"pool": "hb"}, "cpu_milli": 96000, "memory_mib": 1048576,
            "gpus": [{"index": g, "model": "A100-80G", "memory_mib": 81920, "numa": g // 4,
                      "pcie_switch": g // 2, "nvlink_domain": 0} for g in range(gpus)],
            "topology": {"zone": "z%d" % (n // 256), "switch": "s%d" % (n // 16), "rack": "r%d" % (n // 4)}}


class Load:
    def __init__(self, args):
        self.args = args
        self.names = ["bench-h%04d" % i for i in range(args.nodes)]
        self.pool = asyncio.Queue()
        self.stop = False
        self.measuring = False
        self.hb_lat = []         # seconds, heartbeats answered inside the window
        self.hb_in_window = 0
        self.hb_total = 0
        self.hb_errors = []
        self.lag = []            # seconds a heartbeat waited behind its schedule (window)
        self.polls_answered = 0  # inside the window
        self.polls_total = 0
        self.poll_errors = []
        self.polls_open = 0

    async def call(self, method, path, body=None):
        conn = await self.pool.get()
        try:
            t = time.monotonic()
            status, data = await conn.request(method, path, body)
            return status, data, time.monotonic() - t
        finally:
            self.pool.put_nowait(conn)

    async def register(self):
        interval = []
        sem = asyncio.Semaphore(self.args.conns)

        async def one(i, name):
            async with sem:
                body = json.dumps({"node": inventory(name, i, self.args.gpus)}).encode()
                status, data, _ = await self.call("POST", "/api/v1/agent/register", body)
                if status != 200:
                    raise HttpError("register %s: HTTP %d %s" % (name, status, data[:300]))
                interval.append(json.loads(data)["heartbeat_interval_s"])

        await asyncio.gather(*(one(i, n) for i, n in enumerate(self.names)))
        return min(interval)

    async def poller(self, name):
        conn = Conn(self.args.port, self.args.token)
        version = 0
        try:
            while not self.stop:
                path = "/api/v1/agent/assignments?node=%s&version=%d&wait_s=%d" % (
                    name, version, self.args.wait_s)
                self.polls_open += 1
                try:
                    status, data = await conn.request("GET", path)
                finally:
                    self.polls_open -= 1
                if status != 200:
                    self.poll_errors.append("poll %s: HTTP %d %s" % (name, status, data[:200]))
                    await asyncio.sleep(1)
                    continue
                version = json.loads(data)["version"]
                self.polls_total += 1
                if self.measuring:
                    self.polls_answered += 1
        except (OSError, asyncio.IncompleteReadError, HttpError) as e:
            if not self.stop:
                self.poll_errors.append("poll %s: %r" % (name, e))
        finally:
            conn.close()

    async def beater(self, i, name, t0, interval):
        k = 0
        loop = asyncio.get_running_loop()
        while not self.stop:
            due = t0 + i * interval / len(self.names) + k * interval
            delay = due - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            if self.stop:
                break
            in_window = self.measuring
            lag = loop.time() - due
            try:
                status, data, took = await self.call("POST", "/api/v1/agent/heartbeat",
                                                     usage_body(name, self.args.gpus, i, k))
            except (OSError, asyncio.IncompleteReadError, HttpError) as e:
                self.hb_errors.append("heartbeat %s: %r" % (name, e))
                k += 1
                continue
            k += 1
            if status != 200:
                self.hb_errors.append("heartbeat %s: HTTP %d %s" % (name, status, data[:200]))
                continue
            self.hb_total += 1
            # Counted when both the request was sent and its answer came inside
            # the window, so the CPU and the count cover the same work.
            if in_window and self.measuring:
                self.hb_in_window += 1
                self.hb_lat.append(took)
                self.lag.append(max(0.0, lag))


async def run(args):
    load = Load(args)
    for _ in range(args.conns):
        c = Conn(args.port, args.token)
        await c.open()
        load.pool.put_nowait(c)

    t = time.monotonic()
    answered = await load.register()
    interval = args.interval if args.interval > 0 else answered
    print("registered %d nodes in %.1f s over %d connections; heartbeat every %g s (server says %d s)"
          % (args.nodes, time.monotonic() - t, args.conns, interval, answered), flush=True)

    # The server's own cost with the nodes registered and nothing sent: the
    # scheduler's loop, the event pinger.
    idle0 = proc_cpu_s(args.server_pid)
    await asyncio.sleep(args.idle_s)
    idle_pct = 100 * (proc_cpu_s(args.server_pid) - idle0) / args.idle_s if args.idle_s > 0 else float("nan")

    tasks = [asyncio.create_task(load.poller(n)) for n in load.names[:args.polls]]
    loop = asyncio.get_running_loop()
    t0 = loop.time() + 0.5
    tasks += [asyncio.create_task(load.beater(i, n, t0, interval)) for i, n in enumerate(load.names)]

    warmup = args.warmup if args.warmup > 0 else interval
    await asyncio.sleep(0.5 + warmup)
    if load.polls_open < args.polls:
        print("warning: only %d of %d long polls waiting after the warm-up" % (load.polls_open, args.polls))
    polls_waiting = load.polls_open
    me0, cpu0, w0 = os.times(), proc_cpu_s(args.server_pid), time.monotonic()
    load.measuring = True
    await asyncio.sleep(args.duration)
    load.measuring = False
    me1, cpu1, w1 = os.times(), proc_cpu_s(args.server_pid), time.monotonic()
    load.stop = True
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    while not load.pool.empty():
        load.pool.get_nowait().close()

    window = w1 - w0
    server_cpu = cpu1 - cpu0
    gen_cpu = (me1.user + me1.system) - (me0.user + me0.system)
    n = load.hb_in_window
    lat = sorted(x * 1000 for x in load.hb_lat)
    lag = sorted(x * 1000 for x in load.lag)
    per_hb_us = server_cpu / n * 1e6 if n else float("nan")
    print("window %.1f s: %d heartbeats answered (%.1f/s; expected %.1f/s), %d errors"
          % (window, n, n / window, args.nodes / interval, len(load.hb_errors)))
    for e in load.hb_errors[:5]:
        print("  error: %s" % e)
    print("long polls: %d waiting at the start of the window, %d answered in it, %d errors"
          % (polls_waiting, load.polls_answered, len(load.poll_errors)))
    for e in load.poll_errors[:5]:
        print("  error: %s" % e)
    print("server CPU: %.2f s in %.1f s (%.1f%% of one core) = %.0f us per heartbeat"
          " (idle before the load: %.1f%% of one core over %g s)"
          % (server_cpu, window, 100 * server_cpu / window, per_hb_us, idle_pct, args.idle_s))
    print("heartbeat latency ms: p50 %.2f  p90 %.2f  p99 %.2f  max %.2f"
          % (pct(lat, 50), pct(lat, 90), pct(lat, 99), lat[-1] if lat else float("nan")))
    print("send lag behind schedule ms: p50 %.2f  p99 %.2f  (load generator CPU %.2f s, %.0f%% of one core)"
          % (pct(lag, 50), pct(lag, 99), gen_cpu, 100 * gen_cpu / window))
    print("AGENTS_HB nodes=%d polls=%d interval_s=%g hb=%d hb_per_s=%.1f server_cpu_s=%.2f "
          "us_per_hb=%.0f idle_pct=%.1f p50_ms=%.2f p99_ms=%.2f errors=%d poll_errors=%d gen_cpu_pct=%.0f"
          % (args.nodes, polls_waiting, interval, n, n / window, server_cpu, per_hb_us, idle_pct,
             pct(lat, 50), pct(lat, 99), len(load.hb_errors), len(load.poll_errors),
             100 * gen_cpu / window))
    return 0 if n and not load.hb_errors else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--token", required=True, help="an agent (or admin) token")
    ap.add_argument("--server-pid", type=int, required=True)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--polls", type=int, default=1000, help="long polls held open (<= nodes)")
    ap.add_argument("--duration", type=float, default=60.0, help="seconds measured")
    ap.add_argument("--interval", type=float, default=0.0,
                    help="seconds between a node's heartbeats (0: what the server answers)")
    ap.add_argument("--warmup", type=float, default=0.0,
                    help="seconds of load before measuring (0: one interval)")
    ap.add_argument("--idle-s", type=float, default=5.0,
                    help="seconds the idle server's CPU is measured after registration")
    ap.add_argument("--conns", type=int, default=32, help="keep-alive connections for heartbeats")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per node (and usage entries)")
    ap.add_argument("--wait-s", type=int, default=30, help="the long polls' wait_s")
    args = ap.parse_args()
    args.polls = max(0, min(args.polls, args.nodes))
    try:
        sys.exit(asyncio.run(run(args)))
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
