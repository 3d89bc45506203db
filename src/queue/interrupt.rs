//! Interrupt mode: one eventfd per completion direction, armed by `umq_rearm_interrupt` and
//! signalled by the next completion in that direction (the `ibv_req_notify_cq` contract).

use super::Queue;
use super::pooled::TpChannel;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use crate::event::Channel;
use std::sync::Arc;
use std::sync::atomic::Ordering;

pub struct Interrupts {
    tx: Channel,
    /// A sub-queue's is its main queue's: what it receives is the main queue's to poll.
    rx: Arc<Channel>,
}

impl Interrupts {
    pub fn new() -> Result<Interrupts, i32> {
        Ok(Interrupts {
            tx: Channel::new()?,
            rx: Arc::new(Channel::new()?),
        })
    }

    /// A sub-queue's or logic queue's: its own send channel, its main queue's receive channel.
    /// A logic queue's send channel forwards to its transport resource's (`forward`).
    pub fn sharing_rx(
        main: &Interrupts,
        forward: Option<crate::event::Forward>,
    ) -> Result<Interrupts, i32> {
        Ok(Interrupts {
            tx: match forward {
                Some(f) => Channel::forwarding(f)?,
                None => Channel::new()?,
            },
            rx: main.rx.clone(),
        })
    }
    pub fn notify(&self, tx: bool, rx: bool) {
        if tx {
            self.tx.fire_if_armed();
        }
        if rx {
            self.rx.fire_if_armed();
        }
    }
}

/// The direction an interrupt option names: TX or RX, with the direction flag set.
pub fn direction(
    func: &str,
    option: Option<&umq_interrupt_option_t>,
) -> UmqResult<umq_io_direction_t> {
    let o = option.ok_or_else(|| einval(func, format_args!("option is NULL")))?;
    if o.flag & UMQ_INTERRUPT_FLAG_IO_DIRECTION == 0 {
        return Err(einval(
            func,
            format_args!("option.flag lacks UMQ_INTERRUPT_FLAG_IO_DIRECTION"),
        ));
    }
    match o.direction {
        UMQ_IO_TX | UMQ_IO_RX => Ok(o.direction),
        d => Err(einval(
            func,
            format_args!("option.direction {d} must be UMQ_IO_TX or UMQ_IO_RX"),
        )),
    }
}

impl Queue {
    /// Rearming or acknowledging a sub-queue's receive channel succeeds and does nothing, as in
    /// the reference (whose sub-queue has no receive completion queue to arm): programs such as
    /// ubs-comm rearm every queue they read. Its fd and waits are refused (`channel`).
    fn sub_rx_noop(&self, option: Option<&umq_interrupt_option_t>) -> bool {
        self.is_sub()
            && self.cfg.interrupt
            && option.is_some_and(|o| {
                o.flag & UMQ_INTERRUPT_FLAG_IO_DIRECTION != 0 && o.direction == UMQ_IO_RX
            })
    }

    /// The channel an interrupt call names: the queue's own for the direction, or with `tp`
    /// (`UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX`) a transport resource's (`pooled`).
    fn channel(
        &self,
        func: &str,
        option: Option<&umq_interrupt_option_t>,
        tp: Option<u32>,
    ) -> UmqResult<(TpChannel<'_>, umq_io_direction_t)> {
        let dir = direction(func, option)?;
        let ch = self.tp_channel(func, dir, tp, || self.own_channel(func, dir))?;
        Ok((ch, dir))
    }

    fn own_channel(&self, func: &str, dir: umq_io_direction_t) -> UmqResult<&Channel> {
        if dir == UMQ_IO_RX && self.is_sub() {
            return Err(einval(
                func,
                format_args!(
                    "queue {:#x} is a sub-queue: its receive interrupts are its main queue's",
                    self.handle
                ),
            ));
        }
        let irq = self
            .irq
            .as_ref()
            .filter(|_| self.cfg.interrupt)
            .ok_or_else(|| {
                einval(
                    func,
                    format_args!(
                        "queue {:#x} was not created in UMQ_MODE_INTERRUPT",
                        self.handle
                    ),
                )
            })?;
        Ok(if dir == UMQ_IO_TX { &irq.tx } else { &irq.rx })
    }

    pub fn interrupt_fd(
        &self,
        option: Option<&umq_interrupt_option_t>,
        tp: Option<u32>,
    ) -> UmqResult<i32> {
        Ok(self
            .channel("umq_interrupt_fd_get", option, tp)?
            .0
            .fd()
            .fd())
    }

    /// Arms the channel. Completions already waiting signal at once, so the usual
    /// rearm-then-wait sequence can never miss one (a wake-up may be spurious, never lost).
    pub fn rearm(&self, option: Option<&umq_interrupt_option_t>, tp: Option<u32>) -> UmqResult<()> {
        if self.sub_rx_noop(option) {
            return Ok(());
        }
        let (ch, dir) = self.channel("umq_rearm_interrupt", option, tp)?;
        ch.arm();
        let waiting = match (&ch, tp) {
            (TpChannel::Pooled(_), Some(idx)) => self.tp_has_completions(idx),
            _ => self.has_completions(dir),
        };
        if waiting {
            ch.fire_if_armed();
        }
        Ok(())
    }

    /// Waits up to `timeout_ms` (0 = no wait, -1 = forever) and consumes the events; returns how
    /// many there were (0 on timeout).
    pub fn wait_interrupt(
        &self,
        timeout_ms: i32,
        option: Option<&umq_interrupt_option_t>,
        tp: Option<u32>,
    ) -> UmqResult<i32> {
        let (ch, _) = self.channel("umq_wait_interrupt", option, tp)?;
        if timeout_ms < -1 {
            return Err(einval(
                "umq_wait_interrupt",
                format_args!("time_out {timeout_ms} < -1"),
            ));
        }
        if !ch.fd().wait(timeout_ms) {
            return Ok(0);
        }
        Ok(ch.fd().take().min(i32::MAX as u64) as i32)
    }

    /// Consumes pending events without waiting (for callers that watch the fd themselves).
    pub fn get_cq_event(
        &self,
        option: Option<&umq_interrupt_option_t>,
        tp: Option<u32>,
    ) -> UmqResult<i32> {
        let (ch, _) = self.channel("umq_get_cq_event", option, tp)?;
        Ok(ch.fd().take().min(i32::MAX as u64) as i32)
    }

    pub fn ack_interrupt(
        &self,
        nevents: u32,
        option: Option<&umq_interrupt_option_t>,
        tp: Option<u32>,
    ) -> UmqResult<()> {
        if self.sub_rx_noop(option) {
            return Ok(());
        }
        let (ch, _) = self.channel("umq_ack_interrupt", option, tp)?;
        ch.acked.fetch_add(nevents as u64, Ordering::Relaxed);
        Ok(())
    }
}
