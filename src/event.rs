//! Wake-up file descriptors and the async event queue.

use crate::abi::errno::*;
use crate::abi::types::*;
use crate::app_sync::{AppGuard, AppMutex};
use std::collections::VecDeque;
use std::os::fd::RawFd;

/// A non-blocking eventfd: `signal` adds to its counter, `take` reads and clears it, and the fd
/// is readable (for poll/epoll) while the counter is non-zero.
pub struct EventFd {
    fd: RawFd,
}

impl EventFd {
    pub fn new(semaphore: bool) -> Result<EventFd, i32> {
        let flags = libc::EFD_NONBLOCK
            | libc::EFD_CLOEXEC
            | if semaphore { libc::EFD_SEMAPHORE } else { 0 };
        let fd = crate::os::new_fd(|| unsafe { libc::eventfd(0, flags) }.into()) as RawFd;
        if fd < 0 {
            return Err(-UMQ_ERR_ENOMEM);
        }
        Ok(EventFd { fd })
    }

    /// Takes ownership of an eventfd opened elsewhere (for example duplicated from another
    /// process); the caller has checked that it is one.
    pub fn from_owned(fd: std::os::fd::OwnedFd) -> EventFd {
        EventFd {
            fd: std::os::fd::IntoRawFd::into_raw_fd(fd),
        }
    }

    pub fn fd(&self) -> RawFd {
        self.fd
    }

    pub fn signal(&self) {
        let one: u64 = 1;
        // A full counter (2^64 - 2) cannot happen in practice; a failed write leaves it readable.
        unsafe { libc::write(self.fd, &one as *const u64 as *const _, 8) };
    }

    /// Adds `n` to the counter.
    pub fn signal_by(&self, n: u64) {
        unsafe { libc::write(self.fd, &n as *const u64 as *const _, 8) };
    }

    /// Reads the counter (or one unit in semaphore mode); 0 when nothing is pending.
    pub fn take(&self) -> u64 {
        let mut v: u64 = 0;
        let n = unsafe { libc::read(self.fd, &mut v as *mut u64 as *mut _, 8) };
        if n == 8 { v } else { 0 }
    }

    /// Waits until readable: timeout in ms, 0 = do not wait, -1 = forever. Returns whether it is.
    /// A signal handled meanwhile does not end the wait, nor start its time again: a program
    /// with a periodic signal (a profiler's timer) still sees its timeout.
    pub fn wait(&self, timeout_ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd,
            events: libc::POLLIN,
            revents: 0,
        };
        let deadline = (timeout_ms > 0).then(|| {
            std::time::Instant::now() + std::time::Duration::from_millis(timeout_ms as u64)
        });
        let mut left = timeout_ms;
        loop {
            let r = unsafe { libc::poll(&mut p, 1, left) };
            if r >= 0 {
                return r > 0;
            }
            if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return false;
            }
            if let Some(deadline) = deadline {
                let rest = deadline.saturating_duration_since(std::time::Instant::now());
                // Rounded up: a wait cut short by less than a millisecond still sleeps it.
                left = rest.as_micros().div_ceil(1000) as i32;
            }
        }
    }
}

/// What a forwarding channel runs in place of signalling its own fd.
pub type Forward = Box<dyn Fn() + Send + Sync>;

/// An interrupt channel: an eventfd armed by a rearm and signalled by the next completion
/// after it (the `ibv_req_notify_cq` contract), with the count of events acknowledged. A
/// forwarding channel stays armed and hands each completion on (a logic queue's sends wake
/// its transport resource's channel): the check costs the usual channels nothing on the path
/// where nothing is armed.
pub struct Channel {
    fd: EventFd,
    armed: std::sync::atomic::AtomicBool,
    pub acked: std::sync::atomic::AtomicU64,
    forward: Option<Forward>,
}

impl Channel {
    pub fn new() -> Result<Channel, i32> {
        Ok(Channel {
            fd: EventFd::new(false)?,
            armed: std::sync::atomic::AtomicBool::new(false),
            acked: std::sync::atomic::AtomicU64::new(0),
            forward: None,
        })
    }

    pub fn forwarding(forward: Forward) -> Result<Channel, i32> {
        Ok(Channel {
            armed: std::sync::atomic::AtomicBool::new(true),
            forward: Some(forward),
            ..Channel::new()?
        })
    }

    pub fn fd(&self) -> &EventFd {
        &self.fd
    }

    pub fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::Release);
    }

    #[inline(always)]
    pub fn fire_if_armed(&self) {
        if self.armed.swap(false, std::sync::atomic::Ordering::AcqRel) {
            self.fire();
        }
    }

    #[inline(never)]
    fn fire(&self) {
        match &self.forward {
            None => self.fd.signal(),
            Some(f) => {
                self.arm();
                f();
            }
        }
    }
}

impl Drop for EventFd {
    fn drop(&mut self) {
        unsafe { libc::close(self.fd) };
    }
}

/// Events kept unread at most. A program that never reads them (nothing obliges it to) loses
/// the oldest, not memory: one event per failed queue would otherwise pile up for as long as
/// the process runs.
pub const PENDING_MAX: usize = 4096;

