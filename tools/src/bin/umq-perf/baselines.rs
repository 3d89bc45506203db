//! A test beside its baselines, round by round: each round runs ours and then each baseline
//! asked for once, and a ratio is the median of the rounds' own ratios. For `--test lat`:
//! `fi_pingpong` over libfabric's provider (over a network also its connected endpoints) and
//! UCX's `tag_lat`; for `bw` (and `qps`, libfabric's only) the windowed `fi_stream` and UCX's
//! `tag_bw`. This guest's host moves between regimes whose half round trips differ by up to
//! 1.4×, often within an invocation: with all our rounds first and each baseline's after them,
//! one switch put one side of a ratio in each regime (the same build's 64 B network ratio
//! against `tag_lat` read 0.79 and 1.14 in two invocations a minute apart); in one round the
//! two sides run seconds apart and a switch moves both.

use crate::report::{self, Row};
use crate::{Kind, Run, libfabric, ucx};

/// What the row is compared with.
#[derive(Clone, Copy)]
pub struct Baselines {
    pub libfabric: bool,
    pub ucx: bool,
}

/// One baseline's figures over the rounds: its own medians go in the row, and our ratio to it
/// (ours over its figure) is the median of the rounds' ratios. The first error ends it (the
/// row then says why).
#[derive(Default)]
struct Series {
    /// Each round's: (its figure, a second one, ours over its figure).
    rounds: Vec<(f64, f64, f64)>,
    error: Option<String>,
}

impl Series {
    /// Runs the baseline for one round, unless an earlier round failed it.
    fn run(&mut self, ours: f64, baseline: impl FnOnce() -> Result<(f64, f64), String>) {
        if self.error.is_some() {
            return;
        }
        match baseline() {
            Ok((figure, other)) => self.rounds.push((figure, other, ours / figure)),
            Err(e) => self.error = Some(e),
        }
    }

    fn median(&self, pick: impl Fn(&(f64, f64, f64)) -> f64) -> f64 {
        crate::middle(self.rounds.iter().map(pick).collect())
    }

    /// The row with the median of this baseline's figure as `figure`, of its second one as
    /// `other` (none when empty) and of the ratios as `ratio`; or its error under `failed`.
    fn into_row(self, row: Row, failed: &'static str, names: [&'static str; 3]) -> Row {
        let [figure, other, ratio] = names;
        if let Some(e) = &self.error {
            return row.text(failed, e.clone());
        }
        let row = row.num(figure, self.median(|r| r.0));
        let row = match other {
            "" => row,
            _ => row.num(other, self.median(|r| r.1).round()),
        };
        row.num(ratio, self.median(|r| r.2))
    }
}

/// `rounds` rounds of ours (`kind` on `provider`) and of the baselines `with` names; the row
/// of ours is the median of its rounds (`report::median`), as without baselines.
pub fn compared(provider: &str, kind: Kind, run: &Run, rounds: u32, with: Baselines) -> Row {
    match kind {
        Kind::Lat => latency(provider, run, rounds, with),
        Kind::Bw | Kind::Qps => stream(provider, kind, run, rounds, with),
    }
}

