//! The network provider: a binding to a queue on another host (or, forced, on this one) over a
//! libfabric reliable-datagram endpoint (`tcp` by default, `verbs` where an RDMA device is).
//!
//! Each queue that offers the network has its own endpoint, completion queue and address
//! vector (`sys::Endpoint`), made when its bind info is asked for and taken by the binding that
//! uses it. A WR crosses as one message (fragments of at most one bounce buffer, sent back to
//! back: see `msg`) and the peer executes it with the same target-side executor as every other
//! provider, so opcodes, token checks and completion statuses mean the same everywhere. SEND,
//! SEND_IMM and NOP complete once their bytes are copied into our send buffers (transmit
//! complete, as over shared memory); WRITE, WRITE_IMM and READ when the peer reports having
//! executed them (`KIND_DONE`), a READ's data arriving first. Flow control is unchanged: each
//! side ships its flow-control area whenever it changed (`KIND_AREA`), and the peer reads
//! credit from its copy.

mod msg;
pub mod sys;

use super::LinkError;
use super::target;
use super::wire::{CreditGate, Outcome, Receiver, Side, Wire};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow::Area;
use msg::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};
pub use sys::Endpoint;

/// The binding's own queue's flow-control area, which outlives the binding: the queue owns both
/// (the area is one of its fields, or in its shared-memory inbox, whose mapping never moves and
/// which a bound queue never replaces), and the binding lives in the queue's wire.
pub struct OurArea(*const Area);

// SAFETY: an Area is atomics only; the pointer is read under the queue's wire lock.
unsafe impl Send for OurArea {}
unsafe impl Sync for OurArea {}

impl OurArea {
    /// # Safety
    /// `area` must outlive every binding made with it (see the type).
    pub unsafe fn new(area: &Area) -> OurArea {
        OurArea(area)
    }

    fn get(&self) -> &Area {
        // SAFETY: see the type: the queue that owns the area outlives its binding.
        unsafe { &*self.0 }
    }
}

/// Receive bounce buffers per binding.
const RX_BOUNCES: usize = 64;
/// Send buffers per binding: WRs beyond them wait in the send queue.
const TX_SLOTS: usize = 64;
/// WRs (and responses) handed to the sending step at most at once.
const MAX_OUTGOING: usize = 256;
/// A side with nothing to send for this long sends a ping, so its peer keeps hearing from it.
const PING_AFTER: Duration = Duration::from_millis(500);
/// The least time between two shipments of our flow-control area (`ship_area`).
const AREA_EVERY: Duration = Duration::from_millis(1);
/// Completion contexts: which buffer a completion is about.
const RECV_TAG: usize = 1 << 32;
const SEND_TAG: usize = 2 << 32;

