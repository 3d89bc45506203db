//! Moving work along outside a post: a link's rounds, flow-control progress, waking a sender
//! that waits for the receiver, and the RNR timeout.

use super::*;
use crate::transport::binding::Held;
use crate::transport::progress::{Serviced, waits_politely};
use std::time::Duration;

/// How long after a round that left work needing this process the engine looks whether
/// anyone moved the queue on since, and runs a round itself if not.
const ROUND_AFTER: Duration = Duration::from_millis(1);
/// The longest wait between two such looks while nothing moves.
const ROUND_MOST: Duration = Duration::from_millis(100);
/// The longest wait between two looks while the application moves the queue itself: the looks
/// thin out to this, since each wakes the engine, which takes a CPU from the busy-polling
/// application on a small host (`docs/TRANSPORTS.md`, "Any WR that does not move"). An
/// application that then stops is stood in for within this.
const ROUND_ACTIVE_MOST: Duration = Duration::from_millis(8);

impl Queue {
    /// One full round of the queue's link under our wire lock (nothing when the queue is bound
    /// in this process, or the round would find nothing to do); a broken pair (peer gone,
    /// corrupt peer) puts the queue in the error state.
    #[inline]
    pub(super) fn link_round(&self, w: &mut Wired) -> Outcome {
        match w.link.as_deref() {
            Some(link) if !link.idle(&w.wire) => self.link_round_busy(w),
            _ => Outcome::default(),
        }
    }

    /// A receive poll's round: the link's one-message shortcut (`Link::receive_one`) when it
    /// applies, else the full round. With room for `several` messages, a shortcut that finds
    /// more arrived behind its one runs the full round too, so the poll returns every message
    /// that has arrived, as the reference does; a ping-pong's poll pays one stamp load for it.
    #[inline(always)]
    pub(super) fn link_receive_round(&self, w: &mut Wired, several: bool) -> Outcome {
        let Wired { wire, link, .. } = w;
        if !crate::transport::pause::in_use()
            && self.state.load(Ordering::Acquire) != QUEUE_STATE_ERR
            && let Some(link) = link.as_deref_mut()
        {
            let one = link.receive_one(wire, self.handle);
            // Only after a landing: an empty ring was just seen empty.
            let landed = one.as_ref().is_some_and(|o| o.rx_done > 0);
            let more = several && landed && link.more_arrived();
            if let Some(mut out) = one {
                if more {
                    // An entry waits, so the link is not idle: no need to ask again.
                    out.absorb(self.link_round_busy(w));
                }
                return out;
            }
        }
        self.link_round(w)
    }

    /// A post's round: only the sending step (`Link::post_round`), or the full round when the
    /// peer has left or the queue is in error.
    #[inline]
    pub(super) fn link_post_round(&self, w: &mut Wired) -> Outcome {
        let Wired { wire, link, .. } = w;
        if let Some(link) = link.as_deref_mut() {
            let out = match self.state.load(Ordering::Acquire) {
                QUEUE_STATE_ERR => None,
                _ => link.post_round(wire),
            };
            if let Some(out) = out {
                self.file_round_if_needed(w);
                return out;
            }
        }
        let out = self.link_round(w);
        self.file_round_if_needed(w);
        out
    }

    #[inline(never)]
    fn link_round_busy(&self, w: &mut Wired) -> Outcome {
        if crate::transport::pause::in_use() {
            self.pause_round_if_busy(w);
        }
        let Wired { wire, link, .. } = w;
        let out = match link.as_deref_mut() {
            Some(link) => self.run_round(wire, link),
            None => Outcome::default(),
        };
        self.credit_after_round(w);
        out
    }

