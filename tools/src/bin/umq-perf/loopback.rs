//! `--provider loopback` (the embedded default): two queues of one process, driven by one
//! thread, next to a bare crossbeam ArrayQueue moving the same payload in the same run.

use crate::api::{self, Flow};
use crate::clock::RoundTrips;
use crate::report::{Progress, Row};
use crate::{Kind, Run};
use std::ptr;
use std::time::Instant;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;

/// Two bound queues with `depth`-deep queues.
fn pair(run: &Run, flow: Flow) -> (u64, u64) {
    api::init_api(flow, run.base_api);
    let (a, b) = (api::create(run.depth), api::create(run.depth));
    let (ia, ib) = (api::bind_info(a), api::bind_info(b));
    api::bind(a, ib);
    api::bind(b, ia);
    (a, b)
}

fn finish(row: Row, a: u64, b: u64) -> Row {
    let sides = vec![("a", api::side_stats(a)), ("b", api::side_stats(b))];
    api::teardown(a);
    api::teardown(b);
    umq_uninit();
    Row { sides, ..row }
}

pub fn measure(kind: Kind, run: &Run) -> Row {
    let (a, b) = pair(run, run.flow);
    let row = Row::new(kind.name(), "loopback", run.size, run.flow.on).text("api", run.api());
    let label = format!("{} loopback {} B", kind.name(), run.size);
    let mut progress = Progress::new(label, run.iters, run.quiet);
    let row = match kind {
        Kind::Lat if run.base_api => {
            crate::latency_row(row, crate::base::latency(a, b, run, &mut progress))
        }
        Kind::Qps if run.base_api => {
            crate::bandwidth_row(row, run.size, crate::base::qps(a, b, run, &mut progress))
        }
        Kind::Lat => crate::latency_row(row, latency(a, b, run, &mut progress)),
        Kind::Bw => {
            let (ours, _) = stream(a, b, run, false, &mut progress);
            let base = crossbeam_baseline(run);
            crate::bandwidth_row(row, run.size, ours)
                .text("baseline", "crossbeam-ArrayQueue")
                .num("baseline_msgs_per_s", base.round())
                .num("ratio", ours / base)
        }
        Kind::Qps => crate::bandwidth_row(row, run.size, qps(a, b, run, &mut progress)),
    };
    drop(progress);
    finish(row, a, b)
}

/// One message at a time there and back, both sides keeping `rx_bufs` receive buffers posted;
/// returns half round trips in ns.
fn latency(a: u64, b: u64, run: &Run, progress: &mut Progress) -> Vec<f64> {
    for h in [a, b] {
        api::post_rx_all(h, &api::alloc(run.size.max(1), run.rx_bufs, UMQ_OPC_SEND));
    }
    let (ta, tb) = (
        api::alloc(run.size.max(1), 1, UMQ_OPC_SEND),
        api::alloc(run.size.max(1), 1, UMQ_OPC_SEND),
    );
    let mut c = [ptr::null_mut(); 1];
    let warm = crate::shm::warmup(run.iters);
    let mut marks = RoundTrips::with_capacity(run.iters);
    for i in 0..warm + run.iters {
        if i >= warm {
            marks.mark();
            progress.tick(i - warm);
        }
        send(a, &ta);
        receive(b, &mut c);
        repost(b, &c);
        send(b, &tb);
        receive(a, &mut c);
        repost(a, &c);
        reap_send(a, &mut c);
        reap_send(b, &mut c);
    }
    marks.mark();
    [ta, tb].iter().for_each(|v| umq_buf_free(v[0]));
    marks.half_round_trips_ns()
}

// The four call shapes of a round trip, each in a function of its own so that callgrind counts
// them apart (`callgrind_annotate --inclusive=yes`; docs/PERFORMANCE.md, "Instructions").

#[inline(never)]
fn send(h: u64, tx: &[*mut umq_buf_t]) {
    api::post_all(h, tx, std::hint::spin_loop);
}

