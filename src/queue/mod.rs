//! Queues: the `Queue` itself, its lifecycle (create, destroy, the handle table) and state. The
//! rest of a queue's behaviour is split by concern: `bind` (binding to a peer and undoing it),
//! `tx` (validating and admitting WRs, handing them to the transport), `rx` (receive posts and
//! polling), `progress` (work moved along outside a post: shared-memory rounds, flow control,
//! a waiting sender), `stats` (what a queue reports), `base` (the base API on top of these).

pub mod base;
mod bind;
pub mod bind_info;
pub mod config;
mod credit;
pub mod ctl;
pub mod interrupt;
pub mod pacing;
pub mod pfc;
mod pooled;
mod progress;
mod rx;
mod share;
pub mod stats;
pub mod table;
mod tx;
mod wr_mask;

use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval, eperm};
use crate::flow::{Area, FlowState, Params};
use crate::runtime::Runtime;
use crate::transport::binding::{Binding, Station};
use crate::transport::link::{Arm, Endpoints, Link, Offer, PeerAddress, Provider, Receiver, Wants};
use crate::transport::progress::Due;
use crate::transport::recv_queue::RecvQueue;
use crate::transport::spin::{SpinGuard, SpinMutex};
use crate::transport::wire::{Outcome, Wire};
use crate::transport::wired::Wired;
use config::QueueConfig;
use interrupt::Interrupts;
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

const BATCH: usize = crate::limits::BATCH as usize;
pub use crate::limits::MAX_SGE;
pub use rx::Quick;

#[derive(Default)]
pub struct QueueStats {
    pub send: AtomicU64,
    pub receive: AtomicU64,
    pub read: AtomicU64,
    /// Messages that found no posted receive buffer here (RNR). Flow control keeps this zero.
    pub rx_without_buffer: AtomicU64,
}

pub struct Queue {
    pub handle: u64,
    /// Slot index: the global lock order between two queues.
    index: u32,
    pub cfg: QueueConfig,
    pub rt: Arc<Runtime>,
    state: AtomicU32,
    pub wire: SpinMutex<Wired>,
    /// The other end of the binding, while bound.
    peer: RwLock<Option<Binding<Queue>>>,
    /// The peer queue when it is in this process: `peer`'s, set and cleared with it under our
    /// wire lock, for the post that reaches it without the peer lock (`send_one_here`).
    here: HerePeer,
    /// The peer queue's handle in its process, from its bind info (0 while unbound).
    peer_umqh: AtomicU64,
    /// Flow control's update counts (sent, sent through the area alone, received) when the
    /// application last reset its I/O statistics (`umq_stats_io_reset`).
    pub packet_baseline: std::sync::Mutex<[u64; 3]>,
    /// Our own ends for providers that reach other processes, created with the first bind
    /// info that offers them.
    endpoints: Endpoints,
    /// Bound through a link (another process): posts then go without the peer lock.
    over_link: AtomicBool,
    /// Bound to a peer in this process (`shared_pool` asks on every allocation, which the
    /// peer lock's read made two locked instructions).
    peer_in_process: AtomicBool,
    /// Our peer has WRs waiting for our receive buffers.
    rnr_waiting: AtomicBool,
    /// The progress engine holds an RNR deadline for our send queue.
    rnr_armed: AtomicBool,
    /// The progress engine holds a round of ours (`Due::Round`), and how far our send queue had
    /// completed when it was filed or last ran.
    round_filed: AtomicBool,
    round_seen: AtomicU64,
    /// A round of the engine's found the queue busy with its application and left it
    /// (`Serviced::Busy`): the filed round runs one whether or not the queue moved.
    round_owed: AtomicBool,
    /// How long after its filing the engine's round looks (µs): it doubles while nothing moves.
    round_after_us: AtomicU32,
    pub irq: Option<Interrupts>,
    pub stats: QueueStats,
    /// Our peer-readable flow-control area (initial window and cumulative grants) while the
    /// queue has no inbox; with one, the area lives there (see `area()`).
    local_area: Area,
    /// Queued-send mode: sends beyond the window wait in the send queue instead of EAGAIN.
    pub queued_mode: AtomicBool,
    /// How long the queue may sit with zero credit and work pending before it reports a stall.
    pub stall_timeout_ms: AtomicU64,
    /// The queue's shared pool (`umq_buf_alloc` with its handle), made on first use; None when
    /// its memory could not be set up (those allocations then come from the process pool).
    shared_pool: OnceLock<Option<Arc<crate::buf::pool::Lists>>>,
    /// Rate limit and PMTU (`pacing`).
    pub pacing: pacing::QueuePacing,
    /// The queue's priority on its link (link-level pause, `pfc`).
    pub pfc_priority: std::sync::atomic::AtomicU8,
    /// The shared receive queue the queue is the main queue or a sub-queue of (`share`).
    share: Option<share::Share>,
    /// A pro-API queue with a receive queue of its own: `poll`'s common case.
    plain_polls: bool,
    /// `rt.pro_api`, kept here too: every post asks it, one load instead of two.
    pro_api: bool,
    /// With the July 2026 credit flow control: the credit of the receive queue the queue
    /// receives into (a shared receive queue's members share the main queue's).
    credit_pool: Option<Arc<crate::flow::credit::Pool>>,
    /// The progress engine holds the deadline at which unused credit goes back.
    credit_return_filed: AtomicBool,
    /// The binding's first credit offer went, or needs none (`credit_offer_initial`).
    credit_offer_settled: AtomicBool,
    /// The queue's part in the process's transport pool (`pooled`).
    tp: pooled::TpRole,
    /// Flow control's event or retry fd, made when asked for (`flow_control_fd`).
    fc_event_fd: OnceLock<crate::event::EventFd>,
}

