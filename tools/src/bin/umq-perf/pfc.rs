//! `--test pfc`: link-level pause between two processes. Two queue pairs share the link, one of
//! priority 0 and one of priority 3; this process sends on both as fast as they take messages
//! for `SECONDS`. The peer takes priority 0's messages as they come and priority 3's slowly,
//! one every `SLOW_EVERY`, with XOFF / XON emission on: its backlog pauses priority 3 and
//! never priority 0. With `--storm` the peer takes both at full speed but keeps priority 3
//! paused with a frame every `STORM_EVERY`, and our watchdog stops honouring it. Rows per
//! priority: messages a second, pause frames sent (by the peer) and received (by us), the time
//! priority was paused, watchdog trips, and messages lost (sent and never received: must be
//! 0). Every message carries its sequence number, checked in order at the peer.

use crate::api;
use crate::report::Row;
use crate::shm::{recv_frame, send_frame};
use std::io::Read;
use std::time::{Duration, Instant};
use umq::abi::ext::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;

const SECONDS: f64 = 2.0;
const SLOW_EVERY: Duration = Duration::from_millis(2);
const STORM_EVERY: Duration = Duration::from_millis(10);
const PRIORITIES: [u8; 2] = [0, 3];
/// Our link's speed: a pause quantum is 512 ns, and 0xffff quanta 33.5 ms.
const LINK_BPS: u64 = 1_000_000_000;

fn ctl(q: u64, opcode: u32, input: umq_user_ctl_in_t, out: umq_user_ctl_out_t) {
    let r = api::user_ctl(q, opcode, input, out);
    assert_eq!(r, 0, "umq_user_ctl {opcode:#x} failed: {r}");
}

fn set_priority(q: u64, p: u8) {
    let input = umq_user_ctl_in_t {
        addr: p as u64,
        ..Default::default()
    };
    ctl(q, UMQ_EXT_OPCODE_PFC_PRIORITY, input, Default::default());
}

/// Changes the link's settings (through queue `q`) with `change`.
fn configure(q: u64, change: impl FnOnce(&mut umq_ext_pfc_config_t)) {
    let mut c = umq_ext_pfc_config_t::default();
    ctl(
        q,
        UMQ_EXT_OPCODE_PFC_CONFIG,
        Default::default(),
        api::out_of(&mut c),
    );
    change(&mut c);
    let input = umq_user_ctl_in_t {
        addr: &c as *const _ as u64,
        len: size_of_val(&c) as u32,
        ..Default::default()
    };
    ctl(q, UMQ_EXT_OPCODE_PFC_CONFIG, input, Default::default());
}

fn stats(q: u64) -> umq_ext_pfc_stats_t {
    let mut s = umq_ext_pfc_stats_t::default();
    ctl(
        q,
        UMQ_EXT_OPCODE_PFC_STATS,
        Default::default(),
        api::out_of(&mut s),
    );
    s
}

/// A PFC frame pausing priority 3 for 0xffff quanta.
fn pause_3() -> umq_ext_pfc_frame_t {
    use umq::flow::pfc::frame::{self, Pause, PauseFrame};
    let mut quanta = [0u16; 8];
    quanta[3] = 0xffff;
    let bytes = frame::encode(&PauseFrame {
        dst: frame::PAUSE_MULTICAST,
        src: [2, 0, 0, 0, 0, 0x33],
        pause: Pause::Priorities {
            enabled: 1 << 3,
            quanta,
        },
    });
    let mut f = umq_ext_pfc_frame_t {
        len: bytes.len() as u32,
        ..Default::default()
    };
    f.bytes[..bytes.len()].copy_from_slice(&bytes);
    f
}

fn send_raw(q: u64, f: &umq_ext_pfc_frame_t) {
    let input = umq_user_ctl_in_t {
        addr: f as *const _ as u64,
        len: size_of_val(f) as u32,
        ..Default::default()
    };
    ctl(q, UMQ_EXT_OPCODE_PFC_SEND_FRAME, input, Default::default());
}

/// Both sides' parameters of a run over two queue pairs (here and `--test beside`): at most
/// 256 WRs a queue, an initial window of 64, credit returned every 16.
pub(crate) fn two_pairs_run(run: &crate::Run) -> crate::Run {
    crate::Run {
        depth: run.depth.min(256),
        flow: api::Flow {
            initial_window: 64,
            notify_interval: 16,
            ..run.flow
        },
        ..*run
    }
}

fn seq_of(b: *mut umq_buf_t) -> u64 {
    unsafe { ((*b).buf_data as *const u64).read_unaligned() }
}

/// One queue's sending side: buffers free to post, messages sent and completed.
pub(crate) struct Sender {
    q: u64,
    free: Vec<*mut umq_buf_t>,
    pub(crate) next_seq: u64,
    pub(crate) completed: u64,
    /// The most messages a step posts.
    pub(crate) batch: usize,
}

