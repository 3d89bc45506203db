//! The sending side: our WRs (and responses, updates, pings) as messages, fragment by
//! fragment, and our WRs' completions in order.

use super::node::InPlace;
use super::*;
use crate::transport::arrivals::ArrivalLog;
use crate::transport::transmit::{Carrier, Handed};

/// One of our WRs between the sending step and its completion.
pub(super) struct Flight {
    /// Completes once sent (SEND, SEND_IMM, NOP), else when the peer reports it executed.
    pub(super) quick: bool,
    /// Every fragment handed to libfabric.
    pub(super) sent: bool,
    /// Fragments sent from our send buffers (a payload copied there, or read in place from
    /// the WR's buffer) that libfabric has not yet reported sent: a WR completes only once
    /// none is left, so that libfabric no longer reads its buffer, and a SEND no longer
    /// depends on this process (a fragment still queued inside libfabric dies with it).
    pub(super) unfinished: u32,
    pub(super) status: Option<umq_buf_status_t>,
}

pub(super) struct Outgoing {
    pub(super) header: Header,
    pub(super) body: Body,
    /// Payload bytes handed to libfabric so far, and whether a first fragment went.
    pub(super) done: u64,
    pub(super) started: bool,
    /// Of those, the bytes libfabric read in place from the WR's buffers.
    pub(super) in_place: u64,
    /// Our WR this message carries (its sequence number).
    pub(super) wr_seq: Option<u64>,
    /// Payload bytes a fragment carries at most: `FRAGMENT`, or a rate-limited queue's PMTU
    /// (each fragment is then one of its packets, sent as the pacer grants it).
    pub(super) fragment: usize,
    /// An answer that may wait for our next message (`HeldAnswers`): a WRITE's.
    pub(super) may_wait: bool,
}

/// Answers to the peer's WRITEs that wait for a message of ours to carry them, as TCP delays an
/// acknowledgment for the reply that can carry it. Over tcp every send is a system call, and
/// the receiving side's answer went before its application could see the bytes: a put
/// ping-pong paid two sends a hop, the answer's first (`docs/TRANSPORTS.md`, "Answers ride
/// on replies"). A WRITE whose initiator expects a WR back (`FLAG_ANSWER_MAY_WAIT`) leaves,
/// in a round run for the application, an answer that nothing else goes with for our next
/// message, which the application's reply usually is, bundled with it (`FLAG_CARRIED`); any
/// later round sends it once `HOLD_AT_MOST` has passed, and a round of the progress engine at
/// once (a target whose application went away is rung by the initiator, whose WRs wait for
/// the answers). A WRITE still completes once its bytes are placed: only when its answer
/// leaves moves.
#[derive(Default)]
pub(super) struct HeldAnswers {
    /// When the answers waiting now were first held.
    since: Option<Stamp>,
}

/// How long answers wait at most for a message of ours: a ping-pong's application posts its
/// reply within a poll or two, and a host that stops it for longer than this breaks the
/// ping-pong's stride (the answer goes alone, and the initiator's next WRITEs go by RMA until
/// a look finds the replies carrying answers again).
pub(super) const HOLD_AT_MOST: Duration = Duration::from_micros(50);

impl HeldAnswers {
    /// Whether the answers queued now wait: `only_answers` (nothing else is queued, which
    /// would carry them) in a round run `by_application`.
    pub(super) fn hold(&mut self, only_answers: bool, by_application: bool, now: Stamp) -> bool {
        if !only_answers {
            return false;
        }
        if !by_application {
            self.since = None;
            return false;
        }
        match self.since {
            None => {
                self.since = Some(now);
                true
            }
            Some(since) if now < since.after(HOLD_AT_MOST) => true,
            Some(_) => {
                self.since = None;
                false
            }
        }
    }

    /// Everything queued went: whether held answers went with a message of ours.
    pub(super) fn went(&mut self) -> bool {
        self.since.take().is_some()
    }

    /// Whether answers wait now.
    pub(super) fn held(&self) -> bool {
        self.since.is_some()
    }

    /// Tells the peer which of the answers waiting in `outgoing` go with a WR of ours
    /// (`FLAG_CARRIED`): all, once one is queued behind them (a link's frame carries none).
    pub(super) fn mark_carried(&self, outgoing: &mut VecDeque<Outgoing>) {
        if !self.held() || !outgoing.iter().any(|o| o.wr_seq.is_some()) {
            return;
        }
        for o in outgoing.iter_mut().filter(|o| o.may_wait && !o.started) {
            o.header.flags |= FLAG_CARRIED;
        }
    }
}

/// Where a rate-limited queue's newest packets stand in its connection's byte stream, until the
/// kernel has sent them: the pacer grants the queue no more while they wait in the socket
/// (`Link::packet_backlog`). The kernel holds data when the connection may not send (its
/// congestion window full while the receiver's acknowledgments are late): what was handed to
/// it in the meantime would leave together when they come, in one burst of TCP frames.
///
/// Only the queue's own packets hold it back: when bytes handed before them are still unsent
/// too (another queue's stream over the same connection, or a backlog the socket had), their
/// wait is that backlog's, which the queue's next packets would queue behind anyway; held for
/// it, a limited queue beside a stream that keeps the socket full would get a packet through
/// only as the whole backlog drains.
#[derive(Default)]
pub(super) struct NewestPacket {
    /// The stream's bytes handed to the kernel before the last flush's packets and after them:
    /// they are sent once the kernel has sent as many as the second. None: none is waited
    /// for, or the stream cannot be watched.
    span: Option<(u64, u64)>,
    /// A look found them held.
    seen_held: bool,
}

impl NewestPacket {
    /// Packets went: the stream was at `before` just before the first and is at `after` now
    /// (none when unknown).
    pub(super) fn handed(&mut self, before: Option<sys::StreamAt>, after: Option<sys::StreamAt>) {
        self.span = before.zip(after).map(|(b, a)| (b.handed, a.handed));
    }

    /// Whether packets are waited for (a look would ask the socket).
    pub(super) fn watched(&self) -> bool {
        self.span.is_some()
    }

    /// Whether those packets have left, by the stream's counters now (`at`).
    pub(super) fn look(&mut self, at: Option<sys::StreamAt>) -> Backlog {
        let Some((start, end)) = self.span else {
            return Backlog::Clear;
        };
        match at {
            // `handed` below the mark: another connection's counters (ours was replaced).
            Some(s) if s.handed >= end && (start..end).contains(&s.sent) => {
                self.seen_held = true;
                Backlog::Held
            }
            _ => {
                self.span = None;
                match std::mem::take(&mut self.seen_held) {
                    true => Backlog::LeftSince,
                    false => Backlog::Clear,
                }
            }
        }
    }
}

pub(super) enum Body {
    None,
    /// The payload of our WR, read from its buffers as it goes.
    Wr(*mut umq_buf_t),
    Owned(Vec<u8>),
}

