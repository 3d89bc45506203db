//! The send side: validating a chain of WRs, admitting them through flow control and the
//! send queue, and handing them to the transport.

use super::wr_mask::WrMask;
use super::*;
use crate::transport::target::LoneSend;

impl Queue {
    fn require_pro(&self, func: &str) -> UmqResult<()> {
        if self.pro_api {
            Ok(())
        } else {
            Err(eperm(
                func,
                format_args!(
                    "queue {:#x}: pro API call but umq_init did not set UMQ_FEATURE_API_PRO",
                    self.handle
                ),
            ))
        }
    }

    #[inline(always)]
    pub fn post(
        &self,
        head: *mut umq_buf_t,
        dir: umq_io_direction_t,
        bad: &mut *mut umq_buf_t,
    ) -> UmqResult<()> {
        self.require_pro("umq_post").inspect_err(|_| *bad = head)?;
        match dir {
            // A ping-pong's post, one SEND in one buffer, in one pass before any parse: to a
            // peer here in the caller's frame, through a link in a call of its own.
            UMQ_IO_TX if self.sends_lone_at_once(head) => Ok(()),
            UMQ_IO_TX => self.post_tx(head, bad),
            UMQ_IO_RX => self.post_rx(head, bad),
            _ => {
                *bad = head;
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_IO_DIRECTION_INVALID);
                Err(einval(
                    "umq_post",
                    format_args!("io_direction {dir} must be UMQ_IO_TX or UMQ_IO_RX"),
                ))
            }
        }
    }

    pub(crate) fn post_tx(&self, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        self.post_tx_batch(head, bad, false)
    }

    /// `umq_enqueue`'s post: every WR of the list, or none (`base::enqueue` says why).
    pub(crate) fn post_tx_whole(
        &self,
        head: *mut umq_buf_t,
        bad: &mut *mut umq_buf_t,
    ) -> UmqResult<()> {
        if self.sends_lone_at_once(head) {
            return Ok(());
        }
        self.post_tx_batch(head, bad, true)
    }

    #[inline(always)]
    fn post_tx_batch(
        &self,
        head: *mut umq_buf_t,
        bad: &mut *mut umq_buf_t,
        whole: bool,
    ) -> UmqResult<()> {
        let mut batch = TxBatch::new(whole);
        parse_tx(head, &mut batch).inspect_err(|_| *bad = head)?;
        if self.is_logic() {
            return self.post_tx_logic(&batch, bad);
        }
        self.post_parsed(&batch, bad).1
    }

    /// A logic queue's post, on the transport resource it borrows (`pooled`).
    #[cold]
    #[inline(never)]
    fn post_tx_logic(&self, batch: &TxBatch, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        self.post_pooled(
            batch.n,
            bad,
            |may, bad| self.post_parsed(&batch.first(may), bad),
            |i| batch.head(i),
        )
    }

    /// Posts parsed WRs; returns how many were accepted, and the post's result.
    #[inline(always)]
    fn post_parsed(&self, batch: &TxBatch, bad: &mut *mut umq_buf_t) -> (usize, UmqResult<()>) {
        let head = batch.head(0);
        // The flag is looked at here, not in `post_tx_link`: a loopback post would pay that
        // call's entry and exit (about 20 instructions) to learn it has no link.
        let linked = match self.over_link.load(Ordering::Relaxed) {
            true => self.post_tx_link(batch),
            false => None,
        };
        let (accepted, window_limited) = match linked {
            Some(admitted) => admitted,
            None => match self.post_tx_to_peer(batch) {
                Ok(admitted) => admitted,
                Err(e) => {
                    *bad = head;
                    return (0, Err(e));
                }
            },
        };
        if batch.held.get() {
            self.pace_wake();
        }
        if accepted < batch.n {
            *bad = batch.head(accepted);
            if window_limited
                && self.credit_pool.is_some()
                && let Err(e) = self.credit_check_post()
            {
                return (accepted, Err(e));
            }
            crate::log_at!(
                UMQ_LOG_LEVEL_DEBUG,
                "umq_post",
                "queue {:#x}: {} after {accepted} of {} WRs",
                self.handle,
                if window_limited {
                    "no flow-control credit"
                } else {
                    "send queue full"
                },
                batch.n
            );
            return (accepted, Err(-UMQ_ERR_EAGAIN));
        }
        (accepted, Ok(()))
    }

    /// A post through a link, which lives under our wire lock: no peer lock. None when the
    /// queue is not bound that way after all (it left the link since the caller looked) or is
    /// in the error state (the general path then says which).
    fn post_tx_link(&self, batch: &TxBatch) -> Option<(usize, bool)> {
        let mut mine = lock(&self.wire);
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        let Wired { wire, link, .. } = &mut *mine;
        let link = link.as_deref_mut()?;
        if batch.n == 1
            && let Some(out) = self.send_one_now(wire, link, batch.head(0))
        {
            self.done_in_one_pass(mine, &out);
            return Some((1, false));
        }
        let mut out = Outcome::default();
        let ran = self.run_one_sided_now(wire, link, batch, &mut out);
        if ran == batch.n {
            self.done_in_one_pass(mine, &out);
            return Some((ran, false));
        }
        if ran == 0 && link.grants_travel() && self.no_credit_for(wire, link.peer_area(), batch) {
            return Some(self.post_after_round(mine, batch, out));
        }
        let (accepted, limited) = match ran {
            0 => self.queue_tx(wire, link.peer_area(), batch),
            _ => self.queue_tx(wire, link.peer_area(), &batch.after(ran)),
        };
        Some(self.transmit_admitted(mine, (ran + accepted, limited), out))
    }

    /// Whether flow control would refuse all of `batch` for want of credit, the peer's area
    /// looked at first (as admission does); never for a post that queues what lacks credit.
    #[inline]
    fn no_credit_for(&self, w: &mut Wire, peer_area: &Area, batch: &TxBatch) -> bool {
        if batch.whole
            || batch.credit_wrs_before(1) == 0
            || self.queued_mode.load(Ordering::Relaxed)
        {
            return false;
        }
        w.flow.as_mut().is_some_and(|f| {
            if f.window() == 0 {
                f.refresh(peer_area);
            }
            f.window() == 0
        })
    }

    /// A post through a link whose peer's grants travel (the network) that has no credit: the
    /// grant may have arrived and wait for a round to take it in, so the round that follows a
    /// post runs before its admission here. (After it, the post was refused with the credit at
    /// hand, and only the caller's next try went.) What it admits goes in a second round; a
    /// post still refused costs what it did.
    #[cold]
    #[inline(never)]
    fn post_after_round(
        &self,
        mut mine: SpinGuard<'_, Wired>,
        batch: &TxBatch,
        before: Outcome,
    ) -> (usize, bool) {
        let mut out = before;
        out.absorb(self.link_post_round(&mut mine));
        let admitted = match &mut *mine {
            Wired {
                wire,
                link: Some(link),
                ..
            } if self.state.load(Ordering::Acquire) != QUEUE_STATE_ERR => {
                self.queue_tx(wire, link.peer_area(), batch)
            }
            _ => (0, false),
        };
        match admitted.0 {
            0 => self.end_post(mine, admitted, out),
            _ => self.transmit_admitted(mine, admitted, out),
        }
    }

    /// After a post that went whole in one pass (nothing left waiting): no stall, credit's
    /// step, the wire lock released, then wake-ups and counters.
    #[inline(always)]
    fn done_in_one_pass(&self, mut mine: SpinGuard<'_, Wired>, out: &Outcome) {
        if out.left_for_round {
            self.file_round_if_needed(&mine);
        }
        self.note_starvation(&mut mine, false);
        self.credit_after_round(&mut mine);
        drop(mine);
        self.after_round(out);
    }

    /// The WRITEs and READs at the front of a batch of several that the provider carries out
    /// here and now (`Link::run_one_sided`), each to its completion, when nothing waits for
    /// credit and no pacer holds the queue's WRs (a post of one goes by `send_one_now`); how
    /// many ran.
    #[inline]
    fn run_one_sided_now(
        &self,
        w: &mut Wire,
        link: &mut Link,
        batch: &TxBatch,
        out: &mut Outcome,
    ) -> usize {
        if batch.n < 2 || !batch.front_is_one_sided() || !w.waits_hold_credit() || w.is_paced() {
            return 0;
        }
        link.run_one_sided(w, batch.heads(), self.cfg.tx_depth as usize, out)
    }

    /// The usual post, one SEND in one buffer (`LoneSend`), in one pass before the general
    /// post parses it (`umq_post`, `umq_enqueue`): through a link (shared memory, the network)
    /// in a call of its own (`send_one_linked`), to a peer here in the caller's frame
    /// (`send_one_here`). False, with nothing changed, where the general path decides: a queue
    /// with neither (no peer here kept), a logic queue, whose WRs go through the resource it
    /// borrows, or a WR that cannot go so. The flags are read before the WR and any lock. The
    /// batch's parse and the general post's frame around it had been about a tenth of an shm
    /// send; the general post tries a link's one pass again for any lone WR, and posts its own
    /// lone WR to a peer here through the peer lock (`send_one_to_peer`).
    #[inline(always)]
    fn sends_lone_at_once(&self, wr: *mut umq_buf_t) -> bool {
        let linked = self.over_link.load(Ordering::Relaxed);
        if (linked || self.may_have_here())
            && let Some(lone) = LoneSend::of(wr)
            && !self.is_logic()
        {
            return match linked {
                true => self.send_one_linked(wr),
                false => self.send_one_here(lone),
            };
        }
        false
    }

    /// `sends_lone_at_once`'s pass through a link, under our wire lock. A call of its own: the general
    /// post's link path inlined into `umq_post` had made the shm send dearer, not cheaper.
    #[inline(never)]
    fn send_one_linked(&self, wr: *mut umq_buf_t) -> bool {
        let mut mine = lock(&self.wire);
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return false;
        }
        let Wired { wire, link, .. } = &mut *mine;
        let Some(out) = link
            .as_deref_mut()
            .and_then(|link| self.send_one_now(wire, link, wr))
        else {
            return false;
        };
        self.done_in_one_pass(mine, &out);
        true
    }

    /// The usual post through a link in one pass: a single WR the provider can send at once
    /// (`Link::send_one_if`) that has credit. None, with nothing changed, when it cannot go
    /// this way.
    fn send_one_now(&self, w: &mut Wire, link: &mut Link, wr: *mut umq_buf_t) -> Option<Outcome> {
        if !self.may_send_one(w) {
            return None;
        }
        link.send_one_if(
            w,
            wr,
            #[inline(always)]
            |w, peer_area| self.admit_one(w, peer_area, wr),
        )
    }

    /// The usual post to a peer in this process: a single WR that lands whole in the peer's
    /// receive buffer now, under our wire lock and the peer's, the peer found beside our wire
    /// (`here_while_locked`) rather than through the peer lock. False, with nothing changed,
    /// where the general path decides: no peer here kept (none, or an end with interrupts,
    /// whose wake-ups would run under our lock: `replace_here`), its wire busy, the error
    /// state, or a WR that cannot go so (`Binding::send_one_beside`).
    #[inline(always)]
    fn send_one_here(&self, lone: LoneSend) -> bool {
        let mut mine = lock(&self.wire);
        // SAFETY: `peer` is used only while `mine` is held: it is dropped at the end.
        let Some(peer) = (unsafe { self.here_while_locked(&mine) }) else {
            return false;
        };
        if !self.may_send_one(&mine) {
            return false;
        }
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return false;
        }
        let Some(out) = Binding::send_one_beside(
            &mut mine,
            peer,
            lone,
            #[inline(always)]
            |w, peer_area| self.admit_one(w, peer_area, lone.wr()),
        ) else {
            return false;
        };
        self.note_starvation(&mut mine, false);
        self.credit_after_round(&mut mine);
        // Of `after_delivery`, only the counters: the message landed whole (no receiver-not-
        // ready deadline to arm, which takes our wire lock), and neither end has an interrupt.
        debug_assert!(!out.blocked && self.irq.is_none() && peer.irq.is_none());
        if crate::dfx::stats_on() {
            Queue::count_delivery(self, peer, &out);
        }
        drop(mine);
        true
    }

    /// `send_one_now` for a peer here (`Binding::send_one_if`): accepted WRs and whether the
    /// window limited them, as `send_to_peer` returns them.
    #[inline(always)]
    fn send_one_to_peer(&self, peer: &Binding<Queue>, wr: *mut umq_buf_t) -> Option<(usize, bool)> {
        let (out, here) = peer.send_one_if(
            self,
            wr,
            #[inline(always)]
            |w, peer_area| self.may_send_one(w) && self.admit_one(w, peer_area, wr),
            |mine| {
                self.note_starvation(mine, false);
                self.credit_after_round(mine);
            },
        )?;
        self.after_send(Some(here), &out);
        Some((1, false))
    }

    /// Whether a post's only WR may skip the send loop as far as the queue goes: no WR waits
    /// for credit, the send queue has room and no pacer holds the queue's WRs.
    #[inline(always)]
    fn may_send_one(&self, w: &Wire) -> bool {
        w.waits_hold_credit() && w.sq.len() < self.cfg.tx_depth as usize && !w.is_paced()
    }

    /// What `queue_tx` would do for the one WR of `send_one_now`, without its batch
    /// bookkeeping: take one credit (re-reading the peer's area when the window looks empty),
    /// piggyback a due announcement on a SEND, clear the library's bit of a user immediate,
    /// queue it. False, with nothing changed, when there is no credit.
    #[inline(always)]
    fn admit_one(&self, w: &mut Wire, peer_area: &Area, wr: *mut umq_buf_t) -> bool {
        if let Some(f) = w.flow.as_mut() {
            if f.window() == 0 {
                f.refresh(peer_area);
            }
            if !f.take_one_credit() {
                return false;
            }
            let pro = unsafe { (*wr).pro_mut() };
            if pro.opcode == UMQ_OPC_SEND_IMM {
                pro.imm_data = crate::flow::user_imm(pro.imm_data);
                // The immediate is the application's: a grant left to this answer goes aside.
                if w.answering.withheld() {
                    f.announce_in_area(self.area());
                }
            } else if make_carrier(f, wr).is_some() {
                f.commit(self.area());
                w.note_carrier();
            }
            w.answering.sent();
        }
        unsafe { (*wr).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
        w.sq.push(wr);
        true
    }

    /// A post through the binding (a peer in this process, or a link still being set up):
    /// accepted WRs and whether the window limited them.
    #[inline(always)]
    fn post_tx_to_peer(&self, batch: &TxBatch) -> UmqResult<(usize, bool)> {
        // Borrowed through the peer lock's read guard: no reference-count traffic on the send
        // path.
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = guard.as_ref() else {
            return Err(self.not_bound("umq_post"));
        };
        if self.state() == QUEUE_STATE_ERR {
            return Err(einval(
                "umq_post",
                format_args!("queue {:#x} is in the error state", self.handle),
            ));
        }
        if batch.front_is_one_sided() {
            return self.post_one_sided_to_peer(peer, batch);
        }
        if batch.n == 1
            && let Some(admitted) = self.send_one_to_peer(peer, batch.head(0))
        {
            return Ok(admitted);
        }
        self.send_to_peer(peer, batch)
    }

    /// `post_tx_to_peer` for a batch that begins with a WRITE or READ: those at its front that
    /// the binding carries out here and now (`Binding::run_one_sided`), then the rest as any
    /// post. (Out of line: the SEND path stays as it was.)
    #[cold]
    #[inline(never)]
    fn post_one_sided_to_peer(
        &self,
        peer: &Binding<Queue>,
        batch: &TxBatch,
    ) -> UmqResult<(usize, bool)> {
        let mut out = Outcome::default();
        let depth = self.cfg.tx_depth as usize;
        let ran = peer.run_one_sided(self, batch.heads(), depth, &self.rt.pool, &mut out);
        if ran > 0 {
            self.after_send(None, &out);
        }
        let (admitted, limited) = match ran {
            0 => self.send_to_peer(peer, batch)?,
            _ if ran == batch.n => (0, false),
            _ => self.send_to_peer(peer, &batch.after(ran))?,
        };
        Ok((ran + admitted, limited))
    }

    /// Admits `batch` into our send queue and sends it to `peer` in the binding's one pass.
    #[inline(always)]
    fn send_to_peer(&self, peer: &Binding<Queue>, batch: &TxBatch) -> UmqResult<(usize, bool)> {
        let (admitted, out, here) = peer
            .send(
                self,
                &self.rt.pool,
                |wire, peer_area| self.queue_tx(wire, peer_area, batch),
                |mine| self.link_post_round(mine),
                |mine, admitted: &(usize, bool), out| {
                    self.note_starvation(mine, admitted.1 || out.credit_wait);
                    self.credit_after_round(mine);
                },
            )
            .ok_or_else(|| self.not_bound("umq_post"))?;
        self.after_send(here, &out);
        Ok(admitted)
    }

    fn not_bound(&self, func: &str) -> i32 {
        einval(func, format_args!("queue {:#x} is not bound", self.handle))
    }

    /// Sends what `queue_tx` admitted through the link and reports a stall; returns `admitted`.
    /// `before`: what the post completed before it queued them.
    fn transmit_admitted(
        &self,
        mut mine: SpinGuard<'_, Wired>,
        admitted: (usize, bool),
        before: Outcome,
    ) -> (usize, bool) {
        let mut out = before;
        out.absorb(self.link_post_round(&mut mine));
        self.end_post(mine, admitted, out)
    }

    /// The end of a post through a link after its round: the stall report, credit's step, the
    /// wire lock released, then wake-ups and counters.
    #[inline(always)]
    fn end_post(
        &self,
        mut mine: SpinGuard<'_, Wired>,
        admitted: (usize, bool),
        out: Outcome,
    ) -> (usize, bool) {
        self.note_starvation(&mut mine, admitted.1 || out.credit_wait);
        self.credit_after_round(&mut mine);
        drop(mine);
        self.after_round(&out);
        admitted
    }

    /// Admits what flow control and the send queue allow of a batch into our send queue;
    /// returns how many WRs were accepted and whether the window was what limited them.
    fn queue_tx(&self, mine: &mut Wire, peer_area: &Area, batch: &TxBatch) -> (usize, bool) {
        let admit = match mine.flow.as_mut() {
            Some(f) => self.admit(f, peer_area, batch),
            None => Admission::everything(batch.n),
        };
        // The transport (our send queue) may still refuse WRs flow control let through.
        let room = self.cfg.tx_depth as usize - mine.sq.len() - mine.held();
        let mut accepted = admit.limit.min(room);
        if batch.whole && accepted < batch.n {
            accepted = 0;
        }
        let window_limited = admit.limit < batch.n && accepted == admit.limit;
        if let Some(f) = mine.flow.as_mut() {
            let carried = admit.piggyback.as_ref().is_some_and(|p| p.index < accepted);
            let credited = admit.settle(f, batch, accepted, self.area());
            let needy = batch.credit_wrs_before(accepted) as usize;
            if accepted > 0 {
                // A grant left to these WRs that none carried goes aside.
                if !carried && mine.answering.withheld() {
                    f.announce_in_area(self.area());
                }
                mine.answering.sent();
            }
            mine.note_admitted(needy, credited);
            if carried {
                mine.note_carrier();
            }
        }
        // The caller's list stays as it was: a WR ends where its head's total_data_size says.
        let heads = &batch.heads()[..accepted];
        if let Some(p) = mine.paced_mut() {
            for &head in heads {
                unsafe { (*head).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
                p.hold(head);
            }
            batch.held.set(accepted > 0);
            return (accepted, window_limited);
        }
        for &head in heads {
            unsafe { (*head).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
            mine.sq.push(head);
        }
        (accepted, window_limited)
    }

    /// Flow control's verdict on a batch: credit for as many credit-needing WRs as the window
    /// allows (re-reading the peer's area first if it looks short), and a piggybacked
    /// announcement on the first plain SEND among them.
    fn admit(&self, f: &mut FlowState, peer_area: &Area, batch: &TxBatch) -> Admission {
        let needs_credit = batch.needs_credit;
        let need = batch.credit_wrs as u64;
        if f.window() < need {
            f.refresh(peer_area);
        }
        let got = f.take_credit(need);
        // Credit goes to the first `got` WRs that need it; the batch stops at the next one.
        let credit_limit = if got == need {
            batch.n
        } else {
            needs_credit.after_lowest(got as u32)
        };
        let queued = batch.whole || self.queued_mode.load(Ordering::Relaxed);
        let limit = if credit_limit == batch.n || queued {
            batch.n
        } else {
            f.count_refused((batch.n - credit_limit) as u64);
            credit_limit
        };
        let piggyback = (0..credit_limit)
            .find(|&i| unsafe { (*batch.head(i)).pro().opcode } == UMQ_OPC_SEND)
            .and_then(|i| {
                let (count, saved_imm) = make_carrier(f, batch.head(i))?;
                Some(Piggyback {
                    index: i,
                    count,
                    saved_imm,
                })
            });
        Admission {
            limit,
            credit_limit,
            needs_credit,
            piggyback,
        }
    }

    /// Reports a queue that has had work waiting and no credit for longer than its stall
    /// timeout: once per stall, as a log line, a `UMQ_EVENT_QH_LIMIT` event and a counter.
    #[inline(always)]
    pub(super) fn note_starvation(&self, w: &mut Wire, starved: bool) {
        let no_credit = w.flow.as_mut().is_some_and(|f| f.window() == 0);
        if !no_credit {
            w.stall.credit_back();
        }
        if !(starved && no_credit) {
            return;
        }
        let received = w.flow.as_mut().map_or(0, |f| f.credit_received());
        let limit = std::time::Duration::from_millis(self.stall_timeout_ms.load(Ordering::Relaxed));
        let Some(waited) = w.stall.starving(received, limit, std::time::Instant::now()) else {
            return;
        };
        crate::log_warn!(
            "umq_flow_control",
            "queue {:#x} '{}' has had no credit for {} ms with sends pending: the peer is not returning receive buffers",
            self.handle,
            self.cfg.name,
            waited.as_millis()
        );
        self.rt
            .events
            .raise(UMQ_EVENT_QH_LIMIT, self.handle, self.cfg.trans_mode, 0);
    }
}

/// A validated batch of tx WRs: the first buffer of each and which of them need a flow-control
/// credit. Built in place on the poster's stack and
/// never zeroed: a one-WR post touches one entry, not the 1 KiB of a full batch.
struct TxBatch {
    /// The first buffer of each WR.
    wrs: [MaybeUninit<*mut umq_buf_t>; BATCH],
    n: usize,
    /// Bit i: WR i is a SEND, SEND_IMM or WRITE_IMM (consumes a receive buffer, needs credit).
    needs_credit: WrMask,
    /// How many bits of `needs_credit` are set, counted as they are set: the library is built
    /// for baseline x86-64, where `count_ones` is a dozen instructions instead of `popcnt`.
    credit_wrs: u32,
    /// Bit i: WR i carries a user immediate (SEND_IMM or WRITE_IMM).
    user_imm: WrMask,
    /// All of the batch or nothing (`umq_enqueue`); WRs without credit wait as in queued mode.
    whole: bool,
    /// WRs of the batch went to the pacer (the queue is rate limited): it is to be woken.
    held: std::cell::Cell<bool>,
}

impl TxBatch {
    fn new(whole: bool) -> TxBatch {
        TxBatch {
            whole,
            wrs: [const { MaybeUninit::uninit() }; BATCH],
            n: 0,
            needs_credit: WrMask::default(),
            credit_wrs: 0,
            user_imm: WrMask::default(),
            held: std::cell::Cell::new(false),
        }
    }

    fn push(&mut self, head: *mut umq_buf_t) {
        let opcode = unsafe { (*head).pro().opcode };
        if crate::transport::wire::needs_rx_buffer(opcode) {
            self.needs_credit.set(self.n);
            self.credit_wrs += 1;
        }
        if matches!(opcode, UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE_IMM) {
            self.user_imm.set(self.n);
        }
        self.wrs[self.n].write(head);
        self.n += 1;
    }

    /// Whether the batch begins with a WRITE or READ, which the provider may carry out in the
    /// post (not in an all-or-nothing batch, `umq_enqueue`'s).
    #[inline(always)]
    fn front_is_one_sided(&self) -> bool {
        let first = unsafe { (*self.head(0)).pro().opcode };
        !self.whole && matches!(first, UMQ_OPC_WRITE | UMQ_OPC_READ)
    }

    /// The batch of the first `k` WRs.
    fn first(&self, k: usize) -> TxBatch {
        self.of(&self.heads()[..k])
    }

    /// The batch of the WRs after the first `k`.
    fn after(&self, k: usize) -> TxBatch {
        self.of(&self.heads()[k..])
    }

    fn of(&self, heads: &[*mut umq_buf_t]) -> TxBatch {
        let mut b = TxBatch::new(self.whole);
        for &h in heads {
            b.push(h);
        }
        b
    }

    /// The parsed WRs' first buffers.
    fn heads(&self) -> &[*mut umq_buf_t] {
        // SAFETY: push initialised the first n entries.
        unsafe { &*(&self.wrs[..self.n] as *const [_] as *const [*mut umq_buf_t]) }
    }

    fn head(&self, i: usize) -> *mut umq_buf_t {
        self.heads()[i]
    }

    /// How many of the first `k` WRs need credit.
    fn credit_wrs_before(&self, k: usize) -> u64 {
        if k >= self.n {
            self.credit_wrs as u64
        } else {
            self.needs_credit.count_between(0, k)
        }
    }
}

fn check_wr(head: *mut umq_buf_t) -> Result<*mut umq_buf_t, i32> {
    let h = unsafe { &*head };
    // Most WRs are one buffer holding the whole message: that needs no walk.
    let one_buffer = h.data_size == h.total_data_size
        && h.data_size <= h.buf_size
        && (!h.buf_data.is_null() || h.buf_size == 0);
    let op = h.pro().opcode;
    if one_buffer && op != UMQ_OPC_READ && is_known_opcode(op) {
        return Ok(head);
    }
    check_wr_walk(head)
}

fn is_known_opcode(op: umq_opcode_t) -> bool {
    matches!(
        op,
        UMQ_OPC_WRITE
            | UMQ_OPC_WRITE_IMM
            | UMQ_OPC_READ
            | UMQ_OPC_SEND
            | UMQ_OPC_SEND_IMM
            | UMQ_OPC_NOP
    )
}

/// `check_wr` for everything but a one-buffer non-READ WR.
#[inline(never)]
fn check_wr_walk(head: *mut umq_buf_t) -> Result<*mut umq_buf_t, i32> {
    const F: &str = "umq_post";
    let h = unsafe { &*head };
    let pro = h.pro();
    let op = pro.opcode;
    if !is_known_opcode(op) {
        return Err(einval(
            F,
            format_args!("buffer {head:p}: unknown opcode {op:#x}"),
        ));
    }
    let Some((tail, nbufs)) = crate::buf::message_span(head, MAX_SGE) else {
        crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_SGE_NUM_INVALID);
        return Err(einval(
            F,
            format_args!(
                "buffer {head:p}: total_data_size {} is not the sum of data_size over at most {MAX_SGE} buffers",
                h.total_data_size
            ),
        ));
    };
    let mut room = 0u64;
    for b in crate::buf::iter(head).take(nbufs) {
        let b = unsafe { &*b };
        if b.data_size > b.buf_size && op != UMQ_OPC_READ {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_DATA_SIZE_INVALID);
            return Err(einval(
                F,
                format_args!(
                    "buffer {b:p}: data_size {} > buf_size {}",
                    b.data_size, b.buf_size
                ),
            ));
        }
        if b.buf_data.is_null() && b.buf_size > 0 {
            return Err(einval(F, format_args!("buffer {b:p}: buf_data is NULL")));
        }
        room += b.buf_size as u64;
    }
    if op == UMQ_OPC_READ && (pro.remote_sge.length as u64) > room {
        return Err(einval(
            F,
            format_args!(
                "READ of {} bytes into {} bytes of local buffers",
                pro.remote_sge.length, room
            ),
        ));
    }
    Ok(tail)
}

