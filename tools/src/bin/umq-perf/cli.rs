//! umq-perf's command line: the options (clap; `--help`, `--man` and `--completions` come from
//! this one definition), then the checks that span several options.

use crate::api::Flow;
use crate::{Kind, QPS_LIST, Run};
use clap::{CommandFactory, Parser};

/// The server's port when `--port` does not say (perftest's).
pub const PORT: u16 = 18515;

pub const SWEEP: [u32; 6] = [64, 256, 1024, 4096, 16384, 65536];

/// Latency and bandwidth of libumq through its public C API
///
/// Measures libumq through its public C API: on the in-process loopback transport (the
/// default), between two processes over shared memory, or over the network provider
/// (libfabric), optionally next to libfabric's fi_pingpong and UCX's ucx_perftest, run in the
/// same invocation. One line per result as it is measured (one JSON object with --json), then a
/// table of every result with both sides' flow-control counters.
#[derive(Parser, Debug)]
#[command(
    name = "umq-perf",
    version,
    // As before clap: a later `--size 4096` replaces an earlier one.
    args_override_self = true,
    override_usage = "umq-perf [--provider loopback|shm|fabric] [--test lat|bw|qps|fc|scale|pacing|all]
                [--size BYTES[,BYTES...]|sweep] [--iters N] [--batch N] [--depth N]
                [--rx-bufs N]
                [--flow-control on|off] [--atomic-window] [--shared-pool on|send|recv|off]
                [--rounds N] [--compare libfabric,ucx] [--loop app|bench] [--json] [--quiet]
       umq-perf [--provider loopback|shm|fabric] --test threads [--threads N[,N...]] [--iters N]
       umq-perf --test pacing [--queues N[,N...]] | [--provider loopback|shm|fabric] --test pacing --wire
       umq-perf --provider shm|fabric --test pfc [--storm] [--json]
       umq-perf [--provider loopback|shm|fabric] --test rma [--size ...] [--compare ucx]
       umq-perf --server [--port N]
       umq-perf --client HOST [--port N] [--test ...] [--size ...] [...]"
)]
pub struct Cli {
    /// Where the two queues are: loopback, shm (two processes) or fabric (the network)
    ///
    /// loopback: two queues of this process; shm: a second
    /// process, started by umq-perf itself, over the shared-memory transport (its latency rows
    /// also carry the floor: the same bytes bounced between two processes through bare shared
    /// memory, how far above it we are, and the floor of a one-copy transport through the
    /// kernel, each message moved by one process_vm_writev into the peer's own buffer); fabric,
    /// the same two processes over the network provider (libfabric, UMQ_FABRIC_PROVIDER,
    /// default tcp), on this host.
    #[arg(long, default_value = "loopback", value_parser = ["loopback", "shm", "fabric"])]
    pub provider: String,
    /// What to measure
    ///
    /// lat: ping-pong half round trip; bw, streaming messages/s; qps, the
    /// reference qps tool's pattern (a client posting the same list head of 64 one-buffer SENDs
    /// round after round, the list checked intact after every round, and a server counting and
    /// reposting); fc, throughput with flow control on vs off; all, lat and bw (and fc on
    /// loopback); scale, --pairs queue pairs bound at once (loopback, or shm or fabric with
    /// a second process), each one's memory (Pss) and fds, setup and teardown per pair, a message each
    /// way through every pair, a ping-pong beside all the others; pacing, the pacing machine
    /// alone on a virtual clock, --queues limited queues each always with more to send, packet
    /// times of 1 to 16 ticks, per packet on the timing wheel and on a binary heap, the largest
    /// rate error; pfc, link-level pause between two processes (shm or fabric): priorities 0
    /// and 3 share the link, the peer takes priority 3 slowly and pauses it with XOFF / XON,
    /// rows per priority (messages/s, pause frames, paused ms, watchdog trips, messages lost);
    /// rma, one-sided operations against a target that runs nothing of ours meanwhile (a
    /// second process blocked on its pipe, or on loopback a queue never polled): WRITE and
    /// READ latency (post to TX completion, one at a time) and a WRITE stream, rows per
    /// operation with how many WRs the initiator carried out itself (over shm through the
    /// target's mapped shared pool, or by the kernel; over the network by libfabric RMA, for a
    /// process-pool target: --shared-pool off); with --compare ucx, ucx_perftest's
    /// ucp_put_lat, ucp_get and ucp_put_bw with the responder not progressed (-o; over the
    /// network, progressed); beside, a ping-pong of 64 B messages between two processes (shm or
    /// fabric) alone and beside a stream of --size messages from this process to the same peer
    /// on a second queue pair (over the network both pairs share one connection): the ping's
    /// half round trip each way (median, 99th percentile), the stream's messages/s; threads,
    /// --threads threads of this process each ping-ponging on its own pair of queues (loopback,
    /// or over shm or fabric between queues of this process), a buffer allocated for every
    /// message and freed when it comes back: all threads' round trips a second, a thread's, and
    /// a thread's against the first count's.
    #[arg(long, default_value = "all", value_parser = ["lat", "bw", "qps", "fc", "scale", "pacing", "pfc", "rma", "beside", "threads", "all"])]
    pub test: String,
    /// Message bytes, a list, or 'sweep' (64 B .. 64 KiB) [default: 64; pacing --wire: 65536,1048576]
    #[arg(long, value_name = "BYTES[,BYTES...]|sweep", value_parser = parse_sizes)]
    pub size: Option<Sizes>,
    /// Messages (or round trips) per measurement.
    #[arg(long, value_name = "N", default_value_t = 200_000)]
    pub iters: u64,
    /// Work requests per post in a stream; also the flow-control notify interval.
    #[arg(long, value_name = "N", default_value_t = 32)]
    pub batch: u32,
    /// Queue depth, both directions.
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub depth: u32,
    /// Receive buffers each side keeps posted (at most --depth)
    ///
    /// By default as the baseline:
    /// 16 for lat (fi_pingpong posts one; 16 stay as warm), 64 for bw over shm (the libfabric
    /// stream posts 64), --depth for bw on loopback.
    #[arg(long, value_name = "N", default_value_t = 0, hide_default_value = true)]
    pub rx_bufs: u32,
    /// Receive-window flow control.
    #[arg(long, value_name = "ON_OFF", default_value = "on", value_parser = ["on", "off"])]
    pub flow_control: String,
    /// Sets use_atomic_window, which the library reports and which changes nothing else (its
    /// counters live under the queue's lock).
    #[arg(long)]
    pub atomic_window: bool,
    /// shm: which buffers come from the queue's shared pool
    ///
    /// Shared-pool buffers are those umq_buf_alloc gives with the queue's handle. on: send and
    /// receive buffers; a message of 1 KiB or more posted alone (16 KiB or more in a stream) is
    /// written by the sender straight into its receive buffer, and a stream's messages of 32 KiB
    /// or more are split, the sender writing the first half and the receiver copying the rest.
    /// send: send buffers only; messages of 16 KiB and more cross by reference. recv: receive
    /// buffers only. off: neither; every message is copied through the ring.
    #[arg(long, value_name = "BUFFERS", default_value = "on", value_parser = ["on", "send", "recv", "off"])]
    pub shared_pool: String,
    /// Repeat each measurement and report the median. With --compare, each round of lat, bw
    /// or qps runs ours and then each baseline, and a ratio is the median of the rounds' own.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub rounds: u32,
    /// Also run a baseline in the same invocation: libfabric, ucx or both
    ///
    /// libfabric: per size, its shm provider
    /// against shm, the same provider as ours against fabric; fi_pingpong for latency (Debian
    /// libfabric-bin), a windowed stream for bw and qps (built here from fi_stream.c; needs
    /// libfabric-dev and a C compiler). ucx: ucx_perftest tag_lat for latency and tag_bw
    /// for bw (Debian ucx-utils), over UCX's posix shared memory (shm) or its tcp transport (fabric).
    #[arg(long, value_name = "libfabric,ucx", value_delimiter = ',', value_parser = ["libfabric", "ucx"])]
    pub compare: Vec<String>,
    /// shm latency: the benchmark's loop (bench) or the one applications write (app)
    ///
    /// bench polls both directions at once with 16 receive buffers posted, as
    /// fi_pingpong's loop; app is the loop applications write: IPC queues, 256 receive buffers
    /// posted, TX completions then RX polled on their own each turn, the receive buffer
    /// reposted, then the reply sent.
    #[arg(long = "loop", value_name = "LOOP", default_value = "bench", value_parser = ["app", "bench"])]
    pub loop_kind: String,
    /// lat and qps: the pro API (umq_post / umq_poll) or the base API
    ///
    /// base: umq_enqueue / umq_dequeue, as the reference's perftest runs with -f 0. The library
    /// posts and recycles the receive buffers; each message is a fresh buffer, freed by the
    /// library once sent; a dequeue returns the messages that have arrived as one list.
    #[arg(long, value_name = "API", default_value = "pro", value_parser = ["pro", "base"])]
    pub api: String,
    /// One JSON object per result line, nothing else on stdout.
    #[arg(long)]
    pub json: bool,
    /// No progress bar (it is only drawn when stderr is a terminal anyway).
    #[arg(long)]
    pub quiet: bool,
    /// pfc: the peer keeps priority 3 paused instead; our watchdog trips.
    #[arg(long)]
    pub storm: bool,
    /// rma over shm or fabric: what the target process does while the WRs go
    ///
    /// sleep: blocked on its pipe, running nothing of ours; poll: umq_poll on its queue in a
    /// loop, as ucx_perftest's responder progresses over tcp (like for like with --compare ucx
    /// there), and a last row, write_pingpong, times a put ping-pong one way as ucp_put_lat
    /// does (each side waits for the other's WRITE in its own memory).
    #[arg(long, value_name = "TARGET", default_value = "sleep", value_parser = ["sleep", "poll"])]
    pub target: String,
    /// beside: what the stream on the second queue pair carries
    ///
    /// send: SENDs the peer receives; write, read: WRITEs into (READs from) a buffer of the
    /// peer's process pool, which over the network go by RMA, as libfabric operations on the
    /// connection the ping shares.
    #[arg(long, value_name = "OP", default_value = "send", value_parser = ["send", "write", "read"])]
    pub stream: String,
    /// beside: ping every MS milliseconds instead of back to back
    ///
    /// A binding that sends now and then, more than 10 ms apart, finds the connection to
    /// itself taken by the stream's WRs (over the network: a WR to a peer no other binding
    /// sends to goes in lone pieces of up to 1 MiB, with 2 MiB in libfabric at most).
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    pub ping_every: Option<u64>,
    /// threads: how many threads, a list.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',', default_value = "1,2", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub threads: Vec<u32>,
    /// scale: how many pairs, a list.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',', default_value = "10000", value_parser = clap::value_parser!(u32).range(1..))]
    pub pairs: Vec<u32>,
    /// pacing: limited queues on --provider instead of the machine alone
    ///
    /// For 64 KiB and 1 MiB messages at 100 Mbit/s and 1 Gbit/s (PMTU 4096, a microsecond
    /// tick), about half a second of messages from one limited queue; the receiver records
    /// each packet's arrival. Rows: packets, the most bytes that arrived within one packet
    /// time (burst_bytes_max), windows holding more than two PMTU, the achieved rate and its
    /// error against the limit.
    #[arg(long)]
    pub wire: bool,
    /// pacing --wire: the limits to run at, bit/s, a list.
    #[arg(long, value_name = "BITS[,BITS...]", value_delimiter = ',', default_value = "100000000,1000000000", value_parser = clap::value_parser!(u64).range(1..))]
    pub rates: Vec<u64>,
    /// pacing --wire: also write each row's arrivals to DIR/<provider>-<bytes>-<bit/s>.csv
    /// (nanoseconds from the first arrival, bytes), as scripts/pacing_wire_plot.py reads them.
    #[arg(long, value_name = "DIR")]
    pub arrivals: Option<std::path::PathBuf>,
    /// pacing: how many limited queues, a list.
    #[arg(long, value_name = "N[,N...]", value_delimiter = ',', default_value = "1000,10000,100000,1000000", value_parser = clap::value_parser!(u32).range(1..=16_000_000))]
    pub queues: Vec<u32>,
    /// Serve the peer's side of every run a --client asks for, until killed
    ///
    /// Between two hosts, as perftest's tools: one run at a time.
    #[arg(long)]
    pub server: bool,
    /// Run the tests against the umq-perf --server on HOST
    ///
    /// Over the network provider; each side's queue offers the address their connection
    /// uses.
    #[arg(long, value_name = "HOST")]
    pub client: Option<String>,
    /// The server's TCP port for the runs' setup.
    #[arg(long, value_name = "N", default_value_t = PORT)]
    pub port: u16,
    /// Print a completion script for this shell and exit.
    #[arg(long, value_name = "SHELL")]
    pub completions: Option<clap_complete::Shell>,
    /// Print this program's man page (roff) and exit: what scripts/install.sh installs as
    /// umq-perf(1).
    #[arg(long, hide = true)]
    pub man: bool,
    /// The peer process umq-perf starts for shm and fabric runs: which side to serve.
    #[arg(long, hide = true, value_enum)]
    pub peer: Option<Kind>,
    /// The peer's queue address (given by the server to the peers it starts).
    #[arg(long, hide = true, default_value = "127.0.0.1")]
    pub ip: std::net::IpAddr,
    /// The peer process of a scale run over shm or fabric.
    #[arg(long, hide = true)]
    pub scale_peer: bool,
    /// The peer process of a pfc run.
    #[arg(long, hide = true)]
    pub pfc_peer: bool,
    /// The peer process of a beside run.
    #[arg(long, hide = true)]
    pub beside_peer: bool,
    /// The target process of an rma run.
    #[arg(long, hide = true)]
    pub rma_peer: bool,
    /// The receiving process of a pacing --wire run.
    #[arg(long, hide = true)]
    pub wire_peer: bool,
}

