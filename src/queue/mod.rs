//! Queues: lifecycle, bind, and the post / poll paths of the pro API.

pub mod base;
pub mod bind_info;
pub mod config;
pub mod ctl;
mod hazard;
pub mod interrupt;
mod spin;
pub mod table;

use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval, eperm};
use crate::flow::{Area, FlowState, Params};
use crate::runtime::Runtime;
use crate::transport::loopback::{self, Outcome, Side, Wire};
use crate::transport::shm;
use config::QueueConfig;
use interrupt::Interrupts;
use spin::{SpinGuard, SpinMutex};
use std::mem::MaybeUninit;
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

const BATCH: usize = UMQ_BATCH_SIZE as usize;
pub use crate::limits::MAX_SGE;

#[derive(Default)]
pub struct QueueStats {
    pub send: AtomicU64,
    pub receive: AtomicU64,
    pub read: AtomicU64,
    /// Messages that found no posted receive buffer here (RNR). Flow control keeps this zero.
    pub rx_without_buffer: AtomicU64,
}

/// The other end of a binding.
pub enum Peer {
    /// A queue of this process: the sender executes WRs against it directly.
    Local(Arc<Queue>),
    /// A queue of another process, reached through its shared-memory inbox.
    Shm(Arc<ShmLink>),
}

pub use shm::Link as ShmLink;

impl Peer {
    /// The peer's flow-control area.
    fn area(&self) -> &Area {
        match self {
            Peer::Local(q) => q.area(),
            Peer::Shm(l) => l.seg.area(),
        }
    }
}

pub struct Queue {
    pub handle: u64,
    /// Slot index: the global lock order between two queues.
    index: u32,
    pub cfg: QueueConfig,
    pub rt: Arc<Runtime>,
    state: AtomicU32,
    pub wire: SpinMutex<Wire>,
    peer: RwLock<Option<Peer>>,
    /// Our shared-memory inbox, created with the first bind info that offers it (None when
    /// shared memory is off or could not be set up).
    inbox: OnceLock<Option<shm::Segment>>,
    /// Bound over shared memory: lets the loopback poll path skip the peer lock.
    over_shm: AtomicBool,
    /// Our peer has WRs waiting for our receive buffers.
    rnr_waiting: AtomicBool,
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
}

/// The watchdog's view of a queue bound over shared memory.
impl crate::transport::watchdog::Watched for Queue {
    fn service(&self) {
        self.background_round();
    }

    fn peer_lost(&self, why: &str) {
        Queue::peer_lost(self, why);
    }

    fn arm_doorbell(&self) -> Option<(i32, bool)> {
        Queue::arm_doorbell(self)
    }
}

/// How the watchdog finds a queue it watches (gone once destroyed).
fn watched(umqh: u64) -> Option<Arc<dyn crate::transport::watchdog::Watched>> {
    table::get(umqh).map(|q| q as Arc<dyn crate::transport::watchdog::Watched>)
}

fn lock<T>(m: &SpinMutex<T>) -> SpinGuard<'_, T> {
    m.lock()
}

/// Locks two queues' wires in slot order (so two threads never wait on each other), returning
/// them in argument order.
fn lock_two<'a>(a: &'a Queue, b: &'a Queue) -> (SpinGuard<'a, Wire>, SpinGuard<'a, Wire>) {
    if a.index < b.index {
        let ga = lock(&a.wire);
        (ga, lock(&b.wire))
    } else {
        let gb = lock(&b.wire);
        (lock(&a.wire), gb)
    }
}

pub fn create(option: &umq_create_option_t) -> UmqResult<u64> {
    let rt = crate::runtime::require("umq_create")?;
    let cfg = config::from_option(option)?;
    let irq = if cfg.interrupt {
        Some(Interrupts::new()?)
    } else {
        None
    };
    let stall_ms = rt.credit_stall.as_millis() as u64;
    let q = table::insert(|handle, index| {
        Ok(Queue {
            handle,
            index,
            wire: SpinMutex::new(Wire::new(cfg.rx_depth, cfg.tx_depth)),
            cfg,
            rt,
            state: AtomicU32::new(QUEUE_STATE_IDLE),
            peer: RwLock::new(None),
            inbox: OnceLock::new(),
            over_shm: AtomicBool::new(false),
            rnr_waiting: AtomicBool::new(false),
            irq,
            stats: QueueStats::default(),
            local_area: Area::default(),
            queued_mode: AtomicBool::new(false),
            stall_timeout_ms: AtomicU64::new(stall_ms),
            shared_pool: OnceLock::new(),
        })
    })
    .inspect_err(|_| {
        crate::log_err!("umq_create", "no free queue slot");
    })?;
    crate::log_info!(
        "umq_create",
        "queue {:#x} '{}' created: {:?}",
        q.handle,
        q.cfg.name,
        q.cfg
    );
    Ok(q.handle)
}

