//! The July 2026 revision's flow control at the queue layer: credit requested from the
//! receiver (`flow::credit`). The machine lives in the queue's flow state while it is bound;
//! the pool it grants from is the queue's receive queue's (a shared receive queue's members
//! share the main queue's), recharged by every receive post, bound or not. This file carries
//! the machine's messages (both ways under the two locks with a peer in this process, as
//! control frames through a link), answers requests parked on an empty pool when buffers come
//! back, fails posts whose request went unanswered too long, hands the application one
//! `UMQ_BUF_FLOW_CONTROL_UPDATE` buffer per answer that brought credit, and returns credit the
//! queue held unused at its idle deadline.

use super::*;
use crate::flow::credit::Pool;

/// `UMQ_ERR_ETIMEOUT` of the July 2026 revision (the only one that runs this protocol).
const REQUEST_TIMED_OUT: i32 = -110;

impl Queue {
    /// A receive post took `accepted` buffers: they are credit now, and requests parked on an
    /// empty pool are answered in the order they came.
    #[cold]
    #[inline(never)]
    pub(crate) fn credit_after_rx_post(&self, pool: &Pool) {
        if pool.has_parked() {
            serve_parked(pool);
        }
        self.credit_offer_initial();
    }

    /// `poll` for a pro-API queue with the credit requests and a receive queue of its own: the
    /// usual poll, then one update buffer per answer not yet shown, where there is room.
    #[cold]
    #[inline(never)]
    pub(super) fn poll_with_credit_updates(
        &self,
        dir: umq_io_direction_t,
        out: &mut [*mut umq_buf_t],
    ) -> usize {
        let several = out.len() > 1 && dir != UMQ_IO_TX;
        let (mut n, progress) = self.poll_locked(dir, out, several, false, |_, room| room);
        if progress {
            self.flow_progress();
        }
        if dir != UMQ_IO_TX && n < out.len() {
            n += self.credit_updates_into(&mut out[n..]);
        }
        n
    }

    /// Offers a bound peer of a receive queue of our own its first credit unasked, once the
    /// pool has some (`Credit::offer_initial`).
    /// Once the offer is settled for the binding, the queue's flag skips the lock.
    pub(super) fn credit_offer_initial(&self) {
        if self.share.is_some() || self.credit_offer_settled.load(Ordering::Acquire) {
            return;
        }
        let offered = {
            let mut w = lock(&self.wire);
            w.flow.as_mut().and_then(|f| f.credit()).is_some_and(|c| {
                c.offer_initial();
                if c.offer_settled() {
                    self.credit_offer_settled.store(true, Ordering::Release);
                }
                c.has_outgoing()
            })
        };
        if offered {
            self.credit_flush();
        }
    }

    /// Refuses a post while the queue's credit request has gone unanswered past its timeout
    /// (`fc_req_timeout_ms`): the peer is stuck or gone, and waiting longer would hold the
    /// application for ever.
    #[cold]
    #[inline(never)]
    pub(super) fn credit_check_post(&self) -> UmqResult<()> {
        // An answer may be waiting on the link: take it in before judging.
        if self.request_timed_out() && (!self.service_link() || self.request_timed_out()) {
            crate::log_err!(
                "umq_post",
                "queue {:#x}: the peer has not answered a credit request within fc_req_timeout_ms",
                self.handle
            );
            return Err(REQUEST_TIMED_OUT);
        }
        Ok(())
    }

    /// After a round with the queue's wire locked (`w`): its credit messages go out through its
    /// link (a peer in this process takes them when the binding's two locks are held:
    /// `Binding::send`), and the deadline for returning unused credit is filed. One test for
    /// queues without the protocol.
    #[inline(always)]
    pub(super) fn credit_after_round(&self, w: &mut Wired) {
        if matches!(w.flow, Some(FlowState::Credit(..))) {
            self.credit_after_round_cold(w);
        }
    }

    #[cold]
    #[inline(never)]
    fn credit_after_round_cold(&self, w: &mut Wired) {
        w.send_credit();
        self.file_credit_return(w);
        self.credit_updates_arrived(w);
    }