impl Sender {
    pub(crate) fn new(q: u64, run: &crate::Run) -> Sender {
        let n = run.depth;
        Sender {
            q,
            free: api::alloc(run.size.max(8), n, UMQ_OPC_SEND),
            next_seq: 0,
            completed: 0,
            batch: 32,
        }
    }

    /// A sender of `opcode` WRs (WRITE or READ) to the peer's buffer `sge`. One goes alone
    /// first: its completion teaches the network provider the buffer's chunk, so the stream's
    /// WRs can go by RMA (a WR goes so only while nothing of the queue's but RMA is in flight).
    pub(crate) fn one_sided(
        q: u64,
        run: &crate::Run,
        opcode: umq_opcode_t,
        sge: umq_ref_sge_t,
    ) -> Sender {
        let mut s = Sender::new(q, run);
        for &b in &s.free {
            unsafe {
                (*b).pro_mut().opcode = opcode;
                (*b).pro_mut().remote_sge = sge;
            }
        }
        let batch = std::mem::replace(&mut s.batch, 1);
        s.step(true);
        while s.completed < s.next_seq {
            s.step(false);
        }
        s.batch = batch;
        s
    }

    /// Posts what the queue takes now (each message numbered), and takes completions.
    pub(crate) fn step(&mut self, posting: bool) {
        if posting && !self.free.is_empty() {
            let batch = &self.free[..self.free.len().min(self.batch)];
            for (i, &b) in batch.iter().enumerate() {
                unsafe { ((*b).buf_data as *mut u64).write_unaligned(self.next_seq + i as u64) };
            }
            let n = api::post_tx_some(self.q, batch);
            self.next_seq += n as u64;
            self.free.drain(..n);
        }
        let mut got = [std::ptr::null_mut(); 64];
        let n = api::poll(self.q, UMQ_IO_TX, &mut got);
        for &b in &got[..n] {
            assert_eq!(api::done(b), api::Done::Sent);
            unsafe { (*b).qbuf_next = std::ptr::null_mut() };
            self.free.push(b);
        }
        self.completed += n as u64;
    }
}

