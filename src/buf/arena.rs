//! The memory of a queue's shared pool: one memfd that the queue's peer process maps too, so a
//! message sent from one of its buffers is copied once, by the receiver, straight out of it.
//!
//! The arena reserves `RESERVE` bytes of address space up front and backs them page by page as
//! the pool grows (`ftruncate`), so a buffer's offset in the memfd never changes and the peer
//! maps the whole reserve once. The memfd is sealed against shrinking: a peer that maps it can
//! rely on every byte below a size it once saw staying there (no SIGBUS). The first page is a
//! header that lets the peer check it mapped what our inbox told it to.

use crate::abi::errno::*;
use crate::os::SharedMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Address space one shared pool may use (virtual: only what buffers occupy is ever backed).
pub const RESERVE: usize = 1 << 30;
/// The header page; chunks start after it.
pub const HEADER_BYTES: usize = 4096;
const MAGIC: u64 = u64::from_le_bytes(*b"UMQPOOL1");

#[repr(C)]
struct Header {
    magic: u64,
    secret: u64,
    owner_pid: u32,
    /// Where the owner maps the arena: a one-sided WRITE or READ names an address there, which
    /// a peer that maps the arena too turns into its own (`PeerArena::local`).
    owner_base: u64,
}

/// Arenas alive in this process: `umq_uninit` leaves none, which the API fuzz target checks
/// after every run (a leaked arena is a gigabyte of address space and all it backed).
static LIVE: AtomicUsize = AtomicUsize::new(0);

pub fn live_arenas() -> usize {
    LIVE.load(Ordering::Relaxed)
}

pub struct Arena {
    fd: OwnedFd,
    map: SharedMap,
    /// Bytes backed so far (header included); only grows.
    backed: AtomicUsize,
    grow_lock: Mutex<()>,
    secret: u64,
}

fn os_error(what: &str) -> i32 {
    let e = std::io::Error::last_os_error();
    crate::log_err!("umq_buf_alloc", "shared pool: {what}: {e}");
    if e.raw_os_error() == Some(libc::ENOMEM) {
        -UMQ_ERR_ENOMEM
    } else {
        -UMQ_ERR_EINVAL
    }
}

/// The arena's `RESERVE` bytes of address space over `fd`.
fn map_reserve(fd: i32) -> Option<SharedMap> {
    SharedMap::new(fd, RESERVE)
}

impl Arena {
    pub fn create(secret: u64) -> Result<Arena, i32> {
        let fd = crate::os::sealed_memfd(c"umq-shared-pool", HEADER_BYTES, libc::F_SEAL_SHRINK)
            .map_err(|_| os_error("setting up the memfd"))?;
        let raw = fd.as_raw_fd();
        let map = map_reserve(raw).ok_or_else(|| os_error("mmap"))?;
        unsafe {
            (map.base() as *mut Header).write(Header {
                magic: MAGIC,
                secret,
                owner_pid: std::process::id(),
                owner_base: map.base() as u64,
            })
        };
        LIVE.fetch_add(1, Ordering::Relaxed);
        Ok(Arena {
            fd,
            map,
            backed: AtomicUsize::new(HEADER_BYTES),
            grow_lock: Mutex::new(()),
            secret,
        })
    }

