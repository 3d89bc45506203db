//! The sending side: our WRs into the peer's ring (through the ring, placed in the peer's
//! receive buffer, or by reference), and their completions.

use super::*;

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
    if done.is_some_and(|d| d > w.tx_done_seq + w.in_flight as u64) {
        return Err(LinkError::Corrupt("peer reports completions we never sent"));
    }
    while w.in_flight > 0 {
        let seq = w.tx_done_seq;
        let wr = w.sq[w.delivered];
        let by_ref = pair.by_ref_in_flight.front() == Some(&seq);
        let quick = transmit_complete(wr, by_ref);
        let status = match done {
            Some(d) if seq < d => {
                let raw =
                    peer.inbox().statuses[seq as usize % STATUS_SLOTS].load(Ordering::Relaxed);
                target::peer_status(raw as u32)
            }
            _ if quick => UMQ_BUF_SUCCESS,
            _ => break,
        };
        if !quick {
            w.awaiting_peer -= 1;
        }
        if by_ref {
            pair.by_ref_in_flight.pop_front();
        }
        w.in_flight -= 1;
        finish_tx(w, wr, status, out);
    }
    Ok(())
}

/// Hands the oldest undelivered WR back to the application with `status`.
pub(super) fn finish_tx(
    w: &mut Wire,
    wr: *mut umq_buf_t,
    status: umq_buf_status_t,
    out: &mut Outcome,
) {
    unsafe {
        (*wr).set_status(status);
        target::restore_piggyback_carrier(wr, w.flow.is_some());
    }
    w.delivered += 1;
    w.tx_done_seq += 1;
    out.tx_done += 1;
}

/// Pushes our waiting WRs into the peer's ring, in order, while credit and ring room last.
pub(super) fn transmit(w: &mut Wire, pair: &mut Pair, peer: &Segment, out: &mut Outcome) {
    if w.paused() {
        return; // the peer paused our priority: nothing starts, not even a packet
    }
    let mut credit = CreditGate::open(w);
    let alone = w.sq.len() - (w.delivered + w.in_flight) == 1;
    // A limited queue's WRs may go as packets (looked at only then: this is every round's path).
    let paced = w.paced.is_some() || pair.packet_sent > 0;
    let gate = if paced { w.packet_gate() } else { None };
    while w.delivered + w.in_flight < w.sq.len() {
        let wr = w.sq[w.delivered + w.in_flight];
        let opcode = unsafe { (*wr).pro().opcode };
        if !credit.pass(w, opcode) {
            out.credit_wait = true;
            break;
        }
        let packets = if paced {
            packet_allowance(gate, pair, wr)
        } else {
            None
        };
        let how = if let Some(allowed) = packets {
            push_packets(peer, wr, pair, allowed, &mut w.paced_packets).then(|| {
                peer.note_pushed(opcode);
                Sent::Copied
            })
        } else {
            let by_ref = w
                .arena
                .as_deref()
                .filter(|&a| may_go_by_ref(wr, a) && by_ref_pays(w, pair, peer));
            let how = push_wr(peer, wr, by_ref, alone);
            if how.is_some() && gate.is_some() {
                w.paced_packets += 1; // an Only packet
            }
            how
        };
        let Some(how) = how else {
            credit.keep(opcode);
            break;
        };
        if how == Sent::Placed {
            w.count_placed(wr);
        }
        let by_ref = how == Sent::ByRef;
        if by_ref {
            let seq = w.tx_done_seq + w.in_flight as u64;
            pair.by_ref_in_flight.push_back(seq);
            w.zero_copy.by_ref_wr += 1;
            w.zero_copy.by_ref_bytes += unsafe { (*wr).total_data_size } as u64;
        }
        match (transmit_complete(wr, by_ref), w.in_flight) {
            // Complete at once when no WR ahead of it is still in flight: the poll that takes
            // the completion then has no round to run for it.
            (true, 0) => finish_tx(w, wr, UMQ_BUF_SUCCESS, out),
            (true, _) => w.in_flight += 1,
            (false, _) => {
                w.in_flight += 1;
                w.awaiting_peer += 1;
            }
        }
        match opcode {
            UMQ_OPC_READ => out.reads += 1,
            UMQ_OPC_NOP => {}
            _ => out.sends += 1,
        }
    }
    credit.close(w);
}

/// Whether `wr` goes as packets, and if so how many bytes of its message may be on the wire
/// now: a rate-limited queue's message longer than its PMTU, or one whose packets are already
/// going (its queue's limit lifted since: the rest goes at once, in packets of the same size).
#[cold]
#[inline(never)]
fn packet_allowance(gate: Option<PacketGate>, pair: &mut Pair, wr: *mut umq_buf_t) -> Option<u64> {
    let (opcode, total) = unsafe { ((*wr).pro().opcode, (*wr).total_data_size as u64) };
    if pair.packet_sent > 0 {
        return Some(gate.map_or(total, |g| g.allowed(wr, total)));
    }
    let g = gate?;
    let payload = matches!(
        opcode,
        UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE | UMQ_OPC_WRITE_IMM
    );
    if !payload || total <= g.pmtu as u64 {
        return None; // an Only packet: an ordinary entry
    }
    pair.packet_size = g.pmtu;
    Some(g.allowed(wr, total))
}

/// Pushes the next packets of `wr`'s message, one entry each (the First, then Middles and the
/// Last), while `allowed` bytes of it and the ring's room last; true once the Last is in.
fn push_packets(
    peer: &Segment,
    wr: *mut umq_buf_t,
    pair: &mut Pair,
    allowed: u64,
    pushed: &mut u64,
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
        *pushed += 1;
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
        && w.delivered == w.sq.len()
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
    finish_tx(w, wr, UMQ_BUF_SUCCESS, &mut out);
    out.sends = 1;
    ring_if_changed(mine, peer);
    out
}

/// Whether a WR that may go by reference should: when the pair is idle (nothing of ours in
/// flight, the peer has taken every entry), or when a stream by reference is already under
/// way. A stream that began with copies stays with copies until it drains: there the sender's
/// copy of one message overlaps the receiver's copy of the one before, on two cores.
pub(super) fn by_ref_pays(w: &Wire, pair: &Pair, peer: &Segment) -> bool {
    !pair.by_ref_in_flight.is_empty() || w.in_flight == 0 && peer.caught_up()
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
}

/// Pushes one WR: placed in the receiver's buffer when that pays (`alone`: no other WR goes
/// with it), else by reference into `by_ref` (our arena) when given, else with its payload.
/// Placement comes first: the receiver then has nothing to copy, and the WR completes at once.
/// None when the ring has no room.
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
    // The size first, here: most messages are small, and this keeps `place` off their path.
    let how = if len >= min && place(peer, wr, min).is_some() {
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
    let board = &peer.inbox().board;
    let claim = board.find(peer.taking_rx.load(Ordering::Relaxed), len)?;
    let dst = peer.peer_pool().ok()?.at(claim.offset, len as u64)? as *mut u8;
    if !board.begin(|| peer.is_closed()) {
        return None;
    }
    let (mut e, _) = wr_entry(wr);
    target::copy_pieces(target::pieces(wr), std::iter::once((dst, len)));
    e.flags = FLAG_PLACED;
    e.addr = claim.offset;
    e.total = len as u64;
    let pushed = peer.push(e, 0, |_| {});
    debug_assert!(pushed, "room was checked");
    // Either way the posting is used up: without an entry, the bytes are never looked at.
    board.end(claim);
    pushed.then_some(())
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
        target::copy_pieces(target::pieces(wr), std::iter::once((dst, len)));
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
