//! Queue handles: generation-tagged indices into a fixed slot table (quinn's handle slab idea).
//!
//! A `umqh` is `tag << 48 | generation << 32 | (index + 1)`. A zero, forged or destroyed handle
//! fails the range, presence or handle check (the whole handle against its slot's occupant's)
//! and is reported as an error instead of being dereferenced. The tag names the process too: a
//! child made by `fork()` has a table of its own (`process`), whose tag is the parent's plus
//! one, so the parent's handles match no occupant there rather than being taken for the
//! child's own queues.
//!
//! Every API call looks its queue up, three times per message in a ping-pong, so a lookup takes
//! no lock (a read lock costs two atomic read-modify-writes, about 11 ns on the benchmark
//! machine). A slot holds one reference of its queue as a raw `Arc` pointer; a lookup publishes
//! the slot in a per-thread hazard word before reading the pointer, and a removal clears the
//! pointer and then waits until no thread publishes the slot (`hazard::slot`). So a queue
//! is never freed under a call that uses it, and `umq_destroy` waits for calls in flight on its
//! queue, as it did with a lock; `tests/loom_table.rs` checks that under every interleaving.

use crate::app_sync::AppMutex;
pub use crate::hazard::Named;
pub use crate::hazard::slot::NotRemoved;
use crate::hazard::slot::Slot;
use crate::process::PerProcess;
use std::sync::Arc;

const TAG: u64 = 0x554d; // "UM", plus the forks this process descends through
/// The most queues alive at once. The slots are reserved for all of them but cost resident
/// memory only as they are used (`ZeroedSlab`): 16 bytes a queue.
pub const MAX_QUEUES: usize = 1 << 20;

impl Named for super::Queue {
    fn handle(&self) -> u64 {
        self.handle
    }
}

pub struct Table<T> {
    /// The high 16 bits of this table's handles.
    tag: u64,
    slots: crate::os::ZeroedSlab<Slot<T>>,
    free: AppMutex<Free>,
}

/// Slots to hand out: those given back, then the never used ones from `fresh` on.
struct Free {
    returned: Vec<u32>,
    fresh: u32,
}

fn queues() -> &'static Table<super::Queue> {
    static TABLE: PerProcess<Table<super::Queue>> = PerProcess::new(|| Table::new(MAX_QUEUES));
    TABLE.get()
}

/// The tag of the handles this process makes.
fn tag_here() -> u64 {
    (TAG + crate::process::forks() as u64) & 0xffff
}

/// The slot index a queue handle of this process names, if its tag and range are plausible.
pub fn index_of(umqh: u64) -> Option<usize> {
    queues().index_of(umqh)
}

/// Whether `umqh` looks like a handle a parent of this process made before it forked.
pub fn made_before_fork(umqh: u64) -> bool {
    let forks = crate::process::forks() as u64;
    (1..=forks.min(0xffff)).any(|k| umqh >> 48 == (tag_here() + 0x1_0000 - k) & 0xffff)
}

impl<T: Named> Table<T> {
    pub fn new(capacity: usize) -> Self {
        assert!(capacity <= MAX_QUEUES);
        Table {
            tag: tag_here(),
            // SAFETY: a zero slot is generation 0 and no occupant.
            slots: unsafe { crate::os::ZeroedSlab::new(capacity) }
                .expect("cannot reserve the queue table"),
            free: AppMutex::new(Free {
                returned: Vec::new(),
                fresh: 0,
            }),
        }
    }

    pub fn encode(&self, index: u32, generation: u32) -> u64 {
        self.tag << 48 | ((generation & 0xffff) as u64) << 32 | (index as u64 + 1)
    }

    /// The slot index a handle names, if its tag and range are plausible.
    #[inline(always)]
    pub fn index_of(&self, umqh: u64) -> Option<usize> {
        if umqh >> 48 != self.tag {
            return None;
        }
        let low = (umqh & 0xffff_ffff) as usize;
        (1..=self.slots.len()).contains(&low).then(|| low - 1)
    }

    /// A slot to use: the last one given back, else a never used one.
    fn take_slot(&self) -> Option<u32> {
        let mut free = self.free.lock();
        if let Some(i) = free.returned.pop() {
            return Some(i);
        }
        if free.fresh as usize == self.slots.len() {
            return None;
        }
        free.fresh += 1;
        Some(free.fresh - 1)
    }

    fn give_back(&self, index: u32) {
        self.free.lock().returned.push(index);
    }

    /// How many slots were ever used: every live entry is below.
    fn used(&self) -> usize {
        self.free.lock().fresh as usize
    }

