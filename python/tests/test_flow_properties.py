"""Flow-control invariants under random schedules (hypothesis): whatever the order of receive
posts, batched sends and polls in any direction on both peers, every accepted message arrives
once and in order, the pair can always finish, and the spec's identities hold when it is quiet."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import umq
from conftest import eventually

# The window protocol's invariants; the July credit requests have theirs in test_credit.py.
pytestmark = pytest.mark.december

RX, TX, ALL = umq.UMQ_IO_RX, umq.UMQ_IO_TX, umq.UMQ_IO_ALL
DEPTH = 8

op = st.one_of(
    st.tuples(st.just("post_rx"), st.integers(0, 1), st.integers(1, DEPTH)),
    st.tuples(st.just("send"), st.integers(0, 1), st.integers(1, 6)),
    st.tuples(st.just("poll"), st.integers(0, 1), st.sampled_from([RX, TX, ALL])),
)


class Peer:
    def __init__(self, q, tag):
        self.q, self.tag = q, tag
        self.sent = 0  # messages accepted by umq_post
        self.received = []  # payloads, in arrival order
        self.posted = 0  # receive buffers currently posted

    def post_rx(self, n):
        n = min(n, DEPTH - self.posted)
        self.posted += self.q.post_recv(n, size=64) if n else 0

    def send(self, n):
        payloads = [f"{self.tag}{self.sent + i}".encode() for i in range(n)]
        self.sent += self.q.send(payloads)

    def poll(self, direction):
        for c in self.q.poll(direction):
            if c.direction == RX:
                self.posted -= 1
                assert c.status in (umq.UMQ_BUF_SUCCESS, umq.UMQ_BUF_FLOW_CONTROL_UPDATE), c
                if c.data:  # a zero-length status 128 is a standalone update, not a message
                    self.received.append(c.data)
            else:
                assert c.status == umq.UMQ_BUF_SUCCESS, c


def check_order(receiver, sender):
    want = [f"{sender.tag}{i}".encode() for i in range(len(receiver.received))]
    assert receiver.received == want  # in order, nothing lost, nothing twice


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    schedule=st.lists(op, max_size=60),
    window=st.integers(1, DEPTH),
    interval=st.integers(1, DEPTH),
    atomic=st.booleans(),
)
def test_random_schedules_deliver_in_order_and_finish(schedule, window, interval, atomic):
    cfg = umq.FlowControl(initial_window=window, notify_interval=interval, use_atomic_window=atomic)
    with umq.Umq(flow_control=cfg) as ctx:
        qa, qb = ctx.pair(depth=DEPTH)
        peers = [Peer(qa, "a"), Peer(qb, "b")]
        for name, side, arg in schedule:
            getattr(peers[side], name)(arg)
            check_order(peers[1 - side], peers[side])
        a, b = peers
        for _ in range(2000):  # finish: both sides keep receive buffers posted and poll
            if len(b.received) == a.sent and len(a.received) == b.sent:
                break
            for p in peers:
                p.post_rx(DEPTH)
                p.poll(ALL)
        assert (len(b.received), len(a.received)) == (a.sent, b.sent)
        check_order(a, b)
        check_order(b, a)

        def quiet():  # every update in flight has landed (at once but over the network)
            for p in peers:
                p.poll(ALL)
            sa, sb = qa.stats(), qb.stats()
            return (sa.total_local_rx_notified, sb.total_local_rx_notified) == (
                sb.total_remote_rx_received,
                sa.total_remote_rx_received,
            )

        eventually(quiet)
        umq.check_pair_identities(qa, qb)
        if umq.lib().has_extensions():
            assert qa.ext_stats().rx_without_buffer == 0 == qb.ext_stats().rx_without_buffer
