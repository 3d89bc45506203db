//! In-process loopback: the carrier that executes a sender's WRs against its peer queue, which
//! the sender holds locked, with the semantics of RDMA verbs (RC).
//!
//! A WR runs to its end when it is handed over, so nothing is ever in flight: the unsent WRs
//! wait, in order, for receive buffers at the peer (the RNR wait of RDMA), and completions are
//! FIFO per queue pair by construction.

use super::assembly::{Assembly, Otherwise};
use super::binding::{Station, lock_pair, side};
use super::target::*;
use super::transmit::{Carrier, Handed, transmit};
use super::wire::*;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;

/// Executes one WR with the shared target executor; None when it must wait for a receive
/// buffer. (Out of line: `send_one` takes the common case, and the loop around it stays small.)
#[inline(never)]
unsafe fn execute(
    wr: *mut umq_buf_t,
    dst: &mut Side,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    unsafe { execute_from(wr, pieces(wr), dst, pool, out) }
}

/// `execute` with the message's bytes taken from `src` (the WR's buffers, or the packets that
/// arrived).
unsafe fn execute_from<S: Iterator<Item = (*mut u8, usize)> + Clone>(
    wr: *mut umq_buf_t,
    src: S,
    dst: &mut Side,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let pro = unsafe { *(*wr).pro() };
    let req = Request {
        opcode: pro.opcode,
        imm: pro.imm_data,
        len: unsafe { (*wr).total_data_size } as u64,
        src,
        remote: pro.remote_sge,
    };
    match execute_wr(dst, &req, pool, &mut Poster(wr), out) {
        Executed::Done(status) => Some(status),
        _ => None,
    }
}

/// The WR's own side in this process: a READ lands in it directly.
struct Poster(*mut umq_buf_t);

impl Initiator for Poster {
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t> {
        land_read(self.0, from, len);
        Some(UMQ_BUF_SUCCESS)
    }
}

/// The common case in one pass: a one-buffer SEND or SEND_IMM into the next posted receive
/// buffer, which holds it. False (nothing done) when the WR needs the general path.
#[inline(always)]
unsafe fn send_one(wr: *mut umq_buf_t, dst: &mut Side, out: &mut Outcome) -> bool {
    let Some(rx) = whole_in_one(wr, dst) else {
        return false;
    };
    unsafe { land_whole(wr, rx, dst, out) };
    true
}

/// The receive buffer `wr` lands in whole, at once: the receiver's next posted one, when `wr`
/// is a one-buffer SEND or SEND_IMM that it holds (`whole_in_next`). None when the WR needs the
/// general path.
#[inline(always)]
fn whole_in_one(wr: *mut umq_buf_t, dst: &mut Side) -> Option<*mut umq_buf_t> {
    let w = unsafe { &*wr };
    if w.data_size != w.total_data_size {
        return None;
    }
    whole_in_next(dst.wire, w.pro().opcode, w.total_data_size)
}

/// Lands `wr`'s one buffer in `rx` (`whole_in_one`) and completes the receive.
#[inline(always)]
unsafe fn land_whole(wr: *mut umq_buf_t, rx: *mut umq_buf_t, dst: &mut Side, out: &mut Outcome) {
    let w = unsafe { &*wr };
    let (src, len, pro) = (w.buf_data as *const u8, w.total_data_size, w.pro());
    unsafe { land_in(dst, rx, src, len, pro.opcode, pro.imm_data, out) };
}

/// A post's only WR in one pass, as a link's provider sends one (`Link::send_one_if`): a
/// one-buffer SEND or SEND_IMM (`LoneSend`) that lands whole in the receiver's next posted buffer, while
/// nothing of the sender's waits before it and the peer has not paused it, goes through no
/// send loop. `admit` takes its credit and queues it (false: no credit); it lands, and both
/// completions are made. None, with nothing changed, when it cannot go so: the post then
/// delivers the usual way. The caller holds both wire locks.
#[inline(always)]
pub fn send_one_if<S: Station>(
    src: &mut Wire,
    dst: &mut Wire,
    receiver: &S,
    lone: LoneSend,
    admit: impl FnOnce(&mut Wire, &crate::flow::Area) -> bool,
) -> Option<Outcome> {
    if !src.sq.all_completed() || src.paused() || src.local_packets.is_some() {
        return None;
    }
    let dst = &mut side(dst, receiver);
    let rx = next_holding(dst.wire, lone.bytes())?;
    let wr = lone.wr();
    if !admit(src, receiver.area()) {
        return None;
    }
    let t = crate::dfx::tp_perf_start();
    let mut out = Outcome::default();
    unsafe { land_whole(wr, rx, dst, &mut out) };
    src.finish_unsent(wr, UMQ_BUF_SUCCESS, &mut out);
    out.sends = 1;
    src.rnr.ended();
    crate::dfx::tp_perf_record(crate::dfx::TransportOp::Send, t);
    Some(out)
}