    /// An answer's update is a receive completion to an interrupt-mode application waiting for
    /// credit (the reference's perftest waits so after EAGAIN). A shared receive queue's
    /// members' (the main queue's own too) show through the main queue's receive polls.
    fn credit_updates_arrived(&self, w: &mut Wire) {
        if !Self::credit_updates_waiting(w) {
            return;
        }
        if let Some(s) = &self.share {
            s.line.note_updates(self.handle);
        }
        self.notify(false, true);
    }

    /// The main queue's receive poll: update buffers of the members noted with some, each
    /// tagged with its member's context, as far as `out` has room; returns how many.
    #[cold]
    #[inline(never)]
    pub(super) fn members_credit_updates_into(
        &self,
        line: &crate::transport::shared_rq::SharedRq,
        out: &mut [*mut umq_buf_t],
    ) -> usize {
        let mut n = 0;
        for h in line.take_noted() {
            match table::get(h) {
                Some(q) if n < out.len() => n += q.credit_updates_into(&mut out[n..]),
                Some(_) => line.note_updates(h),
                None => {}
            }
        }
        n
    }

    fn request_timed_out(&self) -> bool {
        let mut w = lock(&self.wire);
        w.flow
            .as_mut()
            .and_then(|f| f.credit())
            .is_some_and(|c| c.request_timed_out(crate::flow::credit_clock_us()))
    }

    /// Carries the queue's waiting credit messages to its peer (and, with a peer in this
    /// process, the answers back), outside any lock.
    pub(crate) fn credit_flush(&self) {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = guard.as_ref() else {
            return;
        };
        let mut held = peer.lock(self);
        let moved = held.exchange_credit();
        self.file_credit_return(&mut held.mine);
        // A peer here that took credit from us (an offer, a grant) gives it back when idle too.
        if let Some((theirs, peer)) = held.theirs() {
            peer.file_credit_return(theirs);
            peer.credit_updates_arrived(theirs);
        }
        if let Some(peer) = held.release().filter(|_| moved) {
            peer.notify(false, true);
        }
    }

    /// A parked request of this queue's peer answered from the pool: the grant goes out.
    fn deliver_parked(&self, count: u16, seq: u8, ratio: u8) -> bool {
        let mut w = lock(&self.wire);
        let Some(c) = w.flow.as_mut().and_then(|f| f.credit()) else {
            return false;
        };
        c.grant(count, seq, ratio);
        drop(w);
        self.credit_flush();
        true
    }

    /// Files the deadline at which credit the queue holds unused goes back (`w` its locked
    /// wire), if it holds any and none is filed.
    pub(super) fn file_credit_return(&self, w: &mut Wired) {
        let Some(at) = w
            .flow
            .as_mut()
            .and_then(|f| f.credit())
            .and_then(|c| c.return_due_at())
        else {
            return;
        };
        // A plain load first: a round of a queue holding credit finds it filed all but once.
        if !self.credit_return_filed.load(Ordering::Relaxed)
            && !self.credit_return_filed.swap(true, Ordering::AcqRel)
        {
            crate::transport::progress::deadline(
                self.handle,
                Due::CreditReturn,
                watched,
                at.saturating_mul(1000),
            );
        }
    }

    /// The progress engine's credit-return deadline: returns what the queue has held unused
    /// since its last send, or files the deadline again for the new last send.
    pub(crate) fn credit_return_deadline_passed(&self) {
        self.credit_return_filed.store(false, Ordering::Release);
        let mut w = lock(&self.wire);
        let Some(c) = w.flow.as_mut().and_then(|f| f.credit()) else {
            return;
        };
        let returned = c.return_if_idle(crate::flow::credit_clock_us());
        if !returned {
            self.file_credit_return(&mut w);
            return;
        }
        drop(w);
        self.credit_flush();
        if let Some(fd) = self.fc_event_fd.get() {
            fd.signal();
        }
    }

