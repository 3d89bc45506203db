//! Shared memory between two processes of one host.
//!
//! Every queue that may be bound across processes owns an *inbox*, a memfd mapping that its
//! peer maps too:
//! - a single-producer / single-consumer byte ring of entries the peer writes (work requests,
//!   standalone window updates, READ responses);
//! - the count and statuses of the peer's work requests this queue has executed, which are the
//!   peer's send completions;
//! - this queue's flow-control area (initial window and cumulative grants), so the peer reads
//!   credit without a message.
//!
//! The memfd never has a name in /dev/shm, so nothing can be left behind by an exit or a crash.
//! The peer opens it through `/proc/<pid>/fd/<fd>`, which the kernel only allows a process of
//! the same user with ptrace-read access. The mapping is checked: size, owner uid, magic,
//! version, owner pid and a random secret from the bind info. Every index and length read from
//! the ring is bounds-checked before use, so a corrupt peer can stall the pair but not make this
//! process touch memory outside the mapping.
//!
//! An entry is published by its *stamp*, the last word of its header, set to its ring
//! position + 1 after everything else is written. The consumer waits on the stamp of the next
//! entry, so a message costs it one cache-line transfer, not a separate index line and then the
//! entry. The producer reads the consumer's index only when its cached copy says the ring is
//! full, and the sender reads the receiver's executed count only while a WR waits for it.
//!
//! Only the first stretch of the ring, its *hot* part, is populated up front (on both sides, so
//! neither takes page faults there). A producer past that point wraps back to the start early
//! whenever the consumer has left it, so a stream of small messages cycles through pages that
//! stay in cache; the cold rest of the 16 MiB is there for large messages and bursts. The hot
//! part is sized from the owner's receive depth, what can be in flight to it (`Hot`): 2 KiB a
//! receive buffer, between 64 KiB and 1 MiB (reached at depth 512), and entries up to an
//! eighth of it wrap early.
//!
//! The receiving process executes the entries against its own buffers with the loopback
//! engine's helpers, so opcodes, flow control and completion statuses mean the same here.
//!
//! A large SEND or WRITE whose buffers come from the sender's shared pool (`umq_buf_alloc` with
//! the queue's handle) goes *by reference* when the pair is idle or a stream by reference is
//! under way: its entry lists the buffers' offsets in the pool's memfd, which the receiver maps,
//! and the receiver copies the payload once, straight into its own buffer. Such a WR completes
//! at the sender when the receiver has executed it, like a WRITE, since until then its buffers
//! are still being read. A stream that began with copies through the ring keeps them until it
//! drains: there the sender's copy of one message overlaps the receiver's copy of the one
//! before, on two cores.
//!
//! The other way round, a SEND into a receive buffer from the *receiver's* shared pool is
//! *placed*: the sender writes it straight into that buffer (see `placement`), and its entry
//! says where.
//!
//! A rate-limited queue's messages longer than its PMTU go as packets, one entry each, pushed
//! as the pacer grants them (`FLAG_FIRST_PACKET`, then `KIND_MORE_PACKET` entries): First,
//! Middles, Last. The receiver keeps their bytes until the Last arrives and then runs the
//! message as any other, so the application sees one completion.

use super::LinkError;
use super::target;
use super::wire::{Outcome, PacketGate, Receiver, Side, Wire};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::buf::access::{PeerAccess, Pin, Reach};
use crate::buf::arena::{Arena, PeerArena};
use crate::buf::pool::Pool;
use crate::event::EventFd;
use crate::flow::Area;
use presence::Presence;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

/// Ring capacity: the largest message (`UMQ_MAX_BUF_REQUEST_SIZE`, 10 MiB) always fits. Pages
/// are only backed once touched, so a queue that moves small messages uses little of it.
pub const RING_BYTES: usize = 16 << 20;
/// The start of the ring that small entries cycle through (`bytes`): its pages are populated
/// (backed and mapped) on both sides at setup, so a message never waits for a page fault. A
/// producer past it wraps to the start early when the consumer has room there, instead of
/// touching new pages. Entries up to `entry_max` wrap early; larger ones run on through the
/// cold part of the ring. The owner chooses it and writes it in its inbox's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hot {
    bytes: usize,
    entry_max: usize,
}

impl Hot {
    /// The largest hot part, for the deepest queues.
    pub const LARGEST: Hot = Hot::of(1 << 20);
    const SMALLEST: usize = 64 << 10;
    /// Hot bytes per receive buffer of the owner's.
    const PER_RX_BUFFER: usize = 2 << 10;

    const fn of(bytes: usize) -> Hot {
        Hot {
            bytes,
            entry_max: bytes / 8 + LINE,
        }
    }

    /// For an owner with `rx_depth` receive buffers: what can be in flight to it.
    pub fn for_depth(rx_depth: u32) -> Hot {
        let bytes = (rx_depth as usize * Hot::PER_RX_BUFFER)
            .clamp(Hot::SMALLEST, Hot::LARGEST.bytes)
            .next_power_of_two();
        Hot::of(bytes)
    }

    /// What a peer's header says, if it is a hot part this library could have chosen.
    fn checked(bytes: u32, entry_max: u32) -> Option<Hot> {
        let hot = Hot::of(bytes as usize);
        let plausible = (Hot::SMALLEST..=Hot::LARGEST.bytes).contains(&hot.bytes)
            && hot.bytes.is_power_of_two()
            && hot.entry_max == entry_max as usize;
        plausible.then_some(hot)
    }

    /// The bytes populated up front: the hot part and the longest entry that starts in it.
    fn populated(self) -> usize {
        self.bytes + self.entry_max
    }
}
/// Statuses of executed WRs, indexed by sequence number: at least the deepest send queue.
const STATUS_SLOTS: usize = crate::limits::MAX_DEPTH as usize;
const MAGIC: u64 = u64::from_le_bytes(*b"UMQSHM01");
const LAYOUT_VERSION: u32 = 12;
/// Entries start on cache lines; a header is one line.
const LINE: usize = 64;

