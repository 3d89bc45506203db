//! The network provider: a binding to a queue on another host (or, forced, on this one) over a
//! libfabric reliable-datagram endpoint (`tcp` by default, `verbs` where an RDMA device is).
//!
//! A process has one endpoint per libfabric provider and address, its *node* (`node`), shared
//! by all its network bindings: each binding is a channel of the node, messages name the
//! channel they are for, and two processes talk over one connection however many queue pairs
//! they bind. A WR crosses as one message (fragments of at most one bounce buffer, sent back to
//! back: see `msg`) and the peer executes it with the same target-side executor as every other
//! provider, so opcodes, token checks and completion statuses mean the same everywhere. SEND,
//! SEND_IMM and NOP complete once libfabric has sent their bytes (transmit complete, as over
//! shared memory); WRITE, WRITE_IMM and READ when the peer reports having executed them
//! (`KIND_DONE`), a READ's data arriving first. Flow control is unchanged: each side writes its
//! flow-control area into the landing words the peer's node keeps for the channel (RMA,
//! `ship_area`) whenever it changed, and the peer reads credit from there.

mod allowance;
mod calls;
#[cfg(any(test, feature = "fuzzing"))]
pub mod hostile;
mod msg;
pub mod node;
mod pieces;
mod registered;
mod rma;
mod rx;
pub mod sys;
mod tx;
pub mod watch;

use super::LinkError;
use super::link::{Arm, Backlog};
use super::progress::Wakeup;
use super::target;
use super::wire::{Outcome, PacketGate, Receiver, Side, Wire};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow::Area;
use msg::*;
pub use node::{ChannelId, Node};
use node::{NODE, Shared, Stamp};
pub use rma::wanted as rma_wanted;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};
pub use sys::{Endpoint, RemoteKey};
use tx::*;

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

/// WRs (and responses) handed to the sending step at most at once.
const MAX_OUTGOING: usize = 256;
/// A process with nothing to send to a peer process for this long sends it a ping, so the
/// peer keeps hearing from it.
const PING_AFTER: Duration = Duration::from_millis(500);
/// The least time between two shipments of our flow-control area while we send WRs, and while
/// we only receive (`ship_area`).
const AREA_WHILE_SENDING: Duration = Duration::from_millis(1);
const AREA_WHILE_RECEIVING: Duration = Duration::from_micros(50);
/// How long a post refused for credit leaves the provider's progress to the node's other
/// callers before it runs it itself (`post_round`).
const STARVED_PROGRESS: Duration = Duration::from_micros(20);
/// How long rounds that find nothing may skip the full round's timed work (the liveness check
/// above all): a queue polled in a loop, or swept by the progress thread, runs one at least
/// this often.
const QUIET_AT_MOST: Duration = Duration::from_millis(1);

pub const LIVENESS_DEFAULT_MS: u64 = 5000;

/// How long a peer may stay silent before its binding breaks: `UMQ_FABRIC_LIVENESS_MS`,
/// default `LIVENESS_DEFAULT_MS` (each process pings its peers after half a second of saying
/// nothing, so only a peer that is gone or cut off stays silent).
pub fn liveness() -> Duration {
    static MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    Duration::from_millis(*MS.get_or_init(|| {
        std::env::var("UMQ_FABRIC_LIVENESS_MS")
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .filter(|&ms| ms > 0)
            .unwrap_or(LIVENESS_DEFAULT_MS)
    }))
}

/// What a peer needs to reach a queue over the network: the network part of its bind info.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contact {
    /// The node's name (`fi_getname`); empty: no network.
    pub name: Vec<u8>,
    /// The node's death-watch beacon (`watch`).
    pub watch: Option<SocketAddr>,
    /// Where the peer writes its flow-control area.
    pub area: Option<RemoteKey>,
    /// The queue's channel in its node.
    pub channel: ChannelId,
    /// The port of the node's call bell (`call_bell`), on the beacon's address; 0: none.
    pub call_bell: u16,
    /// What the node's pings carry (`node::Peer::secret`).
    pub secret: u64,
}

/// Where the peer's process runs, as its bind info says.
pub enum PeerProcess {
    /// On this host, as this pid (the progress thread watches it through a pidfd).
    Local(u32),
    /// On another host, with its death-watch beacon there (`watch`), if it offers one.
    Remote(Option<SocketAddr>),
}

/// A queue's channel in its process's node, from the bind info that offers it until the
/// binding that used it ends.
pub struct Channel {
    node: Arc<Node>,
    id: ChannelId,
}

impl Drop for Channel {
    fn drop(&mut self) {
        self.node.lock().close_channel(self.id);
    }
}

impl Channel {
    /// A channel of this process's node for libfabric provider `prov` on `addr`, for a queue in
    /// interrupt mode when `interrupt` (the node then has a wait fd).
    pub fn open(prov: &str, addr: Option<&str>, interrupt: bool) -> Result<Channel, String> {
        Channel::in_node(Node::get(prov, addr, interrupt)?, interrupt)
    }

