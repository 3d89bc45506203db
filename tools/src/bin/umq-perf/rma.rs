//! `--test rma`: one-sided WRITE and READ against a target that runs nothing of ours while
//! they go. The target exposes one buffer of `--size` bytes (from its queue's shared pool) and
//! then sleeps: over shm and fabric it is a second process (`umq-perf --rma-peer`, hidden)
//! blocked on its pipe until the run ends; on loopback it is a second queue of this process
//! that is never polled. This process times, one WR at a time from post to TX completion,
//! WRITE latency and READ latency, then a WRITE stream with up to `--batch` WRs a post and
//! `--depth` in flight, and a READ stream the same way. At the end the target reports the first
//! bytes of its buffer, which must be the last WRITE's. With `--target poll` the target polls
//! its queue instead of sleeping, and a last row times a put ping-pong as `ucp_put_lat` does:
//! each side WRITEs into the other's buffer and waits for the other's WRITE to show in its own
//! memory, so the time is one way, where a WR's own latency runs to its completion (over the
//! network the target's delivery acknowledgment: a round trip). With `--compare ucx`,
//! `ucx_perftest` runs `ucp_put_lat` (against our WRITE latency and the ping-pong), `ucp_put_bw`
//! (WRITE stream) and `ucp_get` (READ stream: UCX's get test keeps gets outstanding) with its
//! responder not progressed (`-o`), over the same transport, in the same invocation.

use crate::api;
use crate::report::Row;
use crate::shm::{recv_frame, send_frame};
use crate::{Run, clock::time_round_trips, shm::warmup};
use std::ptr;
use umq::abi::errno::UMQ_BUF_SUCCESS;
use umq::abi::pro_types::*;
use umq::abi::types::*;

/// What the target exposes: the remote SGE of its buffer.
pub(crate) fn pack(sge: &umq_ref_sge_t) -> Vec<u8> {
    let mut v = sge.addr.to_le_bytes().to_vec();
    for x in [sge.length, sge.token_id, sge.token_value] {
        v.extend(x.to_le_bytes());
    }
    v
}

pub(crate) fn unpack(b: &[u8]) -> umq_ref_sge_t {
    assert_eq!(b.len(), 20, "bad remote buffer frame");
    let word = |i: usize| u32::from_le_bytes(b[8 + 4 * i..12 + 4 * i].try_into().unwrap());
    umq_ref_sge_t {
        addr: u64::from_le_bytes(b[..8].try_into().unwrap()),
        length: word(0),
        token_id: word(1),
        token_value: word(2),
        ..Default::default()
    }
}

/// One buffer of `size` bytes of queue `q`'s shared pool (of the process pool when the run's
/// receive side does not use the shared pool: `--shared-pool send|off`), and the SGE that
/// reaches it.
fn exposed(q: u64, run: &Run) -> (*mut umq_buf_t, umq_ref_sge_t) {
    exposed_from(if run.shared_rx { q } else { 0 }, run.size)
}

/// One buffer of `size` bytes of queue `from`'s shared pool (0: the process pool), and the SGE
/// that reaches it.
pub(crate) fn exposed_from(from: u64, size: u32) -> (*mut umq_buf_t, umq_ref_sge_t) {
    let b = api::alloc_from(from, size, 1, UMQ_OPC_SEND)[0];
    let sge = unsafe {
        umq_ref_sge_t {
            addr: (*b).buf_data as u64,
            length: size,
            token_id: (*b).token_id(),
            token_value: (*b).token_value,
            ..Default::default()
        }
    };
    (b, sge)
}

/// The target: in another process (on this host, or served by `umq-perf --server` on
/// another), or a queue of ours.
enum Target {
    Process(crate::shm::Peer),
    Queue { q: u64, buf: *mut umq_buf_t },
}

impl Target {
    /// Our queue bound to the target, and its exposed buffer.
    fn start(run: &Run, provider: &str) -> (Target, u64, umq_ref_sge_t) {
        api::init(run.flow);
        if provider == "loopback" {
            let q = api::create(run.depth);
            let t = api::create(run.depth);
            api::bind(q, api::bind_info(t));
            api::bind(t, api::bind_info(q));
            let (buf, sge) = exposed(t, run);
            return (Target::Queue { q: t, buf }, q, sge);
        }
        let args = [
            "--rma-peer",
            "--size",
            &run.size.to_string(),
            "--depth",
            &run.depth.to_string(),
            "--shared-pool",
            if run.shared_rx { "on" } else { "off" },
            "--target",
            if run.target_polls { "poll" } else { "sleep" },
        ];
        let mut peer = crate::shm::start_peer(args.map(String::from).to_vec(), run);
        // Our queue offers the address the peer reaches us at (another host's, over --client).
        let q = api::create_at(run.depth, UMQ_TRANS_MODE_UB, peer.ip);
        api::bind(q, recv_frame(&mut peer.from));
        send_frame(&mut peer.to, &api::bind_info(q));
        let sge = unpack(&recv_frame(&mut peer.from));
        (Target::Process(peer), q, sge)
    }

