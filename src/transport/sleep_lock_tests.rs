//! The node lock with real threads and the kernel's futexes (`tests/loom_sleep_lock.rs`
//! model-checks the same file; these tests live apart from it because that check compiles it
//! against loom's atomics).

use super::sleep_lock::SleepMutex;
use std::sync::Arc;
use std::time::Duration;

/// Four threads add to a plain counter under the lock, each holding it a while now and then so
/// that the others sleep: no increment is lost, which a lock that let two holders in at once
/// would show as a short count.
#[test]
fn holders_exclude_each_other() {
    let m = Arc::new(SleepMutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for i in 0..50_000 {
                    let mut g = m.lock();
                    let v = *g;
                    std::hint::black_box(&mut *g);
                    if i % 5_000 == 0 {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                    *g = v + 1;
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(*m.lock(), 200_000);
}

/// A waiter that counted itself as a sleeper behind a holder is woken by the holder's
/// release (the wake-up count moves), twenty times over, and each gets in in turn.
#[test]
fn a_release_wakes_the_sleeper() {
    let m = Arc::new(SleepMutex::new(Vec::new()));
    for i in 0..20 {
        let held = m.lock();
        let waiter = {
            let m = m.clone();
            std::thread::spawn(move || m.lock().push(i))
        };
        while m.sleepers() == 0 {
            std::thread::yield_now();
        }
        let wakes = m.wakes();
        drop(held);
        waiter.join().unwrap();
        assert_eq!(m.wakes(), wakes + 1, "hand-over {i}");
    }
    assert_eq!(*m.lock(), (0..20).collect::<Vec<_>>());
}
