//! The sending side: our WRs (and responses, updates, pings) as messages, fragment by
//! fragment, and our WRs' completions in order.

use super::*;

/// One of our WRs between the sending step and its completion.
pub(super) struct Flight {
    /// Completes once sent (SEND, SEND_IMM, NOP), else when the peer reports it executed.
    pub(super) quick: bool,
    /// Every fragment handed to libfabric.
    pub(super) sent: bool,
    /// Fragments sent from our buffers that libfabric has not yet reported sent: a SEND
    /// completes only once none is left, so that what it carried no longer depends on this
    /// process (a fragment still queued inside libfabric dies with it).
    pub(super) unfinished: u32,
    pub(super) status: Option<umq_buf_status_t>,
}

pub(super) struct Outgoing {
    pub(super) header: Header,
    pub(super) body: Body,
    /// Payload bytes handed to libfabric so far, and whether a first fragment went.
    pub(super) done: u64,
    pub(super) started: bool,
    /// Our WR this message carries (its sequence number).
    pub(super) wr_seq: Option<u64>,
    /// Payload bytes a fragment carries at most: `FRAGMENT`, or a rate-limited queue's PMTU
    /// (each fragment is then one of its packets, sent as the pacer grants it).
    pub(super) fragment: usize,
}

pub(super) enum Body {
    None,
    /// The payload of our WR, read from its buffers as it goes.
    Wr(*mut umq_buf_t),
    Owned(Vec<u8>),
}

impl Outgoing {
    pub(super) fn control(header: Header) -> Outgoing {
        Outgoing {
            header,
            body: Body::None,
            done: 0,
            started: false,
            wr_seq: None,
            fragment: FRAGMENT,
        }
    }

