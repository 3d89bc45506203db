"""fork() after umq_init: a child made by fork has none of the parent's library state
(docs/USER_GUIDE.md, "Processes that fork"). The parent's queues, bound in-process, over shared
memory or over the network, stay the parent's alone: the child's calls on them are refused and
its teardown touches nothing of them. The child may umq_init and make queues of its own, and
bind them to its parent, as a server that forks its workers does."""

import ctypes as C
import multiprocessing as mp
import os

import pytest

import umq

pytestmark = pytest.mark.libumq_behaviour

EINVAL = -umq.UMQ_ERR_EINVAL
# The UCX engine cannot run in a child of a process that used it (UCX does not support fork).
UCX_IN_PARENT = (os.environ.get("UMQ_PROVIDER") == "fabric"
                 and os.environ.get("UMQ_FABRIC_PROVIDER") == "ucx")


def in_child(work):
    """Runs `work()` in a child made by fork; returns the child's exit code (0: `work`
    returned) and what it returned, or the exception it raised, as text. The child always ends
    in os._exit, so nothing of the test runner runs on in it."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            said = repr(work())
            code = 0
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            said = repr(e)
        finally:
            os.write(w, said.encode())
            os._exit(code)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        said = f.read().decode()
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), said


def ping_pong(a, b, n, tag):
    """`n` messages from `a` to `b`, each checked as it arrives and its buffer posted again."""
    for i in range(n):
        msg = b"%s-%d" % (tag, i)
        assert a.send([msg]) == 1
        got = b.poll_until(1, umq.UMQ_IO_RX)
        assert [c.data for c in got] == [msg]
        b.post_recv(1)
        assert len(a.poll_until(1, umq.UMQ_IO_TX)) == 1


def working_pair(ctx):
    """A pair with receive buffers posted that has moved three messages."""
    a, b = ctx.pair()
    a.post_recv(8)
    b.post_recv(8)
    ping_pong(a, b, 3, b"before")
    return a, b


def test_the_parents_queues_are_refused_in_the_child_and_its_teardown_leaves_them_working():
    with umq.Umq() as ctx:
        a, b = working_pair(ctx)
        forged = umq.Buffers.for_payloads(ctx, [b"from the child"])
        shared = umq.Buffers.for_payloads(ctx, [b"a's shared pool"], a.handle)
        lib = ctx.lib

        def child():
            bad = umq.core.BUF()
            head = forged.chain()
            posted = lib.umq_post(a.handle, head, a.io(umq.UMQ_IO_TX), C.byref(bad))
            kept = C.cast(bad, C.c_void_p).value == C.cast(head, C.c_void_p).value
            destroyed = lib.umq_destroy(b.handle)
            ctx.__exit__(None, None, None)  # the parent's context, as a `with` block ends
            lib.umq_uninit()
            with umq.Umq():  # the child's own library knows none of the parent's buffers
                lib.umq_buf_free(shared.chain())
                lib.umq_buf_free(forged.chain())
            return posted, kept, destroyed

        code, said = in_child(child)
        assert (code, said) == (0, repr((EINVAL, True, EINVAL)))
        # Nothing of the child's reached the peer; both queues carry on.
        ping_pong(a, b, 3, b"after")
        ping_pong(b, a, 3, b"back")
        assert a.state == b.state == umq.State.QUEUE_STATE_READY
        # The buffers the child freed are still the parent's, bytes and all.
        assert forged.read(0) == b"from the child"
        assert a.post(shared) == 0
        assert [c.data for c in b.poll_until(1, umq.UMQ_IO_RX)] == [b"a's shared pool"]
        forged.free()


def heard(conn):
    """What the child sent next; fails instead of waiting for a child that died."""
    assert conn.poll(30), "the child said nothing in 30 s"
    return conn.recv()


def echo(conn, count):
    """The child's side: a context of its own, a queue bound to the parent's, and `count`
    messages sent back as they come."""
    try:
        ctx = umq.Umq().__enter__()
    except umq.UmqError as e:
        conn.send(repr(e))  # the parent fails at once instead of waiting
        raise
    try:
        q = ctx.queue("child", depth=16)
        conn.send(q.bind_info())
        try:
            q.bind(conn.recv())
        except umq.UmqError as e:
            conn.send(str(e))
            return
        conn.send("bound")
        q.post_recv(16)
        for _ in range(count):
            got = q.poll_until(1, umq.UMQ_IO_RX)
            q.post_recv(1)
            assert q.send([got[0].data]) == 1
            q.poll_until(1, umq.UMQ_IO_TX)
        conn.recv()  # the parent has every echo
    finally:
        ctx.__exit__(None, None, None)


def test_a_child_inits_afresh_and_binds_a_queue_of_its_own_to_its_parent():
    with umq.Umq() as ctx:
        a, b = working_pair(ctx)
        parent_end, child_end = mp.Pipe()
        child = mp.get_context("fork").Process(target=echo, args=(child_end, 50))
        child.start()
        try:
            p = ctx.queue("parent", depth=16)
            info = heard(parent_end)
            if UCX_IN_PARENT:
                # The child could open no network endpoint: both binds are refused.
                with pytest.raises(umq.UmqError, match="UMQ_ERR_EINVAL"):
                    p.bind(info)
                parent_end.send(p.bind_info())
                assert "UMQ_ERR_EINVAL" in heard(parent_end)
            else:
                echoed_by(p, info, parent_end)
        finally:
            child.join(30)
        assert child.exitcode == 0
        # The child's exit (its own context ended, then the parent's inherited one) leaves
        # the parent's first pair as it was.
        ping_pong(a, b, 3, b"after")


def echoed_by(p, info, conn):
    """The parent's side of `echo`: bound, then 50 messages, each back before the next."""
    p.bind(info)
    conn.send(p.bind_info())
    assert heard(conn) == "bound"
    p.post_recv(16)
    for i in range(50):
        msg = b"to the child %d" % i
        assert p.send([msg]) == 1
        got = p.poll_until(1, umq.UMQ_IO_RX)
        assert [c.data for c in got] == [msg]
        p.post_recv(1)
        p.poll_until(1, umq.UMQ_IO_TX)
    conn.send("done")


