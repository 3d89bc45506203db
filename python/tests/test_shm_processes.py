"""Two processes over shared memory, driven from Python with multiprocessing (spawned, so each
process does its own umq_init): bind info goes over a Pipe, as the reference examples send it
over TCP."""

import hashlib
import multiprocessing as mp
import os
import signal
import time

import pytest

import umq
from conftest import eventually, peer_process

COUNT = 2000


def sender(conn, flow_control):
    with umq.Umq(flow_control=flow_control) as ctx:
        q = ctx.queue("child", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        sent = 0
        while sent < COUNT:
            sent += q.send([f"m{i}".encode() for i in range(sent, min(sent + 8, COUNT))])
            q.poll(umq.UMQ_IO_TX)
        conn.recv()  # the parent has everything


def queue_bound_through(ctx, name, conn, depth=32):
    """A queue of ours bound to the peer at the other end of `conn`, whose bind info comes
    first."""
    q = ctx.queue(name, depth=depth, trans_mode=umq.UMQ_TRANS_MODE_IPC)
    q.bind(conn.recv())
    conn.send(q.bind_info())
    return q


def receive_stream(q, each=lambda got: None):
    """`sender`'s COUNT messages as they arrive on `q`, its receive buffers posted again;
    `each` is told how many have arrived before every poll."""
    q.post_recv(32, size=64)
    got = []
    for _ in range(2_000_000):
        if len(got) >= COUNT:
            break
        each(len(got))
        rx = q.poll(umq.UMQ_IO_RX)
        got += [c.data for c in rx if c.data]
        q.post_recv(len(rx), size=64)
    return got


@pytest.mark.libumq_behaviour
@pytest.mark.parametrize("flow_control", [None, umq.FlowControl(initial_window=8, is_limited=True)], ids=["fc-off", "fc-on"])
def test_stream_between_processes_arrives_in_order(flow_control):
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=sender, args=(child_end, flow_control))
    child.start()
    try:
        with umq.Umq(flow_control=flow_control) as ctx:
            q = queue_bound_through(ctx, "parent", parent_end)
            got = receive_stream(q)
            assert got == [f"m{i}".encode() for i in range(COUNT)]
            if flow_control and umq.lib().has_extensions():
                assert q.ext_stats().rx_without_buffer == 0
            parent_end.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0


SIZES = [64, 1024, 4096, 65536]


# Placement and split messages: what the shm provider does with shared-pool buffers.
shared_memory_path = pytest.mark.skipif(
    os.environ.get("UMQ_PROVIDER") == "fabric",
    reason="a shared-memory path (placement into the peer's buffers)",
)


def placing_sender(conn):
    with umq.Umq(flow_control=umq.FlowControl(initial_window=8)) as ctx:
        q = ctx.queue("child", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.recv()  # the parent's receive buffers are posted
        for i, size in enumerate(SIZES):
            while q.send([bytes([i + 1]) * size]) == 0:
                q.poll(umq.UMQ_IO_TX)
            q.poll_until(1, umq.UMQ_IO_TX)  # each posted alone
        conn.send(q.transport_stats())
        conn.recv()


@pytest.mark.libumq_behaviour
@shared_memory_path
def test_messages_into_shared_pool_buffers_cross_with_one_copy():
    """The package allocates from the queue's shared pool: a message of 1 KiB or more, posted
    alone, is written by the sender straight into the receive buffer; 64 B goes through the
    ring. The transport counters on both sides say so."""
    if not umq.lib().has_extensions():
        pytest.skip("transport counters are a libumq extension")
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=placing_sender, args=(child_end,))
    child.start()
    try:
        with umq.Umq(flow_control=umq.FlowControl(initial_window=8)) as ctx:
            q = queue_bound_through(ctx, "parent", parent_end)
            q.post_recv(16, size=65536)
            parent_end.send("posted")
            got = []
            for _ in range(2_000_000):
                if len(got) == len(SIZES):
                    break
                rx = q.poll(umq.UMQ_IO_RX)
                got += [c.data for c in rx if c.data]
                q.post_recv(len(rx), size=65536)
            assert got == [bytes([i + 1]) * size for i, size in enumerate(SIZES)]
            sent = parent_end.recv()
            placed = sum(SIZES[1:])
            assert (sent.transport, sent.shared_pool) == (umq.UMQ_EXT_TRANSPORT_SHM, 1)
            assert (sent.placed_wr, sent.placed_bytes, sent.by_ref_wr) == (3, placed, 0)
            mine = q.transport_stats()
            assert (mine.transport, mine.placed_rx, mine.placed_wr) == (umq.UMQ_EXT_TRANSPORT_SHM, 3, 0)
            parent_end.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0


