//! The July 2026 revision's flow control: credit a sender *requests* from its receiver, as a
//! sans-IO machine (`docs/FLOW_CONTROL.md`, "Credit requests").
//!
//! A receive queue's posted buffers are its [`Pool`] of credit. A sender holds none until it
//! asks: when its window falls to a threshold it sends one request (`Req`, at most one
//! outstanding) for `credits_per_request`; the receiver grants from its pool, less when the pool
//! is busy (`allocate_by_load`), and answers `Rep` with the grant and its load (`ratio`). The
//! sender's next request grows by `credit_multiple` while grants come in full and shrinks while
//! they do not. Credit a sender holds unused for `timeout_ms` goes back (`Return`, answered
//! `ReturnAck`), so idle peers do not sit on a shared pool's buffers.
//!
//! The four problems the reference's history fixed are built in:
//! - **Starvation between senders sharing a receive queue.** A request that finds the pool
//!   empty is parked in order ([`Pool::request`]) and answered as buffers come back
//!   ([`Pool::serve_parked`]), not refused; so a newcomer is not starved by members that keep
//!   asking.
//! - **A request outstanding forever when the peer stalls.** The sender times its request;
//!   past `fc_req_timeout_ms` its posts fail with a timeout ([`Credit::request_timed_out`]).
//! - **Duplicate and reordered control messages.** Requests and answers carry an 8-bit sequence
//!   number (never 0); a receiver takes each request once, a sender takes only the answer to
//!   its outstanding request, and both count what they dropped.
//! - **Control completions the application never reaps.** Control messages travel on the
//!   link's control channel (or straight into a peer queue of this process) and have no
//!   completion at all, so a sender that never polls for send completions still gets credit.
//!
//! The machine never touches a buffer, a lock or a clock: callers pass the time in
//! microseconds and carry [`Credit::take_outgoing`]'s messages.

use super::{Flow, Params as WindowParams};
use std::collections::VecDeque;
use std::sync::Mutex;

#[cfg(test)]
mod tests;

/// Version of this protocol in bind info (the window protocol's is `flow::PROTOCOL_VERSION`).
pub const PROTOCOL_VERSION: u8 = 0x81;

/// Ethertype of a credit message on a link's control channel (IEEE 802 local experimental 1):
/// the link's pause machine never sees these frames.
pub const ETHERTYPE: u16 = 0x88b5;
/// A credit message as a control frame: an Ethernet header and eight bytes.
pub const FRAME_LEN: usize = 14 + 8;
/// The most credit one message carries (the reference's immediate field is 10 bits).
pub const MAX_COUNT: u16 = 1023;
/// The least a request asks for and a grant by load gives.
const MIN_CREDITS_PER_REQUEST: u16 = 2;
/// How a request grows after an answer that fell short while the receiver is not idle.
const CREDIT_STEP: u32 = 2;
/// Requests a pool parks at most; later ones are answered at once, with what is idle.
pub const MAX_PARKED: usize = 512;
/// The load steps in tenths of a pool (`ratio` 0..=3 on the wire).
const RATIO_TENTHS: [u8; 4] = [1, 3, 5, 7];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Req = 1,
    Rep = 2,
    Return = 3,
    ReturnAck = 4,
    /// Credit the receiver offers unasked: once a binding, to a peer of a receive queue of its
    /// own that holds none, as soon as buffers are posted (`Credit::offer_initial`).
    Offer = 5,
}

/// One control message of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Msg {
    pub kind: Kind,
    pub count: u16,
    /// The receiver's load, 0 (busy) to 3 (idle), on answers.
    pub ratio: u8,
    pub seq: u8,
}

