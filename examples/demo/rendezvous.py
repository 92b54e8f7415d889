#!/usr/bin/env python3
"""A torch.distributed-free rendezvous: every rank connects to rank 0 at
MASTER_ADDR:MASTER_PORT over TCP and sends its rank; rank 0 answers "ok" once
it has seen all WORLD_SIZE ranks, and every rank exits 0 only then (3: rank 0
never answered; 4: a wrong answer). The variables are the ones every member
of a HeteroFlow job gets (docs/JOBS.md, "Launch environment"); the arguments
show the command's placeholders ({rank}, {world_size}, ...) filled in."""
import os
import socket
import sys
import time

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print("env RANK=%d WORLD_SIZE=%d MASTER_ADDR=%s MASTER_PORT=%d argv=%s"
      % (rank, world, addr, port, sys.argv[1:]), flush=True)
if rank == 0:
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", port))
    srv.listen(world)
    srv.settimeout(60)
    seen, conns = {0}, []
    while len(seen) < world:
        c, _ = srv.accept()
        seen.add(int(c.recv(16).decode()))
        conns.append(c)
    for c in conns:
        c.sendall(b"ok")
    print("rank 0 saw ranks %s" % sorted(seen), flush=True)
else:
    deadline = time.time() + 60
    while True:
        try:
            c = socket.create_connection((addr, port), timeout=5)
            break
        except OSError:
            if time.time() > deadline:
                sys.exit(3)
            time.sleep(0.2)
    c.sendall(str(rank).encode())
    if c.recv(2) != b"ok":
        sys.exit(4)
    print("rank %d met rank 0" % rank, flush=True)
