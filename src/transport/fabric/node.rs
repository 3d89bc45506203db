//! A process's network node: the one libfabric endpoint (with its completion queue, address
//! vector and registered buffers) that all of the process's network bindings share, as UCX
//! shares a worker and MPI over libfabric an endpoint per interface.
//!
//! Two processes talk over one connection however many queue pairs they bind: each binding is
//! a *channel* of its node, and every message names the channel it is for (`Header::dst`). The
//! node takes completions for all of them: it posts its receive buffers, hands each arrived
//! message to its channel's inbox (in the order the buffers were posted, which is the order
//! messages matched them), frees send buffers and tells the channel whose fragment went, and
//! keeps each peer process alive in the other's eyes with one ping for all its channels. So
//! what a binding costs is its own state and a slot of the node's landing words, not an
//! endpoint and eight megabytes of buffers.
//!
//! Everything here runs under the node's lock, which a binding takes inside its queue's wire
//! lock (never the other way round).

use super::msg::*;
use super::pieces::{LONE_PIECE, PIECE, Piece, Pieces};
use super::sys::{self, Buffers, Cqe, Endpoint, Registration, RemoteKey};
use super::{LinkError, watch};
use super::{allowance, registered, rma};
use crate::buf::pool::{ChunkHook, ChunkSpan, Lease, Pool};
use crate::devices;
use crate::process::PerProcess;
use crate::transport::call_bell::CallBell;
use crate::transport::sleep_lock::{SleepGuard, SleepMutex};
use std::collections::{HashMap, VecDeque};
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::ops::Range;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// Receive bounce buffers of a node, shared by its channels.
pub const RX_BOUNCES: usize = 256;
/// Send buffers of a node: fragments beyond them wait in their channel's outgoing queue.
pub const TX_SLOTS: usize = 256;
/// Bytes from our send buffers (and of our RMA pieces, `fabric::pieces`) that libfabric may
/// hold for one peer process at once, over all the channels to it (one connection: what
/// libfabric holds leaves in order): one 64 KiB fragment and up to 64 KiB of smaller ones. Past
/// it, a channel's fragments wait in its own outgoing queue, so a message of another channel to the same peer (a ping injected beside a
/// stream) queues behind at most this much, not behind a whole flow-control window of the
/// stream. A channel with nothing in libfabric may always hand over one fragment: however busy
/// another channel keeps the peer's share, this one is never starved of it.
pub const QUEUED_PER_PEER: usize = 128 << 10;
/// How long other channels must not have sent a peer anything for a channel to count as having
/// the connection to itself (`Shared::alone_to`).
pub const OTHERS_QUIET: Duration = Duration::from_millis(10);
/// Descriptors an engine's endpoint may open for itself (UCX's worker over tcp takes about
/// twenty: epoll sets, eventfds, listening sockets, its async thread's pipes).
const ENGINE_FDS: u64 = 64;
/// Bytes of RMA libfabric may hold for one peer while a channel has the connection to itself,
/// in pieces of up to `pieces::LONE_PIECE`: a channel that starts sending after a quiet while
/// waits behind at most this, not behind a 64 MiB WR that started meanwhile. (A piece larger
/// than it goes while libfabric holds nothing for the peer.)
pub const QUEUED_ALONE: usize = 2 << 20;
/// How long our READs to a peer may stay in flight back to back before the next waits until
/// all have completed: libfabric's tcp sends READ answers before any message of the peer's
/// own, so without that pause a READ stream held everything the peer sent us for as long as
/// it lasted (pings included).
pub const READS_DRAIN_AFTER: Duration = Duration::from_millis(5);
/// The most our READs alone (`alone_to`) keep in libfabric for a peer: what a pause
/// (`READS_DRAIN_AFTER`) waits for, so the peer's messages wait a few milliseconds behind a
/// READ stream at most.
pub const READS_ALONE: usize = 8 << 20;
/// Flow-control area writes in flight at once, over all channels.
pub const AREA_WRITES: usize = 256;
/// The completion queue: room for every buffer's and write's completion.
pub const CQ_SIZE: usize = RX_BOUNCES + TX_SLOTS + AREA_WRITES + 16;
/// Channels a node can hold (a process binding ten thousand pairs to itself holds twenty
/// thousand). Their landing words are reserved up front and cost memory as they are used.
pub const MAX_CHANNELS: usize = 1 << 16;
/// A channel's landing words: its generation, then the peer's flow-control area (three words),
/// the bytes of our messages it took (`allowance`), and their seal under the generation
/// (`seal`).
pub const SLOT_BYTES: usize = 48;
/// Bounce buffers a node lends its channels' inboxes at most; past it, arrivals are copied out
/// and their buffers posted again, so a queue whose application does not call in never holds
/// up the others.
const LEND_AT_MOST: usize = RX_BOUNCES / 2;
/// Unpacked peer keys kept at most while our RMA is in flight (a few hundred bytes each in
/// UCX); past it, the next unpack with none in flight drops them all.
const PEER_KEYS_HELD: usize = 4096;
/// `Header::dst` of a message for the node itself (a ping).
pub const NODE: u64 = 0;

/// Completion contexts: which buffer a completion is about.
const RECV_TAG: usize = 1 << 32;
const SEND_TAG: usize = 2 << 32;
const AREA_TAG: usize = 3 << 32;
const RMA_TAG: usize = 4 << 32;
const INDEX: usize = RECV_TAG - 1;

/// A channel: its slot in the node and, above, the generation that slot is in, drawn at random
/// when the channel opens (a message for an earlier binding that used the slot, or from a peer
/// guessing, names another generation and is dropped).
pub type ChannelId = u64;

fn slot_of(id: ChannelId) -> usize {
    (id & 0xffff_ffff) as usize
}

fn generation_of(id: ChannelId) -> u32 {
    (id >> 32) as u32
}

/// The seal of a landing slot's `words` (the area and the bytes taken) for the channel of
/// `generation`. Peers write the landing words by RMA, which the provider carries out itself.
/// Each slot has a key of its own over libfabric (`Shared::expose_slot`) and UCX's handler
/// takes whole slots that begin with their generation, but where UCP's own RMA puts them the
/// slots are one region, and a peer bound to one channel knows where the others lie. The
/// generation word alone would not tell such a peer's write apart: one that leaves it as it
/// is and writes the words after it would pass for the channel's own peer, and a grant it
/// made up, counted cumulatively, would stop the real ones. Only the channel's peer knows its
/// generation (random, and no peer may read the region), so only its writes come sealed.
fn seal(generation: u32, words: [u64; 4]) -> u64 {
    const MIX: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = (generation as u64 * 0x1_0000_0001) ^ MIX;
    for w in words {
        h = (h ^ w).wrapping_mul(MIX);
        h ^= h >> 32;
    }
    h
}

/// Why a binding whose peer ignored its allowance broke.
const OVER_ALLOWANCE: &str = "the peer sent more than its allowance";

/// A message the node handed to a channel: still in its bounce buffer, or copied out; with
/// the word its sender put beside it (`Cqe::from`).
pub enum Arrival {
    Bounce { idx: usize, len: usize, from: u64 },
    Owned(Vec<u8>, u64),
}

impl Arrival {
    /// The message's bytes, its header included.
    pub fn bytes(&self) -> usize {
        match self {
            Arrival::Bounce { len, .. } => *len,
            Arrival::Owned(v, _) => v.len(),
        }
    }

    /// The word its sender put beside it.
    fn from(&self) -> u64 {
        match self {
            Arrival::Bounce { from, .. } | Arrival::Owned(_, from) => *from,
        }
    }
}

/// What the node keeps for a channel until its binding takes it.
pub struct Inbox {
    id: ChannelId,
    pub arrivals: VecDeque<Arrival>,
    /// Their bytes (`allowance::INBOX_AT_MOST`).
    pub pending: u64,
    /// Sequence numbers of the channel's WRs one of whose fragments libfabric finished sending.
    pub sent: Vec<u64>,
    /// The channel's flow-control area write completed.
    pub area_written: bool,
    /// An error completion of one of its operations: the peer cannot be reached.
    pub broken: Option<&'static str>,
    /// Its WRs that went by RMA and completed: sequence number, and whether it succeeded.
    pub rma_done: Vec<(u64, bool)>,
    /// Its peer's share of libfabric, which its fragments waited for, has room again
    /// (`Shared::want_room`).
    pub room_back: bool,
    /// Bytes of its fragments and RMA pieces libfabric holds (`Shared::has_room`).
    queued: usize,
    /// Its fragments wait for room (`Shared::want_room`).
    wants_room: bool,
    /// Its peer process (`Shared::peers`), once bound.
    pub peer: Option<usize>,
    /// Its landing words' own registration and where the peer names them, where the engine
    /// registers a slot at a time (libfabric: `Shared::expose_slot`).
    landing: Option<(RemoteKey, Registration)>,
    /// Its queue sleeps in interrupt mode: what arrives for it rings the node's bell.
    interrupt: bool,
    /// Its WRs by RMA in flight, as pieces (`fabric::pieces`).
    pieces: Pieces,
}

