//! Logging: a user callback or stderr, a level, and a rate limit (`umq_log_config_set`).
//!
//! Every failed call logs one line naming the function and the violated condition, so a C user
//! sees why a call returned `-UMQ_ERR_EINVAL` without reading our source.

use crate::abi::types::*;
use std::cell::RefCell;
use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::time::Instant;

struct Sink {
    func: umq_log_func_t,
    rate: umq_log_rate_limit_t,
    window_start: Option<Instant>,
    in_window: u32,
}

static LEVEL: AtomicU32 = AtomicU32::new(u32::MAX); // MAX = not yet read from the environment
static SINK: Mutex<Sink> = Mutex::new(Sink {
    func: None,
    rate: umq_log_rate_limit_t {
        interval_ms: 0,
        num: 0,
    },
    window_start: None,
    in_window: 0,
});

/// The sink, locked. Its lock is taken around `fork()` too, so a child never starts with it
/// held by a thread it does not have (a log line of the progress thread while the application
/// forked); nothing else is locked under it, so taking it there cannot deadlock.
fn sink() -> MutexGuard<'static, Sink> {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: the handlers lock and unlock a leaf lock on the forking thread.
        unsafe { libc::pthread_atfork(Some(hold_for_fork), Some(release), Some(release)) };
    });
    SINK.lock().unwrap_or_else(|p| p.into_inner())
}

thread_local! {
    /// The sink's lock while this thread forks.
    static HELD_FOR_FORK: RefCell<Option<MutexGuard<'static, Sink>>> = const { RefCell::new(None) };
}

extern "C" fn hold_for_fork() {
    let guard = SINK.lock().unwrap_or_else(|p| p.into_inner());
    let _ = HELD_FOR_FORK.try_with(|h| *h.borrow_mut() = Some(guard));
}

extern "C" fn release() {
    let _ = HELD_FOR_FORK.try_with(|h| h.borrow_mut().take());
}

const NAMES: [&str; 8] = [
    "EMERG", "ALERT", "CRIT", "ERR", "WARN", "NOTICE", "INFO", "DEBUG",
];

/// `UMQ_LOG_LEVEL` may be a number (0..7) or a name (`err`, `warn`, `info`, `debug`, ...).
fn level_from_env() -> u32 {
    let Ok(v) = std::env::var("UMQ_LOG_LEVEL") else {
        return UMQ_LOG_LEVEL_WARN;
    };
    if let Ok(n) = v.trim().parse::<u32>() {
        return n.min(UMQ_LOG_LEVEL_DEBUG);
    }
    let up = v.trim().to_ascii_uppercase();
    NAMES
        .iter()
        .position(|n| {
            up == *n || (up == "WARNING" && *n == "WARN") || (up == "ERROR" && *n == "ERR")
        })
        .map(|p| p as u32)
        .unwrap_or(UMQ_LOG_LEVEL_WARN)
}

pub fn level() -> u32 {
    let l = LEVEL.load(Ordering::Relaxed);
    if l != u32::MAX {
        return l;
    }
    let l = level_from_env();
    LEVEL.store(l, Ordering::Relaxed);
    l
}

pub fn enabled(level_: u32) -> bool {
    level_ <= level()
}

pub fn set_config(cfg: &umq_log_config_t) -> Result<(), i32> {
    if cfg.log_flag & !(UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL | UMQ_LOG_FLAG_RATE_LIMITED) != 0 {
        return Err(crate::error::einval(
            "umq_log_config_set",
            format_args!("unknown log_flag bits {:#x}", cfg.log_flag),
        ));
    }
    if cfg.log_flag & UMQ_LOG_FLAG_LEVEL != 0 && cfg.level >= UMQ_LOG_LEVEL_MAX {
        return Err(crate::error::einval(
            "umq_log_config_set",
            format_args!("level {} >= UMQ_LOG_LEVEL_MAX", cfg.level),
        ));
    }
    let mut sink = sink();
    if cfg.log_flag & UMQ_LOG_FLAG_FUNC != 0 {
        sink.func = cfg.func;
    }
    if cfg.log_flag & UMQ_LOG_FLAG_LEVEL != 0 {
        LEVEL.store(cfg.level, Ordering::Relaxed);
    }
    if cfg.log_flag & UMQ_LOG_FLAG_RATE_LIMITED != 0 {
        sink.rate = cfg.rate_limited;
        sink.window_start = None;
    }
    Ok(())
}

pub fn get_config() -> umq_log_config_t {
    let sink = sink();
    umq_log_config_t {
        log_flag: UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL | UMQ_LOG_FLAG_RATE_LIMITED,
        func: sink.func,
        level: level(),
        rate_limited: sink.rate,
    }
}

/// Resets to defaults (used by `umq_uninit` tests and at first init).
pub fn reset() {
    let mut sink = sink();
    sink.func = None;
    sink.rate = umq_log_rate_limit_t::default();
    sink.window_start = None;
    LEVEL.store(u32::MAX, Ordering::Relaxed);
}

/// True when the rate limit lets one more line through now.
fn admit(sink: &mut Sink) -> bool {
    if sink.rate.num == 0 || sink.rate.interval_ms == 0 {
        return true;
    }
    let now = Instant::now();
    let fresh = match sink.window_start {
        Some(t) => now.duration_since(t).as_millis() >= sink.rate.interval_ms as u128,
        None => true,
    };
    if fresh {
        sink.window_start = Some(now);
        sink.in_window = 0;
    }
    sink.in_window += 1;
    sink.in_window <= sink.rate.num
}

/// (Cold: a line written is rare beside the calls around it, so the branches that lead here
/// are laid out aside from the paths messages take.)
#[cold]
pub fn write(level_: u32, func: &str, args: std::fmt::Arguments<'_>) {
    if !enabled(level_) {
        return;
    }
    let line = format!("umq {} {}: {}", NAMES[level_.min(7) as usize], func, args);
    let func = {
        let mut sink = sink();
        if !admit(&mut sink) {
            return;
        }
        sink.func
    };
    // The lock is released first: a callback may call the API, which may log again.
    match func {
        Some(f) => {
            let c = CString::new(line.replace('\0', " ")).unwrap_or_default();
            // The callback is the user's; it gets a line valid for the duration of the call.
            unsafe { f(level_ as i32, c.as_ptr() as *mut _) };
        }
        None => eprintln!("{line}"),
    }
}

#[macro_export]
macro_rules! log_at {
    ($lvl:expr, $func:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write($lvl, $func, format_args!($($arg)*))
        }
    };
}
#[macro_export]
macro_rules! log_err { ($func:expr, $($arg:tt)*) => { $crate::log_at!($crate::abi::types::UMQ_LOG_LEVEL_ERR, $func, $($arg)*) }; }
#[macro_export]
macro_rules! log_warn { ($func:expr, $($arg:tt)*) => { $crate::log_at!($crate::abi::types::UMQ_LOG_LEVEL_WARN, $func, $($arg)*) }; }
#[macro_export]
macro_rules! log_info { ($func:expr, $($arg:tt)*) => { $crate::log_at!($crate::abi::types::UMQ_LOG_LEVEL_INFO, $func, $($arg)*) }; }