    /// Half round trips (ns) of a put ping-pong with a target that polls (`--target poll`):
    /// our WRITE into its buffer, its WRITE back into ours, as `ucp_put_lat`. None for a
    /// sleeping target, a queue of ours, or WRs too short to carry a round's value.
    fn put_ping_pong(&mut self, q: u64, run: &Run, theirs: umq_ref_sge_t) -> Option<Vec<f64>> {
        let Target::Process(peer) = self else {
            return None;
        };
        if !run.target_polls || run.size < 8 {
            return None;
        }
        let (mine, sge) = exposed(q, run);
        unsafe { last_word(mine, run.size).write_volatile(0) };
        let (warm, iters) = (warmup(run.iters), run.iters);
        let mut ask = PONG.to_vec();
        ask.extend((warm + iters).to_le_bytes());
        ask.extend(pack(&sge));
        send_frame(&mut peer.to, &ask);
        let mut pp = PutPingPong::new(q, run.size, mine, theirs);
        let samples = time_round_trips(
            warm,
            iters,
            |_| {},
            |i| {
                pp.put(PING | i);
                pp.wait_for(PING | i);
            },
        );
        pp.finish();
        assert_eq!(recv_frame(&mut peer.from), b"done");
        umq::ffi::api::umq_buf_free(mine);
        Some(samples)
    }

    /// The first eight bytes of the exposed buffer, as the target sees them; then it goes.
    fn finish(self) -> u64 {
        match self {
            Target::Queue { q, buf } => {
                let first = unsafe { ((*buf).buf_data as *const u64).read_unaligned() };
                umq::ffi::api::umq_buf_free(buf);
                api::teardown(q);
                first
            }
            Target::Process(mut peer) => {
                send_frame(&mut peer.to, b"look");
                let first = recv_frame(&mut peer.from);
                let first = u64::from_le_bytes(first[..8].try_into().unwrap());
                if let Some(mut child) = peer.child {
                    let status = child.wait().expect("waiting for the target");
                    assert!(status.success(), "the target process failed: {status}");
                }
                first
            }
        }
    }
}

/// The target process (`--rma-peer`): binds, exposes its buffer, sleeps on its pipe (running
/// nothing of ours), or with `--target poll` polls its queue, until asked for the buffer's first
/// bytes, then exits.
pub fn serve_target(run: &Run, ip: std::net::IpAddr) {
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (mut inp, mut out) = (std::io::stdin().lock(), std::io::stdout().lock());
    api::init(run.flow);
    let q = api::create_at(run.depth, UMQ_TRANS_MODE_UB, ip);
    send_frame(&mut out, &api::bind_info(q));
    api::bind(q, recv_frame(&mut inp));
    let (buf, sge) = exposed(q, run);
    send_frame(&mut out, &pack(&sge));
    loop {
        if run.target_polls {
            poll_until_asked(q);
        }
        let frame = recv_frame(&mut inp);
        match frame.strip_prefix(PONG) {
            Some(ask) => {
                let rounds = u64::from_le_bytes(ask[..8].try_into().unwrap());
                reflect(q, run, buf, unpack(&ask[8..]), rounds);
                send_frame(&mut out, b"done");
            }
            None => break,
        }
    }
    let first = unsafe { ((*buf).buf_data as *const u64).read_unaligned() };
    send_frame(&mut out, &first.to_le_bytes());
    umq::ffi::api::umq_buf_free(buf);
    api::teardown(q);
    umq::ffi::api::umq_uninit();
}

/// Polls `q` both ways (nothing arrives: WRITE and READ take no receive buffer, and the
/// target sends nothing) until the initiator's next frame is on our stdin.
fn poll_until_asked(q: u64) {
    let mut out = [ptr::null_mut(); 16];
    let asked = || {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut fd, 1, 0) == 1 }
    };
    loop {
        for _ in 0..1024 {
            let got = api::poll(q, UMQ_IO_RX, &mut out) + api::poll(q, UMQ_IO_TX, &mut out);
            assert_eq!(got, 0, "the target received or sent something");
        }
        if asked() {
            return;
        }
    }
}

