//! Locks and thread keys an application hands the library (the July 2026
//! `umq_external_mutex_lock_ops_register`, `_rwlock_ops_register`, `_thread_key_ops_register`).
//!
//! A program whose tasks run on its own scheduler (coroutines on a few OS threads, as
//! ubs-comm's) cannot let a library put an OS thread to sleep in the kernel on a lock another
//! task holds: that task may be waiting for the same OS thread. So once the application
//! registers its functions, the library's sleeping locks of the control path, and its
//! per-thread storage, go through them:
//!
//! - `AppRwLock`: the buffer pool's list of chunk hooks (a provider that registers memory adds
//!   a hook and holds the lock while every existing chunk is registered, which takes long; a
//!   growing pool reads it);
//! - `AppMutex`: the handle table's free slots (create, destroy) and the async-event queue;
//! - thread keys: the per-thread record rings of the call trace (`trace`).
//!
//! The per-message paths stay on the library's own locks, because a lock that may be the
//! application's costs a check and a larger guard wherever it is taken (callgrind): a queue's
//! wire lock guards a few hundred nanoseconds of the library's code and never sleeps in the
//! kernel (`transport::spin`); its binding lock is read on every in-process post (19 instructions
//! a post as an `AppRwLock`); the runtime lock on every buffer call (about 20 a call).
//!
//! Registration must come before `umq_init`, as the reference requires: a lock takes the
//! functions registered when it is made and keeps them, so one made earlier stays on the
//! library's own. Registering again replaces the functions for locks made afterwards.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_void};
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicPtr, Ordering};

/// An application's function on one of its lock or key handles.
pub type HandleFn = unsafe extern "C" fn(*mut c_void) -> c_int;

/// An application's mutex, as the library calls it.
#[derive(Clone, Copy)]
pub struct MutexOps {
    /// Takes the kind of mutex (`MUTEX_EXCLUSIVE`: the library never locks one it holds).
    pub create: unsafe extern "C" fn(u32) -> *mut c_void,
    pub destroy: HandleFn,
    pub lock: HandleFn,
    pub unlock: HandleFn,
}

/// An application's reader-writer lock, as the library calls it.
#[derive(Clone, Copy)]
pub struct RwLockOps {
    pub create: unsafe extern "C" fn() -> *mut c_void,
    pub destroy: HandleFn,
    pub read_lock: HandleFn,
    pub write_lock: HandleFn,
    pub unlock: HandleFn,
}

/// An application's thread-specific storage keys, as the library calls them.
#[derive(Clone, Copy)]
pub struct ThreadKeyOps {
    pub key_create: unsafe extern "C" fn(Option<unsafe extern "C" fn(*mut c_void)>) -> *mut c_void,
    pub key_delete: HandleFn,
    pub set: unsafe extern "C" fn(*mut c_void, *const c_void) -> c_int,
    pub get: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
}

/// The kind of mutex the library asks for (`MUTEX_ATTR_EXCLUSIVE`).
pub const MUTEX_EXCLUSIVE: u32 = 0;

static MUTEX_OPS: AtomicPtr<MutexOps> = AtomicPtr::new(std::ptr::null_mut());
static RWLOCK_OPS: AtomicPtr<RwLockOps> = AtomicPtr::new(std::ptr::null_mut());
static THREAD_KEY_OPS: AtomicPtr<ThreadKeyOps> = AtomicPtr::new(std::ptr::null_mut());

/// Registers functions; each registration is kept for the life of the process (locks made
/// with it call it until they go).
fn register<T>(slot: &AtomicPtr<T>, ops: T) {
    slot.store(Box::into_raw(Box::new(ops)), Ordering::Release);
}

fn registered<T>(slot: &AtomicPtr<T>) -> Option<&'static T> {
    // SAFETY: a registration is leaked, never freed.
    unsafe { slot.load(Ordering::Acquire).as_ref() }
}

pub fn register_mutex(ops: MutexOps) {
    register(&MUTEX_OPS, ops)
}

pub fn register_rwlock(ops: RwLockOps) {
    register(&RWLOCK_OPS, ops)
}

pub fn register_thread_key(ops: ThreadKeyOps) {
    register(&THREAD_KEY_OPS, ops)
}

pub fn thread_key_ops() -> Option<&'static ThreadKeyOps> {
    registered(&THREAD_KEY_OPS)
}

/// Calls an application's lock function until it reports success: the data behind it must not
/// be touched without the lock, and a lock that fails once may succeed next (logged once).
fn acquire(lock: HandleFn, handle: *mut c_void, what: &str) {
    let mut logged = false;
    while unsafe { lock(handle) } != 0 {
        if !logged {
            crate::log_err!(
                "umq",
                "the application's {what} function failed; retrying until it succeeds"
            );
            logged = true;
        }
        std::thread::yield_now();
    }
}

/// One of the application's locks, made when the library's lock is.
struct External<O: 'static> {
    ops: &'static O,
    handle: *mut c_void,
}

