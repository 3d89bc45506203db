//! The progress engine's timers: one deadline per kind of timed work, on the process clock
//! (`os::clock_ns`). The engine sleeps until the earliest of them or until an fd wakes it.
//!
//! A fixed table, not a heap: there are a handful of kinds, each kept by the work it stands for
//! (the pacing machine knows its queues' next ticks, a link its pause refreshes, a call bell its
//! retries), so the engine needs only each kind's earliest, which the work reports after every
//! run of it. As quinn-proto's connection timers, it is an array indexed by the kind.

/// The kinds of timed work the engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    /// The earliest tick a rate-limited queue waits for (`queue::pacing`).
    Pacing,
    /// The earliest link-level pause machine due (an XOFF refresh, a pause ending, the storm
    /// watchdog) or watch of a busy link (`transport::pause`).
    LinkPause,
    /// A call bell's next look at a WR that rang and has not run (`transport::call_bell`).
    CallBell,
    /// The earliest deadline of a single queue (`progress::Due`): a sender's RNR timeout, a
    /// round its sends need, its shared pool's idle release.
    Deadline,
    /// The next look at the watched queues: doorbells re-armed, peers' pids probed where no
    /// pidfd tells, and the rounds of queues whose peer cannot call for them.
    Sweep,
}

const KINDS: usize = 5;

impl Timer {
    const ALL: [Timer; KINDS] = [
        Timer::Pacing,
        Timer::LinkPause,
        Timer::CallBell,
        Timer::Deadline,
        Timer::Sweep,
    ];
}

/// Each kind's deadline in clock nanoseconds, or none.
#[derive(Debug, Default, Clone, Copy)]
pub struct TimerTable {
    at: [Option<u64>; KINDS],
}

impl TimerTable {
    pub fn set(&mut self, timer: Timer, at: Option<u64>) {
        self.at[timer as usize] = at;
    }

    pub fn get(&self, timer: Timer) -> Option<u64> {
        self.at[timer as usize]
    }

    /// Whether `timer` is set and due at `now`.
    pub fn is_due(&self, timer: Timer, now: u64) -> bool {
        self.get(timer).is_some_and(|at| at <= now)
    }

    /// The earliest deadline and its kind (None: no timer is set).
    pub fn next(&self) -> Option<(Timer, u64)> {
        Timer::ALL
            .iter()
            .filter_map(|&t| self.get(t).map(|at| (t, at)))
            .min_by_key(|&(_, at)| at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_set_timer_is_next_and_only_set_ones_are_due() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        assert!(!t.is_due(Timer::Sweep, u64::MAX));
        t.set(Timer::Sweep, Some(20_000_000));
        t.set(Timer::Pacing, Some(1_500));
        t.set(Timer::CallBell, Some(900_000));
        assert_eq!(t.next(), Some((Timer::Pacing, 1_500)));
        assert!(t.is_due(Timer::Pacing, 1_500) && !t.is_due(Timer::Pacing, 1_499));
        t.set(Timer::Pacing, None);
        assert_eq!(t.next(), Some((Timer::CallBell, 900_000)));
        t.set(Timer::LinkPause, Some(900_000));
        assert_eq!(t.next().map(|(_, at)| at), Some(900_000));
        assert!(!t.is_due(Timer::Pacing, u64::MAX));
    }
}
