//! The provider interface, and the one place providers are registered.
//!
//! A queue reaches its peer in one of two ways. A peer in this process is another `Queue`, and
//! the sender executes its WRs against it directly under both queues' locks (`loopback`); the
//! queue layer drives that engine itself, since it needs both queues. Every other peer is
//! reached through a `Link`, the binding as one provider keeps it, living under the queue's own
//! wire lock: the queue layer calls the methods below and never names a provider. A provider
//! that reaches other processes adds a variant to `Link` (and, if it needs an endpoint of its
//! own before a binding exists, a field to `Endpoints`), and its folder; nothing else.
//!
//! `Link` is an enum, not a trait object: every method is a `match` the compiler resolves in
//! place (with one provider, to a direct call), so the data path pays no indirect call and
//! can inline the provider's fast path. A trait would cost an indirect call per post and per
//! poll, and a generic `Queue<P>` would split the handle table by provider.

use super::LinkError;
use super::fabric;
use super::progress::Wakeup;
use super::shm;
pub use super::wire::Receiver;
use super::wire::{Outcome, Wire};
use crate::abi::types::umq_buf_t;
use crate::buf::arena::Arena;
use crate::dfx::{TransportOp, tp_perf_record, tp_perf_start};
use crate::flow::Area;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex, OnceLock};

/// The providers, as `UMQ_PROVIDER` names them and a bind chooses them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// Both queues in this process.
    Loopback,
    /// Two processes of one host.
    Shm,
    /// Two hosts (or, forced, two processes of one), over libfabric.
    Fabric,
}

impl Provider {
    pub fn from_name(name: &str) -> Option<Provider> {
        match name {
            "loopback" => Some(Provider::Loopback),
            "shm" => Some(Provider::Shm),
            "fabric" => Some(Provider::Fabric),
            _ => None,
        }
    }

    /// The value `umq_ext_transport_stats_t.transport` reports.
    pub fn stats_code(self) -> u32 {
        use crate::abi::ext::*;
        match self {
            Provider::Loopback => UMQ_EXT_TRANSPORT_LOOPBACK,
            Provider::Shm => UMQ_EXT_TRANSPORT_SHM,
            Provider::Fabric => UMQ_EXT_TRANSPORT_FABRIC,
        }
    }

    /// Logs the provider the first time it serves a bind.
    pub fn log_first_use(self) {
        static LOOPBACK: std::sync::Once = std::sync::Once::new();
        static SHM: std::sync::Once = std::sync::Once::new();
        static FABRIC: std::sync::Once = std::sync::Once::new();
        let once = match self {
            Provider::Loopback => &LOOPBACK,
            Provider::Shm => &SHM,
            Provider::Fabric => &FABRIC,
        };
        once.call_once(|| crate::log_info!("umq_bind", "transport: {}", self.describe()));
    }

    /// What the provider serves, for the log line of its first bind.
    pub fn describe(self) -> &'static str {
        match self {
            Provider::Loopback => "loopback (peer queue in this process)",
            Provider::Shm => "shm (peer queue in another process of this host)",
            Provider::Fabric => "fabric (libfabric; peer queue on another host)",
        }
    }
}

/// What a bind knows of the peer queue, from its bind info, for choosing a provider.
#[derive(Debug, Clone, Copy, Default)]
pub struct PeerFacts {
    pub pid: u32,
    pub uid: u32,
    pub same_process: bool,
    pub same_host: bool,
    pub same_user: bool,
    /// It offers a shared-memory inbox.
    pub offers_shm: bool,
    /// It offers a network endpoint.
    pub offers_fabric: bool,
}

/// Why no provider serves a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoProvider {
    /// `UMQ_PROVIDER=loopback`, and the peer is in another process (its pid).
    LoopbackForcedAcrossProcesses(u32),
    /// `UMQ_PROVIDER=fabric`, and the peer offers no network endpoint.
    FabricForcedNotOffered,
    /// The peer is on another host and offers no network endpoint (or another provider is
    /// forced).
    OtherHostUnreachable,
    /// The peer runs as another user (its uid): shared memory is refused.
    OtherUser(u32),
    /// The peer offers no shared-memory inbox.
    NoInbox,
}

