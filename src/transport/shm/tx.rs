//! The sending side: our WRs into the peer's ring (through the ring, placed in the peer's
//! receive buffer, or by reference), and their completions.

use super::*;
use crate::transport::transmit::{Carrier, Handed};
use crate::transport::wire::packets_allowed;

/// SEND, SEND_IMM and NOP complete once their entry is in the peer's ring (the payload is
/// copied, the buffer is free again: transmit-complete, as libfabric's shm provider), unless
/// they went by reference.
pub(super) fn transmit_complete(wr: *mut umq_buf_t, by_ref: bool) -> bool {
    matches!(
        unsafe { (*wr).pro().opcode },
        UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP
    ) && !by_ref
}

/// Whether a WR may go by reference: a SEND, SEND_IMM, WRITE or WRITE_IMM of at least
/// `BY_REF_MIN` bytes whose buffers all lie in our shared pool.
pub(super) fn may_go_by_ref(wr: *mut umq_buf_t, arena: &Arena) -> bool {
    let h = unsafe { &*wr };
    let opcode = h.pro().opcode;
    (h.total_data_size as usize) >= BY_REF_MIN
        && matches!(
            opcode,
            UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE | UMQ_OPC_WRITE_IMM
        )
        && message_pieces(wr).all(|(p, n)| arena.offset_of(p, n).is_some())
}

/// The data pieces of a WR's message (its buffers up to `total_data_size`).
pub(super) fn message_pieces(wr: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> {
    let mut left = unsafe { (*wr).total_data_size } as usize;
    target::pieces(wr)
        .map(move |(p, n)| {
            let n = n.min(left);
            left -= n;
            (p, n)
        })
        .take_while(|&(_, n)| n > 0)
}

/// Completes our WRs in order: transmit-complete ones at once, every other WR once the peer
/// executed it (up to the peer's `done` count, read when such a WR was in flight), with the
/// status the peer recorded.
pub(super) fn complete(
    w: &mut Wire,
    pair: &mut Pair,
    peer: &Segment,
    done: Option<u64>,
    out: &mut Outcome,
) -> Result<(), LinkError> {
    // The peer numbers only the WRs that went through its ring.
    let peer_seq = |w: &Wire| w.sq.completed_seq() - pair.direct_done;
    if done.is_some_and(|d| d > peer_seq(w) + w.sq.in_flight() as u64) {
        return Err(LinkError::Corrupt("peer reports completions we never sent"));
    }
    while let Some(wr) = w.sq.oldest_in_flight() {
        let seq = w.sq.completed_seq();
        let by_ref = pair.by_ref_in_flight.front() == Some(&seq);
        let quick = transmit_complete(wr, by_ref);
        let status = match done {
            Some(d) if peer_seq(w) < d => {
                let at = peer_seq(w) as usize % STATUS_SLOTS;
                let raw = peer.inbox().statuses[at].load(Ordering::Relaxed);
                target::peer_status(raw as u32)
            }
            _ if quick => UMQ_BUF_SUCCESS,
            _ => break,
        };
        if by_ref {
            pair.by_ref_in_flight.pop_front();
        }
        w.finish_next(status, !quick, out);
    }
    Ok(())
}

/// Pushes our waiting WRs into the peer's ring, in order, while credit and ring room last.
pub(super) fn transmit(w: &mut Wire, pair: &mut Pair, peer: &Segment, out: &mut Outcome) {
    // A limited queue's WRs may go as packets (looked at only then: this is every round's path).
    let paced = w.is_paced() || pair.packet_sent > 0;
    let mut carrier = Pusher {
        alone: w.sq.unsent_len() == 1,
        gate: if paced { w.packet_gate() } else { None },
        paced,
        pair,
        peer,
    };
    crate::transport::transmit::transmit(w, &mut carrier, out);
}

/// Shared memory's carrier: a WR's entry into the peer's ring (its bytes copied behind it,
/// placed in the peer's receive buffer, or by reference), or a one-sided WR carried out here.
struct Pusher<'a> {
    pair: &'a mut Pair,
    peer: &'a Segment,
    paced: bool,
    gate: Option<PacketGate>,
    /// The WR is the only one waiting (no doorbell batching to wait for).
    alone: bool,
}

