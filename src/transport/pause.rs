//! Link-level pause between two processes (flow-control system 5; the machine is
//! `flow::pfc::link`). A *link* is what every queue bound to the same peer shares: one per peer
//! process (shared memory) or network peer, whatever the number of queue pairs between them.
//! Its control frames travel in-band, in the ring or the message stream of whichever of its
//! queue pairs runs a round next, and a frame that arrives on any of them acts on all.
//!
//! Each queue has a priority (0-7). A priority the peer paused stops its queues from starting
//! new messages (or packets, when they are rate limited); the others run on. The providers ask
//! `may_start` before they start one: one atomic load while nothing is paused. The queue layer
//! reports each queue's receive backlog and pending work after its rounds (`report`), takes the
//! frames to send (`take_frame`) and the watchdog's events (`take_event`).

use crate::flow::pfc::link::{Config, Event, LinkStats, PRIORITIES, PauseLink, Verdict};
use crate::os::clock_ns;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

/// Which peer a link reaches: the provider's name and the peer's identity in it.
pub type PeerKey = Vec<u8>;

/// The speed a link is timed at until configured: pause quanta of 512 bit times at 100 Gbit/s.
pub const DEFAULT_SPEED_BPS: u64 = 100_000_000_000;
/// The round trip the default XOFF is sized for (shared memory between two cores: a few
/// microseconds, the network provider over loopback tens).
const DEFAULT_RTT_NS: u64 = 20_000;
/// Frames passed to the application and not yet read, at most (older ones are dropped).
const PASSED_MAX: usize = 64;
/// The largest control frame a link carries (an Ethernet frame without VLAN tag).
pub const MAX_FRAME: usize = 1518;
/// The smallest: destination, source and EtherType.
pub const MIN_FRAME: usize = 14;

/// A link's settings as the application sets them: the machine's, and whether our receive
/// backlog makes us send XOFF / XON (off by default: a library that paused its peer by itself
/// would change what unconfigured programs see).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub machine: Config,
    pub emit: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            machine: Config::for_link(DEFAULT_SPEED_BPS, DEFAULT_RTT_NS, [0x02, 0, 0, 0, 0, 1]),
            emit: false,
        }
    }
}

struct State {
    machine: PauseLink,
    emit: bool,
    outbox: VecDeque<Vec<u8>>,
    passed: VecDeque<Vec<u8>>,
    passed_dropped: u64,
    /// Per queue (handle): its priority, receive backlog in bytes, and whether it has work
    /// waiting to go; and their sums per priority, kept as queues report (a report costs the
    /// same with ten queues on the link or ten thousand).
    queues: HashMap<u64, (u8, u64, bool)>,
    backlog: [u64; PRIORITIES],
    waiting: [u32; PRIORITIES],
    events: VecDeque<Event>,
    /// The backlog the servant last reported.
    servant_backlog: u64,
}

/// The most a queue's backlog counts for (1 TiB, far above any XOFF): the sums per priority
/// then never overflow, whatever the number of queues.
pub const BACKLOG_MAX: u64 = 1 << 40;

impl State {
    /// Adds (`sign` 1) or takes away (-1) a queue's report in the sums per priority.
    fn account(&mut self, report: Option<(u8, u64, bool)>, sign: i64) {
        let Some((p, bytes, pending)) = report else {
            return;
        };
        let p = p as usize;
        self.backlog[p] = self.backlog[p].wrapping_add_signed(sign * bytes.min(BACKLOG_MAX) as i64);
        self.waiting[p] = self.waiting[p].wrapping_add_signed(sign as i32 * pending as i32);
    }
}

pub struct LinkPause {
    state: Mutex<State>,
    /// The priorities paused as the machine last said (bit p): a message of a priority not
    /// in it starts without taking the lock.
    paused: AtomicU8,
    /// Something for the rounds to do: frames to send, a backlog to watch, timers running.
    busy: AtomicBool,
    /// Queues bound over the link now.
    members: AtomicUsize,
    /// While busy, the engine watches the queues (`WATCH_EVERY_NS`), next at `watch_at`, from
    /// queue number `watch_from` on.
    watch_at: AtomicU64,
    watch_from: AtomicUsize,
    /// When the machine next needs a call (ns on the links' clock, 0: no timer runs): a
    /// refresh of our XOFF, a pause ending, the watchdog. The progress thread wakes for it.
    due_ns: AtomicU64,
    /// How long past `due_ns` the progress thread leaves a timer to the application's own
    /// rounds while the application calls in (a quarter of our pause time): it then serves the
    /// timer itself, and the thread, waking later, finds nothing to do and takes no lock.
    slack_ns: AtomicU64,
    /// When a round of the application's (not the progress thread's) last reported.
    app_reported_ns: AtomicU64,
    /// A queue of the link whose round serves it when no application calls in (0: none yet):
    /// the one with the largest receive backlog as they last reported. Its peer is the queue
    /// sending what we do not take, the one the peer's application drives and polls, so a
    /// frame sent on that pair is seen at once.
    servant: AtomicU64,
}

