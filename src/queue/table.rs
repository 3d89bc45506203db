//! Queue handles: generation-tagged indices into a fixed slot table (quinn's handle slab idea).
//!
//! A `umqh` is `TAG << 48 | generation << 32 | (index + 1)`. A zero, forged or destroyed handle
//! fails the tag, range or generation check and is reported as an error instead of being
//! dereferenced. Lookups take only the slot's read lock, never a table-wide lock.

use super::Queue;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

const TAG: u64 = 0x554d; // "UM"
pub const MAX_QUEUES: usize = 16384;

struct Slot {
    generation: AtomicU32,
    queue: RwLock<Option<Arc<Queue>>>,
}

struct Table {
    slots: Box<[Slot]>,
    free: Mutex<Vec<u32>>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| Table {
        slots: (0..MAX_QUEUES)
            .map(|_| Slot {
                generation: AtomicU32::new(1),
                queue: RwLock::new(None),
            })
            .collect(),
        free: Mutex::new((0..MAX_QUEUES as u32).rev().collect()),
    })
}

pub fn encode(index: u32, generation: u32) -> u64 {
    TAG << 48 | ((generation & 0xffff) as u64) << 32 | (index as u64 + 1)
}

/// The slot index a handle names, if its tag and range are plausible.
pub fn index_of(umqh: u64) -> Option<usize> {
    if umqh >> 48 != TAG {
        return None;
    }
    let low = (umqh & 0xffff_ffff) as usize;
    (1..=MAX_QUEUES).contains(&low).then(|| low - 1)
}

/// Reserves a slot and builds the queue with its final handle.
pub fn insert(build: impl FnOnce(u64, u32) -> Result<Queue, i32>) -> Result<Arc<Queue>, i32> {
    let t = table();
    let index = t
        .free
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .pop()
        .ok_or(-crate::abi::errno::UMQ_ERR_ENOMEM)?;
    let slot = &t.slots[index as usize];
    let handle = encode(index, slot.generation.load(Ordering::Relaxed));
    match build(handle, index) {
        Ok(q) => {
            let q = Arc::new(q);
            *slot.queue.write().unwrap_or_else(|p| p.into_inner()) = Some(q.clone());
            Ok(q)
        }
        Err(e) => {
            t.free.lock().unwrap_or_else(|p| p.into_inner()).push(index);
            Err(e)
        }
    }
}

/// Runs `f` on the live queue named by `umqh` while holding the slot's read lock, so a concurrent
/// destroy waits for the call to finish.
pub fn with<R>(umqh: u64, f: impl FnOnce(&Arc<Queue>) -> R) -> Option<R> {
    let index = index_of(umqh)?;
    let guard = table().slots[index]
        .queue
        .read()
        .unwrap_or_else(|p| p.into_inner());
    match guard.as_ref() {
        Some(q) if q.handle == umqh => Some(f(q)),
        _ => None,
    }
}

/// A counted reference for calls that may block (interrupt waits).
pub fn get(umqh: u64) -> Option<Arc<Queue>> {
    with(umqh, |q| q.clone())
}

/// Removes the queue; its handle becomes stale (the generation moves on).
pub fn remove(umqh: u64) -> Option<Arc<Queue>> {
    let index = index_of(umqh)?;
    let t = table();
    let slot = &t.slots[index];
    let mut guard = slot.queue.write().unwrap_or_else(|p| p.into_inner());
    match guard.as_ref() {
        Some(q) if q.handle == umqh => {
            let q = guard.take();
            slot.generation.fetch_add(1, Ordering::Relaxed);
            drop(guard);
            t.free
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(index as u32);
            q
        }
        _ => None,
    }
}

/// Every live queue (for stats and uninit).
pub fn all() -> Vec<Arc<Queue>> {
    table()
        .slots
        .iter()
        .filter_map(|s| s.queue.read().unwrap_or_else(|p| p.into_inner()).clone())
        .collect()
}