impl Outgoing {
    /// A message of ours not carrying a WR (a response, a frame), in fragments of `FRAGMENT`.
    pub(super) fn new(header: Header, body: Body) -> Outgoing {
        Outgoing {
            header,
            body,
            done: 0,
            started: false,
            in_place: 0,
            wr_seq: None,
            fragment: FRAGMENT,
            may_wait: false,
        }
    }

    pub(super) fn control(header: Header) -> Outgoing {
        Outgoing::new(header, Body::None)
    }

    /// The payload bytes it carries in all: a WR's, as its header says; else its body's. A
    /// header's `total` may mean something else in a message that is not a WR's (the stride
    /// a `KIND_DONE` teaches), and a payload it counted would go out as stale buffer bytes.
    pub(super) fn total(&self) -> u64 {
        match &self.body {
            Body::None => 0,
            Body::Owned(v) => v.len() as u64,
            Body::Wr(_) => self.header.total,
        }
    }

    /// Copies payload bytes `[done, done + dst.len())` into `dst`.
    pub(super) fn copy_out(&self, dst: &mut [u8]) {
        match &self.body {
            Body::None => {}
            Body::Owned(v) => dst.copy_from_slice(&v[self.done as usize..][..dst.len()]),
            Body::Wr(wr) => target::copy_range(*wr, self.done as usize, dst),
        }
    }
}

/// The WR in flight with sequence number `seq`, if it still is.
pub(super) fn flight_of(
    flight: &mut VecDeque<Flight>,
    base: u64,
    seq: Option<u64>,
) -> Option<&mut Flight> {
    let i = seq?.checked_sub(base)?;
    flight.get_mut(i as usize)
}

impl Link {
    /// Completes our WRs in order, as far as they are done.
    #[inline]
    pub(super) fn complete(&mut self, w: &mut Wire, out: &mut Outcome) {
        if !self.tx.flight.is_empty() {
            self.complete_in_order(w, out);
        }
    }

    fn complete_in_order(&mut self, w: &mut Wire, out: &mut Outcome) {
        while let Some(f) = self.tx.flight.front() {
            // libfabric may still read a fragment's payload in place from the WR's buffer.
            let status = match (f.quick, f.sent, f.status) {
                _ if f.unfinished > 0 => break,
                (_, _, Some(s)) => s,
                (true, true, None) => UMQ_BUF_SUCCESS,
                _ => break,
            };
            self.tx.flight.pop_front();
            self.tx.flight_base += 1;
            w.finish_next(status, true, out);
        }
    }

    /// Calls the peer to every WR of ours in flight (see `Link::call_peer`).
    pub fn call_peer(&mut self, w: &mut Wire) {
        let node = self.ch.node.clone();
        let n = node.lock();
        // Called because our WRs stopped moving: the peer is not serving them, and those left
        // to its own progress are called to now.
        let t = &mut self.tx;
        t.call_upto = t.call_upto.max(t.msg_upto);
        t.msg_calls.asleep(n.now());
        // The engine's verdict, not a stream's wait that a busy host can cause (`streamed_way`
        // looks again at once after one of those): no look before the call machine's retry.
        t.streamed_allowed = STREAMED_TO_LOOK;
        t.called_upto = t.rung_upto;
        if t.rma_in_flight > 0 {
            t.rma_calls.asleep(n.now());
            t.rma_call = true;
        }
        self.call_if_needed(&n, w);
    }

    /// Calls the peer to what we just sent, whatever we called before (a control frame: a NIC
    /// sees one at once). The ring asks for nothing to have run: one round answers it.
    pub fn call_peer_now(&mut self) {
        let bell = self.ch.node.lock().call_bell.clone();
        if let (Some(bell), Some(at)) = (bell, self.peer_bell) {
            bell.ring(at, self.peer_chan, 0);
        }
    }

    /// Rings the peer's call bell for the WRs of ours that its library must carry out, once
    /// they are all handed to libfabric (the ring should not overtake them by much), or for a
    /// WR libfabric cannot take yet (only the peer's progress may free the way), and once the
    /// WRs of our last ring completed: at most one ring a round trip, however many WRs. Not
    /// while the peer runs them unasked, and again when they stop moving (`calls`).
    ///
    /// (The look is inline: in the usual round no RMA of ours is out and our messages need no
    /// ring.)
    #[inline(always)]
    pub(super) fn call_if_needed(&mut self, n: &Shared, w: &mut Wire) {
        let t = &self.tx;
        if t.rma_in_flight == 0 && !t.rma_call && t.messages_need_no_ring(w.sq.completed_seq()) {
            return;
        }
        self.call_when_needed(n, w);
    }

    #[inline(never)]
    fn call_when_needed(&mut self, n: &Shared, w: &mut Wire) {
        let t = &mut self.tx;
        // RMA runs in no WR count of the peer's: its ring asks for nothing to have run, and the
        // peer serves it a few times (`call_bell`). While RMA streams, a round rings again once
        // the RMAs of the last ring completed, as for messages: one ring a round trip, from the
        // rounds of our own application, not from the progress thread's looks. A peer that
        // serves our RMA unrung is not rung, and RMAs that stop completing ring again
        // (`calls`).
        let next_round =
            t.rma_in_flight > 0 && t.rma_upto > t.rma_rung && w.sq.completed_seq() >= t.rma_rung;
        let mut ring = false;
        if std::mem::take(&mut t.rma_call) || next_round {
            ring = t.rma_calls.ring_now(t.rma_rung, n.now());
            t.rma_rung = t.rma_upto;
        }
        ring |= t.rma_in_flight > 0 && t.rma_calls.overdue(n.now());
        if ring {
            let watch = t.rma_long_upto > w.sq.completed_seq();
            if let (Some(bell), Some(at)) = (&n.call_bell, self.peer_bell) {
                bell.ring_rma(at, self.peer_chan, watch);
                w.zero_copy.calls_sent += 1;
            }
        }
        self.call_for_messages(n, w);
    }

    /// Messages the peer's library runs: one ring for those sent, again once they ran, or once
    /// they stopped moving; left to a peer that runs them unrung (`calls`). Nothing to look at
    /// while none was sent, waits, or has news for the machine (a ping-pong of SENDs).
    #[inline]
    fn call_for_messages(&mut self, n: &Shared, w: &mut Wire) {
        let t = &mut self.tx;
        let done = w.sq.completed_seq();
        if t.messages_need_no_ring(done) {
            return;
        }
        let now = n.now();
        t.hear_completions(done, now);
        let mut ring_upto = None;
        if t.call_upto > t.called_upto && done >= t.called_upto {
            if t.msg_calls.ring_now(t.call_upto - 1, now) {
                ring_upto = Some(t.call_upto);
            }
            t.called_upto = t.call_upto;
        }
        if done < t.called_upto && t.msg_calls.overdue(now) {
            ring_upto = Some(t.called_upto);
        }
        if let Some(upto) = ring_upto {
            t.rung_upto = upto;
            let watch = t.msg_long_upto > done;
            self.ring(n, w, upto, watch);
        }
    }

