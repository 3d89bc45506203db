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
    /// 1 when the window is the atomic flavour (`use_atomic_window`), 0 when plain.
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
    pub by_ref_wr: u64,
    pub by_ref_bytes: u64,
    /// Shared memory only: SENDs written straight into the peer's receive buffers (one copy),
    /// their bytes, and messages that arrived already in our own receive buffers.
    pub placed_wr: u64,
    pub placed_bytes: u64,
    pub placed_rx: u64,
    /// Packets of a rate-limited queue's messages put on the wire (shared memory, network).
    pub paced_packets: u64,
}

// The hand-written umq_ext.h declares the same layout.
const _: () = assert!(size_of::<umq_ext_transport_stats_t>() == 64);

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
