//! `--test pacing --wire`: how a rate-limited queue's messages cross, measured where they
//! arrive. For each message size (`--size`, default 64 KiB and 1 MiB) and rate (`--rates`,
//! default 100 Mbit/s and 1 Gbit/s) one queue,
//! limited at PMTU 4096 on a microsecond tick, sends about half a second's worth of messages to
//! its peer, which records when each packet arrived (the library's arrival log, `umq::queue::
//! stats::record_arrivals`). On loopback the peer is a queue of this process polled by a second
//! thread; over shm and fabric it is a second process (`umq-perf --wire-peer`, hidden) or, with
//! `--client`, one the `umq-perf --server` on another host starts. The sender polls its
//! completions with naps in between, as a program that has nothing else to do would, so the
//! progress engine and the receiver have the two CPUs of a small machine.
//!
//! Per row: the packets that arrived, the most bytes that arrived within any window of one
//! packet time (`burst_bytes_max`; a queue paced packet by packet keeps it at two PMTU), how
//! many windows held more than two PMTU, and the achieved rate at the receiver against the
//! limit (`rate_error`, the bytes after the first packet over the time from the first arrival
//! to the last).

use crate::Run;
use crate::api;
use crate::report::Row;
use crate::shm::{recv_frame, send_frame};
use std::path::Path;
use std::ptr;
use std::time::Duration;
use umq::abi::errno::UMQ_BUF_SUCCESS;
use umq::abi::ext::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::transport::arrivals::{Arrival, burst_bytes_max};

pub const PMTU: u32 = 4096;
const TICKS_PER_S: u64 = 1_000_000;
/// About how long each row sends for.
const SECONDS: f64 = 0.5;
/// The receive buffers the peer keeps posted, and the sends this side keeps posted, cover this
/// long at the row's rate (and are at least 8): enough that the pacer always has the next
/// message while the receiver is kept off a CPU for a few milliseconds, as on a busy two-vCPU
/// host (a queue that runs dry starts again from `now`, and the time is lost to the rate).
const WINDOW_MS: f64 = 16.0;

/// Messages of `size` bytes kept posted on each side at `rate`.
fn window(size: u32, rate: u64) -> u32 {
    ((rate as f64 * WINDOW_MS / 1e3 / 8.0 / size as f64).ceil() as u32).max(8)
}
/// How long the sender naps when a poll found no completion.
const NAP: Duration = Duration::from_micros(200);
/// Arrivals the peer keeps at most (a row has under 16,000).
const LOG_LIMIT: usize = 1 << 20;

/// Messages of `size` bytes for about `SECONDS` at `rate`, at least two.
fn messages(size: u32, rate: u64) -> u32 {
    ((rate as f64 * SECONDS / 8.0 / size as f64).ceil() as u32).max(2)
}

/// The rows on `provider`, in the order sizes then rates; `--json` rows carry `provider`,
/// `message_bytes`, `rate_bps`, `pmtu`, `burst_bytes_max` and `rate_error`.
pub fn measure(
    run: &Run,
    provider: &'static str,
    sizes: &[u32],
    rates: &[u64],
    save: Option<&Path>,
) -> Vec<Row> {
    let mut rows = Vec::new();
    for &size in sizes {
        for &rate in rates {
            let count = messages(size, rate);
            let arrivals = match provider {
                "loopback" => in_process(run, size, count, rate),
                _ => with_peer(run, size, count, rate),
            };
            let row = Row::new("pacing_wire", provider, size, run.flow.on)
                .num("message_bytes", size as f64)
                .num("rate_bps", rate as f64)
                .num("pmtu", PMTU as f64);
            if let Some(dir) = save {
                write_csv(
                    &dir.join(format!("{provider}-{size}-{rate}.csv")),
                    &arrivals,
                );
            }
            rows.push(figures(row, &arrivals, size, count, rate));
        }
    }
    rows
}

/// The row's figures from the peer's arrivals, after checking they make the messages sent.
fn figures(row: Row, arrivals: &[Arrival], size: u32, count: u32, rate: u64) -> Row {
    let bytes: u64 = arrivals.iter().map(|a| a.bytes as u64).sum();
    assert_eq!(
        bytes,
        size as u64 * count as u64,
        "the packets make the messages"
    );
    assert!(
        arrivals.iter().all(|a| a.bytes <= PMTU),
        "a packet longer than the PMTU"
    );
    let packet_ns = 8.0 * PMTU as f64 * 1e9 / rate as f64;
    let window = packet_ns as u64;
    let (first, last) = (arrivals[0], arrivals[arrivals.len() - 1]);
    let span_s = (last.at_ns - first.at_ns) as f64 / 1e9;
    let achieved = (bytes - first.bytes as u64) as f64 * 8.0 / span_s;
    row.num("messages", count as f64)
        .num("packets", arrivals.len() as f64)
        .num("burst_bytes_max", burst_bytes_max(arrivals, window) as f64)
        .num(
            "windows_over_2_pmtu",
            windows_over(arrivals, window, 2 * PMTU as u64) as f64,
        )
        .num("achieved_bps", achieved)
        .num("rate_error", achieved / rate as f64 - 1.0)
}