impl std::fmt::Display for NoProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoProvider::LoopbackForcedAcrossProcesses(pid) => write!(
                f,
                "UMQ_PROVIDER=loopback but the peer queue lives in another process (pid {pid})"
            ),
            NoProvider::FabricForcedNotOffered => f.write_str(
                "UMQ_PROVIDER=fabric but the peer offers no network endpoint (is UMQ_PROVIDER=fabric set there too, and libfabric installed?)",
            ),
            NoProvider::OtherHostUnreachable => f.write_str(
                "the peer queue is on another host but offers no network endpoint (a UB or IB queue whose dev_info names an address other hosts reach, with libfabric installed)",
            ),
            NoProvider::OtherUser(uid) => {
                write!(f, "the peer process runs as uid {uid}, not as us: refused")
            }
            NoProvider::NoInbox => f.write_str(
                "the peer offers no shared-memory inbox (UMQ_PROVIDER=loopback there?)",
            ),
        }
    }
}

/// The provider that serves a binding: loopback for a peer in this process, shared memory for
/// a peer of this host and user, the network (libfabric) for a peer on another host; `forced`
/// (`UMQ_PROVIDER`) forces one.
pub fn choose(forced: Option<Provider>, peer: &PeerFacts) -> Result<Provider, NoProvider> {
    match forced {
        None | Some(Provider::Loopback) if peer.same_process => return Ok(Provider::Loopback),
        Some(Provider::Loopback) => {
            return Err(NoProvider::LoopbackForcedAcrossProcesses(peer.pid));
        }
        Some(Provider::Fabric) if peer.offers_fabric => return Ok(Provider::Fabric),
        Some(Provider::Fabric) => return Err(NoProvider::FabricForcedNotOffered),
        _ => {}
    }
    if !peer.same_host && forced.is_none() && peer.offers_fabric {
        return Ok(Provider::Fabric);
    }
    if !peer.same_host {
        return Err(NoProvider::OtherHostUnreachable);
    }
    if !peer.same_user {
        return Err(NoProvider::OtherUser(peer.uid));
    }
    if !peer.offers_shm {
        return Err(NoProvider::NoInbox);
    }
    Ok(Provider::Shm)
}

/// Which of its ends a queue's bind info offers under `forced`: shared memory unless another
/// provider is forced; the network when forced, or unforced for a queue whose address other
/// hosts reach (a peer on another host can only reach that). Returns (shm, network).
pub fn offered(forced: Option<Provider>, reachable_from_other_hosts: bool) -> (bool, bool) {
    let shm = matches!(forced, None | Some(Provider::Shm));
    let fabric = match forced {
        Some(Provider::Fabric) => true,
        None => reachable_from_other_hosts,
        _ => false,
    };
    (shm, fabric)
}

/// Where a peer in another process can be reached, from its bind info.
pub struct PeerAddress<'a> {
    pub pid: u32,
    /// The peer runs on this host (same boot).
    pub same_host: bool,
    /// Shared memory: the peer's inbox fd and the secret in its header.
    pub inbox_fd: u32,
    pub secret: u64,
    /// Network: the peer's endpoint (its name, death watch and area key).
    pub fabric: &'a fabric::Contact,
    /// Our queue's flow-control area, for a provider that ships it to the peer.
    pub our_area: &'a Area,
}

/// A binding to a queue in another process: one variant per provider. (Boxed in the wire, so
/// the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
pub enum Link {
    Shm(shm::Link),
    Fabric(fabric::Link),
}

impl Link {
    /// The peer's process when it runs on this host: its exit ends the binding (the progress
    /// thread watches it).
    pub fn peer_process(&self) -> Option<u32> {
        match self {
            Link::Shm(l) => Some(l.pid()),
            Link::Fabric(l) => l.peer_pid(),
        }
    }

