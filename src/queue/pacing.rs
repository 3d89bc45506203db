//! Rate-limited queues (flow-control system 4): the queue side of [`crate::flow::pacing`].
//!
//! One pacing machine per process, behind a mutex, drives every limited queue. A limited
//! queue's posted WRs wait in its wire (`Paced::held`, after taking their credit) instead of
//! the send queue; the machine grants them packets of at most PMTU bytes. Over a link (shared
//! memory, the network) a WR moves to the send queue with its first packet granted, and its
//! provider puts its packets on the wire as they are granted (`wire::PacketGate`); the peer
//! reassembles them into one message. To a queue of this process there is no wire to cut, and
//! a WR moves once its last packet is granted, when the last packet would have landed. A grant
//! that ends inside a WR writes the WR's progress back (packets granted so far) and nothing
//! else is kept. Unlimited queues never pass through here.
//!
//! The ticks are driven by the progress engine (`transport::progress`), which serves the
//! machine while some queue is limited: each time a tick is due it hands out the grants of the
//! queues due, and it sleeps (or, that close, spins) until the next tick a queue waits for. A
//! limited queue's post serves a tick the engine has not (`drive`). A post to an
//! idle limited queue is served at once when the queue's next send time has come (the
//! machine's wake), so a slow-rate queue's first message does not wait a tick.
//!
//! Locks: the machine's mutex and a queue's wire lock are never held together, except in
//! `set_rate`, which takes the machine's first; the engine and the post path take them one
//! after the other. The machine's mutex comes before the engine's state lock (`nudge`).

use super::{Queue, lock};
use crate::abi::errno::*;
use crate::abi::ext::umq_ext_pacing_stats_t;
use crate::error::{UmqResult, einval};
use crate::flow::pacing::{self, Departed, Grant, Left, Pacer, PacingError};
use crate::os::clock_ns;
use crate::process::PerProcess;
use crate::transport::link::Backlog;
use crate::transport::wire::Wire;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

const F: &str = "umq_user_ctl";

/// A queue's pacing settings: its limit (0: unlimited) and PMTU.
pub struct QueuePacing {
    rate: AtomicU64,
    pmtu: AtomicU32,
}

impl Default for QueuePacing {
    fn default() -> Self {
        QueuePacing {
            rate: AtomicU64::new(0),
            pmtu: AtomicU32::new(pacing::DEFAULT_PMTU),
        }
    }
}

/// A machine slot as the engine knows it.
#[derive(Clone, Copy, Default)]
struct Slot {
    /// The queue it stands for (its handle).
    handle: u64,
    /// When the queue's last packet left (clock nanoseconds).
    departed_ns: u64,
}

struct Engine {
    machine: Pacer,
    /// Each machine slot's queue, by queue index.
    slots: Vec<Slot>,
    /// Queues limited now; the engine serves the machine while there are any.
    limited: usize,
    /// The last tick whose grants were handed out.
    served: u64,
    /// While the engine sleeps: when it will wake by itself (clock nanoseconds).
    sleeping_until: Option<u64>,
}

/// The longest the engine goes without serving the machine while a queue is limited (a safety
/// net: every post that files a queue sooner wakes it).
const LONGEST_NAP_NS: u64 = 100_000_000;

/// The pacing engine of this process (a child made by `fork()` starts with an empty one).
fn engine_cell() -> &'static Mutex<Engine> {
    static ENGINE: PerProcess<Mutex<Engine>> = PerProcess::new(|| {
        Mutex::new(Engine {
            machine: Pacer::new(pacing::DEFAULT_TICKS_PER_S).expect("default tick rate"),
            slots: Vec::new(),
            limited: 0,
            served: 0,
            sleeping_until: None,
        })
    });
    ENGINE.get()
}

fn engine() -> MutexGuard<'static, Engine> {
    engine_cell().lock().unwrap_or_else(|p| p.into_inner())
}

/// The engine if no one holds it now.
fn engine_try() -> Option<MutexGuard<'static, Engine>> {
    match engine_cell().try_lock() {
        Ok(e) => Some(e),
        Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
        Err(std::sync::TryLockError::WouldBlock) => None,
    }
}

