"""The Pythonic layer: an init context, queues, buffers that never leak, stats as dataclasses."""

import ctypes as C
import os
import weakref
from collections import deque
from dataclasses import dataclass, fields

from . import constants as K
from . import types as T
from . import types2026 as T26
from ._lib import BUF, UmqError, lib

BIND_INFO_MAX = 512
_ALL, _TX, _RX = K.UMQ_IO_ALL, K.UMQ_IO_TX, K.UMQ_IO_RX


def _addr(ptr):
    return C.cast(ptr, C.c_void_p).value or 0


def _ptr(addr):
    return C.cast(C.c_void_p(addr), BUF)


def _buf(addr):
    return T.umq_buf_t.from_address(addr)


@dataclass(frozen=True)
class FlowControl:
    """`umq_flow_control_cfg_t`: 0 means the library's default (and out-of-range values are clamped)."""

    initial_window: int = 0
    notify_interval: int = 0
    use_atomic_window: bool = False
    # The July 2026 revision's credit requests (ignored by a December library): whether grants
    # are bounded by posted buffers, when unused credit goes back, when an unanswered request
    # fails the sender's posts (-1: never), the largest request and the threshold to ask at.
    is_limited: bool = False
    timeout_ms: int = 0
    fc_req_timeout_ms: int = 0
    max_credits_request: int = 0
    min_reserved_credit: int = 0


def _fill_ip(dev_info, ip):
    """An IPv4 or IPv6 address (text) into a dev_info, in the assign mode its form says."""
    if ":" in ip:
        dev_info.assign_mode = K.UMQ_DEV_ASSIGN_MODE_IPV6
        dev_info.ipv6.ip_addr = ip.encode()
    else:
        dev_info.assign_mode = K.UMQ_DEV_ASSIGN_MODE_IPV4
        dev_info.ipv4.ip_addr = ip.encode()


# The contexts entered in this process. In a child made by fork they are the parent's: the
# library gives the child none of the parent's state (docs/USER_GUIDE.md, "fork"), so their
# exit there releases nothing, and the child enters contexts of its own.
_entered = weakref.WeakSet()


def _forget_parents_contexts():
    for ctx in list(_entered):
        ctx.active = False
        ctx.inherited = True
    _entered.clear()


os.register_at_fork(after_in_child=_forget_parents_contexts)


