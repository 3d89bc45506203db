//! Calling the peer's progress thread to work only the peer's library can carry out.
//!
//! A WR sent to a queue of another process needs that process's library to run: over `tcp` a
//! WRITE, READ or WRITE_IMM is executed by the target's library (see docs/TRANSPORTS.md,
//! "One-sided operations"), and over either provider a message lands in a receive buffer in the
//! receiver's round. When the receiver's application does not call in, only its progress thread
//! runs that library, and it does not poll a polling-mode queue's ring or completion queue (a
//! completion queue with a wait fd costs every message system calls). So a process has call
//! bells: UDP sockets the progress thread sleeps on (a network node's on the node's address;
//! one on 127.0.0.1 for shared memory). A sender whose WRs wait for the peer rings the peer's
//! bell with a tag naming the queue there and how far the peer must have run its WRs: over the
//! network once it handed a WR to libfabric that the peer must execute (`Link::call_if_needed`;
//! not while the peer runs such WRs unasked, and again when they stop moving: `fabric::calls`),
//! and over either when its WRs have not moved for a while (the queue's `Due::Round`), at most
//! once a round trip (while a ring is unanswered, the next waits). The target's thread serves
//! the tagged queue at once, and again at growing intervals (up to a millisecond) until its
//! WRs ran as far as the ring said (the ring may overtake the message on the way, or the first
//! WR to a peer wait for libfabric's connection), then forgets the ring.
//!
//! The node also calls its own thread through the bell when its next ping to a peer falls due
//! (`plan_ping`): a process whose application stays away still pings its peers, so they do not
//! take it for gone after the liveness timeout.
//!
//! A datagram is a hint, never trusted: anyone who can reach the port can send one, and all it
//! can do is make the thread serve a queue (a round that finds nothing costs microseconds), at
//! most `MAX_RINGS` channels at a time and for `GIVE_UP` each.

use super::progress::CallBell as Bell;
use crate::os::{TcpQueues, tcp_queues};
use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What a ring names: a queue at the bell's process (a network channel's id, an inbox's
/// secret).
pub type ChannelId = u64;

/// A ring: the channel, and how many of the peer's WRs must have run there (none for RMA); a
/// byte of flags (`WATCH`) may follow.
const RING_BYTES: usize = 16;
/// The flag of a ring that asks the target to watch the connection (`watch_conn`).
const WATCH: u8 = 1;
/// The first look again after serving a ring whose WRs had not run, how the interval grows, and
/// its most: the first WR to a peer may wait for libfabric to set up the connection, which
/// takes several of the target's progress calls.
const FIRST_AGAIN: Duration = Duration::from_micros(20);
const GROWTH: u32 = 4;
const MOST_AGAIN: Duration = Duration::from_millis(1);
/// A ring is forgotten after this long (the WR may wait for a receive buffer, or the channel be
/// gone: the initiator's queue calls again while its WRs do not move).
const GIVE_UP: Duration = Duration::from_millis(50);
/// An RMA ring (one that asks for nothing to have run) is served at once, then again after
/// this, growing as above, until `RMA_GIVE_UP`: an RMA that reached the peer after the first
/// serve, the last of a stream, is served then. Later than a message ring's first look again:
/// one serve nearly always finds the RMA there, and each look is a round of the target's.
const RMA_FIRST_AGAIN: Duration = Duration::from_micros(250);
const RMA_GIVE_UP: Duration = Duration::from_millis(5);
/// Channels with a ring outstanding at most; datagrams beyond are dropped.
const MAX_RINGS: usize = 4096;
/// Datagrams taken per look, so that a flood cannot hold the thread.
const TAKE_AT_MOST: usize = 256;

#[derive(Debug, Clone, Copy)]
struct Ring {
    upto: u64,
    next: Instant,
    every: Duration,
    since: Instant,
    /// The ring asked for its connection to be watched (`WATCH`).
    watch: bool,
    /// That connection, once its channel's round named it.
    conn: Option<Conn>,
}

/// What a watched connection shows its arrivals by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnFds {
    /// Its sockets (-1: none): both sides may have connected, each sending on its own.
    Sockets([RawFd; 2]),
    /// The engine's event fd (UCX keeps its sockets to itself), readable once the channel's
    /// round armed it (`arm_conn`) and an event came.
    Events(RawFd),
}

