//! The progress engine: one thread per process that moves every queue bound through a link
//! (`transport::link`) along when its application does not call in, notices a peer process
//! that died, and runs the process's timed work. It sleeps on fds and on the earliest deadline
//! of one timer table (`transport::timer`) on the process clock, never on a fixed tick while
//! every peer can call it, and never runs a second thread.
//!
//! It is alive while something is watched, some queue is rate limited or a queue's deadline
//! is set. What wakes it:
//!
//! - **A peer gone.** For a peer in another process of this host, a pidfd (readable when that
//!   process exits, however it exits); for one on another host, a socket its kernel resets when
//!   it exits (see `fabric::watch`). The queue goes to the error state, its sends in flight
//!   complete with `UMQ_BUF_WR_FLUSH_ERR`, `UMQ_EVENT_QH_ERR` is raised and interrupt waiters
//!   wake. A peer that goes silent without dying (a host gone, a link down) is the provider's
//!   to notice: its round reports the broken binding.
//! - **A call.** A peer whose WRs wait for our library rings our call bell
//!   (`transport::call_bell`: one per network node, one on 127.0.0.1 for shared memory) with a
//!   tag naming the queue; the thread serves it at once, and again at growing intervals until
//!   it has run as far as the ring said. While an RMA ring is outstanding the thread also
//!   sleeps on the sockets the peer's operations arrive on (`CallBell::sockets`), and serves
//!   the ring as they turn ready. So a polling-mode queue whose application is away
//!   still takes in what arrives (its peer's sends complete), and a one-sided WR runs. A
//!   network node also plans its own pings to its peers on its bell, so an idle process keeps
//!   telling its peers it lives.
//! - **An interrupt-mode queue's wake-up fd** (for shared memory, a doorbell eventfd the peer
//!   rings after a change, see `shm::ring_if_changed`): such a queue has no caller polling it,
//!   and is serviced at once.
//! - **A queue's own deadline** (`deadline`, by kind: `Due`): a sender's RNR timeout; a round
//!   while WRs of ours wait (filed by the round that left them so, run only if nobody moved the
//!   queue meanwhile, and then calling the peer if that round moved nothing either: a sender
//!   that enqueued and blocks elsewhere, libfabric moving bytes only when called, credit to
//!   ship); the release of a shared pool's idle memory, filed when a chunk goes idle.
//! - **The links' pause timers and watches** (`transport::pause`): a refresh of the XOFF that
//!   holds the peer while our application is not taking its messages, a pause ending, the storm
//!   watchdog; and while a link has pause work going, a watch of its queues every millisecond
//!   (a frame is seen only in the rounds of the pair it came over). Real NICs do this in
//!   hardware; an application that sleeps with a backlog must not let its peer's pause lapse.
//! - **The pacing machine's ticks** (`queue::pacing`).
//!
//! A watch that brings an fd the thread does not poll yet (a new peer's pidfd, an
//! interrupt-mode queue's wake-up, a call bell) has it looked at within a millisecond.
//!
//! What is left to a periodic sweep is what no fd tells. It runs the rounds of the
//! polling-mode queues by turns (`POLLED_PER_TICK` a sweep) every `UMQ_PROGRESS_SWEEP_MS`
//! (20 ms) while some queue's peer cannot call for it (no call bell could be made) or a peer's
//! exit no pidfd tells (Linux < 5.3: its pid is probed), and otherwise once a second, for a
//! call lost on the way (`BACKSTOP`); interrupt-mode queues whose peer cannot ring their
//! doorbell are serviced every millisecond. The test command runs the tests of everything above
//! with the sweep at an hour.

use super::timer::{Timer, TimerTable};
use crate::os::{alive, clock_ns, pidfd_open};
use crate::process::PerProcess;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the progress thread does to a watched queue; the queue layer implements it, so this
/// thread never reaches into the layer above.
pub trait Watched: Send + Sync {
    /// One round of the queue's link (and of sends waiting for credit), unless the queue's
    /// application is in it now.
    fn service(&self) -> Serviced;
    /// The peer process has exited.
    fn peer_lost(&self, why: &str);
    /// A deadline it set (`deadline`) has come.
    fn deadline(&self, due: Due);
    /// Arms the fd the queue is woken through before the thread's last look (None: the queue
    /// has none).
    fn arm_wakeup(&self) -> Option<Wakeup>;
    /// A peer's ring for the queue reached its call bell: the peer can wake it that way.
    fn rung_by_call(&self);
}

/// What a service of a watched queue came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serviced {
    /// Its round ran.
    Ran,
    /// Its application was in one of its calls (held its lock), so the thread left the queue
    /// to that call rather than wait, and the queue owes a round: the thread comes back for
    /// it by a deadline of the queue's (`Due::Round`), a millisecond on unless one is filed
    /// already (at most 100 ms on), until it runs.
    Busy,
}

/// What a queue's deadline is for: a queue has at most one of each kind at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Due {
    /// Its sender's RNR timeout.
    Rnr,
    /// A round of its own while work of its needs this process and its application may not
    /// call in: sends the provider moves only when called (libfabric's manual progress), WRs
    /// waiting for ring room or credit.
    Round,
    /// Idle memory of its shared pool may go back to the system.
    PoolRelease,
    /// Credit it holds unused goes back to the peer (the July 2026 flow control).
    CreditReturn,
    /// Its peer's process exited and the last of what it sent may still be on its way
    /// (`Link::last_words_grace`): the loss is reported once nothing more arrives.
    LastWords,
}

