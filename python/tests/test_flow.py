"""Receive-window flow control seen from Python (docs/FLOW_CONTROL.md): IDLE until the window is
known, EAGAIN with the index of the first refused WR, status 128 updates, 63-bit immediates,
statistics and their identities, size_left, queued-send mode."""

import ctypes as C

import pytest

import umq
from conftest import drain, eventually

# The window protocol of the December revision; the July credit requests are test_credit.py's.
pytestmark = pytest.mark.december

RX, TX = umq.UMQ_IO_RX, umq.UMQ_IO_TX
WINDOW = 4


def ready_pair(fc, depth=16):
    a, b = fc.pair(depth=depth)
    a.post_recv(WINDOW)
    b.post_recv(WINDOW)
    eventually(lambda: (a.state, b.state) == (umq.QUEUE_STATE_READY, umq.QUEUE_STATE_READY))
    return a, b


def test_idle_until_the_peer_posts_its_initial_window(fc):
    a, b = fc.pair(depth=16)
    assert a.state == umq.QUEUE_STATE_IDLE
    assert a.send([b"too early"]) == 0  # no credit yet
    b.post_recv(WINDOW - 1)
    assert a.state == umq.QUEUE_STATE_IDLE
    b.post_recv(1)
    eventually(lambda: a.state == umq.QUEUE_STATE_READY)
    assert a.stats().remote_rx_window == WINDOW


def test_eagain_names_the_first_refused_wr_and_leaves_it_untouched(fc):
    a, b = ready_pair(fc)
    with umq.Buffers.for_payloads(fc, [f"m{i}".encode() for i in range(6)], a.handle) as bufs:
        with pytest.raises(umq.UmqError) as e:
            a.post(bufs)
        assert (e.value.code, e.value.bad_index) == (-umq.UMQ_ERR_EAGAIN, WINDOW)
        assert [bufs.read(i) for i in range(len(bufs))] == [b"m4", b"m5"]
        assert all(bufs.pro(i).opcode == umq.UMQ_OPC_SEND for i in range(len(bufs)))
    s = a.stats()
    assert (s.remote_rx_window, s.total_remote_rx_consumed, s.total_flow_controlled_wr) == (0, WINDOW, 2)
    assert [c.data for c in b.poll_until(WINDOW, RX)] == [b"m0", b"m1", b"m2", b"m3"]


def test_write_read_and_nop_need_no_credit(fc):
    a, b = ready_pair(fc)
    assert a.send([b"x"] * WINDOW) == WINDOW
    with fc.alloc(64, 1, umqh=b.handle) as target:
        remote = b.expose(target)
        assert a.write(b"free", remote) == 1
        assert a.read(4, remote) == 1
        assert a.send([b""], opcode=umq.UMQ_OPC_NOP) == 1
        assert a.write(b"paid", remote, imm=2) == 0  # WRITE_IMM needs credit
    assert a.stats().total_flow_controlled_wr == 1


@pytest.mark.december
def test_piggybacked_update_is_status_128_with_data(fc):
    a, b = ready_pair(fc)
    assert b.send([b"first"]) == 1
    drain(a, RX)  # a consumes it...
    a.post_recv(3)  # ...and posts more, which are due for announcement
    assert a.send([b"own imm"], opcode=umq.UMQ_OPC_SEND_IMM, imm=8) == 1  # cannot carry it
    assert a.send([b"carrier"]) == 1
    own, carrier = b.poll_until(2, RX)
    assert (own.status, own.opcode, own.imm) == (umq.UMQ_BUF_SUCCESS, umq.UMQ_OPC_SEND_IMM, 8)
    assert (carrier.status, carrier.opcode, carrier.imm, carrier.data) == (
        umq.UMQ_BUF_FLOW_CONTROL_UPDATE, umq.UMQ_OPC_SEND, 0, b"carrier")
    assert [(t.status, t.opcode) for t in a.poll_until(2, TX)] == [(0, umq.UMQ_OPC_SEND_IMM), (0, umq.UMQ_OPC_SEND)]
    if umq.lib().has_extensions():
        assert a.ext_stats().piggybacked == 1


