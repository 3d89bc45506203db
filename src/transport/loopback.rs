//! In-process loopback: the receive side and send queue of one queue, and the delivery engine
//! that executes a sender's WRs against its peer with the semantics of RDMA verbs (RC).
//!
//! The send queue `sq` holds every posted tx WR until the application polls its completion. The
//! first `delivered` entries have executed; the rest wait, in order, for receive buffers at the
//! peer (the RNR wait of RDMA). Completions are therefore FIFO per queue pair by construction.

use super::fifo::Fifo;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;
use crate::flow::{self, FlowState};
use std::ptr;
use std::time::Instant;

pub struct Wire {
    pub rx_posted: Fifo<*mut umq_buf_t>,
    /// Completed receives: message head and how many buffers the message used.
    pub rx_cq: Fifo<(*mut umq_buf_t, u32)>,
    pub rx_cq_bufs: usize,
    pub sq: Fifo<*mut umq_buf_t>,
    pub delivered: usize,
    pub blocked_since: Option<Instant>,
    /// Flow control of the bound queue (None when disabled or never bound).
    pub flow: Option<FlowState>,
    /// Credit-needing WRs waiting to go that were admitted without credit (queued mode only);
    /// they take it as they reach the head of the send queue. While this is zero every waiting
    /// WR holds its credit, so the engines check none (the common case, and the fast one).
    pub uncovered: usize,
    /// While `uncovered > 0`: how many waiting credit-needing WRs hold credit (the first ones
    /// in line). Not kept up otherwise; recounted when `uncovered` leaves zero.
    pub credited: usize,
    /// Since when the queue has had work waiting and no credit, and whether that was reported.
    pub starved_since: Option<Instant>,
    pub stall_reported: bool,
    pub credit_stalls: u64,
    /// Shared memory only: WRs after `delivered` that the peer has but not yet executed, and
    /// how many of our WRs have completed since bind (the peer's sequence numbers).
    pub in_flight: usize,
    pub tx_done_seq: u64,
    /// Shared memory only: WRs in flight that complete when the peer has executed them
    /// (everything but SEND, SEND_IMM and NOP, which complete once in the peer's ring).
    pub awaiting_peer: usize,
    /// Shared memory only: the oldest entry of our inbox waits for a receive buffer.
    pub rx_blocked: bool,
    /// Shared memory only: the peer's inbox while bound (also held by the queue's peer slot;
    /// kept here so the poll path needs no other lock).
    pub shm: Option<std::sync::Arc<super::shm::Link>>,
    /// The queue's shared pool, once it has one: WRs from its buffers cross shared memory by
    /// reference.
    pub arena: Option<std::sync::Arc<crate::buf::arena::Arena>>,
    /// Shared memory only: the sequence numbers of the WRs in flight that went by reference
    /// (they complete when the peer has executed them), oldest first.
    pub by_ref_in_flight: std::collections::VecDeque<u64>,
    /// WRs (and their bytes) sent by reference since the queue was created.
    pub by_ref_wr: u64,
    pub by_ref_bytes: u64,
    /// Shared memory only: the peer's entries run since bind that take a receive buffer (the
    /// number the entry that takes a buffer posted now will have at the earliest).
    pub rx_entries_run: u64,
    /// Since the queue was created: WRs (and bytes) we wrote straight into the peer's receive
    /// buffers, and messages that arrived already in ours (see `placement`).
    pub placed_wr: u64,
    pub placed_bytes: u64,
    pub placed_rx: u64,
}

// Raw buffer pointers are owned by the library while posted; the Wire is only used under a Mutex.
unsafe impl Send for Wire {}

impl Wire {
    pub fn new(rx_depth: u32, tx_depth: u32) -> Wire {
        Wire {
            rx_posted: Fifo::with_capacity(rx_depth as usize, ptr::null_mut()),
            rx_cq: Fifo::with_capacity(rx_depth as usize, (ptr::null_mut(), 0)),
            rx_cq_bufs: 0,
            sq: Fifo::with_capacity(tx_depth as usize, ptr::null_mut()),
            delivered: 0,
            blocked_since: None,
            flow: None,
            uncovered: 0,
            credited: 0,
            starved_since: None,
            stall_reported: false,
            credit_stalls: 0,
            in_flight: 0,
            tx_done_seq: 0,
            awaiting_peer: 0,
            rx_blocked: false,
            shm: None,
            arena: None,
            by_ref_in_flight: std::collections::VecDeque::new(),
            by_ref_wr: 0,
            by_ref_bytes: 0,
            rx_entries_run: 0,
            placed_wr: 0,
            placed_bytes: 0,
            placed_rx: 0,
        }
    }

