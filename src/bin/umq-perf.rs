//! umq-perf: measures the loopback transport through the public C API (two queues in one
//! process), next to a bare crossbeam ArrayQueue moving the same payload in the same run.
//!
//! usage: umq-perf [--test lat|bw|fc|all] [--size BYTES] [--iters N] [--batch N] [--depth N] [--json]
//!
//! `--test fc` measures the cost of flow control: the same streaming loop with flow control off
//! and on, alternating in one run, plus standalone announcements per message one-way and two-way.

use std::ptr;
use std::time::Instant;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::ffi::pro_api::*;

struct Args {
    test: String,
    size: u32,
    iters: u64,
    batch: u32,
    depth: u32,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        test: "all".into(),
        size: 64,
        iters: 200_000,
        batch: 32,
        depth: 1024,
        json: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--test" => a.test = value()?,
            "--size" => a.size = value()?.parse().map_err(|e| format!("--size: {e}"))?,
            "--iters" => a.iters = value()?.parse().map_err(|e| format!("--iters: {e}"))?,
            "--batch" => a.batch = value()?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--depth" => a.depth = value()?.parse().map_err(|e| format!("--depth: {e}"))?,
            "--json" => a.json = true,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if !["lat", "bw", "fc", "all"].contains(&a.test.as_str())
        || a.batch == 0
        || a.batch > UMQ_BATCH_SIZE
        || a.batch > a.depth
    {
        return Err("bad --test, --batch (1..=64, <= depth) or --depth".into());
    }
    Ok(a)
}

fn pair(depth: u32) -> (u64, u64) {
    let mut o: umq_create_option_t = unsafe { std::mem::zeroed() };
    o.trans_mode = UMQ_TRANS_MODE_UB;
    o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    for (d, s) in unsafe { o.dev_info.u.ipv4.ip_addr.iter_mut() }.zip(b"127.0.0.1\0") {
        *d = *s as _;
    }
    o.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH;
    o.rx_depth = depth;
    o.tx_depth = depth;
    let a = umq_create(&mut o);
    let b = umq_create(&mut o);
    let (mut ia, mut ib) = ([0u8; 512], [0u8; 512]);
    let la = umq_bind_info_get(a, ia.as_mut_ptr(), 512);
    let lb = umq_bind_info_get(b, ib.as_mut_ptr(), 512);
    assert!(
        a != 0
            && b != 0
            && umq_bind(a, ib.as_mut_ptr(), lb) == 0
            && umq_bind(b, ia.as_mut_ptr(), la) == 0,
        "queue setup failed"
    );
    (a, b)
}

fn alloc(size: u32, n: u32, opcode: umq_opcode_t) -> Vec<*mut umq_buf_t> {
    let head = umq_buf_alloc(size, n, 0, ptr::null_mut());
    assert!(!head.is_null(), "umq_buf_alloc failed");
    let v: Vec<_> = umq::buf::iter(head).collect();
    for &b in &v {
        unsafe {
            (*b).qbuf_next = ptr::null_mut();
            (*b).pro_mut().opcode = opcode;
        }
    }
    v
}

fn chain(bufs: &[*mut umq_buf_t]) -> *mut umq_buf_t {
    for w in bufs.windows(2) {
        unsafe { (*w[0]).qbuf_next = w[1] };
    }
    if let Some(&last) = bufs.last() {
        unsafe { (*last).qbuf_next = ptr::null_mut() };
    }
    bufs[0]
}

fn post(h: u64, bufs: &[*mut umq_buf_t], dir: umq_io_direction_t) {
    let mut bad = ptr::null_mut();
    let r = umq_post(h, chain(bufs), dir, &mut bad);
    assert_eq!(r, 0, "umq_post failed");
}

fn poll_exact(h: u64, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) {
    let mut n = 0;
    while n < out.len() {
        let r = umq_poll(h, dir, out[n..].as_mut_ptr(), (out.len() - n) as u32);
        assert!(r >= 0, "umq_poll failed");
        n += r as usize;
    }
}

/// Streams `iters` messages from a to b in batches; returns messages per second.
fn bandwidth(a: u64, b: u64, args: &Args) -> f64 {
    let batch = args.batch as usize;
    let tx = alloc(args.size, args.batch, UMQ_OPC_SEND);
    let rx = alloc(args.size.max(1), args.batch, UMQ_OPC_SEND);
    let mut done = vec![ptr::null_mut(); batch];
    let mut got = vec![ptr::null_mut(); batch];
    let rounds = (args.iters / batch as u64).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        post(b, &rx, UMQ_IO_RX);
        post(a, &tx, UMQ_IO_TX);
        poll_exact(a, UMQ_IO_TX, &mut done);
        poll_exact(b, UMQ_IO_RX, &mut got);
    }
    (rounds * batch as u64) as f64 / t.elapsed().as_secs_f64()
}