class Umq:
    """`umq_init` on enter, `umq_uninit` on exit. Buffers still held at exit are invalidated.
    In a child made by fork, a context the parent entered is inert: its exit releases nothing.

    Keywords: pro (pro API, default True), flow_control (a FlowControl, or True for defaults),
    buf_mode, headroom, stats, trans_mode and ip (one trans_info entry, as the reference examples
    pass: IPv4 or IPv6 text, in the matching assign mode, a link-local IPv6 one with or without
    its zone, fe80::1%eth0; ip=None for none), extra_features (raw
    feature bits)."""

    def __init__(
        self,
        *,
        pro=True,
        flow_control=None,
        buf_mode=K.UMQ_BUF_SPLIT,
        headroom=0,
        stats=False,
        trans_mode=K.UMQ_TRANS_MODE_UB,
        ip="127.0.0.1",
        extra_features=0,
        io_lock_free=False,
    ):
        self.lib = lib()
        self.abi = self.lib.abi
        cfg = T26.umq_init_cfg_t() if self.abi == 2026 else T.umq_init_cfg_t()
        cfg.buf_mode = buf_mode
        cfg.feature = (K.UMQ_FEATURE_API_PRO if pro else K.UMQ_FEATURE_API_BASE) | extra_features
        if stats:
            cfg.feature |= K.UMQ_FEATURE_ENABLE_STATS
        if flow_control:
            fc = FlowControl() if flow_control is True else flow_control
            cfg.feature |= K.UMQ_FEATURE_ENABLE_FLOW_CONTROL
            if self.abi == 2026:
                # The July revision has no notify interval: the library's default applies.
                cfg.flow_control.initial_credit = fc.initial_window
                cfg.flow_control.is_limited = fc.is_limited
                cfg.flow_control.timeout_ms = fc.timeout_ms
                cfg.flow_control.fc_req_timeout_ms = fc.fc_req_timeout_ms
                cfg.flow_control.max_credits_request = fc.max_credits_request
                cfg.flow_control.min_reserved_credit = fc.min_reserved_credit
            else:
                cfg.flow_control.initial_window = fc.initial_window
                cfg.flow_control.notify_interval = fc.notify_interval
            cfg.flow_control.use_atomic_window = fc.use_atomic_window
        cfg.headroom_size = headroom
        cfg.io_lock_free = io_lock_free
        if ip is not None:
            cfg.trans_info_num = 1
            cfg.trans_info[0].trans_mode = trans_mode
            _fill_ip(cfg.trans_info[0].dev_info, ip)
        self.cfg = cfg
        self.trans_mode = trans_mode
        self.ip = ip or "127.0.0.1"
        self._live = weakref.WeakSet()  # Buffers objects that still own memory
        self.active = False
        self.inherited = False

    def __enter__(self):
        self.lib.check(self.lib.umq_init(C.byref(self.cfg)), "umq_init")
        self.active = True
        _entered.add(self)
        return self

    def __exit__(self, *exc):
        if self.inherited:
            return
        _entered.discard(self)
        # Members of a shared receive queue first: a main queue outlives them.
        queues = [q for q in list(self._live) if isinstance(q, Queue)]
        for queue in sorted(queues, key=lambda q: q.share_rq is None):
            queue.destroy()
        for bufs in list(self._live):
            bufs.free()
        self.lib.umq_uninit()
        self.active = False

    def queue(self, name="q", *, depth=64, rx_depth=None, tx_depth=None, mode=K.UMQ_MODE_POLLING,
              rx_buf_size=None, tx_buf_size=None, trans_mode=None, flags=0, share_rq=None, umq_ctx=None):
        """Creates a queue (`umq_create`). July 2026 only: `flags` adds create flags (for example
        `types2026.UMQ_CREATE_FLAG_MAIN_UMQ`), `share_rq` the main Queue whose receive queue this
        one shares (a sub-queue with `UMQ_CREATE_FLAG_SUB_UMQ`, a logic queue with
        `UMQ_CREATE_FLAG_SHARE_TRANSPORT`), `umq_ctx` the context its messages are tagged with."""
        extra = (flags, share_rq, umq_ctx)
        return Queue(self, name, rx_depth or depth, tx_depth or depth, mode, rx_buf_size, tx_buf_size,
                     self.trans_mode if trans_mode is None else trans_mode, extra)

    def transport_pool_stats(self, queue):
        """`umq_stats_transport_pool_get` (July 2026): the process's transport pool."""
        s = T26.umq_transport_pool_stats_t()
        self.lib.check(self.lib.umq_stats_transport_pool_get(queue.handle, C.byref(s)), "umq_stats_transport_pool_get")
        return {name: getattr(s, name) for name, _ in s._fields_}

    def pair(self, depth=64, mode=K.UMQ_MODE_POLLING, **kw):
        """Two queues bound to each other through their bind info."""
        a, b = self.queue("a", depth=depth, mode=mode, **kw), self.queue("b", depth=depth, mode=mode, **kw)
        a.bind(b.bind_info())
        b.bind(a.bind_info())
        return a, b

    def alloc(self, size, count=1, *, umqh=0, headroom=None):
        """`count` buffers of `size` bytes each, owned by the returned Buffers."""
        return Buffers.alloc(self, size, count, umqh=umqh, headroom=headroom)

    @property
    def types(self):
        """The module of the structures the loaded revision takes (`types2026` for July 2026)."""
        return T26 if self.abi == 2026 else T

    @property
    def batch_size(self):
        """`UMQ_BATCH_SIZE` of the loaded revision: the most WRs a post or buffers an allocation
        takes (64 in December 2025, 256 in July 2026)."""
        return 256 if self.abi == 2026 else K.UMQ_BATCH_SIZE

    def event_type(self, december_type):
        """An async event type (`UMQ_EVENT_...`, as the constants give December's values) as
        the loaded revision numbers it: July's put four queue events before
        `UMQ_EVENT_PORT_ACTIVE`, and the types from there on moved four up."""
        if self.abi == 2026 and december_type >= K.UMQ_EVENT_PORT_ACTIVE:
            return december_type + 4
        return december_type

    def log_config(self):
        cfg = self.types.umq_log_config_t()
        self.lib.check(self.lib.umq_log_config_get(C.byref(cfg)), "umq_log_config_get")
        return cfg

    def set_log_level(self, level):
        cfg = self.types.umq_log_config_t(log_flag=K.UMQ_LOG_FLAG_LEVEL, level=level)
        self.lib.check(self.lib.umq_log_config_set(C.byref(cfg)), "umq_log_config_set")