impl Engine {
    /// The tick the clock is in now, made the machine's current one (without serving the
    /// queues due: the engine does).
    fn catch_up(&mut self) -> u64 {
        let now = self.machine.tick_at(clock_ns());
        self.machine.catch_up(now);
        now
    }

    /// Tells the machine what queue `index` did with its grant, and when the packet before
    /// this grant's left: its packets have just left (over loopback, landed), at the clock's
    /// time now. However long a packet took to leave after its grant (the engine kept off the
    /// CPU in between), no three leave within a packet time. `held` says the packet before
    /// waited in the kernel's hands until lately (`Backlog::LeftSince`): it counts as leaving
    /// now, beside this grant's.
    fn complete(&mut self, index: u32, packets: u32, bytes: u64, left: Left, held: bool) {
        let now_ns = clock_ns();
        let departed = match self.slots.get_mut(index as usize) {
            Some(s) if packets > 0 => {
                let before_ns = std::mem::replace(&mut s.departed_ns, now_ns);
                Some(Departed {
                    before: self.machine.at(if held { now_ns } else { before_ns }),
                    now: self.machine.at(now_ns),
                })
            }
            _ => None,
        };
        self.machine
            .complete_after(index, packets, bytes, left, departed);
        self.nudge();
    }

    /// Wakes the engine if a queue is now due before it planned to wake (once: it clears the
    /// mark, and the engine sets it again before it next sleeps).
    fn nudge(&mut self) {
        let Some(until) = self.sleeping_until else {
            return;
        };
        if self.next_due_ns().is_some_and(|at| at < until) {
            self.sleeping_until = None;
            crate::transport::progress::wake();
        }
    }

    /// When the earliest tick a queue waits for starts, no sooner than the tick after the last
    /// one served.
    fn next_due_ns(&self) -> Option<u64> {
        let next = self.served + 1;
        let due = self.machine.earliest_due()?.max(next);
        Some(self.machine.tick_start_ns(due))
    }

    fn note_limited(&mut self, index: u32, handle: u64, was: bool, is: bool) {
        if self.slots.len() <= index as usize {
            self.slots.resize(index as usize + 1, Slot::default());
        }
        self.slots[index as usize].handle = handle;
        match (was, is) {
            (false, true) => self.limited += 1,
            (true, false) => self.limited -= 1,
            _ => {}
        }
        self.nudge();
        match (was, is, self.limited) {
            (false, true, 1) => crate::transport::progress::pace(Some(&ENGINE_TIMER)),
            (true, false, 0) => crate::transport::progress::pace(None),
            _ => {}
        }
    }
}

fn pacing_error(e: PacingError, what: &str) -> i32 {
    einval(
        F,
        format_args!(
            "{what}: {}",
            match e {
                PacingError::Pmtu => "PMTU must be 1..=4096",
                PacingError::Rate => "rate out of range for the tick rate and PMTU",
                PacingError::TickRate => "tick rate must be 1..=1000000 per second",
            }
        ),
    )
}

/// Sets queue `q`'s rate limit in bit/s (0: unlimited). WRs already in its send queue go as
/// they are; a queue made unlimited releases the WRs it held at once.
pub fn set_rate(q: &Queue, bits_per_s: u64) -> UmqResult<()> {
    let pmtu = q.pacing.pmtu.load(Ordering::Relaxed);
    {
        let mut e = engine();
        e.catch_up();
        e.machine
            .set_rate(q.index, bits_per_s, pmtu)
            .map_err(|err| pacing_error(err, "rate"))?;
        let was = q.pacing.rate.swap(bits_per_s, Ordering::AcqRel) != 0;
        e.note_limited(q.index, q.handle, was, bits_per_s > 0);
    }
    let mut w = lock(&q.wire);
    if bits_per_s > 0 {
        w.pace(pmtu);
        return Ok(());
    }
    let released = w.held() > 0;
    w.unpace();
    drop(w);
    if released {
        q.transmit();
    }
    Ok(())
}