    /// Reserves a slot and builds the entry with its final handle.
    pub fn insert(&self, build: impl FnOnce(u64, u32) -> Result<T, i32>) -> Result<Arc<T>, i32> {
        let index = self.take_slot().ok_or(-crate::abi::errno::UMQ_ERR_ENOMEM)?;
        let slot = &self.slots[index as usize];
        let handle = self.encode(index, slot.generation());
        match build(handle, index) {
            Ok(q) => {
                let q = Arc::new(q);
                slot.fill(&q);
                Ok(q)
            }
            Err(e) => {
                self.give_back(index);
                Err(e)
            }
        }
    }

    /// Runs `f` on the live entry named by `umqh`; a concurrent removal waits for it to return.
    #[inline(always)]
    pub fn with<R>(&self, umqh: u64, f: impl FnOnce(&Arc<T>) -> R) -> Option<R> {
        // Every API call comes through here: one range check, one slot reference. The tag is
        // not looked at: the slot's occupant must have the whole handle (`Slot::with`), and
        // every occupant's carries this table's tag, so a handle of another tag (a parent's,
        // forged) reaches no entry all the same, four instructions a call cheaper.
        let low = (umqh & 0xffff_ffff) as usize;
        self.slots.get(low.wrapping_sub(1))?.with(umqh, f)
    }

    /// Takes the entry out of the table, once no other thread is inside a call on it; its
    /// handle becomes stale (the generation moves on).
    pub fn remove(&self, umqh: u64) -> Result<Arc<T>, NotRemoved> {
        let index = self.index_of(umqh).ok_or(NotRemoved::Stale)?;
        let q = self.slots[index].remove(umqh)?;
        self.give_back(index as u32);
        Ok(q)
    }

    /// Every live entry.
    pub fn all(&self) -> Vec<Arc<T>> {
        self.slots[..self.used()]
            .iter()
            .filter_map(Slot::occupant)
            .collect()
    }
}

impl<T> Drop for Table<T> {
    fn drop(&mut self) {
        // `&mut self`: no lookup can be running, so each remaining reference can just go.
        let used = self.free.get_mut().fresh as usize;
        for slot in self.slots[..used].iter_mut() {
            drop(slot.take_unreachable());
        }
    }
}

/// Reserves a queue slot and builds the queue with its final handle.
pub fn insert(
    build: impl FnOnce(u64, u32) -> Result<super::Queue, i32>,
) -> Result<Arc<super::Queue>, i32> {
    queues().insert(build)
}

/// Runs `f` on the live queue named by `umqh` (a concurrent destroy waits for it).
#[inline(always)]
pub fn with<R>(umqh: u64, f: impl FnOnce(&Arc<super::Queue>) -> R) -> Option<R> {
    queues().with(umqh, f)
}

/// A counted reference for calls that may block (interrupt waits).
pub fn get(umqh: u64) -> Option<Arc<super::Queue>> {
    with(umqh, |q| q.clone())
}

/// Removes the queue; its handle becomes stale.
pub fn remove(umqh: u64) -> Result<Arc<super::Queue>, NotRemoved> {
    queues().remove(umqh)
}

