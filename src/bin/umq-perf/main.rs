//! umq-perf: latency and bandwidth of libumq through its public C API, on the in-process
//! loopback transport (the default) or across two processes over shared memory, optionally
//! next to libfabric's `fi_pingpong` on its `shm` provider, run in the same invocation.

mod api;
mod clock;
mod floor;
mod libfabric;
mod loopback;
mod pacing;
mod pair;
mod pfc;
mod report;
mod scale;
mod shm;
mod ucx;

use api::Flow;
use report::Row;

const USAGE: &str =
    "usage: umq-perf [--provider loopback|shm|fabric] [--test lat|bw|qps|fc|scale|pacing|all]
                [--size BYTES[,BYTES...]|sweep] [--iters N] [--batch N] [--depth N]
                [--rx-bufs N]
                [--flow-control on|off] [--atomic-window] [--shared-pool on|send|recv|off]
                [--rounds N] [--compare libfabric,ucx] [--loop app|bench] [--json] [--quiet]
       umq-perf --provider shm|fabric --test pfc [--storm] [--json]
       umq-perf --server [--port N]
       umq-perf --client HOST [--port N] [--test ...] [--size ...] [...]

  --provider     loopback: two queues of this process (default); shm: a second process,
                 started by umq-perf itself, over the shared-memory transport; its
                 latency rows also carry the floor (the same bytes bounced between two
                 processes through bare shared memory) and how far above it we are, and
                 the floor of a one-copy transport through the kernel (each message moved
                 by one process_vm_writev into the peer's own buffer); fabric: the same two
                 processes over the network provider (libfabric, UMQ_FABRIC_PROVIDER,
                 default tcp), on this host
  --server       between two hosts, as perftest's tools: serve the peer's side of every
                 run a client asks for, one at a time, until killed
  --client       run the tests against the umq-perf --server on HOST over the network
                 provider; each side's queue offers the address their connection uses
  --port         the server's TCP port for the runs' setup (default 18515)
  --test         lat: ping-pong half round trip; bw: streaming messages/s;
                 qps: the reference qps tool's pattern, a client posting the same list
                 head of 64 one-buffer SENDs round after round (the list is checked
                 intact after every round) and a server counting and reposting;
                 fc: throughput with flow control on vs off; all: lat and bw (and fc on loopback);
                 scale: --pairs queue pairs bound at once (loopback, or shm with a second
                 process), each one's memory (Pss) and fds, setup and teardown per pair, a
                 message each way through every pair, a ping-pong beside all the others
                 pacing: the pacing machine alone on a virtual clock, --queues limited
                 queues each always with more to send, packet times of 1 to 16 ticks; per
                 packet on the timing wheel and on a binary heap, the largest rate error
                 pfc: link-level pause between two processes (shm or fabric): priorities 0
                 and 3 share the link, the peer takes priority 3 slowly and pauses it with
                 XOFF / XON; rows per priority (messages/s, pause frames, paused ms,
                 watchdog trips, messages lost)
  --storm        pfc: the peer keeps priority 3 paused instead; our watchdog trips
  --pairs        scale: how many pairs, a list (default 10000)
  --queues       pacing: how many limited queues, a list (default 1000,10000,100000,1000000)
  --size         message bytes, a list, or 'sweep' (64 B .. 64 KiB); default 64
  --rx-bufs      receive buffers each side keeps posted (at most --depth); by default
                 as the baseline: 16 for lat (fi_pingpong posts one; 16 stay as warm),
                 64 for bw over shm (the libfabric stream posts 64), --depth for bw on
                 loopback
  --flow-control default on
  --shared-pool  shm, which buffers come from the queue's shared pool (umq_buf_alloc
                 with its handle). on (default): send and receive buffers; a message of
                 1 KiB or more posted alone (16 KiB or more in a stream) is written by
                 the sender straight into its receive buffer. send: send buffers only;
                 messages of 16 KiB and more cross by reference. recv: receive buffers
                 only. off: neither; every message is copied through the ring
  --rounds       repeat each measurement and report the median (default 1)
  --compare      libfabric: also run libfabric per size (its shm provider against shm, the
                 same provider as ours against fabric): fi_pingpong for
                 latency (Debian libfabric-bin), a windowed stream for bw and qps (built
                 here from fi_stream.c; needs libfabric-dev and a C compiler);
                 ucx: also run ucx_perftest tag_lat for latency (Debian ucx-utils), over
                 UCX's posix shared memory (shm) or its tcp transport (fabric);
                 both: --compare libfabric,ucx
  --loop         shm latency: bench (default) polls both directions at once with 16 receive
                 buffers posted, as fi_pingpong's loop; app is the loop applications write:
                 IPC queues, 256 receive buffers posted, TX completions then RX polled on
                 their own each turn, the receive buffer reposted, then the reply sent
  --json         one JSON object per result line, nothing else on stdout
  --quiet        no progress bar (it is only drawn when stderr is a terminal anyway)";

