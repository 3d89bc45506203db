//! Where limited queues wait for their tick: a time-indexed wheel (Carousel's), and the binary
//! heap it is measured against.
//!
//! A schedule files a queue under the tick its next packet may go, and hands back, tick by
//! tick, the queues filed under the ticks that have come. It does not check what it hands back:
//! a queue re-filed (its rate changed) is still listed under its old tick too, and the pacer
//! skips such stale entries by comparing with the tick the queue says it is filed under. So
//! filing is a push and nothing is ever searched for or removed.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// A queue and the tick it was filed under.
pub type Filed = (u32, u64);

/// What the pacer needs of a schedule.
pub trait Schedule {
    /// Files queue `q` under `tick` (a tick not after the last drained one is due at once).
    fn file(&mut self, q: u32, tick: u64);
    /// Appends to `due` every queue filed under a tick up to `now`, and moves on to `now`.
    fn drain(&mut self, now: u64, due: &mut Vec<Filed>);
    /// Bytes the schedule holds (its slots' and lists' capacity).
    fn bytes(&self) -> usize;
    /// The earliest tick anything is filed under (stale entries included), None when empty.
    fn earliest(&self) -> Option<u64>;
    /// Empties the schedule and starts it again at tick `now` (the ticks changed length).
    fn restart(&mut self, now: u64);
}

/// Slots of the wheel: one per tick of the horizon (4 s at 1024 ticks/s).
pub const HORIZON: u64 = 4096;

/// A timing wheel: `HORIZON` slots, slot `t % HORIZON` holds the queues filed under tick `t`
/// for the ticks ahead within the horizon; queues filed further out wait in an overflow list,
/// which is looked at only when its earliest tick comes within the horizon. Filing and
/// draining cost O(1) per queue whatever the number of queues.
pub struct Wheel {
    slots: Vec<Vec<u32>>,
    overflow: Vec<Filed>,
    /// The earliest tick in `overflow` (u64::MAX when empty).
    overflow_min: u64,
    /// Queues filed under a tick already drained: due at the next drain.
    late: Vec<Filed>,
    /// The last tick drained.
    now: u64,
    /// Buffers of drained slots, for the next slot filed into: a slot that held many queues
    /// once does not keep that room for good (each of the horizon's slots would, in the end).
    spares: Vec<Vec<u32>>,
}

impl Wheel {
    pub fn new(now: u64) -> Wheel {
        Wheel {
            slots: (0..HORIZON).map(|_| Vec::new()).collect(),
            overflow: Vec::new(),
            overflow_min: u64::MAX,
            late: Vec::new(),
            now,
            spares: Vec::new(),
        }
    }

    /// Moves the overflow queues whose tick has come into `due`, and those that have come
    /// within the horizon into their slots.
    fn refill_from_overflow(&mut self, due: &mut Vec<Filed>) {
        let horizon_end = self.now + HORIZON;
        if self.overflow_min >= horizon_end {
            return;
        }
        let mut min = u64::MAX;
        let mut i = 0;
        while i < self.overflow.len() {
            let (q, tick) = self.overflow[i];
            if tick <= self.now {
                self.overflow.swap_remove(i);
                due.push((q, tick));
            } else if tick < horizon_end {
                self.overflow.swap_remove(i);
                self.slots[(tick % HORIZON) as usize].push(q);
            } else {
                min = min.min(tick);
                i += 1;
            }
        }
        self.overflow_min = min;
    }
}

impl Schedule for Wheel {
    fn file(&mut self, q: u32, tick: u64) {
        if tick <= self.now {
            self.late.push((q, tick));
        } else if tick - self.now < HORIZON {
            let slot = &mut self.slots[(tick % HORIZON) as usize];
            if slot.capacity() == 0
                && let Some(spare) = self.spares.pop()
            {
                *slot = spare;
            }
            slot.push(q);
        } else {
            self.overflow.push((q, tick));
            self.overflow_min = self.overflow_min.min(tick);
        }
    }

    fn drain(&mut self, now: u64, due: &mut Vec<Filed>) {
        due.append(&mut self.late);
        if now <= self.now {
            return;
        }
        // Every slot holds queues of one tick in (self.now, self.now + HORIZON]: a jump past
        // the horizon drains each slot once.
        let last = now.min(self.now + HORIZON);
        for tick in self.now + 1..=last {
            let mut slot = std::mem::take(&mut self.slots[(tick % HORIZON) as usize]);
            if slot.capacity() > 0 {
                due.extend(slot.drain(..).map(|q| (q, tick)));
                self.spares.push(slot);
            }
        }
        self.now = now;
        self.refill_from_overflow(due);
    }

    fn bytes(&self) -> usize {
        let slots: usize = self
            .slots
            .iter()
            .chain(&self.spares)
            .map(|s| s.capacity() * 4)
            .sum();
        slots
            + self.slots.capacity() * std::mem::size_of::<Vec<u32>>()
            + self.overflow.capacity() * std::mem::size_of::<Filed>()
            + self.late.capacity() * std::mem::size_of::<Filed>()
    }