/// `--size`: one value that is a list (so a later `--size` replaces it, as any other option).
#[derive(Clone, Debug, PartialEq)]
pub struct Sizes(pub Vec<u32>);

/// The largest `--size`: 1 MiB, but for one-sided WRs (`--test rma`, `--test beside --stream
/// write|read`), which move one buffer each (at most 10 MiB, `UMQ_MAX_BUF_REQUEST_SIZE`).
const MOST: u32 = 1 << 20;
const ONE_SIDED_MOST: u32 = 8 << 20;
/// The most `--test scale` posts in receive buffers on a side: 10,000 pairs of 1 MiB had the
/// kernel kill the peer process for memory.
const SCALE_BYTES: u64 = 2 << 30;
const SIZES: &str = "1 byte to 1 MiB (8 MiB for --test rma and --test beside --stream write|read)";

fn parse_sizes(v: &str) -> Result<Sizes, String> {
    if v == "sweep" {
        return Ok(Sizes(SWEEP.to_vec()));
    }
    let sizes = v
        .split(',')
        .map(|s| s.trim().parse().map_err(|e| format!("{s}: {e}")))
        .collect::<Result<Vec<u32>, _>>()?;
    if sizes.iter().any(|&s| s == 0 || s > ONE_SIDED_MOST) {
        return Err(SIZES.into());
    }
    Ok(Sizes(sizes))
}

