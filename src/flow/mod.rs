//! Receive-window flow control (`docs/FLOW_CONTROL.md`), as a sans-IO state machine.
//!
//! One [`Flow`] per queue holds both halves: the *receive side* (buffers the application posted
//! here, and what has been announced to the peer) and the *send side* (credit the peer announced
//! to us). Transports feed it events and carry what it returns; it never touches a buffer, a lock
//! or a clock, so `tests/flow_model.rs` can drive the very same code through every interleaving
//! of two peers.
//!
//! Why it cannot deadlock: every announcement is also published, as a cumulative total, in the
//! queue's [`Area`], which the peer reads without needing a receive buffer (a shared word here,
//! an RDMA READ on a network). A sender that runs out of credit re-reads the area before it
//! gives up, so credit never waits for a message that itself needs credit. In-band
//! announcements (piggybacked on a user SEND, or standalone) only make credit arrive sooner.
//!
//! Standalone announcements use a *control budget* data can never touch: the receiver keeps up
//! to `ctrl_budget` posted buffers back from data credit as a landing zone for the peer's
//! standalones, and grants them separately through the area. A standalone that lands consumes
//! one of those buffers; refilling it is announced silently (area only, batched at half the
//! budget), so an announcement never causes another one.

pub mod credit;
pub mod pacing;
pub mod pfc;
pub mod stall;
pub mod word;

use crate::abi::types::umq_flowcontrol_stats_t;
use std::sync::atomic::{AtomicU64, Ordering};
use word::Plain;

/// Version of the protocol below, exchanged in bind info.
pub const PROTOCOL_VERSION: u8 = 1;

const IMM_PRIVATE: u64 = 1;
const IMM_TYPE_SHIFT: u32 = 1;
const IMM_TYPE_MASK: u64 = 0x1f;
const IMM_TYPE_WINDOW: u64 = 1;
const IMM_IN_USER_BUF: u64 = 1 << 6;
const IMM_INCREMENT_SHIFT: u32 = 16;
/// Bits 32..63 (reserved in the UMQ layout) carry the low half of the cumulative total, so an
/// in-band announcement that arrives after the sender already read the area adds nothing twice.
const IMM_CUMULATIVE_SHIFT: u32 = 32;

/// A window update decoded from a private immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement {
    pub increment: u16,
    pub cumulative: u32,
    pub in_user_buf: bool,
}

pub fn encode_imm(a: Announcement) -> u64 {
    IMM_PRIVATE
        | IMM_TYPE_WINDOW << IMM_TYPE_SHIFT
        | if a.in_user_buf { IMM_IN_USER_BUF } else { 0 }
        | (a.increment as u64) << IMM_INCREMENT_SHIFT
        | (a.cumulative as u64) << IMM_CUMULATIVE_SHIFT
}

/// Whether an immediate belongs to the library (bit 0 set).
pub fn is_private(imm: u64) -> bool {
    imm & IMM_PRIVATE != 0
}

/// Decodes a private window update; None for user immediates and unknown private types.
pub fn decode_imm(imm: u64) -> Option<Announcement> {
    if !is_private(imm) || (imm >> IMM_TYPE_SHIFT) & IMM_TYPE_MASK != IMM_TYPE_WINDOW {
        return None;
    }
    Some(Announcement {
        increment: (imm >> IMM_INCREMENT_SHIFT) as u16,
        cumulative: (imm >> IMM_CUMULATIVE_SHIFT) as u32,
        in_user_buf: imm & IMM_IN_USER_BUF != 0,
    })
}

/// User immediates keep 63 bits: bit 0 is the library's.
pub fn user_imm(imm: u64) -> u64 {
    imm & !IMM_PRIVATE
}

/// Settings of one queue, after clamping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Params {
    pub initial_window: u64,
    pub notify_interval: u64,
    pub rx_depth: u64,
    pub peer_rx_depth: u64,
    /// Posted buffers held back as the landing zone of the peer's standalone announcements.
    pub ctrl_budget: u64,
}

impl Params {
    /// Applies the spec's defaults: 0 or out-of-range values become rx_depth/2 and rx_depth/16,
    /// at least 1.
    pub fn new(
        initial_window: u16,
        notify_interval: u16,
        rx_depth: u32,
        peer_rx_depth: u32,
    ) -> Self {
        let depth = rx_depth as u64;
        let pick = |v: u16, default: u64| {
            let v = v as u64;
            if v == 0 || v > depth {
                default.max(1)
            } else {
                v
            }
        };
        Params {
            initial_window: pick(initial_window, depth / 2),
            notify_interval: pick(notify_interval, depth / 16),
            rx_depth: depth,
            peer_rx_depth: peer_rx_depth as u64,
            ctrl_budget: (depth / 16).min(4),
        }
    }

    /// Control credit is returned once half the budget has been used.
    fn ack_threshold(&self) -> u64 {
        (self.ctrl_budget / 2).max(1)
    }
}

/// The peer-readable area of a queue. Only plain loads and stores touch it, and only its owner
/// stores; cumulative totals make a stale or repeated read harmless.
#[derive(Default, Debug)]
#[repr(C)]
pub struct Area {
    /// The initial window once published, 0 before.
    initial: AtomicU64,
    data_granted: AtomicU64,
    ctrl_granted: AtomicU64,
}

impl Area {
    pub fn reset(&self) {
        self.initial.store(0, Ordering::Release);
        self.data_granted.store(0, Ordering::Release);
        self.ctrl_granted.store(0, Ordering::Release);
    }

    pub fn initial_window(&self) -> u64 {
        self.initial.load(Ordering::Acquire)
    }

