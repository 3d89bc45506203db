//! Shared receive queues at the queue layer: a main queue and its sub-queues receive into one
//! line of buffers (`transport::shared_rq`), and the main queue's receive polls and interrupts
//! serve them all. This file makes the membership at create, checks it at destroy, and routes
//! posts, polls and wake-ups that concern the line.
//!
//! What the reference (UMDK's July 2026 UMQ) does, and so what this does: a buffer posted to the
//! main queue or to any sub-queue joins the line; the line's depth is the main queue's receive
//! depth; a sub-queue's receive poll returns nothing and its receive interrupt is refused, while
//! its sends are its own; each received message carries its sub-queue's `umq_ctx`; the main
//! queue cannot be destroyed while a sub-queue lives.

use super::config::RqShare;
use super::*;
use crate::transport::shared_rq::{Membership, SharedRq};

/// A queue's place on a shared line.
pub(crate) struct Share {
    pub line: Arc<SharedRq>,
    /// For a sub-queue, its main queue (alive as long as the sub-queue: `check_destroy`); None
    /// for the main queue itself.
    pub main: Option<Arc<Queue>>,
}

/// How many members bound through links one receive poll of the main queue looks at for
/// messages that arrived (the rest on the next polls, in turn).
const LINKED_A_POLL: usize = 64;

/// The share a new queue asks for, checked as the reference checks it; None for a queue with
/// a receive queue of its own.
pub(super) fn for_create(rt: &Runtime, cfg: &mut QueueConfig) -> UmqResult<Option<Share>> {
    const F: &str = "umq_create";
    let main_handle = match cfg.extras.share {
        RqShare::Own => return Ok(None),
        _ if rt.flow_control.enabled && rt.flow_control.credit.is_none() => {
            return Err(einval(
                F,
                format_args!(
                    "shared receive queues with the window's flow control are not offered: its \
                     credits are a receive queue's own (the July 2026 credit requests share one)"
                ),
            ));
        }
        _ if !rt.pro_api => {
            return Err(einval(
                F,
                format_args!("shared receive queues are served by the pro API only"),
            ));
        }
        RqShare::Main => {
            return Ok(Some(Share {
                line: Arc::new(SharedRq::new(cfg.rx_depth)),
                main: None,
            }));
        }
        RqShare::Sub(h) => h,
    };
    let main = table::get(main_handle).ok_or_else(|| {
        einval(
            F,
            format_args!("share_rq_umqh {main_handle:#x} is no queue"),
        )
    })?;
    let Some(line) = main.share.as_ref().filter(|s| s.main.is_none()) else {
        return Err(einval(
            F,
            format_args!(
                "share_rq_umqh {main_handle:#x} is not a main queue (UMQ_CREATE_FLAG_MAIN_UMQ)"
            ),
        ));
    };
    if main.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
        return Err(einval(
            F,
            format_args!("main queue {main_handle:#x} is in the error state"),
        ));
    }
    if cfg.extras.create_flag & UMQ_CREATE_FLAG_RX_BUF_SIZE == 0 {
        cfg.rx_buf_size = main.cfg.rx_buf_size;
    } else if cfg.rx_buf_size != main.cfg.rx_buf_size {
        return Err(einval(
            F,
            format_args!(
                "rx_buf_size {} differs from the main queue's {}",
                cfg.rx_buf_size, main.cfg.rx_buf_size
            ),
        ));
    }
    cfg.rx_depth = main.cfg.rx_depth;
    Ok(Some(Share {
        line: line.line.clone(),
        main: Some(main.clone()),
    }))
}

/// A new queue's interrupt channels: its own in interrupt mode; a sub-queue's receive channel
/// is its main queue's, so a sub-queue whose main queue is in interrupt mode has channels
/// whatever its own mode (its sends' channel then unused).
/// A logic queue's sends wake its transport resource's channel (`forward`, from `pooled`).
pub(super) fn interrupts(
    cfg: &QueueConfig,
    share: Option<&Share>,
    forward: Option<crate::event::Forward>,
) -> UmqResult<Option<Interrupts>> {
    let main_irq = share
        .and_then(|s| s.main.as_ref())
        .and_then(|m| m.irq.as_ref());
    Ok(match main_irq {
        Some(main) => Some(Interrupts::sharing_rx(main, forward)?),
        None if cfg.interrupt => Some(Interrupts::new()?),
        None => None,
    })
}

impl Share {
    /// The receive queue's side of the membership, for the queue `umqh`.
    pub fn membership(&self, umqh: u64) -> Membership {
        Membership {
            line: self.line.clone(),
            main: self.main.is_none(),
            umqh,
        }
    }
}

