//! The target side of a WR, the same for every provider: where a message's bytes are, how
//! many receive buffers it takes, landing it and completing the receive (with the flow-control
//! update it may carry), and a READ's response landing in the WR that asked for it.

use super::LinkError;
use super::wire::{Outcome, Side, Wire, needs_rx_buffer};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow;
use std::ptr;

/// The data of the WR `wr` (its buffers only: the caller's list goes on behind it).
pub(crate) fn pieces(wr: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> + Clone {
    crate::buf::wr_bufs(wr).map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).data_size as usize) })
}

/// The capacity of a chain of receive buffers the library linked (it ends at a NULL `qbuf_next`).
pub(crate) fn room(head: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> {
    crate::buf::iter(head).map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).buf_size as usize) })
}

/// `pieces` from `offset` bytes in: the pieces that end before it left out, the one it falls in
/// trimmed to start there.
pub(crate) fn pieces_from(
    pieces: impl Iterator<Item = (*mut u8, usize)>,
    offset: usize,
) -> impl Iterator<Item = (*mut u8, usize)> {
    let mut skip = offset;
    pieces.filter_map(move |(p, n)| {
        if skip >= n {
            skip -= n;
            return None;
        }
        let rest = (p.wrapping_add(skip), n - skip);
        skip = 0;
        Some(rest)
    })
}

/// Copies the first `len` bytes of WR `wr`'s message to `dst`: one copy when its first buffer
/// holds them (most WRs), else piece by piece.
#[inline]
pub(crate) fn copy_message(wr: *mut umq_buf_t, dst: *mut u8, len: usize) {
    let h = unsafe { &*wr };
    if h.data_size as usize >= len {
        // ptr::copy, not copy_nonoverlapping: a WRITE may target the very buffer it reads from.
        unsafe { ptr::copy(h.buf_data as *const u8, dst, len) };
    } else {
        copy_pieces(pieces(wr), std::iter::once((dst, len)));
    }
}

/// Copies `dst.len()` bytes of WR `wr`'s message, starting `from` bytes in.
pub(crate) fn copy_range(wr: *mut umq_buf_t, from: usize, dst: &mut [u8]) {
    let whole = std::iter::once((dst.as_mut_ptr(), dst.len()));
    copy_pieces(pieces_from(pieces(wr), from), whole);
}

/// Lands the `len` bytes a READ fetched from `src` in the READ WR `wr`: its buffers (the ones
/// its `total_data_size` spanned when posted) fill in order, each `data_size` says what it
/// holds and `total_data_size` what landed. Bytes beyond the buffers' room are dropped.
pub(crate) fn land_read(wr: *mut umq_buf_t, src: *const u8, len: usize) {
    let h = unsafe { &mut *wr };
    if h.data_size >= h.total_data_size {
        // A READ into one buffer (the usual one): what `set_read_sizes` and the copy below
        // do for it, without walking the list.
        let n = len.min(h.buf_size as usize);
        (h.data_size, h.total_data_size) = (n as u32, n as u32);
        unsafe { ptr::copy(src, h.buf_data as *mut u8, n) };
        return;
    }
    let nbufs = crate::buf::wr_bufs(wr).count();
    set_read_sizes(wr, nbufs, len);
    let room = crate::buf::iter(wr)
        .take(nbufs)
        .map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).data_size as usize) });
    copy_pieces(std::iter::once((src as *mut u8, len)), room);
}

/// Records in the READ WR `wr`, whose first `nbufs` buffers are its own, that a READ of `len`
/// bytes filled them in order (what did not fit is dropped).
pub(crate) fn set_read_sizes(wr: *mut umq_buf_t, nbufs: usize, len: usize) {
    let mut left = len as u64;
    for b in crate::buf::iter(wr).take(nbufs) {
        let b = unsafe { &mut *b };
        b.data_size = left.min(b.buf_size as u64) as u32;
        left -= b.data_size as u64;
    }
    unsafe { (*wr).total_data_size = (len as u64 - left) as u32 };
}