/// Destroys a queue; a bound queue is unbound first. Buffers it still held are returned to the
/// pool, since the application can no longer poll them.
pub fn destroy(umqh: u64) -> UmqResult<()> {
    let q = table::remove(umqh).map_err(|why| match why {
        table::NotRemoved::Stale => {
            einval("umq_destroy", format_args!("bad or stale handle {umqh:#x}"))
        }
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
    let held = q.release_all_buffers();
    if let Some(Some(lists)) = q.shared_pool.get() {
        q.rt.pool.retire(lists);
    }
    if held > 0 && q.rt.pro_api {
        crate::log_warn!(
            "umq_destroy",
            "queue {umqh:#x} still held {held} posted buffers; returned them to the pool"
        );
    }
    Ok(())
}

pub fn with_queue<R>(
    func: &str,
    umqh: u64,
    f: impl FnOnce(&Arc<Queue>) -> UmqResult<R>,
) -> UmqResult<R> {
    table::with(umqh, f).unwrap_or_else(|| {
        Err(einval(
            func,
            format_args!("bad or stale queue handle {umqh:#x}"),
        ))
    })
}

impl Queue {
    /// With flow control, a bound queue is IDLE until the peer's initial window is readable.
    pub fn state(&self) -> umq_state_t {
        let s = self.state.load(Ordering::Acquire);
        if s != QUEUE_STATE_IDLE || !self.rt.flow_control.enabled {
            return s;
        }
        let peer = self.peer.read().unwrap_or_else(|p| p.into_inner());
        match peer.as_ref() {
            Some(p) if p.area().initial_window() > 0 => {
                let _ = self.state.compare_exchange(
                    QUEUE_STATE_IDLE,
                    QUEUE_STATE_READY,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                );
                self.state.load(Ordering::Acquire)
            }
            _ => s,
        }
    }

    /// Our peer-readable flow-control area: in our inbox when we have one.
    pub fn area(&self) -> &Area {
        match self.inbox.get() {
            Some(Some(seg)) => seg.area(),
            _ => &self.local_area,
        }
    }

    /// Our inbox for a bind info (its fd and secret), created on first use; None when shared
    /// memory is off (`UMQ_PROVIDER=loopback`) or could not be set up. A bound queue does not
    /// create one (its area must not move mid-binding).
    pub fn inbox_for_bind(&self) -> Option<(i32, u64)> {
        if self.rt.provider == Some(bind_info::Transport::Loopback) {
            return None;
        }
        let bound = self
            .peer
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_some();
        if bound && self.inbox.get().is_none() {
            return None;
        }
        let seg = self.inbox.get_or_init(|| {
            let secret = crate::runtime::random_u64();
            shm::Segment::create(secret, self.irq.is_some())
                .inspect_err(|_| {
                    crate::log_warn!(
                        "umq_bind_info_get",
                        "queue {:#x}: no shared-memory inbox; peers in other processes cannot bind",
                        self.handle
                    )
                })
                .ok()
        });
        let seg = seg.as_ref()?;
        if let Some(arena) = &lock(&self.wire).arena {
            seg.publish_pool(arena.fd(), arena.secret());
        }
        if !bound {
            seg.open_for_next_peer();
        }
        Some((seg.fd(), seg.secret()))
    }

    /// For the watchdog, before it sleeps: our inbox's doorbell fd, armed (so the peer's next
    /// change rings it), and whether the peer holds it; None without one.
    pub(crate) fn arm_doorbell(&self) -> Option<(i32, bool)> {
        let seg = self.my_inbox()?;
        let bell = seg.doorbell()?;
        seg.arm_doorbell();
        Some(bell)
    }

    /// The free lists of this queue's shared pool, made on first use (None: could not be set
    /// up; the caller then allocates from the process pool).
    pub fn shared_pool(&self) -> Option<&Arc<crate::buf::pool::Lists>> {
        self.shared_pool
            .get_or_init(|| {
                let lists = self
                    .rt
                    .pool
                    .new_shared(crate::runtime::random_u64())
                    .inspect_err(|_| {
                        crate::log_warn!(
                            "umq_buf_alloc",
                            "queue {:#x}: no shared pool; its buffers come from the process pool and are copied",
                            self.handle
                        )
                    })
                    .ok()?;
                let arena = lists.arena().expect("a shared pool has an arena").clone();
                // Under the wire lock, which inbox creation also takes: whichever of the two
                // comes second publishes the pool to the peer.
                let mut w = lock(&self.wire);
                if let Some(seg) = self.my_inbox() {
                    seg.publish_pool(arena.fd(), arena.secret());
                }
                w.arena = Some(arena);
                Some(lists)
            })
            .as_ref()
    }

    fn my_inbox(&self) -> Option<&shm::Segment> {
        self.inbox.get().and_then(|s| s.as_ref())
    }

    /// The peer queue when it lives in this process.
    fn local_peer(&self) -> Option<Arc<Queue>> {
        match self.peer.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            Some(Peer::Local(q)) => Some(q.clone()),
            _ => None,
        }
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
        if self.state.swap(QUEUE_STATE_ERR, Ordering::AcqRel) != QUEUE_STATE_ERR {
            crate::log_at!(
                level,
                "umq",
                "queue {:#x} '{}' entered the error state: {why}",
                self.handle,
                self.cfg.name
            );
            self.rt
                .events
                .raise(UMQ_EVENT_QH_ERR, self.handle, self.cfg.trans_mode, 0);
        }
    }

    pub fn bind(&self, info: &[u8]) -> UmqResult<()> {
        const F: &str = "umq_bind";
        let remote = bind_info::parse(F, info)?;
        bind_info::check_compatible(F, &self.rt, &remote)?;
        let transport = bind_info::choose(F, &self.rt, &remote)?;
        let peer = match transport {
            bind_info::Transport::Loopback => Peer::Local(self.local_peer_for(&remote)?),
            bind_info::Transport::Shm => Peer::Shm(self.open_shm_peer(&remote)?),
        };
        let link = match &peer {
            Peer::Shm(link) => Some(link.clone()),
            Peer::Local(_) => None,
        };
        {
            let mut slot = self.peer.write().unwrap_or_else(|p| p.into_inner());
            if slot.is_some() {
                crate::log_err!(
                    F,
                    "queue {:#x} is already bound (umq_unbind first)",
                    self.handle
                );
                return Err(-UMQ_ERR_EEXIST);
            }
            *slot = Some(peer);
        }
        bind_info::log_transport_once(transport);
        self.over_shm
            .store(transport == bind_info::Transport::Shm, Ordering::Release);
        {
            let mut w = lock(&self.wire);
            w.in_flight = 0;
            w.awaiting_peer = 0;
            w.tx_done_seq = 0;
            w.by_ref_in_flight.clear();
            w.rx_entries_run = 0;
            w.shm = link;
        }
        if self.rt.flow_control.enabled {
            self.start_flow_control(&remote);
        } else {
            self.state.store(QUEUE_STATE_READY, Ordering::Release);
        }
        if transport == bind_info::Transport::Shm {
            let irq = self.irq.is_some();
            crate::transport::watchdog::watch(self.handle, watched, remote.pid, irq);
        }
        if !self.rt.pro_api {
            base::post_initial_rx(self)?;
        }
        self.flow_progress();
        self.kick_blocked_sender();
        Ok(())
    }

    fn local_peer_for(&self, remote: &bind_info::BindInfo) -> UmqResult<Arc<Queue>> {
        const F: &str = "umq_bind";
        let peer = table::get(remote.umqh).ok_or_else(|| {
            einval(
                F,
                format_args!("peer queue {:#x} no longer exists", remote.umqh),
            )
        })?;
        if peer.handle == self.handle {
            return Err(einval(
                F,
                format_args!("queue {:#x} cannot bind to itself", self.handle),
            ));
        }
        Ok(peer)
    }

    fn open_shm_peer(&self, remote: &bind_info::BindInfo) -> UmqResult<Arc<ShmLink>> {
        const F: &str = "umq_bind";
        if self.inbox_for_bind().is_none() {
            return Err(einval(
                F,
                format_args!(
                    "queue {:#x} has no shared-memory inbox (call umq_bind_info_get first)",
                    self.handle
                ),
            ));
        }
        if remote.pid == std::process::id() && remote.umqh == self.handle {
            return Err(einval(
                F,
                format_args!("queue {:#x} cannot bind to itself", self.handle),
            ));
        }
        let seg = shm::Segment::open_peer(remote.pid, remote.inbox_fd, remote.secret)
            .map_err(|why| einval(F, format_args!("{why}")))?;
        Ok(Arc::new(ShmLink {
            seg,
            pid: remote.pid,
        }))
    }

    /// Fresh flow state for a new binding; buffers posted before bind count as posted now.
    fn start_flow_control(&self, remote: &bind_info::BindInfo) {
        let fc = &self.rt.flow_control;
        let p = Params::new(
            fc.initial_window,
            fc.notify_interval,
            self.cfg.rx_depth,
            remote.rx_depth,
        );
        let mut w = lock(&self.wire);
        let mut f = FlowState::new(p, fc.use_atomic_window);
        f.rx_posted(w.rx_posted.len() as u64);
        f.publish(self.area());
        w.flow = Some(f);
        w.clear_credit();
        w.starved_since = None;
        w.stall_reported = false;
        self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
    }

    pub fn unbind(&self) -> UmqResult<()> {
        if !self.is_bound() {
            return Err(einval(
                "umq_unbind",
                format_args!("queue {:#x} is not bound", self.handle),
            ));
        }
        self.disconnect(true);
        if !self.rt.pro_api {
            self.release_all_buffers();
        }
        Ok(())
    }

    /// Flushes everything in flight in both directions and forgets the peer. The peer, if still
    /// bound to us, goes to the error state: its sends have nowhere to land. With `rebind`, a
    /// shared-memory inbox is made ready for a next binding (a queue being destroyed skips it).
    fn disconnect(&self, rebind: bool) {
        let Some(peer) = self.peer.write().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let peer = match peer {
            Peer::Local(q) => q,
            Peer::Shm(link) => {
                self.over_shm.store(false, Ordering::Release);
                // Tell the other process first, then forget everything of this binding.
                let seg = self.my_inbox().expect("shm binding without inbox");
                seg.set_closed();
                // Before the flush hands our buffers back: a peer still copying one by
                // reference must see the mark once its copy could read a reuse (see
                // shm::sender_left), and a peer writing into one of our receive buffers must
                // be done (see placement).
                std::sync::atomic::fence(Ordering::SeqCst);
                seg.wait_for_placements(link.pid);
                crate::transport::watchdog::unwatch(self.handle);
                let (tx, rx) = {
                    let mut w = lock(&self.wire);
                    w.shm = None;
                    (w.fail_undelivered(UMQ_BUF_WR_FLUSH_ERR), w.flush_rx())
                };
                if rebind && seg.renew().is_err() {
                    crate::log_warn!(
                        "umq_unbind",
                        "queue {:#x}: inbox cleared in place (a late write of the old peer could reach the next binding)",
                        self.handle
                    );
                    seg.reset_for_next_binding();
                }
                self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
                self.notify(tx > 0, rx > 0);
                return;
            }
        };
        let peer_bound_to_us = peer.local_peer().is_some_and(|p| p.handle == self.handle);
        let (mine, theirs) = {
            let (mut mine, mut theirs) = lock_two(self, &peer);
            let rx = mine.flush_rx();
            let tx = mine.fail_undelivered(UMQ_BUF_WR_FLUSH_ERR);
            let theirs_failed = if peer_bound_to_us {
                theirs.fail_undelivered(UMQ_BUF_WR_FLUSH_ERR)
            } else {
                0
            };
            ((tx, rx), theirs_failed)
        };
        self.state.store(QUEUE_STATE_IDLE, Ordering::Release);
        self.area().reset();
        self.notify(mine.0 > 0, mine.1 > 0);
        if peer_bound_to_us {
            // An orderly shutdown unbinds one side first: worth a notice, not an error line.
            peer.set_error_at(UMQ_LOG_LEVEL_NOTICE, "peer queue unbound");
            peer.notify(theirs > 0, false);
        }
    }

    /// The peer process died or left: error state, every send in flight flushed, waiters woken.
    pub(crate) fn peer_lost(&self, why: &str) {
        // What the peer published before it died is whole (entries count only once stamped)
        // and its sends already completed there: deliver it first, as a NIC would have.
        self.shm_service();
        lock(&self.wire).fail_undelivered(UMQ_BUF_WR_FLUSH_ERR);
        self.set_error(why);
        self.notify(true, true);
    }

    /// Frees every buffer the queue holds (posted or completed), returning how many.
    fn release_all_buffers(&self) -> usize {
        let mut w = lock(&self.wire);
        w.flush_rx();
        w.fail_undelivered(UMQ_BUF_WR_FLUSH_ERR);
        let mut n = 0;
        let pool = &self.rt.pool;
        let w = &mut *w;
        let sent = w.sq.drain().map(|h| (h, crate::buf::wr_bufs(h).count()));
        let received = w.rx_cq.drain().map(|(h, k)| (h, k as usize));
        for (head, nbufs) in sent.chain(received) {
            for b in crate::buf::iter(head).take(nbufs).collect::<Vec<_>>() {
                n += 1;
                let _ = pool.free_one(b);
            }
        }
        w.delivered = 0;
        w.rx_cq_bufs = 0;
        n
    }

    fn require_pro(&self, func: &str) -> UmqResult<()> {
        if self.rt.pro_api {
            Ok(())
        } else {
            Err(eperm(
                func,
                format_args!(
                    "queue {:#x}: pro API call but umq_init did not set UMQ_FEATURE_API_PRO",
                    self.handle
                ),
            ))
        }
    }

    pub fn post(
        &self,
        head: *mut umq_buf_t,
        dir: umq_io_direction_t,
        bad: &mut *mut umq_buf_t,
    ) -> UmqResult<()> {
        self.require_pro("umq_post").inspect_err(|_| *bad = head)?;
        match dir {
            UMQ_IO_TX => self.post_tx(head, bad),
            UMQ_IO_RX => self.post_rx(head, bad),
            _ => {
                *bad = head;
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_IO_DIRECTION_INVALID);
                Err(einval(
                    "umq_post",
                    format_args!("io_direction {dir} must be UMQ_IO_TX or UMQ_IO_RX"),
                ))
            }
        }
    }

    /// The bound peer, borrowed through the peer lock's read guard (no reference-count traffic
    /// on the send path).
    fn ready_peer(&self, func: &str) -> UmqResult<std::sync::RwLockReadGuard<'_, Option<Peer>>> {
        let peer = self.peer.read().unwrap_or_else(|p| p.into_inner());
        if peer.is_none() {
            return Err(einval(
                func,
                format_args!("queue {:#x} is not bound", self.handle),
            ));
        }
        if self.state() == QUEUE_STATE_ERR {
            return Err(einval(
                func,
                format_args!("queue {:#x} is in the error state", self.handle),
            ));
        }
        Ok(peer)
    }

    pub(crate) fn post_tx(&self, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        self.post_tx_batch(head, bad, false)
    }

    /// `umq_enqueue`'s post: every WR of the list, or none (`base::enqueue` says why).
    pub(crate) fn post_tx_whole(
        &self,
        head: *mut umq_buf_t,
        bad: &mut *mut umq_buf_t,
    ) -> UmqResult<()> {
        self.post_tx_batch(head, bad, true)
    }

    #[inline(always)]
    fn post_tx_batch(
        &self,
        head: *mut umq_buf_t,
        bad: &mut *mut umq_buf_t,
        whole: bool,
    ) -> UmqResult<()> {
        let mut batch = TxBatch::new(whole);
        parse_tx(head, &mut batch).inspect_err(|_| *bad = head)?;
        let (accepted, window_limited) = match self.post_tx_shm(&batch) {
            Some(admitted) => admitted,
            None => self.post_tx_to_peer(&batch).inspect_err(|_| *bad = head)?,
        };
        if accepted < batch.n {
            *bad = batch.head(accepted);
            crate::log_at!(
                UMQ_LOG_LEVEL_DEBUG,
                "umq_post",
                "queue {:#x}: {} after {accepted} of {} WRs",
                self.handle,
                if window_limited {
                    "no flow-control credit"
                } else {
                    "send queue full"
                },
                batch.n
            );
            return Err(-UMQ_ERR_EAGAIN);
        }
        Ok(())
    }

    /// A post over shared memory, where the link lives under our wire lock: no peer lock. None
    /// when the queue is not bound that way or is in the error state (the general path then
    /// says which).
    fn post_tx_shm(&self, batch: &TxBatch) -> Option<(usize, bool)> {
        if !self.over_shm.load(Ordering::Relaxed) {
            return None;
        }
        let mut mine = lock(&self.wire);
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        // Moved out and back so the peer's area can be borrowed beside the wire.
        let link = mine.shm.take()?;
        if batch.n == 1
            && let Some(out) = self.send_one_now(&mut mine, &link.seg, batch.head(0))
        {
            mine.shm = Some(link);
            self.note_starvation(&mut mine, false);
            drop(mine);
            self.after_shm_round(&out);
            return Some((1, false));
        }
        let admitted = self.queue_tx(&mut mine, link.seg.area(), batch);
        mine.shm = Some(link);
        Some(self.transmit_admitted(mine, admitted))
    }

    /// The usual post over shared memory in one pass: a single one-buffer SEND or SEND_IMM that
    /// can go now (`shm::can_transmit_one`) and has credit. What `queue_tx` and the transmit
    /// step would do for it, without their batch bookkeeping: take one credit (re-reading the
    /// peer's area when the window looks empty), piggyback a due announcement on a SEND, clear
    /// the library's bit of a user immediate, queue, push and complete. None, with nothing
    /// changed, when it cannot go this way.
    fn send_one_now(
        &self,
        w: &mut Wire,
        peer: &shm::Segment,
        wr: *mut umq_buf_t,
    ) -> Option<Outcome> {
        let mine = self.my_inbox()?;
        if w.uncovered != 0
            || w.sq.len() >= self.cfg.tx_depth as usize
            || !shm::can_transmit_one(w, peer, wr)
        {
            return None;
        }
        if let Some(f) = w.flow.as_mut() {
            if f.window() == 0 {
                f.refresh(peer.area());
            }
            if f.take_credit(1) == 0 {
                return None;
            }
            let pro = unsafe { (*wr).pro_mut() };
            if pro.opcode == UMQ_OPC_SEND_IMM {
                pro.imm_data = crate::flow::user_imm(pro.imm_data);
            } else if make_carrier(f, wr).is_some() {
                f.commit(self.area());
            }
        }
        unsafe { (*wr).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
        w.sq.push_back(wr);
        Some(shm::transmit_one(w, mine, peer, wr))
    }

    /// A post through the peer slot (a local peer, or a shared-memory binding still being set
    /// up): accepted WRs and whether the window limited them.
    fn post_tx_to_peer(&self, batch: &TxBatch) -> UmqResult<(usize, bool)> {
        let peer_guard = self.ready_peer("umq_post")?;
        Ok(match peer_guard.as_ref().unwrap() {
            Peer::Local(peer) => {
                let (admitted, out) = {
                    let (mut mine, mut theirs) = lock_two(self, peer);
                    let (accepted, window_limited) = self.queue_tx(&mut mine, peer.area(), batch);
                    let mut dst = Side {
                        umqh: peer.handle,
                        wire: &mut theirs,
                        fragments: !peer.rt.pro_api,
                    };
                    let out = loopback::deliver(&mut mine, &mut dst, &self.rt.pool);
                    self.note_starvation(&mut mine, window_limited || out.credit_wait);
                    ((accepted, window_limited), out)
                };
                self.after_delivery(peer, &out, true);
                admitted
            }
            Peer::Shm(link) => {
                let mut mine = lock(&self.wire);
                let admitted = self.queue_tx(&mut mine, link.seg.area(), batch);
                self.transmit_admitted(mine, admitted)
            }
        })
    }

    /// Sends what `queue_tx` admitted over shared memory and reports a stall; returns `admitted`.
    fn transmit_admitted(
        &self,
        mut mine: SpinGuard<'_, Wire>,
        admitted: (usize, bool),
    ) -> (usize, bool) {
        let out = self.shm_transmit_round(&mut mine);
        self.note_starvation(&mut mine, admitted.1 || out.credit_wait);
        drop(mine);
        self.after_shm_round(&out);
        admitted
    }

    /// Admits what flow control and the send queue allow of a batch into our send queue;
    /// returns how many WRs were accepted and whether the window was what limited them.
    fn queue_tx(&self, mine: &mut Wire, peer_area: &Area, batch: &TxBatch) -> (usize, bool) {
        let admit = match mine.flow.as_mut() {
            Some(f) => self.admit(f, peer_area, batch),
            None => Admission::everything(batch.n),
        };
        // The transport (our send queue) may still refuse WRs flow control let through.
        let room = self.cfg.tx_depth as usize - mine.sq.len();
        let mut accepted = admit.limit.min(room);
        if batch.whole && accepted < batch.n {
            accepted = 0;
        }
        let window_limited = admit.limit < batch.n && accepted == admit.limit;
        if let Some(f) = mine.flow.as_mut() {
            let credited = admit.settle(f, batch, accepted, self.area());
            let needy = batch.credit_wrs_before(accepted) as usize;
            mine.note_admitted(needy, credited);
        }
        // The caller's list stays as it was: a WR ends where its head's total_data_size says.
        for &head in &batch.heads()[..accepted] {
            unsafe { (*head).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_TX) };
            mine.sq.push_back(head);
        }
        (accepted, window_limited)
    }

    /// One round of the shared-memory engine under our wire lock (nothing when the queue is not
    /// bound that way); a broken pair (peer gone, corrupt ring) puts the queue in the error
    /// state.
    #[inline]
    fn shm_round(&self, w: &mut Wire) -> Outcome {
        let (Some(link), Some(mine)) = (w.shm.as_deref(), self.my_inbox()) else {
            return Outcome::default();
        };
        if shm::idle(w, mine, &link.seg) {
            return Outcome::default();
        }
        self.shm_round_busy(w, mine)
    }

    /// A post's round: only the transmit step (`shm::transmit_round`), or the full round when
    /// the peer has left or the queue is in error.
    #[inline]
    fn shm_transmit_round(&self, w: &mut Wire) -> Outcome {
        let Some(mine) = self.my_inbox() else {
            return Outcome::default();
        };
        if let Some(link) = w.shm.take() {
            let out = match self.state.load(Ordering::Acquire) {
                QUEUE_STATE_ERR => None,
                _ => shm::transmit_round(w, mine, &link.seg),
            };
            w.shm = Some(link);
            if let Some(out) = out {
                return out;
            }
        }
        self.shm_round(w)
    }

    #[inline(never)]
    fn shm_round_busy(&self, w: &mut Wire, mine: &shm::Segment) -> Outcome {
        // The link is moved out and back (no reference-count traffic) so the engine can borrow
        // the wire mutably beside it.
        let Some(link) = w.shm.take() else {
            return Outcome::default();
        };
        let out = self.shm_round_on(w, &link, mine);
        w.shm = Some(link);
        out
    }

    fn shm_round_on(&self, w: &mut Wire, link: &ShmLink, mine: &shm::Segment) -> Outcome {
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return Outcome::default();
        }
        match shm::progress(
            w,
            mine,
            &link.seg,
            self.handle,
            !self.rt.pro_api,
            &self.rt.pool,
        ) {
            Ok(out) => out,
            Err(why) => {
                w.fail_undelivered(UMQ_BUF_WR_FLUSH_ERR);
                self.set_error_at(why.log_level(), &why.to_string());
                Outcome {
                    tx_done: 1,
                    rx_done: 1,
                    ..Default::default()
                }
            }
        }
    }

    /// Wake-ups and counters after a shared-memory round (both directions are ours).
    fn after_shm_round(&self, out: &Outcome) {
        if out.blocked {
            self.stats.rx_without_buffer.fetch_add(1, Ordering::Relaxed);
        }
        if crate::dfx::stats_on() {
            self.stats.send.fetch_add(out.sends, Ordering::Relaxed);
            self.stats.read.fetch_add(out.reads, Ordering::Relaxed);
            self.stats
                .receive
                .fetch_add(out.rx_done as u64, Ordering::Relaxed);
        }
        self.notify(out.tx_done > 0, out.rx_done > 0);
    }

    /// Runs the shared-memory engine once if the queue is bound that way (for receive posts,
    /// notify and the watchdog); returns whether it was.
    #[inline]
    pub(crate) fn shm_service(&self) -> bool {
        if !self.over_shm.load(Ordering::Relaxed) {
            return false;
        }
        self.shm_service_round();
        true
    }

    /// The watchdog's round for a queue bound over shared memory: the engine, and with flow
    /// control the sends that wait for credit, so they go out even when the application does
    /// not call in (a base-API sender that enqueued and waits elsewhere).
    pub(crate) fn background_round(&self) {
        if self.shm_service() && self.rt.flow_control.enabled && lock(&self.wire).undelivered() > 0
        {
            self.flow_progress();
        }
    }

    #[inline(never)]
    fn shm_service_round(&self) {
        let out = self.shm_round(&mut lock(&self.wire));
        self.after_shm_round(&out);
    }

    /// Flow control's verdict on a batch: credit for as many credit-needing WRs as the window
    /// allows (re-reading the peer's area first if it looks short), and a piggybacked
    /// announcement on the first plain SEND among them.
    fn admit(&self, f: &mut FlowState, peer_area: &Area, batch: &TxBatch) -> Admission {
        let needs_credit = batch.needs_credit;
        let need = batch.credit_wrs as u64;
        if f.window() < need {
            f.refresh(peer_area);
        }
        let got = f.take_credit(need);
        // Credit goes to the first `got` WRs that need it; the batch stops at the next one.
        let credit_limit = if got == need {
            batch.n
        } else {
            without_lowest_bits(needs_credit, got as u32).trailing_zeros() as usize
        };
        let queued = batch.whole || self.queued_mode.load(Ordering::Relaxed);
        let limit = if credit_limit == batch.n || queued {
            batch.n
        } else {
            f.count_refused((batch.n - credit_limit) as u64);
            credit_limit
        };
        let piggyback = (0..credit_limit)
            .find(|&i| unsafe { (*batch.head(i)).pro().opcode } == UMQ_OPC_SEND)
            .and_then(|i| {
                let (count, saved_imm) = make_carrier(f, batch.head(i))?;
                Some(Piggyback {
                    index: i,
                    count,
                    saved_imm,
                })
            });
        Admission {
            limit,
            credit_limit,
            needs_credit,
            piggyback,
        }
    }

    /// Reports a queue that has had work waiting and no credit for longer than its stall
    /// timeout: once per stall, as a log line, a `UMQ_EVENT_QH_LIMIT` event and a counter.
    fn note_starvation(&self, w: &mut Wire, starved: bool) {
        let no_credit = w.flow.as_mut().is_some_and(|f| f.window() == 0);
        if !no_credit {
            w.starved_since = None;
            w.stall_reported = false;
        }
        if !(starved && no_credit) {
            return;
        }
        let since = *w.starved_since.get_or_insert_with(std::time::Instant::now);
        let limit = std::time::Duration::from_millis(self.stall_timeout_ms.load(Ordering::Relaxed));
        if w.stall_reported || since.elapsed() < limit {
            return;
        }
        w.stall_reported = true;
        w.credit_stalls += 1;
        crate::log_warn!(
            "umq_flow_control",
            "queue {:#x} '{}' has had no credit for {} ms with sends pending: the peer is not returning receive buffers",
            self.handle,
            self.cfg.name,
            since.elapsed().as_millis()
        );
        self.rt
            .events
            .raise(UMQ_EVENT_QH_LIMIT, self.handle, self.cfg.trans_mode, 0);
    }

    /// Moves flow control along outside the send path: reads the peer's area, announces our
    /// receive buffers (standalone or through the area), and sends WRs waiting for credit.
    pub(crate) fn flow_progress(&self) {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let Some(peer) = guard.as_ref() else {
            return;
        };
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return;
        }
        let peer = match peer {
            Peer::Local(peer) => peer,
            Peer::Shm(link) => {
                let mut mine = lock(&self.wire);
                let Some(f) = mine.flow.as_mut() else {
                    return;
                };
                f.refresh(link.seg.area());
                f.publish(self.area());
                // Only take control credit when the update can go out now; it is in our area
                // either way.
                if shm::has_room(&link.seg, 0)
                    && let Some(imm) = f.standalone(self.area(), link.seg.area())
                {
                    shm::push_standalone(&link.seg, imm);
                }
                let out = self.shm_round(&mut mine);
                self.note_starvation(&mut mine, out.credit_wait);
                drop(mine);
                self.after_shm_round(&out);
                return;
            }
        };
        let (standalone, out) = {
            let (mut mine, mut theirs) = lock_two(self, peer);
            let Some(f) = mine.flow.as_mut() else {
                return;
            };
            f.refresh(peer.area());
            f.publish(self.area());
            let mut dst = Side {
                umqh: peer.handle,
                wire: &mut theirs,
                fragments: !peer.rt.pro_api,
            };
            let standalone = match f.standalone(self.area(), peer.area()) {
                Some(imm) if !dst.wire.rx_posted.is_empty() => {
                    loopback::deliver_standalone(&mut dst, imm);
                    true
                }
                _ => false,
            };
            let out = loopback::deliver(&mut mine, &mut dst, &self.rt.pool);
            self.note_starvation(&mut mine, out.credit_wait);
            (standalone, out)
        };
        if standalone {
            peer.notify(false, true);
        }
        self.after_delivery(peer, &out, true);
    }

    /// Wake-ups and counters after a delivery from `sender` (self if `self_is_sender`) to the other.
    fn after_delivery(&self, other: &Queue, out: &Outcome, self_is_sender: bool) {
        let (sender, receiver) = if self_is_sender {
            (self, other)
        } else {
            (other, self)
        };
        // The receiver's next receive post moves a sender that stopped for want of a buffer
        // or of credit (`kick_blocked_sender`).
        if out.blocked || out.credit_wait {
            receiver.rnr_waiting.store(true, Ordering::Release);
        }
        if out.blocked {
            receiver
                .stats
                .rx_without_buffer
                .fetch_add(1, Ordering::Relaxed);
        }
        if crate::dfx::stats_on() {
            sender.stats.send.fetch_add(out.sends, Ordering::Relaxed);
            sender.stats.read.fetch_add(out.reads, Ordering::Relaxed);
            receiver
                .stats
                .receive
                .fetch_add(out.rx_done as u64, Ordering::Relaxed);
        }
        sender.notify(out.tx_done > 0, false);
        receiver.notify(false, out.rx_done > 0);
    }

    pub(crate) fn post_rx(&self, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
        // Not zeroed: a one-buffer repost (every message of a ping-pong) touches one entry.
        let mut bufs = [const { MaybeUninit::<*mut umq_buf_t>::uninit() }; BATCH];
        let mut n = 0;
        for b in crate::buf::iter(head) {
            if n == BATCH {
                *bad = head;
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID);
                return Err(einval(
                    "umq_post",
                    format_args!("more than UMQ_BATCH_SIZE ({BATCH}) receive buffers in one call"),
                ));
            }
            bufs[n].write(b);
            n += 1;
        }
        // SAFETY: the first n entries were written just above.
        let bufs = unsafe {
            &*(&bufs[..n] as *const [MaybeUninit<*mut umq_buf_t>] as *const [*mut umq_buf_t])
        };
        let (accepted, progress) = self.push_rx(bufs);
        if progress {
            self.flow_progress();
        }
        if !self.over_shm.load(Ordering::Relaxed) {
            self.kick_blocked_sender();
        }
        if accepted < n {
            *bad = bufs[accepted];
            return Err(-UMQ_ERR_EAGAIN);
        }
        Ok(())
    }

    /// Posts receive buffers up to the free receive depth; returns how many were taken and
    /// whether flow control has something to announce. Over shared memory, a message that was
    /// waiting for a buffer is taken in at once, under the same lock.
    pub(crate) fn push_rx(&self, bufs: &[*mut umq_buf_t]) -> (usize, bool) {
        let mut w = lock(&self.wire);
        let accepted = bufs
            .len()
            .min(self.cfg.rx_depth as usize - w.rx_outstanding());
        for &b in &bufs[..accepted] {
            unsafe {
                (*b).qbuf_next = ptr::null_mut();
                (*b).set_status_and_direction(UMQ_BUF_SUCCESS, UMQ_IO_RX);
            }
            self.offer_for_placement(&w, b);
            w.rx_posted.push_back(b);
        }
        let announce = match w.flow.as_mut() {
            Some(f) => {
                let refused = bufs.len() - accepted;
                f.rx_batch_posted(accepted as u64, refused as u64, self.area())
            }
            None => false,
        };
        if w.rx_blocked && accepted > 0 {
            let out = self.shm_round(&mut w);
            drop(w);
            self.after_shm_round(&out);
        }
        (accepted, announce)
    }

    /// Over shared memory, a pro-API receive buffer `b` from our shared pool, about to be
    /// posted: the peer may write the message that takes it straight into it (`placement`).
    /// Base-API receivers take a long message in several buffers, so their order is not known
    /// ahead; they offer none.
    #[inline]
    fn offer_for_placement(&self, w: &Wire, b: *mut umq_buf_t) {
        let (Some(arena), Some(_), true) = (w.arena.as_deref(), &w.shm, self.rt.pro_api) else {
            return;
        };
        if let Some(seg) = self.my_inbox() {
            let ordinal = w.rx_entries_run + w.rx_posted.len() as u64;
            seg.publish_posted(arena, ordinal, b);
        }
    }

    /// Delivers the peer's WRs that were waiting for our receive buffers.
    pub(crate) fn kick_blocked_sender(&self) {
        if self.shm_service() {
            return;
        }
        // A plain load first: the swap is a locked instruction, and a sender is rarely waiting.
        if !self.rnr_waiting.load(Ordering::Acquire)
            || !self.rnr_waiting.swap(false, Ordering::AcqRel)
        {
            return;
        }
        let Some(sender) = self.local_peer() else {
            self.rnr_waiting.store(true, Ordering::Release);
            return;
        };
        // With flow control the sender may be waiting for the credit our post just published:
        // its progress reads it and delivers.
        if self.rt.flow_control.enabled {
            sender.flow_progress();
            return;
        }
        let out = {
            let (mut theirs, mut mine) = lock_two(&sender, self);
            let mut dst = Side {
                umqh: self.handle,
                wire: &mut mine,
                fragments: !self.rt.pro_api,
            };
            loopback::deliver(&mut theirs, &mut dst, &self.rt.pool)
        };
        self.after_delivery(&sender, &out, false);
    }

    /// Fails the oldest waiting WR after the RNR timeout, as RDMA's retry limit would.
    fn expire_rnr(&self, w: &mut Wire) -> bool {
        match w.blocked_since {
            Some(t) if t.elapsed() >= self.rt.rnr_timeout => {
                w.fail_undelivered(UMQ_BUF_RNR_RETRY_CNT_EXC_ERR);
                self.set_error("peer posted no receive buffer within the RNR timeout");
                true
            }
            _ => false,
        }
    }

    pub fn poll(&self, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) -> UmqResult<usize> {
        if dir >= UMQ_IO_MAX {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POLL_IO_DIRECTION_INVALID);
            return Err(einval(
                "umq_poll",
                format_args!("io_direction {dir} out of range"),
            ));
        }
        // A base-API queue's completions are the library's own (enqueue and dequeue reap
        // them): to the application its completion queue is empty, as in the reference, where
        // programs written for both APIs poll it in their setup loops.
        if !self.rt.pro_api {
            return Ok(0);
        }
        let (n, progress) = self.poll_locked(dir, out);
        if progress {
            self.flow_progress();
        }
        Ok(n)
    }

    /// Whether flow control has an announcement due or WRs waiting for credit.
    fn flow_wants_progress(w: &mut Wire) -> bool {
        let waiting = w.undelivered() > 0;
        w.flow.as_mut().is_some_and(|f| f.wants_progress(waiting))
    }

    /// Flow-control statistics, after reading the peer's area (so they are current).
    pub fn flow_control_stats(&self) -> umq_flowcontrol_stats_t {
        self.refresh_credit();
        let mut w = lock(&self.wire);
        w.flow.as_mut().map(|f| f.stats()).unwrap_or_default()
    }

    /// Reads the peer's area into our send-side view, and nothing else: a query must not
    /// announce or send, or reading two queues' stats would move what it reads.
    pub(crate) fn refresh_credit(&self) {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        if let Some(peer) = guard.as_ref()
            && let Some(f) = lock(&self.wire).flow.as_mut()
        {
            f.refresh(peer.area());
        }
    }

    pub(crate) fn poll_inner(&self, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) -> usize {
        self.poll_locked(dir, out).0
    }

    /// Takes completions and, under the same lock, says whether flow control wants to run.
    fn poll_locked(&self, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) -> (usize, bool) {
        let mut n = 0;
        let mut w = lock(&self.wire);
        // Loopback queues have nothing to run here: their peer delivers on post.
        let shm = w.shm.is_some().then(|| self.shm_round(&mut w));
        if dir != UMQ_IO_RX {
            self.expire_rnr(&mut w);
            let take = w.delivered.min(out.len());
            n = w.sq.pop_into(&mut out[..take]);
            w.delivered -= n;
        }
        if dir != UMQ_IO_TX {
            let mut bufs = 0;
            n += w.rx_cq.pop_map_into(&mut out[n..], |(head, k)| {
                bufs += k as usize;
                head
            });
            w.rx_cq_bufs -= bufs;
        }
        let progress = w.flow.is_some() && Self::flow_wants_progress(&mut w);
        drop(w);
        if let Some(out) = shm {
            self.after_shm_round(&out);
        }
        (n, progress)
    }

    fn notify(&self, tx: bool, rx: bool) {
        if let Some(irq) = &self.irq {
            irq.notify(tx, rx);
        }
    }

    /// Whether completions are waiting in a direction (for interrupt re-arming).
    pub fn has_completions(&self, dir: umq_io_direction_t) -> bool {
        let w = lock(&self.wire);
        match dir {
            UMQ_IO_TX => w.delivered > 0,
            _ => !w.rx_cq.is_empty(),
        }
    }

    /// Send WRs that can be posted now without `EAGAIN` (None when unbound or failed): free
    /// send-queue slots and, unless queued mode takes the excess, the credit window.
    pub fn tx_size_left(&self) -> Option<u64> {
        let guard = self.peer.read().unwrap_or_else(|p| p.into_inner());
        let peer = guard.as_ref()?;
        if self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        let mut mine = lock(&self.wire);
        let room = (self.cfg.tx_depth as usize - mine.sq.len()) as u64;
        let queued = self.queued_mode.load(Ordering::Relaxed);
        Some(match mine.flow.as_mut() {
            Some(f) if !queued => {
                f.refresh(peer.area());
                // Credit the undelivered WRs ahead already hold is not ours to count twice.
                room.min(f.window())
            }
            _ => room,
        })
    }

    /// Receive buffers that can be posted now (None when unbound or failed).
    pub fn rx_size_left(&self) -> Option<u64> {
        if !self.is_bound() || self.state.load(Ordering::Acquire) == QUEUE_STATE_ERR {
            return None;
        }
        Some(self.rx_room() as u64)
    }

    /// Our flow-control extension statistics (zero when flow control is off).
    pub fn flow_control_ext_stats(&self) -> crate::abi::ext::umq_ext_flow_control_stats_t {
        let mut w = lock(&self.wire);
        // WRs the peer already has are in flight, not queued.
        let queued = (w.undelivered() - w.in_flight) as u64;
        let stalls = w.credit_stalls;
        let Some(f) = w.flow.as_mut() else {
            return Default::default();
        };
        let (e, p) = (f.extra(), f.params());
        crate::abi::ext::umq_ext_flow_control_stats_t {
            piggybacked: e.piggybacked,
            standalone: e.standalone,
            area_only: e.area_only,
            area_refreshes: e.area_refreshes,
            ctrl_grants: e.ctrl_grants,
            ctrl_budget: p.ctrl_budget,
            ctrl_credit: f.ctrl_credit(),
            queued_wr: queued,
            credit_stalls: stalls,
            initial_window: p.initial_window as u32,
            notify_interval: p.notify_interval as u32,
            queued_mode: self.queued_mode.load(Ordering::Relaxed) as u32,
            atomic_window: matches!(f, FlowState::Atomic(_)) as u32,
            rx_without_buffer: self.stats.rx_without_buffer.load(Ordering::Relaxed),
        }
    }

    /// What serves the binding, the shared pool, and what went by reference.
    pub fn transport_stats(&self) -> crate::abi::ext::umq_ext_transport_stats_t {
        use crate::abi::ext::*;
        let transport = match self.peer.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
            None => UMQ_EXT_TRANSPORT_NONE,
            Some(Peer::Local(_)) => UMQ_EXT_TRANSPORT_LOOPBACK,
            Some(Peer::Shm(_)) => UMQ_EXT_TRANSPORT_SHM,
        };
        let w = lock(&self.wire);
        umq_ext_transport_stats_t {
            transport,
            shared_pool: w.arena.is_some() as u32,
            shared_pool_bytes: w.arena.as_ref().map_or(0, |a| a.backed() as u64),
            by_ref_wr: w.by_ref_wr,
            by_ref_bytes: w.by_ref_bytes,
            placed_wr: w.placed_wr,
            placed_bytes: w.placed_bytes,
            placed_rx: w.placed_rx,
            rsvd: 0,
        }
    }

    pub fn rx_room(&self) -> usize {
        self.cfg.rx_depth as usize - lock(&self.wire).rx_outstanding()
    }
}