/// An fd that turns readable when an interrupt-mode queue has something to do.
#[derive(Clone, Copy, Debug)]
pub struct Wakeup {
    pub fd: i32,
    /// The peer makes it readable when it sends (else the thread also ticks, every millisecond).
    pub rung_by_peer: bool,
    /// A counter (eventfd) to read back to zero once it rang; else something that clears
    /// itself once the queue has been serviced (a provider's epoll set).
    pub counter: bool,
}

/// A provider's call bell, shared by the queues of one of its endpoints: an fd that turns
/// readable when a peer calls for one of those queues (named by a tag) to be served.
pub trait CallBell: Send + Sync + std::fmt::Debug {
    fn fd(&self) -> RawFd;
    /// Takes what rang: the tags of the queues to serve now.
    fn due(&self, now: Instant) -> Vec<u64>;
    /// When to look again, as the queues' rounds left it (a round that ran what a ring
    /// called for ends the ring).
    fn next(&self) -> Option<Instant>;
    /// Sockets whose readiness (poll events) makes rings due: the connections outstanding
    /// RMA rings arrive on.
    fn sockets(&self) -> Vec<(RawFd, i16)>;
    /// Socket `fd` of `sockets` turned ready (`events`, as poll returned them): the rings
    /// watching it are due now.
    fn ready(&self, fd: RawFd, events: i16);
    /// The queues `due` named have been served.
    fn after_serve(&self, tags: &[u64]);
}

/// A call bell and the tag that names one queue at it.
pub type RungBy = (Arc<dyn CallBell>, u64);

/// Finds a watched queue by handle; None once it is gone.
pub type Lookup = fn(u64) -> Option<Arc<dyn Watched>>;

/// What to watch for one queue.
#[derive(Debug)]
pub struct Watch {
    /// The peer's process when it runs on this host (its exit ends the binding).
    pub peer_pid: Option<u32>,
    /// A socket that turns readable when the peer's process on another host is gone (one per
    /// peer process, shared by the queues bound to it).
    pub peer_socket: Option<Arc<OwnedFd>>,
    /// The queue is in interrupt mode: the thread sleeps on its wake-up fd.
    pub interrupt: bool,
    /// The call bell a peer rings to have this queue served, and its tag there.
    pub call_bell: Option<RungBy>,
}

struct Entry {
    umqh: u64,
    lookup: Lookup,
    pid: Option<u32>,
    /// Readable once the peer is gone: a pidfd or a watch socket. Shared with the thread's
    /// poll set, so the descriptor stays open (and its number cannot be reused by another
    /// watch) until the thread has looked at what poll said about it.
    gone: Option<Arc<OwnedFd>>,
    interrupt: bool,
    call_bell: Option<RungBy>,
}

impl Entry {
    /// A polling-mode queue whose peer cannot call for it: only the sweep takes in what
    /// arrived at it while its application is away.
    fn swept(&self) -> bool {
        !self.interrupt && self.call_bell.is_none()
    }

    /// A peer whose exit no fd tells: the sweep probes its pid.
    fn probed(&self) -> bool {
        self.gone.is_none() && self.pid.is_some()
    }

    fn why_lost(&self) -> String {
        match self.pid {
            Some(pid) => format!("peer process {pid} exited"),
            None => "peer process gone (its host reset our watch connection)".into(),
        }
    }
}

/// The pacing machine as the engine serves it (the queue layer's `pacing` registers it while a
/// queue is rate limited): the engine keeps its timer and sleeps no later than its next tick.
pub trait Paced: Sync {
    /// Serves the ticks due at `now` (clock ns); returns when the next one is due.
    fn serve(&self, now: u64) -> Option<u64>;
    /// The engine is about to sleep until `until`: returns a sooner deadline filed since the
    /// last `serve` (then it does not sleep); else the machine calls `wake` if it files one
    /// sooner before `awake`.
    fn sleeping(&self, until: u64) -> Option<u64>;
    fn awake(&self);
}

/// What the engine serves, and its thread.
struct State {
    entries: Vec<Entry>,
    running: bool,
    paced: Option<&'static dyn Paced>,
    /// Single queues' deadlines.
    deadlines: Deadlines,
    /// An eventfd that wakes the engine before its time; made with the thread and closed
    /// when it ends, so a process with nothing watched holds no fd of ours.
    wake: Option<Arc<OwnedFd>>,
    /// A watch brought an fd the engine does not poll yet (a new peer's pidfd, an
    /// interrupt-mode queue's wake-up, a call bell): the next wake takes a look.
    relook: bool,
}

/// The engine's state in this process: a child made by `fork()` has none of the parent's
/// watches, nor its thread (`process`).
static WATCHED: PerProcess<Mutex<State>> = PerProcess::new(|| {
    Mutex::new(State {
        entries: Vec::new(),
        running: false,
        paced: None,
        deadlines: Deadlines::new(),
        wake: None,
        relook: false,
    })
});

fn state() -> std::sync::MutexGuard<'static, State> {
    WATCHED.get().lock().unwrap_or_else(|p| p.into_inner())
}