    /// The three words, for model checking: `[initial, data granted, control granted]`.
    pub fn snapshot(&self) -> [u64; 3] {
        [
            self.initial.load(Ordering::Acquire),
            self.data_granted.load(Ordering::Acquire),
            self.ctrl_granted.load(Ordering::Acquire),
        ]
    }

    /// Raises each word to `words` where that is higher: the peer's area as a network
    /// provider ships it (its words only grow within a binding; a late copy changes nothing).
    pub fn raise_to(&self, words: [u64; 3]) {
        self.initial.fetch_max(words[0], Ordering::AcqRel);
        self.data_granted.fetch_max(words[1], Ordering::AcqRel);
        self.ctrl_granted.fetch_max(words[2], Ordering::AcqRel);
    }

    pub fn from_snapshot(words: [u64; 3]) -> Self {
        Area {
            initial: AtomicU64::new(words[0]),
            data_granted: AtomicU64::new(words[1]),
            ctrl_granted: AtomicU64::new(words[2]),
        }
    }
}

/// The nine counters of `umq_flowcontrol_stats_t`.
#[derive(Default, Debug, Clone, PartialEq, Eq, Hash)]
pub struct Counters {
    pub local_rx_posted: Plain,
    pub remote_rx_window: Plain,
    pub total_local_rx_posted: Plain,
    pub total_local_rx_notified: Plain,
    pub total_local_rx_posted_error: Plain,
    pub total_remote_rx_received: Plain,
    pub total_remote_rx_consumed: Plain,
    pub total_remote_rx_received_error: Plain,
    pub total_flow_controlled_wr: Plain,
}

/// Counters beyond the standard nine (our extension stats).
#[derive(Default, Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Extra {
    pub piggybacked: u64,
    pub standalone: u64,
    /// Announcements that went through the area only (no control credit for a standalone).
    pub area_only: u64,
    /// Times the send path found new credit in the peer's area.
    pub area_refreshes: u64,
    pub ctrl_grants: u64,
}

/// Which announcements are due, as [`Flow::announcement_due`] computes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Due {
    piggyback: bool,
    standalone: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Flow {
    pub p: Params,
    pub c: Counters,
    pub extra: Extra,
    // Receive side.
    initial_published: bool,
    data_notified: u64,
    /// `data_notified` as the last committed piggyback carried it.
    data_piggybacked: u64,
    data_arrived: u64,
    ctrl_granted: u64,
    ctrl_arrived: u64,
    /// `local_rx_posted` from which an announcement is due (`announcement_due`): the buffers
    /// held for control, plus one while the peer holds none of our credit, else plus the notify
    /// interval; never before the initial window is out. Made again by every change of what it
    /// is made of (`due_again`), which the receive side's few events make, so the data path's
    /// looks (a send's piggyback, a receive poll's and a repost's standalone) are each one
    /// comparison in the usual case that nothing is due.
    due_from: u64,
    /// Whether a receive post has anything to publish (`Flow::publish`): the initial window
    /// is not out yet, or the control reserve wants a top-up (`reserve_short`). Made again by
    /// what changes either (`reserve_again`).
    publish_due: bool,
    // Send side.
    peer_initial: bool,
    data_seen: u64,
    ctrl_seen: u64,
    ctrl_used: u64,
}

impl Flow {
    pub fn new(p: Params) -> Self {
        Flow {
            p,
            c: Counters::default(),
            extra: Extra::default(),
            initial_published: false,
            data_notified: 0,
            data_piggybacked: 0,
            data_arrived: 0,
            ctrl_granted: 0,
            ctrl_arrived: 0,
            due_from: u64::MAX,
            publish_due: true,
            peer_initial: false,
            data_seen: 0,
            ctrl_seen: 0,
            ctrl_used: 0,
        }
    }

    // ----- receive side -----

    /// Counts `n` receive buffers just posted; refuses (and counts the error) if that would
    /// pass rx_depth.
    pub fn rx_posted(&mut self, n: u64) -> bool {
        if self.c.local_rx_posted.add_bounded(n, self.p.rx_depth) {
            self.c.total_local_rx_posted.add(n);
            true
        } else {
            self.rx_refused(n);
            false
        }
    }

    /// Counts receive buffers the queue refused because its receive depth was full.
    pub fn rx_refused(&mut self, n: u64) {
        self.c.total_local_rx_posted_error.add(n);
    }

    /// `n` credit-consuming messages (SEND, SEND_IMM, WRITE_IMM) arrived.
    pub fn data_arrived(&mut self, n: u64) {
        self.data_arrived += n;
        // Arrivals change what is due only by draining the peer's credit.
        if self.peer_drained() {
            self.due_again();
        }
    }

    /// Whether the peer has used all the credit it can know of: the grants carried by our
    /// piggybacked announcements, or `shipped` (the grants as our area last reached it by
    /// other means, for a provider that ships the area).
    pub fn peer_used_all_known(&self, shipped: u64) -> bool {
        self.data_arrived >= self.grant_known_to_peer(shipped)
    }

    /// The data grant the peer knows of: our area's as last `shipped`, or the grant our last
    /// committed piggyback carried.
    pub fn grant_known_to_peer(&self, shipped: u64) -> u64 {
        shipped.max(self.data_piggybacked)
    }

    /// Whether the peer waits for `granted`, our area's data grant: it used all the credit it
    /// knows of (`peer_used_all_known`), and `granted` is more than that. (An area whose grant
    /// rode a SEND already tells it nothing new.)
    pub fn peer_waits_for(&self, granted: u64, shipped: u64) -> bool {
        self.peer_used_all_known(shipped) && granted > self.grant_known_to_peer(shipped)
    }

