//! Per-queue pacing by back-pressure (flow-control system 4, `docs/PACING.md`), as a sans-IO
//! machine: fed the tick, it says which limited queues may send how many packets now.
//!
//! Time is cut into ticks (1024 a second by default). A limited queue's rate gives its *packet
//! time*, the ticks one PMTU-sized packet is worth, kept in 32.32 fixed point so the long-run
//! rate is exact to about one part in a million. The queue's *next send time* advances by one
//! packet time per packet sent. A queue whose next send time falls in the tick being served is
//! granted every packet whose send time falls in that tick, m = rate x tick / (8 x PMTU) of them
//! with the fraction carried in the next send time. What it leaves unsent is not kept: the
//! caller writes its progress back (which packets of which message went) and the queue is filed
//! under the tick of its next packet. The machine never holds a packet.
//!
//! Nothing is banked from idleness: a queue woken after an idle or blocked spell starts from
//! `max(next send time, now)`, or, for a driver that says when packets left, from where its
//! first packet left (`complete_after`). A queue served late (its driver was kept off the CPU) keeps up
//! to four packet times or four ticks of its schedule, whichever is longer (`CATCH_UP`), and a
//! queue slower than a packet a tick at least 10 ms (`CATCH_UP_MS`): a
//! queue of a packet a tick or more gets the missed packets with the tick's, a slower one is
//! granted a packet at a time and makes the time up with packets two thirds of a packet time
//! apart (`CATCH_UP_GAP`), so a window of one packet time never holds more than two (and a
//! driver that says when each packet left keeps that true of departures, with a quarter of a
//! packet time to spare: `complete_after`).
//! A rate change moves the next send time to `last packet + new packet time`, not earlier than
//! the next tick.
//!
//! Queues wait in a [`Schedule`]: a timing wheel ([`wheel::Wheel`], O(1) a queue) or, as the
//! baseline it is measured against, a binary heap. The per-queue record is one cache line
//! (`QUEUE_BYTES`), so a grant costs one miss however many queues there are.

pub mod wheel;

use wheel::{Filed, Schedule, Wheel};

/// Packets are at most this long (the seed's claim 2).
pub const MAX_PMTU: u32 = 4096;
pub const DEFAULT_PMTU: u32 = 1024;
pub const DEFAULT_TICKS_PER_S: u32 = 1024;
/// Bounds of the tick rate (a tick from 1 s down to 1 µs).
pub const MIN_TICKS_PER_S: u32 = 1;
pub const MAX_TICKS_PER_S: u32 = 1_000_000;

const FRAC_BITS: u32 = 32;
/// How far ahead in the due list a queue's record is fetched into cache: far enough for the
/// memory to answer while the queues before it are served.
const PREFETCH_AHEAD: usize = 16;
const ONE_TICK: u128 = 1 << FRAC_BITS;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
#[repr(u8)]
enum State {
    /// Not limited: the pacer is not asked.
    #[default]
    Unlimited,
    /// Limited, nothing to send.
    Idle,
    /// Filed under a tick (`filed`) in the schedule.
    Waiting,
    /// Handed a grant; the caller has not said what it sent.
    Granted,
    /// Granted, and woken since: the caller may have looked for work before the wake's work
    /// arrived, so the queue is filed whatever the caller says is left.
    GrantedWoken,
    /// Has work but cannot send (no credit, a paused priority): waits for a wake.
    Blocked,
}

/// One queue's pacing state and counters: one cache line.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Limited {
    /// Integer and fraction of the next packet's send time, in ticks.
    next_tick: u64,
    next_frac: u32,
    /// Low bits of the tick the queue is filed under (while `Waiting`).
    filed: u32,
    /// Ticks a packet is worth, 32.32 (0 while unlimited).
    packet_time: u64,
    pmtu: u16,
    state: State,
    /// Woken after an idle or blocked spell, and no packet of it has left since: its schedule
    /// starts where its first packet leaves (`complete_after`).
    fresh: bool,
    /// Saturates (2^32 ticks are 48 days at the default tick rate).
    ticks_parked: u32,
    packets: u64,
    bytes: u64,
    /// When the current limit was set, and the bytes sent since.
    since_tick: u64,
    bytes_since: u64,
}

