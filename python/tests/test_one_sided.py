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


def test_a_freed_buffer_is_out_of_reach_and_keeps_its_bytes():
    with bound_to_target() as (q, remote, conn, stopped):
        conn.send("free")
        assert conn.recv() == BEFORE
        with stopped():
            both_refused(q, remote)
        conn.send("look")
        assert conn.recv() == BEFORE