    /// A standalone announcement arrived: it used one of the reserved buffers, which counts as
    /// announced and consumed. A peer that sends more of them than it was granted room for (a
    /// hostile one) is counted up to the grant: the reserve's count never wraps (and the data
    /// path reads it without a floor).
    pub fn ctrl_arrived(&mut self) {
        self.ctrl_arrived = (self.ctrl_arrived + 1).min(self.ctrl_granted);
        self.c.local_rx_posted.sub(1);
        self.c.total_local_rx_notified.add(1);
        self.due_again();
        self.reserve_again();
    }

    fn ctrl_outstanding(&self) -> u64 {
        self.ctrl_granted - self.ctrl_arrived
    }

    /// Posted buffers neither announced nor held for control.
    fn free(&self) -> u64 {
        self.c
            .local_rx_posted
            .get()
            .saturating_sub(self.ctrl_outstanding())
    }

    /// Free buffers the control reserve may take. Data comes first while the peer holds no data
    /// credit: the last free buffer stays for data then, or an application that keeps fewer
    /// buffers posted than the control budget (one, as `fi_pingpong` does) would hand them all
    /// to control and its peer could never send again.
    fn spare_for_control(&self) -> u64 {
        let free = self.free();
        if self.peer_drained() {
            free.saturating_sub(1)
        } else {
            free
        }
    }

    /// Credit the peer still holds or has in flight, as far as we can tell. The arrivals are
    /// the peer's doing: one that sent past its credit (a hostile process, or a queue bound to
    /// this one while it was still bound to another) holds none, and the count must not wrap
    /// to a window it never had.
    fn peer_outstanding(&self) -> u64 {
        self.data_notified.saturating_sub(self.data_arrived)
    }

    /// Whether the peer holds no credit of ours (`peer_outstanding` is 0), as a comparison: the
    /// data path asks on every post.
    #[inline(always)]
    fn peer_drained(&self) -> bool {
        self.data_arrived >= self.data_notified
    }

    /// Publishes the initial window once enough buffers are posted, and tops up the control
    /// reserve. Returns true when the initial window was published just now.
    #[inline(always)]
    pub fn publish(&mut self, mine: &Area) -> bool {
        // The usual receive post: the initial window is out, and the reserve full or short of
        // less than a top-up. (Out of line as a whole, this look had cost a repost 18
        // instructions.)
        if !self.publish_due {
            return false;
        }
        self.publish_or_top_up(mine)
    }

    #[inline(never)]
    fn publish_or_top_up(&mut self, mine: &Area) -> bool {
        if !self.initial_published {
            if self.c.local_rx_posted.get() < self.p.initial_window {
                return false;
            }
            let k = self.c.local_rx_posted.take_all();
            self.c.total_local_rx_notified.add(k);
            self.data_notified += k;
            self.initial_published = true;
            self.due_again();
            self.reserve_again();
            mine.data_granted
                .store(self.data_notified, Ordering::Release);
            mine.initial.store(k, Ordering::Release);
            return true;
        }
        if !self.reserve_short() {
            return false;
        }
        let deficit = self.p.ctrl_budget - self.ctrl_outstanding();
        let spare = self.spare_for_control();
        if spare > 0 {
            self.ctrl_granted += deficit.min(spare);
            self.due_again();
            self.reserve_again();
            self.extra.ctrl_grants += 1;
            mine.ctrl_granted
                .store(self.ctrl_granted, Ordering::Release);
        }
        false
    }

    /// Whether an announcement should go out now. Piggybacks are free, so they go whenever a
    /// notify interval has built up; a standalone waits until the peer runs low, so two-way
    /// traffic rarely needs one. Either goes at once when the peer has no credit left.
    #[inline(always)]
    fn announcement_due(&self) -> Due {
        // Free buffers: posted, less those held for control. Due are those that reach
        // `due_from`: some while the peer is drained, else an interval.
        if self.c.local_rx_posted.get() < self.due_from {
            return Due {
                piggyback: false,
                standalone: false,
            };
        }
        // A standalone also once the interval is built, if the peer holds at most an interval
        // (`peer_outstanding() <= notify_interval`).
        let low = self.data_notified <= self.data_arrived + self.p.notify_interval;
        Due {
            piggyback: true,
            standalone: self.peer_drained() || low,
        }
    }

    /// Whether the control reserve wants a top-up: it is short of a whole top-up
    /// (`ack_threshold`), or empty.
    fn reserve_short(&self) -> bool {
        let out = self.ctrl_outstanding();
        let deficit = self.p.ctrl_budget - out;
        deficit != 0 && (deficit >= self.p.ack_threshold() || out == 0)
    }

    /// Makes `publish_due` again from what it is made of (`Flow::publish_due`).
    fn reserve_again(&mut self) {
        self.publish_due = !self.initial_published || self.reserve_short();
    }

    /// Makes `due_from` again from what it is made of (`Flow::due_from`).
    fn due_again(&mut self) {
        self.due_from = match self.initial_published {
            false => u64::MAX,
            true if self.peer_drained() => self.ctrl_outstanding() + 1,
            true => self.ctrl_outstanding() + self.p.notify_interval.max(1),
        };
    }

    #[inline(never)]
    fn take_announcement(&mut self, in_user_buf: bool) -> (u64, u64) {
        let k = self.free();
        self.c.local_rx_posted.sub(k);
        self.c.total_local_rx_notified.add(k);
        self.data_notified += k;
        self.due_again();
        let imm = encode_imm(Announcement {
            increment: k.min(u16::MAX as u64) as u16,
            cumulative: self.data_notified as u32,
            in_user_buf,
        });
        (k, imm)
    }

