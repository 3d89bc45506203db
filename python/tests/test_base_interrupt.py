"""Base API (enqueue / dequeue / notify), interrupt mode, async events and logging."""

import ctypes as C
import select

import pytest

import umq
from conftest import eventually, expected_transport

RX, TX = umq.UMQ_IO_RX, umq.UMQ_IO_TX


def dequeue_all(q, want, spins=100_000):
    got = []
    for _ in range(spins):
        if len(got) == want:
            break
        m = q.dequeue()
        if m is not None:
            got.append(m)
    return got


@pytest.fixture
def base():
    with umq.Umq(pro=False) as c:
        yield c


def test_base_api_roundtrip_in_order(base):
    a, b = base.pair(depth=32)
    msgs = [f"msg-{i}".encode() * (i % 5 + 1) for i in range(200)]
    got = []
    for i, m in enumerate(msgs):
        a.enqueue(m)
        if i % 10 == 9:
            got += dequeue_all(b, 10)
            a.notify()
    assert got == msgs
    assert b.dequeue() is None


@pytest.mark.parametrize("trans_mode", [umq.UMQ_TRANS_MODE_UB, umq.UMQ_TRANS_MODE_IPC], ids=["ub", "ipc"])
@pytest.mark.parametrize(
    "msgs",
    [[b"first", b"x" * 3000, b"third", b"fourth"], [b"one", b"two", b"three", b"four"]],
    ids=["fragmented", "small"],
)
def test_the_messages_waiting_come_out_of_one_dequeue_as_one_list(base, trans_mode, msgs):
    """As the reference's UB transport returns them: one list, each message its head's
    total_data_size bytes (the 3000-byte one in three 1 KiB buffers), the next message after
    its last buffer. Its IPC transport returns one message a call, and so do we in IPC mode.
    Queue.dequeue hands them out one by one either way. Small messages, each of which the
    one-message receive path could take alone, come out together all the same."""
    a, b = base.pair(depth=32, rx_buf_size=1024, trans_mode=trans_mode)
    for m in msgs:
        a.enqueue(m)
    lib, per_call, got = umq.lib(), [], []

    def take():
        head = lib.umq_dequeue(b.handle)
        if head:
            listed = umq.core.read_messages(umq.core._addr(head))
            lib.umq_buf_free(head)
            per_call.append(len(listed))
            got.extend(listed)
        return len(got) == len(msgs)

    eventually(take)
    assert got == msgs
    if trans_mode == umq.UMQ_TRANS_MODE_IPC:
        assert per_call == [1, 1, 1, 1]
    elif expected_transport() != umq.UMQ_EXT_TRANSPORT_FABRIC:
        assert per_call == [4]  # in-process and shared memory: all four there at the first call
    assert b.dequeue() is None
    for m in msgs:
        a.enqueue(m)
    assert dequeue_all(b, len(msgs)) == msgs


def test_base_api_large_message_is_reassembled(base):
    a, b = base.pair(depth=16)
    big = bytes(range(256)) * 150  # 38400 bytes: fragmented across receive buffers
    a.enqueue(big)
    assert dequeue_all(b, 1) == [big]