/// Receive buffers a latency test keeps posted on each side by default. A ping-pong has one
/// message in flight and `fi_pingpong` posts a single receive, reposted after each message;
/// a deep ring of large buffers would only measure cold memory (1024 posted 64 KiB buffers are
/// 64 MiB, each written once per 1024 messages). Sixteen stay in cache like that one buffer
/// (1 MiB at 64 KiB) and let flow control batch its announcements; with one, every reply
/// carries one (`--rx-bufs 1` measures that).
const LAT_RX_BUFS: u32 = 16;
/// The same for streaming over shared memory: the libfabric stream keeps 64 receives posted.
const SHM_BW_RX_BUFS: u32 = 64;
/// Receive buffers the application loop (`--loop app`) keeps posted: a whole receive queue of
/// 256, as such applications create their queues.
const APP_RX_BUFS: u32 = 256;
/// The qps client's list: one post of UMQ_BATCH_SIZE one-buffer SENDs, as the reference tool.
pub const QPS_LIST: u32 = umq::abi::types::UMQ_BATCH_SIZE;

impl Run {
    /// This run with the receive buffers of `kind` on `provider` settled: `--rx-bufs`, or the
    /// posting of the baseline the test is compared with (loopback streaming, which has no
    /// receive side in its baseline, keeps the whole receive queue posted, `--depth`). With
    /// flow control the initial window is at most what is posted, or the queues would wait
    /// for buffers that never come, and the notify interval at most a quarter of it, so
    /// replies carry the announcements before the peer runs dry (which costs a standalone).
    pub fn for_test(&self, kind: Kind, shm: bool) -> Run {
        let rx_bufs = match (self.rx_bufs, kind, shm) {
            (0, Kind::Lat, _) if self.app_loop => APP_RX_BUFS.min(self.depth),
            (0, Kind::Lat, _) => LAT_RX_BUFS,
            (0, Kind::Bw | Kind::Qps, true) => SHM_BW_RX_BUFS.min(self.depth),
            (0, Kind::Bw | Kind::Qps, false) => self.depth,
            (n, _, _) => n,
        };
        Run {
            rx_bufs,
            flow: Flow {
                initial_window: rx_bufs.min(self.depth / 2) as u16,
                notify_interval: self.flow.notify_interval.min((rx_bufs / 4).max(1) as u16),
                ..self.flow
            },
            ..*self
        }
    }
}

/// What is measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Lat,
    Bw,
    Qps,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Lat => "lat",
            Kind::Bw => "bw",
            Kind::Qps => "qps",
        }
    }

    fn parse(s: &str) -> Result<Kind, String> {
        match s {
            "lat" => Ok(Kind::Lat),
            "bw" => Ok(Kind::Bw),
            "qps" => Ok(Kind::Qps),
            _ => Err(format!("unknown peer role {s}")),
        }
    }
}