const KIND_PAD: u8 = 0;
const KIND_WR: u8 = 1;
const KIND_STANDALONE: u8 = 2;
const KIND_READ_RESP: u8 = 3;
/// A Middle or Last packet of a message cut into packets (a rate-limited sender's): `len`
/// bytes at offset `seq` of the `total` bytes its First packet began.
const KIND_MORE_PACKET: u8 = 4;
/// A MAC control frame of the link (`transport::pause`): `len` bytes, the frame.
const KIND_CONTROL: u8 = 5;

/// `Entry::flags`: the payload is a list of `RefPiece`s in the sender's shared pool.
const FLAG_BY_REF: u16 = 1;
/// `Entry::flags`: the payload is already in the receive buffer at `Entry::addr` (an offset in
/// the receiver's shared pool), written there by the sender (`placement`).
const FLAG_PLACED: u16 = 2;
/// `Entry::flags`: the WR's message is cut into packets (its sender is rate limited), and this
/// entry is its First, carrying the first `len` of its `total` bytes; `KIND_MORE_PACKET`
/// entries follow with the rest, the Last completing it. A message of one packet (an Only) is
/// an ordinary entry.
const FLAG_FIRST_PACKET: u16 = 4;
/// `Entry::flags`: the sender placed the first `Entry::head` bytes of the message in the receive
/// buffer at `Entry::addr`, and the payload lists the rest as `RefPiece`s in its shared pool,
/// for the receiver to copy behind them. The two cores each copy a part of a stream's messages,
/// at once (`docs/TRANSPORTS.md`, "Split messages").
const FLAG_SPLIT: u16 = FLAG_PLACED | FLAG_BY_REF;
/// Smallest message placed straight into the receiver's buffer when it goes alone (a post of
/// one WR, nothing of ours waiting): below it, the copy through the ring costs less than the
/// placement's fence and its look at the board (measured: see `docs/TRANSPORTS.md`).
const PLACE_MIN_ALONE: usize = 1024;
/// Smallest message placed when others go with it: a stream. Below it, the copy through the
/// ring is split over two cores and pipelines, while a placement waits for the board line the
/// receiver has just written.
const PLACE_MIN_IN_STREAM: usize = BY_REF_MIN;
/// Smallest message of a stream split between the two copies (`FLAG_SPLIT`). Below it a
/// stream's buffers stay in the sender's cache and placement alone was faster (16 KiB: 1.5-1.7
/// against 1.8 M msg/s); from it the split doubles the rate or better (`docs/PERFORMANCE.md`).
const SPLIT_MIN: usize = 32 << 10;
/// Smallest message sent by reference: below it, a copy through the ring costs less than the
/// sender's buffer waiting for the receiver to execute the WR.
const BY_REF_MIN: usize = 16 << 10;

/// One buffer of a WR sent by reference: where its bytes are in the sender's pool memfd.
#[repr(C)]
#[derive(Clone, Copy)]
struct RefPiece {
    offset: u64,
    len: u64,
}

#[repr(C, align(64))]
struct Line<T>(T);

/// The start of an inbox mapping. The ring follows at `ring_offset()`.
#[repr(C)]
pub struct Inbox {
    magic: u64,
    version: u32,
    owner_pid: u32,
    secret: u64,
    /// The ring's hot part, as the owner chose it (`Hot`).
    hot_bytes: u32,
    hot_entry_max: u32,
    /// Whether the owner is still in the binding the peer joined: when it is not, the peer
    /// stops and fails its sends.
    presence: Presence,
    /// The owner's shared pool, once it has one: its memfd number and the secret in its header
    /// (`NO_POOL` until then). The peer maps it to copy WRs sent by reference.
    pool_fd: AtomicU32,
    pool_secret: AtomicU64,
    /// The owner process's access table (`buf::access`), once a binding published it: its
    /// memfd number and secret (`NO_POOL` or 0 until then). The peer checks one-sided WRITEs
    /// and READs against it and carries them out itself (`direct`).
    access_fd: AtomicU32,
    access_secret: AtomicU64,
    /// The port of the owner process's call bell on 127.0.0.1 (`transport::call_bell`), 0 for
    /// none: the peer rings it, with this inbox's secret as the tag, when its WRs wait for the
    /// owner and the owner's application may not be calling in.
    call_port: AtomicU32,
    area: Line<Area>,
    /// Bytes the producer (the peer) has written (its own record: the consumer follows stamps),
    /// and the consumer (the owner) has released.
    prod: Line<AtomicU64>,
    cons: Line<AtomicU64>,
    /// WR entries the owner has executed; statuses[seq % STATUS_SLOTS] says how each went.
    done: Line<AtomicU64>,
    doorbell: Line<Doorbell>,
    statuses: [AtomicU8; STATUS_SLOTS],
    /// The owner's receive buffers in its shared pool, for the peer to place messages in.
    board: placement::Board,
}

/// Stored as the pool fd of a real inbox until the owner publishes one; 0 (a zeroed header)
/// means the same, since fd 0 is never a pool memfd we made.
const NO_POOL: u32 = u32::MAX;

mod direct;
mod doorbell;
#[cfg(any(test, feature = "fuzzing"))]
pub mod hostile;
mod link;
pub mod placement;
pub mod presence;
#[cfg(test)]
mod protocol_tests;
mod ring;
mod rx;
mod segment;
pub mod sync;
mod tx;
#[cfg(feature = "fuzzing")]
pub use doorbell::REFUSE_DOORBELLS;
use doorbell::*;
pub use link::Link;
use link::Pair;
use rx::*;
#[cfg(feature = "fuzzing")]
pub use segment::HIDE_CALL_PORTS;
pub use segment::Offered;
#[cfg(test)]
use segment::*;
use tx::*;

/// One ring entry's header, a cache line; the payload follows.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct Entry {
    kind: u8,
    opcode: u8,
    /// `FLAG_*`, or 0 for a payload right behind the header.
    flags: u16,
    /// Payload bytes after the header.
    len: u32,
    imm: u64,
    /// WRITE / WRITE_IMM / READ: the remote address and token; READ_RESP: unused.
    addr: u64,
    token_id: u32,
    token_value: u32,
    /// READ: bytes requested.
    rlen: u32,
    /// `FLAG_SPLIT`: the bytes at the start of the message the sender placed.
    head: u32,
    /// READ_RESP: the sequence number of the READ it answers.
    seq: u64,
    /// By reference: the message's bytes (the sum of its pieces).
    total: u64,
    /// Ring position of the entry + 1, stored last (release): the entry is there.
    stamp: u64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == LINE);