impl Inbox {
    /// Nothing arrived for the channel and no news of its operations waits.
    pub fn is_empty(&self) -> bool {
        self.arrivals.is_empty()
            && self.sent.is_empty()
            && !self.area_written
            && self.broken.is_none()
            && self.rma_done.is_empty()
    }
}

/// A time on a node's clock: nanoseconds since the node opened. A round reads the clock once
/// (`Shared::tick`), and its timestamps and timeouts are then integer compares, where
/// `Instant::duration_since` cost a busy poll loop about 100 instructions a message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    /// `d` later.
    pub fn after(self, d: Duration) -> Stamp {
        Stamp(
            self.0
                .saturating_add(d.as_nanos().min(u64::MAX as u128) as u64),
        )
    }
}

/// A peer process, as every channel bound to it sees it.
pub struct Peer {
    name: Vec<u8>,
    /// What its messages (beside their bytes) and its pings carry: its node's secret, from its
    /// bind info. Anyone who reaches our endpoint can send a message to a channel or a ping in
    /// a peer's name (names are addresses): one without the secret is not the peer's
    /// (`Shared::dropped_from_stranger`), and a ping without it would keep a host that
    /// vanished alive past the liveness timeout.
    secret: u64,
    /// Its address handle.
    pub addr: u64,
    pub heard: Stamp,
    pub heard_any: bool,
    pub said: Stamp,
    /// Our first ping to it went: it sets up libfabric's connection (over tcp the peer may still
    /// be accepting ours; `ofi_rxm` connects on the first send, over several of both sides'
    /// progress calls), so a binding's first message does not wait for that.
    greeted: bool,
    /// The shortest ping interval its channels ask for, and how many there are.
    ping_after: Duration,
    users: usize,
    /// Bytes of our send buffers and RMA libfabric holds for it (`QUEUED_PER_PEER`).
    queued: usize,
    /// The two channels that last sent it something (a message or RMA), newest first, and
    /// when (`Shared::alone_to`).
    said_by: [(ChannelId, Stamp); 2],
    /// Our READ pieces from it in libfabric, and since when there have been some
    /// (`READS_DRAIN_AFTER`).
    reads: usize,
    reads_since: Stamp,
    /// Channels whose READ waits for those to complete, told then (`Inbox::room_back`).
    reads_waiters: Vec<ChannelId>,
}

/// The node's state, under its lock.
pub struct Shared {
    /// First, so that it closes (with its registrations) before the memory below is freed.
    pub ep: Endpoint,
    pub rx: RxPool,
    pub tx: TxPool,
    /// Where peers write their flow-control areas, `SLOT_BYTES` a channel.
    landing: Buffers,
    landing_key: RemoteKey,
    /// Our channels' areas as they go out, `SLOT_BYTES` a channel.
    pub area_out: Buffers,
    pub areas_in_flight: usize,
    inboxes: Vec<Option<Inbox>>,
    /// Free slots, oldest first: a slot is reused as late as possible.
    free_slots: VecDeque<usize>,
    pub peers: Vec<Peer>,
    /// What our pings and, beside their bytes, all our messages carry (`Peer::secret`):
    /// random, and given only in our bind info.
    secret: u64,
    /// Messages dropped because they did not carry their channel's peer's word
    /// (`dropped_from_stranger`).
    pub strangers: u64,
    bell: Option<Bell>,
    /// Where peers call our progress thread to their WRs (`call_bell`); we ring theirs with it.
    pub call_bell: Option<Arc<CallBell>>,
    /// Sockets watching peer processes on other hosts, one per peer (`watch`), by beacon.
    watches: HashMap<SocketAddr, Weak<OwnedFd>>,
    /// The completion queue failed: every channel is broken.
    failed: Option<&'static str>,
    /// When the node opened: its clock's zero, as an `Instant` and on `os::monotonic_ns`.
    epoch: Instant,
    epoch_ns: u64,
    /// The time as this round began (`tick`): one clock read a round serves every timestamp
    /// and timeout check in it, where a read each cost a tenth of a busy poll loop.
    now: Stamp,
    /// When a peer next needs a ping, as last worked out; None: work it out at the next round
    /// (a peer met or asking for pings sooner). Rounds before it skip the walk over the peers.
    ping_due: Option<Stamp>,
    /// When the provider last progressed (`progress`).
    progressed: Stamp,
    /// How many times the provider progressed (`look_due`).
    looks: u64,
    /// Something went out through the provider since it last progressed (`look_due`).
    sent_since_look: bool,
    /// The channel whose round runs `progress`: it takes what arrives for it in that round, so
    /// the bell is not rung for it.
    serving: ChannelId,
    /// The process pool's chunks exposed for the peers' RMA (None: the provider cannot).
    pub rma: Option<rma::Exposure>,
    /// The provider carries RMA in software (`Endpoint::rma_in_software`).
    pub rma_in_software: bool,
    /// Our RMA operations in flight: the channel and WR each is for; and the free entries.
    rma_ops: Vec<Option<RmaOp>>,
    rma_free: Vec<usize>,
    /// Channels whose newest RMA WR has pieces to start (`continue_pieces`).
    pieces_waiting: Vec<ChannelId>,
    /// Keys peers packed for their chunks (`Endpoint::packs_keys`), unpacked for our RMA: by
    /// peer, then by the packed bytes.
    peer_keys: HashMap<u64, HashMap<Box<[u8]>, u64>>,
}

/// Registrations close before the endpoint (and its domain) does.
impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(x) = self.rma.as_mut() {
            x.withdraw_all(&self.ep);
        }
        self.drop_peer_keys();
    }
}

pub struct RxPool {
    pub bufs: Buffers,
    /// Posted buffers in the order they were posted, which is the order messages match them;
    /// completions can come in another order (a large message's rendezvous completes after a
    /// small one behind it).
    posted: VecDeque<usize>,
    /// The length of each filled buffer's message, and the word it carried beside its bytes
    /// (`Cqe::from`).
    filled: Vec<Option<(usize, u64)>>,
    repost: Vec<usize>,
    /// Buffers in channels' inboxes.
    lent: usize,
}

/// A send buffer's bytes as its peer's share of libfabric counts them, and whose they are.
#[derive(Clone, Copy, Default)]
struct Queued {
    /// The peer process (`Shared::peers`).
    peer: usize,
    channel: ChannelId,
    bytes: usize,
}

/// An RMA piece in libfabric's hands.
#[derive(Clone, Copy)]
struct RmaOp {
    /// Its WR's sequence number.
    seq: u64,
    /// What it counts in the shares.
    queued: Queued,
    /// A READ (`Peer::reads`).
    read: bool,
    /// Its WR's last piece.
    last: bool,
    /// The registration of our memory it names, where the provider needs one.
    local: Option<registered::Use>,
}

impl RmaOp {
    fn of(piece: &Piece, queued: Queued, local: Option<registered::Use>) -> RmaOp {
        RmaOp {
            seq: piece.seq,
            queued,
            read: piece.op == sys::Rma::Read,
            last: piece.last,
            local,
        }
    }

    /// Whether its success is word from the peer (`Peer::heard`): a READ completes once the
    /// peer's provider answered, and a WRITE's last piece once it placed the bytes. (The other
    /// WRITE pieces complete once our kernel took them.)
    fn answered(&self) -> bool {
        self.read || self.last
    }
}

/// A fragment's payload read in place from a WR's buffer: where it lies, a hold on its chunk,
/// and the registration it names where the provider needs one (null desc otherwise).
pub struct InPlace {
    pub at: (*const u8, usize),
    pub lease: Lease,
    pub desc: *mut c_void,
    pub local: Option<registered::Use>,
}

/// A send buffer in libfabric's hands.
#[derive(Default)]
struct Busy {
    /// The channel and the WRs it carries (a fragment of one, or several whole in a bundle).
    wr: Option<(ChannelId, Range<u64>)>,
    /// What it counts in its peer's share of libfabric (`QUEUED_PER_PEER`).
    queued: Queued,
    /// The chunk its payload is read from in place, held (never read) until libfabric is done,
    /// and the registration of it the send names, where the provider needs one.
    _lease: Option<Lease>,
    local: Option<registered::Use>,
}

pub struct TxPool {
    pub bufs: Buffers,
    pub free: Vec<usize>,
    /// What each buffer libfabric has not finished sending carries.
    busy: Vec<Busy>,
    /// The pool whose buffers WRs are sent from in place (the process's; its shared pools'
    /// chunks are in its registry too).
    pub lender: Weak<Pool>,
    pub scratch: Vec<u8>,
}

/// The pool's hook: new chunks wait for the node's next progress; a chunk that leaves is
/// withdrawn at once, under the node's lock (never held by whoever frees or retires one).
struct Exposer {
    node: Weak<Node>,
    pending: Arc<rma::Pending>,
}

impl ChunkHook for Exposer {
    fn added(&self, chunk: &ChunkSpan) {
        self.pending.add(chunk);
    }