    pub fn in_node(node: Arc<Node>, interrupt: bool) -> Result<Channel, String> {
        let id = node
            .lock()
            .open_channel(interrupt)
            .ok_or("the network node has no free channel")?;
        Ok(Channel { node, id })
    }

    /// Lets this channel's node send from `pool`'s buffers in place and expose its chunks for
    /// the peers' RMA (`Node::use_pool`).
    pub fn use_pool(&self, pool: &Arc<crate::buf::pool::Pool>) {
        self.node.use_pool(pool);
    }

    /// How a peer reaches this channel.
    pub fn contact(&self) -> Contact {
        let n = self.node.lock();
        Contact {
            name: self.node.name().to_vec(),
            watch: self.node.beacon(),
            area: Some(n.landing_key(self.id)),
            channel: self.id,
            call_bell: n.call_bell.as_ref().map_or(0, |b| b.port()),
            secret: n.secret(),
        }
    }
}

/// A binding over libfabric: a channel of our node joined to the peer's.
pub struct Link {
    ch: Channel,
    /// The peer process in our node (`node::Peer`) and its address handle.
    peer: usize,
    peer_addr: u64,
    /// The peer queue's channel in its node.
    peer_chan: ChannelId,
    peer_pid: Option<u32>,
    /// Watches the peer's process on another host, until the progress thread takes it.
    peer_socket: Option<Arc<OwnedFd>>,
    /// The peer node's call bell, if it has one.
    peer_bell: Option<SocketAddr>,
    rx: Rx,
    tx: Tx,
    /// The peer's flow-control area, as it last wrote it into our landing words, and where we
    /// write ours.
    peer_area: Area,
    peer_landing: RemoteKey,
    /// Our own area, which we ship to the peer whenever it changed, one write at a time.
    our_area: OurArea,
    area_in_flight: bool,
    /// Our area as we last shipped it, and when.
    area_sent: [u64; 3],
    area_sent_at: Stamp,
    /// When we last handed a WR of ours to the sending step.
    wr_sent_at: Stamp,
    /// The node's looks at the provider as our last round left them (`Shared::look_due`).
    looks_seen: u64,
    /// When the last full round began (`quiet`).
    full_round_at: Stamp,
    /// The peer said it left.
    left: bool,
    /// An operation of ours to the peer failed (its connection is gone): why, and since when
    /// nothing more of the peer's ran. What it sent before still runs for `LAST_WORDS`.
    unreachable: Option<(&'static str, Stamp)>,
    /// How long the peer may stay silent before the binding counts as broken.
    liveness: Duration,
    /// The largest message the provider takes at once, copied out (`inject_size`).
    inject_size: usize,
    /// Bounce buffers of the node this round is done with.
    released: Vec<usize>,
}

struct Rx {
    /// A fragmented message being put together, and one put together that waits to run.
    assembling: Option<(Header, crate::transport::assembly::Assembly)>,
    /// The oldest message waits for a receive buffer (counted once, not once per round).
    blocked: bool,
    held: Option<(Header, Vec<u8>)>,
    /// The peer's WRs run here since bind (their sequence numbers).
    executed: u64,
    /// Where the next message of the bundle at the front of what arrived starts.
    bundle_at: usize,
    /// Bytes of the peer's messages our rounds took out of the inbox (`allowance`).
    taken: allowance::Taken,
}

struct Tx {
    /// Messages to send, in order; the first may be partly sent.
    outgoing: VecDeque<Outgoing>,
    /// How much of the peer's inbox our messages may fill (`allowance`).
    allowance: allowance::Allowance,
    /// Bytes of our answers to the peer's READs in `outgoing` (`allowance::ANSWERS_AT_MOST`).
    answers_queued: u64,
    /// Answers to the peer's WRITEs that wait for a message of ours to carry them, and whether
    /// the peer's last answer to a WRITE of ours came so (`FLAG_CARRIED`).
    answers: tx::HeldAnswers,
    peer_carries: bool,
    /// The WRITE going as a message now goes so for the peer's reply to carry its answer.
    write_answered_later: bool,
    /// Our WRs in flight, oldest first; the first has sequence number `flight_base`.
    flight: VecDeque<Flight>,
    flight_base: u64,
    /// Our WRs the peer's library must carry out (WRITE, READ, WRITE_IMM; any WR libfabric
    /// could not take yet), as far as the last one sent (its sequence number + 1), as far as
    /// we called the peer to them or left them to its own progress (`calls`), and as far as we
    /// rang for them.
    call_upto: u64,
    called_upto: u64,
    rung_upto: u64,
    /// Whether those ring at once, or wait for the peer's own progress first; and how far our
    /// WRs had completed when that last heard of it.
    msg_calls: calls::PeerCalls,
    msg_done_seen: u64,
    /// How many of a stream's longer WRITEs may be in flight as messages (`streamed_way`):
    /// one while the peer is taken for asleep, one more for each WR answered since it serves.
    streamed_allowed: usize,
    /// When such a WRITE next goes as a message to look whether a peer taken for asleep serves
    /// again, and how long after that the next look (doubled by each look that finds it
    /// still asleep).
    look_at: Stamp,
    look_every: Duration,
    /// The peer's chunks our WRs learned, which later WRs reach by RMA (`rma`), and how many
    /// of our WRs in flight went that way.
    chunks: rma::RemoteChunks,
    rma_in_flight: u32,
    /// An RMA of ours started that the peer's provider must serve (over tcp, in its progress):
    /// the round's end rings the peer's bell once.
    rma_call: bool,
    /// One past our newest RMA, and what that was at our last RMA ring: a round rings again
    /// once the RMAs of the last ring completed and newer ones are in flight.
    rma_upto: u64,
    rma_rung: u64,
    /// Whether an RMA rings at once, or waits for the peer's own progress first.
    rma_calls: calls::PeerCalls,
    /// One past our newest RMA of `WATCHED_FROM` bytes or more: while one is in flight, an
    /// RMA ring asks the peer to watch the connection (`CallBell::ring_rma`).
    rma_long_upto: u64,
    /// One past our last WR that went as a message: as far as the peer's library can run our
    /// WRs (the others went by RMA).
    msg_upto: u64,
    /// Since when our messages have waited for room in libfabric with none sent (`held_back`).
    held_since: Option<Stamp>,
    /// One past our newest message WR of `WATCHED_FROM` bytes or more (a WRITE's, a SEND's, a
    /// READ's answer): while one is in flight, a ring asks the peer to watch the connection.
    msg_long_upto: u64,
    /// A rate-limited queue's newest packet, until the kernel sent it.
    newest_packet: tx::NewestPacket,
}

impl Tx {
    /// A link's send side as it starts: nothing sent, in flight or held, the peer's RMA and
    /// messages each taken as served unrung.
    fn new() -> Tx {
        Tx {
            outgoing: VecDeque::new(),
            allowance: Default::default(),
            answers_queued: 0,
            answers: tx::HeldAnswers::default(),
            peer_carries: false,
            write_answered_later: false,
            flight: VecDeque::new(),
            flight_base: 0,
            call_upto: 0,
            called_upto: 0,
            rung_upto: 0,
            msg_calls: Default::default(),
            msg_done_seen: 0,
            streamed_allowed: STREAMED_TO_LOOK,
            look_at: Stamp::default(),
            look_every: calls::RETRY_UNRUNG,
            chunks: rma::RemoteChunks::default(),
            rma_in_flight: 0,
            rma_call: false,
            rma_upto: 0,
            rma_rung: 0,
            rma_calls: Default::default(),
            rma_long_upto: 0,
            msg_upto: 0,
            msg_long_upto: 0,
            held_since: None,
            newest_packet: Default::default(),
        }
    }