    /// How long after the peer's process exits what it sent may still be arriving: zero over
    /// shared memory (a published entry is whole in our ring); over the network its last
    /// bytes may still be in the kernel's hands (see `fabric::LAST_WORDS`).
    pub fn last_words_grace(&self) -> std::time::Duration {
        match self {
            Link::Shm(_) => std::time::Duration::ZERO,
            Link::Fabric(_) => fabric::LAST_WORDS,
        }
    }

    /// A socket that turns readable when the peer's process, on another host, is gone (the
    /// progress thread takes it and sleeps on it); None when there is none.
    pub fn take_peer_socket(&mut self) -> Option<Arc<OwnedFd>> {
        match self {
            Link::Shm(_) => None,
            Link::Fabric(l) => l.take_peer_socket(),
        }
    }

    /// The call bell a peer rings to have this queue served, and the queue's tag there.
    pub fn call_bell(&self) -> Option<super::progress::RungBy> {
        match self {
            Link::Shm(l) => l.call_bell(),
            Link::Fabric(l) => l.call_bell(),
        }
    }

    /// Calls the peer's progress thread to our WRs that wait for it (its application may not
    /// be calling in): see `transport::call_bell`.
    pub fn call_peer(&mut self, w: &mut Wire) {
        match self {
            Link::Shm(l) => l.call_peer(),
            Link::Fabric(l) => l.call_peer(w),
        }
    }

    /// The peer's flow-control area: its initial window and cumulative grants.
    #[inline(always)]
    pub fn peer_area(&self) -> &Area {
        match self {
            Link::Shm(l) => l.peer_area(),
            Link::Fabric(l) => l.peer_area(),
        }
    }

    /// Calls the peer's progress thread to what we just sent, however it was called before: a
    /// control frame, which the peer must see whichever of its queues it polls.
    pub fn call_peer_now(&mut self) {
        match self {
            Link::Shm(l) => l.call_peer_now(),
            Link::Fabric(l) => l.call_peer_now(),
        }
    }

    /// Whether work of ours needs a process to run again, ours or the peer's (which we then
    /// call): WRs waiting for ring room or credit, or for the peer to execute them (over shared
    /// memory a copied SEND has left with its bytes: our next poll completes it); over the
    /// network any WR not completed (libfabric moves bytes only when called), credit not yet
    /// shipped, and a peer that cannot be reached (its last messages are still taken in).
    #[inline(always)]
    pub fn needs_us(&self, w: &Wire) -> bool {
        match self {
            Link::Shm(_) => w.sq.unsent_len() > 0 || w.sq.awaiting_peer() > 0,
            Link::Fabric(l) => !w.sq.all_completed() || l.area_unshipped() || l.unreachable(),
        }
    }

    /// Whether a round would find nothing to do (a poll on an empty queue skips it).
    #[inline(always)]
    pub fn idle(&self, w: &Wire) -> bool {
        match self {
            Link::Shm(l) => l.idle(w),
            Link::Fabric(_) => false,
        }
    }

    /// A receive poll's round when all it would do is take one message that lands whole in our
    /// next receive buffer (see the provider's `receive_one`); None, with nothing changed, when
    /// the full round must run.
    #[inline(always)]
    pub fn receive_one(&mut self, w: &mut Wire, umqh: u64) -> Option<Outcome> {
        let t = tp_perf_start();
        let out = match self {
            Link::Shm(l) => l.receive_one(w, umqh),
            Link::Fabric(_) => None,
        };
        if out.is_some() {
            tp_perf_record(TransportOp::Receive, t);
        }
        out
    }

    /// Whether another message has arrived behind what `receive_one` took (one stamp load).
    #[inline(always)]
    pub fn more_arrived(&self) -> bool {
        match self {
            Link::Shm(l) => l.more_arrived(),
            Link::Fabric(_) => false,
        }
    }

