//! The application's lock functions (`umq_external_*_ops_register`): locks made before
//! registration stay the library's own; those made after call the application's, in pairs.
//! A process of its own, since registration is for the life of the process.

use std::ffi::{c_int, c_void};
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use umq::app_sync::*;

static CALLS: [AtomicUsize; 5] = [const { AtomicUsize::new(0) }; 5];
const CREATE: usize = 0;
const LOCK: usize = 1;
const UNLOCK: usize = 2;
const DESTROY: usize = 3;
const READ: usize = 4;

unsafe extern "C" fn create_mutex(kind: u32) -> *mut c_void {
    assert_eq!(kind, MUTEX_EXCLUSIVE);
    unsafe { create() }
}
unsafe extern "C" fn create() -> *mut c_void {
    CALLS[CREATE].fetch_add(1, Ordering::SeqCst);
    Box::into_raw(Box::new(std::sync::atomic::AtomicBool::new(false))).cast()
}
unsafe extern "C" fn destroy(h: *mut c_void) -> c_int {
    CALLS[DESTROY].fetch_add(1, Ordering::SeqCst);
    drop(unsafe { Box::from_raw(h.cast::<std::sync::atomic::AtomicBool>()) });
    0
}
unsafe extern "C" fn lock(h: *mut c_void) -> c_int {
    CALLS[LOCK].fetch_add(1, Ordering::SeqCst);
    let held = unsafe { &*h.cast::<std::sync::atomic::AtomicBool>() };
    while held.swap(true, Ordering::Acquire) {
        std::hint::spin_loop();
    }
    0
}
unsafe extern "C" fn read_lock(h: *mut c_void) -> c_int {
    CALLS[READ].fetch_add(1, Ordering::SeqCst);
    unsafe { lock(h) }
}
unsafe extern "C" fn unlock(h: *mut c_void) -> c_int {
    CALLS[UNLOCK].fetch_add(1, Ordering::SeqCst);
    unsafe { &*h.cast::<std::sync::atomic::AtomicBool>() }.store(false, Ordering::Release);
    0
}

fn calls() -> [usize; 5] {
    CALLS.each_ref().map(|c| c.load(Ordering::SeqCst))
}

/// Made before registration: the library's own lock, no application call. Made after:
/// every lock and unlock is the application's, they pair, and dropping destroys it; the
/// data stays consistent under contention from several threads.
#[test]
fn locks_go_through_the_application_once_registered() {
    let before = AppMutex::new(0u64);
    *before.lock() += 1;
    assert_eq!(calls(), [0; 5]);
    register_mutex(MutexOps {
        create: create_mutex,
        destroy,
        lock,
        unlock,
    });
    register_rwlock(RwLockOps {
        create,
        destroy,
        read_lock,
        write_lock: lock,
        unlock,
    });
    *before.lock() += 1;
    assert_eq!(calls(), [0; 5]);
    let m = std::sync::Arc::new(AppMutex::new(0u64));
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let m = m.clone();
            std::thread::spawn(move || {
                for _ in 0..1000 {
                    *m.lock() += 1;
                }
            })
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert_eq!(*m.lock(), 4000);
    drop(m);
    assert_eq!(calls(), [1, 4001, 4001, 1, 0]);
    let rw = AppRwLock::new(vec![1u8]);
    assert_eq!(rw.read().len(), 1);
    rw.write().push(2);
    assert_eq!(*rw.read(), [1, 2]);
    drop(rw);
    // Two reads (each also counted as a lock: the test's read lock is its mutex) and a write.
    assert_eq!(calls(), [2, 4004, 4004, 2, 2]);
}
