"""One-sided WRITE and READ over the network provider while the target's application runs
nothing of ours: the target process blocks on its pipe. Into a shared-pool buffer the target's
library carries the WR out; into a process-pool buffer, once a first WR taught the initiator its
chunk, libfabric RMA moves the bytes and the target's provider serves it. Either way, over `tcp`
the target must run, so the initiator rings the target node's call bell and the target's
progress thread serves the queue at once instead of at its next tick. The transport counters
show the rings and the WRs that went by RMA (docs/TRANSPORTS.md, "WRITE and READ by RMA" and
"The call bell")."""

import os
import random

import pytest

import umq
from one_sided_target import (
    BEFORE,
    SIZE,
    bad_references_are_refused,
    both_refused,
    bound_to_target,
    one_completion,
    put_ping_pong,
    write_and_read_back,
)

pytestmark = [
    pytest.mark.libumq_behaviour,
    pytest.mark.skipif(
        os.environ.get("UMQ_PROVIDER") != "fabric",
        reason="runs in the suite's network run (UMQ_PROVIDER=fabric)",
    ),
]


def test_write_and_read_run_in_the_sleeping_targets_library_when_called():
    with bound_to_target(shared_pool=True) as (q, remote, conn, _):
        assert q.transport_stats().transport == umq.UMQ_EXT_TRANSPORT_FABRIC
        payload = write_and_read_back(q, remote)
        # A forged token, and an address outside the buffer, change no byte.
        bad_references_are_refused(q, remote)
        # Six WRs, one at a time: each rang the target's call bell, once or, when it waited
        # past 200 us, again at doubling intervals (the first may wait for libfabric to
        # connect), and the target answered the rings (src/transport/fabric/calls.rs).
        sent = q.transport_stats().calls_sent
        assert 6 <= sent <= 6 * 8
        conn.send("calls")
        assert 1 <= conn.recv() <= sent
        conn.send("look")
        assert conn.recv() == payload


# What asserts that WRs went by RMA, which UMQ_FABRIC_RMA=off turns off for the whole run.
by_rma = pytest.mark.skipif(os.environ.get("UMQ_FABRIC_RMA") == "off",
                            reason="UMQ_FABRIC_RMA=off: every WRITE and READ goes as a message")