    fn run_round(&self, w: &mut Wire, link: &mut Link) -> Outcome {
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return Outcome::default();
        }
        let at = Receiver {
            umqh: self.handle,
            fragments: !self.rt.pro_api,
            pool: &self.rt.pool,
        };
        match link.round(w, &at) {
            Ok(out) => out,
            Err(why) => {
                w.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR);
                link.forget_in_flight();
                self.set_error_at(why.log_level(), &why.to_string());
                Outcome {
                    tx_done: 1,
                    rx_done: 1,
                    ..Default::default()
                }
            }
        }
    }

    /// Wake-ups and counters after a link's round (both directions are ours).
    pub(super) fn after_round(&self, out: &Outcome) {
        if out.blocked {
            self.stats.rx_without_buffer.fetch_add(1, Ordering::Relaxed);
        }
        if crate::dfx::stats_on() {
            self.stats.send.fetch_add(out.sends, Ordering::Relaxed);
            self.stats.read.fetch_add(out.reads, Ordering::Relaxed);
            self.stats
                .receive
                .fetch_add(out.rx_done as u64, Ordering::Relaxed);
        }
        self.notify(out.tx_done > 0, out.rx_done > 0);
    }

    /// Runs the link's round once if the queue is bound through one (for receive posts,
    /// notify and the progress thread); returns whether it was.
    #[inline]
    pub(crate) fn service_link(&self) -> bool {
        if !self.over_link.load(Ordering::Relaxed) {
            return false;
        }
        self.service_link_now();
        true
    }

    #[inline(never)]
    pub(super) fn service_link_now(&self) -> Outcome {
        // The engine, as at the start of its round (`background_round`): an application that
        // took the lock since has the round owed, not waited for.
        let mut w = match waits_politely() {
            false => lock(&self.wire),
            true => match self.wire.try_lock() {
                Some(w) => w,
                None => {
                    self.owe_round();
                    return Outcome::default();
                }
            },
        };
        let out = self.link_round(&mut w);
        self.file_round_if_needed(&w);
        drop(w);
        self.after_round(&out);
        out
    }

    /// The progress thread's round for a queue bound through a link: the round, and with flow
    /// control the sends that wait for credit, so they go out even when the application does
    /// not call in (a base-API sender that enqueued and waits elsewhere).
    ///
    /// Busy, and nothing done but the round owed, when the thread would wait for a queue its
    /// application is in (`waits_politely`): the queue's deadline brings the thread back for
    /// the round (`owe_round`), whatever had it come (a ring, the node's ping, its sweep).
    /// Waiting, the thread lost the lock to a polling application look after look: a network
    /// ping-pong's engine yielded and napped for 50-100 ms at a time, twice a second, each
    /// wake taking a core from the application.
    pub(crate) fn background_round(&self) -> Serviced {
        if waits_politely() && self.wire.is_locked() {
            self.owe_round();
            return Serviced::Busy;
        }
        // An idle binding's link still has timers and frames: the polls of an idle queue skip
        // them (they are the latency path), this thread does not. (A busy round below serves
        // them itself.)
        if crate::transport::pause::in_use() {
            let mut w = lock(&self.wire);
            if w.link.as_deref().is_some_and(|l| l.idle(&w.wire)) {
                self.pause_round_if_busy(&mut w);
            }
        }
        // Flow control's step when WRs wait for credit, or an announcement is due that no
        // answer carried (`Answering`): over a link, and to a queue of this process alike.
        self.service_link();
        if self.rt.flow_control.enabled && Self::flow_wants_progress(&mut lock(&self.wire)) {
            self.flow_progress();
        }
        Serviced::Ran
    }

    /// Moves flow control along outside the send path: reads the peer's area, announces our
    /// receive buffers (standalone or through the area), and sends WRs waiting for credit.
    pub(crate) fn flow_progress(&self) {
        if let Some(pool) = &self.credit_pool {
            self.credit_after_rx_post(pool);
        }
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = guard.as_ref() else {
            return;
        };
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return;
        }
        let mut held = peer.lock(self);
        // Only take control credit when the update can go out now; it is in our area either
        // way.
        let can_send = held.can_send_update();
        let (wire, peer_area) = held.wire_and_peer_area();
        let (Some(f), Some(peer_area)) = (wire.flow.as_mut(), peer_area) else {
            return;
        };
        f.refresh(peer_area);
        f.publish(self.area());
        let update = f.standalone(self.area(), peer_area, can_send);
        let update_landed_here = update.is_some_and(|imm| held.send_update(imm));
        held.exchange_credit();
        let out = self.send_round(&mut held, Queue::link_round);
        self.note_starvation(&mut held.mine, out.credit_wait);
        let here = held.release();
        if let Some(peer) = here.filter(|_| update_landed_here) {
            peer.notify(false, true);
        }
        self.after_send(here, &out);
    }

    /// A send round with `held` locked: the loopback provider's delivery to a peer in this
    /// process, or `link_round` (a post's round or the full one) on our link.
    #[inline(always)]
    pub(super) fn send_round(
        &self,
        held: &mut Held<'_, Queue>,
        link_round: fn(&Queue, &mut Wired) -> Outcome,
    ) -> Outcome {
        match held.deliver(&self.rt.pool) {
            Some(out) => out,
            None => link_round(self, &mut held.mine),
        }
    }

    /// Wake-ups and counters after a send round: a delivery to `peer_here`, or a link's round
    /// (then both directions are ours).
    #[inline(always)]
    pub(super) fn after_send(&self, peer_here: Option<&Queue>, out: &Outcome) {
        match peer_here {
            Some(peer) => self.after_delivery(peer, out, true),
            None => self.after_round(out),
        }
    }

    /// Wake-ups and counters after a delivery from `sender` (self if `self_is_sender`) to the other.
    pub(super) fn after_delivery(&self, other: &Queue, out: &Outcome, self_is_sender: bool) {
        let (sender, receiver) = if self_is_sender {
            (self, other)
        } else {
            (other, self)
        };
        if out.blocked {
            sender.arm_rnr_deadline();
        }
        if out.blocked {
            receiver
                .stats
                .rx_without_buffer
                .fetch_add(1, Ordering::Relaxed);
        }
        if crate::dfx::stats_on() {
            Queue::count_delivery(sender, receiver, out);
        }
        sender.notify(out.tx_done > 0, false);
        receiver.notify(false, out.rx_done > 0);
    }

    /// The statistics' counts of a delivery from `sender` to `receiver`.
    #[cold]
    pub(super) fn count_delivery(sender: &Queue, receiver: &Queue, out: &Outcome) {
        sender.stats.send.fetch_add(out.sends, Ordering::Relaxed);
        sender.stats.read.fetch_add(out.reads, Ordering::Relaxed);
        receiver
            .stats
            .receive
            .fetch_add(out.rx_done as u64, Ordering::Relaxed);
    }

    /// Delivers the peer's WRs that were waiting for our receive buffers.
    pub(crate) fn kick_blocked_sender(&self) {
        if self.service_link() {
            return;
        }
        self.kick_waiting_sender();
    }

    /// `kick_blocked_sender` for a queue not bound through a link. Inlined into a receive
    /// post, where a sender is rarely waiting: the call and its return cost as much as the look.
    #[inline(always)]
    pub(crate) fn kick_waiting_sender(&self) {
        // A plain load first: the swap is a locked instruction.
        if self.rnr_waiting.load(Ordering::Acquire) {
            self.move_waiting_sender();
        }
    }

    #[inline(never)]
    fn move_waiting_sender(&self) {
        if !self.rnr_waiting.swap(false, Ordering::AcqRel) {
            return;
        }
        let Some(sender) = self.local_peer() else {
            self.rnr_waiting.store(true, Ordering::Release);
            return;
        };
        // With flow control the sender may be waiting for the credit our post just published:
        // its progress reads it and delivers.
        if self.rt.flow_control.enabled {
            sender.flow_progress();
            return;
        }
        let out = Binding::deliver_pair(&*sender, self, &self.rt.pool);
        self.after_delivery(&sender, &out, false);
    }

    /// Has the progress engine end the RNR wait of our send queue at its timeout, so the WR
    /// fails then (its completion, the error state, the event, interrupt waiters woken) whether
    /// or not the application polls, as a NIC's retry limit does. One deadline at a time.
    fn arm_rnr_deadline(&self) {
        if self.rnr_armed.swap(true, Ordering::AcqRel) {
            return;
        }
        let Some(since) = lock(&self.wire).rnr.since() else {
            self.rnr_armed.store(false, Ordering::Release);
            return;
        };
        let left = self.rt.rnr_timeout.saturating_sub(since.elapsed());
        let at = crate::os::clock_ns() + left.as_nanos() as u64;
        crate::transport::progress::deadline(self.handle, Due::Rnr, watched, at);
    }

    /// The engine's RNR deadline: fails the waiting WR if its wait has lasted the timeout, or
    /// sets the deadline again for a wait that began since.
    pub(super) fn rnr_deadline_passed(&self) {
        self.rnr_armed.store(false, Ordering::Release);
        let expired = self.expire_rnr(&mut lock(&self.wire));
        if expired {
            self.notify(true, false);
        } else {
            self.arm_rnr_deadline();
        }
    }

    /// Files a round of ours with the progress engine when the round just run left work that
    /// needs a process to run again (see `Link::needs_us`) and none is filed: so a sender that
    /// posts and then blocks elsewhere still sees its WRs go and complete, and a receiver whose
    /// application is away is called to take them in. One load while one is filed.
    #[inline(always)]
    pub(super) fn file_round_if_needed(&self, w: &Wired) {
        if !self.round_filed.load(Ordering::Relaxed)
            && w.link.as_deref().is_some_and(|l| l.needs_us(&w.wire))
        {
            let after = self.round_after().clamp(ROUND_AFTER, ROUND_ACTIVE_MOST);
            self.file_round(w.wire.sq.completed_seq(), after);
        }
    }

    /// Files the engine's round for a grant a receive post left to the application's answer
    /// (`Answering`): if no answer carried it by then, the round announces it.
    pub(super) fn file_grant_round(&self, w: &Wired) {
        if !self.round_filed.load(Ordering::Relaxed) {
            self.file_round(w.wire.sq.completed_seq(), ROUND_AFTER);
        }
    }

    /// How long after its filing the last round look was due.
    fn round_after(&self) -> Duration {
        Duration::from_micros(self.round_after_us.load(Ordering::Relaxed) as u64)
    }

    /// When to look next after a look that found the queue driven by someone else.
    fn next_while_active(&self) -> Duration {
        (self.round_after() * 2).clamp(ROUND_AFTER, ROUND_ACTIVE_MOST)
    }

    /// Whether the engine owes the queue a round (`owe_round`) it has not run yet.
    #[cfg(feature = "fuzzing")]
    pub(crate) fn round_owed(&self) -> bool {
        self.round_owed.load(Ordering::Acquire)
    }

    /// Whether the queue's peer can wake its progress thread (`Endpoints::rung_by_peer`).
    #[cfg(feature = "fuzzing")]
    pub(crate) fn rung_by_peer(&self) -> Option<bool> {
        self.endpoints.rung_by_peer()
    }

    /// Has the engine run a round soon, whether or not the queue moved meanwhile: one of its
    /// rounds left the queue to its application.
    fn owe_round(&self) {
        self.round_owed.store(true, Ordering::Release);
        let seen = self.round_seen.load(Ordering::Relaxed);
        self.file_round(seen, ROUND_AFTER);
    }

    #[cold]
    #[inline(never)]
    fn file_round(&self, completed: u64, after: Duration) {
        if self.round_filed.swap(true, Ordering::AcqRel) {
            return;
        }
        self.round_seen.store(completed, Ordering::Relaxed);
        self.round_after_us
            .store(after.as_micros() as u32, Ordering::Relaxed);
        let at = crate::os::clock_ns() + after.as_nanos() as u64;
        crate::transport::progress::deadline(self.handle, Due::Round, watched, at);
    }

    /// The engine's round: when the send queue has not moved since the last look (no one
    /// drives it: its application blocks elsewhere, or the peer's does), runs one, and if that
    /// moves nothing either, calls the peer's progress thread to our WRs; files the next while
    /// WRs remain.
    ///
    /// A queue whose lock is held is being driven right now (a call of its application's, or
    /// of another thread's, is in it): the engine looks again later instead of waiting for the
    /// lock. Waiting would tax every call of a busy queue, not just the look: a waiter that
    /// has waited a while is served first (`SpinMutex`), and between its looks it naps, so the
    /// application's next lock would spin until the engine woke and took it.
    pub(super) fn background_deadline_passed(&self) {
        self.round_filed.store(false, Ordering::Release);
        let seen = self.round_seen.load(Ordering::Relaxed);
        let Some(mut w) = self.wire.try_lock() else {
            self.file_round(seen, self.next_while_active());
            return;
        };
        let owed = self.round_owed.swap(false, Ordering::AcqRel);
        let stuck = owed || w.wire.sq.completed_seq() == seen;
        // A grant left to an answer that has not come (`Answering`), in a queue whose sends
        // moved since the round was filed.
        let announce = !stuck && self.rt.flow_control.enabled && Self::flow_wants_progress(&mut w);
        drop(w);
        if stuck && self.background_round() == Serviced::Busy {
            return; // its application took the lock since the look above: owed, filed again
        }
        if !stuck && announce {
            self.flow_progress();
        }
        // While nothing moves (a receiver away for long, no credit), the looks thin out, so
        // ten thousand stuck queues do not cost ten million rounds a second; while the
        // application moves the queue, they thin out too, less far.
        let last = self.round_after();
        let after = if stuck {
            (last * 2).min(ROUND_MOST)
        } else {
            self.next_while_active()
        };
        let Some(mut w) = self.wire.try_lock() else {
            self.file_round(seen, after);
            return;
        };
        let Wired { wire, link, .. } = &mut *w;
        let Some(link) = link.as_deref_mut() else {
            return;
        };
        if stuck && wire.sq.completed_seq() == seen && !wire.sq.all_completed() {
            link.call_peer(wire);
        }
        if link.needs_us(wire) {
            // A grant the peer waits for goes out and moves only as this process progresses
            // the provider (libfabric's tcp connects on a peer's first write): no thinning out.
            let owed = link.area_on_its_way() || link.owes_peer_credit(wire);
            let after = if owed { ROUND_AFTER } else { after };
            self.file_round(wire.sq.completed_seq(), after);
        }
    }

    /// The engine's release of idle shared-pool memory; filed again while a chunk waits for
    /// its time.
    pub(super) fn pool_release_deadline_passed(&self) {
        let Some(Some(lists)) = self.shared_pool.get() else {
            return;
        };
        self.rt.pool.release_idle(lists);
        if lists.idle_waiting() {
            super::file_pool_release(self.handle);
        }
    }

    /// Fails the oldest waiting WR after the RNR timeout, as RDMA's retry limit would.
    #[inline(always)]
    pub(super) fn expire_rnr(&self, w: &mut Wired) -> bool {
        // Every send poll asks; a WR is rarely waiting for a receive buffer.
        w.rnr.since().is_some() && self.expire_rnr_now(w)
    }

    #[cold]
    #[inline(never)]
    fn expire_rnr_now(&self, w: &mut Wired) -> bool {
        match w.rnr.since() {
            Some(t) if t.elapsed() >= self.rt.rnr_timeout => {
                w.fail_uncompleted(UMQ_BUF_RNR_RETRY_CNT_EXC_ERR);
                self.set_error("peer posted no receive buffer within the RNR timeout");
                true
            }
            _ => false,
        }
    }
}
