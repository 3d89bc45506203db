//! The lock of a queue's wire: test-and-test-and-set, released by a plain store.
//!
//! Every post and poll takes its queue's lock once, for a section of a few hundred
//! instructions. std's futex mutex pays a second locked instruction to release (it swaps
//! the state word to learn whether a waiter sleeps), and on this path each locked instruction
//! costs as much as dozens of plain ones. Here a release is a store. A waiter spins
//! briefly, then yields its core, so a holder that was descheduled mid-section runs again, and
//! at last sleeps between looks: a real-time waiter's yield never hands the core to a holder of
//! lower priority, and a sleep does.
//!
//! A thread that polls a queue in a loop takes its lock again a few nanoseconds after each
//! release, and a plain test-and-set lets it win nearly every time: another thread (the pacing
//! thread landing a packet, a sender of this process) would wait through its naps, hundreds
//! of microseconds each. So a waiter that has spun a while says so (`wanted`, a count of such
//! waiters beside the lock word), and while any does, only they take the lock: the looping
//! thread waits its turn. The release stays one plain store; a lock costs one more plain load.
//!
//! The progress engine's thread does not say so for its rounds, bell serves and deadlines
//! (`waits_politely`): that work on a queue can wait while the application drives the queue.
//! Its mark held up every call of the application's as long as the engine waited, and on a
//! busy host the engine waits descheduled, for milliseconds: a network ping-pong's polls each
//! spun through `WANT_AFTER` looks then, up to thousands of times a run, 5-6 us each. Nor does
//! it wait without the mark where it can help it: a round of its finds a held lock busy and
//! leaves the queue to its application (`Queue::background_round`). Its timed work (a pacing
//! tick, a link's pause timer) still asks.

use super::spin_sync::{
    AtomicBool, AtomicU32, Ordering, WANT_AFTER, sleep, spin_loop, waits_politely, yield_now,
};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// Pause instructions a waiter spins before it starts yielding: some microseconds, longer than
/// any section.
const SPINS: u32 = 256;
/// Yields before a waiter starts sleeping.
const YIELDS: u32 = 64;
/// A sleeping waiter's pause between looks.
const NAP: std::time::Duration = std::time::Duration::from_micros(50);

pub struct SpinMutex<T> {
    locked: AtomicBool,
    /// Waiters that have waited more than `WANT_AFTER` looks: while there are any, the lock
    /// is theirs to take when free.
    wanted: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for SpinMutex<T> {}

impl<T> SpinMutex<T> {
    pub fn new(value: T) -> Self {
        SpinMutex {
            locked: AtomicBool::new(false),
            wanted: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        if !self.try_acquire() {
            self.acquire_contended();
        }
        SpinGuard { mutex: self }
    }

    /// The lock if it is free now and no waiter wants it; None otherwise, without waiting.
    #[inline]
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        // `then`, not `then_some`: a guard made and dropped would release a lock held by another.
        self.try_acquire().then(|| SpinGuard { mutex: self })
    }

    /// Whether some thread holds the lock now: a hint, which may change at once.
    #[inline]
    pub fn is_locked(&self) -> bool {
        self.locked.load(Ordering::Relaxed)
    }

    /// No waiter has marked the lock as wanted (for the model checks).
    pub fn no_one_wants(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) == 0
    }

    #[inline]
    fn try_acquire(&self) -> bool {
        self.wanted.load(Ordering::Relaxed) == 0 && self.take()
    }

    #[inline]
    fn take(&self) -> bool {
        self.locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn acquire_contended(&self) {
        let polite = waits_politely();
        let mut looks = 0u32;
        let mut wanting = false;
        loop {
            // Read-only while held: waiters do not steal the line from the holder.
            if !self.locked.load(Ordering::Relaxed)
                && (wanting || self.wanted.load(Ordering::Relaxed) == 0)
                && self.take()
            {
                if wanting {
                    self.wanted.fetch_sub(1, Ordering::Relaxed);
                }
                return;
            }
            looks = looks.saturating_add(1);
            if !wanting && !polite && looks > WANT_AFTER {
                self.wanted.fetch_add(1, Ordering::Relaxed);
                wanting = true;
            }
            if looks < SPINS {
                spin_loop();
            } else if looks < SPINS + YIELDS {
                yield_now();
            } else {
                sleep(NAP);
            }
        }
    }
}

pub struct SpinGuard<'a, T> {
    mutex: &'a SpinMutex<T>,
}

impl<T> SpinGuard<'_, T> {
    /// Whether this guard holds `m` (for the checks of state kept under a given lock).
    pub fn holds(&self, m: &SpinMutex<T>) -> bool {
        std::ptr::eq(self.mutex, m)
    }
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.locked.store(false, Ordering::Release);
    }
}