def paced_stream(a, b, count, size=16384):
    """`count` messages of `size` bytes from `a`, rate-limited to 8 MiB/s (the progress
    thread's pacing engine releases them), all received by `b` in order."""
    a.set_rate(8 * 8 * 1024 * 1024)
    b.post_recv(64, size=size)
    sent, got = 0, []
    payloads = [bytes([i % 251]) * size for i in range(count)]
    for _ in range(5_000_000):
        if len(got) == count:
            break
        if sent < count:
            sent += a.send(payloads[sent:sent + 8])
        a.poll(umq.UMQ_IO_TX)
        rx = b.poll(umq.UMQ_IO_RX)
        got += [c.data for c in rx]
        b.post_recv(len(rx), size=size)
    assert got == payloads


def test_a_child_runs_paced_and_interrupt_queues_of_its_own_while_the_parents_engine_ran():
    """The parent forks with a paced stream under way, so its progress thread and pacing
    engine are busy: the child has neither, and starts its own for its own queues."""
    with umq.Umq() as ctx:
        a, b = ctx.pair(depth=64)
        a.set_rate(1024 * 1024)  # 128 KiB/s: a backlog still paced as the child runs
        b.post_recv(64, size=16384)
        assert a.send([b"%d" % i * 4096 for i in range(16)]) == 16

        def child():
            if UCX_IN_PARENT:
                os.environ["UMQ_FABRIC_PROVIDER"] = "tcp"  # what the refusal advises
            with umq.Umq() as mine:
                x, y = mine.pair(depth=64)
                paced_stream(x, y, 32)
                i, j = mine.pair(depth=8, mode=umq.UMQ_MODE_INTERRUPT)
                j.post_recv(4)
                j.rearm(umq.UMQ_IO_RX)
                i.send([b"wake"])
                woken = j.wait(5000, umq.UMQ_IO_RX)
                j.ack(woken, umq.UMQ_IO_RX)
                return woken, [c.data for c in j.poll(umq.UMQ_IO_RX)]

        assert in_child(child) == (0, repr((1, [b"wake"])))
        got = []
        for _ in range(5_000_000):
            if len(got) == 16:
                break
            a.poll(umq.UMQ_IO_TX)
            got += [c.data for c in b.poll(umq.UMQ_IO_RX)]
        assert got == [b"%d" % i * 4096 for i in range(16)], "the parent's stream, whole"
