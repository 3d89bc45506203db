//! The state of a queue that every provider works on (`Wire`: posted receive buffers,
//! completions, the send queue, flow control, WRs in flight), the two
//! sides of a delivery, what a round did, and the credit gate a sender's WRs pass in order.

use super::arrivals::{Arrival, ArrivalLog};
use super::paced::Paced;
use super::recv_queue::RecvQueue;
use super::send_queue::SendQueue;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow::FlowState;
use crate::flow::stall::StallWatch;
use std::time::Instant;

pub struct Wire {
    /// Posted receive buffers and the messages that landed in them (`recv_queue`).
    pub rq: RecvQueue,
    /// Posted TX WRs until polled: completed, in flight, unsent (`send_queue`).
    pub sq: SendQueue,
    /// The send queue's wait for a receive buffer at the peer (RNR).
    pub rnr: RnrWait,
    /// Flow control of the bound queue (None when disabled or never bound).
    pub flow: Option<FlowState>,
    /// Credit-needing WRs waiting to go that were admitted without credit (queued mode only);
    /// they take it as they reach the head of the send queue. While this is zero every waiting
    /// WR holds its credit, so the engines check none (the common case, and the fast one).
    uncovered: usize,
    /// While `uncovered > 0`: how many waiting credit-needing WRs hold credit (the first ones
    /// in line). Not kept up otherwise; recounted when `uncovered` leaves zero.
    credited: usize,
    /// WRs admitted as carriers of our window update (a SEND turned SEND_IMM) and not yet
    /// completed: while none is, completions look for none.
    carriers: usize,
    /// Whether the queue has had work waiting and no credit past its stall timeout.
    pub stall: StallWatch,
    /// The queue's shared pool, once it has one: WRs from its buffers may cross without a
    /// copy into a ring (by reference, or placed).
    pub(in crate::transport) arena: Option<std::sync::Arc<crate::buf::arena::Arena>>,
    pub(in crate::transport) zero_copy: ZeroCopy,
    /// While the queue has a rate limit: the WRs posted and not yet released by the pacer.
    paced: Option<Paced>,
    /// Packets of paced messages the provider has put on the wire since the queue was created.
    paced_packets: u64,
    /// While bound to another process: the queue's place on the link to it (link-level pause).
    pub pause: Option<super::pause::PauseGate>,
    /// While asked for: when the pieces of the peer's messages arrived (`arrivals`).
    pub(in crate::transport) arrivals: Option<Box<ArrivalLog>>,
    /// While asked for: when our provider put the packets of our messages on the wire.
    pub(in crate::transport) departures: Option<Box<ArrivalLog>>,
    /// To a queue of this process: the packets of our rate-limited message that have landed
    /// at the peer, until its Last (`loopback`).
    pub(in crate::transport) local_packets: Option<Box<LocalPackets>>,
    /// Whether the application answers what it receives, and a grant left to its answer.
    pub answering: Answering,
}

/// A send queue's wait for the peer to post a receive buffer (receiver not ready): since when
/// its oldest WR has waited, until a send runs again. The RNR timeout fails the WR
/// (`queue::progress`).
#[derive(Debug, Default, Clone, Copy)]
pub struct RnrWait(Option<Instant>);

impl RnrWait {
    /// A send ran: nothing waits.
    #[inline]
    pub fn ended(&mut self) {
        self.0 = None;
    }

    /// A send found no receive buffer: the wait begins now, unless it began earlier.
    #[inline]
    pub fn began(&mut self) {
        self.0.get_or_insert_with(Instant::now);
    }

    /// Since when the oldest WR has waited, if one does.
    #[inline]
    pub fn since(&self) -> Option<Instant> {
        self.0
    }
}

/// Whether a queue's application answers what it receives: it sent a SEND since its last
/// receive post, and took a message since that SEND. A receive post whose announcement is due
/// then leaves it to the answer, which carries it piggybacked: one message each way of a
/// ping-pong of one buffer, where an update of its own made two, and in-process or over shared
/// memory a flow-control step at every post (`queue::rx`).
#[derive(Debug, Default)]
pub struct Answering {
    /// `SENT` since the last receive post, and `TOOK` since that SEND.
    since: u8,
    withheld: bool,
}

impl Answering {
    const SENT: u8 = 1;
    const TOOK: u8 = 2;

    /// A SEND of the queue's was admitted.
    #[inline(always)]
    pub fn sent(&mut self) {
        self.since = Self::SENT;
    }