    /// An announcement to piggyback on a user SEND, if one is due: `(count, immediate)`.
    /// Call [`Flow::commit`] once the transport took the WR, or [`Flow::undo`] if it refused it.
    #[inline]
    pub fn piggyback(&mut self) -> Option<(u64, u64)> {
        if !self.announcement_due().piggyback {
            return None;
        }
        Some(self.take_announcement(true))
    }

    pub fn commit(&mut self, mine: &Area) {
        self.extra.piggybacked += 1;
        self.data_piggybacked = self.data_notified;
        mine.data_granted
            .store(self.data_notified, Ordering::Release);
    }

    /// Puts a piggybacked announcement whose WR was refused back into `local_rx_posted`.
    pub fn undo(&mut self, k: u64) {
        self.c.local_rx_posted.add(k);
        self.c.total_local_rx_notified.sub(k);
        self.data_notified -= k;
        self.due_again();
        self.data_piggybacked = self.data_piggybacked.min(self.data_notified);
    }

    /// Announces through the area, plus a standalone message when control credit allows and
    /// the transport has room for one now (`can_send`); returns the standalone's immediate.
    /// The area is written first and either way, so the message is only ever a faster copy of
    /// what the peer can read anyway: a peer that keeps none of our updates' buffers (a July
    /// 2026 program frees them) still gets its credit.
    /// Announces what is due through our area alone: a grant left to an answer that did not
    /// carry it (`Answering`). The peer reads it there, or the provider ships it.
    pub fn announce_in_area(&mut self, mine: &Area) {
        if !self.announcement_due().standalone {
            return;
        }
        self.take_announcement(false);
        mine.data_granted
            .store(self.data_notified, Ordering::Release);
        self.extra.area_only += 1;
    }

    pub fn standalone(&mut self, mine: &Area, peer: &Area, can_send: bool) -> Option<u64> {
        if !self.announcement_due().standalone {
            return None;
        }
        let (_, imm) = self.take_announcement(false);
        mine.data_granted
            .store(self.data_notified, Ordering::Release);
        if can_send && self.take_ctrl(peer) {
            self.extra.standalone += 1;
            Some(imm)
        } else {
            self.extra.area_only += 1;
            None
        }
    }

    /// Whether [`Flow::standalone`] would announce now (a cheap test before taking locks).
    pub fn wants_standalone(&mut self) -> bool {
        self.announcement_due().standalone
    }

    /// Whether the queue should run flow control's progress step after a poll: WRs wait for
    /// credit (`waiting`), the peer's initial window is still unknown, or a standalone
    /// announcement is due.
    #[inline]
    pub fn wants_progress(&mut self, waiting: bool) -> bool {
        waiting || !self.peer_initial || self.announcement_due().standalone
    }

    /// A receive post: counts the `accepted` buffers and the `refused` ones, publishes the
    /// initial window or tops up the control reserve, and says whether a standalone
    /// announcement is due.
    pub fn rx_batch_posted(&mut self, accepted: u64, refused: u64, mine: &Area) -> bool {
        self.rx_posted(accepted);
        if refused > 0 {
            self.rx_refused(refused);
        }
        self.publish(mine);
        self.announcement_due().standalone
    }

    /// `rx_batch_posted(1, 0, mine)`, inline: the one buffer of a lone receive post (every
    /// repost of a ping-pong), its counts known where it inlines.
    #[inline(always)]
    pub fn rx_one_posted(&mut self, mine: &Area) -> bool {
        self.rx_posted(1);
        self.publish(mine);
        self.announcement_due().standalone
    }

    pub fn extra(&self) -> Extra {
        self.extra
    }

    pub fn params(&self) -> Params {
        self.p
    }

    // ----- send side -----

    /// Whether the peer's initial window is known (the queue is READY).
    pub fn peer_ready(&self) -> bool {
        self.peer_initial
    }

    /// Reads the peer's area: the initial window, newer cumulative grants, control credit.
    pub fn refresh(&mut self, peer: &Area) {
        if !self.peer_initial {
            if peer.initial.load(Ordering::Acquire) == 0 {
                return;
            }
            self.peer_initial = true;
        }
        let before = self.data_seen;
        self.accept_grant(peer.data_granted.load(Ordering::Acquire));
        if self.data_seen > before {
            self.extra.area_refreshes += 1;
        }
        self.ctrl_seen = self
            .ctrl_seen
            .max(peer.ctrl_granted.load(Ordering::Acquire));
    }

    fn accept_grant(&mut self, cumulative: u64) {
        if cumulative <= self.data_seen {
            return;
        }
        let inc = cumulative - self.data_seen;
        self.data_seen = cumulative;
        if self
            .c
            .remote_rx_window
            .add_bounded(inc, self.p.peer_rx_depth)
        {
            self.c.total_remote_rx_received.add(inc);
        } else {
            self.c.total_remote_rx_received_error.add(inc);
            crate::log_warn!(
                "umq_flow_control",
                "peer announced {inc} credits, more than its rx depth {} allows; ignored",
                self.p.peer_rx_depth
            );
        }
    }

    /// Credit granted by a message of the July 2026 protocol (`credit`): it adds to the window.
    pub fn grant(&mut self, n: u64) {
        self.peer_initial = true;
        self.accept_grant(self.data_seen + n);
    }

    /// Gives `n` credits of the window back to the peer unused (not counted as consumed).
    pub fn return_unused(&mut self, n: u64) {
        self.c.remote_rx_window.take_upto(n);
    }

    /// Applies an in-band announcement (its cumulative total; a repeat adds nothing).
    pub fn on_announcement(&mut self, a: Announcement) {
        self.peer_initial = true;
        let ahead = a.cumulative.wrapping_sub(self.data_seen as u32);
        if ahead != 0 && ahead < u32::MAX / 2 {
            self.accept_grant(self.data_seen + ahead as u64);
        }
    }

