//! The progress thread: moves every queue bound through a link (`transport::link`) along when
//! its application does not call in, and notices a peer process that died.
//!
//! One thread per process, alive while something is watched. Each provider hands it the fds to
//! poll: for a peer in another process of this host, a pidfd (readable when that process exits,
//! however it exits); for one on another host, a socket its kernel resets when it exits (see
//! `fabric::watch`). So a dead peer is noticed at once: the queue goes to the error state, its
//! sends in flight complete with `UMQ_BUF_WR_FLUSH_ERR`, `UMQ_EVENT_QH_ERR` is raised and
//! interrupt waiters wake. Without pidfd (Linux < 5.3) it probes the pid every tick instead. A
//! peer that goes silent without dying (a host gone, a link down) is the provider's to notice:
//! its round reports the broken binding.
//!
//! It also runs the rounds of watched queues each tick (every interrupt-mode one, polling-mode
//! ones by turns, at most `POLLED_PER_TICK` a tick), so one-sided WRITE / READ / NOP
//! complete even when the target never calls in. Interrupt-mode queues have no caller polling
//! them: the thread also sleeps on the fd their endpoint is woken through (for shared memory, a
//! doorbell eventfd the peer rings after a change, see `shm::ring_if_changed`), and services
//! them at once when one is. A queue whose peer cannot wake it is serviced every millisecond.
//!
//! A queue's peer can also call for it to be served: a network node has a call bell (see
//! `fabric::call_bell`), and a peer that sends a WRITE or READ rings it, so the WR runs a moment
//! after it arrives, not at the next tick, while the application does not call in. The thread
//! sleeps on every call bell and serves the queues named by what rang, again at growing
//! intervals while the WR that rang has not run (it may arrive a little after the ring).
//!
//! And it keeps the links' pause timers (`transport::pause`): when a link's machine is due (a
//! refresh of the XOFF that holds the peer while our application is not taking its messages, a
//! pause ending, the storm watchdog), the thread wakes then, not at its next tick, and runs a
//! round of one of the link's queues. Real NICs refresh a pause in hardware; an application
//! that sleeps with a backlog must not let its peer's pause lapse between two ticks.

use crate::os::{alive, pidfd_open};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the progress thread does to a watched queue; the queue layer implements it, so this
/// thread never reaches into the layer above.
pub trait Watched: Send + Sync {
    /// One round of the queue's link (and of sends waiting for credit).
    fn service(&self);
    /// The peer process has exited.
    fn peer_lost(&self, why: &str);
    /// Arms the fd the queue is woken through before the thread's last look (None: the queue
    /// has none).
    fn arm_wakeup(&self) -> Option<Wakeup>;
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
    fn why_lost(&self) -> String {
        match self.pid {
            Some(pid) => format!("peer process {pid} exited"),
            None => "peer process gone (its host reset our watch connection)".into(),
        }
    }
}

/// The watched queues, and whether the thread runs.
static WATCHED: Mutex<(Vec<Entry>, bool)> = Mutex::new((Vec::new(), false));

const TICK: Duration = Duration::from_millis(20);
const INTERRUPT_TICK: Duration = Duration::from_millis(1);
/// The shortest sleep for a link timer: a timer that stays due (a round could not send its
/// frame) is retried this often, not in a busy loop.
const LINK_TIMER_MIN: Duration = Duration::from_micros(20);
/// How late the kernel may end this thread's sleeps, in ns.
const TIMER_SLACK_NS: libc::c_ulong = 1_000;

/// Starts watching queue `umqh`, found through `lookup`, as `what` says.
pub fn watch(umqh: u64, lookup: Lookup, what: Watch) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.0.retain(|e| e.umqh != umqh);
    // One pidfd per peer process, shared by all its queues (a process bound to another by ten
    // thousand queues must not spend ten thousand fds on watching it).
    let shared = what.peer_pid.and_then(|pid| {
        w.0.iter()
            .find(|e| e.pid == Some(pid))
            .and_then(|e| e.gone.clone())
    });
    let gone = shared.or_else(|| {
        what.peer_pid
            .and_then(pidfd_open)
            .map(Arc::new)
            .or(what.peer_socket)
    });
    w.0.push(Entry {
        umqh,
        lookup,
        pid: what.peer_pid,
        gone,
        interrupt: what.interrupt,
        call_bell: what.call_bell,
    });
    if !w.1 {
        w.1 = true;
        std::thread::Builder::new()
            .name("umq-progress".into())
            .spawn(run)
            .expect("cannot start the umq progress thread");
    }
}

