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
//! side writes its flow-control area into memory the peer registered for it (RMA, `ship_area`)
//! whenever it changed, and the peer reads credit from there.

#[cfg(any(test, feature = "fuzzing"))]
pub mod hostile;
mod msg;
mod rx;
pub mod sys;
mod tx;
pub mod watch;

use super::LinkError;
use super::link::Arm;
use super::progress::Wakeup;
use super::target;
use super::wire::{CreditGate, Outcome, PacketGate, Receiver, Side, Wire};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::flow::Area;
use msg::*;
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
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

/// Receive bounce buffers per binding.
const RX_BOUNCES: usize = 64;
/// Send buffers per binding: WRs beyond them wait in the send queue.
const TX_SLOTS: usize = 64;
/// WRs (and responses) handed to the sending step at most at once.
const MAX_OUTGOING: usize = 256;
/// A side with nothing to send for this long sends a ping, so its peer keeps hearing from it.
const PING_AFTER: Duration = Duration::from_millis(500);
/// The least time between two shipments of our flow-control area while we send WRs, and while
/// we only receive (`ship_area`).
const AREA_WHILE_SENDING: Duration = Duration::from_millis(1);
const AREA_WHILE_RECEIVING: Duration = Duration::from_micros(50);
/// Completion contexts: which buffer a completion is about.
const RECV_TAG: usize = 1 << 32;
const SEND_TAG: usize = 2 << 32;
const AREA_TAG: usize = 3 << 32;
/// Our flow-control area as written into the peer's landing words: three words.
const AREA_BYTES: usize = 24;

pub const LIVENESS_DEFAULT_MS: u64 = 5000;

/// How long a peer may stay silent before its binding breaks: `UMQ_FABRIC_LIVENESS_MS`,
/// default `LIVENESS_DEFAULT_MS` (each side pings after half a second of saying nothing, so only a peer that is
/// gone or cut off stays silent).
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

/// The completion queue of an endpoint: room for every buffer's completion.
pub const CQ_SIZE: usize = RX_BOUNCES + TX_SLOTS + 16;

/// What a peer needs to reach a queue's network endpoint: the network part of its bind info.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Contact {
    /// The endpoint's name (`fi_getname`); empty: no endpoint.
    pub name: Vec<u8>,
    /// The death-watch beacon (`watch`).
    pub watch: Option<SocketAddr>,
    /// Where the peer writes its flow-control area.
    pub area: Option<RemoteKey>,
}

/// Where the peer's process runs, as its bind info says.
pub enum PeerProcess {
    /// On this host, as this pid (the progress thread watches it through a pidfd).
    Local(u32),
    /// On another host, with its death-watch beacon there (`watch`), if it offers one.
    Remote(Option<SocketAddr>),
}

/// A binding over libfabric.
pub struct Link {
    ep: Endpoint,
    /// Our death-watch beacon, open while the binding lasts.
    _beacon: Option<watch::Beacon>,
    peer: u64,
    peer_pid: Option<u32>,
    /// Connected to the peer's beacon, until the progress thread takes it.
    peer_socket: Option<OwnedFd>,
    rx: Rx,
    tx: Tx,
    /// The peer's flow-control area, as it last wrote it into our landing words, and where we
    /// write ours.
    peer_area: Area,
    peer_landing: RemoteKey,
    /// Our own area, which we ship to the peer whenever it changed, from `area_out` (a
    /// registered buffer: the write carries a context, see `ship_area`), one write at a time.
    our_area: OurArea,
    area_out: sys::Buffers,
    area_in_flight: bool,
    /// Our area as we last shipped it, and when.
    area_sent: [u64; 3],
    area_sent_at: Instant,
    /// When we last handed a WR of ours to the sending step.
    wr_sent_at: Instant,
    /// The peer said it left.
    left: bool,
    /// When we last heard from the peer and last sent it anything, and how long it may stay
    /// silent before the binding counts as broken.
    heard: Instant,
    /// A message of the peer's has arrived: the connection under the endpoint is up.
    heard_any: bool,
    said: Instant,
    liveness: Duration,
}