impl Carrier for Pusher<'_> {
    fn carry(&mut self, w: &mut Wire, wr: *mut umq_buf_t, _out: &mut Outcome) -> Handed {
        let (pair, peer, gate) = (&mut *self.pair, self.peer, self.gate);
        // A one-sided WR with nothing of ours ahead of it at the peer runs now, whether the
        // peer runs or not (a limited queue's go as its pacer grants them).
        if w.sq.in_flight() == 0
            && !self.paced
            && is_one_sided(wr)
            && let Some(status) = one_sided(w, pair, &mut direct::Run::new(peer, pair.pid), wr)
        {
            return Handed::ran(status);
        }
        let packets = if self.paced {
            packet_allowance(gate, pair, wr)
        } else {
            None
        };
        let how = if let Some(allowed) = packets {
            push_packets(peer, wr, pair, allowed, w).then(|| {
                peer.note_pushed(unsafe { (*wr).pro().opcode });
                Sent::Copied
            })
        } else {
            let by_ref = w
                .arena
                .as_deref()
                .filter(|&a| may_go_by_ref(wr, a) && by_ref_pays(w, pair, peer));
            let how = push_wr(peer, wr, by_ref, self.alone);
            if how.is_some() && gate.is_some() {
                w.packet_left(unsafe { (*wr).total_data_size } as u64); // an Only packet
            }
            how
        };
        let Some(how) = how else {
            return Handed::NoResource;
        };
        match how {
            Sent::Placed => w.count_placed(wr),
            Sent::ByRef => w
                .zero_copy
                .count_by_ref(unsafe { (*wr).total_data_size } as u64),
            Sent::Split(head) => {
                w.zero_copy.count_placed(head);
                w.zero_copy
                    .count_by_ref(unsafe { (*wr).total_data_size } as u64 - head);
            }
            Sent::Copied => {}
        }
        // Read from our shared pool by the receiver: complete once it executed the WR.
        let by_ref = matches!(how, Sent::ByRef | Sent::Split(_));
        if by_ref {
            pair.by_ref_in_flight.push_back(w.sq.next_seq());
        }
        if transmit_complete(wr, by_ref) {
            Handed::Left
        } else {
            Handed::AtPeer
        }
    }
}

/// `wrs`, WRs of one post, carried out and completed here from the first while each is a
/// WRITE or READ that can run now, as `transmit_one` sends a lone SEND: the steps the send
/// loop takes for them (`one_sided`, then the completion and the count), without a round. A
/// WRITE or READ needs no credit, so flow control has nothing to admit. How many ran (a WR that
/// ran and was refused by the target's table counts, with its error status); the rest go the
/// usual way (another opcode, WRs of ours ahead, a pause, a closed peer, a target that must
/// execute it, a full send queue at `room`).
pub(super) fn run_one_sided(
    w: &mut Wire,
    pair: &mut Pair,
    peer: &Segment,
    wrs: &[*mut umq_buf_t],
    room: usize,
    out: &mut Outcome,
) -> usize {
    if !may_run_one_sided(w, peer) {
        return 0;
    }
    let mut run = direct::Run::new(peer, pair.pid);
    let mut ran = 0;
    while ran < wrs.len() && w.sq.len() < room && run_one(w, pair, &mut run, wrs[ran], out) {
        ran += 1;
    }
    ran
}

/// `run_one_sided` for a post's only WR, whose send queue has room: its outcome if it ran.
#[inline(always)]
pub(super) fn run_one_sided_alone(
    w: &mut Wire,
    pair: &mut Pair,
    peer: &Segment,
    wr: *mut umq_buf_t,
) -> Option<Outcome> {
    let mut out = Outcome::default();
    if !may_run_one_sided(w, peer) {
        return None;
    }
    let mut run = direct::Run::new(peer, pair.pid);
    run_one(w, pair, &mut run, wr, &mut out).then_some(out)
}

/// Nothing of ours is outstanding, the peer has not paused us and is there.
#[inline(always)]
fn may_run_one_sided(w: &Wire, peer: &Segment) -> bool {
    w.sq.all_completed() && !w.paused() && !peer.is_closed()
}

#[inline(always)]
fn run_one(
    w: &mut Wire,
    pair: &mut Pair,
    run: &mut direct::Run,
    wr: *mut umq_buf_t,
    out: &mut Outcome,
) -> bool {
    let Some(status) = one_sided(w, pair, run, wr) else {
        return false;
    };
    w.ran_in_post(wr, status, out);
    true
}

/// A WRITE or READ: a WR the initiator may carry out itself.
#[inline(always)]
fn is_one_sided(wr: *mut umq_buf_t) -> bool {
    matches!(unsafe { (*wr).pro().opcode }, UMQ_OPC_WRITE | UMQ_OPC_READ)
}

