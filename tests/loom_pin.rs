//! The access table's slot word (`src/buf/pin.rs`, compiled here unchanged against loom's
//! atomics) under every interleaving loom can produce: a peer's copy into a slot (one-sided
//! WRITE) races the owner's free of the slot and the slot's next owner, who writes it.
//! The copy either pinned the slot before the free and is over before the next owner writes,
//! or it never starts; and it never starts after the free returned. The slot's bytes are a
//! loom cell, so any overlap of the two writes is reported as a data race.

/// Stands in for the `pin_sync` module of `src/buf/mod.rs`.
mod pin_sync {
    pub use loom::sync::atomic::{AtomicU32, Ordering};
}

#[allow(dead_code)]
#[path = "../src/buf/pin.rs"]
mod pin;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::thread;

struct Slot {
    word: AtomicU32,
    bytes: UnsafeCell<u32>,
    freed: AtomicBool,
}

// SAFETY: `bytes` is written under the pin protocol, which this test checks.
unsafe impl Sync for Slot {}

const PEER: u32 = 1;
const NEXT_OWNER: u32 = 2;

/// A handed-out slot that `peer` copies into on another thread while the owner frees it,
/// waits for the pins as an allocation does, and its next owner writes it; checks the next
/// owner's bytes survive. (The next owner's own hand-out, which lets new copies pin the slot
/// under the same token, as RDMA lets a WRITE reach a registered region, is left out: what is
/// checked is that no copy from before the free reaches the next owner.)
fn race_a_copy_with_the_free(peer: fn(&Slot)) {
    loom::model(move || {
        let slot = Arc::new(Slot {
            word: AtomicU32::new(0),
            bytes: UnsafeCell::new(0),
            freed: AtomicBool::new(false),
        });
        pin::hand_out(&slot.word);
        let copier = {
            let slot = slot.clone();
            thread::spawn(move || peer(&slot))
        };
        pin::revoke(&slot.word);
        slot.freed.store(true, Ordering::SeqCst);
        while pin::pinned(&slot.word) {
            thread::yield_now();
        }
        slot.bytes.with_mut(|b| unsafe { *b = NEXT_OWNER });
        copier.join().unwrap();
        assert_eq!(slot.bytes.with(|b| unsafe { *b }), NEXT_OWNER);
    });
}

#[test]
fn a_copy_never_reaches_the_next_owner_and_none_starts_after_the_free() {
    race_a_copy_with_the_free(|slot| {
        let after_free = slot.freed.load(Ordering::SeqCst);
        if !pin::try_pin(&slot.word) {
            return;
        }
        assert!(!after_free, "pinned after the free returned");
        slot.bytes.with_mut(|b| unsafe { *b = PEER });
        pin::unpin(&slot.word);
    });
}

/// A peer that pinned the slot for one copy makes a second under the same pin once
/// `still_live` says the slot is still handed out (a post's WRs to one buffer): that copy too
/// never reaches the next owner, and never starts after the free returned.
#[test]
fn a_second_copy_under_a_held_pin_obeys_the_same_rules() {
    race_a_copy_with_the_free(|slot| {
        if !pin::try_pin(&slot.word) {
            return;
        }
        slot.bytes.with_mut(|b| unsafe { *b = PEER });
        let after_free = slot.freed.load(Ordering::SeqCst);
        if pin::still_live(&slot.word) {
            assert!(!after_free, "a second copy after the free returned");
            slot.bytes.with_mut(|b| unsafe { *b = PEER + 10 });
        }
        pin::unpin(&slot.word);
    });
}

/// Two peers copying at once both hold pins; the owner waits for both.
#[test]
fn the_owner_waits_for_every_pin() {
    loom::model(|| {
        let word = Arc::new(AtomicU32::new(0));
        pin::hand_out(&word);
        let peers: Vec<_> = (0..2)
            .map(|_| {
                let word = word.clone();
                thread::spawn(move || {
                    if pin::try_pin(&word) {
                        pin::unpin(&word);
                    }
                })
            })
            .collect();
        pin::revoke(&word);
        while pin::pinned(&word) {
            thread::yield_now();
        }
        assert_eq!(word.load(Ordering::SeqCst), 0, "free and unpinned");
        for p in peers {
            p.join().unwrap();
        }
        assert!(!pin::try_pin(&word), "revoked");
    });
}