/// Queue errors and other asynchronous events, readable through one fd per process (its
/// counter is the number of events pending).
pub struct AsyncEvents {
    fd: EventFd,
    pending: AppMutex<Pending>,
}

#[derive(Default)]
struct Pending {
    events: VecDeque<umq_async_event_t>,
    /// The oldest events dropped to make room since the process started.
    dropped: u64,
}

// Events are plain data; `priv` is always NULL in the events we raise.
unsafe impl Send for AsyncEvents {}
unsafe impl Sync for AsyncEvents {}

impl AsyncEvents {
    pub fn new() -> Result<AsyncEvents, i32> {
        Ok(AsyncEvents {
            fd: EventFd::new(true)?,
            pending: AppMutex::new(Pending::default()),
        })
    }

    pub fn fd(&self) -> RawFd {
        self.fd.fd()
    }

    pub fn raise(
        &self,
        event_type: umq_async_event_type_t,
        umqh: u64,
        trans_mode: umq_trans_mode_t,
        code: i32,
    ) {
        self.raise_if(event_type, umqh, trans_mode, code, || true);
    }

    /// Raises the event when `change` (run under the events' lock) says so. A state change made
    /// in `change` and its event are then seen together: whoever saw the new state and then
    /// reads the events finds this one (the read waits for the lock), and whoever read the
    /// event sees the state. Returns what `change` said.
    pub fn raise_if(
        &self,
        event_type: umq_async_event_type_t,
        umqh: u64,
        trans_mode: umq_trans_mode_t,
        code: i32,
        change: impl FnOnce() -> bool,
    ) -> bool {
        let mut ev: umq_async_event_t = unsafe { std::mem::zeroed() };
        ev.trans_info.trans_mode = trans_mode;
        ev.element.umqh = umqh;
        ev.event_type = event_type;
        ev.original_code = code;
        let mut p = self.lock();
        if !change() {
            return false;
        }
        if p.events.len() == PENDING_MAX {
            // The count of pending events, and so the fd's counter, stays as it is.
            p.events.pop_front();
            p.dropped += 1;
            if p.dropped == 1 {
                crate::log_warn!(
                    "umq",
                    "{PENDING_MAX} async events unread: the oldest are dropped from now on (read them with umq_get_async_event)"
                );
            }
        } else {
            self.fd.signal();
        }
        p.events.push_back(ev);
        true
    }

    pub fn next(&self) -> Option<umq_async_event_t> {
        let ev = self.lock().events.pop_front()?;
        self.fd.take();
        Some(ev)
    }

    /// Events dropped unread because `PENDING_MAX` were pending.
    pub fn dropped(&self) -> u64 {
        self.lock().dropped
    }

    fn lock(&self) -> AppGuard<'_, Pending> {
        self.pending.lock()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, mpsc};

    extern "C" fn ignore(_: libc::c_int) {}

    /// A wait with nothing to wake it ends at its timeout though signals keep interrupting it:
    /// it returns while a thread is still signalling it, a millisecond apart, for up to three
    /// seconds, thirty times its timeout.
    #[test]
    fn a_timed_wait_ends_on_time_under_a_stream_of_signals() {
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = ignore as extern "C" fn(libc::c_int) as usize;
            assert_eq!(
                libc::sigaction(libc::SIGUSR2, &act, std::ptr::null_mut()),
                0
            );
        }
        let fd = EventFd::new(false).unwrap();
        let waiting = Arc::new(AtomicBool::new(true));
        let (tell, waiter) = mpsc::channel();
        let still = waiting.clone();
        let signaller = std::thread::spawn(move || {
            let target: libc::pthread_t = waiter.recv().unwrap();
            let mut sent = 0;
            while still.load(Ordering::SeqCst) && sent < 3000 {
                unsafe { libc::pthread_kill(target, libc::SIGUSR2) };
                sent += 1;
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
            sent
        });
        tell.send(unsafe { libc::pthread_self() }).unwrap();
        assert!(!fd.wait(100), "nothing was signalled on the fd");
        waiting.store(false, Ordering::SeqCst);
        let sent = signaller.join().unwrap();
        assert!(sent < 3000, "the wait outlasted {sent} signals");
    }

    /// A program that never reads its events keeps the newest `PENDING_MAX`, in order, and the
    /// fd counts exactly those.
    #[test]
    fn unread_events_are_bounded_and_the_oldest_go_first() {
        let events = AsyncEvents::new().unwrap();
        let extra = 10;
        for h in 0..(PENDING_MAX + extra) as u64 {
            events.raise(UMQ_EVENT_QH_ERR, h, UMQ_TRANS_MODE_UB, 0);
        }
        assert_eq!(events.dropped(), extra as u64);
        for h in extra as u64..(PENDING_MAX + extra) as u64 {
            assert!(
                events.fd.wait(0),
                "the fd is readable while events are pending"
            );
            let ev = events.next().unwrap();
            assert_eq!(unsafe { ev.element.umqh }, h);
        }
        assert!(events.next().is_none());
        assert!(
            !events.fd.wait(0),
            "the fd's counter matched the events pending"
        );
    }
}