/// The progress thread's view of a queue bound through a link.
impl crate::transport::progress::Watched for Queue {
    fn service(&self) -> crate::transport::progress::Serviced {
        self.background_round()
    }

    fn peer_lost(&self, why: &str) {
        Queue::peer_lost(self, why);
    }

    fn deadline(&self, due: Due) {
        match due {
            Due::Rnr => self.rnr_deadline_passed(),
            Due::Round => self.background_deadline_passed(),
            Due::PoolRelease => self.pool_release_deadline_passed(),
            Due::CreditReturn => self.credit_return_deadline_passed(),
            Due::LastWords => self.last_words_deadline_passed(),
        }
    }

    fn rung_by_call(&self) {
        self.endpoints.rung_by_call();
    }

    fn arm_wakeup(&self) -> Option<crate::transport::progress::Wakeup> {
        if let Some(bell) = self.endpoints.arm_wakeup() {
            return Some(bell);
        }
        // A binding's own fd (the network's completion queue) arms only with nothing pending:
        // run the round until it does (a few tries; a busy peer leaves the thread ticking).
        for _ in 0..4 {
            let arm = match lock(&self.wire).link.as_deref() {
                Some(link) => link.arm_wakeup(),
                None => return None,
            };
            match arm {
                Arm::NoFd => return None,
                Arm::Armed(bell) => return Some(bell),
                Arm::Pending => {
                    self.background_round();
                }
            }
        }
        None
    }
}

/// What the loopback provider needs of a queue it delivers to or from.
impl Station for Queue {
    #[inline(always)]
    fn wired(&self) -> &SpinMutex<Wired> {
        &self.wire
    }

    #[inline(always)]
    fn lock_order(&self) -> u32 {
        self.index
    }

    #[inline(always)]
    fn area(&self) -> &Area {
        Queue::area(self)
    }

    #[inline(always)]
    fn handle(&self) -> u64 {
        self.handle
    }

    #[inline(always)]
    fn takes_fragments(&self) -> bool {
        !self.rt.pro_api
    }

    #[inline(always)]
    fn note_sender_waiting(&self) {
        self.rnr_waiting.store(true, Ordering::Release);
    }
}