/// Splits a chain into WRs (each first buffer's `total_data_size` says where the WR ends).
/// More than `UMQ_BATCH_SIZE` WRs, or an invalid WR anywhere, refuses the whole call with nothing
/// posted, as the reference does: a program that frees or re-posts the list after
/// `-UMQ_ERR_EINVAL` must not find part of it in flight.
#[inline(always)]
fn parse_tx(head: *mut umq_buf_t, b: &mut TxBatch) -> UmqResult<()> {
    // The usual post of a ping-pong, one SEND in one buffer, needs no walk.
    if LoneSend::of(head).is_some() {
        b.push(head);
        return Ok(());
    }
    let mut cur = head;
    while !cur.is_null() {
        if b.n == BATCH {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID);
            return Err(einval(
                "umq_post",
                format_args!("more than UMQ_BATCH_SIZE ({BATCH}) WRs in one call"),
            ));
        }
        match check_wr(cur) {
            Ok(tail) => {
                b.push(cur);
                cur = unsafe { (*tail).qbuf_next };
            }
            Err(e) => return Err(invalid_wr(e)),
        }
    }
    Ok(())
}

/// Counts a refused WR (`check_wr` logged why) and passes its error on.
#[cold]
#[inline(never)]
fn invalid_wr(e: i32) -> i32 {
    crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_PARM_INVALID);
    e
}

