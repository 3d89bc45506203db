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
//! Only the first `HOT_BYTES` (1 MiB) of the ring are populated up front (on both sides, so neither
//! takes page faults there). A producer past that point wraps back to the start early whenever
//! the consumer has left it, so a stream of messages up to 128 KiB cycles through one MiB
//! that stay in cache; the cold rest of the 16 MiB is there for large messages and bursts.
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

use super::loopback::{self, CreditGate, Outcome, Side, Wire};
use super::placement;
use super::presence::Presence;
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::buf::arena::{Arena, PeerArena};
use crate::buf::pool::Pool;
use crate::event::EventFd;
use crate::flow::Area;
use std::sync::atomic::{AtomicU8, AtomicU32, AtomicU64, Ordering};

/// Ring capacity: the largest message (`UMQ_MAX_BUF_REQUEST_SIZE`, 10 MiB) always fits. Pages
/// are only backed once touched, so a queue that moves small messages uses little of it.
pub const RING_BYTES: usize = 16 << 20;
/// The start of the ring that small entries cycle through: its pages are populated (backed and
/// mapped) on both sides at setup, so a message never waits for a page fault. A producer past
/// it wraps to the start early when the consumer has room there, instead of touching new pages.
const HOT_BYTES: usize = 1 << 20;
/// Entries up to this size wrap early; larger ones run on through the cold part of the ring.
const HOT_ENTRY_MAX: usize = (128 << 10) + LINE;
/// Statuses of executed WRs, indexed by sequence number: at least the deepest send queue.
const STATUS_SLOTS: usize = crate::limits::MAX_DEPTH as usize;
const MAGIC: u64 = u64::from_le_bytes(*b"UMQSHM01");
const LAYOUT_VERSION: u32 = 6;
/// Entries start on cache lines; a header is one line.
const LINE: usize = 64;

const KIND_PAD: u8 = 0;
const KIND_WR: u8 = 1;
const KIND_STANDALONE: u8 = 2;
const KIND_READ_RESP: u8 = 3;

/// `Entry::flags`: the payload is a list of `RefPiece`s in the sender's shared pool.
const FLAG_BY_REF: u16 = 1;
/// `Entry::flags`: the payload is already in the receive buffer at `Entry::addr` (an offset in
/// the receiver's shared pool), written there by the sender (`placement`).
const FLAG_PLACED: u16 = 2;
/// Smallest message placed straight into the receiver's buffer when it goes alone (a post of
/// one WR, nothing of ours waiting): below it, the copy through the ring costs less than the
/// placement's fence and its look at the board (measured: see `docs/TRANSPORTS.md`).
const PLACE_MIN_ALONE: usize = 1024;
/// Smallest message placed when others go with it: a stream. Below it, the copy through the
/// ring is split over two cores and pipelines, while a placement waits for the board line the
/// receiver has just written.
const PLACE_MIN_IN_STREAM: usize = BY_REF_MIN;
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
    /// Whether the owner is still in the binding the peer joined: when it is not, the peer
    /// stops and fails its sends.
    presence: Presence,
    /// The owner's shared pool, once it has one: its memfd number and the secret in its header
    /// (`NO_POOL` until then). The peer maps it to copy WRs sent by reference.
    pool_fd: AtomicU32,
    pool_secret: AtomicU64,
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

/// How the peer wakes an interrupt-mode owner that has nothing to do: the owner's watchdog
/// sleeps on an eventfd, which the peer duplicated at bind (`pidfd_getfd`).
#[repr(C)]
struct Doorbell {
    /// The owner's eventfd number, `NO_DOORBELL` for a polling-mode owner.
    fd: AtomicU32,
    /// Set by the owner just before its watchdog sleeps; the peer that clears it rings.
    armed: AtomicU32,
    /// Set by the peer once it holds the eventfd: the owner may then sleep long.
    peer_rings: AtomicU32,
}

const NO_DOORBELL: u32 = u32::MAX;
/// Stored as the pool fd of a real inbox until the owner publishes one; 0 (a zeroed header)
/// means the same, since fd 0 is never a pool memfd we made.
const NO_POOL: u32 = u32::MAX;

fn ring_offset() -> usize {
    std::mem::size_of::<Inbox>().next_multiple_of(4096)
}

pub fn segment_len() -> usize {
    ring_offset() + RING_BYTES
}

/// One ring entry's header, a cache line; the payload follows.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
struct Entry {
    kind: u8,
    opcode: u8,
    /// `FLAG_BY_REF` or 0.
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
    _r1: u32,
    /// READ_RESP: the sequence number of the READ it answers.
    seq: u64,
    /// By reference: the message's bytes (the sum of its pieces).
    total: u64,
    /// Ring position of the entry + 1, stored last (release): the entry is there.
    stamp: u64,
}

const _: () = assert!(std::mem::size_of::<Entry>() == LINE);
const STAMP_AT: usize = std::mem::offset_of!(Entry, stamp);

/// The stamp word of the entry at `at`.
fn stamp_of(at: *mut u8) -> &'static AtomicU64 {
    unsafe { &*(at.add(STAMP_AT) as *const AtomicU64) }
}

/// Writes header `e` at `at`, all but its stamp (which publishes it).
fn write_header(at: *mut u8, e: &Entry) {
    unsafe { std::ptr::copy_nonoverlapping(e as *const Entry as *const u8, at, STAMP_AT) };
}

fn entry_bytes(len: usize) -> usize {
    LINE + len.next_multiple_of(LINE)
}

/// A mapped inbox: ours (we created the memfd and keep it open for the peer to open), or the
/// peer's (mapped, fd closed).
pub struct Segment {
    base: *mut u8,
    len: usize,
    fd: Option<std::os::fd::OwnedFd>,
    /// Producer side (the peer's inbox): the consumer index as last read, private to us.
    cons_seen: AtomicU64,
    /// Ours: the eventfd our watchdog sleeps on. The peer's: our duplicate of theirs.
    doorbell: Option<EventFd>,
    /// The peer's: the indices (ours into their ring, theirs into ours) when we last looked
    /// at their doorbell, so a round that changed nothing does not ring.
    rung_at: [AtomicU64; 2],
    /// The peer's: its shared pool, mapped on the first WR that came by reference or was placed.
    /// (None: it could not be mapped.)
    peer_pool: std::sync::OnceLock<Option<PeerArena>>,
    /// Ours: our side of the placement board.
    publisher: placement::Publisher,
    /// The peer's: how many of our entries in its ring take a receive buffer (the number of the
    /// next such entry, for placement).
    taking_rx: AtomicU64,
    /// The peer's: the binding of its owner that we joined (see `presence`).
    joined: u64,
}

unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Drop for Segment {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}

