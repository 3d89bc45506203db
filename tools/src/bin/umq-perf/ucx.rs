//! The UCX baseline, run on this host in the same invocation as our measurement: `ucx_perftest`
//! (Debian `ucx-utils`) `tag_lat`, UCP tag-matched ping-pong, server and client as two
//! processes, over the UCX transport that matches ours: posix shared memory
//! (`UCX_TLS=posix,self`) against shm, tcp (`UCX_TLS=tcp`) against the network provider.

use std::process::Command;
use std::sync::OnceLock;

/// `UCX_TLS` for the runs: shared memory unless `use_tcp` said otherwise.
static TLS: OnceLock<&'static str> = OnceLock::new();

/// Compares against UCX's tcp transport instead of its shared memory (the network provider).
pub fn use_tcp() {
    let _ = TLS.set("tcp");
}

/// The UCX transports compared against, as `UCX_TLS` names them.
pub fn transports() -> &'static str {
    TLS.get().copied().unwrap_or("posix,self")
}

/// What `ucx_perftest` reported for one size: one-way latency (half a round trip), in ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TagLat {
    pub p50_ns: f64,
    pub mean_ns: f64,
}

pub fn available() -> bool {
    crate::pair::installed("ucx_perftest")
}

fn perftest() -> Command {
    let mut c = Command::new("ucx_perftest");
    c.env("UCX_TLS", transports());
    c
}

/// Runs `ucx_perftest -t tag_lat` server and client for one size.
pub fn tag_lat(size: u32, iters: u64) -> Result<TagLat, String> {
    let port = crate::pair::free_port().to_string();
    let mut server = perftest();
    server.args(["-p", &port]);
    let text = crate::pair::run("ucx_perftest", server, || {
        let mut c = perftest();
        c.args(["127.0.0.1", "-p", &port, "-t", "tag_lat"]).args([
            "-s",
            &size.to_string(),
            "-n",
            &iters.to_string(),
        ]);
        c
    })?;
    parse(&text).ok_or(format!("cannot read ucx_perftest's output: {text}"))
}

/// Reads the "Final:" row: iterations, then latency p50, average and overall in µs.
fn parse(text: &str) -> Option<TagLat> {
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("Final:"))?;
    let cols: Vec<f64> = row
        .split_whitespace()
        .skip(1)
        .map(|c| c.parse().ok())
        .collect::<Option<_>>()?;
    Some(TagLat {
        p50_ns: cols.get(1)? * 1000.0,
        mean_ns: cols.get(2)? * 1000.0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_row() {
        let out = "+-----+\n|    Stage     | # iterations | 50.0%ile | average |\n\
                   Final:                100000      0.200     0.248     0.248       36.81      36.81      603093      603093\n";
        assert_eq!(
            parse(out),
            Some(TagLat {
                p50_ns: 200.0,
                mean_ns: 248.0
            })
        );
        assert_eq!(parse("no final row"), None);
    }
}
