"""The target process of the one-sided tests (test_one_sided.py over shared memory,
test_one_sided_network.py over the network), and the checks both make of it."""

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import time

import umq

SIZE = 4096
BEFORE = b"\xaa" * SIZE


def target(conn, shared_pool, rma=True, size=SIZE):
    """Exposes a buffer of `size` bytes (4 KiB), then blocks on its pipe, running nothing of
    ours, and answers:
    "calls" with how many call-bell rings it answered; ("pingpong", rounds, remote) by playing
    `put_ping_pong`'s other side into `remote`, then with its WRITEs' statuses; anything else
    with its buffer's bytes, after freeing the buffer for "free", and for ("race", delay) after
    freeing it once that delay passed and being told "stopped". Without `rma`, its network
    node exposes nothing for RMA (UMQ_FABRIC_RMA=off)."""
    if not rma:
        os.environ["UMQ_FABRIC_RMA"] = "off"
    with umq.Umq() as ctx:
        q = ctx.queue("target", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        bufs = ctx.alloc(size, 1, umqh=q.handle if shared_pool else 0)
        bufs.write(0, BEFORE[:1] * size)
        exposed = q.expose(bufs)
        conn.send(exposed)
        while (ask := conn.recv()) != "done":
            if ask == "calls":
                conn.send(q.transport_stats().calls_answered)
                continue
            if isinstance(ask, tuple) and ask[0] == "pingpong":
                _, rounds, theirs = ask
                conn.send(ping_pong_side(q, exposed, theirs, rounds, first=False))
                continue
            if isinstance(ask, tuple) and ask[0] == "race":
                time.sleep(ask[1])
                bufs.free()
                assert conn.recv() == "stopped"
            elif ask == "free":
                bufs.free()
            conn.send(ctypes.string_at(exposed.addr, size))


def value_at(remote):
    """The first eight bytes of a buffer of ours, as a number."""
    return int.from_bytes(ctypes.string_at(remote.addr, 8), "little")


def write_value(q, value, remote, statuses):
    """WRITEs `value` into the first eight bytes of `remote`, taking in the completions that
    came meanwhile."""
    while q.write(value.to_bytes(8, "little"), remote) != 1:
        statuses += [c.status for c in q.poll(umq.UMQ_IO_TX)]


def wait_for_value(q, value, mine, statuses):
    """Polls (which runs the library) until the first eight bytes of `mine` hold `value`,
    taking in the completions that come meanwhile."""
    deadline = time.monotonic() + 30
    while value_at(mine) != value:
        assert time.monotonic() < deadline, f"{value} did not arrive within 30 s"
        statuses += [c.status for c in q.poll(umq.UMQ_IO_TX)]


def ping_pong_side(q, mine, theirs, rounds, first):
    """One side of a put ping-pong: for each number in turn, WRITEs it into `theirs` and
    waits for the other side's WRITE of it in `mine` (`first`), or the other way round.
    Returns the statuses of its WRITEs, all taken in."""
    statuses = []
    for i in range(1, rounds + 1):
        if first:
            write_value(q, i, theirs, statuses)
        wait_for_value(q, i, mine, statuses)
        if not first:
            write_value(q, i, theirs, statuses)
    while len(statuses) < rounds:
        statuses += [c.status for c in q.poll(umq.UMQ_IO_TX)]
    return statuses


def put_ping_pong(q, conn, remote, rounds):
    """A put ping-pong with the target, as `ucp_put_lat` runs one: each side WRITEs the next
    number into the other's buffer and waits for the other's WRITE of it in its own. Returns
    both sides' WRITE statuses."""
    with q.umq.alloc(SIZE, 1) as bufs:
        bufs.write(0, bytes(SIZE))
        mine = q.expose(bufs)
        conn.send(("pingpong", rounds, mine))
        return ping_pong_side(q, mine, remote, rounds, first=True), conn.recv()


@contextlib.contextmanager
def bound_to_target(shared_pool=False, rma=True, size=SIZE):
    """Starts the target process and binds a queue of ours to it; yields the queue, the
    target's exposed buffer, our end of its pipe and a context manager that keeps the target
    stopped (SIGSTOP). The target must exit 0 once the block is done."""
    conn, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=target, args=(child_end, shared_pool, rma, size))
    child.start()

    @contextlib.contextmanager
    def stopped():
        os.kill(child.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(child.pid, signal.SIGCONT)

    try:
        with umq.Umq() as ctx:
            q = ctx.queue("initiator", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(conn.recv())
            conn.send(q.bind_info())
            yield q, conn.recv(), conn, stopped
            conn.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0


def one_completion(q):
    done = q.poll_until(1, umq.UMQ_IO_TX)
    assert len(done) == 1, "the WR did not complete while the target ran nothing of ours"
    return done[0]


def write_and_read_back(q, remote):
    """WRITEs 4 KiB of a pattern into `remote`, READs it back and checks it; returns it."""
    payload = bytes(range(256)) * (SIZE // 256)
    assert q.write(payload, remote) == 1
    assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
    assert q.read(SIZE, remote) == 1
    read = one_completion(q)
    assert (read.status, read.data) == (umq.UMQ_BUF_SUCCESS, payload)
    return payload


def bad_references_are_refused(q, remote):
    """A forged token, and an address outside the buffer: each WRITE and READ completes
    REM_ACCESS_ABORT_ERR (the caller checks that no byte changed)."""
    forged = umq.RemoteBuffer(remote.addr, remote.length, remote.token_id, remote.token_value ^ 1)
    outside = umq.RemoteBuffer(remote.addr - 64, 64, remote.token_id, remote.token_value)
    for bad in (forged, outside):
        assert q.write(b"\x00" * min(SIZE, bad.length), bad) == 1
        assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        assert q.read(16, bad) == 1
        assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR


def both_refused(q, remote):
    """A WRITE and a READ of `remote` (a freed buffer) each complete REM_ACCESS_ABORT_ERR."""
    assert q.write(b"\x55" * SIZE, remote) == 1
    assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
    assert q.read(SIZE, remote) == 1
    assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