/// Runs `src`'s unsent WRs against `receiver`, whose wire is `dst`; the caller holds both
/// locks. A sender that stops for want of a receive buffer or of credit is noted at the
/// receiver before the locks go, so the receiver's next post, which takes its wire lock (or, on
/// a shared receive queue, passes through it), sees it and moves the sender.
#[inline(always)]
pub fn deliver_to<S: Station>(
    src: &mut Wire,
    dst: &mut Wire,
    receiver: &S,
    pool: &Pool,
) -> Outcome {
    let out = deliver(src, &mut side(dst, receiver), pool);
    if out.blocked || out.credit_wait {
        receiver.note_sender_waiting();
    }
    out
}

/// The WRITEs and READs at the front of `wrs`, run against the peer here (its wire `dst`, both
/// locked) and completed at once, as `deliver` would run them, while nothing of `src` waits
/// before them and no pacer holds its WRs: the post that made them skips its send queue's
/// admission and the send loop. How many ran, while the send queue holds fewer than `room`;
/// the rest are posted the usual way.
pub fn run_one_sided<S: Station>(
    src: &mut Wire,
    dst: &mut Wire,
    receiver: &S,
    wrs: &[*mut umq_buf_t],
    room: usize,
    pool: &Pool,
    out: &mut Outcome,
) -> usize {
    if !src.sq.all_completed()
        || src.paused()
        || src.is_paced()
        || src.local_packets.is_some()
        || !src.waits_hold_credit()
    {
        return 0;
    }
    let t = crate::dfx::tp_perf_start();
    let dst = &mut side(dst, receiver);
    let mut ran = 0;
    while ran < wrs.len() && src.sq.len() < room {
        let wr = wrs[ran];
        let opcode = unsafe { (*wr).pro().opcode };
        if opcode != UMQ_OPC_WRITE && opcode != UMQ_OPC_READ {
            break;
        }
        // A WRITE or READ never waits for a receive buffer: it always has a status.
        let status = unsafe { execute(wr, dst, pool, out) }.unwrap_or(UMQ_BUF_SUCCESS);
        src.ran_in_post(wr, status, out);
        ran += 1;
    }
    if ran > 0 {
        crate::dfx::tp_perf_record(crate::dfx::TransportOp::Send, t);
    }
    ran
}

/// `deliver_to` under both wire locks, taken here: the sender's WRs that were waiting for the
/// receiver (its buffers, its credit, or packets granted since).
pub fn deliver_pair<S: Station>(sender: &S, receiver: &S, pool: &Pool) -> Outcome {
    let (mut src, mut dst) = lock_pair(sender, receiver);
    deliver_to(&mut src, &mut dst, receiver, pool)
}

/// Delivers a standalone window update to `peer` (its wire locked) if it has a buffer posted
/// to take it; returns whether it did.
pub fn deliver_update<S: Station>(theirs: &mut Wire, peer: &S, imm: u64) -> bool {
    if !theirs.rq.has_posted() {
        return false;
    }
    deliver_standalone(&mut side(theirs, peer), imm);
    true
}

/// Carries the credit protocol's messages between two wires of this process, both locked,
/// until neither has one left (an answer may call for another: a return's acknowledgement, a
/// request at the threshold). Returns whether any moved.
#[cold]
#[inline(never)]
pub fn exchange_credit(a: &mut Wire, b: &mut Wire) -> bool {
    let mut any = false;
    while carry_credit(a, b) | carry_credit(b, a) {
        any = true;
    }
    any
}