/// One message at a time there and back; returns half round trips in ns (sorted).
fn latency(a: u64, b: u64, args: &Args) -> Vec<f64> {
    let iters = args.iters.min(200_000) as usize;
    let (ta, tb) = (
        alloc(args.size, 1, UMQ_OPC_SEND),
        alloc(args.size, 1, UMQ_OPC_SEND),
    );
    let (ra, rb) = (
        alloc(args.size.max(1), 1, UMQ_OPC_SEND),
        alloc(args.size.max(1), 1, UMQ_OPC_SEND),
    );
    let mut c = [ptr::null_mut(); 1];
    let mut samples = Vec::with_capacity(iters);
    for _ in 0..iters {
        let t = Instant::now();
        post(b, &rb, UMQ_IO_RX);
        post(a, &ta, UMQ_IO_TX);
        poll_exact(b, UMQ_IO_RX, &mut c);
        post(a, &ra, UMQ_IO_RX);
        post(b, &tb, UMQ_IO_TX);
        poll_exact(a, UMQ_IO_RX, &mut c);
        poll_exact(a, UMQ_IO_TX, &mut c);
        poll_exact(b, UMQ_IO_TX, &mut c);
        samples.push(t.elapsed().as_nanos() as f64 / 2.0);
    }
    samples.sort_by(|x, y| x.partial_cmp(y).unwrap());
    samples
}

/// The baseline: the same payload copied through a crossbeam ArrayQueue by one thread.
fn crossbeam_baseline(args: &Args) -> f64 {
    use crossbeam_queue::ArrayQueue;
    let q: ArrayQueue<Box<[u8]>> = ArrayQueue::new(args.batch as usize);
    let src = vec![7u8; args.size as usize];
    let mut pool: Vec<Box<[u8]>> = (0..args.batch)
        .map(|_| vec![0u8; args.size as usize].into_boxed_slice())
        .collect();
    let mut sink = 0u64;
    let rounds = (args.iters / args.batch as u64).max(1);
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
    (rounds * args.batch as u64) as f64 / t.elapsed().as_secs_f64()
}

fn init(flow_control: bool, batch: u32) {
    let mut cfg: Box<umq_init_cfg_t> = Box::new(unsafe { std::mem::zeroed() });
    cfg.buf_mode = UMQ_BUF_COMBINE;
    cfg.feature = UMQ_FEATURE_API_PRO;
    if flow_control {
        cfg.feature |= UMQ_FEATURE_ENABLE_FLOW_CONTROL;
        cfg.flow_control.notify_interval = batch as u16;
    }
    assert_eq!(umq_init(&mut *cfg), 0, "umq_init failed");
}

/// Posts all of `bufs`, retrying what `EAGAIN` refused after running `on_full` (which lets the
/// peer return credit).
fn post_all(h: u64, bufs: &[*mut umq_buf_t], mut on_full: impl FnMut()) {
    let mut from = 0;
    while from < bufs.len() {
        let mut bad = ptr::null_mut();
        let r = umq_post(h, chain(&bufs[from..]), UMQ_IO_TX, &mut bad);
        if r == 0 {
            return;
        }
        assert_eq!(r, -umq::abi::errno::UMQ_ERR_EAGAIN, "umq_post failed");
        from += bufs[from..].iter().position(|&b| b == bad).unwrap();
        on_full();
    }
}

/// Receives whatever has arrived at `h` and posts the buffers straight back; returns how many
/// carried data.
fn recycle_rx(h: u64, scratch: &mut [*mut umq_buf_t]) -> usize {
    let n = umq_poll(h, UMQ_IO_RX, scratch.as_mut_ptr(), scratch.len() as u32);
    assert!(n >= 0);
    let got = &scratch[..n as usize];
    if got.is_empty() {
        return 0;
    }
    let data = got
        .iter()
        .filter(|&&b| unsafe { (*b).total_data_size } > 0)
        .count();
    post(h, got, UMQ_IO_RX);
    data
}

/// Streams `iters` messages a -> b (and b -> a too when `two_way`) with receivers that repost
/// every buffer; returns messages per second and the standalone announcements per message.
fn stream(args: &Args, flow_control: bool, two_way: bool) -> (f64, f64) {
    init(flow_control, args.batch);
    let (a, b) = pair(args.depth);
    let batch = args.batch as usize;
    for h in [a, b] {
        for _ in 0..args.depth / batch as u32 {
            post(
                h,
                &alloc(args.size.max(1), args.batch, UMQ_OPC_SEND),
                UMQ_IO_RX,
            );
        }
    }
    let (ta, tb) = (
        alloc(args.size, args.batch, UMQ_OPC_SEND),
        alloc(args.size, args.batch, UMQ_OPC_SEND),
    );
    let mut scratch = vec![ptr::null_mut(); 64];
    let mut done = vec![ptr::null_mut(); batch];
    let rounds = (args.iters / batch as u64).max(1);
    let t = Instant::now();
    for _ in 0..rounds {
        post_all(a, &ta, || {
            recycle_rx(b, &mut scratch);
        });
        poll_exact(a, UMQ_IO_TX, &mut done);
        if two_way {
            post_all(b, &tb, || {
                recycle_rx(a, &mut scratch);
            });
            poll_exact(b, UMQ_IO_TX, &mut done);
            while recycle_rx(a, &mut scratch) > 0 {}
        }
        while recycle_rx(b, &mut scratch) > 0 {}
    }
    let secs = t.elapsed().as_secs_f64();
    let sent = rounds * batch as u64 * if two_way { 2 } else { 1 };
    let standalone = (ext_stats(a).standalone + ext_stats(b).standalone) as f64;
    for h in [a, b] {
        umq_unbind(h); // flushes the posted receive buffers back to us
        loop {
            let n = umq_poll(h, UMQ_IO_RX, scratch.as_mut_ptr(), 64);
            if n <= 0 {
                break;
            }
            scratch[..n as usize].iter().for_each(|&b| umq_buf_free(b));
        }
    }
    umq_destroy(a);
    umq_destroy(b);
    umq_uninit();
    (sent as f64 / secs, standalone / sent as f64)
}