    /// A full round: takes what the peer sent, completes our WRs it has executed, sends our
    /// waiting WRs. Err when the pair broke (the peer left, or sent something corrupt).
    #[inline(always)]
    pub fn round(&mut self, w: &mut Wire, at: &Receiver) -> Result<Outcome, LinkError> {
        let t = tp_perf_start();
        let out = match self {
            Link::Shm(l) => l.round(w, at),
            Link::Fabric(l) => l.round(w, at),
        };
        tp_perf_record(TransportOp::Round, t);
        out
    }

    /// A post's round: sends our waiting WRs and nothing else. None when the full round must
    /// run instead (the peer has left: that round takes what it sent before it went).
    #[inline(always)]
    pub fn post_round(&mut self, w: &mut Wire) -> Option<Outcome> {
        let t = tp_perf_start();
        let out = match self {
            Link::Shm(l) => l.post_round(w),
            Link::Fabric(l) => l.post_round(w),
        };
        if out.is_some() {
            tp_perf_record(TransportOp::Send, t);
        }
        out
    }

    /// The one-pass post of a single WR: when the provider can send `wr` at once, `admit`
    /// (given the peer's area) takes its credit and queues it, and the provider sends and
    /// completes it; a WRITE or READ the provider carries out itself needs no credit and runs
    /// to its completion. None, with nothing changed, when it cannot go this way. One dispatch
    /// for the whole fast path.
    #[inline(always)]
    pub fn send_one_if(
        &mut self,
        w: &mut Wire,
        wr: *mut umq_buf_t,
        admit: impl FnOnce(&mut Wire, &Area) -> bool,
    ) -> Option<Outcome> {
        let t = tp_perf_start();
        let out = match self {
            Link::Shm(l) => l.send_one_if(w, wr, admit),
            Link::Fabric(l) => l.send_one_if(w, wr, admit),
        };
        if out.is_some() {
            tp_perf_record(TransportOp::Send, t);
        }
        out
    }

    /// Carries out the one-sided WRs at the front of `wrs` that the provider can run here
    /// and now, each to its completion, while the send queue holds fewer than `room` WRs; how
    /// many ran. The rest are posted the usual way.
    #[inline(always)]
    pub fn run_one_sided(
        &mut self,
        w: &mut Wire,
        wrs: &[*mut umq_buf_t],
        room: usize,
        out: &mut Outcome,
    ) -> usize {
        let t = tp_perf_start();
        let ran = match self {
            Link::Shm(l) => l.run_one_sided(w, wrs, room, out),
            Link::Fabric(_) => 0,
        };
        if ran > 0 {
            tp_perf_record(TransportOp::Send, t);
        }
        ran
    }

    /// Whether a standalone window update can go now.
    pub fn can_send_update(&self) -> bool {
        match self {
            Link::Shm(l) => l.can_send_update(),
            Link::Fabric(_) => true,
        }
    }

    /// Sends a control frame of the link-level pause (`transport::pause`); false when there is
    /// no room now.
    pub fn send_control(&mut self, frame: &[u8]) -> bool {
        match self {
            Link::Shm(l) => l.send_control(frame),
            Link::Fabric(l) => l.send_control(frame),
        }
    }

    /// Puts the control frames sent since the last round on their way (a provider that queues
    /// them: the network's).
    pub fn flush_control(&mut self, w: &mut Wire) {
        if let Link::Fabric(l) = self {
            l.flush_control(w);
        }
    }

    /// Sends a standalone window update (immediate `imm`); false when there is no room.
    pub fn send_update(&mut self, imm: u64) -> bool {
        match self {
            Link::Shm(l) => l.send_update(imm),
            Link::Fabric(l) => l.send_update(imm),
        }
    }

    /// Whether a message of the peer waits for one of our receive buffers (a receive post
    /// then runs a round at once).
    #[inline(always)]
    pub fn waits_for_rx_buffer(&self) -> bool {
        match self {
            Link::Shm(l) => l.waits_for_rx_buffer(),
            Link::Fabric(l) => l.waits_for_rx_buffer(),
        }
    }

