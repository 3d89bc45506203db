//! `--test scale`: many bound queue pairs in one process (loopback), as a server keeping a
//! queue per connection has. Creates and binds `--pairs` pairs, measures what the process's
//! resident memory and open fds grew by per queue (before any buffer is posted: buffers are
//! the application's), sends one message each way through every pair (`sweep_ns` per
//! message: every pair's memory is cold by then), ping-pongs on one pair beside all the others
//! (`msg_ns`, half a round trip: what a message costs with that many queues alive), then
//! destroys them all.

use crate::Run;
use crate::api;
use crate::report::Row;
use std::ptr;
use std::time::Instant;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;

/// The process's resident memory, in bytes (`/proc/self/statm`).
pub fn resident_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// The process's open file descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

/// One message from `from` to `to` (which has a receive buffer posted), reposted at once.
fn one_way(from: u64, to: u64, msg: *mut umq_buf_t) {
    let mut c = [ptr::null_mut(); 1];
    api::post_all(from, &[msg], std::hint::spin_loop);
    api::poll_exact(to, UMQ_IO_RX, &mut c);
    api::post(to, &c, UMQ_IO_RX);
    api::poll_exact(from, UMQ_IO_TX, &mut c);
}

pub fn measure(run: &Run, pairs: u32) -> Row {
    api::init(run.flow);
    let (before, fds_before) = (resident_bytes(), open_fds());
    let start = Instant::now();
    let mut queues = Vec::with_capacity(pairs as usize);
    for _ in 0..pairs {
        let (a, b) = (api::create(run.depth), api::create(run.depth));
        let (ia, ib) = (api::bind_info(a), api::bind_info(b));
        api::bind(a, ib);
        api::bind(b, ia);
        queues.push((a, b));
    }
    let setup = start.elapsed();
    let grown = resident_bytes().saturating_sub(before);
    let fds = open_fds().saturating_sub(fds_before);
    for &(a, b) in &queues {
        for q in [a, b] {
            api::post(q, &api::alloc(run.size, 1, UMQ_OPC_SEND), UMQ_IO_RX);
        }
    }
    let msg = api::alloc(run.size, 1, UMQ_OPC_SEND)[0];
    let start = Instant::now();
    for &(a, b) in &queues {
        one_way(a, b, msg);
        one_way(b, a, msg);
    }
    let sweep = start.elapsed();
    let (a, b) = queues[0];
    let rounds = run.iters.min(100_000);
    let start = Instant::now();
    for _ in 0..rounds {
        one_way(a, b, msg);
        one_way(b, a, msg);
    }
    let ping_pong = start.elapsed();
    umq_buf_free(msg);
    let start = Instant::now();
    for &(a, b) in &queues {
        api::teardown(a);
        api::teardown(b);
    }
    let teardown = start.elapsed();
    umq_uninit();
    let per_pair = |d: std::time::Duration| d.as_nanos() as f64 / 1e3 / pairs as f64;
    Row::new("scale", "loopback", run.size, run.flow.on)
        .num("queues", 2.0 * pairs as f64)
        .num("depth", run.depth as f64)
        .num(
            "bytes_per_queue",
            (grown as f64 / (2.0 * pairs as f64)).round(),
        )
        .num("fds_per_queue", fds as f64 / (2.0 * pairs as f64))
        .num("setup_us_per_pair", per_pair(setup))
        .num(
            "msg_ns",
            (ping_pong.as_nanos() as f64 / (2.0 * rounds as f64)).round(),
        )
        .num(
            "sweep_ns",
            (sweep.as_nanos() as f64 / (2.0 * pairs as f64)).round(),
        )
        .num("teardown_us_per_pair", per_pair(teardown))
}
