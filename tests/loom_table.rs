//! The handle table's lock-free lookups (`src/hazard/slot.rs` and the hazard words of
//! `src/hazard/word.rs`, both compiled here unchanged against loom's atomics, `Arc` and
//! scheduler) under every interleaving loom can produce: a lookup that races a removal runs on
//! the entry before it is dropped or finds nothing, never the entry after its drop nor the
//! slot's next occupant; of two removals one takes the entry. An entry's bytes are a loom cell
//! that its drop writes, so a lookup reading them after the drop began is reported as a data
//! race, on top of the assertions.
//!
//! The library's fence pair is asymmetric (a compiler fence in lookups, `membarrier` in
//! removals, which loom cannot run); here both sides take the full fence they fall back to
//! where the kernel refuses `membarrier`, which is what the expedited barrier stands for.

/// Stands in for the `word_sync` module of `src/hazard/mod.rs`.
mod word_sync {
    pub use loom::sync::atomic::{AtomicUsize, Ordering};
    pub use loom::thread::yield_now;

    pub fn light_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }

    pub fn heavy_fence() {
        loom::sync::atomic::fence(Ordering::SeqCst);
    }
}

#[allow(dead_code)]
#[path = "../src/hazard/word.rs"]
mod word;

/// Stands in for the `slot_sync` module of `src/hazard/mod.rs`: loom's atomics and `Arc`,
/// and a hazard block for each thread of a model.
mod slot_sync {
    pub use loom::sync::Arc;
    pub use loom::sync::atomic::{AtomicPtr, AtomicU32, Ordering};

    pub mod hazard {
        use crate::word::{self, Published, Words};
        use loom::sync::atomic::{AtomicUsize, Ordering};

        /// The most threads a model runs.
        const THREADS: usize = 3;

        loom::lazy_static! {
            static ref BLOCKS: [Words; THREADS] = Default::default();
            static ref NEXT: AtomicUsize = AtomicUsize::new(0);
        }

        loom::thread_local! {
            static MINE: usize = NEXT.fetch_add(1, Ordering::Relaxed);
        }

        fn mine() -> &'static Words {
            &BLOCKS[MINE.with(|i| *i)]
        }

        pub fn publish(id: usize) -> Option<Published<'static>> {
            mine().publish(id)
        }

        pub fn held_here(id: usize) -> bool {
            mine().holds(id)
        }

        pub fn wait_until_unused(id: usize) {
            word::wait_until_unused(|| BLOCKS.iter(), id);
        }
    }
}

/// Stands in for `hazard::Named`.
pub trait Named {
    fn handle(&self) -> u64;
}

#[allow(dead_code)]
#[path = "../src/hazard/slot.rs"]
mod slot;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::thread;
use slot::{NotRemoved, Slot};

/// A table entry. Its removal's taker frees it (`free`: its bytes written, a flag raised);
/// the test keeps a reference of its own until the lookups are done, so a lookup that reached
/// it late is caught by loom and the assertions, not by touching freed memory.
struct Entry {
    handle: u64,
    bytes: UnsafeCell<u64>,
    freed: AtomicBool,
}

impl Named for Entry {
    fn handle(&self) -> u64 {
        self.handle
    }
}

fn entry(handle: u64) -> Arc<Entry> {
    Arc::new(Entry {
        handle,
        bytes: UnsafeCell::new(handle),
        freed: AtomicBool::new(false),
    })
}

/// What the taker of a removed entry may do with it: free it.
fn free(e: &Entry) {
    e.bytes.with_mut(|b| unsafe { *b = 0 });
    e.freed.store(true, Ordering::Relaxed);
}

/// A slot holding an entry of handle `handle`, as the table's insert leaves it, and the test's
/// own reference to the entry.
fn filled(handle: u64) -> (Arc<Slot<Entry>>, Arc<Entry>) {
    let slot = Arc::new(Slot::default());
    let e = entry(handle);
    slot.fill(&e);
    (slot, e)
}

/// Lets the entry a slot still holds go, as the table's drop does once no lookup can run.
fn empty(mut slot: Arc<Slot<Entry>>) {
    let slot = Arc::get_mut(&mut slot).expect("no lookup runs");
    drop(slot.take_unreachable());
}

/// A lookup on `slot` for `handle`: the entry's bytes as it read them, if it reached it; it
/// asserts that what it reached is that handle's entry, not freed.
fn look_up(slot: &Slot<Entry>, handle: u64) -> Option<u64> {
    slot.with(handle, |e| {
        assert_eq!(e.handle, handle, "a lookup reached another entry");
        assert!(
            !e.freed.load(Ordering::Relaxed),
            "a lookup reached a freed entry"
        );
        e.bytes.with(|b| unsafe { *b })
    })
}

/// A lookup racing the entry's removal and free: it reads the entry's bytes whole, before the
/// free, or finds nothing.
#[test]
fn a_lookup_never_reaches_an_entry_after_its_removal() {
    loom::model(|| {
        let (slot, keep) = filled(7);
        let looker = {
            let slot = slot.clone();
            thread::spawn(move || look_up(&slot, 7))
        };
        free(&slot.remove(7).expect("the entry is there"));
        let seen = looker.join().unwrap();
        assert!(seen.is_none() || seen == Some(7));
        assert_eq!(
            Arc::strong_count(&keep),
            1,
            "the removal gave the slot's reference"
        );
    });
}

/// A lookup with a handle whose entry is removed while the slot takes its next occupant (a new
/// generation): it reaches the old entry before its free, or nothing, never the new one.
#[test]
fn a_stale_handle_never_reaches_the_slots_next_occupant() {
    loom::model(|| {
        let (old, new) = (1 << 32 | 1, 2 << 32 | 1);
        let (slot, _keep) = filled(old);
        let looker = {
            let slot = slot.clone();
            thread::spawn(move || look_up(&slot, old))
        };
        free(&slot.remove(old).expect("the entry is there"));
        assert_eq!(slot.generation(), 1, "the removal moves the generation on");
        slot.fill(&entry(new));
        let seen = looker.join().unwrap();
        assert!(seen.is_none() || seen == Some(old));
        assert_eq!(look_up(&slot, new), Some(new));
        empty(slot);
    });
}

/// Two removals of one entry at once: one takes it, the other finds it stale.
#[test]
fn of_two_removals_at_once_one_takes_the_entry() {
    loom::model(|| {
        let (slot, keep) = filled(3);
        let other = {
            let slot = slot.clone();
            thread::spawn(move || slot.remove(3).map(|e| free(&e)))
        };
        let mine = slot.remove(3).map(|e| free(&e));
        let theirs = other.join().unwrap();
        let taken = [&mine, &theirs].iter().filter(|r| r.is_ok()).count();
        assert_eq!(taken, 1, "{mine:?} {theirs:?}");
        assert!([mine, theirs].contains(&Err(NotRemoved::Stale)));
        assert!(keep.freed.load(Ordering::Relaxed));
        assert_eq!(look_up(&slot, 3), None);
    });
}

/// A removal from inside a lookup of the same entry (a callback destroying its own queue) is
/// refused rather than waiting for itself, and leaves the entry in place.
#[test]
fn a_removal_inside_a_lookup_of_the_same_entry_is_refused() {
    loom::model(|| {
        let (slot, keep) = filled(5);
        let inner = slot.with(5, |_| slot.remove(5).map(|e| free(&e)));
        assert_eq!(inner, Some(Err(NotRemoved::InUseHere)));
        assert!(!keep.freed.load(Ordering::Relaxed));
        assert_eq!(look_up(&slot, 5), Some(5));
        empty(slot);
    });
}