    fn removed(&self, chunk: &ChunkSpan) {
        self.pending.drop_chunk(chunk);
        if self.pending.leave_shared(chunk) {
            return;
        }
        if let Some(node) = self.node.upgrade() {
            let n = &mut *node.lock();
            if let Some(x) = n.rma.as_mut() {
                x.withdraw(&n.ep, chunk);
            }
        }
    }

    fn pins(&self, chunk: &ChunkSpan) -> bool {
        self.pending.pins(chunk)
    }
}

/// What wakes a sleeping interrupt-mode queue: an epoll set of the completion queue's wait fd
/// and an eventfd the node rings when it hands something to an interrupt-mode channel other
/// than through a completion that channel will read (a completion another binding's round
/// took).
struct Bell {
    epoll: OwnedFd,
    event: OwnedFd,
    rung: bool,
}

impl Bell {
    fn new(cq_fd: i32) -> Result<Bell, String> {
        let err = |what: &str| format!("{what}: {}", std::io::Error::last_os_error());
        // SAFETY: plain system calls; each fd is owned at once.
        let epoll = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if epoll < 0 {
            return Err(err("epoll_create1"));
        }
        let epoll = unsafe { OwnedFd::from_raw_fd(epoll) };
        let event = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if event < 0 {
            return Err(err("eventfd"));
        }
        let event = unsafe { OwnedFd::from_raw_fd(event) };
        for fd in [cq_fd, event.as_raw_fd()] {
            let mut ev = libc::epoll_event {
                events: libc::EPOLLIN as u32,
                u64: fd as u64,
            };
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0
            {
                return Err(err("epoll_ctl"));
            }
        }
        Ok(Bell {
            epoll,
            event,
            rung: false,
        })
    }

    fn ring(&mut self) {
        if !std::mem::replace(&mut self.rung, true) {
            let one = 1u64;
            unsafe { libc::write(self.event.as_raw_fd(), &one as *const u64 as *const _, 8) };
        }
    }

    fn clear(&mut self) {
        if std::mem::replace(&mut self.rung, false) {
            let mut n = 0u64;
            unsafe { libc::read(self.event.as_raw_fd(), &mut n as *mut u64 as *mut _, 8) };
        }
    }
}

/// A process's node for one libfabric provider and address, and one lane of them (`lane`).
pub struct Node {
    key: NodeKey,
    name: Vec<u8>,
    provider: String,
    inject: usize,
    /// Our death-watch beacon, open while the node lives.
    beacon: Option<watch::Beacon>,
    /// The index of the interface our link-local address lies on; 0 for any other address.
    scope: u32,
    /// The pools whose chunks it exposes (`use_pool`), by id.
    exposed_pools: Mutex<Vec<u64>>,
    /// Taken by every round, post round and lone SEND (`transport::sleep_lock`: why not std's).
    shared: SleepMutex<Shared>,
}

/// The nodes of this process, as long as a binding or an offered channel holds them. A child
/// made by `fork()` starts with none: the parent's endpoints and connections are the parent's.
static NODES: PerProcess<Mutex<Vec<Weak<Node>>>> = PerProcess::new(|| Mutex::new(Vec::new()));

/// Set by tests (`umq::fuzzing::network_faults`): no node plans rounds for its pings. Such a
/// round runs whichever channel the node last served, every half second, and so hides a
/// channel whose work nothing else would run.
#[cfg(feature = "fuzzing")]
pub static NO_PING_ROUNDS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Provider, address, whether it has a wait fd, and its lane.
type NodeKey = (String, Option<String>, bool, usize);

/// The nodes a process makes for one provider and address: `UMQ_FABRIC_NODES`, by default the
/// CPUs it may run on, at most four (a node is an endpoint with its completion queue and about
/// 32 MiB of bounce buffers once busy).
pub fn lanes() -> usize {
    static LANES: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *LANES.get_or_init(|| {
        std::env::var("UMQ_FABRIC_NODES")
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .unwrap_or_else(default_lanes)
            .clamp(1, 64)
    })
}

/// `lanes` without `UMQ_FABRIC_NODES`.
pub fn default_lanes() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(4))
}

/// The lane of the calling thread: threads get lanes in turn as each first opens a network
/// channel, and a channel lives in its lane's node. A node is one progress engine behind one
/// lock (as a UCX worker is one thread's): threads that each make and drive their own queues
/// then drive their own nodes side by side, where one node made them take turns.
fn this_threads_lane() -> usize {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    thread_local! {
        static LANE: std::cell::Cell<Option<usize>> = const { std::cell::Cell::new(None) };
    }
    LANE.try_with(|l| match l.get() {
        Some(n) => n,
        None => {
            let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % lanes();
            l.set(Some(n));
            n
        }
    })
    .unwrap_or(0)
}

impl Node {
    /// The node of libfabric provider `prov` on `addr` (None: the provider's choice), with a
    /// wait fd when `wakeable`, of the calling thread's lane: this process's, made on first use.
    pub fn get(prov: &str, addr: Option<&str>, wakeable: bool) -> Result<Arc<Node>, String> {
        let lane = this_threads_lane();
        let key = (prov.to_string(), addr.map(str::to_string), wakeable, lane);
        let mut nodes = NODES.get().lock().unwrap_or_else(|p| p.into_inner());
        nodes.retain(|n| n.strong_count() > 0);
        if let Some(n) = nodes
            .iter()
            .filter_map(Weak::upgrade)
            .find(|n| n.key == key)
        {
            return Ok(n);
        }
        let node = Node::open_in(prov, addr, wakeable, sys::verbs_mr_wanted(), lane)?;
        nodes.push(Arc::downgrade(&node));
        Ok(node)
    }

    /// A node of its own, outside the registry (tests: two "processes" in one).
    pub fn open(prov: &str, addr: Option<&str>, wakeable: bool) -> Result<Arc<Node>, String> {
        Node::open_as(prov, addr, wakeable, sys::verbs_mr_wanted())
    }

    /// `open`, its endpoint registering memory as verbs does when `verbs_mr` is set
    /// (`sys::verbs_mr_wanted`).
    pub fn open_as(
        prov: &str,
        addr: Option<&str>,
        wakeable: bool,
        verbs_mr: bool,
    ) -> Result<Arc<Node>, String> {
        Node::open_in(prov, addr, wakeable, verbs_mr, 0)
    }

    /// `open_as` for lane `lane` of the process's nodes.
    fn open_in(
        prov: &str,
        addr: Option<&str>,
        wakeable: bool,
        verbs_mr: bool,
        lane: usize,
    ) -> Result<Arc<Node>, String> {
        let config = (CQ_SIZE, wakeable, BOUNCE);
        // The engine's own descriptors (UCX's take about twenty), which `os::new_fd` never
        // sees: a process near its limit would fail to open it.
        crate::os::fd_headroom(ENGINE_FDS);
        let mut ep = Endpoint::open_as(prov, addr, config, verbs_mr)?;
        let secret = crate::os::random_u64();
        ep.sign(secret);
        let (landing, landing_key) = ep.exposed(MAX_CHANNELS * SLOT_BYTES, SLOT_BYTES)?;
        let bell = match ep.wait_fd() {
            Some(fd) => Some(Bell::new(fd)?),
            None => None,
        };
        // The link our address lies on, for a link-local one (`devices::parse_scoped`): our
        // sockets beside the endpoint listen there, and peers' link-local addresses are
        // reached over it.
        let scope = addr
            .and_then(|a| devices::parse_scoped(a).ok())
            .map_or(0, |(_, s)| s);
        let host = ep.host().map(|ip| devices::socket_addr(ip, 0, scope));
        let call_bell = host.and_then(CallBell::open).map(Arc::new);
        let shared = Shared {
            rx: RxPool {
                bufs: ep.buffers(RX_BOUNCES * BOUNCE)?,
                posted: VecDeque::with_capacity(RX_BOUNCES),
                filled: vec![None; RX_BOUNCES],
                repost: (0..RX_BOUNCES).collect(),
                lent: 0,
            },
            tx: TxPool {
                bufs: ep.buffers(TX_SLOTS * BOUNCE)?,
                free: (0..TX_SLOTS).rev().collect(),
                busy: (0..TX_SLOTS).map(|_| Busy::default()).collect(),
                lender: Weak::new(),
                scratch: Vec::with_capacity(BOUNCE),
            },
            area_out: ep.buffers(MAX_CHANNELS * SLOT_BYTES)?,
            landing,
            landing_key,
            areas_in_flight: 0,
            inboxes: Vec::new(),
            // Slot 0 is never a channel's: `NODE` names the node.
            free_slots: VecDeque::new(),
            peers: Vec::new(),
            secret,
            strangers: 0,
            bell,
            call_bell,
            watches: HashMap::new(),
            failed: None,
            epoch: Instant::now(),
            epoch_ns: crate::os::monotonic_ns(),
            now: Stamp::default(),
            ping_due: None,
            progressed: Stamp::default(),
            looks: 0,
            sent_since_look: false,
            serving: NODE,
            rma: ep
                .rma_keyed()
                .filter(|_| rma::wanted())
                .map(|a| rma::Exposure::new(a, ep.packs_keys(), ep.rma_needs_local())),
            rma_in_software: ep.rma_in_software(),
            rma_ops: Vec::new(),
            rma_free: Vec::new(),
            pieces_waiting: Vec::new(),
            peer_keys: HashMap::new(),
            ep,
        };
        let node = Node {
            key: (prov.to_string(), addr.map(str::to_string), wakeable, lane),
            name: shared.ep.name().to_vec(),
            provider: shared.ep.provider().to_string(),
            inject: shared.ep.inject_size(),
            beacon: host.and_then(watch::Beacon::open),
            scope,
            exposed_pools: Mutex::new(Vec::new()),
            shared: SleepMutex::new(shared),
        };
        crate::log_info!(
            "umq_bind_info_get",
            "network node over libfabric {} ({} bytes of address, inject {} B)",
            node.provider,
            node.name.len(),
            node.inject
        );
        Ok(Arc::new(node))
    }

