"""Rate-limited queues (pacing, a libumq extension) on a real clock: the rate a queue's
messages arrive at, bytes and order intact, no head-of-line blocking, bad settings refused.

Rates are measured at the receiver: the slope of bytes received against arrival time."""

import os
import time

import pytest

import umq
from conftest import peer_process, send_all

pytestmark = pytest.mark.skipif(not umq.lib().has_extensions(), reason="pacing is a libumq extension")

MIB_PER_S = 8 * 1024 * 1024  # bit/s
# Rates here come from arrival times a Python loop reads on a shared, noisy machine, where the
# scheduler may stop either process: they are checked to 10 % (the noise reached 2.6 %). The
# pacer's exactness, 0.5 % and in fact about 1e-10, is asserted on its virtual clock
# (`umq-perf --test pacing`, in the test command).
RATE_TOLERANCE = 0.10
SIZE = 16384


def patterned(i, size=SIZE):
    return bytes((i * 7 + k) % 251 for k in range(256)) * (size // 256)


def receive(q, count, size=SIZE):
    """Receives `count` messages, reposting; returns them and each one's arrival time."""
    got, times = [], []
    while len(got) < count:
        rx = q.poll(umq.UMQ_IO_RX)
        now = time.monotonic()
        for c in rx:
            if c.data:
                got.append(c.data)
                times.append(now)
        if rx:
            q.post_recv(len(rx), size=size)
    return got, times


def rate_between(times, size=SIZE):
    """Bit/s: the slope of bits received against arrival time (least squares) over the longest
    run of arrivals without a stall, from an eighth of the way in (over the network the first
    message also waits for the connection to be set up, not the pacer's doing). A stall of
    this two-vCPU machine is a gap of more than four typical ones: a sender kept off the CPU
    for a hundred milliseconds loses time the pacer does not make up, a receiver kept off finds
    a backlog (the burst that drains it starts no run), and either had pulled a slope through
    all the arrivals 15 % off. A pacer off its rate tilts every run."""
    ts = times[len(times) // 8 :]
    typical = sorted(b - a for a, b in zip(ts, ts[1:]))[(len(ts) - 1) // 2]
    runs, run = [], [ts[0]]
    for a, b in zip(ts, ts[1:]):
        if typical == 0:  # polls that each took several: no gap to judge by
            run.append(b)
        elif b - a > 4 * typical:
            runs.append(run)
            run = [b]
        elif runs and len(run) == 1 and b - a < typical / 2:
            run = [b]
        else:
            run.append(b)
    ts = max(runs + [run], key=len)
    bits = [i * size * 8 for i in range(len(ts))]
    mt, mb = sum(ts) / len(ts), sum(bits) / len(bits)
    return sum((t - mt) * (b - mb) for t, b in zip(ts, bits)) / sum((t - mt) ** 2 for t in ts)


@pytest.mark.parametrize("limit_mib", [2, 8])
def test_a_limited_queue_delivers_at_its_rate_with_bytes_and_order_intact(limit_mib):
    count = limit_mib * 64  # a second's worth
    with umq.Umq() as ctx:
        a, b = ctx.pair(depth=256)
        a.set_rate(limit_mib * MIB_PER_S)
        b.post_recv(256, size=SIZE)
        payloads = [patterned(i) for i in range(count)]
        got, times = [], []

        def take():
            rx = b.poll(umq.UMQ_IO_RX)
            now = time.monotonic()
            for c in rx:
                got.append(c.data)
                times.append(now)
            if rx:
                b.post_recv(len(rx), size=SIZE)

        send_all(a, payloads, take)
        while len(got) < count:
            take()
        assert got == payloads, "every message once, whole, in order"
        achieved = rate_between(times)
        print(f"limit {limit_mib} MiB/s: achieved {achieved / MIB_PER_S:.4f} MiB/s")
        assert abs(achieved / (limit_mib * MIB_PER_S) - 1) < RATE_TOLERANCE
        s = a.pacing_stats()
        assert (s.rate_bps, s.pmtu, s.ticks_per_s) == (limit_mib * MIB_PER_S, 1024, 1024)
        assert s.packets == count * SIZE // 1024, "a 16 KiB message is 16 packets of 1 KiB"
        assert s.bytes == count * SIZE
        assert s.held_wr == 0 and s.ticks_parked > 0


def test_an_unlimited_queue_is_not_held_up_by_a_limited_one():
    """A limited pair holds a four-second backlog; an unlimited pair of the same process
    sends 2000 messages meanwhile, all of them before the limited backlog is through."""
    with umq.Umq() as ctx:
        slow_a, slow_b = ctx.pair(depth=128)
        fast_a, fast_b = ctx.pair(depth=128)
        slow_a.set_rate(MIB_PER_S // 4)  # 1 MiB in 4 s
        slow_b.post_recv(128, size=SIZE)
        fast_b.post_recv(128, size=64)
        assert slow_a.send([patterned(i) for i in range(64)]) == 64
        assert slow_a.pacing_stats().held_wr > 0
        start = time.monotonic()
        send_all(fast_a, [b"x" * 64] * 2000, lambda: fast_b.post_recv(len(fast_b.poll(umq.UMQ_IO_RX)), size=64))
        fast_seconds = time.monotonic() - start
        still_held = slow_a.pacing_stats().held_wr
        print(f"2000 unlimited messages in {fast_seconds * 1e3:.1f} ms; {still_held} limited ones still held")
        assert still_held > 0, "the unlimited pair finished while the limited one still waited"


def test_a_slow_limited_queue_does_not_hold_up_a_faster_one():
    """Two limited pairs: one at 256 KiB/s with a backlog, one at 4 MiB/s. The faster gets
    its own rate."""
    with umq.Umq() as ctx:
        slow_a, slow_b = ctx.pair(depth=128)
        fast_a, fast_b = ctx.pair(depth=256)
        slow_a.set_rate(MIB_PER_S // 4)
        fast_a.set_rate(4 * MIB_PER_S)
        slow_b.post_recv(128, size=SIZE)
        fast_b.post_recv(256, size=SIZE)
        assert slow_a.send([patterned(i) for i in range(64)]) == 64
        count = 4 * 32  # half a second
        got, times = [], []

        def take():
            rx = fast_b.poll(umq.UMQ_IO_RX)
            now = time.monotonic()
            got.extend(c.data for c in rx)
            times.extend([now] * len(rx))
            if rx:
                fast_b.post_recv(len(rx), size=SIZE)
            slow_b.post_recv(len(slow_b.poll(umq.UMQ_IO_RX)), size=SIZE)

        payloads = [patterned(i) for i in range(count)]
        send_all(fast_a, payloads, take)
        while len(got) < count:
            take()
        assert got == payloads, "every message once, whole, in order"
        achieved = rate_between(times)
        print(f"beside a backlogged slow queue: {achieved / MIB_PER_S:.4f} MiB/s of 4")
        # Its own rate: never above it, and far above the slow queue's (a sixteenth of it),
        # which is what it would get if it waited behind it. Below, the bound leaves room for
        # the scheduler: a stall of the whole machine lowers a rate measured on a real clock
        # (one CI run saw 3.38 of 4 MiB/s here; a queue's rate to 10 % is the test above).
        assert achieved < 4 * MIB_PER_S * (1 + RATE_TOLERANCE)
        assert achieved > 4 * MIB_PER_S / 2
        assert slow_a.pacing_stats().held_wr > 0, "the slow queue's backlog is still there"


def test_a_rate_change_takes_effect_at_once_and_lifting_it_releases_the_backlog():
    with umq.Umq() as ctx:
        a, b = ctx.pair(depth=256)
        a.set_rate(MIB_PER_S // 8)  # 128 KiB/s: 64 messages take 8 s
        b.post_recv(256, size=SIZE)
        assert a.send([patterned(i) for i in range(64)]) == 64
        a.set_rate(8 * MIB_PER_S)  # now 128 ms
        got, times = receive(b, 64)
        assert got == [patterned(i) for i in range(64)]
        assert times[-1] - times[0] < 2.0, "the faster rate applied to the waiting messages"
        a.set_rate(MIB_PER_S // 8)
        assert a.send([patterned(i) for i in range(64)]) == 64
        assert a.pacing_stats().held_wr > 0
        a.set_rate(0)
        assert a.pacing_stats().held_wr == 0, "unlimited: everything held goes"
        got, _ = receive(b, 64)
        assert got == [patterned(i) for i in range(64)]


def test_bad_pacing_settings_are_refused():
    with umq.Umq() as ctx:
        q = ctx.queue("q")
        for pmtu in (0, 4097, 1 << 40):
            with pytest.raises(umq.UmqError) as e:
                q.set_pmtu(pmtu)
            assert e.value.code == -umq.UMQ_ERR_EINVAL
        for tps in (0, 1_000_001):
            with pytest.raises(umq.UmqError) as e:
                q.set_tick_rate(tps)
            assert e.value.code == -umq.UMQ_ERR_EINVAL
        q.set_tick_rate(2048)
        assert q.pacing_stats().ticks_per_s == 2048
        q.set_pmtu(4096)
        q.set_rate(MIB_PER_S)  # before bind: it applies once bound
        with pytest.raises(umq.UmqError) as e:
            q.set_tick_rate(1024)
        assert e.value.code == -umq.UMQ_ERR_EBUSY, "not while a queue is limited"
        s = q.pacing_stats()
        assert (s.rate_bps, s.pmtu, s.ticks_per_s) == (MIB_PER_S, 4096, 2048)
        q.set_rate(0)
        q.set_tick_rate(1024)
        out = umq.types.umq_ext_pacing_stats_t()
        import ctypes as C

        cin = umq.types.umq_user_ctl_in_t(opcode=umq.UMQ_EXT_OPCODE_PACING_STATS)
        cout = umq.types.umq_user_ctl_out_t(addr=C.addressof(out), len=C.sizeof(out) - 8)
        assert umq.lib().umq_user_ctl(q.handle, C.byref(cin), C.byref(cout)) == -umq.UMQ_ERR_EINVAL


def limited_sender(conn, limit, count):
    with umq.Umq() as ctx:
        q = ctx.queue("child", depth=256, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        q.set_rate(limit)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        conn.recv()  # receive buffers posted
        send_all(q, [patterned(i) for i in range(count)])
        conn.recv()  # the parent has them all
        conn.send((q.pacing_stats(), q.transport_stats().paced_packets))


def test_a_limited_queue_keeps_its_rate_to_another_process():
    """Over shared memory (or the network with UMQ_PROVIDER=fabric): 4 MiB/s for a second, each
    16 KiB message on the wire as 16 packets of 1 KiB."""
    limit, count = 4 * MIB_PER_S, 256
    with peer_process(limited_sender, limit, count, depth=256) as (_, q, conn):
        q.post_recv(256, size=SIZE)
        conn.send("posted")
        got, times = receive(q, count)
        assert got == [patterned(i) for i in range(count)]
        achieved = rate_between(times)
        print(f"{os.environ.get('UMQ_PROVIDER', 'shm')}: {achieved / MIB_PER_S:.4f} MiB/s of 4")
        assert abs(achieved / limit - 1) < RATE_TOLERANCE
        conn.send("received")
        s, on_wire = conn.recv()
        assert (s.packets, s.bytes) == (count * SIZE // 1024, count * SIZE)
        assert on_wire == s.packets, "every granted packet went on the wire as one"


BULK = 65536


def limited_beside_a_stream(conn, limit, count):
    """`limited_sender`, with an unlimited queue of this process streaming 64 KiB messages to the
    same peer all the while (over the network both queues share one connection)."""
    with umq.Umq(flow_control=True) as ctx:
        lim = ctx.queue("limited", depth=256, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        bulk = ctx.queue("bulk", depth=64, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        lim.set_rate(limit)
        conn.send((lim.bind_info(), bulk.bind_info()))
        for q, info in zip((lim, bulk), conn.recv()):
            q.bind(info)
        conn.recv()  # receive buffers posted
        big, streamed = bytes(BULK), [0]

        def stream():
            streamed[0] += bulk.send([big] * 4)
            bulk.poll(umq.UMQ_IO_TX)

        send_all(lim, [patterned(i) for i in range(count)], poll=stream)
        while not conn.poll():  # until the parent has the limited queue's messages
            stream()
            lim.poll(umq.UMQ_IO_TX)
        conn.recv()
        conn.send(streamed[0])


def test_a_limited_queue_keeps_its_rate_beside_an_unlimited_stream_to_the_same_peer():
    """A limited queue (4 MiB/s) and an unlimited one of the same process send to the same peer
    process, the unlimited one as fast as it can: the limited queue's messages arrive whole, in
    order and at its rate. Over the network both share one connection, and the pacer looks at
    its socket before each grant (TRANSPORTS.md, "Connections")."""
    import multiprocessing as mp

    limit, count = 4 * MIB_PER_S, 256
    mine, theirs = mp.Pipe()
    child = mp.get_context("spawn").Process(target=limited_beside_a_stream,
                                            args=(theirs, limit, count))
    child.start()
    try:
        with umq.Umq(flow_control=True) as ctx:
            lim = ctx.queue("limited", depth=256, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            bulk = ctx.queue("bulk", depth=64, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            for q, info in zip((lim, bulk), mine.recv()):
                q.bind(info)
            mine.send((lim.bind_info(), bulk.bind_info()))
            lim.post_recv(256, size=SIZE)
            bulk.post_recv(64, size=BULK)
            mine.send("posted")
            got, times, streamed = [], [], 0
            deadline = time.monotonic() + 60
            while len(got) < count:
                assert time.monotonic() < deadline, f"{len(got)} of {count} within 60 s"
                rx = lim.poll(umq.UMQ_IO_RX)
                now = time.monotonic()
                got += [c.data for c in rx if c.data]
                times += [now for c in rx if c.data]
                if rx:
                    lim.post_recv(len(rx), size=SIZE)
                b = bulk.poll(umq.UMQ_IO_RX)
                streamed += len(b)
                if b:
                    bulk.post_recv(len(b), size=BULK)
            mine.send("received")
            sent_beside = mine.recv()
    finally:
        child.join(30)
    assert child.exitcode == 0
    assert got == [patterned(i) for i in range(count)]
    achieved = rate_between(times)
    print(f"{os.environ.get('UMQ_PROVIDER', 'shm')}: {achieved / MIB_PER_S:.4f} MiB/s of 4 beside "
          f"{streamed} messages of 64 KiB ({sent_beside} sent)")
    assert abs(achieved / limit - 1) < RATE_TOLERANCE
    # The stream really ran beside it: more than ten times the limited queue's bytes.
    assert streamed * BULK > 10 * count * SIZE, streamed


def test_ten_thousand_limited_queues_each_at_its_own_rate():
    """10,000 limited pairs of one process, each at its own rate (1 to 97 Mbit/s): every queue's
    message of four packets arrives whole, and each queue's stats show its own limit. (With
    every bind forced onto shared memory each queue holds an inbox and an fd: 500 pairs there;
    onto the network, an endpoint with 8 MiB of bounce buffers and libfabric's own: 20.)"""
    n = {"shm": 500, "fabric": 20}.get(os.environ.get("UMQ_PROVIDER"), 10_000)
    with umq.Umq() as ctx:
        pairs = [ctx.pair(depth=64) for _ in range(n)]
        for i, (a, b) in enumerate(pairs):
            a.set_rate((1 + i % 97) * 1_000_000)
            b.post_recv(1, size=4096)
        for i, (a, _) in enumerate(pairs):
            assert a.send([bytes([i % 251]) * 4096]) == 1
        for i, (a, b) in enumerate(pairs):
            got = []
            for _ in range(1_000_000):
                got += [c.data for c in b.poll(umq.UMQ_IO_RX)]
                if got:
                    break
            assert got == [bytes([i % 251]) * 4096], f"pair {i}"
        for i in range(0, n, 101):
            s = pairs[i][0].pacing_stats()
            assert (s.rate_bps, s.packets, s.bytes) == ((1 + i % 97) * 1_000_000, 4, 4096)
