//! The access table: what a peer process on this host checks a one-sided WRITE or READ
//! against before it moves the bytes itself, through the kernel (cross-memory attach), while
//! this process runs nothing of ours.
//!
//! It is a memfd the pool writes and peers map. One entry per chunk of the pool, found by the
//! chunk's token id (`token_id % ENTRIES`), holds what `Pool::check_remote` checks here: the
//! token, where the chunk's data areas are, and a word per slot saying whether the slot is
//! handed out (`LIVE`) and how many peers are copying into or out of it now (the low bits).
//!
//! A peer *pins* a slot before it copies: it adds one to the slot's word only while `LIVE` is
//! set (compare-and-swap), and takes it back when its copy is done. A free clears `LIVE` first,
//! so no copy starts after it; an allocation hands a slot out only once its pins are gone, so a
//! copy that began before the free never reaches the slot's next owner (revoke before reuse).
//! A copy that pinned the slot was checked against a live buffer: it happened before the free.
//!
//! Peers are trusted no further than the kernel trusts them: a peer that may attach to this
//! process (ptrace rules) can write anywhere in it anyway, so the table keeps honest peers to
//! the RDMA semantics, and its values are only ever used to address the other process. What
//! this process reads back from it (a slot's pins) can at worst hold a slot back.

use crate::os::SharedMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Chunks the table can describe; a chunk whose entry is taken (its token id collides with a
/// live chunk's modulo this) is left out, and one-sided operations on it go through its
/// provider's target-side path instead.
pub const ENTRIES: usize = 16384;
/// Slots per chunk (the pool's `MAX_SLOTS_PER_CHUNK`).
pub const SLOTS: usize = 256;
use super::pin::{self, LIVE};
/// In an entry's tag, beside the token id: the entry describes a chunk.
const VALID: u32 = 1 << 31;
/// An entry whose chunk left while a pin was still held (a peer that died mid-copy): never
/// reused, so the stale pin cannot reach a new chunk.
const ABANDONED: u32 = 1 << 30;
const MAGIC: u64 = u64::from_le_bytes(*b"UMQACC01");
const HEADER_BYTES: usize = 4096;
/// How long a free or a chunk's removal waits for pins to go before it takes the holder for
/// dead (a copy of the largest buffer takes a few milliseconds).
const PIN_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

#[repr(C)]
struct Header {
    magic: u64,
    secret: u64,
    owner_pid: u32,
    entries: u32,
    /// 1 while every chunk of the pool has its entry: a token the table does not know is then
    /// no token of this process's. 0 for ever once a chunk was left out.
    complete: AtomicU32,
}

/// One chunk: its tag last (written with release once the rest is there).
#[repr(C, align(64))]
struct Entry {
    tag: AtomicU32,
    token_value: AtomicU32,
    count: AtomicU32,
    _pad: u32,
    data_base: AtomicU64,
    data_stride: AtomicU64,
    data_cap: AtomicU64,
    words: [AtomicU32; SLOTS],
}

const TABLE_BYTES: usize = HEADER_BYTES + ENTRIES * std::mem::size_of::<Entry>();

/// Where a chunk's data areas are: what an entry describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkLayout {
    pub token_id: u32,
    pub token_value: u32,
    pub data_base: usize,
    pub data_stride: usize,
    pub data_cap: usize,
    pub count: usize,
}

/// The table mapped here (`TABLE_BYTES`).
struct Mapping(SharedMap);

impl Mapping {
    fn of(fd: i32) -> Option<Mapping> {
        SharedMap::new(fd, TABLE_BYTES).map(Mapping)
    }

    fn header(&self) -> &Header {
        unsafe { &*(self.0.base() as *const Header) }
    }

    fn entry(&self, i: usize) -> &Entry {
        debug_assert!(i < ENTRIES);
        unsafe { &*(self.0.base().add(HEADER_BYTES) as *const Entry).add(i) }
    }
}

/// Ours: the table our pool keeps for its peers.
pub struct AccessTable {
    fd: OwnedFd,
    map: Mapping,
    secret: u64,
}

/// Where a chunk is in the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryIndex(u32);

