//! The receiving side: the peer's entries executed against our receive buffers and memory,
//! with the checks that bytes from a peer need.

use super::*;
use crate::transport::assembly::{Assembly, otherwise};

/// Executes the peer's entries against our receive buffers and memory, in order, until the ring
/// is empty or an entry must wait (no receive buffer, or no room for a READ response).
pub(super) fn receive(
    w: &mut Wire,
    pair: &mut Pair,
    mine: &Segment,
    peer: &Segment,
    at: &Receiver,
    out: &mut Outcome,
) -> Result<(), LinkError> {
    let (umqh, fragments, pool) = (at.umqh, at.fragments, at.pool);
    while let Some((e, payload)) = mine.peek()? {
        match e.kind {
            KIND_PAD => {}
            KIND_STANDALONE => {
                // It takes the next posted buffer, which a message arriving in packets may be
                // landing in.
                if let Some((_, a)) = pair.assembly.as_mut() {
                    a.set_aside(w);
                }
                let mut dst = Side::new(umqh, w, fragments);
                if !target::receive_standalone(&mut dst, e.imm, out)? {
                    note_blocked(pair, out);
                    return Ok(());
                }
                pair.rx_entries_run += 1;
            }
            KIND_READ_RESP => {
                // SAFETY: `peek` checked that the payload's `e.len` bytes lie inside the ring.
                let data = unsafe { std::slice::from_raw_parts(payload, e.len as usize) };
                // The peer numbers only our WRs that went through its ring.
                let seq = e
                    .seq
                    .checked_add(pair.direct_done)
                    .ok_or(LinkError::Corrupt("READ response for no READ in flight"))?;
                target::land_read_response(w, seq, data)?
            }
            KIND_CONTROL => {
                // SAFETY: `peek` checked that the payload's `e.len` bytes lie inside the ring.
                let frame = unsafe { std::slice::from_raw_parts(payload, e.len as usize) };
                target::receive_control(w, frame)?
            }
            KIND_MORE_PACKET => {
                if !packet(w, pair, mine, peer, &e, payload, at, out)? {
                    return Ok(());
                }
                continue;
            }
            _ => {
                // (While a message's packets arrive, every WR entry is a packet's business.)
                let whole = pair.assembly.is_none();
                let landed = match e.flags {
                    0 if whole => land_inline(w, &e, payload, umqh, out),
                    FLAG_PLACED if whole => land_placed(w, &e, umqh, out),
                    FLAG_SPLIT if whole => land_split(w, peer, &e, payload, umqh, out)?,
                    _ => None,
                };
                let status = match landed {
                    Some(status) => Some(status),
                    None if e.flags == FLAG_FIRST_PACKET || !whole => {
                        if !packet(w, pair, mine, peer, &e, payload, at, out)? {
                            return Ok(());
                        }
                        continue;
                    }
                    None => {
                        let at = Here {
                            umqh,
                            fragments,
                            seq: mine.inbox().done.0.load(Ordering::Relaxed),
                        };
                        execute_general(w, peer, &e, payload, &at, pool, out)?
                    }
                };
                let Some(status) = status else {
                    if crate::transport::wire::needs_rx_buffer(e.opcode as u32) {
                        note_blocked(pair, out);
                    }
                    return Ok(());
                };
                let took_rx = crate::transport::wire::needs_rx_buffer(e.opcode as u32);
                entry_done(pair, mine, &e, took_rx, status);
                continue;
            }
        }
        mine.pop(&e);
        pair.rx_blocked = false;
    }
    Ok(())
}

/// The bookkeeping once the WR of entry `e` ran: the entry counted if it `took_rx` a receive
/// buffer (see `placement`), popped, the executed count moved on, the ring no longer blocked.
#[inline(always)]
pub(super) fn entry_done(
    pair: &mut Pair,
    mine: &Segment,
    e: &Entry,
    took_rx: bool,
    status: umq_buf_status_t,
) {
    pair.rx_entries_run += took_rx as u64;
    // Room first, then the count: a sender that sees its WR done also sees the ring caught up
    // (which decides whether its next large WR goes by reference).
    mine.pop(e);
    mine.finish_wr(status);
    pair.rx_blocked = false;
}

