//! `--test pacing --wire`: how a rate-limited queue's messages cross, measured where they
//! arrive. For each message size (`--size`, default 64 KiB and 1 MiB) and rate (`--rates`,
//! default 100 Mbit/s and 1 Gbit/s) one queue,
//! limited at PMTU 4096 on a microsecond tick, sends about half a second's worth of messages to
//! its peer, which records when each packet arrived (the library's log of pieces, `umq::queue::
//! stats::record_pieces`). On loopback the peer is a queue of this process polled by a second
//! thread; over shm and fabric it is a second process (`umq-perf --wire-peer`, hidden) or, with
//! `--client`, one the `umq-perf --server` on another host starts. The sender polls its
//! completions with naps in between, as a program that has nothing else to do would, so the
//! progress engine and the receiver have the two CPUs of a small machine.
//!
//! Per row: the packets that arrived, the most bytes that arrived within any window of one
//! packet time (`burst_bytes_max`; a queue paced packet by packet keeps it at two PMTU), how
//! many windows held more than two PMTU, and the achieved rate at the receiver against the
//! limit (`rate_error`, the bytes after the first packet over the time from the first arrival
//! to the last). `burst_bytes_max_sent` is the same burst where the sender's provider put the
//! packets on the wire (into the peer's ring, to libfabric, or landing at the queue of this
//! process), from the sender's own log.
//!
//! An arrival is timed when the receiving process takes the packet, so it is only as exact as
//! that process's polling: a receiver kept off its CPU for a millisecond finds that
//! millisecond's packets together, however they were paced. So the peer process also records
//! its own stops (a poll that began more than a packet time after the one before ended) and
//! the packets it found in the poll after each (`found_late`); `burst_bytes_max_timed` is the
//! burst over the other packets, those it took while it kept polling. A sender that bursts
//! still shows there: its packets arrive together at a receiver that is polling. Before the
//! rows, `host` measures the machine itself the same way: one thread a CPU doing nothing but
//! reading the clock, and the longest time each went without a reading.

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
use umq::os::clock_ns;
use umq::queue::stats::{Pieces, take_pieces};
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
    let mut rows = host(provider, run.flow.on, rates);
    for &size in sizes {
        for &rate in rates {
            let count = messages(size, rate);
            let crossed = match provider {
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
                    &crossed.arrivals,
                );
            }
            let row = figures(row, &crossed.arrivals, size, count, rate);
            let row = found_late(row, &crossed.arrivals, &crossed.stops, rate);
            rows.push(row.num(
                "burst_bytes_max_sent",
                burst_bytes_max(&crossed.departures, packet_ns(rate)) as f64,
            ));
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
    let window = packet_ns(rate);
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

/// One packet time at `rate`, in nanoseconds.
fn packet_ns(rate: u64) -> u64 {
    (8.0 * PMTU as f64 * 1e9 / rate as f64) as u64
}

/// The receiver's stops beside the row's figures: how many, the longest, the packets it found
/// in the poll after one, and the burst over the packets it took while it kept polling.
fn found_late(row: Row, arrivals: &[Arrival], stops: &[Stop], rate: u64) -> Row {
    let after_stop = |a: &Arrival| stops.iter().any(|s| (s.from..=s.to).contains(&a.at_ns));
    let timed: Vec<Arrival> = arrivals
        .iter()
        .filter(|a| !after_stop(a))
        .copied()
        .collect();
    let longest = stops.iter().map(|s| s.to - s.from).max().unwrap_or(0);
    row.num("receiver_stops", stops.len() as f64)
        .num("receiver_stop_max_us", longest as f64 / 1e3)
        .num("found_late", (arrivals.len() - timed.len()) as f64)
        .num(
            "burst_bytes_max_timed",
            burst_bytes_max(&timed, packet_ns(rate)) as f64,
        )
}

/// A time the receiving process may not have been running, and the poll after it: from the end
/// of one poll to the end of the next, when that took longer than a packet time (the process
/// stopped between the two polls or inside the second), to the end of the poll after (a stop
/// late in a poll, after it looked at the ring, leaves what came meanwhile to that one). A poll
/// that takes the packets that came meanwhile takes well under a microsecond a packet.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stop {
    from: u64,
    to: u64,
}

/// How long the host's CPUs go without running a thread that wants nothing else: one thread a
/// CPU reads the clock for `HOST_PROBE`. A row per rate: the gaps longer than its packet time
/// and longer than a millisecond, and the longest.
fn host(provider: &'static str, flow: bool, rates: &[u64]) -> Vec<Row> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let gaps: Vec<u64> = std::thread::scope(|s| {
        let probes: Vec<_> = (0..cpus).map(|_| s.spawn(clock_gaps)).collect();
        probes.into_iter().flat_map(|p| p.join().unwrap()).collect()
    });
    let over = |ns: u64| gaps.iter().filter(|&&g| g > ns).count() as f64;
    let longest = gaps.iter().max().copied().unwrap_or(0);
    rates
        .iter()
        .map(|&rate| {
            Row::new("pacing_wire_host", provider, 0, flow)
                .num("rate_bps", rate as f64)
                .num("cpus", cpus as f64)
                .num("probe_ms", HOST_PROBE.as_millis() as f64)
                .num("packet_time_us", packet_ns(rate) as f64 / 1e3)
                .num("stops_over_packet_time", over(packet_ns(rate)))
                .num("stops_over_1_ms", over(1_000_000))
                .num("stop_max_us", longest as f64 / 1e3)
        })
        .collect()
}

