//! When our RMA rings the peer's call bell, and when it leaves the work to the peer's own
//! progress.
//!
//! Over `tcp` the peer's provider carries out our RMA only as it progresses: in its
//! application's polls, or in its progress thread, which sleeps until its bell rings
//! (`transport::call_bell`) and then serves for a few milliseconds on a thinning schedule.
//!
//! - **A peer that serves unasked is not rung.** A ring costs us a system call and wakes a
//!   thread at the peer: on a host with few cores, one more thread for the CPUs while the
//!   peer's application is polling anyway. So while the peer serves our RMA unrung, an RMA
//!   goes without a ring. The peer counts as serving once an RMA that went unrung completed,
//!   and as asleep once one needed its ring: then every RMA rings at once, and one is tried
//!   unrung again every `RETRY_UNRUNG`, so that a peer that started polling is noticed.
//! - **RMA that stops moving rings again.** Whatever went before, our RMAs in flight that have
//!   seen no completion (and no ring) for `UNANSWERED` ring. A stream of READs can need more
//!   of the peer's progress than one serve gives (its responses fill the socket), and the
//!   peer's thread serves a ring only on its own thinning schedule.
//!
//! The machine is sans-IO: it is told the time, our RMAs' sequence numbers and completions,
//! and says when to ring.

use super::node::Stamp;
use std::time::Duration;

/// How long our RMAs in flight may see no completion before they ring the peer.
pub const UNANSWERED: Duration = Duration::from_micros(200);
/// How often an RMA to a peer taken for asleep goes unrung, to see whether it serves again.
pub const RETRY_UNRUNG: Duration = Duration::from_millis(20);

#[derive(Debug, Default)]
pub struct RmaCalls {
    /// The peer's provider served our last RMA that went unrung.
    serving: bool,
    /// The oldest of our RMAs in flight that went unrung (its sequence number).
    unrung_from: Option<u64>,
    /// Since when our RMAs in flight have seen neither a completion nor a ring; None while
    /// none is in flight.
    quiet_since: Option<Stamp>,
    /// When an RMA to a peer taken for asleep next goes unrung.
    retry_at: Stamp,
}

impl RmaCalls {
    /// Our RMAs from sequence number `first` on want the peer's provider: true to ring now,
    /// false to leave them to the peer's own progress (`overdue` rings if it does not come).
    pub fn ring_now(&mut self, first: u64, now: Stamp) -> bool {
        self.quiet_since = Some(now);
        if self.unrung_from.is_some() {
            return false; // older ones wait unrung: the peer serves these with them, or not
        }
        if !self.serving && now < self.retry_at {
            return true;
        }
        if !self.serving {
            self.retry_at = now.after(RETRY_UNRUNG);
        }
        self.unrung_from = Some(first);
        false
    }

    /// Whether our RMAs in flight have gone `UNANSWERED` without a completion: then they ring
    /// now, and if some had gone unrung, the peer counts as asleep.
    pub fn overdue(&mut self, now: Stamp) -> bool {
        match self.quiet_since {
            Some(since) if now >= since.after(UNANSWERED) => {
                if self.unrung_from.is_some() {
                    self.asleep(now);
                }
                self.quiet_since = Some(now);
                true
            }
            _ => false,
        }
    }

    /// Our RMAs do not move (the progress engine found the queue stuck): the peer is not
    /// serving them.
    pub fn asleep(&mut self, now: Stamp) {
        self.serving = false;
        self.unrung_from = None;
        self.retry_at = now.after(RETRY_UNRUNG);
    }

    /// Our RMA `seq` completed (or was refused: the peer's provider answered either way), with
    /// more of them still in flight or not. One that went unrung shows the peer serving.
    pub fn completed(&mut self, seq: u64, now: Stamp, more_in_flight: bool) {
        if self.unrung_from.is_some_and(|first| seq >= first) {
            self.serving = true;
            self.unrung_from = None;
        }
        if !more_in_flight {
            self.unrung_from = None;
        }
        self.quiet_since = more_in_flight.then_some(now);
    }

