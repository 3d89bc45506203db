//! umq-perf: latency and bandwidth of libumq through its public C API, on the in-process
//! loopback transport (the default) or across two processes over shared memory, optionally
//! next to libfabric's `fi_pingpong` on its `shm` provider, run in the same invocation.

mod api;
mod base;
mod baselines;
mod beside;
mod cli;
mod clock;
mod floor;
mod libfabric;
mod loopback;
mod pacing;
mod pair;
mod pfc;
mod report;
mod rma;
mod scale;
mod shm;
mod threads;
mod ucx;
mod wire;

use api::Flow;
use cli::Args;
use report::Row;

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
#[derive(Clone, Copy, Debug, PartialEq, clap::ValueEnum)]
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
    /// `--api base`: umq_enqueue / umq_dequeue instead of umq_post / umq_poll (lat and qps).
    pub base_api: bool,
    /// `--test rma --target poll`: the target polls its queue in a loop instead of sleeping.
    pub target_polls: bool,
    /// `--test beside --stream`: what the stream carries (SEND, WRITE or READ).
    pub stream_op: umq::abi::pro_types::umq_opcode_t,
    /// `--test beside --ping-every`: the ping's period (None: back to back).
    pub ping_every: Option<std::time::Duration>,
    pub quiet: bool,
    /// `--client HOST`: the `umq-perf --server` that serves the peer's side, on another host.
    pub server: Option<std::net::SocketAddr>,
}

impl Run {
    /// The API the run drives, as its rows name it.
    pub fn api(&self) -> &'static str {
        if self.base_api { "base" } else { "pro" }
    }
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

/// The provider a two-sided run is on, as its rows name it (`--client` is the network).
fn provider_name(args: &Args) -> &'static str {
    match args.provider.as_str() {
        _ if args.run.server.is_some() => "fabric",
        "shm" => "shm",
        "fabric" => "fabric",
        _ => "loopback",
    }
}

/// `--test rma`: per size, the medians of `--rounds` runs of each row, and UCX's figures for
/// the same operations beside them when asked.
fn rma_runs(args: &Args) {
    let provider = provider_name(args);
    let mut rows = Vec::new();
    for &size in &args.sizes {
        let run = Run { size, ..args.run };
        let runs: Vec<Vec<Row>> = (0..args.rounds)
            .map(|_| rma::measure(&run, provider))
            .collect();
        // UCX's test for each of rma::measure's rows (none for READ latency: its get test is
        // a stream); the put ping-pong, when the target polls, is `ucp_put_lat`'s own kind.
        let ucx_tests = [
            Some("ucp_put_lat"),
            None,
            Some("ucp_put_bw"),
            Some("ucp_get"),
            Some("ucp_put_lat"),
        ];
        for (i, test) in ucx_tests.into_iter().enumerate().take(runs[0].len()) {
            let mut row = report::median(runs.iter().map(|r| r[i].clone()).collect());
            if let (true, Some(test), false) = (args.compare_ucx, test, provider == "loopback") {
                row = ucx::compare_one_sided(row, test, &run, args.rounds);
            }
            emit(&row, args.json);
            rows.push(row);
        }
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

/// `--test threads`: one row per `--threads` value.
fn threads_runs(args: &Args) {
    let run = args.run.for_test(Kind::Lat, false);
    let rows = threads::measure(&run, &args.threads, provider_name(args));
    for row in &rows {
        emit(row, args.json);
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
    let args = cli::parse();
    if args.scale_peer {
        return scale::serve_peer(&scale_run(&args), args.pairs[0], args.peer_ip);
    }
    if args.wire_peer {
        return wire::serve_peer(&args.run, args.rates[0], args.peer_ip);
    }
    if args.test == "pacing" && !args.wire {
        return pacing_runs(&args);
    }
    if args.test == "threads" {
        return threads_runs(&args);
    }
    if args.pfc_peer {
        return pfc::serve_peer(&args.run, args.storm);
    }
    if args.beside_peer {
        return beside::serve_peer(&args.run);
    }
    if args.rma_peer {
        return rma::serve_target(&args.run, args.peer_ip);
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
        // Over UCX's engine the libfabric baseline is still libfabric's tcp.
        let engine = std::env::var("UMQ_FABRIC_PROVIDER").unwrap_or_else(|_| "tcp".into());
        libfabric::use_provider(if engine == "ucx" {
            "tcp".into()
        } else {
            engine
        });
        let over_tcp = |p: &str| p == "tcp" || (p == "ucx" && std::env::var("UCX_TLS").is_err());
        if std::env::var("UMQ_FABRIC_PROVIDER").is_ok_and(|p| !over_tcp(&p)) && args.compare_ucx {
            eprintln!(
                "--compare ucx: against UCX's tcp transport, so with the tcp provider (or UCX's \
                 engine on its default tcp) only"
            );
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
    if args.test == "rma" {
        return rma_runs(&args);
    }
    if args.test == "pacing" {
        let provider = provider_name(&args);
        let rows = wire::measure(
            &run,
            provider,
            &args.sizes,
            &args.rates,
            args.arrivals.as_deref(),
        );
        rows.iter().for_each(|r| emit(r, args.json));
        if !args.json {
            print!("{}", report::table(&rows));
        }
        return;
    }
    if args.test == "beside" {
        let rows: Vec<Row> = args
            .sizes
            .iter()
            .map(|&size| {
                let rounds = (0..args.rounds)
                    .map(|_| beside::measure(&Run { size, ..run }))
                    .collect();
                report::median(rounds)
            })
            .collect();
        rows.iter().for_each(|r| emit(r, args.json));
        if !args.json {
            print!("{}", report::table(&rows));
        }
        return;
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
            let with = baselines::Baselines {
                libfabric: args.compare,
                ucx: args.compare_ucx,
            };
            let mut row = match with.libfabric || with.ucx {
                true => baselines::compared(&args.provider, kind, &run, args.rounds, with),
                false => report::median(
                    (0..args.rounds)
                        .map(|_| measure(&args.provider, kind, &run))
                        .collect(),
                ),
            };
            if args.provider == "shm" && kind == Kind::Lat {
                row = with_floor(row, &run, args.rounds);
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