impl AccessTable {
    pub fn create(secret: u64) -> std::io::Result<AccessTable> {
        let seals = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;
        let fd = crate::os::sealed_memfd(c"umq-access", TABLE_BYTES, seals)?;
        let map = Mapping::of(fd.as_raw_fd()).ok_or_else(std::io::Error::last_os_error)?;
        unsafe {
            (map.0.base() as *mut Header).write(Header {
                magic: MAGIC,
                secret,
                owner_pid: std::process::id(),
                entries: ENTRIES as u32,
                complete: AtomicU32::new(1),
            })
        };
        Ok(AccessTable { fd, map, secret })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn secret(&self) -> u64 {
        self.secret
    }

    /// Describes a new chunk, its slots all free; None when its entry is taken.
    pub fn publish(&self, c: &ChunkLayout) -> Option<EntryIndex> {
        if c.count > SLOTS || c.token_id & (VALID | ABANDONED) != 0 {
            self.map.header().complete.store(0, Ordering::Release);
            return None;
        }
        let i = c.token_id as usize % ENTRIES;
        let e = self.map.entry(i);
        if e.tag.load(Ordering::Acquire) != 0 {
            self.map.header().complete.store(0, Ordering::Release);
            return None;
        }
        e.token_value.store(c.token_value, Ordering::Relaxed);
        e.count.store(c.count as u32, Ordering::Relaxed);
        e.data_base.store(c.data_base as u64, Ordering::Relaxed);
        e.data_stride.store(c.data_stride as u64, Ordering::Relaxed);
        e.data_cap.store(c.data_cap as u64, Ordering::Relaxed);
        e.tag.store(c.token_id | VALID, Ordering::Release);
        Some(EntryIndex(i as u32))
    }

    /// The chunk leaves: no pin starts on it from here on, and those held end before this
    /// returns (or are taken for a dead peer's, and the entry is never used again).
    pub fn withdraw(&self, at: EntryIndex) {
        let e = self.map.entry(at.0 as usize);
        e.tag.store(0, Ordering::SeqCst);
        let mut stuck = false;
        for w in &e.words {
            stuck |= !wait_unpinned(w);
            w.store(0, Ordering::Release);
        }
        if stuck {
            e.tag.store(ABANDONED, Ordering::Release);
        }
    }

    /// Slot `slot` of the chunk is handed out. It must be unpinned (`wait_unpinned` first).
    pub fn set_live(&self, at: EntryIndex, slot: usize) {
        pin::hand_out(self.word(at, slot));
    }

    /// Slot `slot` of the chunk came back: no copy starts on it from here on.
    pub fn clear_live(&self, at: EntryIndex, slot: usize) {
        pin::revoke(self.word(at, slot));
    }

    /// Before slot `slot` is handed out again: waits for copies that pinned it before its free
    /// to end (see `wait_unpinned`).
    pub fn wait_unpinned(&self, at: EntryIndex, slot: usize) {
        wait_unpinned(self.word(at, slot));
    }

    fn word(&self, at: EntryIndex, slot: usize) -> &AtomicU32 {
        &self.map.entry(at.0 as usize).words[slot]
    }
}

/// Waits until no pin is held on `w`; a pin held for `PIN_WAIT` is a peer that died between
/// its pin and its unpin, and is dropped (it can copy nothing any more). Returns false then.
fn wait_unpinned(w: &AtomicU32) -> bool {
    if !pin::pinned(w) {
        return true;
    }
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    while pin::pinned(w) {
        if start.elapsed() > PIN_WAIT {
            crate::log_warn!(
                "umq_buf_free",
                "a peer held a buffer for one-sided access for {PIN_WAIT:?}: taken for dead"
            );
            w.fetch_and(LIVE, Ordering::AcqRel);
            return false;
        }
        spins += 1;
        if spins < 100 {
            std::hint::spin_loop();
        } else {
            std::thread::yield_now();
        }
    }
    true
}

/// A peer's table, mapped here: checks a one-sided operation and pins the slot it reaches.
pub struct PeerAccess {
    _fd: OwnedFd,
    map: Mapping,
}

/// What the peer's table says of a one-sided operation.
pub enum Reach<'a> {
    /// It may go: the slot it reaches, pinned for the copy.
    Pinned(Pin<'a>),
    /// It fails with a remote access error, as the target's own check would have it.
    Refused,
    /// The table does not know the token (a chunk it left out): the target must decide.
    Unknown,
}

/// A slot of the peer's pinned for one copy, released on drop. `addr` is in the peer's
/// address space.
pub struct Pin<'a> {
    word: &'a AtomicU32,
    pub addr: usize,
    /// The token it was checked under, and the slot's data area `[start, end)`: what a later
    /// operation may reach under this pin (`covers`).
    token: (u32, u32),
    area: (u64, u64),
}

impl Pin<'_> {
    /// Whether `[addr, addr + len)` under this token lies in the pinned slot's data area and
    /// the slot is still handed out, so that another copy may go under this pin (a post's
    /// WRs to one buffer pin it once). The entry cannot change while a slot of it is pinned
    /// (`AccessTable::withdraw` waits), so this is the check `PeerAccess::reach` makes.
    pub fn covers(&self, addr: u64, len: u64, token_id: u32, token_value: u32) -> bool {
        self.token == (token_id, token_value)
            && addr >= self.area.0
            && addr.checked_add(len).is_some_and(|end| end <= self.area.1)
            && pin::still_live(self.word)
    }
}

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        pin::unpin(self.word);
    }
}

