//! The receiving side: completions taken, receive buffers posted again, and the peer's messages
//! run in order, each checked before use.

use super::*;
use crate::transport::assembly::{Assembly, Otherwise, otherwise};

impl Link {
    /// Runs the peer's messages in order until one must wait for a receive buffer.
    /// Out of line, as the work of a full round: inlined in the round, its loop's live values
    /// had the round keep its own on the stack, about 25 instructions a message more.
    #[inline(never)]
    pub(super) fn receive(
        &mut self,
        n: &mut Shared,
        w: &mut Wire,
        at: &Receiver,
        out: &mut Outcome,
    ) -> Result<(), LinkError> {
        let (inbox, bounces, exposed, ep) = n
            .inbox_and_bounces(self.ch.id)
            .ok_or(lost("the binding's network channel is gone"))?;
        let mut arrived = Arrived {
            queue: &mut inbox.arrivals,
            pending: &mut inbox.pending,
            bounces,
            released: &mut self.released,
        };
        let r = receive_messages(
            &mut self.rx,
            &mut arrived,
            &mut self.tx,
            &mut self.left,
            exposed,
            Some(ep),
            w,
            at,
            out,
        );
        n.give_back(&mut self.released);
        r
    }
}

/// The peer's messages as the node handed them to a binding: in the node's bounce buffers or
/// copied out. Bounce buffers of the messages that ran are `released`.
pub(super) struct Arrived<'a> {
    pub(super) queue: &'a mut VecDeque<node::Arrival>,
    /// The bytes in `queue` (`Inbox::pending`).
    pub(super) pending: &'a mut u64,
    pub(super) bounces: &'a sys::Buffers,
    pub(super) released: &'a mut Vec<usize>,
}

impl Arrived<'_> {
    fn front(&self) -> Option<&[u8]> {
        Some(match self.queue.front()? {
            node::Arrival::Bounce { idx, len, .. } => self.bounces.get(idx * BOUNCE, *len),
            node::Arrival::Owned(v, _) => v,
        })
    }

    /// The front message ran; its length.
    fn pop(&mut self) -> usize {
        let Some(a) = self.queue.pop_front() else {
            return 0;
        };
        let len = a.bytes();
        *self.pending -= len as u64;
        if let node::Arrival::Bounce { idx, .. } = a {
            self.released.push(idx);
        }
        len
    }
}

