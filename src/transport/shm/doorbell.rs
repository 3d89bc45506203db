//! Waking an interrupt-mode owner: its progress thread sleeps on an eventfd the peer
//! duplicated at bind, and the peer rings it only after a change the owner waits for.

use super::segment::raw;
use super::*;
use crate::transport::call_bell::CallBell;

/// How the peer wakes an interrupt-mode owner that has nothing to do: the owner's progress
/// thread sleeps on an eventfd, which the peer duplicated at bind (`pidfd_getfd`).
#[repr(C)]
pub(super) struct Doorbell {
    /// The owner's eventfd number, `NO_DOORBELL` for a polling-mode owner.
    pub(super) fd: AtomicU32,
    /// Set by the owner just before its progress thread sleeps; the peer that clears it rings.
    pub(super) armed: AtomicU32,
    /// Set by the peer once it holds the eventfd: the owner may then sleep long.
    pub(super) peer_rings: AtomicU32,
}

pub(super) const NO_DOORBELL: u32 = u32::MAX;

/// How a queue's inbox is rung (`Segment::doorbell`).
pub(super) enum Bell {
    /// An eventfd: ours, which our progress thread sleeps on, or our duplicate of the peer's.
    Event(EventFd),
    /// The peer's doorbell could not be duplicated: our process's call bell rings the peer's
    /// process's instead (`ring_by_call`).
    Call(std::sync::Arc<CallBell>),
}

impl Bell {
    pub(super) fn event(&self) -> Option<&EventFd> {
        match self {
            Bell::Event(e) => Some(e),
            Bell::Call(_) => None,
        }
    }
}

/// The tests' stand-in for a kernel that refuses `pidfd_getfd` (Yama's `ptrace_scope` 1 to a
/// peer that has not named us yet, a seccomp filter): while set, no doorbell is duplicated.
#[cfg(feature = "fuzzing")]
pub static REFUSE_DOORBELLS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Duplicates the peer's doorbell eventfd into this process. None when the kernel refuses (no
/// pidfd_getfd before Linux 5.6, or ptrace rules: our call bell then rings the peer's,
/// `Segment::ring_owner_by_call`), or when the fd is not a non-blocking eventfd: a write to it
/// must never block or reach anything else of the peer's.
pub(super) fn peer_doorbell(pid: u32, fd: u32) -> Option<EventFd> {
    #[cfg(feature = "fuzzing")]
    if REFUSE_DOORBELLS.load(Ordering::Relaxed) {
        return None;
    }
    let dup = crate::os::pidfd_getfd(pid, fd)
        .inspect_err(|e| {
            crate::log_info!(
                "umq_bind",
                "cannot take the peer's doorbell ({e}): our call bell rings its interrupt-mode \
                 queue instead"
            )
        })
        .ok()?;
    let target = std::fs::read_link(format!("/proc/self/fd/{}", raw(&dup))).ok()?;
    let flags = unsafe { libc::fcntl(raw(&dup), libc::F_GETFL) };
    (target.as_os_str() == "anon_inode:[eventfd]" && flags >= 0 && flags & libc::O_NONBLOCK != 0)
        .then(|| EventFd::from_owned(dup))
}

/// Rings an interrupt-mode peer that sleeps when we changed what it waits for since we last
/// looked: an entry in its ring (a WR, a window update, a READ response), or our progress on
/// its entries (ring room, executed WRs). A round that changed nothing never rings, so two
/// sleeping progress threads cannot wake each other forever. True when it rang the peer's
/// call bell (`ring_by_call`), which the round counts.
#[inline(always)]
pub(super) fn ring_if_changed(mine: &Segment, peer: &Segment) -> bool {
    let Some(bell) = peer.doorbell.as_ref() else {
        return false;
    };
    let now = [
        peer.inbox().prod.0.load(Ordering::Relaxed),
        mine.inbox().cons.0.load(Ordering::Relaxed),
    ];
    if now[0] == peer.rung_at[0].load(Ordering::Relaxed)
        && now[1] == peer.rung_at[1].load(Ordering::Relaxed)
    {
        return false;
    }
    peer.rung_at[0].store(now[0], Ordering::Relaxed);
    peer.rung_at[1].store(now[1], Ordering::Relaxed);
    std::sync::atomic::fence(Ordering::SeqCst);
    let armed = &peer.inbox().doorbell.0.armed;
    // The call bell rings only a peer that published one: till then the flag stays set.
    let port = match bell {
        Bell::Event(_) => None,
        Bell::Call(_) => match peer.call_port() {
            None => return false,
            port => port,
        },
    };
    if armed.load(Ordering::Relaxed) == 0 || armed.swap(0, Ordering::AcqRel) == 0 {
        return false;
    }
    match bell {
        Bell::Event(e) => {
            e.signal();
            false
        }
        Bell::Call(c) => port.is_some_and(|port| ring_by_call(c, peer, port)),
    }
}

/// Rings the peer's call bell at `port` for its queue (tag: its inbox's secret) in place of a
/// doorbell we could not duplicate: its thread serves the queue at once, and again until it has
/// taken what we wrote (the ring's `upto`).
#[cold]
#[inline(never)]
fn ring_by_call(bell: &CallBell, peer: &Segment, port: u16) -> bool {
    let (written, _) = peer.produced_and_released();
    let at = std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), port);
    bell.ring(at, peer.secret(), written);
    true
}

impl Segment {
    /// Ours, before the progress thread's last look and sleep: the next change the peer
    /// makes rings.
    pub fn arm_doorbell(&self) {
        self.inbox().doorbell.0.armed.store(1, Ordering::Relaxed);
        // Pairs with the peer's fence in `ring_if_changed`: either our look sees its entry or
        // it sees the flag.
        std::sync::atomic::fence(Ordering::SeqCst);
    }

    /// Ours: the eventfd to sleep on (readable once rung), and whether the peer can ring it.
    pub fn doorbell(&self) -> Option<(i32, bool)> {
        let fd = self.doorbell.as_ref()?.event()?.fd();
        let heard = self.inbox().doorbell.0.peer_rings.load(Ordering::Acquire) != 0;
        Some((fd, heard))
    }
}