    /// Rings the peer's bell for its channel: until `upto` of our WRs ran there, asking it to
    /// `watch` the connection meanwhile when some of them are long.
    fn ring(&self, n: &Shared, w: &mut Wire, upto: u64, watch: bool) {
        if let (Some(bell), Some(at)) = (&n.call_bell, self.peer_bell) {
            bell.ring_watching(at, self.peer_chan, upto, watch);
            w.zero_copy.calls_sent += 1;
        }
    }

    /// Writes our flow-control area into the peer's landing words (libfabric RMA: no receive
    /// buffer, no completion at the peer) when it changed since we last did: at once for a new
    /// initial window (the peer is IDLE until it has it), else after a pause. Grants also travel
    /// in announcements piggybacked on our SENDs, so while we send WRs the pause is long
    /// (`AREA_WHILE_SENDING`: a ping-pong's replies carry the credit); a pure receiver, whose
    /// peer may have no receive buffer for a standalone update, ships it soon
    /// (`AREA_WHILE_RECEIVING`: a stream's credit). A peer that has used all the credit it can
    /// know of (shipped, or piggybacked on our SENDs) gets the new grant at once: it may be
    /// waiting for it (a window of one), and no reply of ours carries it: the receive post that
    /// makes such a grant runs a round for it (`owes_peer_credit`), and the progress engine's
    /// rounds ship what is left when the application does not call in.
    pub(super) fn ship_area(&mut self, n: &mut Shared, w: &mut Wire) -> Result<(), LinkError> {
        if self.area_in_flight {
            return Ok(()); // its completion frees the buffer; a later round ships what is new
        }
        let now = self.our_area.get().snapshot();
        let shipped = self.area_sent[1];
        // A grant our SENDs carried is on its way to the peer once all of them went (none waits
        // here, for credit, room or a pause): only the rest needs shipping.
        let carried = self.tx.outgoing.is_empty() && w.sq.unsent_len() == 0;
        let known = match w.flow.as_mut() {
            Some(f) if carried => f.grant_known_to_peer(shipped),
            _ => shipped,
        };
        let known_all =
            now[0] == self.area_sent[0] && now[1] <= known && now[2] == self.area_sent[2];
        let taken_due = self.rx.taken.due();
        if known_all && !taken_due {
            return Ok(()); // the peer knows it all: what an idle poll's round finds
        }
        // The peer has used all the credit it knows of: it may be waiting for this grant, and
        // no reply of ours is carrying it; or it may be waiting for room in our inbox.
        let starved = taken_due
            || w.flow
                .as_mut()
                .is_some_and(|f| f.peer_waits_for(now[1], shipped));
        let pause = if starved {
            Duration::ZERO
        } else if n.now() < self.wr_sent_at.after(AREA_WHILE_SENDING) {
            AREA_WHILE_SENDING
        } else {
            AREA_WHILE_RECEIVING
        };
        if now[0] == self.area_sent[0] && n.now() < self.area_sent_at.after(pause) {
            return Ok(());
        }
        let (to, to_channel) = (self.peer_landing, self.peer_chan);
        let taken = self.rx.taken.now();
        if !n.write_area(self.ch.id, self.peer_addr, to, to_channel, (now, taken))? {
            return Ok(()); // no room now: the next round tries again
        }
        self.area_in_flight = true;
        self.area_sent = now;
        self.rx.taken.shipped(taken);
        self.area_sent_at = n.now();
        Ok(())
    }

    /// Hands our waiting WRs to the sending step, in order, while credit lasts. (The look is
    /// inline: the usual round has nothing of ours waiting to go.)
    #[inline(always)]
    pub(super) fn transmit(&mut self, n: &mut Shared, w: &mut Wire, out: &mut Outcome) {
        if w.sq.next_unsent().is_some() {
            self.transmit_waiting(n, w, out);
        }
    }

    #[inline(never)]
    fn transmit_waiting(&mut self, n: &mut Shared, w: &mut Wire, out: &mut Outcome) {
        let fragment = w.packet_gate().map_or(FRAGMENT, |g| g.pmtu.min(FRAGMENT));
        let mut carrier = Queuer {
            link: self,
            node: n,
            fragment,
        };
        crate::transport::transmit::transmit(w, &mut carrier, out);
    }
    /// Sends queued messages in order, fragment by fragment, while libfabric takes them and, for
    /// a rate-limited queue, while the pacer's grants last and its priority is not paused.
    /// (Fragments are this provider's packets: the first carries the header of the WR,
    /// `KIND_MORE` the others.) `w`, the queue's wire (None once it is leaving), gives the
    /// gates and counts the packets and what went in place.
    /// (The look is inline: in the usual round all went in the post.)
    #[inline(always)]
    pub(super) fn flush(&mut self, n: &mut Shared, w: Option<&mut Wire>) -> Result<(), LinkError> {
        match self.tx.outgoing.is_empty() {
            true => Ok(()),
            false => self.flush_queued(n, w),
        }
    }

    #[inline(never)]
    fn flush_queued(&mut self, n: &mut Shared, mut w: Option<&mut Wire>) -> Result<(), LinkError> {
        self.tx.answers.mark_carried(&mut self.tx.outgoing);
        let (gate, paused) = w
            .as_ref()
            .map_or((None, false), |w| (w.packet_gate(), w.paused()));
        // The queue's log of departures, if it keeps one, is lent to the tally.
        let mut tally = Tally {
            departures: w.as_mut().and_then(|w| w.departures.take()),
            ..Default::default()
        };
        let mut flushed = self.flush_gated(n, gate, paused, &mut tally);
        // Fragments wait for the peer's share (`QUEUED_PER_PEER`), and libfabric moves bytes
        // only when progressed: progress it while that frees some, so a round hands over what
        // the connection takes now, not one share (a sender that posted and sleeps is moved
        // by a round a millisecond, and 4 MiB took 68 ms where they had taken 8).
        for _ in 0..ROOM_TURNS {
            if flushed.is_err() || !std::mem::take(&mut tally.refused_room) {
                break;
            }
            let before = n.queued_for(self.peer);
            n.progress(self.ch.id)?;
            if n.queued_for(self.peer) >= before {
                break; // the connection takes no more now
            }
            flushed = self.flush_gated(n, gate, paused, &mut tally);
        }
        if self.tx.outgoing.is_empty()
            && self.tx.answers.went()
            && let Some(w) = w.as_mut()
        {
            w.zero_copy.answers_carried += 1;
        }
        if tally.packets > 0 {
            let after = n.ep.stream_at(self.peer_addr);
            self.tx.newest_packet.handed(tally.stream_before, after);
        }
        if let Some(w) = w {
            w.packets_left(tally.packets);
            w.departures = tally.departures;
            w.zero_copy.by_ref_wr += tally.in_place_wr;
            w.zero_copy.by_ref_bytes += tally.in_place_bytes;
        }
        flushed
    }

