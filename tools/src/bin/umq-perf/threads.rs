//! `--test threads`: `--threads` threads of this process, each ping-ponging on a pair of queues
//! it made itself, allocating a buffer for every message it sends and every receive buffer it posts
//! again, and freeing every buffer that comes back, as the API's example programs do. The
//! pairs are loopback pairs, or over shared memory or the network between queues of this one
//! process (`--provider shm|fabric`). What it shows is how the library's process-wide parts
//! (the buffer pool, the runtime, the network node) let threads that share nothing of their
//! own run side by side: the round trips of all threads together, and against one thread.

use crate::Run;
use crate::api;
use crate::report::Row;
use std::ptr;
use std::time::Instant;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;

/// Round trips of all threads a second, `threads` of them each on a pair it made itself (as a
/// server's thread makes its connections' queues), each making `run.iters` round trips.
fn round_trips_per_s(run: &Run, threads: u32) -> f64 {
    let ready = std::sync::Barrier::new(threads as usize);
    std::thread::scope(|s| {
        let each: Vec<_> = (0..threads)
            .map(|_| s.spawn(|| one_thread(run, &ready)))
            .collect();
        each.into_iter().map(|t| t.join().unwrap()).sum()
    })
}

/// One thread's round trips a second on a pair of its own, once every thread has its pair.
fn one_thread(run: &Run, ready: &std::sync::Barrier) -> f64 {
    let (a, b) = (api::create(run.depth), api::create(run.depth));
    let (ia, ib) = (api::bind_info(a), api::bind_info(b));
    api::bind(a, ib);
    api::bind(b, ia);
    for q in [a, b] {
        api::post_rx_all(q, &api::alloc(run.size, run.rx_bufs, UMQ_OPC_SEND));
    }
    ready.wait();
    let start = Instant::now();
    for _ in 0..run.iters {
        send_one(a, run.size);
        take_one(b, run.size);
        send_one(b, run.size);
        take_one(a, run.size);
    }
    let rate = run.iters as f64 / start.elapsed().as_secs_f64();
    api::teardown(a);
    api::teardown(b);
    rate
}

/// Sends a newly allocated message on `q`, freeing the sends that completed.
fn send_one(q: u64, size: u32) {
    free_sent(q);
    let msg = api::alloc(size, 1, UMQ_OPC_SEND);
    let b = msg[0];
    unsafe {
        (*b).data_size = size;
        (*b).total_data_size = size;
    }
    api::post_all(q, &msg, || free_sent(q));
}

fn free_sent(q: u64) {
    let mut done = [ptr::null_mut(); 8];
    let n = api::poll(q, UMQ_IO_TX, &mut done);
    done[..n].iter().for_each(|&b| umq_buf_free(b));
}

/// Takes the next message of `q`, frees it and posts a new receive buffer in its place.
fn take_one(q: u64, size: u32) {
    let mut got = [ptr::null_mut(); 1];
    loop {
        api::poll_exact(q, UMQ_IO_RX, &mut got);
        match api::done(got[0]) {
            // A standalone window update carries no data: its buffer goes back as it is.
            api::Done::WindowUpdate => api::post(q, &got, UMQ_IO_RX),
            _ => break,
        }
    }
    assert_eq!(
        unsafe { (*got[0]).total_data_size },
        size,
        "a message of another size"
    );
    umq_buf_free(got[0]);
    api::post(q, &api::alloc(size, 1, UMQ_OPC_SEND), UMQ_IO_RX);
}

/// One row per thread count: all threads' round trips a second, a thread's, and the ratio to
/// the first count's rate per thread (1.0: threads run side by side as if alone).
pub fn measure(run: &Run, counts: &[u32], provider: &'static str) -> Vec<Row> {
    if provider != "loopback" {
        // SAFETY: before the library starts any thread of its own (umq_init reads it), and
        // umq-perf has none of its own yet.
        unsafe { std::env::set_var("UMQ_PROVIDER", provider) };
    }
    api::init(run.flow);
    let mut first_per_thread = None;
    let rows = counts
        .iter()
        .map(|&threads| {
            let all = round_trips_per_s(run, threads);
            let per_thread = all / threads as f64;
            let first = *first_per_thread.get_or_insert(per_thread);
            Row::new("threads", provider, run.size, run.flow.on)
                .num("threads", threads as f64)
                .num("round_trips_per_s", all.round())
                .num("per_thread_round_trips_per_s", per_thread.round())
                .num("per_thread_vs_first", per_thread / first)
        })
        .collect();
    umq_uninit();
    rows
}
