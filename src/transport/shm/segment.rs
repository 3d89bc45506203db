//! The inbox of a queue: its memfd segment (header, doorbell, ring), mapped by its owner and
//! by its peer, and the ring entries' producer and consumer sides.

use super::*;

pub(super) fn ring_offset() -> usize {
    std::mem::size_of::<Inbox>().next_multiple_of(4096)
}

pub fn segment_len() -> usize {
    ring_offset() + RING_BYTES
}

impl Drop for Segment {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}

/// The tests' stand-in for a process whose call bell its peers cannot reach
/// (`umq::fuzzing::hide_call_ports`): while set, an inbox publishes no call port.
#[cfg(feature = "fuzzing")]
pub static HIDE_CALL_PORTS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

pub(super) fn os_err() -> i32 {
    let e = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    let hint = if e == libc::EMFILE {
        // `os::new_fd` has raised the soft limit as far as the hard one lets it.
        ": every queue over shared memory holds a descriptor, and the hard limit on open \
         files (`ulimit -Hn`) is reached"
    } else {
        ""
    };
    crate::log_err!("umq_shm", "{}{hint}", std::io::Error::from_raw_os_error(e));
    match e {
        libc::ENOMEM | libc::EMFILE | libc::ENFILE => -UMQ_ERR_ENOMEM,
        _ => -UMQ_ERR_EINVAL,
    }
}

pub(super) fn raw(fd: &std::os::fd::OwnedFd) -> i32 {
    std::os::fd::AsRawFd::as_raw_fd(fd)
}

/// Backs and maps the hot start of the ring in this process now (Linux 5.14+; on older kernels
/// the pages fault in on first use instead, which is only slower).
pub(super) fn populate_hot(ring: *mut u8, hot: Hot) {
    unsafe {
        libc::madvise(
            ring as *mut libc::c_void,
            hot.populated(),
            libc::MADV_POPULATE_WRITE,
        )
    };
}