/// Has the progress engine release a queue's idle shared-pool memory once it has been idle
/// long enough, whether or not its application calls in.
fn file_pool_release(umqh: u64) {
    if table::get(umqh).is_none() {
        return; // destroyed: its pool is retired, and the engine must not live on for it
    }
    let after = crate::buf::pool::RELEASE_AFTER_MS * 1_000_000;
    let at = crate::os::clock_ns() + after;
    crate::transport::progress::deadline(umqh, Due::PoolRelease, watched, at);
}

/// How the progress thread finds a queue it watches (gone once destroyed).
fn watched(umqh: u64) -> Option<Arc<dyn crate::transport::progress::Watched>> {
    table::get(umqh).map(|q| q as Arc<dyn crate::transport::progress::Watched>)
}

/// A queue's peer in this process for the posts that reach it without the peer lock, read and
/// written only under the queue's own wire lock: the peer lock's read had cost two locked
/// instructions, two of a loopback message's seven, and about 15 ns a send (`so_pingpong`, one
/// more read added: 193 -> 224 ns a round trip). Kept only while neither end has interrupts,
/// whose wake-ups run after the locks (`send_one_here` settles under ours); `kept` says so
/// without the lock, so that other posts do not take it to find nothing.
#[derive(Default)]
struct HerePeer {
    peer: std::cell::UnsafeCell<Option<Arc<Queue>>>,
    kept: AtomicBool,
}

// SAFETY: `peer` is only reached through `Queue::here_while_locked` and `Queue::replace_here`,
// whose callers hold the owning queue's wire lock: one thread at a time.
unsafe impl Sync for HerePeer {}

impl Queue {
    /// Whether a peer here may be kept (a hint: it is confirmed under the lock).
    #[inline(always)]
    fn may_have_here(&self) -> bool {
        self.here.kept.load(Ordering::Relaxed)
    }

    /// The peer here, for a caller that holds `mine`, our wire's guard.
    ///
    /// # Safety
    /// The reference is valid only while `mine` is held: `replace_here` may drop the queue
    /// once it is released. The caller uses it no longer than that.
    #[inline(always)]
    unsafe fn here_while_locked(&self, mine: &SpinGuard<'_, Wired>) -> Option<&Queue> {
        debug_assert!(mine.holds(&self.wire));
        // SAFETY: written only under our wire lock, which `mine` holds.
        unsafe { (*self.here.peer.get()).as_deref() }
    }

    /// Keeps `peer`, the binding's peer here (None: none, or the binding goes), when neither
    /// end has interrupts, under `mine`, our wire's guard; returns the one before, for the
    /// caller to drop once the lock is released.
    fn replace_here(
        &self,
        mine: &mut SpinGuard<'_, Wired>,
        peer: Option<Arc<Queue>>,
    ) -> Option<Arc<Queue>> {
        assert!(
            mine.holds(&self.wire),
            "the peer here changes under its own queue's wire lock"
        );
        let peer = peer.filter(|p| self.irq.is_none() && p.irq.is_none());
        self.here.kept.store(peer.is_some(), Ordering::Relaxed);
        // SAFETY: `mine` holds our wire lock, under which alone the cell is read or written.
        unsafe { std::mem::replace(&mut *self.here.peer.get(), peer) }
    }
}

fn lock<T>(m: &SpinMutex<T>) -> SpinGuard<'_, T> {
    m.lock()
}

pub fn create(option: &umq_create_option_t) -> UmqResult<u64> {
    create_with(option, config::CreateExtras::default())
}