class Buffers:
    """Messages from `umq_buf_alloc` (each a list of one or more qbufs) that this object owns.

    Whatever it still owns is freed by `free()`, at the end of a `with` block (also on an
    exception) and when its Umq context exits. Posting hands messages over to the library."""

    def __init__(self, umq, messages):
        self.umq = umq
        self.messages = messages  # list of lists of qbuf addresses
        umq._live.add(self)

    @classmethod
    def alloc(cls, umq, size, count=1, *, umqh=0, headroom=None):
        opt = None
        if headroom is not None:
            opt = C.byref(umq.types.umq_alloc_option_t(flag=K.UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE, headroom_size=headroom))
        C.set_errno(0)
        head = umq.lib.umq_buf_alloc(size, count, umqh, opt)
        if not head:
            raise umq.lib.errno_error("umq_buf_alloc")
        return cls(umq, split_messages(_addr(head)))

    @classmethod
    def for_payloads(cls, umq, payloads, umqh=0):
        """One message per payload, each sized to it, filled, its pro fields zero but for
        opcode SEND."""
        bufs = cls(umq, [])
        try:
            for p in payloads:
                one = cls.alloc(umq, len(p), 1, umqh=umqh)
                bufs.messages += one.detach()
                bufs.write(len(bufs) - 1, p)
                head = bufs.head(len(bufs) - 1)
                C.memset(head.qbuf_ext, 0, C.sizeof(head.qbuf_ext))
                T.pro(head).opcode = K.UMQ_OPC_SEND
        except BaseException:
            bufs.free()
            raise
        return bufs

    def __len__(self):
        return len(self.messages)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.free()

    def head(self, i):
        """The first `umq_buf_t` of message i."""
        return _buf(self.messages[i][0])

    def pro(self, i):
        """The pro-API fields (`umq_buf_pro_t`) of message i."""
        return T.pro(self.head(i))

    def write(self, i, data):
        """Copies `data` into message i and sets its sizes."""
        frags = [_buf(a) for a in self.messages[i]]
        if len(data) > sum(f.buf_size for f in frags):
            raise ValueError(f"{len(data)} bytes do not fit in message {i}")
        frags[0].total_data_size = len(data)
        pos = 0
        for f in frags:
            n = min(f.buf_size, len(data) - pos)
            C.memmove(f.buf_data, data[pos : pos + n], n)
            f.data_size = n
            pos += n

    def read(self, i):
        return read_message(self.messages[i][0])

    def chain(self, indices=None):
        """Links messages (all, or those at `indices`) into one list and returns its head pointer."""
        addrs = [a for i in (range(len(self)) if indices is None else indices) for a in self.messages[i]]
        for a, b in zip(addrs, addrs[1:]):
            _buf(a).qbuf_next = _ptr(b)
        if addrs:
            _buf(addrs[-1]).qbuf_next = None
            return _ptr(addrs[0])
        return BUF()

    def index_of(self, ptr):
        """Index of the message whose head is `ptr`."""
        a = _addr(ptr)
        return next(i for i, m in enumerate(self.messages) if m[0] == a)

    def detach(self, count=None):
        """Gives up ownership of the first `count` messages (all by default) and returns them."""
        count = len(self) if count is None else count
        gone, self.messages = self.messages[:count], self.messages[count:]
        return gone

    def free(self):
        if self.messages and self.umq.active:
            self.umq.lib.umq_buf_free(self.chain())
        self.messages = []


def split_messages(head):
    """Splits a qbuf list into messages: a message is a head plus the fragments its
    `total_data_size` needs (as the library splits WRs)."""
    messages = []
    a = head
    while a:
        frags, need = [a], _buf(a).total_data_size
        got = _buf(a).data_size
        a = _addr(_buf(a).qbuf_next)
        while a and got < need:
            frags.append(a)
            got += _buf(a).data_size
            a = _addr(_buf(a).qbuf_next)
        messages.append(frags)
    return messages