    fn flush_gated(
        &mut self,
        n: &mut Shared,
        gate: Option<PacketGate>,
        paused: bool,
        tally: &mut Tally,
    ) -> Result<(), LinkError> {
        let (id, peer, dst) = (self.ch.id, self.peer_addr, self.peer_chan);
        let to = (self.peer, peer);
        let inject_size = n.ep.inject_size();
        let now = n.now();
        let Tx {
            outgoing,
            allowance,
            answers_queued,
            flight,
            flight_base,
            call_upto,
            held_since,
            ..
        } = &mut self.tx;
        loop {
            let (count, bytes) = match gate {
                None => bundle_of(outgoing),
                Some(_) => (0, 0), // a paced queue's fragments are its packets
            };
            if count > 0 {
                if !allowance.room_for(bytes) {
                    return Ok(()); // the peer's inbox is full: its rounds' taking makes room
                }
                // Without room in the peer's share of libfabric, or a send buffer free, the
                // bundle waits.
                let room = room_or_wait(n, (to.0, id), bytes, tally);
                let sent = room.then(|| send_bundle(n, outgoing, count, bytes, (to, id, dst)));
                match sent.flatten() {
                    None => {
                        let waits = &outgoing[0];
                        return held_back(
                            waits,
                            (flight, *flight_base),
                            call_upto,
                            held_since,
                            now,
                        );
                    }
                    Some(Ok(())) => {}
                    Some(Err(code)) => return sending_failed(code, &outgoing[0], call_upto),
                }
                allowance.sent(bytes);
                n.said(self.peer, id);
                *held_since = None;
                for o in outgoing.drain(..count) {
                    went(&o, answers_queued);
                    if let Some(f) = flight_of(flight, *flight_base, o.wr_seq) {
                        f.unfinished += 1;
                    }
                    all_sent(&o, flight, *flight_base, call_upto);
                }
                continue;
            }
            let Some(o) = outgoing.front_mut() else {
                return Ok(());
            };
            let len = (o.total() - o.done).min(o.fragment as u64) as usize;
            if let (Some(g), Body::Wr(wr)) = (gate, &o.body)
                && (paused || o.done + len as u64 > g.allowed(*wr, o.total()))
            {
                return Ok(()); // packets go as granted, and not while our priority is paused
            }
            let frame = o.header.kind == KIND_CONTROL;
            if !frame && !allowance.room_for(HEADER + len) {
                return Ok(()); // the peer's inbox is full (a link's frame goes all the same)
            }
            let mut h = o.header;
            if o.started {
                h.kind = KIND_MORE;
            }
            h.len = len as u32;
            h.dst = dst;
            if o.fragment < FRAGMENT && tally.packets == 0 {
                // Where the stream stands before this flush's first packet (`NewestPacket`).
                tally.stream_before = n.ep.stream_at(peer);
            }
            let room =
                HEADER + len <= inject_size || room_or_wait(n, (to.0, id), HEADER + len, tally);
            let sent = match room.then(|| send_fragment(n, o, &h, to, id)).flatten() {
                Some(sent) => sent,
                None => return held_back(o, (flight, *flight_base), call_upto, held_since, now),
            };
            let sent = match sent {
                Ok(sent) => sent,
                Err(code) => return sending_failed(code, o, call_upto),
            };
            allowance.sent(HEADER + len);
            if sent != Sent::Injected
                && let Some(f) = flight_of(flight, *flight_base, o.wr_seq)
            {
                f.unfinished += 1;
            }
            n.said(self.peer, id);
            *held_since = None;
            if o.fragment < FRAGMENT {
                tally.packet_left(len as u64);
            }
            if sent == Sent::InPlace {
                o.in_place += len as u64;
                tally.in_place_bytes += len as u64;
            }
            o.started = true;
            o.done += len as u64;
            if o.done == o.total() {
                tally.in_place_wr += (o.in_place > 0) as u64;
                all_sent(o, flight, *flight_base, call_upto);
                went(o, answers_queued);
                outgoing.pop_front();
            }
        }
    }
}

/// All of `o` went to libfabric: an answer to the peer's READ no longer waits
/// (`Tx::answers_queued`).
fn went(o: &Outgoing, answers_queued: &mut u64) {
    if o.header.kind == KIND_READ_RESP {
        *answers_queued = answers_queued.saturating_sub(o.total());
    }
}

/// All of `o` went to libfabric: the WR it carries is sent, and one the peer's library runs
/// is called for.
fn all_sent(o: &Outgoing, flight: &mut VecDeque<Flight>, base: u64, call_upto: &mut u64) {
    if let Some(f) = flight_of(flight, base, o.wr_seq) {
        f.sent = true;
        if !f.quick {
            *call_upto = o.wr_seq.map_or(0, |s| s + 1);
        }
    }
}

/// Whether channel `id` may hand `len` more bytes to libfabric for peer `p` (`has_room`); if
/// not, it asks to be told when it may (`want_room`).
fn room_or_wait(
    n: &mut Shared,
    (p, id): (usize, ChannelId),
    len: usize,
    tally: &mut Tally,
) -> bool {
    if n.has_room(p, id, len) {
        return true;
    }
    n.want_room(id);
    tally.refused_room = true;
    false
}

/// `o` waits for room in libfabric (the peer's share of it, or a send buffer), which our
/// messages in flight free as the peer takes them in: a WR the peer's library runs is called
/// for now, as once all sent (`all_sent`). A WRITE of a few MiB as a message to a peer whose
/// application sleeps fills both, and only the peer's progress thread, called, reads on
/// (never called, it ran one fragment a liveness ping). A SEND, which completes once sent, is
/// called for once our messages have waited `HELD_QUIET` with no room freed (`held_since`,
/// which a flush that sends clears): in a stream to a polling peer they wait for room all the
/// time, and calling at once rang that peer's thread 380 times in 2,000 SENDs of 1 MiB, which
/// then ran 6 % slower; to a sleeping peer, 16 SENDs of 1 MiB had waited 0.5 s for its
/// liveness ping.
fn held_back(
    o: &Outgoing,
    (flight, base): (&VecDeque<Flight>, u64),
    call_upto: &mut u64,
    held_since: &mut Option<Stamp>,
    now: Stamp,
) -> Result<(), LinkError> {
    let Some(seq) = o.wr_seq else {
        return Ok(());
    };
    let since = *held_since.get_or_insert(now);
    let quick = seq
        .checked_sub(base)
        .and_then(|i| flight.get(i as usize))
        .is_none_or(|f| f.quick);
    if !quick || now >= since.after(HELD_QUIET) {
        *call_upto = (*call_upto).max(seq + 1);
    }
    Ok(())
}

