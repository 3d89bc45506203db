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
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What a ring names: a queue at the bell's process (a network channel's id, an inbox's
/// secret).
pub type ChannelId = u64;

/// A ring: the channel, and how many of the peer's WRs must have run there.
const RING_BYTES: usize = 16;
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
    /// A call bell on `ip`; None when the socket cannot be made.
    pub fn open(ip: IpAddr) -> Option<CallBell> {
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0)).ok()?;
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
        let bell = Arc::new(CallBell::open(IpAddr::V4(Ipv4Addr::LOCALHOST))?);
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
        let mut d = [0u8; RING_BYTES];
        d[..8].copy_from_slice(&ch.to_le_bytes());
        d[8..].copy_from_slice(&upto.to_le_bytes());
        let _ = self.sock.send_to(&d, at);
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
        let mut d = [0u8; RING_BYTES + 1];
        for _ in 0..TAKE_AT_MOST {
            let Ok(n) = self.sock.recv(&mut d) else {
                return; // WouldBlock: all taken
            };
            if n != RING_BYTES {
                continue;
            }
            let ch = u64::from_le_bytes(d[..8].try_into().unwrap());
            let upto = u64::from_le_bytes(d[8..16].try_into().unwrap());
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
            };
            let r = rings.entry(ch).or_insert(fresh);
            // A new RMA ring (upto 0) is served at once, whatever the last one's schedule.
            if upto > r.upto || (upto == 0 && r.upto == 0) {
                *r = fresh;
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
        for (&ch, r) in rings.iter_mut().filter(|(_, r)| r.next <= now) {
            due.push(ch);
            r.next = now + r.every;
            r.every = (r.every * GROWTH).min(MOST_AGAIN);
        }
        self.any.store(!rings.is_empty(), Ordering::Relaxed);
        due
    }

    fn next(&self) -> Option<Instant> {
        let ping = self.next_ping();
        if !self.any.load(Ordering::Relaxed) {
            return ping;
        }
        self.lock().values().map(|r| r.next).chain(ping).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bell() -> CallBell {
        CallBell::open("127.0.0.1".parse().unwrap()).expect("a call bell on 127.0.0.1")
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
        sender.send_to(&[0u8; RING_BYTES + 1], at(&target)).unwrap();
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
}