impl PeerAccess {
    /// Maps the table process `pid` holds as fd `fd`, checking owner uid, seals, size and the
    /// header (magic, owner, secret, entries).
    pub fn open(pid: u32, fd: u32, secret: u64) -> Result<PeerAccess, String> {
        let (fd, size) = crate::os::open_peer_memfd(pid, fd, libc::O_RDWR, "access table")?;
        let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
        if size != TABLE_BYTES || seals < 0 || seals & libc::F_SEAL_GROW == 0 {
            return Err("the peer's access table has the wrong size or seals".to_string());
        }
        let map = Mapping::of(fd.as_raw_fd()).ok_or("cannot map the peer's access table")?;
        let h = map.header();
        if h.magic != MAGIC
            || h.owner_pid != pid
            || h.secret != secret
            || h.entries != ENTRIES as u32
        {
            return Err("the peer's access table does not match what its inbox says".to_string());
        }
        Ok(PeerAccess { _fd: fd, map })
    }

    /// Pins the slot that holds `[addr, addr + len)` when it lies inside the data area of one
    /// handed-out buffer of a chunk with this token.
    pub fn reach(&self, addr: u64, len: u64, token_id: u32, token_value: u32) -> Reach<'_> {
        let e = self.map.entry(token_id as usize % ENTRIES);
        let tag = e.tag.load(Ordering::Acquire);
        if token_id & (VALID | ABANDONED) != 0 || tag != token_id | VALID {
            return match self.map.header().complete.load(Ordering::Acquire) {
                1 => Reach::Refused,
                _ => Reach::Unknown,
            };
        }
        if e.token_value.load(Ordering::Relaxed) != token_value {
            return Reach::Refused;
        }
        let Some((slot, area)) = slot_of(e, addr, len) else {
            return Reach::Refused;
        };
        let word = &e.words[slot];
        if !pin::try_pin(word) {
            return Reach::Refused;
        }
        let pin = Pin {
            word,
            addr: addr as usize,
            token: (token_id, token_value),
            area,
        };
        // The chunk may have left (and its entry gone to another) while we read it.
        match e.tag.load(Ordering::Acquire) == tag {
            true => Reach::Pinned(pin),
            false => Reach::Refused,
        }
    }

    /// `reach`, as an Option of the pin.
    #[cfg(test)]
    fn pin(&self, addr: u64, len: u64, token_id: u32, token_value: u32) -> Option<Pin<'_>> {
        match self.reach(addr, len, token_id, token_value) {
            Reach::Pinned(p) => Some(p),
            _ => None,
        }
    }
}