    pub fn fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }

    pub fn secret(&self) -> u64 {
        self.secret
    }

    /// Bytes the arena occupies (its header page included).
    pub fn backed(&self) -> usize {
        self.backed.load(Ordering::Acquire)
    }

    /// Backs `bytes` more (a multiple of the page size) and returns where they start.
    pub fn extend(&self, bytes: usize) -> Result<*mut u8, i32> {
        let _g = self.grow_lock.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.backed.load(Ordering::Relaxed);
        let new = old + bytes.next_multiple_of(4096);
        if new > RESERVE {
            crate::log_err!(
                "umq_buf_alloc",
                "a queue's shared pool holds at most {} MiB",
                RESERVE >> 20
            );
            return Err(-UMQ_ERR_ENOMEM);
        }
        if unsafe { libc::ftruncate(self.fd(), new as libc::off_t) } != 0 {
            return Err(os_error("growing the memfd"));
        }
        let start = unsafe { self.map.base().add(old) };
        // A buffer's first use must not pay a page-cache fault per page in the data path.
        populate(start, new - old, libc::MADV_POPULATE_WRITE);
        self.backed.store(new, Ordering::Release);
        Ok(start)
    }

    /// Gives the pages under `[p, p + len)` (whole pages of the backed chunks) back to the
    /// system: a hole is punched in the memfd, so the peer's mapping lets go of them too, and
    /// the next touch on either side finds a zero page. The size stays (the seal forbids
    /// shrinking, and offsets never move).
    pub fn release(&self, p: *const u8, len: usize) -> bool {
        let Some(off) = self.offset_of(p, len) else {
            return false;
        };
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let done =
            unsafe { libc::fallocate(self.fd(), mode, off as libc::off_t, len as libc::off_t) };
        done == 0
    }

    /// Bytes of the memfd backed by memory now (released chunks do not count).
    pub fn resident(&self) -> usize {
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(self.fd(), &mut st) } != 0 {
            return 0;
        }
        st.st_blocks as usize * 512
    }

    /// The offset of `[p, p + len)` in the arena when it lies inside the backed chunks.
    pub fn offset_of(&self, p: *const u8, len: usize) -> Option<u64> {
        let off = (p as usize).checked_sub(self.map.base() as usize)?;
        let end = off.checked_add(len)?;
        (off >= HEADER_BYTES && end <= self.backed.load(Ordering::Acquire)).then_some(off as u64)
    }
}

/// A peer's arena as mapped here: a receiver copies messages sent by reference out of it, and
/// a sender writes messages into the receive buffers the peer posted from it (placement).
pub struct PeerArena {
    fd: OwnedFd,
    map: SharedMap,
    /// Bytes known to be backed: the memfd cannot shrink (sealed), so this only grows.
    known: AtomicUsize,
    /// Where the owner maps it (its header says).
    owner_base: u64,
}

impl PeerArena {
    /// Maps the arena process `pid` holds as fd `fd`, checking owner uid, the shrink seal and the
    /// header (magic, owner, secret).
    pub fn open(pid: u32, fd: u32, secret: u64) -> Result<PeerArena, String> {
        let (fd, size) = crate::os::open_peer_memfd(pid, fd, libc::O_RDWR, "shared pool")?;
        if size < HEADER_BYTES {
            return Err("the peer's shared pool has no header".to_string());
        }
        let map = map_reserve(fd.as_raw_fd()).ok_or("cannot map the peer's shared pool")?;
        let view = PeerArena {
            fd,
            map,
            known: AtomicUsize::new(HEADER_BYTES),
            owner_base: 0,
        };
        view.learn_size(size);
        let h = unsafe { (view.map.base() as *const Header).read() };
        if h.magic != MAGIC || h.owner_pid != pid || h.secret != secret {
            return Err("the peer's shared pool does not match what its inbox says".to_string());
        }
        Ok(PeerArena {
            owner_base: h.owner_base,
            ..view
        })
    }

    /// Where `[off, off + len)` of the peer's arena is mapped here, if it is backed. A range past
    /// what we knew asks the kernel for the current size (the arena grew).
    pub fn at(&self, off: u64, len: u64) -> Option<*const u8> {
        let end = off.checked_add(len)?;
        if off < HEADER_BYTES as u64 || end > RESERVE as u64 {
            return None;
        }
        if end > self.known.load(Ordering::Relaxed) as u64 {
            let size = file_size(self.fd.as_raw_fd())?;
            self.learn_size(size);
            if end > size as u64 {
                return None;
            }
        }
        Some(unsafe { self.map.base().add(off as usize) as *const u8 })
    }

    /// Where `[addr, addr + len)` of the owner's address space is mapped here, if it lies in the
    /// arena's backed chunks.
    pub fn local(&self, addr: u64, len: u64) -> Option<*mut u8> {
        let off = addr.checked_sub(self.owner_base)?;
        self.at(off, len).map(|p| p as *mut u8)
    }