    /// Whether our area holds a grant the peer waits for: over the network our area travels
    /// by RMA, and a peer that used all its credit waits for it (over shared memory the peer
    /// reads our area itself).
    #[inline(always)]
    pub fn owes_peer_credit(&self, w: &mut Wire) -> bool {
        match self {
            Link::Shm(_) => false,
            Link::Fabric(l) => l.owes_peer_credit(w),
        }
    }

    /// Whether our grants reach the peer as writes or messages of ours (over the network),
    /// not read by the peer in place (over shared memory).
    #[inline(always)]
    pub fn grants_travel(&self) -> bool {
        matches!(self, Link::Fabric(_))
    }

    /// Whether a write of our flow-control area to the peer is on its way (over the network).
    #[inline(always)]
    pub fn area_on_its_way(&self) -> bool {
        match self {
            Link::Shm(_) => false,
            Link::Fabric(l) => l.area_on_its_way(),
        }
    }

    /// A pro-API receive buffer from our shared pool, about to be posted behind `posted`
    /// others: the provider may let the peer write the message into it directly.
    #[inline(always)]
    pub fn offer_rx(&self, arena: &Arena, posted: usize, b: *mut umq_buf_t) {
        match self {
            Link::Shm(l) => l.offer_rx(arena, posted, b),
            Link::Fabric(_) => {}
        }
    }

    /// Our WRs in flight were failed: the provider awaits none of them any more.
    pub fn forget_in_flight(&mut self) {
        match self {
            Link::Shm(l) => l.forget_in_flight(),
            Link::Fabric(l) => l.forget_in_flight(),
        }
    }

    /// We leave the binding: the peer is told, and is done with our buffers when this returns.
    pub fn leave(&mut self) {
        match self {
            Link::Shm(l) => l.leave(),
            Link::Fabric(l) => l.leave(),
        }
    }

    /// For the progress thread, before it sleeps (an interrupt-mode queue): the fd the
    /// binding's provider signals when the peer sends, armed.
    pub fn arm_wakeup(&self) -> Arm {
        match self {
            // The shm doorbell belongs to the queue's inbox (`Endpoints::arm_wakeup`).
            Link::Shm(_) => Arm::NoFd,
            Link::Fabric(l) => l.arm_wakeup(),
        }
    }

    /// Whether a rate-limited queue's newest packet has left this host. Shared memory puts a
    /// packet in the peer's ring as it is granted; the network's kernel may hold it (see
    /// `fabric::tx::NewestPacket`).
    pub fn packet_backlog(&mut self) -> Backlog {
        match self {
            Link::Shm(_) => Backlog::Clear,
            Link::Fabric(l) => l.packet_backlog(),
        }
    }

    /// After `leave` and the flush: our endpoint made ready for a next binding. False when
    /// that was only partly possible (the provider logs nothing; the caller says so).
    pub fn ready_for_next(&self) -> bool {
        match self {
            Link::Shm(l) => l.ready_for_next(),
            Link::Fabric(_) => true,
        }
    }
}

/// Whether a rate-limited queue's newest packet has left this host, or waits in the kernel's
/// hands (`Link::packet_backlog`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backlog {
    /// It left (or the provider cannot tell, or sends packets only as they leave).
    Clear,
    /// It left after a look that found it held: just now, as far as the pacer knows.
    LeftSince,
    /// It waits: a packet handed over now would leave with it, together.
    Held,
}

/// What arming a binding's wake-up fd found.
pub enum Arm {
    /// The provider has no fd (or the queue is not in interrupt mode).
    NoFd,
    /// Sleep on it.
    Armed(Wakeup),
    /// Completions or progress are pending: run a round, then arm again.
    Pending,
}

