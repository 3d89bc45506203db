//! Whether the owner of an inbox is still in the binding its peer joined.
//!
//! The owner marks itself *closed* when it unbinds or is destroyed; the peer then stops, and
//! fails what it had not sent. A flag alone is not enough: once the owner hands out its next
//! bind info the mark is lifted, and a peer of the old binding that was descheduled across the
//! whole unbind would find the inbox open again and go on writing into it (ring entries,
//! placed messages) as if nothing happened. So each reopening also counts a new *binding*; a
//! peer remembers the one it joined, and the owner has left it when the mark is up or the
//! count moved on.

use super::sync::{AtomicU64, Ordering};

/// One word, so that a peer's look at it costs what a look at a flag did: the binding count
/// times two, plus one while the owner is closed.
#[repr(C)]
#[derive(Default)]
pub struct Presence {
    word: AtomicU64,
}

const CLOSED: u64 = 1;
const ONE_BINDING: u64 = 2;

impl Presence {
    /// Owner: leaves the current binding. Whoever must see this before the owner goes on
    /// (placement, by-reference copies) pairs it with a fence on both sides.
    pub fn leave(&self) {
        let w = self.word.load(Ordering::Relaxed);
        self.word.store(w | CLOSED, Ordering::Release);
    }

    /// Owner: opens a new binding after one ended; nothing while the inbox is open already, so
    /// bind info handed out twice names one binding.
    pub fn reopen(&self) {
        let w = self.word.load(Ordering::Relaxed);
        if w & CLOSED != 0 {
            let next = (w & !CLOSED).wrapping_add(ONE_BINDING);
            self.word.store(next, Ordering::Release);
        }
    }

    /// Peer, when it joins: the binding it joins (one the owner has already left, when the
    /// bind info was stale).
    pub fn binding(&self) -> u64 {
        self.word.load(Ordering::Acquire) & !CLOSED
    }

    /// Peer: whether the owner has left binding `joined`.
    pub fn left(&self, joined: u64) -> bool {
        self.word.load(Ordering::Acquire) != joined
    }
}
