//! Queues on the process's transport pool (`transport::tp_pool`): main queues that share their
//! transport and the logic queues that borrow from it.
//!
//! - A **main queue** created with `UMQ_CREATE_FLAG_SHARE_TRANSPORT` makes the pool's
//!   resources (`umq_transport_pool_resource_create`) and polls a resource's send completions
//!   by its index (`UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX`); its send polls without an index return
//!   nothing, as in the reference. In interrupt mode each resource has a TX channel of its own.
//! - A **logic queue** (the flag with `UMQ_CREATE_FLAG_SHARE_RQ`, without the sub-queue flag)
//!   receives on the main queue's shared receive queue like a sub-queue, and sends through a
//!   resource it borrows at its first post and gives back once every WR it posted has been
//!   polled. No idle resource: the post fails with EMLINK. A borrowing spent: ENOBUFS, the WRs
//!   up to it posted. It has no interrupt channel of its own: its main queue watches the
//!   resource's.
//!
//! Each queue still has its own binding to its peer; what the pool governs is which queues may
//! send at once, how much each may send in one borrowing, and where their completions are seen.

use super::*;
use crate::event::Channel;
use crate::transport::tp_pool::TransportPool;
use std::sync::Mutex;

const NONE_HELD: u32 = u32::MAX;

/// A queue's part in the transport pool.
pub(super) enum TpRole {
    None,
    Main,
    Logic(Borrower),
}

pub(super) struct Borrower {
    /// Taken by a post from borrowing to counting what went, and by a poll that gives the
    /// resource back: so a post never finds the resource given back under it.
    turn: Mutex<()>,
    /// The resource held (`NONE_HELD`: none); written under `turn`. Shared with the queue's
    /// send channel, which wakes the resource's (`forward_sends`).
    held: Arc<AtomicU32>,
}

impl TpRole {
    /// For a logic queue, what its send channel runs at each send completion: the held
    /// resource's channel fires if the main queue armed it.
    pub(super) fn forward_sends(&self, rt: &Arc<Runtime>) -> Option<crate::event::Forward> {
        let TpRole::Logic(b) = self else { return None };
        let (held, rt) = (b.held.clone(), rt.clone());
        Some(Box::new(move || {
            let idx = held.load(Ordering::Acquire);
            if let Some(ch) = rt.transport_pool_made().and_then(|p| p.channel(idx).ok()) {
                ch.fire_if_armed();
            }
        }))
    }
}

/// The part a new queue takes, checked as the reference checks it: a main queue that shares
/// its transport sets (or must match) the pool's send depth and buffer size; a queue on a
/// shared receive queue shares the transport exactly when its main queue does.
pub(super) fn role_for_create(
    rt: &Runtime,
    cfg: &QueueConfig,
    share: Option<&share::Share>,
) -> UmqResult<TpRole> {
    const F: &str = "umq_create";
    let flag = |f: u32| cfg.extras.create_flag & f != 0;
    let shares = flag(crate::abi::v2026::types::UMQ_CREATE_FLAG_SHARE_TRANSPORT);
    let main = share.and_then(|s| s.main.as_ref());
    if let Some(m) = main
        && m.is_tp_main() != shares
    {
        return Err(einval(
            F,
            format_args!(
                "UMQ_CREATE_FLAG_SHARE_TRANSPORT must be on both or neither of this queue and its main queue {:#x}",
                m.handle
            ),
        ));
    }
    if !shares {
        return Ok(TpRole::None);
    }
    if main.is_none() {
        let pool = rt.transport_pool()?;
        return match pool.align(cfg.tx_depth, cfg.tx_buf_size) {
            Ok(()) => Ok(TpRole::Main),
            Err((depth, size)) => Err(einval(
                F,
                format_args!(
                    "tx_depth {} and tx_buf_size {} differ from the transport pool's {depth} and {size}: every main queue sharing its transport must match the first",
                    cfg.tx_depth, cfg.tx_buf_size
                ),
            )),
        };
    }
    Ok(if flag(crate::abi::v2026::types::UMQ_CREATE_FLAG_SUB_UMQ) {
        TpRole::None // a sub-queue with a transport of its own
    } else {
        TpRole::Logic(Borrower {
            turn: Mutex::new(()),
            held: Arc::new(AtomicU32::new(NONE_HELD)),
        })
    })
}

/// Which of a resource's channel or the queue's own an interrupt call names.
pub(super) enum TpChannel<'a> {
    Own(&'a Channel),
    Pooled(Arc<Channel>),
}

impl std::ops::Deref for TpChannel<'_> {
    type Target = Channel;
    fn deref(&self) -> &Channel {
        match self {
            TpChannel::Own(c) => c,
            TpChannel::Pooled(c) => c,
        }
    }
}

