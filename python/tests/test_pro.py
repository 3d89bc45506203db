"""The pro API on a bound pair: every opcode, ordering, immediates, user_ctx, error statuses and
the error codes of bad input (which must leave the caller's buffers the caller's)."""

import ctypes as C
import random
import time

import pytest

import umq
from conftest import assert_premise, eventually, expected_transport
from umq.core import BUF

RX, TX, ALL = umq.UMQ_IO_RX, umq.UMQ_IO_TX, umq.UMQ_IO_ALL


def test_sends_arrive_in_order_with_their_bytes(pair):
    a, b = pair
    payloads = [i.to_bytes(4, "little") * (1 + i % 7) for i in range(300)]
    got, sent, rx_status, tx_done = [], 0, [], []
    b.post_recv(64)
    while len(got) < len(payloads):
        sent += a.send(payloads[sent : sent + 17])
        rx = b.poll(RX)
        got += [c.data for c in rx]
        rx_status += [c.status for c in rx]
        b.post_recv(len(rx))
        tx_done += a.poll(TX)
    tx_done += a.poll_until(len(payloads) - len(tx_done), TX)
    assert got == payloads
    assert rx_status == [umq.UMQ_BUF_SUCCESS] * len(payloads)
    assert [(c.direction, c.status) for c in tx_done] == [(TX, umq.UMQ_BUF_SUCCESS)] * len(payloads)


def test_send_imm_carries_imm_and_user_ctx(pair):
    a, b = pair
    b.post_recv(2)
    assert a.send([b"one", b"two"], opcode=umq.UMQ_OPC_SEND_IMM, imm=[0xFFFF_FFFF_FFFF_FFFE, 6], user_ctx=[11, 12]) == 2
    rx = b.poll_until(2, RX)
    assert [(c.opcode, c.imm, c.data) for c in rx] == [
        (umq.UMQ_OPC_SEND_IMM, 0xFFFF_FFFF_FFFF_FFFE, b"one"),
        (umq.UMQ_OPC_SEND_IMM, 6, b"two"),
    ]
    tx = a.poll_until(2, TX)
    assert [(c.direction, c.status, c.user_ctx) for c in tx] == [(TX, 0, 11), (TX, 0, 12)]


def test_sends_posted_one_at_a_time_arrive_with_their_bytes_imm_and_ctx(pair):
    """One WR per call, as a ping-pong posts: every size a transport treats apart (empty, under
    a cache line, a line, past it, either side of the placement threshold), both send opcodes,
    each polled before the next goes."""
    a, b = pair
    sizes = [0, 1, 63, 64, 65, 1023, 1024, 4000] * 2
    b.post_recv(len(sizes))
    for i, n in enumerate(sizes):
        with_imm = i % 2 == 1
        op = umq.UMQ_OPC_SEND_IMM if with_imm else umq.UMQ_OPC_SEND
        data = bytes((i + k) & 0xFF for k in range(n))
        imm = (i << 40 | 0xABC0) if with_imm else 0
        assert a.send([data], opcode=op, imm=imm, user_ctx=100 + i) == 1
        [rx] = b.poll_until(1, RX)
        assert (rx.status, rx.opcode, rx.data) == (umq.UMQ_BUF_SUCCESS, op, data), f"message {i}"
        if with_imm:
            assert rx.imm == imm
        [tx] = a.poll_until(1, TX)
        assert (tx.direction, tx.status, tx.user_ctx) == (TX, umq.UMQ_BUF_SUCCESS, 100 + i)


def test_one_poll_returns_every_message_that_has_arrived(pair):
    """A poll with room for several returns all the messages waiting, oldest first, as the
    reference's poll of its completion queue does, not only the first: over shared memory each
    of these small sends is one the one-message receive path could take alone. A poll with
    room for one takes them one by one."""
    a, b = pair
    b.post_recv(8)
    payloads = [b"one", b"two", b"three", b"four"]
    for room in (umq.UMQ_BATCH_SIZE, 1):
        for p in payloads:
            assert a.send([p]) == 1
        assert len(a.poll_until(len(payloads), TX)) == len(payloads)
        if room > 1 and expected_transport() != umq.UMQ_EXT_TRANSPORT_FABRIC:
            got = b.poll(RX, room)  # in-process and shared memory: all four are there now
        else:
            got = [c for _ in payloads for c in b.poll_until(1, RX)]
        assert [c.data for c in got] == payloads
        assert b.poll(RX) == []
        b.post_recv(len(payloads))