/// `Link::receive` on the parts of a link it touches, which need no endpoint (the fuzz target
/// runs it on buffers of its own). `exposed`: what our node may expose for RMA, if it can, and
/// `ep` the endpoint that registers it.
#[allow(clippy::too_many_arguments)]
pub(super) fn receive_messages(
    rx: &mut Rx,
    arrived: &mut Arrived,
    tx: &mut Tx,
    left: &mut bool,
    mut exposed: Option<&mut rma::Exposure>,
    ep: Option<&sys::Endpoint>,
    w: &mut Wire,
    at: &Receiver,
    out: &mut Outcome,
) -> Result<(), LinkError> {
    loop {
        if let Some((h, data)) = rx.held.take() {
            let mut run = Run {
                tx,
                left,
                executed: &mut rx.executed,
                exposed: exposed.as_deref_mut(),
                ep,
            };
            if !run.message(w, at, &h, &data, out)? {
                rx.held = Some((h, data));
                out.blocked |= !std::mem::replace(&mut rx.blocked, true);
                return Ok(());
            }
            rx.blocked = false;
            continue;
        }
        let Some(bytes) = arrived.front() else {
            return Ok(());
        };
        let outer = Header::read(bytes)?;
        let (h, payload, next) = match outer.kind {
            KIND_BUNDLE => msg::bundled(&bytes[HEADER..], rx.bundle_at)?,
            _ => (outer, &bytes[HEADER..], None),
        };
        if tx.answers_queued >= allowance::ANSWERS_AT_MOST && is_read(&h) {
            // Our answers to its READs wait to go: this one waits in the inbox, which holds up
            // the peer by its allowance, until they went.
            return Ok(());
        }
        if h.kind == KIND_CONTROL {
            // Anywhere, also between a message's fragments: the link's frames overtake.
            target::receive_control(w, payload)?;
        } else if let Some((_, assembly)) = rx.assembling.as_mut() {
            if h.kind != KIND_MORE {
                return Err(LinkError::Corrupt("fabric fragments do not make a message"));
            }
            assembly
                .add(w, payload)
                .map_err(|_| LinkError::Corrupt("fabric fragments do not make a message"))?;
            w.note_arrival(payload.len() as u64);
            if assembly.is_whole() {
                let (first, assembly) = rx.assembling.take().expect("just looked");
                if !land_assembled(w, at, &first, &assembly, &mut rx.executed, out) {
                    rx.held = Some((first, assembly.into_aside()));
                }
            }
        } else if h.kind == KIND_MORE {
            return Err(LinkError::Corrupt("a fabric fragment without its message"));
        } else if matches!(h.kind, KIND_WR | KIND_READ_RESP) && h.total > h.len as u64 {
            let (op, otherwise) = match h.kind {
                KIND_WR => {
                    let (op, largest) = (h.opcode as u32, at.pool.largest_buffer());
                    (op, otherwise(w, op, h.total, at.fragments, largest))
                }
                _ => {
                    read_answer_as_asked(w, &h)?;
                    (UMQ_OPC_READ, Some(Otherwise::Aside))
                }
            };
            let Some(otherwise) = otherwise else {
                // Longer than any one buffer, it waits in the inbox (which holds up the peer
                // by its allowance) until the posted buffers hold it together.
                out.blocked |= !std::mem::replace(&mut rx.blocked, true);
                return Ok(());
            };
            rx.blocked = false;
            let assembly = Assembly::begin(w, op, h.total, payload, otherwise)
                .map_err(|_| LinkError::Corrupt("a malformed first fabric fragment"))?;
            w.note_arrival(payload.len() as u64);
            rx.assembling = Some((h, assembly));
        } else {
            let mut run = Run {
                tx,
                left,
                executed: &mut rx.executed,
                exposed: exposed.as_deref_mut(),
                ep,
            };
            if !run.message(w, at, &h, payload, out)? {
                out.blocked |= !std::mem::replace(&mut rx.blocked, true);
                return Ok(());
            }
            rx.blocked = false;
        }
        match next {
            Some(at) => rx.bundle_at = at,
            None => {
                rx.bundle_at = 0;
                let len = arrived.pop();
                rx.taken.took(len);
            }
        }
    }
}

/// A SEND whose fragments, all arrived, were written in place in the posted receive buffers
/// (`Assembly::in_place`): it completes there, as one that came whole does (`Run::wr`). False
/// for one kept aside or nowhere, which the executor runs.
fn land_assembled(
    w: &mut Wire,
    at: &Receiver,
    h: &Header,
    assembly: &Assembly,
    executed: &mut u64,
    out: &mut Outcome,
) -> bool {
    if !assembly.in_place() {
        return false;
    }
    let mut dst = Side::new(at.umqh, w, at.fragments);
    // SAFETY: the message is whole, in place, and arrived on this wire.
    unsafe { assembly.land_in_place(&mut dst, h.opcode as umq_opcode_t, h.imm, out) };
    *executed = (*executed).max(h.seq.saturating_add(1));
    true
}

/// The first fragment `h` of an answer to our READ: Ok when that READ is in flight and asked
/// for at least the answer's length (a peer's claim of a longer answer is not kept aside on
/// its word).
fn read_answer_as_asked(w: &Wire, h: &Header) -> Result<(), LinkError> {
    let wr = target::read_in_flight(w, h.seq)?;
    match h.total <= unsafe { (*wr).pro().remote_sge.length } as u64 {
        true => Ok(()),
        false => Err(LinkError::Corrupt("a READ answer longer than the READ")),
    }
}