/// The sweep's period (`UMQ_PROGRESS_SWEEP_MS` sets another, for tests that prove something
/// does not wait for it).
fn tick() -> Duration {
    static TICK: std::sync::OnceLock<Duration> = std::sync::OnceLock::new();
    *TICK.get_or_init(|| {
        let ms = std::env::var("UMQ_PROGRESS_SWEEP_MS").ok();
        Duration::from_millis(ms.and_then(|v| v.parse().ok()).unwrap_or(20))
    })
}
const INTERRUPT_TICK: Duration = Duration::from_millis(1);
/// The sweep's period while every watched queue's peer can call for it: a call is a datagram,
/// and one lost (a firewall between two hosts dropping the call bell's port) is made good this
/// late. (With `UMQ_PROGRESS_SWEEP_MS` above it, that instead.)
const BACKSTOP: Duration = Duration::from_secs(1);
/// How soon after a watch that brings a new fd the engine looks again (and no sooner after
/// its last look).
const RELOOK_AFTER: Duration = Duration::from_millis(1);
/// The shortest sleep for a link timer: a timer that stays due (a round could not send its
/// frame) is retried this often, not in a busy loop.
const LINK_TIMER_MIN: Duration = Duration::from_micros(20);
/// Serves of one call bell's due queues in a row at most, before the thread looks at the rest.
const SERVES_IN_A_ROW: usize = 16;
/// A timed sleep wakes 20-100 us late on a virtual machine (and tens of us on bare metal): when
/// the pacing machine's next tick is closer than this, the engine spins until it instead, so a
/// packet time of a few tens of microseconds (1 Gbit/s at PMTU 4096) holds. A later tick is
/// slept for: a queue served that late makes the time up (`Pacer::grant`), so only queues
/// that fast keep a core busy.
const SPIN_BEFORE_NS: u64 = 100_000;
/// The longest sleep with no deadline set (a safety net: every change that matters wakes it).
const LONGEST_SLEEP_NS: u64 = 1_000_000_000;

/// Makes sure the engine's thread runs (under the state's lock).
fn start(w: &mut State) {
    if w.running {
        return;
    }
    // SAFETY: eventfd with flags only; the fd is owned at once.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd >= 0 {
        w.wake = Some(Arc::new(unsafe {
            <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd)
        }));
    }
    w.running = true;
    crate::os::with_signals_blocked(|| {
        std::thread::Builder::new()
            .name("umq-progress".into())
            .spawn(run)
            .expect("cannot start the umq progress thread")
    });
}

/// Registers the pacing machine while some queue is limited (None: none is any more).
pub fn pace(paced: Option<&'static dyn Paced>) {
    let mut w = state();
    w.paced = paced;
    if paced.is_some() {
        start(&mut w);
    }
    ring(&w);
}

/// Single queues' deadlines, by time, and each one's time by queue and kind (`Due`): as many
/// as there are queues with background work, so ordered, not a list.
struct Deadlines {
    by_time: BTreeMap<(u64, u64, Due), Lookup>,
    of: BTreeMap<(u64, Due), u64>,
}

impl Deadlines {
    const fn new() -> Deadlines {
        Deadlines {
            by_time: BTreeMap::new(),
            of: BTreeMap::new(),
        }
    }

    /// Files queue `umqh`'s deadline `due` at `at`, replacing the one of that kind it had;
    /// true when it is now the earliest.
    fn file(&mut self, umqh: u64, due: Due, lookup: Lookup, at: u64) -> bool {
        if let Some(old) = self.of.insert((umqh, due), at) {
            self.by_time.remove(&(old, umqh, due));
        }
        self.by_time.insert((at, umqh, due), lookup);
        self.next() == Some(at)
    }

    /// Takes the deadlines due by `now`, earliest first.
    fn take_due(&mut self, now: u64) -> Vec<(u64, Due, Lookup)> {
        let mut due = Vec::new();
        while let Some(entry) = self.by_time.first_entry() {
            let (at, umqh, kind) = *entry.key();
            if at > now {
                break;
            }
            due.push((umqh, kind, entry.remove()));
            self.of.remove(&(umqh, kind));
        }
        due
    }

    fn next(&self) -> Option<u64> {
        self.by_time.keys().next().map(|&(at, _, _)| at)
    }

    /// Drops queue `umqh`'s deadlines of the kinds given.
    fn forget(&mut self, umqh: u64, kinds: &[Due]) {
        for &kind in kinds {
            if let Some(at) = self.of.remove(&(umqh, kind)) {
                self.by_time.remove(&(at, umqh, kind));
            }
        }
    }

    fn is_empty(&self) -> bool {
        self.by_time.is_empty()
    }
}

/// Calls queue `umqh`'s `Watched::deadline` with `due` at `at` (clock ns), whether or not its
/// application calls in; replaces a deadline of that kind it had. The engine is woken only when
/// the deadline is the earliest it holds and was filed by another thread: one the engine files
/// itself (a deadline that files the queue's next) it takes into account before it sleeps.
pub fn deadline(umqh: u64, due: Due, lookup: Lookup, at: u64) {
    let mut w = state();
    let earliest = w.deadlines.file(umqh, due, lookup, at);
    start(&mut w);
    if earliest && !filed_by_engine() {
        ring(&w);
    }
}

/// What the engine's own thread knows of itself.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Engine {
    /// Not the engine's thread.
    Elsewhere,
    Here,
    /// The engine's thread filed the earliest deadline since it last looked at them.
    FiledHere,
}

thread_local! {
    static ENGINE: Cell<Engine> = const { Cell::new(Engine::Elsewhere) };
}

/// Whether this is the engine's thread: a round it runs is nobody's application's.
pub fn on_engine_thread() -> bool {
    ENGINE.with(|e| e.get() != Engine::Elsewhere)
}

