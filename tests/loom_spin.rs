//! The wire lock (`src/transport/spin.rs`, compiled here unchanged against loom's atomics and
//! scheduler) under every interleaving loom can produce: holders exclude each other, waiters
//! included (the contended path spins, yields and naps, each a yield to loom's scheduler).

/// Stands in for the `spin_sync` module of `src/transport/mod.rs`.
mod spin_sync {
    pub use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    pub use loom::thread::yield_now;
    /// A waiter asks for the next turn at its first failed look, so the model explores the
    /// wanted state (the library waits 64 looks).
    pub const WANT_AFTER: u32 = 1;

    pub fn spin_loop() {
        loom::thread::yield_now();
    }

    pub fn sleep(_: std::time::Duration) {
        loom::thread::yield_now();
    }
}

#[allow(dead_code)]
#[path = "../src/transport/spin.rs"]
mod spin;

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use spin::SpinMutex;

/// Two threads each increment a counter under the lock with a separate load and store: a
/// lock that let both in at once would lose an increment.
#[test]
fn holders_exclude_each_other() {
    loom::model(|| {
        let m = Arc::new(SpinMutex::new(()));
        let count = Arc::new(AtomicU64::new(0));
        let add = |m: Arc<SpinMutex<()>>, count: Arc<AtomicU64>| {
            move || {
                let _g = m.lock();
                let v = count.load(Ordering::Relaxed);
                count.store(v + 1, Ordering::Relaxed);
            }
        };
        let t = thread::spawn(add(m.clone(), count.clone()));
        add(m.clone(), count.clone())();
        t.join().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 2);
    });
}

/// A thread that takes the lock again right after releasing it (a polling loop) and a waiter
/// that has said it wants the lock (`WANT_AFTER` is one look here): every schedule lets both
/// in, one holder at a time, and none leaves the wanted count behind.
#[test]
fn a_looping_holder_and_a_wanting_waiter_both_get_in() {
    loom::model(|| {
        let m = Arc::new(SpinMutex::new(()));
        let count = Arc::new(AtomicU64::new(0));
        let add = |m: &SpinMutex<()>, count: &AtomicU64| {
            let _g = m.lock();
            let v = count.load(Ordering::Relaxed);
            count.store(v + 1, Ordering::Relaxed);
        };
        let t = {
            let (m, count) = (m.clone(), count.clone());
            thread::spawn(move || add(&m, &count))
        };
        add(&m, &count);
        add(&m, &count);
        t.join().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 3);
        assert!(m.no_one_wants(), "a waiter's mark was left behind");
    });
}