/// Copies from `src` pieces into `dst` pieces until either runs out; returns bytes copied.
pub(crate) fn copy_pieces(
    mut src: impl Iterator<Item = (*mut u8, usize)>,
    mut dst: impl Iterator<Item = (*mut u8, usize)>,
) -> usize {
    let (Some((mut s, mut sl)), Some((mut d, mut dl))) = (src.next(), dst.next()) else {
        return 0;
    };
    let mut total = 0;
    loop {
        let n = sl.min(dl);
        // ptr::copy, not copy_nonoverlapping: a WRITE may target the very buffer it reads from.
        unsafe { ptr::copy(s, d, n) };
        total += n;
        (s, sl, d, dl) = (s.wrapping_add(n), sl - n, d.wrapping_add(n), dl - n);
        if sl == 0 {
            let Some(next) = src.next() else { return total };
            (s, sl) = next;
        }
        if dl == 0 {
            let Some(next) = dst.next() else { return total };
            (d, dl) = next;
        }
    }
}

/// How many posted receive buffers a message of `len` bytes takes, if enough are posted.
pub(crate) fn rx_buffers_needed(dst: &mut Side, len: u64, opcode: umq_opcode_t) -> Option<usize> {
    if !dst.fragments || opcode == UMQ_OPC_WRITE_IMM {
        return (dst.wire.rq.has_posted()).then_some(1);
    }
    posted_buffers_holding(dst.wire, len)
}

/// How many of the posted receive buffers, from the next, hold `len` bytes together; None
/// when all of them do not.
pub(crate) fn posted_buffers_holding(w: &Wire, len: u64) -> Option<usize> {
    let mut room = 0u64;
    for (i, b) in w.rq.posted().enumerate() {
        room += unsafe { (*b).buf_size } as u64;
        if room >= len {
            return Some(i + 1);
        }
    }
    None
}

/// Takes `n` posted receive buffers and links them into one message.
pub(crate) fn take_rx(dst: &mut Side, n: usize) -> *mut umq_buf_t {
    let head = dst.wire.rq.take_posted().unwrap();
    let mut tail = head;
    for _ in 1..n {
        let b = dst.wire.rq.take_posted().unwrap();
        unsafe { (*tail).qbuf_next = b };
        tail = b;
    }
    unsafe { (*tail).qbuf_next = ptr::null_mut() };
    head
}

/// Gives back buffers `take_rx` took for a message that will not land after all: they are
/// posted again, first in line, in their order.
pub(crate) fn untake_rx(dst: &mut Side, head: *mut umq_buf_t) {
    let bufs: Vec<_> = crate::buf::iter(head).collect();
    for &b in bufs.iter().rev() {
        unsafe { (*b).qbuf_next = ptr::null_mut() };
        dst.wire.rq.give_back(b);
    }
}

/// Whether a receive with this status holds the message's data (a window update piggybacked on
/// a SEND does).
pub(crate) fn carries_data(status: u32) -> bool {
    status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE
}

/// Fills the receive completion of a message that landed in the `head` chain.
pub(crate) unsafe fn complete_rx(
    dst: &mut Side,
    head: *mut umq_buf_t,
    nbufs: usize,
    len: u64,
    opcode: umq_opcode_t,
    imm: u64,
    status: u32,
) {
    let (opcode, imm, status) = receive_flow_control(dst.wire, opcode, imm, status);
    let mut left = len;
    for (i, b) in crate::buf::iter(head).enumerate() {
        let b = unsafe { &mut *b };
        let used = left.min(b.buf_size as u64);
        b.data_size = if opcode == UMQ_OPC_WRITE_IMM || !carries_data(status) {
            0
        } else {
            used as u32
        };
        left -= used;
        b.umqh = dst.umqh;
        b.set_status(status);
        b.set_io_direction(UMQ_IO_RX);
        b.set_first_fragment(i == 0);
    }
    let h = unsafe { &mut *head };
    h.total_data_size = if opcode == UMQ_OPC_WRITE_IMM || !carries_data(status) {
        0
    } else {
        len as u32
    };
    let pro = h.pro_mut();
    pro.opcode = opcode;
    pro.imm_data = if opcode == UMQ_OPC_SEND { 0 } else { imm };
    dst.wire.rq.complete(head, nbufs);
}