pub(super) fn map(fd: i32, len: usize) -> Result<*mut u8, i32> {
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
pub(super) fn inbox_memfd() -> Result<std::os::fd::OwnedFd, i32> {
    crate::os::sealed_memfd(
        c"umq-inbox",
        segment_len(),
        libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
    )
    .map_err(|_| os_err())
}

/// Writes the header of a fresh (zeroed) inbox through its memfd, mapped or not (the pool fd
/// may stay 0: a zeroed header means no pool).
fn write_inbox_header_to(fd: i32, secret: u64, doorbell: Option<&EventFd>, hot: Hot) -> bool {
    use std::mem::offset_of;
    let mut head = [0u8; offset_of!(Inbox, hot_entry_max) + 4];
    let mut put = |at: usize, bytes: &[u8]| head[at..at + bytes.len()].copy_from_slice(bytes);
    put(offset_of!(Inbox, magic), &MAGIC.to_ne_bytes());
    put(offset_of!(Inbox, version), &LAYOUT_VERSION.to_ne_bytes());
    put(
        offset_of!(Inbox, owner_pid),
        &std::process::id().to_ne_bytes(),
    );
    put(offset_of!(Inbox, secret), &secret.to_ne_bytes());
    put(
        offset_of!(Inbox, hot_bytes),
        &(hot.bytes as u32).to_ne_bytes(),
    );
    put(
        offset_of!(Inbox, hot_entry_max),
        &(hot.entry_max as u32).to_ne_bytes(),
    );
    let bell = doorbell
        .map_or(NO_DOORBELL, |f| f.fd() as u32)
        .to_ne_bytes();
    let bell_at = offset_of!(Inbox, doorbell) + offset_of!(super::doorbell::Doorbell, fd);
    let write = |bytes: &[u8], at: usize| unsafe {
        libc::pwrite(
            fd,
            bytes.as_ptr() as *const libc::c_void,
            bytes.len(),
            at as i64,
        ) == bytes.len() as isize
    };
    write(&head, 0) && write(&bell, bell_at)
}

/// An inbox of ours that a bind info offers and no binding uses yet: its memfd, with the header
/// written through it, not mapped here (mapping and unmapping it would be most of a loopback
/// bind's cost). A peer in another process may map it before we bind; a binding over shared
/// memory maps it (`into_segment`).
pub struct Offered {
    fd: std::os::fd::OwnedFd,
    secret: u64,
    doorbell: Option<EventFd>,
    hot: Hot,
}

impl Offered {
    pub fn create(secret: u64, with_doorbell: bool, hot: Hot) -> Result<Offered, i32> {
        let fd = inbox_memfd()?;
        let doorbell = if with_doorbell {
            Some(EventFd::new(false)?)
        } else {
            None
        };
        if !write_inbox_header_to(raw(&fd), secret, doorbell.as_ref(), hot) {
            return Err(os_err());
        }
        Ok(Offered {
            fd,
            secret,
            doorbell,
            hot,
        })
    }

    pub fn fd(&self) -> i32 {
        raw(&self.fd)
    }

    pub fn secret(&self) -> u64 {
        self.secret
    }

    /// Ours, mapped (its hot part populated by `Segment::populate`, once a binding uses it).
    pub fn into_segment(self) -> Result<Segment, i32> {
        let len = segment_len();
        let base = map(raw(&self.fd), len)?;
        let seg = Segment {
            base,
            len,
            fd: Some(self.fd),
            cons_seen: AtomicU64::new(0),
            doorbell: self.doorbell.map(Bell::Event),
            rung_at: Default::default(),
            peer_pool: Default::default(),
            peer_access: Default::default(),
            direct_refused: Default::default(),
            publisher: Default::default(),
            taking_rx: AtomicU64::new(0),
            joined: 0,
            hot: self.hot,
        };
        Ok(seg)
    }
}

/// Maps `fd` shared over `[base, base + len)`, in place of what was there.
pub(super) fn map_at(base: *mut u8, len: usize, fd: i32) -> bool {
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

/// `Segment::peer_pool` when the peer's shared pool could not be mapped.
const UNMAPPABLE: LinkError = LinkError::Corrupt("cannot map the peer's shared pool");

impl Segment {
    /// A fresh inbox of this process, with mode 0600, marked with `secret`, with a doorbell
    /// when the owning queue is in interrupt mode, and the largest hot part (`create_sized`).
    pub fn create(secret: u64, with_doorbell: bool) -> Result<Segment, i32> {
        Segment::create_sized(secret, with_doorbell, Hot::LARGEST)
    }

    /// A new inbox of ours, its ring's hot part `hot` (populated by `populate`, once a binding
    /// uses it).
    pub fn create_sized(secret: u64, with_doorbell: bool, hot: Hot) -> Result<Segment, i32> {
        Offered::create(secret, with_doorbell, hot)?.into_segment()
    }

    /// Populates the first stretch of our ring, once a binding will use it (an inbox only
    /// offered costs its header's pages, not this).
    pub fn populate(&self) {
        populate_hot(self.ring(), self.hot);
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
        // The header goes in first, so our view of the inbox is never one without it.
        let secret = crate::os::random_u64();
        let bell = self.doorbell.as_ref().and_then(Bell::event);
        if !write_inbox_header_to(raw(&fresh), secret, bell, self.hot) {
            return Err(os_err());
        }
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
        self.populate();
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
            peer_access: Default::default(),
            direct_refused: Default::default(),
            publisher: Default::default(),
            taking_rx: AtomicU64::new(0),
            joined: 0,
            hot: Hot::LARGEST,
        };
        let i = seg.inbox();
        if i.magic != MAGIC
            || i.version != LAYOUT_VERSION
            || i.owner_pid != pid
            || i.secret != secret
        {
            return Err("the peer's inbox does not match its bind info".to_string());
        }
        let hot = Hot::checked(i.hot_bytes, i.hot_entry_max)
            .ok_or("the peer's inbox names an impossible hot part")?;
        let (joined, bell) = (
            i.presence.binding(),
            i.doorbell.0.fd.load(Ordering::Acquire),
        );
        seg.hot = hot;
        seg.joined = joined;
        seg.populate();
        if bell != NO_DOORBELL {
            seg.doorbell = peer_doorbell(pid, bell).map(Bell::Event);
            if seg.doorbell.is_some() {
                seg.tell_owner_we_ring();
            }
        }
        Ok(seg)
    }

    /// The peer's, with its owner's doorbell not duplicated (`peer_doorbell` refused): `bell`,
    /// our process's call bell, rings the owner's call bell instead, so its progress thread need
    /// not look every millisecond. A polling-mode owner has no doorbell and is not rung. The
    /// owner is not told that we ring it, as it is when we hold its eventfd: a datagram may
    /// never reach it (its process has no call bell, or listens in another network namespace,
    /// where our 127.0.0.1 is not its own), and a told owner's thread sleeps for the backstop's
    /// second. It tells itself when a ring arrives (`heard_by_call`).
    pub fn ring_owner_by_call(
        &mut self,
        bell: &std::sync::Arc<crate::transport::call_bell::CallBell>,
    ) {
        let has_doorbell = self.inbox().doorbell.0.fd.load(Ordering::Acquire) != NO_DOORBELL;
        if has_doorbell && self.doorbell.is_none() {
            self.doorbell = Some(Bell::Call(bell.clone()));
        }
    }

    /// Ours: a ring for this inbox reached our call bell, so the peer's changes ring us (as
    /// `tell_owner_we_ring` says of a peer that holds our eventfd), and our progress thread
    /// need not look every millisecond.
    pub fn heard_by_call(&self) {
        let rings = &self.inbox().doorbell.0.peer_rings;
        if rings.load(Ordering::Relaxed) == 0 {
            rings.store(1, Ordering::Release);
        }
    }

    /// The peer's: tells its owner that our changes ring it (`Segment::doorbell`).
    fn tell_owner_we_ring(&self) {
        self.inbox()
            .doorbell
            .0
            .peer_rings
            .store(1, Ordering::Release);
    }

    pub fn inbox(&self) -> &Inbox {
        unsafe { &*(self.base as *const Inbox) }
    }

    pub(super) fn ring(&self) -> *mut u8 {
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

    /// Ours: tells the peer where our process's call bell listens (`call_port`).
    pub fn publish_call_port(&self, port: u16) {
        #[cfg(feature = "fuzzing")]
        let port = if HIDE_CALL_PORTS.load(Ordering::Relaxed) {
            0
        } else {
            port
        };
        self.inbox().call_port.store(port as u32, Ordering::Release);
    }

    /// The peer's: where its process's call bell listens, if it has one (a port, nothing more:
    /// the worst a lying peer gets is a 16-byte datagram of ours to a port of its choice on
    /// 127.0.0.1).
    pub(super) fn call_port(&self) -> Option<u16> {
        let port = self.inbox().call_port.load(Ordering::Acquire);
        u16::try_from(port).ok().filter(|&p| p != 0)
    }

    /// Bytes we have written into the peer's ring, and bytes it has released.
    pub(super) fn produced_and_released(&self) -> (u64, u64) {
        let i = self.inbox();
        (
            i.prod.0.load(Ordering::Relaxed),
            i.cons.0.load(Ordering::Acquire),
        )
    }

    /// Ours: bytes of our ring we have released.
    pub(super) fn released(&self) -> u64 {
        self.inbox().cons.0.load(Ordering::Relaxed)
    }

    /// Ours: tells the peer where our process's access table is (`buf::access`).
    pub fn publish_access(&self, fd: i32, secret: u64) {
        let i = self.inbox();
        i.access_secret.store(secret, Ordering::Relaxed);
        i.access_fd.store(fd as u32, Ordering::Release);
    }

    /// The peer's: its access table, mapped here on first use; None while it has published
    /// none (asked again next time), or when it cannot be mapped (remembered, and logged once).
    #[inline(always)]
    pub(super) fn peer_access(&self) -> Option<&PeerAccess> {
        if self.direct_refused.load(Ordering::Relaxed) {
            return None;
        }
        if let Some(t) = self.peer_access.get() {
            return t.as_ref();
        }
        self.open_peer_access()
    }

    /// `peer_access` the first time: maps the table the peer's inbox names.
    #[cold]
    #[inline(never)]
    fn open_peer_access(&self) -> Option<&PeerAccess> {
        let i = self.inbox();
        let fd = i.access_fd.load(Ordering::Acquire);
        if fd == NO_POOL || fd == 0 {
            return None;
        }
        let secret = i.access_secret.load(Ordering::Relaxed);
        let view = PeerAccess::open(i.owner_pid, fd, secret)
            .inspect_err(|why| {
                crate::log_warn!(
                    "umq_post",
                    "{why}: one-sided WRITE and READ to this peer wait for it to run"
                )
            })
            .ok();
        self.peer_access.get_or_init(|| view).as_ref()
    }

    /// The peer's: the kernel refuses us cross-memory attach to its process, so its access
    /// table is no use.
    pub(super) fn refuse_direct(&self) {
        self.direct_refused.store(true, Ordering::Relaxed);
    }

    /// The peer's: its shared pool, mapped here on first use.
    #[inline(always)]
    pub(super) fn peer_pool(&self) -> Result<&PeerArena, LinkError> {
        match self.peer_pool.get() {
            Some(Some(p)) => Ok(p),
            Some(None) => Err(UNMAPPABLE),
            None => self.open_peer_pool(),
        }
    }

    /// `peer_pool` until it is mapped (or found unmappable).
    #[cold]
    #[inline(never)]
    fn open_peer_pool(&self) -> Result<&PeerArena, LinkError> {
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
    pub(super) fn note_pushed(&self, opcode: umq_opcode_t) {
        if crate::transport::wire::needs_rx_buffer(opcode) {
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
        self.populate();
    }
}
