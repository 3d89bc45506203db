//! A queue's receive side: the buffers the application posted, in order, and the messages that
//! landed in them, until the application polls them. A message may take several buffers (a
//! base-API receiver takes a long message in a chain), so a completion names its chain's head
//! and length; the type keeps the count of buffers in completions with them, so the room for
//! new postings (`outstanding`) is always right.

use super::fifo::Fifo;
use crate::abi::errno::*;
use crate::abi::types::*;
use std::ptr;

pub struct RecvQueue {
    posted: Fifo<*mut umq_buf_t>,
    /// Landed messages: chain head and how many buffers the chain has.
    completed: Fifo<(*mut umq_buf_t, u32)>,
    /// Buffers in `completed`, summed over its chains.
    completed_bufs: usize,
}

impl RecvQueue {
    pub fn new(depth: u32) -> RecvQueue {
        RecvQueue {
            posted: Fifo::with_capacity(depth as usize, ptr::null_mut()),
            completed: Fifo::with_capacity(depth as usize, (ptr::null_mut(), 0)),
            completed_bufs: 0,
        }
    }

    /// Posts a receive buffer, last in line.
    #[inline(always)]
    pub fn post(&mut self, b: *mut umq_buf_t) {
        self.posted.push_back(b);
    }

    #[inline(always)]
    pub fn posted_len(&self) -> usize {
        self.posted.len()
    }

    #[inline(always)]
    pub fn has_posted(&self) -> bool {
        !self.posted.is_empty()
    }

    /// The buffer the next message lands in.
    #[inline(always)]
    pub fn next_posted(&self) -> Option<*mut umq_buf_t> {
        self.posted.front()
    }

    /// The posted buffer `i` places down the line.
    #[inline(always)]
    pub fn posted_at(&self, i: usize) -> Option<*mut umq_buf_t> {
        self.posted.get(i)
    }

    /// The posted buffers, next first.
    pub fn posted(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.posted.iter()
    }

    /// Takes the next posted buffer for a landing message.
    #[inline(always)]
    pub fn take_posted(&mut self) -> Option<*mut umq_buf_t> {
        self.posted.pop_front()
    }

    /// Posts again, first in line, a buffer taken for a message that did not land.
    pub fn give_back(&mut self, b: *mut umq_buf_t) {
        self.posted.push_front(b);
    }

    /// Records a landed message: the chain from `head`, `nbufs` buffers long.
    #[inline(always)]
    pub fn complete(&mut self, head: *mut umq_buf_t, nbufs: usize) {
        self.completed.push_back((head, nbufs as u32));
        self.completed_bufs += nbufs;
    }

    /// Landed messages not yet polled.
    #[inline(always)]
    pub fn completions_len(&self) -> usize {
        self.completed.len()
    }

    #[inline(always)]
    pub fn has_completions(&self) -> bool {
        !self.completed.is_empty()
    }

    /// The landed message `i` places down the line: its chain's head and length.
    pub fn completion_at(&self, i: usize) -> Option<(*mut umq_buf_t, u32)> {
        self.completed.get(i)
    }

    /// The landed messages, oldest first.
    pub fn completions(&self) -> impl Iterator<Item = (*mut umq_buf_t, u32)> + '_ {
        self.completed.iter()
    }

    /// Moves the oldest landed messages' heads into `out` (as many as fit); returns how many.
    #[inline(always)]
    pub fn take_completions(&mut self, out: &mut [*mut umq_buf_t]) -> usize {
        let mut bufs = 0;
        let n = self.completed.pop_map_into(out, |(head, k)| {
            bufs += k as usize;
            head
        });
        self.completed_bufs -= bufs;
        n
    }

    /// Takes every landed message out (the queue is being torn down).
    pub fn drain_completions(&mut self) -> impl Iterator<Item = (*mut umq_buf_t, usize)> + '_ {
        self.completed_bufs = 0;
        self.completed.drain().map(|(h, k)| (h, k as usize))
    }

    /// Buffers the queue holds for the application: posted, or in landed messages.
    #[inline(always)]
    pub fn outstanding(&self) -> usize {
        self.posted.len() + self.completed_bufs
    }

    /// Returns every posted buffer as a completion with `UMQ_BUF_WR_FLUSH_ERR`; returns how many.
    pub fn flush(&mut self) -> usize {
        let n = self.posted.len();
        while let Some(b) = self.posted.pop_front() {
            unsafe {
                (*b).set_status(UMQ_BUF_WR_FLUSH_ERR);
                (*b).data_size = 0;
            }
            self.complete(b, 1);
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Buffers taken by landed messages count against the depth until polled, chain by chain,
    /// and a flush completes what is posted with the flush status, in order.
    #[test]
    fn outstanding_follows_postings_landings_and_polls() {
        let mut bufs: Vec<umq_buf_t> = (0..5).map(|_| unsafe { std::mem::zeroed() }).collect();
        let p: Vec<*mut umq_buf_t> = bufs.iter_mut().map(|b| b as *mut umq_buf_t).collect();
        let mut rq = RecvQueue::new(8);
        p.iter().for_each(|&b| rq.post(b));
        assert_eq!((rq.posted_len(), rq.outstanding()), (5, 5));
        // A message of two buffers lands, one is taken and given back.
        let (a, b) = (rq.take_posted().unwrap(), rq.take_posted().unwrap());
        rq.complete(a, 2);
        assert_eq!((a, b), (p[0], p[1]));
        let c = rq.take_posted().unwrap();
        rq.give_back(c);
        assert_eq!(rq.next_posted(), Some(p[2]));
        assert_eq!(
            rq.outstanding(),
            5,
            "a landed chain still holds its buffers"
        );
        // One more lands; the application polls one at a time.
        let d = rq.take_posted().unwrap();
        rq.complete(d, 1);
        let mut out = [ptr::null_mut(); 1];
        assert_eq!(rq.take_completions(&mut out), 1);
        assert_eq!((out[0], rq.outstanding()), (p[0], 3));
        // The flush: the two still posted complete in order, with no data.
        assert_eq!(rq.flush(), 2);
        assert_eq!(rq.completions_len(), 3);
        let heads: Vec<_> = rq.completions().map(|(h, _)| h).collect();
        assert_eq!(heads, [p[2], p[3], p[4]]);
        assert_eq!(bufs[4].status(), UMQ_BUF_WR_FLUSH_ERR);
        let mut all = [ptr::null_mut(); 8];
        assert_eq!(rq.take_completions(&mut all), 3);
        assert_eq!(rq.outstanding(), 0);
    }
}