thread_local! {
    /// The engine's thread runs timed work (`urgently`).
    static URGENT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f`, timed work that must not wait behind an application's calls (a pacing tick, a
/// link's pause timer): its waits for a queue's lock ask for the next turn, as any thread's do.
fn urgently<R>(f: impl FnOnce() -> R) -> R {
    /// Ends the timed work however `f` ends, a panic included.
    struct Urgent;
    impl Drop for Urgent {
        fn drop(&mut self) {
            URGENT.with(|u| u.set(false));
        }
    }
    URGENT.with(|u| u.set(true));
    let _urgent = Urgent;
    f()
}

/// Whether a wait of this thread for a queue's lock lets the application's calls go first
/// (`spin.rs`): the engine's rounds, bell serves and deadlines can wait while the application
/// drives the queue; its timed work (`urgently`) cannot.
pub fn waits_politely() -> bool {
    on_engine_thread() && !URGENT.with(|u| u.get())
}

/// Runs `f` on this thread as the engine's thread runs its rounds (`waits_politely`), for the
/// tests of what they do to a queue whose application is in a call.
#[cfg(feature = "fuzzing")]
pub fn as_engine<R>(f: impl FnOnce() -> R) -> R {
    ENGINE.with(|e| e.set(Engine::Here));
    let out = f();
    ENGINE.with(|e| e.set(Engine::Elsewhere));
    out
}

/// On the engine's thread, notes that it filed the earliest deadline (true).
fn filed_by_engine() -> bool {
    ENGINE.with(|e| {
        let here = e.get() != Engine::Elsewhere;
        if here {
            e.set(Engine::FiledHere);
        }
        here
    })
}

/// Whether the engine filed the earliest deadline since it last asked.
fn take_filed_by_engine() -> bool {
    ENGINE.with(|e| {
        let filed = e.get() == Engine::FiledHere;
        if filed {
            e.set(Engine::Here);
        }
        filed
    })
}

/// Runs the queues' deadlines that have come; returns the next one.
fn serve_deadlines() -> Option<u64> {
    let due = state().deadlines.take_due(clock_ns());
    for (umqh, kind, lookup) in due {
        if let Some(q) = lookup(umqh) {
            q.deadline(kind);
        }
    }
    state().deadlines.next()
}

/// Wakes the engine before its time (the pacing machine filed a tick sooner than it sleeps).
pub fn wake() {
    ring(&state());
}

fn ring(w: &State) {
    if let Some(fd) = &w.wake {
        let one = 1u64;
        // SAFETY: an 8-byte write to an eventfd we own; a full counter (never here) is ignored.
        unsafe { libc::write(fd.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
    }
}

/// Starts watching queue `umqh`, found through `lookup`, as `what` says.
pub fn watch(umqh: u64, lookup: Lookup, what: Watch) {
    let mut w = state();
    w.entries.retain(|e| e.umqh != umqh);
    // One pidfd per peer process, shared by all its queues (a process bound to another by ten
    // thousand queues must not spend ten thousand fds on watching it).
    let shared = what.peer_pid.and_then(|pid| {
        w.entries
            .iter()
            .find(|e| e.pid == Some(pid))
            .and_then(|e| e.gone.clone())
    });
    let was_shared = shared.is_some();
    let gone = shared.or_else(|| {
        what.peer_pid
            .and_then(pidfd_open)
            .map(Arc::new)
            .or(what.peer_socket)
    });
    let new_fd = !was_shared && gone.is_some();
    let new_bell = what.call_bell.as_ref().is_some_and(|(b, _)| {
        !w.entries
            .iter()
            .filter_map(|e| e.call_bell.as_ref())
            .any(|(x, _)| same(x, b))
    });
    w.entries.push(Entry {
        umqh,
        lookup,
        pid: what.peer_pid,
        gone,
        interrupt: what.interrupt,
        call_bell: what.call_bell,
    });
    start(&mut w);
    // The engine polls the new fd from its next look, which it takes soon (`RELOOK_AFTER`),
    // not at the sweep: a peer that dies right after bind, or a first message to an
    // interrupt-mode queue, must not wait for it.
    if new_fd || new_bell || what.interrupt {
        w.relook = true;
        ring(&w);
    }
}

/// Stops watching queue `umqh` (unbound): its deadlines for the binding go too.
pub fn unwatch(umqh: u64) {
    let mut w = state();
    w.entries.retain(|e| e.umqh != umqh);
    w.deadlines.forget(
        umqh,
        &[Due::Rnr, Due::Round, Due::CreditReturn, Due::LastWords],
    );
    end_if_idle(&mut w);
}

/// Forgets queue `umqh` (destroyed): its watch and every deadline.
pub fn forget(umqh: u64) {
    let mut w = state();
    w.entries.retain(|e| e.umqh != umqh);
    w.deadlines.forget(
        umqh,
        &[
            Due::Rnr,
            Due::Round,
            Due::PoolRelease,
            Due::CreditReturn,
            Due::LastWords,
        ],
    );
    end_if_idle(&mut w);
}

/// With no watch left, the engine looks soon: with nothing else to serve, its thread ends (and
/// closes its fds) then, not at the next sweep or deadline.
fn end_if_idle(w: &mut State) {
    if w.entries.is_empty() && w.running {
        w.relook = true;
        ring(w);
    }
}

fn run() {
    ENGINE.with(|e| e.set(Engine::Here));
    // Its rounds do not show that an application calls in.
    super::pause::serve_timers_on_this_thread();
    // A pacing tick can be a few microseconds away, a link timer 168 µs (an XOFF refresh at
    // 100 Gbit/s): the kernel's default 50 µs of slack on this thread's sleeps would eat them.
    // SAFETY: prctl with an integer argument changes this thread's timer slack only.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
    let mut timers = TimerTable::default();
    let mut exited = Vec::new();
    let mut woke = Woke::Fd;
    let mut last: Option<Look> = None;
    let mut last_look = 0u64;
    loop {
        // A look (the snapshot, the doorbells armed, the sweep) when a watched fd woke the
        // thread, the sweep is due, or there may be nothing left to serve (the thread then
        // ends); a wake for a timer alone, or the engine's wake fd, serves the timers and
        // nothing else, so their pace never multiplies the cost of the polling-mode queues.
        let now = clock_ns();
        let (paced, deadlines, relook) = {
            let mut w = state();
            (
                w.paced,
                !w.deadlines.is_empty(),
                std::mem::take(&mut w.relook),
            )
        };
        if relook {
            // Soon, but at most one look a `RELOOK_AFTER`: binding ten thousand queues must
            // not cost ten thousand looks.
            let soon = last_look + RELOOK_AFTER.as_nanos() as u64;
            if timers.get(Timer::Sweep).is_none_or(|at| at > soon) {
                timers.set(Timer::Sweep, Some(soon));
            }
        }
        let look = match last.take() {
            Some(l)
                if woke != Woke::Fd
                    && !timers.is_due(Timer::Sweep, now)
                    && (l.watching || paced.is_some() || deadlines) =>
            {
                l
            }
            _ => {
                let Some(l) = look(&exited) else {
                    return;
                };
                last_look = now;
                timers.set(Timer::Sweep, l.tick.map(|t| now + t.as_nanos() as u64));
                l
            }
        };
        serve_timers(&mut timers, &look, paced, woke != Woke::Timeout);
        (exited, woke) = sleep(&mut timers, &look, paced);
        // `look.sleepers` keeps the queues, so their doorbell fds stay open while polled.
        last = Some(look);
    }
}

/// What ended a wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Woke {
    /// A deadline (or a call bell, which the next round of timers serves).
    Timeout,
    /// The engine's own wake fd: something filed sooner than it slept.
    Wake,
    /// A watched fd: a peer process gone, a queue's wake-up fd.
    Fd,
}

/// Runs the timed work that is due (the pacing machine and the queues' deadlines only when
/// their time has come or a wake may have brought a sooner one), and records each kind's next
/// deadline.
fn serve_timers(timers: &mut TimerTable, look: &Look, paced: Option<&dyn Paced>, woke: bool) {
    let now = clock_ns();
    match paced {
        Some(p) if woke || timers.get(Timer::Pacing).is_none_or(|at| at <= now) => {
            timers.set(Timer::Pacing, urgently(|| p.serve(now)));
        }
        Some(_) => {}
        None => timers.set(Timer::Pacing, None),
    }
    timers.set(Timer::LinkPause, urgently(serve_link_timers));
    timers.set(Timer::CallBell, serve_call_bells(&look.call_bells));
    // A new deadline rings the wake fd, or was filed on this thread.
    let filed_here = take_filed_by_engine();
    if woke || filed_here || timers.is_due(Timer::Deadline, now) {
        timers.set(Timer::Deadline, serve_deadlines());
        take_filed_by_engine(); // in that return value
    }
}

/// Waits for the earliest deadline or an fd: spins to a pacing tick that close, sleeps
/// otherwise. Returns the peers gone and what ended the wait.
fn sleep(
    timers: &mut TimerTable,
    look: &Look,
    paced: Option<&dyn Paced>,
) -> (Vec<Arc<OwnedFd>>, Woke) {
    let now = clock_ns();
    let next = timers.next();
    if let Some((Timer::Pacing, at)) = next
        && at <= now + SPIN_BEFORE_NS
    {
        // A look at the fds first, without sleeping: a busy pacing machine must not starve them.
        let (exited, woke) = wait(look, 0);
        if woke == Woke::Timeout {
            spin_until(at);
        }
        return (exited, woke);
    }
    let until = next.map_or(now + LONGEST_SLEEP_NS, |(_, at)| at.max(now));
    if let Some(p) = paced
        && let Some(sooner) = p.sleeping(until)
    {
        timers.set(Timer::Pacing, Some(sooner));
        return (Vec::new(), Woke::Timeout);
    }
    let out = wait(look, until - now);
    if let Some(p) = paced {
        p.awake();
    }
    out
}

/// Spins until the clock reaches `at` (at most `SPIN_BEFORE_NS` away).
fn spin_until(at: u64) {
    let stop = at.min(clock_ns() + SPIN_BEFORE_NS);
    while clock_ns() < stop {
        std::hint::spin_loop();
    }
}

/// What the thread polls until its next look.
struct Look {
    pidfds: Vec<Arc<OwnedFd>>,
    bells: Vec<Wakeup>,
    call_bells: Vec<Arc<dyn CallBell>>,
    wake: Option<Arc<OwnedFd>>,
    _sleepers: Vec<Arc<dyn Watched>>,
    /// Some queue is watched.
    watching: bool,
    /// Until the next look (None: no queue is watched).
    tick: Option<Duration>,
}

/// Reports the peers in `exited` and services the queues due; None (the thread ends) when
/// there is nothing left to serve.
fn look(exited: &[Arc<OwnedFd>]) -> Option<Look> {
    let snap = snapshot()?;
    // Arm the doorbells before the last look: a change the look misses rings one.
    let bells: Vec<Wakeup> = snap
        .sleepers
        .iter()
        .filter_map(|q| q.arm_wakeup())
        .collect();
    sweep(exited);
    // Without a doorbell the peer rings, an interrupt-mode queue is serviced every tick.
    let all_rung = bells.len() == snap.sleepers.len() && bells.iter().all(|b| b.rung_by_peer);
    let tick = match (all_rung, snap.needs_sweep) {
        (false, _) => INTERRUPT_TICK,
        (true, true) => tick(),
        (true, false) => tick().max(BACKSTOP),
    };
    Some(Look {
        pidfds: snap.pidfds,
        bells,
        call_bells: snap.call_bells,
        wake: snap.wake,
        _sleepers: snap.sleepers,
        watching: snap.watching,
        tick: snap.watching.then_some(tick),
    })
}

/// The fds to poll for peers gone, the queues to arm wake-ups for, the call bells, and what
/// else the engine serves.
struct Snapshot {
    pidfds: Vec<Arc<OwnedFd>>,
    sleepers: Vec<Arc<dyn Watched>>,
    call_bells: Vec<Arc<dyn CallBell>>,
    wake: Option<Arc<OwnedFd>>,
    watching: bool,
    /// Some watched queue's peer cannot call for it, or its exit no fd tells.
    needs_sweep: bool,
}

/// What the engine serves now, or None (the thread ends, its wake fd closed) when nothing is
/// watched, no queue is rate limited and no deadline is set.
fn snapshot() -> Option<Snapshot> {
    let mut w = state();
    if w.entries.is_empty() && w.paced.is_none() && w.deadlines.is_empty() {
        w.running = false;
        w.wake = None;
        return None;
    }
    let mut pidfds: Vec<Arc<OwnedFd>> = Vec::new();
    for fd in w.entries.iter().filter_map(|e| e.gone.as_ref()) {
        if !pidfds.iter().any(|p| Arc::ptr_eq(p, fd)) {
            pidfds.push(fd.clone());
        }
    }
    let mut call_bells: Vec<Arc<dyn CallBell>> = Vec::new();
    for (b, _) in w.entries.iter().filter_map(|e| e.call_bell.as_ref()) {
        if !call_bells.iter().any(|x| same(x, b)) {
            call_bells.push(b.clone());
        }
    }
    let sleepers = w
        .entries
        .iter()
        .filter(|e| e.interrupt)
        .filter_map(|e| (e.lookup)(e.umqh))
        .collect();
    Some(Snapshot {
        pidfds,
        sleepers,
        call_bells,
        wake: w.wake.clone(),
        watching: !w.entries.is_empty(),
        needs_sweep: w.entries.iter().any(|e| e.swept() || e.probed()),
    })
}

fn same(a: &Arc<dyn CallBell>, b: &Arc<dyn CallBell>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Serves the queues whose peers rang a call bell; returns when a call bell wants to be
/// looked at again, in clock ns (None: none does).
fn serve_call_bells(call_bells: &[Arc<dyn CallBell>]) -> Option<u64> {
    for d in call_bells {
        // A round that found more to do than it could arm for asks at once again (`due`):
        // served here a few times before the thread looks at anything else.
        for _ in 0..SERVES_IN_A_ROW {
            if !serve_due(d) {
                break;
            }
        }
    }
    // After the services: a ring they answered wants no second look.
    let next = call_bells.iter().filter_map(|d| d.next()).min()?;
    let wait = next.saturating_duration_since(Instant::now());
    Some(clock_ns() + wait.max(LINK_TIMER_MIN).as_nanos() as u64)
}

/// Serves the queues call bell `d` names as due now; false when it names none.
fn serve_due(d: &Arc<dyn CallBell>) -> bool {
    let mut tags = d.due(Instant::now());
    if tags.is_empty() {
        return false;
    }
    let found: Vec<(u64, Lookup, u64)> = {
        let w = state();
        w.entries
            .iter()
            .filter_map(|e| match &e.call_bell {
                Some((x, tag)) if same(x, d) && tags.contains(tag) => {
                    Some((e.umqh, e.lookup, *tag))
                }
                _ => None,
            })
            .collect()
    };
    let mut busy = Vec::new();
    for (umqh, lookup, tag) in found {
        let Some(q) = lookup(umqh) else {
            continue;
        };
        q.rung_by_call();
        if q.service() == Serviced::Busy {
            busy.push(tag);
        }
    }
    // A queue left busy owes a round (`Serviced::Busy`); its ring stays until that round.
    tags.retain(|t| !busy.contains(t));
    d.after_serve(&tags);
    true
}

/// Runs a round for every link whose pause machine is due, through one of its queues the
/// thread watches, and the rounds of the queues of links that emit pause frames whose watch is
/// due; returns when the next link timer is due, in clock ns (None: none runs).
fn serve_link_timers() -> Option<u64> {
    let now = clock_ns();
    let (mut due, _) = super::pause::timers(now);
    let (watched, next_watch) = super::pause::watches(now);
    due.extend(watched);
    due.sort_unstable();
    due.dedup();
    if !due.is_empty() {
        let found: Vec<(u64, Lookup)> = {
            let w = state();
            w.entries
                .iter()
                .filter(|e| due.binary_search(&e.umqh).is_ok())
                .map(|e| (e.umqh, e.lookup))
                .collect()
        };
        for (umqh, lookup) in found {
            if let Some(q) = lookup(umqh) {
                q.service();
            }
        }
    }
    let now = clock_ns();
    let (_, next) = super::pause::timers(now);
    let min = LINK_TIMER_MIN.as_nanos() as u64;
    let next = next.map(|t| t.max(now + min));
    [next, next_watch].into_iter().flatten().min()
}

/// Sleeps up to `ns` or until a peer process exits, a queue's wake-up fd turns readable, a
/// peer rings a call bell or the engine is woken; returns the fds of peers gone and what woke
/// it (a call bell is served by the next `serve_call_bells`), and clears the counters that
/// rang.
fn wait(look: &Look, ns: u64) -> (Vec<Arc<OwnedFd>>, Woke) {
    let watched = look.pidfds.len() + look.bells.len();
    let ringing: Vec<(RawFd, bool)> = look
        .pidfds
        .iter()
        .map(|fd| (fd.as_raw_fd(), false))
        .chain(look.bells.iter().map(|b| (b.fd, b.counter)))
        .chain(look.wake.iter().map(|fd| (fd.as_raw_fd(), true)))
        .collect();
    let sockets: Vec<(usize, RawFd, i16)> = (look.call_bells.iter().enumerate())
        .flat_map(|(i, b)| b.sockets().into_iter().map(move |(fd, ev)| (i, fd, ev)))
        .collect();
    let mut fds: Vec<libc::pollfd> = ringing
        .iter()
        .map(|&(fd, _)| (fd, libc::POLLIN))
        .chain(look.call_bells.iter().map(|b| (b.fd(), libc::POLLIN)))
        .chain(sockets.iter().map(|&(_, fd, events)| (fd, events)))
        .map(|(fd, events)| libc::pollfd {
            fd,
            events,
            revents: 0,
        })
        .collect();
    // ppoll: a timer may be due in less than a millisecond.
    let timeout = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: `fds` is a live array of its length.
    let ready = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    };
    if ready <= 0 {
        return (Vec::new(), Woke::Timeout);
    }
    let woke = if fds[..watched].iter().any(|p| p.revents != 0) {
        Woke::Fd
    } else if fds[watched..ringing.len()].iter().any(|p| p.revents != 0) {
        Woke::Wake
    } else {
        Woke::Timeout
    };
    let first_socket = fds.len() - sockets.len();
    for (p, &(bell, fd, _)) in fds[first_socket..].iter().zip(&sockets) {
        if p.revents != 0 {
            look.call_bells[bell].ready(fd, p.revents);
        }
    }
    for (p, &(_, counter)) in fds.iter().zip(&ringing) {
        if counter && p.revents & libc::POLLIN != 0 {
            let mut count = 0u64;
            // SAFETY: an 8-byte read from an eventfd into a u64.
            unsafe { libc::read(p.fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
        }
    }
    // A pidfd is readable once its process has exited; a watch socket, which carries no byte,
    // once its peer reset it (or, hung up or in error, once it is no use either).
    let gone = libc::POLLIN | libc::POLLHUP | libc::POLLERR;
    let exited = fds
        .iter()
        .zip(&look.pidfds)
        .filter(|(p, _)| p.revents & gone != 0)
        .map(|(_, fd)| fd.clone())
        .collect();
    (exited, woke)
}

/// Polling-mode queues serviced at most per tick. Finding out whether a queue has anything to
/// do means looking at its memory (for shared memory, the peer's ring), a cache miss or two a
/// queue; ten thousand of them each tick took a sixth of the machine's time from the
/// applications. So the polling-mode queues take turns, this many a tick: the thread's cost
/// stays bounded however many queues there are, and a queue is serviced at least every
/// `n / POLLED_PER_TICK` ticks. (Their applications drive them when they call in; this is for
/// one-sided WRs to a target that does not.) Interrupt-mode queues are serviced every tick:
/// nothing else drives them.
const POLLED_PER_TICK: usize = 1024;

/// Where the next tick's turn of polling-mode queues starts.
static TURN: AtomicUsize = AtomicUsize::new(0);

/// The entries to service this tick: every interrupt-mode one, and `POLLED_PER_TICK` of the
/// others from number `turn` on (modulo their count), round robin.
fn due(entries: &[Entry], turn: usize) -> impl Iterator<Item = &Entry> {
    let polled = entries.iter().filter(|e| !e.interrupt).count();
    let start = turn % polled.max(1);
    let window = move |i: usize| (i + polled - start) % polled.max(1) < POLLED_PER_TICK;
    let mut nth = 0;
    entries.iter().filter(move |e| {
        if e.interrupt {
            return true;
        }
        nth += 1;
        window(nth - 1)
    })
}

/// Reports dead peers and services the others that are due.
fn sweep(exited: &[Arc<OwnedFd>]) {
    type Found = (u64, Lookup, String);
    let (dead, live): (Vec<Found>, Vec<Found>) = {
        let mut w = state();
        let is_dead = |e: &Entry| match (&e.gone, e.pid) {
            (Some(fd), _) => exited.iter().any(|x| Arc::ptr_eq(x, fd)),
            (None, Some(pid)) => !alive(pid),
            (None, None) => false,
        };
        let dead = w
            .entries
            .iter()
            .filter(|e| is_dead(e))
            .map(|e| (e.umqh, e.lookup, e.why_lost()))
            .collect();
        w.entries.retain(|e| !is_dead(e));
        let turn = TURN.fetch_add(POLLED_PER_TICK, Ordering::Relaxed);
        let live = due(&w.entries, turn)
            .map(|e| (e.umqh, e.lookup, String::new()))
            .collect();
        (dead, live)
    };
    for (umqh, lookup, why) in dead {
        if let Some(q) = lookup(umqh) {
            q.peer_lost(&why);
        }
    }
    for (umqh, lookup, _) in live {
        if let Some(q) = lookup(umqh) {
            q.service();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(umqh: u64, interrupt: bool) -> Entry {
        Entry {
            umqh,
            lookup: |_| None,
            pid: None,
            gone: None,
            interrupt,
            call_bell: None,
        }
    }

    /// Every interrupt-mode queue each tick; the polling-mode ones a bounded window at a time,
    /// each of them within `n / POLLED_PER_TICK` (rounded up) ticks.
    #[test]
    fn polling_queues_take_turns_and_interrupt_ones_come_every_tick() {
        let n = 2 * POLLED_PER_TICK + 100;
        let mut entries: Vec<Entry> = (0..n as u64).map(|h| entry(h, false)).collect();
        entries.insert(7, entry(1_000_001, true));
        entries.push(entry(1_000_002, true));
        let mut seen = std::collections::HashSet::new();
        for tick in 0..3 {
            let due: Vec<u64> = due(&entries, tick * POLLED_PER_TICK)
                .map(|e| e.umqh)
                .collect();
            assert!(
                due.contains(&1_000_001) && due.contains(&1_000_002),
                "tick {tick}"
            );
            assert_eq!(due.len(), 2 + POLLED_PER_TICK.min(n), "tick {tick}");
            seen.extend(due);
        }
        assert_eq!(seen.len(), n + 2, "every queue within three ticks");
        let few: Vec<Entry> = (0..5).map(|h| entry(h, false)).collect();
        assert_eq!(due(&few, 12345).count(), 5);
        assert_eq!(due(&[], 3).count(), 0);
    }

    #[test]
    fn only_an_exited_process_is_reported() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let exiting = Arc::new(pidfd_open(child.id()).expect("pidfd_open"));
        let living = Arc::new(pidfd_open(std::process::id()).unwrap());
        child.wait().unwrap();
        let (exited, woke) = wait(
            &polling(vec![living.clone(), exiting.clone()], None),
            1_000_000_000,
        );
        assert_eq!(woke, Woke::Fd);
        assert_eq!(exited.len(), 1);
        assert!(Arc::ptr_eq(&exited[0], &exiting));
        let (exited, woke) = wait(&polling(vec![living], None), 10_000_000);
        assert!(exited.is_empty() && woke == Woke::Timeout);
    }

    fn polling(pidfds: Vec<Arc<OwnedFd>>, wake: Option<Arc<OwnedFd>>) -> Look {
        Look {
            pidfds,
            bells: Vec::new(),
            call_bells: Vec::new(),
            wake,
            _sleepers: Vec::new(),
            watching: false,
            tick: None,
        }
    }

    /// Deadlines come out by time, one of each kind a queue; a new one of a kind replaces the
    /// old, and filing says whether it is now the earliest (the engine is then woken).
    #[test]
    fn a_queue_keeps_one_deadline_of_each_kind_served_by_time() {
        let none: Lookup = |_| None;
        let mut d = Deadlines::new();
        assert!(d.file(7, Due::PoolRelease, none, 1_000));
        assert!(
            !d.file(7, Due::Round, none, 2_000),
            "later than the earliest"
        );
        assert!(d.file(8, Due::Round, none, 500));
        assert!(!d.file(7, Due::Round, none, 600), "replaced, not added");
        assert_eq!(d.next(), Some(500));
        let kinds = |v: Vec<(u64, Due, Lookup)>| -> Vec<(u64, Due)> {
            v.into_iter().map(|(h, k, _)| (h, k)).collect()
        };
        assert_eq!(kinds(d.take_due(499)), vec![]);
        assert_eq!(
            kinds(d.take_due(1_000)),
            vec![(8, Due::Round), (7, Due::Round), (7, Due::PoolRelease)]
        );
        assert!(d.is_empty() && d.next().is_none());
        assert!(d.file(7, Due::Round, none, 3_000), "its kind is free again");
        d.file(7, Due::PoolRelease, none, 4_000);
        d.file(9, Due::Round, none, 5_000);
        d.forget(7, &[Due::Round, Due::PoolRelease]);
        assert_eq!(d.next(), Some(5_000), "only the other queue's is left");
    }

    /// A deadline the engine files on its own thread (a queue's deadline filing its next) is
    /// noted for the engine to take up before it sleeps, not rung on its own wake fd; one
    /// filed on any other thread rings.
    #[test]
    fn the_engine_takes_up_its_own_deadlines_without_waking_itself() {
        assert!(!take_filed_by_engine());
        assert!(!filed_by_engine(), "another thread rings");
        assert!(!take_filed_by_engine(), "and is no engine");
        std::thread::spawn(|| {
            ENGINE.with(|e| e.set(Engine::Here));
            assert!(!take_filed_by_engine(), "nothing filed yet");
            assert!(filed_by_engine(), "noted, not rung");
            assert!(take_filed_by_engine(), "taken up before the sleep");
            assert!(!take_filed_by_engine(), "once");
        })
        .join()
        .unwrap();
    }

    /// The wake fd ends a sleep at once, as a wake of its own (not a watched fd's: no look),
    /// and is read back to quiet.
    #[test]
    fn the_wake_fd_ends_a_sleep_and_is_cleared() {
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(fd >= 0);
        let wake = Arc::new(unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) });
        let look = polling(Vec::new(), Some(wake.clone()));
        let one = 1u64;
        unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
        let start = Instant::now();
        let (exited, woke) = wait(&look, 10_000_000_000);
        assert!(woke == Woke::Wake && exited.is_empty());
        assert!(start.elapsed() < Duration::from_secs(5));
        let (_, woke) = wait(&look, 1_000_000);
        assert_eq!(woke, Woke::Timeout, "the counter was read back");
    }
}
