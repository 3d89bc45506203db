//! One link's pause state, as a sans-IO machine on a caller's clock (nanoseconds): what the
//! peer's pause frames stop, the frames our own backlog asks the peer for, and the storm
//! watchdog. The seed's receive flow control of a MAC (RFE, PFCE, unicast pause, a timer per
//! priority, reload on each frame) and SONiC's pfcwd.
//!
//! Inputs: `handle_frame` (a control frame from the peer), `set_backlog` (what the peer has
//! put in our rings and the application has not taken, per priority) and `set_pending`
//! (whether we have work waiting per priority, for the watchdog). Outputs: `may_start` (may a
//! message of this priority start now), `poll_transmit` (a pause frame to send), `poll_event`
//! (a watchdog trip or restore), `next_timeout` (when to call again). A clock that goes back
//! (a caller's mistake) never makes a counter wrap.

use super::frame::{self, Pause, PauseFrame};

pub const PRIORITIES: usize = 8;
/// Bit times in one pause quantum.
const QUANTUM_BITS: u128 = 512;

/// What happens to a control frame that is not a pause frame, and to pause frames, once counted
/// (the seed's pass-control-frames setting).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum PassControl {
    /// Dropped.
    #[default]
    None,
    /// Handed to the application, pause frames excepted.
    AllButPause,
    /// Handed to the application, pause frames too.
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Receive flow control: act on the peer's pause frames.
    pub rfe: bool,
    /// Priority flow control: act on PFC frames per priority (with RFE).
    pub pfce: bool,
    /// Also accept pause frames addressed to `address` (not only the pause multicast).
    pub unicast_pause: bool,
    pub address: [u8; 6],
    /// Link speed, for the length of a quantum.
    pub speed_bps: u64,
    pub pass: PassControl,
    /// Our backlog of a priority above this asks the peer to pause it; below `xon` to resume.
    pub xoff_bytes: u64,
    pub xon_bytes: u64,
    /// Quanta our pause frames ask for (refreshed at half that while the backlog stays).
    pub pause_quanta: u16,
    pub watchdog_detect_ns: u64,
    pub watchdog_restore_ns: u64,
}

impl Config {
    /// Defaults for a link of `speed_bps` with round trip `rtt_ns`: XOFF leaves room for what
    /// is in flight during one round trip after we ask (switch headroom is sized so), twice
    /// that for the frame's own way and the peer's reaction; XON is half of XOFF. The watchdog
    /// as SONiC's pfcwd: 200 ms to detect, 200 ms to restore.
    pub fn for_link(speed_bps: u64, rtt_ns: u64, address: [u8; 6]) -> Config {
        let in_flight = (speed_bps as u128 * rtt_ns as u128 / 8 / 1_000_000_000) as u64;
        let xoff = (2 * in_flight).max(4 * 1024);
        Config {
            rfe: true,
            pfce: true,
            unicast_pause: false,
            address,
            speed_bps,
            pass: PassControl::None,
            xoff_bytes: xoff,
            xon_bytes: xoff / 2,
            pause_quanta: 0xffff,
            watchdog_detect_ns: 200_000_000,
            watchdog_restore_ns: 200_000_000,
        }
    }
}

/// Counters of one priority, named as Linux's `ieee_pfc` names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PriorityStats {
    /// Pause frames received that covered this priority.
    pub indications: u64,
    /// Pause frames we sent for it.
    pub requests: u64,
    pub paused_ns: u64,
    pub watchdog_trips: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct LinkStats {
    pub priorities: [PriorityStats; PRIORITIES],
    /// Whole-link PAUSE frames received, and the time they stopped the link.
    pub link_pauses: u64,
    pub link_paused_ns: u64,
    /// Control frames that were not pause frames (other opcodes, bad FCS, wrong length or
    /// address).
    pub other_control: u64,
}

/// What became of a frame from the peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Acted on (or ignored by configuration) and consumed.
    Consumed,
    /// To be handed to the application (`PassControl`).
    Pass,
    /// Dropped (not a pause frame, and not passed).
    Dropped,
}

/// A watchdog event, for the application as an async event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The peer kept the priority paused past the detection time while we had work: its
    /// pause is no longer honoured.
    StormDetected(u8),
    /// No pause for the restoration time: honoured again.
    StormRestored(u8),
}

#[derive(Clone, Copy, Debug, Default)]
struct Priority {
    /// Paused by the peer until then (0: not paused).
    paused_until: u64,
    /// When the current pause began.
    paused_since: Option<u64>,
    /// The last pause frame for this priority.
    last_frame: u64,
    /// We have work waiting of this priority.
    pending: bool,
    /// The watchdog stopped honouring the peer for this priority.
    storm: bool,
    /// Our pause of the peer: asserted, and when to refresh it.
    asserting: bool,
    refresh_at: u64,
    /// A frame for this priority is due (XOFF, refresh or XON).
    frame_due: bool,
}