    fn earliest(&self) -> Option<u64> {
        if !self.late.is_empty() {
            return Some(self.now);
        }
        (self.now + 1..=self.now + HORIZON)
            .find(|t| !self.slots[(t % HORIZON) as usize].is_empty())
            .or((self.overflow_min != u64::MAX).then_some(self.overflow_min))
    }

    fn restart(&mut self, now: u64) {
        for slot in &mut self.slots {
            slot.clear();
        }
        self.overflow.clear();
        self.overflow_min = u64::MAX;
        self.late.clear();
        self.now = now;
    }
}

/// The baseline: a binary heap keyed by tick, O(log n) a queue. Kept for `umq-perf --test
/// pacing`, which runs the same workload on both.
pub struct Heap {
    heap: BinaryHeap<Reverse<(u64, u32)>>,
    now: u64,
}

impl Heap {
    pub fn new(now: u64) -> Heap {
        Heap {
            heap: BinaryHeap::new(),
            now,
        }
    }
}

impl Schedule for Heap {
    fn file(&mut self, q: u32, tick: u64) {
        self.heap.push(Reverse((tick.max(self.now), q)));
    }

    fn drain(&mut self, now: u64, due: &mut Vec<Filed>) {
        self.now = self.now.max(now);
        while let Some(&Reverse((tick, q))) = self.heap.peek() {
            if tick > self.now {
                break;
            }
            self.heap.pop();
            due.push((q, tick));
        }
    }

    fn bytes(&self) -> usize {
        self.heap.capacity() * std::mem::size_of::<Reverse<(u64, u32)>>()
    }

    fn earliest(&self) -> Option<u64> {
        self.heap.peek().map(|&Reverse((tick, _))| tick)
    }

    fn restart(&mut self, now: u64) {
        self.heap.clear();
        self.now = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drained(s: &mut (impl Schedule + ?Sized), now: u64) -> Vec<Filed> {
        let mut due = Vec::new();
        s.drain(now, &mut due);
        due.sort();
        due
    }

    fn both(now: u64) -> [Box<dyn Schedule>; 2] {
        [Box::new(Wheel::new(now)), Box::new(Heap::new(now))]
    }

    #[test]
    fn queues_come_due_at_their_tick_and_not_before() {
        for mut s in both(100) {
            s.file(1, 101);
            s.file(2, 103);
            s.file(3, 103);
            assert!(drained(&mut *s, 100).is_empty());
            assert_eq!(drained(&mut *s, 101), vec![(1, 101)]);
            assert!(drained(&mut *s, 102).is_empty());
            assert_eq!(drained(&mut *s, 103), vec![(2, 103), (3, 103)]);
        }
    }

    #[test]
    fn a_late_drain_hands_out_every_tick_it_skipped_once() {
        for mut s in both(0) {
            for q in 0..10u32 {
                s.file(q, 1 + q as u64 * 7);
            }
            let due = drained(&mut *s, 1000);
            assert_eq!(due.len(), 10);
            assert!(drained(&mut *s, 2000).is_empty());
        }
    }

    #[test]
    fn a_tick_past_the_horizon_waits_in_overflow_and_comes_due_exactly() {
        let mut w = Wheel::new(0);
        let far = 3 * HORIZON + 17;
        w.file(9, far);
        w.file(8, HORIZON + 1);
        for now in (0..far).step_by(100) {
            let due = drained(&mut w, now);
            assert!(due.iter().all(|&(q, _)| q != 9), "early at {now}");
            if now > HORIZON {
                assert!(w.overflow.is_empty() || w.overflow_min == far);
            }
        }
        assert_eq!(drained(&mut w, far), vec![(9, far)]);
    }

    #[test]
    fn the_earliest_tick_is_the_first_filed_within_the_horizon_or_beyond() {
        for mut s in both(100) {
            assert_eq!(s.earliest(), None);
            s.file(1, 100 + 3 * HORIZON);
            assert_eq!(s.earliest(), Some(100 + 3 * HORIZON));
            s.file(2, 140);
            s.file(3, 120);
            assert_eq!(s.earliest(), Some(120));
            assert_eq!(drained(&mut *s, 120), vec![(3, 120)]);
            assert_eq!(s.earliest(), Some(140));
            s.file(4, 90); // already past: due at once
            assert_eq!(s.earliest(), Some(120));
        }
    }

    #[test]
    fn a_queue_filed_for_a_drained_tick_is_due_at_the_next_drain() {
        let mut w = Wheel::new(50);
        w.file(4, 10);
        w.file(5, 50);
        assert_eq!(drained(&mut w, 50), vec![(4, 10), (5, 50)]);
    }
}
