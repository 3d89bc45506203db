//! Binding a queue to its peer (in this process, or through a provider's link) and undoing it.

use super::*;
use std::time::Duration;

impl Queue {
    pub fn bind(&self, info: &[u8]) -> UmqResult<()> {
        const F: &str = "umq_bind";
        let remote = bind_info::parse(F, info)?;
        bind_info::check_compatible(F, &self.rt, &remote)?;
        let provider = bind_info::choose(F, &self.rt, &remote)?;
        if self.is_bound() {
            return Err(self.already_bound());
        }
        let peer = Binding::new(provider, || self.local_peer_for(&remote))?;
        // A peer in another process is reached through a link, made now.
        let mut link = if peer.peer_here().is_none() {
            Some(Box::new(self.connect(provider, &remote)?))
        } else {
            None
        };
        let watch = link.as_mut().map(|l| crate::transport::progress::Watch {
            peer_pid: l.peer_process(),
            peer_socket: l.take_peer_socket(),
            interrupt: self.irq.is_some(),
            call_bell: l.call_bell(),
        });
        {
            let mut slot = self.peer.write().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                return Err(self.already_bound());
            }
            // The binding's flow state first: a sender that ran on through an unbind must find
            // the new peer's credit, never spend what the old peer's left over on it.
            if self.rt.flow_control.enabled {
                self.start_flow_control(&remote);
            } else {
                self.state.store(QUEUE_STATE_READY, Ordering::Release);
            }
            self.peer_in_process
                .store(peer.peer_here().is_some(), Ordering::Release);
            let none_before = self.replace_here(&mut lock(&self.wire), peer.peer_here().cloned());
            debug_assert!(none_before.is_none());
            *slot = Some(peer);
            self.peer_umqh.store(remote.umqh, Ordering::Release);
        }
        provider.log_first_use();
        self.endpoints.bound_through(provider);
        // An inbox a binding now uses says where our shared pool is (the offered one could not).
        if let Some(arena) = lock(&self.wire).arena() {
            self.endpoints.publish_pool(arena);
        }
        self.endpoints.publish_access(self.rt.pool.access_table());
        {
            let mut w = lock(&self.wire);
            w.sq.restart_numbering();
            w.pause = link.as_ref().map(|_| self.pause_gate(provider, &remote));
            w.link = link;
        }
        self.set_over_link(watch.is_some());
        self.linked_on_line(watch.is_some());
        if let Some(what) = watch {
            crate::transport::progress::watch(self.handle, watched, what);
        }
        if !self.rt.pro_api {
            base::post_initial_rx(self)?;
        }
        self.flow_progress();
        self.kick_blocked_sender();
        if self.credit_pool.is_some() {
            self.credit_offer_initial();
        }
        Ok(())
    }

    fn already_bound(&self) -> i32 {
        crate::log_err!(
            "umq_bind",
            "queue {:#x} is already bound (umq_unbind first)",
            self.handle
        );
        -UMQ_ERR_EEXIST
    }

    fn local_peer_for(&self, remote: &bind_info::BindInfo) -> UmqResult<Arc<Queue>> {
        const F: &str = "umq_bind";
        let peer = table::get(remote.umqh).ok_or_else(|| {
            einval(
                F,
                format_args!("peer queue {:#x} no longer exists", remote.umqh),
            )
        })?;
        if peer.handle == self.handle {
            return Err(einval(
                F,
                format_args!("queue {:#x} cannot bind to itself", self.handle),
            ));
        }
        Ok(peer)
    }

    /// Binds through a link: our endpoint (the one our bind info offered) to the peer's.
    fn connect(&self, provider: Provider, remote: &bind_info::BindInfo) -> UmqResult<Link> {
        const F: &str = "umq_bind";
        let offer = self.offer_for_bind();
        if !offer.has(provider) {
            let why = self.endpoints.why_none(provider);
            return Err(einval(F, format_args!("queue {:#x}: {why}", self.handle)));
        }
        if remote.pid == std::process::id() && remote.umqh == self.handle {
            return Err(einval(
                F,
                format_args!("queue {:#x} cannot bind to itself", self.handle),
            ));
        }
        let addr = PeerAddress {
            pid: remote.pid,
            same_host: remote.boot_id == bind_info::boot_id(),
            inbox_fd: remote.inbox_fd,
            secret: remote.secret,
            fabric: &remote.fabric,
            our_area: self.area(),
        };
        self.endpoints
            .connect(provider, &addr)
            .map_err(|why| einval(F, format_args!("{why}")))
    }

    /// Fresh flow state for a new binding; buffers posted before bind count as posted now.
    fn start_flow_control(&self, remote: &bind_info::BindInfo) {
        let fc = &self.rt.flow_control;
        let p = Params::new(
            fc.initial_window,
            fc.notify_interval,
            self.cfg.rx_depth,
            remote.rx_depth,
        );
        let mut w = lock(&self.wire);
        // (Credit knobs come only from the July 2026 build's `umq_init`, the one build with a
        // `CreditBuild`.)
        w.flow = Some(
            match (fc.credit, &self.credit_pool, crate::flow::credit_build()) {
                (Some(knobs), Some(pool), Some(build)) => {
                    let p = crate::flow::credit::Params::new(
                        &knobs,
                        self.cfg.rx_depth,
                        remote.rx_depth,
                    );
                    let now = crate::flow::credit_clock_us();
                    self.credit_offer_settled.store(false, Ordering::Release);
                    let credit =
                        crate::flow::credit::Credit::new(p, pool.clone(), self.handle, now);
                    FlowState::Credit(Box::new(credit), build)
                }
                _ => {
                    let mut f = FlowState::new(p);
                    f.rx_posted(w.rq.posted_len() as u64);
                    f.publish(self.area());
                    f
                }
            },
        );
        w.clear_credit();
        w.stall.credit_back();
        self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
    }

    pub fn unbind(&self) -> UmqResult<()> {
        if !self.is_bound() {
            return Err(einval(
                "umq_unbind",
                format_args!("queue {:#x} is not bound", self.handle),
            ));
        }
        self.disconnect(true);
        if !self.rt.pro_api {
            self.release_all_buffers();
        }
        Ok(())
    }

    /// Flushes everything in flight in both directions and forgets the peer. The peer, if still
    /// bound to us, goes to the error state: its sends have nowhere to land. With `rebind`, a
    /// shared-memory inbox is made ready for a next binding (a queue being destroyed skips it).
    pub(super) fn disconnect(&self, rebind: bool) {
        // The peer here goes with the peer lock held, so that no post reaches the peer either
        // way once the binding is gone; the queue it names is dropped after our wire lock.
        let (peer, _here) = {
            let mut slot = self.peer.write().unwrap_or_else(|p| p.into_inner());
            (slot.take(), self.replace_here(&mut lock(&self.wire), None))
        };
        let Some(peer) = peer else {
            return;
        };
        self.peer_in_process.store(false, Ordering::Release);
        let Some(peer) = peer.peer_here() else {
            self.leave_link(rebind);
            return;
        };
        let peer_bound_to_us = peer.local_peer().is_some_and(|p| p.handle == self.handle);
        let flushed = Binding::unbind_here(self, peer, peer_bound_to_us);
        self.credit_unbind(&mut lock(&self.wire), flushed.rx);
        self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
        self.area().reset();
        self.notify(flushed.tx > 0, flushed.rx > 0);
        if peer_bound_to_us {
            // An orderly shutdown unbinds one side first: worth a notice, not an error line.
            peer.set_error_at(UMQ_LOG_LEVEL_NOTICE, "peer queue unbound");
            peer.notify(flushed.peer_tx > 0, false);
        }
    }

    /// `disconnect` for a binding through a link: the peer is told first, then everything of
    /// this binding is flushed, and our endpoint made ready for the next one.
    fn leave_link(&self, rebind: bool) {
        self.set_over_link(false);
        self.linked_on_line(false);
        let Some(mut link) = ({
            let mut w = lock(&self.wire);
            w.lost = None;
            w.link.take()
        }) else {
            return;
        };
        link.leave();
        if let Some(g) = lock(&self.wire).pause.take() {
            g.link.forget(self.handle);
        }
        crate::transport::progress::unwatch(self.handle);
        let (tx, rx) = {
            let mut w = lock(&self.wire);
            let flushed = (w.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR), w.rq.flush());
            self.credit_unbind(&mut w, flushed.1);
            flushed
        };
        if rebind && !link.ready_for_next() {
            crate::log_warn!(
                "umq_unbind",
                "queue {:#x}: endpoint cleared in place (a late write of the old peer could reach the next binding)",
                self.handle
            );
        }
        self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
        self.notify(tx > 0, rx > 0);
    }

    /// The peer process died: what it sent before is delivered first, as a NIC would have (its
    /// sends completed on its side), then the loss is reported (`report_loss`). Over shared
    /// memory that is at once: what the peer published is whole in our ring (entries count only
    /// once stamped). Over the network its last bytes may still be arriving, so the report waits
    /// for a grace without arrivals (`Due::LastWords`).
    pub(crate) fn peer_lost(&self, why: &str) {
        self.service_link();
        let grace = {
            let mut w = lock(&self.wire);
            let grace = w
                .link
                .as_deref()
                .map_or(Duration::ZERO, Link::last_words_grace);
            if !grace.is_zero() {
                w.lost = Some(why.to_owned());
            }
            grace
        };
        match grace.is_zero() {
            true => self.report_loss(why),
            false => self.await_last_words(grace),
        }
    }

    fn await_last_words(&self, grace: Duration) {
        let at = crate::os::clock_ns().saturating_add(grace.as_nanos() as u64);
        crate::transport::progress::deadline(self.handle, Due::LastWords, watched, at);
    }

    /// The grace after the peer's exit has passed: a round takes what arrived meanwhile; the
    /// loss is reported once a round finds nothing more (a round that found some waits again).
    pub(crate) fn last_words_deadline_passed(&self) {
        if lock(&self.wire).lost.is_none() {
            return; // unbound meanwhile
        }
        let out = self.service_link_now();
        let mut w = lock(&self.wire);
        if out.rx_done > 0 && self.state.load(Ordering::Acquire) != QUEUE_STATE_ERR {
            let grace = w
                .link
                .as_deref()
                .map_or(Duration::ZERO, Link::last_words_grace);
            drop(w);
            return self.await_last_words(grace);
        }
        let Some(why) = w.lost.take() else {
            return;
        };
        drop(w);
        self.report_loss(&why);
    }

    /// The peer process is gone or left: error state, every send in flight flushed, waiters
    /// woken.
    fn report_loss(&self, why: &str) {
        let mut w = lock(&self.wire);
        w.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR);
        // Credit the dead peer held goes back to a shared pool's other members now, not at
        // the application's unbind.
        self.credit_unbind(&mut w, 0);
        // Under the wire lock, which a post holds while it checks the state: a send posted
        // once the flush above ran is refused, where it would wait forever after it.
        let entered = self.enter_error();
        drop(w);
        if entered {
            self.log_error(UMQ_LOG_LEVEL_ERR, why);
        }
        self.notify(true, true);
    }

    /// Frees every buffer the queue holds (posted or completed), returning how many.
    pub(super) fn release_all_buffers(&self) -> usize {
        let mut w = lock(&self.wire);
        w.rq.flush();
        w.fail_uncompleted(UMQ_BUF_WR_FLUSH_ERR);
        let w = &mut w.wire;
        let sent = w.sq.drain().map(|h| (h, crate::buf::wr_bufs(h).count()));
        let received = w.rq.drain_completions();
        self.free_chains(sent.chain(received))
    }

    /// Returns buffer chains (head, how many buffers) to the pool; returns how many buffers.
    pub(super) fn free_chains(
        &self,
        chains: impl IntoIterator<Item = (*mut umq_buf_t, usize)>,
    ) -> usize {
        let mut n = 0;
        for (head, nbufs) in chains {
            for b in crate::buf::iter(head).take(nbufs).collect::<Vec<_>>() {
                n += 1;
                let _ = self.rt.pool.free_one(b);
            }
        }
        n
    }
}
