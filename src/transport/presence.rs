//! Whether the owner of an inbox is still in the binding its peer joined.
//!
//! The owner marks itself *closed* when it unbinds or is destroyed; the peer then stops, and
//! fails what it had not sent. A flag alone is not enough: once the owner hands out its next
//! bind info the mark is lifted, and a peer of the old binding that was descheduled across the
//! whole unbind would find the inbox open again and go on writing into it (ring entries,
//! placed messages) as if nothing happened. So each reopening also counts a new *binding*; a
//! peer remembers the one it joined, and the owner has left it when the mark is up or the
//! count moved on.

use super::sync::{AtomicU32, Ordering};

#[repr(C)]
#[derive(Default)]
pub struct Presence {
    closed: AtomicU32,
    binding: AtomicU32,
}

impl Presence {
    /// Owner: leaves the current binding. Whoever must see this before the owner goes on
    /// (placement, by-reference copies) pairs it with a fence on both sides.
    pub fn leave(&self) {
        self.closed.store(1, Ordering::Release);
    }

    /// Owner: opens a new binding after one ended; nothing while the inbox is open already, so
    /// bind info handed out twice names one binding.
    pub fn reopen(&self) {
        if self.closed.load(Ordering::Relaxed) != 0 {
            let next = self.binding.load(Ordering::Relaxed).wrapping_add(1);
            self.binding.store(next, Ordering::Relaxed);
            // Release: a peer that sees the mark lifted also sees the new count.
            self.closed.store(0, Ordering::Release);
        }
    }

    /// Peer, when it joins: the binding it joins.
    pub fn binding(&self) -> u32 {
        self.binding.load(Ordering::Acquire)
    }

    /// Peer: whether the owner has left binding `joined`.
    pub fn left(&self, joined: u32) -> bool {
        self.closed.load(Ordering::Acquire) != 0 || self.binding.load(Ordering::Relaxed) != joined
    }
}