    pub fn window(&self) -> u64 {
        self.c.remote_rx_window.get()
    }

    /// All the credit the peer has granted us.
    pub fn credit_received(&self) -> u64 {
        self.c.total_remote_rx_received.get()
    }

    /// Credit we announced that the peer still holds or has in flight.
    pub fn peer_credit(&self) -> u64 {
        self.peer_outstanding()
    }

    /// Standalone announcements of the peer that landed here.
    pub fn ctrl_received(&self) -> u64 {
        self.ctrl_arrived
    }

    /// Takes up to `want` credits for data WRs; returns how many were granted.
    pub fn take_credit(&mut self, want: u64) -> u64 {
        let got = self.c.remote_rx_window.take_upto(want);
        self.c.total_remote_rx_consumed.add(got);
        got
    }

    /// `take_credit(1)`, as the lone WR of a post takes it: whether there was one. (The
    /// general form's branchless minimum cost the one-pass send six instructions.)
    #[inline(always)]
    pub fn take_one_credit(&mut self) -> bool {
        let window = self.c.remote_rx_window.get();
        if window == 0 {
            return false;
        }
        self.c.remote_rx_window.set(window - 1);
        self.c.total_remote_rx_consumed.add(1);
        true
    }

    /// Gives back credit taken for WRs the transport refused.
    pub fn return_credit(&mut self, n: u64) {
        self.c.remote_rx_window.add(n);
        self.c.total_remote_rx_consumed.sub(n);
    }

    pub fn count_refused(&mut self, n: u64) {
        self.c.total_flow_controlled_wr.add(n);
    }

    /// Uses one control credit for a standalone; it counts as one credit received and used.
    fn take_ctrl(&mut self, peer: &Area) -> bool {
        if self.ctrl_seen == self.ctrl_used {
            self.ctrl_seen = self
                .ctrl_seen
                .max(peer.ctrl_granted.load(Ordering::Acquire));
        }
        if self.ctrl_seen == self.ctrl_used {
            return false;
        }
        self.ctrl_used += 1;
        self.c.total_remote_rx_received.add(1);
        self.c.total_remote_rx_consumed.add(1);
        true
    }

    /// Control credit we hold toward the peer.
    pub fn ctrl_credit(&self) -> u64 {
        self.ctrl_seen - self.ctrl_used
    }

