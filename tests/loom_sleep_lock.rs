//! The network node's lock (`src/transport/sleep_lock.rs`, compiled here unchanged against
//! loom's atomics and scheduler) under every interleaving loom can produce: holders exclude
//! each other, and a waiter that goes to sleep is always woken (a release that missed it would
//! leave it asleep, which loom reports as a deadlock: the model's sleep has no time limit).
//!
//! The futex is a loom mutex and condition variable: a sleeper checks the word and waits under
//! the mutex, as the kernel checks it and queues the sleeper under its bucket's lock, and a
//! wake-up notifies under it. The library's fence pair is asymmetric (a compiler fence in the
//! release, `membarrier` before a sleep, which loom cannot run); here both sides take a full
//! fence, as the library's fallback where the kernel refuses `membarrier` does.

/// Stands in for the `sleep_lock_sync` module of `src/transport/mod.rs`.
mod sleep_lock_sync {
    pub use loom::sync::atomic::{AtomicU32, Ordering};
    use loom::sync::{Condvar, Mutex};

    /// A waiter sleeps after one failed look, so the model explores the sleep (the library
    /// spins 100 looks first).
    pub const SPINS: u32 = 1;

    loom::lazy_static! {
        static ref FUTEX: (Mutex<()>, Condvar) = (Mutex::new(()), Condvar::new());
        /// The fences' one location (see `fence`).
        static ref FENCE: AtomicU32 = AtomicU32::new(0);
    }

    /// A full fence between the two sides: a read-modify-write of one location, which orders
    /// any two fences and carries what preceded the first to what follows the second. (Loom
    /// does not give its SeqCst fences that order among themselves, which the Dekker pattern
    /// needs and both the C++ model and membarrier provide.)
    fn fence() {
        FENCE.fetch_add(0, Ordering::AcqRel);
    }

    pub fn spin_loop() {
        loom::thread::yield_now();
    }

    pub fn light_fence() {
        fence();
    }

    pub fn heavy_fence() {
        fence();
    }

    /// Sleeps while `word` holds `expected`, until a wake-up (no time limit here).
    pub fn futex_wait(word: &AtomicU32, expected: u32, _: std::time::Duration) {
        let (m, cv) = &*FUTEX;
        let g = m.lock().unwrap();
        if word.load(Ordering::SeqCst) == expected {
            drop(cv.wait(g).unwrap());
        }
    }

    pub fn futex_wake_all(_: &AtomicU32) {
        let (m, cv) = &*FUTEX;
        let _g = m.lock().unwrap();
        cv.notify_all();
    }
}

#[allow(dead_code)]
#[path = "../src/transport/sleep_lock.rs"]
mod sleep_lock;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use sleep_lock::SleepMutex;

/// An increment under the lock by a separate load and store: a lock that let two holders in
/// at once would lose one.
fn add(m: &SleepMutex<()>, count: &AtomicU64) {
    let _g = m.lock();
    let v = count.load(Ordering::Relaxed);
    count.store(v + 1, Ordering::Relaxed);
}

/// A second thread adds once under the lock while this one adds `here` times, in every
/// interleaving: every increment lands, and a model in which a sleeper is never woken fails
/// as a deadlock.
fn both_add(here: u64) {
    loom::model(move || {
        let m = Arc::new(SleepMutex::new(()));
        let count = Arc::new(AtomicU64::new(0));
        let t = {
            let (m, count) = (m.clone(), count.clone());
            thread::spawn(move || add(&m, &count))
        };
        (0..here).for_each(|_| add(&m, &count));
        t.join().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), here + 1);
    });
}

/// Two threads increment under the lock, a waiter sleeping after one failed look: both
/// increments land, and the sleeper wakes.
#[test]
fn holders_exclude_each_other_and_a_sleeper_wakes() {
    both_add(1);
}

/// A holder that takes the lock again right after releasing it (a polling loop) and a waiter
/// that sleeps meanwhile: the releases wake it and it gets in, also when a wake-up comes
/// between its count and its sleep (the eventcount).
#[test]
fn a_looping_holder_wakes_its_sleeping_waiter() {
    both_add(2);
}
