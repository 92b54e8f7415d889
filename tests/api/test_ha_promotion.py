#!/usr/bin/python3
"""The servers follow a PostgreSQL promotion (docs/HA.md, "The database's own
availability"): a primary and a synchronous hot standby started by this test
(scripts/test-postgres.sh), two server replicas on a multi-host URI with
target_session_attrs=read-write, and a submission burst. The primary is
killed (an immediate stop, as a crash), the standby promoted with
`pg_ctl promote`, and:

- the servers take submissions again within 10 s of the promotion (the time
  is printed; docs/HA.md gives the formula);
- every submission acknowledged before, during and after is in the promoted
  database: nothing acknowledged is lost;
- one replica leads, at a higher epoch than before.

usage: test_ha_promotion.py HETEROFLOW_BINARY
"""
import os
import random
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hfapi import (API, Checks, Failure, PG_SCRIPT as PG, Server, fail, free_port, main_guard,  # noqa: E402
                   psql, replica_role, wait_until)



def main(binary, tmp):
    # In /tmp itself: the servers may run as the postgres user.
    p_dir = tempfile.mkdtemp(prefix="hf-pg-primary-")
    s_dir = tempfile.mkdtemp(prefix="hf-pg-standby-")
    c = Checks("ha promotion")
    try:
        primary = subprocess.run([PG, "start", p_dir], capture_output=True, text=True, check=True).stdout.strip()
        psql(primary, "postgres", "CREATE DATABASE hf")
        subprocess.run([PG, "standby", p_dir, s_dir], capture_output=True, text=True, check=True)
        uri = ("postgresql://postgres@/hf?host=%s,%s&port=5432,5432&target_session_attrs=read-write"
               % (p_dir, s_dir))
        replicas = [Server(binary, os.path.join(tmp, "r%d" % i), port=free_port(),
                           args=["--store", uri, "--replica", "r%d" % i]) for i in range(2)]
        st = {}

        def leader():
            def find():
                for r in replicas:
                    role, body = replica_role(r)
                    if role == "leader":
                        return r, body
                return None
            return wait_until(find, 30, "a leader")

        def promotion():
            ldr, body = leader()
            st["epoch"] = body["epoch"]
            acked = []
            mu = threading.Lock()
            stop = threading.Event()
            last_ok = [0.0]

            def submitter(k):
                n = 0
                while not stop.is_set():
                    n += 1
                    r = random.choice(replicas)
                    try:
                        resp = r.call("POST", API + "/tasks", {
                            "name": "p-%d-%d" % (k, n), "command": ["true"],
                            "requests": {"cpu_milli": 10, "memory_mib": 8}}, timeout=10)
                    except Failure:
                        time.sleep(0.05)
                        continue
                    if resp.status == 201:
                        with mu:
                            acked.append(resp.body["id"])
                            last_ok[0] = time.monotonic()
                    time.sleep(0.02)

            threads = [threading.Thread(target=submitter, args=(k,), daemon=True) for k in range(8)]
            for t in threads:
                t.start()
            try:
                wait_until(lambda: len(acked) >= 50, 30, "submissions before the crash")
                subprocess.run([PG, "kill", p_dir], check=True)
                killed = time.monotonic()
                with mu:
                    before = len(acked)
                time.sleep(1)
                subprocess.run([PG, "promote", s_dir], check=True)
                promoted = time.monotonic()
                wait_until(lambda: last_ok[0] > promoted, 30, "a submission acknowledged after the promotion",
                           interval=0.02)
                resumed = last_ok[0] - promoted
                wait_until(lambda: len(acked) >= before + 100, 30, "submissions after the promotion")
            finally:
                stop.set()
                for t in threads:
                    t.join(timeout=30)
            ids = sorted(set(acked))
            promoted_base = "postgresql://postgres@/?host=%s&port=5432" % s_dir
            have = int(psql(promoted_base, "hf", "SELECT COUNT(*) FROM tasks WHERE id IN (%s)" % ",".join(map(str, ids))))
            if have != len(ids):
                fail("%d of %d acknowledged submissions are missing from the promoted database"
                     % (len(ids) - have, len(ids)))
            ldr2, body2 = leader()
            print("  primary killed; standby promoted %.1f s later; submissions taken again %.2f s after "
                  "the promotion; %d acknowledged, all in the promoted database; r%d leads at epoch %d"
                  % (promoted - killed, resumed, len(ids), replicas.index(ldr2), body2["epoch"]))
            if resumed >= 10:
                fail("submissions resumed %.2f s after the promotion (want < 10)" % resumed)

        c.run("the servers follow a promotion and lose nothing acknowledged", promotion)
        for r in replicas:
            if r.alive():
                r.kill()
    finally:
        for d in (s_dir, p_dir):
            subprocess.run([PG, "stop", d], capture_output=True)
    c.finish()


if __name__ == "__main__":
    main_guard(main)
