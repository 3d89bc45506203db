//! Error values: negated `UMQ_ERR_*` codes, each logged once where it is decided.

use crate::abi::errno::*;
use crate::abi::types::UMQ_LOG_LEVEL_ERR;

/// A negative errno as the C API returns it.
pub type Errno = i32;
pub type UmqResult<T> = Result<T, Errno>;

// Every error constructor is cold: a branch that leads to one is unlikely, so the compiler lays
// the hot path's blocks out together and moves these aside (fewer cache lines a message runs).
#[cold]
#[inline(never)]
fn fail(code: i32, func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    crate::log::write(UMQ_LOG_LEVEL_ERR, func, why);
    -code
}

/// Logs `why` for `func` and returns `-UMQ_ERR_EINVAL`.
#[cold]
pub fn einval(func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    fail(UMQ_ERR_EINVAL, func, why)
}
#[cold]
pub fn eperm(func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    fail(UMQ_ERR_EPERM, func, why)
}
#[cold]
pub fn enomem(func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    fail(UMQ_ERR_ENOMEM, func, why)
}
#[cold]
pub fn ebusy(func: &str, why: std::fmt::Arguments<'_>) -> Errno {
    fail(UMQ_ERR_EBUSY, func, why)
}

/// Sets the C `errno` for calls that return NULL or 0.
pub fn set_errno(negative_code: Errno) {
    unsafe { *libc::__errno_location() = -negative_code };
}

/// The calling thread's errno as it is now (for `restore_errno`).
pub fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno, always valid.
    unsafe { *libc::__errno_location() }
}

/// Puts back an errno read by `errno`: for a call whose contract leaves errno as the caller
/// had it, after system calls on its way may have set it.
pub fn restore_errno(value: i32) {
    // SAFETY: as in `errno`.
    unsafe { *libc::__errno_location() = value };
}
