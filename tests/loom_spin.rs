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

    loom::thread_local! {
        /// Set on the thread that stands for the progress engine.
        pub static POLITE: std::cell::Cell<bool> = std::cell::Cell::new(false);
    }

    pub fn waits_politely() -> bool {
        POLITE.with(|p| p.get())
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

/// A waiter that waits politely (the progress engine's thread) and an application thread that
/// takes the lock again and again: both get in, one holder at a time, and whenever the
/// application holds the lock no one has asked for its next turn: the polite waiter never
/// does, so it never holds up the application's next lock.
#[test]
fn a_polite_waiter_never_asks_for_the_next_turn() {
    loom::model(|| {
        let m = Arc::new(SpinMutex::new(()));
        let count = Arc::new(AtomicU64::new(0));
        let t = {
            let (m, count) = (m.clone(), count.clone());
            thread::spawn(move || {
                spin_sync::POLITE.with(|p| p.set(true));
                let _g = m.lock();
                let v = count.load(Ordering::Relaxed);
                count.store(v + 1, Ordering::Relaxed);
            })
        };
        for _ in 0..2 {
            let _g = m.lock();
            assert!(
                m.no_one_wants(),
                "the polite waiter asked for the next turn"
            );
            let v = count.load(Ordering::Relaxed);
            count.store(v + 1, Ordering::Relaxed);
        }
        t.join().unwrap();
        assert_eq!(count.load(Ordering::Relaxed), 3);
    });
}
