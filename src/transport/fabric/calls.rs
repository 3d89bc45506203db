//! When our WRs ring the peer's call bell, and when they leave the work to the peer's own
//! progress.
//!
//! Over `tcp` the peer's provider carries out our RMA only as it progresses, and only the
//! peer's library carries out a WR that goes as a message and runs there (a WRITE_IMM, a WRITE
//! or READ into a shared-pool buffer): in its application's polls, or in its progress thread,
//! which sleeps until its bell rings (`transport::call_bell`) and then serves on a thinning
//! schedule. A link keeps one of these machines for its RMA and one for such messages: a peer
//! process polling any queue serves our RMA (its node's endpoint progresses), only one polling
//! the bound queue runs our messages.
//!
//! - **A peer that serves unasked is not rung.** A ring costs us a system call and wakes a
//!   thread at the peer: on a host with few cores, one more thread for the CPUs while the
//!   peer's application is polling anyway (about a tenth of a 64 B WRITE's time to a polling
//!   target). So while the peer serves our WRs unrung, a WR goes without a ring. The peer
//!   counts as serving once a WR that went unrung completed, and as asleep once one needed its
//!   ring: then every WR rings at once, and one is tried unrung again every `RETRY_UNRUNG`,
//!   so that a peer that started polling is noticed.
//! - **WRs that stop moving ring again.** WRs in flight that have seen no completion for
//!   `UNANSWERED` ring, whether they went unrung or not, and again after twice as long while
//!   nothing moves, up to `MOST_QUIET`. A deep stream can need more of a sleeping peer's
//!   progress than one serve gives, and the peer's thread serves a ring only on its own
//!   thinning schedule: 4 KiB READs by RMA, their responses filling the socket, fell to 2-10 k
//!   a second in a quarter of the streams; 1,024 WRITEs of 4 KiB in flight as messages, more
//!   than the peer keeps buffers for, to about 500 a second. The doubling bounds the rings for
//!   WRs that wait on the peer's application (a WRITE_IMM for a receive buffer).
//!
//! The machine is sans-IO: it is told the time, our WRs' sequence numbers and completions, and
//! says when to ring.

use super::node::Stamp;
use std::time::Duration;

/// How long our WRs in flight may see no completion before they ring the peer.
pub const UNANSWERED: Duration = Duration::from_micros(200);
/// The longest WRs in flight wait between rings while nothing moves.
pub const MOST_QUIET: Duration = Duration::from_millis(10);
/// How often a WR to a peer taken for asleep goes unrung, to see whether it serves again.
pub const RETRY_UNRUNG: Duration = Duration::from_millis(20);
/// The bytes of ours a serving peer takes in a nanosecond, at the least: the wait for an
/// answer grows by the time the bytes sent since the last one need to cross (a stream of
/// 4 KiB WRITEs as messages over the UCX engine had 56 in flight, 224 KiB, and no answer
/// after 200 us, from a peer polling all along).
const BYTES_PER_NS: u64 = 1;

#[derive(Debug, Default)]
pub struct PeerCalls {
    /// The peer served our last WR that went unrung.
    serving: bool,
    /// The oldest of our WRs in flight that went unrung (its sequence number).
    unrung_from: Option<u64>,
    /// Since when our WRs in flight have seen neither a completion nor a ring; None while
    /// none is in flight.
    quiet_since: Option<Stamp>,
    /// How long they may stay so before they ring (`UNANSWERED`, doubled at each ring that
    /// moved nothing); zero stands for `UNANSWERED`.
    quiet_for: Duration,
    /// When a WR to a peer taken for asleep next goes unrung.
    retry_at: Stamp,
    /// Bytes of ours sent since the last answer, which the wait for the next one allows for.
    unanswered_bytes: u64,
}

impl PeerCalls {
    /// Our WRs from sequence number `first` on want the peer: true to ring now, false to leave
    /// them to the peer's own progress (`overdue` rings if it does not come).
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

    /// Whether our WRs in flight have gone `UNANSWERED` without a completion: then they ring
    /// now, and if some had gone unrung, the peer counts as asleep.
    pub fn overdue(&mut self, now: Stamp) -> bool {
        let crossing = Duration::from_nanos(self.unanswered_bytes / BYTES_PER_NS);
        let quiet_for = self.quiet_for.max(UNANSWERED) + crossing;
        match self.quiet_since {
            Some(since) if now >= since.after(quiet_for) => {
                if self.unrung_from.is_some() {
                    self.asleep(now);
                }
                self.quiet_since = Some(now);
                self.quiet_for = (quiet_for * 2).min(MOST_QUIET);
                true
            }
            _ => false,
        }
    }

    /// Our WRs do not move (the progress engine found the queue stuck): the peer is not
    /// serving them.
    pub fn asleep(&mut self, now: Stamp) {
        self.serving = false;
        self.unrung_from = None;
        self.retry_at = now.after(RETRY_UNRUNG);
    }

    /// Our WR `seq` completed (or was refused: the peer answered either way), with more of
    /// those that want the peer still in flight or not. One that went unrung shows the peer
    /// serving.
    pub fn completed(&mut self, seq: u64, now: Stamp, more_in_flight: bool) {
        if self.unrung_from.is_some_and(|first| seq >= first) {
            self.serving = true;
            self.unrung_from = None;
        }
        if !more_in_flight {
            self.unrung_from = None;
        }
        self.quiet_since = more_in_flight.then_some(now);
        self.quiet_for = UNANSWERED;
        self.unanswered_bytes = 0;
    }

