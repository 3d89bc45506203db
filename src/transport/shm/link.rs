//! A binding over shared memory as the provider interface (`transport::link`) sees it: the
//! peer's inbox mapped here, our own inbox, and what the engine keeps per binding.

use super::*;
use crate::transport::assembly::Assembly;
use crate::transport::call_bell::CallBell;
use crate::transport::progress::{self, RungBy};
use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

/// What the engine keeps per binding beside the queue's wire.
#[derive(Default)]
pub(super) struct Pair {
    /// The sequence numbers of our WRs in flight that went by reference (they complete when
    /// the peer has executed them), oldest first.
    pub(super) by_ref_in_flight: VecDeque<u64>,
    /// The peer's entries run since bind that take a receive buffer: the number the entry that
    /// takes a buffer posted now will have at the earliest (see `placement`).
    pub(super) rx_entries_run: u64,
    /// The oldest entry of our inbox waits for a receive buffer.
    pub(super) rx_blocked: bool,
    /// The peer's message whose packets are arriving: its First entry, and the message put
    /// together so far.
    pub(super) assembly: Option<(Entry, Assembly)>,
    /// Our WR whose packets are going out (the next to go): the bytes pushed so far, and the
    /// packet size it began with.
    pub(super) packet_sent: u64,
    pub(super) packet_size: usize,
    /// The peer's process.
    pub(super) pid: u32,
    /// Our WRs completed without an entry in the peer's ring (one-sided, by the kernel: see
    /// `direct`): the peer's sequence numbers for ours run this far behind
    /// `SendQueue::completed_seq`.
    pub(super) direct_done: u64,
}

/// A binding to a queue of another process on this host.
pub struct Link {
    peer: Segment,
    mine: Arc<Segment>,
    pid: u32,
    pair: Pair,
    /// This process's call bell (`transport::call_bell`), which the peer rings with our inbox's
    /// secret; None when it could not be made (the progress engine then sweeps the queue).
    bell: Option<Arc<CallBell>>,
    /// How far into its ring we last called the peer to (bytes we had written).
    called_upto: u64,
}

impl Link {
    /// Maps the inbox `fd` of the queue-owner `pid` and checks it against `secret` (see
    /// `Segment::open_peer`); `mine` is our own inbox, the one our bind info offered.
    pub fn open(mine: Arc<Segment>, pid: u32, fd: u32, secret: u64) -> Result<Link, String> {
        let mut peer = Segment::open_peer(pid, fd, secret)?;
        direct::let_peer_attach(pid);
        let bell = CallBell::local();
        if let Some(b) = &bell {
            mine.publish_call_port(b.port());
            peer.ring_owner_by_call(b);
        }
        Ok(Link {
            peer,
            mine,
            pid,
            pair: Pair {
                pid,
                ..Pair::default()
            },
            bell,
            called_upto: 0,
        })
    }

    /// The call bell the peer rings to have this queue served, and its tag there.
    pub fn call_bell(&self) -> Option<RungBy> {
        let bell: Arc<dyn progress::CallBell> = self.bell.clone()?;
        Some((bell, self.mine.secret()))
    }

    /// Calls the peer's progress thread to take in what we wrote into its ring, unless it took
    /// it all or we called it that far already (a ring that is not answered is repeated by the
    /// peer's bell, not by us).
    pub fn call_peer(&mut self) {
        let (written, released) = self.peer.produced_and_released();
        if written <= released || written <= self.called_upto {
            return;
        }
        self.ring_peer(written);
    }

    /// Calls the peer's progress thread to what we just wrote, whatever we called before (a
    /// control frame: a NIC sees one at once).
    pub fn call_peer_now(&mut self) {
        let (written, _) = self.peer.produced_and_released();
        self.ring_peer(written);
    }

