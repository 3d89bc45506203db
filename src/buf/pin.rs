//! A slot's word in the access table (`access`): whether the slot is handed out (`LIVE`) and,
//! below it, how many peers are copying into or out of it now. The owner and its peers run
//! these few steps on the shared word; `tests/loom_pin.rs` compiles this file unchanged
//! against loom and checks under every interleaving that a copy which pinned the slot never
//! overlaps the slot's next owner, and that none starts once the free returned.

use super::pin_sync::{AtomicU32, Ordering};

/// The slot is handed out. The bits below count pins.
pub const LIVE: u32 = 1 << 31;

/// A peer, before its copy: pins the slot if it is handed out. False when it is not (or its
/// pin count is full), and then nothing changed.
pub fn try_pin(word: &AtomicU32) -> bool {
    let mut w = word.load(Ordering::Relaxed);
    loop {
        if w & LIVE == 0 || w & !LIVE == !LIVE {
            return false;
        }
        match word.compare_exchange_weak(w, w + 1, Ordering::AcqRel, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(now) => w = now,
        }
    }
}

/// A peer, after its copy: its bytes are in before the owner can see the pin gone.
pub fn unpin(word: &AtomicU32) {
    word.fetch_sub(1, Ordering::Release);
}

/// A peer that holds a pin on the slot, before another copy under it: whether the slot is
/// still handed out. One load instead of a second pin: the pin held keeps `LIVE` from coming
/// back (a slot is handed out again only once unpinned), and a free that returned before this
/// load is seen by it, as by `try_pin`.
pub fn still_live(word: &AtomicU32) -> bool {
    word.load(Ordering::Acquire) & LIVE != 0
}

/// The owner frees the slot: no pin succeeds from here on.
pub fn revoke(word: &AtomicU32) {
    word.fetch_and(!LIVE, Ordering::AcqRel);
}

/// Whether a copy still holds the slot (the owner waits for none before handing it out again:
/// the acquire pairs with `unpin`, so the copy's bytes are behind it).
pub fn pinned(word: &AtomicU32) -> bool {
    word.load(Ordering::Acquire) & !LIVE != 0
}

/// The owner hands the slot out (it is not pinned: `pinned` said so).
pub fn hand_out(word: &AtomicU32) {
    word.fetch_or(LIVE, Ordering::AcqRel);
}