    /// Whether our messages need no ring of the peer's bell: none was sent since the last
    /// ring, all it asked for ran, and the call machine waits for nothing (`call_for_messages`).
    fn messages_need_no_ring(&self, done: u64) -> bool {
        self.call_upto == self.called_upto && done >= self.called_upto && self.msg_calls.idle()
    }

    /// Tells the call machine for messages that our WRs completed as far as `done` (one past
    /// the last), once each.
    fn hear_completions(&mut self, done: u64, now: node::Stamp) {
        if done > self.msg_done_seen {
            let answered = (done - self.msg_done_seen) as usize;
            self.msg_done_seen = done;
            self.msg_calls
                .completed(done - 1, now, done < self.called_upto);
            if self.msg_calls.serving() {
                self.streamed_allowed =
                    (self.streamed_allowed + answered).min(STREAMED_WHILE_SERVED);
            }
        }
    }

    /// Whether a WRITE goes as a message now to look whether a peer taken for asleep runs our
    /// messages unasked again: one at a time, while none of our RMA is in flight (a message
    /// never overtakes RMA), and only while the peer's provider serves our RMA unrung (a
    /// process that polls any queue progresses it; one whose RMA needs the bell has nobody to
    /// run a message either: looking anyway cost a 5,000-WR stream to a sleeping target over
    /// the UCX engine 2 ms at its start). A peer that stays asleep is looked at less and less
    /// often, each look costing its WR a ring's wait (`calls::UNANSWERED`).
    fn looks_now(&mut self, now: node::Stamp) -> bool {
        let may_look = self.rma_calls.serving() && self.msg_calls.tries_unrung(now);
        if now < self.look_at || self.rma_in_flight > 0 || !may_look {
            return false;
        }
        self.look_at = now.after(self.look_every);
        self.look_every = (self.look_every * 2).min(tx::LOOK_AT_LEAST_EVERY);
        true
    }

