//! The Linux facilities both the buffer pools and the transports stand on: sealed memfds, a
//! peer process's memfd opened through /proc, pidfds. Nothing above this module calls these
//! system calls itself.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// Makes a file descriptor with `make` (a system call's result: the fd, or -1 with errno set).
/// When the process is out of descriptors (EMFILE) and its soft limit on open files is below
/// the hard one, doubles the soft limit (at most to the hard one) and makes it again. A queue
/// over shared memory holds its inbox's memfd for its peer to open, so ten thousand such
/// queues need ten thousand descriptors, where most distributions start a process with a soft
/// limit of 1,024 (and a hard one of 524,288 or more). Raised only when a call would fail
/// otherwise: a process that never needs more keeps its limit, and with it the promise that
/// its descriptors fit select()'s 1,024. On failure errno is the call's own.
pub fn new_fd(mut make: impl FnMut() -> i64) -> i64 {
    loop {
        let fd = make();
        if fd >= 0 {
            return fd;
        }
        let err = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
        if err != libc::EMFILE || !raise_fd_limit() {
            // SAFETY: errno is this thread's; put back what the call said.
            unsafe { *libc::__errno_location() = err };
            return fd;
        }
    }
}

/// Makes room for `want` more descriptors that others make for us (libfabric's and UCX's
/// sockets, epoll sets and eventfds, a peer process's connection), which `new_fd` never sees:
/// while the `want` numbers just below the soft limit are all taken, raises the soft limit as
/// `new_fd` does. Descriptors go to the lowest free number, so a full top means a nearly full
/// table; a table with room keeps its limit.
pub fn fd_headroom(want: u64) {
    let probe = new_fd(|| unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) }.into());
    if probe < 0 {
        return;
    }
    // SAFETY: made just above, owned here alone.
    let probe = unsafe { OwnedFd::from_raw_fd(probe as i32) };
    while let Some((soft, _)) = fd_limits() {
        // A table smaller than `want` has no such room at all.
        let full = match soft.checked_sub(want) {
            None => true,
            Some(from) => {
                let from = from.min(i32::MAX as u64) as i32;
                let dup = unsafe { libc::fcntl(probe.as_raw_fd(), libc::F_DUPFD_CLOEXEC, from) };
                if dup >= 0 {
                    unsafe { libc::close(dup) };
                }
                dup < 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EMFILE)
            }
        };
        if !full || !raise_fd_limit() {
            return;
        }
    }
}

/// The process's limits on open files (`RLIMIT_NOFILE`): soft, hard.
pub fn fd_limits() -> Option<(u64, u64)> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0)
        .then_some((limit.rlim_cur, limit.rlim_max))
}

/// Doubles the soft limit on open files, at most to the hard limit; false when it is there
/// already (or the limits cannot be read or set).
fn raise_fd_limit() -> bool {
    let Some((soft, hard)) = fd_limits().filter(|&(soft, hard)| soft < hard) else {
        return false;
    };
    let limit = libc::rlimit {
        rlim_cur: soft.saturating_mul(2).max(64).min(hard),
        rlim_max: hard,
    };
    unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) == 0 }
}

/// A memfd of `len` bytes, mode 0600, sealed with `seals` (`F_SEAL_*`): a peer that maps it can
/// never have it shrink under its mapping (SIGBUS). `name` shows in /proc/PID/fd.
pub fn sealed_memfd(name: &std::ffi::CStr, len: usize, seals: i32) -> std::io::Result<OwnedFd> {
    let raw = new_fd(|| unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING).into()
    }) as i32;
    if raw < 0 {
        return Err(std::io::Error::last_os_error());
    }
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    if unsafe { libc::fchmod(raw, 0o600) } != 0
        || unsafe { libc::ftruncate(raw, len as libc::off_t) } != 0
        || unsafe { libc::fcntl(raw, libc::F_ADD_SEALS, seals) } != 0
    {
        return Err(std::io::Error::last_os_error());
    }
    Ok(fd)
}