/// libfabric did not take `o`: with `FI_EAGAIN` it cannot yet (the connection may wait for the
/// peer's progress to accept it, or for the peer to connect to us, or its socket for the peer
/// to read), so the peer is called to this WR as well; anything else ends the link once the
/// peer's last messages are in (`Link::last_words`).
fn sending_failed(code: i32, o: &Outgoing, call_upto: &mut u64) -> Result<(), LinkError> {
    if code != sys::FI_EAGAIN {
        crate::log_info!("umq_fabric", "send failed: {}", sys::strerror(code));
        return Err(lost("peer unreachable over the network"));
    }
    if let Some(seq) = o.wr_seq {
        *call_upto = (*call_upto).max(seq + 1);
    }
    Ok(())
}

/// How long our messages may wait for room in libfabric, none sent, before a SEND among them
/// calls the peer (`held_back`): a polling peer stopped by a busy host for `UNANSWERED`
/// (200 us) had 56-65 rings in a stream of 20,000 SENDs of 64 KiB, and the stream ran slower.
pub(super) const HELD_QUIET: Duration = Duration::from_millis(1);

/// How many times a flush progresses libfabric at most while that frees room in the peer's
/// share for its waiting fragments: a share a time, 8 MiB of 64 KiB fragments, more than a
/// flow-control window.
const ROOM_TURNS: usize = 128;

/// Payload bytes a message has at most to go in a bundle. Above it, a message goes alone and
/// libfabric reads its payload in place (`in_place`); below it, copying the payload into the
/// bundle costs less than the message libfabric would send for it.
const BUNDLED_AT_MOST: u64 = 16384;
/// The largest WRITE or READ that goes as a message rather than by RMA when WRs wait behind it,
/// where the provider carries RMA in software. Over tcp each RMA is a libfabric message and its
/// acknowledgment (UCX's, two active messages), where our messages bundle: 64 B WRITE streams to
/// a polling target ran at 154 k/s by RMA and 0.9-1.4 M/s as messages. To a target asleep, whose
/// library runs our messages only as its progress thread serves the call bell, a WRITE's payload
/// waits in its receive buffers: 64 B and 128 B WRITE streams still ran at 147-334 k/s as
/// messages, but 256 B ones over the UCX engine at 68-74 k/s against 83-114 k/s by RMA, and 1 KiB
/// ones at 22-53 k/s against about 110 k/s. A READ's request is a bare header: 64 B READ streams
/// to a sleeping target ran at 0.8-0.97 M/s as messages, 1 KiB ones at 131-406 k/s, against
/// 98-140 k/s by RMA.
fn streamed_at_most(opcode: umq_opcode_t) -> u64 {
    match opcode {
        UMQ_OPC_WRITE => 128,
        _ => 1024,
    }
}

/// An RMA WR of this many bytes or more has its ring ask the target's progress thread to watch
/// the connection while it serves them (`CallBell::ring_rma`): one serve may not find all of
/// it arrived, or write all of a READ's answer, and the thread's timed looks then decide.
/// Streams to a target asleep, before and after watching, `umq-perf --provider fabric --test
/// rma --shared-pool off --target sleep`: 16 KiB WRITEs 3.7 k against 68-73 k WRs/s, READs 62-65
/// k against 88-104 k; 64 KiB WRITEs 3.8 k against 61-74 k. Below it a serve finds the WRs
/// whole and the stream's rings, one a round trip, serve it: 4 KiB streams watched ran 8-10 %
/// slower, the thread woken for every few WRs.
const WATCHED_FROM: u64 = 16 << 10;

/// The most WRITEs of a stream that go as messages past `streamed_at_most` may be in flight
/// while the peer's library runs our messages unrung: enough bundles to keep a stream to a
/// polling peer going, few enough that a peer that stops polling keeps few of them waiting for
/// its call bell (1,024 of 4 KiB, more than it keeps receive buffers for, ran at about 500 a
/// second). A peer that starts serving gets one more for each WR it answers, as TCP's slow
/// start grows its window: a sleeping target's progress thread, still serving the rings of
/// our last RMAs, once answered a look unrung, and the 128 WRITEs sent on that took 14 ms to
/// drain through its call bell.
pub(super) const STREAMED_WHILE_SERVED: usize = 128;
/// How many go as messages to look whether a peer taken for asleep runs them unrung: one, whose
/// answer the peer injects. With eight, a sleeping target's answers went as its first bundle,
/// and libfabric's tcp held its progress thread for 7-8 ms while it grew its buffer pool for
/// that first send (a 5,000-WR stream of 4 KiB lost a third of its rate).
pub(super) const STREAMED_TO_LOOK: usize = 1;
/// The longest time between two looks at a peer that stays asleep.
pub(super) const LOOK_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// How a stream's WRITE goes where the provider carries RMA in software (`Link::streamed_way`).
enum Way {
    /// As a message, bundled with those around it; the peer's library runs it.
    Message,
    /// Not yet: our messages in flight finish first.
    Wait,
    /// As any other WR: by RMA when nothing but RMA is in flight.
    AsAnother,
}

/// How many of the messages at the front of `outgoing` go as one bundle, and the bundle's
/// bytes: whole ones, none started, none larger than `BUNDLED_AT_MOST`, up to one bounce
/// buffer, and the WRs among them numbered one after another (a send buffer's completion
/// names them as a range). (0, 0) when fewer than two would.
fn bundle_of(outgoing: &VecDeque<Outgoing>) -> (usize, usize) {
    let (mut count, mut bytes, mut last_wr) = (0, HEADER, None);
    for o in outgoing {
        let size = HEADER + o.total() as usize;
        let follows = match (last_wr, o.wr_seq) {
            (Some(p), Some(s)) => s == p + 1,
            _ => true,
        };
        let whole = !o.started && o.fragment == FRAGMENT;
        // A link-level frame goes alone: the receiving node knows it by its header's kind.
        let frame = o.header.kind == KIND_CONTROL;
        if !whole || frame || !follows || o.total() > BUNDLED_AT_MOST || bytes + size > BOUNCE {
            break;
        }
        (count, bytes, last_wr) = (count + 1, bytes + size, o.wr_seq.or(last_wr));
    }
    if count < 2 { (0, 0) } else { (count, bytes) }
}