impl Msg {
    pub fn frame(self) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
        f[14] = self.kind as u8;
        f[15] = self.seq;
        f[16] = self.ratio;
        f[18..20].copy_from_slice(&self.count.to_le_bytes());
        f
    }

    /// The message in a control frame: None for a frame of another ethertype (the link's
    /// pause machine takes those), Err for a credit frame no peer of ours sends.
    pub fn from_frame(f: &[u8]) -> Option<Result<Msg, &'static str>> {
        if f.len() < 14 || f[12..14] != ETHERTYPE.to_be_bytes() {
            return None;
        }
        if f.len() != FRAME_LEN {
            return Some(Err("credit frame of the wrong length"));
        }
        let kind = match f[14] {
            1 => Kind::Req,
            2 => Kind::Rep,
            3 => Kind::Return,
            4 => Kind::ReturnAck,
            5 => Kind::Offer,
            _ => return Some(Err("credit frame of an unknown kind")),
        };
        let count = u16::from_le_bytes([f[18], f[19]]);
        if count > MAX_COUNT || f[16] > 3 || (f[15] == 0) != (kind == Kind::Offer) {
            return Some(Err("credit frame with a field out of range"));
        }
        Some(Ok(Msg {
            kind,
            count,
            ratio: f[16],
            seq: f[15],
        }))
    }
}

/// The knobs of `umq_flow_control_cfg_t` (July 2026), as the application gave them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Knobs {
    pub initial_credit: u16,
    pub max_credits_request: u16,
    pub credit_multiple: f32,
    pub return_ratio: u16,
    pub min_reserved_credit: u16,
    pub timeout_ms: u32,
    pub is_limited: bool,
    pub fc_req_timeout_ms: i32,
}

/// One queue's settings after the reference's clamping against its receive depth.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Params {
    pub initial_credit: u16,
    pub max_credits_request: u16,
    pub credit_multiple: f32,
    pub return_ratio: u16,
    pub min_reserved_credit: u16,
    /// Unused credit goes back after this long without a send.
    pub idle_return_us: u64,
    /// A request unanswered this long fails the sender's posts (0: never).
    pub req_timeout_us: u64,
    pub rx_depth: u16,
    pub peer_rx_depth: u16,
}

impl Params {
    pub fn new(k: &Knobs, rx_depth: u32, peer_rx_depth: u32) -> Self {
        let depth = rx_depth.min(u16::MAX as u32) as u16;
        let within = |v: u16, default: u16| if v == 0 || v > depth { default } else { v };
        let initial_credit = within(k.initial_credit, depth >> 4).clamp(1, MAX_COUNT);
        let mut max_request = k.max_credits_request;
        if max_request < MIN_CREDITS_PER_REQUEST || max_request > depth {
            max_request = 512;
        }
        let multiple = k.credit_multiple;
        let credit_multiple = if !(1.0..=depth as f32 / initial_credit as f32).contains(&multiple) {
            2.0
        } else {
            multiple
        };
        let req_timeout_ms = match k.fc_req_timeout_ms {
            t if t < 0 => 0,
            0 => 1000,
            t => t.min(60_000) as u64,
        };
        Params {
            initial_credit,
            max_credits_request: max_request.min(MAX_COUNT.min(depth)).max(1),
            credit_multiple,
            return_ratio: within(k.return_ratio, 2),
            min_reserved_credit: within(k.min_reserved_credit, 2),
            idle_return_us: if k.timeout_ms == 0 {
                10
            } else {
                k.timeout_ms as u64
            } * 1000,
            req_timeout_us: req_timeout_ms * 1000,
            rx_depth: depth,
            peer_rx_depth: peer_rx_depth.min(u16::MAX as u32) as u16,
        }
    }
}

/// `threshold` scaled by the receiver's load step `ratio`: the window at which a sender asks.
fn threshold_for(threshold: u16, ratio: u8) -> u16 {
    let tenths = RATIO_TENTHS
        .get(ratio as usize)
        .copied()
        .unwrap_or(RATIO_TENTHS[0]);
    match (threshold as u32 * tenths as u32 / 10) as u16 {
        0 => MIN_CREDITS_PER_REQUEST,
        t => t,
    }
}

/// The load step of a pool with `allocated` of `depth` credits handed out: 3 when most are
/// free, 0 when (nearly) all are taken.
pub fn load_step(allocated: u64, depth: u16) -> u8 {
    if depth == 0 || allocated >= depth as u64 {
        return 0;
    }
    let free_tenths = ((depth as u64 - allocated) * 10 / depth as u64) as u8;
    RATIO_TENTHS
        .iter()
        .position(|&t| free_tenths <= t)
        .unwrap_or(RATIO_TENTHS.len() - 1) as u8
}