def test_after_empty_polls_the_next_poll_sees_each_new_event(pair):
    """Empty polls, in every direction and on both queues, as an application spins on while
    it waits, never hide what comes next: a message the peer sent, the completion of our own
    send, a receive posted in between each show on the very next poll. In one process, shared
    memory and loopback deliver during the post itself; over the network it takes a round
    trip."""
    a, b = pair
    at_once = expected_transport() != umq.UMQ_EXT_TRANSPORT_FABRIC

    def next_poll(q, direction):
        return q.poll(direction) if at_once else q.poll_until(1, direction)

    a.post_recv(1)
    b.post_recv(1)
    for i in range(4):
        for q in (a, b):
            for d in (TX, RX, ALL, RX, TX):
                assert q.poll(d) == []
        there, back = b"after empty polls %d" % i, b"and back %d" % i
        assert a.send([there], user_ctx=i) == 1
        rx = next_poll(b, RX)
        assert [(c.status, c.data) for c in rx] == [(umq.UMQ_BUF_SUCCESS, there)], f"round {i}"
        tx = next_poll(a, TX)
        assert [(c.status, c.user_ctx) for c in tx] == [(umq.UMQ_BUF_SUCCESS, i)]
        for q in (a, b):
            assert q.poll(ALL) == []
        b.post_recv(1)
        assert b.send([back]) == 1
        assert [c.data for c in next_poll(a, RX)] == [back], f"round {i}"
        assert len(next_poll(b, TX)) == 1
        a.post_recv(1)


def test_queues_polled_in_turn_each_get_their_messages_in_order(ctx):
    """A server's loop: eight pairs, every queue polled in turn, each poll of one queue, while
    messages go out on the pairs in a shuffled order. Each message reaches its own queue, in its
    pair's order, and no poll returns another queue's. Over the network one poll in a turn looks
    at the provider for all of them (`Shared::look_due`); the rest take from their inboxes."""
    pairs = [ctx.pair(depth=64) for _ in range(8)]
    for a, b in pairs:
        assert_premise((a, b))
        b.post_recv(32, 64)
    order = [i % 8 for i in range(8 * 24)]
    random.Random(7).shuffle(order)
    got = {i: [] for i in range(8)}
    sent = [0] * 8
    for i in order:
        a, _ = pairs[i]
        assert a.send([b"%d:%d" % (i, sent[i])]) == 1
        sent[i] += 1
        for j, (a, b) in enumerate(pairs):
            got[j] += [c.data for c in b.poll(RX)]
            a.poll(TX)
    deadline = time.monotonic() + 10
    while sum(map(len, got.values())) < len(order) and time.monotonic() < deadline:
        for j, (a, b) in enumerate(pairs):
            got[j] += [c.data for c in b.poll(RX)]
            a.poll(TX)
    for i in range(8):
        assert got[i] == [b"%d:%d" % (i, k) for k in range(sent[i])], f"pair {i}"


@pytest.mark.december
def test_empty_polls_between_messages_leave_flow_control_its_announcements(fc):
    """With flow control on, empty polls between messages still let every announcement out: a
    one-way stream that needs the receiver's credit over and over completes, in order."""
    a, b = fc.pair(depth=16)
    a.post_recv(4)
    b.post_recv(8)
    eventually(lambda: (a.state, b.state) == (umq.QUEUE_STATE_READY, umq.QUEUE_STATE_READY))
    got = []
    for i in range(40):
        for q in (a, b):
            for d in (TX, RX, ALL):
                got += [c.data for c in q.poll(d) if c.direction == RX and c.data]
        assert a.send([b"m%d" % i]) == 1
        while len(got) <= i:
            for c in b.poll(RX):
                if c.data:
                    got.append(c.data)
                b.post_recv(1)
            a.poll(ALL)
    assert got == [b"m%d" % i for i in range(40)]


