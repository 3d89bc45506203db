//! The list of `PerProcess` cells that the fork handler empties in a child, and a cell's
//! value slot.
//!
//! Threads of one process may use a fresh cell first at the same time, and a fork may cut a
//! thread's listing short (the child has no such thread). The list is pushed only and walked
//! without a lock. `tests/loom_process.rs` compiles this file unchanged against loom's atomics
//! and checks under every interleaving that a cell goes on the list exactly once, that cells
//! pushed at once are all kept, and that racing first uses agree on one value.

use super::list_sync::{AtomicBool, AtomicPtr, AtomicU32, Ordering, spin_loop};
use std::ptr;

/// A cell's part that the fork handler sees: the value, type-erased, and the next cell.
/// (Made by `PerProcess::new`, in a constant: its fields are its parent module's to set.)
pub struct Cell {
    pub(super) value: AtomicPtr<()>,
    /// In a child: the parent's value, kept only so that it stays reachable (a leak checker
    /// at the child's exit would otherwise report what is the parent's).
    pub(super) parents: AtomicPtr<()>,
    pub(super) next: AtomicPtr<Cell>,
    /// `forks()` of the process whose thread is putting the cell on the list (`u32::MAX`:
    /// none has yet).
    pub(super) claimed: AtomicU32,
    /// Whether the cell is on the list (then it is on every child's copy of the list too).
    pub(super) listed: AtomicBool,
}

/// No process has claimed the cell yet.
pub const UNCLAIMED: u32 = u32::MAX;

impl Cell {
    /// The value stored, or null.
    #[inline(always)]
    pub fn value(&self) -> *mut () {
        self.value.load(Ordering::Acquire)
    }

    /// Stores `fresh` unless another thread stored first: the value the cell holds now.
    pub fn store_first(&self, fresh: *mut ()) -> *mut () {
        match self.value.compare_exchange(
            ptr::null_mut(),
            fresh,
            Ordering::AcqRel,
            Ordering::Acquire,
        ) {
            Ok(_) => fresh,
            Err(won) => won,
        }
    }

    /// Puts the cell on `head`'s list once, for the process `here` (its `forks()`); returns
    /// when it is on. Called before any value is stored in it: a cell that holds a value is on
    /// the list.
    pub fn list(&'static self, head: &AtomicPtr<Cell>, here: u32) {
        while !self.listed.load(Ordering::Acquire) {
            let claimed = self.claimed.load(Ordering::Acquire);
            if claimed == here {
                // Another thread of this process is putting it on: a few instructions away.
                spin_loop();
                continue;
            }
            // Unclaimed, or claimed by a thread of a parent that forked before that thread was
            // done (this process has no such thread): ours to put on.
            if self
                .claimed
                .compare_exchange(claimed, here, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
            {
                // A parent's thread may have put it on just before the fork.
                if claimed == UNCLAIMED || !on_list(head, self) {
                    push(head, self);
                }
                self.listed.store(true, Ordering::Release);
            }
        }
    }
}

/// Whether `cell` is on `head`'s list.
fn on_list(head: &AtomicPtr<Cell>, cell: &Cell) -> bool {
    let mut at = head.load(Ordering::Acquire) as *const Cell;
    while !at.is_null() {
        if ptr::eq(at, cell) {
            return true;
        }
        // SAFETY: listed cells live as long as the process (`list` takes `&'static`).
        at = unsafe { (*at).next.load(Ordering::Acquire) };
    }
    false
}

pub(super) fn push(head: &AtomicPtr<Cell>, cell: &'static Cell) {
    let me = cell as *const Cell as *mut Cell;
    let mut first = head.load(Ordering::Acquire);
    loop {
        cell.next.store(first, Ordering::Relaxed);
        match head.compare_exchange_weak(first, me, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return,
            Err(now) => first = now,
        }
    }
}

/// In a child, on the one thread it has: every listed cell forgets the parent's value (kept
/// in `parents`, never dropped), so the next use makes the child's own.
pub fn empty_all(head: &AtomicPtr<Cell>) {
    let mut cell = head.load(Ordering::Acquire);
    while !cell.is_null() {
        // SAFETY: listed cells live as long as the process.
        let c = unsafe { &*cell };
        let parents = c.value.swap(ptr::null_mut(), Ordering::AcqRel);
        c.parents.store(parents, Ordering::Relaxed);
        cell = c.next.load(Ordering::Acquire);
    }
}
