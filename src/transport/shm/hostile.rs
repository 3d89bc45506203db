//! A hostile peer's ring, for the tests and the `shm_ring` fuzz target: a receiving binding whose
//! inbox a "peer" (this code, through its own mapping) fills with entries of every shape the
//! sender makes, often with a field or two changed to anything, or with raw bytes. Each case runs
//! one round of the receive path over them and checks what must hold whatever the peer wrote:
//! no panic, no receive buffer lost, none completed with more bytes than it holds, no write
//! outside our buffers (the pool slots around them keep their canary bytes), and nothing kept
//! aside of a message whose First claims more than the longest buffer of our pool.

use super::*;
use crate::draw::Draw;
use crate::transport::hostile::{assert_completions_fit, assert_unwritten, opcode, paint};
use ring::*;

/// A sender's inbox as its receiver maps it, with the sender's shared pool published.
pub(super) fn sender_with_pool() -> (Segment, Segment, Arena) {
    let inbox = Segment::create(21, false).unwrap();
    let arena = Arena::create(22).unwrap();
    inbox.publish_pool(arena.fd(), arena.secret());
    let view = Segment::open_peer(std::process::id(), inbox.fd() as u32, 21).unwrap();
    (inbox, view, arena)
}

/// Writes `e` (its `len` whatever the peer claims) at ring position `pos` with up to
/// `payload` after it, then its stamp: what a hostile peer can do. Returns the position a
/// consumer would go on at, or None when the entry reaches past the ring's end.
pub(super) fn write_raw(view: &Segment, pos: u64, e: &Entry, payload: &[u8]) -> Option<u64> {
    let off = pos as usize % RING_BYTES;
    let room = RING_BYTES - off - LINE;
    let at = unsafe { view.ring().add(off) };
    write_header(at, e);
    let n = payload.len().min(room);
    unsafe { std::ptr::copy_nonoverlapping(payload.as_ptr(), at.add(LINE), n) };
    stamp_of(at).store(pos + 1, Ordering::Release);
    (off + entry_bytes(e.len as usize) < RING_BYTES)
        .then(|| pos + entry_bytes(e.len as usize) as u64)
}

/// The entries in `mine` run by a binding that has seen none before.
#[cfg(test)]
pub(super) fn receive_fresh(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    pool: &Pool,
    fragments: bool,
    out: &mut Outcome,
) -> Result<(), LinkError> {
    let at = Receiver {
        umqh: 0,
        fragments,
        pool,
    };
    receive(w, &mut Pair::default(), mine, peer, &at, out)
}

