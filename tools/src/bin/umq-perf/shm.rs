//! `--provider shm` (and `fabric`, the same over libfabric): the two queues live in two
//! processes. umq-perf starts a copy of itself as the peer (`--peer lat|bw`, hidden), exchanges
//! bind infos with it over the child's stdin and stdout, as a real application would over a
//! socket, and measures traffic that only crosses libumq's transport between processes. The
//! peer sends its flow-control statistics back at the end. Between two hosts (`--client HOST`)
//! the peer is a `umq-perf --server` there, reached over TCP, which serves each run the same
//! way: the client's first frame is the peer's arguments.

use crate::api::{self, Done, SideStats};
use crate::clock::time_round_trips;
use crate::report::{Progress, Row};
use crate::{Kind, Run};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::ptr;
use std::time::Instant;
use umq::abi::pro_types::*;
use umq::abi::types::*;

/// Length-prefixed frames over a byte stream.
pub(crate) fn send_frame(w: &mut impl Write, bytes: &[u8]) {
    w.write_all(&(bytes.len() as u32).to_le_bytes())
        .and_then(|_| w.write_all(bytes))
        .and_then(|_| w.flush())
        .expect("peer pipe closed");
}

pub(crate) fn recv_frame(r: &mut impl Read) -> Vec<u8> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).expect("peer pipe closed");
    let mut v = vec![0u8; u32::from_le_bytes(len) as usize];
    r.read_exact(&mut v).expect("peer pipe closed");
    v
}

fn stats_bytes(s: &SideStats) -> Vec<u8> {
    let p = s as *const SideStats as *const u8;
    unsafe { std::slice::from_raw_parts(p, size_of::<SideStats>()) }.to_vec()
}

fn stats_from(bytes: &[u8]) -> SideStats {
    assert_eq!(bytes.len(), size_of::<SideStats>(), "bad statistics frame");
    unsafe { ptr::read_unaligned(bytes.as_ptr() as *const SideStats) }
}

/// One side's queue at address `ip`, bound to the other process's, with `rx_bufs` receive
/// buffers posted.
fn connect(run: &Run, ip: IpAddr, out: &mut impl Write, inp: &mut impl Read) -> u64 {
    api::init_api(run.flow, run.base_api);
    let mode = if run.app_loop {
        UMQ_TRANS_MODE_IPC
    } else {
        UMQ_TRANS_MODE_UB
    };
    let q = api::create_at(run.depth, mode, ip);
    send_frame(out, &api::bind_info(q));
    api::bind(q, recv_frame(inp));
    if run.base_api {
        return q; // the library posts the receive buffers
    }
    let from = if run.shared_rx { q } else { 0 };
    let rx = api::alloc_from(from, run.size.max(8), run.rx_bufs, UMQ_OPC_SEND);
    api::post_rx_all(q, &rx);
    q
}

fn peer_args(kind: Kind, run: &Run) -> Vec<String> {
    let mut a = vec![
        "--peer".into(),
        kind.name().into(),
        "--size".into(),
        run.size.to_string(),
        "--iters".into(),
        run.iters.to_string(),
        "--depth".into(),
        run.depth.to_string(),
        "--batch".into(),
        run.batch.to_string(),
        "--rx-bufs".into(),
        run.rx_bufs.to_string(),
        "--flow-control".into(),
        if run.flow.on { "on" } else { "off" }.into(),
        "--shared-pool".into(),
        match (run.shared_pool, run.shared_rx) {
            (true, true) => "on",
            (true, false) => "send",
            (false, true) => "recv",
            _ => "off",
        }
        .into(),
    ];
    if run.app_loop {
        a.extend(["--loop".into(), "app".into()]);
    }
    if run.base_api {
        a.extend(["--api".into(), "base".into()]);
    }
    if run.flow.atomic_window {
        a.push("--atomic-window".into());
    }
    a
}

/// The measuring side's line to its peer: a child process's pipes, or a TCP connection to a
/// `umq-perf --server` on another host; and the address our queue offers.
pub(crate) struct Peer {
    pub(crate) child: Option<Child>,
    pub(crate) to: Box<dyn Write>,
    pub(crate) from: Box<dyn Read>,
    pub(crate) ip: IpAddr,
}