    /// The application took a message.
    #[inline(always)]
    pub fn took(&mut self) {
        self.since |= Self::TOOK;
    }

    /// Whether the application answers what it receives and has not answered the last yet
    /// (ask at a receive post, before `posted`).
    #[inline(always)]
    pub fn owes_an_answer(&self) -> bool {
        self.since == Self::SENT | Self::TOOK
    }

    /// A receive post: `withheld`, whether it left its announcement to the answer.
    #[inline(always)]
    pub fn posted(&mut self, withheld: bool) {
        self.since &= Self::TOOK;
        self.withheld = withheld;
    }

    /// Whether the last receive post left its announcement to the answer.
    #[inline(always)]
    pub fn withheld(&self) -> bool {
        self.withheld
    }
}

/// A rate-limited message on its way to a queue of this process, packet by packet: what has
/// arrived of it so far (in the receiver's next posted buffer, or aside), and the packet size
/// it started with. Kept with the sender, whose flushes end it; the message runs at the
/// receiver when its Last arrives.
pub struct LocalPackets {
    /// None until the first packet arrives.
    pub(in crate::transport) assembly: Option<super::assembly::Assembly>,
    pub(in crate::transport) packet: usize,
}

impl LocalPackets {
    pub fn new(packet: usize) -> Self {
        LocalPackets {
            assembly: None,
            packet,
        }
    }

    /// The message's bytes that have arrived.
    pub fn received(&self) -> u64 {
        self.assembly.as_ref().map_or(0, |a| a.received())
    }
}

/// How a provider sends a rate-limited queue's WRs: their messages cut into packets of at most
/// `pmtu` bytes, and of the WR `open` no more than the first `granted` bytes.
#[derive(Clone, Copy, Debug)]
pub struct PacketGate {
    pub pmtu: usize,
    pub open: *mut umq_buf_t,
    pub granted: u64,
}

impl PacketGate {
    /// The bytes of `wr`'s message of `total` bytes that may be on the wire now.
    #[inline]
    pub fn allowed(&self, wr: *mut umq_buf_t, total: u64) -> u64 {
        if wr == self.open { self.granted } else { total }
    }

    /// Whether `wr`, starting now, goes as packets: a message with a payload longer than the
    /// PMTU (anything else is an Only packet, sent as without a limit).
    pub fn cuts(&self, wr: *mut umq_buf_t) -> bool {
        let (opcode, total) = unsafe { ((*wr).pro().opcode, (*wr).total_data_size as u64) };
        let payload = matches!(
            opcode,
            UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE | UMQ_OPC_WRITE_IMM
        );
        payload && total > self.pmtu as u64
    }
}

/// The bytes of `wr`'s message that may be out now, its packets already going: what `gate`
/// allows, or all of it once the queue's limit was lifted (no gate).
pub fn packets_allowed(gate: Option<PacketGate>, wr: *mut umq_buf_t) -> u64 {
    let total = unsafe { (*wr).total_data_size } as u64;
    gate.map_or(total, |g| g.allowed(wr, total))
}

// Raw buffer pointers are owned by the library while posted; the Wire is only used under a Mutex.
unsafe impl Send for Wire {}

impl Wire {
    pub fn new(rx_depth: u32, tx_depth: u32) -> Wire {
        Wire {
            rq: RecvQueue::new(rx_depth),
            sq: SendQueue::new(tx_depth),
            rnr: RnrWait::default(),
            flow: None,
            uncovered: 0,
            carriers: 0,
            credited: 0,
            stall: StallWatch::default(),
            arena: None,
            zero_copy: ZeroCopy::default(),
            paced: None,
            paced_packets: 0,
            pause: None,
            arrivals: None,
            departures: None,
            local_packets: None,
            answering: Answering::default(),
        }
    }

    /// Records a piece of a peer's message (a packet, a fragment) that arrived, if asked to.
    #[inline]
    pub fn note_arrival(&mut self, bytes: u64) {
        if let Some(log) = self.arrivals.as_mut() {
            log.note(bytes);
        }
    }

    /// Counts a packet of ours of `bytes` that our provider put on the wire (into the peer's
    /// ring, to libfabric, or landed at a queue of this process), and records when, if asked to.
    #[inline]
    pub fn packet_left(&mut self, bytes: u64) {
        self.paced_packets += 1;
        if let Some(log) = self.departures.as_mut() {
            log.note(bytes);
        }
    }