/// The parameters of one measurement.
#[derive(Clone, Copy, Debug)]
pub struct Run {
    pub size: u32,
    pub iters: u64,
    pub batch: u32,
    pub depth: u32,
    /// Receive buffers each side keeps posted; 0 until `for_test` picks the test's default.
    pub rx_bufs: u32,
    pub flow: Flow,
    /// shm: send buffers come from the queue's shared pool (large messages cross by reference).
    pub shared_pool: bool,
    /// shm: receive buffers come from the queue's shared pool too (the sender writes messages
    /// straight into them).
    pub shared_rx: bool,
    /// shm latency: the loop an application writes (`--loop app`: IPC queues, 256 receive
    /// buffers posted, TX then RX polled on their own each turn) instead of the benchmark's.
    pub app_loop: bool,
    pub quiet: bool,
    /// `--client HOST`: the `umq-perf --server` that serves the peer's side, on another host.
    pub server: Option<std::net::SocketAddr>,
}

struct Args {
    provider: String,
    test: String,
    sizes: Vec<u32>,
    rounds: u32,
    compare: bool,
    compare_ucx: bool,
    json: bool,
    peer: Option<Kind>,
    /// The peer's queue address (`--ip`, given by the server to the peers it starts).
    peer_ip: std::net::IpAddr,
    serve: bool,
    client: Option<String>,
    port: u16,
    /// `--test scale`: how many queue pairs, per measurement.
    pairs: Vec<u32>,
    /// The peer process of a shm scale run (hidden).
    scale_peer: bool,
    pfc_peer: bool,
    storm: bool,
    /// `--test pacing`: how many limited queues, per measurement.
    queues: Vec<u32>,
    run: Run,
}

/// The server's port when `--port` does not say (perftest's).
const PORT: u16 = 18515;

const SWEEP: [u32; 6] = [64, 256, 1024, 4096, 16384, 65536];

fn parse_sizes(v: &str) -> Result<Vec<u32>, String> {
    if v == "sweep" {
        return Ok(SWEEP.to_vec());
    }
    v.split(',')
        .map(|s| s.trim().parse().map_err(|e| format!("--size {s}: {e}")))
        .collect()
}

fn number<T: std::str::FromStr>(flag: &str, v: String) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    v.parse().map_err(|e| format!("{flag} {v}: {e}"))
}

fn on_off(flag: &str, v: &str) -> Result<bool, String> {
    match v {
        "on" => Ok(true),
        "off" => Ok(false),
        _ => Err(format!("{flag} {v}: on or off")),
    }
}

