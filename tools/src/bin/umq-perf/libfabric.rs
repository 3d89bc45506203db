//! The baselines, run on this host in the same invocation as our measurement, on libfabric's
//! `shm` provider (or, for `--provider fabric`, on the libfabric provider it rides, `tcp`):
//! - latency: libfabric's own `fi_pingpong` (Debian `libfabric-bin`), server and client;
//! - streaming: `fi_stream.c` (next to this file), a windowed one-way sender and receiver, since
//!   Debian does not package fabtests' `fi_rdm_bw`. It is compiled here with the system C
//!   compiler against libfabric-dev.

use std::process::Command;

/// What `fi_pingpong` reported for one size.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PingPong {
    /// Half round trip (its "usec/xfer"), in ns.
    pub half_rtt_ns: f64,
    /// Transfers per second (its "Mxfers/sec").
    pub xfers_per_s: f64,
}

pub fn available() -> bool {
    crate::pair::installed("fi_pingpong")
}

static PROVIDER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The libfabric provider the baselines run on: `shm` unless set here (the network provider's
/// runs compare against the libfabric provider they ride, `tcp` by default).
pub fn use_provider(name: String) {
    let _ = PROVIDER.set(name);
}

fn provider() -> &'static str {
    PROVIDER.get().map_or("shm", String::as_str)
}

/// Whether the baseline is a network provider, whose connected endpoints (`-e msg`, the
/// kernel's TCP with no reliable-datagram layer above) make a second baseline.
pub fn over_network() -> bool {
    provider() != "shm"
}

/// Runs `fi_pingpong -p <provider> -e <endpoint>` (`rdm`, or `msg` over a network provider)
/// server and client for one size.
pub fn pingpong(size: u32, iters: u64, endpoint: &str) -> Result<PingPong, String> {
    let port = crate::pair::free_port().to_string();
    let (iters, size) = (iters.to_string(), size.to_string());
    let pingpong = || {
        let mut c = Command::new("fi_pingpong");
        c.args(["-p", provider(), "-e", endpoint, "-I", &iters, "-S", &size]);
        c
    };
    let mut server = pingpong();
    server.args(["-B", &port]);
    let text = crate::pair::run("fi_pingpong", server, || {
        let mut c = pingpong();
        c.args(["-P", &port, "127.0.0.1"]);
        c
    })?;
    parse(&text).ok_or(format!("cannot read fi_pingpong's output: {text}"))
}

/// The compiled streaming baseline, built once per run of umq-perf.
fn fi_stream_exe() -> Result<&'static std::path::Path, String> {
    static EXE: std::sync::OnceLock<Result<std::path::PathBuf, String>> =
        std::sync::OnceLock::new();
    EXE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("umq-perf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let src = dir.join("fi_stream.c");
        let exe = dir.join("fi_stream");
        std::fs::write(&src, include_str!("fi_stream.c")).map_err(|e| e.to_string())?;
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out = Command::new(&cc)
            .args(["-O2", "-o"])
            .arg(&exe)
            .arg(&src)
            .arg("-lfabric")
            .output()
            .map_err(|e| format!("cannot run {cc}: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot build fi_stream (needs libfabric-dev): {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(exe)
    })
    .as_deref()
    .map_err(Clone::clone)
}

/// Streams `messages` of `size` bytes one way over the baselines' libfabric provider; returns
/// messages per second.
pub fn stream(size: u32, messages: u64) -> Result<f64, String> {
    let exe = fi_stream_exe()?;
    let out = Command::new(exe)
        .args(["-n", &messages.to_string(), "-S", &size.to_string()])
        .args(["-p", provider()])
        .output()
        .map_err(|e| format!("cannot start fi_stream: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!(
            "fi_stream failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    field(&text, "msgs_per_s").ok_or(format!("cannot read fi_stream's output: {text}"))
}

/// The value of `name=value` in fi_stream's result line.
fn field(text: &str, name: &str) -> Option<f64> {
    text.split_whitespace()
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))?
        .parse()
        .ok()
}

/// Removes what `fi_stream_exe` built.
pub fn clean_up() {
    let _ = std::fs::remove_dir_all(
        std::env::temp_dir().join(format!("umq-perf-{}", std::process::id())),
    );
}

/// The numbers of fi_pingpong's result line:
/// `bytes #sent #ack total time MB/sec usec/xfer Mxfers/sec`.
fn parse(text: &str) -> Option<PingPong> {
    let line = text
        .lines()
        .rev()
        .find(|l| l.split_whitespace().count() == 8 && !l.starts_with("bytes"))?;
    let f: Vec<&str> = line.split_whitespace().collect();
    Some(PingPong {
        half_rtt_ns: f[6].parse::<f64>().ok()? * 1000.0,
        xfers_per_s: f[7].parse::<f64>().ok()? * 1e6,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_result_line() {
        let out = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n\
                   64      100k    =100k    12m         0.06s    204.62       0.31       3.20\n";
        assert_eq!(
            parse(out),
            Some(PingPong {
                half_rtt_ns: 310.0,
                xfers_per_s: 3.2e6
            })
        );
        assert_eq!(parse("fi_getinfo(): ret=-61 (No data available)\n"), None);
    }

    #[test]
    fn reads_fi_streams_result_line() {
        let out =
            "fi_stream provider=shm size=64 messages=100 elapsed_ns=5000 msgs_per_s=20000000\n";
        assert_eq!(field(out, "msgs_per_s"), Some(2e7));
        assert_eq!(field(out, "size"), Some(64.0));
        assert_eq!(field(out, "rate"), None);
    }
}