const STAMP_AT: usize = std::mem::offset_of!(Entry, stamp);

/// A mapped inbox: ours (we created the memfd and keep it open for the peer to open), or the
/// peer's (mapped, fd closed).
pub struct Segment {
    base: *mut u8,
    len: usize,
    fd: Option<std::os::fd::OwnedFd>,
    /// Producer side (the peer's inbox): the consumer index as last read, private to us.
    cons_seen: AtomicU64,
    /// Ours: the eventfd our progress thread sleeps on. The peer's: how we ring its owner, our
    /// duplicate of its eventfd or, where that was refused, our process's call bell.
    doorbell: Option<Bell>,
    /// The peer's: the indices (ours into their ring, theirs into ours) when we last looked
    /// at their doorbell, so a round that changed nothing does not ring.
    rung_at: [AtomicU64; 2],
    /// The peer's: its shared pool, mapped on the first WR that came by reference or was placed.
    /// (None: it could not be mapped.)
    peer_pool: std::sync::OnceLock<Option<PeerArena>>,
    /// The peer's: its process's access table, mapped on the first one-sided WRITE or READ
    /// after it published one. (None: it could not be mapped.)
    peer_access: std::sync::OnceLock<Option<PeerAccess>>,
    /// The peer's: the kernel refused us cross-memory attach to its process.
    direct_refused: std::sync::atomic::AtomicBool,
    /// Ours: our side of the placement board.
    publisher: placement::Publisher,
    /// The peer's: how many of our entries in its ring take a receive buffer (the number of the
    /// next such entry, for placement).
    taking_rx: AtomicU64,
    /// The peer's: the binding of its owner that we joined (see `presence`).
    joined: u64,
    /// The ring's hot part (ours as we chose it, the peer's as its header says).
    hot: Hot,
}

unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

/// One round of progress for a queue bound over shared memory: takes what the peer sent into
/// our receive buffers, completes our WRs the peer has executed, and pushes our waiting WRs.
fn progress(
    w: &mut Wire,
    pair: &mut Pair,
    mine: &Segment,
    peer: &Segment,
    at: &Receiver,
) -> Result<Outcome, LinkError> {
    let mut out = Outcome::default();
    // Whether the peer has left, read before anything else: what it did before it left (entries
    // in our ring, its executed count) is then visible to this round, which takes all of it
    // before the pair ends. Its WRs arrive and ours it executed complete, not flushed.
    let left = peer.is_closed();
    // Read the count before the drain: a READ counts as done only after its response is in our
    // ring, and the drain below takes every response pushed before the count moved. Only read it
    // while a WR waits for it: the peer writes that line for every WR it executes.
    let done = (w.sq.awaiting_peer() > 0).then(|| peer.inbox().done.0.load(Ordering::Acquire));
    receive(w, pair, mine, peer, at, &mut out)?;
    // With none of our WRs waiting or in flight (a poll that finds a message, usually) there
    // is nothing to complete or transmit.
    let ours = !w.sq.all_completed();
    if ours {
        complete(w, pair, peer, done, &mut out)?;
    }
    if left {
        return Err(LinkError::PeerLeft);
    }
    if ours {
        transmit(w, pair, peer, &mut out);
    }
    if ring_if_changed(mine, peer) {
        w.zero_copy.calls_sent += 1;
    }
    Ok(out)
}

/// The post's round: pushes our waiting WRs into the peer's ring and nothing else. What waits in
/// our ring, and the completions of WRs already in flight, are the next poll's to take; a WR
/// posted after them never needs them first. None when the peer has left: the full round then
/// takes what it sent before it went, and ends the pair.
#[inline]
fn transmit_round(
    w: &mut Wire,
    pair: &mut Pair,
    mine: &Segment,
    peer: &Segment,
) -> Option<Outcome> {
    if peer.is_closed() {
        return None;
    }
    let mut out = Outcome::default();
    transmit(w, pair, peer, &mut out);
    if ring_if_changed(mine, peer) {
        w.zero_copy.calls_sent += 1;
    }
    Some(out)
}

