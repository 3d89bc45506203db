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

/// Runs `ucx_perftest -t tag_lat` server and client for one size.
pub fn tag_lat(size: u32, iters: u64) -> Result<TagLat, String> {
    let text = perftest_pair("tag_lat", transports(), &[], size, iters)?;
    parse(&text).ok_or(format!("cannot read ucx_perftest's output: {text}"))
}

/// Runs `ucx_perftest -t tag_bw` (a stream of tag-matched sends) for one size: messages a
/// second, the Final row's overall message rate.
pub fn tag_bw(size: u32, iters: u64) -> Result<f64, String> {
    let text = perftest_pair("tag_bw", transports(), &[], size, iters)?;
    final_row(&text)
        .and_then(|c| c.get(7).copied())
        .ok_or(format!("cannot read ucx_perftest's output: {text}"))
}

/// Runs a `ucx_perftest` server and a client of `test` with `extra` arguments over `tls` on
/// 127.0.0.1; the client's output.
fn perftest_pair(
    test: &str,
    tls: &str,
    extra: &[&str],
    size: u32,
    iters: u64,
) -> Result<String, String> {
    let port = crate::pair::free_port().to_string();
    let cmd = || {
        let mut c = Command::new("ucx_perftest");
        c.env("UCX_TLS", tls);
        c
    };
    let mut server = cmd();
    server.args(["-p", &port]);
    crate::pair::run("ucx_perftest", server, || {
        let mut c = cmd();
        c.args(["127.0.0.1", "-p", &port, "-t", test])
            .args(extra)
            .args(["-s", &size.to_string(), "-n", &iters.to_string()]);
        c
    })
}

/// Reads the "Final:" row's latencies: iterations, then latency p50, average and overall in µs.
fn parse(text: &str) -> Option<TagLat> {
    let cols = final_row(text)?;
    Some(TagLat {
        p50_ns: cols.get(1)? * 1000.0,
        mean_ns: cols.get(2)? * 1000.0,
    })
}

/// The numbers of the "Final:" row: iterations; latency p50, average and overall (µs);
/// bandwidth average and overall (MB/s); message rate average and overall (msg/s).
fn final_row(text: &str) -> Option<Vec<f64>> {
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("Final:"))?;
    row.split_whitespace()
        .skip(1)
        .map(|c| c.parse().ok())
        .collect()
}

/// The transports for one-sided operations: over shared memory, UCX's posix mapping and its
/// cross-memory attach (`cma`), as ours has both; tcp over the network.
fn one_sided_transports() -> &'static str {
    match transports() {
        "posix,self" => "posix,cma,self",
        other => other,
    }
}

/// Runs `ucx_perftest -t test` for one size; the Final row. Over shared memory with `-o` (the
/// responder not progressed, as our target sleeps); over tcp UCX carries a put or get out in
/// the responder's progress, as we do in the target's library, so its responder progresses
/// (with `-o` it would wait forever).
fn one_sided(test: &str, size: u32, iters: u64) -> Result<Vec<f64>, String> {
    let unprogressed: &[&str] = if one_sided_transports().contains("tcp") {
        &[]
    } else {
        &["-o"]
    };
    let text = perftest_pair(test, one_sided_transports(), unprogressed, size, iters)?;
    final_row(&text)
        .filter(|c| c.len() >= 8)
        .ok_or(format!("cannot read ucx_perftest's output: {text}"))
}

/// Adds UCX's figure for the one-sided operation `test` (medians of `rounds`) and our ratio to
/// one of `--test rma`'s rows: latency for `ucp_put_lat` (ours is the WR's whole time, post
/// to completion), message rate for `ucp_put_bw` and `ucp_get` (a stream of gets).
pub fn compare_one_sided(row: crate::Row, test: &str, run: &crate::Run, rounds: u32) -> crate::Row {
    let mut runs = Vec::new();
    for _ in 0..rounds.max(1) {
        match one_sided(test, run.size, run.iters) {
            Ok(cols) => runs.push(cols),
            Err(e) => return row.text("ucx_perftest", e),
        }
    }
    let median = |i: usize| {
        let mut v: Vec<f64> = runs.iter().map(|c| c[i]).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let row = row
        .text("ucx_tls", one_sided_transports())
        .text("ucx_test", test);
    if test != "ucp_put_lat" {
        let ucx = median(7);
        let ours = row.get("msgs_per_s").unwrap_or(f64::NAN);
        return row
            .num("ucx_msgs_per_s", ucx.round())
            .num("msgs_vs_ucx", ours / ucx);
    }
    let ucx = median(2) * 1000.0;
    let ours = row.get("mean_ns").unwrap_or(f64::NAN);
    row.num("ucx_p50_ns", (median(1) * 1000.0).round())
        .num("ucx_mean_ns", ucx.round())
        .num("mean_vs_ucx", ours / ucx)
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