impl Queue {
    pub(super) fn is_tp_main(&self) -> bool {
        matches!(self.tp, TpRole::Main)
    }

    #[inline(always)]
    pub(super) fn is_logic(&self) -> bool {
        matches!(self.tp, TpRole::Logic(_))
    }

    fn borrower(&self) -> Option<&Borrower> {
        match &self.tp {
            TpRole::Logic(b) => Some(b),
            _ => None,
        }
    }

    fn tp_pool(&self) -> UmqResult<&TransportPool> {
        self.rt.transport_pool()
    }

    /// Runs a logic queue's post of `n` WRs on its resource, borrowing one first if it holds
    /// none: `post(k)` posts the first `k` the borrowing allows and says how many went. Returns
    /// `post`'s result, or ENOBUFS (with `bad` at the first WR beyond the borrowing) when the
    /// borrowing cut the post short, EMLINK when no resource is idle.
    pub(super) fn post_pooled(
        &self,
        n: usize,
        bad: &mut *mut umq_buf_t,
        post: impl FnOnce(usize, &mut *mut umq_buf_t) -> (usize, UmqResult<()>),
        nth: impl Fn(usize) -> *mut umq_buf_t,
    ) -> UmqResult<()> {
        let first = nth(0);
        let b = self.borrower().expect("a logic queue");
        let pool = self.tp_pool()?;
        let _turn = b.turn.lock().unwrap_or_else(|p| p.into_inner());
        let idx = match b.held.load(Ordering::Acquire) {
            NONE_HELD => {
                let idx = pool.borrow(self.handle).inspect_err(|_| *bad = first)?;
                b.held.store(idx, Ordering::Release);
                idx
            }
            idx => idx,
        };
        let may = match pool.take_for_post(idx, self.handle, n as u32) {
            Ok(may) => may as usize,
            Err(e) => {
                *bad = first;
                self.give_back_if_drained(pool, b, idx);
                return Err(e);
            }
        };
        let (went, r) = post(may, bad);
        pool.untake(idx, self.handle, (may - went) as u32);
        if went == 0 {
            self.give_back_if_drained(pool, b, idx);
        }
        r?;
        if may < n {
            *bad = nth(may);
            return Err(crate::transport::tp_pool::BORROW_SPENT);
        }
        Ok(())
    }

    /// After a logic queue's send poll: the resource goes back once its WRs are all polled.
    pub(super) fn give_back_when_drained(&self) {
        let (Some(b), Some(pool)) = (self.borrower(), self.rt.transport_pool_made()) else {
            return;
        };
        if b.held.load(Ordering::Acquire) == NONE_HELD {
            return;
        }
        let _turn = b.turn.lock().unwrap_or_else(|p| p.into_inner());
        let idx = b.held.load(Ordering::Acquire);
        if idx != NONE_HELD {
            self.give_back_if_drained(pool, b, idx);
        }
    }

    /// Under `turn`: gives `idx` back if no WR posted on it is still the library's.
    fn give_back_if_drained(&self, pool: &TransportPool, b: &Borrower, idx: u32) {
        if lock(&self.wire).sq.is_empty() {
            b.held.store(NONE_HELD, Ordering::Release);
            pool.give_back(idx, self.handle);
        }
    }

    /// A destroyed logic queue's resource goes back (its WRs went with it).
    pub(super) fn give_back_on_destroy(&self) {
        let (Some(b), Some(pool)) = (self.borrower(), self.rt.transport_pool_made()) else {
            return;
        };
        let _turn = b.turn.lock().unwrap_or_else(|p| p.into_inner());
        let idx = b.held.swap(NONE_HELD, Ordering::AcqRel);
        if idx != NONE_HELD {
            pool.give_back(idx, self.handle);
        }
    }

    /// `umq_poll` with `UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX`. On a main queue that shares its
    /// transport, the send completions of resource `idx`: those of the logic queue holding it
    /// (none while it is idle), or the main queue's own when `idx` names no resource, as in the
    /// reference. Any other queue ignores the index.
    pub fn poll_pooled(
        &self,
        dir: umq_io_direction_t,
        idx: u32,
        out: &mut [*mut umq_buf_t],
    ) -> UmqResult<usize> {
        if !self.is_tp_main() || dir == UMQ_IO_RX || dir >= UMQ_IO_MAX {
            return self.poll(dir, out);
        }
        let pool = self.tp_pool()?;
        let n = match pool.holder(idx) {
            None => {
                self.poll_locked(UMQ_IO_TX, out, false, false, |_, room| room)
                    .0
            }
            Some(None) => 0,
            Some(Some(h)) => table::get(h).map_or(0, |q| q.poll_logic_sends(out)),
        };
        Ok(n + match dir {
            UMQ_IO_ALL if n < out.len() => self.poll(UMQ_IO_RX, &mut out[n..])?,
            _ => 0,
        })
    }