/// How many arrivals end a window of `window_ns` holding more than `limit` bytes.
fn windows_over(arrivals: &[Arrival], window_ns: u64, limit: u64) -> usize {
    let mut first = 0;
    let mut inside = 0u64;
    let mut over = 0;
    for a in arrivals {
        inside += a.bytes as u64;
        while a.at_ns - arrivals[first].at_ns > window_ns {
            inside -= arrivals[first].bytes as u64;
            first += 1;
        }
        over += (inside > limit) as usize;
    }
    over
}

/// Loopback: the receiving queue is ours, polled by a second thread.
fn in_process(run: &Run, size: u32, count: u32, rate: u64) -> Vec<Arrival> {
    let posted = window(size, rate);
    api::init(flow(run, posted));
    let a = api::create(run.depth);
    let b = api::create(run.depth);
    api::bind(a, api::bind_info(b));
    api::bind(b, api::bind_info(a));
    let bufs = start_receiving(b, size, posted);
    let receiver = std::thread::spawn(move || receive(b, bufs, count, size));
    send(a, size, count, rate, posted);
    let arrivals = receiver.join().expect("the receiving thread failed");
    api::teardown(a);
    api::teardown(b);
    umq::ffi::api::umq_uninit();
    arrivals
}

/// shm or fabric: the receiving queue is the peer process's.
fn with_peer(run: &Run, size: u32, count: u32, rate: u64) -> Vec<Arrival> {
    let args = [
        "--wire-peer".to_string(),
        "--size".into(),
        size.to_string(),
        "--iters".into(),
        count.to_string(),
        "--depth".into(),
        run.depth.to_string(),
        "--rates".into(),
        rate.to_string(),
    ];
    let mut peer = crate::shm::start_peer(args.to_vec(), run);
    let posted = window(size, rate);
    api::init(flow(run, posted));
    let q = api::create_at(run.depth, UMQ_TRANS_MODE_UB, peer.ip);
    api::bind(q, recv_frame(&mut peer.from));
    send_frame(&mut peer.to, &api::bind_info(q));
    recv_frame(&mut peer.from); // bound, receive buffers posted, recording
    send(q, size, count, rate, posted);
    let arrivals = decode(&recv_frame(&mut peer.from));
    crate::shm::end_with_peer(q, peer);
    arrivals
}

/// The peer process (`--wire-peer`): binds, receives `run.iters` messages of `run.size`
/// bytes sent at `rate`, sends back their packets' arrivals, and waits for the sender to be
/// done.
pub fn serve_peer(run: &Run, rate: u64, ip: std::net::IpAddr) {
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (mut inp, mut out) = (std::io::stdin().lock(), std::io::stdout().lock());
    let posted = window(run.size, rate);
    api::init(flow(run, posted));
    let q = api::create_at(run.depth, UMQ_TRANS_MODE_UB, ip);
    send_frame(&mut out, &api::bind_info(q));
    api::bind(q, recv_frame(&mut inp));
    let bufs = start_receiving(q, run.size, posted);
    send_frame(&mut out, b"ready");
    let arrivals = receive(q, bufs, run.iters as u32, run.size);
    send_frame(&mut out, &encode(&arrivals));
    recv_frame(&mut inp);
    api::teardown(q);
    umq::ffi::api::umq_uninit();
}

/// Flow control as the run asks, its window the `posted` receive buffers.
fn flow(run: &Run, posted: u32) -> api::Flow {
    api::Flow {
        initial_window: posted as u16,
        notify_interval: run.flow.notify_interval.min(posted as u16 / 4),
        ..run.flow
    }
}

/// Starts the arrival log of `q` and posts `posted` receive buffers (returned as addresses, so
/// the receiving thread can take them).
fn start_receiving(q: u64, size: u32, posted: u32) -> Vec<usize> {
    umq::queue::stats::record_arrivals(q, LOG_LIMIT).expect("recording arrivals");
    let bufs = api::alloc(size, posted, UMQ_OPC_SEND);
    api::post_rx_all(q, &bufs);
    bufs.into_iter().map(|b| b as usize).collect()
}