/// An entry of a message cut into packets (or, while one arrives, any entry of a WR): the First
/// and Middles put together (`Assembly`: in the receive buffer it lands in, when the next posted
/// one holds it), the message run at its Last. Whether the receive goes on (false: the message
/// waits for a receive buffer).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn packet(
    w: &mut Wire,
    pair: &mut Pair,
    mine: &Segment,
    peer: &Segment,
    e: &Entry,
    payload: *const u8,
    at: &Receiver,
    out: &mut Outcome,
) -> Result<bool, LinkError> {
    if e.kind == KIND_WR && pair.assembly.is_some() {
        return Err(LinkError::Corrupt(
            "a message began before the last packet of the one before",
        ));
    }
    // SAFETY: `peek` checked that the payload's `e.len` bytes lie inside the ring.
    let piece = unsafe { std::slice::from_raw_parts(payload, e.len as usize) };
    let last = if e.kind == KIND_WR {
        if !first_packet(w, pair, e, piece, at)? {
            note_blocked(pair, out);
            return Ok(false);
        }
        pair.rx_blocked = false;
        None
    } else {
        next_packet(w, pair, e, piece)?
    };
    // A Last that waited for a receive buffer (RNR) is looked at again: it arrived once.
    if last.is_none() || !pair.rx_blocked {
        w.note_arrival(e.len as u64);
    }
    let Some(last) = last else {
        mine.pop(e);
        return Ok(true);
    };
    let (first, assembly) = pair.assembly.as_ref().expect("next_packet checked");
    if assembly.in_place() {
        let mut dst = Side::new(at.umqh, w, at.fragments);
        // SAFETY: every byte of the message arrived in place (the Last joined it), on this wire.
        unsafe { assembly.land_in_place(&mut dst, first.opcode as u32, first.imm, out) };
        drop(dst);
        pair.assembly = None;
        entry_done(pair, mine, e, true, UMQ_BUF_SUCCESS);
        return Ok(true);
    }
    let here = Here {
        umqh: at.umqh,
        fragments: at.fragments,
        seq: mine.inbox().done.0.load(Ordering::Relaxed),
    };
    let takes_rx = crate::transport::wire::needs_rx_buffer(first.opcode as u32);
    let data = assembly.aside();
    let src = [(data.as_ptr() as *mut u8, data.len()), last];
    // The message's length is its first packet's: what was kept and the Last, or, for one
    // kept nowhere (`may_land`), which can only fail, the length it claimed.
    let Some(status) = execute(w, peer, first, &src, first.total, &here, at.pool, out)? else {
        if takes_rx {
            note_blocked(pair, out);
        }
        return Ok(false);
    };
    pair.assembly = None;
    entry_done(pair, mine, e, takes_rx, status);
    Ok(true)
}

/// The First packet of a message cut into packets: its message is put together from here.
/// False when it waits in the ring until the posted buffers hold the message together (a
/// base-API SEND longer than any one buffer, `assembly::otherwise`).
fn first_packet(
    w: &mut Wire,
    pair: &mut Pair,
    e: &Entry,
    piece: &[u8],
    at: &Receiver,
) -> Result<bool, LinkError> {
    let carries_payload = matches!(
        e.opcode as u32,
        UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE | UMQ_OPC_WRITE_IMM
    );
    if e.kind != KIND_WR || !carries_payload || e.total > crate::limits::MAX_MESSAGE {
        return Err(LinkError::Corrupt("malformed first packet"));
    }
    let op = e.opcode as u32;
    let Some(goes) = otherwise(w, op, e.total, at.fragments, at.pool.largest_buffer()) else {
        return Ok(false);
    };
    let assembly = Assembly::begin(w, op, e.total, piece, goes)
        .map_err(|_| LinkError::Corrupt("malformed first packet"))?;
    pair.assembly = Some((*e, assembly));
    Ok(true)
}