/// Starts umq-perf again with `args`, as the peer process, its stdin and stdout our pipes.
pub(crate) fn spawn_self<S: AsRef<std::ffi::OsStr>>(args: impl IntoIterator<Item = S>) -> Child {
    let exe = std::env::current_exe().expect("cannot find umq-perf's own path");
    Command::new(exe)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("cannot start the peer process")
}

/// The peer of a run, serving it with `args`: a child process, or one the `umq-perf --server`
/// of `run.server` starts.
pub(crate) fn start_peer(args: Vec<String>, run: &Run) -> Peer {
    match run.server {
        Some(at) => dial_peer(at, args),
        None => spawn_peer(args),
    }
}

fn spawn_peer(args: Vec<String>) -> Peer {
    let mut child = spawn_self(args);
    let (to, from) = (child.stdin.take().unwrap(), child.stdout.take().unwrap());
    Peer {
        child: Some(child),
        to: Box::new(to),
        from: Box::new(from),
        ip: Ipv4Addr::LOCALHOST.into(),
    }
}

/// Asks the `umq-perf --server` at `server` to serve this run; our queue offers the address
/// the connection to it leaves from.
fn dial_peer(server: SocketAddr, args: Vec<String>) -> Peer {
    let stream = TcpStream::connect_timeout(&server, std::time::Duration::from_secs(5))
        .unwrap_or_else(|e| {
            eprintln!("umq-perf: cannot reach umq-perf --server at {server}: {e}");
            std::process::exit(2);
        });
    let _ = stream.set_nodelay(true);
    let ip = stream
        .local_addr()
        .expect("local address")
        .ip()
        .to_canonical();
    let mut to = stream.try_clone().expect("cloning the connection");
    send_frame(&mut to, args.join("\0").as_bytes());
    Peer {
        child: None,
        to: Box::new(to),
        from: Box::new(stream),
        ip,
    }
}

/// The provider between the two processes of a run: the network when `UMQ_PROVIDER` says
/// so (as `main` sets it for `--provider fabric`), else shared memory.
pub(crate) fn provider() -> &'static str {
    match std::env::var("UMQ_PROVIDER").as_deref() {
        Ok("fabric") => "fabric",
        _ => "shm",
    }
}

/// The measuring side: starts the peer (or asks the server for one), runs `kind`, collects
/// both sides' statistics.
pub fn run(kind: Kind, run: &Run) -> Row {
    let mut peer = start_peer(peer_args(kind, run), run);
    let q = connect(run, peer.ip, &mut peer.to, &mut peer.from);
    recv_frame(&mut peer.from); // the peer has bound and posted its receive buffers
    let provider = provider();
    let label = format!("{} {provider} {} B", kind.name(), run.size);
    let mut progress = Progress::new(label, run.iters, run.quiet);
    let pool = |shared| if shared { "queue pool" } else { "process pool" };
    let row = Row::new(kind.name(), provider, run.size, run.flow.on)
        .text("api", run.api())
        .text("send_buffers", pool(run.shared_pool))
        .text("receive_buffers", pool(run.shared_rx));
    let row = match kind {
        Kind::Lat if run.base_api => {
            crate::latency_row(row, crate::base::ping(q, run, &mut progress))
        }
        Kind::Qps if run.base_api => {
            crate::bandwidth_row(row, run.size, crate::base::qps_out(q, run, &mut progress))
        }
        Kind::Lat => crate::latency_row(row, ping(q, run, &mut progress))
            .text("loop", if run.app_loop { "app" } else { "bench" }),
        Kind::Bw => crate::bandwidth_row(row, run.size, stream_out(q, run, &mut progress)),
        Kind::Qps => crate::bandwidth_row(row, run.size, qps_out(q, run, &mut progress)),
    };
    drop(progress);
    let theirs = stats_from(&recv_frame(&mut peer.from));
    let mine = settled_stats(q, &theirs);
    end_with_peer(q, peer);
    Row {
        sides: vec![("client", mine), ("server", theirs)],
        ..row
    }
}