fn parse_args(argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args {
        provider: "loopback".into(),
        test: "all".into(),
        sizes: vec![64],
        rounds: 1,
        compare: false,
        compare_ucx: false,
        json: false,
        peer: None,
        peer_ip: std::net::Ipv4Addr::LOCALHOST.into(),
        serve: false,
        client: None,
        port: PORT,
        pairs: vec![10_000],
        scale_peer: false,
        pfc_peer: false,
        storm: false,
        queues: vec![1_000, 10_000, 100_000, 1_000_000],
        run: Run {
            size: 64,
            iters: 200_000,
            batch: 32,
            depth: 1024,
            rx_bufs: 0,
            flow: Flow {
                on: true,
                atomic_window: false,
                notify_interval: 0,
                initial_window: 0,
            },
            shared_pool: true,
            shared_rx: true,
            app_loop: false,
            quiet: false,
            server: None,
        },
    };
    let mut it = argv;
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--provider" => a.provider = value()?,
            "--test" => a.test = value()?,
            "--size" => a.sizes = parse_sizes(&value()?)?,
            "--iters" => a.run.iters = number(&flag, value()?)?,
            "--batch" => a.run.batch = number(&flag, value()?)?,
            "--depth" => a.run.depth = number(&flag, value()?)?,
            "--rx-bufs" => a.run.rx_bufs = number(&flag, value()?)?,
            "--rounds" => a.rounds = number(&flag, value()?)?,
            "--flow-control" => a.run.flow.on = on_off(&flag, &value()?)?,
            "--atomic-window" => a.run.flow.atomic_window = true,
            "--shared-pool" => {
                (a.run.shared_pool, a.run.shared_rx) = match value()?.as_str() {
                    "on" => (true, true),
                    "send" => (true, false),
                    "recv" => (false, true),
                    "off" => (false, false),
                    v => return Err(format!("--shared-pool {v}: on, send, recv or off")),
                }
            }
            "--compare" => {
                for v in value()?.split(',') {
                    match v {
                        "libfabric" => a.compare = true,
                        "ucx" => a.compare_ucx = true,
                        v => return Err(format!("--compare {v}: libfabric or ucx")),
                    }
                }
            }
            "--json" => a.json = true,
            "--quiet" => a.run.quiet = true,
            "--loop" => {
                a.run.app_loop = match value()?.as_str() {
                    "app" => true,
                    "bench" => false,
                    v => return Err(format!("--loop {v}: app or bench")),
                }
            }
            "--peer" => a.peer = Some(Kind::parse(&value()?)?),
            "--ip" => a.peer_ip = number(&flag, value()?)?,
            "--server" => a.serve = true,
            "--scale-peer" => a.scale_peer = true,
            "--pfc-peer" => a.pfc_peer = true,
            "--storm" => a.storm = true,
            "--client" => a.client = Some(value()?),
            "--port" => a.port = number(&flag, value()?)?,
            "--pairs" => {
                a.pairs = value()?
                    .split(',')
                    .map(|p| number("--pairs", p.trim().to_string()))
                    .collect::<Result<_, _>>()?
            }
            "--queues" => {
                a.queues = value()?
                    .split(',')
                    .map(|p| number("--queues", p.trim().to_string()))
                    .collect::<Result<_, _>>()?
            }
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if a.client.is_some() {
        a.provider = "fabric".into();
    }
    check(&a)?;
    a.run.flow.notify_interval = a.run.batch as u16;
    a.run.size = a.sizes[0];
    a.run.quiet |= a.json;
    Ok(a)
}

fn check(a: &Args) -> Result<(), String> {
    let r = &a.run;
    if !["loopback", "shm", "fabric"].contains(&a.provider.as_str()) {
        return Err(format!(
            "--provider {}: loopback, shm or fabric",
            a.provider
        ));
    }
    if !["lat", "bw", "qps", "fc", "scale", "pacing", "pfc", "all"].contains(&a.test.as_str()) {
        return Err(format!(
            "--test {}: lat, bw, qps, fc, scale, pacing, pfc or all",
            a.test
        ));
    }
    if a.test == "pfc" && !["shm", "fabric"].contains(&a.provider.as_str()) {
        return Err("--test pfc: between two processes, --provider shm or fabric".into());
    }
    if a.queues.iter().any(|&q| q == 0 || q > 16_000_000) {
        return Err("--queues: 1 to 16000000".into());
    }
    if a.test == "scale" && !["loopback", "shm"].contains(&a.provider.as_str()) {
        return Err("--test scale: loopback or shm pairs".into());
    }
    if a.pairs.contains(&0) {
        return Err("--pairs: at least 1".into());
    }
    if r.batch == 0 || r.batch > umq::abi::types::UMQ_BATCH_SIZE || r.batch > r.depth {
        return Err("--batch must be 1..=64 and at most --depth".into());
    }
    if !(64..=32768).contains(&r.depth) || r.iters == 0 || a.rounds == 0 {
        return Err("--depth must be 64..=32768, --iters and --rounds at least 1".into());
    }
    if r.rx_bufs > r.depth {
        return Err("--rx-bufs must be at most --depth".into());
    }
    let streams = a.peer.map_or(a.test != "lat", |k| k != Kind::Lat);
    if r.rx_bufs != 0 && r.rx_bufs < r.batch && streams {
        return Err("--rx-bufs must be at least --batch: a stream posts a batch at a time".into());
    }
    if a.client.is_some() && (a.compare || a.compare_ucx) {
        return Err("--compare runs its baseline on this host: not with --client".into());
    }
    if r.app_loop
        && (a.provider != "shm" || !["lat", "all"].contains(&a.test.as_str()))
        && a.peer.is_none()
    {
        return Err("--loop app measures latency over shm: --provider shm --test lat".into());
    }
    let qps = a.test == "qps" || a.peer == Some(Kind::Qps);
    if qps && r.rx_bufs != 0 && r.rx_bufs < QPS_LIST {
        return Err(format!("--rx-bufs must be at least {QPS_LIST} for qps"));
    }
    if a.sizes.iter().any(|&s| s == 0 || s > 1 << 20) {
        return Err("--size: 1 byte to 1 MiB".into());
    }
    Ok(())
}