/// A queue's own ends for the providers that reach other processes, made when a bind info
/// first offers them: what a peer needs before a binding exists (for shared memory, the inbox
/// it maps; for the network, a libfabric endpoint, which the binding that uses it takes).
#[derive(Default)]
pub struct Endpoints {
    /// The shared-memory inbox of our bindings: set by the first bind that picks shared memory,
    /// then kept (and renewed for each next peer), since our flow-control area lives in it.
    shm: OnceLock<Arc<shm::Segment>>,
    /// An inbox offered in bind info that no binding uses yet: a peer in another process may
    /// map it before we bind. A bind that picks another provider drops it, so a queue bound in
    /// its own process keeps no shared memory.
    shm_offered: Mutex<Option<shm::Offered>>,
    fabric: Mutex<FabricEnd>,
}

/// Our channel in the process's network node until a binding takes it (the binding closes it
/// when it ends), and how the last one made is reached, which a bound queue still offers.
#[derive(Default)]
struct FabricEnd {
    unbound: Option<fabric::Channel>,
    contact: Option<fabric::Contact>,
    /// Why the last opening failed, for a bind that then finds no channel of ours.
    failed: Option<String>,
}

/// What a queue's bind info offers, beside what the queue itself says.
#[derive(Clone, Default)]
pub struct Offer {
    /// Shared memory: our inbox fd and its secret.
    pub shm: Option<(i32, u64)>,
    /// Network: how our endpoint is reached.
    pub fabric: Option<fabric::Contact>,
}

impl Offer {
    /// Whether it offers an end for `provider` (a binding in this process needs none).
    pub fn has(&self, provider: Provider) -> bool {
        match provider {
            Provider::Loopback => true,
            Provider::Shm => self.shm.is_some(),
            Provider::Fabric => self.fabric.is_some(),
        }
    }
}

/// Which endpoints a bind info should offer.
pub struct Wants<'a> {
    /// None when a binding exists: only what exists already is offered then.
    pub make: bool,
    pub shm: bool,
    /// The libfabric provider and the local address to listen on, when the network is offered.
    pub fabric: Option<(&'a str, Option<&'a str>)>,
    pub interrupt: bool,
    /// The process pool, whose chunks a network node exposes for the peers' RMA and sends
    /// from.
    pub pool: &'a std::sync::Arc<crate::buf::pool::Pool>,
    /// The queue's receive depth, which sizes what an inbox keeps ready (`shm::Hot`).
    pub rx_depth: u32,
    pub umqh: u64,
}

impl Endpoints {
    /// Our endpoints as `want` says, each created on first use; a provider whose endpoint
    /// could not be set up is left out (and logged).
    pub fn offer(&self, want: &Wants) -> Offer {
        Offer {
            shm: want.shm.then(|| self.offer_shm(want)).flatten(),
            fabric: want.fabric.and_then(|f| self.offer_fabric(want, f)),
        }
    }

    fn offer_shm(&self, want: &Wants) -> Option<(i32, u64)> {
        if let Some(seg) = self.shm.get() {
            return Some((seg.fd(), seg.secret()));
        }
        let mut offered = self.shm_offered.lock().unwrap_or_else(|p| p.into_inner());
        if want.make && offered.is_none() {
            let hot = shm::Hot::for_depth(want.rx_depth);
            *offered = shm::Offered::create(crate::os::random_u64(), want.interrupt, hot)
                .inspect_err(|_| {
                    crate::log_warn!(
                        "umq_bind_info_get",
                        "queue {:#x}: no shared-memory inbox; peers in other processes cannot bind",
                        want.umqh
                    )
                })
                .ok();
        }
        offered.as_ref().map(|seg| (seg.fd(), seg.secret()))
    }