/// What arming an event fd found (`arm_conn`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Armed {
    /// Armed: it turns readable on the next event.
    Sleep,
    /// Not armed: the engine gave the queue completions while arming, or kept reporting
    /// events. Serve the queue again before sleeping.
    ServeAgain,
    /// The engine refused: the ring's schedule serves it.
    Failed,
}

/// A connection a ring watches (`watch_conn`). Over tcp the target's provider carries out RMA
/// only when called, and a long message arrives over many serves, so the thread serves the
/// ring as bytes arrive on the socket (a WRITE's payload, a READ's request) and, while the
/// provider's answer is being written, as room comes. The socket is the provider's: it is only
/// polled and its counters read. Where the engine shows arrivals only by an event fd, the
/// thread sleeps on that instead, once the round that served the ring armed it.
#[derive(Debug, Clone, Copy)]
struct Conn {
    /// Its sockets, or an event fd: no socket counters then, and watched only while `armed`.
    watched: ConnFds,
    /// The event fd was armed since the ring was last served.
    armed: bool,
    /// Watched for room too: the last serve wrote `WROTE_MUCH` or more into it (a long READ's
    /// answer, which the provider writes as the socket takes it).
    room: bool,
    /// It turned ready; the next `due` serves the ring.
    ready: bool,
    /// For reading (or hung up): a serve that then moves no byte either way is stuck.
    ready_to_read: bool,
    /// Its queues as a serve found them (`queues`).
    before: Option<TcpQueues>,
    /// The last serve read none of the bytes waiting in it (a message for a queue without a
    /// receive buffer), or, woken to read, moved none (a socket hung up, bytes our
    /// application's own poll took first): it is not watched until the ring's next timed
    /// look, so that it cannot keep the thread spinning.
    stuck: bool,
}

/// A serve that wrote this much may have left the provider more to write.
const WROTE_MUCH: u64 = 32 << 10;

impl Conn {
    /// The fds it is watched by (-1: none).
    fn fds(&self) -> [RawFd; 2] {
        match self.watched {
            ConnFds::Sockets(fds) => fds,
            ConnFds::Events(fd) => [fd, -1],
        }
    }

    fn events(&self) -> bool {
        matches!(self.watched, ConnFds::Events(_))
    }

    /// Its sockets' queues, added up; None once one is no TCP socket.
    fn queues(&self) -> Option<TcpQueues> {
        let mut sum = TcpQueues {
            taken: 0,
            unread: 0,
            handed: 0,
        };
        for fd in self.fds().into_iter().filter(|&fd| fd >= 0) {
            let q = tcp_queues(fd)?;
            sum.taken += q.taken;
            sum.unread += q.unread;
            sum.handed += q.handed;
        }
        Some(sum)
    }
}

/// A call bell: a network node's, or the process's for shared memory (`local`).
#[derive(Debug)]
pub struct CallBell {
    sock: UdpSocket,
    rings: Mutex<HashMap<ChannelId, Ring>>,
    /// Some ring is outstanding (a round checks this before it takes the lock).
    any: AtomicBool,
    /// The node's next ping: when, and the channel whose round sends it.
    ping: Mutex<Option<(Instant, ChannelId)>>,
    ping_planned: AtomicBool,
}

impl CallBell {
    /// A call bell on `host` (port 0: the kernel's choice); None when the socket cannot be made.
    pub fn open(host: SocketAddr) -> Option<CallBell> {
        let sock = UdpSocket::bind(host).ok()?;
        sock.set_nonblocking(true).ok()?;
        Some(CallBell {
            sock,
            rings: Mutex::new(HashMap::new()),
            any: AtomicBool::new(false),
            ping: Mutex::new(None),
            ping_planned: AtomicBool::new(false),
        })
    }

    /// This process's call bell on 127.0.0.1, for bindings over shared memory: made on first
    /// use, closed when the last binding that holds it goes (so a process with none holds no
    /// fd of ours). None when the socket cannot be made.
    pub fn local() -> Option<Arc<CallBell>> {
        static LOCAL: Mutex<Weak<CallBell>> = Mutex::new(Weak::new());
        let mut local = LOCAL.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(bell) = local.upgrade() {
            return Some(bell);
        }
        let bell = Arc::new(CallBell::open((Ipv4Addr::LOCALHOST, 0).into())?);
        *local = Arc::downgrade(&bell);
        Some(bell)
    }

