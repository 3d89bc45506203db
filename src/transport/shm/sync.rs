//! The atomics that the protocols between two processes (`placement`, `presence`) are written
//! against: std's here. `tests/loom_placement.rs` compiles the same source files against loom's
//! instead, whose model checker then runs them under every interleaving.

pub use std::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

/// One turn of a wait on the peer process: spin at first, then sleep, since the peer may be
/// descheduled for a long while.
pub fn pause(turn: u32) {
    if turn < 4096 {
        std::hint::spin_loop();
    } else {
        std::thread::sleep(std::time::Duration::from_micros(50));
    }
}