    fn offer_fabric(
        &self,
        want: &Wants,
        (prov, node): (&str, Option<&str>),
    ) -> Option<fabric::Contact> {
        let mut end = self.fabric.lock().unwrap_or_else(|p| p.into_inner());
        if want.make && end.unbound.is_none() {
            let opened = fabric::Channel::open(prov, node, want.interrupt).inspect_err(|why| {
                crate::log_warn!(
                    "umq_bind_info_get",
                    "queue {:#x}: no network endpoint (libfabric provider {prov}): {why}",
                    want.umqh
                )
            });
            end.failed = opened.as_ref().err().cloned();
            end.unbound = opened.ok();
            if let Some(ch) = &end.unbound {
                ch.use_pool(want.pool);
            }
            end.contact = end.unbound.as_ref().map(fabric::Channel::contact);
        }
        end.contact.clone()
    }

    /// Why we have no endpoint of `provider` to bind through: its opening's failure, or no
    /// opening yet.
    pub fn why_none(&self, provider: Provider) -> String {
        let end = self.fabric.lock().unwrap_or_else(|p| p.into_inner());
        match (provider, &end.failed) {
            (Provider::Fabric, Some(why)) => format!("no network endpoint of our own: {why}"),
            _ => format!("no endpoint of our own for {provider:?} (call umq_bind_info_get first)"),
        }
    }

    /// Readies our endpoints for a peer that has not bound yet (after `offer`, while unbound).
    pub fn open_for_next_peer(&self) {
        if let Some(seg) = self.shm_inbox() {
            seg.open_for_next_peer();
        }
    }

    /// Binds through `provider` to the peer at `addr`.
    pub fn connect(&self, provider: Provider, addr: &PeerAddress) -> Result<Link, String> {
        match provider {
            Provider::Shm => {
                let mine = self.inbox_for_binding()?;
                shm::Link::open(mine, addr.pid, addr.inbox_fd, addr.secret).map(Link::Shm)
            }
            Provider::Fabric => {
                // Taken under a lock released before `why_none` takes it again.
                let unbound = self
                    .fabric
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .unbound
                    .take();
                let channel = unbound.ok_or_else(|| self.why_none(provider))?;
                // SAFETY: the area is the connecting queue's, which owns the link made here.
                let ours = unsafe { fabric::OurArea::new(addr.our_area) };
                let peer = match addr.same_host {
                    true => fabric::PeerProcess::Local(addr.pid),
                    false => fabric::PeerProcess::Remote(addr.fabric.watch),
                };
                fabric::Link::open(channel, addr.fabric, peer, ours, fabric::liveness())
                    .map(Link::Fabric)
            }
            Provider::Loopback => Err("loopback binds to a queue, not through a link".into()),
        }
    }

    /// The inbox a shared-memory binding uses: ours already, or the one offered, which
    /// becomes ours (mapped, its ring's hot part populated now that it will carry messages).
    fn inbox_for_binding(&self) -> Result<Arc<shm::Segment>, String> {
        if let Some(seg) = self.shm.get() {
            return Ok(seg.clone());
        }
        let offered = self
            .shm_offered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or("no shared-memory inbox of our own (call umq_bind_info_get first)")?;
        let seg = offered
            .into_segment()
            .map_err(|e| format!("cannot map our inbox: errno {e}"))?;
        seg.populate();
        Ok(self.shm.get_or_init(|| Arc::new(seg)).clone())
    }