/// A queue's place on its link: what the providers consult.
#[derive(Clone)]
pub struct PauseGate {
    pub link: Arc<LinkPause>,
    pub priority: u8,
}

impl PauseGate {
    /// Whether a message of this queue may start now.
    #[inline(always)]
    pub fn may_start(&self) -> bool {
        self.link.may_start(self.priority)
    }
}

/// Whether any link of the process has had something to do (a frame, a setting, a raw send):
/// until then the data path's checks stop at this one load. Never cleared.
static IN_USE: AtomicBool = AtomicBool::new(false);

/// Whether link-level pause may concern the data path at all.
#[inline(always)]
pub fn in_use() -> bool {
    IN_USE.load(Ordering::Relaxed)
}

/// A control frame a provider received for the queue at `gate` (None: a queue not on a link,
/// being unbound: the frame is dropped). Err for a length no frame has: the peer is corrupt.
pub fn receive_frame(gate: Option<&PauseGate>, frame: &[u8]) -> Result<(), super::LinkError> {
    if !(MIN_FRAME..=MAX_FRAME).contains(&frame.len()) {
        return Err(super::LinkError::Corrupt(
            "control frame length out of range",
        ));
    }
    if let Some(g) = gate {
        g.link.on_frame(frame);
    }
    Ok(())
}

