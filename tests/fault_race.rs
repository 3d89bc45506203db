//! Fault injection inside one process: a sender thread streams flow-controlled SENDs on queue
//! `a` while the main thread, receiving on `b`, destroys `a`, unbinds it, or unbinds it and
//! binds it to a new queue `c` at a random point of the stream (one run in three each). Runs on
//! the loopback transport, over shared memory and over the network provider (forced with
//! `UMQ_PROVIDER`; the network's queues of one process share its node, one endpoint and one
//! connection), `UMQ_RACE_RUNS` times each (default 300; `UMQ_FAULT_SEED` picks the points;
//! `UMQ_RACE_PROVIDERS` names the providers to run).
//!
//! Each run must end with:
//! - no crash, and the sender's calls on the gone or unbound queue refused with
//!   `-UMQ_ERR_EINVAL` (a stale handle, or a queue that is not bound), never anything else;
//! - `b` holding every message `a` completed while bound to it, in order, exactly once;
//! - after a rebind, the same sender going on: `c` receives its next messages, in order, with
//!   no gap, and together `b` and `c` hold every message `a` completed;
//! - the process holding what it held before the run once the queues are destroyed.

mod support;
use std::ptr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use support::*;
use umq::abi::errno::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::ffi::pro_api::*;

const DEPTH: u32 = 64;

fn runs() -> u64 {
    env_u64("UMQ_RACE_RUNS", 300)
}

/// What happens to `a` under its sender.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    Destroy,
    Unbind,
    /// Unbound, then bound to a new queue; the sender goes on.
    Rebind,
}

/// Messages received on one queue: the count, and the sequence number the next must carry
/// (None until the first: after a rebind, the stream goes on where the sender is).
#[derive(Default)]
struct Stream {
    count: u64,
    next: Option<u64>,
}

/// What the sender saw.
struct Sent {
    completed: u64,
    refusals: u64,
}

/// Streams sequence-numbered SENDs on `a` until `stop`; every call's result must be success,
/// `-UMQ_ERR_EAGAIN` (no credit or room) or, once `a` is gone or unbound, `-UMQ_ERR_EINVAL`.
fn sender(a: u64, stop: Arc<AtomicBool>, completed: Arc<AtomicU64>, seed: u64) -> Sent {
    let mut rng = Rng(seed | 1);
    let mut free = alloc(DEPTH as usize, 64);
    let (mut next, mut refusals) = (0u64, 0u64);
    while !stop.load(Ordering::Acquire) {
        let want = (1 + rng.below(8) as usize).min(free.len());
        let batch: Vec<_> = free.drain(free.len() - want..).collect();
        fill_sends(&batch, next);
        let mut bad = ptr::null_mut();
        let rc = umq_post(a, chain(&batch), UMQ_IO_TX, &mut bad);
        let taken = match rc {
            0 => batch.len(),
            e if e == -UMQ_ERR_EAGAIN => batch.iter().position(|&b| b == bad).unwrap(),
            e => {
                assert_eq!(e, -UMQ_ERR_EINVAL, "post on a gone or unbound queue");
                assert_eq!(bad, batch[0], "a refused post names its first buffer");
                refusals += 1;
                0
            }
        };
        next += taken as u64;
        free.extend_from_slice(&batch[taken..]);
        let mut out = [ptr::null_mut(); DEPTH as usize];
        let n = umq_poll(a, UMQ_IO_TX, out.as_mut_ptr(), DEPTH);
        if n < 0 {
            assert_eq!(n, -UMQ_ERR_EINVAL, "poll on a gone queue");
            continue;
        }
        for &b in &out[..n as usize] {
            if unsafe { (*b).status() } == UMQ_BUF_SUCCESS {
                completed.fetch_add(1, Ordering::Release);
            }
            free.push(b);
        }
    }
    free_all(&free);
    Sent {
        completed: completed.load(Ordering::Acquire),
        refusals,
    }
}

/// Receives on `b` until `until` says stop; checks order; reposts.
fn receive(b: u64, got_so_far: &mut Stream, run: u64, mut until: impl FnMut(u64) -> bool) {
    while !until(got_so_far.count) {
        let got = poll(b, UMQ_IO_RX, DEPTH as usize);
        let mut again = Vec::new();
        for &m in &got {
            if unsafe { (*m).status() } == UMQ_BUF_SUCCESS {
                let expected = *got_so_far.next.get_or_insert(seq_of(m));
                assert_eq!(
                    seq_of(m),
                    expected,
                    "run {run}: out of order, repeated or a gap"
                );
                got_so_far.next = Some(expected + 1);
                got_so_far.count += 1;
            }
            again.push(m);
        }
        if !again.is_empty() && umq_state_get(b) != QUEUE_STATE_ERR {
            let _ = post(b, UMQ_IO_RX, &again);
        } else {
            free_all(&again);
        }
    }
}

/// A new receiving queue bound to `a`, its receive buffers posted first: a sender already
/// running spends the initial window at once.
fn receiver_for(a: u64, name: &str) -> u64 {
    let b = create(name, DEPTH);
    assert_eq!(
        post(b, UMQ_IO_RX, &alloc(DEPTH as usize, 64)),
        Ok(DEPTH as usize)
    );
    bind_pair(a, b);
    b
}

