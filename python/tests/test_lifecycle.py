"""init / uninit, create, bind info, bind, unbind, destroy, state; stale and forged handles."""

import ctypes as C
import os

import pytest

import umq
from conftest import eventually

FORGED = 0x1234_5678_9ABC_DEF0


def test_second_init_is_eexist_and_reinit_after_uninit_works():
    lib = umq.lib()
    with umq.Umq() as ctx:
        assert lib.umq_init(C.byref(ctx.cfg)) == -umq.UMQ_ERR_EEXIST
    with umq.Umq() as ctx:  # a fresh runtime after uninit
        a, b = ctx.pair()
        assert a.state == umq.QUEUE_STATE_READY


def blocked_signals(thread_name):
    """The signal numbers a thread of this process named `thread_name` blocks (None: no such
    thread, or it has not named itself yet)."""
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                if f.read().strip() != thread_name:
                    continue
            with open(f"/proc/self/task/{tid}/status") as f:
                mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigBlk:"))
        except FileNotFoundError:  # a thread that ended meanwhile
            continue
        return {n for n in range(1, 65) if mask >> (n - 1) & 1}
    return None


@pytest.mark.libumq_behaviour
def test_the_progress_thread_takes_no_signal_meant_for_the_application():
    """A signal the application blocks in its own threads (to read it from a signalfd, or to
    leave it to one thread) is never delivered to the library's thread, where its default
    action would end the process; faults stay unblocked, so a crash is still reported."""
    import signal
    with umq.Umq() as ctx:
        a, _ = ctx.pair()
        a.set_rate(1 << 30)  # a limited queue: the progress thread serves its pacing
        eventually(lambda: blocked_signals("umq-progress") is not None)
        blocked = blocked_signals("umq-progress")
    assert {signal.SIGTERM, signal.SIGINT, signal.SIGALRM, signal.SIGCHLD, signal.SIGUSR1} <= blocked
    assert not {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL} & blocked


def test_init_rejects_unknown_features_and_null():
    lib = umq.lib()
    assert lib.umq_init(None) == -umq.UMQ_ERR_EINVAL
    with pytest.raises(umq.UmqError) as e:
        with umq.Umq(extra_features=1 << 30):
            pass
    assert (e.value.code, e.value.name) == (-umq.UMQ_ERR_EINVAL, "UMQ_ERR_EINVAL")


def test_state_idle_then_ready_then_unbound(ctx):
    a, b = ctx.queue("a"), ctx.queue("b")
    assert (a.state, b.state) == (umq.QUEUE_STATE_IDLE, umq.QUEUE_STATE_IDLE)
    a.bind(b.bind_info())
    b.bind(a.bind_info())
    assert (a.state, b.state) == (umq.QUEUE_STATE_READY, umq.QUEUE_STATE_READY)
    a.unbind()
    assert a.state == umq.QUEUE_STATE_IDLE


def test_bind_info_is_validated(ctx):
    a, b = ctx.queue("a"), ctx.queue("b")
    info = b.bind_info()
    for bad in (b"garbage" * 8, info[:20], b""):
        with pytest.raises(umq.UmqError) as e:
            a.bind(bad)
        assert e.value.code == -umq.UMQ_ERR_EINVAL
    flipped = bytearray(info)
    flipped[20] ^= 0x40  # inside the checksummed part
    with pytest.raises(umq.UmqError):
        a.bind(bytes(flipped))
    assert a.state == umq.QUEUE_STATE_IDLE
    a.bind(info)  # the genuine one still works
    with pytest.raises(umq.UmqError) as e:
        a.bind(info)
    assert e.value.code == -umq.UMQ_ERR_EEXIST


def test_stale_and_forged_handles_are_einval(ctx):
    lib = umq.lib()
    q = ctx.queue("gone")
    stale = q.handle
    q.destroy()
    for h in (stale, FORGED, 0):
        assert lib.umq_destroy(h) == -umq.UMQ_ERR_EINVAL
        assert lib.umq_unbind(h) == -umq.UMQ_ERR_EINVAL
        C.set_errno(0)
        assert lib.umq_state_get(h) == umq.QUEUE_STATE_MAX
        assert C.get_errno() == umq.UMQ_ERR_EINVAL
        C.set_errno(0)
        assert lib.umq_bind_info_get(h, (C.c_uint8 * 512)(), 512) == 0
        assert C.get_errno() == umq.UMQ_ERR_EINVAL