/// What a request for `want` is granted from a pool with `allocated` of `depth` handed out:
/// all of it while seven tenths are free, less in steps as the pool fills, at least 2.
pub fn allocate_by_load(allocated: u64, depth: u16, want: u16) -> u16 {
    if depth == 0 || allocated >= depth as u64 {
        return MIN_CREDITS_PER_REQUEST;
    }
    let free_tenths = (depth as u64 - allocated) * 10 / depth as u64;
    let scale = match RATIO_TENTHS.iter().rposition(|&t| free_tenths >= t as u64) {
        Some(3) => 10,
        Some(i) => RATIO_TENTHS[i + 1] as u32,
        None => RATIO_TENTHS[0] as u32,
    };
    match (want as u32 * scale / 10) as u16 {
        0 | 1 => MIN_CREDITS_PER_REQUEST,
        n => n,
    }
}

/// The next request's size after an answer granting `granted` of `asked`.
fn next_request(granted: u16, asked: u16, ratio: u8, p: &Params) -> u16 {
    let next = if granted >= asked {
        (asked as f32 * p.credit_multiple) as u32
    } else if ratio == 0 {
        (asked as f32 / p.credit_multiple) as u32
    } else {
        asked as u32 + CREDIT_STEP
    };
    match next.min(p.max_credits_request as u32) as u16 {
        0 | 1 => MIN_CREDITS_PER_REQUEST,
        n => n,
    }
}

fn next_seq(seq: u8) -> u8 {
    seq.wrapping_add(1).max(1)
}

/// A request parked until the pool has credit: which queue asked, for how much, and its
/// sequence number (the answer carries it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parked {
    pub umqh: u64,
    pub count: u16,
    pub seq: u8,
}

/// A parked request answered: the grant was taken from the pool already.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    pub umqh: u64,
    pub count: u16,
    pub seq: u8,
    pub ratio: u8,
}

/// The counters of `umq_credit_pool_stats_t`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    pub idle: u64,
    pub allocated: u64,
    pub total_idle: u64,
    pub total_allocated: u64,
    pub total_post_rx_err: u64,
}

#[derive(Debug, Default)]
struct PoolState {
    s: PoolStats,
    parked: VecDeque<Parked>,
}

/// A receive queue's credit: its posted buffers not yet granted (`idle`) and those granted to
/// senders that have not arrived (`allocated`). A shared receive queue's members share one.
#[derive(Debug)]
pub struct Pool {
    depth: u16,
    /// Whether grants are bounded by posted buffers (`is_limited`); otherwise a grant is what
    /// the load allows, and a message may arrive before its buffer is posted (it waits).
    limited: bool,
    state: Mutex<PoolState>,
}