/// Sets queue `q`'s PMTU (1..=4096 bytes), for its rate from the next tick.
pub fn set_pmtu(q: &Queue, pmtu: u64) -> UmqResult<()> {
    let pmtu = u32::try_from(pmtu)
        .ok()
        .filter(|p| (1..=pacing::MAX_PMTU).contains(p))
        .ok_or_else(|| pacing_error(PacingError::Pmtu, "PMTU"))?;
    let rate = q.pacing.rate.load(Ordering::Relaxed);
    if rate > 0 {
        let mut e = engine();
        e.catch_up();
        e.machine
            .set_rate(q.index, rate, pmtu)
            .map_err(|err| pacing_error(err, "PMTU"))?;
        e.nudge();
    }
    q.pacing.pmtu.store(pmtu, Ordering::Relaxed);
    if let Some(p) = lock(&q.wire).paced_mut() {
        p.set_pmtu(pmtu);
    }
    Ok(())
}

/// Sets the process's tick rate; refused with `-UMQ_ERR_EBUSY` while any queue is limited.
pub fn set_tick_rate(ticks_per_s: u64) -> UmqResult<()> {
    let tps = u32::try_from(ticks_per_s).unwrap_or(0);
    let mut e = engine();
    match e.machine.set_ticks_per_s(tps) {
        Ok(true) => {
            // The last tick served, in the new ticks too.
            e.served = e.machine.now();
            Ok(())
        }
        Ok(false) => {
            crate::log_err!(
                F,
                "the tick rate cannot change while a queue is rate limited"
            );
            Err(-UMQ_ERR_EBUSY)
        }
        Err(err) => Err(pacing_error(err, "tick rate")),
    }
}

impl Queue {
    /// The queue's pacing counters, its PMTU and limit, and the process's tick rate.
    pub fn pacing_stats(&self) -> umq_ext_pacing_stats_t {
        let (s, ticks_per_s) = {
            let mut e = engine();
            e.catch_up();
            (e.machine.stats(self.index), e.machine.ticks_per_s())
        };
        let s = s.unwrap_or_default();
        umq_ext_pacing_stats_t {
            rate_bps: self.pacing.rate.load(Ordering::Relaxed),
            packets: s.packets,
            bytes: s.bytes,
            ticks_parked: s.ticks_parked,
            achieved_bps: s.achieved_bps,
            pmtu: self.pacing.pmtu.load(Ordering::Relaxed),
            ticks_per_s,
            held_wr: lock(&self.wire).held() as u64,
        }
    }
}

/// The queue is being destroyed: its slot in the machine is freed.
pub fn forget(q: &Queue) {
    let was = q.pacing.rate.swap(0, Ordering::AcqRel) != 0;
    let mut e = engine();
    e.machine.remove(q.index);
    if was {
        e.note_limited(q.index, 0, true, false);
    }
}

/// The machine as the progress engine serves it.
struct EngineTimer;

static ENGINE_TIMER: EngineTimer = EngineTimer;

impl crate::transport::progress::Paced for EngineTimer {
    fn serve(&self, now: u64) -> Option<u64> {
        let limited = GRANTS.with_borrow_mut(|grants| {
            {
                let mut e = engine();
                if e.limited == 0 {
                    return false;
                }
                e.take_grants(grants);
            }
            serve(grants);
            true
        });
        if !limited {
            return None;
        }
        let e = engine();
        let nap_end = now + LONGEST_NAP_NS;
        Some(e.next_due_ns().map_or(nap_end, |at| at.min(nap_end)))
    }

    fn sleeping(&self, until: u64) -> Option<u64> {
        let mut e = engine();
        match e.next_due_ns() {
            Some(at) if at < until => Some(at),
            _ => {
                e.sleeping_until = Some(until);
                None
            }
        }
    }

    fn awake(&self) {
        engine().sleeping_until = None;
    }
}