    /// Completes our WRs that went by RMA as libfabric finished them (sequence number, and
    /// whether it succeeded); one refused drops what we learned of the peer's chunks.
    fn rma_finished(&mut self, done: impl Iterator<Item = (u64, bool)>, now: node::Stamp) {
        for (seq, ok) in done {
            self.rma_in_flight = self.rma_in_flight.saturating_sub(1);
            self.rma_calls.completed(seq, now, self.rma_in_flight > 0);
            if !ok {
                self.chunks.forget_all();
            }
            // (A WR flushed since has no flight left: libfabric is done with its buffer now.)
            if let Some(f) = flight_of(&mut self.flight, self.flight_base, Some(seq)) {
                f.status = Some(match ok {
                    true => UMQ_BUF_SUCCESS,
                    false => UMQ_BUF_REM_ACCESS_ABORT_ERR,
                });
            }
        }
    }
}

fn quick(opcode: umq_opcode_t) -> bool {
    matches!(opcode, UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP)
}

/// Descriptors a new peer process costs at most: our watch of it and the engine's connections
/// to it.
const PEER_FDS: u64 = 16;

/// The socket watching the peer process whose beacon is at `at`: the one our node has for it,
/// or a new one. Without one, a killed peer is noticed only by the liveness timeout.
fn watch_or_log(node: &Node, at: SocketAddr) -> Option<Arc<OwnedFd>> {
    if let Some(fd) = node.lock().watching(at) {
        return Some(fd);
    }
    // A new peer process: this watch, and the engine's connections to it (libfabric's
    // sockets, which `os::new_fd` never sees), need room.
    crate::os::fd_headroom(PEER_FDS);
    // Connected outside the node's lock: an unreachable beacon takes a second.
    let fd = watch::watch(at)
        .inspect_err(|why| {
            crate::log_warn!(
                "umq_bind",
                "{why}: a killed peer is noticed after the liveness timeout ({} ms)",
                liveness().as_millis()
            )
        })
        .ok()
        .map(Arc::new)?;
    node.lock().remember_watch(at, &fd);
    Some(fd)
}

/// How long a binding goes on receiving after its peer's process exited. The exit is seen
/// through a pidfd or the death watch, not through the connection the bytes came on, so it
/// can be seen first: a loopback segment the peer sent just before dying may still wait in the
/// kernel's backlog (on a loaded machine, for a millisecond or more), and one from another
/// host may still be on the wire. A round at the end of the grace that still finds messages
/// extends it.
pub const LAST_WORDS: Duration = Duration::from_millis(20);

fn lost(why: &'static str) -> LinkError {
    LinkError::Lost(why)
}

impl Link {
    /// Joins our channel `ch` to the peer's channel at `to`. The peer's death ends the binding
    /// at once: on this host its pid is watched, on another its beacon. A peer process silent
    /// for `liveness` (a host gone, a link down) breaks the binding.
    pub fn open(
        ch: Channel,
        to: &Contact,
        peer_process: PeerProcess,
        our_area: OurArea,
        liveness: Duration,
    ) -> Result<Link, String> {
        let peer_landing = to
            .area
            .ok_or("the peer's bind info has no key for its flow-control area")?;
        if to.channel == NODE {
            return Err("the peer's bind info names no channel".into());
        }
        // Told apart here, by the hosts' addresses the watches listen on, for either engine:
        // UCP would print its own error first ("Destination is unreachable"), and a libfabric
        // connection awaited from the peer would never come.
        if let (Some(theirs), Some(ours)) = (to.watch, ch.node.beacon())
            && theirs.ip().to_canonical().is_ipv4() != ours.ip().to_canonical().is_ipv4()
        {
            return Err(format!(
                "the peer's network endpoint is on {}, ours on {}: name addresses of one \
                 family (IPv4 or IPv6) on both sides",
                theirs.ip(),
                ours.ip()
            ));
        }
        let (peer_pid, peer_socket) = match peer_process {
            PeerProcess::Local(pid) => (Some(pid), None),
            PeerProcess::Remote(at) => {
                let at = at.map(|at| ch.node.on_our_link(at.ip(), at.port()));
                (None, at.and_then(|at| watch_or_log(&ch.node, at)))
            }
        };
        let (peer, peer_addr, opened, inject_size) = {
            let mut n = ch.node.lock();
            let p = n.attach_peer(ch.id, &to.name, to.secret, PING_AFTER.min(liveness / 4))?;
            n.repost();
            n.greet_new_peers();
            (p, n.peers[p].addr, n.now(), n.ep.inject_size())
        };
        let peer_bell = to
            .watch
            .filter(|_| to.call_bell != 0)
            .map(|w| ch.node.on_our_link(w.ip(), to.call_bell));
        Ok(Link {
            ch,
            peer,
            peer_addr,
            peer_chan: to.channel,
            peer_pid,
            peer_socket,
            peer_bell,
            rx: Rx {
                assembling: None,
                blocked: false,
                held: None,
                executed: 0,
                bundle_at: 0,
                taken: Default::default(),
            },
            tx: Tx::new(),
            peer_area: Area::default(),
            peer_landing,
            our_area,
            area_in_flight: false,
            area_sent: [0; 3],
            area_sent_at: opened,
            wr_sent_at: opened,
            looks_seen: 0,
            full_round_at: opened,
            left: false,
            unreachable: None,
            liveness,
            inject_size,
            released: Vec::new(),
        })
    }

