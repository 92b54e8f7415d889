#!/usr/bin/python3
"""The server on PostgreSQL (docs/STORE.md): `heteroflow server --store
postgresql://...` against a real PostgreSQL server (the one HF_TEST_POSTGRES
names, as scripts/test.sh starts it, or one this test starts with
scripts/test-postgres.sh), each run in a database of its own.

- A real agent registers a declared node; tasks are placed, run and succeed;
  the allocations and grants are rows in PostgreSQL, and nothing is written
  to a SQLite file.
- The cluster survives a restart of the server: tasks, config and tokens.
- A second server on the same database follows the first and relays the
  API to it (docs/HA.md).
- `store:` in the config file names the database as --store does; one
  that is no postgresql:// URI is refused (exit 2).
- A --store that is no postgresql:// URI, and a server that cannot be
  reached, stop the server at start with a clear message that never shows
  the URI's password.

usage: test_postgres.py HETEROFLOW_BINARY
"""
import os
import subprocess
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Server, _LIVE, expect, fail, main_guard, postgres_server, psql,  # noqa: E402
                   stop_postgres, wait_until)



def main(binary, tmp):
    base, own = postgres_server()
    db = "hf_e2e_%d" % os.getpid()
    psql(base, "postgres", "DROP DATABASE IF EXISTS %s" % db)
    psql(base, "postgres", "CREATE DATABASE %s" % db)
    uri = base + "&dbname=" + db
    srv = Server(binary, os.path.join(tmp, "data"), args=["--store", uri])
    c = Checks("postgres")
    st = {}

    def run_tasks():
        inv = os.path.join(tmp, "pg-node.yaml")
        with open(inv, "w") as f:
            f.write("name: pg-node\ncpu_milli: 8000\nmemory_mib: 16384\ngpus:\n"
                    "  - {index: 0, model: A100-80G, memory_mib: 81920}\n"
                    "  - {index: 1, model: A100-80G, memory_mib: 81920}\n")
        log = open(os.path.join(tmp, "agent.log"), "ab")
        p = subprocess.Popen([binary, "agent", "--server", "http://127.0.0.1:%d" % srv.port,
                              "--token-file", srv.agent_token_file("pg-node", tmp), "--inventory", inv,
                              "--work-dir", os.path.join(tmp, "work")], stdout=log, stderr=log)
        _LIVE.append(type("AgentProc", (), {"proc": p})())
        wait_until(lambda: any(n["condition"] == "Ready" for n in expect(srv.get(API + "/nodes"), 200)["nodes"]),
                   20, "pg-node Ready")
        ids = [expect(srv.call("POST", API + "/tasks", {
            "name": "pg-%d" % i, "command": ["true"],
            "requests": {"cpu_milli": 100, "memory_mib": 64, "gpu": 1, "gpu_milli": 500}}), 201)["id"]
            for i in range(6)]
        held = expect(srv.call("POST", API + "/tasks", {
            "name": "pg-held", "command": ["sleep", "60"],
            "requests": {"cpu_milli": 100, "memory_mib": 64, "gpu": 1}}), 201)["id"]
        wait_until(lambda: all(expect(srv.get(API + "/tasks/%d" % i), 200)["state"] == "succeeded" for i in ids),
                   30, "six tasks succeeded")
        wait_until(lambda: expect(srv.get(API + "/tasks/%d" % held), 200)["state"] == "running", 20,
                   "the long task running")
        # The rows are PostgreSQL's: the running task's grant, every task.
        if psql(base, db, "SELECT milli FROM gpu_grants WHERE task_id = %d" % held) != "1000":
            fail("the running task's grant is not a row in PostgreSQL")
        if psql(base, db, "SELECT COUNT(*) FROM tasks") != "7":
            fail("PostgreSQL holds %s tasks, want 7" % psql(base, db, "SELECT COUNT(*) FROM tasks"))
        if os.path.exists(os.path.join(tmp, "data", "heteroflow.db")):
            fail("a SQLite file was written beside --store")
        st["held"] = held
        print("  6 tasks succeeded, 1 running; grants and tasks are rows in PostgreSQL")

    def restart():
        expect(srv.call("PUT", API + "/scheduler/config", {"load_threshold": 0.7}), 200)
        srv.stop()
        srv.start()
        cfg = expect(srv.get(API + "/scheduler/config"), 200)
        if abs(cfg["load_threshold"] - 0.7) > 1e-9:
            fail("load_threshold after a restart: %r" % cfg["load_threshold"])
        tasks = expect(srv.get(API + "/tasks"), 200)["tasks"]
        if len(tasks) != 7 or sum(t["state"] == "succeeded" for t in tasks) != 6:
            fail("after a restart: %s" % [(t["name"], t["state"]) for t in tasks])
        t = expect(srv.get(API + "/tasks/%d" % st["held"]), 200)
        if t["state"] != "running" or t["node"] != "pg-node":
            fail("the long task after a restart: %s on %s" % (t["state"], t["node"]))

    def second_server():
        # A second server on the same database follows the first (docs/HA.md).
        second = Server(binary, os.path.join(tmp, "data2"), args=["--store", uri])

        def follows():
            r = second.call("GET", "/readyz", token=None)
            return r.status == 200 and r.body.get("role") == "follower" and r.body
        body = wait_until(follows, 20, "the second server following")
        if body.get("leader_url") != "http://127.0.0.1:%d" % srv.port:
            fail("the second server follows %r, want the first at port %d" % (body, srv.port))
        mine = expect(srv.get(API + "/tasks"), 200)["tasks"]
        through = expect(second.get(API + "/tasks"), 200)["tasks"]
        if [t["id"] for t in mine] != [t["id"] for t in through]:
            fail("the follower's answer is not the leader's")
        second.stop()

    def store_in_config():
        # `store:` in --config names the database as --store does.
        cfg = os.path.join(tmp, "store.yaml")
        with open(cfg, "w") as f:
            f.write("store: %s\n" % uri)
        third = Server(binary, os.path.join(tmp, "data5"), config=cfg)
        r = third.call("GET", "/readyz", token=None)
        if r.status != 200 or r.body.get("role") not in ("follower", "leader"):
            fail("a server with store: in its config is not a replica on PostgreSQL: %r" % (r.body,))
        if os.path.exists(os.path.join(tmp, "data5", "heteroflow.db")):
            fail("store: in the config file, yet a SQLite file was written")
        third.stop()
        with open(cfg, "w") as f:
            f.write("store: /var/lib/heteroflow/x.db\n")
        out = subprocess.run([binary, "server", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(tmp, "data6"),
                              "--config", cfg], capture_output=True, text=True, timeout=30)
        if out.returncode != 2 or "store must be a postgresql:// URI" not in out.stderr:
            fail("store: with a file path: rc %d, %s" % (out.returncode, out.stderr[-400:]))

    def bad_store():
        out = subprocess.run([binary, "server", "--data-dir", os.path.join(tmp, "data3"), "--store",
                              "/var/lib/heteroflow/x.db"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 or "postgresql://" not in out.stderr:
            fail("--store with a file path: rc %d, %s" % (out.returncode, out.stderr[-400:]))
        secret = "pw-" + "7Yq2"
        out = subprocess.run([binary, "server", "--listen", "127.0.0.1:0", "--data-dir", os.path.join(tmp, "data4"),
                              "--store", "postgresql://hf:%s@/hf?host=%s&port=1" % (secret, os.path.join(tmp, "none"))],
                             capture_output=True, text=True, timeout=30)
        if out.returncode == 0 or "connect to" not in out.stderr:
            fail("an unreachable PostgreSQL: rc %d, %s" % (out.returncode, out.stderr[-400:]))
        if secret in out.stderr or secret in out.stdout:
            fail("the URI's password reached the server's output: %s" % out.stderr[-400:])

    if c.run("a real agent's tasks placed, run and recorded in PostgreSQL", run_tasks):
        c.run("tasks, config and a running task survive a restart", restart)
    c.run("a second server on the same database follows the first", second_server)
    c.run("store: in the config file", store_in_config)
    c.run("a bad --store or an unreachable server: a clear message, no password", bad_store)
    srv.stop()
    psql(base, "postgres", "DROP DATABASE IF EXISTS %s WITH (FORCE)" % db)
    stop_postgres(own)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
