"""One-sided WRITE and READ over the network provider while the target's application runs
nothing of ours: the target process blocks on its pipe. Over `tcp` the target's library carries
the WR out (libfabric's tcp RMA would too, in the target's progress), so the initiator rings the
target node's call bell and the target's progress thread serves the queue at once instead of at
its next tick. The transport counters show that the ring went and was answered
(docs/TRANSPORTS.md, "One-sided operations")."""

import contextlib
import ctypes
import multiprocessing as mp
import os
import random
import time

import pytest

import umq

pytestmark = [
    pytest.mark.libumq_behaviour,
    pytest.mark.skipif(
        os.environ.get("UMQ_PROVIDER") != "fabric",
        reason="runs in the suite's network run (UMQ_PROVIDER=fabric)",
    ),
]

SIZE = 4096
BEFORE = b"\xaa" * SIZE


def target(conn):
    """Exposes a 4 KiB buffer, then blocks on its pipe; answers "look" with the buffer's bytes,
    "free" by freeing it, "calls" with how many rings it answered, and "race" (with a delay) by
    freeing it after that delay, then, once told that the initiator stopped, sending what the
    freed buffer holds."""
    with umq.Umq() as ctx:
        q = ctx.queue("target", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        bufs = ctx.alloc(SIZE, 1, umqh=q.handle)
        bufs.write(0, BEFORE)
        exposed = q.expose(bufs)
        conn.send(exposed)
        while (ask := conn.recv()) != "done":
            if ask == "free":
                bufs.free()
                conn.send(None)
            elif isinstance(ask, tuple) and ask[0] == "race":
                time.sleep(ask[1])
                bufs.free()
                assert conn.recv() == "stopped"
                conn.send(ctypes.string_at(exposed.addr, SIZE))
            elif ask == "calls":
                conn.send(q.transport_stats().calls_answered)
            else:
                conn.send(ctypes.string_at(exposed.addr, SIZE))


@contextlib.contextmanager
def bound_to_target():
    """Starts the target process and binds a queue of ours to it; yields the queue, the
    target's exposed buffer and our end of its pipe."""
    conn, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=target, args=(child_end,))
    child.start()
    try:
        with umq.Umq() as ctx:
            q = ctx.queue("initiator", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(conn.recv())
            conn.send(q.bind_info())
            yield q, conn.recv(), conn
            conn.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0


def one_completion(q):
    done = q.poll_until(1, umq.UMQ_IO_TX)
    assert len(done) == 1, "the WR did not complete while the target's application slept"
    return done[0]


def test_write_and_read_run_in_the_sleeping_targets_library_when_called():
    with bound_to_target() as (q, remote, conn):
        assert q.transport_stats().transport == umq.UMQ_EXT_TRANSPORT_FABRIC
        payload = bytes(range(256)) * (SIZE // 256)
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
        # Six WRs, one at a time: each rang the target's call bell once, and the target answered
        # the rings (each, unless one waited past the bell's 50 ms and the tick served it).
        assert q.transport_stats().calls_sent == 6
        conn.send("calls")
        assert 1 <= conn.recv() <= 6
        conn.send("look")
        assert conn.recv() == payload


def test_a_freed_buffer_is_out_of_reach_over_the_network():
    with bound_to_target() as (q, remote, conn):
        conn.send("free")
        assert conn.recv() is None
        assert q.write(b"\x55" * SIZE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        assert q.read(SIZE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        conn.send("look")
        assert conn.recv() == BEFORE


def test_a_stream_of_writes_rings_about_once_a_round_trip():
    """12 WRITEs posted at once: the initiator rings once for those sent and again only after
    they completed, so far fewer rings than WRs; every byte lands."""
    with bound_to_target() as (q, remote, conn):
        for i in range(12):
            assert q.write(bytes([i]) * 64, umq.RemoteBuffer(remote.addr + 64 * i, 64, remote.token_id, remote.token_value)) == 1
        done = q.poll_until(12, umq.UMQ_IO_TX)
        assert [d.status for d in done] == [umq.UMQ_BUF_SUCCESS] * 12
        sent = q.transport_stats().calls_sent
        assert 1 <= sent < 12
        conn.send("calls")
        assert 1 <= conn.recv() <= sent
        conn.send("look")
        assert conn.recv()[: 64 * 12] == b"".join(bytes([i]) * 64 for i in range(12))


@pytest.mark.parametrize("delay_ms", [0, 1, 3])
def test_writes_racing_a_free_land_before_it_or_not_at_all(delay_ms):
    """The target's application frees the buffer while our WRITEs stream into it (up to eight in
    flight, each with its own byte). Each WR runs in the target's library under the buffer's pin
    (src/buf/pin.rs): it lands before the free or completes REM_ACCESS_ABORT_ERR, so the
    statuses are successes then refusals, never mixed, and the freed buffer holds the last
    WRITE that succeeded: no refused one changed a byte."""
    with bound_to_target() as (q, remote, conn):
        # The first WR to a peer waits for libfabric to connect (tens of milliseconds): before
        # the race, not in it.
        assert q.write(BEFORE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        conn.send(("race", delay_ms / 1000 + random.random() / 1000))
        statuses, posted, in_flight = [], 0, 0
        while not (umq.UMQ_BUF_REM_ACCESS_ABORT_ERR in statuses and in_flight == 0):
            while in_flight < 8 and umq.UMQ_BUF_REM_ACCESS_ABORT_ERR not in statuses and posted < 100_000:
                assert q.write(bytes([posted % 250 + 1]) * SIZE, remote) == 1
                posted, in_flight = posted + 1, in_flight + 1
            done = q.poll(umq.UMQ_IO_TX, 8)
            statuses += [d.status for d in done]
            in_flight -= len(done)
        refused = statuses.index(umq.UMQ_BUF_REM_ACCESS_ABORT_ERR)
        assert statuses[:refused] == [umq.UMQ_BUF_SUCCESS] * refused
        assert statuses[refused:] == [umq.UMQ_BUF_REM_ACCESS_ABORT_ERR] * (len(statuses) - refused)
        conn.send("stopped")
        landed = bytes([(refused - 1) % 250 + 1]) * SIZE if refused else BEFORE
        assert conn.recv() == landed, "a refused WRITE changed the freed buffer"
