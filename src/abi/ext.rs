//! libumq's own extensions to the UMQ API, declared in `include/umq/umq_ext.h`.

/// `umq_user_ctl` opcode: `in->addr` = 1 turns queued-send mode on, 0 off. In queued mode a
/// send beyond the credit window waits in the send queue (bounded by tx_depth, in order)
/// instead of failing with `-UMQ_ERR_EAGAIN`, and goes out as credit arrives.
pub const UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE: u32 = 0x554d_0001;
/// `umq_user_ctl` opcode: `in->addr` = milliseconds a queue may sit with zero credit and sends
/// pending before it reports a stall (log line, `UMQ_EVENT_QH_LIMIT`, `credit_stalls`).
pub const UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT: u32 = 0x554d_0002;
/// `umq_user_ctl` opcode: fills a `umq_ext_flow_control_stats_t` at `out->addr`.
pub const UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS: u32 = 0x554d_0003;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_flow_control_stats_t {
    pub piggybacked: u64,
    pub standalone: u64,
    pub area_only: u64,
    pub area_refreshes: u64,
    pub ctrl_grants: u64,
    pub ctrl_budget: u64,
    pub ctrl_credit: u64,
    pub queued_wr: u64,
    pub credit_stalls: u64,
    pub initial_window: u32,
    pub notify_interval: u32,
    pub queued_mode: u32,
    /// 1 when `umq_init` set `use_atomic_window` (a window-protocol queue; nothing else changes).
    pub atomic_window: u32,
    pub rx_without_buffer: u64,
}

/// `umq_user_ctl` opcode: fills a `umq_ext_transport_stats_t` at `out->addr`.
pub const UMQ_EXT_OPCODE_TRANSPORT_STATS: u32 = 0x554d_0004;

/// `umq_ext_transport_stats_t::transport`: what serves the queue's binding.
pub const UMQ_EXT_TRANSPORT_NONE: u32 = 0;
pub const UMQ_EXT_TRANSPORT_LOOPBACK: u32 = 1;
pub const UMQ_EXT_TRANSPORT_SHM: u32 = 2;
pub const UMQ_EXT_TRANSPORT_FABRIC: u32 = 3;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_transport_stats_t {
    pub transport: u32,
    pub shared_pool: u32,
    pub shared_pool_bytes: u64,
    /// WRs sent by reference (the one copy is the receiver's) and their bytes: over shared
    /// memory out of the queue's shared pool, over the network read in place by libfabric
    /// (a WR counts once some of its bytes were).
    pub by_ref_wr: u64,
    pub by_ref_bytes: u64,
    /// Shared memory only: SENDs written straight into the peer's receive buffers (one copy),
    /// their bytes, and messages that arrived already in our own receive buffers. A stream's
    /// message split between the two copies (the sender places its first half, the receiver
    /// copies the rest by reference) counts in both `placed_wr` and `by_ref_wr`, each with its
    /// part's bytes.
    pub placed_wr: u64,
    pub placed_bytes: u64,
    pub placed_rx: u64,
    /// Packets of a rate-limited queue's messages put on the wire (shared memory, network).
    pub paced_packets: u64,
    /// Shared memory only: one-sided WRITEs and READs this queue carried out itself, without
    /// the target process running: by a copy through the target queue's shared pool, which
    /// this process maps, and through the kernel (cross-memory attach).
    pub one_sided_mapped_wr: u64,
    pub one_sided_kernel_wr: u64,
    /// Rings of the peer's call bell: over the network for WRs its library must carry out
    /// (WRITE, READ, WRITE_IMM; one a round trip at most), over shared memory in place of an
    /// interrupt-mode peer's doorbell that could not be duplicated (`pidfd_getfd` refused).
    /// And, over the network, rings of ours from the peer answered here (the WRs they called
    /// for ran: see `transport::call_bell`).
    pub calls_sent: u64,
    pub calls_answered: u64,
    /// Network only: one-sided WRITEs and READs that went by libfabric RMA, the target's
    /// library taking no part. (Added last: a caller that passes the earlier 96-byte struct
    /// gets everything before it.)
    pub one_sided_rma_wr: u64,
}

// The hand-written umq_ext.h declares the same layout.
const _: () = assert!(size_of::<umq_ext_transport_stats_t>() == 104);
/// The struct's size before `one_sided_rma_wr`, which `umq_user_ctl` still fills.
pub const TRANSPORT_STATS_V1_LEN: usize = 96;