fn carry_credit(from: &mut Wire, to: &mut Wire) -> bool {
    let Some(src) = from.flow.as_mut().and_then(|f| f.credit()) else {
        return false;
    };
    let mut moved = false;
    while let Some(m) = src.take_outgoing() {
        moved = true;
        // A peer without the protocol (it unbound meanwhile) takes nothing.
        if let Some(dst) = to.flow.as_mut().and_then(|f| f.credit()) {
            dst.on_msg(m);
        }
    }
    moved
}

/// What unbinding a pair in this process flushed: our sends failed, our receive buffers
/// flushed, and the peer's sends failed.
pub struct Flushed {
    pub tx: usize,
    pub rx: usize,
    pub peer_tx: usize,
}

/// Unbinds `me` from `peer`, both in this process: our receive buffers and uncompleted sends
/// are flushed, and the peer's sends too when it is still bound to us (they have nowhere to
/// land).
pub fn unbind<S: Station>(me: &S, peer: &S, peer_bound_to_us: bool) -> Flushed {
    let (mut mine, mut theirs) = lock_pair(me, peer);
    Flushed {
        rx: mine.rq.flush(),
        tx: mine.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR),
        peer_tx: if peer_bound_to_us {
            theirs.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR)
        } else {
            0
        },
    }
}

/// Runs the sender's unsent WRs, in order, until one has to wait for a receive buffer (or, for
/// a rate-limited queue, for its next packets to be granted).
#[inline(always)]
pub fn deliver(src: &mut Wire, dst: &mut Side, pool: &Pool) -> Outcome {
    // Timed only when there is something to send (a receive post looks for waiting sends).
    let t = crate::dfx::tp_perf_start().filter(|_| src.sq.unsent_len() > 0);
    let mut out = Outcome::default();
    // A limited queue's WRs may go as packets (looked at only then: this is every delivery).
    let paced = src.is_paced() || src.local_packets.is_some();
    let mut carrier = Delivery {
        dst,
        pool,
        paced,
        gate: if paced { src.packet_gate() } else { None },
    };
    transmit(src, &mut carrier, &mut out);
    crate::dfx::tp_perf_record(crate::dfx::TransportOp::Send, t);
    out
}

/// Loopback's carrier: a WR runs against the peer queue, which the sender holds locked, and
/// completes at once; it waits only for a receive buffer there (the RNR wait of RDMA) or for
/// its packets' grants.
struct Delivery<'a, 'b> {
    dst: &'a mut Side<'b>,
    pool: &'a Pool,
    paced: bool,
    gate: Option<PacketGate>,
}

impl Carrier for Delivery<'_, '_> {
    #[inline(always)]
    fn carry(&mut self, src: &mut Wire, wr: *mut umq_buf_t, out: &mut Outcome) -> Handed {
        let done = if self.paced {
            match unsafe { deliver_paced(src, self.dst, wr, self.gate, self.pool, out) } {
                // The rest of the message waits for its grants.
                PacedStep::Waits => return Handed::NoResource,
                PacedStep::Ran(done) => done,
            }
        } else if unsafe { send_one(wr, self.dst, out) } {
            // The common case returns its status as a constant, which the send loop sees.
            src.rnr.ended();
            return Handed::Ran;
        } else {
            unsafe { execute(wr, self.dst, self.pool, out) }
        };
        match done {
            Some(status) => {
                src.rnr.ended();
                Handed::ran(status)
            }
            None => {
                src.rnr.began();
                out.blocked = true;
                Handed::NoResource
            }
        }
    }
}

/// What a rate-limited queue's WR did: ran (None: it waits for a receive buffer), or waits for
/// its next packets to be granted.
enum PacedStep {
    Ran(Option<umq_buf_status_t>),
    Waits,
}

/// `deliver`'s step for a rate-limited queue's WR: its packets land as they are allowed and it
/// runs at its Last; a message that is no more than one packet (an Only packet) goes as without
/// a limit. Out of line, off the common path.
#[cold]
#[inline(never)]
unsafe fn deliver_paced(
    src: &mut Wire,
    dst: &mut Side,
    wr: *mut umq_buf_t,
    gate: Option<PacketGate>,
    pool: &Pool,
    out: &mut Outcome,
) -> PacedStep {
    let Some(allowed) = packet_allowance(gate, src, wr) else {
        let done = unsafe { execute(wr, dst, pool, out) };
        if done.is_some() && gate.is_some() {
            src.packet_left(unsafe { (*wr).total_data_size } as u64); // an Only packet
        }
        return PacedStep::Ran(done);
    };
    if !land_packets(src, dst.wire, wr, allowed) {
        return PacedStep::Waits;
    }
    PacedStep::Ran(unsafe { execute_arrived(src, wr, dst, pool, out) })
}