struct Rx {
    /// `RX_BOUNCES` buffers of `BOUNCE` bytes.
    bufs: sys::Buffers,
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
    /// `TX_SLOTS` buffers of `BOUNCE` bytes.
    bufs: sys::Buffers,
    free: Vec<usize>,
    /// The WR (its sequence number) a busy slot carries a fragment of.
    slot_wr: Vec<Option<u64>>,
    /// Messages to send, in order; the first may be partly sent.
    outgoing: VecDeque<Outgoing>,
    /// Our WRs in flight, oldest first; the first has sequence number `flight_base`.
    flight: VecDeque<Flight>,
    flight_base: u64,
    scratch: Vec<u8>,
}

fn quick(opcode: umq_opcode_t) -> bool {
    matches!(opcode, UMQ_OPC_SEND | UMQ_OPC_SEND_IMM | UMQ_OPC_NOP)
}

/// Connects to a peer's beacon; without one, a killed peer is noticed only by the liveness
/// timeout.
fn watch_or_log(at: SocketAddr) -> Option<OwnedFd> {
    watch::watch(at)
        .inspect_err(|why| {
            crate::log_warn!(
                "umq_bind",
                "{why}: a killed peer is noticed after the liveness timeout ({} ms)",
                liveness().as_millis()
            )
        })
        .ok()
}

fn lost(why: &'static str) -> LinkError {
    LinkError::Lost(why)
}

impl Link {
    /// Binds our endpoint `ep` (with its beacon) to the peer's endpoint at `addr`, posting our
    /// receive buffers. The peer's death ends the binding at once: on this host its pid is
    /// watched, on another its beacon. A peer silent for `liveness` (a host gone, a link down)
    /// breaks the binding.
    pub fn open(
        ep: Endpoint,
        to: &Contact,
        peer_process: PeerProcess,
        beacon: Option<watch::Beacon>,
        our_area: OurArea,
        liveness: Duration,
    ) -> Result<Link, String> {
        let peer_landing = to
            .area
            .ok_or("the peer's bind info has no key for its flow-control area")?;
        let peer = ep.connect(&to.name)?;
        let (rx_bufs, tx_bufs, area_out) = (
            ep.buffers(RX_BOUNCES * BOUNCE)?,
            ep.buffers(TX_SLOTS * BOUNCE)?,
            ep.buffers(AREA_BYTES)?,
        );
        let (peer_pid, peer_socket) = match peer_process {
            PeerProcess::Local(pid) => (Some(pid), None),
            PeerProcess::Remote(at) => (None, at.and_then(watch_or_log)),
        };
        let mut link = Link {
            ep,
            _beacon: beacon,
            peer,
            peer_pid,
            peer_socket,
            rx: Rx {
                bufs: rx_bufs,
                posted: VecDeque::with_capacity(RX_BOUNCES),
                filled: vec![None; RX_BOUNCES],
                repost: (0..RX_BOUNCES).collect(),
                assembling: None,
                blocked: false,
                held: None,
                executed: 0,
            },
            tx: Tx {
                bufs: tx_bufs,
                free: (0..TX_SLOTS).rev().collect(),
                slot_wr: vec![None; TX_SLOTS],
                outgoing: VecDeque::new(),
                flight: VecDeque::new(),
                flight_base: 0,
                scratch: Vec::with_capacity(BOUNCE),
            },
            peer_area: Area::default(),
            peer_landing,
            our_area,
            area_out,
            area_in_flight: false,
            area_sent: [0; 3],
            area_sent_at: Instant::now(),
            wr_sent_at: Instant::now(),
            left: false,
            heard: Instant::now(),
            heard_any: false,
            said: Instant::now(),
            liveness,
        };
        link.repost();
        Ok(link)
    }

    pub fn peer_pid(&self) -> Option<u32> {
        self.peer_pid
    }