def read_message(head):
    """The bytes of the message at `head` (following fragments up to its total size)."""
    return _read_span(head)[0]


def read_messages(head):
    """The messages of a list `umq_dequeue` returned: each is its head's `total_data_size`
    bytes of buffers, and the buffer after its last heads the next message."""
    out, a = [], head
    while a:
        data, a = _read_span(a)
        out.append(data)
    return out


def _read_span(head):
    """One message's bytes from `head` on, and the address of the buffer after it (0 at the
    end of the list)."""
    out, need, a = bytearray(), _buf(head).total_data_size, head
    while a:
        b = _buf(a)
        out += C.string_at(b.buf_data, b.data_size)
        a = _addr(b.qbuf_next)
        if len(out) >= need:
            break
    return bytes(out), a


@dataclass(frozen=True)
class Completion:
    """One polled buffer: a tx completion (the posted WR) or a received message."""

    direction: int  # UMQ_IO_TX or UMQ_IO_RX
    status: int
    opcode: int
    user_ctx: int
    imm: int
    data: bytes
    umq_ctx: int = 0  # July 2026: the queue a shared receive queue's message or update is for

    @property
    def is_update(self):
        """A flow-control update: the receiver got credit (with or without data)."""
        return self.status in (K.UMQ_BUF_FLOW_CONTROL_UPDATE, K.UMQ_FAKE_BUF_FC_UPDATE)


@dataclass(frozen=True)
class FlowStats:
    """`umq_flowcontrol_stats_t`."""

    local_rx_posted: int
    remote_rx_window: int
    total_local_rx_posted: int
    total_local_rx_notified: int
    total_local_rx_posted_error: int
    total_remote_rx_received: int
    total_remote_rx_consumed: int
    total_remote_rx_received_error: int
    total_flow_controlled_wr: int

    def check_identities(self):
        """The two per-queue identities of the flow-control spec."""
        assert self.remote_rx_window == self.total_remote_rx_received - self.total_remote_rx_consumed, self
        assert self.local_rx_posted == self.total_local_rx_posted - self.total_local_rx_notified, self


@dataclass(frozen=True)
class ExtFlowStats:
    """libumq's `umq_ext_flow_control_stats_t`."""

    piggybacked: int
    standalone: int
    area_only: int
    area_refreshes: int
    ctrl_grants: int
    ctrl_budget: int
    ctrl_credit: int
    queued_wr: int
    credit_stalls: int
    initial_window: int
    notify_interval: int
    queued_mode: int
    atomic_window: int
    rx_without_buffer: int


@dataclass(frozen=True)
class TransportStats:
    """libumq's `umq_ext_transport_stats_t`: which transport serves the binding, how many
    messages crossed shared memory with one copy (by reference, or placed by the sender), and
    how many packets of a rate-limited queue's messages went on the wire."""

    transport: int
    shared_pool: int
    shared_pool_bytes: int
    by_ref_wr: int
    by_ref_bytes: int
    placed_wr: int
    placed_bytes: int
    placed_rx: int
    paced_packets: int
    one_sided_mapped_wr: int
    one_sided_kernel_wr: int
    calls_sent: int
    calls_answered: int
    one_sided_rma_wr: int


@dataclass(frozen=True)
class PacingStats:
    """libumq's `umq_ext_pacing_stats_t`: a queue's rate limit and what the pacer released."""

    rate_bps: int
    packets: int
    bytes: int
    ticks_parked: int
    achieved_bps: int
    pmtu: int
    ticks_per_s: int
    held_wr: int


def pfc_frame(enabled, quanta, *, opcode=0x0101, src=bytes.fromhex("02000000000a")):
    """A 64-byte MAC control frame to the pause multicast address, FCS (CRC-32, least
    significant byte first) included: 802.1Qbb PFC (opcode 0x0101) pausing the priorities set
    in `enabled` for `quanta` (eight times), or any other opcode (not a pause frame)."""
    import struct
    import zlib

    head = bytes.fromhex("0180c2000001") + bytes(src) + struct.pack(">HHH", 0x8808, opcode, enabled)
    body = (head + struct.pack(">8H", *quanta)).ljust(60, b"\0")
    return body + struct.pack("<I", zlib.crc32(body))