/// Whether `wr` goes as packets, and if so how many bytes of its message may have arrived by
/// now: a rate-limited queue's message longer than its PMTU, or one whose packets are already
/// arriving (its limit lifted since: the rest comes at once, in packets of the same size).
#[cold]
#[inline(never)]
fn packet_allowance(gate: Option<PacketGate>, src: &mut Wire, wr: *mut umq_buf_t) -> Option<u64> {
    if src.local_packets.is_some() {
        return Some(packets_allowed(gate, wr));
    }
    let g = gate.filter(|g| g.cuts(wr))?;
    src.local_packets = Some(Box::new(LocalPackets::new(g.pmtu)));
    Some(packets_allowed(gate, wr))
}

/// Lands the next packets of `wr`'s message at the peer, each as it is allowed, recording
/// their arrival there; true once every packet has arrived.
fn land_packets(src: &mut Wire, dst: &mut Wire, wr: *mut umq_buf_t, allowed: u64) -> bool {
    let total = unsafe { (*wr).total_data_size } as u64;
    loop {
        let arriving = src
            .local_packets
            .as_mut()
            .expect("packet_allowance began it");
        let at = arriving.received();
        if at == total {
            return true;
        }
        let n = (total - at).min(arriving.packet as u64);
        if at + n > allowed {
            return false;
        }
        if arriving
            .assembly
            .as_ref()
            .is_some_and(|a| a.lost_its_buffer(dst))
        {
            // A window update took the buffer between two packets. The message's bytes are
            // still the sender's: it begins again, from its first byte, where it now lands.
            arriving.assembly = None;
            assemble(arriving, dst, wr, 0, at);
        }
        assemble(arriving, dst, wr, at, n);
        src.packet_left(n);
        dst.note_arrival(n);
    }
}

/// Bytes `at..at + n` of `wr`'s message (across its buffers) join what arrived of it: in the
/// receiver's next posted buffer when that holds the message (`Assembly`), aside otherwise.
fn assemble(arriving: &mut LocalPackets, dst: &mut Wire, wr: *mut umq_buf_t, at: u64, n: u64) {
    let (total, op) = unsafe { ((*wr).total_data_size as u64, (*wr).pro().opcode) };
    let mut want = n as usize;
    for (p, len) in pieces_from(pieces(wr), at as usize) {
        let take = len.min(want);
        if take == 0 {
            break;
        }
        // SAFETY: a posted WR's buffers hold `data_size` bytes each (checked at post).
        let piece = unsafe { std::slice::from_raw_parts(p, take) };
        let joined = match &mut arriving.assembly {
            Some(a) => a.add(dst, piece),
            None => Assembly::begin(dst, op, total, piece, Otherwise::Aside)
                .map(|a| arriving.assembly = Some(a)),
        };
        // A packet is shorter than its message, and the pieces are the message's own, in order
        // and still in its buffer (`land_packets`).
        joined.expect("a message's own packets join it");
        want -= take;
    }
}