fn os_err() -> i32 {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    crate::log_err!("umq_shm", "{}", std::io::Error::from_raw_os_error(e));
    if e == libc::ENOMEM {
        -UMQ_ERR_ENOMEM
    } else {
        -UMQ_ERR_EINVAL
    }
}

fn raw(fd: &std::os::fd::OwnedFd) -> i32 {
    std::os::fd::AsRawFd::as_raw_fd(fd)
}

/// Duplicates the peer's doorbell eventfd into this process. None (the peer then falls back to
/// a 1 ms tick) when the kernel refuses (no pidfd_getfd before Linux 5.6, or ptrace rules), or
/// when the fd is not a non-blocking eventfd: a write to it must never block or reach anything
/// else of the peer's.
fn peer_doorbell(pid: u32, fd: u32) -> Option<EventFd> {
    let dup = crate::os::pidfd_getfd(pid, fd)
        .inspect_err(|e| {
            crate::log_info!(
                "umq_bind",
                "cannot take the peer's doorbell ({e}): its interrupt-mode queue polls every 1 ms"
            )
        })
        .ok()?;
    let target = std::fs::read_link(format!("/proc/self/fd/{}", raw(&dup))).ok()?;
    let flags = unsafe { libc::fcntl(raw(&dup), libc::F_GETFL) };
    (target.as_os_str() == "anon_inode:[eventfd]" && flags >= 0 && flags & libc::O_NONBLOCK != 0)
        .then(|| EventFd::from_owned(dup))
}

/// Backs and maps the hot start of the ring in this process now (Linux 5.14+; on older kernels
/// the pages fault in on first use instead, which is only slower).
fn populate_hot(ring: *mut u8) {
    unsafe {
        libc::madvise(
            ring as *mut libc::c_void,
            HOT_BYTES + HOT_ENTRY_MAX,
            libc::MADV_POPULATE_WRITE,
        )
    };
}

fn map(fd: i32, len: usize) -> Result<*mut u8, i32> {
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(os_err());
    }
    Ok(p as *mut u8)
}

/// A memfd for an inbox: mode 0600, sealed at its size, so neither side can shrink the mapping
/// under the other (SIGBUS).
fn inbox_memfd() -> Result<std::os::fd::OwnedFd, i32> {
    crate::os::sealed_memfd(
        c"umq-inbox",
        segment_len(),
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
    )
    .map_err(|_| os_err())
}

/// Writes the header of a fresh (zeroed) inbox mapped at `base`.
fn write_inbox_header(base: *mut u8, secret: u64, doorbell: Option<&EventFd>) {
    let inbox = unsafe { &mut *(base as *mut Inbox) };
    inbox.pool_fd = AtomicU32::new(NO_POOL);
    inbox.magic = MAGIC;
    inbox.version = LAYOUT_VERSION;
    inbox.owner_pid = std::process::id();
    inbox.secret = secret;
    let bell = doorbell.map_or(NO_DOORBELL, |f| f.fd() as u32);
    inbox.doorbell.0.fd.store(bell, Ordering::Release);
}

/// Maps `fd` shared over `[base, base + len)`, in place of what was there.
fn map_at(base: *mut u8, len: usize, fd: i32) -> bool {
    let p = unsafe {
        libc::mmap(
            base as *mut libc::c_void,
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_FIXED,
            fd,
            0,
        )
    };
    p == base as *mut libc::c_void
}

impl Segment {
    /// A fresh inbox of this process, with mode 0600, marked with `secret`; with a doorbell
    /// when the owning queue is in interrupt mode.
    pub fn create(secret: u64, with_doorbell: bool) -> Result<Segment, i32> {
        let owned = inbox_memfd()?;
        let len = segment_len();
        let base = map(raw(&owned), len)?;
        let doorbell = if with_doorbell {
            Some(EventFd::new(false)?)
        } else {
            None
        };
        let seg = Segment {
            base,
            len,
            fd: Some(owned),
            cons_seen: AtomicU64::new(0),
            doorbell,
            rung_at: Default::default(),
            peer_pool: Default::default(),
            publisher: Default::default(),
            taking_rx: AtomicU64::new(0),
            joined: 0,
        };
        write_inbox_header(base, secret, seg.doorbell.as_ref());
        populate_hot(seg.ring());
        Ok(seg)
    }

    /// Ours, once a binding ended: moves the inbox onto a fresh memfd, at the same address and
    /// under the same fd number, with a new secret (bind info handed out before no longer
    /// opens it). The old peer keeps its mapping of the old memfd: whatever it still writes
    /// there (an entry it was pushing, its ring index) reaches nobody, however late it runs,
    /// and it goes on seeing our closed mark and our executed-WR count. Clearing the inbox in
    /// place could not promise that: a peer descheduled in the middle of a push would finish it
    /// into the next binding's ring.
    pub fn renew(&self) -> Result<(), i32> {
        let fresh = inbox_memfd()?;
        // The header goes in through a mapping of our own first, so our view of the inbox is
        // never one without it.
        let staged = map(raw(&fresh), self.len)?;
        write_inbox_header(staged, crate::runtime::random_u64(), self.doorbell.as_ref());
        unsafe { libc::munmap(staged as *mut libc::c_void, self.len) };
        if !map_at(self.base, self.len, raw(&fresh)) {
            let err = os_err();
            // A failed MAP_FIXED may have unmapped the range: put the old memfd back.
            map_at(self.base, self.len, self.fd());
            return Err(err);
        }
        if unsafe { libc::dup3(raw(&fresh), self.fd(), libc::O_CLOEXEC) } < 0 {
            // The fd number still names the old memfd: so must our mapping.
            let err = os_err();
            map_at(self.base, self.len, self.fd());
            return Err(err);
        }
        self.publisher.forget();
        self.cons_seen.store(0, Ordering::Relaxed);
        populate_hot(self.ring());
        Ok(())
    }

    /// The fd number the peer opens through /proc.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Maps the inbox of queue-owner `pid` (fd `fd`), checking that it is what its bind info
    /// says: same user, right size, magic, version, owner and secret.
    pub fn open_peer(pid: u32, fd: u32, secret: u64) -> Result<Segment, String> {
        let (file, size) = crate::os::open_peer_memfd(pid, fd, libc::O_RDWR, "inbox")?;
        let len = segment_len();
        if size != len {
            return Err(format!("the peer's inbox has {size} bytes, expected {len}"));
        }
        let base = map(raw(&file), len).map_err(|_| "cannot map the peer's inbox".to_string())?;
        let mut seg = Segment {
            base,
            len,
            fd: None,
            cons_seen: AtomicU64::new(0),
            doorbell: None,
            rung_at: Default::default(),
            peer_pool: Default::default(),
            publisher: Default::default(),
            taking_rx: AtomicU64::new(0),
            joined: 0,
        };
        let i = seg.inbox();
        if i.magic != MAGIC
            || i.version != LAYOUT_VERSION
            || i.owner_pid != pid
            || i.secret != secret
        {
            return Err("the peer's inbox does not match its bind info".to_string());
        }
        let (joined, bell) = (
            i.presence.binding(),
            i.doorbell.0.fd.load(Ordering::Acquire),
        );
        seg.joined = joined;
        populate_hot(seg.ring());
        if bell != NO_DOORBELL {
            seg.doorbell = peer_doorbell(pid, bell);
            if seg.doorbell.is_some() {
                seg.inbox()
                    .doorbell
                    .0
                    .peer_rings
                    .store(1, Ordering::Release);
            }
        }
        Ok(seg)
    }