/// Carries out `wr` itself when it is a WRITE or READ the target's access table lets through
/// (or refuses), and completes it; false when the target must execute it from the ring.
fn one_sided(
    w: &mut Wire,
    pair: &mut Pair,
    run: &mut direct::Run,
    wr: *mut umq_buf_t,
) -> Option<umq_buf_status_t> {
    if !is_one_sided(wr) {
        return None;
    }
    let status = match run.execute(wr) {
        direct::Direct::ViaTarget => return None,
        direct::Direct::Refused(status) => status,
        direct::Direct::Ran { mapped: true } => {
            w.zero_copy.one_sided_mapped_wr += 1;
            UMQ_BUF_SUCCESS
        }
        direct::Direct::Ran { mapped: false } => {
            w.zero_copy.one_sided_kernel_wr += 1;
            UMQ_BUF_SUCCESS
        }
    };
    pair.direct_done += 1;
    Some(status)
}

/// Whether `wr` goes as packets, and if so how many bytes of its message may be on the wire
/// now: a rate-limited queue's message longer than its PMTU, or one whose packets are already
/// going (its queue's limit lifted since: the rest goes at once, in packets of the same size).
#[cold]
#[inline(never)]
fn packet_allowance(gate: Option<PacketGate>, pair: &mut Pair, wr: *mut umq_buf_t) -> Option<u64> {
    if pair.packet_sent > 0 {
        return Some(packets_allowed(gate, wr));
    }
    let g = gate.filter(|g| g.cuts(wr))?;
    pair.packet_size = g.pmtu;
    Some(packets_allowed(gate, wr))
}

/// Pushes the next packets of `wr`'s message, one entry each (the First, then Middles and the
/// Last), while `allowed` bytes of it and the ring's room last; true once the Last is in.
fn push_packets(
    peer: &Segment,
    wr: *mut umq_buf_t,
    pair: &mut Pair,
    allowed: u64,
    w: &mut Wire,
) -> bool {
    let (first, total) = wr_entry(wr);
    let total = total as u64;
    while pair.packet_sent < total {
        let at = pair.packet_sent;
        let n = (total - at).min(pair.packet_size as u64);
        if at + n > allowed {
            return false;
        }
        let e = if at == 0 {
            Entry {
                flags: FLAG_FIRST_PACKET,
                total,
                ..first
            }
        } else {
            Entry {
                kind: KIND_MORE_PACKET,
                total,
                seq: at,
                ..Default::default()
            }
        };
        let copied = peer.push(e, n as usize, |dst| {
            let dst = unsafe { std::slice::from_raw_parts_mut(dst, n as usize) };
            target::copy_range(wr, at as usize, dst);
        });
        if !copied {
            return false;
        }
        pair.packet_sent += n;
        w.packet_left(n);
    }
    pair.packet_sent = 0;
    true
}

/// Whether `wr`, the only WR of a post, can go in one pass (`transmit_one`): a one-buffer SEND
/// or SEND_IMM whose payload goes in the ring, none of ours ahead of it (waiting or in flight),
/// and room for it in the peer's ring, which is still there.
#[inline]
pub(super) fn can_transmit_one(w: &Wire, peer: &Segment, wr: *mut umq_buf_t) -> bool {
    let h = unsafe { &*wr };
    let op = h.pro().opcode;
    (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM)
        && h.data_size == h.total_data_size
        && (h.total_data_size as usize) < BY_REF_MIN
        && w.sq.all_completed()
        && !w.paused()
        && peer.has_room(h.total_data_size as usize)
        && !peer.is_closed()
}

/// `transmit` for the WR `can_transmit_one` passed, already at the tail of our send queue and
/// admitted by flow control: its entry goes into the peer's ring and it completes at once.
#[inline]
pub(super) fn transmit_one(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    wr: *mut umq_buf_t,
) -> Outcome {
    let mut out = Outcome::default();
    let len = unsafe { (*wr).total_data_size } as usize;
    let pushed = if len < PLACE_MIN_ALONE {
        push_one_buffer(peer, wr, len).then_some(Sent::Copied)
    } else {
        push_wr(peer, wr, None, true)
    };
    debug_assert!(pushed.is_some(), "can_transmit_one checked the room");
    if pushed == Some(Sent::Placed) {
        w.count_placed(wr);
    }
    w.finish_unsent(wr, UMQ_BUF_SUCCESS, &mut out);
    out.sends = 1;
    if ring_if_changed(mine, peer) {
        w.zero_copy.calls_sent += 1;
    }
    out
}

/// Whether a WR that may go by reference should: when the pair is idle (nothing of ours in
/// flight, the peer has taken every entry), or when a stream by reference is already under
/// way. A stream that began with copies stays with copies until it drains: there the sender's
/// copy of one message overlaps the receiver's copy of the one before, on two cores.
pub(super) fn by_ref_pays(w: &Wire, pair: &Pair, peer: &Segment) -> bool {
    !pair.by_ref_in_flight.is_empty() || w.sq.in_flight() == 0 && peer.caught_up()
}