    pub fn peer_pid(&self) -> Option<u32> {
        self.peer_pid
    }

    pub fn take_peer_socket(&mut self) -> Option<Arc<OwnedFd>> {
        self.peer_socket.take()
    }

    /// Our node's call bell and our channel's tag there, for the progress thread.
    pub fn call_bell(&self) -> Option<super::progress::RungBy> {
        let bell = self.ch.node.lock().call_bell.clone()?;
        Some((bell, self.ch.id))
    }

    pub fn peer_area(&self) -> &Area {
        &self.peer_area
    }

    /// Our flow-control area changed since it last went to the peer (or is on its way), or
    /// the bytes we took of its messages are due (`allowance`): a round must ship it, the peer
    /// may be waiting for the credit or the room.
    pub fn area_unshipped(&self) -> bool {
        self.area_in_flight
            || self.our_area.get().snapshot() != self.area_sent
            || self.rx.taken.due()
    }

    /// A full round: the node's completions, the peer's messages, our completions, our sends.
    /// (Inline into its one caller, the queue's round through a link, which is itself out of
    /// line: a frame of its own cost every round an entry and exit. `post_round` stays out of
    /// line, so the other providers' post paths stay short.)
    #[inline(always)]
    pub fn round(&mut self, w: &mut Wire, at: &Receiver) -> Result<Outcome, LinkError> {
        self.with_node(|l, n| l.round_locked(n, w, at))
    }

    /// Runs `f` on this binding with its node locked. The node is reached through a pointer,
    /// not a clone of the channel's `Arc`: a clone and its drop are two atomic operations, a
    /// quarter of the time of a poll of an idle network queue (`perf record`), which every
    /// round, post round and lone SEND paid.
    #[inline(always)]
    fn with_node<R>(&mut self, f: impl FnOnce(&mut Link, &mut Shared) -> R) -> R {
        let node: *const Node = Arc::as_ptr(&self.ch.node);
        // SAFETY: `self.ch` holds an `Arc` of the node for the binding's whole life: `open`
        // sets it and nothing replaces or drops it while the binding lives (`f` gets the
        // binding, not its ownership, and no code of this provider assigns `ch`). So the node
        // outlives the guard, which borrows nothing of `self`.
        let mut n = unsafe { &*node }.lock();
        f(self, &mut n)
    }

    fn round_locked(
        &mut self,
        n: &mut Shared,
        w: &mut Wire,
        at: &Receiver,
    ) -> Result<Outcome, LinkError> {
        let mut out = Outcome::default();
        // The link's frames first: a refresh of our XOFF must not wait for what the peer sent
        // to be taken in (at 10 Gbit/s it has 1.7 ms, and a burst takes longer than that).
        if self
            .tx
            .outgoing
            .front()
            .is_some_and(|o| o.header.kind == KIND_CONTROL)
        {
            self.flush(n, Some(w))?;
        }
        let looked = self.look(n)?;
        let news = self.take_news(n, looked)?;
        if !news && self.quiet(n, w) {
            return self.quiet_round(n, w);
        }
        if !looked && !news {
            n.tick();
        }
        self.full_round_at = n.now();
        self.take_landed(n);
        self.check_liveness(n)?;
        let executed = self.rx.executed;
        self.receive(n, w, at, &mut out)?;
        if self.unreachable.is_some() {
            return self.last_words(n, w, out, self.rx.executed != executed);
        }
        // Rings are rare: one load says whether any is out before the calls that look at them.
        if let Some(bell) = n.call_bell.as_ref().filter(|b| b.rung()) {
            if bell.served(self.ch.id, self.rx.executed) {
                w.zero_copy.calls_answered += 1;
            }
            bell.watch_conn(self.ch.id, || n.ep.conn_watch(self.peer_addr));
        }
        self.complete(w, &mut out);
        if self.left {
            return Err(LinkError::PeerLeft);
        }
        if let Err(why) = self.ship_area(n, w).and_then(
            #[inline(always)]
            |()| {
                self.transmit(n, w, &mut out);
                match self.holds_answers(n) {
                    true => Ok(()),
                    false => self.flush(n, Some(w)),
                }
            },
        ) {
            self.unreachable_now(n, why)?;
            return self.last_words(n, w, out, false);
        }
        self.complete(w, &mut out);
        self.call_if_needed(n, w);
        n.repost_unless_delivered(out.rx_done > 0);
        if let Some(bell) = n.call_bell.as_ref().filter(|b| b.rung()) {
            bell.arm_conn(self.ch.id, || n.ep.arm_watch());
        }
        Ok(out)
    }