fn sealed_against_shrinking(fd: i32) -> bool {
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    seals >= 0 && seals & libc::F_SEAL_SHRINK != 0
}

/// Opens memfd `fd` of process `pid` through /proc (which the kernel allows only to a process
/// of the same user with ptrace-read access) and checks what every mapping of a peer's memory
/// needs: it is ours (uid) and sealed against shrinking, so the peer cannot truncate it under
/// our mapping (SIGBUS). Returns it and its size; `what` names it in errors.
pub fn open_peer_memfd(
    pid: u32,
    fd: u32,
    flags: i32,
    what: &str,
) -> Result<(OwnedFd, usize), String> {
    let path = format!("/proc/{pid}/fd/{fd}\0");
    let opened = new_fd(|| unsafe {
        libc::open(
            path.as_ptr() as *const libc::c_char,
            flags | libc::O_CLOEXEC,
        )
        .into()
    }) as i32;
    if opened < 0 {
        return Err(format!(
            "cannot open the peer's {what} {}: {}",
            path.trim_end_matches('\0'),
            std::io::Error::last_os_error()
        ));
    }
    let file = unsafe { OwnedFd::from_raw_fd(opened) };
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(opened, &mut st) } != 0 {
        return Err(format!("cannot stat the peer's {what}"));
    }
    if st.st_uid != unsafe { libc::getuid() } {
        return Err(format!(
            "the peer's {what} belongs to uid {}, not to us",
            st.st_uid
        ));
    }
    if !sealed_against_shrinking(opened) {
        return Err(format!("the peer's {what} is not sealed against shrinking"));
    }
    Ok((file, st.st_size as usize))
}

/// `len` bytes of a memfd mapped shared, read and write, here (the file may be shorter: pages
/// past its end are only reached after it grew); unmapped on drop.
pub struct SharedMap {
    base: *mut u8,
    len: usize,
}

// The mapping is shared by design; what is in it is governed by its users' own rules.
unsafe impl Send for SharedMap {}
unsafe impl Sync for SharedMap {}

impl SharedMap {
    pub fn new(fd: i32, len: usize) -> Option<SharedMap> {
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_NORESERVE,
                fd,
                0,
            )
        };
        (p != libc::MAP_FAILED).then_some(SharedMap {
            base: p as *mut u8,
            len,
        })
    }

    pub fn base(&self) -> *mut u8 {
        self.base
    }
}

impl Drop for SharedMap {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// How much memory this process may pin (`RLIMIT_MEMLOCK`), in words: a device's memory
/// registrations count against it.
pub fn memlock_limit() -> String {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut limit) } != 0 {
        return "RLIMIT_MEMLOCK unknown".to_string();
    }
    match limit.rlim_cur {
        libc::RLIM_INFINITY => "RLIMIT_MEMLOCK unlimited".to_string(),
        bytes => format!("RLIMIT_MEMLOCK {} KiB pinned at most", bytes >> 10),
    }
}

/// A random 64-bit value (secrets in inboxes and bind info), never 0, differing between
/// processes even where getrandom fails.
pub fn random_u64() -> u64 {
    let mut v = 0u64;
    unsafe { libc::getrandom(&mut v as *mut u64 as *mut _, 8, 0) };
    v ^ (std::process::id() as u64) << 32 ^ 1
}

pub fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let fd = new_fd(|| unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) });
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

/// Duplicates descriptor `fd` of process `pid` into this one (pidfd_getfd: Linux 5.6, same-user
/// ptrace rules).
pub fn pidfd_getfd(pid: u32, fd: u32) -> std::io::Result<OwnedFd> {
    let pidfd = pidfd_open(pid).ok_or_else(std::io::Error::last_os_error)?;
    let dup =
        new_fd(|| unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd as i32, 0) });
    if dup < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(unsafe { OwnedFd::from_raw_fd(dup as i32) })
}