#[inline(never)]
fn receive(h: u64, c: &mut [*mut umq_buf_t]) {
    api::poll_exact(h, UMQ_IO_RX, c);
}

#[inline(never)]
fn repost(h: u64, c: &[*mut umq_buf_t]) {
    api::post(h, c, UMQ_IO_RX);
}

#[inline(never)]
fn reap_send(h: u64, c: &mut [*mut umq_buf_t]) {
    api::poll_exact(h, UMQ_IO_TX, c);
}

/// The baseline: the same payload copied through a crossbeam ArrayQueue by one thread.
fn crossbeam_baseline(run: &Run) -> f64 {
    use crossbeam_queue::ArrayQueue;
    let q: ArrayQueue<Box<[u8]>> = ArrayQueue::new(run.batch as usize);
    let src = vec![7u8; run.size as usize];
    let mut pool: Vec<Box<[u8]>> = (0..run.batch)
        .map(|_| vec![0u8; run.size as usize].into_boxed_slice())
        .collect();
    let mut sink = 0u64;
    let rounds = (run.iters / run.batch as u64).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        for mut b in pool.drain(..) {
            b.copy_from_slice(&src);
            q.push(b).unwrap();
        }
        while let Some(b) = q.pop() {
            sink = sink.wrapping_add(b.first().copied().unwrap_or(0) as u64);
            pool.push(b);
        }
    }
    std::hint::black_box(sink);
    (rounds * run.batch as u64) as f64 / t.elapsed().as_secs_f64()
}

/// Receives whatever has arrived at `h` and posts the buffers straight back; returns how many
/// carried data.
fn recycle_rx(h: u64, scratch: &mut [*mut umq_buf_t]) -> usize {
    let n = api::poll(h, UMQ_IO_RX, scratch);
    let got = &scratch[..n];
    if got.is_empty() {
        return 0;
    }
    let data = got
        .iter()
        .filter(|&&b| unsafe { (*b).total_data_size } > 0)
        .count();
    api::post(h, got, UMQ_IO_RX);
    data
}