/// A Middle packet joins its message (None). The Last is returned as the message's final
/// piece (empty when the message landed in place, which the Last joined too), left in the ring
/// until the message has run.
fn next_packet(
    w: &mut Wire,
    pair: &mut Pair,
    e: &Entry,
    piece: &[u8],
) -> Result<Option<(*mut u8, usize)>, LinkError> {
    let (first, assembly) = pair
        .assembly
        .as_mut()
        .ok_or(LinkError::Corrupt("a packet without its message's first"))?;
    let end = assembly.received() + e.len as u64;
    if e.seq != assembly.received() || e.total != first.total || e.len == 0 || end > first.total {
        return Err(LinkError::Corrupt("packets that do not make their message"));
    }
    if end < first.total {
        assembly.add(w, piece)?;
        return Ok(None);
    }
    if assembly.in_place() {
        assembly.add(w, piece)?;
        return Ok(Some((std::ptr::null_mut(), 0)));
    }
    Ok(Some((piece.as_ptr() as *mut u8, piece.len())))
}

/// The common case in one pass: a SEND or SEND_IMM whose payload is in the ring lands whole in
/// the next posted receive buffer (`target::land_in`); None when it needs `execute`. A
/// receiver that fragments (base API) takes a message that fits its next buffer the same way:
/// `execute` would give it that one buffer and complete it alike.
#[inline(always)]
pub(super) fn land_inline(
    w: &mut Wire,
    e: &Entry,
    payload: *const u8,
    umqh: u64,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let op = e.opcode as u32;
    let rx = target::whole_in_next(w, op, e.len)?;
    let mut dst = Side::new(umqh, w, false);
    // SAFETY: `peek` checked that the payload's `e.len` bytes lie inside the ring.
    unsafe { target::land_in(&mut dst, rx, payload, e.len, op, e.imm, out) };
    Some(UMQ_BUF_SUCCESS)
}

/// A message the sender placed in our next posted receive buffer: completed without a copy.
/// None when it needs `execute` (its bytes went to a later buffer: see `placement`; or the
/// entry is malformed, which `execute_general` reports).
pub(super) fn land_placed(
    w: &mut Wire,
    e: &Entry,
    umqh: u64,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let op = e.opcode as u32;
    let len = u32::try_from(e.total).ok()?;
    let rx = w.rq.next_posted()?;
    let data = unsafe { (*rx).buf_data as *const u8 };
    let here = w.arena.as_deref()?.offset_of(data, len as usize);
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM)
        || e.len != 0
        || here != Some(e.addr)
        || len > unsafe { (*rx).buf_size }
    {
        return None;
    }
    Some(complete_placed(w, rx, len, e, umqh, out))
}

/// Completes `rx`, our next posted receive buffer, with the `len` bytes of entry `e`'s message
/// already in it (placed by the sender, or split and its rest copied here).
fn complete_placed(
    w: &mut Wire,
    rx: *mut umq_buf_t,
    len: u32,
    e: &Entry,
    umqh: u64,
    out: &mut Outcome,
) -> umq_buf_status_t {
    w.zero_copy.placed_rx += 1;
    let mut dst = Side::new(umqh, w, false);
    unsafe { target::land_placed(&mut dst, rx, len, e.opcode as u32, e.imm, out) };
    UMQ_BUF_SUCCESS
}

/// A message the sender split (`FLAG_SPLIT`): its head is already in our next posted receive
/// buffer, and its tail is copied behind it out of the sender's shared pool. Ok(None) when it
/// needs `execute` (its head went to a later buffer: see `placement`; or the entry's sizes are
/// malformed, which `execute_general` reports); Err when its rest is not the message's, or the
/// sender left while we copied (what we copied may be torn, as `sender_left` says).
pub(super) fn land_split(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    payload: *const u8,
    umqh: u64,
    out: &mut Outcome,
) -> Result<Option<umq_buf_status_t>, LinkError> {
    let (len, head) = (e.total, e.head as u64);
    let Some(rx) = w.rq.next_posted() else {
        return Ok(None);
    };
    let (data, cap) = unsafe { ((*rx).buf_data as *mut u8, (*rx).buf_size as u64) };
    if !split_fits(e) || len > cap {
        return Ok(None);
    }
    let here = w
        .arena
        .as_deref()
        .and_then(|a| a.offset_of(data, len as usize));
    if here != Some(e.addr) {
        return Ok(None);
    }
    // The head is in this buffer: a rest that is not the message's breaks the pair here.
    let mut pieces = [(std::ptr::null_mut(), 0); crate::limits::MAX_SGE];
    let tail = ref_pieces(e, payload, peer, &mut pieces, len - head)?;
    let dst = unsafe { data.add(head as usize) };
    target::copy_pieces(
        tail.iter().copied(),
        std::iter::once((dst, (len - head) as usize)),
    );
    if sender_left(peer) {
        return Err(LinkError::PeerLeft);
    }
    Ok(Some(complete_placed(w, rx, len as u32, e, umqh, out)))
}