    fn poll_logic_sends(&self, out: &mut [*mut umq_buf_t]) -> usize {
        let n = self
            .poll_locked(UMQ_IO_TX, out, false, false, |_, room| room)
            .0;
        self.give_back_when_drained();
        n
    }

    /// The channel an interrupt call names: with a resource index on a main queue that shares
    /// its transport, that resource's send channel; else `own`. Logic queues have none.
    pub(super) fn tp_channel<'a>(
        &self,
        func: &str,
        dir: umq_io_direction_t,
        tp: Option<u32>,
        own: impl FnOnce() -> UmqResult<&'a Channel>,
    ) -> UmqResult<TpChannel<'a>> {
        if self.is_logic() {
            return Err(einval(
                func,
                format_args!(
                    "queue {:#x} is a logic queue: it has no interrupt channel (its main queue watches its transport's)",
                    self.handle
                ),
            ));
        }
        match tp {
            Some(idx) if self.is_tp_main() && dir == UMQ_IO_TX => {
                let ch = self.tp_pool()?.channel(idx).map_err(|_| {
                    einval(
                        func,
                        format_args!(
                            "tp_handle_idx {idx} names no transport resource with an interrupt channel"
                        ),
                    )
                })?;
                Ok(TpChannel::Pooled(ch))
            }
            _ => own().map(TpChannel::Own),
        }
    }

    /// Whether the logic queue holding resource `idx` has send completions waiting.
    pub(super) fn tp_has_completions(&self, idx: u32) -> bool {
        self.rt
            .transport_pool_made()
            .and_then(|p| p.holder(idx))
            .flatten()
            .and_then(table::get)
            .is_some_and(|q| q.has_completions(UMQ_IO_TX))
    }

    /// `umq_transport_pool_resource_create`: a new idle resource, with an interrupt channel
    /// when this main queue is in interrupt mode. `with_ports`: the option names ports, which
    /// it must exactly when the queue was created with them.
    pub fn tp_create(&self, with_ports: bool) -> UmqResult<u32> {
        const F: &str = "umq_transport_pool_resource_create";
        self.require_tp_main(F)?;
        let queue_ports =
            self.cfg.extras.create_flag & crate::abi::v2026::types::UMQ_CREATE_FLAG_USED_PORTS != 0;
        if with_ports != queue_ports {
            return Err(einval(
                F,
                format_args!(
                    "the option {} ports but main queue {:#x} was created {} them",
                    if with_ports { "names" } else { "names no" },
                    self.handle,
                    if queue_ports { "with" } else { "without" }
                ),
            ));
        }
        self.tp_pool()?.create(self.cfg.interrupt).inspect_err(|_| {
            crate::log_err!(F, "no resource made (the pool's indices are all taken?)");
        })
    }

    /// `umq_transport_pool_resource_destroy`: an idle resource (EBUSY while a queue holds it).
    pub fn tp_destroy(&self, idx: u32) -> UmqResult<()> {
        const F: &str = "umq_transport_pool_resource_destroy";
        self.require_tp_main(F)?;
        self.tp_pool()?.destroy(idx).inspect_err(|e| {
            crate::log_err!(
                F,
                "transport resource {idx}: none, or a queue holds it ({e})"
            );
        })
    }

    /// `umq_transport_pool_resource_modify`: the resource goes to the error state.
    pub fn tp_mark_err(&self, idx: u32) -> UmqResult<()> {
        const F: &str = "umq_transport_pool_resource_modify";
        self.require_tp_main(F)?;
        self.tp_pool()?
            .mark_err(idx)
            .map_err(|_| einval(F, format_args!("tp_handle_idx {idx} names no resource")))
    }

    /// `umq_transport_pool_eventfd_get`: the process's pool's eventfd (any queue may ask, as
    /// in the reference).
    pub fn tp_event_fd(&self) -> UmqResult<i32> {
        Ok(self.tp_pool()?.event_fd())
    }

    fn require_tp_main(&self, func: &str) -> UmqResult<()> {
        if self.is_tp_main() {
            return Ok(());
        }
        Err(einval(
            func,
            format_args!(
                "queue {:#x} is not a main queue sharing its transport (UMQ_CREATE_FLAG_MAIN_UMQ | UMQ_CREATE_FLAG_SHARE_TRANSPORT)",
                self.handle
            ),
        ))
    }
}