/// The slot of entry `e` whose data area holds `[addr, addr + len)`, and that data area, read
/// from the peer's values (checked arithmetic: they may be anything).
fn slot_of(e: &Entry, addr: u64, len: u64) -> Option<(usize, (u64, u64))> {
    let base = e.data_base.load(Ordering::Relaxed);
    let stride = e.data_stride.load(Ordering::Relaxed);
    let cap = e.data_cap.load(Ordering::Relaxed);
    let count = (e.count.load(Ordering::Relaxed) as usize).min(SLOTS) as u64;
    let off = addr.checked_sub(base)?;
    let slot = off.checked_div(stride)?;
    let within = off % stride;
    let room = cap.min(stride);
    let start = addr - within;
    (slot < count && within.checked_add(len)? <= room)
        .then_some((slot as usize, (start, start.saturating_add(room))))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(token_id: u32) -> ChunkLayout {
        ChunkLayout {
            token_id,
            token_value: 0xfeed,
            data_base: 0x10_0000,
            data_stride: 0x1000,
            data_cap: 0x800,
            count: 4,
        }
    }

    fn both(secret: u64) -> (AccessTable, PeerAccess) {
        let t = AccessTable::create(secret).unwrap();
        let p = PeerAccess::open(std::process::id(), t.fd() as u32, secret).unwrap();
        (t, p)
    }

    #[test]
    fn a_pin_needs_the_token_a_live_slot_and_the_bounds() {
        let (t, p) = both(5);
        let at = t.publish(&layout(7)).unwrap();
        let slot1 = 0x10_1000;
        assert!(
            p.pin(slot1, 16, 7, 0xfeed).is_none(),
            "no slot handed out yet"
        );
        t.set_live(at, 1);
        assert_eq!(
            p.pin(slot1 + 8, 16, 7, 0xfeed).unwrap().addr,
            slot1 as usize + 8
        );
        assert!(p.pin(slot1, 16, 7, 0xbeef).is_none(), "forged token value");
        assert!(p.pin(slot1, 16, 8, 0xfeed).is_none(), "another token id");
        assert!(
            p.pin(slot1, 0x801, 7, 0xfeed).is_none(),
            "past the data area"
        );
        assert!(
            p.pin(slot1 + 0x7ff, 2, 7, 0xfeed).is_none(),
            "straddles its end"
        );
        assert!(p.pin(0x10_0000, 16, 7, 0xfeed).is_none(), "slot 0 is free");
        assert!(
            p.pin(0x10_4000, 16, 7, 0xfeed).is_none(),
            "past the last slot"
        );
        assert!(
            p.pin(0x0f_ffff, 16, 7, 0xfeed).is_none(),
            "before the chunk"
        );
        assert!(p.pin(u64::MAX, 16, 7, 0xfeed).is_none());
        t.clear_live(at, 1);
        assert!(p.pin(slot1, 16, 7, 0xfeed).is_none(), "freed");
    }

    #[test]
    fn a_held_pin_covers_its_token_and_its_slot_while_the_slot_is_live() {
        let (t, p) = both(8);
        let at = t.publish(&layout(7)).unwrap();
        t.set_live(at, 1);
        t.set_live(at, 2);
        let slot1 = 0x10_1000;
        let pin = p.pin(slot1 + 8, 16, 7, 0xfeed).unwrap();
        assert!(pin.covers(slot1, 0x800, 7, 0xfeed), "the whole data area");
        assert!(pin.covers(slot1 + 0x7ff, 1, 7, 0xfeed), "its last byte");
        assert!(!pin.covers(slot1 + 0x7ff, 2, 7, 0xfeed), "past its end");
        assert!(!pin.covers(slot1 - 1, 1, 7, 0xfeed), "before it");
        assert!(!pin.covers(0x10_2000, 8, 7, 0xfeed), "the next slot");
        assert!(!pin.covers(slot1, 8, 7, 0xbeef), "another token value");
        assert!(
            !pin.covers(slot1, 8, 7 + ENTRIES as u32, 0xfeed),
            "another id"
        );
        assert!(!pin.covers(u64::MAX, 2, 7, 0xfeed));
        t.clear_live(at, 1);
        assert!(!pin.covers(slot1, 8, 7, 0xfeed), "freed while held");
    }

    #[test]
    fn a_taken_entry_is_not_shared_and_a_withdrawn_one_is_reused() {
        let (t, p) = both(6);
        let at = t.publish(&layout(3)).unwrap();
        assert_eq!(t.publish(&layout(3 + ENTRIES as u32)), None, "collides");
        t.set_live(at, 0);
        assert!(p.pin(0x10_0000, 1, 3, 0xfeed).is_some());
        t.clear_live(at, 0);
        t.withdraw(at);
        assert!(p.pin(0x10_0000, 1, 3, 0xfeed).is_none());
        let again = t.publish(&layout(3 + ENTRIES as u32)).unwrap();
        t.set_live(again, 0);
        assert!(p.pin(0x10_0000, 1, 3, 0xfeed).is_none(), "the old token");
        assert!(p.pin(0x10_0000, 1, 3 + ENTRIES as u32, 0xfeed).is_some());
    }

    #[test]
    fn a_free_waits_for_the_copy_that_pinned_the_slot_before_it() {
        let (t, p) = both(9);
        let at = t.publish(&layout(11)).unwrap();
        t.set_live(at, 2);
        let pin = p.pin(0x10_2000, 8, 11, 0xfeed).unwrap();
        t.clear_live(at, 2);
        assert!(p.pin(0x10_2000, 8, 11, 0xfeed).is_none(), "revoked at once");
        let released = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(std::time::Duration::from_millis(50));
                released.store(true, Ordering::SeqCst);
                drop(pin);
            });
            t.wait_unpinned(at, 2);
            assert!(
                released.load(Ordering::SeqCst),
                "reused only after the copy ended"
            );
        });
    }

    #[test]
    fn an_unknown_token_is_refused_only_while_the_table_lists_every_chunk() {
        let (t, p) = both(4);
        t.publish(&layout(21)).unwrap();
        assert!(matches!(p.reach(0x10_0000, 1, 22, 0xfeed), Reach::Refused));
        assert!(t.publish(&layout(21 + ENTRIES as u32)).is_none());
        assert!(matches!(p.reach(0x10_0000, 1, 22, 0xfeed), Reach::Unknown));
        assert!(matches!(p.reach(0x10_0000, 1, 21, 0xbad), Reach::Refused));
    }

    #[test]
    fn a_table_that_is_not_ours_is_refused() {
        let t = AccessTable::create(1).unwrap();
        assert!(PeerAccess::open(std::process::id(), t.fd() as u32, 2).is_err());
        let other = crate::os::sealed_memfd(c"x", TABLE_BYTES, libc::F_SEAL_SHRINK).unwrap();
        let e = PeerAccess::open(std::process::id(), other.as_raw_fd() as u32, 1);
        assert!(e.is_err(), "not sealed against growing");
    }
}