/// What a run was asked for, once the options agree with each other.
pub struct Args {
    pub provider: String,
    pub test: String,
    pub sizes: Vec<u32>,
    pub rounds: u32,
    pub compare: bool,
    pub compare_ucx: bool,
    pub json: bool,
    pub peer: Option<Kind>,
    /// The peer's queue address (`--ip`, given by the server to the peers it starts).
    pub peer_ip: std::net::IpAddr,
    pub serve: bool,
    pub client: Option<String>,
    pub port: u16,
    /// `--test scale`: how many queue pairs, per measurement.
    pub pairs: Vec<u32>,
    /// `--test threads`: how many threads, per measurement.
    pub threads: Vec<u32>,
    /// The peer process of a scale run over shm or fabric (hidden).
    pub scale_peer: bool,
    pub pfc_peer: bool,
    pub beside_peer: bool,
    pub rma_peer: bool,
    pub wire_peer: bool,
    pub storm: bool,
    /// `--test pacing --wire`: limited queues on a provider, not the machine alone.
    pub wire: bool,
    /// `--rates`: the limits `--wire` runs at.
    pub rates: Vec<u64>,
    /// `--arrivals DIR`: where `--wire` writes each row's arrivals.
    pub arrivals: Option<std::path::PathBuf>,
    /// `--test pacing`: how many limited queues, per measurement.
    pub queues: Vec<u32>,
    pub run: Run,
}