/// `umq_user_ctl` opcode: `in->addr` = the queue's rate limit in bit/s, 0 for unlimited (the
/// default). A limited queue's messages are released in packets of at most its PMTU, at that
/// rate; a change takes effect from the next tick.
pub const UMQ_EXT_OPCODE_PACING_RATE: u32 = 0x554d_0005;
/// `umq_user_ctl` opcode: `in->addr` = the queue's PMTU in bytes, 1..=4096 (default 1024).
pub const UMQ_EXT_OPCODE_PACING_PMTU: u32 = 0x554d_0006;
/// `umq_user_ctl` opcode: fills a `umq_ext_pacing_stats_t` at `out->addr`.
pub const UMQ_EXT_OPCODE_PACING_STATS: u32 = 0x554d_0007;
/// `umq_user_ctl` opcode: `in->addr` = the process's pacing ticks per second, 1..=1000000
/// (default 1024); `-UMQ_ERR_EBUSY` while any queue is rate limited.
pub const UMQ_EXT_OPCODE_PACING_TICK_RATE: u32 = 0x554d_0008;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_pacing_stats_t {
    pub rate_bps: u64,
    pub packets: u64,
    pub bytes: u64,
    pub ticks_parked: u64,
    pub achieved_bps: u64,
    pub pmtu: u32,
    pub ticks_per_s: u32,
    pub held_wr: u64,
}

// The hand-written umq_ext.h declares the same layout.
const _: () = assert!(size_of::<umq_ext_pacing_stats_t>() == 56);

/// `umq_user_ctl` opcode: `in->addr` = the queue's priority on its link, 0..=7 (default 0).
/// A priority the peer pauses stops the queue's new messages; the link is every queue bound
/// to the same peer process (link-level pause and PFC, `docs/PFC.md`).
pub const UMQ_EXT_OPCODE_PFC_PRIORITY: u32 = 0x554d_0009;
/// `umq_user_ctl` opcode: sets the link's settings from the `umq_ext_pfc_config_t` at
/// `in->addr` (`in->len` its size) when given, and writes them to `out->addr` when given. The
/// queue must be bound to another process.
pub const UMQ_EXT_OPCODE_PFC_CONFIG: u32 = 0x554d_000a;
/// `umq_user_ctl` opcode: fills a `umq_ext_pfc_stats_t` at `out->addr` (the link's).
pub const UMQ_EXT_OPCODE_PFC_STATS: u32 = 0x554d_000b;
/// `umq_user_ctl` opcode: sends the raw MAC control frame in the `umq_ext_pfc_frame_t` at
/// `in->addr` over the link, as it is.
pub const UMQ_EXT_OPCODE_PFC_SEND_FRAME: u32 = 0x554d_000c;
/// `umq_user_ctl` opcode: the oldest control frame the link passed to the application (its
/// pass-control setting), into the `umq_ext_pfc_frame_t` at `out->addr`; `len` 0 when none.
pub const UMQ_EXT_OPCODE_PFC_RECV_FRAME: u32 = 0x554d_000d;

/// `umq_ext_pfc_config_t.flags`.
pub const UMQ_EXT_PFC_RFE: u32 = 1;
pub const UMQ_EXT_PFC_PFCE: u32 = 2;
pub const UMQ_EXT_PFC_UNICAST: u32 = 4;
/// Our receive backlog of a priority makes us send XOFF / XON for it.
pub const UMQ_EXT_PFC_EMIT: u32 = 8;

/// `UMQ_EVENT_OTHER`'s `original_code` when the storm watchdog stops honouring a priority the
/// peer kept paused (plus the priority), and when it honours it again.
pub const UMQ_EXT_EVENT_PFC_STORM: i32 = 0x554d_0100;
pub const UMQ_EXT_EVENT_PFC_STORM_RESTORED: i32 = 0x554d_0110;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_pfc_config_t {
    pub flags: u32,
    /// 0: drop control frames that are not pause frames; 1: pass them to the application;
    /// 2: pass pause frames too.
    pub pass_control: u32,
    pub speed_bps: u64,
    pub xoff_bytes: u64,
    pub xon_bytes: u64,
    pub watchdog_detect_ns: u64,
    pub watchdog_restore_ns: u64,
    /// Quanta our XOFF frames ask for.
    pub pause_quanta: u16,
    /// The link's own address (unicast pause).
    pub address: [u8; 6],
}

const _: () = assert!(size_of::<umq_ext_pfc_config_t>() == 56);

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_pfc_priority_stats_t {
    /// Pause frames received for the priority, and sent for it (Linux `ieee_pfc` names).
    pub indications: u64,
    pub requests: u64,
    pub paused_ns: u64,
    pub watchdog_trips: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_ext_pfc_stats_t {
    pub priority: [umq_ext_pfc_priority_stats_t; 8],
    pub link_pauses: u64,
    pub link_paused_ns: u64,
    /// Control frames that were not pause frames for this link.
    pub other_control: u64,
    /// Frames passed to the application and dropped unread (more than 64 waiting).
    pub passed_dropped: u64,
    /// Bit p: priority p is paused now.
    pub paused_now: u32,
    /// Queues on the link.
    pub queues: u32,
}

const _: () = assert!(size_of::<umq_ext_pfc_stats_t>() == 296);

#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct umq_ext_pfc_frame_t {
    pub len: u32,
    pub rsvd: u32,
    pub bytes: [u8; 1520],
}

impl Default for umq_ext_pfc_frame_t {
    fn default() -> Self {
        umq_ext_pfc_frame_t {
            len: 0,
            rsvd: 0,
            bytes: [0; 1520],
        }
    }
}

const _: () = assert!(size_of::<umq_ext_pfc_frame_t>() == 1528);