/// How long a peer may stay silent before its binding breaks: `UMQ_FABRIC_LIVENESS_MS`,
/// default 5000 (each side pings after half a second of saying nothing, so only a peer that is
/// gone or cut off stays silent).
pub fn liveness() -> Duration {
    static MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Duration::from_millis(*MS.get_or_init(|| {
        std::env::var("UMQ_FABRIC_LIVENESS_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .unwrap_or(5000)
    }))
}

/// The completion queue of an endpoint: room for every buffer's completion.
pub const CQ_SIZE: usize = RX_BOUNCES + TX_SLOTS + 16;

/// A binding over libfabric.
pub struct Link {
    ep: Endpoint,
    peer: u64,
    peer_pid: Option<u32>,
    rx: Rx,
    tx: Tx,
    /// The peer's flow-control area, as its last `KIND_AREA` said.
    peer_area: Area,
    /// Our own area, which we ship to the peer whenever it changed.
    our_area: OurArea,
    /// Our area as we last shipped it, and when.
    area_sent: [u64; 3],
    area_sent_at: Instant,
    /// The peer said it left.
    left: bool,
    /// When we last heard from the peer and last sent it anything, and how long it may stay
    /// silent before the binding counts as broken.
    heard: Instant,
    said: Instant,
    liveness: Duration,
}

struct Rx {
    bufs: Vec<Box<[u8]>>,
    /// Our posted buffers in the order they were posted, which is the order messages match
    /// them (libfabric's send-after-send ordering); completions can come in another order (a
    /// large message's rendezvous completes after a small one behind it).
    posted: VecDeque<usize>,
    /// Per buffer: the bytes of the message it completed with, until that message ran.
    filled: Vec<Option<usize>>,
    /// Buffers to post again (a post that found no room waits here).
    repost: Vec<usize>,
    /// A fragmented message being put together, and one put together that waits to run.
    assembling: Option<(Header, Vec<u8>)>,
    /// The oldest message waits for a receive buffer (counted once, not once per round).
    blocked: bool,
    held: Option<(Header, Vec<u8>)>,
    /// The peer's WRs run here since bind (their sequence numbers).
    executed: u64,
}

struct Tx {
    bufs: Vec<Box<[u8]>>,
    free: Vec<usize>,
    /// Messages to send, in order; the first may be partly sent.
    outgoing: VecDeque<Outgoing>,
    /// Our WRs in flight, oldest first; the first has sequence number `flight_base`.
    flight: VecDeque<Flight>,
    flight_base: u64,
    scratch: Vec<u8>,
}

/// One of our WRs between the sending step and its completion.
struct Flight {
    /// Completes once sent (SEND, SEND_IMM, NOP), else when the peer reports it executed.
    quick: bool,
    sent: bool,
    status: Option<umq_buf_status_t>,
}

struct Outgoing {
    header: Header,
    body: Body,
    /// Payload bytes handed to libfabric so far, and whether a first fragment went.
    done: u64,
    started: bool,
    /// Our WR this message carries (its sequence number).
    wr_seq: Option<u64>,
}

enum Body {
    None,
    /// The payload of our WR, read from its buffers as it goes.
    Wr(*mut umq_buf_t),
    Owned(Vec<u8>),
}

impl Outgoing {
    fn control(header: Header) -> Outgoing {
        Outgoing {
            header,
            body: Body::None,
            done: 0,
            started: false,
            wr_seq: None,
        }
    }

    fn total(&self) -> u64 {
        self.header.total
    }

    /// Copies payload bytes `[done, done + dst.len())` into `dst`.
    fn copy_out(&self, dst: &mut [u8]) {
        match &self.body {
            Body::None => {}
            Body::Owned(v) => dst.copy_from_slice(&v[self.done as usize..][..dst.len()]),
            Body::Wr(wr) => copy_wr_range(*wr, self.done as usize, dst),
        }
    }
}

/// Copies `dst.len()` bytes of WR `wr`'s message, starting `from` bytes in.
fn copy_wr_range(wr: *mut umq_buf_t, from: usize, dst: &mut [u8]) {
    let mut skip = from;
    let mut at = 0;
    for (p, n) in target::pieces(wr) {
        if at == dst.len() {
            break;
        }
        if skip >= n {
            skip -= n;
            continue;
        }
        let take = (n - skip).min(dst.len() - at);
        unsafe { std::ptr::copy_nonoverlapping(p.add(skip), dst[at..].as_mut_ptr(), take) };
        at += take;
        skip = 0;
    }
}

fn quick(opcode: umq_opcode_t) -> bool {
    matches!(opcode, UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP)
}

fn lost(why: &'static str) -> LinkError {
    LinkError::Lost(why)
}

impl Link {
    /// Binds our endpoint `ep` to the peer's endpoint at `addr`, posting our receive buffers;
    /// `peer_pid` when the peer runs on this host (its exit then ends the binding at once).
    /// A peer silent for `liveness` (a host gone, a link down) breaks the binding.
    pub fn open(
        ep: Endpoint,
        addr: &[u8],
        peer_pid: Option<u32>,
        our_area: OurArea,
        liveness: Duration,
    ) -> Result<Link, String> {
        let peer = ep.connect(addr)?;
        let mut link = Link {
            ep,
            peer,
            peer_pid,
            rx: Rx {
                bufs: (0..RX_BOUNCES)
                    .map(|_| vec![0u8; BOUNCE].into_boxed_slice())
                    .collect(),
                posted: VecDeque::with_capacity(RX_BOUNCES),
                filled: vec![None; RX_BOUNCES],
                repost: (0..RX_BOUNCES).collect(),
                assembling: None,
                blocked: false,
                held: None,
                executed: 0,
            },
            tx: Tx {
                bufs: (0..TX_SLOTS)
                    .map(|_| vec![0u8; BOUNCE].into_boxed_slice())
                    .collect(),
                free: (0..TX_SLOTS).rev().collect(),
                outgoing: VecDeque::new(),
                flight: VecDeque::new(),
                flight_base: 0,
                scratch: Vec::with_capacity(BOUNCE),
            },
            peer_area: Area::default(),
            our_area,
            area_sent: [0; 3],
            area_sent_at: Instant::now(),
            left: false,
            heard: Instant::now(),
            said: Instant::now(),
            liveness,
        };
        link.repost();
        Ok(link)
    }

    pub fn peer_pid(&self) -> Option<u32> {
        self.peer_pid
    }

    pub fn peer_area(&self) -> &Area {
        &self.peer_area
    }

    /// A full round: completions, the peer's messages, our completions, our sends. (Out of
    /// line, here and in `post_round`: the other providers' fast paths inline at the dispatch.)
    #[inline(never)]
    pub fn round(&mut self, w: &mut Wire, at: &Receiver) -> Result<Outcome, LinkError> {
        let mut out = Outcome::default();
        self.reap()?;
        self.check_liveness()?;
        self.receive(w, at, &mut out)?;
        self.complete(w, &mut out);
        if self.left {
            return Err(LinkError::PeerLeft);
        }
        self.ship_area();
        self.transmit(w, &mut out);
        self.flush()?;
        self.complete(w, &mut out);
        self.repost();
        Ok(out)
    }

    /// A post's round: our sends (and the completions that free send buffers).
    #[inline(never)]
    pub fn post_round(&mut self, w: &mut Wire) -> Option<Outcome> {
        if self.left {
            return None;
        }
        let mut out = Outcome::default();
        // Reading the completion queue drives the provider's progress (system calls, for tcp):
        // a post only does when it needs send buffers back; polls do the rest.
        if self.tx.free.len() < TX_SLOTS / 2 && self.reap().is_err() {
            return None;
        }
        self.transmit(w, &mut out);
        if self.flush().is_err() {
            return None;
        }
        self.complete(w, &mut out);
        Some(out)
    }

    /// Queues a standalone window update.
    pub fn send_update(&mut self, imm: u64) -> bool {
        self.tx.outgoing.push_back(Outgoing::control(Header {
            kind: KIND_STANDALONE,
            imm,
            ..Default::default()
        }));
        true
    }

    pub fn waits_for_rx_buffer(&self) -> bool {
        self.rx.held.is_some() || self.rx.next_filled().is_some()
    }

    pub fn forget_in_flight(&mut self) {
        self.tx.flight_base += self.tx.flight.len() as u64;
        self.tx.flight.clear();
        self.tx.outgoing.retain(|o| o.wr_seq.is_none());
    }

    /// Tells the peer we leave (best effort: an unreachable peer learns it from its own
    /// errors or liveness timeout).
    pub fn leave(&mut self) {
        self.tx.outgoing.push_back(Outgoing::control(Header {
            kind: KIND_BYE,
            ..Default::default()
        }));
        for _ in 0..100 {
            if self.reap().is_err() || self.flush().is_err() || self.tx.outgoing.is_empty() {
                break;
            }
            std::thread::yield_now();
        }
    }

    /// Pings a peer we have said nothing to for a while; fails a peer silent for too long.
    fn check_liveness(&mut self) -> Result<(), LinkError> {
        if self.heard.elapsed() >= self.liveness {
            return Err(lost("peer silent for longer than the liveness timeout"));
        }
        let ping_after = PING_AFTER.min(self.liveness / 4);
        if self.tx.outgoing.is_empty() && self.said.elapsed() >= ping_after {
            self.tx.outgoing.push_back(Outgoing::control(Header {
                kind: KIND_PING,
                ..Default::default()
            }));
        }
        Ok(())
    }

    /// Takes completions: received messages join `arrived`, sent buffers come free. An error
    /// completion means the peer cannot be reached.
    fn reap(&mut self) -> Result<(), LinkError> {
        let mut cqes = [sys::Cqe {
            ctx: std::ptr::null_mut(),
            flags: 0,
            len: 0,
            err: 0,
            prov_errno: 0,
        }; 16];
        loop {
            let n = self
                .ep
                .poll(&mut cqes)
                .map_err(|_| lost("the fabric completion queue failed"))?;
            for c in &cqes[..n] {
                if c.err != 0 {
                    crate::log_info!(
                        "umq_fabric",
                        "completion error: {} (provider errno {})",
                        sys::strerror(c.err),
                        c.prov_errno
                    );
                    return Err(lost("peer unreachable over the network"));
                }
                let ctx = c.ctx as usize;
                let idx = ctx & (RECV_TAG - 1);
                match ctx & !(RECV_TAG - 1) {
                    RECV_TAG
                        if idx < RX_BOUNCES
                            && c.len as usize <= BOUNCE
                            && self.rx.filled[idx].is_none() =>
                    {
                        self.rx.filled[idx] = Some(c.len as usize);
                        self.heard = Instant::now();
                    }
                    SEND_TAG if idx < TX_SLOTS => self.tx.free.push(idx),
                    _ => return Err(lost("a fabric completion for no buffer of ours")),
                }
            }
            if n < cqes.len() {
                return Ok(());
            }
        }
    }

    fn repost(&mut self) {
        while let Some(idx) = self.rx.repost.pop() {
            let buf = self.rx.bufs[idx].as_mut_ptr();
            if self.ep.post_recv(buf, BOUNCE, RECV_TAG | idx).is_err() {
                self.rx.repost.push(idx);
                return;
            }
            self.rx.posted.push_back(idx);
        }
    }

    /// Runs the peer's messages in order until one must wait for a receive buffer.
    fn receive(&mut self, w: &mut Wire, at: &Receiver, out: &mut Outcome) -> Result<(), LinkError> {
        let Link {
            rx,
            tx,
            peer_area,
            left,
            ..
        } = self;
        loop {
            if let Some((h, data)) = rx.held.take() {
                let mut run = Run {
                    tx,
                    peer_area,
                    left,
                    executed: &mut rx.executed,
                };
                if !run.message(w, at, &h, &data, out)? {
                    rx.held = Some((h, data));
                    out.blocked |= !std::mem::replace(&mut rx.blocked, true);
                    return Ok(());
                }
                rx.blocked = false;
                continue;
            }
            let Some((idx, len)) = rx.next_filled() else {
                return Ok(());
            };
            let bytes = &rx.bufs[idx][..len];
            let h = Header::read(bytes)?;
            let payload = &bytes[HEADER..];
            if let Some((first, data)) = rx.assembling.as_mut() {
                if h.kind != KIND_MORE || data.len() as u64 + payload.len() as u64 > first.total {
                    return Err(LinkError::Corrupt("fabric fragments do not make a message"));
                }
                data.extend_from_slice(payload);
                if data.len() as u64 == first.total {
                    rx.held = rx.assembling.take();
                }
            } else if h.kind == KIND_MORE {
                return Err(LinkError::Corrupt("a fabric fragment without its message"));
            } else if h.total > h.len as u64 {
                let mut data = Vec::with_capacity((h.total as usize).min(1 << 20));
                data.extend_from_slice(payload);
                rx.assembling = Some((h, data));
            } else {
                let mut run = Run {
                    tx,
                    peer_area,
                    left,
                    executed: &mut rx.executed,
                };
                if !run.message(w, at, &h, payload, out)? {
                    out.blocked |= !std::mem::replace(&mut rx.blocked, true);
                    return Ok(());
                }
                rx.blocked = false;
            }
            rx.posted.pop_front();
            rx.filled[idx] = None;
            rx.repost.push(idx);
        }
    }

    /// Completes our WRs in order, as far as they are done.
    fn complete(&mut self, w: &mut Wire, out: &mut Outcome) {
        while let Some(f) = self.tx.flight.front() {
            let status = match (f.quick, f.sent, f.status) {
                (_, _, Some(s)) => s,
                (true, true, None) => UMQ_BUF_SUCCESS,
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

    /// Queues our flow-control area when it changed since we last shipped it: at once for a new
    /// initial window (the peer is IDLE until it has it), else at most every `AREA_EVERY`.
    /// Grants travel in piggybacked and standalone announcements too; the area is what a peer
    /// without either reads, so it may lag a little, but it always arrives (the progress
    /// thread's rounds ship it when the application does not call in).
    fn ship_area(&mut self) {
        let now = self.our_area.get().snapshot();
        if now == self.area_sent
            || (now[0] == self.area_sent[0] && self.area_sent_at.elapsed() < AREA_EVERY)
        {
            return;
        }
        self.area_sent = now;
        self.area_sent_at = Instant::now();
        self.tx.outgoing.push_back(Outgoing::control(Header {
            kind: KIND_AREA,
            imm: now[0],
            addr: now[1],
            seq: now[2],
            ..Default::default()
        }));
    }

    /// Hands our waiting WRs to the sending step, in order, while credit lasts.
    fn transmit(&mut self, w: &mut Wire, out: &mut Outcome) {
        let mut credit = CreditGate::open(w);
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
            });
            self.tx.flight.push_back(Flight {
                quick: quick(pro.opcode),
                sent: false,
                status: None,
            });
            w.in_flight += 1;
            match pro.opcode {
                UMQ_OPC_READ => out.reads += 1,
                UMQ_OPC_NOP => {}
                _ => out.sends += 1,
            }
        }
        credit.close(w);
    }

    /// Sends queued messages in order, fragment by fragment, while libfabric takes them.
    fn flush(&mut self) -> Result<(), LinkError> {
        let (ep, peer, said) = (&self.ep, self.peer, &mut self.said);
        let Tx {
            bufs,
            free,
            outgoing,
            flight,
            flight_base,
            scratch,
        } = &mut self.tx;
        while let Some(o) = outgoing.front_mut() {
            let n = (o.total() - o.done).min(FRAGMENT as u64) as usize;
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
                ep.send(scratch, peer, None)
            } else {
                let Some(slot) = free.pop() else {
                    return Ok(());
                };
                let buf = &mut bufs[slot][..len];
                buf[..HEADER].copy_from_slice(&h.to_bytes());
                o.copy_out(&mut buf[HEADER..]);
                let sent = ep.send(buf, peer, Some(SEND_TAG | slot));
                if sent.is_err() {
                    free.push(slot);
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
            o.started = true;
            o.done += n as u64;
            if o.done == o.total() {
                if let Some(seq) = o.wr_seq
                    && let Some(f) = seq
                        .checked_sub(*flight_base)
                        .and_then(|i| flight.get_mut(i as usize))
                {
                    f.sent = true;
                }
                outgoing.pop_front();
            }
        }
        Ok(())
    }
}

impl Rx {
    /// The oldest posted buffer, when its message has arrived: (buffer, bytes).
    fn next_filled(&self) -> Option<(usize, usize)> {
        let &idx = self.posted.front()?;
        self.filled[idx].map(|len| (idx, len))
    }
}

/// What running one of the peer's messages touches of the link.
struct Run<'a> {
    tx: &'a mut Tx,
    peer_area: &'a Area,
    left: &'a mut bool,
    executed: &'a mut u64,
}

/// The peer as the initiator of its WR: a READ's data goes back as a message.
struct Reply<'a> {
    outgoing: &'a mut VecDeque<Outgoing>,
    seq: u64,
}