impl From<Cli> for Args {
    fn from(c: Cli) -> Args {
        let (shared_pool, shared_rx) = match c.shared_pool.as_str() {
            "send" => (true, false),
            "recv" => (false, true),
            "off" => (false, false),
            _ => (true, true),
        };
        let client = c.client;
        let default_sizes = if c.wire {
            vec![65536, 1 << 20]
        } else {
            vec![64]
        };
        let sizes = c.size.map_or(default_sizes, |s| s.0);
        Args {
            provider: if client.is_some() {
                "fabric".into()
            } else {
                c.provider
            },
            test: c.test,
            rounds: c.rounds,
            compare: c.compare.iter().any(|v| v == "libfabric"),
            compare_ucx: c.compare.iter().any(|v| v == "ucx"),
            json: c.json,
            peer: c.peer,
            peer_ip: c.ip,
            serve: c.server,
            client,
            port: c.port,
            pairs: c.pairs,
            threads: c.threads,
            scale_peer: c.scale_peer,
            pfc_peer: c.pfc_peer,
            beside_peer: c.beside_peer,
            rma_peer: c.rma_peer,
            wire_peer: c.wire_peer,
            wire: c.wire,
            arrivals: c.arrivals,
            rates: c.rates,
            storm: c.storm,
            queues: c.queues,
            run: Run {
                size: sizes[0],
                iters: c.iters,
                batch: c.batch,
                depth: c.depth,
                rx_bufs: c.rx_bufs,
                flow: Flow {
                    on: c.flow_control == "on",
                    atomic_window: c.atomic_window,
                    notify_interval: c.batch as u16,
                    initial_window: 0,
                },
                shared_pool,
                shared_rx,
                app_loop: c.loop_kind == "app",
                base_api: c.api == "base",
                target_polls: c.target == "poll",
                ping_every: c.ping_every.map(std::time::Duration::from_millis),
                stream_op: match c.stream.as_str() {
                    "write" => umq::abi::pro_types::UMQ_OPC_WRITE,
                    "read" => umq::abi::pro_types::UMQ_OPC_READ,
                    _ => umq::abi::pro_types::UMQ_OPC_SEND,
                },
                quiet: c.quiet || c.json,
                server: None,
            },
            sizes,
        }
    }
}