/// Whether a round would find nothing to do: none of our WRs waits to go or for the peer, no
/// entry waits in our ring, and the peer is still there. A poll spinning on an empty queue then
/// skips the round, and sees the next entry sooner. Never with an interrupt-mode peer, whose
/// doorbell a round decides whether to ring.
#[inline]
fn idle(w: &Wire, mine: &Segment, peer: &Segment) -> bool {
    w.sq.all_completed() && peer.doorbell.is_none() && !mine.has_entry() && !peer.is_closed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::Rng;
    use hostile::{receive_fresh, sender_with_pool, write_raw};

    fn readable(fd: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, 0) == 1 }
    }

    fn clear(fd: i32) {
        let mut n = 0u64;
        unsafe { libc::read(fd, &mut n as *mut u64 as *mut libc::c_void, 8) };
    }

    /// An owner (interrupt mode) and a peer that mapped its inbox, both in this process.
    fn pair() -> (Segment, Segment, Segment) {
        let owner = Segment::create(7, true).unwrap();
        let peer_view = Segment::open_peer(std::process::id(), owner.fd() as u32, 7).unwrap();
        let peer_own = Segment::create(8, false).unwrap();
        (owner, peer_view, peer_own)
    }

    #[test]
    fn a_change_rings_an_armed_owner_once() {
        let (owner, view, peers_inbox) = pair();
        let (bell, heard) = owner
            .doorbell()
            .expect("interrupt-mode inbox has a doorbell");
        assert!(heard, "the peer took the doorbell and said so");
        owner.arm_doorbell();
        ring_if_changed(&peers_inbox, &view);
        assert!(!readable(bell), "nothing changed: no ring");
        assert!(push_standalone(&view, 1));
        ring_if_changed(&peers_inbox, &view);
        assert!(readable(bell), "an entry in the armed owner's ring rings");
        clear(bell);
        assert!(push_standalone(&view, 2));
        ring_if_changed(&peers_inbox, &view);
        assert!(
            !readable(bell),
            "disarmed by the first ring: the owner is awake"
        );
        owner.arm_doorbell();
        ring_if_changed(&peers_inbox, &view);
        assert!(
            !readable(bell),
            "re-armed, but nothing new since the last look"
        );
    }

    /// Pushes a standalone carrying `n` and returns the ring offset it landed at.
    fn push_numbered(view: &Segment, n: u64) -> usize {
        assert!(push_standalone(view, n));
        let prod = view.inbox().prod.0.load(Ordering::Relaxed);
        (prod as usize - LINE) % RING_BYTES
    }

    fn pop_numbered(owner: &Segment) -> Option<u64> {
        let (e, _) = owner.peek().unwrap()?;
        owner.pop(&e);
        if e.kind == KIND_PAD {
            return pop_numbered(owner);
        }
        Some(e.imm)
    }

    #[test]
    fn small_entries_stay_in_the_hot_start_while_the_consumer_keeps_up() {
        let owner = Segment::create(11, false).unwrap();
        let view = Segment::open_peer(std::process::id(), owner.fd() as u32, 11).unwrap();
        let hot = Hot::LARGEST;
        let laps = 3 * hot.bytes / LINE;
        let mut furthest = 0;
        for n in 0..laps as u64 {
            furthest = furthest.max(push_numbered(&view, n));
            assert_eq!(
                pop_numbered(&owner),
                Some(n),
                "in order, across early wraps"
            );
        }
        assert!(furthest < hot.populated(), "reached offset {furthest}");
        assert!(
            view.inbox().prod.0.load(Ordering::Relaxed) as usize > RING_BYTES,
            "wrapped"
        );
    }

    #[test]
    fn a_lagging_consumer_sends_the_producer_on_through_the_cold_ring() {
        let owner = Segment::create(12, false).unwrap();
        let view = Segment::open_peer(std::process::id(), owner.fd() as u32, 12).unwrap();
        let beyond = Hot::LARGEST.populated() / LINE + 10;
        let last = (0..beyond as u64)
            .map(|n| push_numbered(&view, n))
            .last()
            .unwrap();
        assert!(
            last >= Hot::LARGEST.populated(),
            "nothing was consumed: no early wrap"
        );
        for n in 0..beyond as u64 {
            assert_eq!(pop_numbered(&owner), Some(n));
        }
        assert_eq!(pop_numbered(&owner), None);
    }

    fn by_ref_entry(pieces: &[RefPiece], total: u64) -> (Entry, Vec<RefPiece>) {
        let e = Entry {
            kind: KIND_WR,
            opcode: UMQ_OPC_SEND as u8,
            flags: FLAG_BY_REF,
            len: std::mem::size_of_val(pieces) as u32,
            total,
            ..Default::default()
        };
        (e, pieces.to_vec())
    }

    fn resolve(
        e: &Entry,
        payload: &[RefPiece],
        view: &Segment,
    ) -> Result<Vec<(usize, usize)>, LinkError> {
        let mut out = [(std::ptr::null_mut(), 0); crate::limits::MAX_SGE];
        let src = source(e, payload.as_ptr() as *const u8, view, &mut out)?;
        Ok(src.iter().map(|&(p, n)| (p as usize, n)).collect())
    }

    #[test]
    fn by_reference_pieces_resolve_into_the_senders_pool_and_nowhere_else() {
        let (_inbox, view, arena) = sender_with_pool();
        let chunk = arena.extend(8192).unwrap();
        unsafe { chunk.add(10).write(0x5a) };
        let off = arena.offset_of(chunk, 8192).unwrap();
        let piece = |o: u64, n: u64| RefPiece { offset: o, len: n };

        let (e, p) = by_ref_entry(&[piece(off + 10, 100), piece(off + 4096, 50)], 150);
        let got = resolve(&e, &p, &view).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(
            unsafe { *(got[0].0 as *const u8) },
            0x5a,
            "our mapping of their byte"
        );
        assert_eq!((got[0].1, got[1].1), (100, 50));

        let refused = [
            by_ref_entry(&[piece(off, 8193)], 8193), // past the backed end
            by_ref_entry(&[piece(0, 64)], 64),       // the pool's header page
            by_ref_entry(&[piece(u64::MAX - 10, 64)], 64),
            by_ref_entry(&[piece(off, 64)], 65), // pieces do not add up
            by_ref_entry(&[], 0),
        ];
        for (e, p) in &refused {
            assert!(resolve(e, p, &view).is_err(), "{:?}", e);
        }
        let (mut e, p) = by_ref_entry(&[piece(off, 64)], 64);
        e.len -= 1;
        assert!(resolve(&e, &p, &view).is_err(), "a torn piece list");
    }

    #[test]
    fn a_reference_from_a_sender_without_a_pool_breaks_the_pair() {
        let inbox = Segment::create(23, false).unwrap();
        let view = Segment::open_peer(std::process::id(), inbox.fd() as u32, 23).unwrap();
        let (e, p) = by_ref_entry(
            &[RefPiece {
                offset: 4096,
                len: 8,
            }],
            8,
        );
        assert_eq!(
            resolve(&e, &p, &view),
            Err(LinkError::Corrupt(
                "peer sent by reference without a shared pool"
            ))
        );
        inbox.publish_pool(inbox.fd(), 1); // a memfd, but not a sealed pool
        assert_eq!(
            resolve(&e, &p, &view),
            Err(LinkError::Corrupt("cannot map the peer's shared pool"))
        );
    }

    #[test]
    fn an_inbox_that_could_shrink_under_us_is_refused() {
        let fake = unsafe { libc::memfd_create(c"fake".as_ptr(), libc::MFD_CLOEXEC) };
        unsafe { libc::ftruncate(fake, segment_len() as libc::off_t) };
        let e = Segment::open_peer(std::process::id(), fake as u32, 1)
            .err()
            .unwrap();
        assert!(e.contains("sealed"), "{e}");
        unsafe { libc::close(fake) };
        let real = Segment::create(2, false).unwrap();
        assert_ne!(
            unsafe { libc::ftruncate(real.fd(), 4096) },
            0,
            "ours cannot shrink"
        );
    }

    /// A hostile or corrupt peer writes whatever it likes into our ring: entries of every shape
    /// the sender makes, a field or two often changed to anything (`hostile::hostile_entry`).
    /// Each round either runs them or ends the pair with a reason, and what must hold does
    /// (`hostile::Bench::case`). The `shm_ring` fuzz target runs the same cases from its bytes.
    #[test]
    fn random_entries_from_a_hostile_peer_run_or_break_the_pair_but_never_escape() {
        let mut bench = hostile::Bench::new();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut outcomes = std::collections::BTreeMap::new();
        let (mut completed, mut placed) = (0, 0);
        for _ in 0..3000 {
            let case = bench.case(&mut rng, None);
            *outcomes
                .entry(case.broke.unwrap_or_else(|| "ran".to_string()))
                .or_insert(0) += 1;
            completed += case.completed;
            placed += case.placed;
        }
        // The cases reach past the first checks: many run, some land in place.
        eprintln!("{outcomes:?}, {completed} completed, {placed} placed");
        assert!(
            outcomes["ran"] > 500 && completed > 500 && placed > 50,
            "{outcomes:?}"
        );
    }

    /// Our sender against a receiver that writes whatever it likes into its side of the inbox
    /// (`hostile::sender_case`): rounds run or end the pair with a reason, never escape. The
    /// `shm_sender` fuzz target runs the same cases from its bytes.
    #[test]
    fn a_hostile_receiver_never_makes_our_sender_escape() {
        let mut rng = Rng(0x005e_4de2);
        let mut outcomes = std::collections::BTreeMap::new();
        let mut completed = 0;
        for _ in 0..300 {
            let case = hostile::sender_case(&mut rng);
            *outcomes
                .entry(case.broke.unwrap_or_else(|| "held".to_string()))
                .or_insert(0) += 1;
            completed += case.completed;
        }
        eprintln!("{outcomes:?}, {completed} completed");
        assert!(outcomes["held"] > 30 && completed > 100, "{outcomes:?}");
    }

    /// Two inboxes of this process (`id` and `id + 1`) and a sender whose 5000-byte WR of
    /// `op` waits in its send queue, limited at PMTU 1024 with its first 2048 bytes granted.
    struct PacedPair {
        theirs: Segment,
        to_theirs: Segment,
        _ours: Segment,
        to_ours: Segment,
        ws: Wire,
        sender: Pair,
        wr: *mut umq_buf_t,
    }

    /// Queue 9 of this process, receiving as the pro API does.
    fn receiver_at(pool: &Pool) -> Receiver<'_> {
        Receiver {
            umqh: 9,
            fragments: false,
            pool,
        }
    }

    impl PacedPair {
        fn new(pool: &Pool, id: u64, op: umq_opcode_t, imm: u64) -> PacedPair {
            let me = std::process::id();
            let theirs = Segment::create(id, false).unwrap();
            let to_theirs = Segment::open_peer(me, theirs.fd() as u32, id).unwrap();
            let ours = Segment::create(id + 1, false).unwrap();
            let to_ours = Segment::open_peer(me, ours.fd() as u32, id + 1).unwrap();
            let mut ws = Wire::new(8, 8);
            let wr = crate::transport::test_wr(pool, 5000, op, imm);
            ws.sq.push(wr);
            ws.pace(1024);
            ws.paced_mut().unwrap().set_open(Some((wr, 2048)));
            PacedPair {
                theirs,
                to_theirs,
                _ours: ours,
                to_ours,
                ws,
                sender: Pair::default(),
                wr,
            }
        }
    }

    /// A rate-limited sender's message longer than its PMTU goes as packets, one ring entry
    /// each, only as far as the pacer granted it (`PacketGate`); the receiver holds them and
    /// completes the message once, bytes and immediate intact, when the Last arrives.
    #[test]
    fn a_paced_message_crosses_as_packets_as_they_are_granted() {
        let pool = Pool::new(false, 0, 0);
        let PacedPair {
            theirs,
            to_theirs,
            to_ours,
            mut ws,
            mut sender,
            wr,
            _ours,
        } = PacedPair::new(&pool, 51, UMQ_OPC_SEND_IMM, 77);
        ws.departures = Some(Box::new(crate::transport::arrivals::ArrivalLog::new(16)));
        let (mut wr_rx, mut receiver) = (Wire::new(8, 8), Pair::default());
        let rx = pool.alloc(8192, 1, 0, 0).unwrap();
        wr_rx.rq.post(rx);
        let (at, mut out) = (receiver_at(&pool), Outcome::default());
        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        assert_eq!(
            ws.paced_packets(),
            2,
            "two packets granted, two on the wire"
        );
        assert_eq!(
            (ws.sq.completed(), ws.sq.in_flight()),
            (0, 0),
            "the WR is not all out"
        );
        let (first, _) = theirs.peek().unwrap().expect("the First");
        assert_eq!(
            (first.flags, first.len, first.total),
            (FLAG_FIRST_PACKET, 1024, 5000)
        );
        receive(&mut wr_rx, &mut receiver, &theirs, &to_ours, &at, &mut out).unwrap();
        assert!(!wr_rx.rq.has_completions(), "completed before its Last");
        let assembly = receiver
            .assembly
            .as_ref()
            .map(|(_, a)| (a.received(), a.in_buffer()));
        assert_eq!(
            assembly,
            Some((2048, Some(rx))),
            "landing in the posted buffer"
        );
        assert_eq!(wr_rx.rq.posted_len(), 1, "no buffer taken yet");
        assert!(
            crate::transport::test_bytes_intact(rx, 2048),
            "the packets so far are in the buffer"
        );

        ws.paced_mut().unwrap().set_open(Some((wr, 4096)));
        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        assert_eq!(ws.paced_packets(), 4);
        ws.paced_mut().unwrap().set_open(None); // all granted
        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        assert_eq!(ws.paced_packets(), 5, "5000 bytes in packets of 1024");
        let (departed, _) = ws.departures.as_mut().unwrap().take();
        let sizes: Vec<u32> = departed.iter().map(|d| d.bytes).collect();
        assert_eq!(
            sizes,
            [1024, 1024, 1024, 1024, 904],
            "each packet left once"
        );
        assert_eq!(
            ws.sq.completed(),
            1,
            "a SEND completes once its Last is in the ring"
        );
        receive(&mut wr_rx, &mut receiver, &theirs, &to_ours, &at, &mut out).unwrap();
        let (head, nbufs) = wr_rx.rq.completion_at(0).expect("one completion");
        assert_eq!((head, nbufs, wr_rx.rq.completions_len()), (rx, 1, 1));
        let h = unsafe { &*head };
        assert_eq!(
            (h.total_data_size, h.pro().opcode, h.pro().imm_data),
            (5000, UMQ_OPC_SEND_IMM, 77)
        );
        assert!(
            crate::transport::test_bytes_intact(head, 5000),
            "bytes intact"
        );
        assert_eq!(
            theirs.inbox().done.0.load(Ordering::Relaxed),
            1,
            "executed once"
        );
        assert!(receiver.assembly.is_none() && !theirs.has_entry());
        pool.free_one(wr).unwrap();
        pool.free_one(rx).unwrap();
    }

    /// A window update that comes between a message's packets takes the next posted buffer,
    /// the one the message was landing in: the message's bytes so far move aside first, and
    /// the message completes whole in the buffer after it.
    #[test]
    fn a_window_update_between_packets_takes_the_buffer_the_message_was_landing_in() {
        let pool = Pool::new(false, 0, 0);
        let PacedPair {
            theirs,
            to_theirs,
            to_ours,
            mut ws,
            mut sender,
            wr,
            _ours,
        } = PacedPair::new(&pool, 53, UMQ_OPC_SEND, 0);
        let (mut wr_rx, mut receiver) = (Wire::new(8, 8), Pair::default());
        let params = crate::flow::Params::new(4, 0, 8, 8);
        wr_rx.flow = Some(crate::flow::FlowState::new(params));
        let (first, second) = (
            pool.alloc(8192, 1, 0, 0).unwrap(),
            pool.alloc(8192, 1, 0, 0).unwrap(),
        );
        wr_rx.rq.post(first);
        wr_rx.rq.post(second);
        let (at, mut out) = (receiver_at(&pool), Outcome::default());
        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        receive(&mut wr_rx, &mut receiver, &theirs, &to_ours, &at, &mut out).unwrap();
        let landing = receiver.assembly.as_ref().and_then(|(_, a)| a.in_buffer());
        assert_eq!(landing, Some(first), "landing in the first buffer");
        assert!(push_standalone(&to_theirs, 0));
        ws.paced_mut().unwrap().set_open(None);
        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        receive(&mut wr_rx, &mut receiver, &theirs, &to_ours, &at, &mut out).unwrap();

        let (head, _) = wr_rx.rq.completion_at(0).expect("the window update");
        let h = unsafe { &*head };
        assert_eq!((head, h.status()), (first, UMQ_BUF_FLOW_CONTROL_UPDATE));
        let (head, _) = wr_rx.rq.completion_at(1).expect("the message");
        let h = unsafe { &*head };
        assert_eq!(
            (head, h.status(), h.total_data_size),
            (second, UMQ_BUF_SUCCESS, 5000)
        );
        assert!(
            crate::transport::test_bytes_intact(second, 5000),
            "bytes intact"
        );
        assert!(receiver.assembly.is_none() && !theirs.has_entry());
        for b in [wr, first, second] {
            pool.free_one(b).unwrap();
        }
    }

    /// A stream of large SENDs between two shared pools is split: the sender writes the first
    /// half of each into the receive buffer published for it and lists the rest by reference;
    /// the receiver copies the rest behind it and completes the buffer; the sender's WRs
    /// complete once the receiver executed them.
    #[test]
    fn a_stream_of_large_sends_is_split_between_the_two_copies() {
        let me = std::process::id();
        let pool = Pool::new(false, 0, 0);
        let (their_pool, our_pool) = (pool.new_shared(61).unwrap(), pool.new_shared(62).unwrap());
        let (their_arena, our_arena) = (their_pool.arena().unwrap(), our_pool.arena().unwrap());
        let theirs = Segment::create(63, false).unwrap();
        theirs.publish_pool(their_arena.fd(), their_arena.secret());
        let to_theirs = Segment::open_peer(me, theirs.fd() as u32, 63).unwrap();
        let ours = Segment::create(64, false).unwrap();
        ours.publish_pool(our_arena.fd(), our_arena.secret());
        let to_ours = Segment::open_peer(me, ours.fd() as u32, 64).unwrap();

        const LEN: u32 = 40_000;
        let mut ws = Wire::new(8, 8);
        ws.arena = Some(our_arena.clone());
        let wrs: Vec<_> = (0..2u64)
            .map(|k| {
                let wr = pool.alloc_in(&our_pool, LEN, 1, 0, 0).unwrap();
                let b = unsafe { &mut *wr };
                let data =
                    unsafe { std::slice::from_raw_parts_mut(b.buf_data as *mut u8, LEN as usize) };
                data.iter_mut()
                    .enumerate()
                    .for_each(|(i, x)| *x = (i % 251) as u8);
                (b.data_size, b.total_data_size) = (LEN, LEN);
                (b.pro_mut().opcode, b.pro_mut().imm_data) = (UMQ_OPC_SEND_IMM, 2 * k);
                ws.sq.push(wr);
                wr
            })
            .collect();
        let mut wr_rx = Wire::new(8, 8);
        wr_rx.arena = Some(their_arena.clone());
        let rx: Vec<_> =
            crate::buf::iter(pool.alloc_in(&their_pool, 65536, 2, 0, 0).unwrap()).collect();
        for (k, &b) in rx.iter().enumerate() {
            theirs.publish_posted(their_arena, k as u64, b);
            wr_rx.rq.post(b);
        }
        let (mut sender, mut receiver) = (Pair::default(), Pair::default());
        let mut out = Outcome::default();

        transmit(&mut ws, &mut sender, &to_theirs, &mut out);
        let head = (LEN as u64 / 2).next_multiple_of(LINE as u64);
        let z = ws.zero_copy;
        assert_eq!(
            (z.placed_wr, z.placed_bytes, z.by_ref_wr, z.by_ref_bytes),
            (2, 2 * head, 2, 2 * (LEN as u64 - head)),
            "both split, each half counted once"
        );
        assert_eq!(
            (ws.sq.completed(), ws.sq.in_flight()),
            (0, 2),
            "their rest is still ours to keep"
        );

        let at = Receiver {
            umqh: 9,
            fragments: false,
            pool: &pool,
        };
        receive(&mut wr_rx, &mut receiver, &theirs, &to_ours, &at, &mut out).unwrap();
        assert_eq!(
            (wr_rx.rq.completions_len(), wr_rx.zero_copy.placed_rx),
            (2, 2)
        );
        for (k, &b) in rx.iter().enumerate() {
            let (head, nbufs) = wr_rx.rq.completion_at(k).unwrap();
            assert_eq!((head, nbufs), (b, 1), "in order, one buffer each");
            let h = unsafe { &*b };
            assert_eq!(
                (h.total_data_size, h.pro().opcode, h.pro().imm_data),
                (LEN, UMQ_OPC_SEND_IMM, 2 * k as u64)
            );
            assert!(
                crate::transport::test_bytes_intact(b, LEN as usize),
                "message {k}"
            );
        }
        let done = theirs.inbox().done.0.load(Ordering::Relaxed);
        assert_eq!(done, 2, "both executed");
        complete(&mut ws, &mut sender, &to_theirs, Some(done), &mut out).unwrap();
        assert_eq!(
            (ws.sq.completed(), ws.sq.in_flight()),
            (2, 0),
            "complete once executed"
        );
        assert!(sender.by_ref_in_flight.is_empty());
        for b in wrs.into_iter().chain(rx) {
            pool.free_one(b).unwrap();
        }
    }

    /// Packets that do not make a message end the pair: a Middle without a First, a gap, a
    /// new message before the Last, a First of a message that fits one packet.
    #[test]
    fn packets_that_do_not_make_a_message_break_the_pair() {
        let me = std::process::id();
        let pool = Pool::new(false, 0, 0);
        let first = Entry {
            kind: KIND_WR,
            opcode: UMQ_OPC_SEND as u8,
            flags: FLAG_FIRST_PACKET,
            len: 100,
            total: 300,
            ..Default::default()
        };
        let more = |seq: u64, len: u32| Entry {
            kind: KIND_MORE_PACKET,
            len,
            total: 300,
            seq,
            ..Default::default()
        };
        let plain = Entry {
            flags: 0,
            total: 0,
            ..first
        };
        let cases: [(&str, Vec<Entry>); 5] = [
            ("a packet without its message's first", vec![more(0, 100)]),
            (
                "packets that do not make their message",
                vec![first, more(150, 100)],
            ),
            (
                "packets that do not make their message",
                vec![first, more(100, 250)],
            ),
            (
                "a message began before the last packet of the one before",
                vec![first, more(100, 100), plain],
            ),
            (
                "malformed first packet",
                vec![Entry {
                    total: 100,
                    ..first
                }],
            ),
        ];
        for (why, entries) in cases {
            let mine = Segment::create(61, false).unwrap();
            let writer = Segment::open_peer(me, mine.fd() as u32, 61).unwrap();
            let (_other, peer, _) = sender_with_pool();
            let mut at = 0;
            for e in &entries {
                at = write_raw(&writer, at, e, &vec![7u8; e.len as usize]).unwrap();
            }
            let mut w = Wire::new(8, 8);
            w.rq.post(pool.alloc(1000, 1, 0, 0).unwrap());
            let r = receive_fresh(&mut w, &mine, &peer, &pool, false, &mut Outcome::default());
            assert_eq!(r, Err(LinkError::Corrupt(why)), "{entries:?}");
            assert!(!w.rq.has_completions(), "{why}: something completed");
            pool.free_one(w.rq.take_posted().unwrap()).unwrap();
        }
    }

    /// The packets of a SEND longer than any buffer of our pool are counted and not kept by
    /// a receiver that takes a message in one buffer (pro API): it can only fail. A base-API
    /// receiver, which spreads a message over its buffers, keeps its First in the ring until the
    /// posted buffers hold the message together, then writes the packets across them in place.
    #[test]
    fn packets_of_a_send_longer_than_a_buffer_are_not_kept_aside() {
        let me = std::process::id();
        let pool = Pool::new(false, 0, 0);
        let total = pool.largest_buffer() + 1;
        let byte = |at: u64| (at % 251) as u8;
        let packet = |seq: u64| {
            let e = Entry {
                kind: if seq == 0 { KIND_WR } else { KIND_MORE_PACKET },
                opcode: UMQ_OPC_SEND as u8,
                flags: if seq == 0 { FLAG_FIRST_PACKET } else { 0 },
                len: 4096,
                total,
                seq,
                ..Default::default()
            };
            (e, (seq..seq + 4096).map(byte).collect::<Vec<u8>>())
        };
        for fragments in [false, true] {
            let mine = Segment::create(62, false).unwrap();
            let writer = Segment::open_peer(me, mine.fd() as u32, 62).unwrap();
            let (_other, peer, _) = sender_with_pool();
            let mut at = 0;
            for i in 0..64 {
                let (e, bytes) = packet(i * 4096);
                at = write_raw(&writer, at, &e, &bytes).unwrap();
            }
            let mut w = Wire::new(8, 8);
            w.rq.post(pool.alloc(1000, 1, 0, 0).unwrap());
            let receiver = Receiver {
                umqh: 0,
                fragments,
                pool: &pool,
            };
            let mut pair = Pair::default();
            let receive = |w: &mut Wire, pair: &mut Pair| {
                let mut out = Outcome::default();
                let r = rx::receive(w, pair, &mine, &peer, &receiver, &mut out);
                assert_eq!(r, Ok(()));
                out
            };
            if fragments {
                assert!(receive(&mut w, &mut pair).blocked, "waits for buffers");
                assert!(pair.assembly.is_none());
                (0..2).for_each(|_| w.rq.post(pool.alloc(8 << 20, 1, 0, 0).unwrap()));
            }
            receive(&mut w, &mut pair);
            let (_, a) = pair.assembly.as_ref().expect("the message is arriving");
            assert_eq!(
                (a.received(), a.aside().len()),
                (64 * 4096, 0),
                "base API: {fragments}"
            );
            assert_eq!(a.in_place(), fragments);
            if fragments {
                let first = w.rq.posted_at(0).unwrap();
                let second = w.rq.posted_at(1).unwrap();
                let data = |b: *mut umq_buf_t, n| unsafe {
                    std::slice::from_raw_parts((*b).buf_data as *const u8, n)
                };
                // The first buffer filled to its size, the rest in the second.
                let n = unsafe { (*first).buf_size } as usize;
                let mut in_first = data(first, n).iter().enumerate();
                assert!(in_first.all(|(i, &v)| v == byte(i as u64)));
                let mut in_second = data(second, 64 * 4096 - n).iter().enumerate();
                assert!(in_second.all(|(i, &v)| v == byte((n + i) as u64)));
            }
            assert!(!w.rq.has_completions());
            pair.assembly = None;
            w.rq.flush();
        }
    }

    #[test]
    fn a_renewed_inbox_leaves_the_old_peer_writing_into_nothing() {
        let me = std::process::id();
        let owner = Segment::create(14, false).unwrap();
        let old = Segment::open_peer(me, owner.fd() as u32, 14).unwrap();
        let fd = owner.fd();
        owner.set_closed();
        owner.renew().unwrap();
        assert_eq!(owner.fd(), fd, "the next bind info names the same fd");
        assert_ne!(owner.secret(), 14);
        assert!(old.is_closed(), "the old peer still sees us gone");
        let entry = Entry {
            kind: KIND_WR,
            opcode: UMQ_OPC_SEND as u8,
            ..Default::default()
        };
        let bytes = |v: u8| move |p: *mut u8| unsafe { p.write_bytes(v, 8) };
        // The old peer finishing a push it began before the unbind: it reaches nobody.
        assert!(old.push(entry, 8, bytes(0x77)));
        assert!(owner.peek().unwrap().is_none(), "nothing in the new ring");
        assert_eq!(owner.inbox().prod.0.load(Ordering::Relaxed), 0);
        assert!(
            Segment::open_peer(me, fd as u32, 14).is_err(),
            "bind info from before the unbind no longer opens the inbox"
        );
        let new = Segment::open_peer(me, fd as u32, owner.secret()).unwrap();
        assert!(!new.is_closed());
        assert!(new.push(entry, 8, bytes(0x42)));
        let (e, payload) = owner.peek().unwrap().expect("the new peer's entry");
        assert_eq!((e.kind, e.len), (KIND_WR, 8));
        assert_eq!(unsafe { *payload }, 0x42);
    }

    #[test]
    fn a_peer_of_an_ended_binding_never_sees_the_inbox_open_again() {
        let owner = Segment::create(13, false).unwrap();
        let me = std::process::id();
        let old = Segment::open_peer(me, owner.fd() as u32, 13).unwrap();
        assert!(!old.is_closed());
        owner.set_closed();
        owner.reset_for_next_binding();
        owner.open_for_next_peer();
        let new = Segment::open_peer(me, owner.fd() as u32, 13).unwrap();
        assert!(!new.is_closed());
        assert!(
            old.is_closed(),
            "descheduled across the unbind, the old peer would write into the new binding"
        );
    }

    /// The peer's view of an interrupt-mode owner as where `pidfd_getfd` was refused: no
    /// duplicate of its doorbell, and nothing told to the owner.
    fn refused(owner: &Segment, view: &mut Segment) {
        view.doorbell = None;
        owner
            .inbox()
            .doorbell
            .0
            .peer_rings
            .store(0, Ordering::Release);
    }

    /// Unlike a peer that holds the owner's eventfd, one that rings its call bell does not tell
    /// the owner so: its datagram may never arrive (no call bell there, or another network
    /// namespace's 127.0.0.1), and a told owner's thread sleeps for the backstop's second. The
    /// owner tells itself once a ring has arrived (`heard_by_call`, by the progress engine).
    #[test]
    fn only_a_ring_that_arrived_tells_the_owner_it_is_rung() {
        let (owner, mut view, peers_inbox) = pair();
        refused(&owner, &mut view);
        let ours = std::sync::Arc::new(
            crate::transport::call_bell::CallBell::open((std::net::Ipv4Addr::LOCALHOST, 0).into())
                .unwrap(),
        );
        view.ring_owner_by_call(&ours);
        let heard = || owner.doorbell().unwrap().1;
        assert!(!heard(), "nothing rang yet: the owner keeps its 1 ms look");
        owner.arm_doorbell();
        assert!(push_standalone(&view, 1));
        assert!(
            !ring_if_changed(&peers_inbox, &view),
            "no call bell to ring"
        );
        let owners = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        owner.publish_call_port(owners.local_addr().unwrap().port());
        assert!(push_standalone(&view, 2));
        assert!(ring_if_changed(&peers_inbox, &view), "the call bell rings");
        assert!(!heard(), "a datagram sent is not a datagram taken");
        let mut d = [0u8; 32];
        owners
            .set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        let n = owners.recv(&mut d).unwrap();
        assert_eq!((n, &d[..8]), (16, &view.secret().to_le_bytes()[..]));
        owner.heard_by_call();
        assert!(heard());
    }

    #[test]
    fn a_polling_owner_has_no_doorbell() {
        let owner = Segment::create(9, false).unwrap();
        assert!(owner.doorbell().is_none());
        let view = Segment::open_peer(std::process::id(), owner.fd() as u32, 9).unwrap();
        assert!(view.doorbell.is_none());
    }

    #[test]
    fn only_a_nonblocking_eventfd_is_taken_as_a_doorbell() {
        let owner = Segment::create(10, true).unwrap();
        let me = std::process::id();
        let (bell, _) = owner.doorbell().unwrap();
        assert!(peer_doorbell(me, bell as u32).is_some());
        assert!(
            peer_doorbell(me, owner.fd() as u32).is_none(),
            "a memfd is refused"
        );
        let blocking = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(
            peer_doorbell(me, blocking as u32).is_none(),
            "a blocking eventfd is refused"
        );
        unsafe { libc::close(blocking) };
    }
}
