//! The lock of a queue's wire: test-and-test-and-set, released by a plain store.
//!
//! Every post and poll takes its queue's lock once, for a section of a few hundred
//! instructions. std's futex mutex pays a second locked instruction to release (it swaps
//! the state word to learn whether a waiter sleeps), and on this path each locked instruction
//! costs as much as dozens of plain ones. Here a release is a store. A waiter spins briefly,
//! then yields its core, so a holder that was descheduled mid-section runs again, and at last
//! sleeps between looks: a real-time waiter's yield never hands the core to a holder of lower
//! priority, and a sleep does.

use super::spin_sync::{AtomicBool, Ordering, sleep, spin_loop, yield_now};
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
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for SpinMutex<T> {}

impl<T> SpinMutex<T> {
    pub fn new(value: T) -> Self {
        SpinMutex {
            locked: AtomicBool::new(false),
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

    #[inline]
    fn try_acquire(&self) -> bool {
        self.locked
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn acquire_contended(&self) {
        let mut looks = 0u32;
        loop {
            // Read-only while held: waiters do not steal the line from the holder.
            while self.locked.load(Ordering::Relaxed) {
                looks = looks.saturating_add(1);
                if looks < SPINS {
                    spin_loop();
                } else if looks < SPINS + YIELDS {
                    yield_now();
                } else {
                    sleep(NAP);
                }
            }
            if self.try_acquire() {
                return;
            }
        }
    }
}

pub struct SpinGuard<'a, T> {
    mutex: &'a SpinMutex<T>,
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