    /// The queue's shared pool, once it has one.
    pub fn arena(&self) -> Option<&std::sync::Arc<crate::buf::arena::Arena>> {
        self.arena.as_ref()
    }

    /// The queue has its shared pool: WRs from its buffers may cross by reference or placed.
    pub fn adopt_arena(&mut self, arena: std::sync::Arc<crate::buf::arena::Arena>) {
        self.arena = Some(arena);
    }

    /// What crossed without a copy into a ring, and the one-sided WRs by how they went.
    pub fn zero_copy(&self) -> &ZeroCopy {
        &self.zero_copy
    }

    /// Starts recording the pieces of the peer's messages as they arrive (`leaving`: of ours,
    /// as our provider puts them on the wire), at most `limit` of them, dropping what was
    /// recorded before.
    pub fn record_pieces(&mut self, leaving: bool, limit: usize) {
        *self.pieces_log(leaving) = Some(Box::new(ArrivalLog::new(limit)));
    }

    /// What was recorded since `record_pieces` or the last call (in order), and how many more
    /// passed past the limit; recording goes on.
    pub fn take_pieces(&mut self, leaving: bool) -> (Vec<Arrival>, u64) {
        self.pieces_log(leaving)
            .as_mut()
            .map(|log| log.take())
            .unwrap_or_default()
    }

    fn pieces_log(&mut self, leaving: bool) -> &mut Option<Box<ArrivalLog>> {
        match leaving {
            false => &mut self.arrivals,
            true => &mut self.departures,
        }
    }

    /// Counts `n` packets of ours that our provider put on the wire (their departures
    /// recorded by the provider).
    pub fn packets_left(&mut self, n: u64) {
        self.paced_packets += n;
    }

    /// Packets of paced messages our provider has put on the wire since the queue was created.
    pub fn paced_packets(&self) -> u64 {
        self.paced_packets
    }

    /// Whether the queue has a rate limit: its WRs wait for the pacer's grants.
    #[inline(always)]
    pub fn is_paced(&self) -> bool {
        self.paced.is_some()
    }

    /// The WRs that wait for the pacer, while the queue has a rate limit.
    pub fn paced(&self) -> Option<&Paced> {
        self.paced.as_ref()
    }

    /// The same, to change.
    pub fn paced_mut(&mut self) -> Option<&mut Paced> {
        self.paced.as_mut()
    }

    /// The queue takes a rate limit with packets of `pmtu` bytes (or keeps its own, with that
    /// PMTU from now).
    pub fn pace(&mut self, pmtu: u32) {
        self.paced
            .get_or_insert_with(|| Paced::new(pmtu))
            .set_pmtu(pmtu);
    }

    /// The queue's rate limit ends: the WRs it held go to the send queue, all their packets
    /// granted.
    pub fn unpace(&mut self) {
        self.release_held();
        self.paced = None;
    }

    /// Counts a WR whose message we placed in the peer's receive buffer.
    pub fn count_placed(&mut self, wr: *mut umq_buf_t) {
        self.zero_copy
            .count_placed(unsafe { (*wr).total_data_size } as u64);
    }

    /// Completes the oldest WR in flight with `status` (`awaited`: it was handed over as
    /// awaiting the peer), restoring a WR that carried our window update to the
    /// plain SEND it was posted as.
    #[inline(always)]
    pub fn finish_next(&mut self, status: umq_buf_status_t, awaited: bool, out: &mut Outcome) {
        let wr = self.sq.complete_next(status, awaited);
        self.restore_if_carrier(wr);
        out.tx_done += 1;
    }

    /// Records that a WR just admitted carries our window update (`target::
    /// restore_piggyback_carrier` gives it back as the SEND it was posted as, on completion).
    pub fn note_carrier(&mut self) {
        self.carriers += 1;
    }

    /// Restores `wr`, completing, if it carried our window update. One compare while no
    /// carrier is pending, as for every WR without flow control.
    #[inline(always)]
    fn restore_if_carrier(&mut self, wr: *mut umq_buf_t) {
        if self.carriers != 0 && unsafe { super::target::restore_piggyback_carrier(wr) } {
            self.carriers -= 1;
        }
    }

    /// `finish_next` for `wr`, the next unsent WR, with nothing in flight ahead of it: it ran,
    /// or its bytes left, as it was handed over.
    #[inline(always)]
    pub fn finish_unsent(
        &mut self,
        wr: *mut umq_buf_t,
        status: umq_buf_status_t,
        out: &mut Outcome,
    ) {
        self.sq.complete_unsent(wr, status);
        self.restore_if_carrier(wr);
        out.tx_done += 1;
    }

