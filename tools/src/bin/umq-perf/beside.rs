//! `--test beside`: what a stream between two processes does to a ping-pong between the same
//! two, over the queue pair next to it (shm, or fabric, where both pairs share one connection).
//! This process pings the peer with 64 B messages on one pair for `SECONDS` alone, then as
//! long again while it streams `--size` messages to the peer on the other pair as fast as the
//! pair takes them, in the same loop (a message posted, completions and echo polled, the
//! stream's next batch). The peer echoes the pings and takes the stream's messages as they
//! come, checking their order. The row: the ping's half round trip alone and beside the
//! stream (median, 99th percentile and longest; and how many went beside it), the stream's messages a second, and messages lost (sent
//! and never received: must be 0). With `--stream write|read` the stream is WRITEs into (READs
//! from) a buffer of the peer's process pool, which the peer exposes at the start; over the
//! network they go by RMA, libfabric operations on the connection the ping shares, and the row
//! says how many did (a WR that fails stops the run, so none is lost).

use crate::api;
use crate::pfc::{Receiver, Sender, pack, stdin_ready, two_pairs_run, unpack};
use crate::report::Row;
use crate::shm::{poll_ping_pong, recv_frame, send_frame};
use std::io::Read;
use std::time::{Duration, Instant};
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::umq_uninit;

const SECONDS: f64 = 2.0;
const PING_BYTES: u32 = 64;
/// Receive buffers the ping pair keeps posted on each side: the initial window
/// (`two_pairs_run`).
const PING_RX: u32 = 64;
/// The stream's messages a turn of either side's loop posts or takes at most: a turn that
/// copies 32 messages of 64 KiB takes a third of a millisecond, which the ping would wait for
/// in the application's own loop whatever the library did.
const STREAM_BATCH: usize = 4;

/// The ping pair's one message in flight: posted at `since`, waiting for its send completion
/// and its echo.
struct Ping {
    q: u64,
    buf: *mut umq_buf_t,
    since: Option<Instant>,
    sent: bool,
    echoed: bool,
    number: u8,
}

impl Ping {
    fn new(q: u64) -> Ping {
        let buf = api::alloc(PING_BYTES, 1, UMQ_OPC_SEND)[0];
        unsafe { (*buf).total_data_size = PING_BYTES };
        Ping {
            q,
            buf,
            since: None,
            sent: false,
            echoed: false,
            number: 0,
        }
    }

    /// Posts the next ping when none is in flight and `next` says so; returns the round trip
    /// of one that just came back.
    fn step(&mut self, next: bool) -> Option<Duration> {
        if self.since.is_none() {
            if !next {
                return None;
            }
            self.number = self.number.wrapping_add(1);
            unsafe { *((*self.buf).buf_data as *mut u8) = self.number };
            api::post_all(self.q, &[self.buf], std::hint::spin_loop);
            (self.since, self.sent, self.echoed) = (Some(Instant::now()), false, false);
        }
        let (sent, echo) = poll_ping_pong(self.q);
        self.sent |= sent;
        if let Some(byte) = echo {
            assert_eq!(byte, self.number, "an echo carried the wrong byte");
            self.echoed = true;
        }
        match self.sent && self.echoed {
            true => self.since.take().map(|t| t.elapsed()),
            false => None,
        }
    }
}

/// Pings for `SECONDS`, back to back or one every `every`, streaming meanwhile or not; the
/// last ping's echo is waited for. The half round trips (`Halves`), and the
/// seconds it took.
fn phase(
    ping: &mut Ping,
    stream: &mut Sender,
    streaming: bool,
    every: Option<Duration>,
) -> (Halves, f64) {
    let (start, mut rtts) = (Instant::now(), Vec::new());
    let mut next_at = start;
    loop {
        let going = start.elapsed().as_secs_f64() < SECONDS;
        stream.step(streaming && going);
        let due = going && Instant::now() >= next_at;
        if due && ping.since.is_none() {
            next_at += every.unwrap_or_default();
        }
        rtts.extend(ping.step(due));
        if !going && ping.since.is_none() {
            return (half_rtt(rtts), start.elapsed().as_secs_f64());
        }
    }
}

/// Half round trips of a phase's pings, in ns.
struct Halves {
    median: f64,
    p99: f64,
    /// The longest: with a ping every few milliseconds a phase has a few hundred, and one held
    /// for the whole phase shows only here and in `count`.
    max: f64,
    count: usize,
}

fn half_rtt(mut rtts: Vec<Duration>) -> Halves {
    assert!(!rtts.is_empty(), "no ping came back");
    rtts.sort();
    let at = |f: f64| rtts[((rtts.len() - 1) as f64 * f) as usize].as_nanos() as f64 / 2.0;
    Halves {
        median: at(0.5),
        p99: at(0.99),
        max: at(1.0),
        count: rtts.len(),
    }
}