impl Pool {
    pub fn new(rx_depth: u32, limited: bool) -> Self {
        Pool {
            depth: rx_depth.min(u16::MAX as u32) as u16,
            limited,
            state: Mutex::new(PoolState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> PoolStats {
        self.lock().s
    }

    /// `n` receive buffers were posted. A count that would pass what the pool's counter holds
    /// (16 bits in the reference) is refused and counted, as the reference counts it.
    pub fn recharge(&self, n: u64) {
        let mut st = self.lock();
        if st.s.idle + n > u16::MAX as u64 {
            st.s.total_post_rx_err += n;
            return;
        }
        st.s.idle += n;
        st.s.total_idle += n;
    }

    /// `n` posted buffers left the queue without a message (flushed).
    pub fn drain(&self, n: u64) {
        let mut st = self.lock();
        st.s.idle = st.s.idle.saturating_sub(n);
    }

    /// `n` granted credits were used: their messages arrived.
    pub fn arrived(&self, n: u64) {
        let mut st = self.lock();
        st.s.allocated = st.s.allocated.saturating_sub(n);
    }

    /// `n` granted credits came back unused (a return, or a peer gone).
    pub fn give_back(&self, n: u64) {
        let mut st = self.lock();
        let n = n.min(st.s.allocated);
        st.s.allocated -= n;
        st.s.idle += n;
    }

    fn allocate(&self, st: &mut PoolState, want: u16) -> u16 {
        let got = if self.limited {
            (want as u64).min(st.s.idle) as u16
        } else {
            want
        };
        // Unlimited, a grant may pass what is posted: idle counts down to zero only.
        st.s.idle -= st.s.idle.min(got as u64);
        st.s.allocated += got as u64;
        st.s.total_allocated += got as u64;
        got
    }

    /// A request for `want`: the grant by load and the load step, or None when it was parked
    /// (a limited pool with nothing idle and room to park; it is answered by `serve_parked`).
    pub fn request(&self, umqh: u64, want: u16, seq: u8) -> Option<(u16, u8)> {
        let mut st = self.lock();
        if self.limited && st.s.idle == 0 && st.parked.len() < MAX_PARKED {
            st.parked.push_back(Parked {
                umqh,
                count: want,
                seq,
            });
            return None;
        }
        let ratio = load_step(st.s.allocated, self.depth);
        let by_load = allocate_by_load(st.s.allocated, self.depth, want);
        Some((self.allocate(&mut st, by_load), ratio))
    }

    /// Up to `want` idle credit offered unasked (none from an empty pool, or while requests
    /// are parked: they come first), and the load step.
    pub fn offer(&self, want: u16) -> Option<(u16, u8)> {
        let mut st = self.lock();
        if st.s.idle == 0 || !st.parked.is_empty() {
            return None;
        }
        let ratio = load_step(st.s.allocated, self.depth);
        let want = (want as u64).min(st.s.idle) as u16;
        Some((self.allocate(&mut st, want), ratio))
    }

    /// Answers parked requests in the order they came while credit is idle; each grant is
    /// taken from the pool here.
    pub fn serve_parked(&self) -> Vec<Granted> {
        let mut st = self.lock();
        let mut out = Vec::new();
        while st.s.idle > 0 {
            let Some(p) = st.parked.pop_front() else {
                break;
            };
            let count = self.allocate(&mut st, p.count);
            let ratio = load_step(st.s.allocated, self.depth);
            out.push(Granted {
                umqh: p.umqh,
                count,
                seq: p.seq,
                ratio,
            });
        }
        out
    }

    /// Whether a request is parked (a cheap test before `serve_parked`).
    pub fn has_parked(&self) -> bool {
        !self.lock().parked.is_empty()
    }

    /// Forgets the parked request of a queue that goes away.
    pub fn unpark(&self, umqh: u64) {
        self.lock().parked.retain(|p| p.umqh != umqh);
    }
}

/// Counters of control messages (`umq_packet_stats_t`'s flow-control half).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Packets {
    pub sent: u64,
    pub received: u64,
    pub duplicate_req: u64,
    pub duplicate_rsp: u64,
}

/// Receive-side counters of one queue: credit granted to its peer, and used.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Granting {
    pub allocated: u64,
    pub total_allocated: u64,
    pub consumed: u64,
}

impl Granting {
    /// Credit the peer holds or has in flight: granted and not used. A peer that sent more
    /// than it was granted (a message that found a posted buffer all the same) holds none.
    pub fn unused(&self) -> u64 {
        self.allocated.saturating_sub(self.consumed)
    }
}

/// One bound queue's half of the protocol on each side: the credit it holds toward its peer
/// (in `win`, whose counters are the statistics the December revision also reports), its
/// request, and what it granted its peer from `pool`.
#[derive(Debug)]
pub struct Credit {
    pub p: Params,
    pub win: Flow,
    pub pool: std::sync::Arc<Pool>,
    pub umqh: u64,
    credits_per_request: u16,
    peer_ratio: u8,
    /// The request or return outstanding, and when it went.
    asking_since: Option<u64>,
    local_seq: u8,
    expect_seq: u8,
    last_send_us: u64,
    granting: Granting,
    pub packets: Packets,
    outgoing: VecDeque<Msg>,
    /// Answers that brought credit, not yet shown to the application.
    updates: u32,
    /// The first credit went to the peer unasked (`offer_initial`).
    offered: bool,
}

impl Credit {
    pub fn new(p: Params, pool: std::sync::Arc<Pool>, umqh: u64, now_us: u64) -> Self {
        // A grant may take the window past the peer's depth (an unlimited pool grants by load,
        // not by posted buffers); only past what the reference's 16-bit window holds is it an
        // error, counted and ignored.
        let win = Flow::new(WindowParams::new(1, 1, p.rx_depth as u32, u16::MAX as u32));
        Credit {
            p,
            win,
            pool,
            umqh,
            credits_per_request: p.initial_credit,
            peer_ratio: 0,
            asking_since: None,
            local_seq: 1,
            expect_seq: 1,
            last_send_us: now_us,
            granting: Granting::default(),
            packets: Packets::default(),
            outgoing: VecDeque::new(),
            updates: 0,
            offered: false,
        }
    }