    pub fn port(&self) -> u16 {
        self.sock.local_addr().map_or(0, |a| a.port())
    }

    /// Calls the node at `at` to channel `ch`, until `upto` of our WRs ran there. Best effort:
    /// a ring that does not get through leaves the WR to the peer's application, the next call
    /// or the progress thread's backstop.
    pub fn ring(&self, at: SocketAddr, ch: ChannelId, upto: u64) {
        self.send_ring(at, ch, upto, None);
    }

    /// `ring`, asking the node to `watch` the connection while the WRs have not all run: some
    /// are long, and the bytes of one arrive over many of its serves.
    pub fn ring_watching(&self, at: SocketAddr, ch: ChannelId, upto: u64, watch: bool) {
        self.send_ring(at, ch, upto, watch.then_some(WATCH));
    }

    /// Calls the node at `at` to channel `ch` for RMA of ours that its provider carries out
    /// (nothing to have run), asking it to `watch` the connection while it serves them: some
    /// of them are long.
    pub fn ring_rma(&self, at: SocketAddr, ch: ChannelId, watch: bool) {
        self.send_ring(at, ch, 0, watch.then_some(WATCH));
    }

    fn send_ring(&self, at: SocketAddr, ch: ChannelId, upto: u64, flags: Option<u8>) {
        let mut d = [0u8; RING_BYTES + 1];
        d[..8].copy_from_slice(&ch.to_le_bytes());
        d[8..16].copy_from_slice(&upto.to_le_bytes());
        let len = match flags {
            Some(f) => {
                d[RING_BYTES] = f;
                RING_BYTES + 1
            }
            None => RING_BYTES,
        };
        let _ = self.sock.send_to(&d[..len], at);
    }

    /// Calls this process's own thread to channel `ch` (as a peer's ring would): something for
    /// it arrived in a round of another binding's.
    pub fn ring_here(&self, ch: ChannelId) {
        if let Ok(at) = self.sock.local_addr() {
            self.ring(at, ch, 0);
        }
    }

    /// Whether some ring is outstanding (one load: a round asks before it says what it ran).
    #[inline(always)]
    pub fn rung(&self) -> bool {
        self.any.load(Ordering::Relaxed)
    }

    /// Channel `ch` has run `executed` of its peer's WRs: a ring they answer is done (true).
    #[inline]
    pub fn served(&self, ch: ChannelId, executed: u64) -> bool {
        if !self.any.load(Ordering::Relaxed) {
            return false;
        }
        let mut rings = self.lock();
        // A ring that asks for nothing to have run (RMA: the provider's progress serves it,
        // and its requests may arrive after the ring) is served on its schedule until it
        // gives up, not once.
        if rings
            .get(&ch)
            .is_none_or(|r| r.upto == 0 || executed < r.upto)
        {
            return false;
        }
        rings.remove(&ch);
        self.any.store(!rings.is_empty(), Ordering::Relaxed);
        true
    }