    /// `wr`, which a provider ran to its end inside the post that made it (a one-sided WR the
    /// initiator carried out), takes its place in the send queue already complete with
    /// `status`, and is counted as the send loop counts what it sends.
    #[inline(always)]
    pub fn ran_in_post(&mut self, wr: *mut umq_buf_t, status: umq_buf_status_t, out: &mut Outcome) {
        let opcode = unsafe { (*wr).pro().opcode };
        unsafe { (*wr).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
        self.sq.push(wr);
        self.finish_unsent(wr, status, out);
        out.count_sent(opcode);
    }

    /// WRs the pacer holds back.
    pub fn held(&self) -> usize {
        self.paced.as_ref().map_or(0, Paced::held_len)
    }

    /// Whether the peer paused the queue's priority: no new message (or packet) starts.
    #[inline(always)]
    pub fn paused(&self) -> bool {
        super::pause::in_use() && self.pause.as_ref().is_some_and(|g| !g.may_start())
    }

    /// How the provider sends the WRs of a rate-limited queue (None: whole, as they come).
    #[inline]
    pub fn packet_gate(&self) -> Option<PacketGate> {
        self.paced.as_ref().map(Paced::gate)
    }

    /// Moves every WR the pacer holds into the send queue (in order, after the others), all
    /// their packets granted.
    pub fn release_held(&mut self) {
        if let Some(p) = self.paced.as_mut() {
            for wr in p.release_all() {
                self.sq.push(wr);
            }
        }
    }

    /// Completes every uncompleted WR with an error: `first` for the oldest, flush for the rest.
    pub fn fail_uncompleted(&mut self, first: umq_buf_status_t) -> usize {
        self.release_held();
        if self.carriers != 0 {
            // A carrier fails as the SEND the application posted, as it would have completed.
            for wr in self.sq.uncompleted_wrs() {
                unsafe { super::target::restore_piggyback_carrier(wr) };
            }
            self.carriers = 0;
        }
        let n = self.sq.fail_uncompleted(first);
        self.local_packets = None;
        self.rnr.ended();
        self.clear_credit();
        n
    }

    /// Whether every credit-needing WR waiting holds its credit (no send loop need check one):
    /// always but in queued mode.
    #[inline]
    pub fn waits_hold_credit(&self) -> bool {
        self.uncovered == 0
    }

    /// Waiting credit-needing WRs without credit, and while there are any, those with it.
    #[cfg(test)]
    pub fn coverage(&self) -> (usize, usize) {
        (self.uncovered, self.credited)
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
        let held = self.paced.iter().flat_map(Paced::held);
        self.sq
            .unsent()
            .chain(held)
            .filter(|&b| needs_rx_buffer(unsafe { (*b).pro().opcode }))
            .count()
    }
}

/// Since the queue was created: what crossed to or from another process without a copy
/// through a ring.
#[derive(Default, Clone, Copy, Debug)]
pub struct ZeroCopy {
    /// WRs (and bytes) sent by reference: the peer copied them out of our shared pool.
    pub by_ref_wr: u64,
    pub by_ref_bytes: u64,
    /// WRs (and bytes) we wrote straight into the peer's receive buffers, and messages that
    /// arrived already in ours (see `shm::placement`).
    /// A message split between the two copies counts in both, each with its part's bytes.
    pub placed_wr: u64,
    pub placed_bytes: u64,
    pub placed_rx: u64,
    /// One-sided WRs carried out by this side alone (`shm::direct`): through the target's
    /// shared pool mapped here, or by the kernel.
    pub one_sided_mapped_wr: u64,
    pub one_sided_kernel_wr: u64,
    /// Network: one-sided WRs that went by libfabric RMA (`fabric::rma`).
    pub one_sided_rma_wr: u64,
    /// Network: rings of the peer's call bell, and the peer's rings answered here
    /// (`transport::call_bell`).
    pub calls_sent: u64,
    pub calls_answered: u64,
    /// Network: times the answers to the peer's WRITEs went with a message of ours, having
    /// waited for it (`fabric::tx::HeldAnswers`).
    pub answers_carried: u64,
}

impl ZeroCopy {
    pub fn count_placed(&mut self, bytes: u64) {
        self.placed_wr += 1;
        self.placed_bytes += bytes;
    }