    /// `bytes` of ours went that the peer's library must take in before it answers them.
    #[inline]
    pub fn sent(&mut self, bytes: u64) {
        self.unanswered_bytes = self.unanswered_bytes.saturating_add(bytes);
    }

    /// The next WR goes unrung again, to see whether the peer serves (it was serving until
    /// something of ours went unanswered for a while, which a busy host's stop can do too).
    pub fn retry_now(&mut self, now: Stamp) {
        self.retry_at = self.retry_at.min(now);
    }

    /// Nothing of ours waits on the peer, or went unrung: a completion would tell nothing.
    #[inline]
    pub fn idle(&self) -> bool {
        self.unrung_from.is_none() && self.quiet_since.is_none()
    }

    /// Whether the peer counts as serving our WRs unrung.
    pub fn serving(&self) -> bool {
        self.serving
    }

    /// Whether WRs sent now would be left to the peer's own progress: it serves them unrung,
    /// or it is time to see again whether it does (none are out unrung meanwhile).
    pub fn tries_unrung(&self, now: Stamp) -> bool {
        self.serving || (self.unrung_from.is_none() && now >= self.retry_at)
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
        let mut c = PeerCalls::default();
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
        let mut c = PeerCalls::default();
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
        let mut c = PeerCalls::default();
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
        let mut c = PeerCalls::default();
        c.asleep(at(0));
        assert!(c.ring_now(1, at(0)));
        c.completed(1, at(50), true);
        c.completed(2, at(60), true);
        assert!(!c.overdue(at(259)));
        assert!(c.overdue(at(260)));
        // Nothing moved: twice as long before the next ring, and so on up to `MOST_QUIET`.
        assert!(!c.overdue(at(659)));
        assert!(c.overdue(at(660)));
        assert!(!c.overdue(at(1459)));
        assert!(c.overdue(at(1460)));
        let mut t = 1460;
        for _ in 0..10 {
            t += 10_000;
            assert!(c.overdue(at(t)));
        }
        assert!(!c.overdue(at(t + 9_999)));
        // A completion: the wait is short again.
        c.completed(3, at(t + 10), true);
        assert!(c.overdue(at(t + 210)));
        c.completed(4, at(t + 220), false);
        assert!(!c.overdue(at(t + 100_000)), "nothing in flight");
    }

    /// The wait for an answer allows for the bytes sent since the last one to cross: 224 KiB
    /// unanswered after `UNANSWERED` is not overdue yet, and is once their time has passed too;
    /// an answer starts the count again.
    #[test]
    fn a_long_batch_has_the_time_to_cross() {
        let mut c = PeerCalls::default();
        assert!(!c.ring_now(1, at(0)));
        c.sent(224 << 10);
        assert!(!c.overdue(at(300)), "229 us of bytes on top of 200 us");
        c.completed(1, at(300), true);
        assert!(c.serving());
        c.sent(4096);
        assert!(!c.overdue(at(503)));
        assert!(
            c.overdue(at(505)),
            "counted again from the answer: 200 us and 4 us"
        );
    }

    /// A serving peer whose answers stopped for a while is taken for asleep and rung; told to
    /// retry now (a stream's wait, not the engine's verdict), the next WR goes unrung again,
    /// and one answered so shows the peer serving.
    #[test]
    fn a_retry_now_goes_unrung_at_once() {
        let mut c = PeerCalls::default();
        assert!(!c.ring_now(1, at(0)));
        c.completed(1, at(50), false);
        assert!(c.serving());
        assert!(!c.ring_now(2, at(100)));
        assert!(c.overdue(at(300)));
        assert!(!c.serving());
        c.completed(2, at(320), false); // after the ring: says nothing
        assert!(c.ring_now(3, at(400)), "asleep: rung until the retry");
        c.completed(3, at(450), false);
        c.retry_now(at(500));
        assert!(!c.ring_now(4, at(500)));
        c.completed(4, at(540), false);
        assert!(c.serving());
    }

    /// A completion of an RMA older than the unrung ones (one that was rung) does not show the
    /// peer serving; the last completion ends the wait.
    #[test]
    fn only_an_unrung_rma_shows_the_peer_serving() {
        let mut c = PeerCalls::default();
        c.asleep(at(0));
        assert!(c.ring_now(1, at(0))); // rung
        assert!(!c.ring_now(2, at(20_000))); // the retry, unrung
        c.completed(1, at(20_050), true);
        assert!(!c.serving());
        c.completed(2, at(20_060), false);
        assert!(c.serving());
        assert!(!c.overdue(at(30_000)));
        let mut c = PeerCalls::default();
        assert!(!c.ring_now(7, at(0)));
        c.completed(3, at(10), false);
        assert!(!c.serving() && !c.overdue(at(1000)));
    }

    /// Idle once nothing waits: before any WR, and after the last completion.
    #[test]
    fn idle_once_nothing_waits() {
        let mut c = PeerCalls::default();
        assert!(c.idle());
        assert!(!c.ring_now(1, at(0)));
        assert!(!c.idle());
        c.completed(1, at(10), true);
        assert!(!c.idle());
        c.completed(2, at(20), false);
        assert!(c.idle());
    }

    /// The progress engine's finding (our RMAs stuck) makes the next RMA ring at once.
    #[test]
    fn stuck_rmas_ring_at_once() {
        let mut c = PeerCalls::default();
        assert!(!c.ring_now(1, at(0)));
        c.completed(1, at(10), false);
        assert!(c.serving());
        c.asleep(at(100));
        assert!(c.ring_now(2, at(100)));
        assert!(c.ring_now(3, at(20_099)));
        assert!(!c.ring_now(4, at(20_100)));
    }
}
