//! A queue's error state and its `UMQ_EVENT_QH_ERR` are seen together: a thread that sees the
//! queue in `QUEUE_STATE_ERR` and then reads the async events finds the event, however the
//! thread that failed the queue is delayed meanwhile.
//!
//! The delay here is the log line the failure writes: the application's log callback sleeps.
//! When the state was set before the line was logged and the event raised after it, the
//! watcher saw the state and read no event in nearly every run.

mod support;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use support::*;
use umq::abi::types::*;
use umq::ffi::api::*;

const RUNS: usize = 20;

/// The application's log: slow, as a line written to a busy disk or a remote collector is.
unsafe extern "C" fn slow_log(_level: i32, _msg: *mut std::os::raw::c_char) {
    std::thread::sleep(Duration::from_millis(2));
}

/// Logs through `func` (None: stderr, the library's own) from `level` on.
fn log_to(func: umq_log_func_t, level: umq_log_level_t) {
    let mut cfg = umq_log_config_t {
        log_flag: UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL,
        func,
        level,
        ..Default::default()
    };
    assert_eq!(umq_log_config_set(&mut cfg), 0);
}

#[test]
fn a_queue_seen_in_error_has_its_event_raised() {
    init_flow_control(16, 4, false);
    log_to(Some(slow_log), UMQ_LOG_LEVEL_INFO);
    for run in 0..RUNS {
        let (a, b) = (create("error-a", 64), create("error-b", 64));
        bind_pair(a, b);
        let started = AtomicBool::new(false);
        let events = std::thread::scope(|s| {
            let watcher = s.spawn(|| {
                started.store(true, Ordering::Release);
                while umq_state_get(b) != QUEUE_STATE_ERR {
                    std::hint::spin_loop();
                }
                drain_async_events()
            });
            while !started.load(Ordering::Acquire) {
                std::hint::spin_loop();
            }
            // b's peer leaves: b enters the error state in this thread, which then logs it.
            assert_eq!(umq_unbind(a), 0);
            watcher.join().unwrap()
        });
        assert!(
            events.contains(&UMQ_EVENT_QH_ERR),
            "run {run}: b was seen in error, its events were {events:?}"
        );
        assert_eq!(umq_unbind(b), 0);
        assert_eq!(umq_destroy(a), 0);
        assert_eq!(umq_destroy(b), 0);
        drain_async_events();
    }
    log_to(None, UMQ_LOG_LEVEL_WARN);
    umq_uninit();
}