def _from_struct(cls, s):
    return cls(**{f.name: getattr(s, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class RemoteBuffer:
    """What a peer needs to WRITE to or READ from one of our buffers (see docs/USER_GUIDE.md)."""

    addr: int
    length: int
    token_id: int
    token_value: int


class Queue:
    """A UMQ queue handle with helpers; `destroy()` (or the Umq context's exit) releases it."""

    def __init__(self, umq, name, rx_depth, tx_depth, mode, rx_buf_size, tx_buf_size, trans_mode,
                 extra=(0, None, None)):
        self.umq, self.lib, self.name, self.mode = umq, umq.lib, name, mode
        self._dequeued = deque()  # messages a dequeue returned beyond the first
        o = umq.types.umq_create_option_t(trans_mode=trans_mode, rx_depth=rx_depth, tx_depth=tx_depth, mode=mode)
        _fill_ip(o.dev_info, umq.ip)
        o.name = name.encode()
        o.create_flag = K.UMQ_CREATE_FLAG_RX_DEPTH | K.UMQ_CREATE_FLAG_TX_DEPTH | K.UMQ_CREATE_FLAG_QUEUE_MODE
        flags, share_rq, umq_ctx = extra
        self.share_rq = share_rq
        if flags or share_rq is not None or umq_ctx is not None:
            if umq.abi != 2026:
                raise ValueError("shared receive queues and transport pools are the July 2026 revision's")
            o.create_flag |= flags
            if share_rq is not None:
                o.create_flag |= T26.UMQ_CREATE_FLAG_SHARE_RQ
                o.share_rq_umqh = share_rq.handle
            if umq_ctx is not None:
                o.create_flag |= T26.UMQ_CREATE_FLAG_UMQ_CTX
                o.umq_ctx = umq_ctx
        if rx_buf_size is not None:
            o.create_flag |= K.UMQ_CREATE_FLAG_RX_BUF_SIZE
            o.rx_buf_size = rx_buf_size
        if tx_buf_size is not None:
            o.create_flag |= K.UMQ_CREATE_FLAG_TX_BUF_SIZE
            o.tx_buf_size = tx_buf_size
        C.set_errno(0)
        self.handle = self.lib.umq_create(C.byref(o))
        if not self.handle:
            raise self.lib.errno_error("umq_create")
        umq._live.add(self)

    def __repr__(self):
        return f"Queue({self.name!r}, {self.handle:#x})"

    # lifecycle

    def bind_info(self):
        info = (C.c_uint8 * BIND_INFO_MAX)()
        C.set_errno(0)
        n = self.lib.umq_bind_info_get(self.handle, info, BIND_INFO_MAX)
        if n == 0:
            raise self.lib.errno_error("umq_bind_info_get")
        return bytes(info[:n])

    def bind(self, info):
        raw = (C.c_uint8 * max(len(info), 1)).from_buffer_copy(info or b"\0")
        self.lib.check(self.lib.umq_bind(self.handle, raw, len(info)), "umq_bind")

    def unbind(self):
        self.lib.check(self.lib.umq_unbind(self.handle), "umq_unbind")

    def destroy(self):
        if self.handle and self.umq.active:
            self.lib.check(self.lib.umq_destroy(self.handle), "umq_destroy")
        self.handle = 0
        self.umq._live.discard(self)

    @property
    def state(self):
        return K.State(self.lib.umq_state_get(self.handle))

    # pro API

    def post(self, bufs, direction=_TX):
        """Posts every message `bufs` owns. Accepted ones become the library's; on failure raises
        UmqError with `bad_index`, and the refused messages stay in `bufs`."""
        if not len(bufs):
            return 0
        bad = BUF()
        rc = self.lib.umq_post(self.handle, bufs.chain(), self.io(direction), C.byref(bad))
        if rc == 0:
            bufs.detach()
            return 0
        index = bufs.index_of(bad) if bad else 0
        bufs.detach(index)
        raise UmqError(rc, "umq_post", bad_index=index)

    def send(self, payloads, *, opcode=K.UMQ_OPC_SEND, imm=0, user_ctx=0, remote=None, shared_pool=True):
        """Posts one WR per payload; returns how many were accepted (fewer on -UMQ_ERR_EAGAIN,
        whose refused buffers are freed here). `opcode`/`imm`/`user_ctx` (and `remote`) may be
        per-payload lists.
        The payloads are copied into buffers of the queue's shared pool, or with
        `shared_pool=False` of the process pool: between processes the sender then writes
        large messages whole into the receiver's buffers instead of sharing the copy with it,
        which is faster when the receiving side is the slower one (docs/USER_GUIDE.md)."""
        payloads = list(payloads)
        owner = self.handle if shared_pool else 0
        with Buffers.for_payloads(self.umq, payloads, owner) as bufs:
            for i in range(len(bufs)):
                p = bufs.pro(i)
                p.opcode = opcode[i] if isinstance(opcode, (list, tuple)) else opcode
                p.imm_data = imm[i] if isinstance(imm, (list, tuple)) else imm
                p.user_ctx = user_ctx[i] if isinstance(user_ctx, (list, tuple)) else user_ctx
                if remote is not None:
                    r = remote[i] if isinstance(remote, (list, tuple)) else remote
                    p.remote_sge.addr, p.remote_sge.length = r.addr, r.length
                    p.remote_sge.token_id, p.remote_sge.token_value = r.token_id, r.token_value
            try:
                self.post(bufs, _TX)
            except UmqError as e:
                if e.code != -K.UMQ_ERR_EAGAIN:
                    raise
                return e.bad_index
            return len(payloads)

    def write(self, data, remote, imm=None, user_ctx=0):
        """RDMA WRITE (or WRITE_IMM when `imm` is given) of `data` into the peer's buffer `remote`."""
        opcode = K.UMQ_OPC_WRITE if imm is None else K.UMQ_OPC_WRITE_IMM
        return self.send([data], opcode=opcode, imm=imm or 0, user_ctx=user_ctx, remote=remote)

    def read(self, size, remote, user_ctx=0):
        """RDMA READ of `size` bytes from `remote`; the data arrives in the tx completion."""
        part = RemoteBuffer(remote.addr, min(size, remote.length), remote.token_id, remote.token_value)
        return self.send([bytes(size)], opcode=K.UMQ_OPC_READ, user_ctx=user_ctx, remote=part)

    def post_recv(self, count, size=4096):
        """Posts `count` receive buffers of `size` bytes; returns how many were accepted."""
        done = 0
        while done < count:
            n = min(count - done, K.UMQ_BATCH_SIZE)
            with Buffers.alloc(self.umq, size, n, umqh=self.handle) as bufs:
                try:
                    self.post(bufs, _RX)
                except UmqError as e:
                    if e.code != -K.UMQ_ERR_EAGAIN:
                        raise
                    return done + e.bad_index
            done += n
        return done

    def poll_raw(self, direction=_ALL, max_count=K.UMQ_BATCH_SIZE, tp=None):
        """`umq_poll`: the polled buffer pointers, now the caller's (free them). July 2026: `tp`
        names a transport resource whose send completions a main queue sharing its transport
        polls (`UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX`)."""
        out = (BUF * max(max_count, 1))()
        n = self.lib.check(self.lib.umq_poll(self.handle, self.io(direction, tp), out, max_count), "umq_poll")
        return [out[i] for i in range(n)]

    def poll(self, direction=_ALL, max_count=K.UMQ_BATCH_SIZE, tp=None):
        """Polls and returns Completions, copying the data out and freeing the buffers."""
        done = []
        for ptr in self.poll_raw(direction, max_count, tp):
            b, p = ptr.contents, T.pro(ptr.contents)
            # The July revision's umq_ctx sits where December's pro header has rsvd1[0].
            ctx = p.rsvd1[0] if self.umq.abi == 2026 else 0
            done.append(Completion(b.io_direction, b.status, p.opcode, p.user_ctx, p.imm_data,
                                   read_message(_addr(ptr)), ctx))
            self.lib.umq_buf_break_and_free(ptr)
        return done

    def poll_until(self, count, direction=_ALL, spins=1_000_000):
        """Polls until `count` completions arrived (or `spins` empty polls passed)."""
        done = []
        for _ in range(spins):
            if len(done) >= count:
                break
            done += self.poll(direction, min(K.UMQ_BATCH_SIZE, count - len(done)))
        return done

    def expose(self, bufs, i=0):
        """The RemoteBuffer for message i of `bufs`, to hand to the peer."""
        b = bufs.head(i)
        return RemoteBuffer(b.buf_data, b.buf_size, b.token_id, b.token_value)

    # base API

    def enqueue(self, data):
        """`umq_enqueue` of one message (a list of buffers is one message in the base API)."""
        with Buffers.for_payloads(self.umq, [data], self.handle) as bufs:
            bad = BUF()
            rc = self.lib.umq_enqueue(self.handle, bufs.chain(), C.byref(bad))
            if rc != 0:
                raise UmqError(rc, "umq_enqueue")
            bufs.detach()

    def dequeue(self):
        """`umq_dequeue`: the next message's bytes, or None. One call of the library returns
        the messages waiting as one list (one at a time in IPC mode); those after the first
        are kept here for the next calls."""
        if self._dequeued:
            return self._dequeued.popleft()
        ptr = self.lib.umq_dequeue(self.handle)
        if not ptr:
            return None
        messages = read_messages(_addr(ptr))
        self.lib.umq_buf_free(ptr)
        self._dequeued.extend(messages[1:])
        return messages[0]

    def notify(self):
        self.lib.umq_notify(self.handle)

    # interrupts

    def _opt(self, direction):
        opt = self.umq.types.umq_interrupt_option_t
        return C.byref(opt(flag=K.UMQ_INTERRUPT_FLAG_IO_DIRECTION, direction=direction))

    def io(self, direction, tp=None):
        """The direction argument of `umq_post` and `umq_poll` as the loaded revision takes it:
        the value in December's, a `umq_io_option_t` in July's (naming transport resource `tp`)."""
        if self.umq.abi != 2026:
            return direction
        o = T26.umq_io_option_t(flag=K.UMQ_IO_OPTION_FLAG_DIRECTION, io_direction=direction)
        if tp is not None:
            o.flag |= T26.UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX
            o.tp_handle_idx = tp
        return C.byref(o)

    # transport pools (July 2026)

    def tp_create(self):
        """`umq_transport_pool_resource_create` through this main queue: the resource's index."""
        C.set_errno(0)
        idx = self.lib.umq_transport_pool_resource_create(self.handle, C.byref(T26.umq_tp_resource_create_option_t()))
        if idx == 0xFFFF_FFFF:
            raise self.lib.errno_error("umq_transport_pool_resource_create")
        return idx

    def tp_destroy(self, idx):
        self.lib.check(self.lib.umq_transport_pool_resource_destroy(self.handle, idx), "umq_transport_pool_resource_destroy")

    def tp_mark_err(self, idx):
        self.lib.check(self.lib.umq_transport_pool_resource_modify(self.handle, idx), "umq_transport_pool_resource_modify")

    def tp_event_fd(self):
        return self.lib.check(self.lib.umq_transport_pool_eventfd_get(self.handle), "umq_transport_pool_eventfd_get")

    def interrupt_fd(self, direction=_RX):
        C.set_errno(0)
        fd = self.lib.umq_interrupt_fd_get(self.handle, self._opt(direction))
        if fd < 0:
            raise self.lib.errno_error("umq_interrupt_fd_get")
        return fd

    def rearm(self, direction=_RX, solicited=False):
        self.lib.check(self.lib.umq_rearm_interrupt(self.handle, solicited, self._opt(direction)), "umq_rearm_interrupt")

    def wait(self, timeout_ms, direction=_RX):
        """`umq_wait_interrupt`: the number of events (0 on timeout)."""
        return self.lib.check(self.lib.umq_wait_interrupt(self.handle, timeout_ms, self._opt(direction)), "umq_wait_interrupt")

    def ack(self, nevents, direction=_RX):
        self.lib.umq_ack_interrupt(self.handle, nevents, self._opt(direction))

    # flow control

    def user_ctl(self, opcode, in_addr=0, in_len=0, out=None):
        """`umq_user_ctl`; `out` is a ctypes object to fill (or None)."""
        cin = T.umq_user_ctl_in_t(addr=in_addr, len=in_len, opcode=opcode)
        cout = T.umq_user_ctl_out_t()
        if out is not None:
            cout.addr, cout.len = C.addressof(out), C.sizeof(out)
        return self.lib.check(self.lib.umq_user_ctl(self.handle, C.byref(cin), C.byref(cout)), "umq_user_ctl")

    def stats(self):
        s = T.umq_flowcontrol_stats_t()
        self.user_ctl(K.UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY, out=s)
        return _from_struct(FlowStats, s)

    def ext_stats(self):
        s = T.umq_ext_flow_control_stats_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS, out=s)
        return _from_struct(ExtFlowStats, s)

    def transport_stats(self):
        s = T.umq_ext_transport_stats_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_TRANSPORT_STATS, out=s)
        return _from_struct(TransportStats, s)

    def set_rate(self, bits_per_s):
        """Rate limit in bit/s (0: unlimited); libumq extension."""
        self.user_ctl(K.UMQ_EXT_OPCODE_PACING_RATE, in_addr=bits_per_s)

    def set_pmtu(self, pmtu):
        self.user_ctl(K.UMQ_EXT_OPCODE_PACING_PMTU, in_addr=pmtu)

    def set_tick_rate(self, ticks_per_s):
        """The process's pacing tick rate (through any queue)."""
        self.user_ctl(K.UMQ_EXT_OPCODE_PACING_TICK_RATE, in_addr=ticks_per_s)

    def set_priority(self, priority):
        """The queue's priority on its link, 0..7 (link-level pause and PFC)."""
        self.user_ctl(K.UMQ_EXT_OPCODE_PFC_PRIORITY, in_addr=priority)

    def pfc_config(self, **changes):
        """The link's settings as a umq_ext_pfc_config_t, after applying `changes` (field
        names of that struct; `address` as 6 bytes) when given."""
        c = T.umq_ext_pfc_config_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_PFC_CONFIG, out=c)
        if changes:
            for name, value in changes.items():
                if name == "address":
                    C.memmove(c.address, bytes(value), 6)
                else:
                    setattr(c, name, value)
            self.user_ctl(K.UMQ_EXT_OPCODE_PFC_CONFIG, in_addr=C.addressof(c), in_len=C.sizeof(c), out=c)
        return c

    def pfc_stats(self):
        s = T.umq_ext_pfc_stats_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_PFC_STATS, out=s)
        return s

    def pfc_send_frame(self, frame):
        f = T.umq_ext_pfc_frame_t(len=len(frame))
        C.memmove(f.bytes, bytes(frame), len(frame))
        self.user_ctl(K.UMQ_EXT_OPCODE_PFC_SEND_FRAME, in_addr=C.addressof(f), in_len=C.sizeof(f))

    def pfc_recv_frame(self):
        """The oldest control frame the link passed to us, or None."""
        f = T.umq_ext_pfc_frame_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_PFC_RECV_FRAME, out=f)
        return bytes(f.bytes[: f.len]) if f.len else None

    def pacing_stats(self):
        s = T.umq_ext_pacing_stats_t()
        self.user_ctl(K.UMQ_EXT_OPCODE_PACING_STATS, out=s)
        return _from_struct(PacingStats, s)

    def set_queued_mode(self, on):
        self.user_ctl(K.UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE, in_addr=int(bool(on)))

    def set_stall_timeout(self, ms):
        self.user_ctl(K.UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT, in_addr=ms)

    def tx_size_left(self):
        """Lower bound on the send WRs postable now (credit window included); libumq extension."""
        return self.lib.umq_tx_size_left(self.handle)

    def rx_size_left(self):
        return self.lib.umq_rx_size_left(self.handle)

    def fi_endpoint(self):
        """The libfabric-layout `struct fid_ep *` of this queue (an address)."""
        return self.lib.umq_fi_ep_get(self.handle)


def check_pair_identities(a, b):
    """All three identities of the spec for a bound pair at a quiescent point."""
    sa, sb = a.stats(), b.stats()
    sa.check_identities()
    sb.check_identities()
    assert sa.total_local_rx_notified == sb.total_remote_rx_received, (sa, sb)
    assert sb.total_local_rx_notified == sa.total_remote_rx_received, (sa, sb)
    return sa, sb