    pub fn take_peer_socket(&mut self) -> Option<OwnedFd> {
        self.peer_socket.take()
    }

    pub fn peer_area(&self) -> &Area {
        &self.peer_area
    }

    /// A full round: completions, the peer's messages, our completions, our sends. (Out of
    /// line, here and in `post_round`: the other providers' fast paths inline at the dispatch.)
    #[inline(never)]
    pub fn round(&mut self, w: &mut Wire, at: &Receiver) -> Result<Outcome, LinkError> {
        let mut out = Outcome::default();
        // The link's frames first: a refresh of our XOFF must not wait for what the peer sent
        // to be taken in (at 10 Gbit/s it has 1.7 ms, and a burst takes longer than that).
        if self
            .tx
            .outgoing
            .front()
            .is_some_and(|o| o.header.kind == KIND_CONTROL)
        {
            self.flush(w.packet_gate(), w.paused(), &mut w.paced_packets)?;
        }
        self.reap()?;
        self.take_landed();
        self.check_liveness()?;
        self.receive(w, at, &mut out)?;
        self.complete(w, &mut out);
        if self.left {
            return Err(LinkError::PeerLeft);
        }
        self.ship_area()?;
        self.transmit(w, &mut out);
        self.flush(w.packet_gate(), w.paused(), &mut w.paced_packets)?;
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
        self.take_landed();
        self.transmit(w, &mut out);
        if self
            .flush(w.packet_gate(), w.paused(), &mut w.paced_packets)
            .is_err()
        {
            return None;
        }
        self.complete(w, &mut out);
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
            Outgoing {
                header: Header {
                    kind: KIND_CONTROL,
                    total: frame.len() as u64,
                    ..Default::default()
                },
                body: Body::Owned(frame.to_vec()),
                done: 0,
                started: false,
                wr_seq: None,
                fragment: FRAGMENT,
            },
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

    /// Arms the completion queue's wait fd (interrupt mode); `Pending` when completions or the
    /// provider's progress must be run first.
    pub fn arm_wakeup(&self) -> Arm {
        let Some(fd) = self.ep.wait_fd() else {
            return Arm::NoFd;
        };
        if !self.ep.arm_wait() {
            return Arm::Pending;
        }
        Arm::Armed(Wakeup {
            fd,
            // Until the peer's first message, libfabric may still be setting up the connection
            // (rxm connects on the first send), which need not make the fd readable: tick.
            rung_by_peer: self.heard_any,
            // An epoll set: readable while a completion waits, nothing to read from it.
            counter: false,
        })
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
            if self.reap().is_err()
                || self.flush(None, false, &mut 0).is_err()
                || self.tx.outgoing.is_empty()
            {
                break;
            }
            std::thread::yield_now();
        }
    }

