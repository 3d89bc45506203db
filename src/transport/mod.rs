//! Transports move work requests between two bound queues: `loopback` when both queues live in
//! one process, `shm` between processes of one host, `fabric` (libfabric) between hosts.

pub mod arrivals;
pub(crate) mod assembly;
pub mod binding;
pub mod call_bell;
pub mod fabric;
pub mod fifo;
#[cfg(any(test, feature = "fuzzing"))]
pub mod hostile;
pub mod link;
pub mod loopback;
pub mod paced;
pub mod pause;
pub mod progress;
pub mod recv_queue;
pub mod send_queue;
pub mod shared_rq;
pub mod shm;
pub mod sleep_lock;
#[cfg(test)]
mod sleep_lock_tests;
/// What the node lock (`sleep_lock.rs`) is written against: std and the process's futexes and
/// asymmetric fence here; `tests/loom_sleep_lock.rs` compiles the same file against loom.
mod sleep_lock_sync {
    pub use crate::hazard::{heavy_fence, light_fence};
    pub use crate::os::{futex_wait, futex_wake_all};
    pub use std::hint::spin_loop;
    pub use std::sync::atomic::{AtomicU32, Ordering};
    /// Looks a waiter spins before it sleeps, and again after each wake-up: some tens of
    /// microseconds, longer than a round's section with its system calls. Each sleep costs
    /// the process a membarrier, an interrupt of every core running one of its threads, the
    /// holder's among them: two threads sharing one node (`UMQ_FABRIC_NODES=1`) made 31,000
    /// round trips a second together spinning 100 looks, 78,000-85,000 spinning 1,000, and
    /// 71,000-74,000 on std's mutex (`umq-perf --provider fabric --test threads --threads 2`).
    pub const SPINS: u32 = 1000;
}
pub mod spin;
#[cfg(test)]
mod spin_tests;
/// What the wire lock (`spin.rs`) is written against: std here; `tests/loom_spin.rs` compiles
/// the same file against loom's atomics and scheduler.
mod spin_sync {
    pub use std::hint::spin_loop;
    pub use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    pub use std::thread::{sleep, yield_now};
    /// Looks after which a waiter asks for the lock's next turn (a fraction of the spin phase:
    /// well past any section, well before a nap).
    pub const WANT_AFTER: u32 = 64;

    /// Whether the calling thread waits for a lock without ever asking for its next turn
    /// (the progress engine's, outside its timed work).
    pub use super::progress::waits_politely;
}
pub mod target;
pub mod timer;
pub mod tp_pool;
pub mod transmit;
pub mod wire;
pub mod wired;

use crate::abi::types::{UMQ_LOG_LEVEL_ERR, UMQ_LOG_LEVEL_NOTICE};

/// Why a binding broke, as every provider reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkError {
    /// The peer queue unbound or was destroyed: an orderly end.
    PeerLeft,
    /// What the peer wrote failed a check (a corrupt or hostile peer); says which.
    Corrupt(&'static str),
    /// The peer cannot be reached any more (the network provider's error); says why.
    Lost(&'static str),
}

impl LinkError {
    /// The level the queue logs it at: a peer leaving is news, a corrupt peer an error.
    pub fn log_level(self) -> u32 {
        match self {
            LinkError::PeerLeft => UMQ_LOG_LEVEL_NOTICE,
            LinkError::Corrupt(_) | LinkError::Lost(_) => UMQ_LOG_LEVEL_ERR,
        }
    }
}

impl std::fmt::Display for LinkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LinkError::PeerLeft => "peer queue unbound",
            LinkError::Corrupt(why) | LinkError::Lost(why) => why,
        })
    }
}

/// A WR for the providers' tests: `len` bytes (byte i is i % 251), opcode `op`, immediate `imm`.
#[cfg(test)]
pub(crate) fn test_wr(
    pool: &crate::buf::pool::Pool,
    len: u32,
    op: crate::abi::pro_types::umq_opcode_t,
    imm: u64,
) -> *mut crate::abi::types::umq_buf_t {
    let wr = pool.alloc(len, 1, 0, 0).unwrap();
    let b = unsafe { &mut *wr };
    let data = unsafe { std::slice::from_raw_parts_mut(b.buf_data as *mut u8, len as usize) };
    data.iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = (i % 251) as u8);
    (b.data_size, b.total_data_size) = (len, len);
    b.pro_mut().opcode = op;
    b.pro_mut().imm_data = imm;
    wr
}

/// Whether the buffer `b` holds the `len` bytes `test_wr` sent.
#[cfg(test)]
pub(crate) fn test_bytes_intact(b: *mut crate::abi::types::umq_buf_t, len: usize) -> bool {
    let got = unsafe { std::slice::from_raw_parts((*b).buf_data as *const u8, len) };
    got.iter().enumerate().all(|(i, &x)| x == (i % 251) as u8)
}