/// How a WR's message went into the peer's ring.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Sent {
    /// Its bytes behind its entry.
    Copied,
    /// As offsets in our shared pool: the receiver copies them.
    ByRef,
    /// Written into the receive buffer it lands in.
    Placed,
    /// Its first bytes (so many) written into the receive buffer, the rest by reference.
    Split(u64),
}

/// Pushes one WR: split between the two copies when it may go by reference (`by_ref`, our
/// arena) and others go with it (not `alone`: a stream); else placed in the receiver's buffer
/// when that pays, else by reference when it may, else with its payload. Placement comes before
/// a whole message by reference: the receiver then has nothing to copy, and the WR completes at
/// once. None when the ring has no room.
pub(super) fn push_wr(
    peer: &Segment,
    wr: *mut umq_buf_t,
    by_ref: Option<&Arena>,
    alone: bool,
) -> Option<Sent> {
    let (opcode, len) = unsafe { ((*wr).pro().opcode, (*wr).total_data_size as usize) };
    let min = if alone {
        PLACE_MIN_ALONE
    } else {
        PLACE_MIN_IN_STREAM
    };
    let split_into = by_ref.filter(|_| !alone && len >= SPLIT_MIN);
    // The size first, here: most messages are small, and this keeps `place` off their path.
    let how = if let Some(head) = split_into.and_then(|arena| split(peer, wr, arena)) {
        Sent::Split(head as u64)
    } else if len >= min && place(peer, wr, min).is_some() {
        Sent::Placed
    } else if push_entry(peer, wr, by_ref) {
        by_ref.map_or(Sent::Copied, |_| Sent::ByRef)
    } else {
        return None;
    };
    peer.note_pushed(opcode);
    Some(how)
}

/// `push_wr` for the usual small SEND of `transmit_one`: one buffer holding all `len` bytes,
/// too short to be placed, copied behind its entry. (`push_wr`'s general copy walks the buffer
/// chain and first asks whether the message could be placed: a third of a small send's cost.)
#[inline(always)]
fn push_one_buffer(peer: &Segment, wr: *mut umq_buf_t, len: usize) -> bool {
    let src = unsafe { (*wr).buf_data as *const u8 };
    // SAFETY: `can_transmit_one` checked that the buffer holds the whole message (`check_wr`,
    // that a non-empty one has memory), and `push` gives `len` bytes of ring.
    let fill = |dst| {
        if len > 0 {
            unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
        }
    };
    let pushed = peer.push_with(len, fill, || wr_entry(wr).0);
    if pushed {
        peer.note_pushed(unsafe { (*wr).pro().opcode });
    }
    pushed
}

/// The header of the entry that carries `wr`; `len`, the bytes its message carries.
pub(super) fn wr_entry(wr: *mut umq_buf_t) -> (Entry, usize) {
    let h = unsafe { &*wr };
    let pro = *h.pro();
    let len = if pro.opcode == UMQ_OPC_READ || pro.opcode == UMQ_OPC_NOP {
        0
    } else {
        h.total_data_size as usize
    };
    let e = Entry {
        kind: KIND_WR,
        opcode: pro.opcode as u8,
        imm: pro.imm_data,
        addr: pro.remote_sge.addr,
        token_id: pro.remote_sge.token_id,
        token_value: pro.remote_sge.token_value,
        rlen: pro.remote_sge.length,
        ..Default::default()
    };
    (e, len)
}

/// Writes a SEND or SEND_IMM straight into the receive buffer it will land in, when the peer
/// published that buffer (see `placement`) and the message has `min` bytes or more, and pushes
/// its entry. None when it does not: the message then goes through the ring.
pub(super) fn place(peer: &Segment, wr: *mut umq_buf_t, min: usize) -> Option<()> {
    let (op, len) = unsafe { ((*wr).pro().opcode, (*wr).total_data_size as usize) };
    if len < min || (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM) || !peer.has_room(0) {
        return None;
    }
    let (claim, dst) = claim_posting(peer, len)?;
    let (mut e, _) = wr_entry(wr);
    target::copy_message(wr, dst, len);
    e.flags = FLAG_PLACED;
    e.addr = claim.offset;
    e.total = len as u64;
    push_placed(peer, claim, e, 0, |_| {}).then_some(())
}