/// What a peer might write next: a well-formed entry of one of the shapes the sender makes
/// (a SEND inline, by reference or placed, a WRITE, a READ, a pad, ...), then with some
/// luck a field or two changed to anything, mostly at the edges of what it may hold.
pub(super) fn hostile_entry(
    rng: &mut impl Draw,
    pool: &Pool,
    rx: &[*mut umq_buf_t],
    offsets: &[u64],
) -> (Entry, Vec<u8>) {
    let cap = unsafe { (*rx[0]).buf_size } as u64;
    let mut payload = vec![0u8; (rng.next() % 1100) as usize];
    payload.iter_mut().for_each(|b| *b = rng.next() as u8);
    let mut e = Entry {
        kind: KIND_WR,
        opcode: rng.pick(&[UMQ_OPC_SEND, UMQ_OPC_SEND_IMM]) as u8,
        imm: rng.next(),
        ..Default::default()
    };
    match rng.next() % 10 {
        0 | 1 => {} // inline
        2 | 3 => {
            e.flags = FLAG_BY_REF;
            e.total = by_ref_pieces(rng, offsets[0], &mut payload);
        }
        8 => {
            // Split: a head placed in one of our posted buffers (the right one or another), the
            // rest by reference.
            e.flags = FLAG_SPLIT;
            e.addr = rng.pick(offsets);
            let any = 1 + rng.next() % 500;
            e.head = rng.edgy(&[64, 256, any]) as u32;
            e.total = e.head as u64 + by_ref_pieces(rng, offsets[0], &mut payload);
        }
        4 | 5 => {
            // Placed into one of our posted buffers, the right one or another.
            e.flags = FLAG_PLACED;
            e.addr = rng.pick(offsets);
            e.total = payload.len() as u64;
            payload.clear();
        }
        6 => {
            e.opcode = rng.pick(&[UMQ_OPC_WRITE, UMQ_OPC_WRITE_IMM, UMQ_OPC_READ]) as u8;
            let b = rng.pick(rx);
            e.addr = unsafe { (*b).buf_data } as u64;
            e.rlen = (rng.next() % 1100) as u32;
            if let Some(slot) = pool.slot_of_data(e.addr as usize) {
                (e.token_id, e.token_value) = (slot.chunk.token_id, slot.chunk.token_value);
            }
        }
        7 => {
            // A packet of a rate-limited sender's message: a First, or a later one.
            e.total = payload.len() as u64 + rng.next() % 2000;
            if rng.next().is_multiple_of(2) {
                e.flags = FLAG_FIRST_PACKET;
            } else {
                e.kind = KIND_MORE_PACKET;
                e.seq = rng.edgy(&[0, 1024, e.total - payload.len() as u64]);
            }
        }
        _ => {
            e.kind = rng.pick(&[KIND_PAD, KIND_STANDALONE, KIND_READ_RESP, KIND_CONTROL]);
            e.seq = rng.next() % 2;
        }
    }
    e.len = payload.len() as u32;
    for _ in 0..rng.next() % 3 {
        match rng.next() % 11 {
            0 => e.kind = rng.edgy(&[0, 1, 2, 3, 4, 5]) as u8,
            1 => e.opcode = rng.edgy(&[0, 1, 0x10, 0x40, 0x41, 0x51]) as u8,
            2 => e.flags = rng.edgy(&[0, 1, 2, 3, 4]) as u16,
            3 => e.len = rng.edgy(&[0, 16, 48, e.len as u64, cap]) as u32,
            4 => e.addr = rng.edgy(offsets),
            5 => e.total = rng.edgy(&[0, e.total, cap, cap + 1]),
            6 => e.rlen = rng.edgy(&[0, cap, cap + 1]) as u32,
            7 => e.token_id = rng.next() as u32,
            8 => e.seq = rng.edgy(&[0, 1]),
            9 => e.head = rng.edgy(&[0, 1, e.head as u64, e.total, cap]) as u32,
            _ => {
                let i = (rng.next() as usize) % payload.len().max(1);
                if let Some(b) = payload.get_mut(i) {
                    *b = rng.next() as u8;
                }
            }
        }
    }
    (e, payload)
}

/// One to three `RefPiece`s near `base` in the sender's pool, as `payload`; returns their
/// total.
fn by_ref_pieces(rng: &mut impl Draw, base: u64, payload: &mut Vec<u8>) -> u64 {
    payload.clear();
    let mut total = 0;
    for _ in 0..1 + rng.next() % 3 {
        let (offset, len) = (base + rng.next() % 4096, rng.next() % 600);
        payload.extend_from_slice(&offset.to_ne_bytes());
        payload.extend_from_slice(&len.to_ne_bytes());
        total += len;
    }
    total
}

/// What one case did, for the test to see that the cases reach past the first checks.
pub struct Case {
    /// The round's verdict: None when it ran, else why it ended the pair.
    pub broke: Option<String>,
    pub completed: u64,
    pub placed: u64,
}

/// A receiving binding and a hostile writer of its inbox, kept across cases.
pub struct Bench {
    pool: Pool,
    shared: std::sync::Arc<crate::buf::pool::Lists>,
    mine: Segment,
    hostile: Segment,
    theirs: Segment,
    peer: Segment,
    _their_pool: Arena,
    their_off: u64,
    /// Where the next case starts writing.
    pos: u64,
    cases: u64,
}

impl Default for Bench {
    fn default() -> Self {
        Self::new()
    }
}