/// Asks the target to answer WRITEs with WRITEs: then the number of rounds and our buffer.
const PONG: &[u8] = b"pong";
/// Marks the value a put ping-pong WRITEs into the last eight bytes of the peer's buffer.
const PING: u64 = 0x9109_0000_0000_0000;

/// The last eight bytes of `b`, as another process or the provider last wrote them.
fn last_word(b: *mut umq_buf_t, size: u32) -> *mut u64 {
    unsafe { (*b).buf_data.add(size as usize - 8) as *mut u64 }
}

/// One side of a put ping-pong, as UCX's `ucp_put_lat` runs it: each round waits until the
/// peer's WRITE shows in the last word of our exposed buffer `mine`, polling our queue while it
/// waits (over tcp the provider places a peer's WRITE in our progress, as UCX's does), then
/// WRITEs the round's value into the peer's buffer; the first mover WRITEs first. A WR's
/// buffer is reused once its completion came back.
struct PutPingPong {
    q: u64,
    size: u32,
    mine: *mut umq_buf_t,
    free: Vec<*mut umq_buf_t>,
}

/// WRITEs a side of the ping-pong keeps for its puts.
const PUTS: usize = 8;

impl PutPingPong {
    fn new(q: u64, size: u32, mine: *mut umq_buf_t, theirs: umq_ref_sge_t) -> PutPingPong {
        let free = (0..PUTS).map(|_| wr(UMQ_OPC_WRITE, size, theirs)).collect();
        PutPingPong {
            q,
            size,
            mine,
            free,
        }
    }

    /// Takes back the buffers of WRITEs that completed.
    fn take_back(&mut self) {
        let mut got = [ptr::null_mut(); PUTS];
        let k = api::poll(self.q, UMQ_IO_TX, &mut got);
        for &b in &got[..k] {
            let status = unsafe { (*b).status() };
            assert_eq!(status, UMQ_BUF_SUCCESS, "a ping-pong WRITE failed");
            unsafe { (*b).qbuf_next = ptr::null_mut() };
            self.free.push(b);
        }
    }

    fn put(&mut self, value: u64) {
        while self.free.is_empty() {
            self.take_back();
        }
        let b = self.free.pop().unwrap();
        unsafe { last_word(b, self.size).write_unaligned(value) };
        api::post(self.q, &[b], UMQ_IO_TX);
    }

    fn wait_for(&mut self, value: u64) {
        let word = last_word(self.mine, self.size);
        while unsafe { word.read_volatile() } != value {
            self.take_back();
        }
    }

    fn finish(mut self) {
        while self.free.len() < PUTS {
            self.take_back();
        }
        self.free
            .into_iter()
            .for_each(|b| umq::ffi::api::umq_buf_free(b));
    }
}

/// The target's side of the put ping-pong: `rounds` rounds, answering each WRITE.
fn reflect(q: u64, run: &Run, mine: *mut umq_buf_t, theirs: umq_ref_sge_t, rounds: u64) {
    let mut pp = PutPingPong::new(q, run.size, mine, theirs);
    for i in 0..rounds {
        pp.wait_for(PING | i);
        pp.put(PING | i);
    }
    pp.finish();
}

/// Waits for one TX completion on `q`, which must be a success; returns its buffer.
fn completed(q: u64) -> *mut umq_buf_t {
    let mut c = [ptr::null_mut(); 1];
    while api::poll(q, UMQ_IO_TX, &mut c) == 0 {}
    let status = unsafe { (*c[0]).status() };
    assert_eq!(status, UMQ_BUF_SUCCESS, "one-sided WR failed");
    c[0]
}

fn wr(opcode: umq_opcode_t, size: u32, sge: umq_ref_sge_t) -> *mut umq_buf_t {
    let b = api::alloc(size.max(8), 1, opcode)[0];
    unsafe {
        (*b).data_size = size;
        (*b).total_data_size = size;
        (*b).pro_mut().remote_sge = sge;
    }
    b
}

/// Latencies (ns) of `opcode` WRs posted one at a time; each WRITE carries its number. (Out
/// of line, as `stream`: callgrind counts each alone with `--toggle-collect`.)
#[inline(never)]
fn one_at_a_time(q: u64, run: &Run, opcode: umq_opcode_t, sge: umq_ref_sge_t) -> Vec<f64> {
    let b = wr(opcode, run.size, sge);
    let samples = time_round_trips(
        warmup(run.iters),
        run.iters,
        |_| {},
        |i| {
            if opcode == UMQ_OPC_WRITE {
                unsafe { ((*b).buf_data as *mut u64).write_unaligned(i) };
            }
            api::post(q, &[b], UMQ_IO_TX);
            completed(q);
        },
    );
    umq::ffi::api::umq_buf_free(b);
    // `time_round_trips` halves a round trip; a one-sided WR's time is the whole of it.
    samples.into_iter().map(|s| s * 2.0).collect()
}

