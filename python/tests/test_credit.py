"""The July 2026 revision's flow control seen from Python (docs/FLOW_CONTROL.md, "Credit
requests"): a sender holds no credit until it asks, the receiver answers from its posted
buffers, each answer shows as an update buffer, idle credit goes back, and a request the peer
never answers fails the sender's posts after fc_req_timeout_ms."""

import multiprocessing as mp
import os
import signal
import time

import pytest

import umq
from conftest import eventually

pytestmark = pytest.mark.july

RX, TX = umq.UMQ_IO_RX, umq.UMQ_IO_TX
LIMITED = umq.FlowControl(initial_window=4, is_limited=True, timeout_ms=60_000)


def send_all(a, payloads, b=None, got=None):
    """Sends every payload in order, retrying what EAGAIN refused; with `b`, takes in what it
    received (into `got`) and posts its buffers again between tries."""
    sent = 0
    for _ in range(100_000):
        if sent == len(payloads):
            return
        sent += a.send(payloads[sent : sent + 8])
        a.poll(TX)
        if b is not None:
            rx = b.poll(RX)
            got += [c.data for c in rx if c.data]
            b.post_recv(len(rx), size=64)
    raise AssertionError(f"sent {sent} of {len(payloads)}")


def test_a_send_without_credit_asks_and_the_answer_lets_the_next_go():
    with umq.Umq(flow_control=LIMITED) as ctx:
        a, b = ctx.pair(depth=16)
        assert a.state == umq.QUEUE_STATE_READY, "no initial window to wait for"
        assert a.send([b"m0"]) == 0, "nothing posted at b: EAGAIN, and the request went"
        b.post_recv(8)  # answers the parked request
        updates = []
        eventually(lambda: (updates.extend(a.poll(RX)), updates)[1])
        # The answer's 4; over a link b may also have offered 4 first, if its post came before
        # it took the request in (an offer shows no update buffer).
        assert a.stats().remote_rx_window in (4, 8)
        assert [u.status for u in updates] == [umq.UMQ_FAKE_BUF_FC_UPDATE]
        assert updates[0].data == b"" and updates[0].is_update
        assert a.send([b"m0", b"m1"]) == 2
        got = []
        eventually(lambda: (got.extend(c.data for c in b.poll(RX)), len(got) == 2)[1])
        assert got == [b"m0", b"m1"]
        s = b.stats()
        assert s.local_rx_posted == 8 - s.total_local_rx_notified, "posted less granted"
        assert s.total_local_rx_notified == a.stats().total_remote_rx_received


def test_the_first_credit_is_offered_once_the_receiver_posts():
    """Not in the reference, which grants nothing unasked: its own example sends once, after
    the receiver posted, and fails on EAGAIN there. An offer shows no update buffer (the
    example would take one for the reply it waits for)."""
    with umq.Umq(flow_control=LIMITED) as ctx:
        a, b = ctx.pair(depth=16)
        b.post_recv(8)
        eventually(lambda: a.stats().remote_rx_window == 4)
        assert a.send([b"m0"]) == 1
        assert a.poll(RX) == [], "an offer is no answer: no update buffer"


def test_a_stream_gets_credit_over_and_over_and_arrives_in_order():
    """Requests grow while grants come in full; no message ever waits for a buffer, since a
    limited pool grants only posted buffers."""
    with umq.Umq(flow_control=LIMITED) as ctx:
        a, b = ctx.pair(depth=16)
        b.post_recv(16, size=64)
        got = []
        want = [b"m%d" % i for i in range(600)]
        send_all(a, want, b, got)
        eventually(lambda: (got.extend(c.data for c in b.poll(RX) if c.data), len(got) == 600)[1])
        assert got == want
        # An answer may still be on its way to a (a network's round trip): a's polls take it.
        eventually(
            lambda: (a.poll(RX), a.stats().total_remote_rx_received)[1]
            == b.stats().total_local_rx_notified
        )
        assert a.stats().total_remote_rx_consumed == 600
        if umq.lib().has_extensions():
            assert b.ext_stats().rx_without_buffer == 0