/// Sends the first `count` messages of `outgoing` as one bundle of `bytes` from a send buffer
/// to `peer` (`to`: the peer, our channel, the peer's channel), each copied behind its header.
/// None when no send buffer is free.
fn send_bundle(
    n: &mut Shared,
    outgoing: &VecDeque<Outgoing>,
    count: usize,
    bytes: usize,
    (to, id, dst): ((usize, u64), ChannelId, u64),
) -> Option<Result<(), i32>> {
    let slot = n.tx.free.pop()?;
    let buf = n.tx.bufs.get_mut(slot * BOUNCE, bytes);
    let outer = Header {
        kind: KIND_BUNDLE,
        len: (bytes - HEADER) as u32,
        dst,
        ..Default::default()
    };
    buf[..HEADER].copy_from_slice(&outer.to_bytes());
    let (mut at, mut wrs) = (HEADER, None::<std::ops::Range<u64>>);
    for o in outgoing.iter().take(count) {
        let len = o.total() as usize;
        let h = Header {
            len: len as u32,
            dst,
            ..o.header
        };
        buf[at..at + HEADER].copy_from_slice(&h.to_bytes());
        o.copy_out(&mut buf[at + HEADER..at + HEADER + len]);
        at += HEADER + len;
        if let Some(s) = o.wr_seq {
            wrs = Some(wrs.map_or(s..s + 1, |r| r.start..s + 1));
        }
    }
    Some(n.send_slot(slot, bytes, (id, to), wrs))
}

/// The header of WR `seq`'s message, from its `pro` part: `total` payload bytes in all.
fn wr_header(pro: &umq_buf_pro_t, seq: u64, total: u64) -> Header {
    let sge = pro.remote_sge;
    Header {
        kind: KIND_WR,
        opcode: pro.opcode as u8,
        imm: pro.imm_data,
        addr: sge.addr,
        token_id: sge.token_id,
        token_value: sge.token_value,
        rlen: sge.length,
        seq,
        total,
        ..Default::default()
    }
}

/// The network's carrier: a WR joins the messages the sending step hands to libfabric, fragment
/// by fragment, and completes when the peer reports it (or, for a quick one, once all of it
/// went).
struct Queuer<'a> {
    link: &'a mut Link,
    node: &'a mut Shared,
    fragment: usize,
}

impl Carrier for Queuer<'_> {
    fn carry(&mut self, w: &mut Wire, wr: *mut umq_buf_t, _out: &mut Outcome) -> Handed {
        if let Some(handed) = self.link.by_rma(self.node, w, wr) {
            return handed;
        }
        let tx = &mut self.link.tx;
        // A message must not overtake our RMA in flight (libfabric orders neither way).
        if tx.outgoing.len() >= MAX_OUTGOING || tx.rma_in_flight > 0 {
            return Handed::NoResource;
        }
        let pro = unsafe { *(*wr).pro() };
        let seq = w.sq.next_seq();
        let total = match pro.opcode {
            UMQ_OPC_READ | UMQ_OPC_NOP => 0,
            _ => (unsafe { (*wr).total_data_size }) as u64,
        };
        tx.msg_upto = seq + 1;
        // What the peer's library takes in before it answers: the WR's bytes, or a READ's.
        let bytes = match pro.opcode {
            UMQ_OPC_READ => pro.remote_sge.length as u64,
            _ => total,
        };
        tx.msg_calls.sent(bytes);
        if bytes >= WATCHED_FROM {
            tx.msg_long_upto = seq + 1;
        }
        let mut header = wr_header(&pro, seq, total);
        let sge = pro.remote_sge;
        if matches!(pro.opcode, UMQ_OPC_WRITE | UMQ_OPC_READ)
            && tx.chunks.knows(sge.token_id, sge.token_value)
        {
            header.flags = FLAG_KNOWS_CHUNK; // its completion need not teach the chunk again
        }
        if std::mem::take(&mut tx.write_answered_later) && pro.opcode == UMQ_OPC_WRITE {
            header.flags |= FLAG_ANSWER_MAY_WAIT;
        }
        tx.outgoing.push_back(Outgoing {
            wr_seq: Some(seq),
            fragment: self.fragment,
            ..Outgoing::new(header, Body::Wr(wr))
        });
        tx.flight.push_back(Flight {
            quick: quick(pro.opcode),
            sent: false,
            unfinished: 0,
            status: None,
        });
        self.link.wr_sent_at = self.node.now();
        Handed::AtPeer
    }
}

impl Link {
    /// The post of one SEND that fits the provider's inject size while nothing of ours is
    /// queued or in flight, UCX's `uct_ep_am_short` way: `admit` (flow control) queues it,
    /// its message (header and payload, copied out at once) goes to the provider here, and it
    /// completes before the post returns, without the send loop's queues. A provider that
    /// has no room now leaves it to the send loop (`post_round`). None, with nothing changed,
    /// when it cannot go so.
    pub fn send_one_if(
        &mut self,
        w: &mut Wire,
        wr: *mut umq_buf_t,
        admit: impl FnOnce(&mut Wire, &Area) -> bool,
    ) -> Option<Outcome> {
        if !self.can_send_at_once(w, wr) || !admit(w, &self.peer_area) {
            return None;
        }
        // Admitted, it is queued: from here it goes one way or another (a link that fails
        // meanwhile fails it with the rest at its next round). Not taken at once (a
        // connection still being made refuses it), it goes by the rounds: this post's, then
        // the progress engine's, as the application may only poll the peer now.
        if let Some(out) = self.send_admitted(w, wr) {
            return Some(out);
        }
        let out = self.post_round(w).unwrap_or_default();
        Some(Outcome {
            left_for_round: true,
            ..out
        })
    }

    #[inline(always)]
    fn can_send_at_once(&self, w: &Wire, wr: *mut umq_buf_t) -> bool {
        let h = unsafe { &*wr };
        let op = h.pro().opcode;
        (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM)
            && h.data_size == h.total_data_size
            && HEADER + h.total_data_size as usize <= self.inject_size.min(HEADER + FRAGMENT)
            && w.sq.all_completed()
            && !w.paused()
            && !self.left
            && self.tx.outgoing.is_empty()
            && self.tx.flight.is_empty()
            && self.tx.rma_in_flight == 0
            && self
                .tx
                .allowance
                .room_for(HEADER + h.total_data_size as usize)
    }

    /// Injects the admitted `wr` (the next unsent WR of `w`, none ahead of it) and completes
    /// it; None, with `wr` still unsent, when the provider did not take it.
    fn send_admitted(&mut self, w: &mut Wire, wr: *mut umq_buf_t) -> Option<Outcome> {
        self.with_node(|l, n| l.send_admitted_locked(n, w, wr))
    }

