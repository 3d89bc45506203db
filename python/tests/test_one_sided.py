"""One-sided WRITE and READ between two processes while the target runs nothing: the target is
stopped with SIGSTOP (its threads, the progress thread included, do not run), so a WR that
completes proves that no CPU of the target's took part. Over shared memory the initiator checks
the target's access table and the kernel moves the bytes (docs/TRANSPORTS.md, "One-sided
operations")."""

import os

import pytest

import umq
from one_sided_target import (
    BEFORE,
    SIZE,
    bad_references_are_refused,
    both_refused,
    bound_to_target,
    one_completion,
    write_and_read_back,
)

pytestmark = [
    pytest.mark.libumq_behaviour,
    pytest.mark.skipif(
        os.environ.get("UMQ_PROVIDER") == "fabric",
        reason="over the network the target's library or provider must run: test_one_sided_network.py",
    ),
]


@pytest.mark.parametrize("shared_pool", [False, True], ids=["process-pool", "shared-pool"])
def test_write_and_read_complete_while_the_target_is_stopped(shared_pool):
    with bound_to_target(shared_pool) as (q, remote, conn, stopped):
        with stopped():
            payload = write_and_read_back(q, remote)
            # A forged token, and an address outside the buffer, change no byte.
            bad_references_are_refused(q, remote)
        # A buffer of the target queue's shared pool is mapped here: copied; else the kernel.
        stats = q.transport_stats()
        ran = (stats.one_sided_mapped_wr, stats.one_sided_kernel_wr)
        assert ran == ((2, 0) if shared_pool else (0, 2))
        conn.send("look")
        assert conn.recv() == payload


@pytest.mark.parametrize("shared_pool", [False, True], ids=["process-pool", "shared-pool"])
def test_a_batch_of_writes_and_reads_completes_in_order_while_the_target_is_stopped(shared_pool):
    """One post of several WRITEs and READs, a forged one among them, runs to its completions
    in order; a post of more WRs than the send queue holds takes as many as it holds."""
    with bound_to_target(shared_pool) as (q, remote, conn, stopped):
        def at(offset, length, token=remote.token_value):
            return umq.RemoteBuffer(remote.addr + offset, length, remote.token_id, token)

        first, second = b"\x01" * 64, b"\x02" * 64
        wrs = [
            (umq.UMQ_OPC_WRITE, first, at(0, 64)),
            (umq.UMQ_OPC_WRITE, b"\x00" * 64, at(128, 64, remote.token_value ^ 1)),
            (umq.UMQ_OPC_WRITE, second, at(64, 64)),
            (umq.UMQ_OPC_READ, bytes(128), at(0, 128)),
        ]
        with stopped():
            opcodes, payloads, remotes = (list(column) for column in zip(*wrs))
            assert q.send(payloads, opcode=opcodes, remote=remotes, user_ctx=[0, 1, 2, 3]) == 4
            done = q.poll_until(4, umq.UMQ_IO_TX)
            assert [(c.user_ctx, c.status) for c in done] == [
                (0, umq.UMQ_BUF_SUCCESS),
                (1, umq.UMQ_BUF_REM_ACCESS_ABORT_ERR),
                (2, umq.UMQ_BUF_SUCCESS),
                (3, umq.UMQ_BUF_SUCCESS),
            ]
            assert done[3].data == first + second
            # The send queue holds 16: of 20 WRITEs, 16 go and complete, the rest are refused.
            assert q.send([b"\x03" * 64] * 20, opcode=umq.UMQ_OPC_WRITE, remote=at(192, 64)) == 16
            assert len(q.poll_until(16, umq.UMQ_IO_TX)) == 16
        conn.send("look")
        assert conn.recv() == first + second + BEFORE[128:192] + b"\x03" * 64 + BEFORE[256:]


def test_a_freed_buffer_is_out_of_reach_and_keeps_its_bytes():
    with bound_to_target() as (q, remote, conn, stopped):
        conn.send("free")
        assert conn.recv() == BEFORE
        with stopped():
            both_refused(q, remote)
        conn.send("look")
        assert conn.recv() == BEFORE