    /// `umq_interrupt_fd_get` with the July 2026 fd types beside `UMQ_FD_IO`, as the reference
    /// hands them out:
    /// - `UMQ_FD_EVENT`, a queue on a shared receive queue with flow control: readable after
    ///   idle credit went back. The reference's application returns that credit on its next
    ///   send poll; here the progress engine has returned it already, so the fd only tells.
    /// - `UMQ_FD_RETRY`, a queue with a receive queue of its own and flow control: the
    ///   reference's control messages that found no room wait there for a retry. Ours travel
    ///   on the link's control channel and never wait, so it never becomes readable.
    ///
    /// Other queues have neither: `UMQ_INVALID_FD`, as in the reference.
    pub fn flow_control_fd(&self, fd_type: u32) -> UmqResult<i32> {
        use crate::abi::v2026::types::{UMQ_FD_EVENT, UMQ_FD_RETRY};
        const F: &str = "umq_interrupt_fd_get";
        let shared = self.share.as_ref().is_some_and(|s| s.main.is_some());
        let has = self.credit_pool.is_some()
            && match fd_type {
                UMQ_FD_EVENT => shared,
                UMQ_FD_RETRY => !shared,
                _ => {
                    return Err(einval(F, format_args!("fd_type {fd_type} out of range")));
                }
            };
        if !has {
            return Err(einval(
                F,
                format_args!(
                    "queue {:#x} has no fd of type {fd_type} (flow control's event fd is a shared receive queue member's, its retry fd another queue's)",
                    self.handle
                ),
            ));
        }
        if let Some(fd) = self.fc_event_fd.get() {
            return Ok(fd.fd());
        }
        let made = crate::event::EventFd::new(false)?;
        Ok(self.fc_event_fd.get_or_init(|| made).fd())
    }

    /// Puts one `UMQ_BUF_FLOW_CONTROL_UPDATE` buffer per credit answer not yet shown into
    /// `out` (the July revision names the status `UMQ_FAKE_BUF_FC_UPDATE`), as far as buffers
    /// can be had; returns how many. The application frees them.
    #[cold]
    #[inline(never)]
    pub(super) fn credit_updates_into(&self, out: &mut [*mut umq_buf_t]) -> usize {
        let waiting = {
            let mut w = lock(&self.wire);
            match w.flow.as_mut().and_then(|f| f.credit()) {
                Some(c) => c.take_updates() as usize,
                None => 0,
            }
        };
        let n = waiting.min(out.len());
        let mut made = 0;
        for slot in &mut out[..n] {
            let Ok(b) = self.rt.pool.alloc(0, 1, self.rt.pool.default_headroom, 0) else {
                break;
            };
            unsafe {
                (*b).set_status_and_direction(UMQ_BUF_FLOW_CONTROL_UPDATE, UMQ_IO_RX);
                (*b).total_data_size = 0;
                (*b).data_size = 0;
                let pro = (*b).pro_mut();
                pro.opcode = crate::abi::pro_types::UMQ_OPC_SEND;
                pro.rsvd1[0] = self.cfg.extras.umq_ctx;
            }
            *slot = b;
            made += 1;
        }
        made
    }

    /// The pool the queue grants from and the duplicates its machine dropped (requests,
    /// answers), with the July 2026 flow control; None otherwise.
    pub fn credit_stats(&self) -> Option<(crate::flow::credit::PoolStats, u64, u64)> {
        let pool = self.credit_pool.as_ref()?.stats();
        let mut w = lock(&self.wire);
        let (dup_req, dup_rsp) = w
            .flow
            .as_mut()
            .and_then(|f| f.credit())
            .map_or((0, 0), |c| {
                (c.packets.duplicate_req, c.packets.duplicate_rsp)
            });
        Some((pool, dup_req, dup_rsp))
    }

    /// Whether credit answers wait to be shown to the application (`w` the locked wire).
    #[inline]
    pub(super) fn credit_updates_waiting(w: &mut Wire) -> bool {
        w.flow
            .as_mut()
            .and_then(|f| f.credit())
            .is_some_and(|c| c.updates_waiting())
    }

    /// The binding ends: credit granted to the peer and unused goes back to the pool, and so do
    /// the posted buffers the unbind flushes (`flushed_rx` of them).
    pub(super) fn credit_unbind(&self, w: &mut Wire, flushed_rx: usize) {
        if let Some(c) = w.flow.as_mut().and_then(|f| f.credit()) {
            c.release_granted();
        }
        if let Some(pool) = &self.credit_pool {
            pool.drain(flushed_rx as u64);
        }
    }
}

/// Answers the requests parked on `pool` that it has credit for now, each through its queue.
fn serve_parked(pool: &Pool) {
    for g in pool.serve_parked() {
        let delivered =
            table::get(g.umqh).is_some_and(|q| q.deliver_parked(g.count, g.seq, g.ratio));
        if !delivered {
            pool.give_back(g.count as u64);
        }
    }
}