    /// A bind picked `provider`: an inbox offered for a shared-memory binding that did not
    /// come is dropped (unmapped and closed).
    pub fn bound_through(&self, provider: Provider) {
        if provider != Provider::Shm {
            *self.shm_offered.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }

    /// Our flow-control area when a provider keeps it where the peer reads it (None: the
    /// queue keeps it itself).
    #[inline]
    pub fn area(&self) -> Option<&Area> {
        self.shm.get().map(|seg| seg.area())
    }

    /// Tells the peer's side where our shared pool is (a provider that maps or registers it).
    /// Only a binding's inbox says it: the peer reads it for our sends, which come after our
    /// bind.
    pub fn publish_pool(&self, arena: &Arena) {
        if let Some(seg) = self.shm_inbox() {
            seg.publish_pool(arena.fd(), arena.secret());
        }
    }

    /// Tells the peer's side where our process's access table is (`buf::access`), so that it
    /// can carry out its one-sided WRITEs and READs to us itself. A binding's inbox says it
    /// (each binding's is new).
    pub fn publish_access(&self, table: Option<(i32, u64)>) {
        if let (Some(seg), Some((fd, secret))) = (self.shm_inbox(), table) {
            seg.publish_access(fd, secret);
        }
    }

    /// For the progress thread, before it sleeps: the doorbell of our shared-memory inbox,
    /// armed; None without one.
    pub fn arm_wakeup(&self) -> Option<Wakeup> {
        let seg = self.shm_inbox()?;
        let (fd, rung_by_peer) = seg.doorbell()?;
        seg.arm_doorbell();
        Some(Wakeup {
            fd,
            rung_by_peer,
            counter: true,
        })
    }

    /// Whether the peer can wake the queue's progress thread (`Wakeup::rung_by_peer`); None
    /// without a shared-memory doorbell.
    #[cfg(feature = "fuzzing")]
    pub fn rung_by_peer(&self) -> Option<bool> {
        Some(self.shm_inbox()?.doorbell()?.1)
    }

    /// For the progress thread: a peer's ring for this queue reached our call bell.
    pub fn rung_by_call(&self) {
        if let Some(seg) = self.shm_inbox() {
            seg.heard_by_call();
        }
    }

    #[inline]
    fn shm_inbox(&self) -> Option<&Arc<shm::Segment>> {
        self.shm.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HERE: PeerFacts = PeerFacts {
        pid: 7,
        uid: 1000,
        same_process: true,
        same_host: true,
        same_user: true,
        offers_shm: true,
        offers_fabric: true,
    };

    #[test]
    fn a_bind_takes_the_nearest_provider_the_peer_offers() {
        let other_process = PeerFacts {
            same_process: false,
            ..HERE
        };
        let other_host = PeerFacts {
            same_host: false,
            ..other_process
        };
        assert_eq!(choose(None, &HERE), Ok(Provider::Loopback));
        assert_eq!(choose(None, &other_process), Ok(Provider::Shm));
        assert_eq!(choose(None, &other_host), Ok(Provider::Fabric));
        // Forced: what is forced, or a refusal that says why.
        assert_eq!(choose(Some(Provider::Fabric), &HERE), Ok(Provider::Fabric));
        assert_eq!(choose(Some(Provider::Shm), &HERE), Ok(Provider::Shm));
        assert_eq!(
            choose(Some(Provider::Loopback), &other_process),
            Err(NoProvider::LoopbackForcedAcrossProcesses(7))
        );
        let no_network = PeerFacts {
            offers_fabric: false,
            ..other_host
        };
        assert_eq!(
            choose(Some(Provider::Fabric), &no_network),
            Err(NoProvider::FabricForcedNotOffered)
        );
        assert_eq!(
            choose(None, &no_network),
            Err(NoProvider::OtherHostUnreachable)
        );
        assert_eq!(
            choose(Some(Provider::Shm), &other_host),
            Err(NoProvider::OtherHostUnreachable)
        );
        let stranger = PeerFacts {
            same_user: false,
            ..other_process
        };
        assert_eq!(choose(None, &stranger), Err(NoProvider::OtherUser(1000)));
        let no_inbox = PeerFacts {
            offers_shm: false,
            ..other_process
        };
        assert_eq!(choose(None, &no_inbox), Err(NoProvider::NoInbox));
    }

    #[test]
    fn a_bind_info_offers_what_may_be_chosen() {
        assert_eq!(offered(None, false), (true, false));
        assert_eq!(offered(None, true), (true, true));
        assert_eq!(offered(Some(Provider::Shm), true), (true, false));
        assert_eq!(offered(Some(Provider::Fabric), false), (false, true));
        assert_eq!(offered(Some(Provider::Loopback), true), (false, false));
    }
}