pub fn measure(run: &crate::Run, storm: bool) -> Vec<Row> {
    let run = &two_pairs_run(run);
    let mut args = vec![
        "--pfc-peer".to_string(),
        "--depth".into(),
        run.depth.to_string(),
    ];
    args.extend([
        "--size".into(),
        run.size.to_string(),
        "--flow-control".into(),
    ]);
    args.push(if run.flow.on { "on" } else { "off" }.into());
    args.extend(storm.then(|| "--storm".to_string()));
    let mut child = crate::shm::spawn_self(args);
    let (mut to, mut from) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    api::init(run.flow);
    let qs = bind_two(run, &mut to, &mut from, true);
    set_priority(qs[1], 3);
    configure(qs[0], |c| {
        c.speed_bps = LINK_BPS;
        if !storm {
            // A slow receiver is not a storm: the watchdog stays out of the plain run.
            c.watchdog_detect_ns = 60_000_000_000;
        }
    });
    recv_frame(&mut from); // the peer is ready
    let mut senders: Vec<Sender> = qs.iter().map(|&q| Sender::new(q, run)).collect();
    let start = Instant::now();
    while start.elapsed().as_secs_f64() < SECONDS {
        senders.iter_mut().for_each(|s| s.step(true));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let in_phase: Vec<u64> = senders.iter().map(|s| s.completed).collect();
    send_frame(&mut to, b"end"); // the peer may take everything now
    while senders.iter().any(|s| s.completed < s.next_seq) {
        senders.iter_mut().for_each(|s| s.step(false));
    }
    let ours = stats(qs[0]);
    let sent: Vec<u64> = senders.iter().map(|s| s.next_seq).collect();
    send_frame(&mut to, &pack(&sent));
    let theirs = unpack(&recv_frame(&mut from));
    qs.iter().for_each(|&q| api::teardown(q)); // before the peer exits: an orderly end
    drop(to); // the peer's end of the run
    let status = child.wait().expect("waiting for the peer");
    assert!(status.success(), "the peer process failed: {status}");
    umq_uninit();
    let provider = crate::shm::provider();
    PRIORITIES
        .iter()
        .enumerate()
        .map(|(i, &p)| {
            let o = ours.priority[p as usize];
            Row::new("pfc", provider, run.size, run.flow.on)
                .num("priority", p as f64)
                .num("msgs_per_s", (in_phase[i] as f64 / elapsed).round())
                .num("pause_frames_sent", theirs[2 + i] as f64)
                .num("pause_frames_received", o.indications as f64)
                .num("paused_ms", (o.paused_ns as f64 / 1e5).round() / 10.0)
                .num("watchdog_trips", o.watchdog_trips as f64)
                .num("lost", (sent[i] - theirs[i]) as f64)
        })
        .collect()
}

pub(crate) fn pack(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(crate) fn unpack(b: &[u8]) -> Vec<u64> {
    b.chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// One queue's receiving side: messages taken, in order.
pub(crate) struct Receiver {
    q: u64,
    size: u32,
    pub(crate) got: u64,
}

impl Receiver {
    pub(crate) fn new(q: u64, size: u32) -> Receiver {
        Receiver { q, size, got: 0 }
    }

    /// Takes up to `max` messages, checking their order, and posts their buffers again.
    pub(crate) fn take(&mut self, max: usize) {
        let mut got = [std::ptr::null_mut(); 64];
        let n = api::poll(self.q, UMQ_IO_RX, &mut got[..max.min(64)]);
        for &b in &got[..n] {
            if api::done(b) == api::Done::Received {
                assert_eq!(seq_of(b), self.got, "a message out of order or twice");
                self.got += 1;
            }
            unsafe {
                (*b).qbuf_next = std::ptr::null_mut();
                (*b).data_size = self.size;
            }
            api::post_rx_all(self.q, &[b]);
        }
    }
}

/// Whether the measuring process wrote to us (its totals), without blocking.
pub(crate) fn stdin_ready() -> bool {
    let mut p = libc::pollfd {
        fd: 0,
        events: libc::POLLIN,
        revents: 0,
    };
    unsafe { libc::poll(&mut p, 1, 0) == 1 }
}

/// The peer process (`--pfc-peer`): see the module's comment.
pub fn serve_peer(run: &crate::Run, storm: bool) {
    let run = &two_pairs_run(run);
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    // Unbuffered: `stdin_ready` looks at the pipe, so no frame may wait in a buffer of ours.
    let mut from = unsafe { <std::fs::File as std::os::fd::FromRawFd>::from_raw_fd(0) };
    let mut to = std::io::stdout().lock();
    api::init(run.flow);
    let qs = bind_two(run, &mut to, &mut from, false);
    set_priority(qs[1], 3);
    let (size, depth) = (run.size.max(8), run.depth);
    if !storm {
        configure(qs[0], |c| {
            c.flags |= UMQ_EXT_PFC_EMIT;
            c.speed_bps = LINK_BPS;
            // Half the receive buffers: the fast priority never gets there between polls.
            (c.xoff_bytes, c.xon_bytes) = (128 * size as u64, 32 * size as u64);
        });
    }
    let mut rx: Vec<Receiver> = qs
        .iter()
        .map(|&q| {
            api::post_rx_all(q, &api::alloc(size, depth, UMQ_OPC_SEND));
            Receiver::new(q, size)
        })
        .collect();
    send_frame(&mut to, b"ready");
    let (start, frame) = (Instant::now(), pause_3());
    let (mut next_slow, mut next_pause, mut storm_frames) = (start, start, 0u64);
    // Until the measuring process says its phase is over (it started after our "ready").
    while !stdin_ready() {
        rx[0].take(64);
        let now = Instant::now();
        if storm {
            rx[1].take(64);
            if now >= next_pause {
                send_raw(qs[0], &frame);
                storm_frames += 1;
                next_pause = now + STORM_EVERY;
            }
        } else if now >= next_slow {
            rx[1].take(1);
            next_slow = now + SLOW_EVERY;
        }
    }
    recv_frame(&mut from);
    while !stdin_ready() {
        rx.iter_mut().for_each(|r| r.take(64));
    }
    let sent = unpack(&recv_frame(&mut from));
    let deadline = Instant::now() + Duration::from_secs(10);
    while rx.iter().zip(&sent).any(|(r, &s)| r.got < s) && Instant::now() < deadline {
        rx.iter_mut().for_each(|r| r.take(64));
    }
    let s = stats(qs[0]);
    let frames_sent = |p: usize| match (storm, p) {
        (true, 3) => storm_frames,
        _ => s.priority[p].requests,
    };
    let report = [rx[0].got, rx[1].got, frames_sent(0), frames_sent(3)];
    send_frame(&mut to, &pack(&report));
    let mut rest = Vec::new();
    let _ = from.read_to_end(&mut rest);
    qs.iter().for_each(|&q| api::teardown(q));
    umq_uninit();
}

/// The run's two queues (priorities 0 and 3) bound to the peer's, on this host.
fn bind_two(
    run: &crate::Run,
    to: &mut impl std::io::Write,
    from: &mut impl std::io::Read,
    measuring: bool,
) -> Vec<u64> {
    let here = std::net::Ipv4Addr::LOCALHOST.into();
    crate::scale::bind_all(run, 2, here, to, from, measuring)
}