pub fn unwatch(umqh: u64) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.0.retain(|e| e.umqh != umqh);
}

fn run() {
    // Its rounds do not show that an application calls in.
    super::pause::serve_timers_on_this_thread();
    // A link timer may be 168 µs away (an XOFF refresh at 100 Gbit/s); the kernel's default
    // 50 µs of slack on this thread's sleeps would eat a third of that.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, TIMER_SLACK_NS) };
    let mut exited = Vec::new();
    let mut woke = true;
    let mut looked = Instant::now();
    let mut last: Option<Look> = None;
    loop {
        // A look (the snapshot, the doorbells armed, the sweep) when an fd woke the thread or a
        // tick has passed; a wake for a link timer alone serves that timer and nothing else, so
        // the timers' pace never multiplies the cost of the polling-mode queues.
        let look = match last.take() {
            Some(l) if !woke && looked.elapsed() < l.tick => l,
            _ => {
                let Some(l) = look(&exited) else {
                    return;
                };
                looked = Instant::now();
                l
            }
        };
        let until_tick = look.tick.saturating_sub(looked.elapsed());
        let sleep = [serve_link_timers(), serve_call_bells(&look.call_bells)]
            .into_iter()
            .flatten()
            .fold(until_tick, Duration::min);
        (exited, woke) = wait(&look.pidfds, &look.bells, &look.call_bells, sleep);
        // `look.sleepers` keeps the queues, so their doorbell fds stay open while polled.
        last = Some(look);
    }
}

/// What the thread polls until its next look.
struct Look {
    pidfds: Vec<Arc<OwnedFd>>,
    bells: Vec<Wakeup>,
    call_bells: Vec<Arc<dyn CallBell>>,
    _sleepers: Vec<Arc<dyn Watched>>,
    tick: Duration,
}

/// Reports the peers in `exited` and services the queues due; None (the thread ends) when
/// nothing is watched.
fn look(exited: &[Arc<OwnedFd>]) -> Option<Look> {
    let (pidfds, sleepers, call_bells) = snapshot()?;
    // Arm the doorbells before the last look: a change the look misses rings one.
    let bells: Vec<Wakeup> = sleepers.iter().filter_map(|q| q.arm_wakeup()).collect();
    sweep(exited);
    // Without a doorbell the peer rings, an interrupt-mode queue is serviced every tick.
    let all_rung = bells.len() == sleepers.len() && bells.iter().all(|b| b.rung_by_peer);
    Some(Look {
        pidfds,
        bells,
        call_bells,
        _sleepers: sleepers,
        tick: if all_rung { TICK } else { INTERRUPT_TICK },
    })
}

/// The fds to poll for peers gone, the queues to arm wake-ups for, and the call bells.
type Snapshot = (
    Vec<Arc<OwnedFd>>,
    Vec<Arc<dyn Watched>>,
    Vec<Arc<dyn CallBell>>,
);

/// The watched peers' pidfds, the interrupt-mode queues and the call bells, or None (the
/// thread ends) when nothing is watched.
fn snapshot() -> Option<Snapshot> {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    if w.0.is_empty() {
        w.1 = false;
        return None;
    }
    let mut pidfds: Vec<Arc<OwnedFd>> = Vec::new();
    for fd in w.0.iter().filter_map(|e| e.gone.as_ref()) {
        if !pidfds.iter().any(|p| Arc::ptr_eq(p, fd)) {
            pidfds.push(fd.clone());
        }
    }
    let mut call_bells: Vec<Arc<dyn CallBell>> = Vec::new();
    for (b, _) in w.0.iter().filter_map(|e| e.call_bell.as_ref()) {
        if !call_bells.iter().any(|x| same(x, b)) {
            call_bells.push(b.clone());
        }
    }
    let sleepers =
        w.0.iter()
            .filter(|e| e.interrupt)
            .filter_map(|e| (e.lookup)(e.umqh))
            .collect();
    Some((pidfds, sleepers, call_bells))
}

