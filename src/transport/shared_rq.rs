//! A shared receive queue: the posted buffers and landed messages of a main queue and its
//! sub-queues (the July 2026 revision's `UMQ_CREATE_FLAG_MAIN_UMQ` / `SUB_UMQ`, RDMA's SRQ).
//!
//! Every member posts into one line of buffers, and a message for any member takes the next
//! one, whichever member it came for. Its completion joins one line that only the main queue
//! polls, tagged with the member's context (`umq_ctx`), so one poll serves every connection.
//!
//! Each member's `RecvQueue` still lands messages as before, under its own wire lock: when it
//! needs a buffer it *claims* the next one from here into its own posted line (`claim`), so a
//! provider that looks at a buffer before it takes it never races another member for it. A
//! member that found the line empty is remembered, and the next post hands back its handle so
//! the queue layer can run the member's waiting sender (`post` returns them).
//!
//! The lock here is a leaf: it is taken under a member's wire lock and takes nothing itself.

use super::fifo::Fifo;
use crate::abi::types::umq_buf_t;
use std::collections::HashSet;
use std::ptr;
use std::sync::{Mutex, MutexGuard};

pub struct SharedRq {
    inner: Mutex<Inner>,
    /// Buffers the line may hold at once: the main queue's receive depth.
    depth: usize,
}

// SAFETY: the raw buffer pointers are the application's buffers handed to the library; they
// are only touched under the lock and by the member that claimed them, as in `RecvQueue`.
unsafe impl Send for SharedRq {}
unsafe impl Sync for SharedRq {}

struct Inner {
    posted: Fifo<*mut umq_buf_t>,
    /// Landed messages of every member: chain head and length.
    completed: Fifo<(*mut umq_buf_t, u32)>,
    /// Buffers posted and not yet polled back: in `posted`, claimed by a member, or in
    /// `completed` (the depth counts them all).
    held: usize,
    /// Members whose message found no buffer to claim, by handle.
    waiting: HashSet<u64>,
    /// Sub-queues created on this line and not yet destroyed, by handle.
    subs: Vec<u64>,
    /// The members bound through a link (to another process), whose messages land only when
    /// somebody runs their link's round; members bound in this process are delivered to.
    linked: Vec<u64>,
    /// Where the main queue's next look at the linked members starts (`next_linked`).
    cursor: usize,
    /// Members with credit updates for the main queue's receive polls to show, by handle.
    updates: Vec<u64>,
}