    pub fn count_by_ref(&mut self, bytes: u64) {
        self.by_ref_wr += 1;
        self.by_ref_bytes += bytes;
    }
}

/// One side of a delivery: the queue's handle, its wire and how it receives.
pub struct Side<'a> {
    pub umqh: u64,
    pub wire: &'a mut Wire,
    /// Base-API receivers take a long message in several library-posted buffers.
    pub fragments: bool,
    /// Messages that landed in receive buffers through this side: flow control learns of them
    /// once, as the side goes (`Drop`), so a delivery of many pays its flow-control match once
    /// and no landing path can forget it. Nothing of the delivery reads the count meanwhile:
    /// the side holds the wire.
    landed: u64,
}

impl<'a> Side<'a> {
    #[inline(always)]
    pub fn new(umqh: u64, wire: &'a mut Wire, fragments: bool) -> Side<'a> {
        Side {
            umqh,
            wire,
            fragments,
            landed: 0,
        }
    }

    /// A message landed in receive buffers.
    #[inline(always)]
    pub(crate) fn count_landing(&mut self) {
        self.landed += 1;
    }
}

impl Drop for Side<'_> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.landed != 0
            && let Some(f) = self.wire.flow.as_mut()
        {
            f.data_arrived(self.landed);
        }
    }
}

/// The receiving queue, as a provider's round needs it.
pub struct Receiver<'a> {
    pub umqh: u64,
    /// Base-API receivers take a long message in several library-posted buffers.
    pub fragments: bool,
    pub pool: &'a crate::buf::pool::Pool,
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
    /// A post meant to go in one pass left its WR for a later round (the provider did not
    /// take it yet): the queue files one with the progress engine, as after any post round.
    pub left_for_round: bool,
}

impl Outcome {
    /// Counts a WR that went (or ran) for the queue's statistics.
    #[inline(always)]
    pub fn count_sent(&mut self, opcode: umq_opcode_t) {
        match opcode {
            UMQ_OPC_READ => self.reads += 1,
            UMQ_OPC_NOP => {}
            _ => self.sends += 1,
        }
    }

    /// Adds what a later round of the same call completed.
    pub fn absorb(&mut self, later: Outcome) {
        self.tx_done += later.tx_done;
        self.rx_done += later.rx_done;
        self.sends += later.sends;
        self.reads += later.reads;
        self.blocked |= later.blocked;
        self.credit_wait = later.credit_wait;
        self.left_for_round |= later.left_for_round;
    }
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
        let got = w.flow.as_mut().is_some_and(|f| f.take_one_credit());
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

#[cfg(test)]
mod tests {
    use super::*;

    fn send(imm: u64, op: umq_opcode_t) -> umq_buf_t {
        let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
        b.pro_mut().opcode = op;
        b.pro_mut().imm_data = imm;
        b
    }

    /// A SEND that carried our window update completes as the SEND the application posted,
    /// whether it completes or fails; a user's SEND_IMM keeps its immediate.
    #[test]
    fn carriers_complete_and_fail_as_the_sends_they_were() {
        let private = 1; // the library's bit of an immediate
        assert!(crate::flow::is_private(private));
        let mut bufs = [
            send(private, UMQ_OPC_SEND_IMM),
            send(6, UMQ_OPC_SEND_IMM),
            send(private, UMQ_OPC_SEND_IMM),
        ];
        let mut w = Wire::new(4, 4);
        for b in &mut bufs {
            w.sq.push(b);
        }
        w.note_carrier();
        w.note_carrier();
        let mut out = Outcome::default();
        let first = w.sq.next_unsent().unwrap();
        w.finish_unsent(first, UMQ_BUF_SUCCESS, &mut out);
        let second = w.sq.next_unsent().unwrap();
        w.finish_unsent(second, UMQ_BUF_SUCCESS, &mut out);
        assert_eq!(w.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR), 1);
        let seen: Vec<_> = bufs
            .iter()
            .map(|b| (b.pro().opcode, b.pro().imm_data, b.status()))
            .collect();
        assert_eq!(
            seen,
            [
                (UMQ_OPC_SEND, 0, UMQ_BUF_SUCCESS),
                (UMQ_OPC_SEND_IMM, 6, UMQ_BUF_SUCCESS),
                (UMQ_OPC_SEND, 0, UMQ_BUF_WR_FLUSH_ERR),
            ]
        );
        assert_eq!(out.tx_done, 2);
    }
}