    /// Channel `ch`'s peer sends over the connection whose sockets (or event fd) `conn` gives
    /// (asked only while a ring of `ch`'s that asked to watch it is outstanding and names
    /// none): the ring is served as it turns ready, and on its schedule besides.
    #[inline]
    pub fn watch_conn(&self, ch: ChannelId, conn: impl FnOnce() -> Option<ConnFds>) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut rings = self.lock();
        let Some(r) = rings.get_mut(&ch).filter(|r| r.watch && r.conn.is_none()) else {
            return;
        };
        r.conn = conn().map(|watched| {
            let mut c = Conn {
                watched,
                armed: false,
                room: false,
                ready: false,
                ready_to_read: false,
                before: None,
                stuck: false,
            };
            c.before = c.queues();
            c
        });
    }

    /// At the end of channel `ch`'s round: when a ring of its watches an event fd, `arm` it
    /// (the round holds what the engine needs), so that the thread may sleep on it.
    #[inline]
    pub fn arm_conn(&self, ch: ChannelId, arm: impl FnOnce() -> Armed) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let mut rings = self.lock();
        let Some(c) = rings.get_mut(&ch).and_then(|r| r.conn.as_mut()) else {
            return;
        };
        if !c.events() || c.armed {
            return;
        }
        match arm() {
            Armed::Sleep => c.armed = true,
            Armed::ServeAgain => c.ready = true,
            Armed::Failed => {}
        }
    }

    /// Whether a ping is planned (one load: every round asks).
    #[inline]
    pub fn ping_planned(&self) -> bool {
        self.ping_planned.load(Ordering::Relaxed)
    }

    /// Has channel `ch` served at `at`, so that its round pings the peers that heard nothing
    /// from us for a while (None: no peer to ping).
    pub fn plan_ping(&self, plan: Option<(Instant, ChannelId)>) {
        *self.ping.lock().unwrap_or_else(|p| p.into_inner()) = plan;
        self.ping_planned.store(plan.is_some(), Ordering::Relaxed);
    }

    /// The channel the planned ping is to run on.
    pub fn ping_channel(&self) -> Option<ChannelId> {
        let ping = self.ping.lock().unwrap_or_else(|p| p.into_inner());
        ping.map(|(_, ch)| ch)
    }

    /// Takes the planned ping if it is due by `now`.
    fn ping_due(&self, now: Instant) -> Option<ChannelId> {
        let mut ping = self.ping.lock().unwrap_or_else(|p| p.into_inner());
        let (at, ch) = (*ping)?;
        if at > now {
            return None;
        }
        *ping = None;
        self.ping_planned.store(false, Ordering::Relaxed);
        Some(ch)
    }

    fn next_ping(&self) -> Option<Instant> {
        let ping = self.ping.lock().unwrap_or_else(|p| p.into_inner());
        ping.map(|(at, _)| at)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<ChannelId, Ring>> {
        self.rings.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads the datagrams waiting into `rings`.
    fn take(&self, rings: &mut HashMap<ChannelId, Ring>, now: Instant) {
        let mut d = [0u8; RING_BYTES + 2];
        for _ in 0..TAKE_AT_MOST {
            let Ok(n) = self.sock.recv(&mut d) else {
                return; // WouldBlock: all taken
            };
            if n != RING_BYTES && n != RING_BYTES + 1 {
                continue;
            }
            let ch = u64::from_le_bytes(d[..8].try_into().unwrap());
            let upto = u64::from_le_bytes(d[8..16].try_into().unwrap());
            let watch = n > RING_BYTES && d[RING_BYTES] & WATCH != 0;
            if rings.len() >= MAX_RINGS && !rings.contains_key(&ch) {
                continue;
            }
            let fresh = Ring {
                upto,
                next: now,
                every: if upto == 0 {
                    RMA_FIRST_AGAIN
                } else {
                    FIRST_AGAIN
                },
                since: now,
                watch,
                conn: None,
            };
            let r = rings.entry(ch).or_insert(fresh);
            // A new RMA ring (upto 0) is served at once, whatever the last one's schedule.
            if upto > r.upto || (upto == 0 && r.upto == 0) {
                let conn = r.conn.filter(|_| watch).map(|c| Conn { stuck: false, ..c });
                *r = Ring { conn, ..fresh };
            }
        }
    }
}

impl Bell for CallBell {
    fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    fn due(&self, now: Instant) -> Vec<u64> {
        let mut due = Vec::from_iter(self.ping_due(now));
        let mut rings = self.lock();
        self.take(&mut rings, now);
        rings.retain(|_, r| {
            let give_up = if r.upto == 0 { RMA_GIVE_UP } else { GIVE_UP };
            now.duration_since(r.since) < give_up
        });
        for (&ch, r) in rings.iter_mut() {
            let ready = r
                .conn
                .as_mut()
                .is_some_and(|c| std::mem::take(&mut c.ready));
            let timed = r.next <= now;
            if timed {
                r.next = now + r.every;
                r.every = (r.every * GROWTH).min(MOST_AGAIN);
            }
            if !(timed || ready) {
                continue;
            }
            if let Some(c) = r.conn.as_mut() {
                c.stuck &= !timed;
                c.before = c.queues();
                c.armed = false; // the serve's round arms it again
            }
            due.push(ch);
        }
        self.any.store(!rings.is_empty(), Ordering::Relaxed);
        due
    }

    fn sockets(&self) -> Vec<(RawFd, i16)> {
        if !self.any.load(Ordering::Relaxed) {
            return Vec::new();
        }
        let mut out: Vec<(RawFd, i16)> = Vec::new();
        for c in self
            .lock()
            .values()
            .filter_map(|r| r.conn)
            .filter(|c| !c.stuck && (c.armed || !c.events()))
        {
            let events = libc::POLLIN | if c.room { libc::POLLOUT } else { 0 };
            for fd in c.fds().into_iter().filter(|&fd| fd >= 0) {
                match out.iter_mut().find(|(x, _)| *x == fd) {
                    Some((_, e)) => *e |= events,
                    None => out.push((fd, events)),
                }
            }
        }
        out
    }

    fn ready(&self, fd: RawFd, events: i16) {
        let to_read = events & !libc::POLLOUT != 0;
        for c in self.lock().values_mut().filter_map(|r| r.conn.as_mut()) {
            if c.fds().contains(&fd) {
                c.ready = true;
                c.ready_to_read |= to_read;
                c.armed = false; // an event fd stays readable until armed again
            }
        }
    }

    fn after_serve(&self, tags: &[u64]) {
        if !self.any.load(Ordering::Relaxed) {
            return;
        }
        let now = Instant::now();
        let mut rings = self.lock();
        for (_, r) in rings.iter_mut().filter(|(ch, _)| tags.contains(ch)) {
            let Some(c) = r.conn.as_mut() else {
                continue;
            };
            if c.events() {
                // No counters say whether the channel's own bytes moved (the event fd is the
                // whole engine's): the ring lasts as long as the initiator's rings keep it.
                continue;
            }
            let (Some(before), Some(after)) = (c.before.take(), c.queues()) else {
                c.stuck = true; // no socket of ours any more: the schedule serves the ring
                continue;
            };
            let took = after.taken > before.taken;
            let wrote = after.handed.saturating_sub(before.handed);
            let woken_to_read = std::mem::take(&mut c.ready_to_read);
            c.stuck = !took && (after.unread > 0 || (woken_to_read && wrote == 0));
            c.room = wrote >= WROTE_MUCH;
            // The peer's operations keep coming: the ring lasts while they do (its
            // initiator, seeing them served unrung, rings no more).
            if took || wrote > 0 {
                r.since = now;
            }
        }
    }

    fn next(&self) -> Option<Instant> {
        let ping = self.next_ping();
        if !self.any.load(Ordering::Relaxed) {
            return ping;
        }
        let rings = self.lock();
        if rings.values().any(|r| r.conn.is_some_and(|c| c.ready)) {
            return Some(Instant::now()); // a round could not arm its event fd: serve it again
        }
        rings.values().map(|r| r.next).chain(ping).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bell() -> CallBell {
        CallBell::open("127.0.0.1:0".parse().unwrap()).expect("a call bell on 127.0.0.1")
    }

    fn at(b: &CallBell) -> SocketAddr {
        SocketAddr::new("127.0.0.1".parse().unwrap(), b.port())
    }

    /// Waits for the bell's socket to be readable (the datagram is on its way).
    fn readable(b: &CallBell) {
        let mut p = libc::pollfd {
            fd: b.fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        assert_eq!(
            unsafe { libc::poll(&mut p, 1, 5000) },
            1,
            "the ring never came"
        );
    }

    /// A ring names its channel at once and again, at growing intervals, until the channel
    /// ran as many WRs as the ring said; then it is forgotten.
    #[test]
    fn a_ring_is_served_until_its_wrs_ran() {
        let (target, initiator) = (bell(), bell());
        initiator.ring(at(&target), 0x7_0000_0003, 2);
        readable(&target);
        let t0 = Instant::now();
        let (due, next) = (target.due(t0), Bell::next(&target));
        assert_eq!(due, vec![0x7_0000_0003]);
        let next = next.expect("outstanding until served");
        assert_eq!(next - t0, FIRST_AGAIN);
        assert!(target.due(t0).is_empty(), "not again before its time");
        let (due, next) = (target.due(next), Bell::next(&target));
        assert_eq!(due, vec![0x7_0000_0003]);
        assert_eq!(next.unwrap() - t0, FIRST_AGAIN + FIRST_AGAIN * GROWTH);
        target.served(0x7_0000_0003, 1);
        target.due(next.unwrap());
        assert!(Bell::next(&target).is_some(), "one WR of two ran");
        target.served(0x7_0000_0004, 2);
        target.due(next.unwrap());
        assert!(Bell::next(&target).is_some(), "another channel");
        assert!(Bell::next(&target).is_some());
        target.served(0x7_0000_0003, 2);
        assert_eq!(Bell::next(&target), None, "answered: no second look");
        assert_eq!(target.due(Instant::now()), Vec::<u64>::new());
        assert_eq!(Bell::next(&target), None);
    }

    /// An RMA ring (nothing to have run) is served at once and again after
    /// `RMA_FIRST_AGAIN`, whatever the channel's rounds ran, until `RMA_GIVE_UP`; a new one
    /// starts its schedule over, so the next RMA is served at once.
    #[test]
    fn an_rma_ring_is_served_a_few_times_and_a_new_one_at_once() {
        let (target, initiator) = (bell(), bell());
        let ch = 0x9_0000_0001;
        initiator.ring(at(&target), ch, 0);
        readable(&target);
        let t0 = Instant::now();
        assert_eq!(target.due(t0), vec![ch]);
        assert!(!target.served(ch, 5), "a round does not end it");
        let next = Bell::next(&target).expect("served again");
        assert_eq!(next - t0, RMA_FIRST_AGAIN);
        assert_eq!(target.due(next), vec![ch]);
        initiator.ring(at(&target), ch, 0);
        readable(&target);
        let t1 = next + Duration::from_micros(1);
        assert_eq!(target.due(t1), vec![ch], "a new ring is served at once");
        assert_eq!(Bell::next(&target).unwrap() - t1, RMA_FIRST_AGAIN);
        assert!(target.due(t1 + RMA_GIVE_UP).is_empty(), "given up");
        assert_eq!(Bell::next(&target), None);
    }

    /// The node's planned ping names its channel once it is due, and the bell's next look is
    /// no later than it; a ping taken is no longer planned (the round plans the next).
    #[test]
    fn a_planned_ping_comes_due_once() {
        let b = bell();
        let t0 = Instant::now();
        let at = t0 + Duration::from_millis(500);
        b.plan_ping(Some((at, 0x3_0000_0009)));
        assert!(b.ping_planned());
        assert_eq!(b.ping_channel(), Some(0x3_0000_0009));
        assert_eq!(Bell::next(&b), Some(at));
        assert!(b.due(t0).is_empty(), "not before its time");
        assert_eq!(b.due(at), vec![0x3_0000_0009]);
        assert!(!b.ping_planned() && Bell::next(&b).is_none());
        assert!(b.due(at).is_empty(), "once");
        b.plan_ping(None);
        assert!(!b.ping_planned());
    }

    /// What is not a ring is dropped; a ring is forgotten after `GIVE_UP`.
    #[test]
    fn junk_is_dropped_and_a_ring_is_given_up() {
        let target = bell();
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.send_to(&[1, 2, 3], at(&target)).unwrap();
        sender.send_to(&[0u8; RING_BYTES + 2], at(&target)).unwrap();
        readable(&target);
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(target.due(Instant::now()), Vec::<u64>::new());
        assert_eq!(Bell::next(&target), None);
        sender.send_to(&[9u8; RING_BYTES], at(&target)).unwrap();
        readable(&target);
        let t0 = Instant::now();
        assert_eq!(target.due(t0).len(), 1);
        assert_eq!(target.due(t0 + GIVE_UP), Vec::<u64>::new());
        assert_eq!(Bell::next(&target), None);
    }

    /// A TCP connection on 127.0.0.1, standing in for a provider's: (ours, the peer's end).
    fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        (l.accept().unwrap().0, peer)
    }

    /// An RMA ring whose channel's round named the connection the peer's operations arrive
    /// on (`watch_conn`) is due whenever one of its sockets turns ready, not only on its
    /// schedule. A serve that reads none of what waits leaves the sockets unwatched until the
    /// ring's next timed look; a serve that reads some keeps the ring for `RMA_GIVE_UP` more;
    /// a serve that writes much has the sockets watched for room as well.
    #[test]
    fn an_rma_ring_is_served_as_its_connection_turns_ready() {
        use std::io::{Read, Write};
        let (target, initiator) = (bell(), bell());
        let ch = 0x9_0000_0002;
        let ((mut ours, mut peer), (other, mut other_peer)) = (tcp_pair(), tcp_pair());
        let fds = [ours.as_raw_fd(), other.as_raw_fd()];
        // A ring that does not ask for it watches nothing.
        initiator.ring_rma(at(&target), ch, false);
        readable(&target);
        let t = Instant::now();
        assert_eq!(target.due(t), vec![ch]);
        target.watch_conn(ch, || panic!("not asked for"));
        initiator.ring_rma(at(&target), ch, true);
        readable(&target);
        let t0 = Instant::now();
        assert_eq!(target.due(t0), vec![ch]);
        assert_eq!(Bell::sockets(&target), vec![], "no connection named yet");
        target.watch_conn(ch, || Some(ConnFds::Sockets(fds)));
        target.after_serve(&[ch]);
        let watched = |b: &CallBell| Bell::sockets(b);
        assert_eq!(
            watched(&target),
            vec![(fds[0], libc::POLLIN), (fds[1], libc::POLLIN)]
        );
        target.watch_conn(0x9_0000_0003, || {
            panic!("no ring of that channel: not asked")
        });
        let soon = t0 + Duration::from_micros(1);
        assert!(target.due(soon).is_empty(), "nothing ready, nothing timed");
        // Bytes arrive on the second socket: the ring is due before its schedule says.
        other_peer.write_all(&[1; 100]).unwrap();
        target.ready(fds[1], libc::POLLIN);
        assert_eq!(target.due(soon), vec![ch]);
        assert!(target.due(soon).is_empty(), "once a readiness");
        // That serve read nothing of them: not watched until the ring's timed look.
        target.after_serve(&[ch]);
        assert_eq!(watched(&target), vec![]);
        assert_eq!(target.due(t0 + RMA_FIRST_AGAIN), vec![ch]);
        // The timed serve reads them (as the provider would), a millisecond on: the ring
        // lasts `RMA_GIVE_UP` from then.
        std::thread::sleep(Duration::from_millis(1));
        let mut got = [0u8; 100];
        (&other).read_exact(&mut got).unwrap();
        target.after_serve(&[ch]);
        assert_eq!(watched(&target).len(), 2, "watched again");
        let past_first_give_up = t0 + RMA_GIVE_UP + Duration::from_micros(500);
        assert_eq!(
            target.due(past_first_give_up),
            vec![ch],
            "kept by the serve that read"
        );
        // A serve that writes an answer of 64 KiB (the peer reads nothing) watches for room.
        ours.write_all(&[2; 64 << 10]).unwrap();
        target.after_serve(&[ch]);
        let room = libc::POLLIN | libc::POLLOUT;
        assert_eq!(watched(&target), vec![(fds[0], room), (fds[1], room)]);
        target.ready(fds[0], libc::POLLOUT);
        assert_eq!(target.due(past_first_give_up), vec![ch]);
        target.after_serve(&[ch]);
        assert_eq!(
            watched(&target)[0],
            (fds[0], libc::POLLIN),
            "wrote nothing more"
        );
        peer.read_exact(&mut [0u8; 64 << 10]).unwrap();
        // The peer hangs up: readable for good, and a serve moves nothing: not watched.
        drop(other_peer);
        target.ready(fds[1], libc::POLLIN | libc::POLLHUP);
        assert_eq!(target.due(past_first_give_up), vec![ch]);
        target.after_serve(&[ch]);
        assert_eq!(watched(&target), vec![]);
        // A new ring keeps the connection; a ring no serve keeps is given up, sockets and all.
        initiator.ring_rma(at(&target), ch, true);
        readable(&target);
        let t2 = Instant::now();
        assert_eq!(target.due(t2), vec![ch]);
        assert_eq!(watched(&target).len(), 2);
        assert!(target.due(t2 + RMA_GIVE_UP).is_empty());
        assert_eq!(watched(&target), vec![]);
        assert_eq!(Bell::next(&target), None);
    }

    /// A ring for messages (WRs that must have run) that asks to watch the connection is due
    /// as its sockets turn ready, as an RMA ring is, and ends once its WRs ran: a long message
    /// to a sleeping peer arrives over many serves, each as its bytes come, not one a
    /// millisecond.
    #[test]
    fn a_watching_message_ring_is_served_as_bytes_arrive_until_its_wrs_ran() {
        use std::io::Write;
        let (target, initiator) = (bell(), bell());
        let ch = 0x9_0000_0004;
        let (ours, mut peer) = tcp_pair();
        let fds = [ours.as_raw_fd(), -1];
        initiator.ring_watching(at(&target), ch, 3, false);
        readable(&target);
        let t0 = Instant::now();
        assert_eq!(target.due(t0), vec![ch]);
        target.watch_conn(ch, || panic!("not asked for"));
        initiator.ring_watching(at(&target), ch, 4, true);
        readable(&target);
        assert_eq!(
            target.due(t0),
            vec![ch],
            "a ring for more WRs is served at once"
        );
        target.watch_conn(ch, || Some(ConnFds::Sockets(fds)));
        target.after_serve(&[ch]);
        assert_eq!(Bell::sockets(&target), vec![(fds[0], libc::POLLIN)]);
        let soon = t0 + Duration::from_micros(1);
        assert!(target.due(soon).is_empty(), "nothing ready, nothing timed");
        peer.write_all(&[1; 100]).unwrap();
        target.ready(fds[0], libc::POLLIN);
        assert_eq!(target.due(soon), vec![ch], "bytes arrived: served now");
        assert!(!target.served(ch, 3), "three of four WRs ran: kept");
        assert!(target.served(ch, 4), "all ran: answered");
        assert_eq!(Bell::sockets(&target), vec![], "and no longer watched");
        assert_eq!(Bell::next(&target), None);
    }

    /// Where the engine shows arrivals only by an event fd (UCX's worker), a watching ring's
    /// thread sleeps on it only once the channel's round armed it: unarmed, it would stay
    /// readable and spin the thread. A round that could not arm (the engine gave the queue
    /// more to do) has the ring served at once; one the engine refused leaves it to its
    /// schedule. An event names no channel's bytes, so it does not keep the ring.
    #[test]
    fn a_ring_watching_an_event_fd_sleeps_on_it_once_its_round_armed_it() {
        let (target, initiator) = (bell(), bell());
        let ch = 0x9_0000_0005;
        let fd = 77; // never polled here: the bell only names it
        target.arm_conn(ch, || panic!("no ring: nothing to arm"));
        initiator.ring_watching(at(&target), ch, 2, true);
        readable(&target);
        let t0 = Instant::now();
        assert_eq!(target.due(t0), vec![ch]);
        target.watch_conn(ch, || Some(ConnFds::Events(fd)));
        target.after_serve(&[ch]);
        assert_eq!(
            Bell::sockets(&target),
            vec![],
            "not armed yet: not slept on"
        );
        target.arm_conn(ch, || Armed::Sleep);
        assert_eq!(Bell::sockets(&target), vec![(fd, libc::POLLIN)]);
        target.arm_conn(ch, || panic!("armed already"));
        let soon = t0 + Duration::from_micros(1);
        assert!(target.due(soon).is_empty(), "nothing ready, nothing timed");
        target.ready(fd, libc::POLLIN);
        assert_eq!(Bell::sockets(&target), vec![], "fired: armed no more");
        assert_eq!(target.due(soon), vec![ch], "an event: served now");
        target.after_serve(&[ch]);
        // The round found more than it could arm for: served again, at once.
        target.arm_conn(ch, || Armed::ServeAgain);
        assert_eq!(Bell::sockets(&target), vec![]);
        assert!(Bell::next(&target).unwrap() <= Instant::now());
        assert_eq!(target.due(soon), vec![ch]);
        target.after_serve(&[ch]);
        // Refused: neither watched nor served before the ring's timed look.
        target.arm_conn(ch, || Armed::Failed);
        assert_eq!(Bell::sockets(&target), vec![]);
        assert!(target.due(soon).is_empty());
        assert_eq!(target.due(t0 + FIRST_AGAIN), vec![ch], "on its schedule");
        target.arm_conn(ch, || Armed::Sleep);
        assert_eq!(Bell::sockets(&target).len(), 1);
        // Events do not keep the ring: it is given up as if nothing moved.
        target.ready(fd, libc::POLLIN);
        target.after_serve(&[ch]);
        assert!(target.due(t0 + GIVE_UP).is_empty(), "given up");
        assert_eq!(Bell::sockets(&target), vec![]);
        assert_eq!(Bell::next(&target), None);
    }
}