/// Whether the process of `pidfd` has exited (its pidfd is readable).
pub fn exited(pidfd: &OwnedFd) -> bool {
    let mut p = libc::pollfd {
        fd: pidfd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut p, 1, 0) == 1 && p.revents & libc::POLLIN != 0 }
}

/// Whether process `pid` still exists (for kernels without pidfd).
pub fn alive(pid: u32) -> bool {
    let probed = unsafe { libc::kill(pid as libc::pid_t, 0) };
    probed == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// `len` values of `T`, zero until written, for a table sized for the most it may ever hold:
/// it comes from `calloc` (`alloc_zeroed`), which serves a block this large with fresh
/// anonymous pages it does not clear, so only the pages used become resident. (Heap memory,
/// not a private `mmap`, so leak checkers still see the pointers kept in it.)
pub struct ZeroedSlab<T> {
    ptr: std::ptr::NonNull<T>,
    len: usize,
}

// SAFETY: a slab is a plain array of `T`; sharing it is sharing `T`s.
unsafe impl<T: Send> Send for ZeroedSlab<T> {}
unsafe impl<T: Sync> Sync for ZeroedSlab<T> {}

impl<T> ZeroedSlab<T> {
    /// # Safety
    /// The all-zero bit pattern must be a valid `T` (atomics, integers, raw pointers).
    pub unsafe fn new(len: usize) -> std::io::Result<ZeroedSlab<T>> {
        let layout = Self::layout(len)?;
        let p = unsafe { std::alloc::alloc_zeroed(layout) } as *mut T;
        let ptr = std::ptr::NonNull::new(p).ok_or(std::io::ErrorKind::OutOfMemory)?;
        Ok(ZeroedSlab { ptr, len })
    }

    fn layout(len: usize) -> std::io::Result<std::alloc::Layout> {
        std::alloc::Layout::array::<T>(len.max(1))
            .map_err(|_| std::io::ErrorKind::OutOfMemory.into())
    }
}

impl<T> std::ops::Deref for ZeroedSlab<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> std::ops::DerefMut for ZeroedSlab<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T> Drop for ZeroedSlab<T> {
    fn drop(&mut self) {
        unsafe {
            std::ptr::drop_in_place(&mut **self as *mut [T]);
            let layout = Self::layout(self.len).expect("a layout that was made once");
            std::alloc::dealloc(self.ptr.as_ptr() as *mut u8, layout);
        }
    }
}

/// Runs `f` (which starts a thread of the library) with every asynchronous signal blocked, so
/// the thread inherits that mask: a signal meant for the application (a SIGTERM it reads from a
/// signalfd, a timer's SIGALRM, a Ctrl-C) is then never delivered to a thread of ours, where
/// its handler or default action would run behind the application's back. Faults (SIGSEGV,
/// SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) stay unblocked: a crash still reaches a handler
/// that reports it.
pub fn with_signals_blocked<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: sigset_t values initialised by sigfillset/sigemptyset, masks of this thread only.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        for fault in [
            libc::SIGSEGV,
            libc::SIGBUS,
            libc::SIGFPE,
            libc::SIGILL,
            libc::SIGTRAP,
            libc::SIGSYS,
        ] {
            libc::sigdelset(&mut all, fault);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut before);
        let r = f();
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        r
    }
}

/// Nanoseconds on the process's monotonic clock (from its first reading): the pacing machine's
/// ticks and the arrival log's times.
pub fn clock_ns() -> u64 {
    static EPOCH: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    monotonic_ns().saturating_sub(*EPOCH.get_or_init(monotonic_ns))
}