/// A stream of `opcode` WRs: up to `batch` a post, `depth` in flight (no more than 256 MiB of
/// them); WRs a second.
#[inline(never)]
fn stream(q: u64, run: &Run, opcode: umq_opcode_t, sge: umq_ref_sge_t) -> f64 {
    let window = run
        .depth
        .min(1024)
        .min((crate::shm::STREAM_BYTES / run.size).max(4));
    let mut free: Vec<_> = (0..window).map(|_| wr(opcode, run.size, sge)).collect();
    let (mut posted, mut done) = (0u64, 0u64);
    let start = std::time::Instant::now();
    while done < run.iters {
        let n = (free.len() as u64)
            .min(run.batch as u64)
            .min(run.iters - posted) as usize;
        if n > 0 {
            let batch: Vec<_> = free.drain(free.len() - n..).collect();
            let k = api::post_tx_some(q, &batch);
            free.extend(&batch[k..]);
            posted += k as u64;
        }
        let mut got = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
        let k = api::poll(q, UMQ_IO_TX, &mut got);
        for &b in &got[..k] {
            assert_eq!(
                unsafe { (*b).status() },
                UMQ_BUF_SUCCESS,
                "one-sided WR failed"
            );
            unsafe {
                (*b).qbuf_next = ptr::null_mut();
                (*b).total_data_size = run.size; // a READ's completion says what it landed
            }
            free.push(b);
        }
        done += k as u64;
    }
    let rate = run.iters as f64 / start.elapsed().as_secs_f64();
    free.into_iter()
        .for_each(|b| umq::ffi::api::umq_buf_free(b));
    rate
}

/// One WRITE of `value` into the target's first bytes, waited for.
fn write_value(q: u64, sge: umq_ref_sge_t, value: u64) {
    let b = wr(UMQ_OPC_WRITE, 8, sge);
    unsafe { ((*b).buf_data as *mut u64).write_unaligned(value) };
    api::post(q, &[b], UMQ_IO_TX);
    umq::ffi::api::umq_buf_free(completed(q));
}

/// The rows, in this order: WRITE and READ latency, WRITE and READ streams.
pub fn measure(run: &Run, provider: &'static str) -> Vec<Row> {
    let (mut target, q, sge) = Target::start(run, provider);
    let row = |op: &str| Row::new("rma", provider, run.size, run.flow.on).text("op", op);
    let write = crate::latency_row(row("write"), one_at_a_time(q, run, UMQ_OPC_WRITE, sge));
    let read = crate::latency_row(row("read"), one_at_a_time(q, run, UMQ_OPC_READ, sge));
    let ping_pong = target
        .put_ping_pong(q, run, sge)
        .map(|s| crate::latency_row(row("write_pingpong"), s));
    let streams = [UMQ_OPC_WRITE, UMQ_OPC_READ].map(|op| {
        crate::bandwidth_row(
            row(if op == UMQ_OPC_WRITE {
                "write_stream"
            } else {
                "read_stream"
            }),
            run.size,
            stream(q, run, op, sge),
        )
    });
    let last = 0x5eed_0000_0000 | run.iters;
    if run.size >= 8 {
        write_value(q, sge, last);
    }
    let how = api::side_stats(q).transport;
    let seen = target.finish();
    if run.size >= 8 {
        assert_eq!(
            seen, last,
            "the target's buffer does not hold the last WRITE"
        );
    }
    api::teardown(q);
    umq::ffi::api::umq_uninit();
    // Over shared memory, how the WRs ran without the target; over the network, how many went
    // by libfabric RMA and how often we called the target's progress thread to them.
    let paths = |r: Row| match provider {
        "fabric" => r
            .num("one_sided_rma_wr", how.one_sided_rma_wr as f64)
            .num("calls_sent", how.calls_sent as f64),
        _ => r
            .num("one_sided_mapped_wr", how.one_sided_mapped_wr as f64)
            .num("one_sided_kernel_wr", how.one_sided_kernel_wr as f64),
    };
    let [ws, rs] = streams;
    let mut rows = vec![paths(write), paths(read), paths(ws), paths(rs)];
    rows.extend(ping_pong.map(paths));
    rows
}
