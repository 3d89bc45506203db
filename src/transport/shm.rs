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

use super::loopback::{self, Outcome, Side, Wire};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
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
const STATUS_SLOTS: usize = crate::queue::config::MAX_DEPTH as usize;
const MAGIC: u64 = u64::from_le_bytes(*b"UMQSHM01");
const LAYOUT_VERSION: u32 = 3;
/// Entries start on cache lines; a header is one line.
const LINE: usize = 64;

const KIND_PAD: u8 = 0;
const KIND_WR: u8 = 1;
const KIND_STANDALONE: u8 = 2;
const KIND_READ_RESP: u8 = 3;

#[repr(C, align(64))]
struct Line<T>(T);

/// The start of an inbox mapping. The ring follows at `ring_offset()`.
#[repr(C)]
pub struct Inbox {
    magic: u64,
    version: u32,
    owner_pid: u32,
    secret: u64,
    /// Set by the owner when it unbinds or is destroyed: the peer stops and fails its sends.
    closed: AtomicU32,
    area: Line<Area>,
    /// Bytes the producer (the peer) has written (its own record: the consumer follows stamps),
    /// and the consumer (the owner) has released.
    prod: Line<AtomicU64>,
    cons: Line<AtomicU64>,
    /// WR entries the owner has executed; statuses[seq % STATUS_SLOTS] says how each went.
    done: Line<AtomicU64>,
    doorbell: Line<Doorbell>,
    statuses: [AtomicU8; STATUS_SLOTS],
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
    _r0: u16,
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
    _r2: u64,
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
    use std::os::fd::FromRawFd;
    let pidfd = super::watchdog::pidfd_open(pid)?;
    let dup = unsafe { libc::syscall(libc::SYS_pidfd_getfd, raw(&pidfd), fd as i32, 0) };
    if dup < 0 {
        crate::log_info!(
            "umq_bind",
            "cannot take the peer's doorbell ({}): its interrupt-mode queue polls every 1 ms",
            std::io::Error::last_os_error()
        );
        return None;
    }
    let dup = unsafe { std::os::fd::OwnedFd::from_raw_fd(dup as i32) };
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

impl Segment {
    /// A fresh inbox of this process, with mode 0600, marked with `secret`; with a doorbell
    /// when the owning queue is in interrupt mode.
    pub fn create(secret: u64, with_doorbell: bool) -> Result<Segment, i32> {
        use std::os::fd::FromRawFd;
        let fd = unsafe { libc::memfd_create(c"umq-inbox".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Err(os_err());
        }
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        let len = segment_len();
        if unsafe { libc::fchmod(fd, 0o600) } != 0
            || unsafe { libc::ftruncate(fd, len as libc::off_t) } != 0
        {
            return Err(os_err());
        }
        let base = map(fd, len)?;
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
        };
        let inbox = unsafe { &mut *(base as *mut Inbox) };
        inbox.magic = MAGIC;
        inbox.version = LAYOUT_VERSION;
        inbox.owner_pid = std::process::id();
        inbox.secret = secret;
        let bell = seg.doorbell.as_ref().map_or(NO_DOORBELL, |f| f.fd() as u32);
        inbox.doorbell.0.fd.store(bell, Ordering::Release);
        populate_hot(seg.ring());
        Ok(seg)
    }

    /// The fd number the peer opens through /proc.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.fd.as_ref().map_or(-1, |f| f.as_raw_fd())
    }