/// Our statistics once the window the peer last announced has reached us, or after a second of
/// polling for it. The peer reposts its receive buffers up to its last poll, so its last window
/// update can still be on its way when its statistics arrive over the side channel; a report
/// read before it lands shows the two sides' counters apart though nothing was lost.
fn settled_stats(q: u64, theirs: &SideStats) -> SideStats {
    let announced = theirs.fc.total_local_rx_notified;
    let deadline = Instant::now() + std::time::Duration::from_secs(1);
    let mut scratch = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    loop {
        let mine = api::side_stats(q);
        if mine.fc.total_remote_rx_received >= announced || Instant::now() > deadline {
            return mine;
        }
        let n = api::poll(q, UMQ_IO_ALL, &mut scratch);
        repost_received(q, &scratch[..n]);
    }
}

/// Ends a run with a peer: our queue torn down, the peer told and (a child) waited for, the
/// library taken down.
pub(crate) fn end_with_peer(q: u64, mut peer: Peer) {
    api::teardown(q);
    send_frame(&mut peer.to, b"bye");
    if let Some(mut child) = peer.child {
        let status = child.wait().expect("waiting for the peer");
        assert!(status.success(), "the peer process failed: {status}");
    }
    umq::ffi::api::umq_uninit();
}

/// A client's first frame, the peer's arguments (at most 64 KiB); None when it is no such
/// frame.
fn read_args(r: &mut impl Read) -> Option<String> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let len = u32::from_le_bytes(len) as usize;
    let mut v = vec![0u8; (len <= 1 << 16).then_some(len)?];
    r.read_exact(&mut v).ok()?;
    String::from_utf8(v).ok()
}

/// The peer process (`umq-perf --peer ...`): serves one run over its stdin and stdout, its
/// queue at `ip`, then exits.
pub fn serve(kind: Kind, run: &Run, ip: IpAddr) {
    // Die with the measuring process (or the server) rather than spin forever.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let (mut inp, mut out) = (std::io::stdin().lock(), std::io::stdout().lock());
    let q = connect(run, ip, &mut out, &mut inp);
    send_frame(&mut out, b"ready");
    match kind {
        Kind::Lat if run.base_api => crate::base::pong(q, run),
        Kind::Qps if run.base_api => crate::base::count_in(q, run),
        Kind::Lat => pong(q, run),
        Kind::Bw | Kind::Qps => stream_in(q, run),
    }
    send_frame(&mut out, &stats_bytes(&api::side_stats(q)));
    recv_frame(&mut inp);
    api::teardown(q);
    umq::ffi::api::umq_uninit();
}

/// `umq-perf --server`: serves the runs of clients on other hosts, one at a time, until
/// killed. Each connection carries one run: the peer's arguments, then what a peer process
/// exchanges over its pipes; a peer process (as `--peer` runs it, with the connection as its
/// stdin and stdout) serves it, so a client that fails mid-run leaves the server as it was.
pub fn server(port: u16) {
    let listener = TcpListener::bind((std::net::Ipv6Addr::UNSPECIFIED, port))
        .or_else(|_| TcpListener::bind((Ipv4Addr::UNSPECIFIED, port)))
        .unwrap_or_else(|e| panic!("cannot listen on port {port}: {e}"));
    eprintln!("umq-perf: server listening on port {port}");
    let exe = std::env::current_exe().expect("cannot find umq-perf's own path");
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let _ = stream.set_nodelay(true);
        let (Ok(ours), Ok(client)) = (stream.local_addr(), stream.peer_addr()) else {
            continue;
        };
        let Some(args) = read_args(&mut stream) else {
            continue;
        };
        let Ok(out) = stream.try_clone() else {
            continue;
        };
        let child = Command::new(&exe)
            .args(args.split('\0'))
            .args(["--ip".to_string(), ours.ip().to_canonical().to_string()])
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(stream)))
            .stdout(Stdio::from(std::os::fd::OwnedFd::from(out)))
            .status();
        eprintln!(
            "umq-perf: served {} ({})",
            client.ip().to_canonical(),
            match child {
                Ok(s) => s.to_string(),
                Err(e) => e.to_string(),
            }
        );
    }
}