    pub fn stats(&self) -> umq_flowcontrol_stats_t {
        let c = &self.c;
        umq_flowcontrol_stats_t {
            local_rx_posted: c.local_rx_posted.get(),
            remote_rx_window: c.remote_rx_window.get(),
            total_local_rx_posted: c.total_local_rx_posted.get(),
            total_local_rx_notified: c.total_local_rx_notified.get(),
            total_local_rx_posted_error: c.total_local_rx_posted_error.get(),
            total_remote_rx_received: c.total_remote_rx_received.get(),
            total_remote_rx_consumed: c.total_remote_rx_consumed.get(),
            total_remote_rx_received_error: c.total_remote_rx_received_error.get(),
            total_flow_controlled_wr: c.total_flow_controlled_wr.get(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(iw: u16, ni: u16, depth: u32) -> Flow {
        Flow::new(Params::new(iw, ni, depth, depth))
    }

    #[test]
    fn defaults_and_clamping() {
        let p = Params::new(0, 0, 64, 64);
        assert_eq!((p.initial_window, p.notify_interval), (32, 4));
        let p = Params::new(65, 65, 64, 64);
        assert_eq!((p.initial_window, p.notify_interval), (32, 4));
        let p = Params::new(0, 0, 1, 1);
        assert_eq!((p.initial_window, p.notify_interval), (1, 1));
        let p = Params::new(7, 3, 64, 64);
        assert_eq!((p.initial_window, p.notify_interval), (7, 3));
    }

    /// What the peer can know of our grants: the area as shipped, or a committed piggyback
    /// (an undone one does not count); used up once as many messages arrived.
    #[test]
    fn the_peer_uses_up_what_it_can_know_of() {
        let mine = Area::default();
        let mut f = flow(2, 1, 8);
        assert!(f.rx_posted(2) && f.publish(&mine));
        assert!(!f.peer_used_all_known(2));
        f.data_arrived(2);
        assert!(f.peer_used_all_known(2), "the initial window used up");
        assert!(f.rx_posted(1));
        let (k, _) = f.piggyback().expect("an announcement is due");
        f.undo(k);
        assert!(
            f.peer_used_all_known(2),
            "an undone piggyback carries nothing"
        );
        let (_, _) = f.piggyback().expect("due again");
        f.commit(&mine);
        assert!(!f.peer_used_all_known(2), "the piggyback carried one more");
        f.data_arrived(1);
        assert!(f.peer_used_all_known(2));
    }

    /// A peer that sends past its credit (hostile, or a second queue bound to ours) holds no
    /// credit by our count, and the window goes on: nothing wraps to a window never given.
    #[test]
    fn a_peer_past_its_credit_holds_none() {
        let mine = Area::default();
        let mut f = flow(2, 1, 8);
        assert!(f.rx_posted(2) && f.publish(&mine));
        f.data_arrived(5);
        assert_eq!(f.peer_outstanding(), 0);
        assert!(f.peer_used_all_known(2));
        assert!(f.rx_posted(3));
        let (k, _) = f.piggyback().expect("due: the peer holds nothing");
        assert_eq!(k, 3, "the buffers posted since go out as credit");
        assert_eq!(f.peer_outstanding(), 0, "5 arrived against 5 granted");
        f.data_arrived(1);
        assert_eq!(f.peer_outstanding(), 0);
    }

    /// An area is worth shipping at once only for a grant the peer does not know: one that a
    /// SEND carried, or that the area already took there, is not waited for.
    #[test]
    fn the_peer_waits_only_for_a_grant_it_does_not_know() {
        let mine = Area::default();
        let mut f = flow(1, 1, 8);
        assert!(f.rx_posted(1) && f.publish(&mine));
        f.data_arrived(1);
        assert!(
            f.peer_waits_for(1, 0),
            "the initial window, not shipped yet"
        );
        assert!(!f.peer_waits_for(1, 1), "shipped");
        assert!(f.rx_posted(1));
        f.piggyback().expect("due: the peer used all it knows of");
        f.commit(&mine);
        let granted = mine.snapshot()[1];
        assert_eq!(granted, 2);
        assert!(!f.peer_waits_for(granted, 1), "a SEND carried it");
        f.data_arrived(1);
        assert!(!f.peer_waits_for(granted, 1), "used up, and nothing new");
        assert!(f.rx_posted(1));
        let (k, _) = f.piggyback().expect("due");
        f.undo(k);
        assert!(!f.peer_waits_for(granted, 1), "not in the area yet");
    }

    #[test]
    fn immediates_round_trip_and_user_bits() {
        let a = Announcement {
            increment: 513,
            cumulative: 0xdead_beef,
            in_user_buf: true,
        };
        let imm = encode_imm(a);
        assert_eq!(imm & 1, 1);
        assert_eq!((imm >> 1) & 0x1f, 1);
        assert_eq!((imm >> 16) & 0xffff, 513);
        assert_eq!(decode_imm(imm), Some(a));
        assert_eq!(decode_imm(imm & !1), None);
        assert_eq!(decode_imm(1 | 2 << 1), None, "unknown private type");
        assert_eq!(user_imm(u64::MAX), u64::MAX - 1);
    }

    #[test]
    fn initial_window_is_published_through_the_area() {
        let (mut b, area) = (flow(4, 2, 16), Area::default());
        let mut a = flow(4, 2, 16);
        b.rx_posted(3);
        assert!(!b.publish(&area));
        a.refresh(&area);
        assert!(!a.peer_ready());
        b.rx_posted(2);
        assert!(b.publish(&area));
        assert_eq!(area.initial_window(), 5);
        a.refresh(&area);
        assert!(a.peer_ready());
        assert_eq!(a.window(), 5);
        assert_eq!(b.stats().local_rx_posted, 0);
        assert_eq!(b.stats().total_local_rx_notified, 5);
    }

    #[test]
    fn repeated_and_stale_announcements_add_nothing() {
        let mut a = flow(4, 2, 16);
        let ann = |cum| Announcement {
            increment: 0,
            cumulative: cum,
            in_user_buf: false,
        };
        a.on_announcement(ann(6));
        a.on_announcement(ann(6));
        a.on_announcement(ann(3));
        assert_eq!(a.window(), 6);
        assert_eq!(a.stats().total_remote_rx_received, 6);
    }

    #[test]
    fn overflowing_announcements_are_refused_and_counted() {
        let mut a = flow(4, 2, 16);
        a.on_announcement(Announcement {
            increment: 17,
            cumulative: 17,
            in_user_buf: false,
        });
        let s = a.stats();
        assert_eq!(
            (s.remote_rx_window, s.total_remote_rx_received_error),
            (0, 17)
        );
        let mut b = flow(4, 2, 16);
        assert!(b.rx_posted(16));
        assert!(!b.rx_posted(1));
        assert_eq!(b.stats().total_local_rx_posted_error, 1);
        assert_eq!(b.stats().total_local_rx_posted, 16);
    }

    #[test]
    fn piggyback_undo_restores_everything() {
        let (mut b, area) = (flow(2, 2, 16), Area::default());
        b.rx_posted(2);
        b.publish(&area);
        b.rx_posted(3);
        let before = b.clone();
        let (k, imm) = b.piggyback().expect("due");
        assert_eq!(k, 3);
        assert_eq!(decode_imm(imm).unwrap().cumulative, 5);
        b.undo(k);
        assert_eq!(b, before);
        assert_eq!(
            area.data_granted.load(Ordering::Relaxed),
            2,
            "nothing published"
        );
    }

    /// A lone receive post (`rx_one_posted`) is `rx_batch_posted(1, 0)`: two receivers, one
    /// posting each way, through a long mixed run of posts, arrivals, piggybacked and standalone
    /// announcements and control arrivals into the buffers held for them (a fixed pseudo-random
    /// order), stay equal in every state and answer, the depth passed and control taken
    /// included.
    #[test]
    fn a_lone_receive_post_is_a_batch_of_one() {
        let (mine_a, mine_b) = (Area::default(), Area::default());
        let (mut a, mut b) = (flow(4, 2, 16), flow(4, 2, 16));
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            match x % 8 {
                0..=4 => assert_eq!(
                    a.rx_one_posted(&mine_a),
                    b.rx_batch_posted(1, 0, &mine_b),
                    "step {step}"
                ),
                5 => [&mut a, &mut b].iter_mut().for_each(|f| f.data_arrived(1)),
                6 => {
                    let (pa, pb) = (a.piggyback(), b.piggyback());
                    assert_eq!(pa, pb, "step {step}");
                    if pa.is_some() {
                        a.commit(&mine_a);
                        b.commit(&mine_b);
                    }
                }
                _ if x & 0x100 != 0 => {
                    let (peer_a, peer_b) = (Area::default(), Area::default());
                    assert_eq!(
                        a.standalone(&mine_a, &peer_a, true),
                        b.standalone(&mine_b, &peer_b, true),
                        "step {step}"
                    );
                }
                // A standalone lands only in a buffer held for control.
                _ if a.ctrl_outstanding() > 0 => {
                    [&mut a, &mut b].iter_mut().for_each(|f| f.ctrl_arrived())
                }
                _ => {}
            }
            assert_eq!(a, b, "step {step}");
            assert_eq!(mine_a.snapshot(), mine_b.snapshot(), "step {step}");
        }
        let s = a.stats();
        assert!(s.total_local_rx_posted > 0 && s.total_local_rx_posted_error > 0);
        assert!(a.ctrl_received() > 0, "no control arrival was taken");
    }

    /// What is due, from the counts themselves: the rule `announcement_due` keeps in
    /// `due_from` between the receive side's events.
    fn due_by_the_counts(f: &Flow) -> Due {
        let free =
            f.c.local_rx_posted
                .get()
                .saturating_sub(f.ctrl_outstanding());
        if !f.initial_published || free == 0 {
            return Due {
                piggyback: false,
                standalone: false,
            };
        }
        let drained = f.data_arrived >= f.data_notified;
        let built = free >= f.p.notify_interval;
        let low = f.data_notified <= f.data_arrived + f.p.notify_interval;
        Due {
            piggyback: drained || built,
            standalone: drained || built && low,
        }
    }

    /// Through 20,000 receive-side events in each of several settings (posts past the depth,
    /// arrivals, a peer's sends beyond its credit, piggybacks committed and undone, standalones,
    /// control arrivals), what is due and whether a receive post has anything to publish are
    /// always what the counts say.
    #[test]
    fn the_announcements_due_are_what_the_counts_say() {
        for (iw, ni, depth) in [(4, 2, 16), (1, 1, 4), (8, 4, 64), (2, 0, 16), (32, 16, 64)] {
            let (mine, peer) = (Area::default(), Area::default());
            let mut f = flow(iw, ni, depth);
            let mut x = 0x2545_f491_4f6c_dd1du64 ^ depth as u64;
            let mut seen = [false; 3];
            for step in 0..20_000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                match x % 10 {
                    0..=3 => {
                        f.rx_one_posted(&mine);
                    }
                    4 | 5 => f.data_arrived(1),
                    6 => {
                        if let Some((k, _)) = f.piggyback() {
                            match x & 0x100 != 0 {
                                true => f.commit(&mine),
                                false => f.undo(k),
                            }
                        }
                    }
                    7 => {
                        f.standalone(&mine, &peer, true);
                    }
                    _ if f.ctrl_outstanding() > 0 => f.ctrl_arrived(),
                    _ => {}
                }
                let (due, want) = (f.announcement_due(), due_by_the_counts(&f));
                assert_eq!(due, want, "settings {iw}/{ni}/{depth}, step {step}");
                let (out, budget) = (f.ctrl_granted - f.ctrl_arrived, f.p.ctrl_budget);
                let deficit = budget - out;
                let top_up = deficit != 0 && !(deficit < f.p.ack_threshold() && out > 0);
                assert_eq!(
                    f.publish_due,
                    !f.initial_published || top_up,
                    "settings {iw}/{ni}/{depth}, step {step}: what a receive post publishes"
                );
                seen[due.piggyback as usize + due.standalone as usize] = true;
            }
            assert_eq!(
                seen, [true; 3],
                "settings {iw}/{ni}/{depth}: not every answer came"
            );
        }
    }

    /// A lone WR's credit: one while the window lasts, counted as consumed; none after.
    #[test]
    fn one_credit_at_a_time() {
        let mut a = flow(4, 2, 16);
        a.on_announcement(Announcement {
            increment: 2,
            cumulative: 2,
            in_user_buf: false,
        });
        assert!(a.take_one_credit());
        assert!(a.take_one_credit());
        assert!(!a.take_one_credit(), "the window is spent");
        let s = a.stats();
        assert_eq!((s.remote_rx_window, s.total_remote_rx_consumed), (0, 2));
    }

    #[test]
    fn credit_is_taken_partially_and_returned() {
        let mut a = flow(4, 2, 16);
        a.on_announcement(Announcement {
            increment: 5,
            cumulative: 5,
            in_user_buf: false,
        });
        assert_eq!(a.take_credit(8), 5);
        a.count_refused(3);
        a.return_credit(2);
        let s = a.stats();
        assert_eq!((s.remote_rx_window, s.total_remote_rx_consumed), (2, 3));
        assert_eq!(s.total_flow_controlled_wr, 3);
        assert_eq!(
            s.remote_rx_window,
            s.total_remote_rx_received - s.total_remote_rx_consumed
        );
    }
}

/// The flow state of a bound queue: the December window protocol, or the July 2026 credit
/// requests (`credit`); only the July 2026 build makes the second (`CreditBuild`). Both keep
/// their counters under the queue's lock, which the send and receive paths take whichever
/// threads run them. So `use_atomic_window` changes nothing here but what the statistics
/// report: counters of atomic words, a flavour of the window the lock made pointless, had cost
/// every call of the window protocol's a test for it (48 instructions of a 64 B loopback
/// ping-pong's round trip, 49 over shared memory).
// The window's state inline, not boxed: the data path reads it at every step.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum FlowState {
    Window(Flow),
    Credit(Box<credit::Credit>, CreditBuild),
}