/// Bytes of pacing state per queue (the schedule adds 4 to 16 a waiting queue).
pub const QUEUE_BYTES: usize = std::mem::size_of::<Limited>();

impl Limited {
    fn next(&self) -> u128 {
        (self.next_tick as u128) << FRAC_BITS | self.next_frac as u128
    }
    fn set_next(&mut self, t: u128) {
        self.next_tick = (t >> FRAC_BITS) as u64;
        self.next_frac = t as u32;
    }
}

/// Packets a queue may send now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Grant {
    pub queue: u32,
    pub packets: u32,
}

/// A time on the machine's clock, in ticks and a fraction of one (`Pacer::at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct At(u128);

impl At {
    /// The start of tick `t`.
    pub fn tick(t: u64) -> At {
        At((t as u128) << FRAC_BITS)
    }
}

/// When a queue's packets left, as a driver that watches them knows it (`complete_after`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Departed {
    /// When the packet before this grant's left.
    pub before: At,
    /// When this grant's packets left.
    pub now: At,
}

/// What a queue has left after it used a grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Left {
    /// Nothing to send: it waits for a wake.
    Nothing,
    /// More to send: filed under its next packet's tick.
    More,
    /// More to send, but something else holds it (credit, a pause): it waits for a wake.
    Blocked,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PacingError {
    /// PMTU 0 or above `MAX_PMTU`.
    Pmtu,
    /// A rate so low a packet would take more than 2^32 ticks, or so high it takes less than
    /// 2^-32 of one.
    Rate,
    /// A tick rate outside `MIN_TICKS_PER_S..=MAX_TICKS_PER_S`.
    TickRate,
}

/// A queue's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct PacingStats {
    pub rate_bps: u64,
    pub pmtu: u32,
    pub packets: u64,
    pub bytes: u64,
    /// Ticks the queue had work but waited for its send time.
    pub ticks_parked: u64,
    /// Bit/s achieved since the limit was set.
    pub achieved_bps: u64,
}

/// The pacing machine of one sender.
pub struct Pacer<S: Schedule = Wheel> {
    ticks_per_s: u32,
    /// The tick being served.
    now: u64,
    queues: Vec<Limited>,
    /// Each queue's limit as set, for the stats.
    rates: Vec<u64>,
    schedule: S,
    /// Queues due in this tick, and how many of them `next_grant` has looked at.
    due: Vec<Filed>,
    due_at: usize,
}

impl Pacer<Wheel> {
    pub fn new(ticks_per_s: u32) -> Result<Self, PacingError> {
        Self::with_schedule(ticks_per_s, Wheel::new(0))
    }
}

impl<S: Schedule> Pacer<S> {
    pub fn with_schedule(ticks_per_s: u32, schedule: S) -> Result<Self, PacingError> {
        check_tick_rate(ticks_per_s)?;
        Ok(Pacer {
            ticks_per_s,
            now: 0,
            queues: Vec::new(),
            rates: Vec::new(),
            schedule,
            due: Vec::new(),
            due_at: 0,
        })
    }

    pub fn ticks_per_s(&self) -> u32 {
        self.ticks_per_s
    }

    /// Changes the tick rate; refused (false) while any queue is limited, whose send times
    /// count in ticks of the old rate.
    pub fn set_ticks_per_s(&mut self, ticks_per_s: u32) -> Result<bool, PacingError> {
        check_tick_rate(ticks_per_s)?;
        if self.queues.iter().any(|l| l.packet_time != 0) {
            return Ok(false);
        }
        // The tick being served, counted in the new ticks: left in the old ones it would stand
        // for another time, and a slower rate would wait for the clock to reach it.
        self.now = (self.now as u128 * ticks_per_s as u128 / self.ticks_per_s as u128) as u64;
        self.ticks_per_s = ticks_per_s;
        // Nothing limited is filed; what is left is stale and in the old ticks.
        self.schedule.restart(self.now);
        self.due.clear();
        self.due_at = 0;
        Ok(true)
    }

    /// The tick a time falls in (nanoseconds on the caller's clock).
    pub fn tick_at(&self, ns: u64) -> u64 {
        (ns as u128 * self.ticks_per_s as u128 / 1_000_000_000) as u64
    }

