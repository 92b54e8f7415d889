#!/usr/bin/python3
"""GET /metrics: Prometheus text format 0.0.4 that prometheus_client's own
parser reads, with every family docs/API.md lists, labelled as listed, and
counters that move: schedule attempts after submissions, HTTP requests by
method and code, per-node GPU milli; and `promtool check metrics` (Prometheus's
linter) has nothing to say about it.

usage: test_metrics.py HETEROFLOW_BINARY
"""
import os
import shutil
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, expect, expect_error, fail, main_guard,  # noqa: E402
                   route_missing, wait_until)

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("FAIL: prometheus_client is not installed (Debian: python3-prometheus-client); "
          "run this test with /usr/bin/python3")
    sys.exit(1)

# family name (as the parser reports it: counters without _total) -> (type, labels)
FAMILIES = {
    "heteroflow_scheduler_schedule_attempts": ("counter", {"result"}),
    "heteroflow_scheduler_scheduling_attempt_duration_seconds": ("histogram", {"result"}),
    "heteroflow_scheduler_pending_tasks": ("gauge", {"queue"}),
    "heteroflow_scheduler_preemption_victims": ("counter", set()),
    "heteroflow_scheduler_plugin_execution_duration_seconds": ("histogram", {"plugin", "extension_point"}),
    "heteroflow_node_gpu_milli_allocated": ("gauge", {"node"}),
    "heteroflow_node_gpu_milli_capacity": ("gauge", {"node"}),
    "heteroflow_http_requests": ("counter", {"method", "code"}),
    "heteroflow_http_request_duration_seconds": ("histogram", set()),
}


def scrape(srv, token="admin"):
    r = srv.call("GET", "/metrics", token=token)
    if route_missing(r):
        fail("route missing (not implemented?): GET /metrics")
    if r.status != 200:
        fail("GET /metrics: %s" % r.short())
    ctype = r.header("Content-Type") or ""
    if not ctype.startswith("text/plain") or "0.0.4" not in ctype:
        fail("GET /metrics Content-Type must be text/plain; version=0.0.4, got %r" % ctype)
    text = r.raw.decode("utf-8")
    try:
        fams = {f.name: f for f in text_string_to_metric_families(text)}
    except Exception as e:  # noqa: BLE001 - any parser complaint is the finding
        fail("prometheus_client cannot parse /metrics: %r\n%s" % (e, text[:1500]))
    return fams, text


def value(fams, family, sample_name, **labels):
    """Sum of the samples of `sample_name` whose labels include `labels`."""
    f = fams.get(family)
    if f is None:
        return None
    total, found = 0.0, False
    for s in f.samples:
        if s.name == sample_name and all(s.labels.get(k) == v for k, v in labels.items()):
            total += s.value
            found = True
    return total if found else None


