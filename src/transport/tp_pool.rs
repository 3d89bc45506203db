//! The process's transport pool (the July 2026 revision's `UMQ_CREATE_FLAG_SHARE_TRANSPORT`):
//! send resources that many queues take turns on, as UMDK's jetty pool lends its jetties.
//!
//! A main queue that shares its transport makes resources (`create`), each named by a small
//! index that every such main queue of the process shares. A *logic* queue (one that shares
//! the main queue's receive queue and its transport) holds no send resource of its own: its
//! first post borrows an idle one (`borrow`), its posts count against what one borrowing may
//! send (`take_for_post`), and it gives the resource back once every WR it posted has been
//! polled (`give_back`). Until then the resource is the logic queue's alone, so its send
//! completions are that queue's, and the main queue can poll them by the index.
//!
//! What the pool does, and so what this does (UMDK's `umq_ub_jetty_pool.c`):
//! - idle resources are lent oldest first, and one borrowing may post at most
//!   `1024 * idle / total` WRs (at least 2), so a busy queue cannot keep a resource for ever
//!   while others wait;
//! - the pool's eventfd is written with the idle count whenever a resource becomes idle and
//!   that count is a multiple of `notify_threshold`;
//! - a resource the application marks in error (`mark_err`) takes no new post, and once given
//!   back is never lent again; only an idle one can be destroyed.
//!
//! One difference, deliberate: the reference lends an idle resource already marked in error,
//! whose posts then fail; this pool never lends one.
//!
//! Owners are queue handles: the pool does not name the queue layer.

use crate::abi::errno::*;
use crate::event::{Channel, EventFd};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

/// Indices a process's resources can have, as in the reference.
pub const MAX_RESOURCES: u32 = 65536;
/// What one borrowing may post, scaled by the share of resources idle (as the reference).
const BORROW_LIMIT_RATIO: u64 = 1024;
const BORROW_LIMIT_MIN: u32 = 2;
/// The reference's default when `tp_pool_cfg.notify_threshold` is 0.
pub const NOTIFY_THRESHOLD_DEFAULT: u32 = 1;

/// No idle resource to borrow (the reference's `UMQ_ERR_EMLINK`, Linux's EMLINK).
pub const NO_IDLE_RESOURCE: i32 = -libc::EMLINK;
/// A borrowing has posted all it may (the reference's `UMQ_ERR_ENOBUFS`).
pub const BORROW_SPENT: i32 = -libc::ENOBUFS;

struct Resource {
    /// The logic queue that holds it (None while idle).
    owner: Option<u64>,
    err: bool,
    /// WRs posted in the current borrowing, and how many it may post.
    posted: u32,
    limit: u32,
    /// Its completion channel, when the main queue that made it is in interrupt mode.
    channel: Option<Arc<Channel>>,
}

#[derive(Default, Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    pub total: u64,
    pub idle: u64,
    pub in_use: u64,
    pub err: u64,
    pub lent: u64,
    pub given_back: u64,
    pub missed: u64,
}

#[derive(Default)]
struct Inner {
    slots: Vec<Option<Resource>>,
    /// Indices below `slots.len()` whose resource was destroyed, lowest first out.
    vacant: BinaryHeap<Reverse<u32>>,
    /// Idle resources not in error, lent oldest first.
    idle: VecDeque<u32>,
    live: u32,
    in_use: u32,
    err: u32,
    lent: u64,
    given_back: u64,
    missed: u64,
    /// The send depth and buffer size of the first main queue that shares its transport: the
    /// resources are every such queue's, so all must match.
    baseline: Option<(u32, u32)>,
}

pub struct TransportPool {
    inner: Mutex<Inner>,
    event: EventFd,
    notify_threshold: u32,
}