/// How exactly the receiver times the packets it counts in `burst_bytes_max_timed`: the poll
/// that took them ended at most this part of a packet time after the poll before. Under a
/// third: a queue that makes up time sends its packets two thirds of a packet time apart, and a
/// clock a third of a packet time coarse could show three of them within one.
const TIMED_WITHIN: u64 = 4;
/// How long the host is probed before the rows.
const HOST_PROBE: Duration = Duration::from_millis(500);
/// Gaps shorter than this between two clock readings are not kept.
const GAP_KEPT_NS: u64 = 10_000;

/// Reads the clock for `HOST_PROBE` and returns the gaps between two readings over
/// `GAP_KEPT_NS`: the times this thread did not run.
fn clock_gaps() -> Vec<u64> {
    let mut gaps = Vec::new();
    let start = clock_ns();
    let mut last = start;
    while last - start < HOST_PROBE.as_nanos() as u64 {
        let now = clock_ns();
        if now - last > GAP_KEPT_NS {
            gaps.push(now - last);
        }
        last = now;
    }
    gaps
}

/// How a row's packets crossed: when they arrived, when the receiver stopped (none in this
/// process: the engine times the packets it lands), and when the sender's provider put them
/// on the wire.
struct Crossed {
    arrivals: Vec<Arrival>,
    stops: Vec<Stop>,
    departures: Vec<Arrival>,
}

/// Loopback: the receiving queue is ours, polled by a second thread.
fn in_process(run: &Run, size: u32, count: u32, rate: u64) -> Crossed {
    let posted = window(size, rate);
    api::init(flow(run, posted));
    let a = api::create(run.depth);
    let b = api::create(run.depth);
    api::bind(a, api::bind_info(b));
    api::bind(b, api::bind_info(a));
    let bufs = start_receiving(b, size, posted);
    let receiver =
        std::thread::spawn(move || receive(b, bufs, count, size, u64::MAX, &mut Vec::new()));
    let departures = send(a, size, count, rate, posted);
    let arrivals = receiver.join().expect("the receiving thread failed");
    api::teardown(a);
    api::teardown(b);
    umq::ffi::api::umq_uninit();
    Crossed {
        arrivals,
        stops: Vec::new(),
        departures,
    }
}

/// shm or fabric: the receiving queue is the peer process's, which also says when it stopped.
fn with_peer(run: &Run, size: u32, count: u32, rate: u64) -> Crossed {
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
    let departures = send(q, size, count, rate, posted);
    let arrivals = decode(&recv_frame(&mut peer.from));
    let stops = decode_stops(&recv_frame(&mut peer.from));
    crate::shm::end_with_peer(q, peer);
    Crossed {
        arrivals,
        stops,
        departures,
    }
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
    let mut stops = Vec::new();
    let arrivals = receive(
        q,
        bufs,
        run.iters as u32,
        run.size,
        packet_ns(rate) / TIMED_WITHIN,
        &mut stops,
    );
    send_frame(&mut out, &encode(&arrivals));
    send_frame(&mut out, &encode_stops(&stops));
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
    umq::queue::stats::record_pieces(q, Pieces::Arriving, LOG_LIMIT).expect("recording");
    let bufs = api::alloc(size, posted, UMQ_OPC_SEND);
    api::post_rx_all(q, &bufs);
    bufs.into_iter().map(|b| b as usize).collect()
}

/// Busy-polls `q` until `count` messages arrived, each checked (its number at both ends, in
/// order), reposting the buffers; returns the packets' arrivals, and adds to `stops` each time
/// it did not poll for longer than `stop_ns`.
fn receive(
    q: u64,
    bufs: Vec<usize>,
    count: u32,
    size: u32,
    stop_ns: u64,
    stops: &mut Vec<Stop>,
) -> Vec<Arrival> {
    let mut got = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    let mut next = 0u64;
    let mut last_end = clock_ns();
    let mut just_stopped = false;
    while next < count as u64 {
        let n = api::poll(q, UMQ_IO_RX, &mut got);
        let end = clock_ns();
        if std::mem::take(&mut just_stopped) {
            stops.last_mut().expect("just pushed").to = end;
        }
        if end - last_end > stop_ns {
            stops.push(Stop {
                from: last_end,
                to: end,
            });
            just_stopped = true;
        }
        last_end = end;
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
    let (arrivals, dropped) = take_pieces(q, Pieces::Arriving).expect("arrivals");
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
/// for their completions; returns when its provider put each packet on the wire.
fn send(q: u64, size: u32, count: u32, rate: u64, posted: u32) -> Vec<Arrival> {
    umq::queue::stats::record_pieces(q, Pieces::Leaving, LOG_LIMIT).expect("recording");
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
    let (departures, dropped) = take_pieces(q, Pieces::Leaving).expect("departures");
    assert_eq!(dropped, 0, "the departure log overflowed");
    departures
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

fn encode_stops(stops: &[Stop]) -> Vec<u8> {
    stops
        .iter()
        .flat_map(|s| [s.from, s.to])
        .flat_map(u64::to_le_bytes)
        .collect()
}

fn decode_stops(b: &[u8]) -> Vec<Stop> {
    let word = |c: &[u8]| u64::from_le_bytes(c.try_into().unwrap());
    b.chunks_exact(16)
        .map(|c| Stop {
            from: word(&c[..8]),
            to: word(&c[8..]),
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