/// p50/p99/p999/mean of half round trips.
pub fn latency_row(row: Row, mut s: Vec<f64>) -> Row {
    s.sort_by(|x, y| x.total_cmp(y));
    let pct = |p: f64| s[((s.len() as f64 - 1.0) * p) as usize].round();
    let mean = s.iter().sum::<f64>() / s.len() as f64;
    row.num("p50_ns", pct(0.5))
        .num("p99_ns", pct(0.99))
        .num("p999_ns", pct(0.999))
        .num("mean_ns", mean.round())
}

pub fn bandwidth_row(row: Row, size: u32, msgs_per_s: f64) -> Row {
    row.num("msgs_per_s", msgs_per_s.round())
        .num("gbytes_per_s", msgs_per_s * size as f64 / 1e9)
}

fn measure(provider: &str, kind: Kind, run: &Run) -> Row {
    let run = run.for_test(kind, provider != "loopback");
    let row = match provider {
        "shm" | "fabric" => shm::run(kind, &run),
        _ => loopback::measure(kind, &run),
    };
    row.num("rx_bufs", run.rx_bufs as f64)
}

/// Flow control on vs off over shared memory: the streaming test alternating, medians.
fn shm_flow_control_cost(run: &Run, rounds: u32) -> Row {
    let with = |on| {
        Run {
            flow: Flow { on, ..run.flow },
            ..*run
        }
        .for_test(Kind::Bw, true)
    };
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for _ in 0..rounds.max(3) {
        off.push(shm::run(Kind::Bw, &with(false)));
        on.push(shm::run(Kind::Bw, &with(true)));
    }
    let (off, on) = (report::median(off), report::median(on));
    let rate = |r: &Row| r.get("msgs_per_s").unwrap_or(0.0);
    let standalone: u64 = on.sides.iter().map(|(_, s)| s.ext.standalone).sum();
    Row {
        sides: on.sides.clone(),
        ..Row::new("fc", on.provider, run.size, true)
            .num("off_msgs_per_s", rate(&off))
            .num("on_msgs_per_s", rate(&on))
            .num("ratio", rate(&on) / rate(&off))
            .num(
                "standalone_per_msg_one_way",
                standalone as f64 / run.iters as f64,
            )
    }
}

