//! What a queue reports: flow-control statistics, libfabric-style room queries, transports.

use super::*;
use crate::transport::arrivals::Arrival;

impl Queue {
    /// Flow-control statistics, after reading the peer's area (so they are current).
    pub fn flow_control_stats(&self) -> umq_flowcontrol_stats_t {
        self.refresh_credit();
        let mut w = lock(&self.wire);
        w.flow.as_mut().map(|f| f.stats()).unwrap_or_default()
    }

    /// Reads the peer's area into our send-side view, and nothing else: a query must not
    /// announce or send, or reading two queues' stats would move what it reads.
    pub(crate) fn refresh_credit(&self) {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        if let Some(peer) = guard.as_ref() {
            peer.refresh_window(&mut lock(&self.wire));
        }
    }

    /// Send WRs that can be posted now without `EAGAIN` (None when unbound or failed): free
    /// send-queue slots and, unless queued mode takes the excess, the credit window.
    pub fn tx_size_left(&self) -> Option<u64> {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let peer = guard.as_ref()?;
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        let mut mine = lock(&self.wire);
        let room = (self.cfg.tx_depth as usize - mine.sq.len() - mine.held()) as u64;
        let queued = self.queued_mode.load(Ordering::Relaxed);
        if !queued {
            peer.refresh_window(&mut mine);
        }
        Some(match mine.flow.as_mut() {
            Some(f) if !queued => {
                // Credit the undelivered WRs ahead already hold is not ours to count twice.
                room.min(f.window())
            }
            _ => room,
        })
    }

    /// Receive buffers that can be posted now (None when unbound or failed).
    pub fn rx_size_left(&self) -> Option<u64> {
        if !self.is_bound() || self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        Some(self.rx_room() as u64)
    }

    /// Credit we announced that the peer still holds, and the peer's standalone announcements
    /// that landed here (zero when flow control is off).
    pub fn credit_in_flight(&self) -> (u64, u64) {
        let mut w = lock(&self.wire);
        w.flow
            .as_mut()
            .map_or((0, 0), |f| (f.peer_credit(), f.ctrl_received()))
    }

    /// Our flow-control extension statistics (zero when flow control is off).
    pub fn flow_control_ext_stats(&self) -> crate::abi::ext::umq_ext_flow_control_stats_t {
        let mut w = lock(&self.wire);
        // WRs the peer already has are in flight, not queued.
        let queued = (w.sq.unsent_len() + w.held()) as u64;
        let stalls = w.stall.stalls();
        let Some(f) = w.flow.as_mut() else {
            return Default::default();
        };
        let (e, p) = (f.extra(), f.params());
        crate::abi::ext::umq_ext_flow_control_stats_t {
            piggybacked: e.piggybacked,
            standalone: e.standalone,
            area_only: e.area_only,
            area_refreshes: e.area_refreshes,
            ctrl_grants: e.ctrl_grants,
            ctrl_budget: p.ctrl_budget,
            ctrl_credit: f.ctrl_credit(),
            queued_wr: queued,
            credit_stalls: stalls,
            initial_window: p.initial_window as u32,
            notify_interval: p.notify_interval as u32,
            queued_mode: self.queued_mode.load(Ordering::Relaxed) as u32,
            // As asked in `umq_init` (`FlowState` says why it changes nothing else).
            atomic_window: (matches!(f, FlowState::Window(_))
                && self.rt.flow_control.use_atomic_window) as u32,
            rx_without_buffer: self.stats.rx_without_buffer.load(Ordering::Relaxed),
        }
    }

    /// What serves the binding, the shared pool, and what went by reference.
    pub fn transport_stats(&self) -> crate::abi::ext::umq_ext_transport_stats_t {
        use crate::abi::ext::*;
        let transport = match self.peer.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            None => UMQ_EXT_TRANSPORT_NONE,
            Some(peer) => peer.provider().stats_code(),
        };
        let w = lock(&self.wire);
        umq_ext_transport_stats_t {
            transport,
            shared_pool: w.arena().is_some() as u32,
            shared_pool_bytes: w.arena().map_or(0, |a| a.resident() as u64),
            by_ref_wr: w.zero_copy().by_ref_wr,
            by_ref_bytes: w.zero_copy().by_ref_bytes,
            placed_wr: w.zero_copy().placed_wr,
            placed_bytes: w.zero_copy().placed_bytes,
            placed_rx: w.zero_copy().placed_rx,
            paced_packets: w.paced_packets(),
            one_sided_mapped_wr: w.zero_copy().one_sided_mapped_wr,
            one_sided_kernel_wr: w.zero_copy().one_sided_kernel_wr,
            calls_sent: w.zero_copy().calls_sent,
            calls_answered: w.zero_copy().calls_answered,
            one_sided_rma_wr: w.zero_copy().one_sided_rma_wr,
        }
    }
}

/// Every queue's message counters, for `umq_dfx_cmd_process` (`dfx`, which sits below the
/// queue layer and is handed them).
pub struct AllQueues;

impl crate::dfx::QueueCounters for AllQueues {
    fn each(&self) -> Vec<(u64, [u64; 3])> {
        table::all()
            .iter()
            .map(|q| {
                let s = &q.stats;
                let count = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed);
                (
                    q.handle,
                    [count(&s.send), count(&s.receive), count(&s.read)],
                )
            })
            .collect()
    }

    fn clear(&self) {
        for q in table::all() {
            q.stats.send.store(0, Ordering::Relaxed);
            q.stats.receive.store(0, Ordering::Relaxed);
            q.stats.read.store(0, Ordering::Relaxed);
        }
    }
}

/// Which pieces of messages a queue records: its peer's as they arrive, or its own as its
/// provider puts them on the wire (the packets of a limited queue's messages, and the fragments
/// of long network messages, in both).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pieces {
    Arriving,
    Leaving,
}

impl Pieces {
    fn leaving(self) -> bool {
        self == Pieces::Leaving
    }
}

/// Starts recording when `which` pieces of messages pass queue `umqh` (at most `limit` of
/// them), dropping what was recorded before. For measurements (`umq-perf --test pacing
/// --wire`); not part of the C API.
pub fn record_pieces(umqh: u64, which: Pieces, limit: usize) -> UmqResult<()> {
    with_queue("record_pieces", umqh, |q| {
        lock(&q.wire).record_pieces(which.leaving(), limit);
        Ok(())
    })
}

/// What queue `umqh` recorded of `which` since `record_pieces` or the last call (in order),
/// and how many more passed past the limit; recording goes on.
pub fn take_pieces(umqh: u64, which: Pieces) -> UmqResult<(Vec<Arrival>, u64)> {
    with_queue("take_pieces", umqh, |q| {
        Ok(lock(&q.wire).take_pieces(which.leaving()))
    })
}