def test_updates_the_sender_never_polls_hold_nothing_back():
    """The answers' update buffers are made only when the sender polls its receive side; one
    that never does still gets all the credit it asks for (the reference's control completions
    once filled its control queue when nobody reaped them)."""
    with umq.Umq(flow_control=LIMITED) as ctx:
        a, b = ctx.pair(depth=8)
        b.post_recv(8, size=64)
        got = []
        sent = 0
        for _ in range(100_000):
            if sent == 2000:
                break
            sent += a.send([b"x"] * min(4, 2000 - sent))
            a.poll(TX)
            rx = b.poll(RX)
            got += rx
            b.post_recv(len(rx), size=64)
        assert sent == 2000
        eventually(lambda: (got.extend(b.poll(RX)), len(got) == 2000)[1])
        updates = a.poll(RX)
        assert updates and all(u.is_update for u in updates)


def test_idle_credit_goes_back_to_the_receiver():
    # 200 ms: long beside what the reads below take, so none of them races the first return.
    fc = umq.FlowControl(initial_window=8, is_limited=True, timeout_ms=200)
    with umq.Umq(flow_control=fc) as ctx:
        a, b = ctx.pair(depth=16)
        b.post_recv(16, size=64)
        eventually(lambda: a.send([b"m0"]) == 1)  # on the credit b offered, or asked for
        # Quiet: every grant (an offer, and an answer if a asked first) has reached a.
        eventually(
            lambda: (a.poll(RX), a.stats().total_remote_rx_received)[1]
            == b.stats().total_local_rx_notified
        )
        held = a.stats().remote_rx_window
        granted = b.stats().total_local_rx_notified
        assert held == granted - 1 and held >= 3
        assert b.stats().local_rx_posted == 16 - granted
        # No send for 200 ms: half of what a holds goes back (return_ratio 2; again 200 ms
        # later, down to the threshold), and b's pool has it idle again: once no return is on
        # its way, what a holds and what b has idle add up to what they did.
        eventually(lambda: a.stats().remote_rx_window <= held - 3, seconds=2)
        eventually(
            lambda: a.stats().remote_rx_window + b.stats().local_rx_posted
            == held + 16 - granted
        )
        assert a.stats().total_remote_rx_consumed == 1, "returned credit is not used credit"


def wait_stopped(pid):
    """Waits until every thread of process `pid` is stopped: SIGSTOP is delivered, not
    instant, and a thread still on a CPU could answer one more request."""

    def state(task):
        with open(f"/proc/{pid}/task/{task}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    eventually(lambda: all(state(t) == "T" for t in os.listdir(f"/proc/{pid}/task")))


def stopped_receiver(conn, fc):
    """Binds, posts receive buffers when told to, then takes in what arrives until told to
    stop."""
    with umq.Umq(flow_control=fc) as ctx:
        q = ctx.queue("child", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.send("bound")
        assert conn.recv() == "post"
        q.post_recv(32, size=64)
        while not conn.poll():
            rx = q.poll(RX)
            q.post_recv(len(rx), size=64)
            time.sleep(0.0005)
        conn.recv()


@pytest.mark.libumq_behaviour
def test_a_request_the_peer_never_answers_fails_posts_after_its_timeout():
    """The peer process is stopped (SIGSTOP) before it posted a buffer, so a request waits:
    past fc_req_timeout_ms posts fail with ETIMEOUT instead of EAGAIN for ever; once the peer
    runs again and posts, its answer arrives and posts go."""
    fc = umq.FlowControl(initial_window=4, is_limited=True, fc_req_timeout_ms=50)
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=stopped_receiver, args=(child_end, fc))
    child.start()
    try:
        with umq.Umq(flow_control=fc) as ctx:
            q = ctx.queue("parent", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(parent_end.recv())
            parent_end.send(q.bind_info())
            assert parent_end.recv() == "bound"
            os.kill(child.pid, signal.SIGSTOP)
            try:
                wait_stopped(child.pid)
                start = time.monotonic()
                with pytest.raises(umq.UmqError) as e:
                    while time.monotonic() - start < 5:
                        assert q.send([b"m0"]) == 0
                        time.sleep(0.001)
                assert e.value.code == -110, e.value  # UMQ_ERR_ETIMEOUT
                assert time.monotonic() - start >= 0.05
            finally:
                os.kill(child.pid, signal.SIGCONT)
            parent_end.send("post")  # the pool has credit now: the parked request is answered

            def sent_once_answered():
                try:
                    return q.send([b"m0"]) == 1
                except umq.UmqError as late:
                    assert late.code == -110, late  # until the answer is in
                    return False

            eventually(sent_once_answered)
            parent_end.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0