def test_write_lands_in_the_exposed_buffer(ctx, pair):
    a, b = pair
    with ctx.alloc(256, 1, umqh=b.handle) as target:
        target.write(0, bytes(256))
        remote = b.expose(target)
        assert a.write(b"remote bytes", remote, user_ctx=5) == 1
        (c,) = a.poll_until(1, TX)
        assert (c.status, c.opcode, c.user_ctx) == (umq.UMQ_BUF_SUCCESS, umq.UMQ_OPC_WRITE, 5)
        assert C.string_at(remote.addr, 12) == b"remote bytes"
        assert b.poll(RX) == []  # a plain WRITE is silent at the target


def test_write_imm_consumes_a_receive_and_carries_imm(ctx, pair):
    a, b = pair
    with ctx.alloc(64, 1, umqh=b.handle) as target:
        remote = b.expose(target)
        b.post_recv(1)
        assert a.write(b"wimm", remote, imm=0x42) == 1
        (rx,) = b.poll_until(1, RX)
        assert (rx.opcode, rx.imm, rx.status) == (umq.UMQ_OPC_WRITE_IMM, 0x42, umq.UMQ_BUF_SUCCESS)
        assert C.string_at(remote.addr, 4) == b"wimm"


def test_read_fetches_the_peer_bytes(ctx, pair):
    a, b = pair
    with ctx.alloc(64, 1, umqh=b.handle) as source:
        source.write(0, b"read me please!!")
        assert a.read(16, b.expose(source), user_ctx=9) == 1
        (c,) = a.poll_until(1, TX)
        assert (c.status, c.opcode, c.user_ctx, c.data) == (0, umq.UMQ_OPC_READ, 9, b"read me please!!")


def test_write_with_a_wrong_token_fails_remotely(ctx, pair):
    a, b = pair
    with ctx.alloc(64, 1, umqh=b.handle) as target:
        target.write(0, b"\0" * 8)
        good = b.expose(target)
        bad = umq.RemoteBuffer(good.addr, good.length, good.token_id, good.token_value ^ 1)
        assert a.write(b"intruder", bad) == 1
        (c,) = a.poll_until(1, TX)
        assert c.status == umq.UMQ_BUF_REM_ACCESS_ABORT_ERR
        assert C.string_at(good.addr, 8) == b"\0" * 8


def test_a_post_of_writes_reads_and_a_send_completes_in_order(ctx, pair):
    """The WRITEs and READs at the front of a post may run inside it: a forged one among them
    fails alone, a SEND and what follows it go the usual way, and the completions keep the
    post's order. A post of more WRs than the send queue holds takes as many as it holds."""
    a, b = pair
    with ctx.alloc(256, 1, umqh=b.handle) as target:
        target.write(0, bytes(256))
        r = b.expose(target)

        def at(offset, length, token=r.token_value):
            return umq.RemoteBuffer(r.addr + offset, length, r.token_id, token)

        b.post_recv(1)
        wrs = [
            (umq.UMQ_OPC_WRITE, b"A" * 16, at(0, 16)),
            (umq.UMQ_OPC_WRITE, b"X" * 16, at(64, 16, r.token_value ^ 1)),
            (umq.UMQ_OPC_READ, bytes(16), at(0, 16)),
            (umq.UMQ_OPC_SEND, b"hello", at(0, 16)),
            (umq.UMQ_OPC_WRITE, b"B" * 16, at(16, 16)),
            (umq.UMQ_OPC_READ, bytes(32), at(0, 32)),
        ]
        opcodes, payloads, remotes = (list(column) for column in zip(*wrs))
        assert a.send(payloads, opcode=opcodes, remote=remotes, user_ctx=list(range(6))) == 6
        done = a.poll_until(6, TX)
        assert [(c.user_ctx, c.status) for c in done] == [
            (i, umq.UMQ_BUF_REM_ACCESS_ABORT_ERR if i == 1 else umq.UMQ_BUF_SUCCESS) for i in range(6)
        ]
        assert (done[2].data, done[5].data) == (b"A" * 16, b"A" * 16 + b"B" * 16)
        assert [m.data for m in b.poll_until(1, RX)] == [b"hello"]
        assert C.string_at(r.addr + 64, 16) == bytes(16)
        writes = dict(opcode=umq.UMQ_OPC_WRITE, remote=at(128, 8))
        assert a.send([b"C" * 8] * 40, **writes) == 40
        assert a.send([b"C" * 8] * 40, **writes) == 24  # their completions are not polled yet
        assert len(a.poll_until(64, TX)) == 64
        assert C.string_at(r.addr + 128, 8) == b"C" * 8