/// Streams `iters` messages a -> b (and b -> a too when `two_way`) with receivers that repost
/// every buffer; returns messages per second and the standalone announcements per message.
fn stream(a: u64, b: u64, run: &Run, two_way: bool, progress: &mut Progress) -> (f64, f64) {
    let batch = run.batch as usize;
    for h in [a, b] {
        api::post_rx_all(h, &api::alloc(run.size.max(1), run.rx_bufs, UMQ_OPC_SEND));
    }
    let (ta, tb) = (
        api::alloc(run.size, run.batch, UMQ_OPC_SEND),
        api::alloc(run.size, run.batch, UMQ_OPC_SEND),
    );
    let mut scratch = vec![ptr::null_mut(); 64];
    let mut done = vec![ptr::null_mut(); batch];
    let rounds = (run.iters / batch as u64).max(1);
    let t = Instant::now();
    for r in 0..rounds {
        api::post_all(a, &ta, || {
            recycle_rx(b, &mut scratch);
        });
        api::poll_exact(a, UMQ_IO_TX, &mut done);
        if two_way {
            api::post_all(b, &tb, || {
                recycle_rx(a, &mut scratch);
            });
            api::poll_exact(b, UMQ_IO_TX, &mut done);
            while recycle_rx(a, &mut scratch) > 0 {}
        }
        while recycle_rx(b, &mut scratch) > 0 {}
        progress.tick(r * batch as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    let sent = rounds * batch as u64 * if two_way { 2 } else { 1 };
    let standalone = (api::side_stats(a).ext.standalone + api::side_stats(b).ext.standalone) as f64;
    // A posted list stays linked after its WRs complete (the caller's list is left as it
    // was): each buffer is cut out of it before it is freed alone.
    for &x in ta.iter().chain(&tb) {
        unsafe { (*x).qbuf_next = ptr::null_mut() };
        umq_buf_free(x);
    }
    (sent as f64 / secs, standalone / sent as f64)
}

/// The reference qps tool's pattern in one thread: `a` posts the same list head of 64 SENDs
/// round after round, `b` counts what arrives and reposts its buffers. Returns messages per
/// second; panics if a message is missing or umq_post rewrote the list.
fn qps(a: u64, b: u64, run: &Run, progress: &mut Progress) -> f64 {
    for h in [a, b] {
        api::post_rx_all(h, &api::alloc(run.size.max(1), run.rx_bufs, UMQ_OPC_SEND));
    }
    let list = api::alloc(run.size, crate::QPS_LIST, UMQ_OPC_SEND);
    api::chain(&list);
    let mut scratch = vec![ptr::null_mut(); 64];
    let mut done = vec![ptr::null_mut(); list.len()];
    let rounds = (run.iters / list.len() as u64).max(1);
    let mut received = 0;
    let t = Instant::now();
    for r in 0..rounds {
        api::post_list(a, &list, || {
            received += recycle_rx(b, &mut scratch);
            recycle_rx(a, &mut scratch);
        });
        api::poll_exact(a, UMQ_IO_TX, &mut done);
        loop {
            let n = recycle_rx(b, &mut scratch);
            received += n;
            if n == 0 {
                break;
            }
        }
        recycle_rx(a, &mut scratch);
        api::assert_linked(&list);
        progress.tick(r * list.len() as u64);
    }
    let secs = t.elapsed().as_secs_f64();
    assert_eq!(
        received as u64,
        rounds * list.len() as u64,
        "messages went missing"
    );
    umq_buf_free(list[0]);
    received as f64 / secs
}

/// One streaming run on a fresh pair, with flow control on or off.
fn stream_run(run: &Run, flow_control: bool, two_way: bool) -> (f64, f64) {
    let flow = Flow {
        on: flow_control,
        ..run.flow
    };
    let (a, b) = pair(run, flow);
    let mut quiet = Progress::new(String::new(), 1, true);
    let r = stream(a, b, run, two_way, &mut quiet);
    finish(Row::new("", "", 0, false), a, b);
    r
}

/// Flow control on vs off in seven back-to-back pairs (which goes first alternates, so drift
/// and warm-up hit both alike); the ratio is the median of the pairs' ratios, which one lucky
/// or unlucky run cannot move the way it moves a best-of. Then standalone announcements per
/// message, one-way and two-way.
pub fn flow_control_cost(run: &Run) -> Row {
    const PAIRS: u64 = 7;
    let (mut off, mut on, mut ratios) = (0f64, 0f64, Vec::new());
    let mut progress = Progress::new("fc loopback".into(), 2 * PAIRS + 2, run.quiet);
    for i in 0..PAIRS {
        let (pair_off, pair_on) = if i % 2 == 0 {
            let off = stream_run(run, false, false).0;
            (off, stream_run(run, true, false).0)
        } else {
            let on = stream_run(run, true, false).0;
            (stream_run(run, false, false).0, on)
        };
        off = off.max(pair_off);
        on = on.max(pair_on);
        ratios.push(pair_on / pair_off);
        progress.tick(2 * i + 2);
    }
    ratios.sort_by(f64::total_cmp);
    let (_, one_way) = stream_run(run, true, false);
    let (_, two_way) = stream_run(run, true, true);
    drop(progress);
    Row::new("fc", "loopback", run.size, true)
        .num("off_msgs_per_s", off.round())
        .num("on_msgs_per_s", on.round())
        .num("ratio", ratios[ratios.len() / 2])
        .num("ratio_of_best", on / off)
        .num("ratio_min", ratios[0])
        .num("ratio_max", ratios[ratios.len() - 1])
        .num("standalone_per_msg_one_way", one_way)
        .num(
            "standalone_per_notify_interval_one_way",
            one_way * run.batch as f64,
        )
        .num("standalone_per_msg_two_way", two_way)
}