/// `create`, keeping `extras` for the application to read back.
pub fn create_with(option: &umq_create_option_t, extras: config::CreateExtras) -> UmqResult<u64> {
    let rt = crate::runtime::require("umq_create")?;
    let mut cfg = config::QueueConfig {
        extras,
        ..config::from_option(option)?
    };
    let share = share::for_create(&rt, &mut cfg)?;
    let tp = pooled::role_for_create(&rt, &cfg, share.as_ref())?;
    let irq = share::interrupts(&cfg, share.as_ref(), tp.forward_sends(&rt))?;
    let credit_pool = credit_pool_for(&rt, &cfg, share.as_ref());
    // The July 2026 credit requests add update buffers to receive polls: not the common case.
    let plain_polls = rt.pro_api && share.is_none() && credit_pool.is_none();
    let pro_api = rt.pro_api;
    let stall_ms = rt.credit_stall.as_millis() as u64;
    let q = table::insert(|handle, index| {
        Ok(Queue {
            handle,
            index,
            wire: SpinMutex::new(Wired::new(cfg.rx_depth, cfg.tx_depth)),
            cfg,
            rt,
            state: AtomicU32::new(QUEUE_STATE_IDLE),
            peer: RwLock::new(None),
            here: HerePeer::default(),
            peer_umqh: AtomicU64::new(0),
            packet_baseline: std::sync::Mutex::new([0; 3]),
            endpoints: Endpoints::default(),
            over_link: AtomicBool::new(false),
            peer_in_process: AtomicBool::new(false),
            rnr_waiting: AtomicBool::new(false),
            rnr_armed: AtomicBool::new(false),
            round_filed: AtomicBool::new(false),
            round_owed: AtomicBool::new(false),
            round_seen: AtomicU64::new(0),
            round_after_us: AtomicU32::new(0),
            irq,
            stats: QueueStats::default(),
            local_area: Area::default(),
            queued_mode: AtomicBool::new(false),
            stall_timeout_ms: AtomicU64::new(stall_ms),
            shared_pool: OnceLock::new(),
            pacing: pacing::QueuePacing::default(),
            pfc_priority: std::sync::atomic::AtomicU8::new(0),
            plain_polls,
            pro_api,
            share,
            credit_pool,
            credit_return_filed: AtomicBool::new(false),
            credit_offer_settled: AtomicBool::new(false),
            tp,
            fc_event_fd: OnceLock::new(),
        })
    })
    .inspect_err(|_| {
        crate::log_err!("umq_create", "no free queue slot");
    })?;
    q.join_line();
    crate::log_info!(
        "umq_create",
        "queue {:#x} '{}' created: {:?}",
        q.handle,
        q.cfg.name,
        q.cfg
    );
    Ok(q.handle)
}

/// The credit pool of a new queue with the July 2026 flow control: its own receive queue's,
/// or its main queue's for a sub-queue.
fn credit_pool_for(
    rt: &Runtime,
    cfg: &QueueConfig,
    share: Option<&share::Share>,
) -> Option<Arc<crate::flow::credit::Pool>> {
    let knobs = rt.flow_control.credit.filter(|_| rt.flow_control.enabled)?;
    match share.and_then(|s| s.main.as_ref()) {
        Some(main) => main.credit_pool.clone(),
        None => Some(Arc::new(crate::flow::credit::Pool::new(
            cfg.rx_depth,
            knobs.is_limited,
        ))),
    }
}

/// Destroys a queue; a bound queue is unbound first. Buffers it still held are returned to the
/// pool, since the application can no longer poll them.
pub fn destroy(umqh: u64) -> UmqResult<()> {
    if let Some(q) = table::get(umqh) {
        q.check_destroy()?;
    }
    let q = table::remove(umqh).map_err(|why| match why {
        table::NotRemoved::Stale => not_a_queue("umq_destroy", umqh),
        table::NotRemoved::InUseHere => {
            crate::log_err!(
                "umq_destroy",
                "queue {umqh:#x} is in use by a call this thread is inside (a callback?)"
            );
            -UMQ_ERR_EBUSY
        }
    })?;
    if q.is_bound() {
        q.disconnect(false);
    }
    pacing::forget(&q);
    let held = q.release_all_buffers() + q.leave_line();
    q.give_back_on_destroy();
    if let Some(Some(lists)) = q.shared_pool.get() {
        q.rt.pool.retire(lists);
    }
    crate::transport::progress::forget(umqh);
    // Info, not a warning: programs written for the reference destroy queues with receive
    // buffers posted (its perftest does on every run) and its destroy frees them silently.
    if held > 0 && q.rt.pro_api {
        crate::log_info!(
            "umq_destroy",
            "queue {umqh:#x} still held {held} posted buffers; returned them to the pool"
        );
    }
    Ok(())
}

