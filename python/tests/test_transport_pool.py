"""The July 2026 revision's shared receive queues and transport pools seen from Python
(docs/COMPAT.md, "Transport pools"): logic queues on a main queue's receive queue borrow the
process's send resources, one queue at a time per resource; the main queue polls a resource's
send completions by its index; what the peers send comes out of the main queue tagged with each
logic queue's context, and so do their credit updates. Runs over whatever provider the suite
forces (UMQ_PROVIDER)."""

import pytest

import umq
from umq import types2026 as T26
from conftest import eventually

pytestmark = pytest.mark.july

RX, TX = umq.UMQ_IO_RX, umq.UMQ_IO_TX
LOGIC = T26.UMQ_CREATE_FLAG_SHARE_TRANSPORT
MAIN = T26.UMQ_CREATE_FLAG_MAIN_UMQ | T26.UMQ_CREATE_FLAG_SHARE_TRANSPORT


def pool(ctx, main, peers):
    """A main queue sharing its transport, one logic queue per peer (ctx 1, 2, ...) bound to it."""
    logic = []
    for i, peer in enumerate(peers, start=1):
        q = ctx.queue(f"l{i}", depth=16, share_rq=main, umq_ctx=i, flags=LOGIC)
        q.bind(peer.bind_info())
        peer.bind(q.bind_info())
        logic.append(q)
    return logic


def until(poll, count=1):
    """What `poll()` returns, gathered until there are `count` of it (a network's round trip)."""
    got = []
    eventually(lambda: (got.extend(poll()), len(got) >= count)[1])
    return got


def send_one(q, payload):
    """Sends one message, retrying while flow control refuses it; raises any other refusal."""
    for _ in range(100_000):
        if q.send([payload]) == 1:
            return
    raise AssertionError(f"{q} never had credit for {payload!r}")


@pytest.mark.parametrize("fc", [False, True], ids=["no-fc", "credit"])
def test_logic_queues_take_turns_on_one_resource_and_the_main_queue_sees_everything(fc):
    flow = umq.FlowControl(initial_window=4, timeout_ms=60_000) if fc else None
    with umq.Umq(flow_control=flow) as ctx:
        main = ctx.queue("main", depth=16, flags=MAIN)
        peers = [ctx.queue(f"p{i}", depth=16) for i in (1, 2)]
        for p in peers:
            p.post_recv(16, size=64)
        main.post_recv(16, size=64)
        l1, l2 = pool(ctx, main, peers)
        assert main.tp_create() == 0
        assert ctx.transport_pool_stats(main)["global_num"] == 1

        send_one(l1, b"one")  # borrows resource 0 until its completion is polled
        with pytest.raises(umq.UmqError) as no_resource:
            for _ in range(100_000):
                l2.send([b"two"])  # EAGAIN (no credit yet) retries; EMLINK raises
        assert no_resource.value.code == -T26.UMQ_ERR_EMLINK
        assert ctx.transport_pool_stats(main)["acc_miss_num"] >= 1

        assert until(lambda: [c.data for c in peers[0].poll(RX) if c.data]) == [b"one"]
        assert main.poll(TX) == [], "a main queue sharing its transport polls sends by resource"
        done = until(lambda: main.poll(TX, tp=0))
        assert [(c.status, c.data) for c in done] == [(umq.UMQ_BUF_SUCCESS, b"one")]
        s = ctx.transport_pool_stats(main)
        # Each try borrows the resource, and a try refused for credit gives it back at once:
        # over a link the peer's first credit offer may still be on its way when l1 first sends.
        assert s["in_use_num"] == 0 and s["acc_alloc_num"] == s["acc_free_num"] >= 1, s

        send_one(l2, b"two")  # resource 0 again, now l2's
        assert until(lambda: [c.data for c in peers[1].poll(RX) if c.data]) == [b"two"]
        assert [c.data for c in until(lambda: main.poll(TX, tp=0))] == [b"two"]

        for i, p in enumerate(peers, start=1):
            send_one(p, b"to-l%d" % i)
        seen = until(lambda: [c for c in main.poll(RX) if c.data], 2)
        assert sorted((c.umq_ctx, c.data) for c in seen) == [(1, b"to-l1"), (2, b"to-l2")]

        send_one(l1, b"three")  # l1 holds resource 0 until this is polled
        main.tp_mark_err(0)
        with pytest.raises(umq.UmqError) as in_error:
            l1.send([b"four"])
        assert in_error.value.code == -umq.UMQ_ERR_EINVAL
        with pytest.raises(umq.UmqError) as held:
            main.tp_destroy(0)
        assert held.value.code == -umq.UMQ_ERR_EBUSY
        assert [c.data for c in until(lambda: main.poll(TX, tp=0))] == [b"three"]
        with pytest.raises(umq.UmqError) as not_lent:
            l2.send([b"five"])
        assert not_lent.value.code == -T26.UMQ_ERR_EMLINK, "a resource in error is not lent again"
        for q in (l1, l2, *peers):
            q.unbind()
        main.tp_destroy(0)
        assert ctx.transport_pool_stats(main)["total_num"] == 0


def test_a_logic_queue_s_credit_answers_come_out_of_the_main_queue():
    limited = umq.FlowControl(initial_window=2, is_limited=True, timeout_ms=60_000)
    with umq.Umq(flow_control=limited) as ctx:
        main = ctx.queue("main", depth=16, flags=MAIN)
        peer = ctx.queue("p", depth=16)
        (logic,) = pool(ctx, main, [peer])
        for _ in range(4):
            main.tp_create()
        peer.post_recv(4, size=64)  # the peer offers 2 (no update), then grants on request
        updates, sent = [], 0
        for _ in range(200_000):
            if sent == 6 and updates:
                break
            sent += logic.send([b"m%d" % sent]) if sent < 6 else 0
            updates += [c for c in main.poll(RX) if c.is_update]
            main.poll(TX, tp=0)
            rx = peer.poll(RX)
            peer.post_recv(len(rx), size=64)
        assert sent == 6
        assert updates and all(u.umq_ctx == 1 and u.status == umq.UMQ_FAKE_BUF_FC_UPDATE for u in updates)
        assert logic.poll(RX) == [], "a logic queue's receive side is its main queue's"