    /// The time `ns` nanoseconds (of the clock whose tick `tick_at` gives) are, to a fraction of
    /// a tick: what a driver says of when packets left.
    pub fn at(&self, ns: u64) -> At {
        At(((ns as u128 * self.ticks_per_s as u128) << FRAC_BITS) / 1_000_000_000)
    }

    /// When a tick starts, in nanoseconds.
    pub fn tick_start_ns(&self, tick: u64) -> u64 {
        (tick as u128 * 1_000_000_000).div_ceil(self.ticks_per_s as u128) as u64
    }

    /// The tick being served.
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Makes `now` the current tick for wakes and rate changes, without serving the queues due
    /// by then (the next `tick` does). A wake between two ticks of the driver then starts from
    /// the clock's tick, not the driver's last one, and banks nothing.
    pub fn catch_up(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    /// Makes room for queues `0..n`.
    pub fn reserve(&mut self, n: usize) {
        if self.queues.len() < n {
            if self.queues.capacity() < n {
                self.queues.reserve(n - self.queues.len());
                ask_for_huge_pages(&self.queues);
            }
            self.queues.resize(n, Limited::default());
            self.rates.resize(n, 0);
        }
    }

    /// Sets queue `q`'s limit (0: unlimited) and PMTU; a change takes effect from the next tick.
    pub fn set_rate(&mut self, q: u32, bits_per_s: u64, pmtu: u32) -> Result<(), PacingError> {
        if pmtu == 0 || pmtu > MAX_PMTU {
            return Err(PacingError::Pmtu);
        }
        let packet_time = match bits_per_s {
            0 => 0,
            r => packet_time(r, pmtu, self.ticks_per_s).ok_or(PacingError::Rate)?,
        };
        self.reserve(q as usize + 1);
        let now = self.now;
        let lim = &mut self.queues[q as usize];
        let (old, was) = (lim.packet_time, lim.state);
        lim.packet_time = packet_time;
        lim.pmtu = pmtu as u16;
        lim.since_tick = now;
        lim.bytes_since = 0;
        self.rates[q as usize] = bits_per_s;
        if packet_time == 0 {
            lim.state = State::Unlimited;
            return Ok(());
        }
        if old == 0 {
            lim.set_next((now as u128) << FRAC_BITS);
            lim.state = if was == State::Unlimited {
                State::Idle
            } else {
                was
            };
            return Ok(());
        }
        let last = lim.next().saturating_sub(old as u128);
        let next_tick_start = (now as u128 + 1) << FRAC_BITS;
        lim.set_next((last + packet_time as u128).max(next_tick_start));
        if was == State::Waiting {
            self.file(q);
        }
        Ok(())
    }

    /// Whether queue `q` is limited.
    pub fn limited(&self, q: u32) -> bool {
        self.queues
            .get(q as usize)
            .is_some_and(|l| l.packet_time != 0)
    }

    /// Queue `q` has something to send (it had nothing, or was blocked). Returns the packets it
    /// may send at once (`u32::MAX` when it is unlimited); 0 files it under its next tick.
    pub fn wake(&mut self, q: u32) -> u32 {
        let Some(lim) = self.queues.get_mut(q as usize) else {
            return u32::MAX;
        };
        match lim.state {
            State::Unlimited => return u32::MAX,
            State::Granted => {
                lim.state = State::GrantedWoken;
                return 0;
            }
            State::Waiting | State::GrantedWoken => return 0,
            State::Idle | State::Blocked => {}
        }
        let now = (self.now as u128) << FRAC_BITS;
        lim.set_next(lim.next().max(now));
        lim.fresh = true;
        if lim.next_tick > self.now {
            self.file(q);
            return 0;
        }
        self.grant(q)
    }

    /// Moves to tick `now`: every queue due by then is up for a grant from [`Self::next_grant`].
    /// A tick served late grants each queue one tick's packets, not those of the ticks it
    /// missed.
    pub fn tick(&mut self, now: u64) {
        self.now = self.now.max(now);
        self.due.drain(..self.due_at);
        self.due_at = 0;
        self.schedule.drain(self.now, &mut self.due);
    }

    /// The next queue due in this tick and the packets it may send. Use it (and say what was
    /// sent, `complete`) before asking for the next: its record is in cache then.
    pub fn next_grant(&mut self) -> Option<Grant> {
        while let Some(&(q, tick)) = self.due.get(self.due_at) {
            self.due_at += 1;
            if let Some(&(ahead, _)) = self.due.get(self.due_at + PREFETCH_AHEAD) {
                prefetch(self.queues.as_ptr().wrapping_add(ahead as usize));
            }
            let lim = &self.queues[q as usize];
            // A queue re-filed since (its rate changed) is also listed under its old tick.
            if lim.state != State::Waiting || lim.filed != tick as u32 {
                continue;
            }
            let packets = self.grant(q);
            return Some(Grant { queue: q, packets });
        }
        None
    }

    /// `tick`, then every grant of the tick appended to `grants`.
    pub fn advance(&mut self, now: u64, grants: &mut Vec<Grant>) {
        self.tick(now);
        while let Some(g) = self.next_grant() {
            grants.push(g);
        }
    }

    /// What queue `q` did with its grant: it sent `packets` packets, `bytes` bytes in all.
    pub fn complete(&mut self, q: u32, packets: u32, bytes: u64, left: Left) {
        self.complete_after(q, packets, bytes, left, None)
    }

    /// `complete`, from a driver that knows when packets left (`departed`):
    ///
    /// - A slow queue is granted its next packet no sooner than a packet time and a quarter
    ///   (`SPARE`) after the one before this grant's left, so any three of its packets in a row
    ///   leave more than that apart however late each one left after its grant. A queue whose
    ///   packets always take a while to leave (a network send) loses no rate by it while they
    ///   take less than three quarters of a packet time.
    /// - A queue's first packets after an idle or blocked spell start its schedule where they
    ///   left, not at their grant: until then nothing of it was on the wire, so a wait between
    ///   the two (a provider setting up its buffers on its first send of a size) is not owed
    ///   to the queue and made up afterwards, faster than its rate.
    pub fn complete_after(
        &mut self,
        q: u32,
        packets: u32,
        bytes: u64,
        left: Left,
        departed: Option<Departed>,
    ) {
        let Some(lim) = self.queues.get_mut(q as usize) else {
            return;
        };
        let woken = match lim.state {
            State::Granted => false,
            State::GrantedWoken => true,
            _ => return,
        };
        if packets > 0
            && std::mem::take(&mut lim.fresh)
            && let Some(d) = departed
        {
            lim.set_next(lim.next().max(d.now.0));
        }
        lim.set_next(lim.next() + packets as u128 * lim.packet_time as u128);
        if left == Left::Nothing {
            // It ran out within its grant: the rest of this tick is not made up later.
            let tick_end = ((self.now + 1) as u128) << FRAC_BITS;
            lim.set_next(lim.next().max(tick_end));
        }
        lim.packets += packets as u64;
        lim.bytes += bytes;
        lim.bytes_since += bytes;
        let previous_left = departed.map(|d| d.before);
        match left {
            Left::More => self.file_after(q, previous_left),
            _ if woken => self.file_after(q, previous_left),
            Left::Nothing => lim.state = State::Idle,
            Left::Blocked => lim.state = State::Blocked,
        }
    }

    /// Takes queue `q` out (its queue is gone); its number may be reused.
    pub fn remove(&mut self, q: u32) {
        if let Some(lim) = self.queues.get_mut(q as usize) {
            *lim = Limited::default();
            self.rates[q as usize] = 0;
        }
    }

    pub fn stats(&self, q: u32) -> Option<PacingStats> {
        let lim = self.queues.get(q as usize)?;
        let elapsed = self.now.saturating_sub(lim.since_tick).max(1);
        Some(PacingStats {
            rate_bps: self.rates[q as usize],
            pmtu: lim.pmtu as u32,
            packets: lim.packets,
            bytes: lim.bytes,
            ticks_parked: lim.ticks_parked as u64,
            achieved_bps: (lim.bytes_since as u128 * 8 * self.ticks_per_s as u128 / elapsed as u128)
                as u64,
        })
    }

    /// The send time of queue `q`'s next packet, in ticks (for tests and measurements).
    pub fn next_send(&self, q: u32) -> f64 {
        self.queues
            .get(q as usize)
            .map_or(0.0, |l| l.next() as f64 / ONE_TICK as f64)
    }

    /// Bytes the machine holds: per-queue records and the schedule.
    pub fn bytes(&self) -> usize {
        self.queues.capacity() * QUEUE_BYTES + self.rates.capacity() * 8 + self.schedule.bytes()
    }

    /// Grants queue `q` (due in the tick being served) the packets whose send times fall in
    /// it. A queue served late keeps up to `CATCH_UP` packet times or ticks of its schedule,
    /// whichever is longer (a slower queue at least `CATCH_UP_MS`), so a late driver costs it
    /// no rate. A queue of a packet a tick or
    /// more gets those packets at once (its packets go a tick's at a time anyway); a slower
    /// queue is granted one packet, and its next ones make up the time by going closer together
    /// (`file`), never closer than `CATCH_UP_GAP`.
    fn grant(&mut self, q: u32) -> u32 {
        let now = (self.now as u128) << FRAC_BITS;
        let floor = (self.ticks_per_s as u128 * CATCH_UP_MS / 1000) << FRAC_BITS;
        let lim = &mut self.queues[q as usize];
        let pt = lim.packet_time as u128;
        lim.state = State::Granted;
        let reach = match pt > ONE_TICK {
            true => (CATCH_UP * pt).max(floor),
            false => CATCH_UP * ONE_TICK,
        };
        let start = lim.next().max(now.saturating_sub(reach));
        lim.set_next(start);
        if pt > ONE_TICK {
            return 1;
        }
        ((now + ONE_TICK - start).div_ceil(pt)).min(u32::MAX as u128) as u32
    }

    /// The earliest tick a queue waits for in the schedule (None: none waits), so a driver
    /// can sleep until then. It may be a tick whose only entries are stale: a wake for
    /// nothing, never a wake too late.
    pub fn earliest_due(&self) -> Option<u64> {
        self.schedule.earliest()
    }

    /// Files queue `q` under the tick of its next send time.
    fn file(&mut self, q: u32) {
        self.file_after(q, None)
    }

    /// `file`, no sooner than a packet time and a quarter after `previous_left` (see
    /// `complete_after`).
    fn file_after(&mut self, q: u32, previous_left: Option<At>) {
        let now = self.now;
        let lim = &mut self.queues[q as usize];
        let pt = lim.packet_time as u128;
        // A slow queue behind its schedule (served late) goes again a catch-up gap after the
        // packet just granted, not at once: in the tick that gap ends in, and no sooner than
        // the next. (Rounded up to the tick after, a gap of two thirds of a packet time one to
        // three ticks long came to more than the packet time, and a queue once behind never
        // caught up again: 20 Mbit/s at PMTU 4096 on the default tick ran at 0.84 of it.)
        let mut tick = lim.next_tick;
        if pt > ONE_TICK && tick <= now + (pt >> FRAC_BITS) as u64 {
            let gap = (lim.packet_time / CATCH_UP_GAP.1 * CATCH_UP_GAP.0) as u128;
            let soonest = ((now as u128) << FRAC_BITS) + gap;
            if lim.next() < soonest {
                tick = ((soonest >> FRAC_BITS) as u64).max(now + 1);
            }
        }
        if let Some(left) = previous_left
            && pt > ONE_TICK
        {
            // A quarter of a packet time to spare (`SPARE`). The time is the driver's, to a
            // fraction of a tick: counted from the end of the tick it left in, a queue whose
            // packet time is one to three ticks long (20 Mbit/s at PMTU 4096 on the default
            // 1024 ticks a second) lost up to a quarter of its rate.
            let after = left.0 + pt + pt / SPARE;
            tick = tick.max(after.div_ceil(ONE_TICK) as u64);
        }
        let parked = tick.saturating_sub(now).min(u32::MAX as u64) as u32;
        lim.ticks_parked = lim.ticks_parked.saturating_add(parked);
        lim.filed = tick as u32;
        lim.state = State::Waiting;
        self.schedule.file(q, tick);
    }
}

/// What a slow queue's packets keep to spare beyond a packet time, as the fraction of one: any
/// three in a row leave at least 1 + 1/SPARE packet times apart (`complete_after`), the two
/// after one that left late as well as those that make up time (`CATCH_UP_GAP`, 4/3). With
/// none to spare, a receiver that timed its packets to within a quarter of a packet time saw
/// three within one after a late packet (`umq-perf --test pacing --wire` over shm at 1 Gbit/s,
/// most runs); with a quarter, one row in ten.
const SPARE: u128 = 4;
/// How far behind its schedule a queue may be and still make the time up, in its packet times
/// or in ticks, whichever is longer: a serve that late costs it no rate.
const CATCH_UP: u128 = 4;
/// A slower queue (packets further apart than a tick) makes up at least this many
/// milliseconds: its packets go closer together while it does (`CATCH_UP_GAP`), so the time
/// it makes up costs no burst, and a driver's thread kept off the CPU for milliseconds costs it
/// no rate. A busy two-vCPU host stopped a thread for up to 8.8 ms in half a second; making up
/// 4 ms, single runs of `umq-perf --test pacing --wire` lost 0.2-0.7 % of the rate.
const CATCH_UP_MS: u128 = 10;
/// The least gap between two packets of such a queue while it makes up time, as a fraction of
/// its packet time (less the rest of the tick it ends in: the packet goes in that tick): three
/// packets in a row then span at least 4/3 of one, less two ticks, so a window of one packet
/// time never holds more than two where a packet time is six ticks or more, with a third of
/// one to spare for the jitter between a grant and the packet's departure; a driver that says
/// when packets left keeps it true of departures at any tick (`complete_after`).
const CATCH_UP_GAP: (u64, u64) = (2, 3);

/// What a grant of packets covers of the messages a queue has waiting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cover {
    /// Messages whose last packet the grant reached: they go now, in order.
    pub messages: usize,
    /// Their bytes.
    pub bytes: u64,
    /// Packets of the grant used (all of it, unless the messages ran out).
    pub packets: u32,
    /// Packets of the next message granted so far: its progress, written back.
    pub progress: u32,
}