/// (Always inline: it is every call's entry, and as a call of its own it kept a post's and a
/// poll's direction from reaching the path it runs.)
#[inline(always)]
pub fn with_queue<R>(
    func: &str,
    umqh: u64,
    f: impl FnOnce(&Arc<Queue>) -> UmqResult<R>,
) -> UmqResult<R> {
    table::with(umqh, f).unwrap_or_else(|| Err(not_a_queue(func, umqh)))
}

/// How many of the process's queues are bound through a link. A hint for `umq_poll`: the quick
/// look at a receive poll (`Queue::poll_quick`) answers only queues through none, and a process
/// with none skips it. The look checks its queue itself, so a count that is stale (a racing
/// bind, a child of `fork()` that has none of its parent's queues) costs a poll the look or the
/// skip, never its answer.
static LINKED: AtomicUsize = AtomicUsize::new(0);

/// Whether any queue of this process is bound through a link (`LINKED`).
#[inline(always)]
pub fn any_linked() -> bool {
    LINKED.load(Ordering::Relaxed) > 0
}

impl Queue {
    /// Records whether the queue is bound through a link, and counts it in `LINKED`.
    fn set_over_link(&self, on: bool) {
        if self.over_link.swap(on, Ordering::AcqRel) == on {
            return;
        }
        match on {
            true => LINKED.fetch_add(1, Ordering::Relaxed),
            false => LINKED.fetch_sub(1, Ordering::Relaxed),
        };
    }
}

/// The refusal of a handle that names no queue of this process.
#[cold]
pub fn not_a_queue(func: &str, umqh: u64) -> i32 {
    if table::made_before_fork(umqh) {
        return einval(
            func,
            format_args!(
                "queue {umqh:#x} is the parent's: a process made by fork() has only the queues \
                 it creates itself, after its own umq_init"
            ),
        );
    }
    einval(func, format_args!("bad or stale queue handle {umqh:#x}"))
}

impl Queue {
    /// With flow control, a bound queue is IDLE until the peer's initial window is readable.
    #[inline]
    pub fn state(&self) -> umq_state_t {
        let s = self.state.load(Ordering::Acquire);
        if s != QUEUE_STATE_IDLE || !self.rt.flow_control.enabled {
            return s;
        }
        self.state_once_window_known()
    }