/// The median of a baseline's rounds (at least one).
fn middle(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Adds fi_pingpong's figures (median of `rounds`) and our ratio to a latency row.
fn compare_latency(row: Row, run: &Run, rounds: u32) -> Row {
    let mut half = Vec::new();
    let mut rate = Vec::new();
    for _ in 0..rounds {
        match libfabric::pingpong(run.size, run.iters) {
            Ok(p) => {
                half.push(p.half_rtt_ns);
                rate.push(p.xfers_per_s);
            }
            Err(e) => return row.text("fi_pingpong", e),
        }
    }
    let fi = middle(half);
    let ours = row.get("mean_ns").unwrap_or(f64::NAN);
    row.num("fi_pingpong_half_rtt_ns", fi)
        .num("fi_pingpong_xfers_per_s", middle(rate).round())
        .num("mean_vs_fi_pingpong", ours / fi)
}

/// Adds ucx_perftest tag_lat's figures (medians of `rounds`) and our ratio to a latency row.
fn compare_latency_ucx(row: Row, run: &Run, rounds: u32) -> Row {
    let mut p50 = Vec::new();
    let mut mean = Vec::new();
    for _ in 0..rounds {
        match ucx::tag_lat(run.size, run.iters) {
            Ok(t) => {
                p50.push(t.p50_ns);
                mean.push(t.mean_ns);
            }
            Err(e) => return row.text("ucx_perftest", e),
        }
    }
    let ucx = middle(mean);
    let ours = row.get("mean_ns").unwrap_or(f64::NAN);
    row.text("ucx_tls", ucx::transports())
        .num("ucx_tag_lat_p50_ns", middle(p50).round())
        .num("ucx_tag_lat_mean_ns", ucx.round())
        .num("mean_vs_ucx", ours / ucx)
}

/// The median of `rounds` runs of a baseline, or its first error.
fn median_of(
    rounds: u32,
    mut baseline: impl FnMut() -> Result<f64, String>,
) -> Result<f64, String> {
    let runs = (0..rounds.max(1))
        .map(|_| baseline())
        .collect::<Result<Vec<_>, _>>()?;
    Ok(middle(runs))
}

/// Adds the bare shared-memory ping-pong of the same size (median of `rounds`) to a latency
/// row, and how far above it we are: the cost of everything but moving the cache lines. Then
/// the same ping-pong with one kernel copy per message instead of two through the mapping.
fn with_floor(row: Row, run: &Run, rounds: u32) -> Row {
    let row = match median_of(rounds, || {
        floor::half_rtt_ns(run.size, run.iters, floor::Copy::Twice)
    }) {
        Ok(floor) => {
            let ours = row.get("mean_ns").unwrap_or(f64::NAN);
            row.num("floor_half_rtt_ns", floor.round())
                .num("over_floor_ns", (ours - floor).round())
        }
        Err(e) => row.text("floor", e),
    };
    match median_of(rounds, || {
        floor::half_rtt_ns(run.size, run.iters, floor::Copy::Kernel)
    }) {
        Ok(cma) => row.num("cma_floor_half_rtt_ns", cma.round()),
        Err(e) => row.text("cma_floor", e),
    }
}

/// Adds the libfabric streaming baseline (median of `rounds`) and our ratio to a bandwidth row.
fn compare_bandwidth(row: Row, run: &Run, rounds: u32) -> Row {
    match median_of(rounds, || libfabric::stream(run.size, run.iters)) {
        Ok(fi) => {
            let ours = row.get("msgs_per_s").unwrap_or(f64::NAN);
            row.num("fi_stream_msgs_per_s", fi.round())
                .num("msgs_vs_fi_stream", ours / fi)
        }
        Err(e) => row.text("fi_stream", e),
    }
}

fn emit(row: &Row, json: bool) {
    if json {
        println!("{}", row.json());
    } else {
        println!("{}", row.line());
    }
}

/// A scale run's parameters: one receive buffer per queue, so an initial window of one.
fn scale_run(args: &Args) -> Run {
    Run {
        flow: Flow {
            initial_window: 1,
            notify_interval: 1,
            ..args.run.flow
        },
        ..args.run
    }
}

/// `--test scale`: one measurement per `--pairs` value, each with one receive buffer per queue
/// (so an initial window of one).
fn scale_runs(args: &Args) {
    let run = scale_run(args);
    let mut rows = Vec::new();
    for &pairs in &args.pairs {
        let row = scale::measure(&run, pairs, &args.provider);
        emit(&row, args.json);
        rows.push(row);
    }
    if !args.json {
        print!("{}", report::table(&rows));
    }
}

/// `--test pacing`: one row per `--queues` value.
fn pacing_runs(args: &Args) {
    let mut rows = Vec::new();
    for &queues in &args.queues {
        let row = pacing::measure(queues);
        emit(&row, args.json);
        rows.push(row);
    }
    if !args.json {
        print!("{}", report::table(&rows));
    }
}

/// `HOST` (a name or an address) and `port` as a socket address; exits when it resolves to none.
fn resolve(host: &str, port: u16) -> std::net::SocketAddr {
    use std::net::ToSocketAddrs;
    match (host, port).to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(a)) => a,
        _ => {
            eprintln!("--client {host}: no such host");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}\n{USAGE}");
            std::process::exit(if e.is_empty() { 0 } else { 2 });
        }
    };
    if args.scale_peer {
        return scale::serve_peer(&scale_run(&args), args.pairs[0]);
    }
    if args.test == "pacing" {
        return pacing_runs(&args);
    }
    if args.pfc_peer {
        return pfc::serve_peer(&args.run, args.storm);
    }
    if let Some(kind) = args.peer {
        return shm::serve(kind, &args.run.for_test(kind, true), args.peer_ip);
    }
    if args.serve || args.client.is_some() {
        // Two hosts: the network, also when both are namespaces of one kernel.
        unsafe { std::env::set_var("UMQ_PROVIDER", "fabric") };
    }
    if args.serve {
        return shm::server(args.port);
    }
    let mut args = args;
    if let Some(host) = &args.client {
        args.run.server = Some(resolve(host, args.port));
    }
    if args.provider == "fabric" {
        // Before umq_init and any thread: the library and the peer process read it there.
        unsafe { std::env::set_var("UMQ_PROVIDER", "fabric") };
        libfabric::use_provider(
            std::env::var("UMQ_FABRIC_PROVIDER").unwrap_or_else(|_| "tcp".into()),
        );
        if std::env::var("UMQ_FABRIC_PROVIDER").is_ok_and(|p| p != "tcp") && args.compare_ucx {
            eprintln!("--compare ucx: against UCX's tcp transport, so with the tcp provider only");
            std::process::exit(2);
        }
        ucx::use_tcp();
    }
    if args.compare && !libfabric::available() {
        eprintln!("--compare libfabric: fi_pingpong not found (apt-get install libfabric-bin)");
        std::process::exit(2);
    }
    if args.compare_ucx && !ucx::available() {
        eprintln!("--compare ucx: ucx_perftest not found (apt-get install ucx-utils)");
        std::process::exit(2);
    }
    let run = args.run;
    if !args.json {
        println!(
            "umq-perf: provider {} ({}), {} iterations, batch {}, depth {}, flow control {}{}",
            args.provider,
            match (&run.server, args.provider.as_str()) {
                (Some(at), _) => format!("two hosts, server {at}"),
                (None, "loopback") => "two queues, one process".into(),
                _ => "two processes".into(),
            },
            run.iters,
            run.batch,
            run.depth,
            if run.flow.on { "on" } else { "off" },
            if run.flow.atomic_window {
                " (atomic window)"
            } else {
                ""
            }
        );
    }
    if args.test == "scale" {
        return scale_runs(&args);
    }
    if args.test == "pfc" {
        let rows = pfc::measure(&run, args.storm);
        rows.iter().for_each(|r| emit(r, args.json));
        if !args.json {
            print!("{}", report::table(&rows));
        }
        return;
    }
    let kinds: &[Kind] = match args.test.as_str() {
        "lat" => &[Kind::Lat],
        "bw" => &[Kind::Bw],
        "qps" => &[Kind::Qps],
        "fc" => &[],
        _ => &[Kind::Lat, Kind::Bw],
    };
    let mut rows = Vec::new();
    for &size in &args.sizes {
        let run = Run { size, ..run };
        for &kind in kinds {
            let rounds = (0..args.rounds)
                .map(|_| measure(&args.provider, kind, &run))
                .collect();
            let mut row = report::median(rounds);
            if args.provider == "shm" && kind == Kind::Lat {
                row = with_floor(row, &run, args.rounds);
            }
            if args.compare {
                row = match kind {
                    Kind::Lat => compare_latency(row, &run, args.rounds),
                    Kind::Bw | Kind::Qps => compare_bandwidth(row, &run, args.rounds),
                };
            }
            if args.compare_ucx && kind == Kind::Lat {
                row = compare_latency_ucx(row, &run, args.rounds);
            }
            emit(&row, args.json);
            rows.push(row);
        }
        let fc = args.test == "fc" || (args.test == "all" && args.provider == "loopback");
        if fc {
            let row = match args.provider.as_str() {
                "shm" | "fabric" => shm_flow_control_cost(&run, args.rounds),
                _ => loopback::flow_control_cost(&run.for_test(Kind::Bw, false)),
            };
            emit(&row, args.json);
            rows.push(row);
        }
    }
    if !args.json {
        print!("{}", report::table(&rows));
    }
    libfabric::clean_up();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        parse_args(s.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults_are_the_embedded_main_job() {
        let a = parse("").unwrap();
        assert_eq!((a.provider.as_str(), a.test.as_str()), ("loopback", "all"));
        assert_eq!(a.sizes, vec![64]);
        assert!(a.run.flow.on && !a.run.flow.atomic_window);
        assert_eq!(a.run.flow.notify_interval, 32);
    }

    #[test]
    fn flags_are_read() {
        let a = parse("--provider shm --test lat --size 64,4096 --iters 10 --depth 128 --batch 8 --flow-control off --atomic-window --rounds 3 --json").unwrap();
        assert_eq!(a.provider, "shm");
        assert_eq!(a.sizes, vec![64, 4096]);
        assert_eq!(
            (a.run.iters, a.run.depth, a.run.batch, a.rounds),
            (10, 128, 8, 3)
        );
        assert!(!a.run.flow.on && a.run.flow.atomic_window && a.json && a.run.quiet);
        assert_eq!(parse("--size sweep").unwrap().sizes, SWEEP.to_vec());
        let both = parse("--compare libfabric,ucx").unwrap();
        assert!(both.compare && both.compare_ucx);
        let ucx = parse("--compare ucx").unwrap();
        assert!(!ucx.compare && ucx.compare_ucx);
        let app = parse("--provider shm --test lat --loop app").unwrap();
        assert!(app.run.app_loop);
        assert_eq!(app.run.for_test(Kind::Lat, true).rx_bufs, APP_RX_BUFS);
        assert!(
            parse("--loop app").is_err(),
            "the app loop is an shm latency loop"
        );
        assert!(parse("--provider shm --test bw --loop app").is_err());
        let client = parse("--client 10.0.0.1 --port 9000 --test lat").unwrap();
        assert_eq!(client.provider, "fabric");
        assert_eq!(
            (client.client.as_deref(), client.port),
            (Some("10.0.0.1"), 9000)
        );
        let server = parse("--server").unwrap();
        assert!(server.serve && server.port == PORT);
        assert!(parse("--client h --compare libfabric").is_err());
        assert!(parse("--port x").is_err());
        assert!(parse("--loop sometimes").is_err());
    }

    #[test]
    fn bad_flags_are_refused() {
        for bad in [
            "--provider tcp",
            "--test x",
            "--batch 0",
            "--batch 65",
            "--depth 8",
            "--flow-control maybe",
            "--size 12,x",
            "--size 0",
            "--iters",
            "--compare mpi",
            "--compare libfabric,",
            "--bogus",
            "--rx-bufs 2000",
            "--test bw --rx-bufs 8",
        ] {
            assert!(parse(bad).is_err(), "{bad} was accepted");
        }
    }

    #[test]
    fn receive_buffers_follow_the_baseline_unless_given() {
        let a = parse("").unwrap();
        let posted = |run: &Run, kind, shm| {
            let r = run.for_test(kind, shm);
            (r.rx_bufs, r.flow.initial_window, r.flow.notify_interval)
        };
        assert_eq!(posted(&a.run, Kind::Lat, true), (LAT_RX_BUFS, 16, 4));
        assert_eq!(posted(&a.run, Kind::Bw, true), (SHM_BW_RX_BUFS, 64, 16));
        assert_eq!(posted(&a.run, Kind::Bw, false), (1024, 512, 32));
        let one = parse("--test lat --rx-bufs 1").unwrap();
        assert_eq!(posted(&one.run, Kind::Lat, false), (1, 1, 1));
        let deep = parse("--rx-bufs 256").unwrap();
        assert_eq!(posted(&deep.run, Kind::Bw, true), (256, 256, 32));
        assert_eq!(parse("--peer lat --rx-bufs 1").unwrap().run.rx_bufs, 1);
    }
}