/// Runs `wr` from its packets, all arrived; they are let go once it ran (None: it waits for a
/// receive buffer, and they stay).
unsafe fn execute_arrived(
    src: &mut Wire,
    wr: *mut umq_buf_t,
    dst: &mut Side,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let arriving = src.local_packets.as_ref().expect("landed");
    let assembly = arriving.assembly.as_ref().expect("a message in packets");
    let status = match assembly.in_buffer() {
        Some(rx) => {
            // Every byte is in `rx`, still the next posted buffer: the Last joined it under
            // these locks (`land_packets`), and landing in place never waits.
            debug_assert!(!assembly.lost_its_buffer(dst.wire));
            let (len, pro) = unsafe { ((*wr).total_data_size, *(*wr).pro()) };
            unsafe { land_placed(dst, rx, len, pro.opcode, pro.imm_data, out) };
            UMQ_BUF_SUCCESS
        }
        // Put together aside: the executor takes the bytes the packets brought.
        None => {
            let data = assembly.aside();
            let bytes = std::iter::once((data.as_ptr() as *mut u8, data.len()));
            unsafe { execute_from(wr, bytes, dst, pool, out) }?
        }
    };
    src.local_packets = None;
    Some(status)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::{Area, FlowState, Params};
    use crate::transport::spin::SpinMutex;
    use crate::transport::wired::Wired;
    use std::ptr;

    /// A receiving queue for `send_one_if`: its handle, flow-control area and wire.
    struct Receiver {
        area: Area,
        wired: SpinMutex<Wired>,
    }

    impl Station for Receiver {
        fn wired(&self) -> &SpinMutex<Wired> {
            &self.wired
        }
        fn lock_order(&self) -> u32 {
            2
        }
        fn area(&self) -> &Area {
            &self.area
        }
        fn handle(&self) -> u64 {
            2
        }
        fn takes_fragments(&self) -> bool {
            false
        }
        fn note_sender_waiting(&self) {}
    }

    /// The one-pass post of a lone SEND does what the send loop would, or nothing: it goes
    /// only with a receive buffer that holds it, nothing of the sender's ahead of it and the
    /// admission's consent; then both completions are made, the bytes and immediate land,
    /// and the landing reaches the receiver's flow control.
    #[test]
    fn a_lone_send_goes_in_one_pass_or_not_at_all() {
        let pool = Pool::new(false, 0, 0);
        let rx = Receiver {
            area: Area::default(),
            wired: SpinMutex::new(Wired::new(8, 8)),
        };
        let mut src = Wire::new(8, 8);
        // A message one byte longer than the buffer posted first.
        let short = pool.alloc(64, 1, 0, 0).unwrap();
        let len = unsafe { (*short).buf_size } + 1;
        let send = crate::transport::test_wr(&pool, len, UMQ_OPC_SEND_IMM, 0x60);
        let lone = LoneSend::of(send).expect("one SEND_IMM in one buffer");
        let admit = |w: &mut Wire, _: &Area| {
            w.sq.push(send);
            true
        };
        let mut dst = rx.wired.lock();
        dst.flow = Some(FlowState::new(Params::new(4, 0, 8, 8)));
        // No receive buffer posted: nothing happens, not even the admission.
        assert!(send_one_if(&mut src, &mut dst, &rx, lone, |_, _| unreachable!()).is_none());
        // A buffer too short for the message: the general path says what happens.
        dst.rq.post(short);
        assert!(send_one_if(&mut src, &mut dst, &rx, lone, |_, _| unreachable!()).is_none());
        assert_eq!(dst.rq.posted_len(), 1);
        dst.rq.take_posted();
        let big = pool.alloc(len, 1, 0, 0).unwrap();
        dst.rq.post(big);
        // An admission that refuses (no credit) leaves everything as it was.
        assert!(send_one_if(&mut src, &mut dst, &rx, lone, |_, _| false).is_none());
        assert_eq!((src.sq.len(), dst.rq.posted_len()), (0, 1));
        // A WR of ours waiting ahead of it: it must not overtake.
        let ahead = crate::transport::test_wr(&pool, 8, UMQ_OPC_SEND, 0);
        src.sq.push(ahead);
        assert!(send_one_if(&mut src, &mut dst, &rx, lone, |_, _| unreachable!()).is_none());
        src.sq.complete_unsent(ahead, UMQ_BUF_SUCCESS);
        let mut got = [ptr::null_mut(); 2];
        assert_eq!(src.sq.take_completed(&mut got), 1);
        // Now it goes: both completions, the bytes and the immediate, one arrival counted.
        let out = send_one_if(&mut src, &mut dst, &rx, lone, admit).expect("one pass");
        assert_eq!((out.tx_done, out.rx_done, out.sends), (1, 1, 1));
        assert_eq!(src.sq.take_completed(&mut got), 1);
        assert_eq!(got[0], send);
        assert_eq!(dst.rq.take_completions(&mut got), 1);
        assert_eq!(got[0], big);
        let landed = unsafe { &*big };
        assert_eq!(landed.data_size, len);
        assert_eq!(landed.pro().imm_data, 0x60);
        assert_eq!(landed.pro().opcode, UMQ_OPC_SEND_IMM);
        assert!(crate::transport::test_bytes_intact(big, len as usize));
        let f = dst.flow.as_mut().unwrap();
        assert!(f.peer_used_all_known(1) && !f.peer_used_all_known(2));
        drop(dst);
        for b in [send, ahead, short, big] {
            pool.free_one(b).unwrap();
        }
    }

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
        let mut peer = FlowState::new(Params::new(4, 0, 8, 8));
        peer.rx_posted(4);
        peer.publish(&area);
        let mut f = FlowState::new(Params::new(0, 0, 8, 8));
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
                w.sq.push(&mut *b);
                wrs.push(b);
            }
        };
        // Two SENDs with credit wait: nothing to check for them.
        admit(&mut w, &[UMQ_OPC_SEND, UMQ_OPC_SEND], 2);
        assert!(w.waits_hold_credit());
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
        assert_eq!(w.coverage(), (2, 3));
        let mut gate = CreditGate::open(&w);
        let ops: Vec<_> = w.sq.iter().map(|b| unsafe { (*b).pro().opcode }).collect();
        let passed: Vec<bool> = ops.iter().map(|&op| gate.pass(&mut w, op)).collect();
        // Three held credits, then the window's last one, the WRITE needs none, then empty.
        assert_eq!(passed, [true, true, true, true, true, false]);
        gate.close(&mut w);
        assert_eq!(w.coverage(), (1, 0));
        assert_eq!(w.flow.as_mut().unwrap().window(), 0);
    }

    /// A paced message of three buffers, its packets at the peer.
    struct ThreeBuffers {
        pool: Pool,
        bufs: Vec<*mut umq_buf_t>,
        want: Vec<u8>,
    }

    impl ThreeBuffers {
        fn new() -> Self {
            let pool = Pool::new(false, 0, 0);
            let parts = [1500u32, 700, 2900];
            let bufs: Vec<_> = parts
                .iter()
                .map(|&n| crate::transport::test_wr(&pool, n, UMQ_OPC_SEND, 0))
                .collect();
            for w in bufs.windows(2) {
                unsafe { (*w[0]).qbuf_next = w[1] };
            }
            let head = bufs[0];
            unsafe { (*head).total_data_size = parts.iter().sum() };
            let want = parts
                .iter()
                .flat_map(|&n| (0..n as usize).map(|i| (i % 251) as u8))
                .collect();
            ThreeBuffers { pool, bufs, want }
        }

        fn head(&self) -> *mut umq_buf_t {
            self.bufs[0]
        }

        fn total(&self) -> u64 {
            self.want.len() as u64
        }
    }

    impl Drop for ThreeBuffers {
        fn drop(&mut self) {
            for &b in &self.bufs {
                unsafe { (*b).qbuf_next = std::ptr::null_mut() };
                self.pool.free_one(b).unwrap();
            }
        }
    }

    fn paced_wires() -> (Wire, Wire) {
        let (mut src, mut dst) = (Wire::new(8, 8), Wire::new(8, 8));
        dst.arrivals = Some(Box::new(crate::transport::arrivals::ArrivalLog::new(16)));
        src.departures = Some(Box::new(crate::transport::arrivals::ArrivalLog::new(16)));
        src.local_packets = Some(Box::new(LocalPackets::new(1024)));
        (src, dst)
    }

    fn receive_buffer(bytes: usize) -> (Vec<u8>, Box<umq_buf_t>) {
        let mut data = vec![0u8; bytes];
        let mut b: Box<umq_buf_t> = Box::new(unsafe { std::mem::zeroed() });
        b.buf_data = data.as_mut_ptr() as *mut _;
        b.buf_size = bytes as u32;
        (data, b)
    }

    /// A paced message of three buffers reaches the peer packet by packet, each packet only
    /// once allowed, across buffer boundaries, each recorded as an arrival there; with no
    /// receive buffer posted its bytes are put together aside.
    #[test]
    fn packets_of_a_message_in_several_buffers_arrive_as_allowed() {
        let m = ThreeBuffers::new();
        let (mut src, mut dst) = paced_wires();
        let aside = |src: &Wire| {
            let a = src.local_packets.as_ref().unwrap().assembly.as_ref();
            a.unwrap().aside().to_vec()
        };
        assert!(!land_packets(&mut src, &mut dst, m.head(), 2048));
        assert!(!land_packets(&mut src, &mut dst, m.head(), 4000));
        assert_eq!(aside(&src), m.want[..3072]);
        assert!(land_packets(&mut src, &mut dst, m.head(), m.total()));
        assert_eq!(aside(&src), m.want);
        let (arrived, _) = dst.arrivals.as_mut().unwrap().take();
        let sizes: Vec<u32> = arrived.iter().map(|a| a.bytes).collect();
        assert_eq!(sizes, [1024, 1024, 1024, 1024, 1004]);
        assert_eq!(src.paced_packets(), 5);
        let (departed, _) = src.departures.as_mut().unwrap().take();
        let times: Vec<u64> = departed.iter().map(|d| d.at_ns).collect();
        assert!(times.is_sorted() && times.iter().zip(&arrived).all(|(d, a)| *d <= a.at_ns));
        let sizes: Vec<u32> = departed.iter().map(|d| d.bytes).collect();
        assert_eq!(
            sizes,
            [1024, 1024, 1024, 1024, 1004],
            "each packet left once"
        );
    }

    /// With a receive buffer posted that holds the message, each packet is written into it as
    /// it arrives, and nothing is kept aside; when a window update takes that buffer between
    /// two packets, the message lands whole in the next one all the same, and completes there
    /// with its immediate.
    #[test]
    fn packets_land_in_the_next_posted_buffer_as_they_arrive() {
        let m = ThreeBuffers::new();
        unsafe { (*m.head()).pro_mut().opcode = UMQ_OPC_SEND_IMM };
        unsafe { (*m.head()).pro_mut().imm_data = 0x5eed };
        let (mut src, arrivals) = paced_wires();
        let receiver = Receiver {
            area: Area::default(),
            wired: SpinMutex::new(Wired::new(8, 8)),
        };
        let mut dst = receiver.wired.lock();
        dst.arrivals = arrivals.arrivals;
        let (first, mut rx1) = receive_buffer(8192);
        let (second, mut rx2) = receive_buffer(8192);
        dst.rq.post(&mut *rx1);
        dst.rq.post(&mut *rx2);
        let in_buffer = |src: &Wire| {
            let a = src
                .local_packets
                .as_ref()
                .unwrap()
                .assembly
                .as_ref()
                .unwrap();
            assert!(a.aside().is_empty(), "nothing kept aside");
            a.in_buffer()
        };
        assert!(!land_packets(&mut src, &mut dst, m.head(), 2048));
        assert_eq!(in_buffer(&src), Some(&mut *rx1 as *mut _));
        assert_eq!(first[..2048], m.want[..2048], "in place before the Last");
        assert!(first[2048..].iter().all(|&b| b == 0));

        // A window update takes the buffer the message was landing in.
        assert_eq!(dst.rq.take_posted(), Some(&mut *rx1 as *mut _));
        assert!(land_packets(&mut src, &mut dst, m.head(), m.total()));
        assert_eq!(in_buffer(&src), Some(&mut *rx2 as *mut _));
        assert_eq!(
            second[..m.want.len()],
            m.want[..],
            "the whole message, from its start"
        );
        assert!(
            first[2048..].iter().all(|&b| b == 0),
            "nothing more in the buffer taken"
        );
        let (arrived, _) = dst.arrivals.as_mut().unwrap().take();
        let sizes: Vec<u32> = arrived.iter().map(|a| a.bytes).collect();
        assert_eq!(
            sizes,
            [1024, 1024, 1024, 1024, 1004],
            "each packet arrived once"
        );
        assert_eq!(src.paced_packets(), 5);

        let mut out = Outcome::default();
        let ran = unsafe {
            execute_arrived(
                &mut src,
                m.head(),
                &mut side(&mut dst, &receiver),
                &m.pool,
                &mut out,
            )
        };
        assert_eq!((ran, out.rx_done), (Some(UMQ_BUF_SUCCESS), 1));
        assert!(src.local_packets.is_none(), "the packets are let go");
        let mut got = [ptr::null_mut(); 2];
        assert_eq!(dst.rq.take_completions(&mut got), 1);
        let h = unsafe { &*got[0] };
        assert_eq!(got[0], &mut *rx2 as *mut _);
        assert_eq!(
            (h.status(), h.total_data_size),
            (UMQ_BUF_SUCCESS, m.total() as u32)
        );
        assert_eq!(h.pro().imm_data, 0x5eed);
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