    /// Ours, before the watchdog's last look and sleep: the next change the peer makes rings.
    pub fn arm_doorbell(&self) {
        self.inbox().doorbell.0.armed.store(1, Ordering::Relaxed);
        // Pairs with the peer's fence in `ring_if_changed`: either our look sees its entry or
        // it sees the flag.
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Ours: the eventfd to sleep on (readable once rung), and whether the peer can ring it.
    pub fn doorbell(&self) -> Option<(i32, bool)> {
        let fd = self.doorbell.as_ref()?.fd();
        let heard = self.inbox().doorbell.0.peer_rings.load(Ordering::Acquire) != 0;
        Some((fd, heard))
    }

    pub fn inbox(&self) -> &Inbox {
        unsafe { &*(self.base as *const Inbox) }
    }

    fn ring(&self) -> *mut u8 {
        unsafe { self.base.add(ring_offset()) }
    }

    pub fn area(&self) -> &Area {
        &self.inbox().area.0
    }

    /// Ours: tells the peer where our shared pool is.
    pub fn publish_pool(&self, fd: i32, secret: u64) {
        let i = self.inbox();
        i.pool_secret.store(secret, Ordering::Relaxed);
        i.pool_fd.store(fd as u32, Ordering::Release);
    }

    /// The peer's: its shared pool, mapped here on first use.
    fn peer_pool(&self) -> Result<&PeerArena, LinkError> {
        const UNMAPPABLE: LinkError = LinkError::Corrupt("cannot map the peer's shared pool");
        if let Some(p) = self.peer_pool.get() {
            return p.as_ref().ok_or(UNMAPPABLE);
        }
        let i = self.inbox();
        let fd = i.pool_fd.load(Ordering::Acquire);
        if fd == NO_POOL || fd == 0 {
            return Err(LinkError::Corrupt(
                "peer sent by reference without a shared pool",
            ));
        }
        let secret = i.pool_secret.load(Ordering::Relaxed);
        // A failure is remembered: placement asks again for every message, and must not log
        // each time.
        let view = PeerArena::open(i.owner_pid, fd, secret)
            .inspect_err(|why| crate::log_err!("umq_shm", "{why}"))
            .ok();
        let _ = self.peer_pool.set(view);
        self.peer_pool.get().unwrap().as_ref().ok_or(UNMAPPABLE)
    }

    /// Ours: offers the peer receive buffer `b`, which lies in our shared pool `arena`, to write
    /// the message of its entry number `ordinal` into (see `placement`).
    pub fn publish_posted(&self, arena: &Arena, ordinal: u64, b: *mut umq_buf_t) {
        let (data, cap) = unsafe { ((*b).buf_data as *const u8, (*b).buf_size) };
        if let Some(offset) = arena.offset_of(data, cap as usize) {
            self.inbox()
                .board
                .publish(&self.publisher, ordinal, offset, cap);
        }
    }

    /// Ours, once marked closed and fenced, before our receive buffers go back to the
    /// application: waits until the peer (process `pid`) writes into none of them.
    pub fn wait_for_placements(&self, pid: u32) {
        let pidfd = std::cell::OnceCell::new();
        self.inbox()
            .board
            .wait_idle(|| match pidfd.get_or_init(|| crate::os::pidfd_open(pid)) {
                Some(fd) => crate::os::exited(fd),
                None => !crate::os::alive(pid),
            });
    }

    /// The peer's: an entry of ours went into its ring.
    fn note_pushed(&self, opcode: umq_opcode_t) {
        if loopback::needs_rx_buffer(opcode) {
            let n = self.taking_rx.load(Ordering::Relaxed);
            self.taking_rx.store(n + 1, Ordering::Relaxed);
        }
    }

    /// Makes the inbox ready for a new peer: its WR sequence numbers start again at 0.
    pub fn open_for_next_peer(&self) {
        self.inbox().done.0.store(0, Ordering::Release);
        self.inbox().presence.reopen();
    }

    /// Ours: we leave the binding (unbind, destroy); the peer stops.
    pub fn set_closed(&self) {
        self.inbox().presence.leave();
    }

    /// The peer's: whether it left the binding we joined.
    pub fn is_closed(&self) -> bool {
        self.inbox().presence.left(self.joined)
    }

    pub fn secret(&self) -> u64 {
        self.inbox().secret
    }

    /// Clears the ring, its indices and the area in place once a binding ended: the fallback
    /// when [`Segment::renew`] cannot make a fresh memfd. The ring's pages are given back, which
    /// also zeroes every stamp, so nothing of the old binding can look like a new entry. The
    /// closed mark and the executed-WR count stay until the next bind info is handed out
    /// ([`Segment::open_for_next_peer`]): the old peer may still be reading the count, and the
    /// WRs of its that we executed must complete, not be flushed. What this cannot undo is a
    /// push the old peer finishes later (see `renew`).
    pub fn reset_for_next_binding(&self) {
        let i = self.inbox();
        i.prod.0.store(0, Ordering::Release);
        i.cons.0.store(0, Ordering::Release);
        i.area.0.reset();
        i.doorbell.0.peer_rings.store(0, Ordering::Release);
        i.board.reset(&self.publisher);
        self.cons_seen.store(0, Ordering::Relaxed);
        let ring = self.ring();
        let punched = unsafe {
            libc::fallocate(
                self.fd(),
                libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
                ring_offset() as libc::off_t,
                RING_BYTES as libc::off_t,
            )
        } == 0;
        if !punched {
            unsafe { std::ptr::write_bytes(ring, 0, RING_BYTES) };
        }
        populate_hot(ring);
    }

    /// Room the producer may assume: against the cached consumer index first, the shared one
    /// only when that looks too small.
    fn free_bytes(&self, prod: u64, want: usize) -> usize {
        let cached = self.cons_seen.load(Ordering::Relaxed);
        let free = RING_BYTES - (prod - cached) as usize;
        if free >= want {
            return free;
        }
        let cons = self.inbox().cons.0.load(Ordering::Acquire);
        self.cons_seen.store(cons, Ordering::Relaxed);
        RING_BYTES.saturating_sub(prod.saturating_sub(cons) as usize)
    }

    /// Producer side: whether the consumer has taken every entry we pushed (reads its index).
    fn caught_up(&self) -> bool {
        let i = self.inbox();
        let cons = i.cons.0.load(Ordering::Acquire);
        self.cons_seen.store(cons, Ordering::Relaxed);
        cons == i.prod.0.load(Ordering::Relaxed)
    }

    /// Whether an entry with `len` payload bytes fits in the ring now.
    fn has_room(&self, len: usize) -> bool {
        let prod = self.inbox().prod.0.load(Ordering::Relaxed);
        // Worst case: padding to the end of the ring first.
        let want = 2 * entry_bytes(len);
        self.free_bytes(prod, want) >= want
    }

    /// Producer side: appends an entry with `len` payload bytes written by `fill`; false when
    /// the ring has no room now.
    fn push(&self, mut e: Entry, len: usize, fill: impl FnOnce(*mut u8)) -> bool {
        let i = self.inbox();
        let prod = i.prod.0.load(Ordering::Relaxed);
        let need = entry_bytes(len);
        let off = prod as usize % RING_BYTES;
        let pad = if RING_BYTES - off < need {
            RING_BYTES - off
        } else if off >= HOT_BYTES
            && need <= HOT_ENTRY_MAX
            && self.free_bytes(prod, RING_BYTES - off + need) >= RING_BYTES - off + need
        {
            RING_BYTES - off // back to the populated start: the consumer is done with it
        } else {
            0
        };
        if self.free_bytes(prod, pad + need) < pad + need {
            return false;
        }
        let ring = self.ring();
        if pad > 0 {
            let p = Entry {
                kind: KIND_PAD,
                len: (pad - LINE) as u32,
                ..Default::default()
            };
            let at = unsafe { ring.add(off) };
            write_header(at, &p);
            stamp_of(at).store(prod + 1, Ordering::Release);
        }
        let pos = prod + pad as u64;
        let at = unsafe { ring.add((off + pad) % RING_BYTES) };
        e.len = len as u32;
        write_header(at, &e);
        fill(unsafe { at.add(LINE) });
        stamp_of(at).store(pos + 1, Ordering::Release);
        i.prod.0.store(pos + need as u64, Ordering::Relaxed);
        true
    }

    /// Consumer side: whether the next entry has been published (not validated: `peek` does).
    #[inline]
    fn has_entry(&self) -> bool {
        let cons = self.inbox().cons.0.load(Ordering::Relaxed);
        let at = unsafe { self.ring().add(cons as usize % RING_BYTES) };
        stamp_of(at).load(Ordering::Acquire) == cons + 1
    }

    /// Consumer side: the oldest entry and its payload, validated; Err when the producer wrote
    /// something impossible.
    fn peek(&self) -> Result<Option<(Entry, *const u8)>, LinkError> {
        let cons = self.inbox().cons.0.load(Ordering::Relaxed);
        if !cons.is_multiple_of(LINE as u64) {
            return Err(LinkError::Corrupt("ring index out of range"));
        }
        let off = cons as usize % RING_BYTES;
        let at = unsafe { self.ring().add(off) };
        if stamp_of(at).load(Ordering::Acquire) != cons + 1 {
            return Ok(None);
        }
        let e = unsafe { (at as *const Entry).read() };
        let size = LINE as u64 + (e.len as u64).next_multiple_of(LINE as u64);
        if off as u64 + size > RING_BYTES as u64 {
            return Err(LinkError::Corrupt("ring entry length out of range"));
        }
        if e.kind > KIND_READ_RESP {
            return Err(LinkError::Corrupt("unknown ring entry kind"));
        }
        Ok(Some((e, unsafe { at.add(LINE) })))
    }

    fn pop(&self, e: &Entry) {
        let i = self.inbox();
        let cons = i.cons.0.load(Ordering::Relaxed);
        i.cons
            .0
            .store(cons + entry_bytes(e.len as usize) as u64, Ordering::Release);
    }

    fn finish_wr(&self, status: umq_buf_status_t) {
        let i = self.inbox();
        let done = i.done.0.load(Ordering::Relaxed);
        i.statuses[done as usize % STATUS_SLOTS].store(status as u8, Ordering::Relaxed);
        i.done.0.store(done + 1, Ordering::Release);
    }
}

/// A binding over shared memory: the peer's inbox, mapped here, and the peer's pid.
pub struct Link {
    pub seg: Segment,
    pub pid: u32,
}

/// Why the pair cannot go on.
use super::LinkError;

/// One round of progress for a queue bound over shared memory: takes what the peer sent into
/// our receive buffers, completes our WRs the peer has executed, and pushes our waiting WRs.
pub fn progress(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    umqh: u64,
    fragments: bool,
    pool: &Pool,
) -> Result<Outcome, LinkError> {
    let mut out = Outcome::default();
    // Whether the peer has left, read before anything else: what it did before it left (entries
    // in our ring, its executed count) is then visible to this round, which takes all of it
    // before the pair ends. Its WRs arrive and ours it executed complete, not flushed.
    let left = peer.is_closed();
    // Read the count before the drain: a READ counts as done only after its response is in our
    // ring, and the drain below takes every response pushed before the count moved. Only read it
    // while a WR waits for it: the peer writes that line for every WR it executes.
    let done = (w.awaiting_peer > 0).then(|| peer.inbox().done.0.load(Ordering::Acquire));
    receive(w, mine, peer, umqh, fragments, pool, &mut out)?;
    // With none of our WRs waiting or in flight (a poll that finds a message, usually) there
    // is nothing to complete or transmit.
    let ours = w.delivered < w.sq.len();
    if ours {
        complete(w, peer, done, &mut out)?;
    }
    if left {
        return Err(LinkError::PeerLeft);
    }
    if ours {
        transmit(w, peer, &mut out);
    }
    ring_if_changed(mine, peer);
    Ok(out)
}

/// The post's round: pushes our waiting WRs into the peer's ring and nothing else. What waits in
/// our ring, and the completions of WRs already in flight, are the next poll's to take; a WR
/// posted after them never needs them first. None when the peer has left: the full round then
/// takes what it sent before it went, and ends the pair.
#[inline]
pub fn transmit_round(w: &mut Wire, mine: &Segment, peer: &Segment) -> Option<Outcome> {
    if peer.is_closed() {
        return None;
    }
    let mut out = Outcome::default();
    transmit(w, peer, &mut out);
    ring_if_changed(mine, peer);
    Some(out)
}

/// Whether a round would find nothing to do: none of our WRs waits to go or for the peer, no
/// entry waits in our ring, and the peer is still there. A poll spinning on an empty queue then
/// skips the round, and sees the next entry sooner. Never with an interrupt-mode peer, whose
/// doorbell a round decides whether to ring.
#[inline]
pub fn idle(w: &Wire, mine: &Segment, peer: &Segment) -> bool {
    w.delivered == w.sq.len() && peer.doorbell.is_none() && !mine.has_entry() && !peer.is_closed()
}

/// Rings an interrupt-mode peer that sleeps when we changed what it waits for since we last
/// looked: an entry in its ring (a WR, a window update, a READ response), or our progress on
/// its entries (ring room, executed WRs). A round that changed nothing never rings, so two
/// sleeping watchdogs cannot wake each other forever.
pub fn ring_if_changed(mine: &Segment, peer: &Segment) {
    let Some(bell) = peer.doorbell.as_ref() else {
        return;
    };
    let now = [
        peer.inbox().prod.0.load(Ordering::Relaxed),
        mine.inbox().cons.0.load(Ordering::Relaxed),
    ];
    if now[0] == peer.rung_at[0].load(Ordering::Relaxed)
        && now[1] == peer.rung_at[1].load(Ordering::Relaxed)
    {
        return;
    }
    peer.rung_at[0].store(now[0], Ordering::Relaxed);
    peer.rung_at[1].store(now[1], Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::SeqCst);
    let armed = &peer.inbox().doorbell.0.armed;
    if armed.load(Ordering::Relaxed) != 0 && armed.swap(0, Ordering::AcqRel) != 0 {
        bell.signal();
    }
}

/// SEND, SEND_IMM and NOP complete once their entry is in the peer's ring (the payload is
/// copied, the buffer is free again: transmit-complete, as libfabric's shm provider), unless
/// they went by reference.
fn transmit_complete(wr: *mut umq_buf_t, by_ref: bool) -> bool {
    matches!(
        unsafe { (*wr).pro().opcode },
        UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP
    ) && !by_ref
}

/// Whether a WR may go by reference: a SEND, SEND_IMM, WRITE or WRITE_IMM of at least
/// `BY_REF_MIN` bytes whose buffers all lie in our shared pool.
fn may_go_by_ref(wr: *mut umq_buf_t, arena: &Arena) -> bool {
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
fn message_pieces(wr: *mut umq_buf_t) -> impl Iterator<Item = (*mut u8, usize)> {
    let mut left = unsafe { (*wr).total_data_size } as usize;
    loopback::pieces(wr)
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
fn complete(
    w: &mut Wire,
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
        let by_ref = w.by_ref_in_flight.front() == Some(&seq);
        let quick = transmit_complete(wr, by_ref);
        let status = match done {
            Some(d) if seq < d => {
                let raw =
                    peer.inbox().statuses[seq as usize % STATUS_SLOTS].load(Ordering::Relaxed);
                if raw as u32 <= UMQ_BUF_REM_DATA_POISON {
                    raw as u32
                } else {
                    UMQ_BUF_REM_OPERATION_ERR
                }
            }
            _ if quick => UMQ_BUF_SUCCESS,
            _ => break,
        };
        if !quick {
            w.awaiting_peer -= 1;
        }
        if by_ref {
            w.by_ref_in_flight.pop_front();
        }
        w.in_flight -= 1;
        finish_tx(w, wr, status, out);
    }
    Ok(())
}

/// Hands the oldest undelivered WR back to the application with `status`.
fn finish_tx(w: &mut Wire, wr: *mut umq_buf_t, status: umq_buf_status_t, out: &mut Outcome) {
    unsafe {
        (*wr).set_status(status);
        loopback::restore_piggyback_carrier(wr, w.flow.is_some());
    }
    w.delivered += 1;
    w.tx_done_seq += 1;
    out.tx_done += 1;
}

/// Pushes our waiting WRs into the peer's ring, in order, while credit and ring room last.
fn transmit(w: &mut Wire, peer: &Segment, out: &mut Outcome) {
    let mut credit = CreditGate::open(w);
    let alone = w.sq.len() - (w.delivered + w.in_flight) == 1;
    while w.delivered + w.in_flight < w.sq.len() {
        let wr = w.sq[w.delivered + w.in_flight];
        let opcode = unsafe { (*wr).pro().opcode };
        if !credit.pass(w, opcode) {
            out.credit_wait = true;
            break;
        }
        let by_ref = w
            .arena
            .as_deref()
            .filter(|&a| may_go_by_ref(wr, a) && by_ref_pays(w, peer));
        let Some(how) = push_wr(peer, wr, by_ref, alone) else {
            credit.keep(opcode);
            break;
        };
        if how == Sent::Placed {
            w.count_placed(wr);
        }
        let by_ref = how == Sent::ByRef;
        if by_ref {
            let seq = w.tx_done_seq + w.in_flight as u64;
            w.by_ref_in_flight.push_back(seq);
            w.by_ref_wr += 1;
            w.by_ref_bytes += unsafe { (*wr).total_data_size } as u64;
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

/// Whether `wr`, the only WR of a post, can go in one pass (`transmit_one`): a one-buffer SEND
/// or SEND_IMM whose payload goes in the ring, none of ours ahead of it (waiting or in flight),
/// and room for it in the peer's ring, which is still there.
pub(crate) fn can_transmit_one(w: &Wire, peer: &Segment, wr: *mut umq_buf_t) -> bool {
    let h = unsafe { &*wr };
    let op = h.pro().opcode;
    (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM)
        && h.data_size == h.total_data_size
        && (h.total_data_size as usize) < BY_REF_MIN
        && w.delivered == w.sq.len()
        && peer.has_room(h.total_data_size as usize)
        && !peer.is_closed()
}

/// `transmit` for the WR `can_transmit_one` passed, already at the tail of our send queue and
/// admitted by flow control: its entry goes into the peer's ring and it completes at once.
pub(crate) fn transmit_one(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    wr: *mut umq_buf_t,
) -> Outcome {
    let mut out = Outcome::default();
    let pushed = push_wr(peer, wr, None, true);
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
fn by_ref_pays(w: &Wire, peer: &Segment) -> bool {
    !w.by_ref_in_flight.is_empty() || w.in_flight == 0 && peer.caught_up()
}

/// How a WR's message went into the peer's ring.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sent {
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
fn push_wr(
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

/// The header of the entry that carries `wr`; `len`, the bytes its message carries.
fn wr_entry(wr: *mut umq_buf_t) -> (Entry, usize) {
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
fn place(peer: &Segment, wr: *mut umq_buf_t, min: usize) -> Option<()> {
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
    loopback::copy_pieces(loopback::pieces(wr), std::iter::once((dst, len)));
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
fn push_entry(peer: &Segment, wr: *mut umq_buf_t, by_ref: Option<&Arena>) -> bool {
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
        loopback::copy_pieces(loopback::pieces(wr), std::iter::once((dst, len)));
    })
}

/// Whether the peer's ring can take an entry of `len` payload bytes now.
pub fn has_room(peer: &Segment, len: usize) -> bool {
    peer.has_room(len)
}

/// Pushes a standalone window update; false when the ring is full (it is retried later: the
/// announcement is already in our area either way).
pub fn push_standalone(peer: &Segment, imm: u64) -> bool {
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

/// Executes the peer's entries against our receive buffers and memory, in order, until the ring
/// is empty or an entry must wait (no receive buffer, or no room for a READ response).
fn receive(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    umqh: u64,
    fragments: bool,
    pool: &Pool,
    out: &mut Outcome,
) -> Result<(), LinkError> {
    while let Some((e, payload)) = mine.peek()? {
        match e.kind {
            KIND_PAD => {}
            KIND_STANDALONE => {
                if w.flow.is_none() {
                    return Err(LinkError::Corrupt(
                        "window update from a peer without flow control",
                    ));
                }
                if w.rx_posted.is_empty() {
                    note_blocked(w, out);
                    return Ok(());
                }
                let mut dst = Side {
                    umqh,
                    wire: w,
                    fragments,
                };
                loopback::deliver_standalone(&mut dst, e.imm);
                w.rx_entries_run += 1;
                out.rx_done += 1;
            }
            KIND_READ_RESP => read_response(w, &e, payload)?,
            _ => {
                let landed = match e.flags {
                    0 => land_inline(w, &e, payload, umqh, fragments, out),
                    FLAG_PLACED => land_placed(w, &e, umqh, out),
                    _ => None,
                };
                let status = match landed {
                    Some(status) => Some(status),
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
                    if loopback::needs_rx_buffer(e.opcode as u32) {
                        note_blocked(w, out);
                    }
                    return Ok(());
                };
                if loopback::needs_rx_buffer(e.opcode as u32) {
                    w.rx_entries_run += 1;
                }
                // Room first, then the count: a sender that sees its WR done also sees the
                // ring caught up (which decides whether its next large WR goes by reference).
                mine.pop(&e);
                mine.finish_wr(status);
                w.rx_blocked = false;
                continue;
            }
        }
        mine.pop(&e);
        w.rx_blocked = false;
    }
    Ok(())
}

/// The common case in one pass: a SEND or SEND_IMM whose payload is in the ring lands whole in
/// the next posted receive buffer (`loopback::land_in`); None when it needs `execute`.
fn land_inline(
    w: &mut Wire,
    e: &Entry,
    payload: *const u8,
    umqh: u64,
    fragments: bool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let op = e.opcode as u32;
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM) || fragments {
        return None;
    }
    let rx = w.rx_posted.front()?;
    if e.len > unsafe { (*rx).buf_size } {
        return None;
    }
    let mut dst = Side {
        umqh,
        wire: w,
        fragments: false,
    };
    // SAFETY: `peek` checked that the payload's `e.len` bytes lie inside the ring.
    unsafe { loopback::land_in(&mut dst, rx, payload, e.len, op, e.imm) };
    if let Some(f) = w.flow.as_mut() {
        f.data_arrived(1);
    }
    out.rx_done += 1;
    Some(UMQ_BUF_SUCCESS)
}

/// A message the sender placed in our next posted receive buffer: completed without a copy.
/// None when it needs `execute` (its bytes went to a later buffer: see `placement`; or the
/// entry is malformed, which `execute_general` reports).
fn land_placed(w: &mut Wire, e: &Entry, umqh: u64, out: &mut Outcome) -> Option<umq_buf_status_t> {
    let op = e.opcode as u32;
    let len = u32::try_from(e.total).ok()?;
    let rx = w.rx_posted.front()?;
    let data = unsafe { (*rx).buf_data as *const u8 };
    let here = w.arena.as_deref()?.offset_of(data, len as usize);
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM)
        || e.len != 0
        || here != Some(e.addr)
        || len > unsafe { (*rx).buf_size }
    {
        return None;
    }
    let mut dst = Side {
        umqh,
        wire: w,
        fragments: false,
    };
    unsafe { loopback::land_placed(&mut dst, rx, len, op, e.imm) };
    if let Some(f) = w.flow.as_mut() {
        f.data_arrived(1);
    }
    w.placed_rx += 1;
    out.rx_done += 1;
    Some(UMQ_BUF_SUCCESS)
}

/// Where the sender placed a message that did not land in our next buffer: in a later posted
/// buffer of our shared pool (an entry before it took no buffer). Err for anything else.
fn placed_elsewhere(w: &Wire, e: &Entry) -> Result<*mut u8, LinkError> {
    let op = e.opcode as u32;
    if (op != UMQ_OPC_SEND && op != UMQ_OPC_SEND_IMM) || e.len != 0 {
        return Err(LinkError::Corrupt("malformed placed entry"));
    }
    let arena = w
        .arena
        .as_deref()
        .ok_or(LinkError::Corrupt("placed message without a shared pool"))?;
    w.rx_posted
        .iter()
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
fn execute_general(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    payload: *const u8,
    at: &Here,
    pool: &Pool,
    out: &mut Outcome,
) -> Result<Option<umq_buf_status_t>, LinkError> {
    let mut pieces = [(std::ptr::null_mut(), 0); crate::limits::MAX_SGE];
    let src = match e.flags {
        FLAG_PLACED => {
            pieces[0] = (placed_elsewhere(w, e)?, e.total as usize);
            &pieces[..1]
        }
        _ => source(e, payload, peer, &mut pieces)?,
    };
    execute(w, peer, e, src, at, pool, out)
}

/// Where a WR's payload is: right behind its entry, or (by reference) in the sender's shared
/// pool, each piece bounds-checked and translated into our mapping of it. The pieces are read
/// once into `out`, so the sender cannot change them between the check and the copy.
fn source<'a>(
    e: &Entry,
    payload: *const u8,
    peer: &Segment,
    out: &'a mut [(*mut u8, usize); crate::limits::MAX_SGE],
) -> Result<&'a [(*mut u8, usize)], LinkError> {
    if e.flags & FLAG_BY_REF == 0 {
        if e.flags != 0 {
            return Err(LinkError::Corrupt("unknown ring entry flags"));
        }
        out[0] = (payload as *mut u8, e.len as usize);
        return Ok(&out[..1]);
    }
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
    if sum != e.total || sum > u32::MAX as u64 {
        return Err(LinkError::Corrupt(
            "by-reference pieces do not add up to the message",
        ));
    }
    Ok(&out[..n])
}

/// Counts a message that found no receive buffer once, not once per poll while it waits.
fn note_blocked(w: &mut Wire, out: &mut Outcome) {
    if !w.rx_blocked {
        w.rx_blocked = true;
        out.blocked = true;
    }
}

fn remote_ok(pool: &Pool, e: &Entry, n: u64) -> bool {
    n <= u32::MAX as u64 && pool.check_remote(e.addr, n as u32, e.token_id, e.token_value)
}

/// The receiving queue, and the sequence number of the WR being executed (how many of the
/// peer's WRs ran before it).
struct Here {
    umqh: u64,
    fragments: bool,
    seq: u64,
}

/// Runs one of the peer's WRs here, its payload in `src`; None when it must wait; Err when the
/// pair broke under it.
fn execute(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    src: &[(*mut u8, usize)],
    at: &Here,
    pool: &Pool,
    out: &mut Outcome,
) -> Result<Option<umq_buf_status_t>, LinkError> {
    let (umqh, fragments) = (at.umqh, at.fragments);
    let len: u64 = src.iter().map(|&(_, n)| n as u64).sum();
    let src = || src.iter().copied();
    Ok(match e.opcode as u32 {
        UMQ_OPC_NOP => Some(UMQ_BUF_SUCCESS),
        UMQ_OPC_WRITE => {
            if !remote_ok(pool, e, len) {
                return Ok(Some(UMQ_BUF_REM_ACCESS_ABORT_ERR));
            }
            loopback::copy_pieces(src(), std::iter::once((e.addr as *mut u8, len as usize)));
            Some(UMQ_BUF_SUCCESS)
        }
        UMQ_OPC_READ => {
            let want = e.rlen as usize;
            if !remote_ok(pool, e, want as u64) {
                return Ok(Some(UMQ_BUF_REM_ACCESS_ABORT_ERR));
            }
            let resp = Entry {
                kind: KIND_READ_RESP,
                seq: at.seq,
                ..Default::default()
            };
            let from = e.addr as *const u8;
            let pushed = peer.push(resp, want, |dst| unsafe {
                std::ptr::copy_nonoverlapping(from, dst, want)
            });
            pushed.then_some(UMQ_BUF_SUCCESS)
        }
        op @ (UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE_IMM) => {
            let mut dst = Side {
                umqh,
                wire: w,
                fragments,
            };
            let Some(n) = loopback::rx_buffers_needed(&dst, len, op) else {
                return Ok(None);
            };
            if op == UMQ_OPC_WRITE_IMM && !remote_ok(pool, e, len) {
                return Ok(Some(UMQ_BUF_REM_ACCESS_ABORT_ERR));
            }
            let head = loopback::take_rx(&mut dst, n);
            let room: u64 = loopback::room(head).map(|(_, c)| c as u64).sum();
            let fits = op == UMQ_OPC_WRITE_IMM || len <= room;
            if op == UMQ_OPC_WRITE_IMM {
                loopback::copy_pieces(src(), std::iter::once((e.addr as *mut u8, len as usize)));
            } else if fits {
                loopback::copy_pieces(src(), loopback::room(head));
            }
            if e.flags & FLAG_BY_REF != 0 && sender_left(peer) {
                loopback::untake_rx(&mut dst, head);
                return Err(LinkError::PeerLeft);
            }
            let (rx, tx) = if fits {
                (UMQ_BUF_SUCCESS, UMQ_BUF_SUCCESS)
            } else {
                (UMQ_BUF_LOC_LEN_ERR, UMQ_BUF_REM_OPERATION_ERR)
            };
            unsafe { loopback::complete_rx(&mut dst, head, n, len, op, e.imm, rx) };
            if let Some(f) = dst.wire.flow.as_mut() {
                f.data_arrived(1);
            }
            out.rx_done += 1;
            Some(tx)
        }
        _ => Some(UMQ_BUF_UNSUPPORTED_OPCODE_ERR),
    })
}

/// After copying a message by reference: whether the sender had left by then. A sender that
/// unbinds flushes its WRs and its application may reuse their buffers at once, so what we
/// copied may be torn. It marks itself closed before flushing; with this fence between our copy
/// and our look, a copy that read a reused buffer always sees the mark.
fn sender_left(peer: &Segment) -> bool {
    std::sync::atomic::fence(Ordering::SeqCst);
    peer.is_closed()
}

/// Copies a READ response into the READ WR it answers (still in flight in our send queue).
fn read_response(w: &mut Wire, e: &Entry, payload: *const u8) -> Result<(), LinkError> {
    let idx = e
        .seq
        .checked_sub(w.tx_done_seq)
        .map(|k| w.delivered + k as usize)
        .filter(|&i| i < w.delivered + w.in_flight)
        .ok_or(LinkError::Corrupt("READ response for no READ in flight"))?;
    let wr = w.sq[idx];
    if unsafe { (*wr).pro().opcode } != UMQ_OPC_READ {
        return Err(LinkError::Corrupt(
            "READ response for a WR that is not a READ",
        ));
    }
    loopback::land_read(wr, payload, e.len as usize);
    Ok(())
}

#[cfg(test)]
#[path = "../../tests/support/rng.rs"]
mod test_rng;

#[cfg(test)]
mod tests {
    use super::test_rng::Rng;
    use super::*;

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
        let laps = 3 * HOT_BYTES / LINE;
        let mut furthest = 0;
        for n in 0..laps as u64 {
            furthest = furthest.max(push_numbered(&view, n));
            assert_eq!(
                pop_numbered(&owner),
                Some(n),
                "in order, across early wraps"
            );
        }
        assert!(
            furthest < HOT_BYTES + HOT_ENTRY_MAX,
            "reached offset {furthest}"
        );
        assert!(
            view.inbox().prod.0.load(Ordering::Relaxed) as usize > RING_BYTES,
            "wrapped"
        );
    }

    #[test]
    fn a_lagging_consumer_sends_the_producer_on_through_the_cold_ring() {
        let owner = Segment::create(12, false).unwrap();
        let view = Segment::open_peer(std::process::id(), owner.fd() as u32, 12).unwrap();
        let beyond = (HOT_BYTES + HOT_ENTRY_MAX) / LINE + 10;
        let last = (0..beyond as u64)
            .map(|n| push_numbered(&view, n))
            .last()
            .unwrap();
        assert!(
            last >= HOT_BYTES + HOT_ENTRY_MAX,
            "nothing was consumed: no early wrap"
        );
        for n in 0..beyond as u64 {
            assert_eq!(pop_numbered(&owner), Some(n));
        }
        assert_eq!(pop_numbered(&owner), None);
    }

    /// A sender's inbox as its receiver maps it, with the sender's shared pool published.
    fn sender_with_pool() -> (Segment, Segment, Arena) {
        let inbox = Segment::create(21, false).unwrap();
        let arena = Arena::create(22).unwrap();
        inbox.publish_pool(arena.fd(), arena.secret());
        let view = Segment::open_peer(std::process::id(), inbox.fd() as u32, 21).unwrap();
        (inbox, view, arena)
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

    /// Writes `e` (its `len` whatever the peer claims) at ring position `pos` with up to
    /// `payload` after it, then its stamp: what a hostile peer can do. Returns the position a
    /// consumer would go on at, or None when the entry reaches past the ring's end.
    fn write_raw(view: &Segment, pos: u64, e: &Entry, payload: &[u8]) -> Option<u64> {
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

    /// What a peer might write next: a well-formed entry of one of the shapes the sender makes
    /// (a SEND inline, by reference or placed, a WRITE, a READ, a pad, ...), then with some
    /// luck a field or two changed to anything, mostly at the edges of what it may hold.
    fn hostile_entry(
        rng: &mut Rng,
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
        match rng.next() % 8 {
            0 | 1 => {} // inline
            2 | 3 => {
                e.flags = FLAG_BY_REF;
                payload.clear();
                let mut total = 0;
                for _ in 0..1 + rng.next() % 3 {
                    let (offset, len) = (offsets[0] + rng.next() % 4096, rng.next() % 600);
                    payload.extend_from_slice(&offset.to_ne_bytes());
                    payload.extend_from_slice(&len.to_ne_bytes());
                    total += len;
                }
                e.total = total;
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
            _ => {
                e.kind = rng.pick(&[KIND_PAD, KIND_STANDALONE, KIND_READ_RESP]);
                e.seq = rng.next() % 2;
            }
        }
        e.len = payload.len() as u32;
        for _ in 0..rng.next() % 3 {
            match rng.next() % 10 {
                0 => e.kind = rng.edgy(&[0, 1, 2, 3]) as u8,
                1 => e.opcode = rng.edgy(&[0, 1, 0x10, 0x40, 0x41, 0x51]) as u8,
                2 => e.flags = rng.edgy(&[0, 1, 2]) as u16,
                3 => e.len = rng.edgy(&[0, 16, 48, e.len as u64, cap]) as u32,
                4 => e.addr = rng.edgy(offsets),
                5 => e.total = rng.edgy(&[0, e.total, cap, cap + 1]),
                6 => e.rlen = rng.edgy(&[0, cap, cap + 1]) as u32,
                7 => e.token_id = rng.next() as u32,
                8 => e.seq = rng.edgy(&[0, 1]),
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

    /// A hostile or corrupt peer writes whatever it likes into our ring: entries of every shape
    /// the sender makes, a field or two often changed to anything (`hostile_entry`). Each round
    /// either runs them or ends the pair with a reason. It never panics, never loses a receive
    /// buffer, never completes one with more bytes than it holds, and never writes outside our
    /// buffers: the pool slots around them keep their canary bytes.
    #[test]
    fn random_entries_from_a_hostile_peer_run_or_break_the_pair_but_never_escape() {
        const CANARY: u8 = 0xc5;
        let me = std::process::id();
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(41).unwrap();
        let mine = Segment::create(42, false).unwrap();
        let hostile = Segment::open_peer(me, mine.fd() as u32, 42).unwrap();
        let (theirs, peer, their_pool) = sender_with_pool();
        let their_chunk = their_pool.extend(1 << 16).unwrap();
        let their_off = their_pool.offset_of(their_chunk, 1 << 16).unwrap();
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut outcomes = std::collections::BTreeMap::new();
        let (mut completed, mut placed, mut pos) = (0, 0, 0u64);
        for case in 0..3000 {
            let mut w = Wire::new(16, 16);
            w.arena = shared.arena().cloned();
            let from_shared = !rng.next().is_multiple_of(4);
            let alloc = |n: u32| {
                let head = if from_shared {
                    pool.alloc_in(&shared, 1000, n, 0, 0).unwrap()
                } else {
                    pool.alloc(1000, n, 0, 0).unwrap()
                };
                crate::buf::iter(head).collect::<Vec<_>>()
            };
            let (rx, canaries) = (alloc(4), alloc(2));
            for &b in &canaries {
                let (data, cap) = unsafe { ((*b).buf_data, (*b).buf_size as usize) };
                unsafe { std::ptr::write_bytes(data, CANARY, cap) };
            }
            let mut offsets = vec![their_off];
            for &b in &rx {
                let data = unsafe { (*b).buf_data as *const u8 };
                offsets.extend(w.arena.as_deref().and_then(|a| a.offset_of(data, 1)));
                w.rx_posted.push_back(b);
            }
            // Each case starts at a fresh line of the ring, as if the ones before were consumed.
            mine.inbox().cons.0.store(pos, Ordering::Relaxed);
            let mut at = pos;
            for _ in 0..1 + rng.next() % 3 {
                let (e, payload) = hostile_entry(&mut rng, &pool, &rx, &offsets);
                match write_raw(&hostile, at, &e, &payload) {
                    Some(next) => at = next,
                    None => break,
                }
            }
            pos = if at % RING_BYTES as u64 > RING_BYTES as u64 / 2 {
                at.next_multiple_of(RING_BYTES as u64) // back to the start, on the next lap
            } else {
                at + LINE as u64
            };
            let mut out = Outcome::default();
            let fragments = rng.next().is_multiple_of(4);
            let r = receive(&mut w, &mine, &peer, 0, fragments, &pool, &mut out);
            *outcomes
                .entry(r.err().map_or("ran".to_string(), |e| e.to_string()))
                .or_insert(0) += 1;
            completed += out.rx_done;
            placed += w.placed_rx;
            assert_eq!(
                w.rx_outstanding(),
                rx.len(),
                "case {case}: a receive buffer was lost"
            );
            for (b, _) in w.rx_cq.iter() {
                let (len, cap) = unsafe { ((*b).total_data_size, (*b).buf_size) };
                assert!(
                    len <= cap,
                    "case {case}: {len} bytes completed in a {cap}-byte buffer"
                );
            }
            for &b in &canaries {
                let (data, cap) = unsafe { ((*b).buf_data as *const u8, (*b).buf_size as usize) };
                let intact = unsafe { std::slice::from_raw_parts(data, cap) };
                assert!(
                    intact.iter().all(|&x| x == CANARY),
                    "case {case}: a stray write"
                );
            }
            for b in rx.into_iter().chain(canaries) {
                pool.free_one(b).unwrap();
            }
            if case % 500 == 499 {
                theirs.reset_for_next_binding(); // our READ responses fill their ring
            }
        }
        // The cases reach past the first checks: many run, some land in place.
        eprintln!("{outcomes:?}, {completed} completed, {placed} placed");
        assert!(
            outcomes["ran"] > 500 && completed > 500 && placed > 50,
            "{outcomes:?}"
        );
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