    /// Counts a WR whose message we placed in the peer's receive buffer.
    pub fn count_placed(&mut self, wr: *mut umq_buf_t) {
        self.placed_wr += 1;
        self.placed_bytes += unsafe { (*wr).total_data_size } as u64;
    }

    pub fn rx_outstanding(&self) -> usize {
        self.rx_posted.len() + self.rx_cq_bufs
    }

    pub fn undelivered(&self) -> usize {
        self.sq.len() - self.delivered
    }

    /// Completes every undelivered WR with an error: `first` for the oldest, flush for the rest.
    pub fn fail_undelivered(&mut self, first: umq_buf_status_t) -> usize {
        let n = self.undelivered();
        for (i, b) in self.sq.iter().skip(self.delivered).enumerate() {
            unsafe { (*b).set_status(if i == 0 { first } else { UMQ_BUF_WR_FLUSH_ERR }) };
        }
        self.delivered = self.sq.len();
        self.in_flight = 0;
        self.awaiting_peer = 0;
        self.by_ref_in_flight.clear();
        self.blocked_since = None;
        self.clear_credit();
        n
    }

    /// Forgets the credit bookkeeping of waiting WRs (none wait any more).
    pub fn clear_credit(&mut self) {
        self.uncovered = 0;
        self.credited = 0;
    }

    /// Records WRs about to join the send queue: `needy` need credit, the first `credited` of
    /// them hold it. Only a WR admitted without credit (queued mode) costs any work here.
    pub fn note_admitted(&mut self, needy: usize, credited: usize) {
        let short = needy - credited;
        if self.uncovered == 0 {
            if short == 0 {
                return;
            }
            // Every credit-needing WR already waiting holds credit.
            self.credited = self.waiting_needy();
        }
        self.credited += credited;
        self.uncovered += short;
    }

    /// Credit-needing WRs not yet handed to the peer.
    fn waiting_needy(&self) -> usize {
        self.sq
            .iter()
            .skip(self.delivered + self.in_flight)
            .filter(|&b| needs_rx_buffer(unsafe { (*b).pro().opcode }))
            .count()
    }

    /// Returns every posted receive buffer as a completion with `UMQ_BUF_WR_FLUSH_ERR`.
    pub fn flush_rx(&mut self) -> usize {
        let n = self.rx_posted.len();
        while let Some(b) = self.rx_posted.pop_front() {
            unsafe {
                (*b).set_status(UMQ_BUF_WR_FLUSH_ERR);
                (*b).data_size = 0;
            }
            self.rx_cq.push_back((b, 1));
            self.rx_cq_bufs += 1;
        }
        n
    }
}

/// One side of a delivery: the queue's handle, its wire and how it receives.
pub struct Side<'a> {
    pub umqh: u64,
    pub wire: &'a mut Wire,
    /// Base-API receivers take a long message in several library-posted buffers.
    pub fragments: bool,
}

/// What a delivery completed, for interrupt wake-ups and statistics.
#[derive(Default, Debug)]
pub struct Outcome {
    pub tx_done: u32,
    pub rx_done: u32,
    pub sends: u64,
    pub reads: u64,
    pub blocked: bool,
    /// Stopped at a WR that waits for flow-control credit (queued mode).
    pub credit_wait: bool,
}

/// The data of the WR `wr` (its buffers only: the caller's list goes on behind it).
pub(crate) fn pieces(wr: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> {
    crate::buf::wr_bufs(wr).map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).data_size as usize) })
}

/// The capacity of a chain of receive buffers the library linked (it ends at a NULL `qbuf_next`).
pub(crate) fn room(head: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> {
    crate::buf::iter(head).map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).buf_size as usize) })
}

