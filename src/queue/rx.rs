//! The receive side and completions: posting receive buffers, polling, wake-ups.

use super::*;

/// What a send or receive poll's quick look found (`Queue::poll_quick`).
pub enum Quick<'a> {
    /// This many completions taken (none, perhaps): all the poll had to do.
    Took(usize),
    /// The poll has more to do, nothing taken: under the wire's lock, held for it
    /// (`Queue::poll_plain`), or none (the lock was busy, or the queue is not plain).
    Not(Option<SpinGuard<'a, Wired>>),
}

impl Queue {
    #[inline(always)]
    pub(crate) fn post_rx(&self, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        // One buffer (every repost of a ping-pong) needs no list walk.
        if unsafe { (*head).qbuf_next.is_null() } {
            return self.post_rx_bufs(&[head], bad);
        }
        // Not zeroed: a one-buffer repost (every message of a ping-pong) touches one entry.
        let mut bufs = [const { MaybeUninit::<*mut umq_buf_t>::uninit() }; BATCH];
        let mut n = 0;
        for b in crate::buf::iter(head) {
            if n == BATCH {
                *bad = head;
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID);
                return Err(einval(
                    "umq_post",
                    format_args!("more than UMQ_BATCH_SIZE ({BATCH}) receive buffers in one call"),
                ));
            }
            bufs[n].write(b);
            n += 1;
        }
        // SAFETY: the first n entries were written just above.
        let bufs = unsafe { crate::buf::written(&bufs, n) };
        self.post_rx_bufs(bufs, bad)
    }

    /// Posts the receive buffers of one call (at most `UMQ_BATCH_SIZE`); EAGAIN with `bad` at
    /// the first one refused when the receive depth is full.
    #[inline(always)]
    fn post_rx_bufs(&self, bufs: &[*mut umq_buf_t], bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        let n = bufs.len();
        let (accepted, progress) = self.push_rx(bufs);
        if progress {
            self.flow_progress();
        }
        if !self.over_link.load(Ordering::Relaxed) {
            self.kick_waiting_sender();
        }
        if accepted < n {
            *bad = bufs[accepted];
            return Err(-UMQ_ERR_EAGAIN);
        }
        Ok(())
    }

    /// Posts receive buffers up to the free receive depth; returns how many were taken and
    /// whether flow control has something to announce. Over shared memory, a message that was
    /// waiting for a buffer is taken in at once, under the same lock.
    #[inline(always)]
    pub(crate) fn push_rx(&self, bufs: &[*mut umq_buf_t]) -> (usize, bool) {
        if let Some(s) = &self.share {
            return (self.push_rx_shared(s, bufs), false);
        }
        let mut w = lock(&self.wire);
        let accepted = bufs
            .len()
            .min(self.cfg.rx_depth as usize - w.rq.outstanding());
        // A lone buffer (every repost of a ping-pong) without the loop: its length is known
        // where this inlines, and the loop's counter and its buffer kept on the stack had cost
        // the repost more than its one post.
        let lone = matches!(bufs, [_] if accepted == 1);
        match bufs {
            [b] if lone => self.post_one_rx(&mut w, *b),
            _ => bufs[..accepted]
                .iter()
                .for_each(|&b| self.post_one_rx(&mut w, b)),
        }
        let mut announce = match w.flow.as_mut() {
            Some(f) if lone => f.rx_one_posted(self.area()),
            Some(f) => {
                let refused = bufs.len() - accepted;
                f.rx_batch_posted(accepted as u64, refused as u64, self.area())
            }
            // Not bound yet: the July 2026 credit pool has the buffers all the same.
            None => self.credit_pool.as_ref().is_some_and(|p| {
                p.recharge(accepted as u64);
                true
            }),
        };
        // A queue that answers what it receives has its answer carry the grant.
        if accepted > 0 {
            let withhold = announce && w.answering.owes_an_answer() && self.may_withhold(&w);
            w.answering.posted(withhold);
            if withhold {
                announce = false;
                self.file_grant_round(&w);
            }
        }
        if accepted > 0 && w.rx_post_concerns_link() && w.round_after_rx_post() {
            self.rx_posted_on_link(w);
        }
        (accepted, announce)
    }

    /// Posts one receive buffer `b` under `w`, our locked wire, which has room for it.
    #[inline(always)]
    fn post_one_rx(&self, w: &mut Wired, b: *mut umq_buf_t) {
        unsafe {
            (*b).qbuf_next = ptr::null_mut();
            (*b).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_RX);
        }
        self.offer_for_placement(w, b);
        w.rq.post(b);
    }

    /// Whether a receive post may leave its due announcement to the application's answer: the
    /// window protocol's may; the July 2026 credit requests have no announcements to leave.
    #[cold]
    #[inline(never)]
    fn may_withhold(&self, w: &Wired) -> bool {
        !matches!(w.flow, Some(FlowState::Credit(..)))
    }

    /// After a receive post through a link that needs a round now (`round_after_rx_post`).
    #[inline(never)]
    fn rx_posted_on_link(&self, mut w: SpinGuard<'_, Wired>) {
        let out = self.link_round(&mut w);
        drop(w);
        self.after_round(&out);
    }

    /// Through a link, a pro-API receive buffer `b` from our shared pool, about to be posted:
    /// the peer may write the message that takes it straight into it (`Link::offer_rx`).
    /// Base-API receivers take a long message in several buffers, so their order is not known
    /// ahead; they offer none.
    #[inline]
    fn offer_for_placement(&self, w: &Wired, b: *mut umq_buf_t) {
        let (Some(arena), Some(link), true) = (w.arena().map(|a| &**a), &w.link, self.rt.pro_api)
        else {
            return;
        };
        link.offer_rx(arena, w.rq.posted_len(), b);
    }

    #[inline(always)]
    pub fn poll(&self, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) -> UmqResult<usize> {
        if dir >= UMQ_IO_MAX {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POLL_IO_DIRECTION_INVALID);
            return Err(einval(
                "umq_poll",
                format_args!("io_direction {dir} out of range"),
            ));
        }
        // A base-API queue's completions are the library's own (enqueue and dequeue reap
        // them): to the application its completion queue is empty, as in the reference, where
        // programs written for both APIs poll it in their setup loops. A member of a shared
        // receive queue polls its own way. (One test for both.)
        if !self.plain_polls {
            return Ok(match &self.share {
                Some(s) if self.rt.pro_api => self.poll_shared(s, dir, out),
                None if self.credit_pool.is_some() && self.rt.pro_api => {
                    self.poll_with_credit_updates(dir, out)
                }
                _ => 0,
            });
        }
        Ok(self.poll_plain(lock(&self.wire), dir, out))
    }

    /// The poll of a plain queue (`Queue::poll`), under `w`, its wire's lock.
    #[inline(always)]
    pub fn poll_plain(
        &self,
        w: SpinGuard<'_, Wired>,
        dir: umq_io_direction_t,
        out: &mut [*mut umq_buf_t],
    ) -> usize {
        let several = out.len() > 1 && dir != UMQ_IO_TX;
        let (n, progress) = self.poll_held(w, dir, out, several, false, |_, room| room);
        if progress {
            self.flow_progress();
        }
        n
    }

    /// A send or receive poll (`DIR`) into `out`, when what `poll` would do is take the oldest
    /// completions, or nothing: the queue's lock free, and nothing else for the poll to run. A
    /// poll that would run a link's round (any receive poll through a link, a send poll through
    /// one with no completion to return), expire a WR's wait for a receive buffer, or step flow
    /// control (`poll_held`) is `Not`, with nothing taken and the lock held for the whole poll.
    /// Most polls of a ping-pong or a stream are neither, and this look runs them without the
    /// frame of the whole poll around it: 10-15 instructions a poll.
    #[inline(always)]
    pub fn poll_quick<const DIR: umq_io_direction_t>(
        &self,
        out: &mut [*mut umq_buf_t],
    ) -> Quick<'_> {
        if !self.plain_polls {
            return Quick::Not(None);
        }
        let Some(mut w) = self.wire.try_lock() else {
            return Quick::Not(None);
        };
        let took = match DIR {
            UMQ_IO_TX => Self::reap_quick(&mut w, out),
            _ => Self::receive_quick(&mut w, out),
        };
        match took {
            Some(n) => Quick::Took(n),
            None => Quick::Not(Some(w)),
        }
    }

    /// `poll_quick`'s send poll: how many completions it took, or None for a poll with more to
    /// do.
    #[inline(always)]
    fn reap_quick(w: &mut Wired, out: &mut [*mut umq_buf_t]) -> Option<usize> {
        if w.rnr.since().is_some() || (w.flow.is_some() && w.sq.uncompleted() > 0) {
            return None;
        }
        match w.sq.completed() {
            0 if w.link.is_some() => None,
            _ => Some(w.sq.take_completed(out)),
        }
    }

    /// `poll_quick`'s receive poll, as `reap_quick`.
    #[inline(always)]
    fn receive_quick(w: &mut Wired, out: &mut [*mut umq_buf_t]) -> Option<usize> {
        if w.link.is_some() || (w.flow.is_some() && Self::flow_wants_progress(w)) {
            return None;
        }
        let took = w.rq.take_completions(out);
        if took > 0 {
            w.answering.took();
        }
        Some(took)
    }

    /// Whether flow control has an announcement due or WRs waiting for credit.
    #[inline(always)]
    pub(super) fn flow_wants_progress(w: &mut Wire) -> bool {
        let waiting = w.sq.uncompleted() > 0;
        w.flow.as_mut().is_some_and(|f| f.wants_progress(waiting))
    }

    /// The base API's reaping of its sends (`base::reap_tx`): their completions, as a send
    /// poll takes them, under one lock, where a look whether any send was still the library's
    /// and then the poll took two.
    pub(crate) fn reap_sends(&self, out: &mut [*mut umq_buf_t]) -> usize {
        self.poll_locked(UMQ_IO_TX, out, false, true, |_, room| room)
            .0
    }

    /// Receive completions for one `umq_dequeue`, oldest first, up to `out.len()`: the run of
    /// messages one list can carry, taken under one lock so no other poll takes a message
    /// from the middle of it. A zero-length entry comes alone: a program that walks the list
    /// by each head's `total_data_size` (as the reference's perftest does) never advances past
    /// a span of zero bytes. `rx_room` is set to the receive queue's room once they are taken
    /// (`Queue::rx_room`, seen under the same lock), for the dequeue's refill.
    pub(crate) fn poll_rx_run(&self, out: &mut [*mut umq_buf_t], rx_room: &mut usize) -> usize {
        let several = out.len() > 1;
        let depth = self.cfg.rx_depth as usize;
        self.poll_locked(UMQ_IO_RX, out, several, false, |rq, room| {
            let len = |i| {
                rq.completion_at(i)
                    .map_or(0, |(head, _)| unsafe { (*head).total_data_size })
            };
            let take = match room.min(rq.completions_len()) {
                0 => 0,
                _ if len(0) == 0 => 1,
                n => 1 + (1..n).take_while(|&i| len(i) > 0).count(),
            };
            let bufs: usize = (0..take)
                .filter_map(|i| rq.completion_at(i))
                .map(|(_, n)| n as usize)
                .sum();
            *rx_room = depth.saturating_sub(rq.outstanding().saturating_sub(bufs));
            take
        })
        .0
    }

    /// Takes completions and, under the same lock, says whether flow control wants to run.
    /// `rx_take` says how many of the receive completions waiting to take, given the room
    /// left in `out` for them; with `several` a link lands every message that has arrived, not
    /// just the first (`link_receive_round`). With `reap` (the base API's reaping of its own
    /// sends) a queue none of whose sends is still the library's returns at once, without the
    /// round a send poll runs over a link. Inlined into `umq_poll`: a call boundary here cost
    /// 19 instructions a poll.
    #[inline(always)]
    pub(super) fn poll_locked(
        &self,
        dir: umq_io_direction_t,
        out: &mut [*mut umq_buf_t],
        several: bool,
        reap: bool,
        rx_take: impl FnOnce(&RecvQueue, usize) -> usize,
    ) -> (usize, bool) {
        self.poll_held(lock(&self.wire), dir, out, several, reap, rx_take)
    }

    /// `poll_locked` under `w`, the wire's lock.
    #[inline(always)]
    fn poll_held(
        &self,
        mut w: SpinGuard<'_, Wired>,
        dir: umq_io_direction_t,
        out: &mut [*mut umq_buf_t],
        several: bool,
        reap: bool,
        rx_take: impl FnOnce(&RecvQueue, usize) -> usize,
    ) -> (usize, bool) {
        let mut n = 0;
        if reap && w.sq.is_empty() {
            return (0, false);
        }
        // Loopback queues have nothing to run here: their peer delivers on post. A poll that
        // receives, or a send poll with no completion to return, takes a lone waiting message
        // through the link's shortcut when that is all the round would do
        // (`link_receive_round`): an application loop that polls sends, then receives, often
        // finds the message in its send poll, and the full round cost it 10 ns there. A send
        // poll that has completions to return skips the round (the receive side's polls and the
        // progress thread run it): it is the poll after every post of a ping-pong, and its round
        // would only look at the ring line the peer is about to write.
        let round = match w.link {
            Some(_) if dir != UMQ_IO_TX || w.sq.completed() == 0 => {
                Some(self.link_receive_round(&mut w, several))
            }
            _ => None,
        };
        if dir != UMQ_IO_RX {
            self.expire_rnr(&mut w);
            n = w.sq.take_completed(out);
        }
        if dir != UMQ_IO_TX {
            let take = rx_take(&w.rq, out.len() - n);
            let took = w.rq.take_completions(&mut out[n..n + take]);
            if took > 0 {
                w.answering.took();
            }
            n += took;
        }
        // A send poll that skipped the round over a link, or any send poll of a loopback
        // queue (whose peer delivers on post), landed nothing and posted nothing: of what flow
        // control's step looks at, only WRs waiting for credit can be new to it. An
        // announcement that a landing made due is seen by the receive polls that take it in,
        // and a peer's first window by the next post that needs credit.
        let progress = w.flow.is_some()
            && match round {
                None if w.link.is_some() || dir == UMQ_IO_TX => w.sq.uncompleted() > 0,
                _ => Self::flow_wants_progress(&mut w),
            };
        drop(w);
        if let Some(out) = round {
            self.after_round(&out);
        }
        (n, progress)
    }

    /// Wakes the armed interrupt channels (a sub-queue's receive channel is its main queue's).
    pub(super) fn notify(&self, tx: bool, rx: bool) {
        if let Some(irq) = &self.irq {
            irq.notify(tx, rx);
        }
    }

    /// Whether completions are waiting in a direction (for interrupt re-arming).
    pub fn has_completions(&self, dir: umq_io_direction_t) -> bool {
        let mut w = lock(&self.wire);
        match dir {
            UMQ_IO_TX => w.sq.completed() > 0,
            _ => {
                w.rq.has_completions()
                    || Self::credit_updates_waiting(&mut w)
                    || self
                        .share
                        .as_ref()
                        .is_some_and(|s| s.main.is_none() && s.line.has_noted())
            }
        }
    }

    pub fn rx_room(&self) -> usize {
        let held = match &self.share {
            Some(s) => s.line.outstanding(),
            None => lock(&self.wire).rq.outstanding(),
        };
        self.cfg.rx_depth as usize - held
    }
}