/// A mutex that is the application's when it registered mutex functions before it was made,
/// else the standard library's.
pub struct AppMutex<T> {
    external: Option<External<MutexOps>>,
    own: std::sync::Mutex<()>,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, which holds one of the two locks.
unsafe impl<T: Send> Send for AppMutex<T> {}
unsafe impl<T: Send> Sync for AppMutex<T> {}

impl<T> AppMutex<T> {
    pub fn new(data: T) -> AppMutex<T> {
        let external = registered(&MUTEX_OPS).and_then(|ops| {
            let handle = unsafe { (ops.create)(MUTEX_EXCLUSIVE) };
            (!handle.is_null()).then_some(External { ops, handle })
        });
        AppMutex {
            external,
            own: std::sync::Mutex::new(()),
            data: UnsafeCell::new(data),
        }
    }

    pub fn lock(&self) -> AppGuard<'_, T> {
        let own = match &self.external {
            Some(e) => {
                acquire(e.ops.lock, e.handle, "mutex lock");
                None
            }
            None => Some(self.own.lock().unwrap_or_else(|p| p.into_inner())),
        };
        AppGuard {
            data: &self.data,
            unlock: self.external.as_ref().map(|e| (e.ops.unlock, e.handle)),
            _own: own.map(OwnGuard::Mutex),
        }
    }

    /// The data, with no lock taken: the caller has it to itself.
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }
}

impl<T> Drop for AppMutex<T> {
    fn drop(&mut self) {
        if let Some(e) = &self.external {
            unsafe { (e.ops.destroy)(e.handle) };
        }
    }
}

/// A reader-writer lock that is the application's when it registered reader-writer functions
/// before it was made, else the standard library's.
pub struct AppRwLock<T> {
    external: Option<External<RwLockOps>>,
    own: std::sync::RwLock<()>,
    data: UnsafeCell<T>,
}

// SAFETY: shared access only under a read lock, exclusive only under the write lock.
unsafe impl<T: Send> Send for AppRwLock<T> {}
unsafe impl<T: Send + Sync> Sync for AppRwLock<T> {}

impl<T> AppRwLock<T> {
    pub fn new(data: T) -> AppRwLock<T> {
        let external = registered(&RWLOCK_OPS).and_then(|ops| {
            let handle = unsafe { (ops.create)() };
            (!handle.is_null()).then_some(External { ops, handle })
        });
        AppRwLock {
            external,
            own: std::sync::RwLock::new(()),
            data: UnsafeCell::new(data),
        }
    }

    #[inline(always)]
    pub fn read(&self) -> AppReadGuard<'_, T> {
        if let Some(e) = &self.external {
            return self.read_external(e);
        }
        AppReadGuard {
            lock: self,
            own: Some(self.own.read().unwrap_or_else(|p| p.into_inner())),
        }
    }

    #[cold]
    #[inline(never)]
    fn read_external(&self, e: &External<RwLockOps>) -> AppReadGuard<'_, T> {
        acquire(e.ops.read_lock, e.handle, "read lock");
        AppReadGuard {
            lock: self,
            own: None,
        }
    }

    #[cold]
    fn unlock_external(&self) {
        if let Some(e) = &self.external {
            unsafe { (e.ops.unlock)(e.handle) };
        }
    }

    pub fn write(&self) -> AppGuard<'_, T> {
        let own = match &self.external {
            Some(e) => {
                acquire(e.ops.write_lock, e.handle, "write lock");
                None
            }
            None => Some(self.own.write().unwrap_or_else(|p| p.into_inner())),
        };
        AppGuard {
            data: &self.data,
            unlock: self.external.as_ref().map(|e| (e.ops.unlock, e.handle)),
            _own: own.map(OwnGuard::Write),
        }
    }
}

impl<T> Drop for AppRwLock<T> {
    fn drop(&mut self) {
        if let Some(e) = &self.external {
            unsafe { (e.ops.destroy)(e.handle) };
        }
    }
}

type Unlock = Option<(HandleFn, *mut c_void)>;

fn release(unlock: &Unlock) {
    if let Some((unlock, handle)) = *unlock {
        unsafe { unlock(handle) };
    }
}

/// The library's own lock held by a guard (dropped after the application's would have been
/// released, which then is none).
#[allow(dead_code)] // held for its drop
enum OwnGuard<'a> {
    Mutex(std::sync::MutexGuard<'a, ()>),
    Write(std::sync::RwLockWriteGuard<'a, ()>),
}

/// Exclusive access to an `AppMutex`'s or `AppRwLock`'s data.
pub struct AppGuard<'a, T> {
    data: &'a UnsafeCell<T>,
    unlock: Unlock,
    _own: Option<OwnGuard<'a>>,
}

impl<T> Deref for AppGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        unsafe { &*self.data.get() }
    }
}

impl<T> DerefMut for AppGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        unsafe { &mut *self.data.get() }
    }
}

impl<T> Drop for AppGuard<'_, T> {
    fn drop(&mut self) {
        release(&self.unlock);
    }
}

/// Shared access to an `AppRwLock`'s data: under the library's own read lock (`own`), or else
/// the application's. (Two words, like the standard library's guard: posts take one.)
pub struct AppReadGuard<'a, T> {
    lock: &'a AppRwLock<T>,
    own: Option<std::sync::RwLockReadGuard<'a, ()>>,
}

impl<T> Deref for AppReadGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> Drop for AppReadGuard<'_, T> {
    #[inline(always)]
    fn drop(&mut self) {
        if self.own.is_none() {
            self.lock.unlock_external();
        }
    }
}