/// With flow control on: takes a piggybacked window update out of the immediate, leaving the
/// user a plain SEND marked `UMQ_BUF_FLOW_CONTROL_UPDATE`. (The engines count arrivals per
/// round, not here.)
pub(crate) fn receive_flow_control(
    w: &mut Wire,
    opcode: umq_opcode_t,
    imm: u64,
    status: u32,
) -> (umq_opcode_t, u64, u32) {
    if opcode != UMQ_OPC_SEND_IMM || !flow::is_private(imm) {
        return (opcode, imm, status);
    }
    let Some(f) = w.flow.as_mut() else {
        return (opcode, imm, status);
    };
    if let Some(a) = flow::decode_imm(imm) {
        f.on_announcement(a);
    }
    // The July 2026 revision has no status for a message that also carried credit (its
    // updates come on their own, as `UMQ_FAKE_BUF_FC_UPDATE`): there the message stays plain.
    let status = if status == UMQ_BUF_SUCCESS && !cfg!(feature = "abi-2026") {
        UMQ_BUF_FLOW_CONTROL_UPDATE
    } else {
        status
    };
    (UMQ_OPC_SEND, 0, status)
}

/// Delivers a standalone window update into the peer's next posted buffer (one of those it
/// reserved for control): no data, status `UMQ_BUF_FLOW_CONTROL_UPDATE`.
pub fn deliver_standalone(dst: &mut Side, imm: u64) {
    let f = dst
        .wire
        .flow
        .as_mut()
        .expect("standalone to a queue without flow control");
    if let Some(a) = flow::decode_imm(imm) {
        f.on_announcement(a);
    }
    f.ctrl_arrived();
    let head = take_rx(dst, 1);
    // An empty SEND: no data, and the status says it carried a window update.
    unsafe {
        complete_rx(
            dst,
            head,
            1,
            0,
            UMQ_OPC_SEND,
            0,
            UMQ_BUF_FLOW_CONTROL_UPDATE,
        )
    };
}

/// A standalone window update from the peer, into our next posted receive buffer. False when
/// none is posted (it waits for one); Err from a peer that sends one without flow control.
pub(crate) fn receive_standalone(
    dst: &mut Side,
    imm: u64,
    out: &mut Outcome,
) -> Result<bool, LinkError> {
    if dst.wire.flow.is_none() {
        return Err(LinkError::Corrupt(
            "window update from a peer without flow control",
        ));
    }
    if !dst.wire.rq.has_posted() {
        return Ok(false);
    }
    deliver_standalone(dst, imm);
    out.rx_done += 1;
    Ok(true)
}

/// A control frame of the peer's link channel: a credit message of the July 2026 flow control
/// goes to the queue's credit machine, anything else to the link's pause machine. Err for a
/// credit frame no peer of ours sends, or one for a queue that does not run the protocol.
pub(crate) fn receive_control(w: &mut Wire, frame: &[u8]) -> Result<(), LinkError> {
    match crate::flow::credit::Msg::from_frame(frame) {
        None => crate::transport::pause::receive_frame(w.pause.as_ref(), frame),
        Some(Err(why)) => Err(LinkError::Corrupt(why)),
        Some(Ok(m)) => match w.flow.as_mut().and_then(|f| f.credit()) {
            Some(c) => {
                c.on_msg(m);
                Ok(())
            }
            None => Err(LinkError::Corrupt(
                "a credit message to a queue without credit flow control",
            )),
        },
    }
}

/// Lands the data of a READ response in our READ WR with sequence number `seq` (how many of
/// our WRs completed before it), which must be in flight; Err for anything else a peer says.
pub(crate) fn land_read_response(w: &mut Wire, seq: u64, data: &[u8]) -> Result<(), LinkError> {
    let wr = read_in_flight(w, seq)?;
    land_read(wr, data.as_ptr(), data.len());
    Ok(())
}

/// Our READ in flight numbered `seq`, which a peer's response answers; Err when no WR of ours
/// is in flight under that number, or it is not a READ.
pub(crate) fn read_in_flight(w: &Wire, seq: u64) -> Result<*mut umq_buf_t, LinkError> {
    let wr =
        w.sq.in_flight_wr(seq)
            .ok_or(LinkError::Corrupt("READ response for no READ in flight"))?;
    if unsafe { (*wr).pro().opcode } != UMQ_OPC_READ {
        return Err(LinkError::Corrupt(
            "READ response for a WR that is not a READ",
        ));
    }
    Ok(wr)
}