/// Every live queue (for stats and uninit).
pub fn all() -> Vec<Arc<super::Queue>> {
    queues().all()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// An entry that records its own drop outside its memory.
    struct Probe {
        handle: u64,
        dropped: Arc<AtomicBool>,
    }

    impl Named for Probe {
        fn handle(&self) -> u64 {
            self.handle
        }
    }

    impl Drop for Probe {
        fn drop(&mut self) {
            self.dropped.store(true, Ordering::SeqCst);
        }
    }

    fn probe(t: &Table<Probe>) -> (u64, Arc<AtomicBool>) {
        let dropped = Arc::new(AtomicBool::new(false));
        let d = dropped.clone();
        let q = t
            .insert(|handle, _| Ok(Probe { handle, dropped: d }))
            .unwrap();
        (q.handle, dropped)
    }

    #[test]
    fn stale_zero_and_forged_handles_find_nothing() {
        let t = Table::<Probe>::new(4);
        let (h, _) = probe(&t);
        assert_eq!(t.with(h, |q| q.handle), Some(h));
        assert_eq!(t.with(0, |_| ()), None);
        assert_eq!(t.with(h ^ 1 << 32, |_| ()), None, "other generation");
        assert_eq!(t.with(h ^ 1 << 48, |_| ()), None, "other tag (a parent's)");
        assert_eq!(t.with(h & 0xffff_ffff, |_| ()), None, "no tag");
        assert_eq!(t.with(t.encode(3, 1), |_| ()), None, "empty slot");
        assert_eq!(t.with(t.encode(9, 1), |_| ()), None, "out of range");
        let q = t.remove(h).unwrap();
        assert_eq!(q.handle, h);
        assert_eq!(t.with(h, |_| ()), None);
        assert_eq!(t.remove(h).err(), Some(NotRemoved::Stale));
        let (h2, _) = probe(&t);
        assert_ne!(h2, h, "a reused slot gets a new handle");
        assert_eq!(t.all().len(), 1);
    }

    /// Slots are handed out until the table is full, a removed one is reused under a new
    /// generation (its old handle stays stale), and `all` finds exactly the live entries.
    #[test]
    fn slots_run_out_at_capacity_and_come_back_with_a_new_generation() {
        let t = Table::<Probe>::new(3);
        let hs: Vec<u64> = (0..3).map(|_| probe(&t).0).collect();
        let full = t.insert(|handle, _| {
            Ok(Probe {
                handle,
                dropped: Arc::default(),
            })
        });
        assert_eq!(full.err(), Some(-crate::abi::errno::UMQ_ERR_ENOMEM));
        assert!(t.remove(hs[1]).is_ok());
        let (again, _) = probe(&t);
        assert_eq!(again & 0xffff_ffff, hs[1] & 0xffff_ffff, "the freed slot");
        assert_ne!(again, hs[1]);
        assert_eq!(t.with(hs[1], |_| ()), None);
        let mut live: Vec<u64> = t.all().iter().map(|p| p.handle).collect();
        live.sort();
        let mut want = vec![hs[0], again, hs[2]];
        want.sort();
        assert_eq!(live, want);
    }

    /// The process table holds far more than a server's worth of queues.
    #[test]
    fn the_table_reaches_a_million_queues() {
        let t = queues();
        assert_eq!(
            t.index_of(t.encode(MAX_QUEUES as u32 - 1, 0)),
            Some(MAX_QUEUES - 1)
        );
        const { assert!(MAX_QUEUES >= 1 << 20) };
    }

    #[test]
    fn a_removal_from_inside_a_call_on_the_same_entry_is_refused() {
        let t = Table::<Probe>::new(2);
        let (h, dropped) = probe(&t);
        let inner = t.with(h, |_| t.remove(h).err()).unwrap();
        assert_eq!(inner, Some(NotRemoved::InUseHere));
        assert!(t.remove(h).is_ok());
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn a_dropped_table_releases_what_it_holds() {
        let t = Table::<Probe>::new(2);
        let (_, dropped) = probe(&t);
        assert!(!dropped.load(Ordering::SeqCst));
        drop(t);
        assert!(dropped.load(Ordering::SeqCst));
    }

    #[test]
    fn lookups_nest() {
        let t = Table::<Probe>::new(2);
        let (a, _) = probe(&t);
        let (b, _) = probe(&t);
        let got = t.with(a, |qa| t.with(b, |qb| (qa.handle, qb.handle)));
        assert_eq!(got, Some(Some((a, b))));
    }

    /// Readers hammer the table while a remover destroys and recreates entries: an entry is
    /// never dropped while a reader is inside a call on it.
    #[test]
    fn an_entry_is_never_dropped_under_a_call() {
        let t = Arc::new(Table::<Probe>::new(4));
        let current = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let calls = Arc::new(AtomicU64::new(0));
        let readers: Vec<_> = (0..3)
            .map(|_| {
                let (t, current, stop, calls) =
                    (t.clone(), current.clone(), stop.clone(), calls.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let h = current.load(Ordering::Acquire);
                        t.with(h, |q| {
                            assert!(!q.dropped.load(Ordering::SeqCst), "dropped before the call");
                            for _ in 0..50 {
                                std::hint::spin_loop();
                            }
                            assert!(!q.dropped.load(Ordering::SeqCst), "dropped during the call");
                            calls.fetch_add(1, Ordering::Relaxed);
                        });
                        // Three readers on two cores must leave the remover some time: it
                        // yields until no reader holds the slot.
                        std::thread::yield_now();
                    }
                })
            })
            .collect();
        for _ in 0..2000 {
            let (h, dropped) = probe(&t);
            current.store(h, Ordering::Release);
            std::thread::yield_now();
            let q = t.remove(h).unwrap();
            drop(q);
            assert!(
                dropped.load(Ordering::SeqCst),
                "the table kept no reference"
            );
        }
        stop.store(true, Ordering::Relaxed);
        readers.into_iter().for_each(|r| r.join().unwrap());
        assert!(
            calls.load(Ordering::Relaxed) > 0,
            "the readers never got in"
        );
    }
}