    fn send_admitted_locked(
        &mut self,
        n: &mut Shared,
        w: &mut Wire,
        wr: *mut umq_buf_t,
    ) -> Option<Outcome> {
        let (pro, len) = unsafe { (*(*wr).pro(), (*wr).total_data_size) };
        let seq = w.sq.next_seq();
        let header = Header {
            len,
            dst: self.peer_chan,
            ..wr_header(&pro, seq, len as u64)
        };
        // No clock read: one was a twentieth of a ping-pong's reply on its critical path. The
        // stamps below (when we last said something to the peer, when this binding last sent)
        // only tune pings, area writes and the length of RMA pieces, and the time of the
        // node's last round is close enough for them.
        // Ahead of the message: the peer takes the grant in before it answers.
        self.ship_withheld_grant(n, w).ok()?;
        let scratch = &mut n.tx.scratch;
        scratch.clear();
        scratch.extend_from_slice(&header.to_bytes());
        // The WR's one buffer holds it whole (`can_send_at_once`): appended as it is, where
        // zeroing the room first and copying the WR's pieces into it cost 50 instructions.
        scratch.extend_from_slice(match len {
            0 => &[],
            // SAFETY: the post checked the WR's buffer, whose data_size is len.
            _ => unsafe { std::slice::from_raw_parts((*wr).buf_data as *const u8, len as usize) },
        });
        n.ep.inject(&n.tx.scratch, self.peer_addr).ok()?;
        self.tx.allowance.sent(n.tx.scratch.len());
        n.said(self.peer, self.ch.id);
        self.wr_sent_at = n.now();
        // The WR's sequence number passes as if it had flown: the next one's flight is first.
        self.tx.msg_upto = seq + 1;
        self.tx.flight_base += 1;
        let mut out = Outcome::default();
        w.finish_unsent(wr, UMQ_BUF_SUCCESS, &mut out);
        out.count_sent(pro.opcode);
        Some(out)
    }

    /// How a WRITE of `len` bytes with more WRs queued behind it goes, when it is longer than
    /// the limit for small ones (`streamed_at_most`) and short enough to bundle: as a message
    /// while the peer's library runs our messages unasked (its application polls the queue), by
    /// RMA while it does not (its library then runs messages only when its progress thread
    /// serves our call). Each is the faster way there: 4 KiB WRITE streams to a polling target
    /// ran at 1.04 M/s as messages against 311 k/s by RMA over 50,000 WRs, to a target asleep
    /// at 17 k/s against 300 k/s over 5,000 (`umq-perf --provider fabric --test rma --size
    /// 4096 --iters N --shared-pool off --target poll|sleep`). Whether the peer serves unasked
    /// is what the last messages it ran showed (`calls`); one taken for asleep is looked at
    /// again with one WRITE as a message (`STREAMED_TO_LOOK`). RMA never overtakes a message,
    /// so a WRITE waits while our messages to a peer taken for asleep finish.
    fn streamed_way(&mut self, n: &Shared, w: &Wire, opcode: umq_opcode_t, len: u64) -> Way {
        let mid = opcode == UMQ_OPC_WRITE
            && n.rma_in_software
            && len > streamed_at_most(opcode)
            && len <= BUNDLED_AT_MOST
            && w.sq.unsent_len() > 1;
        if !mid {
            return Way::AsAnother;
        }
        let messages = w.sq.in_flight() - self.tx.rma_in_flight as usize;
        // What completed since the round's last look tells whether the peer served it unrung.
        self.tx.hear_completions(w.sq.completed_seq(), n.now());
        let (t, now) = (&mut self.tx, n.now());
        if t.msg_calls.serving() {
            t.look_every = calls::RETRY_UNRUNG;
            return match messages < t.streamed_allowed {
                true => Way::Message,
                false => Way::Wait,
            };
        }
        if t.streamed_allowed > STREAMED_TO_LOOK {
            // It was serving until our messages went unanswered for a while, which a stop of a
            // busy host can do too: look again as soon as they are answered.
            t.streamed_allowed = STREAMED_TO_LOOK;
            t.look_at = now;
            t.msg_calls.retry_now(now);
        }
        if messages > 0 {
            return Way::Wait; // a look, or the last messages before the peer fell asleep
        }
        // A look holds the stream until it is answered: it is taken when none of ours is in
        // flight (a stream's start, or a gap in it), not by stopping the stream, whose RMA
        // takes 1-2 ms to drain over the UCX engine.
        match t.looks_now(now) {
            true => Way::Message,
            false => Way::AsAnother,
        }
    }

    /// Whether a WRITE of `len` bytes goes as a message whose answer the peer's reply may carry
    /// (`HeldAnswers`), rather than by RMA, whose acknowledgment the peer's provider sends at
    /// once, ahead of anything the peer's application does with the bytes. Over tcp both are
    /// served by the peer's process. It goes so when it carries answers of ours that wait; when
    /// the peer's last answer to such a WRITE came carried (it answers WRITEs with WRs of its
    /// own) and its library runs our messages unrung; or as a look (`Tx::looks_now`), which
    /// only a peer whose provider serves our RMA unrung gets. Otherwise by RMA: a peer asleep
    /// has its progress thread serve RMA without our library's part, and a lone WRITE to a
    /// polling peer that sends nothing back completes sooner by RMA (13 against 10.7 µs over
    /// libfabric's tcp, `umq-perf --provider fabric --test rma --target poll`).
    fn answered_as_message(&mut self, n: &Shared, w: &Wire, len: u64) -> bool {
        let (t, now) = (&mut self.tx, n.now());
        if !n.rma_in_software || len > BUNDLED_AT_MOST {
            return false;
        }
        // What completed since the round's last look tells whether the peer served it unrung.
        t.hear_completions(w.sq.completed_seq(), now);
        if t.answers.held() {
            return t.msg_calls.tries_unrung(now); // it carries them
        }
        if !t.rma_calls.serving() {
            return false;
        }
        (t.peer_carries && t.msg_calls.serving()) || t.looks_now(now)
    }