/// A validated batch of tx WRs: the first buffer of each and which of them need a flow-control
/// credit. Built in place on the poster's stack and
/// never zeroed: a one-WR post touches one entry, not the 1 KiB of a full batch.
struct TxBatch {
    /// The first buffer of each WR.
    wrs: [MaybeUninit<*mut umq_buf_t>; BATCH],
    n: usize,
    /// Bit i: WR i is a SEND, SEND_IMM or WRITE_IMM (consumes a receive buffer, needs credit).
    needs_credit: u64,
    /// How many bits of `needs_credit` are set, counted as they are set: the library is built
    /// for baseline x86-64, where `count_ones` is a dozen instructions instead of `popcnt`.
    credit_wrs: u32,
    /// Bit i: WR i carries a user immediate (SEND_IMM or WRITE_IMM).
    user_imm: u64,
    /// All of the batch or nothing (`umq_enqueue`); WRs without credit wait as in queued mode.
    whole: bool,
}

impl TxBatch {
    fn new(whole: bool) -> TxBatch {
        TxBatch {
            whole,
            wrs: [const { MaybeUninit::uninit() }; BATCH],
            n: 0,
            needs_credit: 0,
            credit_wrs: 0,
            user_imm: 0,
        }
    }

    fn push(&mut self, head: *mut umq_buf_t) {
        let opcode = unsafe { (*head).pro().opcode };
        if loopback::needs_rx_buffer(opcode) {
            self.needs_credit |= 1 << self.n;
            self.credit_wrs += 1;
        }
        if matches!(opcode, UMQ_OPC_SEND_IMM | UMQ_OPC_WRITE_IMM) {
            self.user_imm |= 1 << self.n;
        }
        self.wrs[self.n].write(head);
        self.n += 1;
    }

