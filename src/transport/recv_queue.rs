//! A queue's receive side: the buffers the application posted, in order, and the messages that
//! landed in them, until the application polls them. A message may take several buffers (a
//! base-API receiver takes a long message in a chain), so a completion names its chain's head
//! and length; the type keeps the count of buffers in completions with them, so the room for
//! new postings (`outstanding`) is always right.

use super::fifo::Fifo;
use super::shared_rq::Membership;
use crate::abi::errno::*;
use crate::abi::types::*;
use std::ptr;

pub struct RecvQueue {
    posted: Fifo<*mut umq_buf_t>,
    /// Landed messages: chain head and how many buffers the chain has.
    completed: Fifo<(*mut umq_buf_t, u32)>,
    /// Buffers in `completed`, summed over its chains.
    completed_bufs: usize,
    /// A context to tag received messages with, or a place on a shared line: one test on the
    /// common path for queues that have neither.
    extra: Option<Box<Extra>>,
}

/// What a queue made with a context or on a shared receive queue adds to its receive side.
struct Extra {
    /// Written into each landed message's `umq_ctx` (the pro header's first reserved word).
    ctx: u64,
    line: Option<Membership>,
}

impl RecvQueue {
    pub fn new(depth: u32) -> RecvQueue {
        RecvQueue {
            posted: Fifo::with_capacity(depth as usize, ptr::null_mut()),
            completed: Fifo::with_capacity(depth as usize, (ptr::null_mut(), 0)),
            completed_bufs: 0,
            extra: None,
        }
    }

    /// Tags every landed message with `ctx` and, with `line`, takes buffers from and lands
    /// messages on that shared line. Set once, before the queue receives.
    pub fn set_extra(&mut self, ctx: u64, line: Option<Membership>) {
        if ctx != 0 || line.is_some() {
            self.extra = Some(Box::new(Extra { ctx, line }));
        }
    }

    fn line(&self) -> Option<&Membership> {
        self.extra.as_ref()?.line.as_ref()
    }

    /// On a shared line, the main queue polls the line's completions; a sub-queue has none of
    /// its own (its messages are the main queue's to poll).
    fn polls_line(&self) -> Option<Option<&Membership>> {
        let m = self.line()?;
        Some(m.main.then_some(m))
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
    pub fn has_posted(&mut self) -> bool {
        self.next_posted().is_some()
    }

    /// The buffer the next message lands in (on a shared line, claimed from it when this queue
    /// holds none).
    #[inline(always)]
    pub fn next_posted(&mut self) -> Option<*mut umq_buf_t> {
        match self.posted.front() {
            Some(b) => Some(b),
            None => self.claim(),
        }
    }

    /// Claims the line's next buffer into our own posted line.
    #[cold]
    #[inline(never)]
    fn claim(&mut self) -> Option<*mut umq_buf_t> {
        let m = self.line()?;
        let b = m.line.claim(m.umqh)?;
        self.posted.push_back(b);
        Some(b)
    }

    /// The posted buffer `i` places down the line, among those this queue holds (a hint:
    /// nothing is claimed for it).
    #[inline(always)]
    pub fn posted_at(&self, i: usize) -> Option<*mut umq_buf_t> {
        self.posted.get(i)
    }

    /// The posted buffers this queue holds, next first. Multi-buffer messages are the base
    /// API's, which shared lines do not serve, so nothing is claimed for them.
    pub fn posted(&self) -> impl Iterator<Item = *mut umq_buf_t> + '_ {
        self.posted.iter()
    }

    /// Takes the next posted buffer for a landing message.
    #[inline(always)]
    pub fn take_posted(&mut self) -> Option<*mut umq_buf_t> {
        match self.posted.pop_front() {
            Some(b) => Some(b),
            None => self.claim().and_then(|_| self.posted.pop_front()),
        }
    }

    /// Posts again, first in line, a buffer taken for a message that did not land.
    pub fn give_back(&mut self, b: *mut umq_buf_t) {
        self.posted.push_front(b);
    }

    /// Records a landed message: the chain from `head`, `nbufs` buffers long.
    #[inline(always)]
    pub fn complete(&mut self, head: *mut umq_buf_t, nbufs: usize) {
        if self.extra.is_some() {
            return self.complete_tagged(head, nbufs);
        }
        self.complete_here(head, nbufs);
    }

    #[inline(always)]
    fn complete_here(&mut self, head: *mut umq_buf_t, nbufs: usize) {
        self.completed.push_back((head, nbufs as u32));
        self.completed_bufs += nbufs;
    }

    /// `complete` for a queue with a context or on a shared line: the message carries the
    /// context, and a shared line's message joins the line's completions.
    #[cold]
    #[inline(never)]
    fn complete_tagged(&mut self, head: *mut umq_buf_t, nbufs: usize) {
        if let Some(x) = self.extra.as_deref() {
            unsafe { (*head).pro_mut().rsvd1[0] = x.ctx };
            if let Some(m) = &x.line {
                return m.line.complete(head, nbufs as u32);
            }
        }
        self.complete_here(head, nbufs);
    }

    /// Landed messages not yet polled.
    #[inline(always)]
    pub fn completions_len(&self) -> usize {
        match self.polls_line() {
            None => self.completed.len(),
            Some(m) => m.map_or(0, |m| m.line.completions_len()),
        }
    }

    #[inline(always)]
    pub fn has_completions(&self) -> bool {
        self.completions_len() > 0
    }

    /// The landed message `i` places down the line: its chain's head and length.
    /// (Only the base API looks ahead, and it takes no shared line: a line's are not here.)
    pub fn completion_at(&self, i: usize) -> Option<(*mut umq_buf_t, u32)> {
        self.completed.get(i)
    }

    /// The landed messages this queue holds, oldest first (on a shared line, none: the
    /// line's are every member's).
    pub fn completions(&self) -> impl Iterator<Item = (*mut umq_buf_t, u32)> + '_ {
        self.completed.iter()
    }

    /// Moves the oldest landed messages' heads into `out` (as many as fit); returns how many.
    /// (A shared line's are taken from the line, by the main queue's polls.)
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
    /// (A shared line's count is the line's: `SharedRq::outstanding`.)
    #[inline(always)]
    pub fn outstanding(&self) -> usize {
        self.posted.len() + self.completed_bufs
    }

    /// Returns every posted buffer as a completion with `UMQ_BUF_WR_FLUSH_ERR`; returns how many.
    /// On a shared line the buffers are the line's, for its other members: the ones this queue
    /// claimed go back to the line, first in line, and nothing completes.
    pub fn flush(&mut self) -> usize {
        if let Some(m) = self.extra.as_deref().and_then(|x| x.line.as_ref()) {
            let claimed: Vec<_> = self.posted.drain().collect();
            m.line.give_back(claimed.into_iter());
            return 0;
        }
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