    /// Starts `wr` by RMA when it is a WRITE or READ of one buffer into a data area of a chunk
    /// of the peer's that our WRs learned, under the token learned with it, and nothing of
    /// ours but RMA is in flight (so it overtakes no message, as a message never overtakes
    /// it): whole, or in pieces the node starts as the peer's share frees (`pieces`). None
    /// when it goes as a message (`rma`).
    fn by_rma(&mut self, n: &mut Shared, w: &mut Wire, wr: *mut umq_buf_t) -> Option<Handed> {
        let h = unsafe { &*wr };
        let (opcode, sge) = (h.pro().opcode, h.pro().remote_sge);
        let len = match opcode {
            UMQ_OPC_WRITE if h.data_size == h.total_data_size => h.total_data_size as u64,
            UMQ_OPC_READ if h.buf_size >= sge.length => sge.length as u64,
            _ => return None,
        };
        let held = w.packet_gate().is_some() || w.paused();
        if held || len > sge.length as u64 || n.rma.is_none() {
            return None;
        }
        match self.streamed_way(n, w, opcode, len) {
            Way::Message => return None,
            Way::Wait => return Some(Handed::NoResource),
            Way::AsAnother => {}
        }
        let alone = w.sq.in_flight() == self.tx.rma_in_flight as usize;
        if !alone {
            return None;
        }
        if opcode == UMQ_OPC_WRITE && self.answered_as_message(n, w, len) {
            self.tx.write_answered_later = true;
            return None;
        }
        // A provider that carries RMA in software sends each as a message of its own, with its
        // acknowledgment: small WRs queued behind each other go faster as our messages, bundled
        // (`streamed_at_most`). A lone one goes by RMA (unless a reply carries its answer,
        // above).
        if n.rma_in_software && len <= streamed_at_most(opcode) && w.sq.unsent_len() > 1 {
            return None;
        }
        if crate::buf::wr_bufs(wr).count() != 1 {
            return None;
        }
        let peer = self.peer_addr;
        let to = match self
            .tx
            .chunks
            .reach(sge.addr, len, sge.token_id, sge.token_value)?
        {
            rma::Reach::Key(key) => key,
            rma::Reach::Packed { addr, key } => RemoteKey {
                addr,
                key: n.peer_key(peer, key)?,
            },
        };
        let op = match opcode {
            UMQ_OPC_WRITE => sys::Rma::Write,
            _ => sys::Rma::Read,
        };
        // In lone pieces while no other binding sends to the peer, else in pieces behind its
        // share (`pieces`); after the pieces an earlier WR of ours still has to start.
        let id = self.ch.id;
        let (most, past_share) = n.piece_for(self.peer, id, op);
        let seq = w.sq.next_seq();
        let to = ((self.peer, peer), to);
        let first = pieces::Pieces::first((seq, op), (h.buf_data as usize, len), to, most);
        if n.pieces_wait(id) || !n.rma_has_room(self.peer, id, (op, first.len), past_share) {
            n.want_room(id);
            return Some(Handed::NoResource);
        }
        if opcode == UMQ_OPC_READ {
            target::set_read_sizes(wr, 1, len as usize);
        }
        // SAFETY: the WR's buffer is the send queue's until its completion, which comes only
        // after libfabric finished every piece.
        match unsafe { n.start_rma(id, &first, len) } {
            Ok(()) => {}
            Err(sys::FI_EAGAIN) => return Some(Handed::NoResource),
            Err(_) => return None, // the message path reports what is wrong
        }
        self.tx.flight.push_back(Flight {
            quick: false,
            sent: true,
            unfinished: 0,
            status: None,
        });
        // The first of a batch calls the peer's provider; the ones behind it ride on that
        // serve, or on the queue's call when its WRs stop moving.
        self.tx.rma_call |= self.tx.rma_in_flight == 0;
        self.tx.rma_in_flight += 1;
        self.tx.rma_upto = seq + 1;
        if len >= WATCHED_FROM {
            self.tx.rma_long_upto = seq + 1;
        }
        w.zero_copy.one_sided_rma_wr += 1;
        Some(Handed::AtPeer)
    }
}

/// What a flush sent: packets of a rate-limited queue, and WRs (and their bytes) whose payload
/// libfabric read in place.
#[derive(Default)]
struct Tally {
    packets: u64,
    in_place_wr: u64,
    in_place_bytes: u64,
    /// The queue's log of when its packets went, while it keeps one (`Wire::departures`).
    departures: Option<Box<ArrivalLog>>,
    /// The connection's stream just before the first packet went.
    stream_before: Option<sys::StreamAt>,
    /// A fragment waits for room in the peer's share of libfabric.
    refused_room: bool,
}

impl Tally {
    /// A packet of `bytes` went (`Wire::packet_left`, on the tally).
    fn packet_left(&mut self, bytes: u64) {
        self.packets += 1;
        if let Some(log) = self.departures.as_mut() {
            log.note(bytes);
        }
    }
}

/// How a fragment went.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Sent {
    /// Copied out by libfabric at once (inject): no completion.
    Injected,
    /// From a send buffer, the payload copied there.
    Copied,
    /// Its header from a send buffer, its payload read in place from the WR's buffer.
    InPlace,
}

/// Hands the next fragment of `o` (its header `h`) to libfabric for peer `to` (its index and
/// address): copied out at once when it fits the inject size and the engine takes it so
/// (`sys::INJECT_LATER`), else with its header in one of
/// the node's send buffers, whose completion tells channel `id` that a fragment of its WR went,
/// and its payload read in place from the WR's buffer (`in_place`) or copied behind the header.
/// None when no send buffer is free. (The caller asks whether the peer's share of libfabric has
/// room, `QUEUED_PER_PEER`; an injected fragment does not count: libfabric copied it out.)
fn send_fragment(
    n: &mut Shared,
    o: &Outgoing,
    h: &Header,
    to: (usize, u64),
    id: ChannelId,
) -> Option<Result<Sent, i32>> {
    let len = HEADER + h.len as usize;
    if len <= n.ep.inject_size() {
        let scratch = &mut n.tx.scratch;
        scratch.clear();
        scratch.extend_from_slice(&h.to_bytes());
        scratch.resize(len, 0);
        o.copy_out(&mut scratch[HEADER..]);
        match n.ep.inject(&n.tx.scratch, to.1) {
            Err(sys::INJECT_LATER) => {} // with a completion, below
            sent => return Some(sent.map(|()| Sent::Injected)),
        }
    }
    let slot = n.tx.free.pop()?;
    let wr = o.wr_seq.map(|seq| seq..seq + 1);
    let payload = in_place(n, o, h.len as usize);
    let buf = n.tx.bufs.get_mut(slot * BOUNCE, len);
    buf[..HEADER].copy_from_slice(&h.to_bytes());
    Some(match payload {
        Some(body) => n
            .send_slot_in_place((slot, HEADER), body, (id, to), wr)
            .map(|()| Sent::InPlace),
        None => {
            o.copy_out(&mut buf[HEADER..]);
            n.send_slot(slot, len, (id, to), wr).map(|()| Sent::Copied)
        }
    })
}

/// Where the next `len` payload bytes of `o` lie in one of its WR's buffers, with a hold on
/// that buffer's chunk (and its registration, where the provider needs one), when the provider
/// can send them from there: then no byte of the payload is copied on this side. None: they
/// are copied into the send buffer.
fn in_place(n: &mut Shared, o: &Outgoing, len: usize) -> Option<InPlace> {
    let Body::Wr(wr) = o.body else {
        return None;
    };
    if !n.ep.sends_in_place() {
        return None;
    }
    let (at, size) = target::pieces_from(target::pieces(wr), o.done as usize).next()?;
    if size < len {
        return None; // the fragment spans two buffers
    }
    let lease = n.tx.lender.upgrade()?.lease(at, len)?;
    let (desc, local) = match n.ep.sends_in_place_registered() {
        // Our chunks are registered through the node's RMA exposure; without one, copied.
        true => n.rma.as_mut()?.local_desc(&n.ep, at as usize, len)?,
        false => (std::ptr::null_mut(), None),
    };
    Some(InPlace {
        at: (at as *const u8, len),
        lease,
        desc,
        local,
    })
}