fn same(a: &Arc<dyn CallBell>, b: &Arc<dyn CallBell>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Serves the queues whose peers rang a call bell; returns how long until a call bell wants
/// to be looked at again (None: none does).
fn serve_call_bells(call_bells: &[Arc<dyn CallBell>]) -> Option<Duration> {
    let now = Instant::now();
    for d in call_bells {
        let tags = d.due(now);
        if tags.is_empty() {
            continue;
        }
        let found: Vec<(u64, Lookup)> = {
            let w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            w.0.iter()
                .filter(|e| {
                    e.call_bell
                        .as_ref()
                        .is_some_and(|(x, tag)| same(x, d) && tags.contains(tag))
                })
                .map(|e| (e.umqh, e.lookup))
                .collect()
        };
        for (umqh, lookup) in found {
            if let Some(q) = lookup(umqh) {
                q.service();
            }
        }
    }
    // After the services: a ring they answered wants no second look.
    let next = call_bells.iter().filter_map(|d| d.next()).min()?;
    Some(
        next.saturating_duration_since(Instant::now())
            .max(LINK_TIMER_MIN),
    )
}

/// Runs a round for every link whose pause machine is due, through one of its queues the
/// thread watches; returns how long until the next link timer (None: none runs).
fn serve_link_timers() -> Option<Duration> {
    let now = super::pause::now_ns();
    let (due, _) = super::pause::timers(now);
    if !due.is_empty() {
        let found: Vec<(u64, Lookup)> = {
            let w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            w.0.iter()
                .filter(|e| due.contains(&e.umqh))
                .map(|e| (e.umqh, e.lookup))
                .collect()
        };
        for (umqh, lookup) in found {
            if let Some(q) = lookup(umqh) {
                q.service();
            }
        }
    }
    let now = super::pause::now_ns();
    let (_, next) = super::pause::timers(now);
    next.map(|t| Duration::from_nanos(t - now).max(LINK_TIMER_MIN))
}

/// Sleeps up to `tick` or until a peer process exits, a queue's wake-up fd turns readable or
/// a peer rings a call bell; returns the fds of peers gone and whether a pidfd or wake-up fd
/// woke the thread (a call bell is served by the next `serve_call_bells`), and clears the
/// wake-ups that rang.
fn wait(
    pidfds: &[Arc<OwnedFd>],
    wakeups: &[Wakeup],
    call_bells: &[Arc<dyn CallBell>],
    tick: Duration,
) -> (Vec<Arc<OwnedFd>>, bool) {
    let mut fds: Vec<libc::pollfd> = pidfds
        .iter()
        .map(|fd| fd.as_raw_fd())
        .chain(wakeups.iter().map(|b| b.fd))
        .chain(call_bells.iter().map(|b| b.fd()))
        .map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // ppoll: a link timer may be due in less than a millisecond.
    let timeout = libc::timespec {
        tv_sec: tick.as_secs() as libc::time_t,
        tv_nsec: tick.subsec_nanos() as libc::c_long,
    };
    let ready = unsafe {
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            &timeout,
            std::ptr::null(),
        )
    };
    if ready <= 0 {
        return (Vec::new(), false);
    }
    let watched = &fds[..pidfds.len() + wakeups.len()];
    let woke = watched.iter().any(|p| p.revents != 0);
    for (p, bell) in fds[pidfds.len()..].iter().zip(wakeups) {
        if bell.counter && p.revents & libc::POLLIN != 0 {
            let mut count = 0u64;
            unsafe { libc::read(p.fd, &mut count as *mut u64 as *mut libc::c_void, 8) };
        }
    }
    // A pidfd is readable once its process has exited; a watch socket, which carries no byte,
    // once its peer reset it (or, hung up or in error, once it is no use either).
    let gone = libc::POLLIN | libc::POLLHUP | libc::POLLERR;
    let exited = fds
        .iter()
        .zip(pidfds)
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
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        let is_dead = |e: &Entry| match (&e.gone, e.pid) {
            (Some(fd), _) => exited.iter().any(|x| Arc::ptr_eq(x, fd)),
            (None, Some(pid)) => !alive(pid),
            (None, None) => false,
        };
        let dead =
            w.0.iter()
                .filter(|e| is_dead(e))
                .map(|e| (e.umqh, e.lookup, e.why_lost()))
                .collect();
        w.0.retain(|e| !is_dead(e));
        let turn = TURN.fetch_add(POLLED_PER_TICK, Ordering::Relaxed);
        let live = due(&w.0, turn)
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
        let both = [living.clone(), exiting.clone()];
        let (exited, woke) = wait(&both, &[], &[], Duration::from_millis(1000));
        assert!(woke);
        assert_eq!(exited.len(), 1);
        assert!(Arc::ptr_eq(&exited[0], &exiting));
        let (exited, woke) = wait(&[living], &[], &[], Duration::from_millis(10));
        assert!(exited.is_empty() && !woke);
    }
}