    /// Takes what the peer last wrote into our landing words (its flow-control area) as its
    /// area: each word only grows within a binding, so a stale or hostile write lowers nothing.
    /// A change is also word from the peer (it is alive).
    fn take_landed(&mut self) {
        let landed = self.ep.landed();
        if landed != self.peer_area.snapshot() {
            self.peer_area.raise_to(landed);
            self.heard = Instant::now();
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
}

#[cfg(all(test, umq_fabric_headers))]
mod tests {
    use super::*;
    use crate::buf::pool::Pool;

    /// Two bindings to each other over libfabric tcp on 127.0.0.1, with their wires; b's
    /// endpoint has a wait fd when asked.
    struct Pair {
        a: Link,
        b: Link,
        wa: Wire,
        wb: Wire,
        pool: Pool,
        /// a's flow-control area (b's is never changed).
        area_a: &'static Area,
    }

    impl Pair {
        fn new(b_wakeable: bool, liveness: Duration) -> Pair {
            let open = |wakeable| {
                Endpoint::open("tcp", Some("127.0.0.1"), CQ_SIZE, wakeable).expect("libfabric tcp")
            };
            let (ea, eb) = (open(false), open(b_wakeable));
            let contact = |ep: &Endpoint| Contact {
                name: ep.name().to_vec(),
                watch: None,
                area: Some(ep.landing_key()),
            };
            let (na, nb) = (contact(&ea), contact(&eb));
            // Leaked: an area must outlive its binding.
            let (area_a, area_b): (&'static Area, &'static Area) =
                (Box::leak(Box::default()), Box::leak(Box::default()));
            let link = |ep, to: &Contact, area| {
                // SAFETY: the areas live as long as the test process.
                let ours = unsafe { OurArea::new(area) };
                Link::open(ep, to, PeerProcess::Remote(None), None, ours, liveness)
                    .expect("connect")
            };
            Pair {
                a: link(ea, &nb, area_a),
                b: link(eb, &na, area_b),
                wa: Wire::new(8, 8),
                wb: Wire::new(8, 8),
                pool: Pool::new(false, 0, 0),
                area_a,
            }
        }

        fn round_a(&mut self) -> Result<Outcome, LinkError> {
            let at = Receiver {
                umqh: 1,
                fragments: false,
                pool: &self.pool,
            };
            self.a.round(&mut self.wa, &at)
        }

        fn round_b(&mut self) -> Result<Outcome, LinkError> {
            let at = Receiver {
                umqh: 2,
                fragments: false,
                pool: &self.pool,
            };
            self.b.round(&mut self.wb, &at)
        }

        /// Both sides' rounds until `done` says so (at most 5 s).
        fn rounds_until(&mut self, done: impl Fn(&Link, &Link) -> bool) {
            let deadline = Instant::now() + Duration::from_secs(5);
            while !done(&self.a, &self.b) {
                assert!(Instant::now() < deadline, "not within 5 s");
                self.round_a().unwrap();
                self.round_b().unwrap();
            }
        }

        /// A 5000-byte WR of a's (opcode `op`, immediate `imm`), its queue rate limited at PMTU
        /// 1024 with two packets granted, and the 8 KiB receive buffer b posted for it.
        fn paced_wr_half_granted(
            &mut self,
            op: umq_opcode_t,
            imm: u64,
        ) -> (*mut umq_buf_t, *mut umq_buf_t) {
            let wr = crate::transport::test_wr(&self.pool, 5000, op, imm);
            let rx = self.pool.alloc(8192, 1, 0, 0).unwrap();
            self.wb.rx_posted.push_back(rx);
            self.wa.sq.push_back(wr);
            self.wa.paced = Some(crate::transport::wire::Paced {
                pmtu: 1024,
                open: Some((wr, 2048)),
                ..Default::default()
            });
            (wr, rx)
        }

        /// Connected (the first sends set the connection up), each side having heard the
        /// other, and quiet.
        fn connect(&mut self) {
            let start = Instant::now();
            self.rounds_until(|a, b| {
                a.heard > start
                    && b.heard > start
                    && a.tx.outgoing.is_empty()
                    && b.tx.outgoing.is_empty()
            });
        }
    }

    fn readable(fd: i32, timeout_ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, timeout_ms) == 1 && p.revents & libc::POLLIN != 0 }
    }

    /// Interrupt mode: a wakeable endpoint's wait fd, once armed, stays quiet while nothing
    /// comes and turns readable when the peer sends (what the progress thread sleeps on).
    /// A hostile or corrupt peer sends whatever it likes: messages of every kind, their
    /// header fields near their edges or anything (`hostile::case`). Each round runs them or
    /// breaks the binding with a reason, and what must hold does. The `fabric_messages` fuzz
    /// target runs the same cases from its bytes.
    #[test]
    fn random_messages_from_a_hostile_peer_run_or_break_the_binding_but_never_escape() {
        let mut rng = crate::draw::Rng(0x5eed_fab1_c0de);
        let mut outcomes = std::collections::BTreeMap::new();
        let mut completed = 0;
        for _ in 0..3000 {
            let case = hostile::case(&mut rng);
            *outcomes
                .entry(case.broke.unwrap_or_else(|| "ran".to_string()))
                .or_insert(0) += 1;
            completed += case.completed;
        }
        // The cases reach past the first checks: many run, and complete receives.
        eprintln!("{outcomes:?}, {completed} completed");
        assert!(outcomes["ran"] > 300 && completed > 300, "{outcomes:?}");
    }

