//! `--api base`: the same latency and qps runs through the base API, as the reference's perftest
//! runs them with `-f 0`. The library posts and recycles the receive buffers and frees what it
//! sent; a send is a fresh buffer `umq_enqueue`d, and `umq_dequeue` returns the messages that
//! have arrived as one list, walked by each head's `total_data_size`.

use crate::clock::time_round_trips;
use crate::report::Progress;
use crate::shm::warmup;
use crate::{QPS_LIST, Run};
use std::ptr;
use umq::abi::errno::UMQ_ERR_EAGAIN;
use umq::abi::types::*;
use umq::ffi::api::*;

/// `n` messages of `run.size` bytes in one list (one message per buffer), from the queue's
/// shared pool unless the run says otherwise, numbered `seq`, `seq + 1`, ... in their first
/// bytes (when they have 8).
fn messages(q: u64, run: &Run, n: u32, seq: u64) -> *mut umq_buf_t {
    let from = if run.shared_pool { q } else { 0 };
    let head = umq_buf_alloc(run.size.max(8), n, from, ptr::null_mut());
    assert!(!head.is_null(), "umq_buf_alloc failed");
    let mut b = head;
    for i in 0..n as u64 {
        unsafe {
            (*b).data_size = run.size;
            (*b).total_data_size = run.size;
            if run.size >= 8 {
                ((*b).buf_data as *mut u64).write_unaligned(seq + i);
            }
            b = (*b).qbuf_next;
        }
    }
    head
}

/// Enqueues `list` whole, trying again while the queue refuses it for want of room or credit,
/// with `meanwhile` run between tries.
fn enqueue(q: u64, list: *mut umq_buf_t, mut meanwhile: impl FnMut()) {
    loop {
        let mut bad = ptr::null_mut();
        match umq_enqueue(q, list, &mut bad) {
            0 => return,
            r if r == -UMQ_ERR_EAGAIN => meanwhile(),
            r => panic!("umq_enqueue failed: {r}"),
        }
    }
}

/// One `umq_dequeue`: calls `each` with the sequence number of every message of the list it
/// returns (0 for messages under 8 bytes), frees the list, and returns how many there were.
fn dequeue(q: u64, mut each: impl FnMut(u64)) -> usize {
    let list = umq_dequeue(q);
    let mut n = 0;
    let mut b = list;
    while !b.is_null() {
        let (len, seq) = unsafe {
            let len = (*b).total_data_size;
            let seq = if len >= 8 {
                ((*b).buf_data as *const u64).read_unaligned()
            } else {
                0
            };
            (len, seq)
        };
        each(seq);
        n += 1;
        b = past_message(b, len);
    }
    if !list.is_null() {
        umq_buf_free(list);
    }
    n
}

/// The buffer after the message of `len` bytes that begins at `head`.
fn past_message(head: *mut umq_buf_t, len: u32) -> *mut umq_buf_t {
    let (mut b, mut left) = (head, len);
    loop {
        let (size, next) = unsafe { ((*b).data_size, (*b).qbuf_next) };
        assert!(size <= left, "a dequeued list does not add up");
        left -= size;
        b = next;
        if left == 0 || b.is_null() {
            assert_eq!(left, 0, "a dequeued message is cut short");
            return b;
        }
    }
}

/// Waits for one message and returns its sequence number.
fn receive_one(q: u64) -> u64 {
    let mut seq = None;
    while seq.is_none() {
        let n = dequeue(q, |s| seq = Some(s));
        assert!(n <= 1, "a ping-pong found {n} messages at once");
    }
    seq.unwrap()
}

/// One process: `a` sends, `b` echoes. Returns half round trips in ns.
pub fn latency(a: u64, b: u64, run: &Run, progress: &mut Progress) -> Vec<f64> {
    let tick = |done| progress.tick(done);
    time_round_trips(warmup(run.iters), run.iters, tick, |i| {
        enqueue(a, messages(a, run, 1, i), || {});
        let seq = receive_one(b);
        enqueue(b, messages(b, run, 1, seq), || {});
        check_echo(run, receive_one(a), i);
    })
}

fn check_echo(run: &Run, echo: u64, sent: u64) {
    if run.size >= 8 {
        assert_eq!(echo, sent, "echo {sent} carried the wrong number");
    }
}

/// Counts what `q` dequeues, checking the order against `next`.
fn count_in_order(q: u64, run: &Run, next: &mut u64) -> usize {
    dequeue(q, |seq| {
        if run.size >= 8 {
            assert_eq!(seq, *next, "message out of order");
        }
        *next += 1;
    })
}

/// One process, the reference qps tool's base-API pattern: `a` enqueues lists of 64 fresh
/// messages, `b` dequeues and counts. Returns messages per second.
pub fn qps(a: u64, b: u64, run: &Run, progress: &mut Progress) -> f64 {
    let rounds = (run.iters / QPS_LIST as u64).max(1);
    let mut received = 0;
    let t = std::time::Instant::now();
    for r in 0..rounds {
        let list = messages(a, run, QPS_LIST, r * QPS_LIST as u64);
        enqueue(a, list, || {
            count_in_order(b, run, &mut received);
        });
        umq_notify(a);
        while count_in_order(b, run, &mut received) > 0 {}
        progress.tick(r * QPS_LIST as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(received, rounds * QPS_LIST as u64, "messages went missing");
    received as f64 / secs
}

/// Two processes, the measuring side: sends, waits for the echo. Half round trips in ns.
pub fn ping(q: u64, run: &Run, progress: &mut Progress) -> Vec<f64> {
    let tick = |done| progress.tick(done);
    time_round_trips(warmup(run.iters), run.iters, tick, |i| {
        enqueue(q, messages(q, run, 1, i), || {});
        check_echo(run, receive_one(q), i);
    })
}

/// Two processes, the peer: echoes every message's number back in a message of the same size.
pub fn pong(q: u64, run: &Run) {
    for _ in 0..warmup(run.iters) + run.iters {
        let seq = receive_one(q);
        enqueue(q, messages(q, run, 1, seq), || {});
    }
}

/// Two processes, the measuring side of qps: waits for the peer's "ready", enqueues lists of 64
/// fresh messages (the last list shorter), then waits for its "all received". Messages per
/// second from the end of the warm-up.
pub fn qps_out(q: u64, run: &Run, progress: &mut Progress) -> f64 {
    receive_one(q); // ready
    let (warm, total) = (warmup(run.iters), warmup(run.iters) + run.iters);
    let (mut sent, mut start) = (0u64, None);
    while sent < total {
        if start.is_none() && sent >= warm {
            start = Some(std::time::Instant::now());
        }
        let k = (QPS_LIST as u64).min(total - sent) as u32;
        enqueue(q, messages(q, run, k, sent), || {});
        umq_notify(q);
        sent += k as u64;
        progress.tick(sent.saturating_sub(warm));
    }
    receive_one(q); // all received
    let elapsed = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    run.iters as f64 / elapsed
}

/// Two processes, the peer of qps: says it is ready, counts the warm-up and `iters` messages in
/// order, then says all arrived.
pub fn count_in(q: u64, run: &Run) {
    enqueue(q, messages(q, run, 1, 0), || {});
    let mut got = 0;
    while got < warmup(run.iters) + run.iters {
        count_in_order(q, run, &mut got);
    }
    enqueue(q, messages(q, run, 1, got), || {});
}