impl SharedRq {
    pub fn new(depth: u32) -> SharedRq {
        SharedRq {
            inner: Mutex::new(Inner {
                posted: Fifo::with_capacity(depth as usize, ptr::null_mut()),
                completed: Fifo::with_capacity(depth as usize, (ptr::null_mut(), 0)),
                held: 0,
                waiting: HashSet::new(),
                subs: Vec::new(),
                linked: Vec::new(),
                cursor: 0,
                updates: Vec::new(),
            }),
            depth: depth as usize,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Posts what fits of `bufs` (the depth counts every buffer held), last in line; returns
    /// how many were taken and the members whose messages wait for a buffer (each once).
    pub fn post(&self, bufs: &[*mut umq_buf_t]) -> (usize, Vec<u64>) {
        let mut s = self.lock();
        let accepted = bufs.len().min(self.depth - s.held);
        for &b in &bufs[..accepted] {
            s.posted.push_back(b);
        }
        s.held += accepted;
        let woken = match accepted {
            0 => Vec::new(),
            _ => s.waiting.drain().collect(),
        };
        (accepted, woken)
    }

    /// The next posted buffer for member `umqh`, taken out of the line; None (and `umqh` noted
    /// as waiting) when the line is empty.
    pub fn claim(&self, umqh: u64) -> Option<*mut umq_buf_t> {
        let mut s = self.lock();
        let b = s.posted.pop_front();
        if b.is_none() {
            s.waiting.insert(umqh);
        }
        b
    }

    /// Puts claimed buffers back first in line, in their order (a member unbinding or going
    /// away gives back what it claimed and did not use).
    pub fn give_back(&self, bufs: impl DoubleEndedIterator<Item = *mut umq_buf_t>) {
        let mut s = self.lock();
        for b in bufs.rev() {
            s.posted.push_front(b);
        }
    }

    /// A member's landed message joins the one line of completions.
    pub fn complete(&self, head: *mut umq_buf_t, nbufs: u32) {
        self.lock().completed.push_back((head, nbufs));
    }

    /// Moves the oldest landed messages' heads into `out`; returns how many. Their buffers no
    /// longer count against the depth.
    pub fn take_completions(&self, out: &mut [*mut umq_buf_t]) -> usize {
        let mut s = self.lock();
        let mut bufs = 0;
        let n = s.completed.pop_map_into(out, |(head, k)| {
            bufs += k as usize;
            head
        });
        s.held -= bufs;
        n
    }

    pub fn completions_len(&self) -> usize {
        self.lock().completed.len()
    }

    /// Buffers the line holds for the application: posted, claimed, or in landed messages.
    pub fn outstanding(&self) -> usize {
        self.lock().held
    }

    /// Takes every buffer out, posted ones as one-buffer chains, then the landed messages (the
    /// main queue is being destroyed, with no sub-queue left).
    pub fn drain_all(&self) -> Vec<(*mut umq_buf_t, usize)> {
        let mut s = self.lock();
        s.held = 0;
        let mut out: Vec<_> = s.posted.drain().map(|b| (b, 1)).collect();
        out.extend(s.completed.drain().map(|(h, k)| (h, k as usize)));
        out
    }

    /// A sub-queue joins the line.
    pub fn add_sub(&self, umqh: u64) {
        self.lock().subs.push(umqh);
    }

    /// A sub-queue leaves: it no longer waits for a buffer.
    pub fn remove_sub(&self, umqh: u64) {
        let mut s = self.lock();
        s.subs.retain(|&h| h != umqh);
        s.linked.retain(|&h| h != umqh);
        s.updates.retain(|&h| h != umqh);
        s.waiting.remove(&umqh);
    }

    /// A member has credit updates to show (the reference shows a member's through its main
    /// queue's receive polls, tagged with the member's context).
    pub fn note_updates(&self, umqh: u64) {
        let mut s = self.lock();
        if !s.updates.contains(&umqh) {
            s.updates.push(umqh);
        }
    }

    /// Whether some member waits for its updates to be shown.
    pub fn has_noted(&self) -> bool {
        !self.lock().updates.is_empty()
    }

    /// The members noted with updates since the last call, oldest first.
    pub fn take_noted(&self) -> Vec<u64> {
        let mut s = self.lock();
        if s.updates.is_empty() {
            return Vec::new();
        }
        std::mem::take(&mut s.updates)
    }

    pub fn subs(&self) -> usize {
        self.lock().subs.len()
    }

    /// A member was bound through a link (`on`), or that binding ended.
    pub fn set_linked(&self, umqh: u64, on: bool) {
        let mut s = self.lock();
        s.linked.retain(|&h| h != umqh);
        if on {
            s.linked.push(umqh);
        }
    }

    pub fn linked(&self) -> usize {
        self.lock().linked.len()
    }

    /// The linked member after the one this returned last, round the line (None without any):
    /// the main queue's polls look at a bounded number of them each, fairly.
    pub fn next_linked(&self) -> Option<u64> {
        let mut s = self.lock();
        let n = s.linked.len();
        if n == 0 {
            return None;
        }
        s.cursor = (s.cursor + 1) % n;
        Some(s.linked[s.cursor])
    }
}

/// A `RecvQueue`'s place on a shared line: which line, whether the queue is the main one (the
/// only one whose polls take completions), and the context its messages are tagged with.
pub struct Membership {
    pub line: std::sync::Arc<SharedRq>,
    pub main: bool,
    pub umqh: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs(n: usize) -> (Vec<umq_buf_t>, Vec<*mut umq_buf_t>) {
        let mut v: Vec<umq_buf_t> = (0..n).map(|_| unsafe { std::mem::zeroed() }).collect();
        let p = v.iter_mut().map(|b| b as *mut umq_buf_t).collect();
        (v, p)
    }

    /// The depth counts posted, claimed and landed buffers alike; a claim on an empty line
    /// notes the member, and the next post that takes a buffer names it once.
    #[test]
    fn depth_claims_and_waiters() {
        let (_keep, p) = bufs(4);
        let line = SharedRq::new(3);
        assert_eq!(line.post(&p[..4]).0, 3, "the fourth exceeds the depth");
        assert_eq!(line.claim(7), Some(p[0]));
        assert_eq!(line.claim(8), Some(p[1]));
        line.complete(p[0], 1);
        assert_eq!(line.outstanding(), 3);
        assert_eq!(line.claim(9), Some(p[2]));
        assert_eq!(
            (line.claim(9), line.claim(9), line.claim(8)),
            (None, None, None)
        );
        assert_eq!(line.post(&p[3..]).0, 0, "still full until a poll");
        let mut out = [ptr::null_mut(); 4];
        assert_eq!(line.take_completions(&mut out), 1);
        assert_eq!(out[0], p[0]);
        let (n, mut woken) = line.post(&p[3..]);
        woken.sort();
        assert_eq!((n, woken), (1, vec![8, 9]));
        assert_eq!(line.post(&[]).1, Vec::<u64>::new(), "named once");
        // A member giving back what it claimed puts it first, in order.
        line.give_back([p[1], p[2]].into_iter());
        assert_eq!(line.claim(1), Some(p[1]));
        assert_eq!(line.claim(1), Some(p[2]));
        assert_eq!(line.claim(1), Some(p[3]));
    }

    /// Draining returns every buffer the line held, posted ones and landed chains.
    #[test]
    fn drain_returns_everything() {
        let (_keep, p) = bufs(3);
        let line = SharedRq::new(8);
        line.post(&p);
        let c = line.claim(1).unwrap();
        line.complete(c, 1);
        let all = line.drain_all();
        assert_eq!(all, vec![(p[1], 1), (p[2], 1), (p[0], 1)]);
        assert_eq!(line.outstanding(), 0);
    }

    /// The main queue's look at the linked members goes round them all, and forgets one whose
    /// binding ended or that left.
    #[test]
    fn linked_members_are_visited_in_turn() {
        let line = SharedRq::new(4);
        assert_eq!(line.next_linked(), None);
        [5, 6, 7, 8].into_iter().for_each(|h| line.add_sub(h));
        [5, 6, 7].into_iter().for_each(|h| line.set_linked(h, true));
        let mut seen: Vec<_> = (0..3).map(|_| line.next_linked().unwrap()).collect();
        seen.sort();
        assert_eq!(seen, [5, 6, 7], "8 is bound in this process, or not at all");
        line.remove_sub(6);
        line.set_linked(7, false);
        assert_eq!((line.subs(), line.linked()), (3, 1));
        let seen: HashSet<_> = (0..4).map(|_| line.next_linked().unwrap()).collect();
        assert_eq!(seen, HashSet::from([5]));
    }
}
