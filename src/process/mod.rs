//! Process-wide state that a child made by `fork()` does not inherit.
//!
//! A child gets a copy of the parent's memory and descriptors but only the thread that called
//! `fork()`. The parent's queues, shared-memory rings and network connections are the
//! parent's: a child that posted on them would write into the parent's streams, and one that
//! tore them down would end them for the parent. Their locks may also be held by a parent thread
//! that the child does not have. So the library's roots are `PerProcess` cells: in the child,
//! after a fork, each one is empty again and the next use makes a fresh value; the parent's
//! stays in the child's memory untouched (leaked, never dropped, so no destructor closes what is
//! the parent's). A child therefore starts as a process that has not called `umq_init`, and
//! may call it and make queues of its own. `forks()` counts the forks this copy of the process
//! descends through, so a handle can carry the process that made it.

mod list;

use list::{Cell, UNCLAIMED};
use std::ptr;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};

/// What `list.rs` runs on: the standard atomics here, loom's in `tests/loom_process.rs`.
mod list_sync {
    pub use std::hint::spin_loop;
    pub use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU32, Ordering};
}

/// Forks between the process that loaded the library and this one (0 there).
static FORKS: AtomicU32 = AtomicU32::new(0);

/// The cells made so far: emptied in a child.
static CELLS: AtomicPtr<Cell> = AtomicPtr::new(ptr::null_mut());

/// How many forks separate this process from the one that loaded the library.
pub fn forks() -> u32 {
    FORKS.load(Ordering::Relaxed)
}

/// A value made on first use in each process: `fork()` leaves the child's empty.
pub struct PerProcess<T: 'static> {
    cell: Cell,
    make: fn() -> T,
}

impl<T: Send + Sync + 'static> PerProcess<T> {
    pub const fn new(make: fn() -> T) -> PerProcess<T> {
        PerProcess {
            cell: Cell {
                value: AtomicPtr::new(ptr::null_mut()),
                parents: AtomicPtr::new(ptr::null_mut()),
                next: AtomicPtr::new(ptr::null_mut()),
                claimed: AtomicU32::new(UNCLAIMED),
                listed: AtomicBool::new(false),
            },
            make,
        }
    }

    /// This process's value, made now if it has none yet.
    #[inline(always)]
    pub fn get(&'static self) -> &'static T {
        let p = self.cell.value() as *const T;
        if p.is_null() {
            return self.make_here();
        }
        // SAFETY: a value once stored is never freed (a child's cell forgets it, leaked).
        unsafe { &*p }
    }

    #[cold]
    #[inline(never)]
    fn make_here(&'static self) -> &'static T {
        watch_forks();
        self.cell.list(&CELLS, forks());
        let fresh = Box::into_raw(Box::new((self.make)()));
        let kept = self.cell.store_first(fresh as *mut ());
        if kept != fresh as *mut () {
            // Another thread's value was first: ours was never seen by anyone.
            drop(unsafe { Box::from_raw(fresh) });
        }
        // SAFETY: the cell's value is a `Box<T>` of ours, never freed.
        unsafe { &*(kept as *const T) }
    }
}

/// Registers the fork handler, once per process image (a child inherits the registration).
fn watch_forks() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a handler that only stores to atomics (async-signal-safe, as a
        // child of a multithreaded process requires).
        let rc = unsafe { libc::pthread_atfork(None, None, Some(in_child)) };
        assert_eq!(rc, 0, "pthread_atfork failed: {rc}");
    });
}

/// Runs in the child, on the thread that forked, before `fork()` returns there.
extern "C" fn in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
    list::empty_all(&CELLS);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    static MADE: AtomicUsize = AtomicUsize::new(0);
    static COUNTER: PerProcess<AtomicUsize> = PerProcess::new(|| {
        MADE.fetch_add(1, Ordering::Relaxed);
        AtomicUsize::new(0)
    });

    /// How often `cell` is on the list (the walk stops at 1,000 steps: a cycle).
    fn times_listed(cell: &Cell) -> usize {
        let mut at = CELLS.load(Ordering::Acquire) as *const Cell;
        let mut seen = 0;
        for _ in 0..1000 {
            if at.is_null() {
                return seen;
            }
            seen += ptr::eq(at, cell) as usize;
            at = unsafe { (*at).next.load(Ordering::Acquire) };
        }
        panic!("the list has a cycle");
    }

    static ORPHAN: PerProcess<u8> = PerProcess::new(|| 1);
    static PUSHED: PerProcess<u8> = PerProcess::new(|| 2);

    /// The two states a fork can leave a cell in while a parent's thread was putting it on the
    /// list (claimed by a process that is not this one, `listed` still false): not on the list
    /// yet, or on it already. The first use here puts it on exactly once either way.
    #[test]
    fn a_cell_whose_listing_a_fork_cut_short_is_listed_once() {
        ORPHAN.cell.claimed.store(7, Ordering::Relaxed);
        assert_eq!(*ORPHAN.get(), 1);
        assert_eq!(times_listed(&ORPHAN.cell), 1, "put on by this process");
        list::push(&CELLS, &PUSHED.cell);
        PUSHED.cell.claimed.store(7, Ordering::Relaxed);
        assert_eq!(*PUSHED.get(), 2);
        assert_eq!(times_listed(&PUSHED.cell), 1, "not put on twice");
        assert!(
            ORPHAN.cell.listed.load(Ordering::Relaxed)
                && PUSHED.cell.listed.load(Ordering::Relaxed)
        );
    }

    /// A value is made once per process: the parent keeps its own across a fork, the child
    /// starts from a fresh one, and `forks` counts the fork in the child only.
    #[test]
    fn a_child_starts_from_a_fresh_value_and_the_parent_keeps_its_own() {
        COUNTER.get().fetch_add(5, Ordering::Relaxed);
        assert_eq!(COUNTER.get().load(Ordering::Relaxed), 5);
        let made = MADE.load(Ordering::Relaxed);
        let before = forks();
        let mut pipe = [0; 2];
        assert_eq!(unsafe { libc::pipe(pipe.as_mut_ptr()) }, 0);
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0);
        if pid == 0 {
            // Only async-signal-safe work would be strictly allowed here; the test's child
            // uses atomics and a write, then leaves without running destructors.
            let fresh = COUNTER.get().load(Ordering::Relaxed) as u8;
            let again = MADE.load(Ordering::Relaxed) - made;
            let child_forks = (forks() - before) as u8;
            let report = [fresh, again as u8, child_forks];
            unsafe {
                libc::write(pipe[1], report.as_ptr().cast(), 3);
                libc::_exit(0);
            }
        }
        let mut report = [9u8; 3];
        unsafe {
            libc::close(pipe[1]);
            assert_eq!(libc::read(pipe[0], report.as_mut_ptr().cast(), 3), 3);
            libc::close(pipe[0]);
            libc::waitpid(pid, ptr::null_mut(), 0);
        }
        assert_eq!(
            report,
            [0, 1, 1],
            "the child made its own value, once, after one fork"
        );
        assert_eq!(
            COUNTER.get().load(Ordering::Relaxed),
            5,
            "the parent's is untouched"
        );
        assert_eq!(MADE.load(Ordering::Relaxed), made);
        assert_eq!(forks(), before);
    }
}
