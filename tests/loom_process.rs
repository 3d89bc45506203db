//! The list of per-process cells (`src/process/list.rs`, compiled here unchanged against
//! loom's atomics and scheduler) under every interleaving loom can produce: threads that use a
//! fresh cell first at the same time put it on the list once and agree on one value; cells
//! pushed at once are all kept; and a cell whose listing a fork cut short (claimed by the
//! parent, on the list or not yet) is listed once by the child's racing threads.

/// Stands in for the `list_sync` module of `src/process/mod.rs`.
mod list_sync {
    pub use loom::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

    pub fn spin_loop() {
        loom::thread::yield_now();
    }
}

#[allow(dead_code)]
#[path = "../src/process/list.rs"]
mod list;

use list::{Cell, UNCLAIMED};
use list_sync::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::ptr;

/// A fresh cell claimed by `claimed`, leaked: the list holds `'static` cells, as the
/// library's statics are.
fn cell(claimed: u32) -> &'static Cell {
    Box::leak(Box::new(Cell {
        value: AtomicPtr::new(ptr::null_mut()),
        parents: AtomicPtr::new(ptr::null_mut()),
        next: AtomicPtr::new(ptr::null_mut()),
        claimed: AtomicU32::new(claimed),
        listed: AtomicBool::new(false),
    }))
}

/// How often each of `cells` is on `head`'s list.
fn times_listed(head: &AtomicPtr<Cell>, cells: &[&Cell]) -> Vec<usize> {
    let mut seen = vec![0; cells.len()];
    let mut at = head.load(Ordering::Acquire) as *const Cell;
    while !at.is_null() {
        for (n, c) in seen.iter_mut().zip(cells) {
            *n += ptr::eq(at, *c) as usize;
        }
        at = unsafe { (*at).next.load(Ordering::Acquire) };
    }
    seen
}

/// Two threads of one process use one fresh cell first, each with a value of its own: the cell
/// is on the list once, listed, and both keep the value that was stored first.
#[test]
fn racing_first_uses_list_a_cell_once_and_agree_on_its_value() {
    loom::model(|| {
        let head = Arc::new(AtomicPtr::new(ptr::null_mut()));
        let c = cell(UNCLAIMED);
        let first_use = |head: Arc<AtomicPtr<Cell>>, mine: usize| {
            move || {
                c.list(&head, 0);
                c.store_first(mine as *mut ()) as usize
            }
        };
        let t = thread::spawn(first_use(head.clone(), 0x10));
        let here = first_use(head.clone(), 0x20)();
        let there = t.join().unwrap();
        assert_eq!(here, there, "both threads use one value");
        assert!(here == 0x10 || here == 0x20);
        assert_eq!(c.value() as usize, here);
        assert_eq!(times_listed(&head, &[c]), [1]);
        assert!(c.listed.load(Ordering::Relaxed));
    });
}

/// Two cells first used at once on two threads: both pushes are kept.
#[test]
fn cells_listed_at_once_are_all_kept() {
    loom::model(|| {
        let head = Arc::new(AtomicPtr::new(ptr::null_mut()));
        let (a, b) = (cell(UNCLAIMED), cell(UNCLAIMED));
        let h = head.clone();
        let t = thread::spawn(move || a.list(&h, 0));
        b.list(&head, 0);
        t.join().unwrap();
        assert_eq!(times_listed(&head, &[a, b]), [1, 1]);
    });
}

/// A fork cut a parent thread's listing short: the child (process 1) finds the cell claimed
/// by process 0 and not marked listed, either before the push (`pushed` false) or after it.
/// Two threads of the child use it first: it ends on the list exactly once.
#[test]
fn a_listing_a_fork_cut_short_is_finished_once_by_the_child() {
    for pushed in [false, true] {
        loom::model(move || {
            let head = Arc::new(AtomicPtr::new(ptr::null_mut()));
            let c = cell(0);
            if pushed {
                list::push(&head, c);
            }
            let h = head.clone();
            let t = thread::spawn(move || c.list(&h, 1));
            c.list(&head, 1);
            t.join().unwrap();
            assert_eq!(
                times_listed(&head, &[c]),
                [1],
                "pushed before the fork: {pushed}"
            );
            assert_eq!(c.claimed.load(Ordering::Relaxed), 1);
        });
    }
}

/// The child's fork handler: every listed cell forgets the parent's value and keeps it aside.
#[test]
fn a_child_empties_every_listed_cell() {
    loom::model(|| {
        let head = AtomicPtr::new(ptr::null_mut());
        let (a, b) = (cell(UNCLAIMED), cell(UNCLAIMED));
        for (c, v) in [(a, 0x10usize), (b, 0x20)] {
            c.list(&head, 0);
            c.store_first(v as *mut ());
        }
        list::empty_all(&head);
        for (c, v) in [(a, 0x10usize), (b, 0x20)] {
            assert!(c.value().is_null());
            assert_eq!(c.parents.load(Ordering::Relaxed) as usize, v);
        }
    });
}