    /// Takes a larger size of the arena in, mapping the new pages here at once.
    fn learn_size(&self, size: usize) {
        let size = size.min(RESERVE);
        let was = self.known.fetch_max(size, Ordering::Relaxed);
        if size > was {
            populate(
                unsafe { self.map.base().add(was) },
                size - was,
                libc::MADV_POPULATE_READ,
            );
        }
    }
}

/// Backs and maps `[p, p + len)` now (Linux 5.14+; older kernels fault the pages in on first
/// use instead, which is only slower).
fn populate(p: *const u8, len: usize, advice: i32) {
    unsafe { libc::madvise(p as *mut libc::c_void, len, advice) };
}

fn file_size(fd: i32) -> Option<usize> {
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    (unsafe { libc::fstat(fd, &mut st) } == 0).then_some(st.st_size as usize)
}

impl Drop for Arena {
    fn drop(&mut self) {
        LIVE.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peer_sees_what_the_owner_writes_and_nothing_past_the_backed_end() {
        let a = Arena::create(42).unwrap();
        let chunk = a.extend(8192).unwrap();
        unsafe { chunk.add(100).write(0xab) };
        let view = PeerArena::open(std::process::id(), a.fd() as u32, 42).unwrap();
        let off = a.offset_of(unsafe { chunk.add(100) }, 1).unwrap();
        assert_eq!(off, HEADER_BYTES as u64 + 100);
        assert_eq!(unsafe { *view.at(off, 1).unwrap() }, 0xab);
        assert!(view.at(off, 8192).is_none(), "runs past the backed end");
        assert!(view.at(0, 8).is_none(), "the header is not message memory");
        let more = a.extend(4096).unwrap();
        unsafe { more.write(7) };
        let off2 = a.offset_of(more, 4096).unwrap();
        assert_eq!(
            unsafe { *view.at(off2, 4096).expect("grown after the peer mapped it") },
            7
        );
        assert!(a.offset_of(unsafe { more.add(4096) }, 1).is_none());
    }

    /// A released range goes from both mappings: the owner's memory use drops and the peer
    /// reads zero there, not the old bytes.
    #[test]
    fn a_released_range_leaves_both_mappings() {
        let a = Arena::create(8).unwrap();
        let chunk = a.extend(64 << 10).unwrap();
        unsafe { std::ptr::write_bytes(chunk, 0x77, 64 << 10) };
        let view = PeerArena::open(std::process::id(), a.fd() as u32, 8).unwrap();
        let off = a.offset_of(chunk, 1).unwrap();
        assert_eq!(unsafe { *view.at(off + 5000, 1).unwrap() }, 0x77);
        let before = a.resident();
        assert!(a.release(chunk, 64 << 10));
        assert_eq!(before - a.resident(), 64 << 10);
        assert_eq!(unsafe { *view.at(off + 5000, 1).unwrap() }, 0);
        assert_eq!(a.backed(), HEADER_BYTES + (64 << 10), "the size stays");
        assert!(
            !a.release(unsafe { chunk.add(64 << 10) }, 4096),
            "past the end"
        );
    }

    #[test]
    fn a_wrong_secret_or_a_plain_memfd_is_refused() {
        let a = Arena::create(5).unwrap();
        let me = std::process::id();
        assert!(PeerArena::open(me, a.fd() as u32, 6).is_err());
        let plain = unsafe { libc::memfd_create(c"plain".as_ptr(), libc::MFD_CLOEXEC) };
        unsafe { libc::ftruncate(plain, 8192) };
        let e = PeerArena::open(me, plain as u32, 5).err().unwrap();
        assert!(e.contains("sealed"), "{e}");
        unsafe { libc::close(plain) };
    }

    #[test]
    fn the_arena_cannot_shrink() {
        let a = Arena::create(1).unwrap();
        a.extend(4096).unwrap();
        assert_ne!(unsafe { libc::ftruncate(a.fd(), 0) }, 0);
    }
}
