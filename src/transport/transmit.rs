//! The send side, written once for every provider: the loop that takes a queue's unsent WRs in
//! order through the pause and credit gates, hands each to the provider, and keeps the send
//! queue and the counters. A provider only moves bytes (`Carrier::carry`), and says what it
//! did as a value, "no resource" included, as UCX's transports do (`uct_ep_am_short` returning
//! `UCS_ERR_NO_RESOURCE`); the WR then waits first in line, holding its credit, for the next
//! round.

use super::wire::{CreditGate, Outcome, Wire};
use crate::abi::errno::*;
use crate::abi::types::*;

/// What a provider did with the WR it was handed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Handed {
    /// It ran to its end here and now (a delivery in this process, a one-sided WR the
    /// initiator carried out). Only while nothing of ours is in flight, as `Failed`:
    /// completions keep their order.
    Ran,
    /// It ran here and now and failed, with this status (a forged token, a message too long
    /// for the receive buffers).
    Failed(umq_buf_status_t),
    /// Its bytes left with it: it completes as soon as the WRs ahead of it have (at once when
    /// none is in flight).
    Left,
    /// It is on its way and completes when the provider says so (the peer executed it, or
    /// the last of its bytes left), in order (`SendQueue::complete_next`).
    AtPeer,
    /// It cannot go now (a full ring, no receive buffer at the peer, packets not yet granted,
    /// a full network queue): it stays first in line with its credit.
    NoResource,
}

impl Handed {
    /// A WR that ran here with `status`.
    #[inline(always)]
    pub fn ran(status: umq_buf_status_t) -> Handed {
        if status == UMQ_BUF_SUCCESS {
            Handed::Ran
        } else {
            Handed::Failed(status)
        }
    }
}

/// A provider's part of sending: moving one WR's bytes towards the peer.
pub trait Carrier {
    /// Moves `wr`, the oldest unsent WR of `w`, which flow control has let through.
    fn carry(&mut self, w: &mut Wire, wr: *mut umq_buf_t, out: &mut Outcome) -> Handed;
}

/// Hands our unsent WRs to `carrier`, in order, while the peer has not paused our priority,
/// credit lasts and the carrier takes them.
#[inline(always)]
pub fn transmit<C: Carrier>(w: &mut Wire, carrier: &mut C, out: &mut Outcome) {
    if w.paused() {
        return; // the peer paused our priority: nothing starts, not even a packet
    }
    let mut credit = CreditGate::open(w);
    while let Some(wr) = w.sq.next_unsent() {
        let opcode = unsafe { (*wr).pro().opcode };
        if !credit.pass(w, opcode) {
            out.credit_wait = true;
            break;
        }
        match carrier.carry(w, wr, out) {
            Handed::NoResource => {
                credit.keep(opcode);
                break;
            }
            Handed::Failed(status) => {
                w.finish_unsent(wr, status, out);
                continue; // not counted as sent
            }
            Handed::Ran => w.finish_unsent(wr, UMQ_BUF_SUCCESS, out),
            // Complete at once when no WR ahead of it is still in flight: the poll that takes
            // the completion then has no round to run for it.
            Handed::Left if w.sq.in_flight() == 0 => w.finish_unsent(wr, UMQ_BUF_SUCCESS, out),
            Handed::Left => w.sq.hand_over(false),
            Handed::AtPeer => w.sq.hand_over(true),
        }
        out.count_sent(opcode);
    }
    credit.close(w);
}