    #[test]
    fn the_wait_fd_turns_readable_when_the_peer_sends() {
        let mut p = Pair::new(true, Duration::from_secs(60));
        assert!(p.a.ep.wait_fd().is_none());
        p.connect();
        for _ in 0..20 {
            p.round_a().unwrap();
            p.round_b().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let bell = loop {
            match p.b.arm_wakeup() {
                Arm::Armed(bell) => break bell,
                Arm::Pending => {
                    p.round_b().unwrap();
                }
                Arm::NoFd => panic!("a wakeable endpoint without a wait fd"),
            }
        };
        assert!(!bell.counter);
        assert!(!readable(bell.fd, 50), "readable with nothing sent");
        let quiet_since = p.b.heard;
        p.a.tx.outgoing.push_back(Outgoing::control(Header {
            kind: KIND_PING,
            ..Default::default()
        }));
        p.rounds_until(|a, _| a.tx.outgoing.is_empty());
        assert!(
            readable(bell.fd, 5000),
            "the peer's message did not wake us"
        );
        // What woke us is there to take: b's round hears the ping.
        p.rounds_until(|_, b| b.heard > quiet_since);
    }

    /// A rate-limited queue's WR goes in fragments of at most its PMTU, each only once the
    /// pacer granted it (`PacketGate`); the peer completes the WR once, whole.
    #[test]
    fn a_paced_wr_goes_in_packets_as_they_are_granted() {
        let mut p = Pair::new(false, Duration::from_secs(60));
        p.connect();
        let (wr, rx) = p.paced_wr_half_granted(UMQ_OPC_SEND_IMM, 77);
        p.rounds_until(|_, b| {
            b.rx.assembling
                .as_ref()
                .is_some_and(|(_, d)| d.len() == 2048)
        });
        for _ in 0..20 {
            p.round_a().unwrap();
            p.round_b().unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        let assembled = p.b.rx.assembling.as_ref().map(|(_, d)| d.len());
        assert_eq!(assembled, Some(2048), "more than was granted went");
        assert_eq!(p.wa.paced_packets, 2);
        assert!(p.wb.rx_cq.is_empty() && p.wa.delivered == 0);
        p.wa.paced.as_mut().unwrap().open = None; // all granted
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.wb.rx_cq.is_empty() || p.wa.delivered == 0 {
            assert!(Instant::now() < deadline, "not within 5 s");
            p.round_a().unwrap();
            p.round_b().unwrap();
        }
        assert_eq!(p.wa.paced_packets, 5, "5000 bytes in packets of 1024");
        let (head, nbufs) = p.wb.rx_cq.front().unwrap();
        let h = unsafe { &*head };
        assert_eq!((head, nbufs, h.total_data_size), (rx, 1, 5000));
        assert_eq!((h.pro().opcode, h.pro().imm_data), (UMQ_OPC_SEND_IMM, 77));
        assert!(crate::transport::test_bytes_intact(head, 5000));
        p.pool.free_one(wr).unwrap();
        p.pool.free_one(rx).unwrap();
    }

    /// A control frame of the link overtakes a message whose packets are going: it arrives
    /// between two of them, acts on the receiver's link, and the message still completes whole.
    #[test]
    fn a_control_frame_overtakes_a_message_between_its_packets() {
        use crate::flow::pfc::frame::{self, Pause, PauseFrame};
        use crate::transport::pause::{LinkPause, PauseGate, Settings};
        let mut p = Pair::new(false, Duration::from_secs(60));
        p.connect();
        let link = std::sync::Arc::new(LinkPause::new(Settings::default()));
        p.wb.pause = Some(PauseGate {
            link: link.clone(),
            priority: 0,
        });
        let (wr, rx) = p.paced_wr_half_granted(UMQ_OPC_SEND, 0);
        p.rounds_until(|_, b| {
            b.rx.assembling
                .as_ref()
                .is_some_and(|(_, d)| d.len() == 2048)
        });
        let pause = frame::encode(&PauseFrame {
            dst: frame::PAUSE_MULTICAST,
            src: [2, 0, 0, 0, 0, 7],
            pause: Pause::Priorities {
                enabled: 1 << 3,
                quanta: [0xffff; 8],
            },
        });
        assert!(p.a.send_control(&pause));
        p.rounds_until(|_, _| !link.may_start(3));
        assert!(p.wb.rx_cq.is_empty(), "the message is still arriving");
        p.wa.paced.as_mut().unwrap().open = None;
        let deadline = Instant::now() + Duration::from_secs(5);
        while p.wb.rx_cq.is_empty() {
            assert!(Instant::now() < deadline, "not within 5 s");
            p.round_a().unwrap();
            p.round_b().unwrap();
        }
        assert!(crate::transport::test_bytes_intact(
            p.wb.rx_cq.front().unwrap().0,
            5000
        ));
        assert_eq!(link.stats().0.priorities[3].indications, 1);
        p.pool.free_one(wr).unwrap();
        p.pool.free_one(rx).unwrap();
    }

    /// The flow-control area crosses as an RMA write into the peer's landing words: the peer
    /// sees it without a message (no receive buffer taken), and a write of lower words (stale,
    /// or hostile) lowers nothing.
    #[test]
    fn the_area_lands_by_rma_write_and_never_goes_down() {
        let mut p = Pair::new(false, Duration::from_secs(60));
        p.area_a.raise_to([16, 40, 3]);
        p.rounds_until(|_, b| b.peer_area().snapshot() == [16, 40, 3]);
        assert!(
            p.b.rx.filled.iter().all(|f| f.is_none()),
            "a message arrived"
        );
        assert_eq!(p.b.rx.posted.len() + p.b.rx.repost.len(), RX_BOUNCES);
        p.area_a.raise_to([16, 41, 3]);
        p.rounds_until(|_, b| b.peer_area().snapshot() == [16, 41, 3]);
        // A lower write lands in the words but not in the area the queue reads.
        let words: Vec<u8> = [1u64, 2, 3].iter().flat_map(|w| w.to_ne_bytes()).collect();
        let mut low = sys::Buffers::unregistered(AREA_BYTES);
        low.get_mut(0, AREA_BYTES).copy_from_slice(&words);
        let to = p.b.ep.landing_key();
        // Written as `a`'s own area write, whose completion its rounds take.
        p.rounds_until(|a, _| !a.area_in_flight);
        let write = |a: &Link| a.ep.write(&low, 0, AREA_BYTES, a.peer, to, AREA_TAG);
        while write(&p.a).is_err() {
            p.a.reap().unwrap();
        }
        p.a.area_in_flight = true;
        p.rounds_until(|_, b| b.ep.landed() == [1, 2, 3]);
        assert_eq!(p.b.peer_area().snapshot(), [16, 41, 3]);
    }

    /// Two bindings that keep running rounds hear each other (pings) for several liveness
    /// periods; once one side goes silent, as a host that is gone or cut off does, the other's
    /// round fails within about one period.
    #[test]
    fn a_silent_peer_breaks_the_binding_after_the_liveness_timeout() {
        let liveness = Duration::from_millis(300);
        let mut p = Pair::new(false, liveness);
        let start = Instant::now();
        while start.elapsed() < liveness * 3 {
            p.round_a().expect("a hears b");
            p.round_b().expect("b hears a");
            std::thread::sleep(Duration::from_millis(2));
        }
        let cut = Instant::now();
        let err = loop {
            match p.round_a() {
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
    }
}