pub fn measure(run: &crate::Run) -> Row {
    let run = &two_pairs_run(run);
    let mut args = vec!["--beside-peer".to_string(), "--depth".into()];
    args.extend([run.depth.to_string(), "--size".into(), run.size.to_string()]);
    args.extend([
        "--flow-control".into(),
        if run.flow.on { "on" } else { "off" }.into(),
        "--stream".into(),
        op_name(run.stream_op).into(),
    ]);
    let mut child = crate::shm::spawn_self(args);
    let (mut to, mut from) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    api::init(run.flow);
    let here = std::net::Ipv4Addr::LOCALHOST.into();
    let qs = crate::scale::bind_all(run, 2, here, &mut to, &mut from, true);
    api::post_rx_all(qs[0], &api::alloc(PING_BYTES, PING_RX, UMQ_OPC_SEND));
    let mut stream = match run.stream_op {
        UMQ_OPC_SEND => Sender::new(qs[1], run),
        op => {
            // WRs of 16 MiB: 16 of them, not a queue's depth.
            let run = crate::Run {
                depth: run
                    .depth
                    .min((crate::shm::STREAM_BYTES / run.size.max(1)).max(4)),
                ..*run
            };
            let sge = crate::rma::unpack(&recv_frame(&mut from));
            Sender::one_sided(qs[1], &run, op, sge)
        }
    };
    recv_frame(&mut from); // the peer is ready
    let mut ping = Ping::new(qs[0]);
    stream.batch = STREAM_BATCH;
    let (alone, _) = phase(&mut ping, &mut stream, false, run.ping_every);
    let completed_before = stream.completed;
    let (beside, elapsed) = phase(&mut ping, &mut stream, true, run.ping_every);
    let streamed = stream.completed - completed_before;
    while stream.completed < stream.next_seq {
        stream.step(false);
    }
    send_frame(&mut to, &pack(&[stream.next_seq]));
    let got = unpack(&recv_frame(&mut from))[0];
    let rma_wrs = api::side_stats(qs[1]).transport.one_sided_rma_wr;
    qs.iter().for_each(|&q| api::teardown(q));
    drop(to); // the peer's end of the run
    let status = child.wait().expect("waiting for the peer");
    assert!(status.success(), "the peer process failed: {status}");
    umq_uninit();
    let row = Row::new("beside", crate::shm::provider(), run.size, run.flow.on)
        .text("stream", op_name(run.stream_op))
        .num("ping_alone_half_rtt_ns", alone.median.round())
        .num("ping_alone_p99_ns", alone.p99.round())
        .num("ping_beside_half_rtt_ns", beside.median.round())
        .num("ping_beside_p99_ns", beside.p99.round())
        .num("ping_beside_max_ns", beside.max.round())
        .num("pings_beside", beside.count as f64)
        .num("stream_msgs_per_s", (streamed as f64 / elapsed).round())
        .num("lost", (stream.next_seq - got) as f64);
    let row = match run.ping_every {
        Some(every) => row.num("ping_every_ms", every.as_millis() as f64),
        None => row,
    };
    // Over the network, how many of the stream's WRs went by libfabric RMA.
    match (run.stream_op, crate::shm::provider()) {
        (UMQ_OPC_SEND, _) | (_, "shm") => row,
        _ => row.num("one_sided_rma_wr", rma_wrs as f64),
    }
}

/// What `--stream` names `op`.
fn op_name(op: umq_opcode_t) -> &'static str {
    match op {
        UMQ_OPC_WRITE => "write",
        UMQ_OPC_READ => "read",
        _ => "send",
    }
}

/// For a stream of WRITEs or READs: a buffer of `size` bytes of our process pool, exposed to
/// the measuring process (its reference sent on `to`).
fn expose(to: &mut impl std::io::Write, size: u32) -> *mut umq_buf_t {
    let (b, sge) = crate::rma::exposed_from(0, size);
    send_frame(to, &crate::rma::pack(&sge));
    b
}

/// The peer process (`--beside-peer`): echoes the pings, takes the stream, and reports how
/// many of its messages arrived once the measuring process says how many it sent (a stream of
/// WRITEs or READs, which it does not see, arrived whole when every WR completed).
pub fn serve_peer(run: &crate::Run) {
    let run = &two_pairs_run(run);
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // Unbuffered: `stdin_ready` looks at the pipe, so no frame may wait in a buffer of ours.
    let mut from = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(0) };
    let mut to = std::io::stdout().lock();
    api::init(run.flow);
    let here = std::net::Ipv4Addr::LOCALHOST.into();
    let qs = crate::scale::bind_all(run, 2, here, &mut to, &mut from, false);
    let size = run.size.max(8);
    api::post_rx_all(qs[0], &api::alloc(PING_BYTES, PING_RX, UMQ_OPC_SEND));
    if run.stream_op == UMQ_OPC_SEND {
        api::post_rx_all(qs[1], &api::alloc(size, run.depth, UMQ_OPC_SEND));
    }
    let mut stream = Receiver::new(qs[1], size);
    let echo = Ping::new(qs[0]).buf;
    let mut echo_free = true;
    let exposed = (run.stream_op != UMQ_OPC_SEND).then(|| expose(&mut to, size));
    send_frame(&mut to, b"ready");
    while !stdin_ready() {
        stream.take(STREAM_BATCH);
        let (sent, byte) = poll_ping_pong(qs[0]);
        echo_free |= sent;
        if let Some(byte) = byte {
            while !echo_free {
                let mut c = [std::ptr::null_mut(); 1];
                echo_free = api::poll(qs[0], UMQ_IO_TX, &mut c) == 1;
                stream.take(STREAM_BATCH);
            }
            unsafe { *((*echo).buf_data as *mut u8) = byte };
            api::post_all(qs[0], &[echo], std::hint::spin_loop);
            echo_free = false;
        }
    }
    let sent = unpack(&recv_frame(&mut from))[0];
    let deadline = Instant::now() + Duration::from_secs(10);
    while exposed.is_none() && stream.got < sent && Instant::now() < deadline {
        stream.take(STREAM_BATCH);
    }
    send_frame(&mut to, &pack(&[exposed.map_or(stream.got, |_| sent)]));
    let mut rest = Vec::new();
    let _ = from.read_to_end(&mut rest);
    if let Some(b) = exposed {
        umq::ffi::api::umq_buf_free(b);
    }
    qs.iter().for_each(|&q| api::teardown(q));
    umq_uninit();
}