    fn send(&mut self, m: Msg) {
        self.packets.sent += 1;
        self.outgoing.push_back(m);
    }

    /// The messages to carry to the peer, oldest first.
    pub fn take_outgoing(&mut self) -> Option<Msg> {
        self.outgoing.pop_front()
    }

    /// A message the transport had no room for: it goes first next time.
    pub fn put_back(&mut self, m: Msg) {
        self.outgoing.push_front(m);
    }

    pub fn has_outgoing(&self) -> bool {
        !self.outgoing.is_empty()
    }

    // ----- send side -----

    pub fn window(&self) -> u64 {
        self.win.window()
    }

    /// Whether the outstanding request has gone unanswered past `fc_req_timeout_ms`.
    pub fn request_timed_out(&self, now_us: u64) -> bool {
        self.p.req_timeout_us != 0
            && self
                .asking_since
                .is_some_and(|t| now_us.saturating_sub(t) >= self.p.req_timeout_us)
    }

    /// A post at `now_us` wants `want` credits: takes what the window has, and asks for more
    /// once the window is at its threshold (one request outstanding at a time).
    #[inline(never)]
    pub fn take_credit(&mut self, want: u64, now_us: u64) -> u64 {
        self.last_send_us = now_us;
        let got = self.win.take_credit(want);
        let threshold = threshold_for(self.p.min_reserved_credit, self.peer_ratio);
        if self.win.window() <= threshold as u64 {
            self.ask(now_us);
        }
        got
    }

    fn ask(&mut self, now_us: u64) {
        if self.asking_since.is_some() {
            return;
        }
        self.asking_since = Some(now_us);
        let count = self.credits_per_request.min(MAX_COUNT);
        let seq = self.local_seq;
        self.send(Msg {
            kind: Kind::Req,
            count,
            ratio: 0,
            seq,
        });
    }

    /// When unused credit goes back if no send comes first (None: nothing to return).
    pub fn return_due_at(&self) -> Option<u64> {
        (self.window() > self.return_threshold() as u64 && self.asking_since.is_none())
            .then_some(self.last_send_us + self.p.idle_return_us)
    }

    fn return_threshold(&self) -> u16 {
        match self.peer_ratio {
            0 => 0,
            r => threshold_for(self.p.min_reserved_credit, r),
        }
    }

    /// Returns part of the window to the peer when no send came for `timeout_ms`; true when a
    /// return went.
    pub fn return_if_idle(&mut self, now_us: u64) -> bool {
        if self.return_due_at().is_none_or(|at| now_us < at) {
            return false;
        }
        let window = self.window() as u16;
        let keep = self.return_threshold();
        self.credits_per_request =
            ((self.credits_per_request as f32 / self.p.credit_multiple) as u16).max(1);
        let mut give = (window / self.p.return_ratio).max(1);
        if window - give <= keep {
            give = window - keep;
        }
        let give = give.min(MAX_COUNT);
        self.win.return_unused(give as u64);
        self.asking_since = Some(now_us);
        let seq = self.local_seq;
        self.send(Msg {
            kind: Kind::Return,
            count: give,
            ratio: 0,
            seq,
        });
        true
    }

    /// Answers that brought credit since the last call (each is a `UMQ_FAKE_BUF_FC_UPDATE`
    /// for the application).
    pub fn take_updates(&mut self) -> u32 {
        std::mem::take(&mut self.updates)
    }

    pub fn updates_waiting(&self) -> bool {
        self.updates > 0
    }

    // ----- receive side -----