    /// The parsed WRs' first buffers.
    fn heads(&self) -> &[*mut umq_buf_t] {
        // SAFETY: push initialised the first n entries.
        unsafe { &*(&self.wrs[..self.n] as *const [_] as *const [*mut umq_buf_t]) }
    }

    fn head(&self, i: usize) -> *mut umq_buf_t {
        self.heads()[i]
    }

    /// How many of the first `k` WRs need credit.
    fn credit_wrs_before(&self, k: usize) -> u64 {
        if k >= self.n {
            self.credit_wrs as u64
        } else {
            count_between(self.needs_credit, 0, k)
        }
    }
}

fn check_wr(head: *mut umq_buf_t) -> Result<*mut umq_buf_t, i32> {
    let h = unsafe { &*head };
    // Most WRs are one buffer holding the whole message: that needs no walk.
    let one_buffer = h.data_size == h.total_data_size
        && h.data_size <= h.buf_size
        && (!h.buf_data.is_null() || h.buf_size == 0);
    let op = h.pro().opcode;
    if one_buffer && op != UMQ_OPC_READ && is_known_opcode(op) {
        return Ok(head);
    }
    check_wr_walk(head)
}

fn is_known_opcode(op: umq_opcode_t) -> bool {
    matches!(
        op,
        UMQ_OPC_WRITE
            | UMQ_OPC_WRITE_IMM
            | UMQ_OPC_READ
            | UMQ_OPC_SEND
            | UMQ_OPC_SEND_IMM
            | UMQ_OPC_NOP
    )
}