    /// IDLE with flow control: READY once the peer's initial window can be read (through a
    /// link, once a round has taken what the peer sent).
    #[cold]
    fn state_once_window_known(&self) -> umq_state_t {
        self.service_link();
        let peer = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let window_known = peer
            .as_ref()
            .is_some_and(|p| p.window_known(&lock(&self.wire)));
        if window_known {
            let _ = self.state.compare_exchange(
                QUEUE_STATE_IDLE,
                QUEUE_STATE_READY,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        self.state.load(Ordering::Acquire)
    }

    /// Our peer-readable flow-control area: where a provider's endpoint keeps it, if one does.
    #[inline]
    pub fn area(&self) -> &Area {
        match self.endpoints.area() {
            Some(area) => area,
            None => &self.local_area,
        }
    }

    /// What our bind info offers providers beyond this process, the endpoints created on
    /// first use. A bound queue creates none (its area must not move mid-binding).
    /// Shared memory is offered unless a provider other than shm is forced; the network when
    /// `UMQ_PROVIDER=fabric`, or unforced for a network-mode queue whose `dev_info` names an
    /// address that is not a loopback one (a peer on another host can only reach that).
    pub fn offer_for_bind(&self) -> Offer {
        let forced = self.rt.provider;
        let addr = self.cfg.network_addr.as_deref();
        let remote_reachable = addr
            .and_then(crate::devices::ip_of_text)
            .is_some_and(|ip| !ip.is_loopback());
        let (shm, fabric) = crate::transport::link::offered(forced, remote_reachable);
        let bound = self.is_bound();
        let want = Wants {
            make: !bound,
            shm,
            fabric: fabric.then_some((self.rt.fabric_provider.as_str(), addr)),
            interrupt: self.irq.is_some(),
            pool: &self.rt.pool,
            rx_depth: self.cfg.rx_depth,
            umqh: self.handle,
        };
        let offer = self.endpoints.offer(&want);
        if let Some(arena) = lock(&self.wire).arena() {
            self.endpoints.publish_pool(arena);
        }
        if !bound {
            self.endpoints.open_for_next_peer();
        }
        offer
    }

    /// The free lists of this queue's shared pool, made on first use (None: could not be set
    /// up; the caller then allocates from the process pool).
    ///
    /// A queue bound to a peer in this process has no use for one (nothing crosses a process
    /// boundary): until it has a pool, its buffers come from the process pool, and a server
    /// with a hundred thousand loopback pairs spends no memfd (and no fd) on them.
    pub fn shared_pool(&self) -> Option<&Arc<crate::buf::pool::Lists>> {
        if self.shared_pool.get().is_none() && self.bound_here() {
            return None;
        }
        self.shared_pool
            .get_or_init(|| {
                let lists = self
                    .rt
                    .pool
                    .new_shared(crate::os::random_u64())
                    .inspect_err(|_| {
                        crate::log_warn!(
                            "umq_buf_alloc",
                            "queue {:#x}: no shared pool; its buffers come from the process pool and are copied",
                            self.handle
                        )
                    })
                    .ok()?;
                let arena = lists.arena().expect("a shared pool has an arena").clone();
                let handle = self.handle;
                lists.when_idle(Box::new(move || file_pool_release(handle)));
                // Under the wire lock, which inbox creation also takes: whichever of the two
                // comes second publishes the pool to the peer.
                let mut w = lock(&self.wire);
                self.endpoints.publish_pool(&arena);
                w.adopt_arena(arena);
                Some(lists)
            })
            .as_ref()
    }

    /// Whether the peer queue lives in this process (without a reference of it: an
    /// allocation of such a queue's buffers asks, every time).
    fn bound_here(&self) -> bool {
        self.peer_in_process.load(Ordering::Acquire)
    }

    /// The peer queue when it lives in this process.
    fn local_peer(&self) -> Option<Arc<Queue>> {
        let peer = self.peer.read().unwrap_or_else(|p| p.into_inner());
        peer.as_ref().and_then(|p| p.peer_here()).cloned()
    }

    /// The handle of the queue we are bound to, in its process.
    pub fn peer_handle(&self) -> Option<u64> {
        Some(self.peer_umqh.load(Ordering::Acquire)).filter(|&h| h != 0 && self.is_bound())
    }

    fn is_bound(&self) -> bool {
        self.peer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// Moves the queue to `QUEUE_STATE_ERR` once and raises `UMQ_EVENT_QH_ERR`.
    pub fn set_error(&self, why: &str) {
        self.set_error_at(UMQ_LOG_LEVEL_ERR, why)
    }

    fn set_error_at(&self, level: u32, why: &str) {
        if self.enter_error() {
            self.log_error(level, why);
        }
    }

    /// Moves the queue to `QUEUE_STATE_ERR` with its event, and says whether it was not there
    /// yet (the caller then logs why, outside any lock of the queue's). The state and the event
    /// change together: an application that sees ERR and then reads its events finds this one.
    fn enter_error(&self) -> bool {
        self.rt.events.raise_if(
            UMQ_EVENT_QH_ERR,
            self.handle,
            self.cfg.trans_mode,
            0,
            || self.state.swap(QUEUE_STATE_ERR, Ordering::AcqRel) != QUEUE_STATE_ERR,
        )
    }

    fn log_error(&self, level: u32, why: &str) {
        crate::log_at!(
            level,
            "umq",
            "queue {:#x} '{}' entered the error state: {why}",
            self.handle,
            self.cfg.name
        );
    }
}