    /// A message of the peer arrived.
    #[inline(never)]
    pub fn on_msg(&mut self, m: Msg) {
        self.packets.received += 1;
        match m.kind {
            Kind::Req | Kind::Return if m.seq != self.expect_seq => {
                self.packets.duplicate_req += 1;
            }
            Kind::Rep | Kind::ReturnAck
                if self.asking_since.is_none() || m.seq != self.local_seq =>
            {
                self.packets.duplicate_rsp += 1;
            }
            Kind::Req => {
                self.expect_seq = next_seq(self.expect_seq);
                if let Some((count, ratio)) = self.pool.request(self.umqh, m.count, m.seq) {
                    self.grant(count, m.seq, ratio);
                }
            }
            Kind::Return => {
                self.expect_seq = next_seq(self.expect_seq);
                let unused = self.granting.unused();
                let back = (m.count as u64).min(unused);
                self.granting.allocated -= back;
                self.pool.give_back(back);
                let ratio = load_step(self.pool.stats().allocated, self.p.rx_depth);
                self.send(Msg {
                    kind: Kind::ReturnAck,
                    count: back as u16,
                    ratio,
                    seq: m.seq,
                });
            }
            Kind::Rep => {
                self.peer_ratio = m.ratio;
                self.credits_per_request =
                    next_request(m.count, self.credits_per_request, m.ratio, &self.p);
                self.win.grant(m.count as u64);
                self.answered();
                self.updates += 1;
            }
            Kind::ReturnAck => {
                self.peer_ratio = m.ratio;
                self.answered();
            }
            // Not an answer: no update buffer, which a program written for the reference
            // (where credit comes only as answers) would take for a message.
            Kind::Offer => self.win.grant(m.count as u64),
        }
    }

    /// Offers the peer its first credit unasked, from what the pool has idle, once a binding:
    /// the reference grants none until asked, so a program's first send is refused even when
    /// the receiver posted its buffers long before (its own example fails so). Only for a
    /// receive queue of one's own: offers to every member of a shared one would hand its
    /// buffers to peers that may never send, which is why the reference offers none.
    pub fn offer_initial(&mut self) {
        if self.offer_settled() {
            return;
        }
        let Some((count, ratio)) = self.pool.offer(self.p.initial_credit) else {
            return;
        };
        self.offered = true;
        self.hand_over(Kind::Offer, count, ratio, 0);
    }

    /// Whether `offer_initial` has nothing left to do in this binding: the offer went, or the
    /// peer was granted credit first.
    pub fn offer_settled(&self) -> bool {
        self.offered || self.granting.total_allocated > 0
    }

    fn answered(&mut self) {
        self.local_seq = next_seq(self.local_seq);
        self.asking_since = None;
    }

    /// Answers a request of the peer with `count` credits taken from the pool (also a parked
    /// request the pool answered later, `Pool::serve_parked`).
    pub fn grant(&mut self, count: u16, seq: u8, ratio: u8) {
        self.hand_over(Kind::Rep, count, ratio, seq);
    }

    /// Credit taken from the pool goes to the peer: counted as granted, and on its way.
    fn hand_over(&mut self, kind: Kind, count: u16, ratio: u8, seq: u8) {
        self.granting.allocated += count as u64;
        self.granting.total_allocated += count as u64;
        self.send(Msg {
            kind,
            count,
            ratio,
            seq,
        });
    }

    /// `n` messages of the peer landed, each on credit we granted.
    #[inline(never)]
    pub fn data_arrived(&mut self, n: u64) {
        self.granting.consumed += n;
        self.pool.arrived(n);
    }

    /// Credit granted to the peer and not used: the pool takes it back (the binding ends).
    pub fn release_granted(&mut self) {
        let unused = self.granting.unused();
        self.granting.allocated -= unused;
        self.pool.give_back(unused);
        self.pool.unpark(self.umqh);
    }

    pub fn granting(&self) -> Granting {
        self.granting
    }

    /// The window protocol's nine counters for this queue: the send side's own, the receive
    /// side's from the pool and the grants.
    #[inline(never)]
    pub fn window_stats(&mut self) -> crate::abi::types::umq_flowcontrol_stats_t {
        let mut s = self.win.stats();
        let pool = self.pool.stats();
        s.local_rx_posted = pool.idle;
        s.total_local_rx_posted = pool.total_idle;
        s.total_local_rx_notified = self.granting.total_allocated;
        s.total_local_rx_posted_error = pool.total_post_rx_err;
        s
    }

    pub fn credits_per_request(&self) -> u16 {
        self.credits_per_request
    }
}
