//! Fault injection: a peer process streams flow-controlled, sequence-numbered SENDs and is
//! killed with SIGKILL at a random point of the stream, over shared memory and over the network
//! provider, run after run (`UMQ_FAULT_RUNS`, default 1000 each; `UMQ_FAULT_SEED` picks the
//! points, and a failure names the seed and run that reproduce it).
//!
//! Half the runs stream 64 B messages, half 16 KiB ones whose every word is checked, into
//! receive buffers of either pool (over shared memory: placement and by reference).
//!
//! After each kill the survivor must:
//! - receive every message the peer saw complete, in order, exactly once and whole (the peer
//!   records its completions in a shared page as it polls them, so the count outlives it);
//! - reach the error state within `DETECTION_BOUND`, with its interrupt waiter woken;
//! - once it unbinds and destroys its queue, be back to the fds, memfds, shared mappings and
//!   threads it had before its first binding (read from /proc/self).
//!
//! A quarter as many runs again kill a receiving peer under a streaming survivor, which must
//! get every send buffer back exactly once (`one_send_run`).
//!
//! The peer is this test binary again, started with `UMQ_FAULT_PEER` set: it runs `peer_role`.

mod support;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use support::*;
use umq::abi::errno::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::ffi::pro_api::umq_post;

/// How soon after the kill the survivor must be in the error state (TRANSPORTS.md: the death is
/// seen through a pidfd at once, 0.5-9 ms measured; this is the promise, with room for a loaded
/// machine).
const DETECTION_BOUND: Duration = Duration::from_secs(2);
const DEPTH: u32 = 64;
const MSG: u32 = 64;
/// The large messages of half the runs: big enough to take the one-copy paths over shared
/// memory (placement into the receiver's buffer, or crossing by reference).
const LARGE: u32 = 16 << 10;
/// The messages of a split run: large enough that a stream of them is split between the two
/// copies (the sender places the first half, the receiver copies the rest by reference).
const SPLIT: u32 = 40 << 10;

fn runs() -> u64 {
    env_u64("UMQ_FAULT_RUNS", 1000)
}

fn init() {
    let mut cfg: umq_init_cfg_t = unsafe { std::mem::zeroed() };
    cfg.buf_mode = UMQ_BUF_SPLIT;
    cfg.feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    assert_eq!(umq_init(&mut cfg), 0);
}

fn create_queue(name: &str, interrupt: bool) -> u64 {
    create_in_mode(
        name,
        DEPTH,
        if interrupt {
            UMQ_MODE_INTERRUPT
        } else {
            UMQ_MODE_POLLING
        },
    )
}