@pytest.mark.december
def test_standalone_update_is_status_128_without_data(fc):
    a, b = ready_pair(fc)
    a.post_recv(1)  # beyond a's window: the landing zone for b's standalone updates
    assert a.send([b"x"] * WINDOW) == WINDOW
    assert len(b.poll_until(WINDOW, RX)) == WINDOW
    assert a.stats().remote_rx_window == 0
    if umq.lib().has_extensions():
        # b must have seen the control credit a's extra buffer granted (at once over shared
        # memory; a round trip later over the network, else the update goes in the area only).
        eventually(lambda: b.stats() and b.ext_stats().ctrl_credit >= 1)
    b.post_recv(WINDOW)  # b sends nothing, so the window goes back in a standalone update
    updates = a.poll_until(1, RX) + drain(a, RX)
    assert [(c.status, c.data) for c in updates] == [(umq.UMQ_BUF_FLOW_CONTROL_UPDATE, b"")]
    assert a.stats().remote_rx_window == WINDOW - 1  # one of b's buffers is its own reserve
    assert a.send([b"again"]) == 1
    if umq.lib().has_extensions():
        assert b.ext_stats().standalone == 1


def test_user_immediates_keep_63_bits(fc):
    a, b = ready_pair(fc)
    assert a.send([b"i", b"j"], opcode=umq.UMQ_OPC_SEND_IMM, imm=[0xFFFF_FFFF_FFFF_FFFF, 0x8000_0000_0000_0002]) == 2
    # A post of one WR (over shared memory, the one-pass path) keeps the same 63 bits.
    assert a.send([b"k"], opcode=umq.UMQ_OPC_SEND_IMM, imm=0xFFFF_FFFF_FFFF_FFFF) == 1
    got = b.poll_until(3, RX)
    assert [c.imm for c in got] == [0xFFFF_FFFF_FFFF_FFFE, 0x8000_0000_0000_0002, 0xFFFF_FFFF_FFFF_FFFE]


def test_identities_hold_after_traffic_both_ways(fc):
    a, b = ready_pair(fc, depth=32)
    for round_ in range(20):
        for src, dst in ((a, b), (b, a)):
            src.send([f"{round_}".encode()] * 3)
            got = drain(dst, RX)
            dst.post_recv(len(got))
            drain(src, TX)

    def settled():  # every announcement in flight has landed (at once but over the network)
        drain(a)
        drain(b)
        sa, sb = a.stats(), b.stats()
        return (sa.total_local_rx_notified, sb.total_local_rx_notified) == (
            sb.total_remote_rx_received,
            sa.total_remote_rx_received,
        )

    eventually(settled)
    sa, sb = umq.check_pair_identities(a, b)
    assert sa.total_remote_rx_consumed > 20 and sb.total_remote_rx_consumed > 20


def test_overposting_is_refused_and_counted(fc):
    a, _ = ready_pair(fc, depth=8)
    assert a.post_recv(100) == 8 - WINDOW
    s = a.stats()
    assert s.total_local_rx_posted == 8
    assert s.total_local_rx_posted_error >= 1


@pytest.mark.libumq_ext
def test_size_left_includes_the_window(fc):
    a, b = fc.pair(depth=16)
    lib = umq.lib()
    ep = a.fi_endpoint()
    assert lib.fi_tx_size_left(None) == -umq.FI_EINVAL
    assert lib.fi_rx_size_left(C.c_void_p(12345678)) == -umq.FI_EINVAL
    c = fc.queue("unbound")
    assert lib.fi_tx_size_left(c.fi_endpoint()) == -umq.FI_EOPBADSTATE
    b.post_recv(WINDOW)
    eventually(lambda: a.tx_size_left() == WINDOW)
    assert lib.fi_tx_size_left(ep) == WINDOW
    assert a.send([b"x"]) == 1
    assert a.tx_size_left() == WINDOW - 1
    assert b.rx_size_left() == 16 - WINDOW
    assert a.send([b"x"] * 10) == WINDOW - 1
    assert a.tx_size_left() == 0


@pytest.mark.libumq_ext
def test_queued_mode_holds_sends_in_order_and_flushes(fc):
    a, b = ready_pair(fc, depth=16)
    a.set_queued_mode(True)
    msgs = [f"q{i}".encode() for i in range(10)]
    assert a.send(msgs) == 10  # all accepted, 6 wait for credit
    assert a.ext_stats().queued_wr == 10 - WINDOW
    got = []
    while len(got) < 10:
        rx = b.poll(RX)
        got += [c.data for c in rx]
        b.post_recv(len(rx))
        a.poll(TX)
    assert got == msgs
    assert a.ext_stats().queued_wr == 0
    assert a.ext_stats().rx_without_buffer == 0 == b.ext_stats().rx_without_buffer


@pytest.mark.libumq_ext
@pytest.mark.december
def test_stall_timeout_and_ext_stats(fc):
    a, _ = ready_pair(fc)
    a.set_stall_timeout(1)
    with pytest.raises(umq.UmqError) as e:
        a.set_stall_timeout(0)
    assert e.value.code == -umq.UMQ_ERR_EINVAL
    ext = a.ext_stats()
    assert (ext.initial_window, ext.notify_interval, ext.queued_mode) == (WINDOW, 2, 0)