    pub fn lock(&self) -> SleepGuard<'_, Shared> {
        self.shared.lock()
    }

    /// Our address, for peers (`fi_getname`).
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// Sends WRs from `pool`'s buffers in place where the provider can, and exposes its chunks
    /// for the peers' RMA (`rma`), once per pool, where the provider can.
    pub fn use_pool(self: &Arc<Node>, pool: &Arc<Pool>) {
        let pending = {
            let mut n = self.lock();
            n.tx.lender = Arc::downgrade(pool);
            n.rma.as_ref().map(rma::Exposure::pending)
        };
        let Some(pending) = pending else {
            return;
        };
        {
            let mut pools = self.exposed_pools.lock().unwrap_or_else(|p| p.into_inner());
            if pools.contains(&pool.id()) {
                return;
            }
            pools.push(pool.id());
        }
        pool.add_chunk_hook(Arc::new(Exposer {
            node: Arc::downgrade(self),
            pending,
        }));
    }

    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// A peer's socket address at `ip` and `port`: a link-local one on our link.
    pub fn on_our_link(&self, ip: IpAddr, port: u16) -> SocketAddr {
        devices::socket_addr(ip, port, self.scope)
    }

    /// Where our death-watch beacon listens, if we have one.
    pub fn beacon(&self) -> Option<SocketAddr> {
        self.beacon.as_ref().and_then(|b| b.addr())
    }
}

impl Shared {
    /// A new channel (for a queue in interrupt mode when `interrupt`); None when the node has
    /// `MAX_CHANNELS` already.
    pub fn open_channel(&mut self, interrupt: bool) -> Option<ChannelId> {
        let slot = match self.free_slots.pop_front() {
            Some(s) => s,
            None if self.inboxes.len() < MAX_CHANNELS => {
                if self.inboxes.is_empty() {
                    self.inboxes.push(None); // slot 0: the node
                }
                self.inboxes.push(None);
                self.inboxes.len() - 1
            }
            None => return None,
        };
        // Random, so that a peer cannot name a channel it was not given (a message to it, or a
        // write into its landing words, must carry the generation), nor a late message of an
        // earlier binding of the slot land in this one.
        let generation = (crate::os::random_u64() as u32).max(1);
        let id = (generation as u64) << 32 | slot as u64;
        // The landing words start over: the generation first, so that what an earlier binding
        // of this slot's peer still writes is told apart.
        let words = self.landing.get_mut(slot * SLOT_BYTES, SLOT_BYTES);
        words.fill(0);
        words[..8].copy_from_slice(&(generation as u64).to_ne_bytes());
        let Ok(landing) = self.expose_slot(slot) else {
            self.free_slots.push_front(slot);
            return None;
        };
        self.inboxes[slot] = Some(Inbox {
            id,
            arrivals: VecDeque::new(),
            pending: 0,
            sent: Vec::new(),
            area_written: false,
            broken: None,
            rma_done: Vec::new(),
            room_back: false,
            queued: 0,
            wants_room: false,
            peer: None,
            landing,
            interrupt,
            pieces: Pieces::default(),
        });
        Some(id)
    }

    /// Registers slot `slot`'s landing words for its peer's writes alone, under a random key
    /// only that peer learns (from our bind info): the landing words of all channels are one
    /// region, and under one key a peer bound to one channel could write another's, spoiling
    /// (never forging: `seal`) its grants until their own peer wrote them again. None where
    /// the engine registers the region whole and checks each write itself (UCX); Err when the
    /// provider refuses.
    fn expose_slot(&mut self, slot: usize) -> Result<Option<(RemoteKey, Registration)>, ()> {
        let at = self
            .landing
            .get_mut(slot * SLOT_BYTES, SLOT_BYTES)
            .as_mut_ptr();
        for _ in 0..8 {
            // SAFETY: the landing words live as long as the node, past every registration.
            match unsafe { self.ep.expose_one(at, SLOT_BYTES, crate::os::random_u64()) } {
                Ok(exposed) => return Ok(Some(exposed)),
                Err(rc) if rc == -sys::FI_ENOKEY => continue, // that key is taken: another
                Err(rc) if rc == -libc::ENOSYS => return Ok(None),
                Err(rc) => {
                    crate::log_warn!(
                        "umq_fabric",
                        "a channel's landing words could not be registered: {}",
                        sys::strerror(-rc)
                    );
                    return Err(());
                }
            }
        }
        Err(())
    }

    /// Ends channel `id`: its lent buffers are posted again, its peer has one user fewer.
    pub fn close_channel(&mut self, id: ChannelId) {
        if self.inbox_mut(id).is_none() {
            return;
        }
        let Some(inbox) = self.inboxes[slot_of(id)].take() else {
            return;
        };
        for a in inbox.arrivals {
            if let Arrival::Bounce { idx, .. } = a {
                self.rx.give_back(idx);
            }
        }
        if let Some(p) = inbox.peer {
            self.peers[p].users -= 1;
        }
        if let Some((_, registration)) = inbox.landing {
            self.ep.unexpose(registration);
        }
        self.free_slots.push_back(slot_of(id));
        // The planned ping runs on another channel's round now.
        if let Some(bell) = &self.call_bell
            && bell.ping_channel() == Some(id)
        {
            let other = self.inboxes.iter().flatten().find(|i| i.peer.is_some());
            self.serving = other.map_or(NODE, |i| i.id);
            bell.plan_ping(None);
            self.ping_due = self.next_ping_due();
            self.plan_next_ping();
        }
    }

    fn inbox(&self, id: ChannelId) -> Option<&Inbox> {
        self.inboxes
            .get(slot_of(id))?
            .as_ref()
            .filter(|i| i.id == id)
    }

    pub fn inbox_mut(&mut self, id: ChannelId) -> Option<&mut Inbox> {
        self.inboxes
            .get_mut(slot_of(id))?
            .as_mut()
            .filter(|i| i.id == id)
    }

    /// Where a peer writes channel `id`'s flow-control area.
    pub fn landing_key(&self, id: ChannelId) -> RemoteKey {
        if let Some((key, _)) = self.inbox(id).and_then(|i| i.landing.as_ref()) {
            return *key;
        }
        RemoteKey {
            addr: self.landing_key.addr + (slot_of(id) * SLOT_BYTES) as u64,
            key: self.landing_key.key,
        }
    }

    /// What the peer last wrote into channel `id`'s landing words, when it wrote them for this
    /// channel, sealed (a write for an earlier binding of the slot names another generation;
    /// one of another peer's, or torn, does not carry the seal).
    pub fn landed(&self, id: ChannelId) -> Option<([u64; 3], u64)> {
        self.landed_if(id, |_, _| true)
    }

    /// `landed`, when `news` says the words tell the channel something it does not know: a
    /// round reads them every time, and checking their seal only then keeps them as cheap as
    /// they were when nothing changed.
    #[inline]
    pub fn landed_if(
        &self,
        id: ChannelId,
        news: impl FnOnce([u64; 3], u64) -> bool,
    ) -> Option<([u64; 3], u64)> {
        let [generation, a, b, c, taken, sealed] =
            self.landing.words::<6>(slot_of(id) * SLOT_BYTES);
        let ours = generation_of(id);
        (generation == ours as u64
            && news([a, b, c], taken)
            && sealed == seal(ours, [a, b, c, taken]))
        .then_some(([a, b, c], taken))
    }

    /// Binds channel `id` to the peer process named `name`: its address handle, reached once
    /// for all channels to it.
    pub fn attach_peer(
        &mut self,
        id: ChannelId,
        name: &[u8],
        secret: u64,
        ping_after: Duration,
    ) -> Result<usize, String> {
        self.tick();
        let p = match self.peers.iter().position(|p| p.name == name) {
            Some(p) => p,
            None => {
                let addr = self.ep.connect(name)?;
                self.peers.push(Peer {
                    name: name.to_vec(),
                    secret,
                    addr,
                    heard: self.now,
                    heard_any: false,
                    said: self.now,
                    greeted: false,
                    ping_after,
                    users: 0,
                    said_by: Default::default(),
                    queued: 0,
                    reads: 0,
                    reads_since: Stamp::default(),
                    reads_waiters: Vec::new(),
                });
                self.peers.len() - 1
            }
        };
        self.ping_due = None;
        let peer = &mut self.peers[p];
        if peer.users == 0 {
            // A peer met again: its silence while no channel was bound to it says nothing.
            peer.heard = self.now;
            peer.ping_after = ping_after;
        }
        peer.ping_after = peer.ping_after.min(ping_after);
        // The newest bind info's: a process that reopened at the same address has a new one.
        peer.secret = secret;
        peer.users += 1;
        let inbox = self.inbox_mut(id).ok_or("the channel is gone")?;
        inbox.peer = Some(p);
        self.drop_strangers_before_peer(id, secret);
        Ok(p)
    }