    /// Whether the round leaves its answers in `outgoing` for a message of ours to carry
    /// (`HeldAnswers`).
    fn holds_answers(&mut self, n: &Shared) -> bool {
        let t = &mut self.tx;
        let only_answers = !t.outgoing.is_empty() && t.outgoing.iter().all(|o| o.may_wait);
        let by_application = only_answers && !super::progress::on_engine_thread();
        t.answers.hold(only_answers, by_application, n.now())
    }

    /// The provider's progress, unless another channel's round looked since ours and nothing
    /// went out since (`Shared::look_due`): what arrived before that look is in our inbox.
    /// Whether it looked, which reads the clock; a round that did not look and finds nothing
    /// goes by the time of that other look, which is at most one turn of the sweep old (a
    /// clock read was a quarter of such a round's time).
    fn look(&mut self, n: &mut Shared) -> Result<bool, LinkError> {
        let looked = n.look_due(self.looks_seen);
        match looked {
            true => n.progress(self.ch.id)?,
            false => n.check_failed()?,
        }
        self.looks_seen = n.looks();
        Ok(looked)
    }

    /// Whether this round, which found nothing for us in the node (`take_news`), can only do
    /// what `quiet_round` does: we have nothing to send, in flight or half taken in, no ring is
    /// out either way, and a full round ran within `QUIET_AT_MOST`. A poll of a queue with
    /// nothing to say then costs a few loads, besides the look when it is due.
    fn quiet(&self, n: &Shared, w: &Wire) -> bool {
        let t = &self.tx;
        n.now() < self.full_round_at.after(QUIET_AT_MOST)
            && t.outgoing.is_empty()
            && t.flight.is_empty()
            && t.rma_in_flight == 0
            && !t.rma_call
            && t.call_upto == t.called_upto
            && t.msg_calls.idle()
            && w.sq.next_unsent().is_none()
            && self.rx.held.is_none()
            && self.rx.assembling.is_none()
            && self.released.is_empty()
            && self.unreachable.is_none()
            && !self.left
            && n.call_bell.as_ref().is_none_or(|b| !b.rung())
    }

    /// A round that found nothing: the peer's area as it wrote it, and ours to the peer when it
    /// is due, as a full round would.
    fn quiet_round(&mut self, n: &mut Shared, w: &mut Wire) -> Result<Outcome, LinkError> {
        self.take_landed(n);
        if let Err(why) = self.ship_area(n, w) {
            self.unreachable_now(n, why)?;
            return self.last_words(n, w, Outcome::default(), false);
        }
        Ok(Outcome::default())
    }

    /// Whether the binding is failing (an operation of ours to the peer failed) and only
    /// takes what the peer sent before (`unreachable`).
    pub fn unreachable(&self) -> bool {
        self.unreachable.is_some()
    }

    /// `why` failed an operation of ours: the peer cannot be reached. Its connection can end
    /// before all it sent is read (a peer killed with our bytes unread resets it), and what
    /// it sent before still arrives: the binding stops sending and goes on receiving
    /// (`last_words`). Any other error is the binding's end now.
    fn unreachable_now(&mut self, n: &Shared, why: LinkError) -> Result<(), LinkError> {
        match why {
            LinkError::Lost(why) => {
                self.unreachable.get_or_insert((why, n.now()));
                Ok(())
            }
            other => Err(other),
        }
    }

    /// A round of a binding whose peer cannot be reached: its messages still run, ours wait,
    /// and once none has run for `LAST_WORDS` the binding ends.
    fn last_words(
        &mut self,
        n: &mut Shared,
        w: &mut Wire,
        mut out: Outcome,
        ran: bool,
    ) -> Result<Outcome, LinkError> {
        let Some((why, quiet_since)) = self.unreachable.as_mut() else {
            return Ok(out);
        };
        if ran {
            *quiet_since = n.now();
        }
        if n.now() >= quiet_since.after(LAST_WORDS) {
            return Err(lost(why));
        }
        self.complete(w, &mut out);
        n.repost();
        Ok(out)
    }

    /// Hands what is queued to go (control frames first) to libfabric now, outside a round:
    /// a frame queued after a round's flush would otherwise wait for the next round. An error
    /// is left for that round to find.
    pub fn flush_control(&mut self, w: &mut Wire) {
        if self.left || self.unreachable.is_some() {
            return;
        }
        let node = self.ch.node.clone();
        let n = &mut *node.lock();
        let _ = self.flush(n, Some(w));
    }