impl TransportPool {
    pub fn new(notify_threshold: u32) -> Result<TransportPool, i32> {
        Ok(TransportPool {
            inner: Mutex::default(),
            event: EventFd::new(false)?,
            notify_threshold: if notify_threshold == 0 {
                NOTIFY_THRESHOLD_DEFAULT
            } else {
                notify_threshold
            },
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The eventfd written as resources become idle.
    pub fn event_fd(&self) -> i32 {
        self.event.fd()
    }

    /// Checks a main queue's send depth and buffer size against the first one's (which sets
    /// them): the reference's rule, since every such queue's logic queues borrow every resource.
    pub fn align(&self, tx_depth: u32, tx_buf_size: u32) -> Result<(), (u32, u32)> {
        let mut g = self.lock();
        match g.baseline {
            None => {
                g.baseline = Some((tx_depth, tx_buf_size));
                Ok(())
            }
            Some(b) if b == (tx_depth, tx_buf_size) => Ok(()),
            Some(b) => Err(b),
        }
    }

    /// Makes a resource at the lowest free index, idle; `interrupt`: with a completion channel.
    pub fn create(&self, interrupt: bool) -> Result<u32, i32> {
        let channel = interrupt.then(Channel::new).transpose()?.map(Arc::new);
        let mut g = self.lock();
        let idx = match g.vacant.pop() {
            Some(Reverse(i)) => i as usize,
            None if g.slots.len() < MAX_RESOURCES as usize => {
                g.slots.push(None);
                g.slots.len() - 1
            }
            None => return Err(-UMQ_ERR_EINVAL),
        };
        g.slots[idx] = Some(Resource {
            owner: None,
            err: false,
            posted: 0,
            limit: 0,
            channel,
        });
        g.live += 1;
        self.make_idle(g, idx as u32);
        Ok(idx as u32)
    }

    /// Destroys an idle resource: EINVAL for no such index, EBUSY while a queue holds it.
    pub fn destroy(&self, idx: u32) -> Result<(), i32> {
        let mut g = self.lock();
        let r = slot(&mut g, idx)?;
        if r.owner.is_some() {
            return Err(-UMQ_ERR_EBUSY);
        }
        let err = r.err;
        g.slots[idx as usize] = None;
        g.vacant.push(Reverse(idx));
        g.live -= 1;
        g.err -= err as u32;
        g.idle.retain(|&i| i != idx);
        Ok(())
    }

    /// Marks a resource in error: its holder's posts fail from now on, and it is not lent
    /// again. EINVAL for no such index.
    pub fn mark_err(&self, idx: u32) -> Result<(), i32> {
        let mut g = self.lock();
        let r = slot(&mut g, idx)?;
        if !r.err {
            r.err = true;
            g.err += 1;
            g.idle.retain(|&i| i != idx);
        }
        Ok(())
    }

    /// Lends the oldest idle resource to `owner`; `NO_IDLE_RESOURCE` when none is.
    pub fn borrow(&self, owner: u64) -> Result<u32, i32> {
        let mut g = self.lock();
        let Some(idx) = g.idle.pop_front() else {
            g.missed += 1;
            return Err(NO_IDLE_RESOURCE);
        };
        let limit = borrow_limit(g.live, g.idle.len() as u32);
        let r = g.slots[idx as usize]
            .as_mut()
            .expect("an idle index is live");
        r.owner = Some(owner);
        r.posted = 0;
        r.limit = limit;
        g.in_use += 1;
        g.lent += 1;
        Ok(idx)
    }

    /// How many of `want` WRs `owner` may post on the resource it holds, counted as posted:
    /// `BORROW_SPENT` when none, EINVAL when the resource is in error or not the owner's.
    pub fn take_for_post(&self, idx: u32, owner: u64, want: u32) -> Result<u32, i32> {
        let mut g = self.lock();
        let r = owned(&mut g, idx, owner)?;
        if r.err {
            return Err(-UMQ_ERR_EINVAL);
        }
        let may = want.min(r.limit - r.posted);
        if may == 0 {
            return Err(BORROW_SPENT);
        }
        r.posted += may;
        Ok(may)
    }

    /// Takes back `n` of a post's count that did not go.
    pub fn untake(&self, idx: u32, owner: u64, n: u32) {
        if let Ok(r) = owned(&mut self.lock(), idx, owner) {
            r.posted -= n.min(r.posted);
        }
    }

    /// `owner` gives the resource back (every WR it posted on it has been polled).
    pub fn give_back(&self, idx: u32, owner: u64) {
        let mut g = self.lock();
        let Ok(r) = owned(&mut g, idx, owner) else {
            return;
        };
        r.owner = None;
        let err = r.err;
        g.in_use -= 1;
        g.given_back += 1;
        if !err {
            self.make_idle(g, idx);
        }
    }

    /// Whether `idx` names a resource, and the queue holding it.
    pub fn holder(&self, idx: u32) -> Option<Option<u64>> {
        let g = self.lock();
        g.slots.get(idx as usize)?.as_ref().map(|r| r.owner)
    }

    /// The resource's completion channel: EINVAL for no such index or one without.
    pub fn channel(&self, idx: u32) -> Result<Arc<Channel>, i32> {
        let mut g = self.lock();
        slot(&mut g, idx)?.channel.clone().ok_or(-UMQ_ERR_EINVAL)
    }

    pub fn stats(&self) -> Stats {
        let g = self.lock();
        Stats {
            total: g.live as u64,
            idle: g.idle.len() as u64,
            in_use: g.in_use as u64,
            err: g.err as u64,
            lent: g.lent,
            given_back: g.given_back,
            missed: g.missed,
        }
    }

    /// Puts a resource at the back of the idle line and writes the eventfd when the idle count
    /// reaches a multiple of the threshold.
    fn make_idle(&self, mut g: MutexGuard<'_, Inner>, idx: u32) {
        g.idle.push_back(idx);
        let idle = g.idle.len() as u64;
        drop(g);
        if idle.is_multiple_of(self.notify_threshold as u64) {
            self.event.signal_by(idle);
        }
    }
}

fn slot(g: &mut Inner, idx: u32) -> Result<&mut Resource, i32> {
    g.slots
        .get_mut(idx as usize)
        .and_then(Option::as_mut)
        .ok_or(-UMQ_ERR_EINVAL)
}

fn owned(g: &mut Inner, idx: u32, owner: u64) -> Result<&mut Resource, i32> {
    slot(g, idx).and_then(|r| {
        if r.owner == Some(owner) {
            Ok(r)
        } else {
            Err(-UMQ_ERR_EINVAL)
        }
    })
}

/// What one borrowing may post: the reference's `1024 * idle / total`, at least 2.
fn borrow_limit(total: u32, idle_after: u32) -> u32 {
    let scaled = BORROW_LIMIT_RATIO * idle_after as u64 / total.max(1) as u64;
    (scaled as u32).max(BORROW_LIMIT_MIN)
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: u64 = 0xa;
    const B: u64 = 0xb;

    #[test]
    fn resources_are_lent_oldest_first_and_only_to_one_queue_at_a_time() {
        let p = TransportPool::new(0).unwrap();
        assert_eq!((p.create(false), p.create(false)), (Ok(0), Ok(1)));
        assert_eq!(p.borrow(A), Ok(0));
        assert_eq!(p.borrow(B), Ok(1));
        assert_eq!(p.borrow(A + B), Err(NO_IDLE_RESOURCE));
        assert_eq!(p.holder(0), Some(Some(A)));
        assert_eq!(p.take_for_post(0, B, 1), Err(-UMQ_ERR_EINVAL), "not B's");
        p.give_back(0, B); // not B's: nothing happens
        assert_eq!(p.holder(0), Some(Some(A)));
        p.give_back(1, B);
        p.give_back(0, A);
        assert_eq!(p.borrow(A), Ok(1), "the one given back first is lent first");
        let s = p.stats();
        assert_eq!((s.total, s.idle, s.in_use), (2, 1, 1));
        assert_eq!((s.lent, s.given_back, s.missed), (3, 2, 1));
    }

    #[test]
    fn a_borrowing_posts_at_most_its_share_of_the_idle_resources() {
        let p = TransportPool::new(0).unwrap();
        for _ in 0..4 {
            p.create(false).unwrap();
        }
        // Three of four idle after the first borrowing: 768.
        let idx = p.borrow(A).unwrap();
        assert_eq!(p.take_for_post(idx, A, 700), Ok(700));
        assert_eq!(p.take_for_post(idx, A, 100), Ok(68));
        assert_eq!(p.take_for_post(idx, A, 1), Err(BORROW_SPENT));
        p.untake(idx, A, 8);
        assert_eq!(p.take_for_post(idx, A, 100), Ok(8));
        // The last idle one: none left idle, so the floor of 2.
        for o in 1..=3 {
            p.borrow(A + o).unwrap();
        }
        p.give_back(idx, A);
        let last = p.borrow(B).unwrap();
        assert_eq!(last, idx);
        assert_eq!(p.take_for_post(last, B, 5), Ok(2));
    }

    #[test]
    fn a_resource_in_error_takes_no_post_and_is_never_lent_again() {
        let p = TransportPool::new(0).unwrap();
        let (x, y) = (p.create(false).unwrap(), p.create(false).unwrap());
        assert_eq!(p.borrow(A), Ok(x));
        p.mark_err(x).unwrap();
        p.mark_err(y).unwrap();
        p.mark_err(y).unwrap();
        assert_eq!(p.take_for_post(x, A, 1), Err(-UMQ_ERR_EINVAL));
        assert_eq!(p.stats().err, 2);
        assert_eq!(p.borrow(B), Err(NO_IDLE_RESOURCE), "y is in error");
        assert_eq!(p.destroy(x), Err(-UMQ_ERR_EBUSY), "A holds it");
        p.give_back(x, A);
        assert_eq!(p.borrow(B), Err(NO_IDLE_RESOURCE), "x is in error");
        assert_eq!((p.destroy(x), p.destroy(y)), (Ok(()), Ok(())));
        assert_eq!(p.destroy(y), Err(-UMQ_ERR_EINVAL));
        assert_eq!(p.mark_err(7), Err(-UMQ_ERR_EINVAL));
        let s = p.stats();
        assert_eq!((s.total, s.idle, s.in_use, s.err), (0, 0, 0, 0));
        assert_eq!(p.create(false), Ok(0), "the lowest free index again");
        for _ in 0..4 {
            p.create(false).unwrap();
        }
        for i in [3, 1, 4] {
            p.destroy(i).unwrap();
        }
        let again: Vec<_> = (0..4).map(|_| p.create(false).unwrap()).collect();
        assert_eq!(again, [1, 3, 4, 5]);
    }

    #[test]
    fn the_eventfd_counts_idle_resources_at_each_multiple_of_the_threshold() {
        let p = TransportPool::new(2).unwrap();
        p.create(false).unwrap();
        assert_eq!(p.event.take(), 0, "one idle: not a multiple of 2");
        p.create(true).unwrap();
        assert_eq!(p.event.take(), 2);
        let i = p.borrow(A).unwrap();
        assert_eq!(p.event.take(), 0);
        p.give_back(i, A);
        assert_eq!(p.event.take(), 2);
        assert!(p.channel(1).is_ok() && p.channel(0).is_err());
    }

    #[test]
    fn main_queues_must_agree_on_depth_and_buffer_size() {
        let p = TransportPool::new(0).unwrap();
        assert_eq!(p.align(64, 4096), Ok(()));
        assert_eq!(p.align(64, 4096), Ok(()));
        assert_eq!(p.align(128, 4096), Err((64, 4096)));
    }
}
