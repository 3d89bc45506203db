//! The stall watch: whether a queue with sends pending has had no credit for longer than its
//! stall timeout, reported once per stall (a log line, `UMQ_EVENT_QH_LIMIT`, `credit_stalls`).

use std::time::{Duration, Instant};

/// One queue's watch over its credit. A sender that uses up every credit as it comes (a
/// stream) is at zero whenever it looks, yet not stalled: new credit since the last look starts
/// the wait again.
#[derive(Debug, Default)]
pub struct StallWatch {
    /// Since when the queue has had work waiting and no credit.
    since: Option<Instant>,
    /// The credit the peer had granted in all when the watch last looked.
    credit_seen: u64,
    /// The current stall was reported.
    reported: bool,
    /// Stalls reported since the queue was created.
    stalls: u64,
}

impl StallWatch {
    /// The queue has credit, or starts over (a new binding): no stall is under way.
    pub fn credit_back(&mut self) {
        self.since = None;
        self.reported = false;
    }

    /// The queue has work waiting and no credit at `now`, the peer having granted `received`
    /// in all: how long it has waited, when that is past `limit` and not yet reported (it is
    /// counted then); None otherwise.
    pub fn starving(&mut self, received: u64, limit: Duration, now: Instant) -> Option<Duration> {
        if received != self.credit_seen {
            self.credit_seen = received;
            self.since = None;
        }
        let waited = now.saturating_duration_since(*self.since.get_or_insert(now));
        if self.reported || waited < limit {
            return None;
        }
        self.reported = true;
        self.stalls += 1;
        Some(waited)
    }

    /// Stalls reported since the queue was created.
    pub fn stalls(&self) -> u64 {
        self.stalls
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_millis(100);

    /// A wait past the limit is reported once; new credit starts the wait again; credit back
    /// ends the stall, so the next one is reported too.
    #[test]
    fn a_stall_is_reported_once_and_new_credit_starts_the_wait_again() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let mut w = StallWatch::default();
        assert_eq!(w.starving(5, LIMIT, at(0)), None);
        assert_eq!(w.starving(5, LIMIT, at(99)), None);
        assert_eq!(
            w.starving(5, LIMIT, at(100)),
            Some(Duration::from_millis(100))
        );
        assert_eq!(w.starving(5, LIMIT, at(500)), None, "reported once");
        assert_eq!(w.stalls(), 1);
        // A stream: credit arrives between looks, so the wait starts again each time.
        w.credit_back();
        for (i, ms) in (200..1000).step_by(60).enumerate() {
            assert_eq!(w.starving(6 + i as u64, LIMIT, at(ms)), None);
        }
        assert_eq!(w.stalls(), 1);
        w.credit_back();
        assert_eq!(w.starving(100, LIMIT, at(2000)), None);
        assert_eq!(
            w.starving(100, LIMIT, at(2150)),
            Some(Duration::from_millis(150))
        );
        assert_eq!(w.stalls(), 2);
    }
}