/// A completion status the peer reported for one of our WRs, checked: a value no status has
/// becomes `REM_OPERATION_ERR`.
pub(crate) fn peer_status(raw: u32) -> umq_buf_status_t {
    if raw <= UMQ_BUF_REM_DATA_POISON {
        raw
    } else {
        UMQ_BUF_REM_OPERATION_ERR
    }
}

/// The first half of every provider's one-pass landing: the receive buffer a SEND or SEND_IMM
/// of `len` bytes lands in whole (`land_in`), the next posted one when it holds the message.
/// None when the message needs the executor. A receiver that fragments (base API) takes a
/// message that fits its next buffer the same way: the executor would give it that one buffer
/// and complete it alike.
#[inline(always)]
pub(crate) fn whole_in_next(w: &mut Wire, op: umq_opcode_t, len: u32) -> Option<*mut umq_buf_t> {
    if op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM {
        return None;
    }
    next_holding(w, len)
}

/// The next posted receive buffer, when it holds `len` bytes.
#[inline(always)]
pub(crate) fn next_holding(w: &mut Wire, len: u32) -> Option<*mut umq_buf_t> {
    let rx = w.rq.next_posted()?;
    (len <= unsafe { (*rx).buf_size }).then_some(rx)
}

/// A WR that is one SEND or SEND_IMM in one buffer, all its bytes in it (`check_wr` accepts it
/// as it is): the usual post of a ping-pong. Checked once, where the post begins
/// (`LoneSend::of`), so the one-pass landing does not test the WR again.
#[derive(Clone, Copy)]
pub struct LoneSend(*mut umq_buf_t);

impl LoneSend {
    /// `wr`, not NULL, if it is such a WR.
    #[inline(always)]
    pub fn of(wr: *mut umq_buf_t) -> Option<LoneSend> {
        let h = unsafe { &*wr };
        let op = h.pro().opcode;
        let lone = (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM)
            && h.qbuf_next.is_null()
            && h.data_size == h.total_data_size
            && h.data_size <= h.buf_size
            && !h.buf_data.is_null();
        lone.then_some(LoneSend(wr))
    }

    pub fn wr(self) -> *mut umq_buf_t {
        self.0
    }

    /// Its bytes, all in its one buffer.
    pub fn bytes(self) -> u32 {
        unsafe { (*self.0).total_data_size }
    }
}

/// The second half of every provider's one-pass landing: a SEND or SEND_IMM of `len` contiguous
/// bytes at `src` lands whole in `rx`, the next posted receive buffer, which the caller checked
/// holds it (`whole_in_next`).
#[inline(always)]
pub(crate) unsafe fn land_in(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    src: *const u8,
    len: u32,
    op: umq_opcode_t,
    imm: u64,
    out: &mut Outcome,
) {
    dst.wire.rq.take_posted();
    prefetch_rx(dst.wire, 16);
    unsafe {
        copy_bytes(src, (*rx).buf_data as *mut u8, len as usize);
        complete_one(dst, rx, len, op, imm);
    }
    landed(dst, out);
}

/// `land_in` for a message the sender already wrote into `rx`, the next posted receive buffer.
#[inline(always)]
pub(crate) unsafe fn land_placed(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    len: u32,
    op: umq_opcode_t,
    imm: u64,
    out: &mut Outcome,
) {
    dst.wire.rq.take_posted();
    prefetch_rx(dst.wire, 16);
    unsafe { complete_one(dst, rx, len, op, imm) };
    landed(dst, out);
}

/// A SEND or SEND_IMM of `len` bytes written in place across the first `n` posted receive
/// buffers, which hold it (`assembly::Otherwise::Across`): it completes there, as one the
/// executor spread over them does.
pub(crate) unsafe fn land_placed_across(
    dst: &mut Side,
    n: usize,
    len: u64,
    op: umq_opcode_t,
    imm: u64,
    out: &mut Outcome,
) {
    let head = take_rx(dst, n);
    unsafe { complete_rx(dst, head, n, len, op, imm, UMQ_BUF_SUCCESS) };
    landed(dst, out);
}