impl target::Initiator for Reply<'_> {
    fn read_back(&mut self, from: *const u8, len: usize) -> Option<umq_buf_status_t> {
        // The bytes as they are now, as an RDMA READ would read them.
        let data = unsafe { std::slice::from_raw_parts(from, len) }.to_vec();
        self.outgoing.push_back(Outgoing {
            header: Header {
                kind: KIND_READ_RESP,
                seq: self.seq,
                total: len as u64,
                ..Default::default()
            },
            body: Body::Owned(data),
            done: 0,
            started: false,
            wr_seq: None,
        });
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
                if w.flow.is_none() {
                    return Err(LinkError::Corrupt(
                        "window update from a peer without flow control",
                    ));
                }
                if w.rx_posted.is_empty() {
                    return Ok(false);
                }
                let mut dst = Side {
                    umqh: at.umqh,
                    wire: w,
                    fragments: at.fragments,
                };
                target::deliver_standalone(&mut dst, h.imm);
                out.rx_done += 1;
                Ok(true)
            }
            KIND_READ_RESP => {
                let wr = our_wr(w, h.seq)?;
                if unsafe { (*wr).pro().opcode } != UMQ_OPC_READ {
                    return Err(LinkError::Corrupt("READ data for a WR that is not a READ"));
                }
                target::land_read(wr, payload.as_ptr(), payload.len());
                Ok(true)
            }
            KIND_DONE => {
                let i = h
                    .seq
                    .checked_sub(w.tx_done_seq)
                    .filter(|&i| (i as usize) < self.tx.flight.len())
                    .ok_or(LinkError::Corrupt(
                        "a completion for no WR of ours in flight",
                    ))?;
                let f = &mut self.tx.flight[i as usize];
                if f.quick || f.status.is_some() {
                    return Err(LinkError::Corrupt("a completion for a WR that has one"));
                }
                f.status = Some(if h.status <= UMQ_BUF_REM_DATA_POISON {
                    h.status
                } else {
                    UMQ_BUF_REM_OPERATION_ERR
                });
                Ok(true)
            }
            KIND_AREA => {
                self.peer_area.raise_to([h.imm, h.addr, h.seq]);
                Ok(true)
            }
            KIND_PING => Ok(true),
            _ => {
                *self.left = true;
                Ok(true)
            }
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
        let req = target::Request {
            opcode,
            imm: h.imm,
            len: payload.len() as u64,
            src: std::iter::once((payload.as_ptr() as *mut u8, payload.len())),
            remote: umq_ref_sge_t {
                addr: h.addr,
                length: h.rlen,
                token_id: h.token_id,
                token_value: h.token_value,
                rsvd0: 0,
            },
        };
        let mut reply = Reply {
            outgoing: &mut self.tx.outgoing,
            seq: *self.executed,
        };
        let mut dst = Side {
            umqh: at.umqh,
            wire: w,
            fragments: at.fragments,
        };
        let landed_before = out.rx_done;
        let status = match target::execute_wr(&mut dst, &req, at.pool, &mut reply, out) {
            target::Executed::Done(status) => status,
            target::Executed::Wait => return Ok(false),
            target::Executed::InitiatorLeft => return Err(LinkError::PeerLeft),
        };
        if out.rx_done > landed_before
            && let Some(f) = w.flow.as_mut()
        {
            f.data_arrived(1);
        }
        if !quick(opcode) {
            self.tx.outgoing.push_back(Outgoing::control(Header {
                kind: KIND_DONE,
                seq: *self.executed,
                status,
                ..Default::default()
            }));
        }
        *self.executed += 1;
        Ok(true)
    }
}