/// `check_wr` for everything but a one-buffer non-READ WR.
#[inline(never)]
fn check_wr_walk(head: *mut umq_buf_t) -> Result<*mut umq_buf_t, i32> {
    const F: &str = "umq_post";
    let h = unsafe { &*head };
    let pro = h.pro();
    let op = pro.opcode;
    if !is_known_opcode(op) {
        return Err(einval(
            F,
            format_args!("buffer {head:p}: unknown opcode {op:#x}"),
        ));
    }
    let Some((tail, nbufs)) = crate::buf::message_span(head, MAX_SGE) else {
        crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_SGE_NUM_INVALID);
        return Err(einval(
            F,
            format_args!(
                "buffer {head:p}: total_data_size {} is not the sum of data_size over at most {MAX_SGE} buffers",
                h.total_data_size
            ),
        ));
    };
    let mut room = 0u64;
    for b in crate::buf::iter(head).take(nbufs) {
        let b = unsafe { &*b };
        if b.data_size > b.buf_size && op != UMQ_OPC_READ {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_DATA_SIZE_INVALID);
            return Err(einval(
                F,
                format_args!(
                    "buffer {b:p}: data_size {} > buf_size {}",
                    b.data_size, b.buf_size
                ),
            ));
        }
        if b.buf_data.is_null() && b.buf_size > 0 {
            return Err(einval(F, format_args!("buffer {b:p}: buf_data is NULL")));
        }
        room += b.buf_size as u64;
    }
    if op == UMQ_OPC_READ && (pro.remote_sge.length as u64) > room {
        return Err(einval(
            F,
            format_args!(
                "READ of {} bytes into {} bytes of local buffers",
                pro.remote_sge.length, room
            ),
        ));
    }
    Ok(tail)
}