    /// The socket watching the peer process whose beacon is at `at`, if a channel of ours has
    /// one already (one per peer process, shared by its channels).
    pub fn watching(&self, at: SocketAddr) -> Option<Arc<OwnedFd>> {
        self.watches.get(&at).and_then(Weak::upgrade)
    }

    /// Keeps `fd` as the socket watching the peer process whose beacon is at `at`.
    pub fn remember_watch(&mut self, at: SocketAddr, fd: &Arc<OwnedFd>) {
        self.watches.retain(|_, w| w.strong_count() > 0);
        self.watches.insert(at, Arc::downgrade(fd));
    }

    /// Channel `id`'s inbox and the bounce buffers its arrivals may be in.
    pub fn inbox_and_bounces(
        &mut self,
        id: ChannelId,
    ) -> Option<(&mut Inbox, &Buffers, Option<&mut rma::Exposure>, &Endpoint)> {
        let inbox = self.inboxes.get_mut(slot_of(id))?.as_mut()?;
        (inbox.id == id).then_some((inbox, &self.rx.bufs, self.rma.as_mut(), &self.ep))
    }

    /// The node's part of channel `by`'s round: completions taken, arrived messages handed to
    /// their channels, receive buffers posted again, quiet peers pinged. Err when the
    /// completion queue itself failed.
    pub fn progress(&mut self, by: ChannelId) -> Result<(), LinkError> {
        self.tick();
        self.check_failed()?;
        self.progressed = self.now;
        self.looks += 1;
        self.sent_since_look = false;
        self.serving = by;
        if let Some(x) = self.rma.as_mut() {
            x.take_pending(&self.ep);
        }
        // Before the provider's progress, which receives: what a round kept back for later
        // (`repost_unless_delivered`) goes before the next message is in, not after it.
        self.repost();
        if let Err(why) = self.reap() {
            self.failed = Some(why);
            return Err(LinkError::Lost(why));
        }
        self.dispatch();
        self.continue_pieces();
        self.ping_quiet_peers();
        self.repost();
        Ok(())
    }

    /// What our messages and pings carry, for our bind info (`Peer::secret`).
    pub fn secret(&self) -> u64 {
        self.secret
    }

    /// Reads the clock for the round that begins.
    pub fn tick(&mut self) {
        self.now = Stamp(crate::os::monotonic_ns().saturating_sub(self.epoch_ns));
    }

    /// Err once the completion queue failed: every channel is broken.
    pub fn check_failed(&self) -> Result<(), LinkError> {
        match self.failed {
            Some(why) => Err(LinkError::Lost(why)),
            None => Ok(()),
        }
    }

    /// How many times the provider progressed so far.
    pub fn looks(&self) -> u64 {
        self.looks
    }

    /// Whether a channel's round must progress the provider, its last round having seen
    /// `seen` looks: none came since (it looked last itself, or nobody did), or something went
    /// out since the last one. Otherwise another channel's round looked after ours, and all
    /// that arrived before that look waits in our inbox: a process that polls its queues in
    /// turn then makes one look a turn of the sweep, not one a queue, as one progress of a UCX
    /// worker serves all its endpoints; and a queue polled alone looks at every poll. What went
    /// out may be answered (a request's reply), and the look moves what the provider holds.
    pub fn look_due(&self, seen: u64) -> bool {
        self.looks == seen || self.sent_since_look
    }

    /// The time as the round began.
    pub fn now(&self) -> Stamp {
        self.now
    }

    /// When the provider last progressed.
    pub fn progressed(&self) -> Stamp {
        self.progressed
    }

    /// `at` on the process's clock.
    pub fn instant(&self, at: Stamp) -> Instant {
        self.epoch + Duration::from_nanos(at.0)
    }