def test_nop_completes(pair):
    a, _ = pair
    assert a.send([b""], opcode=umq.UMQ_OPC_NOP, user_ctx=77) == 1
    (c,) = a.poll_until(1, TX)
    assert (c.opcode, c.status, c.user_ctx) == (umq.UMQ_OPC_NOP, 0, 77)


def test_receive_buffer_too_small_is_loc_len_err(pair):
    a, b = pair
    b.post_recv(1, size=8)  # the pool rounds it up to its smallest block
    too_big = b"x" * (64 * 1024)
    assert a.send([too_big]) == 1
    (rx,) = b.poll_until(1, RX)
    assert rx.status == umq.UMQ_BUF_LOC_LEN_ERR


def test_send_waits_for_a_receive_buffer_like_rnr_retry(pair):
    a, b = pair
    assert a.send([b"early"]) == 1
    assert b.poll(RX) == []
    b.post_recv(1)
    assert [c.data for c in b.poll_until(1, RX)] == [b"early"]


def test_poll_directions_are_separate(pair):
    a, b = pair
    a.post_recv(1)
    b.post_recv(1)
    a.send([b"to-b"])
    b.send([b"to-a"])
    assert [c.direction for c in a.poll_until(1, TX)] == [TX]
    got = a.poll_until(1, RX)
    assert [(c.direction, c.data) for c in got] == [(RX, b"to-a")]
    both = b.poll_until(2, ALL)
    assert sorted(c.direction for c in both) == [TX, RX]


def test_oversize_batch_is_einval_and_buffers_stay_ours(ctx, pair):
    a, _ = pair
    lib = umq.lib()
    with umq.Buffers.for_payloads(ctx, [b"p"] * (ctx.batch_size + 1), a.handle) as bufs:
        with pytest.raises(umq.UmqError) as e:
            a.post(bufs)
        assert e.value.code == -umq.UMQ_ERR_EINVAL
        assert len(bufs) == ctx.batch_size + 1  # nothing was handed over
        assert all(lib.umq_buf_reset(umq.core._ptr(m[0])) == 0 for m in bufs.messages)
        assert all(bufs.read(i) == b"p" for i in range(len(bufs)))


def test_bad_input_error_codes(ctx, pair):
    a, _ = pair
    lib = umq.lib()
    bad = BUF()
    assert lib.umq_post(a.handle, None, a.io(TX), C.byref(bad)) == -umq.UMQ_ERR_EINVAL
    out = (BUF * 4)()
    assert lib.umq_poll(a.handle, a.io(7), out, 4) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_poll(a.handle, a.io(RX), None, 4) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_poll(0xBAD, a.io(RX), out, 4) == -umq.UMQ_ERR_EINVAL
    with umq.Buffers.for_payloads(ctx, [b"z"], a.handle) as bufs:
        assert lib.umq_post(0xBAD, bufs.chain(), a.io(TX), C.byref(bad)) == -umq.UMQ_ERR_EINVAL
        assert lib.umq_post(a.handle, bufs.chain(), a.io(umq.UMQ_IO_ALL), C.byref(bad)) == -umq.UMQ_ERR_EINVAL
        bufs.pro(0).opcode = 3  # not an opcode
        with pytest.raises(umq.UmqError) as e:
            a.post(bufs)
        assert (e.value.code, e.value.bad_index) == (-umq.UMQ_ERR_EINVAL, 0)
        assert bufs.read(0) == b"z"