/// Posts the receive completions among `bufs` back as receive buffers.
pub(crate) fn repost_received(q: u64, bufs: &[*mut umq_buf_t]) {
    let mut rx = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    let mut n = 0;
    for &b in bufs.iter().filter(|&&b| api::done(b) != Done::Sent) {
        rx[n] = b;
        n += 1;
    }
    if n > 0 {
        api::post(q, &rx[..n], UMQ_IO_RX);
    }
}

fn first_byte(b: *mut umq_buf_t) -> *mut u8 {
    unsafe { (*b).buf_data as *mut u8 }
}

/// Warm-up round trips before the measured ones: caches, page faults, the first credit.
pub fn warmup(iters: u64) -> u64 {
    (iters / 10).clamp(100, 10_000)
}

/// The most a stream keeps in send buffers.
pub(crate) const STREAM_BYTES: u32 = 256 << 20;

/// Send buffers: from the queue's shared pool unless the run says otherwise.
fn send_buffers(q: u64, run: &Run, n: u32) -> Vec<*mut umq_buf_t> {
    let from = if run.shared_pool { q } else { 0 };
    // At least 8 bytes of room, for a stream's sequence numbers.
    let bufs = api::alloc_from(from, run.size.max(8), n, UMQ_OPC_SEND);
    for &b in &bufs {
        unsafe {
            (*b).data_size = run.size;
            (*b).total_data_size = run.size;
        }
    }
    bufs
}

/// One send buffer carrying `run.size` bytes.
fn message(q: u64, run: &Run) -> *mut umq_buf_t {
    send_buffers(q, run, 1)[0]
}

/// One poll of both directions: whether our send completed and the first byte of a message
/// that arrived; received buffers are reposted.
pub(crate) fn poll_ping_pong(q: u64) -> (bool, Option<u8>) {
    let mut scratch = [ptr::null_mut(); 4];
    let n = api::poll(q, UMQ_IO_ALL, &mut scratch);
    let seen = found(&scratch[..n]);
    repost_received(q, &scratch[..n]);
    seen
}

/// The turn of an application's own loop (`--loop app`): TX completions polled first, then one
/// receive, each on its own call, the receive buffer reposted; what `poll_ping_pong` returns.
fn poll_app(q: u64) -> (bool, Option<u8>) {
    let mut c = [ptr::null_mut(); 1];
    let sent = api::poll(q, UMQ_IO_TX, &mut c) == 1;
    if api::poll(q, UMQ_IO_RX, &mut c) == 0 {
        return (sent, None);
    }
    let echo = (api::done(c[0]) == Done::Received).then(|| unsafe { *first_byte(c[0]) });
    api::post(q, &c, UMQ_IO_RX);
    (sent, echo)
}

/// The turn of the run's loop: the benchmark's one poll of both directions, whose received
/// buffers wait in `held` until the side's next message is out, or the application's.
fn turn(q: u64, run: &Run, held: &mut Held) -> (bool, Option<u8>) {
    if run.app_loop {
        poll_app(q)
    } else {
        poll_holding(q, held)
    }
}

/// Receive buffers a ping-pong side has taken and posts back once its next message is out, so
/// that the repost is not between a message's arrival and the answer: `tag_lat`'s responder
/// likewise posts its next receive after its send. With one receive buffer a side
/// (`--rx-bufs 1`, as `fi_pingpong` runs) the buffer goes back at once, as `fi_pingpong`'s
/// does: the answer carries the grant for it, and no other buffer could take the next message.
/// The application's loop (`--loop app`) reposts at once too.
struct Held {
    bufs: [*mut umq_buf_t; UMQ_BATCH_SIZE as usize],
    n: usize,
    until_sent: bool,
}

impl Held {
    fn new(run: &Run) -> Held {
        Held {
            bufs: [ptr::null_mut(); UMQ_BATCH_SIZE as usize],
            n: 0,
            until_sent: run.rx_bufs > 1,
        }
    }

    /// Keeps the receive completions among `bufs`, or posts them back at once (with what is
    /// held) where they may not wait or would not fit.
    fn keep(&mut self, q: u64, bufs: &[*mut umq_buf_t]) {
        if !self.until_sent || self.n + bufs.len() > self.bufs.len() {
            self.post_back(q);
            repost_received(q, bufs);
            return;
        }
        for &b in bufs.iter().filter(|&&b| api::done(b) != Done::Sent) {
            self.bufs[self.n] = b;
            self.n += 1;
        }
    }