impl Queue {
    /// Joins the line, once the queue has its handle.
    pub(super) fn join_line(&self) {
        if let Some(s) = &self.share {
            if s.main.is_some() {
                s.line.add_sub(self.handle);
            }
            lock(&self.wire)
                .rq
                .set_extra(self.cfg.extras.umq_ctx, Some(s.membership(self.handle)));
        } else {
            lock(&self.wire).rq.set_extra(self.cfg.extras.umq_ctx, None);
        }
    }

    /// Refuses to destroy a main queue that sub-queues still receive through.
    pub(super) fn check_destroy(&self) -> UmqResult<()> {
        match &self.share {
            Some(s) if s.main.is_none() && s.line.subs() > 0 => {
                crate::log_err!(
                    "umq_destroy",
                    "main queue {:#x} still has {} sub-queues; destroy them first",
                    self.handle,
                    s.line.subs()
                );
                Err(-UMQ_ERR_EBUSY)
            }
            _ => Ok(()),
        }
    }

    /// Leaves the line as the queue is destroyed (its claimed buffers went back with its
    /// flush); the main queue, last, frees what the line still holds. Returns how many.
    pub(super) fn leave_line(&self) -> usize {
        let Some(s) = &self.share else {
            return 0;
        };
        if s.main.is_some() {
            s.line.remove_sub(self.handle);
            return 0;
        }
        self.free_chains(s.line.drain_all())
    }

    /// `push_rx` on a shared line: the buffers join it, and members whose messages waited for
    /// one are moved along (after our lock: each takes its own).
    #[cold]
    #[inline(never)]
    pub(super) fn push_rx_shared(&self, s: &Share, bufs: &[*mut umq_buf_t]) -> usize {
        for &b in bufs {
            unsafe {
                (*b).qbuf_next = ptr::null_mut();
                (*b).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_RX);
            }
        }
        let (accepted, waiting) = s.line.post(bufs);
        if let Some(pool) = &self.credit_pool {
            pool.recharge(accepted as u64);
            self.credit_after_rx_post(pool);
        }
        for h in waiting {
            if let Some(q) = table::get(h) {
                // Through the member's wire lock first: a sender whose message found the line
                // empty under it has noted itself there by the time the lock is free
                // (`loopback::deliver_to`).
                drop(lock(&q.wire));
                q.kick_blocked_sender();
            }
        }
        accepted
    }

    /// `poll` for a member of a shared line: a sub-queue's polls take its send completions
    /// only; the main queue's take its own send completions and the line's messages, after
    /// running the rounds of members bound through links (itself included), so messages that
    /// reached them land. Members bound in this process need none: their peers deliver.
    #[cold]
    #[inline(never)]
    pub(super) fn poll_shared(
        &self,
        s: &Share,
        dir: umq_io_direction_t,
        out: &mut [*mut umq_buf_t],
    ) -> usize {
        // A main queue that shares its transport polls sends by resource (`poll_pooled`).
        let sends = |out: &mut [*mut umq_buf_t]| match dir {
            UMQ_IO_RX => 0,
            _ if self.is_tp_main() => 0,
            _ => {
                self.poll_locked(UMQ_IO_TX, out, false, false, |_, room| room)
                    .0
            }
        };
        if s.main.is_some() {
            let n = sends(out);
            if self.is_logic() {
                self.give_back_when_drained();
            }
            return n;
        }
        if dir != UMQ_IO_TX {
            for _ in 0..s.line.linked().min(LINKED_A_POLL) {
                if let Some(q) = s.line.next_linked().and_then(table::get) {
                    q.service_link();
                }
            }
        }
        let mut n = sends(out);
        if dir != UMQ_IO_TX {
            n += s.line.take_completions(&mut out[n..]);
            if self.credit_pool.is_some() && n < out.len() {
                n += self.members_credit_updates_into(&s.line, &mut out[n..]);
            }
        }
        n
    }

    /// Tells the line whether this member is now bound through a link (its messages then land
    /// when a round of its link runs, which the main queue's polls see to).
    pub(super) fn linked_on_line(&self, on: bool) {
        if let Some(s) = &self.share {
            s.line.set_linked(self.handle, on);
        }
    }

    /// Whether the queue's receive side is a sub-queue's, whose interrupts are its main
    /// queue's.
    pub(super) fn is_sub(&self) -> bool {
        self.share.as_ref().is_some_and(|s| s.main.is_some())
    }
}