/// Our WR in flight with sequence number `seq`.
fn our_wr(w: &Wire, seq: u64) -> Result<*mut umq_buf_t, LinkError> {
    seq.checked_sub(w.tx_done_seq)
        .filter(|&i| (i as usize) < w.in_flight)
        .map(|i| w.sq[w.delivered + i as usize])
        .ok_or(LinkError::Corrupt("a response for no WR of ours in flight"))
}

#[cfg(all(test, umq_fabric_headers))]
mod tests {
    use super::*;
    use crate::buf::pool::Pool;

    fn link(ep: Endpoint, to: &[u8], area: &Area, liveness: Duration) -> Link {
        // SAFETY: the areas outlive the links (the test owns both).
        let ours = unsafe { OurArea::new(area) };
        Link::open(ep, to, None, ours, liveness).expect("connect")
    }

    /// Two bindings over libfabric tcp on 127.0.0.1 that keep running rounds hear each other
    /// (pings) for several liveness periods; once one side goes silent, as a host that is gone
    /// or cut off does, the other's round fails within about one period.
    #[test]
    fn a_silent_peer_breaks_the_binding_after_the_liveness_timeout() {
        let liveness = Duration::from_millis(300);
        let open = || Endpoint::open("tcp", Some("127.0.0.1"), CQ_SIZE).expect("libfabric tcp");
        let (ea, eb) = (open(), open());
        let (na, nb) = (ea.name().to_vec(), eb.name().to_vec());
        let (area_a, area_b) = (Area::default(), Area::default());
        let mut a = link(ea, &nb, &area_a, liveness);
        let mut b = link(eb, &na, &area_b, liveness);
        let (mut wa, mut wb) = (Wire::new(8, 8), Wire::new(8, 8));
        let pool = Pool::new(false, 0, 0);
        let at = Receiver {
            umqh: 1,
            fragments: false,
            pool: &pool,
        };
        let start = Instant::now();
        while start.elapsed() < liveness * 3 {
            a.round(&mut wa, &at).expect("a hears b");
            b.round(&mut wb, &at).expect("b hears a");
            std::thread::sleep(Duration::from_millis(2));
        }
        let cut = Instant::now();
        let err = loop {
            match a.round(&mut wa, &at) {
                Err(e) => break e,
                Ok(_) => std::thread::sleep(Duration::from_millis(5)),
            }
            assert!(cut.elapsed() < liveness * 3, "a silent peer went unnoticed");
        };
        assert_eq!(
            err,
            LinkError::Lost("peer silent for longer than the liveness timeout")
        );
        assert!(
            cut.elapsed() >= liveness / 2,
            "broken too early: {:?}",
            cut.elapsed()
        );
        drop(b);
    }
}