def test_create_rejects_bad_options(ctx):
    lib = umq.lib()
    C.set_errno(0)
    assert lib.umq_create(None) == 0
    assert C.get_errno() == umq.UMQ_ERR_EINVAL
    with pytest.raises(umq.UmqError) as e:
        ctx.queue("q", mode=umq.UMQ_MODE_MAX)
    assert e.value.code == -umq.UMQ_ERR_EINVAL


def test_a_buffer_size_of_zero_is_the_default_and_one_past_the_largest_is_refused():
    """The reference takes rx_buf_size 0 as it is (buffers that hold nothing; its perftest's
    `-s 0` creates such queues); ours get the default size, so a base-API pair still carries
    a message of any size."""
    with umq.Umq(pro=False) as base:
        a, b = base.pair(depth=8, rx_buf_size=0, tx_buf_size=0)
        a.enqueue(b"y" * 5000)
        got = []
        eventually(lambda: (m := b.dequeue()) is not None and got.append(m) is None)
        assert got == [b"y" * 5000]
        with pytest.raises(umq.UmqError) as e:
            base.queue("big", rx_buf_size=umq.UMQ_MAX_BUF_REQUEST_SIZE + 1)
        assert e.value.code == -umq.UMQ_ERR_EINVAL


def test_bind_info_size_too_small(ctx):
    lib = umq.lib()
    q = ctx.queue("q")
    C.set_errno(0)
    assert lib.umq_bind_info_get(q.handle, (C.c_uint8 * 8)(), 8) == 0
    assert C.get_errno() != 0


def test_ipc_mode_and_ub_mode_queues_bind(ctx):
    for mode in (umq.UMQ_TRANS_MODE_IPC, umq.UMQ_TRANS_MODE_UB, umq.UMQ_TRANS_MODE_IB):
        a = ctx.queue("a", trans_mode=mode)
        b = ctx.queue("b", trans_mode=mode)
        a.bind(b.bind_info())
        b.bind(a.bind_info())
        b.post_recv(1)
        assert a.send([b"x"]) == 1
        assert [c.data for c in b.poll_until(1, umq.UMQ_IO_RX)] == [b"x"]
        a.destroy()
        b.destroy()


def _open_fds():
    return set(os.listdir("/proc/self/fd"))


def _threads():
    return len(os.listdir("/proc/self/task"))


@pytest.mark.libumq_behaviour
def test_bindings_leave_no_fds_or_threads_behind():
    """Whatever the provider (the suite runs again with shm and the network forced): pairs made,
    used, unbound and destroyed, then umq_uninit, leave the process with the fds and threads it
    had (endpoints, inboxes, pidfds, doorbells and the progress thread all go)."""
    with umq.Umq() as warm:  # the first init loads what stays loaded (libfabric, ...)
        warm.pair(depth=8)
    fds, threads = _open_fds(), _threads()
    for _ in range(3):
        with umq.Umq() as ctx:
            for _ in range(3):
                a, b = ctx.pair(depth=8)
                b.post_recv(2)
                assert a.send([b"x", b"y"]) == 2
                assert len(b.poll_until(2, umq.UMQ_IO_RX)) == 2
                a.unbind()
                a.destroy()
                b.destroy()
    eventually(lambda: _open_fds() <= fds and _threads() <= threads)


def _shared_pool_mappings():
    with open("/proc/self/maps") as f:
        return sum("umq-shared-pool" in line for line in f)


def test_uninit_takes_the_memory_of_buffers_the_application_still_held():
    """umq_uninit makes the buffers the application still holds invalid, and their memory goes
    back to the system: a program that inits, allocates from its queues' pools and uninits over
    and over does not grow (a queue's pool of several chunks once outlived it for good)."""
    before = _shared_pool_mappings()
    for _ in range(3):
        with umq.Umq() as ctx:
            a = ctx.queue("a", depth=8)  # not bound yet: its buffers come from its own pool
            held = [ctx.alloc(8192, 64, umqh=a.handle) for _ in range(3)]
            assert _shared_pool_mappings() > before
            for bufs in held:
                bufs.detach()  # never freed: uninit takes them
    assert _shared_pool_mappings() == before