    fn post_back(&mut self, q: u64) {
        if self.n > 0 {
            api::post(q, &self.bufs[..self.n], UMQ_IO_RX);
            self.n = 0;
        }
    }
}

/// `poll_ping_pong`, the received buffers kept in `held` rather than posted back.
fn poll_holding(q: u64, held: &mut Held) -> (bool, Option<u8>) {
    let mut scratch = [ptr::null_mut(); 4];
    let n = api::poll(q, UMQ_IO_ALL, &mut scratch);
    let seen = found(&scratch[..n]);
    held.keep(q, &scratch[..n]);
    seen
}

/// Whether our send is among the completions `bufs`, and the first byte of a message among them.
fn found(bufs: &[*mut umq_buf_t]) -> (bool, Option<u8>) {
    let (mut sent, mut echo) = (false, None);
    for &b in bufs {
        match api::done(b) {
            Done::Sent => sent = true,
            Done::Received => echo = Some(unsafe { *first_byte(b) }),
            Done::WindowUpdate => {}
        }
    }
    (sent, echo)
}

/// Ping: send one message, wait for the echo, repost its buffer after the next message is out.
/// Returns half round trips (ns).
fn ping(q: u64, run: &Run, progress: &mut Progress) -> Vec<f64> {
    let tx = [message(q, run)];
    let mut held = Held::new(run);
    let tick = |done| progress.tick(done);
    let half_round_trips = time_round_trips(warmup(run.iters), run.iters, tick, |i| {
        unsafe { *first_byte(tx[0]) = i as u8 };
        api::post_all(q, &tx, std::hint::spin_loop);
        held.post_back(q);
        let (mut sent, mut echo) = (false, None);
        while !sent || echo.is_none() {
            let (s, e) = turn(q, run, &mut held);
            sent |= s;
            echo = echo.or(e);
        }
        if run.size > 0 {
            assert_eq!(echo, Some(i as u8), "echo {i} carried the wrong byte");
        }
    });
    held.post_back(q);
    half_round_trips
}

/// Pong: echo every message's first byte back in a message of the same size, then repost.
fn pong(q: u64, run: &Run) {
    let tx = [message(q, run)];
    let mut held = Held::new(run);
    let mut tx_free = true;
    let mut echoed = 0;
    while echoed < warmup(run.iters) + run.iters || !tx_free {
        let (sent, echo) = turn(q, run, &mut held);
        tx_free |= sent;
        if let Some(byte) = echo {
            while !tx_free {
                let mut c = [ptr::null_mut(); 1];
                tx_free = api::poll(q, UMQ_IO_TX, &mut c) == 1;
            }
            unsafe { *first_byte(tx[0]) = byte };
            api::post_all(q, &tx, std::hint::spin_loop);
            tx_free = false;
            echoed += 1;
        }
        held.post_back(q);
    }
}

/// Streams `iters` sequence-numbered messages, `batch` per post, then waits for the peer's
/// "all received". Returns messages per second. The clock starts after a warm-up stream, so
/// the peer process is known to be receiving: without it, a short run measured mostly how late
/// the peer reached its loop.
fn stream_out(q: u64, run: &Run, progress: &mut Progress) -> f64 {
    // A queue's shared pool holds at most 1 GiB: 1 MiB messages stream from 256 buffers.
    let window = run.depth.min((STREAM_BYTES / run.size.max(1)).max(4));
    let mut free = send_buffers(q, run, window);
    let mut scratch = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    await_signal(q);
    let (warm, total) = (warmup(run.iters), warmup(run.iters) + run.iters);
    let (mut sent, mut finished, mut start) = (0u64, false, None);
    while !finished {
        if start.is_none() && sent >= warm {
            start = Some(Instant::now());
        }
        let k = (run.batch as usize)
            .min(free.len())
            .min((total - sent) as usize);
        if k > 0 {
            let from = free.len() - k;
            for (j, &b) in free[from..].iter().enumerate() {
                if run.size >= 8 {
                    unsafe { (first_byte(b) as *mut u64).write_unaligned(sent + j as u64) };
                }
            }
            let n = api::post_tx_some(q, &free[from..]);
            free.drain(from..from + n);
            sent += n as u64;
            progress.tick(sent.saturating_sub(warm));
        }
        let n = api::poll(q, UMQ_IO_ALL, &mut scratch);
        for &b in &scratch[..n] {
            match api::done(b) {
                Done::Sent => free.push(b),
                Done::Received => finished = true, // the peer's "all received"
                Done::WindowUpdate => {}
            }
        }
        repost_received(q, &scratch[..n]);
    }
    let elapsed = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    run.iters as f64 / elapsed
}

