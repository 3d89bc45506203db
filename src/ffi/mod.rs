//! The `extern "C"` surface. Every export runs inside `ffi_guard!`, so a panic becomes the
//! function's documented failure value and never unwinds into C; pointers from C are checked
//! before use.

pub mod api;
pub mod fi;
pub mod pro_api;
#[cfg(feature = "abi-2026")]
pub mod v2026;

use crate::abi::errno::*;
use crate::error::UmqResult;

/// What an export returns when its body panicked.
pub trait Failure {
    fn failure() -> Self;
}
impl Failure for i32 {
    fn failure() -> i32 {
        UMQ_FAIL
    }
}
impl Failure for u32 {
    fn failure() -> u32 {
        0
    }
}
impl Failure for u64 {
    fn failure() -> u64 {
        UMQ_INVALID_HANDLE
    }
}
impl Failure for () {
    fn failure() {}
}
impl<T> Failure for *mut T {
    fn failure() -> *mut T {
        std::ptr::null_mut()
    }
}
impl<T> Failure for Option<T> {
    fn failure() -> Option<T> {
        None
    }
}

/// Panics caught at the C boundary since the process started: zero, unless the library has a
/// bug (the API fuzz target fails on any).
static PANICS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

pub fn panics_caught() -> u64 {
    PANICS.load(std::sync::atomic::Ordering::Relaxed)
}

pub fn panicked(func: &str) {
    PANICS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    crate::log_err!(
        func,
        "internal error (panic caught at the C boundary); please report it"
    );
    crate::error::set_errno(-libc::EFAULT);
}

macro_rules! ffi_guard {
    ($name:literal, $body:block) => {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| $body)) {
            Ok(v) => v,
            Err(_) => {
                crate::ffi::panicked($name);
                crate::ffi::Failure::failure()
            }
        }
    };
}
pub(crate) use ffi_guard;

/// A reference from a C pointer: None for NULL or a misaligned pointer.
pub fn checked<'a, T>(p: *const T) -> Option<&'a T> {
    if p.is_null() || !(p as usize).is_multiple_of(align_of::<T>()) {
        return None;
    }
    Some(unsafe { &*p })
}

/// The transport resource an interrupt option names (`UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX`):
/// the July 2026 option carries its index after the direction; December's names none.
pub fn tp_handle(option: *const crate::abi::types::umq_interrupt_option_t) -> Option<u32> {
    if !cfg!(feature = "abi-2026") {
        return None;
    }
    use crate::abi::v2026::types as v;
    let o = checked(option as *const v::umq_interrupt_option_t)?;
    (o.flag & v::UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX != 0).then_some(o.tp_handle_idx)
}

/// The fd an interrupt option asks for: the July 2026 option's `fd_type` (`UMQ_FD_IO`, the
/// completion channel, unless it names flow control's event or retry fd); December's has none.
pub fn fd_type(option: *const crate::abi::types::umq_interrupt_option_t) -> u32 {
    if !cfg!(feature = "abi-2026") {
        return 0;
    }
    checked(option as *const crate::abi::v2026::types::umq_interrupt_option_t)
        .map_or(0, |o| o.fd_type)
}

pub fn checked_mut<'a, T>(p: *mut T) -> Option<&'a mut T> {
    if p.is_null() || !(p as usize).is_multiple_of(align_of::<T>()) {
        return None;
    }
    Some(unsafe { &mut *p })
}

/// Requires a non-NULL, aligned pointer or reports `-UMQ_ERR_EINVAL` naming the argument.
pub fn need<'a, T>(func: &str, what: &str, p: *const T) -> UmqResult<&'a T> {
    checked(p)
        .ok_or_else(|| crate::error::einval(func, format_args!("{what} is NULL or misaligned")))
}

pub fn need_mut<'a, T>(func: &str, what: &str, p: *mut T) -> UmqResult<&'a mut T> {
    checked_mut(p)
        .ok_or_else(|| crate::error::einval(func, format_args!("{what} is NULL or misaligned")))
}

/// `0` or the negative error, as C callers expect.
pub fn code(r: UmqResult<()>) -> i32 {
    match r {
        Ok(()) => UMQ_SUCCESS,
        Err(e) => e,
    }
}

/// For functions that return NULL/0 on failure: sets errno and yields the failure value.
pub fn or_errno<T: Failure>(r: UmqResult<T>) -> T {
    r.unwrap_or_else(|e| {
        crate::error::set_errno(e);
        T::failure()
    })
}

/// For functions that return a file descriptor: `UMQ_INVALID_FD` with errno set on failure.
pub fn fd_or_errno(r: UmqResult<i32>) -> i32 {
    r.unwrap_or_else(|e| {
        crate::error::set_errno(e);
        crate::abi::errno::UMQ_INVALID_FD
    })
}

/// Stores into an optional `bad_qbuf` out-parameter (NULL: none). The store is unaligned, so
/// any pointer the caller gives works: testing its alignment first, and writing nothing through
/// a misaligned one, cost every post five instructions.
pub fn set_bad(bad: *mut *mut crate::abi::types::umq_buf_t, v: *mut crate::abi::types::umq_buf_t) {
    if !bad.is_null() {
        // SAFETY: the caller gave this place for the answer.
        unsafe { bad.write_unaligned(v) }
    }
}