def test_a_base_api_message_of_the_largest_size_arrives_whole(base):
    """A message of UMQ_MAX_BUF_REQUEST_SIZE (10 MiB, the most the base API enqueues), of
    two buffers, arrives whole across ten of the receiver's 1 MiB buffers; one byte more is
    refused. Over the network it travels as 160 fragments, put together aside (at most the
    longest buffer of the pool, docs/RELIABILITY.md, "A peer's claimed length")."""
    a, b = base.pair(depth=32, rx_buf_size=1 << 20)
    n = umq.UMQ_MAX_BUF_REQUEST_SIZE
    data = (bytes(range(251)) * (n // 251 + 1))[: n + 1]
    bad = umq.core.BUF()
    for size in (n + 1, n):
        bufs = umq.core.Buffers.alloc(base, 6 << 20, 2)
        bufs.messages = [sum(bufs.messages, [])]  # one message of the two buffers
        bufs.write(0, data[:size])
        rc = base.lib.umq_enqueue(a.handle, bufs.chain(), C.byref(bad))
        if size > n:
            assert rc == -umq.UMQ_ERR_EINVAL
            bufs.free()
            continue
        assert rc == 0
        bufs.detach()
    got = []

    def arrived():
        a.dequeue()  # the sender's side of the base API: its sent buffers freed
        m = b.dequeue()
        if m is not None:
            got.append(m)
        return got

    eventually(arrived, seconds=30)
    assert len(got[0]) == n and got[0] == data[:n]
    assert b.dequeue() is None


def test_an_empty_dequeue_leaves_errno_as_the_caller_had_it(base):
    # Base-API loops test errno after a NULL dequeue. Right after the bind, a dequeue's round
    # may bring the pair's connection up (over the network, with system calls that fail on the
    # way and set errno): the caller's errno must come back all the same.
    a, b = base.pair(depth=8)
    lib = umq.lib()
    for sentinel in [0, 4242] * 100:
        for q in (a, b):
            C.set_errno(sentinel)
            assert not lib.umq_dequeue(q.handle)
            assert C.get_errno() == sentinel
    a.enqueue(b"after")
    assert dequeue_all(b, 1) == [b"after"]


def test_enqueue_bad_input(base):
    a, _ = base.pair(depth=8)
    lib = umq.lib()
    bad = umq.core.BUF()
    assert lib.umq_enqueue(a.handle, None, C.byref(bad)) == -umq.UMQ_ERR_EINVAL
    C.set_errno(0)
    assert not lib.umq_dequeue(0xBAD)
    with umq.Buffers.for_payloads(base, [b"k"], a.handle) as bufs:
        assert lib.umq_enqueue(0xBAD, bufs.chain(), C.byref(bad)) == -umq.UMQ_ERR_EINVAL
        assert bufs.read(0) == b"k"


def test_interrupt_wait_timeout_then_event(ctx):
    a, b = ctx.pair(depth=16, mode=umq.UMQ_MODE_INTERRUPT)
    fd = b.interrupt_fd(RX)
    assert fd >= 0
    b.post_recv(4)
    b.rearm(RX)
    assert b.wait(0, RX) == 0  # nothing yet: immediate timeout
    assert select.select([fd], [], [], 0)[0] == []
    a.send([b"wake"])
    assert select.select([fd], [], [], 5)[0] == [fd]  # the fd is pollable
    n = b.wait(1000, RX)
    assert n >= 1
    b.ack(n, RX)
    assert [c.data for c in b.poll(RX)] == [b"wake"]


def test_megabyte_messages_flow_between_two_sleeping_sides(ctx):
    """Both sides sleep in umq_wait_interrupt: a sender for its sends' completions, a receiver
    for its messages. Every 1 MiB message arrives whole and in order. Over the network a
    message is longer than the 64 KiB a connection's socket keeps unsent, so its rest goes out
    only as the kernel drains the socket: the sleeping sender's wait fd must bring it back to
    write it."""
    import threading
    count, size, window = 48, 1 << 20, 4
    a, b = ctx.pair(depth=8, mode=umq.UMQ_MODE_INTERRUPT)
    assert b.post_recv(window, size=size) == window
    got = []

    def sleep_until(q, direction):
        done = q.poll(direction)
        if not done:
            q.rearm(direction)
            done = q.poll(direction)
        if not done:
            n = q.wait(5000, direction)
            assert n > 0, f"no wake-up within 5 s ({len(got)} received)"
            q.ack(n, direction)
        return done

    def receive():
        while len(got) < count:
            done = sleep_until(b, RX)
            got.extend(c.data for c in done)
            if done:
                assert b.post_recv(len(done), size=size) == len(done)

    receiver = threading.Thread(target=receive)
    receiver.start()
    sent = in_flight = 0
    while sent < count or in_flight:
        if sent < count and in_flight < window:
            taken = a.send([bytes([sent]) * size])
            sent, in_flight = sent + taken, in_flight + taken
            if taken:
                continue
        in_flight -= len(sleep_until(a, TX))
    receiver.join(30)
    assert not receiver.is_alive()
    assert [len(m) for m in got] == [size] * count
    assert [(m[0], m[-1]) for m in got] == [(i, i) for i in range(count)]


def test_interrupt_options_need_a_direction(ctx):
    a, _ = ctx.pair(depth=8, mode=umq.UMQ_MODE_INTERRUPT)
    lib = umq.lib()
    no_dir = ctx.types.umq_interrupt_option_t(flag=0, direction=RX)
    C.set_errno(0)
    assert lib.umq_interrupt_fd_get(a.handle, C.byref(no_dir)) == umq.UMQ_INVALID_FD
    assert C.get_errno() == umq.UMQ_ERR_EINVAL
    assert lib.umq_rearm_interrupt(a.handle, False, C.byref(no_dir)) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_wait_interrupt(a.handle, 0, C.byref(no_dir)) < 0
    assert lib.umq_interrupt_fd_get(a.handle, None) == umq.UMQ_INVALID_FD


def test_interrupt_calls_on_a_polling_queue_fail(pair):
    a, _ = pair
    with pytest.raises(umq.UmqError) as e:
        a.interrupt_fd(RX)
    assert e.value.code == -umq.UMQ_ERR_EINVAL


def test_async_event_fd_and_empty_queue(ctx):
    lib = umq.lib()
    ti = ctx.cfg.trans_info[0]
    fd = lib.umq_async_event_fd_get(C.byref(ti))
    assert fd >= 0
    assert select.select([fd], [], [], 0)[0] == []
    ev = ctx.types.umq_async_event_t()
    assert lib.umq_get_async_event(C.byref(ti), C.byref(ev)) < 0  # nothing pending
    assert lib.umq_async_event_fd_get(None) < 0


def test_log_config_roundtrip_and_callback(ctx):
    lib = umq.lib()
    lines = []
    cb = umq.types.umq_log_func_t(lambda level, msg: lines.append((level, msg)))
    cfg = ctx.types.umq_log_config_t(log_flag=umq.UMQ_LOG_FLAG_FUNC | umq.UMQ_LOG_FLAG_LEVEL, func=cb,
                                     level=umq.UMQ_LOG_LEVEL_INFO)
    assert lib.umq_log_config_set(C.byref(cfg)) == 0
    assert ctx.log_config().level == umq.UMQ_LOG_LEVEL_INFO
    lib.umq_destroy(0xBAD)  # logs an error
    assert any(level == umq.UMQ_LOG_LEVEL_ERR and b"stale" in msg for level, msg in lines), lines
    bad = ctx.types.umq_log_config_t(log_flag=umq.UMQ_LOG_FLAG_LEVEL, level=umq.UMQ_LOG_LEVEL_MAX)
    assert lib.umq_log_config_set(C.byref(bad)) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_log_config_set(None) == -umq.UMQ_ERR_EINVAL
    lib.umq_log_config_set(C.byref(ctx.types.umq_log_config_t(log_flag=umq.UMQ_LOG_FLAG_FUNC)))