/// The reference qps tool's client: the same list head of 64 one-buffer SENDs posted round after
/// round (a last, shorter round posts the list's tail), each round's completions polled before
/// the next; the peer counts with `stream_in`. Returns messages per second from the end of the
/// warm-up to the peer's "all received"; panics if umq_post rewrote the list.
fn qps_out(q: u64, run: &Run, progress: &mut Progress) -> f64 {
    let list = send_buffers(q, run, crate::QPS_LIST);
    api::chain(&list);
    let mut scratch = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    await_signal(q);
    let (warm, total) = (warmup(run.iters), warmup(run.iters) + run.iters);
    let (mut sent, mut start) = (0u64, None);
    while sent < total {
        if start.is_none() && sent >= warm {
            start = Some(Instant::now());
        }
        let k = (list.len() as u64).min(total - sent) as usize;
        let round = &list[list.len() - k..];
        for (j, &b) in round.iter().enumerate() {
            if run.size >= 8 {
                unsafe { (first_byte(b) as *mut u64).write_unaligned(sent + j as u64) };
            }
        }
        // Only receives while refused: the round's completions are counted below.
        api::post_list(q, round, || {
            let n = api::poll(q, UMQ_IO_RX, &mut scratch);
            repost_received(q, &scratch[..n]);
        });
        let mut completed = 0;
        while completed < k {
            let n = api::poll(q, UMQ_IO_ALL, &mut scratch);
            for &b in &scratch[..n] {
                match api::done(b) {
                    Done::Sent => completed += 1,
                    Done::Received => panic!("the peer finished before the last round"),
                    Done::WindowUpdate => {}
                }
            }
            repost_received(q, &scratch[..n]);
        }
        api::assert_linked(&list);
        sent += k as u64;
        progress.tick(sent.saturating_sub(warm));
    }
    await_signal(q); // all received
    let elapsed = start.map_or(0.0, |t| t.elapsed().as_secs_f64());
    umq::ffi::api::umq_buf_free(list[0]);
    run.iters as f64 / elapsed
}

/// Receives the warm-up and `iters` messages, checking their order, reposting every buffer;
/// then tells the sender it is done.
fn stream_in(q: u64, run: &Run) {
    let mut scratch = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    let mut got = 0u64;
    signal(q); // ready: our receive buffers are posted and we are polling
    while got < warmup(run.iters) + run.iters {
        let n = api::poll(q, UMQ_IO_RX, &mut scratch);
        if n == 0 {
            continue;
        }
        for &b in &scratch[..n] {
            if api::done(b) == Done::WindowUpdate {
                continue;
            }
            if run.size >= 8 {
                let seq = unsafe { (first_byte(b) as *const u64).read_unaligned() };
                assert_eq!(seq, got, "message out of order");
            }
            got += 1;
        }
        api::post(q, &scratch[..n], UMQ_IO_RX);
    }
    signal(q); // all received
}

/// Sends the peer an 8-byte message and waits until it is sent.
fn signal(q: u64) {
    let note = api::alloc(8, 1, UMQ_OPC_SEND);
    api::post_all(q, &note, std::hint::spin_loop);
    let mut c = [ptr::null_mut(); 1];
    api::poll_exact(q, UMQ_IO_TX, &mut c);
    umq::ffi::api::umq_buf_free(c[0]);
}

/// Waits for the peer's `signal`, reposting what arrives.
fn await_signal(q: u64) {
    let mut c = [ptr::null_mut(); 1];
    loop {
        api::poll_exact(q, UMQ_IO_RX, &mut c);
        let got = api::done(c[0]) == Done::Received;
        api::post(q, &c, UMQ_IO_RX);
        if got {
            return;
        }
    }
}