def main(binary, tmp):
    srv = Server(binary, os.path.join(tmp, "data"))
    c = Checks("metrics")
    st = {}

    def families_present():
        fams, text = scrape(srv)
        missing = [f for f in FAMILIES if f not in fams]
        if missing:
            fail("families missing from /metrics: %s" % missing)
        for name, (typ, labels) in FAMILIES.items():
            f = fams[name]
            if f.type != typ:
                fail("%s: type %s, want %s" % (name, f.type, typ))
            for s in f.samples:
                if labels - set(s.labels):
                    fail("%s sample %s has labels %s; docs/API.md gives it %s"
                         % (name, s.name, sorted(s.labels), sorted(labels)))
        # The documented label values are all exported, even at zero.
        for result in ("scheduled", "unschedulable", "error"):
            if value(fams, "heteroflow_scheduler_schedule_attempts",
                     "heteroflow_scheduler_schedule_attempts_total", result=result) is None:
                fail("no schedule_attempts_total{result=%r} sample" % result)
        for queue in ("active", "unschedulable"):
            if value(fams, "heteroflow_scheduler_pending_tasks", "heteroflow_scheduler_pending_tasks",
                     queue=queue) is None:
                fail("no pending_tasks{queue=%r} sample" % queue)
        if "# TYPE heteroflow_scheduler_schedule_attempts_total counter" not in text:
            fail("the counter's TYPE line must name it with _total (format 0.0.4)")

    def auth():
        expect_error(srv.call("GET", "/metrics", token=None), 401, "unauthenticated")
        for role in ("viewer", "operator"):
            tok = srv.make_token(role)["token"]
            scrape(srv, token=tok)

    def attempts_increase():
        for i in range(2):
            srv.register_node("met-n%d" % i, gpus=2, expect_status=201)
        before, _ = scrape(srv)
        b_sched = value(before, "heteroflow_scheduler_schedule_attempts",
                        "heteroflow_scheduler_schedule_attempts_total", result="scheduled") or 0
        b_unsched = value(before, "heteroflow_scheduler_schedule_attempts",
                          "heteroflow_scheduler_schedule_attempts_total", result="unschedulable") or 0
        for i in range(6):
            expect(srv.call("POST", API + "/tasks", {"name": "met-%d" % i, "requests": {"gpu": 1}}), 201)

        def moved():
            fams, _ = scrape(srv)
            s = value(fams, "heteroflow_scheduler_schedule_attempts",
                      "heteroflow_scheduler_schedule_attempts_total", result="scheduled") or 0
            u = value(fams, "heteroflow_scheduler_schedule_attempts",
                      "heteroflow_scheduler_schedule_attempts_total", result="unschedulable") or 0
            return (s - b_sched >= 4 and u - b_unsched >= 1) and fams
        fams = wait_until(moved, 15, "schedule_attempts_total to count 4 scheduled and >= 1 unschedulable")
        st["fams"] = fams
        count = value(fams, "heteroflow_scheduler_scheduling_attempt_duration_seconds",
                      "heteroflow_scheduler_scheduling_attempt_duration_seconds_count", result="scheduled")
        if not count or count < 4:
            fail("scheduling_attempt_duration_seconds_count{result=scheduled} = %r, want >= 4" % count)
        plugin_count = value(fams, "heteroflow_scheduler_plugin_execution_duration_seconds",
                             "heteroflow_scheduler_plugin_execution_duration_seconds_count")
        if not plugin_count:
            fail("plugin_execution_duration_seconds has no observations after scheduling")

    def node_gauges():
        def settled():
            fams, _ = scrape(srv)
            alloc = [value(fams, "heteroflow_node_gpu_milli_allocated",
                           "heteroflow_node_gpu_milli_allocated", node="met-n%d" % i) for i in range(2)]
            total = [value(fams, "heteroflow_node_gpu_milli_capacity",
                           "heteroflow_node_gpu_milli_capacity", node="met-n%d" % i) for i in range(2)]
            pend = value(fams, "heteroflow_scheduler_pending_tasks", "heteroflow_scheduler_pending_tasks")
            return (alloc, total, pend) if alloc == [2000, 2000] and total == [2000, 2000] and pend == 2 else None
        try:
            wait_until(settled, 10, "")
        except Exception:  # noqa: BLE001 - report what was there
            fams, _ = scrape(srv)
            fail("want gpu_milli_allocated = total = 2000 on met-n0/1 and 2 pending tasks, got "
                 "allocated %s total %s pending %s" % (
                     [value(fams, "heteroflow_node_gpu_milli_allocated", "heteroflow_node_gpu_milli_allocated",
                            node="met-n%d" % i) for i in range(2)],
                     [value(fams, "heteroflow_node_gpu_milli_capacity", "heteroflow_node_gpu_milli_capacity",
                            node="met-n%d" % i) for i in range(2)],
                     value(fams, "heteroflow_scheduler_pending_tasks", "heteroflow_scheduler_pending_tasks")))

    def http_counters():
        before, _ = scrape(srv)
        b404 = value(before, "heteroflow_http_requests", "heteroflow_http_requests_total", code="404") or 0
        bget = value(before, "heteroflow_http_requests", "heteroflow_http_requests_total",
                     method="GET", code="200") or 0
        for _ in range(5):
            srv.get(API + "/no-such-route")
        for _ in range(3):
            expect(srv.get(API + "/plugins"), 200)
        after, _ = scrape(srv)
        a404 = value(after, "heteroflow_http_requests", "heteroflow_http_requests_total", code="404") or 0
        aget = value(after, "heteroflow_http_requests", "heteroflow_http_requests_total",
                     method="GET", code="200") or 0
        if a404 - b404 < 5:
            fail("http_requests_total{code=404} moved by %s after 5 unknown routes" % (a404 - b404))
        if aget - bget < 3:
            fail("http_requests_total{method=GET,code=200} moved by %s after 3 GETs" % (aget - bget))
        n = value(after, "heteroflow_http_request_duration_seconds",
                  "heteroflow_http_request_duration_seconds_count")
        if not n or n < 8:
            fail("http_request_duration_seconds_count = %r" % n)

    def promtool_lint():
        # Prometheus's own linter (Debian package prometheus) on the live
        # exposition, every family populated by the checks above: exit 0 and
        # nothing to say.
        promtool = shutil.which("promtool")
        if promtool is None:
            fail("promtool is not installed (Debian: prometheus; scripts/install-deps.sh installs it)")
        _, text = scrape(srv)
        r = subprocess.run([promtool, "check", "metrics"], input=text.encode(), capture_output=True,
                           timeout=60)
        said = (r.stdout + r.stderr).decode(errors="replace").strip()
        if r.returncode != 0 or said:
            fail("promtool check metrics: exit %d\n%s" % (r.returncode, said))
        print("  promtool check metrics: exit 0, no findings on %d lines" % len(text.splitlines()))

    c.run("every documented family, typed and labelled", families_present)
    c.run("any role's token reads /metrics, none is 401", auth)
    c.run("schedule attempts counter increases after submissions", attempts_increase)
    c.run("per-node GPU milli and pending gauges", node_gauges)
    c.run("HTTP request counters by method and code", http_counters)
    c.run("promtool check metrics finds nothing", promtool_lint)
    srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