/// Splits a chain into WRs (each first buffer's `total_data_size` says where the WR ends).
/// More than `UMQ_BATCH_SIZE` WRs, or an invalid WR anywhere, refuses the whole call with nothing
/// posted, as the reference does: a program that frees or re-posts the list after
/// `-UMQ_ERR_EINVAL` must not find part of it in flight.
#[inline(always)]
fn parse_tx(head: *mut umq_buf_t, b: &mut TxBatch) -> UmqResult<()> {
    let mut cur = head;
    while !cur.is_null() {
        if b.n == BATCH {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID);
            return Err(einval(
                "umq_post",
                format_args!("more than UMQ_BATCH_SIZE ({BATCH}) WRs in one call"),
            ));
        }
        match check_wr(cur) {
            Ok(tail) => {
                b.push(cur);
                cur = unsafe { (*tail).qbuf_next };
            }
            Err(e) => return Err(invalid_wr(e)),
        }
    }
    Ok(())
}

/// Counts a refused WR (`check_wr` logged why) and passes its error on.
#[cold]
#[inline(never)]
fn invalid_wr(e: i32) -> i32 {
    crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_PARM_INVALID);
    e
}

/// Set bits of `mask` in positions `from..to`.
fn count_between(mask: u64, from: usize, to: usize) -> u64 {
    if from >= to {
        return 0;
    }
    ((mask >> from) & count_mask(to - from)).count_ones() as u64
}