/// How a grant of `packets` covers the messages of `sizes` (bytes, in order), the first of
/// which has `progress` packets granted already, cut into packets of `pmtu` bytes (an empty
/// message is one packet).
pub fn cover(sizes: impl Iterator<Item = u32>, progress: u32, pmtu: u32, packets: u32) -> Cover {
    let mut c = Cover {
        messages: 0,
        bytes: 0,
        packets: 0,
        progress,
    };
    let mut budget = packets;
    for size in sizes {
        // (A PMTU changed since may leave more progress than the message has packets now.)
        let need = size.div_ceil(pmtu).max(1).saturating_sub(c.progress);
        if need > budget {
            c.progress += budget;
            budget = 0;
            break;
        }
        budget -= need;
        c.progress = 0;
        c.messages += 1;
        c.bytes += size as u64;
    }
    c.packets = packets - budget;
    c
}

fn check_tick_rate(ticks_per_s: u32) -> Result<(), PacingError> {
    (MIN_TICKS_PER_S..=MAX_TICKS_PER_S)
        .contains(&ticks_per_s)
        .then_some(())
        .ok_or(PacingError::TickRate)
}

/// Ticks (32.32) one packet of `pmtu` bytes takes at `bits_per_s`, rounded to nearest.
fn packet_time(bits_per_s: u64, pmtu: u32, ticks_per_s: u32) -> Option<u64> {
    let num = (8 * pmtu as u128 * ticks_per_s as u128) << FRAC_BITS;
    let t = (num + bits_per_s as u128 / 2) / bits_per_s as u128;
    (t > 0 && t <= u64::MAX as u128).then_some(t as u64)
}

/// Asks for the records' memory to be backed by huge pages where it is not yet touched: a
/// million queues' records are 64 MiB, and with 4 KiB pages nearly every grant would also miss
/// the TLB.
fn ask_for_huge_pages(records: &Vec<Limited>) {
    const HUGE: usize = 2 << 20;
    let start = (records.as_ptr() as usize + records.len() * QUEUE_BYTES).next_multiple_of(HUGE);
    let end = (records.as_ptr() as usize + records.capacity() * QUEUE_BYTES) & !(HUGE - 1);
    if end > start {
        unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
    }
}

#[inline(always)]
fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
}

#[cfg(test)]
mod tests;