    /// Whether the peer counts as serving our RMAs unrung.
    #[cfg(test)]
    pub fn serving(&self) -> bool {
        self.serving
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(us: u64) -> Stamp {
        Stamp::default().after(Duration::from_micros(us))
    }

    /// The first RMA goes unrung; served within `UNANSWERED`, the peer serves, and the next
    /// ones go unrung too.
    #[test]
    fn a_peer_that_serves_is_never_rung() {
        let mut c = RmaCalls::default();
        assert!(!c.ring_now(1, at(0)));
        assert!(!c.overdue(at(150)));
        c.completed(1, at(150), false);
        assert!(c.serving());
        for seq in 2..100 {
            let t = at(seq * 1000);
            assert!(!c.ring_now(seq, t));
            assert!(!c.overdue(t.after(UNANSWERED / 2)));
            c.completed(seq, t.after(UNANSWERED / 2), false);
            assert!(!c.overdue(t.after(UNANSWERED * 10)));
        }
        assert!(c.serving());
    }

    /// An RMA the peer does not serve within `UNANSWERED` rings; then the peer is asleep and
    /// every RMA rings at once, until `RETRY_UNRUNG` has passed.
    #[test]
    fn a_sleeping_peer_is_rung_at_once_until_the_retry() {
        let mut c = RmaCalls::default();
        assert!(!c.ring_now(1, at(0)));
        assert!(!c.overdue(at(199)));
        assert!(c.overdue(at(200)));
        assert!(!c.serving());
        c.completed(1, at(240), false); // served after the ring: says nothing
        assert!(!c.serving());
        assert!(c.ring_now(2, at(300)));
        c.completed(2, at(340), false);
        assert!(c.ring_now(3, at(20_100)));
        c.completed(3, at(20_140), false);
        // The retry: unrung again, and served unrung, so the peer serves once more.
        assert!(!c.ring_now(4, at(20_200)));
        c.completed(4, at(20_250), false);
        assert!(c.serving());
        assert!(!c.ring_now(5, at(20_300)));
    }

    /// While RMAs stream, each completion restarts the wait for the ones behind it; newer RMAs
    /// started meanwhile ride on the older ones' wait.
    #[test]
    fn a_stream_waits_from_the_last_completion() {
        let mut c = RmaCalls::default();
        assert!(!c.ring_now(1, at(0)));
        assert!(!c.ring_now(5, at(10)));
        c.completed(1, at(150), true);
        assert!(c.serving());
        assert!(!c.overdue(at(300))); // 150 us since the last completion
        assert!(c.overdue(at(350)));
        assert!(c.serving(), "the peer served: nothing went unrung since");
    }

    /// A rung stream whose RMAs stop completing (the peer's serve ended with work left) rings
    /// again once they have been quiet for `UNANSWERED`, and again after as long.
    #[test]
    fn a_rung_stream_that_stops_moving_rings_again() {
        let mut c = RmaCalls::default();
        c.asleep(at(0));
        assert!(c.ring_now(1, at(0)));
        c.completed(1, at(50), true);
        c.completed(2, at(60), true);
        assert!(!c.overdue(at(259)));
        assert!(c.overdue(at(260)));
        assert!(!c.overdue(at(459)));
        assert!(c.overdue(at(460)));
        c.completed(3, at(470), false);
        assert!(!c.overdue(at(10_000)), "nothing in flight");
    }

    /// A completion of an RMA older than the unrung ones (one that was rung) does not show the
    /// peer serving; the last completion ends the wait.
    #[test]
    fn only_an_unrung_rma_shows_the_peer_serving() {
        let mut c = RmaCalls::default();
        c.asleep(at(0));
        assert!(c.ring_now(1, at(0))); // rung
        assert!(!c.ring_now(2, at(20_000))); // the retry, unrung
        c.completed(1, at(20_050), true);
        assert!(!c.serving());
        c.completed(2, at(20_060), false);
        assert!(c.serving());
        assert!(!c.overdue(at(30_000)));
        let mut c = RmaCalls::default();
        assert!(!c.ring_now(7, at(0)));
        c.completed(3, at(10), false);
        assert!(!c.serving() && !c.overdue(at(1000)));
    }

    /// The progress engine's finding (our RMAs stuck) makes the next RMA ring at once.
    #[test]
    fn stuck_rmas_ring_at_once() {
        let mut c = RmaCalls::default();
        assert!(!c.ring_now(1, at(0)));
        c.completed(1, at(10), false);
        assert!(c.serving());
        c.asleep(at(100));
        assert!(c.ring_now(2, at(100)));
        assert!(c.ring_now(3, at(20_099)));
        assert!(!c.ring_now(4, at(20_100)));
    }
}