    /// A post's round: our sends (and the completions that free send buffers).
    #[inline(never)]
    pub fn post_round(&mut self, w: &mut Wire) -> Option<Outcome> {
        if self.left || self.unreachable.is_some() {
            return None;
        }
        self.with_node(|l, n| l.post_round_locked(n, w))
    }

    fn post_round_locked(&mut self, n: &mut Shared, w: &mut Wire) -> Option<Outcome> {
        n.tick();
        let mut out = Outcome::default();
        // Reading the completion queue drives the provider's progress (system calls, for tcp):
        // a post only does when send buffers run short, or when it has no credit left and the
        // node has not progressed for `STARVED_PROGRESS`: credit arrives as the peer's write
        // into our landing words, seen only as the provider progresses, so a sender that only
        // posts would wait for the progress thread, while one that polls between its posts
        // progresses there (a progress in each of its refused posts halved a 64 B stream).
        // Polls do the rest.
        let starved = w.flow.as_mut().is_some_and(|f| f.window() == 0)
            && n.now() >= n.progressed().after(STARVED_PROGRESS);
        if n.tx.free.len() < node::TX_SLOTS / 2 || starved {
            if n.progress(self.ch.id).is_err() {
                return None;
            }
            self.looks_seen = n.looks();
        }
        if self.take_news(n, true).is_err() {
            return None;
        }
        // Our answer waits for credit itself, and the peer may wait for this grant to send it.
        if self.ship_withheld_grant(n, w).is_err() {
            return None;
        }
        self.take_landed(n);
        // WRs whose news just came complete first: an RMA that finished but is still in flight
        // in the send queue would make the next WRITE or READ look not alone, and go as a
        // message (`by_rma`).
        self.complete(w, &mut out);
        self.transmit(n, w, &mut out);
        if self.flush(n, Some(w)).is_err() {
            return None;
        }
        self.complete(w, &mut out);
        self.call_if_needed(n, w);
        Some(out)
    }