thread_local! {
    /// Set on the thread that serves the links' timers (the progress thread).
    static SERVING_TIMERS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the calling thread as the one that serves the links' timers (`timers`): its reports
/// are not the application calling in, which a link's pause machine tells apart.
pub fn serve_timers_on_this_thread() {
    SERVING_TIMERS.set(true);
}

fn registry() -> MutexGuard<'static, HashMap<PeerKey, Weak<LinkPause>>> {
    static LINKS: OnceLock<Mutex<HashMap<PeerKey, Weak<LinkPause>>>> = OnceLock::new();
    LINKS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// The link to the peer `key`, joined by queue `handle` of `priority`; made on the first
/// binding to it, it lives while a queue is bound over it (a binding after that starts a new
/// one, with the default settings).
pub fn attach(key: PeerKey, handle: u64, priority: u8) -> Arc<LinkPause> {
    let mut links = registry();
    let link = links.get(&key).and_then(Weak::upgrade).unwrap_or_else(|| {
        links.retain(|_, l| l.strong_count() > 0);
        let link = Arc::new(LinkPause::new(Settings::default()));
        links.insert(key, Arc::downgrade(&link));
        link
    });
    link.members.fetch_add(1, Ordering::Relaxed);
    link.join(handle, priority);
    link
}

/// The links' timers as the progress thread needs them: a queue to run a round for on each
/// link whose machine is due by `now` (a refresh of our XOFF cannot wait for the thread's next
/// tick: at 100 Gbit/s a pause lasts 335 µs, refreshed at half that), or due for its slack
/// while the application calls in, and the earliest such time after `now`.
pub fn timers(now: u64) -> (Vec<u64>, Option<u64>) {
    if !in_use() {
        return (Vec::new(), None);
    }
    let mut due = Vec::new();
    let mut next: Option<u64> = None;
    for link in registry().values().filter_map(Weak::upgrade) {
        let at = match link.due_ns.load(Ordering::Relaxed) {
            0 => continue,
            at => at,
        };
        let slack = link.slack_ns.load(Ordering::Relaxed);
        let app_calls_in = now.saturating_sub(link.app_reported_ns.load(Ordering::Relaxed)) < slack;
        let t = if app_calls_in { at + slack } else { at };
        match t {
            t if t <= now => match link.servant.load(Ordering::Relaxed) {
                0 => {}
                handle => due.push(handle),
            },
            t => next = Some(next.map_or(t, |n| n.min(t))),
        }
    }
    (due, next)
}

/// The watches of the links that have something going on (a priority paused, our emission of
/// pause frames on, a timer running), as the progress thread runs them: the queues whose rounds
/// are due by `now`, and when the next watch is.
pub fn watches(now: u64) -> (Vec<u64>, Option<u64>) {
    if !in_use() {
        return (Vec::new(), None);
    }
    let mut due = Vec::new();
    let mut next: Option<u64> = None;
    for link in registry().values().filter_map(Weak::upgrade) {
        if !link.busy() {
            continue;
        }
        let mut at = link.watch_at.load(Ordering::Relaxed);
        if at <= now {
            due.extend(link.watch_turn());
            at = now + WATCH_EVERY_NS;
            link.watch_at.store(at, Ordering::Relaxed);
        }
        next = Some(next.map_or(at, |n| n.min(at)));
    }
    (due, next)
}

/// How often a link with something going on has its queues' rounds run, whether or not the
/// application calls in. A NIC sees every frame on the wire and watches its receive buffers all
/// the time; here a frame is seen, and a queue's backlog built (its messages land in its
/// receive buffers), only in the rounds of the queue pair it came over, which may be one the
/// application does not poll: the XON that ends a pause, the refreshes of a storm.
const WATCH_EVERY_NS: u64 = 1_000_000;
/// Queues a watch runs at most, in turns: the engine's cost stays bounded however many queue
/// pairs share the link.
const WATCH_AT_MOST: usize = 1024;

/// The slack a due timer is left to the application's rounds: a quarter of our pause time.
fn app_slack_ns(m: &PauseLink) -> u64 {
    m.quanta_ns(m.config().pause_quanta) / 4
}

impl LinkPause {
    pub fn new(s: Settings) -> LinkPause {
        let machine = PauseLink::new(s.machine);
        LinkPause {
            slack_ns: AtomicU64::new(app_slack_ns(&machine)),
            state: Mutex::new(State {
                machine,
                emit: s.emit,
                outbox: VecDeque::new(),
                passed: VecDeque::new(),
                passed_dropped: 0,
                queues: HashMap::new(),
                backlog: [0; PRIORITIES],
                waiting: [0; PRIORITIES],
                events: VecDeque::new(),
                servant_backlog: 0,
            }),
            paused: AtomicU8::new(0),
            busy: AtomicBool::new(false),
            members: AtomicUsize::new(0),
            watch_at: AtomicU64::new(0),
            watch_from: AtomicUsize::new(0),
            due_ns: AtomicU64::new(0),
            app_reported_ns: AtomicU64::new(0),
            servant: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether a message of `priority` may start now.
    #[inline(always)]
    pub fn may_start(&self, priority: u8) -> bool {
        self.paused.load(Ordering::Acquire) & (1 << (priority & 7)) == 0
            || self.may_start_now(priority)
    }

    #[cold]
    #[inline(never)]
    fn may_start_now(&self, priority: u8) -> bool {
        let mut s = self.lock();
        let now = clock_ns();
        let ok = s.machine.may_start(now, priority);
        self.settle(&mut s, now);
        ok
    }

    /// Whether the rounds of its queues have something to do for the link.
    #[inline(always)]
    pub fn busy(&self) -> bool {
        self.busy.load(Ordering::Relaxed)
    }

    /// Publishes which priorities are paused, and whether the rounds have work.
    fn settle(&self, s: &mut State, now: u64) {
        let mut paused = 0u8;
        for p in 0..PRIORITIES as u8 {
            if !s.machine.may_start(now, p) {
                paused |= 1 << p;
            }
        }
        while let Some(e) = s.machine.poll_event() {
            s.events.push_back(e);
        }
        if paused != 0 {
            IN_USE.store(true, Ordering::Relaxed);
        }
        self.paused.store(paused, Ordering::Release);
        let busy = s.emit
            || paused != 0
            || !s.outbox.is_empty()
            || !s.events.is_empty()
            || s.machine.next_timeout().is_some();
        if busy {
            IN_USE.store(true, Ordering::Relaxed);
        }
        self.busy.store(busy, Ordering::Relaxed);
        let due = s.machine.next_timeout().unwrap_or(0);
        self.due_ns.store(due, Ordering::Relaxed);
    }

    /// A control frame the peer sent over one of the link's queue pairs.
    pub fn on_frame(&self, bytes: &[u8]) {
        let mut s = self.lock();
        let now = clock_ns();
        if s.machine.handle_frame(now, bytes) == Verdict::Pass {
            if s.passed.len() == PASSED_MAX {
                s.passed.pop_front();
                s.passed_dropped += 1;
            }
            s.passed.push_back(bytes.to_vec());
        }
        self.settle(&mut s, now);
    }

    /// What queue `handle` (of `priority`) has: `backlog` bytes received and not taken by the
    /// application, and whether work of its own waits to go. Runs the timers; our XOFF / XON
    /// frames join the outbox.
    pub fn report(&self, handle: u64, priority: u8, backlog: u64, pending: bool) {
        let mut s = self.lock();
        let now = clock_ns();
        if !SERVING_TIMERS.get() {
            self.app_reported_ns.store(now, Ordering::Relaxed);
        }
        let servant = self.servant.load(Ordering::Relaxed);
        if servant == 0 || servant == handle || backlog > s.servant_backlog {
            self.servant.store(handle, Ordering::Relaxed);
            s.servant_backlog = backlog;
        }
        let old = s.queues.insert(handle, (priority & 7, backlog, pending));
        s.account(old, -1);
        s.account(Some((priority & 7, backlog, pending)), 1);
        for p in 0..PRIORITIES {
            if s.emit {
                let bytes = s.backlog[p];
                s.machine.set_backlog(now, p as u8, bytes);
            }
            let waiting = s.waiting[p] > 0;
            s.machine.set_pending(now, p as u8, waiting);
        }
        while let Some(f) = s.machine.poll_transmit(now) {
            s.outbox.push_back(f.to_vec());
        }
        self.settle(&mut s, now);
    }

    /// Queue `handle` of `priority` joined the link: its watch runs it from now on, and it
    /// counts with no backlog until it reports.
    fn join(&self, handle: u64, priority: u8) {
        let mut s = self.lock();
        let report = (priority & 7, 0, false);
        if let Some(old) = s.queues.insert(handle, report) {
            s.account(Some(old), -1);
        }
        s.account(Some(report), 1);
    }

    /// The queues this watch runs: `WATCH_AT_MOST` of them from where the last one stopped.
    fn watch_turn(&self) -> Vec<u64> {
        let s = self.lock();
        let n = s.queues.len();
        let from = self.watch_from.fetch_add(WATCH_AT_MOST, Ordering::Relaxed) % n.max(1);
        let mut handles: Vec<u64> = s.queues.keys().copied().collect();
        handles.sort_unstable();
        handles.rotate_left(from);
        handles.truncate(WATCH_AT_MOST);
        handles
    }

    /// Queue `handle` left the link.
    pub fn forget(&self, handle: u64) {
        let mut s = self.lock();
        let old = s.queues.remove(&handle);
        s.account(old, -1);
        self.members.fetch_sub(1, Ordering::Relaxed);
        if self.servant.load(Ordering::Relaxed) == handle {
            let next = s.queues.iter().max_by_key(|(_, r)| r.1);
            let (next, backlog) = next.map_or((0, 0), |(&h, r)| (h, r.1));
            self.servant.store(next, Ordering::Relaxed);
            s.servant_backlog = backlog;
        }
    }

    /// The next frame to send, if any.
    pub fn take_frame(&self) -> Option<Vec<u8>> {
        let mut s = self.lock();
        let f = s.outbox.pop_front();
        if s.outbox.is_empty() {
            self.settle(&mut s, clock_ns());
        }
        f
    }

    /// A frame `take_frame` gave that could not go yet: first in line again.
    pub fn put_back(&self, frame: Vec<u8>) {
        self.lock().outbox.push_front(frame);
        IN_USE.store(true, Ordering::Relaxed);
        self.busy.store(true, Ordering::Relaxed);
    }

    /// A raw control frame from the application, sent as it is.
    pub fn send_raw(&self, frame: &[u8]) {
        self.lock().outbox.push_back(frame.to_vec());
        IN_USE.store(true, Ordering::Relaxed);
        self.busy.store(true, Ordering::Relaxed);
    }

    /// The oldest control frame passed to the application, if any.
    pub fn take_passed(&self) -> Option<Vec<u8>> {
        self.lock().passed.pop_front()
    }

    pub fn take_event(&self) -> Option<Event> {
        self.lock().events.pop_front()
    }

    pub fn settings(&self) -> Settings {
        let s = self.lock();
        Settings {
            machine: *s.machine.config(),
            emit: s.emit,
        }
    }

    pub fn set_settings(&self, new: Settings) {
        let mut s = self.lock();
        s.machine.set_config(new.machine);
        s.emit = new.emit;
        self.slack_ns
            .store(app_slack_ns(&s.machine), Ordering::Relaxed);
        self.settle(&mut s, clock_ns());
    }

    /// The counters, the priorities paused now, the queues on the link and the passed frames
    /// dropped unread.
    pub fn stats(&self) -> (LinkStats, u8, usize, u64) {
        let mut s = self.lock();
        let now = clock_ns();
        let stats = s.machine.stats(now);
        self.settle(&mut s, now);
        (
            stats,
            self.paused.load(Ordering::Relaxed),
            self.members.load(Ordering::Relaxed),
            s.passed_dropped,
        )
    }
}

/// Settings for a 10 Mbit/s link: a full pause lasts 3.4 s and our XOFF is refreshed 1.7 s
/// after it, so neither ends while a test's thread is descheduled between two steps (at the
/// default 100 Gbit/s they come after 335 and 170 µs).
#[cfg(test)]
pub(crate) fn slow_link() -> Settings {
    let mut s = Settings::default();
    s.machine.speed_bps = 10_000_000;
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::pfc::frame::{self, Pause, PauseFrame};

    fn pfc(enabled: u8, quanta: u16) -> [u8; frame::FRAME_BYTES] {
        frame::encode(&PauseFrame {
            dst: frame::PAUSE_MULTICAST,
            src: [2, 0, 0, 0, 0, 9],
            pause: Pause::Priorities {
                enabled,
                quanta: [quanta; 8],
            },
        })
    }

    /// A frame paused priority 3 and only it: its queues stop, the others go on; a zero-time
    /// frame resumes it at once.
    #[test]
    fn a_paused_priority_stops_only_its_own_queues() {
        let link = LinkPause::new(slow_link());
        assert!((0..8).all(|p| link.may_start(p)));
        link.on_frame(&pfc(1 << 3, 0xffff));
        assert!(!link.may_start(3));
        assert!((0..8).filter(|&p| p != 3).all(|p| link.may_start(p)));
        assert!(link.busy(), "a running pause is the rounds' business");
        link.on_frame(&pfc(1 << 3, 0));
        assert!(link.may_start(3));
        let (stats, paused, _, _) = link.stats();
        assert_eq!((stats.priorities[3].indications, paused), (2, 0));
    }

    /// Our backlog of a priority above XOFF puts a PFC frame for it in the outbox (with
    /// emission on), and below XON a zero-time one; a queue's share is replaced, not added.
    #[test]
    fn a_backlog_over_xoff_asks_the_peer_to_pause_and_under_xon_to_resume() {
        let mut s = slow_link();
        (s.machine.xoff_bytes, s.machine.xon_bytes, s.emit) = (1000, 500, true);
        let link = LinkPause::new(s);
        link.report(1, 3, 600, false);
        link.report(2, 3, 300, false);
        assert!(link.take_frame().is_none(), "900 bytes: under XOFF");
        link.report(1, 3, 800, false);
        let f = frame::decode(&link.take_frame().expect("XOFF"), None).unwrap();
        assert_eq!(
            f.pause,
            Pause::Priorities {
                enabled: 1 << 3,
                quanta: [0, 0, 0, 0xffff, 0, 0, 0, 0]
            }
        );
        link.report(2, 3, 0, false);
        assert!(
            link.take_frame().is_none(),
            "800 bytes: between XON and XOFF"
        );
        link.report(1, 3, 100, false);
        let f = frame::decode(&link.take_frame().expect("XON"), None).unwrap();
        assert_eq!(
            f.pause,
            Pause::Priorities {
                enabled: 1 << 3,
                quanta: [0; 8]
            }
        );
        assert_eq!(link.stats().0.priorities[3].requests, 2);
    }

    /// While our XOFF stands, the progress thread learns when its refresh falls due and which
    /// queue's round sends it: the one with the largest backlog, whose peer is sending; a queue
    /// that leaves the link hands that on to one that stays.
    #[test]
    fn a_standing_xoff_names_its_refresh_time_and_a_queue_to_send_it() {
        let link = attach(b"test:timers".to_vec(), 7, 3);
        assert!(
            Arc::ptr_eq(&link, &attach(b"test:timers".to_vec(), 8, 0)),
            "two queues"
        );
        let mut s = Settings::default();
        (s.machine.xoff_bytes, s.machine.xon_bytes, s.emit) = (1000, 500, true);
        s.machine.speed_bps = 10_000_000_000;
        link.set_settings(s);
        // 0xffff quanta of 512 bit times at 10 Gbit/s, refreshed at half.
        let half = 65_535 * 512 * 100 / 1000 / 2;
        let before = clock_ns();
        link.report(8, 0, 0, false);
        link.report(7, 3, 2000, false);
        link.report(8, 0, 10, false);
        let after = clock_ns();
        assert!(link.take_frame().is_some(), "XOFF");
        let due = link.due_ns.load(Ordering::Relaxed);
        assert!(
            (before + half - 2..=after + half + 2).contains(&due),
            "refresh due at {due}, XOFF sent in {before}..{after}"
        );
        // While the application's rounds report (this thread's count as the application's), the
        // thread leaves the timer to them for a quarter of the pause.
        let slack = link.slack_ns.load(Ordering::Relaxed);
        assert!(slack.abs_diff(half / 2) <= 2);
        link.app_reported_ns.store(due, Ordering::Relaxed);
        assert!(!timers(due).0.contains(&7), "left to the application");
        assert!(
            timers(due + slack).0.contains(&7),
            "the application did not serve it"
        );
        link.app_reported_ns.store(0, Ordering::Relaxed); // the application went quiet
        let (now_due, next) = timers(due - 1);
        assert!(!now_due.contains(&7) && next.is_some_and(|n| n <= due));
        let (now_due, _) = timers(due);
        assert!(
            now_due.contains(&7) && !now_due.contains(&8),
            "the largest backlog"
        );
        link.forget(7);
        assert!(timers(due).0.contains(&8), "the one that stays");
        link.forget(8);
        assert!(!timers(due).0.contains(&8));
    }

    /// A link with nothing going on is not watched; a busy one (here a priority paused by the
    /// peer) has its queues' rounds run every `WATCH_EVERY_NS`, every member once a watch
    /// (however few report), and a member that left no more.
    #[test]
    fn a_busy_link_has_its_queues_watched_and_an_idle_one_not() {
        IN_USE.store(true, Ordering::Relaxed);
        let link = attach(b"test:watch".to_vec(), 41, 0);
        let _other = attach(b"test:watch".to_vec(), 42, 3);
        link.set_settings(slow_link());
        let mine = |now| {
            let (due, next) = watches(now);
            let due: Vec<u64> = due.into_iter().filter(|h| [41, 42].contains(h)).collect();
            (due, next)
        };
        let t = clock_ns();
        assert!(mine(t).0.is_empty(), "idle: no watch");
        link.on_frame(&pfc(1 << 3, 0xffff));
        let (due, next) = mine(t);
        assert_eq!(due, vec![41, 42], "both queues, though neither reported");
        assert!(next.is_some_and(|n| n <= t + WATCH_EVERY_NS));
        assert!(mine(t + 1).0.is_empty(), "not again before its time");
        link.forget(41);
        assert_eq!(mine(t + WATCH_EVERY_NS).0, vec![42]);
        link.on_frame(&pfc(1 << 3, 0));
        assert!(
            mine(t + 3 * WATCH_EVERY_NS).0.is_empty(),
            "resumed: idle again"
        );
    }

    /// Emission off (the default): no backlog makes a frame.
    #[test]
    fn without_emission_a_backlog_sends_nothing() {
        let link = LinkPause::new(Settings::default());
        link.report(1, 0, u64::MAX / 2, false);
        assert!(link.take_frame().is_none());
    }

    #[test]
    fn queues_to_one_peer_share_its_link_and_others_do_not() {
        let a = attach(b"test:1".to_vec(), 1, 0);
        let b = attach(b"test:1".to_vec(), 2, 0);
        let c = attach(b"test:2".to_vec(), 3, 0);
        assert!(Arc::ptr_eq(&a, &b) && !Arc::ptr_eq(&a, &c));
        drop((a, b));
        let again = attach(b"test:1".to_vec(), 4, 0);
        assert_eq!(
            Arc::strong_count(&again),
            1,
            "a link with no queue is made anew"
        );
    }
}
