//! `umq_uninit` and `umq_init` again while other threads make buffer calls. A buffer call
//! reaches the pool through the runtime's slot without a lock (`src/hazard/slot.rs`, whose
//! protocol `tests/loom_table.rs` proves), and `umq_uninit` must wait for the calls inside
//! before the pool goes: each call either runs on the runtime it found or is refused with
//! `-UMQ_ERR_EINVAL`, and none touches a pool being freed (which memcheck or a crash would
//! show). The threads never free what they allocated: a buffer is invalid once its runtime
//! went, and its memory may be the next runtime's.

mod support;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use support::*;
use umq::abi::errno::*;
use umq::ffi::api::*;

#[test]
fn buffer_calls_racing_uninit_and_init_run_on_a_whole_runtime_or_are_refused() {
    init_flow_control(64, 16, false);
    let stop = Arc::new(AtomicBool::new(false));
    let (made, refused) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let callers: Vec<_> = (0..2)
        .map(|_| {
            let (stop, made, refused) = (stop.clone(), made.clone(), refused.clone());
            std::thread::spawn(move || {
                let mut foreign = 0u64;
                while !stop.load(Ordering::Acquire) {
                    let b = umq_buf_alloc(100, 4, 0, std::ptr::null_mut());
                    match b.is_null() {
                        true => {
                            assert_eq!(errno(), UMQ_ERR_EINVAL, "refused for want of a runtime");
                            refused.fetch_add(1, Ordering::Relaxed);
                        }
                        false => {
                            made.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    // A lookup in the registry of whatever runtime is there.
                    let p = &mut foreign as *mut u64 as *mut std::ffi::c_void;
                    assert!(
                        umq_data_to_head(p).is_null(),
                        "a stack address is no buffer"
                    );
                }
            })
        })
        .collect();
    for _ in 0..300 {
        std::thread::sleep(std::time::Duration::from_micros(200));
        umq_uninit();
        std::thread::yield_now();
        init_flow_control(64, 16, false);
    }
    stop.store(true, Ordering::Release);
    callers.into_iter().for_each(|c| c.join().unwrap());
    umq_uninit();
    let (made, refused) = (
        made.load(Ordering::Relaxed),
        refused.load(Ordering::Relaxed),
    );
    println!("{made} allocations ran, {refused} were refused between runtimes");
    assert!(made > 0, "no call ran on a runtime");
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
