#!/usr/bin/python3
"""Nothing acknowledged is lost, no GPU is granted twice -- across a crash
(SPEC section 9).

32 threads submit 1,000 tasks (whole and shared GPUs, so that GPUs fill up
and are shared) on their own connections, each keeping a record of the tasks
answered 2xx. The server is killed with SIGKILL in the middle of the burst
and restarted on the same data dir. Then: every acknowledged task exists,
with its name; the SQLite file, opened read-only, has no GPU whose granted
milli exceeds 1000 or whose granted memory exceeds its capacity, every
allocation is on an existing node and belongs to a scheduled/running task,
and every scheduled task has one; the API agrees.

usage: test_crash.py HETEROFLOW_BINARY
"""
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import ADMIN_TOKEN, API, Checks, Server, expect, fail, main_guard, wait_until  # noqa: E402

N_THREADS = 32
N_TASKS = 1000
KILL_AFTER = 350  # acknowledged submissions before the SIGKILL
NODES = ["crash-n%d" % i for i in range(6)]


def submission(i, rnd):
    shape = rnd.choice([(1, 1000), (1, 500), (1, 250), (2, 1000), (1, 300), (0, 0)])
    req = {"cpu_milli": 500, "memory_mib": 1024, "gpu": shape[0]}
    if shape[0]:
        req["gpu_milli"] = shape[1]
        req["gpu_memory_mib"] = rnd.choice([0, 10000, 20000])
    return {"name": "crash-%04d" % i, "group": "g%d" % (i % 7), "priority": rnd.randint(0, 9),
            "requests": req}


def open_ro(path):
    uri = "file:%s?mode=ro" % path
    return sqlite3.connect(uri, uri=True, timeout=10)