    /// Queues a control frame of the link ahead of our messages (between two fragments of
    /// one, if need be: the receiver takes frames anywhere), so that a priority paused on our
    /// side never holds up the frames that would resume the peer's.
    pub fn send_control(&mut self, frame: &[u8]) -> bool {
        let behind_frames = self
            .tx
            .outgoing
            .iter()
            .take_while(|o| o.header.kind == KIND_CONTROL)
            .count();
        self.tx.outgoing.insert(
            behind_frames,
            Outgoing::new(
                Header {
                    kind: KIND_CONTROL,
                    total: frame.len() as u64,
                    ..Default::default()
                },
                Body::Owned(frame.to_vec()),
            ),
        );
        true
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

    /// Arms what wakes the queue (the node's completion queue, and its bell for what another
    /// binding's round took for us); `Pending` when something waits for this binding or the
    /// provider's progress must run first.
    /// Whether a rate-limited queue's newest packet has left this host (`tx::NewestPacket`).
    pub fn packet_backlog(&mut self) -> Backlog {
        if !self.tx.newest_packet.watched() {
            return Backlog::Clear; // no system call where nothing is waited for
        }
        let at = self.ch.node.lock().ep.stream_at(self.peer_addr);
        self.tx.newest_packet.look(at)
    }

    pub fn arm_wakeup(&self) -> Arm {
        let mut n = self.ch.node.lock();
        match n.arm(self.ch.id) {
            None => Arm::Pending,
            Some(None) => Arm::NoFd,
            Some(Some(fd)) => Arm::Armed(Wakeup {
                fd,
                // Until the peer's first message, libfabric may still be setting up the
                // connection (the peer may not have accepted ours yet; rxm connects on the
                // first send), which need not make the fd readable: tick.
                rung_by_peer: n.peers[self.peer].heard_any,
                // An epoll set: readable while a completion or the bell waits.
                counter: false,
            }),
        }
    }

    pub fn waits_for_rx_buffer(&self) -> bool {
        self.rx.held.is_some() || self.rx.blocked
    }

    pub fn area_on_its_way(&self) -> bool {
        self.area_in_flight
    }

    /// Whether our area holds a grant the peer waits for and has no other way to learn of:
    /// it used all the credit it knows of, and no write of our area is on its way. (A receive
    /// post then runs a round at once, which ships it: else a receiver that posts and then
    /// stays away would leave the sender without credit until the progress engine's sweep.)
    pub fn owes_peer_credit(&self, w: &mut Wire) -> bool {
        let granted = self.our_area.get().snapshot()[1];
        !self.area_in_flight
            && w.flow
                .as_mut()
                .is_some_and(|f| f.peer_waits_for(granted, self.area_sent[1]))
    }

    /// A grant a receive post left to our answer (`Answering`) that the answer did not
    /// carry: it had an immediate of the application's (a SEND_IMM), or waits for credit
    /// itself. It goes through our area, which is shipped now.
    pub(super) fn ship_withheld_grant(
        &mut self,
        n: &mut Shared,
        w: &mut Wire,
    ) -> Result<(), LinkError> {
        if !w.answering.withheld() {
            return Ok(());
        }
        if let Some(f) = w.flow.as_mut() {
            f.announce_in_area(self.our_area.get());
        }
        match self.owes_peer_credit(w) {
            true => self.ship_area(n, w),
            false => Ok(()),
        }
    }

    pub fn forget_in_flight(&mut self) {
        // The pieces of our RMA not yet started never will be (its completion, an error,
        // comes as any; those in flight finish first).
        self.ch.node.lock().give_up_pieces(self.ch.id);
        self.tx.flight_base += self.tx.flight.len() as u64;
        self.tx.flight.clear();
        self.tx.outgoing.retain(|o| o.wr_seq.is_none());
    }

    /// Tells the peer we leave (best effort: an unreachable peer learns it from its own
    /// errors or liveness timeout), unless it left first: its end is gone, and over UCX the
    /// send then failed and was logged as a failure (the reference's example, which logs at
    /// INFO, printed "send failed" as its client left first).
    pub fn leave(&mut self) {
        if !self.left {
            self.tx.outgoing.push_back(Outgoing::control(Header {
                kind: KIND_BYE,
                ..Default::default()
            }));
        }
        // RMA of ours in flight reads from or writes into our buffers: the binding ends once
        // libfabric is done with them, which a live peer's provider answers within a round
        // trip and a dead one's connection within its reset.
        let node = self.ch.node.clone();
        let rma_deadline = Instant::now() + Duration::from_secs(1);
        for round in 0.. {
            let mut n = node.lock();
            if n.progress(self.ch.id).is_err() || self.flush(&mut n, None).is_err() {
                break;
            }
            let _ = self.take_news(&mut n, true);
            let sending = !self.tx.outgoing.is_empty() && round < 100;
            let reading = self.tx.rma_in_flight > 0 && Instant::now() < rma_deadline;
            if !sending && !reading {
                break;
            }
            drop(n);
            std::thread::yield_now();
        }
    }

    /// What the node has for this binding besides messages: fragments sent, our area write
    /// done, RMA of ours finished, or an operation that failed (the binding is broken; what
    /// came before it is taken first). Whether the node had anything for us, messages included;
    /// the clock is read first for that unless it was this round (`ticked`).
    fn take_news(&mut self, n: &mut Shared, ticked: bool) -> Result<bool, LinkError> {
        let inbox = n
            .inbox_mut(self.ch.id)
            .ok_or(lost("the binding's network channel is gone"))?;
        inbox.room_back = false; // this round's flush takes the room
        if inbox.is_empty() {
            return Ok(false); // the usual idle poll's round
        }
        if !ticked {
            n.tick();
        }
        let now = n.now();
        let inbox = n
            .inbox_mut(self.ch.id)
            .ok_or(lost("the binding's network channel is gone"))?;
        for seq in inbox.sent.drain(..) {
            if let Some(f) = flight_of(&mut self.tx.flight, self.tx.flight_base, Some(seq)) {
                f.unfinished -= 1;
            }
        }
        if std::mem::take(&mut inbox.area_written) {
            self.area_in_flight = false;
        }
        self.tx.rma_finished(inbox.rma_done.drain(..), now);
        if let Some(why) = inbox.broken {
            self.unreachable.get_or_insert((why, now));
        }
        Ok(true)
    }

    /// Takes what the peer last wrote into our landing words (its flow-control area) as its
    /// area: each word only grows within a binding, so a stale or hostile write lowers nothing.
    /// A change is also word from the peer (it is alive).
    fn take_landed(&mut self, n: &mut Shared) {
        let (known, allowance) = (self.peer_area.snapshot(), &self.tx.allowance);
        let news = |area, taken| area != known || allowance.news(taken);
        let Some((landed, taken)) = n.landed_if(self.ch.id, news) else {
            return;
        };
        self.tx.allowance.peer_took(taken);
        if landed != self.peer_area.snapshot() {
            self.peer_area.raise_to(landed);
            n.peers[self.peer].heard = n.now();
        }
    }

    /// Fails a peer process silent for too long (its node pings ours while it lives).
    fn check_liveness(&self, n: &Shared) -> Result<(), LinkError> {
        if n.now() >= n.peers[self.peer].heard.after(self.liveness) {
            return Err(lost("peer silent for longer than the liveness timeout"));
        }
        Ok(())
    }
}

#[cfg(all(test, umq_fabric_headers))]
mod tests;