    /// Maps the inbox of queue-owner `pid` (fd `fd`), checking that it is what its bind info
    /// says: same user, right size, magic, version, owner and secret.
    pub fn open_peer(pid: u32, fd: u32, secret: u64) -> Result<Segment, String> {
        let path = format!("/proc/{pid}/fd/{fd}\0");
        let raw = unsafe {
            libc::open(
                path.as_ptr() as *const libc::c_char,
                libc::O_RDWR | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(format!(
                "cannot open the peer's inbox {}: {}",
                path.trim_end_matches('\0'),
                std::io::Error::last_os_error()
            ));
        }
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let stat_ok = unsafe { libc::fstat(raw, &mut st) } == 0;
        let len = segment_len();
        let result = if !stat_ok {
            Err("cannot stat the peer's inbox".to_string())
        } else if st.st_uid != unsafe { libc::getuid() } {
            Err(format!(
                "the peer's inbox belongs to uid {}, not to us",
                st.st_uid
            ))
        } else if st.st_size as usize != len {
            Err(format!(
                "the peer's inbox has {} bytes, expected {len}",
                st.st_size
            ))
        } else {
            map(raw, len).map_err(|_| "cannot map the peer's inbox".to_string())
        };
        unsafe { libc::close(raw) };
        let mut seg = Segment {
            base: result?,
            len,
            fd: None,
            cons_seen: AtomicU64::new(0),
            doorbell: None,
            rung_at: Default::default(),
        };
        let i = seg.inbox();
        if i.magic != MAGIC
            || i.version != LAYOUT_VERSION
            || i.owner_pid != pid
            || i.secret != secret
        {
            return Err("the peer's inbox does not match its bind info".to_string());
        }
        populate_hot(seg.ring());
        let bell = i.doorbell.0.fd.load(Ordering::Acquire);
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

    pub fn set_closed(&self, closed: bool) {
        self.inbox().closed.store(closed as u32, Ordering::Release);
    }

    pub fn is_closed(&self) -> bool {
        self.inbox().closed.load(Ordering::Acquire) != 0
    }

    pub fn secret(&self) -> u64 {
        self.inbox().secret
    }

    /// Clears the ring, the counters and the area once a binding ended (the closed mark stays
    /// until the next bind info is handed out). The ring's pages are given back, which also
    /// zeroes every stamp, so nothing of the old binding can look like a new entry.
    pub fn reset_for_next_binding(&self) {
        let i = self.inbox();
        i.prod.0.store(0, Ordering::Release);
        i.cons.0.store(0, Ordering::Release);
        i.done.0.store(0, Ordering::Release);
        i.area.0.reset();
        i.doorbell.0.peer_rings.store(0, Ordering::Release);
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

    /// Consumer side: the oldest entry and its payload, validated; Err when the producer wrote
    /// something impossible.
    fn peek(&self) -> Result<Option<(Entry, *const u8)>, &'static str> {
        let cons = self.inbox().cons.0.load(Ordering::Relaxed);
        if cons % LINE as u64 != 0 {
            return Err("ring index out of range");
        }
        let off = cons as usize % RING_BYTES;
        let at = unsafe { self.ring().add(off) };
        if stamp_of(at).load(Ordering::Acquire) != cons + 1 {
            return Ok(None);
        }
        let e = unsafe { (at as *const Entry).read() };
        let size = LINE as u64 + (e.len as u64).next_multiple_of(LINE as u64);
        if off as u64 + size > RING_BYTES as u64 {
            return Err("ring entry length out of range");
        }
        if e.kind > KIND_READ_RESP {
            return Err("unknown ring entry kind");
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
pub type Broken = &'static str;

/// One round of progress for a queue bound over shared memory: takes what the peer sent into
/// our receive buffers, completes our WRs the peer has executed, and pushes our waiting WRs.
pub fn progress(
    w: &mut Wire,
    mine: &Segment,
    peer: &Segment,
    umqh: u64,
    fragments: bool,
    pool: &Pool,
) -> Result<Outcome, Broken> {
    let mut out = Outcome::default();
    // Read the count first: a READ counts as done only after its response is in our ring, and
    // the drain below takes every response pushed before the count moved. Only read it while
    // a WR waits for it: the peer writes that line for every WR it executes.
    let done = (w.awaiting_peer > 0).then(|| peer.inbox().done.0.load(Ordering::Acquire));
    receive(w, mine, peer, umqh, fragments, pool, &mut out)?;
    complete(w, peer, done, &mut out)?;
    transmit(w, peer, &mut out);
    ring_if_changed(mine, peer);
    if peer.is_closed() {
        return Err("peer queue unbound");
    }
    Ok(out)
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
/// copied, the buffer is free again: transmit-complete, as libfabric's shm provider).
fn transmit_complete(wr: *mut umq_buf_t) -> bool {
    matches!(
        unsafe { (*wr).pro().opcode },
        UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP
    )
}

/// Completes our WRs in order: transmit-complete ones at once, every other WR once the peer
/// executed it (up to the peer's `done` count, read when such a WR was in flight), with the
/// status the peer recorded.
fn complete(
    w: &mut Wire,
    peer: &Segment,
    done: Option<u64>,
    out: &mut Outcome,
) -> Result<(), Broken> {
    if done.is_some_and(|d| d > w.tx_done_seq + w.in_flight as u64) {
        return Err("peer reports completions we never sent");
    }
    while w.in_flight > 0 {
        let seq = w.tx_done_seq;
        let wr = w.sq[w.delivered];
        let quick = transmit_complete(wr);
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
        unsafe {
            (*wr).set_status(status);
            loopback::restore_piggyback_carrier(wr);
        }
        if !quick {
            w.awaiting_peer -= 1;
        }
        w.delivered += 1;
        w.in_flight -= 1;
        w.tx_done_seq += 1;
        out.tx_done += 1;
    }
    Ok(())
}

/// Pushes our waiting WRs into the peer's ring, in order, while credit and ring room last.
fn transmit(w: &mut Wire, peer: &Segment, out: &mut Outcome) {
    while w.delivered + w.in_flight < w.sq.len() {
        let wr = w.sq[w.delivered + w.in_flight];
        let opcode = unsafe { (*wr).pro().opcode };
        if !loopback::credit_for(w, opcode) {
            out.credit_wait = true;
            return;
        }
        if !push_wr(peer, wr) {
            if w.flow.is_some() && loopback::needs_rx_buffer(opcode) {
                w.credited += 1; // keep the credit for the retry
            }
            return;
        }
        w.in_flight += 1;
        if !transmit_complete(wr) {
            w.awaiting_peer += 1;
        }
        match opcode {
            UMQ_OPC_READ => out.reads += 1,
            UMQ_OPC_NOP => {}
            _ => out.sends += 1,
        }
    }
}

fn push_wr(peer: &Segment, wr: *mut umq_buf_t) -> bool {
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
    peer.push(e, 0, |_| {})
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
) -> Result<(), Broken> {
    while let Some((e, payload)) = mine.peek()? {
        match e.kind {
            KIND_PAD => {}
            KIND_STANDALONE => {
                if w.flow.is_none() {
                    return Err("window update from a peer without flow control");
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
                out.rx_done += 1;
            }
            KIND_READ_RESP => read_response(w, &e, payload)?,
            _ => {
                let seq = mine.inbox().done.0.load(Ordering::Relaxed);
                let at = Here {
                    umqh,
                    fragments,
                    seq,
                };
                let Some(status) = execute(w, peer, &e, payload, &at, pool, out) else {
                    if loopback::needs_rx_buffer(e.opcode as u32) {
                        note_blocked(w, out);
                    }
                    return Ok(());
                };
                mine.finish_wr(status);
            }
        }
        mine.pop(&e);
        w.rx_blocked = false;
    }
    Ok(())
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

/// Runs one of the peer's WRs here; None when it must wait.
fn execute(
    w: &mut Wire,
    peer: &Segment,
    e: &Entry,
    payload: *const u8,
    at: &Here,
    pool: &Pool,
    out: &mut Outcome,
) -> Option<umq_buf_status_t> {
    let (umqh, fragments) = (at.umqh, at.fragments);
    let len = e.len as u64;
    let src = || std::iter::once((payload as *mut u8, len as usize));
    match e.opcode as u32 {
        UMQ_OPC_NOP => Some(UMQ_BUF_SUCCESS),
        UMQ_OPC_WRITE => {
            if !remote_ok(pool, e, len) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            loopback::copy_pieces(src(), std::iter::once((e.addr as *mut u8, len as usize)));
            Some(UMQ_BUF_SUCCESS)
        }
        UMQ_OPC_READ => {
            let want = e.rlen as usize;
            if !remote_ok(pool, e, want as u64) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
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
            let n = loopback::rx_buffers_needed(&dst, len, op)?;
            if op == UMQ_OPC_WRITE_IMM && !remote_ok(pool, e, len) {
                return Some(UMQ_BUF_REM_ACCESS_ABORT_ERR);
            }
            let head = loopback::take_rx(&mut dst, n);
            let room: u64 = loopback::room(head).map(|(_, c)| c as u64).sum();
            let fits = op == UMQ_OPC_WRITE_IMM || len <= room;
            if op == UMQ_OPC_WRITE_IMM {
                loopback::copy_pieces(src(), std::iter::once((e.addr as *mut u8, len as usize)));
            } else if fits {
                loopback::copy_pieces(src(), loopback::room(head));
            }
            let (rx, tx) = if fits {
                (UMQ_BUF_SUCCESS, UMQ_BUF_SUCCESS)
            } else {
                (UMQ_BUF_LOC_LEN_ERR, UMQ_BUF_REM_OPERATION_ERR)
            };
            unsafe { loopback::complete_rx(&mut dst, head, n, len, op, e.imm, rx) };
            out.rx_done += 1;
            Some(tx)
        }
        _ => Some(UMQ_BUF_UNSUPPORTED_OPCODE_ERR),
    }
}

/// Copies a READ response into the READ WR it answers (still in flight in our send queue).
fn read_response(w: &mut Wire, e: &Entry, payload: *const u8) -> Result<(), Broken> {
    let idx = e
        .seq
        .checked_sub(w.tx_done_seq)
        .map(|k| w.delivered + k as usize)
        .filter(|&i| i < w.delivered + w.in_flight)
        .ok_or("READ response for no READ in flight")?;
    let wr = w.sq[idx];
    if unsafe { (*wr).pro().opcode } != UMQ_OPC_READ {
        return Err("READ response for a WR that is not a READ");
    }
    let mut left = e.len as u64;
    for b in crate::buf::iter(wr) {
        let b = unsafe { &mut *b };
        b.data_size = left.min(b.buf_size as u64) as u32;
        left -= b.data_size as u64;
    }
    unsafe { (*wr).total_data_size = e.len - left as u32 };
    loopback::copy_pieces(
        std::iter::once((payload as *mut u8, e.len as usize)),
        loopback::room(wr),
    );
    Ok(())
}

#[cfg(test)]
mod tests {
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