def main(binary, tmp):
    data = os.path.join(tmp, "data")
    srv = Server(binary, data)
    c = Checks("crash")
    st = {"acked": {}, "errors": 0, "answered_after_kill": 0}

    def setup():
        for name in NODES:
            srv.register_node(name, gpus=4, gpu_memory_mib=40960, expect_status=201)

    def burst_and_kill():
        lock = threading.Lock()
        next_i = [0]
        killed = threading.Event()
        acked = st["acked"]
        rnd_seed = [12345]

        def worker(tid):
            rnd = random.Random(rnd_seed[0] + tid)
            mine = {}
            while True:
                with lock:
                    i = next_i[0]
                    next_i[0] += 1
                if i >= N_TASKS:
                    break
                sub = submission(i, rnd)
                try:
                    r = srv.call("POST", API + "/tasks", sub, timeout=10)
                except Exception:  # noqa: BLE001 - the server is gone: stop this thread
                    with lock:
                        st["errors"] += 1
                    break
                if 200 <= r.status < 300:
                    if not isinstance(r.body, dict) or r.body.get("name") != sub["name"] or \
                            not isinstance(r.body.get("id"), int):
                        with lock:
                            st.setdefault("bad_answers", []).append(r.short())
                        continue
                    mine[r.body["id"]] = sub["name"]
                    with lock:
                        acked[r.body["id"]] = sub["name"]
                        if killed.is_set():
                            st["answered_after_kill"] += 1
                        n = len(acked)
                    if n == KILL_AFTER and not killed.is_set():
                        killed.set()
                        srv.proc.kill()  # SIGKILL, mid-burst
                else:
                    with lock:
                        st.setdefault("refusals", []).append(r.short())
            with lock:
                st.setdefault("per_thread", []).append(len(mine))

        threads = [threading.Thread(target=worker, args=(t,)) for t in range(N_THREADS)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        srv.proc.wait(timeout=10)
        srv._stderr.close()
        print("  %d acknowledged, %d connection errors, %.1f s"
              % (len(acked), st["errors"], time.monotonic() - t0))
        if st.get("bad_answers"):
            fail("2xx answers that are not the task: %s" % st["bad_answers"][:3])
        if st.get("refusals"):
            fail("valid submissions refused: %s" % st["refusals"][:3])
        if not killed.is_set():
            fail("the burst ended with %d acknowledgements before the kill at %d: the test "
                 "killed nothing" % (len(acked), KILL_AFTER))
        if len(acked) >= N_TASKS:
            fail("all %d submissions finished: the kill was not mid-burst" % N_TASKS)
        if st["errors"] == 0:
            fail("no submission was cut off by the kill: not mid-burst")

    def acked_survive():
        srv.start()
        wait_until(lambda: srv.get("/readyz", token=None).status == 200, 20, "/readyz after the crash")
        tasks = {t["id"]: t for t in srv.tasks()}
        lost = {i: n for i, n in st["acked"].items() if i not in tasks}
        renamed = {i: (n, tasks[i]["name"]) for i, n in st["acked"].items()
                   if i in tasks and tasks[i]["name"] != n}
        if lost:
            fail("%d acknowledged tasks lost after kill -9, e.g. %s" % (len(lost), sorted(lost.items())[:5]))
        if renamed:
            fail("acknowledged tasks changed name: %s" % list(renamed.items())[:5])
        extra = [t for i, t in tasks.items() if i not in st["acked"]]
        # A task may be committed whose answer the kill cut off, but never more
        # than the requests in flight at the kill.
        if len(extra) > N_THREADS:
            fail("%d tasks exist that were never acknowledged (at most %d were in flight)"
                 % (len(extra), N_THREADS))
        st["tasks"] = tasks

    def store_invariants():
        time.sleep(1.0)  # let the scheduler run on the recovered queue
        db = open_ro(srv.db_path())
        try:
            cur = db.cursor()
            ok = cur.execute("PRAGMA quick_check").fetchone()[0]
            if ok != "ok":
                fail("PRAGMA quick_check: %s" % ok)
            over = cur.execute(
                "SELECT g.node, g.gpu_index, SUM(g.milli), SUM(g.memory_mib), gp.memory_mib "
                "FROM gpu_grants g LEFT JOIN gpus gp ON gp.node = g.node AND gp.gpu_index = g.gpu_index "
                "GROUP BY g.node, g.gpu_index "
                "HAVING SUM(g.milli) > 1000 OR gp.memory_mib IS NULL OR SUM(g.memory_mib) > gp.memory_mib"
            ).fetchall()
            if over:
                fail("GPUs over capacity (node, index, milli, memory, capacity): %s" % over[:5])
            n_grants = cur.execute("SELECT COUNT(*) FROM gpu_grants").fetchone()[0]
            if n_grants == 0:
                fail("no GPU grants at all: nothing was scheduled, the check proves nothing")
            orphans = cur.execute(
                "SELECT a.task_id, a.node FROM allocations a LEFT JOIN nodes n ON n.name = a.node "
                "WHERE n.name IS NULL").fetchall()
            if orphans:
                fail("allocations on nodes that do not exist: %s" % orphans[:5])
            wrong_state = cur.execute(
                "SELECT a.task_id, t.state FROM allocations a JOIN tasks t ON t.id = a.task_id "
                "WHERE t.state NOT IN ('scheduled', 'running')").fetchall()
            if wrong_state:
                fail("allocations of tasks that are not scheduled/running: %s" % wrong_state[:5])
            unallocated = cur.execute(
                "SELECT t.id FROM tasks t LEFT JOIN allocations a ON a.task_id = t.id "
                "WHERE t.state IN ('scheduled', 'running') AND a.task_id IS NULL").fetchall()
            if unallocated:
                fail("scheduled tasks without an allocation: %s" % unallocated[:5])
            grant_mismatch = cur.execute(
                "SELECT g.task_id FROM gpu_grants g JOIN allocations a ON a.task_id = g.task_id "
                "WHERE g.node != a.node").fetchall()
            if grant_mismatch:
                fail("GPU grants on another node than their allocation: %s" % grant_mismatch[:5])
            ids = {r[0]: r[1] for r in cur.execute("SELECT id, name FROM tasks")}
            lost = [i for i in st["acked"] if ids.get(i) != st["acked"][i]]
            if lost:
                fail("acknowledged tasks missing from the database: %s" % lost[:5])
        finally:
            db.close()

    def api_agrees():
        tasks = srv.tasks_full()
        nodes = {n["name"]: n for n in expect(srv.get(API + "/nodes"), 200)["nodes"]}
        used = {}
        for t in tasks:
            if t["state"] in ("scheduled", "running"):
                a = t.get("allocation")
                if not a or t["node"] not in nodes:
                    fail("task %s is %s on %r with allocation %r" % (t["id"], t["state"], t["node"], a))
                for g in a["gpus"]:
                    key = (t["node"], g["index"])
                    used[key] = used.get(key, 0) + g["milli"]
            elif t.get("allocation"):
                fail("task %s is %s but has an allocation" % (t["id"], t["state"]))
        over = {k: v for k, v in used.items() if v > 1000}
        if over:
            fail("the API shows GPUs over 1000 milli: %s" % over)
        for name, n in nodes.items():
            for g in n["gpus"]:
                if g.get("allocated_milli", 0) != used.get((name, g["index"]), 0):
                    fail("node %s GPU %s: allocated_milli %r but the tasks hold %r"
                         % (name, g["index"], g.get("allocated_milli"), used.get((name, g["index"]), 0)))
        # Still serving: a new task is accepted and placed or queued.
        r = expect(srv.call("POST", API + "/tasks", {"name": "after-crash", "requests": {"gpu": 0}}), 201)
        if r["state"] not in ("pending", "scheduled"):
            fail("new task after the crash: %r" % r)

    def one_server_per_data_dir():
        # A second server on the same store would schedule from its own copy
        # of the cluster and grant the same GPUs again: it is refused at
        # start, naming the data dir and the holder, and changes nothing.
        before = expect(srv.get(API + "/nodes"), 200)
        second = subprocess.run([binary, "server", "--listen", "127.0.0.1:0", "--data-dir", data],
                                capture_output=True, timeout=30, text=True,
                                env=dict(os.environ, HETEROFLOW_ADMIN_TOKEN=ADMIN_TOKEN))
        if second.returncode == 0 or "listening on" in second.stdout:
            fail("a second server started on the data dir in use (exit %d): %s"
                 % (second.returncode, second.stdout[-500:]))
        why = second.stderr
        if data not in why or "in use" not in why or str(srv.pid) not in why:
            fail("the refusal does not name the data dir and the server holding it: %r" % why[-500:])
        if expect(srv.get(API + "/nodes"), 200) != before or not srv.alive():
            fail("the refused server changed what the first one serves")

    if (c.run("register 6 nodes x 4 GPUs", setup)
            and c.run("a second server on the data dir in use is refused", one_server_per_data_dir)
            and c.run("kill -9 mid-burst", burst_and_kill)):
        c.run("every acknowledged task exists after restart", acked_survive)
        c.run("database invariants (read-only sqlite)", store_invariants)
        c.run("the API agrees with the store", api_agrees)
    if srv.alive():
        srv.stop()
    c.finish()


if __name__ == "__main__":
    main_guard(main)
