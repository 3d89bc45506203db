//! A queue's send queue: every posted TX WR, in order, until the application polls its
//! completion. The WRs form three stretches, oldest first:
//!
//! ```text
//!   [ completed, waiting for the poll ][ in flight at the peer ][ unsent ]
//! ```
//!
//! A provider takes the next unsent WR and either completes it at once or hands it over
//! (`hand_over`); it completes in-flight WRs strictly in order (`complete_next`), as an RC
//! queue pair does. The WRs completed since bind number the peer's view of ours: the next one
//! handed over has sequence number `next_seq()`.
//!
//! The counts are private so that no provider can complete out of order or lose an in-flight
//! WR: every change goes through a method here.

use super::fifo::Fifo;
use crate::abi::errno::*;
use crate::abi::types::*;
use std::ptr;

pub struct SendQueue {
    wrs: Fifo<*mut umq_buf_t>,
    /// The first `completed` WRs have completed and wait for the application's poll.
    completed: usize,
    /// The `in_flight` WRs after them are at the peer and have not completed.
    in_flight: usize,
    /// Of those, how many complete only when the peer has executed them (the rest complete
    /// as soon as the WRs ahead of them have: their bytes left with them).
    awaiting_peer: usize,
    /// WRs completed since bind: the sequence number of the oldest in-flight WR.
    completed_seq: u64,
}

impl SendQueue {
    pub fn new(depth: u32) -> SendQueue {
        SendQueue {
            wrs: Fifo::with_capacity(depth as usize, ptr::null_mut()),
            completed: 0,
            in_flight: 0,
            awaiting_peer: 0,
            completed_seq: 0,
        }
    }

    /// Every WR posted and not yet polled.
    #[inline(always)]
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    #[inline(always)]
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// Joins a posted WR to the tail, unsent.
    #[inline(always)]
    pub fn push(&mut self, wr: *mut umq_buf_t) {
        self.wrs.push_back(wr);
    }

    /// WRs completed and waiting for the application's poll.
    #[inline(always)]
    pub fn completed(&self) -> usize {
        self.completed
    }

    #[inline(always)]
    pub fn in_flight(&self) -> usize {
        self.in_flight
    }

    /// WRs in flight that complete only when the peer has executed them.
    #[inline(always)]
    pub fn awaiting_peer(&self) -> usize {
        self.awaiting_peer
    }

    /// WRs not completed: in flight or unsent.
    #[inline(always)]
    pub fn uncompleted(&self) -> usize {
        self.wrs.len() - self.completed
    }

    /// WRs not yet handed to the peer.
    #[inline(always)]
    pub fn unsent_len(&self) -> usize {
        self.wrs.len() - self.completed - self.in_flight
    }

    /// Whether every WR has completed (none in flight, none unsent).
    #[inline(always)]
    pub fn all_completed(&self) -> bool {
        self.completed == self.wrs.len()
    }

    /// The oldest WR not yet handed to the peer.
    #[inline(always)]
    pub fn next_unsent(&self) -> Option<*mut umq_buf_t> {
        self.wrs.get(self.completed + self.in_flight)
    }

    /// WRs not yet handed to the peer, oldest first.
    pub fn unsent(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.wrs.iter().skip(self.completed + self.in_flight)
    }

    /// WRs not completed (in flight or unsent), oldest first.
    pub fn uncompleted_wrs(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.wrs.iter().skip(self.completed)
    }

    /// The sequence number the next WR handed over will have.
    #[inline(always)]
    pub fn next_seq(&self) -> u64 {
        self.completed_seq + self.in_flight as u64
    }

    /// WRs completed since bind.
    #[inline(always)]
    pub fn completed_seq(&self) -> u64 {
        self.completed_seq
    }

    /// The in-flight WR with sequence number `seq`, if there is one.
    pub fn in_flight_wr(&self, seq: u64) -> Option<*mut umq_buf_t> {
        let k = seq.checked_sub(self.completed_seq)? as usize;
        (k < self.in_flight).then(|| self.wrs.get(self.completed + k))?
    }

    /// The oldest WR in flight.
    #[inline(always)]
    pub fn oldest_in_flight(&self) -> Option<*mut umq_buf_t> {
        (self.in_flight > 0).then(|| self.wrs.get(self.completed))?
    }

    /// The next unsent WR went to the peer; it completes later, in order, through
    /// `complete_next`.
    #[inline(always)]
    pub fn hand_over(&mut self, awaits_peer: bool) {
        debug_assert!(self.completed + self.in_flight < self.wrs.len());
        self.in_flight += 1;
        self.awaiting_peer += awaits_peer as usize;
    }

    /// Completes the oldest WR in flight with `status`, and returns it. `awaited`: it was
    /// handed over as awaiting the peer.
    #[inline(always)]
    pub fn complete_next(&mut self, status: umq_buf_status_t, awaited: bool) -> *mut umq_buf_t {
        debug_assert!(self.in_flight > 0, "no WR in flight to complete");
        let wr = self
            .wrs
            .get(self.completed)
            .expect("a WR in flight to complete");
        unsafe { (*wr).set_status(status) };
        self.in_flight -= 1;
        self.awaiting_peer -= awaited as usize;
        self.completed += 1;
        self.completed_seq += 1;
        wr
    }