fn bind_info(q: u64) -> Vec<u8> {
    let mut info = vec![0u8; 512];
    let n = umq_bind_info_get(q, info.as_mut_ptr(), info.len() as u32);
    assert!(n > 0, "umq_bind_info_get: {n}");
    info.truncate(n as usize);
    info
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(&s[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}

const LINE: &str = "UMQ-FAULT-BIND-INFO ";

/// The page the peer counts its completed sends in (a file both map).
struct Shared {
    path: std::path::PathBuf,
    base: *mut AtomicU64,
}

impl Shared {
    fn open(path: std::path::PathBuf, create: bool) -> Shared {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(create)
            .truncate(create)
            .open(&path)
            .unwrap();
        file.set_len(4096).unwrap();
        use std::os::fd::AsRawFd;
        let base = unsafe {
            libc::mmap(
                ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        Shared {
            path,
            base: base as *mut AtomicU64,
        }
    }

    fn completed(&self) -> &AtomicU64 {
        unsafe { &*self.base }
    }

    /// The peer's one-copy counters (placed, by reference), kept current as it streams.
    fn one_copy(&self) -> (&AtomicU64, &AtomicU64) {
        unsafe { (&*self.base.add(1), &*self.base.add(2)) }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        unsafe { libc::munmap(self.base as *mut _, 4096) };
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The peer: binds to the test process, then streams until it is killed, counting completions,
/// or (`UMQ_FAULT_PEER_RECEIVES` set) receives until it is killed.
#[test]
#[ignore = "the peer process of the fault tests, which start it"]
fn peer_role() {
    let Ok(path) = std::env::var("UMQ_FAULT_PEER") else {
        return;
    };
    let shared = Shared::open(path.into(), false);
    init();
    let q = create("fault-peer", DEPTH);
    println!("{LINE}{}", hex(&bind_info(q)));
    std::io::stdout().flush().unwrap();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let mut theirs = unhex(line.trim());
    assert_eq!(umq_bind(q, theirs.as_mut_ptr(), theirs.len() as u32), 0);
    let shape = Shape::of_run(env_u64("UMQ_FAULT_PEER_SHAPE", 0));
    if std::env::var_os("UMQ_FAULT_PEER_RECEIVES").is_some() {
        receive_until_killed(q, shape, &shared);
    }
    // Receive buffers for the survivor's standalone credit announcements.
    assert_eq!(post(q, UMQ_IO_RX, &alloc(16, MSG)), Ok(16));
    let mut rng = Rng(fault_seed() ^ std::process::id() as u64 | 1);
    let mut free = alloc_from(shape.tx_pool(q), DEPTH as usize, shape.size());
    let (mut next, mut completed) = (0u64, 0u64);
    loop {
        let want = (1 + rng.below(8) as usize).min(free.len());
        let batch: Vec<_> = free.drain(free.len() - want..).collect();
        shape.fill(&batch, next);
        let taken = post(q, UMQ_IO_TX, &batch).expect("post");
        next += taken as u64;
        free.extend_from_slice(&batch[taken..]);
        for b in poll(q, UMQ_IO_TX, DEPTH as usize) {
            assert_eq!(unsafe { (*b).status() }, UMQ_BUF_SUCCESS);
            completed += 1;
            free.push(b);
        }
        shared.completed().store(completed, Ordering::Release);
        if shape != Shape::Small {
            let t = transport_stats(q);
            shared.one_copy().0.store(t.placed_wr, Ordering::Relaxed);
            shared.one_copy().1.store(t.by_ref_wr, Ordering::Relaxed);
        }
        let got = poll(q, UMQ_IO_RX, 16);
        if !got.is_empty() {
            assert_eq!(post(q, UMQ_IO_RX, &got), Ok(got.len()));
        }
    }
}

/// The `k`th 8-byte word of message `seq`: its number first (`seq_of` reads it), then words
/// of the number and their place, so a torn, shifted or stale message fails the check.
fn pattern_word(seq: u64, k: usize) -> u64 {
    if k == 0 {
        seq
    } else {
        seq.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ k as u64
    }
}

/// Makes `batch` one-buffer SENDs of `size` bytes, the pattern of `first_seq`, `first_seq + 1`...
fn fill_pattern(batch: &[*mut umq_buf_t], first_seq: u64, size: u32) {
    for (i, &b) in batch.iter().enumerate() {
        let seq = first_seq + i as u64;
        let data = unsafe { (*b).buf_data as *mut u64 };
        for k in 0..size as usize / 8 {
            unsafe { data.add(k).write_unaligned(pattern_word(seq, k)) };
        }
        unsafe {
            (*b).data_size = size;
            (*b).total_data_size = size;
            (*b).pro_mut().opcode = UMQ_OPC_SEND;
        }
    }
}

/// Checks that a received large buffer holds one whole message of the pattern.
fn check_pattern(b: *mut umq_buf_t, size: u32, run: u64) {
    assert_eq!(
        unsafe { (*b).data_size },
        size,
        "run {run}: a message of the wrong size"
    );
    let (data, seq) = (unsafe { (*b).buf_data as *const u64 }, seq_of(b));
    for k in 0..size as usize / 8 {
        let w = unsafe { data.add(k).read_unaligned() };
        assert_eq!(
            w,
            pattern_word(seq, k),
            "run {run}: message {seq} torn at word {k}"
        );
    }
}

/// The receiving peer: takes the survivor's stream in order, counting what it received.
fn receive_until_killed(q: u64, shape: Shape, shared: &Shared) -> ! {
    let bufs = alloc_from(shape.rx_pool(q), DEPTH as usize, shape.size());
    assert_eq!(post(q, UMQ_IO_RX, &bufs), Ok(DEPTH as usize));
    let mut received = 0u64;
    loop {
        let got = poll(q, UMQ_IO_RX, DEPTH as usize);
        for &b in &got {
            assert_eq!(unsafe { (*b).status() }, UMQ_BUF_SUCCESS);
            assert_eq!(seq_of(b), received);
            shape.check(b, received);
            received += 1;
        }
        shared.completed().store(received, Ordering::Release);
        if !got.is_empty() {
            assert_eq!(post(q, UMQ_IO_RX, &got), Ok(got.len()));
        }
    }
}

/// Starts the peer, which streams to us or (`peer_receives`) receives from us, in the shape of
/// run `run` (`Shape::of_run`).
fn spawn_peer(shared: &Shared, peer_receives: bool, run: u64) -> (Child, ChildStdin, Vec<u8>) {
    let mut command = Command::new(std::env::current_exe().unwrap());
    if peer_receives {
        command.env("UMQ_FAULT_PEER_RECEIVES", "1");
    }
    command.env("UMQ_FAULT_PEER_SHAPE", run.to_string());
    let mut child = command
        .args([
            "peer_role",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("UMQ_FAULT_PEER", &shared.path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the peer");
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let info = loop {
        line.clear();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the peer ended before binding"
        );
        // libtest may have written "test peer_role ... " on the same line first.
        if let Some(at) = line.find(LINE) {
            break unhex(line[at + LINE.len()..].trim_end());
        }
    };
    (child, stdin, info)
}

/// A started peer, bound to one of our queues.
struct Peer {
    child: Child,
    /// Held open until the run ends: the peer reads its end of the binding from it.
    _stdin: ChildStdin,
}

impl Peer {
    /// Waits for the peer, which must have died of our `SIGKILL`.
    fn assert_killed(&mut self, run: u64) {
        use std::os::unix::process::ExitStatusExt;
        let status = self.child.wait().unwrap();
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "run {run}: {status:?}"
        );
    }
}

/// Starts a peer for run `run` (`spawn_peer`) and binds `q` and it to each other.
fn bind_to_peer(q: u64, peer_receives: bool, run: u64) -> (Shared, Peer) {
    let shared = Shared::open(
        std::env::temp_dir().join(format!("umq-fault-{}", std::process::id())),
        true,
    );
    let (child, mut stdin, mut theirs) = spawn_peer(&shared, peer_receives, run);
    writeln!(stdin, "{}", hex(&bind_info(q))).unwrap();
    assert_eq!(umq_bind(q, theirs.as_mut_ptr(), theirs.len() as u32), 0);
    let peer = Peer {
        child,
        _stdin: stdin,
    };
    (shared, peer)
}

/// Unbinds and destroys the survivor's queue `q`, frees the buffers it gave back, and checks
/// that its error was an async event and that the process holds what it held before.
fn end_run(q: u64, given_back: &[*mut umq_buf_t], run: u64, baseline: &(Held, Vec<String>)) {
    assert_eq!(umq_unbind(q), 0);
    assert_eq!(umq_destroy(q), 0);
    free_all(given_back);
    // The survivor's error is also an async event: read, as an application would.
    assert!(
        drain_async_events().contains(&UMQ_EVENT_QH_ERR),
        "run {run}: no UMQ_EVENT_QH_ERR for the survivor"
    );
    assert_holds(baseline.0, &baseline.1, &format!("run {run}"));
}

/// What a run streams, and into which receive buffers.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Shape {
    /// 64 B messages, through the ring.
    Small,
    /// `LARGE` messages into receive buffers from the survivor's shared pool: over shared
    /// memory the sender writes them there itself (placement).
    Placed,
    /// `LARGE` messages into receive buffers from the process pool, which the sender cannot
    /// reach: over shared memory they go through the ring or cross by reference.
    ByReference,
    /// `SPLIT` messages into receive buffers from the survivor's shared pool: over shared
    /// memory those posted several at a time are split between the two copies.
    Split,
}

impl Shape {
    fn size(self) -> u32 {
        match self {
            Shape::Small => MSG,
            Shape::Placed | Shape::ByReference => LARGE,
            Shape::Split => SPLIT,
        }
    }

    /// The pool receive buffers of this shape come from: queue `q`'s shared pool, or 0.
    fn rx_pool(self, q: u64) -> u64 {
        if matches!(self, Shape::Placed | Shape::Split) {
            q
        } else {
            0
        }
    }

    /// The pool large messages are sent from: queue `q`'s shared pool, as a one-copy sender's.
    fn tx_pool(self, q: u64) -> u64 {
        if self == Shape::Small { 0 } else { q }
    }

    /// The shape of a run's `n`th place in the rotation.
    fn of_run(n: u64) -> Shape {
        [
            Shape::Small,
            Shape::Small,
            Shape::Placed,
            Shape::ByReference,
            Shape::Split,
        ][n as usize % 5]
    }

    /// Fills `batch` with SENDs of this shape, numbered from `first_seq`.
    fn fill(self, batch: &[*mut umq_buf_t], first_seq: u64) {
        if self == Shape::Small {
            fill_sends(batch, first_seq);
        } else {
            fill_pattern(batch, first_seq, self.size());
        }
    }

    /// Checks a received message of this shape (a 64 B one carries only its number).
    fn check(self, b: *mut umq_buf_t, run: u64) {
        if self != Shape::Small {
            check_pattern(b, self.size(), run);
        }
    }
}

/// What one run saw.
struct Outcome {
    received: u64,
    completed: u64,
    detection: Duration,
    /// Messages that arrived already in our buffers (`placed_rx`), and the peer's sends that
    /// crossed by reference (`by_ref_wr`), as last counted.
    placed: u64,
    by_reference: u64,
}

/// Waits on the queue's receive channel in another thread; returns once woken (or after the
/// bound, which the caller reports).
fn waiter(q: u64) -> std::thread::JoinHandle<i32> {
    std::thread::spawn(move || {
        let mut opt = umq_interrupt_option_t {
            flag: UMQ_INTERRUPT_FLAG_IO_DIRECTION,
            direction: UMQ_IO_RX,
        };
        loop {
            assert_eq!(umq_rearm_interrupt(q, false, &mut opt), 0);
            let n = umq_wait_interrupt(q, DETECTION_BOUND.as_millis() as i32 * 2, &mut opt);
            if n > 0 {
                umq_ack_interrupt(q, n as u32, &mut opt);
            }
            let state = umq_state_get(q);
            if n <= 0 || state == QUEUE_STATE_ERR {
                return if state == QUEUE_STATE_ERR { 1 } else { n };
            }
        }
    })
}

/// One run: a fresh queue binds to a fresh peer, receives until `kill_at` messages are in,
/// kills it, and checks what it sees; then it unbinds and is destroyed, and the process must
/// hold what it held before any binding (`baseline`; see `kill_runs`).
fn one_run(run: u64, kill_at: u64, baseline: &(Held, Vec<String>)) -> Outcome {
    // Of every four runs: 64 B, 64 B waiting in interrupt mode, and large messages into
    // buffers of either pool.
    let (shape, interrupt) = (Shape::of_run(run), run % 4 == 1);
    let q = create_queue("fault-survivor", interrupt);
    let (shared, mut peer) = bind_to_peer(q, false, run);
    // A queue's shared pool exists once it is bound to another process.
    let bufs = alloc_from(shape.rx_pool(q), DEPTH as usize, shape.size());
    assert_eq!(post(q, UMQ_IO_RX, &bufs), Ok(bufs.len()));
    let woken = interrupt.then(|| waiter(q));
    let (mut received, mut killed, mut back) = (0u64, None, Vec::new());
    loop {
        if killed.is_none() && received >= kill_at {
            peer.child.kill().unwrap();
            killed = Some(Instant::now());
        }
        let err = umq_state_get(q) == QUEUE_STATE_ERR;
        let got = poll(q, UMQ_IO_RX, DEPTH as usize);
        for &b in &got {
            // A flushed buffer carries no message.
            if unsafe { (*b).status() } == UMQ_BUF_SUCCESS {
                assert_eq!(seq_of(b), received, "run {run}: out of order or repeated");
                shape.check(b, run);
                received += 1;
            }
        }
        if err {
            back.extend_from_slice(&got);
            if got.is_empty() {
                break; // the state was read before this poll: nothing more is coming
            }
        } else if !got.is_empty() {
            assert_eq!(post(q, UMQ_IO_RX, &got), Ok(got.len()));
        }
        if let Some(t) = killed {
            assert!(
                t.elapsed() < DETECTION_BOUND * 2,
                "run {run}: no error state {:?} after the kill",
                t.elapsed()
            );
        }
    }
    let detection = killed.expect("the peer was killed").elapsed();
    peer.assert_killed(run);
    if let Some(w) = woken {
        assert_eq!(
            w.join().unwrap(),
            1,
            "run {run}: the waiter was not woken by the error"
        );
    }
    let completed = shared.completed().load(Ordering::Acquire);
    let placed = transport_stats(q).placed_rx;
    let by_reference = shared.one_copy().1.load(Ordering::Relaxed);
    drop((peer, shared));
    end_run(q, &back, run, baseline);
    Outcome {
        received,
        completed,
        detection,
        placed,
        by_reference,
    }
}

/// Posts what it can of `batch` as one list; returns how many were taken. In the error state a
/// post fails with `-UMQ_ERR_EINVAL` and hands the whole list back.
fn post_sends(q: u64, batch: &[*mut umq_buf_t]) -> usize {
    let mut bad = ptr::null_mut();
    let rc = umq_post(q, chain(batch), UMQ_IO_TX, &mut bad);
    if rc == 0 {
        return batch.len();
    }
    assert!(
        rc == -UMQ_ERR_EAGAIN || umq_state_get(q) == QUEUE_STATE_ERR,
        "umq_post: {rc}"
    );
    batch
        .iter()
        .position(|&b| b == bad)
        .expect("bad_qbuf names a buffer of the batch")
}

/// One run the other way round: the survivor streams sends and the receiving peer is killed
/// once `kill_at` of them completed. The survivor must reach the error state within the bound
/// and get every buffer it posted back from `umq_poll`, exactly once (sent, or flushed with an
/// error status), its sends' completions in the order it posted them; then it must hold what
/// it held before. Returns how long the error state took, and our sends that went by placement
/// and by reference.
fn one_send_run(run: u64, kill_at: u64, baseline: &(Held, Vec<String>)) -> (Duration, u64, u64) {
    let q = create_queue("fault-sender", false);
    // The shapes by turns, as the other runs take them.
    let shape = Shape::of_run(run);
    let (shared, mut peer) = bind_to_peer(q, true, run);
    // Receive buffers for the peer's standalone credit announcements: those still posted at
    // the error stay posted (RELIABILITY.md) and go back to the pool with the queue.
    assert_eq!(post(q, UMQ_IO_RX, &alloc(16, MSG)), Ok(16));
    let mut free = alloc_from(shape.tx_pool(q), DEPTH as usize, shape.size());
    let all: std::collections::HashSet<_> = free.iter().copied().collect();
    let (mut next, mut completed, mut last_sent) = (0u64, 0u64, None);
    let mut killed: Option<Instant> = None;
    let mut detection = None;
    let mut rx_back = Vec::new();
    while free.len() < DEPTH as usize || detection.is_none() {
        if killed.is_none() && completed >= kill_at {
            peer.child.kill().unwrap();
            killed = Some(Instant::now());
        }
        let err = umq_state_get(q) == QUEUE_STATE_ERR;
        if err && detection.is_none() {
            detection = Some(killed.expect("an error state before the kill").elapsed());
        }
        if !err && !free.is_empty() {
            let want = (1 + (next % 8) as usize).min(free.len());
            let batch: Vec<_> = free.drain(free.len() - want..).collect();
            shape.fill(&batch, next);
            let taken = post_sends(q, &batch);
            next += taken as u64;
            free.extend_from_slice(&batch[taken..]);
        }
        for b in poll(q, UMQ_IO_TX, DEPTH as usize) {
            assert!(
                all.contains(&b) && !free.contains(&b),
                "run {run}: {b:?} came back twice"
            );
            if unsafe { (*b).status() } == UMQ_BUF_SUCCESS {
                let seq = seq_of(b);
                assert!(
                    last_sent < Some(seq),
                    "run {run}: send {seq} completed out of order"
                );
                last_sent = Some(seq);
                completed += 1;
            }
            free.push(b);
        }
        let got = poll(q, UMQ_IO_RX, 16);
        if !got.is_empty() && !err {
            assert_eq!(post(q, UMQ_IO_RX, &got), Ok(got.len()));
        } else {
            rx_back.extend_from_slice(&got);
        }
        if let Some(t) = killed {
            assert!(
                t.elapsed() < DETECTION_BOUND * 2,
                "run {run}: {:?} after the kill, error state {}, {} of {DEPTH} sends back",
                t.elapsed(),
                detection.is_some(),
                free.len()
            );
        }
    }
    peer.assert_killed(run);
    let received = shared.completed().load(Ordering::Acquire);
    let one_copy = transport_stats(q);
    assert!(
        received <= next,
        "run {run}: the peer received {received} of {next} sent"
    );
    drop((peer, shared));
    free.extend_from_slice(&rx_back);
    end_run(q, &free, run, baseline);
    (detection.unwrap(), one_copy.placed_wr, one_copy.by_ref_wr)
}

fn kill_runs(provider: &str) {
    // SAFETY: set before the library reads them (umq_init), and no other test of this binary
    // runs (the other is the peer's role, ignored here). Each kill is an error the library
    // logs: a thousand of them would bury the test output.
    unsafe {
        std::env::set_var("UMQ_PROVIDER", provider);
        if std::env::var_os("UMQ_LOG_LEVEL").is_none() {
            std::env::set_var("UMQ_LOG_LEVEL", "crit");
        }
    }
    init();
    let (n, seed) = (runs(), fault_seed());
    let mut rng = Rng(seed | 1);
    let mut worst = Duration::ZERO;
    let (mut extra, mut placed, mut by_reference) = (0, 0, 0);
    // Every run must leave the process as it was before the first binding.
    let baseline = quiescent(held().threads);
    for run in 0..n {
        let kill_at = rng.below(4000);
        let out = one_run(run, kill_at, &baseline);
        assert!(
            out.received >= out.completed,
            "{provider} seed {seed} run {run}: {} completed at the peer, {} received",
            out.completed,
            out.received
        );
        extra += out.received - out.completed;
        placed += out.placed;
        by_reference += out.by_reference;
        worst = worst.max(out.detection);
        assert!(
            out.detection < DETECTION_BOUND,
            "{provider} seed {seed} run {run}: error state after {:?}",
            out.detection
        );
    }
    println!(
        "{provider}: {n} kills of a sender (seed {seed}), error state within {worst:?} at worst, \
         {extra} messages received beyond the peer's last polled completion; \
         {placed} placed, {by_reference} by reference"
    );
    if provider == "shm" && n >= 8 {
        // The large runs must have taken the one-copy paths they are there for.
        assert!(
            placed > 0 && by_reference > 0,
            "{placed} placed, {by_reference} by reference"
        );
    }
    // A quarter as many the other way round: the killed peer was receiving.
    let (mut worst, mut placed, mut by_reference) = (Duration::ZERO, 0, 0);
    for run in 0..n.div_ceil(4) {
        let (detection, p, r) = one_send_run(run, rng.below(4000), &baseline);
        assert!(
            detection < DETECTION_BOUND,
            "{provider} seed {seed} sending run {run}: error state after {detection:?}"
        );
        worst = worst.max(detection);
        (placed, by_reference) = (placed + p, by_reference + r);
    }
    umq_uninit();
    println!(
        "{provider}: {} kills of a receiver, error state within {worst:?} at worst; \
         {placed} placed, {by_reference} by reference",
        n.div_ceil(4)
    );
    if provider == "shm" && n >= 32 {
        assert!(
            placed > 0 && by_reference > 0,
            "{placed} placed, {by_reference} by reference"
        );
    }
}

/// Both providers, one after the other (`UMQ_FAULT_PROVIDERS`, default `shm,fabric`, names
/// those to run: the test command runs the network's again over the UCX engine): one library
/// instance per process, and the peer inherits `UMQ_PROVIDER` and `UMQ_FABRIC_PROVIDER` from
/// this process.
#[test]
fn a_killed_peer_loses_nothing_it_completed() {
    if std::env::var("UMQ_FAULT_PEER").is_ok() {
        return;
    }
    let providers = std::env::var("UMQ_FAULT_PROVIDERS").unwrap_or("shm,fabric".into());
    let chosen = |p: &str| providers.split(',').any(|x| x.trim() == p);
    if chosen("shm") {
        kill_runs("shm");
    }
    if !chosen("fabric") {
        return;
    }
    if std::path::Path::new("/usr/include/rdma/fabric.h").exists() {
        kill_runs("fabric");
    } else {
        eprintln!("SKIPPED: the network provider's runs (libfabric-dev is not installed)");
    }
}