@by_rma
def test_writes_and_reads_into_the_process_pool_go_by_rma_once_a_message_taught_the_chunk():
    """A buffer of the target's process pool: the first WRITE goes as a message, which the
    target's library checks, and its completion tells where the buffer's chunk keeps its data
    areas (and, over UCX's engine, the keys UCX packed for them); the next WRITE and READ go by
    RMA, which the target's provider serves while its application runs nothing of ours. A
    forged token, or an address outside the buffer, still goes as a message and is refused
    (docs/TRANSPORTS.md, "One-sided operations")."""
    with bound_to_target(shared_pool=False) as (q, remote, conn, _):
        assert q.write(BEFORE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        assert q.transport_stats().one_sided_rma_wr == 0
        payload = write_and_read_back(q, remote)
        assert q.transport_stats().one_sided_rma_wr == 2
        bad_references_are_refused(q, remote)
        assert q.transport_stats().one_sided_rma_wr == 2
        conn.send("look")
        assert conn.recv() == payload


def long_writes_read_back(q, remote, size, rounds):
    """`rounds` times: a WRITE of `size` random bytes, and a READ of them back, each alone and
    each completing; returns the last payload."""
    for _ in range(rounds):
        payload = random.randbytes(size)
        assert q.write(payload, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        assert q.read(size, remote) == 1
        read = one_completion(q)
        assert read.status == umq.UMQ_BUF_SUCCESS and read.data == payload
    return payload


@by_rma
def test_long_writes_and_reads_reach_a_sleeping_target_whole():
    """4 MiB WRITEs and READs by RMA into a process-pool buffer of a target whose application
    runs nothing of ours: its progress thread serves them as their bytes arrive on the
    connection, and writes a READ's answer as the socket takes it (docs/TRANSPORTS.md,
    "Watching the connection for long WRs"). Every byte lands, and reads back."""
    size = 4 << 20
    with bound_to_target(shared_pool=False, size=size) as (q, remote, conn, _):
        assert q.write(BEFORE[:64], remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        payload = long_writes_read_back(q, remote, size, 3)
        assert q.transport_stats().one_sided_rma_wr == 6
        conn.send("look")
        assert conn.recv() == payload


def test_long_writes_into_a_shared_pool_buffer_reach_a_sleeping_target_as_messages():
    """8 MiB WRITEs and READs into a shared-pool buffer go as messages the target's library
    runs, while its application runs nothing of ours. A WRITE's fragments fill libfabric's
    share for the peer and the sockets long before it is all sent: the initiator calls the
    target to the WR it holds back, and asks its progress thread to watch the connection,
    which then serves as the bytes arrive (docs/TRANSPORTS.md, "The call bell"). Every byte
    lands, and reads back."""
    size = 8 << 20
    with bound_to_target(shared_pool=True, size=size) as (q, remote, conn, _):
        payload = long_writes_read_back(q, remote, size, 2)
        assert q.transport_stats().one_sided_rma_wr == 0
        assert q.transport_stats().calls_sent >= 2
        conn.send("look")
        assert conn.recv() == payload


def test_a_target_that_turns_rma_off_keeps_a_freed_process_pool_buffer_out_of_reach():
    """UMQ_FABRIC_RMA=off in the target: nothing goes by RMA, so a freed buffer of its process
    pool is refused (by RMA it would still be reachable while its chunk lives)."""
    with bound_to_target(shared_pool=False, rma=False) as (q, remote, conn, _):
        payload = write_and_read_back(q, remote)
        assert write_and_read_back(q, remote) == payload
        assert q.transport_stats().one_sided_rma_wr == 0
        conn.send("free")
        assert conn.recv() == payload
        both_refused(q, remote)
        conn.send("look")
        assert conn.recv() == payload


def test_a_freed_buffer_is_out_of_reach_over_the_network():
    with bound_to_target(shared_pool=True) as (q, remote, conn, _):
        conn.send("free")
        assert conn.recv() == BEFORE
        both_refused(q, remote)
        conn.send("look")
        assert conn.recv() == BEFORE


def test_a_stream_of_writes_rings_about_once_a_round_trip():
    """12 WRITEs posted at once: the initiator rings once for those sent and again only after
    they completed, so fewer rings than WRs; every byte lands."""
    with bound_to_target(shared_pool=True) as (q, remote, conn, _):
        for i in range(12):
            part = umq.RemoteBuffer(remote.addr + 64 * i, 64, remote.token_id, remote.token_value)
            assert q.write(bytes([i]) * 64, part) == 1
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
    with bound_to_target(shared_pool=True) as (q, remote, conn, _):
        # The first WR to a peer may wait for libfabric to connect: before the race, not in it.
        assert q.write(BEFORE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        conn.send(("race", delay_ms / 1000 + random.random() / 1000))
        statuses, posted, in_flight = [], 0, 0
        refused = umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        while not (refused in statuses and in_flight == 0):
            while in_flight < 8 and refused not in statuses and posted < 100_000:
                assert q.write(bytes([posted % 250 + 1]) * SIZE, remote) == 1
                posted, in_flight = posted + 1, in_flight + 1
            done = q.poll(umq.UMQ_IO_TX, 8)
            statuses += [d.status for d in done]
            in_flight -= len(done)
        first = statuses.index(refused)
        assert statuses[:first] == [umq.UMQ_BUF_SUCCESS] * first
        assert statuses[first:] == [refused] * (len(statuses) - first)
        conn.send("stopped")
        landed = bytes([(first - 1) % 250 + 1]) * SIZE if first else BEFORE
        assert conn.recv() == landed, "a refused WRITE changed the freed buffer"


@pytest.mark.parametrize("shared_pool", [False, True])
def test_a_put_ping_pong_completes_every_write_and_a_write_no_reply_carries_too(shared_pool):
    """Both sides WRITE numbers into each other's buffer in turn, as ucp_put_lat does: the
    WRITEs go as messages whose answers wait for the replies to carry them (docs/TRANSPORTS.md,
    "Answers ride on replies"), or by RMA. Every WRITE on both sides completes successfully.
    Then the target goes back to its pipe, running nothing of ours: a WRITE it never answers
    with one of its own still completes (its progress thread sends the answer), and the bytes
    are there."""
    with bound_to_target(shared_pool=shared_pool) as (q, remote, conn, _):
        ours, theirs = put_ping_pong(q, conn, remote, 300)
        assert ours == [umq.UMQ_BUF_SUCCESS] * 300
        assert theirs == [umq.UMQ_BUF_SUCCESS] * 300
        assert q.write(BEFORE, remote) == 1
        assert one_completion(q).status == umq.UMQ_BUF_SUCCESS
        conn.send("look")
        assert conn.recv() == BEFORE
