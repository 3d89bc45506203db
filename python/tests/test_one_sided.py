"""One-sided WRITE and READ between two processes while the target runs nothing: the target is
stopped with SIGSTOP (its threads, the progress thread included, do not run), so a WR that
completes proves that no CPU of the target's took part. Over shared memory the initiator checks
the target's access table and the kernel moves the bytes (docs/TRANSPORTS.md, "One-sided
operations")."""

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal

import pytest

import umq

pytestmark = [
    pytest.mark.libumq_behaviour,
    pytest.mark.skipif(
        os.environ.get("UMQ_PROVIDER") == "fabric",
        reason="over the network the target's library carries WRITE and READ out: test_one_sided_network.py",
    ),
]

SIZE = 4096
BEFORE = b"\xaa" * SIZE


def target(conn, shared_pool):
    """Exposes a 4 KiB buffer, then reports its bytes each time it is asked; frees it on
    request and then reports what is left at its address."""
    with umq.Umq() as ctx:
        q = ctx.queue("target", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        bufs = ctx.alloc(SIZE, 1, umqh=q.handle if shared_pool else 0)
        bufs.write(0, BEFORE)
        exposed = q.expose(bufs)
        conn.send(exposed)
        while (ask := conn.recv()) != "done":
            if ask == "free":
                bufs.free()
            conn.send(ctypes.string_at(exposed.addr, SIZE))


@contextlib.contextmanager
def bound_to_target(shared_pool=False):
    """Starts the target process and binds a queue of ours to it; yields the queue, the
    target's exposed buffer, our end of its pipe and a context manager that keeps the target
    stopped. The target must exit 0 once the block is done (send it "done")."""
    conn, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=target, args=(child_end, shared_pool))
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
    assert len(done) == 1, "the WR did not complete while the target was stopped"
    return done[0]


@pytest.mark.parametrize("shared_pool", [False, True], ids=["process-pool", "shared-pool"])
def test_write_and_read_complete_while_the_target_is_stopped(shared_pool):
    with bound_to_target(shared_pool) as (q, remote, conn, stopped):
        payload = bytes(range(256)) * (SIZE // 256)
        with stopped():
            assert q.write(payload, remote) == 1
            assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
            assert q.read(SIZE, remote) == 1
            read = one_completion(q)
            assert (read.status, read.data) == (umq.UMQ_BUF_SUCCESS, payload)
            # A forged token, and an address outside the buffer, change no byte.
            forged = umq.RemoteBuffer(remote.addr, remote.length, remote.token_id, remote.token_value ^ 1)
            outside = umq.RemoteBuffer(remote.addr - 64, 64, remote.token_id, remote.token_value)
            for bad in (forged, outside):
                assert q.write(b"\x00" * min(SIZE, bad.length), bad) == 1
                assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
                assert q.read(16, bad) == 1
                assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        # A buffer of the target queue's shared pool is mapped here: copied; else the kernel.
        stats = q.transport_stats()
        ran = (stats.one_sided_mapped_wr, stats.one_sided_kernel_wr)
        assert ran == ((2, 0) if shared_pool else (0, 2))
        conn.send("look")
        assert conn.recv() == payload


def test_a_freed_buffer_is_out_of_reach_and_keeps_its_bytes():
    with bound_to_target() as (q, remote, conn, stopped):
        conn.send("free")
        assert conn.recv() == BEFORE
        with stopped():
            assert q.write(b"\x55" * SIZE, remote) == 1
            assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
            assert q.read(SIZE, remote) == 1
            assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        conn.send("look")
        assert conn.recv() == BEFORE
