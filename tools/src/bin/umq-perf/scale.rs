//! `--test scale`: many bound queue pairs in one process (loopback), as a server keeping a
//! queue per connection has. Creates and binds `--pairs` pairs, measures what the process's
//! resident memory and open fds grew by per queue (before any buffer is posted: buffers are
//! the application's), sends one message each way through every pair (`sweep_ns` per
//! message: every pair's memory is cold by then), ping-pongs on one pair beside all the others
//! (`msg_ns`, half a round trip: what a message costs with that many queues alive), polls
//! every queue of this process in turn while nothing arrives (`idle_poll_ns` a poll: what a
//! server that sweeps its queues pays for those with nothing to say), with a peer process
//! ping-pongs on one pair again while polling all the queues in turn (`swept_msg_ns`, half a
//! round trip: a server's loop), then destroys them all.

use crate::Run;
use crate::api;
use crate::report::Row;
use crate::shm::{poll_ping_pong, recv_frame, repost_received, send_frame};
use std::ptr;
use std::time::{Duration, Instant};
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;

/// The process's proportional share of resident memory, in bytes (`Pss` of
/// `/proc/self/smaps_rollup`): private pages whole, a page shared with the peer process half,
/// so two processes' figures add up to what the pairs really cost.
pub fn resident_bytes() -> u64 {
    let rollup = std::fs::read_to_string("/proc/self/smaps_rollup").unwrap_or_default();
    rollup
        .lines()
        .find_map(|l| l.strip_prefix("Pss:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
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

/// The scale run on `provider`: loopback pairs in this process, or pairs with a peer process
/// over shared memory or the network (`UMQ_PROVIDER=fabric`, which the peer inherits).
pub fn measure(run: &Run, pairs: u32, provider: &str) -> Row {
    match provider {
        "shm" => measure_with_peer(run, pairs, "shm"),
        "fabric" => measure_with_peer(run, pairs, "fabric"),
        _ => measure_loopback(run, pairs),
    }
}

fn measure_loopback(run: &Run, pairs: u32) -> Row {
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
    let all: Vec<u64> = queues.iter().flat_map(|&(a, b)| [a, b]).collect();
    let idle_poll = idle_polls(&all);
    let start = Instant::now();
    for &(a, b) in &queues {
        api::teardown(a);
        api::teardown(b);
    }
    let teardown = start.elapsed();
    umq_uninit();
    Figures {
        queues: 2 * pairs as u64,
        grown,
        fds,
        setup,
        sweep,
        ping_pong: ping_pong / rounds as u32,
        idle_poll,
        swept_ping_pong: None,
        teardown,
    }
    .row("loopback", run, pairs)
}

/// What a scale run measured. The memory, fds and setup time are the measuring process's;
/// `queues` counts the queues of that process.
struct Figures {
    queues: u64,
    grown: u64,
    fds: usize,
    setup: Duration,
    sweep: Duration,
    /// One round trip.
    ping_pong: Duration,
    /// One poll of a queue with nothing to take, in a sweep over all of them.
    idle_poll: Duration,
    /// One round trip on one pair while every queue is polled in turn (with a peer process).
    swept_ping_pong: Option<Duration>,
    teardown: Duration,
}

impl Figures {
    fn row(&self, provider: &'static str, run: &Run, pairs: u32) -> Row {
        let per_pair = |d: Duration| d.as_nanos() as f64 / 1e3 / pairs as f64;
        let queues = self.queues as f64;
        let row = Row::new("scale", provider, run.size, run.flow.on)
            .num("queues", queues)
            .num("depth", run.depth as f64)
            .num("bytes_per_queue", (self.grown as f64 / queues).round())
            .num("fds_per_queue", self.fds as f64 / queues)
            .num("setup_us_per_pair", per_pair(self.setup))
            .num("msg_ns", (self.ping_pong.as_nanos() as f64 / 2.0).round())
            .num(
                "sweep_ns",
                (self.sweep.as_nanos() as f64 / (2.0 * pairs as f64)).round(),
            )
            .num("idle_poll_ns", self.idle_poll.as_nanos() as f64);
        let row = match self.swept_ping_pong {
            Some(d) => row.num("swept_msg_ns", (d.as_nanos() as f64 / 2.0).round()),
            None => row,
        };
        row.num("teardown_us_per_pair", per_pair(self.teardown))
    }
}

/// Bind infos as one frame: each with its length before it.
fn pack(infos: impl Iterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for i in infos {
        out.extend_from_slice(&(i.len() as u32).to_le_bytes());
        out.extend_from_slice(&i);
    }
    out
}

fn unpack(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while b.len() >= 4 {
        let n = u32::from_le_bytes(b[..4].try_into().unwrap()) as usize;
        out.push(b[4..4 + n].to_vec());
        b = &b[4 + n..];
    }
    out
}

/// `pairs` queues of ours at `ip` bound to as many of the peer's (infos exchanged in one frame
/// each way, the measuring side's first: a pipe holds less than either frame).
pub(crate) fn bind_all(
    run: &Run,
    pairs: u32,
    ip: std::net::IpAddr,
    to: &mut impl std::io::Write,
    from: &mut impl std::io::Read,
    measuring: bool,
) -> Vec<u64> {
    let mode = UMQ_TRANS_MODE_UB;
    let qs: Vec<u64> = (0..pairs)
        .map(|_| api::create_at(run.depth, mode, ip))
        .collect();
    let ours = pack(qs.iter().map(|&q| api::bind_info(q)));
    let theirs = if measuring {
        send_frame(to, &ours);
        recv_frame(from)
    } else {
        let theirs = recv_frame(from);
        send_frame(to, &ours);
        theirs
    };
    let theirs = unpack(&theirs);
    assert_eq!(
        theirs.len(),
        qs.len(),
        "the peer sent another count of bind infos"
    );
    for (&q, info) in qs.iter().zip(theirs) {
        api::bind(q, info);
    }
    qs
}

/// Polls every queue of `qs` in turn (both directions, `poll_idle`), sweep after sweep, about
/// 100,000 polls in all, while their peers send nothing; the time of one poll.
fn idle_polls(qs: &[u64]) -> Duration {
    let sweeps = (100_000 / qs.len()).max(1);
    let start = Instant::now();
    for _ in 0..sweeps {
        qs.iter().for_each(|&q| poll_idle(q));
    }
    start.elapsed() / (sweeps * qs.len()) as u32
}

/// One poll of `q`, which expects nothing: a buffer that still comes (a late standalone window
/// update) is posted back.
fn poll_idle(q: u64) {
    let mut out = [ptr::null_mut(); 4];
    let n = api::poll(q, UMQ_IO_ALL, &mut out);
    repost_received(q, &out[..n]);
}

/// Round trips of the ping-pong polled in turn with all the queues (`swept_ping`): enough for a
/// median, and about two million polls in all. Both processes work it out alike.
fn swept_rounds(pairs: u32) -> u64 {
    (2_000_000 / pairs as u64).clamp(20, 2000)
}

/// `ping` on `qs[0]`, polling every queue of `qs` in turn until the echo and our send's
/// completion came, as a server's loop polls all its queues (the others by `poll_idle`).
fn swept_ping(qs: &[u64], msg: *mut umq_buf_t) {
    api::post_all(qs[0], &[msg], std::hint::spin_loop);
    let (mut sent, mut echo) = (false, false);
    while !sent || !echo {
        let (s, e) = poll_ping_pong(qs[0]);
        sent |= s;
        echo |= e.is_some();
        qs[1..].iter().for_each(|&q| poll_idle(q));
    }
}

fn post_one_rx(qs: &[u64], size: u32) {
    for &q in qs {
        api::post(q, &api::alloc(size, 1, UMQ_OPC_SEND), UMQ_IO_RX);
    }
}

/// Sends `msg` on `q` and waits for the peer's echo (and our send's completion).
fn ping(q: u64, msg: *mut umq_buf_t) {
    api::post_all(q, &[msg], std::hint::spin_loop);
    let (mut sent, mut echo) = (false, false);
    while !sent || !echo {
        let (s, e) = poll_ping_pong(q);
        sent |= s;
        echo |= e.is_some();
    }
}

/// Waits for a message on `q` (unless `arrived` says the last call saw it come) and sends
/// `msg` back; returns whether the next message came while our send completed.
fn echo(q: u64, msg: *mut umq_buf_t, arrived: bool) -> bool {
    if !arrived {
        while poll_ping_pong(q).1.is_none() {}
    }
    api::post_all(q, &[msg], std::hint::spin_loop);
    let mut next = false;
    loop {
        let (sent, echo) = poll_ping_pong(q);
        next |= echo.is_some();
        if sent {
            return next;
        }
    }
}

fn measure_with_peer(run: &Run, pairs: u32, provider: &'static str) -> Row {
    let mut peer = crate::shm::start_peer(
        vec![
            "--scale-peer".to_string(),
            "--pairs".into(),
            pairs.to_string(),
            "--depth".into(),
            run.depth.to_string(),
            "--size".into(),
            run.size.to_string(),
            "--iters".into(),
            run.iters.to_string(),
            "--flow-control".into(),
            if run.flow.on { "on" } else { "off" }.into(),
        ],
        run,
    );
    let (to, from) = (&mut peer.to, &mut peer.from);
    api::init(run.flow);
    let (before, fds_before) = (resident_bytes(), open_fds());
    let start = Instant::now();
    let qs = bind_all(run, pairs, peer.ip, to, from, true);
    recv_frame(from); // the peer has bound and posted its receive buffers
    let setup = start.elapsed();
    let (grown, fds) = (
        resident_bytes().saturating_sub(before),
        open_fds().saturating_sub(fds_before),
    );
    post_one_rx(&qs, run.size);
    let msg = api::alloc(run.size, 1, UMQ_OPC_SEND)[0];
    let start = Instant::now();
    qs.iter().for_each(|&q| ping(q, msg));
    let sweep = start.elapsed();
    let rounds = run.iters.min(100_000);
    let start = Instant::now();
    (0..rounds).for_each(|_| ping(qs[0], msg));
    let ping_pong = start.elapsed() / rounds as u32;
    umq_buf_free(msg);
    let idle_poll = idle_polls(&qs);
    let msg = api::alloc(run.size, 1, UMQ_OPC_SEND)[0];
    let swept = swept_rounds(pairs);
    let start = Instant::now();
    (0..swept).for_each(|_| swept_ping(&qs, msg));
    let swept_ping_pong = start.elapsed() / swept as u32;
    umq_buf_free(msg);
    let start = Instant::now();
    qs.iter().for_each(|&q| api::teardown(q));
    let teardown = start.elapsed();
    send_frame(to, b"bye");
    if let Some(mut child) = peer.child {
        let status = child.wait().expect("waiting for the peer");
        assert!(status.success(), "the peer process failed: {status}");
    }
    umq_uninit();
    Figures {
        queues: pairs as u64,
        grown,
        fds,
        setup,
        sweep,
        ping_pong,
        idle_poll,
        swept_ping_pong: Some(swept_ping_pong),
        teardown,
    }
    .row(provider, run, pairs)
}

/// The peer process of a scale run with a peer (`--scale-peer`): binds its queues at `ip` to
/// the measuring process's, echoes one message through each pair and then the ping-pong, and
/// exits.
pub fn serve_peer(run: &Run, pairs: u32, ip: std::net::IpAddr) {
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (mut from, mut to) = (std::io::stdin().lock(), std::io::stdout().lock());
    api::init(run.flow);
    let qs = bind_all(run, pairs, ip, &mut to, &mut from, false);
    post_one_rx(&qs, run.size);
    send_frame(&mut to, b"ready");
    let msg = api::alloc(run.size, 1, UMQ_OPC_SEND)[0];
    for &q in &qs {
        echo(q, msg, false);
    }
    let rounds = run.iters.min(100_000) + swept_rounds(pairs);
    (0..rounds).fold(false, |arrived, _| echo(qs[0], msg, arrived));
    umq_buf_free(msg);
    recv_frame(&mut from);
    qs.iter().for_each(|&q| api::teardown(q));
    umq_uninit();
}