    pub(super) fn total(&self) -> u64 {
        self.header.total
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

impl Tx {
    /// libfabric is done with the buffer `slot`: it is free, and the WR whose fragment it
    /// carried has one fragment fewer to wait for.
    pub(super) fn sent_from(&mut self, slot: usize) {
        self.free.push(slot);
        if let Some(f) = flight_of(
            &mut self.flight,
            self.flight_base,
            self.slot_wr[slot].take(),
        ) {
            f.unfinished -= 1;
        }
    }
}

impl Link {
    /// Completes our WRs in order, as far as they are done.
    pub(super) fn complete(&mut self, w: &mut Wire, out: &mut Outcome) {
        while let Some(f) = self.tx.flight.front() {
            let status = match (f.quick, f.sent, f.status) {
                (_, _, Some(s)) => s,
                (true, true, None) if f.unfinished == 0 => UMQ_BUF_SUCCESS,
                _ => break,
            };
            let wr = w.sq[w.delivered];
            unsafe {
                (*wr).set_status(status);
                target::restore_piggyback_carrier(wr, w.flow.is_some());
            }
            self.tx.flight.pop_front();
            self.tx.flight_base += 1;
            w.delivered += 1;
            w.tx_done_seq += 1;
            w.in_flight -= 1;
            out.tx_done += 1;
        }
    }

    /// Writes our flow-control area into the peer's landing words (libfabric RMA: no receive
    /// buffer, no completion at the peer) when it changed since we last did: at once for a new
    /// initial window (the peer is IDLE until it has it), else after a pause. Grants also travel
    /// in announcements piggybacked on our SENDs, so while we send WRs the pause is long
    /// (`AREA_WHILE_SENDING`: a ping-pong's replies carry the credit); a pure receiver, whose
    /// peer may have no receive buffer for a standalone update, ships it soon
    /// (`AREA_WHILE_RECEIVING`: a stream's credit). It always arrives: the progress thread's
    /// rounds ship it when the application does not call in.
    pub(super) fn ship_area(&mut self) -> Result<(), LinkError> {
        if self.area_in_flight {
            return Ok(()); // its completion frees the buffer; a later round ships what is new
        }
        let now = self.our_area.get().snapshot();
        let pause = if self.wr_sent_at.elapsed() < AREA_WHILE_SENDING {
            AREA_WHILE_SENDING
        } else {
            AREA_WHILE_RECEIVING
        };
        if now == self.area_sent
            || (now[0] == self.area_sent[0] && self.area_sent_at.elapsed() < pause)
        {
            return Ok(());
        }
        let out = self.area_out.get_mut(0, AREA_BYTES);
        for (chunk, w) in out.chunks_exact_mut(8).zip(now) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        let written = self.ep.write(
            &self.area_out,
            0,
            AREA_BYTES,
            self.peer,
            self.peer_landing,
            AREA_TAG,
        );
        match written {
            Ok(()) => self.area_in_flight = true,
            Err(sys::FI_EAGAIN) => return Ok(()), // the next round tries again
            Err(code) => {
                crate::log_info!("umq_fabric", "area write failed: {}", sys::strerror(code));
                return Err(lost("peer unreachable over the network"));
            }
        }
        self.area_sent = now;
        self.area_sent_at = Instant::now();
        Ok(())
    }

    /// Hands our waiting WRs to the sending step, in order, while credit lasts.
    pub(super) fn transmit(&mut self, w: &mut Wire, out: &mut Outcome) {
        if w.paused() {
            return; // the peer paused our priority: no new message starts
        }
        let mut credit = CreditGate::open(w);
        let fragment = w.packet_gate().map_or(FRAGMENT, |g| g.pmtu.min(FRAGMENT));
        while w.delivered + w.in_flight < w.sq.len() && self.tx.outgoing.len() < MAX_OUTGOING {
            let wr = w.sq[w.delivered + w.in_flight];
            let pro = unsafe { *(*wr).pro() };
            if !credit.pass(w, pro.opcode) {
                out.credit_wait = true;
                break;
            }
            let seq = w.tx_done_seq + w.in_flight as u64;
            let total = match pro.opcode {
                UMQ_OPC_READ | UMQ_OPC_NOP => 0,
                _ => (unsafe { (*wr).total_data_size }) as u64,
            };
            let sge = pro.remote_sge;
            self.tx.outgoing.push_back(Outgoing {
                header: Header {
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
                },
                body: Body::Wr(wr),
                done: 0,
                started: false,
                wr_seq: Some(seq),
                fragment,
            });
            self.tx.flight.push_back(Flight {
                quick: quick(pro.opcode),
                sent: false,
                unfinished: 0,
                status: None,
            });
            w.in_flight += 1;
            self.wr_sent_at = Instant::now();
            match pro.opcode {
                UMQ_OPC_READ => out.reads += 1,
                UMQ_OPC_NOP => {}
                _ => out.sends += 1,
            }
        }
        credit.close(w);
    }

    /// Sends queued messages in order, fragment by fragment, while libfabric takes them and, for
    /// a rate-limited queue (`gate`), while the pacer's grants last and its priority is not
    /// `paused`, counting its `packets`. (Fragments are this
    /// provider's packets: the first carries the header of the WR, `KIND_MORE` the others.)
    pub(super) fn flush(
        &mut self,
        gate: Option<PacketGate>,
        paused: bool,
        packets: &mut u64,
    ) -> Result<(), LinkError> {
        let (ep, peer, said) = (&self.ep, self.peer, &mut self.said);
        let Tx {
            bufs,
            free,
            slot_wr,
            outgoing,
            flight,
            flight_base,
            scratch,
        } = &mut self.tx;
        while let Some(o) = outgoing.front_mut() {
            let n = (o.total() - o.done).min(o.fragment as u64) as usize;
            if let (Some(g), Body::Wr(wr)) = (gate, &o.body)
                && (paused || o.done + n as u64 > g.allowed(*wr, o.total()))
            {
                return Ok(()); // packets go as granted, and not while our priority is paused
            }
            let mut h = o.header;
            if o.started {
                h.kind = KIND_MORE;
            }
            h.len = n as u32;
            let len = HEADER + n;
            let sent = if len <= ep.inject_size() {
                scratch.clear();
                scratch.extend_from_slice(&h.to_bytes());
                scratch.resize(len, 0);
                o.copy_out(&mut scratch[HEADER..]);
                ep.inject(scratch, peer)
            } else {
                let Some(slot) = free.pop() else {
                    return Ok(());
                };
                let buf = bufs.get_mut(slot * BOUNCE, len);
                buf[..HEADER].copy_from_slice(&h.to_bytes());
                o.copy_out(&mut buf[HEADER..]);
                let sent = ep.send(bufs, slot * BOUNCE, len, peer, SEND_TAG | slot);
                match (sent, flight_of(flight, *flight_base, o.wr_seq)) {
                    (Err(_), _) => free.push(slot),
                    (Ok(()), Some(f)) => {
                        f.unfinished += 1;
                        slot_wr[slot] = o.wr_seq;
                    }
                    (Ok(()), None) => {}
                }
                sent
            };
            match sent {
                Ok(()) => {}
                Err(sys::FI_EAGAIN) => return Ok(()),
                Err(code) => {
                    crate::log_info!("umq_fabric", "send failed: {}", sys::strerror(code));
                    return Err(lost("peer unreachable over the network"));
                }
            }
            *said = Instant::now();
            if o.fragment < FRAGMENT {
                *packets += 1;
            }
            o.started = true;
            o.done += n as u64;
            if o.done == o.total() {
                if let Some(f) = flight_of(flight, *flight_base, o.wr_seq) {
                    f.sent = true;
                }
                outgoing.pop_front();
            }
        }
        Ok(())
    }
}