def test_user_ctl_rejects_wrong_length_null_and_unknown_opcode(pair):
    a, _ = pair
    lib = umq.lib()
    s = umq.types.umq_flowcontrol_stats_t()
    cin = umq.types.umq_user_ctl_in_t(opcode=umq.UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY)
    short = umq.types.umq_user_ctl_out_t(addr=C.addressof(s), len=C.sizeof(s) - 8)
    assert lib.umq_user_ctl(a.handle, C.byref(cin), C.byref(short)) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_user_ctl(a.handle, None, C.byref(short)) == -umq.UMQ_ERR_EINVAL
    unknown = umq.types.umq_user_ctl_in_t(opcode=0x7777)
    right = umq.types.umq_user_ctl_out_t(addr=C.addressof(s), len=C.sizeof(s))
    assert lib.umq_user_ctl(a.handle, C.byref(unknown), C.byref(right)) == -umq.UMQ_ERR_EINVAL
    assert lib.umq_user_ctl(a.handle, C.byref(cin), C.byref(right)) == 0


def test_transport_stats_fill_the_struct_before_its_last_field_too(pair):
    """`umq_ext_transport_stats_t` grew `one_sided_rma_wr` at its end: a caller built against
    the earlier 96-byte struct still gets its fields, and nothing past them; any other length
    is refused."""
    a, _ = pair
    lib = umq.lib()
    cin = umq.types.umq_user_ctl_in_t(opcode=umq.UMQ_EXT_OPCODE_TRANSPORT_STATS)
    whole = umq.types.umq_ext_transport_stats_t()
    assert C.sizeof(whole) == 104
    out = umq.types.umq_user_ctl_out_t(addr=C.addressof(whole), len=104)
    assert lib.umq_user_ctl(a.handle, C.byref(cin), C.byref(out)) == 0
    older = (C.c_uint8 * 112)(*([0xEE] * 112))
    out = umq.types.umq_user_ctl_out_t(addr=C.addressof(older), len=96)
    assert lib.umq_user_ctl(a.handle, C.byref(cin), C.byref(out)) == 0
    assert bytes(older)[:96] == bytes(whole)[:96]
    assert bytes(older)[96:] == b"\xee" * 16
    for wrong in (88, 100, 112):
        out = umq.types.umq_user_ctl_out_t(addr=C.addressof(older), len=wrong)
        assert lib.umq_user_ctl(a.handle, C.byref(cin), C.byref(out)) == -umq.UMQ_ERR_EINVAL


def test_the_same_list_posts_again_unchanged(ctx, pair):
    """As the reference's qps tool does: one list head posted round after round. umq_post must
    not rewrite the list's qbuf_next links, and a TX completion's qbuf_next is what was posted."""
    a, b = pair
    lib = umq.lib()
    b.post_recv(32)
    with umq.Buffers.for_payloads(ctx, [bytes([i]) * 16 for i in range(8)], a.handle) as bufs:
        for i in range(len(bufs)):
            bufs.pro(i).opcode = umq.UMQ_OPC_SEND
        head = bufs.chain()
        links = [C.cast(umq.core._buf(m[0]).qbuf_next, C.c_void_p).value for m in bufs.messages]
        got = []
        for _ in range(3):
            bad = BUF()
            assert lib.umq_post(a.handle, head, a.io(TX), C.byref(bad)) == 0
            tx = []  # raw: Queue.poll would free the buffers it returns
            while len(tx) < 8:
                tx += a.poll_raw(TX, 8 - len(tx))
            assert [C.cast(p, C.c_void_p).value for p in tx] == [m[0] for m in bufs.messages]
            assert [p.contents.status for p in tx] == [umq.UMQ_BUF_SUCCESS] * 8
            assert [C.cast(umq.core._buf(m[0]).qbuf_next, C.c_void_p).value for m in bufs.messages] == links
            rx = b.poll_until(8, RX)
            got += [c.data for c in rx]
            b.post_recv(len(rx))
        assert got == [bytes([i]) * 16 for i in range(8)] * 3