/// Whether a split entry's sizes can be a message: a SEND or SEND_IMM whose placed head is
/// part of it, the rest coming by reference.
fn split_fits(e: &Entry) -> bool {
    let op = e.opcode as u32;
    (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM)
        && e.head > 0
        && (e.head as u64) < e.total
        && e.total <= u32::MAX as u64
}

/// Where the sender placed a message, or a split message's head, that did not land in our next
/// buffer: in a later posted buffer of our shared pool (an entry before it took no buffer). Err
/// for anything else.
pub(super) fn placed_elsewhere(w: &Wire, e: &Entry) -> Result<*mut u8, LinkError> {
    let op = e.opcode as u32;
    if op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM {
        return Err(LinkError::Corrupt("malformed placed entry"));
    }
    let arena = w
        .arena
        .as_deref()
        .ok_or(LinkError::Corrupt("placed message without a shared pool"))?;
    w.rq.posted()
        .skip(1)
        .find(|&b| {
            let (data, cap) = unsafe { ((*b).buf_data as *const u8, (*b).buf_size) };
            e.total <= cap as u64 && arena.offset_of(data, cap as usize) == Some(e.addr)
        })
        .map(|b| unsafe { (*b).buf_data as *mut u8 })
        .ok_or(LinkError::Corrupt("placed message in no posted buffer"))
}

/// Any WR the one-pass landing does not take: its payload resolved (in the ring or by
/// reference), then executed.
#[inline(never)]
pub(super) fn execute_general(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    payload: *const u8,
    at: &Here,
    pool: &Pool,
    out: &mut Outcome,
) -> Result<Option<umq_buf_status_t>, LinkError> {
    let mut pieces = [(std::ptr::null_mut(), 0); crate::limits::MAX_SGE + 1];
    let src = match e.flags {
        FLAG_PLACED if e.len == 0 => {
            pieces[0] = (placed_elsewhere(w, e)?, e.total as usize);
            &pieces[..1]
        }
        FLAG_PLACED => return Err(LinkError::Corrupt("malformed placed entry")),
        FLAG_SPLIT => {
            if !split_fits(e) {
                return Err(LinkError::Corrupt("malformed split entry"));
            }
            let head = e.head as u64;
            pieces[0] = (placed_elsewhere(w, e)?, head as usize);
            let n = ref_pieces(e, payload, peer, &mut pieces[1..], e.total - head)?.len();
            &pieces[..1 + n]
        }
        _ => source(e, payload, peer, &mut pieces[..crate::limits::MAX_SGE])?,
    };
    let len = src.iter().map(|&(_, n)| n as u64).sum();
    execute(w, peer, e, src, len, at, pool, out)
}

/// Where a WR's payload is: right behind its entry, or (by reference) in the sender's shared
/// pool, each piece bounds-checked and translated into our mapping of it. The pieces are read
/// once into `out`, so the sender cannot change them between the check and the copy.
pub(super) fn source<'a>(
    e: &Entry,
    payload: *const u8,
    peer: &Segment,
    out: &'a mut [(*mut u8, usize)],
) -> Result<&'a [(*mut u8, usize)], LinkError> {
    match e.flags {
        0 => {
            out[0] = (payload as *mut u8, e.len as usize);
            Ok(&out[..1])
        }
        FLAG_BY_REF => ref_pieces(e, payload, peer, out, e.total),
        _ => Err(LinkError::Corrupt("unknown ring entry flags")),
    }
}