impl Bench {
    pub fn new() -> Bench {
        let me = std::process::id();
        let pool = Pool::new(false, crate::abi::types::BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(41).unwrap();
        let mine = Segment::create(42, false).unwrap();
        let hostile = Segment::open_peer(me, mine.fd() as u32, 42).unwrap();
        let (theirs, peer, their_pool) = sender_with_pool();
        let their_chunk = their_pool.extend(1 << 16).unwrap();
        let their_off = their_pool.offset_of(their_chunk, 1 << 16).unwrap();
        Bench {
            pool,
            shared,
            mine,
            hostile,
            theirs,
            peer,
            _their_pool: their_pool,
            their_off,
            pos: 0,
            cases: 0,
        }
    }

    /// Receive buffers posted from the shared pool or the private one (as `d` chooses).
    fn alloc(&self, shared: bool, n: u32) -> Vec<*mut umq_buf_t> {
        let head = if shared {
            self.pool.alloc_in(&self.shared, 1000, n, 0, 0).unwrap()
        } else {
            self.pool.alloc(1000, n, 0, 0).unwrap()
        };
        crate::buf::iter(head).collect()
    }

    /// One round over what `d` has the peer write: up to three entries from `hostile_entry`,
    /// or, when `raw` is given, those bytes as they are from a fresh line of the ring on
    /// (headers, stamps and all). Panics when anything that must hold does not.
    pub fn case(&mut self, d: &mut impl Draw, raw: Option<&[u8]>) -> Case {
        let mut w = Wire::new(16, 16);
        w.arena = self.shared.arena().cloned();
        let (rx, canaries) = (self.alloc(d.below(4) != 0, 4), self.alloc(false, 2));
        paint(&canaries);
        let mut offsets = vec![self.their_off];
        for &b in &rx {
            let data = unsafe { (*b).buf_data as *const u8 };
            offsets.extend(w.arena.as_deref().and_then(|a| a.offset_of(data, 1)));
            w.rq.post(b);
        }
        // Each case starts at a fresh line of the ring, as if the ones before were consumed.
        self.mine.inbox().cons.0.store(self.pos, Ordering::Relaxed);
        let at = match raw {
            Some(bytes) => self.write_bytes(bytes),
            None => self.write_entries(d, &rx, &offsets),
        };
        self.pos = if at % RING_BYTES as u64 > RING_BYTES as u64 / 2 {
            at.next_multiple_of(RING_BYTES as u64) // back to the start, on the next lap
        } else {
            at + LINE as u64
        };
        let mut out = Outcome::default();
        let fragments = d.next().is_multiple_of(4);
        let at = Receiver {
            umqh: 0,
            fragments,
            pool: &self.pool,
        };
        let mut pair = Pair::default();
        let r = receive(&mut w, &mut pair, &self.mine, &self.peer, &at, &mut out);
        // Nothing a First claims past the longest buffer of our pool is kept aside.
        if let Some((e, a)) = pair.assembly.as_ref() {
            let largest = self.pool.largest_buffer();
            assert!(
                e.total <= largest || a.aside().is_empty(),
                "kept aside: {e:?}"
            );
        }
        let case = Case {
            broke: r.err().map(|e| e.to_string()),
            completed: out.rx_done as u64,
            placed: w.zero_copy.placed_rx,
        };
        assert_eq!(w.rq.outstanding(), rx.len(), "a receive buffer was lost");
        assert_completions_fit(&w);
        assert_unwritten(&canaries);
        for b in rx.into_iter().chain(canaries) {
            self.pool.free_one(b).unwrap();
        }
        self.cases += 1;
        if self.cases.is_multiple_of(500) {
            self.theirs.reset_for_next_binding(); // our READ responses fill their ring
        }
        case
    }

    fn write_entries(&self, d: &mut impl Draw, rx: &[*mut umq_buf_t], offsets: &[u64]) -> u64 {
        let mut at = self.pos;
        for _ in 0..1 + d.next() % 3 {
            let (e, payload) = hostile_entry(d, &self.pool, rx, offsets);
            match write_raw(&self.hostile, at, &e, &payload) {
                Some(next) => at = next,
                None => break,
            }
        }
        at
    }

    /// `bytes` into the ring from the case's line on, as far as the ring reaches.
    fn write_bytes(&self, bytes: &[u8]) -> u64 {
        let off = self.pos as usize % RING_BYTES;
        let n = bytes.len().min(RING_BYTES - off);
        let at = unsafe { self.hostile.ring().add(off) };
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), at, n) };
        self.pos + n.next_multiple_of(LINE) as u64
    }
}

/// What one sender case did.
pub struct SenderCase {
    /// None while the pair held, else why our side ended it.
    pub broke: Option<String>,
    pub completed: u64,
}