/// Lands the `len` bytes a READ fetched from `src` in the READ WR `wr`: its buffers (the ones
/// its `total_data_size` spanned when posted) fill in order, each `data_size` says what it
/// holds and `total_data_size` what landed. Bytes beyond the buffers' room are dropped.
pub(crate) fn land_read(wr: *mut umq_buf_t, src: *const u8, len: usize) {
    let nbufs = crate::buf::wr_bufs(wr).count();
    let mut left = len as u64;
    for b in crate::buf::iter(wr).take(nbufs) {
        let b = unsafe { &mut *b };
        b.data_size = left.min(b.buf_size as u64) as u32;
        left -= b.data_size as u64;
    }
    unsafe { (*wr).total_data_size = (len as u64 - left) as u32 };
    let room = crate::buf::iter(wr)
        .take(nbufs)
        .map(|b| unsafe { ((*b).buf_data as *mut u8, (*b).data_size as usize) });
    copy_pieces(std::iter::once((src as *mut u8, len)), room);
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

pub fn needs_rx_buffer(opcode: umq_opcode_t) -> bool {
    matches!(opcode, UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE_IMM)
}

/// How many posted receive buffers a message of `len` bytes takes, if enough are posted.
pub(crate) fn rx_buffers_needed(dst: &Side, len: u64, opcode: umq_opcode_t) -> Option<usize> {
    if !dst.fragments || opcode == UMQ_OPC_WRITE_IMM {
        return (!dst.wire.rx_posted.is_empty()).then_some(1);
    }
    let mut room = 0u64;
    for (i, b) in dst.wire.rx_posted.iter().enumerate() {
        room += unsafe { (*b).buf_size } as u64;
        if room >= len {
            return Some(i + 1);
        }
    }
    None
}

/// Takes `n` posted receive buffers and links them into one message.
pub(crate) fn take_rx(dst: &mut Side, n: usize) -> *mut umq_buf_t {
    let head = dst.wire.rx_posted.pop_front().unwrap();
    let mut tail = head;
    for _ in 1..n {
        let b = dst.wire.rx_posted.pop_front().unwrap();
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
        dst.wire.rx_posted.push_front(b);
    }
}

/// Whether a receive with this status holds the message's data (a window update piggybacked on
/// a SEND does).
fn carries_data(status: u32) -> bool {
    status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE
}

/// Fills the receive completion of a message that landed in the `head` chain. The caller counts
/// the arrival for flow control (`FlowState::data_arrived`).
pub(crate) unsafe fn complete_rx(
    dst: &mut Side,
    head: *mut umq_buf_t,
    nbufs: usize,
    len: u64,
    opcode: umq_opcode_t,
    imm: u64,
    status: u32,
) {
    let (opcode, imm, status) = receive_flow_control(dst, opcode, imm, status);
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
    dst.wire.rx_cq.push_back((head, nbufs as u32));
    dst.wire.rx_cq_bufs += nbufs;
}

/// With flow control on: takes a piggybacked window update out of the immediate, leaving the
/// user a plain SEND marked `UMQ_BUF_FLOW_CONTROL_UPDATE`. (The engines count arrivals per
/// round, not here.)
fn receive_flow_control(
    dst: &mut Side,
    opcode: umq_opcode_t,
    imm: u64,
    status: u32,
) -> (umq_opcode_t, u64, u32) {
    if opcode != UMQ_OPC_SEND_IMM || !flow::is_private(imm) {
        return (opcode, imm, status);
    }
    let Some(f) = dst.wire.flow.as_mut() else {
        return (opcode, imm, status);
    };
    if let Some(a) = flow::decode_imm(imm) {
        f.on_announcement(a);
    }
    let status = if status == UMQ_BUF_SUCCESS {
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

/// Flow-control credit for the WRs an engine runs in one round. Unless queued mode let WRs in
/// beyond the window, every waiting WR holds its credit and the gate lets all through
/// unchecked; otherwise credit-needing WRs use the credit they hold first and then take it
/// from the window, in order.
pub(crate) struct CreditGate {
    check: bool,
    credited: usize,
    uncovered: usize,
}

impl CreditGate {
    pub(crate) fn open(w: &Wire) -> CreditGate {
        CreditGate {
            check: w.uncovered > 0 && w.flow.is_some(),
            credited: w.credited,
            uncovered: w.uncovered,
        }
    }

    /// Whether the WR may run as far as flow control goes, taking its credit.
    #[inline]
    pub(crate) fn pass(&mut self, w: &mut Wire, opcode: umq_opcode_t) -> bool {
        if !self.check || !needs_rx_buffer(opcode) {
            return true;
        }
        if self.credited > 0 {
            self.credited -= 1;
            return true;
        }
        let got = w.flow.as_mut().is_some_and(|f| f.take_credit(1) == 1);
        self.uncovered -= got as usize;
        got
    }

    /// A WR that passed but could not go this round keeps its credit for the retry.
    pub(crate) fn keep(&mut self, opcode: umq_opcode_t) {
        if self.check && needs_rx_buffer(opcode) {
            self.credited += 1;
        }
    }

    pub(crate) fn close(self, w: &mut Wire) {
        if self.check {
            w.credited = self.credited;
            w.uncovered = self.uncovered;
        }
    }
}

/// Executes one WR; None when it must wait for a receive buffer. (Out of line: `send_one`
/// takes the common case, and the loop around it stays small.)
#[inline(never)]
unsafe fn execute(
    wr: *mut umq_buf_t,
    dst: &mut Side,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let w = unsafe { &mut *wr };
    let pro = *w.pro();
    let len = w.total_data_size as u64;
    let sge = pro.remote_sge;
    let remote_ok = |n: u64| {
        n <= sge.length as u64
            && pool.check_remote(sge.addr, n as u32, sge.token_id, sge.token_value)
    };
    match pro.opcode {
        UMQ_OPC_NOP => Some(UMQ_BUF_SUCCESS),
        UMQ_OPC_WRITE => {
            if !remote_ok(len) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            copy_pieces(
                pieces(wr),
                std::iter::once((sge.addr as *mut u8, len as usize)),
            );
            out.sends += 1;
            Some(UMQ_BUF_SUCCESS)
        }
        UMQ_OPC_READ => {
            let want = sge.length as u64;
            if !remote_ok(want) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            land_read(wr, sge.addr as *const u8, want as usize);
            out.reads += 1;
            Some(UMQ_BUF_SUCCESS)
        }
        op if needs_rx_buffer(op) => {
            let n = rx_buffers_needed(dst, len, op)?;
            if op == UMQ_OPC_WRITE_IMM && !remote_ok(len) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            let head = take_rx(dst, n);
            let fits =
                op == UMQ_OPC_WRITE_IMM || len <= room(head).map(|(_, c)| c as u64).sum::<u64>();
            let (rx_status, tx_status) = if fits {
                (UMQ_BUF_SUCCESS, UMQ_BUF_SUCCESS)
            } else {
                (UMQ_BUF_LOC_LEN_ERR, UMQ_BUF_REM_OPERATION_ERR)
            };
            if fits {
                if op == UMQ_OPC_WRITE_IMM {
                    copy_pieces(
                        pieces(wr),
                        std::iter::once((sge.addr as *mut u8, len as usize)),
                    );
                } else {
                    copy_pieces(pieces(wr), room(head));
                }
                out.sends += 1;
            }
            unsafe { complete_rx(dst, head, n, len, op, pro.imm_data, rx_status) };
            out.rx_done += 1;
            Some(tx_status)
        }
        _ => Some(UMQ_BUF_UNSUPPORTED_OPCODE_ERR),
    }
}

/// The common case in one pass: a one-buffer SEND or SEND_IMM into the next posted receive
/// buffer, which holds it. None (nothing done) when the WR needs the general path.
#[inline(always)]
unsafe fn send_one(
    wr: *mut umq_buf_t,
    dst: &mut Side,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let w = unsafe { &*wr };
    let pro = w.pro();
    let op = pro.opcode;
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM)
        || w.data_size != w.total_data_size
        || dst.fragments
    {
        return None;
    }
    let rx = dst.wire.rx_posted.front()?;
    let len = w.total_data_size;
    if len > unsafe { (*rx).buf_size } || w.data_size != len {
        return None;
    }
    if unsafe { land_in(dst, rx, w.buf_data as *const u8, len, op, pro.imm_data) } {
        // The SEND carried our window update: it completes as the SEND it was posted as.
        let pro = unsafe { (*wr).pro_mut() };
        pro.opcode = UMQ_OPC_SEND;
        pro.imm_data = 0;
    }
    out.sends += 1;
    out.rx_done += 1;
    Some(UMQ_BUF_SUCCESS)
}

/// The second half of both engines' one-pass path: a SEND or SEND_IMM of `len` contiguous
/// bytes at `src` lands whole in `rx`, the next posted receive buffer, which the caller checked
/// holds it (and that the receiver does not fragment). Returns whether the message carried a
/// piggybacked window update, which the receiver took out of it.
#[inline(always)]
pub(crate) unsafe fn land_in(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    src: *const u8,
    len: u32,
    op: umq_opcode_t,
    imm: u64,
) -> bool {
    dst.wire.rx_posted.pop_front();
    prefetch_rx(dst.wire, 16);
    unsafe {
        copy_bytes(src, (*rx).buf_data as *mut u8, len as usize);
        complete_one(dst, rx, len, op, imm)
    }
}

/// `land_in` for a message the sender already wrote into `rx`, the next posted receive buffer.
#[inline(always)]
pub(crate) unsafe fn land_placed(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    len: u32,
    op: umq_opcode_t,
    imm: u64,
) {
    dst.wire.rx_posted.pop_front();
    prefetch_rx(dst.wire, 16);
    unsafe { complete_one(dst, rx, len, op, imm) };
}

/// Asks the cache for the header of the receive buffer `ahead` places down the posted queue:
/// with a deep queue, each buffer was last touched a whole queue ago and is cold by now.
#[inline]
fn prefetch_rx(w: &Wire, ahead: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = w.rx_posted.get(ahead) {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        // SAFETY: prefetching is a hint; it never faults, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(b as *const i8);
            _mm_prefetch::<_MM_HINT_T0>((b as *const i8).wrapping_add(64));
        }
    }
}

/// `complete_rx` for a SEND or SEND_IMM that landed whole in one buffer. Returns whether it
/// carried a piggybacked window update (the sender then restores its WR).
#[inline(always)]
unsafe fn complete_one(
    dst: &mut Side,
    rx: *mut umq_buf_t,
    len: u32,
    sent_op: umq_opcode_t,
    imm: u64,
) -> bool {
    let (op, imm, status) = receive_flow_control(dst, sent_op, imm, UMQ_BUF_SUCCESS);
    let b = unsafe { &mut *rx };
    // qbuf_next is already null: push_rx cut the buffer out of the application's list.
    b.data_size = len;
    b.total_data_size = len;
    b.umqh = dst.umqh;
    b.set_status_and_direction(status, UMQ_IO_RX);
    b.set_first_fragment(true);
    let pro = b.pro_mut();
    pro.opcode = op;
    pro.imm_data = if op == UMQ_OPC_SEND { 0 } else { imm };
    dst.wire.rx_cq.push_back((rx, 1));
    dst.wire.rx_cq_bufs += 1;
    op != sent_op
}

/// `ptr::copy` (a WR may name the very buffer it lands in), with small non-overlapping copies
/// done inline: for a 64-byte message the call into libc costs more than the moves.
#[inline]
unsafe fn copy_bytes(src: *const u8, dst: *mut u8, len: usize) {
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

/// A user SEND that carried a window update goes back to the application as the SEND it posted.
/// Only with flow control on: off, bit 0 of an immediate is the user's, and a SEND_IMM with it
/// set is the user's own.
#[inline]
pub(crate) unsafe fn restore_piggyback_carrier(wr: *mut umq_buf_t, flow_on: bool) {
    let pro = unsafe { (*wr).pro_mut() };
    if flow_on && pro.opcode == UMQ_OPC_SEND_IMM && flow::is_private(pro.imm_data) {
        pro.opcode = UMQ_OPC_SEND;
        pro.imm_data = 0;
    }
}

/// Runs the sender's undelivered WRs, in order, until one has to wait for a receive buffer.
pub fn deliver(src: &mut Wire, dst: &mut Side, pool: &Pool) -> Outcome {
    let mut out = Outcome::default();
    let mut credit = CreditGate::open(src);
    let flow_on = src.flow.is_some();
    while src.delivered < src.sq.len() {
        let wr = src.sq[src.delivered];
        let opcode = unsafe { (*wr).pro().opcode };
        if !credit.pass(src, opcode) {
            out.credit_wait = true;
            break;
        }
        // send_one restores a piggyback carrier itself, and only when it was one: no check of
        // every WR's immediate on the common path.
        let done = unsafe {
            send_one(wr, dst, &mut out).or_else(|| {
                execute(wr, dst, pool, &mut out).inspect(|_| restore_piggyback_carrier(wr, flow_on))
            })
        };
        let Some(status) = done else {
            credit.keep(opcode);
            src.blocked_since.get_or_insert_with(Instant::now);
            out.blocked = true;
            break;
        };
        unsafe { (*wr).set_status(status) };
        src.delivered += 1;
        src.blocked_since = None;
        out.tx_done += 1;
    }
    credit.close(src);
    if out.rx_done > 0
        && let Some(f) = dst.wire.flow.as_mut()
    {
        f.data_arrived(out.rx_done as u64);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Area, Params};

    fn wr(opcode: umq_opcode_t) -> Box<umq_buf_t> {
        let mut b: Box<umq_buf_t> = Box::new(unsafe { std::mem::zeroed() });
        b.pro_mut().opcode = opcode;
        b
    }

    /// Queued mode admits WRs without credit behind WRs that hold it (a full ring keeps those
    /// waiting over shared memory): the gate must spend what the waiting WRs hold first and
    /// only then take from the window, in order, and stop when the window is empty.
    #[test]
    fn credit_gate_spends_held_credit_before_the_window() {
        let area = Area::default();
        let mut peer = FlowState::new(Params::new(4, 0, 8, 8), false);
        peer.rx_posted(4);
        peer.publish(&area);
        let mut f = FlowState::new(Params::new(0, 0, 8, 8), false);
        f.refresh(&area);
        assert_eq!(f.window(), 4);
        let mut w = Wire::new(8, 8);
        w.flow = Some(f);
        let mut wrs: Vec<Box<umq_buf_t>> = Vec::new();
        let mut admit = |w: &mut Wire, ops: &[umq_opcode_t], credited: u64| {
            let got = w.flow.as_mut().unwrap().take_credit(credited);
            assert_eq!(got, credited);
            let needy = ops.iter().filter(|&&op| needs_rx_buffer(op)).count();
            w.note_admitted(needy, credited as usize);
            for &op in ops {
                let mut b = wr(op);
                w.sq.push_back(&mut *b);
                wrs.push(b);
            }
        };
        // Two SENDs with credit wait: nothing to check for them.
        admit(&mut w, &[UMQ_OPC_SEND, UMQ_OPC_SEND], 2);
        assert_eq!(w.uncovered, 0);
        // Queued mode lets in three more and a WRITE, only the first with credit.
        admit(
            &mut w,
            &[
                UMQ_OPC_SEND,
                UMQ_OPC_SEND_IMM,
                UMQ_OPC_WRITE,
                UMQ_OPC_WRITE_IMM,
            ],
            1,
        );
        assert_eq!((w.uncovered, w.credited), (2, 3));
        let mut gate = CreditGate::open(&w);
        let ops: Vec<_> = w.sq.iter().map(|b| unsafe { (*b).pro().opcode }).collect();
        let passed: Vec<bool> = ops.iter().map(|&op| gate.pass(&mut w, op)).collect();
        // Three held credits, then the window's last one, the WRITE needs none, then empty.
        assert_eq!(passed, [true, true, true, true, true, false]);
        gate.close(&mut w);
        assert_eq!((w.uncovered, w.credited), (1, 0));
        assert_eq!(w.flow.as_mut().unwrap().window(), 0);
    }

    #[test]
    fn copy_bytes_copies_every_length_apart_and_overlapping() {
        let pattern: Vec<u8> = (0..200u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 0..=80usize {
            // Apart: the destination gets exactly `len` bytes, nothing around them moves.
            let mut dst = [0xeeu8; 100];
            unsafe { copy_bytes(pattern.as_ptr(), dst.as_mut_ptr().add(5), len) };
            assert_eq!(&dst[5..5 + len], &pattern[..len], "len {len}");
            assert!(dst[..5].iter().chain(&dst[5 + len..]).all(|&b| b == 0xee));
            // Overlapping both ways, and onto itself: memmove semantics.
            for shift in [-9isize, -1, 0, 1, 9] {
                let mut buf = pattern.clone();
                let (from, to) = (50usize, (50 + shift) as usize);
                let want: Vec<u8> = buf[from..from + len].to_vec();
                let p = buf.as_mut_ptr();
                unsafe { copy_bytes(p.add(from), p.add(to), len) };
                assert_eq!(&buf[to..to + len], &want[..], "len {len} shift {shift}");
            }
        }
    }
}