    fn ring_peer(&mut self, upto: u64) {
        if let (Some(bell), Some(port)) = (&self.bell, self.peer.call_port()) {
            let at = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port);
            bell.ring(at, self.peer.secret(), upto);
            self.called_upto = upto;
        }
    }

    /// The peer's process, whose exit ends the binding.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The peer's flow-control area, in its inbox.
    pub fn peer_area(&self) -> &Area {
        self.peer.area()
    }

    /// Whether a round would find nothing to do (see `idle`).
    #[inline]
    pub fn idle(&self, w: &Wire) -> bool {
        idle(w, &self.mine, &self.peer)
    }

    /// A full round: the peer's entries, our completions, our waiting WRs.
    pub fn round(&mut self, w: &mut Wire, at: &Receiver) -> Result<Outcome, LinkError> {
        let out = progress(w, &mut self.pair, &self.mine, &self.peer, at);
        if let Some(bell) = self.bell.as_ref().filter(|b| b.rung()) {
            // A ring for this queue is answered once we released what the peer had written.
            bell.served(self.mine.secret(), self.mine.released());
        }
        out
    }

    /// The full round's work when it is one SEND or SEND_IMM at the head of our ring that
    /// lands whole in our next receive buffer, and nothing else waits: none of our WRs waits or
    /// is in flight, no message arrives in packets, the peer rings no doorbell. Taken by a
    /// receive poll without the round's set-up (an empty ring then returns at once, as `idle`
    /// would); None, with nothing changed, otherwise. A peer that left after pushing the entry
    /// is seen by the next round, which an empty ring with a closed peer never skips.
    #[inline(always)]
    pub fn receive_one(&mut self, w: &mut Wire, umqh: u64) -> Option<Outcome> {
        if !w.sq.all_completed() || self.peer.doorbell.is_some() || self.pair.assembly.is_some() {
            return None;
        }
        // A corrupt entry is the full round's to report; an empty ring, with the peer still
        // there, leaves the round nothing to do.
        let Some((e, payload)) = self.mine.peek().ok()? else {
            return (!self.peer.is_closed()).then(Outcome::default);
        };
        if e.kind != KIND_WR || e.flags != 0 {
            return None;
        }
        let mut out = Outcome::default();
        let status = rx::land_inline(w, &e, payload, umqh, &mut out)?;
        // A SEND or SEND_IMM: it took a receive buffer.
        rx::entry_done(&mut self.pair, &self.mine, &e, true, status);
        Some(out)
    }

    /// Whether an entry waits at the head of our ring.
    #[inline(always)]
    pub fn more_arrived(&self) -> bool {
        self.mine.has_entry()
    }

    /// A post's round: our waiting WRs only; None when the peer has left (see
    /// `transmit_round`).
    #[inline]
    pub fn post_round(&mut self, w: &mut Wire) -> Option<Outcome> {
        transmit_round(w, &mut self.pair, &self.mine, &self.peer)
    }

    /// Sends `wr`, a post's only WR, in one pass when it can go that way
    /// (`can_transmit_one`) and `admit` takes its credit and queues it; or carries it out when
    /// it is a WRITE or READ that can run here (`run_one_sided_alone`).
    #[inline(always)]
    pub fn send_one_if(
        &mut self,
        w: &mut Wire,
        wr: *mut umq_buf_t,
        admit: impl FnOnce(&mut Wire, &Area) -> bool,
    ) -> Option<Outcome> {
        if !can_transmit_one(w, &self.peer, wr) {
            return run_one_sided_alone(w, &mut self.pair, &self.peer, wr);
        }
        if !admit(w, self.peer.area()) {
            return None;
        }
        Some(transmit_one(w, &self.mine, &self.peer, wr))
    }

    /// Carries out the WRITEs and READs at the front of `wrs` that can run here now, while the
    /// send queue holds fewer than `room` WRs (`run_one_sided`); how many ran.
    #[inline]
    pub fn run_one_sided(
        &mut self,
        w: &mut Wire,
        wrs: &[*mut umq_buf_t],
        room: usize,
        out: &mut Outcome,
    ) -> usize {
        run_one_sided(w, &mut self.pair, &self.peer, wrs, room, out)
    }

    /// Whether a standalone window update can go now.
    pub fn can_send_update(&self) -> bool {
        self.peer.has_room(0)
    }

    /// Sends a standalone window update; false when the ring is full.
    pub fn send_update(&self, imm: u64) -> bool {
        push_standalone(&self.peer, imm)
    }

    /// Sends a control frame of the link; false when the ring is full.
    pub fn send_control(&self, frame: &[u8]) -> bool {
        push_control(&self.peer, frame)
    }

    /// Whether a message of the peer waits for a receive buffer of ours.
    pub fn waits_for_rx_buffer(&self) -> bool {
        self.pair.rx_blocked
    }

    /// A pro-API receive buffer `b` from our shared pool (`arena`), about to be posted behind
    /// `posted` others: the peer may write the message that takes it straight into it.
    #[inline]
    pub fn offer_rx(&self, arena: &crate::buf::arena::Arena, posted: usize, b: *mut umq_buf_t) {
        let ordinal = self.pair.rx_entries_run + posted as u64;
        self.mine.publish_posted(arena, ordinal, b);
    }

    /// Our WRs in flight were failed: none is awaited any more.
    pub fn forget_in_flight(&mut self) {
        self.pair.by_ref_in_flight.clear();
    }

    /// We leave the binding: the peer is told first, and a peer still copying one of our
    /// buffers by reference, or writing into one of our receive buffers, is done before this
    /// returns (our buffers are handed back next).
    pub fn leave(&self) {
        self.mine.set_closed();
        // Before the flush hands our buffers back: a peer still copying one by reference must
        // see the mark once its copy could read a reuse (see rx::sender_left), and a peer
        // writing into one of our receive buffers must be done (see placement).
        std::sync::atomic::fence(Ordering::SeqCst);
        self.mine.wait_for_placements(self.pid);
    }

    /// After `leave` and the flush: our inbox made ready for a next binding. False when it
    /// could only be cleared in place (a late write of the old peer could then reach the next
    /// binding; see `Segment::renew`).
    pub fn ready_for_next(&self) -> bool {
        if self.mine.renew().is_ok() {
            return true;
        }
        self.mine.reset_for_next_binding();
        false
    }
}
