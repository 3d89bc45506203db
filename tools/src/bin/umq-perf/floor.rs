//! The floor under any shared-memory ping-pong on this machine, measured in the same run: two
//! processes bounce `size` bytes through a shared mapping with nothing but a stamp word, a copy
//! in and a copy out. The messages take the same cache lines ours do (a header line with the
//! stamp, then the payload lines), and for a message of one payload line the waiting side loads
//! that line beside the stamp as our ring does, so what umq-perf measures above this is software.
//!
//! A second floor moves the bytes the other way one-copy transports between process-private
//! buffers do (libfabric's shm provider for large messages, through CMA): one
//! `process_vm_writev` from the sender's buffer straight into the receiver's, then the stamp.
//! Where it sits above our two-copy ring, a kernel copy cannot make process-pool messages faster.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

const LINE: usize = 64;

/// One direction's mailbox: a stamp line, then the payload.
struct Mailbox {
    base: *mut u8,
}

impl Mailbox {
    fn stamp(&self) -> &AtomicU64 {
        unsafe { &*(self.base as *const AtomicU64) }
    }

    fn payload(&self) -> *mut u8 {
        unsafe { self.base.add(LINE) }
    }

    fn send(&self, i: u64, from: &[u8]) {
        unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), self.payload(), from.len()) };
        self.stamp().store(i, Ordering::Release);
    }

    fn receive(&self, i: u64, into: &mut [u8]) {
        // Only a message of one payload line: a longer one is left to the hardware prefetcher
        // (loading its first line too made the 4 KiB floor slower, 1180 against 1110 ns).
        self.wait(i, into.len() <= LINE);
        unsafe { std::ptr::copy_nonoverlapping(self.payload(), into.as_mut_ptr(), into.len()) };
    }

    /// Spins on the stamp; with `touch_payload`, loads the payload line beside it, as our
    /// ring's empty polls do, so the two lines cross between the cores at once.
    fn wait(&self, i: u64, touch_payload: bool) {
        let payload = unsafe { &*(self.payload() as *const AtomicU64) };
        while self.stamp().load(Ordering::Acquire) != i {
            if touch_payload {
                std::hint::black_box(payload.load(Ordering::Relaxed));
            }
            std::hint::spin_loop();
        }
    }
}

/// How the floor moves the bytes.
#[derive(Clone, Copy)]
pub enum Copy {
    /// Into the shared mapping, and out of it on the other side.
    Twice,
    /// Once, by the kernel, into the peer's own buffer (`process_vm_writev`).
    Kernel,
}

/// `buf` into the same buffer of process `pid` (a fork of ours: it is at the same address).
fn write_into_peer(pid: libc::pid_t, buf: &[u8]) -> Result<(), String> {
    let iov = libc::iovec {
        iov_base: buf.as_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let n = unsafe { libc::process_vm_writev(pid, &iov, 1, &iov, 1, 0) };
    if n == buf.len() as isize {
        Ok(())
    } else {
        Err(format!(
            "process_vm_writev: {}",
            std::io::Error::last_os_error()
        ))
    }
}

/// Sends `buf` as message `i` through `out` (to process `peer`, for a kernel copy).
fn deliver(
    how: Copy,
    peer: libc::pid_t,
    i: u64,
    buf: &mut [u8],
    out: &Mailbox,
) -> Result<(), String> {
    match how {
        Copy::Twice => out.send(i, buf),
        Copy::Kernel => {
            write_into_peer(peer, buf)?;
            // Only the answer brings the byte back, so the last check below means something.
            if let Some(b) = buf.first_mut() {
                *b = 0;
            }
            out.stamp().store(i, Ordering::Release);
        }
    }
    Ok(())
}

/// Waits for message `i` in `from`; it ends up in `buf` (a kernel copy put it there already).
fn take(how: Copy, i: u64, buf: &mut [u8], from: &Mailbox) {
    match how {
        Copy::Twice => from.receive(i, buf),
        // The kernel wrote the bytes into our buffer: the mailbox carries only the stamp.
        Copy::Kernel => from.wait(i, false),
    }
}

/// Mean half round trip (ns) of `iters` ping-pongs of `size` bytes between this process and a
/// forked child, after a tenth as many for warm-up.
pub fn half_rtt_ns(size: u32, iters: u64, how: Copy) -> Result<f64, String> {
    let size = size as usize;
    let span = LINE + size.next_multiple_of(LINE);
    let len = 2 * span;
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return Err(format!("mmap: {}", std::io::Error::last_os_error()));
    }
    let ping = Mailbox {
        base: base as *mut u8,
    };
    let pong = Mailbox {
        base: unsafe { (base as *mut u8).add(span) },
    };
    let warm = (iters / 10).max(100);
    let total = warm + iters;
    let mut buf = vec![0u8; size];
    // The child only spins, copies and exits: nothing that could need a lock another thread
    // of this process held at the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork: {}", std::io::Error::last_os_error()));
    }
    if pid == 0 {
        let parent = unsafe { libc::getppid() };
        for i in 1..=total {
            take(how, i, &mut buf, &ping);
            if deliver(how, parent, i, &mut buf, &pong).is_err() {
                unsafe { libc::_exit(1) };
            }
        }
        unsafe { libc::_exit(0) };
    }
    let mut start = Instant::now();
    let mut failed = None;
    for i in 1..=total {
        if i == warm + 1 {
            start = Instant::now();
        }
        if let Some(b) = buf.first_mut() {
            *b = i as u8;
        }
        if let Err(e) = deliver(how, pid, i, &mut buf, &ping) {
            failed = Some(e);
            unsafe { libc::kill(pid, libc::SIGKILL) };
            break;
        }
        take(how, i, &mut buf, &pong);
    }
    let ns = start.elapsed().as_nanos() as f64 / iters as f64 / 2.0;
    let mut status = 0;
    unsafe {
        libc::waitpid(pid, &mut status, 0);
        libc::munmap(base, len);
    }
    if let Some(e) = failed {
        return Err(e);
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        return Err(format!("the floor's echo process failed (status {status})"));
    }
    if buf.first() != Some(&(total as u8)) {
        return Err("the floor's echo came back wrong".into());
    }
    Ok(ns)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_echoes_every_size() {
        for size in [1, 64, 100, 4096] {
            let ns = half_rtt_ns(size, 1000, Copy::Twice).unwrap();
            assert!(ns.is_finite() && ns > 0.0, "{size} B: {ns} ns");
        }
    }

    #[test]
    fn the_kernel_copy_floor_echoes_or_says_why_not() {
        // Where ptrace rules forbid process_vm_writev, the floor names the error instead.
        for size in [64, 16384] {
            match half_rtt_ns(size, 200, Copy::Kernel) {
                Ok(ns) => assert!(ns.is_finite() && ns > 0.0, "{size} B: {ns} ns"),
                Err(e) => assert!(e.starts_with("process_vm_writev"), "{e}"),
            }
        }
    }
}