    /// Completes `wr`, the next unsent WR (as `next_unsent` gave it), with `status` as it is
    /// handed over, nothing of ours being in flight ahead of it: it ran, or its bytes left
    /// with it.
    #[inline(always)]
    pub fn complete_unsent(&mut self, wr: *mut umq_buf_t, status: umq_buf_status_t) {
        debug_assert_eq!(self.in_flight, 0, "a WR completed past WRs in flight");
        debug_assert_eq!(self.next_unsent(), Some(wr), "not the next unsent WR");
        unsafe { (*wr).set_status(status) };
        self.completed += 1;
        self.completed_seq += 1;
    }

    /// Moves up to `out.len()` completed WRs out to the application; returns how many.
    #[inline(always)]
    pub fn take_completed(&mut self, out: &mut [*mut umq_buf_t]) -> usize {
        let take = self.completed.min(out.len());
        let n = self.wrs.pop_into(&mut out[..take]);
        self.completed -= n;
        n
    }

    /// Completes every WR not yet completed, in flight or unsent, with an error: `first` for
    /// the oldest, flush for the rest. Returns how many.
    pub fn fail_uncompleted(&mut self, first: umq_buf_status_t) -> usize {
        let n = self.uncompleted();
        for (i, b) in self.wrs.iter().skip(self.completed).enumerate() {
            let status = if i == 0 { first } else { UMQ_BUF_WR_FLUSH_ERR };
            unsafe { (*b).set_status(status) };
        }
        self.completed = self.wrs.len();
        self.in_flight = 0;
        self.awaiting_peer = 0;
        n
    }

    /// A new binding numbers WRs from zero (nothing is in flight across a rebind).
    pub fn restart_numbering(&mut self) {
        debug_assert_eq!(self.in_flight, 0);
        self.in_flight = 0;
        self.awaiting_peer = 0;
        self.completed_seq = 0;
    }

    /// Takes every WR out, completed or not (the queue is being torn down).
    pub fn drain(&mut self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.completed = 0;
        self.in_flight = 0;
        self.awaiting_peer = 0;
        self.wrs.drain()
    }

    /// Every WR, oldest first (tests and statistics).
    pub fn iter(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.wrs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wrs(n: usize) -> Vec<umq_buf_t> {
        (0..n).map(|_| unsafe { std::mem::zeroed() }).collect()
    }

    /// WRs complete in order whichever way they went, sequence numbers follow completions, and
    /// the application takes completed WRs only.
    #[test]
    fn completions_run_in_order_through_the_three_stretches() {
        let mut bufs = wrs(4);
        let mut sq = SendQueue::new(8);
        for b in &mut bufs {
            sq.push(b);
        }
        let p = |i: usize, bufs: &mut Vec<umq_buf_t>| &mut bufs[i] as *mut umq_buf_t;
        assert_eq!(sq.next_unsent(), Some(p(0, &mut bufs)));
        // The first completes at once; the next two go in flight, one awaiting the peer.
        sq.complete_unsent(p(0, &mut bufs), UMQ_BUF_SUCCESS);
        assert_eq!(sq.completed(), 1);
        assert_eq!(sq.next_seq(), 1);
        sq.hand_over(false);
        sq.hand_over(true);
        assert_eq!(
            (sq.completed(), sq.in_flight(), sq.awaiting_peer()),
            (1, 2, 1)
        );
        assert_eq!(sq.next_seq(), 3);
        assert_eq!(sq.in_flight_wr(2), Some(p(2, &mut bufs)));
        assert_eq!(sq.in_flight_wr(3), None);
        assert_eq!(sq.in_flight_wr(0), None);
        assert_eq!(sq.next_unsent(), Some(p(3, &mut bufs)));
        assert_eq!(sq.oldest_in_flight(), Some(p(1, &mut bufs)));
        sq.complete_next(UMQ_BUF_SUCCESS, false);
        sq.complete_next(UMQ_BUF_REM_ACCESS_ABORT_ERR, true);
        assert_eq!((sq.in_flight(), sq.awaiting_peer()), (0, 0));
        assert_eq!(sq.completed_seq(), 3);
        assert_eq!(bufs[2].status(), UMQ_BUF_REM_ACCESS_ABORT_ERR);
        let mut out = [ptr::null_mut(); 2];
        assert_eq!(sq.take_completed(&mut out), 2);
        assert_eq!(out, [p(0, &mut bufs), p(1, &mut bufs)]);
        assert_eq!((sq.completed(), sq.len()), (1, 2));
        // The rest fail: the oldest uncompleted one with the given status, then flushes.
        assert_eq!(sq.fail_uncompleted(UMQ_BUF_RNR_RETRY_CNT_EXC_ERR), 1);
        assert_eq!(bufs[3].status(), UMQ_BUF_RNR_RETRY_CNT_EXC_ERR);
        assert!(sq.all_completed());
        assert_eq!(sq.take_completed(&mut out), 2);
        assert!(sq.is_empty());
    }
}