/// Turns the plain SEND `head` into the carrier of a due window announcement (a SEND_IMM with
/// the library's immediate); returns the announcement's count and the immediate it replaced.
/// None, with nothing changed, when no announcement is due.
#[inline(always)]
fn make_carrier(f: &mut FlowState, head: *mut umq_buf_t) -> Option<(u64, u64)> {
    let (count, imm) = f.piggyback()?;
    let pro = unsafe { (*head).pro_mut() };
    let saved = pro.imm_data;
    pro.opcode = UMQ_OPC_SEND_IMM;
    pro.imm_data = imm;
    Some((count, saved))
}

struct Piggyback {
    index: usize,
    count: u64,
    saved_imm: u64,
}

/// What flow control admitted of a batch.
struct Admission {
    /// WRs flow control lets through (in queued mode: all of them).
    limit: usize,
    /// WRs before the first credit-needing WR that got no credit.
    credit_limit: usize,
    /// Bit i: WR i needs a credit (SEND, SEND_IMM, WRITE_IMM).
    needs_credit: WrMask,
    piggyback: Option<Piggyback>,
}

impl Admission {
    fn everything(n: usize) -> Self {
        Admission {
            limit: n,
            credit_limit: n,
            needs_credit: WrMask::default(),
            piggyback: None,
        }
    }