    fn reap(&mut self) -> Result<(), &'static str> {
        let mut cqes = [const { MaybeUninit::<Cqe>::uninit() }; 16];
        loop {
            let done = self
                .ep
                .poll(&mut cqes)
                .map_err(|_| "the fabric completion queue failed")?;
            let n = done.len();
            for c in done {
                self.completed(c);
            }
            if n < cqes.len() {
                return Ok(());
            }
        }
    }

    /// One completion: a message arrived, a send buffer or an area write is done, or one of
    /// them failed (its channel is broken; a receive buffer is posted again).
    fn completed(&mut self, c: &Cqe) {
        let ctx = c.ctx as usize;
        let idx = ctx & INDEX;
        let failed = c.err != 0;
        if failed {
            crate::log_info!(
                "umq_fabric",
                "completion error: {} (provider errno {})",
                sys::strerror(c.err),
                c.prov_errno
            );
        }
        match ctx & !INDEX {
            RECV_TAG if idx < RX_BOUNCES && self.rx.filled[idx].is_none() => {
                // A failed receive (truncated, cancelled) carries nothing: an empty message,
                // which no channel takes.
                let len = if failed {
                    0
                } else {
                    (c.len as usize).min(BOUNCE)
                };
                self.rx.filled[idx] = Some((len, c.from));
            }
            SEND_TAG if idx < TX_SLOTS => {
                self.tx.free.push(idx);
                // Taking the slot's lease lets its chunk go.
                let busy = std::mem::take(&mut self.tx.busy[idx]);
                self.local_done(busy.local);
                self.unqueue(busy.queued);
                if let Some((id, wrs)) = busy.wr {
                    self.tell(id, |i| match failed {
                        true => i.broken = Some("peer unreachable over the network"),
                        false => i.sent.extend(wrs),
                    });
                }
            }
            AREA_TAG if idx < MAX_CHANNELS => {
                self.areas_in_flight = self.areas_in_flight.saturating_sub(1);
                if let Some(id) = self.inboxes.get(idx).and_then(|i| i.as_ref()).map(|i| i.id) {
                    self.tell(id, |i| match failed {
                        true => i.broken = Some("peer unreachable over the network"),
                        false => i.area_written = true,
                    });
                }
            }
            RMA_TAG if idx < self.rma_ops.len() => {
                if let Some(op) = self.rma_ops[idx].take() {
                    self.rma_free.push(idx);
                    self.local_done(op.local);
                    if op.read {
                        self.read_done(op.queued.peer);
                    }
                    self.unqueue(op.queued);
                    if op.answered() && !failed {
                        self.heard_from(op.queued.peer);
                    }
                    self.piece_finished(op.queued.channel, op.seq, !failed);
                }
            }
            _ => crate::log_warn!("umq_fabric", "a completion for no buffer of ours: {ctx:#x}"),
        }
    }

    /// An operation of ours that named a registration of our memory is done with it.
    fn local_done(&mut self, u: Option<registered::Use>) {
        if let (Some(x), Some(u)) = (self.rma.as_mut(), u) {
            x.local_done(&self.ep, u);
        }
    }

    /// Peer `p` answered an operation of ours: it lives, though a READ stream of ours may
    /// hold back all it sends (libfabric's tcp sends READ answers before any message).
    fn heard_from(&mut self, p: usize) {
        if let Some(peer) = self.peers.get_mut(p) {
            peer.heard = self.now;
        }
    }

    /// Changes channel `id`'s inbox (if it still is), waking its queue if it sleeps.
    fn tell(&mut self, id: ChannelId, change: impl FnOnce(&mut Inbox)) {
        let Some(inbox) = self.inbox_mut(id) else {
            return;
        };
        change(inbox);
        if inbox.interrupt
            && id != self.serving
            && let Some(bell) = self.bell.as_mut()
        {
            bell.ring();
        }
    }

    /// Hands arrived messages to their channels, in the order their buffers were posted.
    fn dispatch(&mut self) {
        while let Some((idx, len, from)) = self.rx.next_filled() {
            self.rx.posted.pop_front();
            self.rx.filled[idx] = None;
            let (id, peer) = match destination(self.rx.bufs.get(idx * BOUNCE, len)) {
                Some(NODE) => {
                    self.node_message(idx, len);
                    self.rx.repost.push(idx);
                    continue;
                }
                Some(id) if let Some(inbox) = self.inbox_mut(id) => {
                    let (peer, pending) = (inbox.peer, inbox.pending);
                    if peer.is_some_and(|p| self.peers[p].secret != from) {
                        self.dropped_from_stranger(idx);
                        continue;
                    }
                    if pending + len as u64 > allowance::INBOX_AT_MOST {
                        self.over_allowance(id, len);
                        self.rx.repost.push(idx);
                        continue;
                    }
                    (id, peer)
                }
                _ => {
                    // For a channel that is gone, or for none: dropped.
                    self.rx.repost.push(idx);
                    continue;
                }
            };
            // A link-level pause frame for a queue whose application may poll only its other
            // queues (or none): its round must take it in now, not at its next poll.
            let control = self.rx.bufs.get(idx * BOUNCE, len).first() == Some(&KIND_CONTROL);
            if control && id != self.serving {
                self.call_here(id);
            }
            let arrival = if self.rx.lent < LEND_AT_MOST {
                self.rx.lent += 1;
                Arrival::Bounce { idx, len, from }
            } else {
                let copy = self.rx.bufs.get(idx * BOUNCE, len).to_vec();
                self.rx.repost.push(idx);
                Arrival::Owned(copy, from)
            };
            if let Some(p) = peer {
                self.peers[p].heard = self.now;
                self.peers[p].heard_any = true;
            }
            self.tell(id, |i| {
                i.pending += len as u64;
                i.arrivals.push_back(arrival);
            });
        }
    }

    /// A message in bounce buffer `idx` that named one of our channels without carrying the
    /// channel's peer's word is dropped. Every message carries its sender's node secret beside
    /// its bytes (libfabric's remote CQ data, UCP's tag), which only the peer's bind info gave
    /// us: a stranger that reaches our endpoint (or a peer bound to another of our channels)
    /// and names the channel would otherwise have its messages taken for the peer's. What
    /// arrives before the channel has its peer waits with its word (`Arrival::from`)
    /// for `attach_peer` to judge.
    #[cold]
    #[inline(never)]
    fn dropped_from_stranger(&mut self, idx: usize) {
        self.count_strangers(1);
        self.rx.repost.push(idx);
    }

    /// Counts `n` messages dropped as a stranger's; the first is logged.
    fn count_strangers(&mut self, n: u64) {
        if self.strangers == 0 && n > 0 {
            crate::log_warn!(
                "umq_fabric",
                "a message named one of this process's network queues without its peer's \
                 secret and was dropped (others like it are only counted)"
            );
        }
        self.strangers += n;
    }

    /// Drops what arrived for channel `id` before it had its peer, `secret`, and did not carry
    /// the peer's word (`dropped_from_stranger`).
    fn drop_strangers_before_peer(&mut self, id: ChannelId, secret: u64) {
        let Some(inbox) = self.inbox_mut(id) else {
            return;
        };
        let (mut bounces, mut dropped, mut pending) = (Vec::new(), 0, inbox.pending);
        inbox.arrivals.retain(|a| {
            if a.from() == secret {
                return true;
            }
            pending -= a.bytes() as u64;
            if let Arrival::Bounce { idx, .. } = a {
                bounces.push(*idx);
            }
            dropped += 1;
            false
        });
        inbox.pending = pending;
        self.count_strangers(dropped);
        for idx in bounces {
            self.rx.give_back(idx);
        }
    }

    /// A message of `len` bytes for channel `id` would take its inbox past what a peer that
    /// keeps to its allowance can fill (`allowance`): the peer ignores it, the message is
    /// dropped (by the caller) and the binding breaks.
    #[cold]
    #[inline(never)]
    fn over_allowance(&mut self, id: ChannelId, len: usize) {
        let Some(inbox) = self.inbox_mut(id) else {
            return;
        };
        if inbox.broken == Some(OVER_ALLOWANCE) {
            return; // said once
        }
        crate::log_warn!(
            "umq_fabric",
            "a peer's messages fill {} bytes of a queue's inbox, past the {} its allowance \
             lets it fill: the binding breaks",
            inbox.pending + len as u64,
            allowance::INBOX_AT_MOST
        );
        self.tell(id, |i| i.broken = Some(OVER_ALLOWANCE));
    }

    /// Calls our progress thread to channel `id` (`CallBell::ring_here`).
    fn call_here(&self, id: ChannelId) {
        if let Some(bell) = &self.call_bell {
            bell.ring_here(id);
        }
    }

    /// A message for the node: a peer's ping, its name as the payload and its node's secret
    /// as the immediate.
    fn node_message(&mut self, idx: usize, len: usize) {
        let bytes = self.rx.bufs.get(idx * BOUNCE, len);
        let Ok(h) = Header::read(bytes) else {
            return;
        };
        let name = &bytes[HEADER..];
        if h.kind == KIND_PING
            && let Some(p) = self.peers.iter_mut().find(|p| p.name == name)
            && p.secret == h.imm
        {
            p.heard = self.now;
            p.heard_any = true;
        }
    }

    /// Pings every peer with channels that we have said nothing to for a while, so that it
    /// keeps hearing from this process (one ping for all its channels).
    /// (Inline, with the pings out of line: every round asks, and they are seldom due.)
    #[inline(always)]
    fn ping_quiet_peers(&mut self) {
        if self.ping_due.is_none_or(|due| self.now >= due) {
            self.ping_due_peers();
        }
        self.plan_next_ping();
    }

    #[inline(never)]
    fn ping_due_peers(&mut self) {
        self.ping_peers();
        self.ping_due = self.next_ping_due();
    }

    /// When the peer with channels that we said nothing to for longest needs its ping.
    fn next_ping_due(&self) -> Option<Stamp> {
        self.peers
            .iter()
            .filter(|p| p.users > 0)
            .map(|p| p.said.after(p.ping_after))
            .min()
    }

    fn ping_peers(&mut self) {
        let (ep, now, secret) = (&self.ep, self.now, self.secret);
        for p in self.peers.iter_mut() {
            if p.users == 0 || (p.greeted && now < p.said.after(p.ping_after)) {
                continue;
            }
            let h = Header {
                kind: KIND_PING,
                len: ep.name().len() as u32,
                imm: secret,
                dst: NODE,
                ..Default::default()
            };
            let msg = [&h.to_bytes()[..], ep.name()].concat();
            if ep.inject(&msg, p.addr).is_ok() {
                p.said = now;
                p.greeted = true;
            }
        }
    }

    /// Has the progress thread run a round of the serving channel when the next ping falls due
    /// (see `call_bell`), unless one is planned: a plan sooner than needed (we said something
    /// since) costs a round that pings nobody and plans again.
    #[inline(always)]
    fn plan_next_ping(&self) {
        #[cfg(feature = "fuzzing")]
        if NO_PING_ROUNDS.load(std::sync::atomic::Ordering::Relaxed) {
            return;
        }
        let Some(bell) = self.call_bell.as_ref().filter(|b| !b.ping_planned()) else {
            return;
        };
        if self.serving != NODE {
            bell.plan_ping(self.ping_due.map(|at| (self.instant(at), self.serving)));
        }
    }

    /// Greets the peers met since the last round at once (`Peer::greeted`).
    pub fn greet_new_peers(&mut self) {
        if self.peers.iter().any(|p| !p.greeted) {
            self.ping_due = None;
            self.ping_quiet_peers();
        }
    }

    /// Posts the receive buffers given back since the last call again. (The look is inline:
    /// a round asks twice, and one of the two finds none.)
    #[inline(always)]
    pub fn repost(&mut self) {
        if !self.rx.repost.is_empty() {
            self.repost_returned();
        }
    }

    /// `repost` at the end of a round, unless the round gave the application messages and
    /// at least half the buffers are still posted: then the next look at the provider posts
    /// them, before it receives. A ping-pong's reply then leaves without waiting for the
    /// provider's receive posts (UCP's took about 250 instructions a message, between a
    /// message's arrival and its answer); the next look comes at the application's next poll,
    /// or the progress thread's.
    pub fn repost_unless_delivered(&mut self, delivered: bool) {
        if delivered && self.rx.posted.len() >= RX_BOUNCES / 2 {
            return;
        }
        self.repost();
    }

    #[inline(never)]
    fn repost_returned(&mut self) {
        while let Some(idx) = self.rx.repost.pop() {
            let posted = self
                .ep
                .post_recv(&mut self.rx.bufs, idx * BOUNCE, BOUNCE, RECV_TAG | idx);
            if posted.is_err() {
                self.rx.repost.push(idx);
                return;
            }
            self.rx.posted.push_back(idx);
        }
    }

    /// Writes channel `id`'s flow-control area `words` into the peer's landing words at `to`
    /// (`to_channel`'s generation first, their seal last). Ok(false) when there is no room now.
    pub fn write_area(
        &mut self,
        id: ChannelId,
        peer: u64,
        to: RemoteKey,
        to_channel: ChannelId,
        (words, taken): ([u64; 3], u64),
    ) -> Result<bool, LinkError> {
        let generation = generation_of(to_channel);
        let slot = [
            generation as u64,
            words[0],
            words[1],
            words[2],
            taken,
            seal(generation, [words[0], words[1], words[2], taken]),
        ];
        self.write_words(id, peer, to, &slot)
    }

    /// Writes `words` (a slot's worth at most) at `to` in the peer's memory, by way of channel
    /// `id`'s outgoing slot; its completion is the channel's area write's. Ok(false) when there
    /// is no room now. (Public for the tests, whose peer writes what it should not.)
    pub fn write_words(
        &mut self,
        id: ChannelId,
        peer: u64,
        to: RemoteKey,
        words: &[u64],
    ) -> Result<bool, LinkError> {
        if self.areas_in_flight >= AREA_WRITES {
            return Ok(false);
        }
        let (at, len) = (slot_of(id) * SLOT_BYTES, 8 * words.len());
        debug_assert!(len <= SLOT_BYTES, "more than a slot");
        let out = self.area_out.get_mut(at, len);
        for (chunk, w) in out.chunks_exact_mut(8).zip(words) {
            chunk.copy_from_slice(&w.to_ne_bytes());
        }
        let ctx = AREA_TAG | slot_of(id);
        match self.ep.write(&self.area_out, at, len, peer, to, ctx) {
            Ok(()) => {
                self.areas_in_flight += 1;
                self.sent_since_look = true;
                Ok(true)
            }
            Err(sys::FI_EAGAIN) => Ok(false),
            Err(code) => {
                crate::log_info!("umq_fabric", "area write failed: {}", sys::strerror(code));
                Err(LinkError::Lost("peer unreachable over the network"))
            }
        }
    }

    /// Channel `id`'s fragments wait for room (`has_room` said no): it is told
    /// (`Inbox::room_back`, which rings the bell of a sleeping queue) once libfabric has sent
    /// one of its own, after which it may always hand over one more. (A fragment that carries
    /// no WR, a READ's response, tells its channel nothing else when it goes.)
    pub fn want_room(&mut self, id: ChannelId) {
        if let Some(inbox) = self.inbox_mut(id) {
            inbox.wants_room = true;
        }
    }

    /// libfabric holds what `q` counts, in its peer's share and its channel's.
    fn enqueue(&mut self, q: Queued) {
        if let Some(peer) = self.peers.get_mut(q.peer) {
            peer.queued += q.bytes;
        }
        if let Some(inbox) = self.inbox_mut(q.channel) {
            inbox.queued += q.bytes;
        }
    }

    /// libfabric sent what `q` counted: its channel is told if it waits for room.
    fn unqueue(&mut self, q: Queued) {
        if let Some(peer) = self.peers.get_mut(q.peer) {
            peer.queued = peer.queued.saturating_sub(q.bytes);
        }
        let Some(inbox) = self.inbox_mut(q.channel) else {
            return;
        };
        inbox.queued = inbox.queued.saturating_sub(q.bytes);
        if std::mem::take(&mut inbox.wants_room) {
            self.tell(q.channel, |i| i.room_back = true);
        }
    }

    /// Whether channel `id` may hand `len` more bytes from our send buffers (or an RMA piece)
    /// to libfabric for peer `p` now: while libfabric holds less than `QUEUED_PER_PEER` for it, and always when
    /// it holds nothing for the peer or nothing of the channel's.
    pub fn has_room(&mut self, p: usize, id: ChannelId, len: usize) -> bool {
        let queued = self.queued_for(p);
        queued == 0
            || queued + len <= QUEUED_PER_PEER
            || self.inbox_mut(id).is_some_and(|i| i.queued == 0)
    }

    /// Whether channel `id` may start an RMA piece of `op` and `len` bytes to peer `p` now: as
    /// a fragment may (`has_room`), or while libfabric then holds no more than `past_share` for
    /// the peer (`piece_for`); a READ not while our READs from it pause (`reads_drain`).
    pub fn rma_has_room(
        &mut self,
        p: usize,
        id: ChannelId,
        (op, len): (sys::Rma, usize),
        past_share: usize,
    ) -> bool {
        if op == sys::Rma::Read && self.reads_drain(p) {
            let waiters = &mut self.peers[p].reads_waiters;
            if !waiters.contains(&id) {
                waiters.push(id);
            }
            return false;
        }
        self.has_room(p, id, len) || self.queued_for(p).saturating_add(len) <= past_share
    }

    /// Whether our READs from peer `p` have been in flight back to back for
    /// `READS_DRAIN_AFTER`: then no more start until they all completed, which leaves its
    /// provider a moment to send its own messages.
    fn reads_drain(&self, p: usize) -> bool {
        self.peers.get(p).is_some_and(|peer| {
            peer.reads > 0 && self.now >= peer.reads_since.after(READS_DRAIN_AFTER)
        })
    }

    fn read_started(&mut self, p: usize) {
        let now = self.now;
        if let Some(peer) = self.peers.get_mut(p) {
            if peer.reads == 0 {
                peer.reads_since = now;
            }
            peer.reads += 1;
        }
    }

    /// A READ piece from peer `p` completed; once none is left, the channels refused a READ
    /// meanwhile are told (`Inbox::room_back`).
    fn read_done(&mut self, p: usize) {
        let Some(peer) = self.peers.get_mut(p) else {
            return;
        };
        peer.reads = peer.reads.saturating_sub(1);
        if peer.reads == 0 {
            for id in std::mem::take(&mut peer.reads_waiters) {
                self.tell(id, |i| i.room_back = true);
            }
        }
    }

    /// How channel `id`'s next RMA piece of `op` to peer `p` goes: at most how many bytes, and
    /// how much libfabric may hold for the peer past the share (`rma_has_room`). Beside another
    /// channel's traffic, short pieces within the share. Alone (`alone_to`), a WRITE in lone
    /// pieces up to `QUEUED_ALONE`, so that a channel that starts sending waits behind that
    /// much; a READ whole, since pieces cost a target asleep (its provider answers each on its
    /// own): an 8 MiB READ took 3.3-3.4 ms in lone pieces against 2.0 whole, and READ streams
    /// ran at 2.0-2.1 against 3.5 GB/s. READs alone keep at most `READS_ALONE` in libfabric.
    pub fn piece_for(&self, p: usize, id: ChannelId, op: sys::Rma) -> (u64, usize) {
        match (self.alone_to(p, id), op) {
            (false, _) => (PIECE, 0),
            (true, sys::Rma::Write) => (LONE_PIECE, QUEUED_ALONE),
            (true, sys::Rma::Read) => (u64::MAX, READS_ALONE),
        }
    }

    /// Whether no other channel sent peer `p` anything for `OTHERS_QUIET`: then nothing waits
    /// behind channel `id`'s RMA, which goes whole, as fast as a lone WR can (`pieces`).
    pub fn alone_to(&self, p: usize, id: ChannelId) -> bool {
        let Some(peer) = self.peers.get(p) else {
            return false;
        };
        let (newest, older) = (peer.said_by[0], peer.said_by[1]);
        let (_, other_at) = if newest.0 == id { older } else { newest };
        other_at == Stamp::default() || self.now >= other_at.after(OTHERS_QUIET)
    }

    /// Sends `len` bytes of send buffer `slot` from channel `from` (a fragment of its WR `wr`,
    /// if any) to peer `to` (its index and address). Err(code), where `FI_EAGAIN` means no room
    /// now.
    pub fn send_slot(
        &mut self,
        slot: usize,
        len: usize,
        (from, to): (ChannelId, (usize, u64)),
        wr: Option<Range<u64>>,
    ) -> Result<(), i32> {
        let sent = self
            .ep
            .send(&self.tx.bufs, slot * BOUNCE, len, to.1, SEND_TAG | slot);
        let queued = Queued {
            peer: to.0,
            channel: from,
            bytes: len,
        };
        self.slot_sent(slot, sent, queued, wr, None)
    }

    /// As `send_slot` for a fragment whose `head` bytes are in send buffer `slot` and whose
    /// payload is read in place at `body`, in the chunk `lease` holds until libfabric is done.
    pub fn send_slot_in_place(
        &mut self,
        (slot, head): (usize, usize),
        body: InPlace,
        (from, to): (ChannelId, (usize, u64)),
        wr: Option<Range<u64>>,
    ) -> Result<(), i32> {
        // SAFETY: `sends_in_place` said so (the caller asked), the lease keeps `body` mapped
        // and its use keeps its registration open until the completion drops them, or until
        // the endpoint closes (declared first in `Shared`, it goes before the leases).
        let sent = unsafe {
            self.ep.send_gathered(
                (&self.tx.bufs, slot * BOUNCE, head),
                body.at,
                body.desc,
                to.1,
                SEND_TAG | slot,
            )
        };
        let queued = Queued {
            peer: to.0,
            channel: from,
            bytes: head + body.at.1,
        };
        self.slot_sent(slot, sent, queued, wr, Some((body.lease, body.local)))
    }

    fn slot_sent(
        &mut self,
        slot: usize,
        sent: Result<(), i32>,
        queued: Queued,
        wrs: Option<Range<u64>>,
        in_place: Option<(Lease, Option<registered::Use>)>,
    ) -> Result<(), i32> {
        let (lease, local) = in_place.map_or((None, None), |(l, u)| (Some(l), u));
        if sent.is_err() {
            self.tx.free.push(slot);
            self.local_done(local);
            return sent;
        }
        self.enqueue(queued);
        self.tx.busy[slot] = Busy {
            wr: wrs.map(|r| (queued.channel, r)),
            queued,
            _lease: lease,
            local,
        };
        sent
    }

    /// Starts channel `id`'s WR of `len` bytes by RMA with its `first` piece; the node starts
    /// the others as the peer's share frees (`continue_pieces`). Err(code) when libfabric
    /// refused the first (`FI_EAGAIN`: no room now).
    ///
    /// # Safety
    /// The WR's buffer must stay valid (and, for a READ, untouched by us) until the channel is
    /// told the WR is done (`Inbox::rma_done`), or until `give_up_pieces` and the completions
    /// of the pieces already in flight.
    pub unsafe fn start_rma(&mut self, id: ChannelId, first: &Piece, len: u64) -> Result<(), i32> {
        unsafe { self.post_piece(id, first) }?;
        // Another binding's RMA to the peer goes in pieces beside it (`alone_to`).
        self.sent_by(first.peer.0, id);
        let Some(inbox) = self.inbox_mut(id) else {
            return Ok(()); // (the caller's own channel: always there)
        };
        inbox.pieces.started(first, len);
        // As many more as there is room for now; the rest as progress frees it.
        if inbox.pieces.waiting() && self.more_pieces(id) {
            self.pieces_waiting.push(id);
        }
        Ok(())
    }

    /// Whether channel `id`'s newest RMA WR has pieces to start: no other may start before.
    pub fn pieces_wait(&self, id: ChannelId) -> bool {
        self.inbox(id).is_some_and(|i| i.pieces.waiting())
    }

    /// Hands `piece` of channel `id` to libfabric; until it completes, it counts in the peer's
    /// share (`QUEUED_PER_PEER`). Err(code) when libfabric refused it.
    ///
    /// # Safety
    /// As `start_rma`.
    unsafe fn post_piece(&mut self, id: ChannelId, piece: &Piece) -> Result<(), i32> {
        let idx = self.rma_free.pop().unwrap_or_else(|| {
            self.rma_ops.push(None);
            self.rma_ops.len() - 1
        });
        let at = piece.at as *mut u8;
        let ctx = RMA_TAG | idx;
        let named = match self.rma.as_mut() {
            Some(x) => x.local_desc(&self.ep, piece.at, piece.len),
            None => None,
        };
        let local = named.and_then(|(_, u)| u);
        let posted = match named {
            Some((desc, _)) => unsafe {
                self.ep.rma(
                    piece.how(),
                    (at, desc),
                    piece.len,
                    piece.peer.1,
                    piece.to,
                    ctx,
                )
            },
            None => Err(libc::EINVAL), // not our memory to register: the WR goes as a message
        };
        if let Err(code) = posted {
            self.rma_free.push(idx);
            self.local_done(local);
            return Err(code);
        }
        let queued = Queued {
            peer: piece.peer.0,
            channel: id,
            bytes: piece.len,
        };
        self.enqueue(queued);
        let op = RmaOp::of(piece, queued, local);
        if op.read {
            self.read_started(piece.peer.0);
        }
        self.rma_ops[idx] = Some(op);
        Ok(())
    }

    /// A piece of channel `id`'s WR `seq` finished: the channel is told once the whole WR is
    /// done. (A refused RMA breaks nothing: the WR completes with an error.)
    fn piece_finished(&mut self, id: ChannelId, seq: u64, ok: bool) {
        let done = self.inbox_mut(id).and_then(|i| i.pieces.finished(seq, ok));
        if let Some(done) = done {
            self.tell(id, |i| i.rma_done.push(done));
        }
    }

    /// Starts the pieces that wait while their peers' shares have room (`rma_has_room`).
    fn continue_pieces(&mut self) {
        let mut i = 0;
        while i < self.pieces_waiting.len() {
            let id = self.pieces_waiting[i];
            match self.more_pieces(id) {
                true => i += 1,
                false => {
                    self.pieces_waiting.swap_remove(i);
                }
            }
        }
    }

    /// Starts channel `id`'s waiting pieces while there is room; whether some still wait.
    fn more_pieces(&mut self, id: ChannelId) -> bool {
        loop {
            let Some((p, op)) = self.inbox(id).and_then(|i| i.pieces.next_to()) else {
                return false;
            };
            let (most, past_share) = self.piece_for(p, id, op);
            let Some(piece) = self.inbox(id).and_then(|i| i.pieces.next(most)) else {
                return false;
            };
            if !self.rma_has_room(p, id, (op, piece.len), past_share) {
                return true;
            }
            // SAFETY: as `start_rma`: the channel's WR is not done while a piece waits.
            match unsafe { self.post_piece(id, &piece) } {
                Ok(()) => {
                    if let Some(inbox) = self.inbox_mut(id) {
                        inbox.pieces.next_started(piece.len);
                    }
                }
                Err(sys::FI_EAGAIN) => return true,
                Err(_) => {
                    self.give_up_pieces(id);
                    return false;
                }
            }
        }
    }

    /// Channel `id`'s waiting pieces will not start: its WR fails, as soon as those in flight
    /// finished.
    pub fn give_up_pieces(&mut self, id: ChannelId) {
        let gone = self.inbox_mut(id).and_then(|i| i.pieces.give_up_rest());
        if let Some(seq) = gone {
            self.tell(id, |i| i.rma_done.push((seq, false)));
        }
    }

    /// The key `packed` by `peer`, unpacked (once; later calls find it); None when the
    /// provider refuses it (the WR then goes as a message).
    pub fn peer_key(&mut self, peer: u64, packed: &[u8]) -> Option<u64> {
        if let Some(&key) = self.peer_keys.get(&peer).and_then(|k| k.get(packed)) {
            return Some(key);
        }
        // Keys of chunks long gone pile up: they go when no RMA of ours needs any. (Counted
        // only here, before an unpack, which is once a key.)
        let held: usize = self.peer_keys.values().map(HashMap::len).sum();
        if held >= PEER_KEYS_HELD && self.rma_free.len() == self.rma_ops.len() {
            self.drop_peer_keys();
        }
        let key = self.ep.unpack_key(peer, packed).ok()?;
        let keys = self.peer_keys.entry(peer).or_default();
        keys.insert(packed.into(), key);
        Some(key)
    }

    fn drop_peer_keys(&mut self) {
        for (_, keys) in self.peer_keys.drain() {
            keys.into_values().for_each(|k| self.ep.drop_key(k));
        }
    }

    /// Bounce buffers channels are done with.
    pub fn give_back(&mut self, released: &mut Vec<usize>) {
        for idx in released.drain(..) {
            self.rx.give_back(idx);
        }
    }

    /// For a sleeping interrupt-mode queue whose channel is `id`: the fd to sleep on, armed;
    /// None when something for the channel waits already or the provider must progress
    /// first; Some(None) when the node has no wait fd.
    pub fn arm(&mut self, id: ChannelId) -> Option<Option<i32>> {
        let Some(bell) = self.bell.as_mut() else {
            return Some(None);
        };
        bell.clear();
        let fd = bell.epoll.as_raw_fd();
        let waiting = self.inbox_mut(id).is_some_and(|i| {
            !i.arrivals.is_empty() || !i.sent.is_empty() || i.area_written || i.room_back
        });
        if waiting || !self.ep.arm_wait() {
            return None;
        }
        Some(Some(fd))
    }

    /// Channel `id` handed peer `p` a message (or part of one) now: the peer hears from us.
    pub fn said(&mut self, p: usize, id: ChannelId) {
        if let Some(peer) = self.peers.get_mut(p) {
            peer.said = self.now;
        }
        self.sent_by(p, id);
    }

    /// Channel `id` sent peer `p` something now (a message, or RMA, which the peer's library
    /// does not see): the channels that `alone_to` looks at.
    fn sent_by(&mut self, p: usize, id: ChannelId) {
        self.sent_since_look = true;
        let now = self.now;
        let Some(peer) = self.peers.get_mut(p) else {
            return;
        };
        if peer.said_by[0].0 != id {
            peer.said_by[1] = peer.said_by[0];
        }
        peer.said_by[0] = (id, now);
    }

    /// Bytes libfabric holds for peer `p` (`QUEUED_PER_PEER`): what we handed it and it has not
    /// completed, less what it has handed on already (`Endpoint::settled`).
    pub fn queued_for(&self, p: usize) -> usize {
        match self.peers.get(p) {
            Some(peer) if peer.queued > 0 => peer.queued.saturating_sub(self.ep.settled(peer.addr)),
            _ => 0,
        }
    }

    /// Lent bounce buffers, for tests.
    #[cfg(test)]
    pub fn lent(&self) -> usize {
        self.rx.lent
    }

    /// Bounce buffers posted to the provider, for tests.
    #[cfg(test)]
    pub fn posted(&self) -> usize {
        self.rx.posted.len()
    }

    /// The fd a sleeping queue waits on, for tests.
    #[cfg(test)]
    pub fn bell_fd(&self) -> Option<i32> {
        self.bell.as_ref().map(|b| b.epoll.as_raw_fd())
    }
}

impl RxPool {
    /// The oldest posted buffer, when its message has arrived: (buffer, bytes, the word the
    /// message carried).
    fn next_filled(&self) -> Option<(usize, usize, u64)> {
        let &idx = self.posted.front()?;
        self.filled[idx].map(|(len, from)| (idx, len, from))
    }

    fn give_back(&mut self, idx: usize) {
        self.lent -= 1;
        self.repost.push(idx);
    }
}