fn latency(provider: &str, run: &Run, rounds: u32, with: Baselines) -> Row {
    let (mut ours, mut fi, mut fi_msg, mut tag) = (
        Vec::new(),
        Series::default(),
        Series::default(),
        Series::default(),
    );
    let connected = with.libfabric && libfabric::over_network();
    for _ in 0..rounds.max(1) {
        let row = crate::measure(provider, Kind::Lat, run);
        let mean = row.get("mean_ns").unwrap_or(f64::NAN);
        ours.push(row);
        if with.libfabric {
            fi.run(mean, || {
                libfabric::pingpong(run.size, run.iters, "rdm")
                    .map(|p| (p.half_rtt_ns, p.xfers_per_s))
            });
        }
        if connected {
            fi_msg.run(mean, || {
                libfabric::pingpong(run.size, run.iters, "msg").map(|p| (p.half_rtt_ns, 0.0))
            });
        }
        if with.ucx {
            tag.run(mean, || {
                ucx::tag_lat(run.size, run.iters).map(|t| (t.mean_ns.round(), t.p50_ns.round()))
            });
        }
    }
    let mut row = report::median(ours);
    if with.libfabric {
        let names = [
            "fi_pingpong_half_rtt_ns",
            "fi_pingpong_xfers_per_s",
            "mean_vs_fi_pingpong",
        ];
        row = fi.into_row(row, "fi_pingpong", names);
    }
    if connected {
        let names = ["fi_pingpong_msg_half_rtt_ns", "", "mean_vs_fi_pingpong_msg"];
        row = fi_msg.into_row(row, "fi_pingpong_msg", names);
    }
    if with.ucx {
        row = row.text("ucx_tls", ucx::transports());
        let names = ["ucx_tag_lat_mean_ns", "ucx_tag_lat_p50_ns", "mean_vs_ucx"];
        row = tag.into_row(row, "ucx_perftest", names);
    }
    row
}

/// Message rates: a ratio is ours over the baseline's, so above 1.0 is faster. UCX's `tag_bw`
/// is the `bw` test's baseline only.
fn stream(provider: &str, kind: Kind, run: &Run, rounds: u32, with: Baselines) -> Row {
    let (mut ours, mut fi, mut tag) = (Vec::new(), Series::default(), Series::default());
    let tag_bw = with.ucx && kind == Kind::Bw;
    for _ in 0..rounds.max(1) {
        let row = crate::measure(provider, kind, run);
        let rate = row.get("msgs_per_s").unwrap_or(f64::NAN);
        ours.push(row);
        if with.libfabric {
            fi.run(rate, || {
                libfabric::stream(run.size, run.iters).map(|r| (r.round(), 0.0))
            });
        }
        if tag_bw {
            tag.run(rate, || {
                ucx::tag_bw(run.size, run.iters).map(|r| (r.round(), 0.0))
            });
        }
    }
    let mut row = report::median(ours);
    if with.libfabric {
        let names = ["fi_stream_msgs_per_s", "", "msgs_vs_fi_stream"];
        row = fi.into_row(row, "fi_stream", names);
    }
    if tag_bw {
        row = row.text("ucx_tls", ucx::transports());
        let names = ["ucx_tag_bw_msgs_per_s", "", "msgs_vs_ucx"];
        row = tag.into_row(row, "ucx_perftest", names);
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: [&str; 3] = ["base_ns", "base_rate", "mean_vs_base"];

    /// The host's regime moves: both sides run slow in the second round, and in the third it
    /// moved between ours and the baseline. The ratio is the median of the rounds' ratios,
    /// 0.5, where the ratio of the medians would read 140 / 110.
    #[test]
    fn a_ratio_is_the_median_of_the_rounds_ratios() {
        let mut s = Series::default();
        for (ours, base) in [(50.0, 100.0), (150.0, 300.0), (140.0, 110.0)] {
            s.run(ours, || Ok((base, 2.0 * base)));
        }
        let row = s.into_row(Row::new("lat", "shm", 64, true), "base", NAMES);
        assert_eq!(row.get("base_ns"), Some(110.0));
        assert_eq!(row.get("base_rate"), Some(220.0));
        assert_eq!(row.get("mean_vs_base"), Some(0.5));
    }

    /// A baseline that fails is not run again, and the row says why instead of a ratio.
    #[test]
    fn a_failed_baseline_ends_with_its_error() {
        let mut s = Series::default();
        let mut runs = 0;
        for _ in 0..3 {
            s.run(50.0, || {
                runs += 1;
                Err("not installed".to_string())
            });
        }
        assert_eq!(runs, 1);
        let row = s.into_row(Row::new("lat", "shm", 64, true), "base", NAMES);
        assert_eq!(row.get("mean_vs_base"), None);
        assert!(
            row.json().contains("\"base\":\"not installed\""),
            "{}",
            row.json()
        );
    }
}