/// `mask` without its `k` lowest set bits. Only for the rare short window: the usual batch gets
/// all its credit and needs no bit walk.
fn without_lowest_bits(mut mask: u64, k: u32) -> u64 {
    for _ in 0..k {
        mask &= mask - 1;
    }
    mask
}

/// Bits 0..n set (n <= 64).
fn count_mask(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// Turns the plain SEND `head` into the carrier of a due window announcement (a SEND_IMM with
/// the library's immediate); returns the announcement's count and the immediate it replaced.
/// None, with nothing changed, when no announcement is due.
fn make_carrier(f: &mut FlowState, head: *mut umq_buf_t) -> Option<(u64, u64)> {
    let (count, imm) = f.piggyback()?;
    let pro = unsafe { (*head).pro_mut() };
    let saved = pro.imm_data;
    pro.opcode = UMQ_OPC_SEND_IMM;
    pro.imm_data = imm;
    Some((count, saved))
}

struct Piggyback {
    index: usize,
    count: u64,
    saved_imm: u64,
}

/// What flow control admitted of a batch.
struct Admission {
    /// WRs flow control lets through (in queued mode: all of them).
    limit: usize,
    /// WRs before the first credit-needing WR that got no credit.
    credit_limit: usize,
    /// Bit i: WR i needs a credit (SEND, SEND_IMM, WRITE_IMM).
    needs_credit: u64,
    piggyback: Option<Piggyback>,
}

impl Admission {
    fn everything(n: usize) -> Self {
        Admission {
            limit: n,
            credit_limit: n,
            needs_credit: 0,
            piggyback: None,
        }
    }

    /// Once the transport accepted `accepted` WRs: returns the credit of refused WRs, undoes a
    /// piggyback on a refused WR (its buffer untouched again) or publishes it, clears bit 0 of
    /// accepted user immediates, and returns how many accepted WRs hold credit.
    fn settle(self, f: &mut FlowState, batch: &TxBatch, accepted: usize, mine: &Area) -> usize {
        let credited_end = accepted.min(self.credit_limit);
        let refunded = count_between(self.needs_credit, credited_end, self.credit_limit);
        if refunded > 0 {
            f.return_credit(refunded);
        }
        match self.piggyback {
            Some(p) if p.index >= accepted => {
                f.undo(p.count);
                let pro = unsafe { (*batch.head(p.index)).pro_mut() };
                pro.opcode = UMQ_OPC_SEND;
                pro.imm_data = p.saved_imm;
            }
            Some(_) => f.commit(mine),
            None => {}
        }
        // Only the WRs parse_tx marked (before any piggyback turned a SEND into SEND_IMM, so
        // the carrier is never among them): a batch of plain SENDs costs nothing here.
        let mut user_imm = batch.user_imm;
        if user_imm != 0 {
            user_imm &= count_mask(accepted);
        }
        while user_imm != 0 {
            let i = user_imm.trailing_zeros() as usize;
            user_imm &= user_imm - 1;
            let pro = unsafe { (*batch.head(i)).pro_mut() };
            pro.imm_data = crate::flow::user_imm(pro.imm_data);
        }
        batch.credit_wrs_before(credited_end) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn buf(data: &mut [u8], data_size: u32, total: u32, op: umq_opcode_t) -> umq_buf_t {
        let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
        b.buf_data = data.as_mut_ptr() as *mut _;
        b.buf_size = data.len() as u32;
        b.data_size = data_size;
        b.total_data_size = total;
        b.pro_mut().opcode = op;
        b
    }

    /// The one-buffer shortcut of `check_wr` must agree with the full walk on every header.
    #[test]
    fn check_wr_shortcut_agrees_with_the_walk() {
        let mut data = [0u8; 64];
        let ops = [
            UMQ_OPC_WRITE,
            UMQ_OPC_WRITE_IMM,
            UMQ_OPC_READ,
            UMQ_OPC_SEND,
            UMQ_OPC_SEND_IMM,
            UMQ_OPC_NOP,
            0x7,
        ];
        for op in ops {
            for (ds, total) in [(0, 0), (10, 10), (64, 64), (65, 65), (10, 20), (20, 10)] {
                for null_data in [false, true] {
                    let mut b = buf(&mut data, ds, total, op);
                    if null_data {
                        b.buf_data = ptr::null_mut();
                    }
                    let p = &mut b as *mut umq_buf_t;
                    let fast = check_wr(p).ok();
                    let walk = check_wr_walk(p).ok();
                    assert_eq!(
                        fast, walk,
                        "op {op:#x} data_size {ds} total {total} null {null_data}"
                    );
                }
            }
        }
    }
}
