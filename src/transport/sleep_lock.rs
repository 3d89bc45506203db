//! The lock of a network node (`fabric::Node`): a futex mutex whose release is a plain store.
//!
//! Every round, post round and lone SEND of a node's queues takes its lock, twice for each
//! reply of a ping-pong. std's mutex releases by swapping its word, to learn whether a waiter
//! sleeps, and that locked instruction on every release made a reply over the UCX engine
//! about 35 ns slower. The wire's spin lock (`spin.rs`) releases by a store too, but its
//! waiters spin, yield and nap: a node's lock is taken by every queue of the node, and a
//! progress engine waiting for it behind an application that polls its queues in turn spun
//! and yielded through the sweep, and could take its turn only by chance.
//!
//! Here waiters spin a while (`SPINS`), then sleep, and a release wakes them, as std's mutex
//! does. The release learns whether anyone sleeps by a plain load after its store: a waiter
//! counts itself among the sleepers and then runs the heavy side of the process's asymmetric
//! fence (`hazard`, membarrier) before it looks at the lock a last time, so either the release
//! sees the count or the waiter sees the lock free (the Dekker pattern, the release's side of
//! the fence costing nothing). The release that wakes clears the count and moves the wake-up
//! count (`wakes`) on, on which the sleepers sleep: a waiter reads it before it counts itself,
//! so a wake-up that comes between its count and its sleep (another holder may have the lock
//! by then) ends the sleep before it begins, and the waiter counts itself again (an
//! eventcount). A waiter that takes the lock without sleeping leaves itself counted, and the
//! next release makes one wake-up call for no one. A sleep also ends after `SLEEP_AT_MOST`.

use super::sleep_lock_sync::{
    AtomicU32, Ordering, SPINS, futex_wait, futex_wake_all, heavy_fence, light_fence, spin_loop,
};
use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};

/// The longest sleep between two looks.
const SLEEP_AT_MOST: std::time::Duration = std::time::Duration::from_millis(10);

pub struct SleepMutex<T> {
    /// 1 while held.
    locked: AtomicU32,
    /// Waiters that counted themselves before sleeping, since the last release that woke.
    sleepers: AtomicU32,
    /// Wake-ups so far: what sleepers sleep on.
    wakes: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: the value is only reached through a guard, and one guard exists at a time.
unsafe impl<T: Send> Sync for SleepMutex<T> {}

impl<T> SleepMutex<T> {
    pub fn new(value: T) -> Self {
        SleepMutex {
            locked: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            wakes: AtomicU32::new(0),
            value: UnsafeCell::new(value),
        }
    }

    #[inline]
    pub fn lock(&self) -> SleepGuard<'_, T> {
        if !self.take() {
            self.lock_contended();
        }
        SleepGuard { mutex: self }
    }

    #[inline]
    fn take(&self) -> bool {
        self.locked
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    fn lock_contended(&self) {
        loop {
            for _ in 0..SPINS {
                // Read-only while held: a spinning waiter does not steal the line from the holder.
                if self.locked.load(Ordering::Relaxed) == 0 && self.take() {
                    return;
                }
                spin_loop();
            }
            // Read before counting ourselves: a wake-up from here on ends the sleep.
            let wakes = self.wakes.load(Ordering::Acquire);
            self.sleepers.fetch_add(1, Ordering::Relaxed);
            heavy_fence();
            if self.locked.load(Ordering::Relaxed) == 0 && self.take() {
                return;
            }
            futex_wait(&self.wakes, wakes, SLEEP_AT_MOST);
        }
    }

    /// Waiters counted as sleepers now.
    #[cfg(test)]
    pub fn sleepers(&self) -> u32 {
        self.sleepers.load(Ordering::Relaxed)
    }

    /// Wake-ups so far.
    #[cfg(test)]
    pub fn wakes(&self) -> u32 {
        self.wakes.load(Ordering::Relaxed)
    }

    #[inline]
    fn release(&self) {
        self.locked.store(0, Ordering::Release);
        light_fence();
        if self.sleepers.load(Ordering::Relaxed) != 0 {
            self.wake_sleepers();
        }
    }

    #[cold]
    #[inline(never)]
    fn wake_sleepers(&self) {
        if self.sleepers.swap(0, Ordering::Relaxed) != 0 {
            self.wakes.fetch_add(1, Ordering::Release);
            futex_wake_all(&self.wakes);
        }
    }
}

pub struct SleepGuard<'a, T> {
    mutex: &'a SleepMutex<T>,
}

impl<T> Deref for SleepGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock.
        unsafe { &*self.mutex.value.get() }
    }
}

impl<T> DerefMut for SleepGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, and `&mut self` makes the borrow unique.
        unsafe { &mut *self.mutex.value.get() }
    }
}

impl<T> Drop for SleepGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.mutex.release();
    }
}
