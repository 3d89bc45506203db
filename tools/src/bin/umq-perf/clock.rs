//! Round-trip timestamps for the latency loops that cost the loop as little as the baselines'
//! own timing does.
//!
//! `fi_pingpong` and the floor time the whole loop; `ucx_perftest` reads the TSC once an
//! iteration. Reading `Instant::now()` twice a round trip (28 ns a read on this VM) put about
//! 28 ns of clock into every half round trip we reported and none into theirs. So a latency
//! loop marks each round trip's start once, with the cheapest counter there is (the TSC on
//! x86-64, 11 ns), a sample is the distance between consecutive marks, and the counter is
//! converted to nanoseconds by the wall clock over the whole run.

use std::time::Instant;

/// Runs `warm` round trips, then `iters` timed ones, each one call of `round_trip` with its
/// number; `tick` is told how many timed ones are done before each. Half round trips in ns.
pub fn time_round_trips(
    warm: u64,
    iters: u64,
    mut tick: impl FnMut(u64),
    mut round_trip: impl FnMut(u64),
) -> Vec<f64> {
    let mut marks = RoundTrips::with_capacity(iters);
    for i in 0..warm + iters {
        if i >= warm {
            marks.mark();
            tick(i - warm);
        }
        round_trip(i);
    }
    marks.mark();
    marks.half_round_trips_ns()
}

/// The marks of one run: the first and last are also taken on the wall clock.
pub struct RoundTrips {
    ticks: Vec<u64>,
    started: Option<Instant>,
}

impl RoundTrips {
    /// Room for `n` round trips (n + 1 marks), so marking never allocates.
    pub fn with_capacity(n: u64) -> RoundTrips {
        RoundTrips {
            ticks: Vec::with_capacity(n as usize + 1),
            started: None,
        }
    }

    /// The start of a round trip, which is also the end of the one before.
    #[inline(always)]
    pub fn mark(&mut self) {
        if self.started.is_none() {
            self.started = Some(Instant::now());
        }
        self.ticks.push(ticks());
    }

    /// Half round trips in ns: one per pair of consecutive marks (call `mark` once more after
    /// the last round trip).
    pub fn half_round_trips_ns(self) -> Vec<f64> {
        let (Some(started), [first, .., last]) = (self.started, self.ticks.as_slice()) else {
            return Vec::new();
        };
        let ns_per_tick = started.elapsed().as_nanos() as f64 / (last - first).max(1) as f64;
        self.ticks
            .windows(2)
            .map(|w| (w[1] - w[0]) as f64 * ns_per_tick / 2.0)
            .collect()
    }
}

/// A monotonic counter at a constant rate.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn ticks() -> u64 {
    // SAFETY: rdtsc has no preconditions; the TSC is the kernel's clock source on the machines
    // we measure on (constant and nonstop).
    unsafe { std::arch::x86_64::_rdtsc() }
}

#[cfg(not(target_arch = "x86_64"))]
fn ticks() -> u64 {
    use std::sync::OnceLock;
    static ANCHOR: OnceLock<Instant> = OnceLock::new();
    ANCHOR.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Round trips of at least 2 ms and 4 ms (a sleep never ends early) come out as half round
    /// trips of at least 1 and 2 ms, in order.
    #[test]
    fn samples_are_the_distances_between_marks_halved() {
        let mut rt = RoundTrips::with_capacity(2);
        for d in [2, 4] {
            rt.mark();
            std::thread::sleep(Duration::from_millis(d));
        }
        rt.mark();
        let s = rt.half_round_trips_ns();
        assert_eq!(s.len(), 2);
        assert!(s[0] >= 0.99e6 && s[1] >= 1.99e6, "{s:?}");
    }

    #[test]
    fn fewer_than_two_marks_give_no_sample() {
        let mut rt = RoundTrips::with_capacity(1);
        assert!(
            RoundTrips::with_capacity(0)
                .half_round_trips_ns()
                .is_empty()
        );
        rt.mark();
        assert!(rt.half_round_trips_ns().is_empty());
    }
}