thread_local! {
    /// The grants of a tick, as the engine hands them out (kept: a tick every few
    /// microseconds allocates nothing).
    static GRANTS: std::cell::RefCell<Vec<(Grant, u64)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Serves a tick that has begun and is not served yet, if no one else is at it. The engine's
/// thread may be kept off the CPU by the very threads that post (two cores, busy loops), and a
/// tick missed is time a queue loses: nothing is banked. So a limited queue's post serves a
/// tick too. (Not its polls: that would cost every poll of every queue a check, and the posts
/// were enough in the measurements of `docs/PACING.md`.)
pub fn drive() {
    let mut grants = Vec::new();
    {
        let Some(mut e) = engine_try() else {
            return;
        };
        if e.machine.tick_at(clock_ns()) <= e.served {
            return;
        }
        e.take_grants(&mut grants);
    }
    serve(&mut grants);
}

impl Engine {
    /// Moves the machine to the clock's tick and takes its grants, with each queue's handle;
    /// returns the tick.
    fn take_grants(&mut self, grants: &mut Vec<(Grant, u64)>) -> u64 {
        let now = self.catch_up();
        self.machine.tick(now);
        self.served = now;
        while let Some(g) = self.machine.next_grant() {
            grants.push((g, self.slots.get(g.queue as usize).map_or(0, |s| s.handle)));
        }
        now
    }
}

/// Hands each grant to its queue and tells the machine what the queue did with it.
fn serve(grants: &mut Vec<(Grant, u64)>) {
    for (g, handle) in grants.drain(..) {
        // A queue destroyed since has had its record reset (`forget`); its slot may already
        // serve a new queue, whose grant this is not.
        let Some(q) = super::table::get(handle).filter(|q| q.index == g.queue) else {
            continue;
        };
        let (used, bytes, left, held) = q.use_grant(g.packets);
        engine().complete(g.queue, used, bytes, left, held);
    }
}

impl Queue {
    /// Called after a post that queued WRs on a limited queue: serves it at once when its next
    /// send time has come.
    pub(super) fn pace_wake(&self) {
        drive();
        let packets = {
            let mut e = engine();
            e.catch_up();
            let packets = e.machine.wake(self.index);
            e.nudge();
            packets
        };
        if packets == 0 {
            return;
        }
        if packets == u32::MAX {
            // No longer limited (the rate was just lifted): whatever is held goes.
            return;
        }
        let (used, bytes, left, held) = self.use_grant(packets);
        engine().complete(self.index, used, bytes, left, held);
    }

    /// Releases the held WRs a grant of `packets` covers into the send queue and sends them;
    /// returns the packets used, the bytes of the WRs released, what is left, and whether the
    /// queue's previous packet waited in the kernel's hands until lately. While it still waits
    /// there, nothing is released: a packet handed over now would leave together with it
    /// (`Backlog`), so the grant goes unused and the machine files the queue again a catch-up
    /// gap later, behind its schedule, to make the time up once the kernel sends. The same
    /// while the peer pauses the queue's priority (PFC): a grant used then would only move WRs
    /// to a send queue that starts nothing, and all of them would leave together on resume.
    fn use_grant(&self, packets: u32) -> (u32, u64, Left, bool) {
        let pmtu = self.pacing.pmtu.load(Ordering::Relaxed);
        let (used, bytes, left, backlog) = {
            let mut w = lock(&self.wire);
            if w.paused() {
                return (0, 0, Left::More, false);
            }
            let backlog = w
                .link
                .as_deref_mut()
                .map_or(Backlog::Clear, |l| l.packet_backlog());
            if backlog == Backlog::Held {
                return (0, 0, Left::More, false);
            }
            let (used, bytes, _, left) = release(&mut w, packets, pmtu);
            (used, bytes, left, backlog)
        };
        if used > 0 {
            self.transmit();
        }
        (used, bytes, left, backlog == Backlog::LeftSince)
    }

    /// Sends what the send queue holds: the binding's full round (not a post's: the
    /// application may not be polling this queue, it waits on the receiver, and a network
    /// provider moves sends along only when its completions are read). With flow control, the
    /// flow's progress, which runs that round after reading the peer's credit.
    fn transmit(&self) {
        if self.rt.flow_control.enabled {
            self.flow_progress();
            return;
        }
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = guard.as_ref() else {
            return;
        };
        let mut held = peer.lock(self);
        let out = self.send_round(&mut held, Queue::link_round);
        let here = held.release();
        self.after_send(here, &out);
    }
}

/// Hands the send queue what a grant of `packets` covers of the held WRs, in order
/// (`Paced::grant`). Returns packets used, bytes granted, WRs moved, and what is left.
fn release(w: &mut Wire, packets: u32, pmtu: u32) -> (u32, u64, usize, Left) {
    let Some(g) = w.paced_mut().map(|p| p.grant(packets, pmtu)) else {
        return (0, 0, 0, Left::Nothing);
    };
    let n = g.released.len();
    for wr in g.released {
        w.sq.push(wr);
    }
    (g.packets, g.bytes, n, g.left)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::pro_types::UMQ_OPC_SEND;
    use crate::abi::types::umq_buf_t;
    use crate::buf::pool::Pool;

    /// A wire holding WRs of `sizes` bytes for the pacer, PMTU 1024.
    fn held(pool: &Pool, sizes: &[u32]) -> (Wire, Vec<*mut umq_buf_t>) {
        let mut w = Wire::new(8, 8);
        let wrs: Vec<_> = sizes
            .iter()
            .map(|&n| crate::transport::test_wr(pool, n.max(1), UMQ_OPC_SEND, 0))
            .collect();
        for (&wr, &n) in wrs.iter().zip(sizes) {
            unsafe { (*wr).total_data_size = n };
        }
        w.pace(1024);
        for &wr in &wrs {
            w.paced_mut().unwrap().hold(wr);
        }
        (w, wrs)
    }

    fn open(w: &Wire) -> Option<(*mut umq_buf_t, u64)> {
        w.paced().unwrap().open()
    }

    /// Over a link a WR goes to the send queue with its first packet granted and the gate
    /// says how much of it may go; the bytes reported are the packets' bytes.
    #[test]
    fn over_a_link_a_wr_goes_with_its_first_packet_and_opens_as_granted() {
        let pool = Pool::new(false, 0, 0);
        let (mut w, wrs) = held(&pool, &[5000, 100, 3000]);
        assert_eq!(release(&mut w, 2, 1024), (2, 2048, 1, Left::More));
        assert_eq!(w.sq.iter().collect::<Vec<_>>(), vec![wrs[0]]);
        assert_eq!(open(&w), Some((wrs[0], 2048)));
        let gate = w.packet_gate().unwrap();
        assert_eq!((gate.pmtu, gate.allowed(wrs[0], 5000)), (1024, 2048));
        // Three packets finish the first WR (904 bytes in its last), one is the second's only.
        assert_eq!(release(&mut w, 4, 1024), (4, 2952 + 100, 1, Left::More));
        assert_eq!(w.sq.len(), 2);
        assert_eq!(open(&w), None);
        // Two of the third's three packets: it goes, open.
        assert_eq!(release(&mut w, 2, 1024), (2, 2048, 1, Left::More));
        assert_eq!(open(&w), Some((wrs[2], 2048)));
        assert_eq!(release(&mut w, 5, 1024), (1, 952, 0, Left::Nothing));
        assert_eq!((w.sq.len(), open(&w)), (3, None));
        for wr in wrs {
            pool.free_one(wr).unwrap();
        }
    }

    /// Lifting the limit releases what is held, and nothing stays open.
    #[test]
    fn released_wrs_leave_nothing_open() {
        let pool = Pool::new(false, 0, 0);
        let (mut w, wrs) = held(&pool, &[5000, 100]);
        release(&mut w, 1, 1024);
        assert!(open(&w).is_some());
        w.release_held();
        assert_eq!(w.sq.len(), 2);
        assert_eq!(w.packet_gate().map(|g| g.allowed(wrs[0], 5000)), Some(5000));
        for wr in wrs {
            pool.free_one(wr).unwrap();
        }
    }
}
