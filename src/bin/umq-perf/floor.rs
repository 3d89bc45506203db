//! The floor under any shared-memory ping-pong on this machine, measured in the same run: two
//! processes bounce `size` bytes through a shared mapping with nothing but a stamp word, a copy
//! in and a copy out. The messages take the same cache lines ours do (a header line with the
//! stamp, then the payload lines), so what umq-perf measures above this is software.

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
        while self.stamp().load(Ordering::Acquire) != i {
            std::hint::spin_loop();
        }
        unsafe { std::ptr::copy_nonoverlapping(self.payload(), into.as_mut_ptr(), into.len()) };
    }
}

/// Mean half round trip (ns) of `iters` ping-pongs of `size` bytes between this process and a
/// forked child, after a tenth as many for warm-up.
pub fn half_rtt_ns(size: u32, iters: u64) -> Result<f64, String> {
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
        for i in 1..=total {
            ping.receive(i, &mut buf);
            pong.send(i, &buf);
        }
        unsafe { libc::_exit(0) };
    }
    let mut start = Instant::now();
    for i in 1..=total {
        if i == warm + 1 {
            start = Instant::now();
        }
        if let Some(b) = buf.first_mut() {
            *b = i as u8;
        }
        ping.send(i, &buf);
        pong.receive(i, &mut buf);
    }
    let ns = start.elapsed().as_nanos() as f64 / iters as f64 / 2.0;
    let mut status = 0;
    unsafe {
        libc::waitpid(pid, &mut status, 0);
        libc::munmap(base, len);
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
    #[test]
    fn the_floor_echoes_every_size() {
        for size in [1, 64, 100, 4096] {
            let ns = super::half_rtt_ns(size, 1000).unwrap();
            assert!(ns.is_finite() && ns > 0.0, "{size} B: {ns} ns");
        }
    }
}