/// Busy-polls `q` until `count` messages arrived, each checked (its number at both ends, in
/// order), reposting the buffers; returns the packets' arrivals.
fn receive(q: u64, bufs: Vec<usize>, count: u32, size: u32) -> Vec<Arrival> {
    let mut got = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    let mut next = 0u64;
    while next < count as u64 {
        let n = api::poll(q, UMQ_IO_RX, &mut got);
        for &b in &got[..n] {
            let (status, len) = unsafe { ((*b).status(), (*b).total_data_size) };
            assert_eq!((status, len), (UMQ_BUF_SUCCESS, size), "message {next}");
            assert_eq!(ends(b, size), (next, !next), "message {next}'s bytes");
            next += 1;
        }
        if n > 0 {
            api::post_rx_all(q, &got[..n]);
        } else {
            // Nothing yet: the core goes to a runnable progress engine, if one shares it.
            std::thread::yield_now();
        }
    }
    let (arrivals, dropped) = umq::queue::stats::take_arrivals(q).expect("arrivals");
    assert_eq!(dropped, 0, "the arrival log overflowed");
    drop(bufs); // posted: the teardown returns them
    arrivals
}

/// The first and last eight bytes of a message.
fn ends(b: *mut umq_buf_t, size: u32) -> (u64, u64) {
    unsafe {
        let p = (*b).buf_data as *const u8;
        let first = (p as *const u64).read_unaligned();
        let last = (p.add(size as usize - 8) as *const u64).read_unaligned();
        (first, last)
    }
}

fn set(q: u64, opcode: u32, value: u64) {
    let input = umq_user_ctl_in_t {
        addr: value,
        ..Default::default()
    };
    let r = api::user_ctl(q, opcode, input, Default::default());
    assert_eq!(r, 0, "umq_user_ctl {opcode:#x} = {value}: {r}");
}

/// Sends `count` messages of `size` bytes at `rate` from `q`, `posted` at a time, and waits
/// for their completions.
fn send(q: u64, size: u32, count: u32, rate: u64, posted: u32) {
    set(q, UMQ_EXT_OPCODE_PACING_TICK_RATE, TICKS_PER_S);
    set(q, UMQ_EXT_OPCODE_PACING_PMTU, PMTU as u64);
    set(q, UMQ_EXT_OPCODE_PACING_RATE, rate);
    let mut free = api::alloc(size, posted, UMQ_OPC_SEND);
    let (mut posted, mut done) = (0u64, 0u64);
    let mut got = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    while done < count as u64 {
        while posted < count as u64 {
            let Some(b) = free.pop() else { break };
            number(b, size, posted);
            if api::post_tx_some(q, &[b]) == 0 {
                free.push(b);
                break;
            }
            posted += 1;
        }
        let n = api::poll(q, UMQ_IO_TX, &mut got);
        for &b in &got[..n] {
            assert_eq!(unsafe { (*b).status() }, UMQ_BUF_SUCCESS, "a send failed");
            unsafe { (*b).qbuf_next = ptr::null_mut() };
            free.push(b);
        }
        done += n as u64;
        if n == 0 {
            std::thread::sleep(NAP);
        }
    }
    set(q, UMQ_EXT_OPCODE_PACING_RATE, 0);
    free.into_iter()
        .for_each(|b| umq::ffi::api::umq_buf_free(b));
}

/// Writes message `i`'s number at its start and its complement at its end.
fn number(b: *mut umq_buf_t, size: u32, i: u64) {
    unsafe {
        (*b).data_size = size;
        (*b).total_data_size = size;
        let p = (*b).buf_data as *mut u8;
        (p as *mut u64).write_unaligned(i);
        (p.add(size as usize - 8) as *mut u64).write_unaligned(!i);
    }
}

fn encode(arrivals: &[Arrival]) -> Vec<u8> {
    let mut v = Vec::with_capacity(arrivals.len() * 12);
    for a in arrivals {
        v.extend(a.at_ns.to_le_bytes());
        v.extend(a.bytes.to_le_bytes());
    }
    v
}

fn decode(b: &[u8]) -> Vec<Arrival> {
    b.chunks_exact(12)
        .map(|c| Arrival {
            at_ns: u64::from_le_bytes(c[..8].try_into().unwrap()),
            bytes: u32::from_le_bytes(c[8..].try_into().unwrap()),
        })
        .collect()
}

/// The arrivals as CSV: nanoseconds since the first, and bytes.
fn write_csv(path: &Path, arrivals: &[Arrival]) {
    let t0 = arrivals.first().map_or(0, |a| a.at_ns);
    let mut text = String::from("ns,bytes\n");
    for a in arrivals {
        text += &format!("{},{}\n", a.at_ns - t0, a.bytes);
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
}