pub struct PauseLink {
    cfg: Config,
    prio: [Priority; PRIORITIES],
    /// The whole link paused (802.3x) until then.
    link_until: u64,
    link_since: Option<u64>,
    stats: LinkStats,
    events: Vec<Event>,
}

impl PauseLink {
    pub fn new(cfg: Config) -> PauseLink {
        PauseLink {
            cfg,
            prio: Default::default(),
            link_until: 0,
            link_since: None,
            stats: LinkStats::default(),
            events: Vec::new(),
        }
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    pub fn set_config(&mut self, cfg: Config) {
        self.cfg = cfg;
    }

    /// Nanoseconds `quanta` pause quanta last at the link's speed, rounded up (the error is
    /// under a nanosecond, far within one quantum).
    pub fn quanta_ns(&self, quanta: u16) -> u64 {
        let bits = quanta as u128 * QUANTUM_BITS * 1_000_000_000;
        bits.div_ceil(self.cfg.speed_bps.max(1) as u128) as u64
    }

    /// A control frame from the peer.
    pub fn handle_frame(&mut self, now: u64, bytes: &[u8]) -> Verdict {
        let unicast = self.cfg.unicast_pause.then_some(self.cfg.address);
        let f = match frame::decode(bytes, unicast) {
            Ok(f) => f,
            Err(_not_pause) => {
                self.stats.other_control += 1;
                return match self.cfg.pass {
                    PassControl::None => Verdict::Dropped,
                    _ => Verdict::Pass,
                };
            }
        };
        self.act_on(now, &f);
        match self.cfg.pass {
            PassControl::All => Verdict::Pass,
            _ => Verdict::Consumed,
        }
    }

    fn act_on(&mut self, now: u64, f: &PauseFrame) {
        match f.pause {
            Pause::Link { quanta } => {
                self.stats.link_pauses += 1;
                if self.cfg.rfe {
                    let until = self.deadline(now, quanta);
                    self.reload_link(now, until);
                }
            }
            Pause::Priorities { enabled, quanta } => {
                for p in (0..PRIORITIES).filter(|&p| enabled & 1 << p != 0) {
                    self.stats.priorities[p].indications += 1;
                    self.prio[p].last_frame = now;
                    // PFC detection off: a PFC frame is not acted on (the seed's MAC pauses
                    // the whole transmitter on PAUSE frames only). During a storm the
                    // priority's frames are counted and not honoured (pfcwd's action).
                    if self.cfg.rfe && self.cfg.pfce && !self.prio[p].storm {
                        let until = self.deadline(now, quanta[p]);
                        self.reload(now, p, until);
                    }
                }
            }
        }
    }

    /// When a pause of `quanta` from `now` ends; 0 resumes at once.
    fn deadline(&self, now: u64, quanta: u16) -> u64 {
        if quanta == 0 {
            0
        } else {
            now + self.quanta_ns(quanta)
        }
    }

    /// A new frame reloads the timer: the new end replaces the old (never adds to it).
    fn reload(&mut self, now: u64, p: usize, until: u64) {
        self.expire(now);
        let pr = &mut self.prio[p];
        if until > now {
            pr.paused_since.get_or_insert(now);
            pr.paused_until = until;
        } else if let Some(since) = pr.paused_since.take() {
            self.stats.priorities[p].paused_ns += now.saturating_sub(since);
            pr.paused_until = 0;
        }
    }

    fn reload_link(&mut self, now: u64, until: u64) {
        self.expire(now);
        if until > now {
            self.link_since.get_or_insert(now);
            self.link_until = until;
        } else if let Some(since) = self.link_since.take() {
            self.stats.link_paused_ns += now.saturating_sub(since);
            self.link_until = 0;
        }
    }

    /// Ends the pauses whose time is up, counting the time they lasted; runs the watchdog.
    fn expire(&mut self, now: u64) {
        if self.link_until != 0 && self.link_until <= now {
            if let Some(since) = self.link_since.take() {
                self.stats.link_paused_ns += self.link_until - since;
            }
            self.link_until = 0;
        }
        for p in 0..PRIORITIES {
            let pr = &mut self.prio[p];
            if pr.paused_until != 0 && pr.paused_until <= now {
                if let Some(since) = pr.paused_since.take() {
                    self.stats.priorities[p].paused_ns += pr.paused_until - since;
                }
                pr.paused_until = 0;
            }
            self.watchdog(now, p);
        }
    }

    fn watchdog(&mut self, now: u64, p: usize) {
        let cfg = self.cfg;
        let pr = &mut self.prio[p];
        if !pr.storm {
            let stuck = pr
                .paused_since
                .is_some_and(|since| now.saturating_sub(since) >= cfg.watchdog_detect_ns);
            if stuck && pr.pending {
                pr.storm = true;
                // The pause is dropped, not suspended: once restored, the priority waits
                // only for a new frame, never for what is left of this one.
                if let Some(since) = pr.paused_since.take() {
                    self.stats.priorities[p].paused_ns += now.saturating_sub(since);
                }
                pr.paused_until = 0;
                self.stats.priorities[p].watchdog_trips += 1;
                self.events.push(Event::StormDetected(p as u8));
            }
        } else if now.saturating_sub(pr.last_frame) >= cfg.watchdog_restore_ns {
            pr.storm = false;
            self.events.push(Event::StormRestored(p as u8));
        }
    }

    /// Whether a message of `priority` may start now.
    pub fn may_start(&mut self, now: u64, priority: u8) -> bool {
        self.expire(now);
        let p = &self.prio[priority as usize % PRIORITIES];
        self.link_until == 0 && (p.paused_until == 0 || p.storm)
    }

    /// Whether we have work of `priority` waiting (the watchdog trips only then).
    pub fn set_pending(&mut self, now: u64, priority: u8, pending: bool) {
        self.prio[priority as usize % PRIORITIES].pending = pending;
        self.expire(now);
    }

    /// Our receive backlog of `priority`: above XOFF we ask the peer to pause it (and keep
    /// asking before the pause runs out), below XON to resume.
    pub fn set_backlog(&mut self, now: u64, priority: u8, bytes: u64) {
        let refresh = self.quanta_ns(self.cfg.pause_quanta) / 2;
        let (xoff, xon) = (self.cfg.xoff_bytes, self.cfg.xon_bytes);
        let pr = &mut self.prio[priority as usize % PRIORITIES];
        if !pr.asserting && bytes > xoff {
            pr.asserting = true;
            pr.frame_due = true;
            pr.refresh_at = now + refresh;
        } else if pr.asserting && bytes < xon {
            pr.asserting = false;
            pr.frame_due = true;
        }
    }

    /// The next pause frame to send, if one is due: one PFC frame covers every priority with
    /// something to say (a pause, its refresh, or a zero-time resume).
    pub fn poll_transmit(&mut self, now: u64) -> Option<[u8; frame::FRAME_BYTES]> {
        let refresh = self.quanta_ns(self.cfg.pause_quanta) / 2;
        let mut enabled = 0u8;
        let mut quanta = [0u16; PRIORITIES];
        for (p, pr) in self.prio.iter_mut().enumerate() {
            if pr.asserting && now >= pr.refresh_at {
                pr.frame_due = true;
            }
            if !pr.frame_due {
                continue;
            }
            pr.frame_due = false;
            enabled |= 1 << p;
            if pr.asserting {
                quanta[p] = self.cfg.pause_quanta;
                pr.refresh_at = now + refresh;
            }
            self.stats.priorities[p].requests += 1;
        }
        (enabled != 0).then(|| {
            frame::encode(&PauseFrame {
                dst: frame::PAUSE_MULTICAST,
                src: self.cfg.address,
                pause: Pause::Priorities { enabled, quanta },
            })
        })
    }

    /// A watchdog event, if one happened.
    pub fn poll_event(&mut self) -> Option<Event> {
        (!self.events.is_empty()).then(|| self.events.remove(0))
    }

    /// When the machine next needs a call: a pause ending, a refresh due, the watchdog.
    pub fn next_timeout(&self) -> Option<u64> {
        let cfg = &self.cfg;
        let link = (self.link_until != 0).then_some(self.link_until);
        let per_priority = self.prio.iter().flat_map(|pr| {
            let end = (pr.paused_until != 0).then_some(pr.paused_until);
            let refresh = pr.asserting.then_some(pr.refresh_at);
            let detect = match (pr.paused_since, pr.storm, pr.pending) {
                (Some(since), false, true) => Some(since + cfg.watchdog_detect_ns),
                _ => None,
            };
            let restore = pr.storm.then_some(pr.last_frame + cfg.watchdog_restore_ns);
            [end, refresh, detect, restore]
        });
        link.into_iter().chain(per_priority.flatten()).min()
    }

    /// The counters, with pauses still running counted up to `now`.
    pub fn stats(&mut self, now: u64) -> LinkStats {
        self.expire(now);
        let mut s = self.stats;
        if let Some(since) = self.link_since {
            s.link_paused_ns += now.saturating_sub(since);
        }
        for (p, pr) in self.prio.iter().enumerate() {
            if let Some(since) = pr.paused_since {
                s.priorities[p].paused_ns += now.saturating_sub(since);
            }
        }
        s
    }
}

#[cfg(test)]
mod tests;
