//! The wire lock with real threads (`tests/loom_spin.rs` model-checks the same file; these
//! tests live apart from it because that check compiles it against loom's atomics).

use super::spin::SpinMutex;
use std::sync::Arc;

/// Four threads add to a plain counter under the lock: no increment is lost, which a lock
/// that let two holders in at once would show as a short count.
#[test]
fn holders_exclude_each_other() {
    let m = Arc::new(SpinMutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..100_000 {
                    let mut g = m.lock();
                    let v = *g;
                    std::hint::black_box(&mut *g);
                    *g = v + 1;
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(*m.lock(), 400_000);
}

/// A waiter behind a holder that sleeps (longer than the spin and yield phases) still gets
/// in.
#[test]
fn a_waiter_outlasts_a_slow_holder() {
    let m = Arc::new(SpinMutex::new(Vec::new()));
    let mut held = m.lock();
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || m.lock().push(2))
    };
    std::thread::sleep(std::time::Duration::from_millis(20));
    held.push(1);
    drop(held);
    waiter.join().unwrap();
    assert_eq!(*m.lock(), vec![1, 2]);
}

/// `try_lock` never waits: None while the lock is held, and None while a waiter that has
/// waited a while wants it (it is theirs next), even once it is free; the lock otherwise.
#[test]
fn try_lock_takes_only_a_free_lock_no_one_waits_for() {
    let m = Arc::new(SpinMutex::new(0u32));
    let held = m.lock();
    assert!(m.try_lock().is_none(), "taken while held");
    let waiter = {
        let m = m.clone();
        std::thread::spawn(move || *m.lock() += 1)
    };
    while m.no_one_wants() {
        assert!(
            !waiter.is_finished(),
            "the waiter got in while the lock was held"
        );
        std::thread::yield_now();
    }
    drop(held);
    // The waiter wants it: whatever a try gets, it gets after the waiter had it.
    while !waiter.is_finished() {
        if let Some(g) = m.try_lock() {
            assert_eq!(*g, 1, "taken before the waiter that wanted it");
        }
    }
    waiter.join().unwrap();
    assert_eq!(m.try_lock().map(|g| *g), Some(1));
}