/// What running one of the peer's messages touches of the link.
struct Run<'a> {
    tx: &'a mut Tx,
    left: &'a mut bool,
    executed: &'a mut u64,
    exposed: Option<&'a mut rma::Exposure>,
    ep: Option<&'a sys::Endpoint>,
}

/// Whether the peer's message asks us to READ.
fn is_read(h: &Header) -> bool {
    h.kind == KIND_WR && h.opcode as umq_opcode_t == UMQ_OPC_READ
}

/// The peer as the initiator of its WR: a READ's data goes back as a message.
struct Reply<'a> {
    outgoing: &'a mut VecDeque<Outgoing>,
    /// `Tx::answers_queued`.
    queued: &'a mut u64,
    seq: u64,
}

impl target::Initiator for Reply<'_> {
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t> {
        // The bytes as they are now, as an RDMA READ would read them.
        let data = unsafe { std::slice::from_raw_parts(from, len) }.to_vec();
        let header = Header {
            kind: KIND_READ_RESP,
            seq: self.seq,
            total: len as u64,
            ..Default::default()
        };
        *self.queued += len as u64;
        self.outgoing
            .push_back(Outgoing::new(header, Body::Owned(data)));
        Some(UMQ_BUF_SUCCESS)
    }
}

impl Run<'_> {
    /// Runs one message; false when it must wait for a receive buffer.
    fn message(
        &mut self,
        w: &mut Wire,
        at: &Receiver,
        h: &Header,
        payload: &[u8],
        out: &mut Outcome,
    ) -> Result<bool, LinkError> {
        match h.kind {
            KIND_WR => self.wr(w, at, h, payload, out),
            KIND_STANDALONE => {
                let mut dst = Side::new(at.umqh, w, at.fragments);
                target::receive_standalone(&mut dst, h.imm, out)
            }
            KIND_READ_RESP => target::land_read_response(w, h.seq, payload).map(|()| true),
            KIND_DONE => {
                let i = h
                    .seq
                    .checked_sub(w.sq.completed_seq())
                    .filter(|&i| (i as usize) < self.tx.flight.len())
                    .ok_or(LinkError::Corrupt(
                        "a completion for no WR of ours in flight",
                    ))?;
                let f = &mut self.tx.flight[i as usize];
                if f.quick || f.status.is_some() {
                    return Err(LinkError::Corrupt("a completion for a WR that has one"));
                }
                f.status = Some(target::peer_status(h.status));
                self.note_carried(w, h);
                if h.status == UMQ_BUF_SUCCESS {
                    self.learn_chunk(w, h, payload);
                }
                Ok(true)
            }
            KIND_PING => Ok(true),
            KIND_CONTROL => target::receive_control(w, payload).map(|()| true),
            KIND_BYE => {
                *self.left = true;
                Ok(true)
            }
            _ => Err(LinkError::Corrupt("a fabric message of an unexpected kind")),
        }
    }

    /// Whether the peer answers our WRITEs with WRs of its own, as the answer to our WRITE
    /// `h.seq` says (`FLAG_CARRIED`).
    fn note_carried(&mut self, w: &Wire, h: &Header) {
        let Some(wr) = w.sq.in_flight_wr(h.seq) else {
            return;
        };
        if unsafe { (*wr).pro().opcode } == UMQ_OPC_WRITE {
            self.tx.peer_carries = h.flags & FLAG_CARRIED != 0;
            if self.tx.peer_carries {
                self.tx.look_every = calls::RETRY_UNRUNG; // a look found it
            }
        }
    }

    /// Remembers the chunk the peer attached to its completion of our WR `h.seq`, under the
    /// token that WR presented.
    fn learn_chunk(&mut self, w: &Wire, h: &Header, keys: &[u8]) {
        let (Some(x), Some(wr)) = (self.exposed.as_deref(), w.sq.in_flight_wr(h.seq)) else {
            return;
        };
        let sge = unsafe { (*wr).pro().remote_sge };
        let (addressing, packed) = (x.addressing(), x.packs_keys());
        if let Some(c) = rma::RemoteChunk::from_done(h, keys, sge.token_value, addressing, packed) {
            self.tx.chunks.learn(sge.token_id, c);
        }
    }

    /// Runs one of the peer's WRs here with the shared executor.
    fn wr(
        &mut self,
        w: &mut Wire,
        at: &Receiver,
        h: &Header,
        payload: &[u8],
        out: &mut Outcome,
    ) -> Result<bool, LinkError> {
        let opcode = h.opcode as umq_opcode_t;
        // A WR's length is its header's: its payload, or none for one whose fragments were
        // kept nowhere (`may_land`), which can only fail and whose bytes are never read.
        let kept = payload.len() as u64 == h.total;
        if kept
            && let Ok(len) = u32::try_from(payload.len())
            && let Some(rx) = target::whole_in_next(w, opcode, len)
        {
            // The common case in one pass, as over shared memory: a SEND that lands whole in
            // the next posted buffer, with no answer to send (`quick`).
            let mut dst = Side::new(at.umqh, w, at.fragments);
            unsafe { target::land_in(&mut dst, rx, payload.as_ptr(), len, opcode, h.imm, out) };
            *self.executed = (*self.executed).max(h.seq.saturating_add(1));
            return Ok(true);
        }
        let req = target::Request {
            opcode,
            imm: h.imm,
            len: h.total,
            src: std::iter::once((payload.as_ptr() as *mut u8, payload.len())),
            remote: umq_ref_sge_t {
                addr: h.addr,
                length: h.rlen,
                token_id: h.token_id,
                token_value: h.token_value,
                rsvd0: 0,
            },
        };
        // Our answers name the WR by the number the initiator gave it: WRs of its that went
        // by RMA took numbers too, and never came here.
        let mut reply = Reply {
            outgoing: &mut self.tx.outgoing,
            queued: &mut self.tx.answers_queued,
            seq: h.seq,
        };
        let mut dst = Side::new(at.umqh, w, at.fragments);
        let status = match target::execute_wr(&mut dst, &req, at.pool, &mut reply, out) {
            target::Executed::Done(status) => status,
            target::Executed::Wait => return Ok(false),
            target::Executed::InitiatorLeft => return Err(LinkError::PeerLeft),
        };
        if !quick(opcode) {
            let mut done = Header {
                kind: KIND_DONE,
                seq: h.seq,
                status,
                ..Default::default()
            };
            // A WRITE or READ that reached a buffer: where its chunk's data areas are (and
            // their keys, where the provider packs them), so that the initiator's next ones
            // there go by RMA (`rma`).
            let mut keys = None;
            if status == UMQ_BUF_SUCCESS
                && matches!(opcode, UMQ_OPC_WRITE | UMQ_OPC_READ)
                && h.flags & FLAG_KNOWS_CHUNK == 0
                && let Some(c) = self
                    .exposed
                    .as_deref_mut()
                    .and_then(|x| x.chunk(self.ep, h.token_id, h.token_value))
            {
                keys = c.attach(&mut done);
            }
            let may_wait = keys.is_none()
                && opcode == UMQ_OPC_WRITE
                && status == UMQ_BUF_SUCCESS
                && h.flags & FLAG_ANSWER_MAY_WAIT != 0;
            let keys = keys.map_or(Body::None, Body::Owned);
            self.tx.outgoing.push_back(Outgoing {
                may_wait,
                ..Outgoing::new(done, keys)
            });
        }
        *self.executed = (*self.executed).max(h.seq.saturating_add(1));
        Ok(true)
    }
}