/// Counts a message that landed in receive buffers (every provider's landings come here): a
/// receive completion, and one credit's worth of arrival for flow control (told as the side
/// goes: `Side`).
#[inline(always)]
fn landed(dst: &mut Side, out: &mut Outcome) {
    dst.count_landing();
    out.rx_done += 1;
}

/// Asks the cache for the header of the receive buffer `ahead` places down the posted queue:
/// with a deep queue, each buffer was last touched a whole queue ago and is cold by now.
#[inline]
pub(crate) fn prefetch_rx(w: &Wire, ahead: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = w.rq.posted_at(ahead) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetching is a hint; it never faults, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(b as *const i8);
            _mm_prefetch::<_MM_HINT_T0>((b as *const i8).wrapping_add(64));
        }
    }
}

/// `complete_rx` for a SEND or SEND_IMM that landed whole in one buffer.
#[inline(always)]
unsafe fn complete_one(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    len: u32,
    sent_op: umq_opcode_t,
    imm: u64,
) {
    let b = unsafe { &mut *rx };
    // qbuf_next is already null: push_rx cut the buffer out of the application's list.
    b.data_size = len;
    b.total_data_size = len;
    b.umqh = dst.umqh;
    b.set_first_fragment(true);
    // A plain SEND, the common case, carries nothing for flow control to take out.
    let (op, imm, status) = if sent_op == UMQ_OPC_SEND {
        (UMQ_OPC_SEND, 0, UMQ_BUF_SUCCESS)
    } else {
        receive_flow_control(dst.wire, sent_op, imm, UMQ_BUF_SUCCESS)
    };
    b.set_status_and_direction(status, UMQ_IO_RX);
    let pro = b.pro_mut();
    pro.opcode = op;
    pro.imm_data = if op == UMQ_OPC_SEND { 0 } else { imm };
    dst.wire.rq.complete(rx, 1);
}