/// Our sender against a hostile receiver, for the `shm_sender` fuzz target and its test: the
/// receiver's side of its inbox (how far it consumed our ring, how many of our WRs it executed
/// and how, its board of posted buffers, whether it is still in the binding, its flow-control
/// area) is whatever `d` says, between rounds of our progress. What must hold: no panic, our
/// WRs complete in order and once each, never more than were posted, and nothing written to
/// our own memory but the WRs' completion fields (the pool slots around them keep their
/// canaries). A round may end the pair (`Corrupt`, `PeerLeft`); it must say so.
pub fn sender_case(d: &mut impl Draw) -> SenderCase {
    let pool = Pool::new(false, crate::abi::types::BLOCK_SIZE_8K, 0);
    let (theirs, to_theirs, their_pool) = sender_with_pool();
    let ours = Segment::create(62, false).unwrap();
    let their_chunk = their_pool.extend(1 << 16).unwrap();
    let their_off = their_pool.offset_of(their_chunk, 1 << 16).unwrap();
    let alloc = |n| crate::buf::iter(pool.alloc(1000, n, 0, 0).unwrap()).collect::<Vec<_>>();
    let canaries = alloc(2);
    paint(&canaries);
    let mut w = Wire::new(16, 16);
    let wrs = alloc(1 + d.below(8) as u32);
    for &wr in &wrs {
        hostile_wr(d, wr, their_off);
        w.sq.push(wr);
    }
    let (mut pair, publisher) = (Pair::default(), placement::Publisher::default());
    let at = Receiver {
        umqh: 0,
        fragments: false,
        pool: &pool,
    };
    let (mut completed, mut broke) = (0, None);
    for _ in 0..1 + d.below(4) {
        hostile_receiver(d, &theirs, &publisher, their_off, wrs.len() as u64);
        match progress(&mut w, &mut pair, &ours, &to_theirs, &at) {
            Ok(out) => completed += out.tx_done as u64,
            Err(e) => {
                broke = Some(e.to_string());
                break;
            }
        }
        assert!(w.sq.completed() <= w.sq.len() && completed == w.sq.completed() as u64);
    }
    assert_unwritten(&canaries);
    for b in wrs.into_iter().chain(canaries) {
        pool.free_one(b).unwrap();
    }
    SenderCase { broke, completed }
}

/// A WR of ours of any opcode, its length and remote fields near their edges.
fn hostile_wr(d: &mut impl Draw, wr: *mut umq_buf_t, their_off: u64) {
    let b = unsafe { &mut *wr };
    b.data_size = d.below(b.buf_size as u64 + 1) as u32;
    b.total_data_size = b.data_size;
    let pro = b.pro_mut();
    pro.opcode = opcode(d);
    pro.imm_data = d.next();
    pro.remote_sge.addr = d.edgy(&[their_off, their_off + 4096]);
    pro.remote_sge.length = d.edgy(&[0, 64, 4096]) as u32;
}

/// The receiver's side of its inbox, as a hostile receiver may write it.
fn hostile_receiver(
    d: &mut impl Draw,
    theirs: &Segment,
    publisher: &placement::Publisher,
    their_off: u64,
    wrs: u64,
) {
    let i = theirs.inbox();
    for _ in 0..d.below(6) {
        match d.below(6) {
            0 => {
                let prod = i.prod.0.load(Ordering::Relaxed);
                i.cons
                    .0
                    .store(d.edgy(&[prod, 0, RING_BYTES as u64]), Ordering::Release);
            }
            1 => {
                let slot = d.below(STATUS_SLOTS as u64) as usize;
                i.statuses[slot].store(d.next() as u8, Ordering::Relaxed);
                i.done
                    .0
                    .store(d.edgy(&[0, 1, wrs, wrs + 1]), Ordering::Release);
            }
            2 => {
                let offset = d.edgy(&[their_off, their_off + 4096, 1 << 16, 1 << 30]);
                let capacity = d.edgy(&[0, 64, 1000, 8192]) as u32;
                i.board
                    .publish(publisher, d.edgy(&[0, 1, wrs]), offset, capacity);
            }
            3 => theirs.set_closed(),
            4 => theirs.open_for_next_peer(),
            _ => i
                .area
                .0
                .raise_to([d.edgy(&[0, 32]), d.edgy(&[0, 64]), d.edgy(&[0, 4])]),
        }
    }
}
