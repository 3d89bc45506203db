"""umq_buf_alloc and friends: bounds, headroom, reset, data_to_head, split; ownership and leaks."""

import ctypes as C

import pytest

import umq
from umq.core import _addr


def alloc_errno(size, count):
    C.set_errno(0)
    ptr = umq.lib().umq_buf_alloc(size, count, 0, None)
    return bool(ptr), C.get_errno()


def test_alloc_bounds(ctx):
    assert alloc_errno(100, 0) == (False, umq.UMQ_ERR_EINVAL)
    assert alloc_errno(100, ctx.batch_size + 1) == (False, umq.UMQ_ERR_EINVAL)
    assert alloc_errno(umq.UMQ_MAX_BUF_REQUEST_SIZE + 1, 1) == (False, umq.UMQ_ERR_EINVAL)
    with ctx.alloc(umq.UMQ_MAX_BUF_REQUEST_SIZE, 1) as big:
        assert big.head(0).total_data_size == umq.UMQ_MAX_BUF_REQUEST_SIZE
    with ctx.alloc(100, ctx.batch_size) as many:
        assert len(many) == ctx.batch_size
        heads = {m[0] for m in many.messages}
        assert len(heads) == ctx.batch_size  # distinct buffers


def test_alloc_for_a_forged_queue_is_einval(ctx):
    C.set_errno(0)
    assert not umq.lib().umq_buf_alloc(64, 1, 0xDEAD_BEEF, None)
    assert C.get_errno() == umq.UMQ_ERR_EINVAL


def test_write_read_roundtrip_and_capacity(ctx):
    with ctx.alloc(1000, 3) as bufs:
        for i in range(3):
            bufs.write(i, bytes([i]) * (100 + i))
        assert [bufs.read(i) for i in range(3)] == [bytes([i]) * (100 + i) for i in range(3)]
        with pytest.raises(ValueError):
            bufs.write(0, bytes(bufs.head(0).buf_size + 1))


def test_headroom_option_and_reset(ctx):
    lib = umq.lib()
    with ctx.alloc(64, 1, headroom=32) as bufs:
        b = bufs.head(0)
        base = b.buf_data - b.headroom_size
        assert b.headroom_size == 32
        assert lib.umq_buf_headroom_reset(bufs.chain(), 8) == 0
        assert (b.headroom_size, b.buf_data) == (8, base + 8)
        assert lib.umq_buf_headroom_reset(bufs.chain(), 60000) == -umq.UMQ_ERR_EINVAL
        assert b.headroom_size == 8  # unchanged by the refused reset


def test_data_to_head_maps_back(ctx):
    lib = umq.lib()
    with ctx.alloc(256, 2) as bufs:
        for i in range(2):
            head = lib.umq_data_to_head(bufs.head(i).buf_data)
            assert _addr(head) == bufs.messages[i][0]
        C.set_errno(0)
        assert not lib.umq_data_to_head(C.c_void_p(16))


def test_split_cuts_the_list(ctx):
    lib = umq.lib()
    with ctx.alloc(64, 3) as bufs:
        a, b, c = (m[0] for m in bufs.messages)
        head = bufs.chain()
        node = umq.core._ptr(b)
        assert lib.umq_buf_split(head, node) == 0
        assert _addr(umq.core._buf(a).qbuf_next) == 0
        assert _addr(umq.core._buf(b).qbuf_next) == c
        assert lib.umq_buf_split(None, node) == -umq.UMQ_ERR_EINVAL


@pytest.mark.libumq_behaviour
def test_buffers_are_freed_when_the_block_raises(ctx):
    lib = umq.lib()
    with pytest.raises(RuntimeError):
        with ctx.alloc(100, 2) as bufs:
            head = bufs.messages[0][0]
            assert lib.umq_buf_reset(umq.core._ptr(head)) == 0  # live
            raise RuntimeError("boom")
    assert lib.umq_buf_reset(umq.core._ptr(head)) == -umq.UMQ_ERR_EINVAL  # freed


@pytest.mark.libumq_behaviour
def test_double_free_is_detected_and_harmless(ctx):
    lib = umq.lib()
    ptr = lib.umq_buf_alloc(64, 1, 0, None)
    addr = _addr(ptr)
    lib.umq_buf_free(umq.core._ptr(addr))
    lib.umq_buf_free(umq.core._ptr(addr))  # logged, ignored
    with ctx.alloc(64, 2) as bufs:  # the pool still hands out distinct buffers
        bufs.write(0, b"a" * 64)
        bufs.write(1, b"b" * 64)
        assert (bufs.read(0), bufs.read(1)) == (b"a" * 64, b"b" * 64)


def test_break_and_free_returns_the_next_message(ctx):
    lib = umq.lib()
    bufs = ctx.alloc(64, 3)
    second = bufs.messages[1][0]
    nxt = lib.umq_buf_break_and_free(bufs.chain())
    assert _addr(nxt) == second
    lib.umq_buf_free(nxt)
    bufs.detach()
    assert not lib.umq_buf_break_and_free(None)