/// `ptr::copy` (a WR may name the very buffer it lands in), with small non-overlapping copies
/// done inline: for a 64-byte message the call into libc costs more than the moves.
#[inline(always)]
pub(crate) unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
    unsafe fn ends<const N: usize>(src: *const u8, dst: *mut u8, len: usize) {
        // The first and the last N bytes (they overlap when len < 2N): covers N..=2N.
        unsafe {
            ptr::copy_nonoverlapping(src, dst, N);
            ptr::copy_nonoverlapping(src.add(len - N), dst.add(len - N), N);
        }
    }
    let apart = (src as usize).abs_diff(dst as usize) >= len;
    unsafe {
        match len {
            _ if !apart || len > 64 => ptr::copy(src, dst, len),
            32.. => ends::<32>(src, dst, len),
            16.. => ends::<16>(src, dst, len),
            8.. => ends::<8>(src, dst, len),
            4.. => ends::<4>(src, dst, len),
            _ => ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// A user SEND that carried a window update goes back to the application as the SEND it posted;
/// true when `wr` was such a carrier. Only asked while a carrier is pending (so with flow
/// control on: off, bit 0 of an immediate is the user's, and a SEND_IMM with it set is the
/// user's own).
#[inline]
pub(crate) unsafe fn restore_piggyback_carrier(wr: *mut umq_buf_t) -> bool {
    let pro = unsafe { (*wr).pro_mut() };
    let carrier = pro.opcode == UMQ_OPC_SEND_IMM && flow::is_private(pro.imm_data);
    if carrier {
        pro.opcode = UMQ_OPC_SEND;
        pro.imm_data = 0;
    }
    carrier
}

/// A WR as its target sees it, whatever carried it: the opcode and immediate, the payload
/// (`len` bytes in the pieces `src` yields) and the remote memory it names.
pub(crate) struct Request<S> {
    pub opcode: umq_opcode_t,
    pub imm: u64,
    pub len: u64,
    pub src: S,
    pub remote: umq_ref_sge_t,
}

/// What the target needs from the side that posted the WR.
pub(crate) trait Initiator {
    /// READ: hands `len` bytes at `from` back to the WR; None when that must wait (no room).
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t>;
    /// After the payload was copied: whether it was still the initiator's to read (a payload
    /// copied straight out of the initiator's memory may have been reused under the copy).
    fn payload_intact(&self) -> bool {
        true
    }
}

/// How executing a WR ended.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Executed {
    /// It ran; the initiator's completion status.
    Done(umq_buf_status_t),
    /// It needs receive buffers (or room for a READ's response) the target does not have yet.
    Wait,
    /// The initiator left while its payload was being copied: nothing landed.
    InitiatorLeft,
}

/// Executes a WR at its target with the semantics of RDMA verbs (RC), for every provider:
/// NOP; WRITE and READ against registered memory whose token matches (else
/// `REM_ACCESS_ABORT`); SEND, SEND_IMM and WRITE_IMM taking receive buffers in order, a message
/// too long for them completing `LOC_LEN_ERR` here and `REM_OPERATION_ERR` there. A landed
/// message counts in `out.rx_done` and, for flow control, as an arrival (`landed`).
pub(crate) fn execute_wr<S, I>(
    dst: &mut Side,
    req: &Request<S>,
    pool: &crate::buf::pool::Pool,
    initiator: &mut I,
    out: &mut Outcome,
) -> Executed
where
    S: Iterator<Item = (*mut u8, usize)> + Clone,
    I: Initiator,
{
    let sge = req.remote;
    let remote_ok = |n: u64| {
        n <= sge.length as u64
            && pool.check_remote(sge.addr, n as u32, sge.token_id, sge.token_value)
    };
    let to_remote = || std::iter::once((sge.addr as *mut u8, req.len as usize));
    match req.opcode {
        UMQ_OPC_NOP => Executed::Done(UMQ_BUF_SUCCESS),
        UMQ_OPC_WRITE if !remote_ok(req.len) => Executed::Done(UMQ_BUF_REM_ACCESS_ABORT_ERR),
        UMQ_OPC_WRITE => {
            copy_pieces(req.src.clone(), to_remote());
            Executed::Done(UMQ_BUF_SUCCESS)
        }
        UMQ_OPC_READ if !remote_ok(sge.length as u64) => {
            Executed::Done(UMQ_BUF_REM_ACCESS_ABORT_ERR)
        }
        UMQ_OPC_READ => match initiator.read_back(sge.addr as *const u8, sge.length as usize) {
            Some(status) => Executed::Done(status),
            None => Executed::Wait,
        },
        op if needs_rx_buffer(op) => {
            let Some(n) = rx_buffers_needed(dst, req.len, op) else {
                return Executed::Wait;
            };
            if op == UMQ_OPC_WRITE_IMM && !remote_ok(req.len) {
                return Executed::Done(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            let head = take_rx(dst, n);
            let fits =
                op == UMQ_OPC_WRITE_IMM || req.len <= room(head).map(|(_, c)| c as u64).sum();
            if op == UMQ_OPC_WRITE_IMM {
                copy_pieces(req.src.clone(), to_remote());
            } else if fits {
                copy_pieces(req.src.clone(), room(head));
            }
            if !initiator.payload_intact() {
                untake_rx(dst, head);
                return Executed::InitiatorLeft;
            }
            let (rx, tx) = if fits {
                (UMQ_BUF_SUCCESS, UMQ_BUF_SUCCESS)
            } else {
                (UMQ_BUF_LOC_LEN_ERR, UMQ_BUF_REM_OPERATION_ERR)
            };
            unsafe { complete_rx(dst, head, n, req.len, op, req.imm, rx) };
            landed(dst, out);
            Executed::Done(tx)
        }
        _ => Executed::Done(UMQ_BUF_UNSUPPORTED_OPCODE_ERR),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{FlowState, Params};

    /// Only one SEND or SEND_IMM in one buffer holding all its bytes is a `LoneSend`: any other
    /// WR takes the checks of the general post.
    #[test]
    fn a_lone_send_is_one_send_in_one_buffer() {
        let mut data = [0u8; 64];
        let data = data.as_mut_ptr();
        let mut next: umq_buf_t = unsafe { std::mem::zeroed() };
        let lone = |change: &dyn Fn(&mut umq_buf_t)| {
            let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
            b.buf_data = data as *mut _;
            (b.buf_size, b.data_size, b.total_data_size) = (64, 48, 48);
            b.pro_mut().opcode = UMQ_OPC_SEND;
            change(&mut b);
            LoneSend::of(&mut b).map(LoneSend::bytes)
        };
        assert_eq!(lone(&|_| {}), Some(48));
        assert_eq!(lone(&|b| b.pro_mut().opcode = UMQ_OPC_SEND_IMM), Some(48));
        for op in [UMQ_OPC_WRITE, UMQ_OPC_WRITE_IMM, UMQ_OPC_READ, 0xff] {
            assert_eq!(lone(&|b| b.pro_mut().opcode = op), None, "opcode {op}");
        }
        let next = &mut next as *mut umq_buf_t;
        assert_eq!(lone(&|b| b.qbuf_next = next), None, "a second buffer or WR");
        assert_eq!(
            lone(&|b| b.total_data_size = 96),
            None,
            "bytes in another buffer"
        );
        assert_eq!(
            lone(&|b| b.data_size = 65),
            None,
            "more than the buffer holds"
        );
        assert_eq!(lone(&|b| b.buf_data = ptr::null_mut()), None, "no data");
    }

    /// Every message that lands through a side counts as an arrival for flow control, told
    /// once as the side goes: none before, all after, and a side that landed nothing tells
    /// nothing.
    #[test]
    fn a_side_tells_flow_control_its_landings_as_it_goes() {
        let mut w = Wire::new(4, 4);
        w.flow = Some(FlowState::new(Params::new(4, 0, 8, 8)));
        let mut data = [[0u8; 16]; 3];
        let mut bufs: Vec<umq_buf_t> = (0..3).map(|_| unsafe { std::mem::zeroed() }).collect();
        for (b, d) in bufs.iter_mut().zip(&mut data) {
            b.buf_data = d.as_mut_ptr() as *mut _;
            b.buf_size = d.len() as u32;
            w.rq.post(b);
        }
        let arrived = |w: &mut Wire, n| w.flow.as_mut().unwrap().peer_used_all_known(n);
        let (payload, mut out) = (*b"landed", Outcome::default());
        let mut side = Side::new(7, &mut w, false);
        for _ in 0..2 {
            let rx = side.wire.rq.next_posted().unwrap();
            unsafe {
                land_in(
                    &mut side,
                    rx,
                    payload.as_ptr(),
                    6,
                    UMQ_OPC_SEND,
                    0,
                    &mut out,
                )
            };
        }
        assert!(!arrived(side.wire, 1), "told before the side went");
        drop(side);
        assert!(arrived(&mut w, 2) && !arrived(&mut w, 3));
        assert_eq!((out.rx_done, &data[1][..6]), (2, &payload[..]));
        drop(Side::new(7, &mut w, false));
        assert!(!arrived(&mut w, 3), "an empty side told something");
    }

    #[test]
    fn pieces_from_an_offset_leave_out_what_ends_before_it_and_trim_the_piece_it_falls_in() {
        let mut bytes: Vec<u8> = (0..10).collect();
        let p = bytes.as_mut_ptr();
        let three = [(p, 3), (p.wrapping_add(3), 0), (p.wrapping_add(3), 7)];
        let from = |offset| -> Vec<(usize, usize)> {
            pieces_from(three.into_iter(), offset)
                .map(|(at, n)| (at as usize - p as usize, n))
                .collect()
        };
        assert_eq!(from(0), [(0, 3), (3, 7)], "an empty piece is left out");
        assert_eq!(from(2), [(2, 1), (3, 7)]);
        assert_eq!(
            from(3),
            [(3, 7)],
            "a piece that ends at the offset is left out"
        );
        assert_eq!(from(9), [(9, 1)]);
        assert_eq!(from(10), []);
        assert_eq!(from(11), []);
        let mut dst = [0u8; 4];
        let copied = copy_pieces(
            pieces_from(three.into_iter(), 1),
            std::iter::once((dst.as_mut_ptr(), dst.len())),
        );
        assert_eq!((copied, dst), (4, [1, 2, 3, 4]), "across the pieces");
    }
}
