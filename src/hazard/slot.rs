//! One slot of the handle table: its occupant, held as a raw `Arc` and reached by lookups that
//! take no lock, and its generation. A lookup publishes the slot in a hazard word of its thread
//! before it loads the occupant; a removal clears the occupant and waits until no thread
//! publishes the slot, so an occupant is never dropped under a lookup that reached it.
//! `tests/loom_table.rs` compiles this file unchanged against loom (`slot_sync` stands in for
//! std's atomics and `Arc`, and for the hazard words) and checks that under every interleaving.

use super::Named;
use super::slot_sync::{Arc, AtomicPtr, AtomicU32, Ordering, hazard};
use std::mem::ManuallyDrop;
use std::ptr;

/// Why a removal did not happen.
#[derive(Debug, PartialEq)]
pub enum NotRemoved {
    /// No live entry has that handle.
    Stale,
    /// The calling thread is itself inside a call on that entry (a callback destroying the
    /// queue it was called from): removing it would free it under that call.
    InUseHere,
}

/// A slot; all zeros is an empty slot of generation 0 (the table's slots are zeroed memory).
pub struct Slot<T> {
    generation: AtomicU32,
    /// `Arc::into_raw` of the occupant, or null.
    item: AtomicPtr<T>,
}

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            generation: AtomicU32::new(0),
            item: AtomicPtr::new(ptr::null_mut()),
        }
    }
}

impl<T: Named> Slot<T> {
    /// The slot's hazard id: its address, unique across tables.
    pub fn id(&self) -> usize {
        self as *const Slot<T> as usize
    }

    /// The generation the next occupant's handle carries.
    pub fn generation(&self) -> u32 {
        self.generation.load(Ordering::Relaxed)
    }

    /// Makes `q` the occupant of this slot, which its caller reserved empty.
    pub fn fill(&self, q: &Arc<T>) {
        self.item
            .store(Arc::into_raw(q.clone()) as *mut T, Ordering::Release);
    }

    /// Runs `f` on the occupant if its handle is `umqh`; a concurrent removal waits for it to
    /// return.
    #[inline(always)]
    pub fn with<R>(&self, umqh: u64, f: impl FnOnce(&Arc<T>) -> R) -> Option<R> {
        let _held = hazard::publish(self.id())?;
        let p = self.item.load(Ordering::Acquire);
        if p.is_null() {
            return None;
        }
        // The slot's own reference, borrowed: the hazard keeps it alive until `_held` drops.
        let q = ManuallyDrop::new(unsafe { Arc::from_raw(p) });
        (q.handle() == umqh).then(|| f(&q))
    }

    /// Takes the occupant whose handle is `umqh` out, once no other thread is inside a call on
    /// it, and moves the generation on (its handle is stale from here). The slot is empty then,
    /// for its caller to give back.
    pub fn remove(&self, umqh: u64) -> Result<Arc<T>, NotRemoved> {
        let id = self.id();
        if hazard::held_here(id) {
            return Err(NotRemoved::InUseHere);
        }
        let p = {
            let _held = hazard::publish(id).ok_or(NotRemoved::InUseHere)?;
            let p = self.item.load(Ordering::Acquire);
            if p.is_null() || unsafe { (*p).handle() } != umqh {
                return Err(NotRemoved::Stale);
            }
            // Of two concurrent removals only one clears the slot.
            self.item
                .compare_exchange(p, ptr::null_mut(), Ordering::AcqRel, Ordering::Relaxed)
                .map_err(|_| NotRemoved::Stale)?
        };
        hazard::wait_until_unused(id);
        self.generation.fetch_add(1, Ordering::Relaxed);
        Ok(unsafe { Arc::from_raw(p) })
    }

    /// The occupant, if any, as a reference of its own.
    pub fn occupant(&self) -> Option<Arc<T>> {
        let _held = hazard::publish(self.id())?;
        let p = self.item.load(Ordering::Acquire);
        (!p.is_null()).then(|| {
            let q = ManuallyDrop::new(unsafe { Arc::from_raw(p) });
            Arc::clone(&q)
        })
    }
}

impl<T> Slot<T> {
    /// The occupant's reference, taken out of a slot no lookup can reach any more.
    pub fn take_unreachable(&mut self) -> Option<Arc<T>> {
        let p = self.item.swap(ptr::null_mut(), Ordering::Acquire);
        (!p.is_null()).then(|| unsafe { Arc::from_raw(p) })
    }
}