/// The command line, checked; on an error, clap's message and exit status 2 (0 for `--help`).
pub fn parse() -> Args {
    let cli = Cli::parse();
    if umq_tools::print_man_or_completions(Cli::command(), cli.man, cli.completions) {
        std::process::exit(0);
    }
    let args = Args::from(cli);
    if let Err(e) = check(&args) {
        Cli::command()
            .error(clap::error::ErrorKind::ArgumentConflict, e)
            .exit();
    }
    args
}

/// What no single option can say: the combinations a run cannot honour.
fn check(a: &Args) -> Result<(), String> {
    let r = &a.run;
    if a.arrivals.is_some() && !a.wire {
        return Err("--arrivals writes what --test pacing --wire measured".into());
    }
    if a.wire && a.test != "pacing" {
        return Err("--wire measures pacing: --test pacing --wire".into());
    }
    if a.wire && a.sizes.iter().any(|&s| s <= crate::wire::PMTU) {
        return Err(
            "--wire: message sizes above the PMTU (4096 B), so that they cross as packets".into(),
        );
    }
    if a.wire && a.rates.iter().any(|&r| r < 10_000_000) {
        return Err("--rates: at least 10 Mbit/s (a row sends at least two messages)".into());
    }
    if ["pfc", "beside"].contains(&a.test.as_str())
        && !["shm", "fabric"].contains(&a.provider.as_str())
    {
        return Err(format!(
            "--test {}: between two processes, --provider shm or fabric",
            a.test
        ));
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
    if r.base_api && (!["lat", "qps"].contains(&a.test.as_str()) && a.peer.is_none() || r.app_loop)
    {
        return Err("--api base measures lat and qps, in the benchmark's loop".into());
    }
    let sends = r.stream_op == umq::abi::pro_types::UMQ_OPC_SEND;
    if !sends && a.test != "beside" && !a.beside_peer {
        return Err("--stream write|read is for --test beside".into());
    }
    let one_sided = a.test == "rma" || a.rma_peer || !sends;
    if !one_sided && a.sizes.iter().any(|&s| s > MOST) {
        return Err(SIZES.into());
    }
    if r.ping_every.is_some() && a.test != "beside" {
        return Err("--ping-every is for --test beside".into());
    }
    if r.target_polls && (a.test != "rma" || a.provider == "loopback") && !a.rma_peer {
        return Err("--target poll is for --test rma over shm or fabric".into());
    }
    let most_pairs = a.pairs.iter().max().copied().unwrap_or(0) as u64;
    let largest = a.sizes.iter().max().copied().unwrap_or(0) as u64;
    if (a.test == "scale" || a.scale_peer) && most_pairs * largest > SCALE_BYTES {
        return Err(format!(
            "--test scale posts a --size receive buffer on every queue: {most_pairs} pairs of \
             {largest} bytes is more than the {} MiB a process keeps for them",
            SCALE_BYTES >> 20
        ));
    }
    let qps = a.test == "qps" || a.peer == Some(Kind::Qps);
    if qps && r.rx_bufs != 0 && r.rx_bufs < QPS_LIST {
        return Err(format!("--rx-bufs must be at least {QPS_LIST} for qps"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{APP_RX_BUFS, LAT_RX_BUFS, SHM_BW_RX_BUFS};

    fn parse(s: &str) -> Result<Args, String> {
        let argv = std::iter::once("umq-perf").chain(s.split_whitespace());
        let args = Args::from(Cli::try_parse_from(argv).map_err(|e| e.to_string())?);
        check(&args).map(|()| args)
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults_are_the_embedded_main_job() {
        let a = parse("").unwrap();
        assert_eq!((a.provider.as_str(), a.test.as_str()), ("loopback", "all"));
        assert_eq!(a.sizes, vec![64]);
        assert!(a.run.flow.on && !a.run.flow.atomic_window);
        assert_eq!(a.run.flow.notify_interval, 32);
        assert_eq!((a.run.iters, a.run.depth, a.rounds), (200_000, 1024, 1));
        assert!(a.run.shared_pool && a.run.shared_rx && !a.run.app_loop);
        assert_eq!(a.pairs, vec![10_000]);
        assert_eq!(a.queues, vec![1_000, 10_000, 100_000, 1_000_000]);
        assert_eq!(a.port, PORT);
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
        assert_eq!(a.run.flow.notify_interval, 8);
        assert_eq!(parse("--size sweep").unwrap().sizes, SWEEP.to_vec());
        let both = parse("--compare libfabric,ucx").unwrap();
        assert!(both.compare && both.compare_ucx);
        let ucx = parse("--compare ucx").unwrap();
        assert!(!ucx.compare && ucx.compare_ucx);
        let app = parse("--provider shm --test lat --loop app").unwrap();
        assert!(app.run.app_loop);
        assert_eq!(app.run.for_test(Kind::Lat, true).rx_bufs, APP_RX_BUFS);
        let send = parse("--shared-pool send").unwrap();
        assert!(send.run.shared_pool && !send.run.shared_rx);
        assert_eq!(parse("--pairs 10,1000").unwrap().pairs, vec![10, 1000]);
        assert_eq!(
            parse("--peer qps --rx-bufs 64").unwrap().peer,
            Some(Kind::Qps)
        );
        assert!(
            parse("--loop app").is_err(),
            "the app loop is an shm latency loop"
        );
        assert!(parse("--provider shm --test bw --loop app").is_err());
        let polls = parse("--provider fabric --test rma --target poll").unwrap();
        assert!(polls.run.target_polls);
        assert!(
            !parse("--provider fabric --test rma")
                .unwrap()
                .run
                .target_polls
        );
        assert!(parse("--provider fabric --test lat --target poll").is_err());
        assert!(
            parse("--test rma --target poll").is_err(),
            "a loopback target is a queue of this process, never polled"
        );
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
        assert!(!parse("--test lat").unwrap().run.base_api);
        for ok in [
            "--test lat --api base",
            "--provider shm --test qps --api base",
        ] {
            assert!(parse(ok).unwrap().run.base_api, "{ok}");
        }
        let peer = parse("--peer qps --api base").unwrap();
        assert!(peer.run.base_api && peer.peer == Some(Kind::Qps));
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
            "--size 2000000",
            "--iters",
            "--iters 0",
            "--compare mpi",
            "--compare libfabric,",
            "--bogus",
            "--rx-bufs 2000",
            "--test bw --rx-bufs 8",
            "--test qps --rx-bufs 32",
            "--test pfc",
            "--pairs 0",
            "--queues 16000001",
            "--api rdma",
            "--api base",
            "--test bw --api base",
            "--provider shm --test lat --loop app --api base",
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