    /// Once the transport accepted `accepted` WRs: returns the credit of refused WRs, undoes a
    /// piggyback on a refused WR (its buffer untouched again) or publishes it, clears bit 0 of
    /// accepted user immediates, and returns how many accepted WRs hold credit.
    fn settle(self, f: &mut FlowState, batch: &TxBatch, accepted: usize, mine: &Area) -> usize {
        let credited_end = accepted.min(self.credit_limit);
        let refunded = self
            .needs_credit
            .count_between(credited_end, self.credit_limit);
        if refunded > 0 {
            f.return_credit(refunded);
        }
        match self.piggyback {
            Some(p) if p.index >= accepted => {
                f.undo(p.count);
                let pro = unsafe { (*batch.head(p.index)).pro_mut() };
                pro.opcode = UMQ_OPC_SEND;
                pro.imm_data = p.saved_imm;
            }
            Some(_) => f.commit(mine),
            None => {}
        }
        // Only the WRs parse_tx marked (before any piggyback turned a SEND into SEND_IMM, so
        // the carrier is never among them): a batch of plain SENDs costs nothing here.
        if batch.user_imm.is_empty() {
            return batch.credit_wrs_before(credited_end) as usize;
        }
        for i in batch.user_imm.ones_below(accepted) {
            let pro = unsafe { (*batch.head(i)).pro_mut() };
            pro.imm_data = crate::flow::user_imm(pro.imm_data);
        }
        batch.credit_wrs_before(credited_end) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(data: &mut [u8], data_size: u32, total: u32, op: umq_opcode_t) -> umq_buf_t {
        let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
        b.buf_data = data.as_mut_ptr() as *mut _;
        b.buf_size = data.len() as u32;
        b.data_size = data_size;
        b.total_data_size = total;
        b.pro_mut().opcode = op;
        b
    }

    /// The one-buffer shortcut of `check_wr` must agree with the full walk on every header.
    #[test]
    fn check_wr_shortcut_agrees_with_the_walk() {
        let mut data = [0u8; 64];
        let ops = [
            UMQ_OPC_WRITE,
            UMQ_OPC_WRITE_IMM,
            UMQ_OPC_READ,
            UMQ_OPC_SEND,
            UMQ_OPC_SEND_IMM,
            UMQ_OPC_NOP,
            0x7,
        ];
        for op in ops {
            for (ds, total) in [(0, 0), (10, 10), (64, 64), (65, 65), (10, 20), (20, 10)] {
                for null_data in [false, true] {
                    let mut b = buf(&mut data, ds, total, op);
                    if null_data {
                        b.buf_data = ptr::null_mut();
                    }
                    let p = &mut b as *mut umq_buf_t;
                    let fast = check_wr(p).ok();
                    let walk = check_wr_walk(p).ok();
                    assert_eq!(
                        fast, walk,
                        "op {op:#x} data_size {ds} total {total} null {null_data}"
                    );
                }
            }
        }
    }
}