/// The `RefPiece`s of an entry's payload, each bounds-checked in the sender's shared pool and
/// translated into our mapping of it, adding up to `total` bytes. They are read once into
/// `out`, so the sender cannot change them between the check and the copy.
fn ref_pieces<'a>(
    e: &Entry,
    payload: *const u8,
    peer: &Segment,
    out: &'a mut [(*mut u8, usize)],
    total: u64,
) -> Result<&'a [(*mut u8, usize)], LinkError> {
    let size = std::mem::size_of::<RefPiece>();
    let n = e.len as usize / size;
    if !(e.len as usize).is_multiple_of(size) || n == 0 || n > out.len() {
        return Err(LinkError::Corrupt("malformed by-reference entry"));
    }
    let pool = peer.peer_pool()?;
    let mut sum = 0u64;
    for (i, slot) in out[..n].iter_mut().enumerate() {
        let r = unsafe { (payload as *const RefPiece).add(i).read() };
        let at = pool.at(r.offset, r.len).ok_or(LinkError::Corrupt(
            "by-reference piece outside the peer's shared pool",
        ))?;
        *slot = (at as *mut u8, r.len as usize);
        sum += r.len;
    }
    if sum != total || sum > u32::MAX as u64 {
        return Err(LinkError::Corrupt(
            "by-reference pieces do not add up to the message",
        ));
    }
    Ok(&out[..n])
}

/// Counts a message that found no receive buffer once, not once per poll while it waits.
pub(super) fn note_blocked(pair: &mut Pair, out: &mut Outcome) {
    if !pair.rx_blocked {
        pair.rx_blocked = true;
        out.blocked = true;
    }
}

/// The receiving queue, and the sequence number of the WR being executed (how many of the
/// peer's WRs ran before it).
pub(super) struct Here {
    umqh: u64,
    fragments: bool,
    seq: u64,
}

/// The peer as the initiator of one of its WRs: a READ's response goes back through its ring,
/// and a payload copied by reference out of its shared pool counts only if it has not left.
struct RingPeer<'a> {
    peer: &'a Segment,
    seq: u64,
    by_ref: bool,
}

impl target::Initiator for RingPeer<'_> {
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t> {
        let resp = Entry {
            kind: KIND_READ_RESP,
            seq: self.seq,
            ..Default::default()
        };
        let pushed = self.peer.push(resp, len, |dst| unsafe {
            std::ptr::copy_nonoverlapping(from, dst, len)
        });
        pushed.then_some(UMQ_BUF_SUCCESS)
    }

    fn payload_intact(&self) -> bool {
        !self.by_ref || !sender_left(self.peer)
    }
}

/// Runs one of the peer's WRs here with the shared target executor, its payload in `src`;
/// None when it must wait; Err when the pair broke under it.
#[allow(clippy::too_many_arguments)]
pub(super) fn execute(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    src: &[(*mut u8, usize)],
    len: u64,
    at: &Here,
    pool: &Pool,
    out: &mut Outcome,
) -> Result<Option<umq_buf_status_t>, LinkError> {
    let req = target::Request {
        opcode: e.opcode as u32,
        imm: e.imm,
        len,
        src: src.iter().copied(),
        remote: umq_ref_sge_t {
            addr: e.addr,
            length: e.rlen,
            token_id: e.token_id,
            token_value: e.token_value,
            rsvd0: 0,
        },
    };
    let mut initiator = RingPeer {
        peer,
        seq: at.seq,
        by_ref: e.flags & FLAG_BY_REF != 0,
    };
    let mut dst = Side::new(at.umqh, w, at.fragments);
    match target::execute_wr(&mut dst, &req, pool, &mut initiator, out) {
        target::Executed::Done(status) => Ok(Some(status)),
        target::Executed::Wait => Ok(None),
        target::Executed::InitiatorLeft => Err(LinkError::PeerLeft),
    }
}

/// After copying a message by reference: whether the sender had left by then. A sender that
/// unbinds flushes its WRs and its application may reuse their buffers at once, so what we
/// copied may be torn. It marks itself closed before flushing; with this fence between our copy
/// and our look, a copy that read a reused buffer always sees the mark.
pub(super) fn sender_left(peer: &Segment) -> bool {
    std::sync::atomic::fence(Ordering::SeqCst);
    peer.is_closed()
}