fn ext_stats(h: u64) -> umq::abi::ext::umq_ext_flow_control_stats_t {
    let mut s = umq::abi::ext::umq_ext_flow_control_stats_t::default();
    let mut i = umq_user_ctl_in_t {
        opcode: umq::abi::ext::UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS,
        ..Default::default()
    };
    let mut o = umq_user_ctl_out_t {
        addr: &mut s as *mut _ as u64,
        len: size_of_val(&s) as u32,
        reserved: 0,
    };
    assert_eq!(umq_user_ctl(h, &mut i, &mut o), 0);
    s
}

/// Flow control on vs off, alternating five times so drift hits both alike; best of each.
fn flow_control_cost(args: &Args) {
    let (mut off, mut on) = (0f64, 0f64);
    for _ in 0..5 {
        off = off.max(stream(args, false, false).0);
        on = on.max(stream(args, true, false).0);
    }
    let (_, one_way) = stream(args, true, false);
    let (_, two_way) = stream(args, true, true);
    let per_interval = one_way * args.batch as f64;
    if args.json {
        println!(
            "{{\"test\":\"fc\",\"provider\":\"loopback\",\"size\":{},\"batch\":{},\"off_msgs_per_s\":{off:.0},\"on_msgs_per_s\":{on:.0},\"ratio\":{:.3},\"standalone_per_msg_one_way\":{one_way:.4},\"standalone_per_notify_interval_one_way\":{per_interval:.3},\"standalone_per_msg_two_way\":{two_way:.4}}}",
            args.size,
            args.batch,
            on / off
        );
    } else {
        println!(
            "flow control  off {off:>12.0} msg/s | on {on:>12.0} msg/s | on/off {:.3} | standalone per msg: one-way {one_way:.4} ({per_interval:.3} per notify interval of {}), two-way {two_way:.4}",
            on / off,
            args.batch
        );
    }
}

fn pct(s: &[f64], p: f64) -> f64 {
    s[((s.len() as f64 - 1.0) * p) as usize]
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "{e}\nusage: umq-perf [--test lat|bw|fc|all] [--size BYTES] [--iters N] [--batch N] [--depth N] [--json]"
            );
            std::process::exit(if e.is_empty() { 0 } else { 2 });
        }
    };
    if args.test == "fc" {
        return flow_control_cost(&args);
    }
    init(false, args.batch);
    let (a, b) = pair(args.depth);
    if !args.json {
        println!(
            "umq-perf: provider loopback (two queues, one process), size {} B, batch {}, depth {}",
            args.size, args.batch, args.depth
        );
    }
    if args.test != "lat" {
        let ours = bandwidth(a, b, &args);
        let base = crossbeam_baseline(&args);
        if args.json {
            println!(
                "{{\"test\":\"bw\",\"provider\":\"loopback\",\"size\":{},\"batch\":{},\"msgs_per_s\":{ours:.0},\"baseline\":\"crossbeam-ArrayQueue\",\"baseline_msgs_per_s\":{base:.0},\"ratio\":{:.3}}}",
                args.size,
                args.batch,
                ours / base
            );
        } else {
            println!(
                "bandwidth   umq {:>12.0} msg/s {:>8.3} GB/s | crossbeam ArrayQueue {:>12.0} msg/s | ratio {:.2}",
                ours,
                ours * args.size as f64 / 1e9,
                base,
                ours / base
            );
        }
    }
    if args.test != "bw" {
        let s = latency(a, b, &args);
        let mean = s.iter().sum::<f64>() / s.len() as f64;
        if args.json {
            println!(
                "{{\"test\":\"lat\",\"provider\":\"loopback\",\"size\":{},\"p50_ns\":{:.0},\"p99_ns\":{:.0},\"p999_ns\":{:.0},\"mean_ns\":{mean:.0}}}",
                args.size,
                pct(&s, 0.5),
                pct(&s, 0.99),
                pct(&s, 0.999)
            );
        } else {
            println!(
                "latency     half round trip p50 {:.0} ns  p99 {:.0} ns  p999 {:.0} ns  mean {mean:.0} ns",
                pct(&s, 0.5),
                pct(&s, 0.99),
                pct(&s, 0.999)
            );
        }
    }
    umq_destroy(a);
    umq_destroy(b);
    umq_uninit();
    if args.test == "all" {
        flow_control_cost(&args);
    }
}