/// `CLOCK_MONOTONIC` (the clock `Instant` reads) in nanoseconds, read directly: going through
/// `Instant` (a `Duration` normalised, then a 128-bit product for its nanoseconds) cost a
/// network round more instructions than the read itself.
#[inline]
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // Cannot fail: the clock exists and `ts` is writable.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// A TCP socket's two queues as its kernel counts them (`tcp_queues`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpQueues {
    /// Bytes of the incoming stream its reader has taken so far.
    pub taken: u64,
    /// Bytes arrived and not read yet.
    pub unread: u64,
    /// Bytes written to it so far (sent or not).
    pub handed: u64,
}

/// The queues of TCP socket `fd`, without touching their bytes; None when `fd` is no TCP
/// socket (or its kernel, older than 4.19, counts no bytes).
pub fn tcp_queues(fd: std::os::fd::RawFd) -> Option<TcpQueues> {
    // SAFETY: tcp_info is plain integers; zero is a valid value of each.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` is writable for `len` bytes.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            &mut info as *mut libc::tcp_info as *mut libc::c_void,
            &mut len,
        )
    };
    let counted = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_retrans) + 8;
    if rc != 0 || (len as usize) < counted {
        return None;
    }
    let mut unread: libc::c_int = 0;
    // SAFETY: FIONREAD writes one int.
    if unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) } != 0 {
        return None;
    }
    let unread = unread.max(0) as u64;
    Some(TcpQueues {
        taken: info.tcpi_bytes_received.saturating_sub(unread),
        unread,
        handed: (info.tcpi_bytes_sent - info.tcpi_bytes_retrans) + info.tcpi_notsent_bytes as u64,
    })
}

/// Sleeps while `word` holds `expected`, at most `at_most`, until a `futex_wake_all` on it (or
/// a spurious wake-up: the caller looks again). Process-private.
pub fn futex_wait(
    word: &std::sync::atomic::AtomicU32,
    expected: u32,
    at_most: std::time::Duration,
) {
    let ts = libc::timespec {
        tv_sec: at_most.as_secs() as libc::time_t,
        tv_nsec: at_most.subsec_nanos() as libc::c_long,
    };
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT | libc::FUTEX_PRIVATE_FLAG,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every thread sleeping in `futex_wait` on `word`.
pub fn futex_wake_all(word: &std::sync::atomic::AtomicU32) {
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAKE | libc::FUTEX_PRIVATE_FLAG,
            i32::MAX,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set_errno(e: i32) {
        unsafe { *libc::__errno_location() = e };
    }

    fn soft_and_hard() -> (u64, u64) {
        fd_limits().unwrap()
    }

    fn errno() -> i32 {
        std::io::Error::last_os_error().raw_os_error().unwrap()
    }

    #[test]
    fn a_failure_other_than_running_out_keeps_its_errno_and_the_limit() {
        let before = soft_and_hard();
        let mut calls = 0;
        let fd = new_fd(|| {
            calls += 1;
            set_errno(libc::EBADF);
            -1
        });
        assert_eq!((fd, errno(), calls), (-1, libc::EBADF, 1));
        assert_eq!(soft_and_hard(), before);
    }

    #[test]
    fn a_table_with_room_keeps_its_limit() {
        let before = soft_and_hard();
        fd_headroom(16);
        assert_eq!(soft_and_hard(), before);
    }

    /// The limit is the process's: this raises it (other tests only gain room), or, where the
    /// soft limit is the hard one already, finds it cannot.
    #[test]
    fn running_out_raises_the_soft_limit_and_makes_the_fd_again() {
        let (soft, hard) = soft_and_hard();
        let mut calls = 0;
        let fd = new_fd(|| {
            calls += 1;
            if calls == 1 {
                set_errno(libc::EMFILE);
                -1
            } else {
                7
            }
        });
        if soft < hard {
            assert_eq!((fd, calls), (7, 2));
            assert_eq!(soft_and_hard(), ((soft * 2).max(64).min(hard), hard));
        } else {
            assert_eq!((fd, errno(), calls), (-1, libc::EMFILE, 1));
        }
    }
}