SPLIT_SIZES = [32768, 40001, 65536, 131072, 50000, 98304]
SPLIT_COUNT = 240
SPLIT_BATCH = 8


def split_payload(i):
    return hashlib.shake_256(i.to_bytes(4, "little")).digest(SPLIT_SIZES[i % len(SPLIT_SIZES)])


def splitting_sender(conn, shared_pool=True):
    with umq.Umq(flow_control=umq.FlowControl(initial_window=16)) as ctx:
        q = ctx.queue("child", depth=64, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.recv()  # the parent's receive buffers are posted
        sent = done = 0
        while sent < SPLIT_COUNT:
            # Up to the end of the message's block of SPLIT_BATCH, all of one opcode (a post
            # may take only some).
            batch = range(sent, min((sent // SPLIT_BATCH + 1) * SPLIT_BATCH, SPLIT_COUNT))
            # Every other batch as SEND_IMM, its immediate twice the message's number (with flow
            # control, bit 0 of an immediate is the library's).
            imm = [2 * i for i in batch] if (sent // SPLIT_BATCH) % 2 else 0
            opcode = umq.UMQ_OPC_SEND_IMM if imm else umq.UMQ_OPC_SEND
            payloads = [split_payload(i) for i in batch]
            sent += q.send(payloads, opcode=opcode, imm=imm, shared_pool=shared_pool)
            done += len(q.poll(umq.UMQ_IO_TX))
        # A split message completes once the receiver copied its rest: every one does.
        done += len(q.poll_until(SPLIT_COUNT - done, umq.UMQ_IO_TX))
        assert done == SPLIT_COUNT
        conn.send(q.transport_stats())
        conn.recv()


@pytest.mark.libumq_behaviour
@shared_memory_path
@pytest.mark.parametrize("shared_pool", [True, False], ids=["split", "placed_whole"])
def test_a_stream_of_large_messages_is_split_between_the_two_copies_and_arrives_whole(shared_pool):
    """Messages of 32 KiB and more, posted several at a time between buffers of both queues'
    shared pools, are split: the sender writes the first half into the receive buffer and the
    receiver copies the rest out of the sender's pool. Sent from the process pool instead, the
    sender writes them whole and nothing goes by reference. Every byte and immediate arrives,
    in order, and the counters on both sides count how the bytes went."""
    if not umq.lib().has_extensions():
        pytest.skip("transport counters are a libumq extension")
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=splitting_sender, args=(child_end, shared_pool))
    child.start()
    try:
        with umq.Umq(flow_control=umq.FlowControl(initial_window=16)) as ctx:
            q = ctx.queue("parent", depth=64, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(parent_end.recv())
            parent_end.send(q.bind_info())
            q.post_recv(32, size=max(SPLIT_SIZES))
            parent_end.send("posted")
            got = []
            for _ in range(20_000_000):
                if len(got) == SPLIT_COUNT:
                    break
                rx = [c for c in q.poll(umq.UMQ_IO_RX) if c.data]
                got += rx
                q.post_recv(len(rx), size=max(SPLIT_SIZES))
            assert len(got) == SPLIT_COUNT
            for i, c in enumerate(got):
                assert c.data == split_payload(i), f"message {i} ({len(c.data)} bytes) differs"
                batch_is_imm = (i // SPLIT_BATCH) % 2
                assert c.opcode == (umq.UMQ_OPC_SEND_IMM if batch_is_imm else umq.UMQ_OPC_SEND)
                if batch_is_imm:
                    assert c.imm == 2 * i
            sent = parent_end.recv()
            total = sum(len(split_payload(i)) for i in range(SPLIT_COUNT))
            mine = q.transport_stats()
            if shared_pool:
                # Most go split, a head placed and a tail by reference. A message that finds
                # the pair lagging may go whole, placed or (no buffer offered yet, as on a
                # loaded machine) by reference; each byte that crossed with one copy is
                # counted once, by how it went.
                assert sent.by_ref_wr >= SPLIT_COUNT // 2, sent
                assert sent.placed_wr >= SPLIT_COUNT // 2, sent
                assert sent.placed_bytes + sent.by_ref_bytes <= total, sent
                assert sent.by_ref_bytes < sent.placed_bytes + sent.by_ref_bytes, sent
                assert mine.placed_rx >= SPLIT_COUNT // 2, mine
            else:
                # Nothing of the process pool is the receiver's to read: placed whole, or
                # through the ring when no posting was published in time.
                assert sent.by_ref_wr == 0 and sent.by_ref_bytes == 0, sent
                assert sent.placed_wr >= SPLIT_COUNT // 2, sent
                assert sent.placed_bytes <= total, sent
                assert mine.placed_rx == sent.placed_wr, (mine, sent)
            parent_end.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0


def bound_peer(conn):
    with umq.Umq() as ctx:
        q = ctx.queue("child", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.recv()


@pytest.mark.skipif(not umq.lib().has_extensions(), reason="transport counters are a libumq extension")
def test_an_idle_burst_of_shared_pool_memory_goes_back_to_the_system():
    """A burst of 64 buffers of 8 KiB from a queue's shared pool grows it to four chunks (of
    about 64, 128, 256 and 512 KiB); a second after the last is freed the progress thread has
    released all but the first, and a second burst that writes its buffers gets memory back."""
    with peer_process(bound_peer) as (ctx, q, conn):
        burst = ctx.alloc(8000, 64, umqh=q.handle)
        held = q.transport_stats().shared_pool_bytes
        assert held >= 900 << 10
        burst.free()
        eventually(lambda: q.transport_stats().shared_pool_bytes <= 128 << 10, 20)
        again = ctx.alloc(8000, 64, umqh=q.handle)
        for i in range(len(again)):
            again.write(i, bytes([i]) * 8000)
        assert q.transport_stats().shared_pool_bytes >= 512 << 10, "written pages are back"
        again.free()
        conn.send("done")


def victim(conn):
    with umq.Umq() as ctx:
        q = ctx.queue("child", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        with ctx.alloc(64, 1, umqh=q.handle) as target:
            conn.send(q.expose(target))
            conn.recv()  # never comes: the parent stops and kills this process


def idle_peer(conn):
    with umq.Umq() as ctx:
        q = ctx.queue("idle", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.recv()  # never comes: the parent kills this process


@pytest.mark.libumq_behaviour
def test_a_killed_peer_leaves_the_queues_bound_to_another_peer_working():
    """One process bound to two peer processes (over the network all three queues of ours share
    one libfabric endpoint): the one killed puts only its own queue in the error state; the
    other peer's stream keeps arriving, whole and in order, on its queue."""
    ctx_spawn = mp.get_context("spawn")
    (p_idle, c_idle), (p_send, c_send) = mp.Pipe(), mp.Pipe()
    doomed = ctx_spawn.Process(target=idle_peer, args=(c_idle,))
    streaming = ctx_spawn.Process(target=sender, args=(c_send, None))
    doomed.start()
    streaming.start()
    try:
        with umq.Umq() as ctx:
            lost = queue_bound_through(ctx, "lost", p_idle)
            q = queue_bound_through(ctx, "kept", p_send)

            def kill_a_quarter_in(got):
                if got >= COUNT // 4 and doomed.is_alive():
                    os.kill(doomed.pid, signal.SIGKILL)
                    doomed.join(30)

            got = receive_stream(q, kill_a_quarter_in)
            eventually(lambda: lost.state == umq.QUEUE_STATE_ERR)
            assert got == [f"m{i}".encode() for i in range(COUNT)]
            assert q.state != umq.QUEUE_STATE_ERR
            p_send.send("done")
    finally:
        streaming.join(30)
        doomed.join(30)
    assert doomed.exitcode == -signal.SIGKILL and streaming.exitcode == 0


@pytest.mark.libumq_behaviour
def test_a_peer_killed_with_a_write_imm_in_flight_ends_in_error_and_flushes_it():
    """Over whichever transport binds two processes (shm; the network when forced): the peer is
    stopped, so a WRITE_IMM to it stays in flight (its receive completion needs the peer to
    run; a plain WRITE or READ need not, see test_one_sided.py), then killed with SIGKILL. The
    queue must reach the error state on its own, complete the WRITE_IMM with
    UMQ_BUF_WR_FLUSH_ERR, and refuse posts."""
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=victim, args=(child_end,))
    child.start()
    try:
        with umq.Umq() as ctx:
            q = queue_bound_through(ctx, "parent", parent_end, depth=16)
            remote = parent_end.recv()
            os.kill(child.pid, signal.SIGSTOP)  # it runs nothing of ours from here on
            assert q.write(b"late", remote, imm=7) == 1
            assert q.poll(umq.UMQ_IO_TX) == []  # in flight: the peer must run it first
            os.kill(child.pid, signal.SIGKILL)
            eventually(lambda: q.state == umq.QUEUE_STATE_ERR)
            done = q.poll_until(1, umq.UMQ_IO_TX)
            assert [c.status for c in done] == [umq.UMQ_BUF_WR_FLUSH_ERR]
            with pytest.raises(umq.UmqError) as e:
                q.send([b"late"])
            assert e.value.code == -umq.UMQ_ERR_EINVAL
    finally:
        child.join(30)
    assert child.exitcode == -signal.SIGKILL


def watchful(conn):
    """Polls a queue bound to an idle peer for longer than the liveness timeout; reports whether
    the binding stayed up."""
    with umq.Umq() as ctx:
        q = queue_bound_through(ctx, "watchful", conn)
        end = time.monotonic() + 1.5
        while time.monotonic() < end and q.state != umq.QUEUE_STATE_ERR:
            q.poll(umq.UMQ_IO_RX)
        conn.send(q.state != umq.QUEUE_STATE_ERR)
        conn.recv()


@pytest.mark.skipif(os.environ.get("UMQ_PROVIDER") != "fabric", reason="network liveness")
def test_an_idle_peer_process_still_pings_and_is_not_taken_for_gone():
    """Over the network a peer silent for the liveness timeout breaks the binding, so a process
    whose application stays away must still ping its peers: its node plans each ping on its
    call bell. Here the timeout is 400 ms and one process never calls in after bind, while the
    other polls for 1.5 s (the test command also runs this with the sweep at an hour)."""
    spawn = mp.get_context("spawn")
    (a_end, a_child), (b_end, b_child) = mp.Pipe(), mp.Pipe()
    os.environ["UMQ_FABRIC_LIVENESS_MS"] = "400"
    try:
        idle = spawn.Process(target=idle_peer, args=(b_child,))
        busy = spawn.Process(target=watchful, args=(a_child,))
        idle.start()
        busy.start()
    finally:
        del os.environ["UMQ_FABRIC_LIVENESS_MS"]
    try:
        a_end.send(b_end.recv())
        b_end.send(a_end.recv())
        assert a_end.recv(), "the idle peer was taken for gone"
        a_end.send("done")
        busy.join(30)
        assert busy.exitcode == 0
    finally:
        idle.kill()
        idle.join()
        busy.kill()


def away_receiver(conn, flow_control=None, size=64 << 10):
    """Posts receive buffers once bound, then stays away from the library until told to come
    back."""
    with umq.Umq(flow_control=flow_control) as ctx:
        q = queue_bound_through(ctx, "away", conn, depth=16)
        q.post_recv(8, size=size)
        conn.send("posted")
        conn.recv()  # away: only the progress thread runs the library meanwhile
        got = []
        end = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < end:
            got += [c.data for c in q.poll(umq.UMQ_IO_RX) if c.data]
        conn.send(got)
        conn.recv()


def while_the_receiver_is_away(send_all, flow_control=None, size=64 << 10):
    """Binds a queue to an `away_receiver` process; once it has posted and gone away,
    `send_all(q)` sends, checks the completions and returns the payloads, which the receiver,
    back, must then have received."""
    spawn = mp.get_context("spawn")
    parent_end, child_end = mp.Pipe()
    child = spawn.Process(target=away_receiver, args=(child_end, flow_control, size))
    child.start()
    try:
        with umq.Umq(flow_control=flow_control) as ctx:
            q = ctx.queue("sender", depth=16, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            parent_end.send(q.bind_info())
            q.bind(parent_end.recv())
            assert parent_end.recv() == "posted"
            payloads = send_all(q)
            parent_end.send("back")
            assert parent_end.recv() == payloads
            parent_end.send("done")
        child.join(30)
        assert child.exitcode == 0
    finally:
        child.kill()


def test_an_idle_application_s_queue_still_takes_in_what_arrives_so_sends_complete():
    """Messages that complete only once the receiver has taken them in (over shared memory
    large ones from the sender's shared pool, whose rest the receiver copies; over the network
    every one) complete while the receiving application is away: the sender's queue, seeing its
    WRs not move, calls the receiver's progress thread through its call bell, as a NIC would
    land them without the host. The test command also runs this with the sweep at an hour."""

    def send_all(q):
        payloads = [bytes([i + 1]) * (48 << 10) for i in range(4)]
        assert q.send(payloads) == 4
        done = []
        end = time.monotonic() + 10
        while len(done) < 4 and time.monotonic() < end:
            done += q.poll(umq.UMQ_IO_TX)
        assert [c.status for c in done] == [umq.UMQ_BUF_SUCCESS] * 4, "completed while away"
        return payloads

    while_the_receiver_is_away(send_all)


def test_an_idle_receiver_s_credit_reaches_the_sender_while_it_is_away():
    """Credit for receive buffers posted after bind reaches the sender while the receiving
    application is away: over shared memory the sender reads the receiver's area itself, over
    the network the receive post writes it to the sender at once when the sender has used all
    it knew of (else it waited for the progress engine's sweep). The test command also runs
    this with the sweep at an hour."""

    def send_all(q):
        payloads = [bytes([i + 1]) * 64 for i in range(4)]
        sent, done = 0, []
        end = time.monotonic() + 10
        while len(done) < 4 and time.monotonic() < end:
            sent += q.send(payloads[sent:])
            done += q.poll(umq.UMQ_IO_TX)
        assert sent == 4, "no credit reached the sender while the receiver was away"
        assert [c.status for c in done] == [umq.UMQ_BUF_SUCCESS] * 4
        return payloads

    flow = umq.FlowControl(initial_window=8, is_limited=True)
    while_the_receiver_is_away(send_all, flow_control=flow, size=64)


FLOOD_COUNT = 1024
FLOOD_SIZE = 64 << 10


def flood_payload(i):
    return i.to_bytes(4, "little") * (FLOOD_SIZE // 4)


def flooding_sender(conn):
    """Sends FLOOD_COUNT messages of 64 KiB, without flow control, to a receiver that posts no
    buffer until told: reports how many had completed when nothing moved for a while, then
    sends the rest."""
    with umq.Umq() as ctx:
        q = ctx.queue("child", depth=256, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        sent = done = 0
        quiet_since = time.monotonic()
        while time.monotonic() - quiet_since < 0.5 and done < FLOOD_COUNT:
            took = q.send([flood_payload(i) for i in range(sent, min(sent + 8, FLOOD_COUNT))])
            came = len(q.poll(umq.UMQ_IO_TX))
            sent, done = sent + took, done + came
            if took or came:
                quiet_since = time.monotonic()
        conn.send(done)
        conn.recv()  # the receiver posts its buffers now
        while done < FLOOD_COUNT:
            sent += q.send([flood_payload(i) for i in range(sent, min(sent + 8, FLOOD_COUNT))])
            done += len(q.poll(umq.UMQ_IO_TX))
        conn.recv()


def test_a_receiver_without_buffers_holds_up_its_sender_and_not_its_memory():
    """Flow control off, a receiver that posts no receive buffer holds up its sender: over
    shared memory the ring fills, over the network the receiver's inbox reaches the allowance
    its sender keeps to (`transport/fabric/allowance.rs`). The sender's SENDs stop completing
    after a few MiB of the 64 MiB it has to send, where over the network they had all gone
    into the receiver's memory. Once the receiver posts buffers, every message arrives, whole
    and in order."""
    with peer_process(flooding_sender, depth=256) as (_, q, conn):
        completed = conn.recv()
        assert completed * FLOOD_SIZE <= 16 << 20, f"{completed} SENDs of 64 KiB went"
        conn.send("posting")
        q.post_recv(256, size=FLOOD_SIZE)
        got = 0
        for _ in range(20_000_000):
            if got == FLOOD_COUNT:
                break
            rx = q.poll(umq.UMQ_IO_RX)
            for c in rx:
                assert c.status == umq.UMQ_BUF_SUCCESS
                assert c.data == flood_payload(got), f"message {got} differs"
                got += 1
            q.post_recv(len(rx), size=FLOOD_SIZE)
        assert got == FLOOD_COUNT
        conn.send("done")