/// The receive buffer the peer published for our next entry that takes one, if it holds `len`
/// bytes, with our writing into it announced (`Board::begin`): the claim, and where to write.
/// None when there is no such posting or the receiver has left.
fn claim_posting(peer: &Segment, len: usize) -> Option<(placement::Claim, *mut u8)> {
    let board = &peer.inbox().board;
    let claim = board.find(peer.taking_rx.load(Ordering::Relaxed), len)?;
    let dst = peer.peer_pool().ok()?.at(claim.offset, len as u64)? as *mut u8;
    board.begin(|| peer.is_closed()).then_some((claim, dst))
}

/// Pushes entry `e` (with `len` payload bytes from `fill`) of a message written into a claimed
/// posting, then ends the claim: either way the posting is used up, since without an entry the
/// bytes are never looked at. The caller checked the room.
fn push_placed(
    peer: &Segment,
    claim: placement::Claim,
    e: Entry,
    len: usize,
    fill: impl FnOnce(*mut u8),
) -> bool {
    let pushed = peer.push(e, len, fill);
    debug_assert!(pushed, "room was checked");
    peer.inbox().board.end(claim);
    pushed
}

/// Splits a stream's SEND or SEND_IMM between the two copies: places its first half in the
/// receive buffer it will land in (as `place` does) and pushes an entry that lists the rest by
/// reference in our shared pool `arena`, for the receiver to copy behind it. Each side then
/// copies half of every message, at once: the receiver this message's tail while we write the
/// next one's head. Returns the bytes placed; None when the message cannot go this way.
fn split(peer: &Segment, wr: *mut umq_buf_t, arena: &Arena) -> Option<usize> {
    let (op, len) = unsafe { ((*wr).pro().opcode, (*wr).total_data_size as usize) };
    if op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM {
        return None;
    }
    // On a line boundary: no cache line is written by both sides.
    let head = (len / 2).next_multiple_of(LINE);
    let mut tail = [RefPiece { offset: 0, len: 0 }; crate::limits::MAX_SGE];
    let mut n = 0;
    for (at, left) in target::pieces_from(message_pieces(wr), head) {
        let offset = arena.offset_of(at, left)?;
        *tail.get_mut(n)? = RefPiece {
            offset,
            len: left as u64,
        };
        n += 1;
    }
    let refs = n * std::mem::size_of::<RefPiece>();
    if n == 0 || !peer.has_room(refs) {
        return None;
    }
    let (claim, dst) = claim_posting(peer, len)?;
    target::copy_message(wr, dst, head);
    let (mut e, _) = wr_entry(wr);
    e.flags = FLAG_SPLIT;
    e.addr = claim.offset;
    e.total = len as u64;
    e.head = head as u32;
    let fill =
        |dst| unsafe { std::ptr::copy_nonoverlapping(tail.as_ptr(), dst as *mut RefPiece, n) };
    push_placed(peer, claim, e, refs, fill).then_some(head)
}

/// Pushes the entry of `wr` with its payload, or by reference into `by_ref` (our arena).
pub(super) fn push_entry(peer: &Segment, wr: *mut umq_buf_t, by_ref: Option<&Arena>) -> bool {
    let (mut e, len) = wr_entry(wr);
    if let Some(arena) = by_ref {
        e.flags = FLAG_BY_REF;
        e.total = len as u64;
        let n = message_pieces(wr).count();
        return peer.push(e, n * std::mem::size_of::<RefPiece>(), |dst| {
            let dst = dst as *mut RefPiece;
            for (i, (p, len)) in message_pieces(wr).enumerate() {
                let offset = arena.offset_of(p, len).expect("checked by may_go_by_ref");
                unsafe {
                    dst.add(i).write(RefPiece {
                        offset,
                        len: len as u64,
                    })
                };
            }
        });
    }
    peer.push(e, len, |dst| {
        target::copy_message(wr, dst, len);
    })
}

/// Pushes a control frame of the link; false when the ring is full.
pub(super) fn push_control(peer: &Segment, frame: &[u8]) -> bool {
    let e = Entry {
        kind: KIND_CONTROL,
        ..Default::default()
    };
    peer.push(e, frame.len(), |dst| unsafe {
        std::ptr::copy_nonoverlapping(frame.as_ptr(), dst, frame.len())
    })
}

/// Pushes a standalone window update; false when the ring is full (it is retried later: the
/// announcement is already in our area either way).
pub(super) fn push_standalone(peer: &Segment, imm: u64) -> bool {
    let e = Entry {
        kind: KIND_STANDALONE,
        imm,
        ..Default::default()
    };
    let pushed = peer.push(e, 0, |_| {});
    if pushed {
        peer.note_pushed(UMQ_OPC_SEND); // it takes a receive buffer as a SEND does
    }
    pushed
}
