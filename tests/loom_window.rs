//! The atomic flow-control counters (`use_atomic_window = true`) under every interleaving loom
//! can produce. The algorithms (`take_upto`, `add_bounded`, `take_all` on top of one
//! compare-and-swap loop) are the shared default methods of `umq::flow::word::Word`; this file
//! binds them to loom's atomics exactly as `src/flow/word.rs` binds them to std's.

use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::thread;
use umq::flow::word::Word;

#[derive(Default)]
struct LoomWord(AtomicU64);

impl Word for LoomWord {
    fn get(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }
    fn set(&self, v: u64) {
        self.0.store(v, Ordering::Release)
    }
    fn update(&self, f: impl FnMut(u64) -> Option<u64>) -> Option<u64> {
        self.0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, f)
            .ok()
    }
    fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::AcqRel);
    }
    fn sub(&self, n: u64) {
        self.0.fetch_sub(n, Ordering::AcqRel);
    }
    fn take_all(&self) -> u64 {
        self.0.swap(0, Ordering::AcqRel)
    }
}

/// Two senders take credit while an announcement adds some: no credit is lost or created, and
/// nobody takes more than was there.
#[test]
fn concurrent_takes_and_grants_conserve_credit() {
    loom::model(|| {
        let window = Arc::new(LoomWord::default());
        window.set(3);
        let takers: Vec<_> = (0..2)
            .map(|_| {
                let w = window.clone();
                thread::spawn(move || w.take_upto(2))
            })
            .collect();
        let w = window.clone();
        let granter = thread::spawn(move || w.add_bounded(2, 5));
        let taken: u64 = takers.into_iter().map(|t| t.join().unwrap()).sum();
        let granted = if granter.join().unwrap() { 2 } else { 0 };
        assert!(taken <= 4);
        assert_eq!(window.get() + taken, 3 + granted);
        assert!(window.get() <= 5);
    });
}

/// The bound of an announcement holds under races: two grants that each fit alone cannot
/// together push the window past the peer's depth.
#[test]
fn bounded_grants_never_overflow_together() {
    loom::model(|| {
        let window = Arc::new(LoomWord::default());
        window.set(3);
        let grants: Vec<_> = (0..2)
            .map(|_| {
                let w = window.clone();
                thread::spawn(move || w.add_bounded(2, 5))
            })
            .collect();
        let ok: Vec<bool> = grants.into_iter().map(|g| g.join().unwrap()).collect();
        assert_eq!(
            ok.iter().filter(|&&o| o).count(),
            1,
            "exactly one grant fits"
        );
        assert_eq!(window.get(), 5);
    });
}

/// The receive side: a poster adds buffers while the announcer takes everything posted so
/// far. Every posted buffer is announced exactly once, and posted-minus-notified is what
/// remains (the spec's second identity).
#[test]
fn posting_races_announcing_without_loss() {
    loom::model(|| {
        let local = Arc::new(LoomWord::default());
        let total_posted = Arc::new(LoomWord::default());
        let notified = Arc::new(LoomWord::default());
        let poster = {
            let (l, t) = (local.clone(), total_posted.clone());
            thread::spawn(move || {
                for _ in 0..2 {
                    if l.add_bounded(1, 4) {
                        t.add(1);
                    }
                }
            })
        };
        let announcer = {
            let (l, n) = (local.clone(), notified.clone());
            thread::spawn(move || {
                let k = l.take_all();
                n.add(k);
            })
        };
        poster.join().unwrap();
        announcer.join().unwrap();
        assert_eq!(total_posted.get(), 2);
        assert_eq!(local.get(), total_posted.get() - notified.get());
    });
}