/// What a `FlowState::Credit` carries to say the build speaks the credit requests: nothing in
/// the July 2026 build, and in the December build a type without values, so that the variant
/// cannot be made there and every match on a flow state compiles without its arm. Each call of
/// the window protocol's (`dispatch!`) had carried a test for it: 38 instructions of a loopback
/// ping-pong's round trip, 30 over shared memory.
#[cfg(feature = "abi-2026")]
pub type CreditBuild = ();
#[cfg(not(feature = "abi-2026"))]
#[derive(Debug)]
pub enum CreditBuild {}

/// The marker of `FlowState::Credit` in this build: None where there is none.
pub fn credit_build() -> Option<CreditBuild> {
    #[cfg(feature = "abi-2026")]
    return Some(());
    #[cfg(not(feature = "abi-2026"))]
    None
}

macro_rules! dispatch {
    (
        window: { $( $(#[$m:meta])* fn $name:ident(&mut self $(, $arg:ident: $ty:ty)*) -> $ret:ty; )* }
        credit: { $( $(#[$cm:meta])* fn $cname:ident(&mut self $(, $carg:ident: $cty:ty)*) -> $cret:ty = $c:ident => $body:expr; )* }
    ) => {
        impl FlowState {
            pub fn new(p: Params) -> Self {
                FlowState::Window(Flow::new(p))
            }
            $( $(#[$m])* pub fn $name(&mut self $(, $arg: $ty)*) -> $ret {
                match self {
                    FlowState::Window(f) => f.$name($($arg),*),
                    FlowState::Credit(c, _) => off_the_window_path(move || c.win.$name($($arg),*)),
                }
            } )*
            $( $(#[$cm])* #[allow(unused_variables)]
            pub fn $cname(&mut self $(, $carg: $cty)*) -> $cret {
                match self {
                    FlowState::Window(f) => f.$cname($($carg),*),
                    FlowState::Credit($c, _) => off_the_window_path(move || $body),
                }
            } )*
        }
    };
}

// The credit protocol's window counters are a `Flow`'s (`Credit::win`): the calls on them are
// shared. The announcement machinery of the window protocol does nothing there: credit comes
// by request, in messages (`Credit::on_msg`), and the receive side counts into the pool.
dispatch! {
    window: {
        fn return_credit(&mut self, n: u64) -> ();
        fn count_refused(&mut self, n: u64) -> ();
        fn window(&mut self) -> u64;
        fn credit_received(&mut self) -> u64;
        fn params(&mut self) -> Params;
    }
    credit: {
        // Requests, answers and returns sent count where the window protocol counts its
        // standalone updates.
        fn extra(&mut self) -> Extra = c => Extra {
            standalone: c.packets.sent,
            ..Extra::default()
        };
        fn rx_posted(&mut self, n: u64) -> bool = c => true;
        fn rx_refused(&mut self, n: u64) -> () = c => ();
        fn data_arrived(&mut self, n: u64) -> () = c => c.data_arrived(n);
        fn peer_used_all_known(&mut self, shipped: u64) -> bool = c => false;
        fn peer_waits_for(&mut self, granted: u64, shipped: u64) -> bool = c => false;
        fn grant_known_to_peer(&mut self, shipped: u64) -> u64 = c => shipped;
        fn ctrl_arrived(&mut self) -> () = c => ();
        fn publish(&mut self, mine: &Area) -> bool = c => false;
        #[inline(always)]
        fn piggyback(&mut self) -> Option<(u64, u64)> = c => None;
        fn commit(&mut self, mine: &Area) -> () = c => ();
        fn undo(&mut self, k: u64) -> () = c => ();
        fn standalone(&mut self, mine: &Area, peer: &Area, can_send: bool) -> Option<u64> = c => None;
        fn announce_in_area(&mut self, mine: &Area) -> () = c => ();
        fn refresh(&mut self, peer: &Area) -> () = c => ();
        fn on_announcement(&mut self, a: Announcement) -> () = c => ();
        #[inline(always)]
        fn take_credit(&mut self, want: u64) -> u64 = c => c.take_credit(want, credit_clock_us());
        #[inline(always)]
        fn take_one_credit(&mut self) -> bool = c => c.take_credit(1, credit_clock_us()) == 1;
        fn wants_standalone(&mut self) -> bool = c => false;
        #[inline]
        fn wants_progress(&mut self, waiting: bool) -> bool = c => waiting || c.has_outgoing();
        // The pool has the buffers as credit; true: the queue's progress step answers parked
        // requests and offers a first credit (`Queue::credit_after_rx_post`).
        #[inline(always)]
        fn rx_batch_posted(&mut self, accepted: u64, refused: u64, mine: &Area) -> bool = c => {
            c.pool.recharge(accepted);
            true
        };
        #[inline(always)]
        fn rx_one_posted(&mut self, mine: &Area) -> bool = c => {
            c.pool.recharge(1);
            true
        };
        fn peer_ready(&mut self) -> bool = c => true;
        fn ctrl_credit(&mut self) -> u64 = c => 0;
        fn stats(&mut self) -> umq_flowcontrol_stats_t = c => c.window_stats();
        fn peer_credit(&mut self) -> u64 = c => c.granting().unused();
        fn ctrl_received(&mut self) -> u64 = c => c.packets.received;
    }
}

/// The credit protocol's arm of a `FlowState` call in the July 2026 build, kept out of line: the
/// window protocol's arm inlines into the data path.
#[cold]
#[inline(never)]
fn off_the_window_path<R>(f: impl FnOnce() -> R) -> R {
    f()
}

impl FlowState {
    /// The credit protocol's machine, when the queue runs it.
    #[inline(always)]
    pub fn credit(&mut self) -> Option<&mut credit::Credit> {
        match self {
            FlowState::Credit(c, _) => Some(c),
            _ => None,
        }
    }
}

/// The credit protocol's clock: microseconds on the process's monotonic clock (the progress
/// engine's deadlines are on the same clock, in nanoseconds).
pub fn credit_clock_us() -> u64 {
    crate::os::clock_ns() / 1000
}
