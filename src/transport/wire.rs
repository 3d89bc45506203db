//! The state every provider keeps for a queue (`Wire`: posted receive buffers, completions,
//! the send queue, flow control and the shared-memory bookkeeping), the two sides of a
//! delivery, what a round did, and the credit gate a sender's WRs pass in order.

use super::fifo::Fifo;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow::FlowState;
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

/// Whether a WR of this opcode takes a receive buffer at the peer (and so a flow-control
/// credit).
pub fn needs_rx_buffer(opcode: umq_opcode_t) -> bool {
    matches!(opcode, UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE_IMM)
}