/// One run; returns (messages received, the sender's refused calls).
fn one_run(run: u64, rng: &mut Rng, fault: Fault, baseline: &(Held, Vec<String>)) -> (u64, u64) {
    let a = create("race-a", DEPTH);
    let b = receiver_for(a, "race-b");
    let stop = Arc::new(AtomicBool::new(false));
    let completed = Arc::new(AtomicU64::new(0));
    let thread = {
        let (stop, completed, s) = (stop.clone(), completed.clone(), rng.next());
        std::thread::spawn(move || sender(a, stop, completed, s))
    };
    let at = rng.below(3000);
    let mut received = Stream::default();
    receive(b, &mut received, run, |r| r >= at);
    if fault == Fault::Destroy {
        assert_eq!(umq_destroy(a), 0, "run {run}: destroy under a sender");
    } else {
        assert_eq!(umq_unbind(a), 0, "run {run}: unbind under a sender");
    }
    // What `a` completed before it went is in `b` (or on its way there): take it all.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let sent_before_stop = loop {
        let done = completed.load(Ordering::Acquire);
        receive(b, &mut received, run, |r| {
            r >= done || std::time::Instant::now() > deadline
        });
        if received.count >= done || std::time::Instant::now() > deadline {
            break done;
        }
    };
    assert!(
        received.count >= sent_before_stop,
        "run {run}: a completed {sent_before_stop} before it went and b received {}",
        received.count
    );
    // After a rebind the sender goes on to the new peer, where the stream takes up again.
    let mut after = Stream::default();
    let c = (fault == Fault::Rebind).then(|| {
        let c = receiver_for(a, "race-c");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        receive(c, &mut after, run, |r| {
            r >= 200 || std::time::Instant::now() > deadline
        });
        assert!(
            after.count >= 200,
            "run {run}: the sender stalled after the rebind: c received {}, a: state {}, {} sends left, {:?}, {:?}; c: {:?}, {:?}",
            after.count,
            umq_state_get(a),
            umq::ffi::fi::umq_tx_size_left(a),
            stats(a),
            ext_stats(a),
            stats(c),
            ext_stats(c)
        );
        c
    });
    stop.store(true, Ordering::Release);
    let sent = thread.join().expect("the sender thread");
    // What `a` completed last may still wait in `b` (sent before the unbind, its completion
    // polled since) or in `c`.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while received.count + after.count < sent.completed && std::time::Instant::now() < deadline {
        for (q, stream) in [(Some(b), &mut received), (c, &mut after)] {
            let mut once = false;
            if let Some(q) = q {
                receive(q, stream, run, |_| std::mem::replace(&mut once, true));
            }
        }
    }
    if let Some(c) = c {
        // The new peer's first message follows the last the old one could have had.
        assert!(
            after.next.unwrap() - after.count >= received.count,
            "run {run}: replayed"
        );
        assert_eq!(umq_destroy(c), 0);
    }
    assert!(
        received.count + after.count >= sent.completed,
        "run {run}: a completed {} and its peers received {} + {}",
        sent.completed,
        received.count,
        after.count
    );
    if fault != Fault::Destroy {
        assert_eq!(umq_destroy(a), 0);
    }
    assert_eq!(umq_destroy(b), 0);
    // The events of the run (b's error when its peer went): read, as an application would.
    drain_async_events();
    assert_holds(baseline.0, &baseline.1, &format!("run {run}"));
    (received.count + after.count, sent.refusals)
}

fn race_runs(provider: &str) {
    // SAFETY: before umq_init reads it; the other tests of this binary are not running (one).
    unsafe {
        std::env::set_var("UMQ_PROVIDER", provider);
    }
    init_flow_control(0, 0, false);
    let mut rng = Rng(fault_seed() | 1);
    let (mut received, mut refused, mut raced) = (0, 0, 0);
    // Every run must leave the process as it was before the first binding.
    let baseline = quiescent(held().threads);
    for run in 0..runs() {
        let fault = [Fault::Destroy, Fault::Unbind, Fault::Rebind][run as usize % 3];
        let (r, f) = one_run(run, &mut rng, fault, &baseline);
        received += r;
        refused += f;
        raced += (f > 0) as u64;
    }
    umq_uninit();
    println!(
        "{provider}: {} runs (seed {}), {received} messages received in order, the sender \
         refused {refused} times in the {raced} runs where it called after the queue went",
        runs(),
        fault_seed()
    );
    // The point of the test: the sender did run into the destroyed or unbound queue.
    assert!(raced > 0, "{provider}: no run raced the sender");
}

/// The providers one after the other (`UMQ_RACE_PROVIDERS`, default `loopback,shm,fabric`:
/// the test command runs the network's again over the UCX engine), one library instance each.
#[test]
fn destroying_unbinding_or_rebinding_a_queue_under_its_sender_loses_nothing_it_completed() {
    let providers = std::env::var("UMQ_RACE_PROVIDERS").unwrap_or("loopback,shm,fabric".into());
    for p in providers.split(',').map(str::trim) {
        if p == "fabric" && !std::path::Path::new("/usr/include/rdma/fabric.h").exists() {
            eprintln!("SKIPPED: the network provider's runs (libfabric-dev is not installed)");
            continue;
        }
        race_runs(p);
    }
}
