//! `umq_types.h`: the public structs, enums and constants of the UMQ API.
//!
//! Every type here is `#[repr(C)]` and matches the original ABI byte for byte; the layout table in
//! `tests/data/layout.tsv` is asserted from Rust (`tests/abi_layout.rs`) and from C
//! (`c-tests/test_layout.c`). C enums are `uint32_t` typedefs with `#define`d values so that a
//! value coming from C can never be an invalid Rust enum. Items marked `#[cfg(cbindgen)]` exist only
//! in the generated header (bit fields); items marked `#[cfg(not(cbindgen))]` only for rustc (the
//! storage word behind bit fields, the named union behind an anonymous one).

use core::ffi::{c_char, c_int, c_void};

pub type umq_log_level_t = u32;
pub const UMQ_LOG_LEVEL_EMERG: umq_log_level_t = 0;
pub const UMQ_LOG_LEVEL_ALERT: umq_log_level_t = 1;
pub const UMQ_LOG_LEVEL_CRIT: umq_log_level_t = 2;
pub const UMQ_LOG_LEVEL_ERR: umq_log_level_t = 3;
pub const UMQ_LOG_LEVEL_WARN: umq_log_level_t = 4;
pub const UMQ_LOG_LEVEL_NOTICE: umq_log_level_t = 5;
pub const UMQ_LOG_LEVEL_INFO: umq_log_level_t = 6;
pub const UMQ_LOG_LEVEL_DEBUG: umq_log_level_t = 7;
pub const UMQ_LOG_LEVEL_MAX: umq_log_level_t = 8;

pub type umq_buf_mode_t = u32;
pub const UMQ_BUF_SPLIT: umq_buf_mode_t = 0;
pub const UMQ_BUF_COMBINE: umq_buf_mode_t = 1;

pub type umq_io_direction_t = u32;
pub const UMQ_IO_ALL: umq_io_direction_t = 0;
pub const UMQ_IO_TX: umq_io_direction_t = 1;
pub const UMQ_IO_RX: umq_io_direction_t = 2;
pub const UMQ_IO_MAX: umq_io_direction_t = 3;

pub type umq_queue_mode_t = u32;
pub const UMQ_MODE_POLLING: umq_queue_mode_t = 0;
pub const UMQ_MODE_INTERRUPT: umq_queue_mode_t = 1;
pub const UMQ_MODE_MAX: umq_queue_mode_t = 2;

pub type umq_trans_mode_t = u32;
pub const UMQ_TRANS_MODE_UB: umq_trans_mode_t = 0;
pub const UMQ_TRANS_MODE_IB: umq_trans_mode_t = 1;
pub const UMQ_TRANS_MODE_UCP: umq_trans_mode_t = 2;
pub const UMQ_TRANS_MODE_IPC: umq_trans_mode_t = 3;
pub const UMQ_TRANS_MODE_UBMM: umq_trans_mode_t = 4;
pub const UMQ_TRANS_MODE_UB_PLUS: umq_trans_mode_t = 5;
pub const UMQ_TRANS_MODE_IB_PLUS: umq_trans_mode_t = 6;
pub const UMQ_TRANS_MODE_UBMM_PLUS: umq_trans_mode_t = 7;
pub const UMQ_TRANS_MODE_MAX: umq_trans_mode_t = 8;

pub type umq_dev_assign_mode_t = u32;
pub const UMQ_DEV_ASSIGN_MODE_IPV4: umq_dev_assign_mode_t = 0;
pub const UMQ_DEV_ASSIGN_MODE_IPV6: umq_dev_assign_mode_t = 1;
pub const UMQ_DEV_ASSIGN_MODE_EID: umq_dev_assign_mode_t = 2;
pub const UMQ_DEV_ASSIGN_MODE_DEV: umq_dev_assign_mode_t = 3;
pub const UMQ_DEV_ASSIGN_MODE_MAX: umq_dev_assign_mode_t = 4;

pub type umq_buf_block_size_t = u32;
pub const BLOCK_SIZE_8K: umq_buf_block_size_t = 0;
pub const BLOCK_SIZE_16K: umq_buf_block_size_t = 1;
pub const BLOCK_SIZE_32K: umq_buf_block_size_t = 2;
pub const BLOCK_SIZE_64K: umq_buf_block_size_t = 3;
pub const BLOCK_SIZE_MAX: umq_buf_block_size_t = 4;

pub type umq_state_t = u32;
pub const QUEUE_STATE_IDLE: umq_state_t = 0;
pub const QUEUE_STATE_READY: umq_state_t = 1;
pub const QUEUE_STATE_ERR: umq_state_t = 2;
pub const QUEUE_STATE_MAX: umq_state_t = 3;

pub type umq_dfx_module_id_t = u32;
pub const UMQ_DFX_MODULE_PERF: umq_dfx_module_id_t = 0;
pub const UMQ_DFX_MODULE_STATS: umq_dfx_module_id_t = 1;
pub const UMQ_DFX_MODULE_MAX: umq_dfx_module_id_t = 2;

pub type umq_perf_cmd_id_t = u32;
pub const UMQ_PERF_CMD_START: umq_perf_cmd_id_t = 0;
pub const UMQ_PERF_CMD_STOP: umq_perf_cmd_id_t = 1;
pub const UMQ_PERF_CMD_CLEAR: umq_perf_cmd_id_t = 2;
pub const UMQ_PERF_CMD_GET_RESULT: umq_perf_cmd_id_t = 3;
pub const UMQ_PERF_CMD_MAX: umq_perf_cmd_id_t = 4;

pub type umq_stats_cmd_id_t = u32;
pub const UMQ_STATS_CMD_START: umq_stats_cmd_id_t = 0;
pub const UMQ_STATS_CMD_STOP: umq_stats_cmd_id_t = 1;
pub const UMQ_STATS_CMD_CLEAR: umq_stats_cmd_id_t = 2;
pub const UMQ_STATS_CMD_GET_RESULT: umq_stats_cmd_id_t = 3;
pub const UMQ_STATS_CMD_MAX: umq_stats_cmd_id_t = 4;

pub type umq_stats_type_t = u32;
pub const UMQ_STATS_TYPE_SEND: umq_stats_type_t = 0;
pub const UMQ_STATS_TYPE_RECEIVE: umq_stats_type_t = 1;
pub const UMQ_STATS_TYPE_READ: umq_stats_type_t = 2;
pub const UMQ_STATS_TYPE_MAX: umq_stats_type_t = 3;

pub type umq_err_stats_type_t = u32;
pub const UMQ_ERR_STATS_TYPE_POST_PARM_INVALID: umq_err_stats_type_t = 0;
pub const UMQ_ERR_STATS_TYPE_POST_SEND: umq_err_stats_type_t = 1;
pub const UMQ_ERR_STATS_TYPE_POST_RECV: umq_err_stats_type_t = 2;
pub const UMQ_ERR_STATS_TYPE_POST_IO_DIRECTION_INVALID: umq_err_stats_type_t = 3;
pub const UMQ_ERR_STATS_TYPE_POST_DATA_SIZE_INVALID: umq_err_stats_type_t = 4;
pub const UMQ_ERR_STATS_TYPE_POST_SGE_NUM_INVALID: umq_err_stats_type_t = 5;
pub const UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID: umq_err_stats_type_t = 6;
pub const UMQ_ERR_STATS_TYPE_POST_BIG_DATA: umq_err_stats_type_t = 7;
pub const UMQ_ERR_STATS_TYPE_POLL_PARM_INVALID: umq_err_stats_type_t = 8;
pub const UMQ_ERR_STATS_TYPE_POLL_TX: umq_err_stats_type_t = 9;
pub const UMQ_ERR_STATS_TYPE_POLL_RX: umq_err_stats_type_t = 10;
pub const UMQ_ERR_STATS_TYPE_POLL_IO_DIRECTION_INVALID: umq_err_stats_type_t = 11;
pub const UMQ_ERR_STATS_TYPE_READ: umq_err_stats_type_t = 12;
pub const UMQ_ERR_STATS_TYPE_READ_BIND_CTX_INVALID: umq_err_stats_type_t = 13;
pub const UMQ_ERR_STATS_TYPE_READ_TSEG_INVALID: umq_err_stats_type_t = 14;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_PARM_INVALID: umq_err_stats_type_t = 15;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_DATA_NUM_INVALID: umq_err_stats_type_t = 16;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_POST_TX_BATCH: umq_err_stats_type_t = 17;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_SGE_NUM_INVALID: umq_err_stats_type_t = 18;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_PARM_INVALID: umq_err_stats_type_t = 19;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_BIND_CTX_INVALID: umq_err_stats_type_t = 20;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_SHM_QBUF: umq_err_stats_type_t = 21;
pub const UMQ_ERR_STATS_TYPE_QBUF_ALLOC: umq_err_stats_type_t = 22;
pub const UMQ_ERR_STATS_TYPE_RX_BUF_CTX_ALLOC: umq_err_stats_type_t = 23;
pub const UMQ_ERR_STATS_TYPE_MAX: umq_err_stats_type_t = 24;

pub type umq_perf_record_type_t = u32;
pub const UMQ_PERF_RECORD_ENQUEUE: umq_perf_record_type_t = 0;
pub const UMQ_PERF_RECORD_DEQUEUE: umq_perf_record_type_t = 1;
pub const UMQ_PERF_RECORD_DEQUEUE_EMPTY: umq_perf_record_type_t = 2;
pub const UMQ_PERF_RECORD_POST_ALL: umq_perf_record_type_t = 3;
pub const UMQ_PERF_RECORD_POST_TX: umq_perf_record_type_t = 4;
pub const UMQ_PERF_RECORD_POST_RX: umq_perf_record_type_t = 5;
pub const UMQ_PERF_RECORD_POLL_ALL: umq_perf_record_type_t = 6;
pub const UMQ_PERF_RECORD_POLL_TX: umq_perf_record_type_t = 7;
pub const UMQ_PERF_RECORD_POLL_RX: umq_perf_record_type_t = 8;
pub const UMQ_PERF_RECORD_POLL_ALL_EMPTY: umq_perf_record_type_t = 9;
pub const UMQ_PERF_RECORD_POLL_TX_EMPTY: umq_perf_record_type_t = 10;
pub const UMQ_PERF_RECORD_POLL_RX_EMPTY: umq_perf_record_type_t = 11;
pub const UMQ_PERF_RECORD_NOTIFY: umq_perf_record_type_t = 12;
pub const UMQ_PERF_RECORD_TRANSPORT_POST_SEND: umq_perf_record_type_t = 13;
pub const UMQ_PERF_RECORD_TRANSPORT_POST_RECV: umq_perf_record_type_t = 14;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_TX: umq_perf_record_type_t = 15;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_RX: umq_perf_record_type_t = 16;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_TX_EMPTY: umq_perf_record_type_t = 17;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_RX_EMPTY: umq_perf_record_type_t = 18;
pub const UMQ_PERF_RECORD_TRANSPORT_READ: umq_perf_record_type_t = 19;
pub const UMQ_PERF_RECORD_TRANSPORT_SEND_IMM: umq_perf_record_type_t = 20;
pub const UMQ_PERF_RECORD_TRANSPORT_WRITE_IMM: umq_perf_record_type_t = 21;
pub const UMQ_PERF_RECORD_TYPE_MAX: umq_perf_record_type_t = 22;

pub type umq_async_event_type_t = u32;
pub const UMQ_EVENT_QH_ERR: umq_async_event_type_t = 0;
pub const UMQ_EVENT_QH_LIMIT: umq_async_event_type_t = 1;
pub const UMQ_EVENT_PORT_ACTIVE: umq_async_event_type_t = 2;
pub const UMQ_EVENT_PORT_DOWN: umq_async_event_type_t = 3;
pub const UMQ_EVENT_DEV_FATAL: umq_async_event_type_t = 4;
pub const UMQ_EVENT_EID_CHANGE: umq_async_event_type_t = 5;
pub const UMQ_EVENT_ELR_ERR: umq_async_event_type_t = 6;
pub const UMQ_EVENT_ELR_DONE: umq_async_event_type_t = 7;
pub const UMQ_EVENT_OTHER: umq_async_event_type_t = 8;

pub type umq_user_ctl_opcode_t = u32;
/// Fill a `umq_flowcontrol_stats_t` at `out->addr` (`out->len` must be its size).
pub const UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY: umq_user_ctl_opcode_t = 0;
pub const UMQ_OPCODE_MAX: umq_user_ctl_opcode_t = 1;

pub const UMQ_LOG_FLAG_FUNC: u32 = 1;
pub const UMQ_LOG_FLAG_LEVEL: u32 = 2;
pub const UMQ_LOG_FLAG_RATE_LIMITED: u32 = 4;
pub const UMQ_EID_SIZE: u32 = 16;
pub const UMQ_IPV4_SIZE: u32 = 16;
pub const UMQ_IPV6_SIZE: u32 = 46;
pub const UMQ_DEV_NAME_SIZE: u32 = 64;
/// Most WRs one `umq_post` call accepts, and most buffers one `umq_buf_alloc` returns.
pub const UMQ_BATCH_SIZE: u32 = 64;
/// Largest `request_size` of `umq_buf_alloc` (10 MiB).
pub const UMQ_MAX_BUF_REQUEST_SIZE: u32 = 10485760;
pub const UMQ_INTERRUPT_FLAG_IO_DIRECTION: u32 = 1;
pub const MAX_UMQ_TRANS_INFO_NUM: u32 = 128;
pub const UMQ_FEATURE_API_BASE: u32 = 0;
pub const UMQ_FEATURE_API_PRO: u32 = 1;
pub const UMQ_FEATURE_ENABLE_TOKEN_POLICY: u32 = 2;
pub const UMQ_FEATURE_ENABLE_STATS: u32 = 4;
pub const UMQ_FEATURE_ENABLE_PERF: u32 = 8;
pub const UMQ_FEATURE_ENABLE_FLOW_CONTROL: u32 = 16;
pub const UMQ_NAME_MAX_LEN: u32 = 32;
pub const UMQ_CREATE_FLAG_RX_BUF_SIZE: u32 = 1;
pub const UMQ_CREATE_FLAG_TX_BUF_SIZE: u32 = 2;
pub const UMQ_CREATE_FLAG_RX_DEPTH: u32 = 4;
pub const UMQ_CREATE_FLAG_TX_DEPTH: u32 = 8;
pub const UMQ_CREATE_FLAG_QUEUE_MODE: u32 = 16;
pub const UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE: u32 = 1;
pub const UMQ_PERF_QUANTILE_MAX_NUM: u32 = 8;
pub const UMQ_MAX_ROUTES: u32 = 16;

/// Log sink: `level` is a `umq_log_level_t`, `log_msg` a NUL-terminated line valid for the call.
pub type umq_log_func_t = Option<unsafe extern "C" fn(level: c_int, log_msg: *mut c_char)>;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_log_rate_limit_t {
    pub interval_ms: u32,
    pub num: u32,
}

/// Logging configuration; `log_flag` says which of the other fields `umq_log_config_set` applies.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_log_config_t {
    pub log_flag: u32,
    pub func: umq_log_func_t,
    pub level: umq_log_level_t,
    pub rate_limited: umq_log_rate_limit_t,
}

/// Which completion channel (`direction` TX or RX) an interrupt call is about; `flag` must
/// contain `UMQ_INTERRUPT_FLAG_IO_DIRECTION`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_interrupt_option_t {
    pub flag: u32,
    pub direction: umq_io_direction_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_eid_in4_t {
    pub reserved: u64,
    pub prefix: u32,
    pub addr: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_eid_in6_t {
    pub subnet_prefix: u64,
    pub interface_id: u64,
}

/// A 16-byte endpoint id.
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_eid_t {
    pub raw: [u8; 16],
    pub in4: umq_eid_in4_t,
    pub in6: umq_eid_in6_t,
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_ipv4_t {
    pub ip_addr: [c_char; 16],
}
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_ipv6_t {
    pub ip_addr: [c_char; 46],
}
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_eid_t {
    pub eid: umq_eid_t,
}
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_name_t {
    pub dev_name: [c_char; 64],
    pub eid_idx: u32,
}
/// The anonymous union of `umq_dev_assign_t` (named only on the Rust side).
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_dev_addr_t {
    pub ipv4: umq_dev_ipv4_t,
    pub ipv6: umq_dev_ipv6_t,
    pub eid: umq_dev_eid_t,
    pub dev: umq_dev_name_t,
}

/// How a device is named: by IPv4 or IPv6 address text, by EID, or by device name. The address
/// fields are an anonymous union selected by `assign_mode`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_assign_t {
    pub assign_mode: umq_dev_assign_mode_t,
    #[cfg(not(cbindgen))]
    pub u: umq_dev_addr_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_memory_cfg_t {
    pub total_size: u64,
}

/// A transport and the device it runs on.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_trans_info_t {
    pub trans_mode: umq_trans_mode_t,
    pub dev_info: umq_dev_assign_t,
    pub mem_cfg: umq_memory_cfg_t,
}

/// Window flow control settings (used when `UMQ_FEATURE_ENABLE_FLOW_CONTROL` is set).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_flow_control_cfg_t {
    pub initial_window: u16,
    pub notify_interval: u16,
    pub use_atomic_window: bool,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_buf_block_cfg_t {
    pub small_block_size: umq_buf_block_size_t,
}

/// Process-wide configuration for `umq_init`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_init_cfg_t {
    pub buf_mode: umq_buf_mode_t,
    pub feature: u32,
    pub headroom_size: u16,
    pub io_lock_free: bool,
    pub trans_info_num: u8,
    pub flow_control: umq_flow_control_cfg_t,
    pub block_cfg: umq_buf_block_cfg_t,
    pub cna: u16,
    pub ubmm_eid: u32,
    pub trans_info: [umq_trans_info_t; 128],
}

/// Options of `umq_create`; the optional fields count only when their `UMQ_CREATE_FLAG_*` bit is
/// set in `create_flag`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_create_option_t {
    pub trans_mode: umq_trans_mode_t,
    pub dev_info: umq_dev_assign_t,
    pub name: [c_char; 32],
    pub create_flag: u32,
    pub rx_buf_size: u32,
    pub tx_buf_size: u32,
    pub rx_depth: u32,
    pub tx_depth: u32,
    pub mode: umq_queue_mode_t,
}

/// A message buffer: a 128-byte header, then (combine mode) headroom and data. `buf_data` points at
/// the payload, `data_size` bytes of it are valid; the first buffer of a WR carries the WR's
/// `total_data_size` and, in `qbuf_ext`, its `umq_buf_pro_t`.
#[repr(C)]
pub struct umq_buf_t {
    pub qbuf_next: *mut umq_buf_t,
    pub umqh: u64,
    pub total_data_size: u32,
    pub buf_size: u32,
    pub data_size: u32,
    pub headroom_size: u16,
    #[cfg(not(cbindgen))]
    pub bits_30: u16,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=1
    pub first_fragment: u16,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=15
    pub rsvd1: u16,
    #[cfg(not(cbindgen))]
    pub bits_32: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=20
    pub token_id: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=4
    pub rsvd2: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=8
    pub mempool_id: u32,
    pub token_value: u32,
    #[cfg(not(cbindgen))]
    pub bits_40: u64,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=32
    pub status: u64,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=2
    pub io_direction: u64,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=30
    pub rsvd3: u64,
    pub rsvd4: u64,
    pub buf_data: *mut c_char,
    pub qbuf_ext: [u64; 8],
    pub data: [c_char; 0],
}

/// Options of `umq_buf_alloc`; `headroom_size` counts when `flag` has
/// `UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_alloc_option_t {
    pub flag: u32,
    pub headroom_size: u16,
}

/// Flow-control counters of one queue (see `docs/FLOW_CONTROL.md` for their identities).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct umq_flowcontrol_stats_t {
    pub local_rx_posted: u64,
    pub remote_rx_window: u64,
    pub total_local_rx_posted: u64,
    pub total_local_rx_notified: u64,
    pub total_local_rx_posted_error: u64,
    pub total_remote_rx_received: u64,
    pub total_remote_rx_consumed: u64,
    pub total_remote_rx_received_error: u64,
    pub total_flow_controlled_wr: u64,
}

/// Send / receive / read counts of one queue, indexed by `umq_stats_type_t`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_stats_info_instance_t {
    pub stats: [u64; 3],
    pub umqh: u64,
}

/// Result of `UMQ_STATS_CMD_GET_RESULT`: error counters by `umq_err_stats_type_t`, then one
/// instance per queue.
#[repr(C)]
pub struct umq_stats_infos_t {
    pub err_stats: [u64; 24],
    pub stats_info_num: u32,
    pub stats_info: [umq_stats_info_instance_t; 0],
}

/// Latency summary of one record type: sum, min, max, count (ns) and a histogram whose bucket i
/// counts samples below threshold i (the last bucket: the rest).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_perf_type_record_t {
    pub accumulation: u64,
    pub min: u64,
    pub max: u64,
    pub cnt: u64,
    pub bucket: [u64; 9],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_perf_record_t {
    pub type_record: [umq_perf_type_record_t; 22],
    pub is_used: bool,
}

/// Latency histogram thresholds (ns) for `UMQ_PERF_CMD_START`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct perf_in_parm_t {
    pub thresh_array: [u64; 8],
    pub thresh_num: u32,
}

#[repr(C)]
pub struct umq_perf_infos_t {
    pub perf_record_num: u32,
    pub perf_record: [*mut umq_perf_record_t; 0],
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_dfx_cmd_id_u {
    pub perf_cmd_id: umq_perf_cmd_id_t,
    pub stats_cmd_id: umq_stats_cmd_id_t,
}
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_dfx_in_u {
    pub perf_in_parm: perf_in_parm_t,
}
#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_dfx_out_u {
    pub perf_char: *mut c_char,
    pub perf_out_parm: *mut umq_perf_infos_t,
    pub stats_out_parm: *mut umq_stats_infos_t,
}

/// A diagnostics command: module (perf or stats), command id, and perf thresholds.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dfx_cmd_t {
    pub module_id: umq_dfx_module_id_t,
    #[cfg(not(cbindgen))]
    pub cmd: umq_dfx_cmd_id_u,
    #[cfg(not(cbindgen))]
    pub input: umq_dfx_in_u,
}

/// Result of a diagnostics command. Output pointers refer to library-owned memory that stays
/// valid until the next GET_RESULT of the same module or `umq_uninit`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dfx_result_t {
    pub module_id: umq_dfx_module_id_t,
    #[cfg(not(cbindgen))]
    pub cmd: umq_dfx_cmd_id_u,
    #[cfg(not(cbindgen))]
    pub err_code: c_int,
    #[cfg(not(cbindgen))]
    pub out: umq_dfx_out_u,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_async_event_element_t {
    pub umqh: u64,
    pub port_id: u32,
}

/// An asynchronous event (queue error, port state...). `priv` is the library's; pass the event
/// back to `umq_ack_async_event`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_async_event_t {
    pub trans_info: umq_trans_info_t,
    pub element: umq_async_event_element_t,
    pub event_type: umq_async_event_type_t,
    pub original_code: c_int,
    pub r#priv: *mut c_void,
}

#[cfg(cbindgen)]
#[repr(C)]
pub struct umq_route_flag_bs_t {
    /// cbindgen:bitfield=1
    pub rtp: u32,
    /// cbindgen:bitfield=1
    pub ctp: u32,
    /// cbindgen:bitfield=1
    pub utp: u32,
    /// cbindgen:bitfield=29
    pub reserved: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_route_flag_t {
    pub value: u32,
    #[cfg(cbindgen)]
    pub bs: umq_route_flag_bs_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_route_t {
    pub src: umq_eid_t,
    pub dst: umq_eid_t,
    pub flag: umq_route_flag_t,
    pub hops: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_route_list_t {
    pub len: u32,
    pub buf: [umq_route_t; 16],
}

/// Input of `umq_user_ctl`: `opcode` selects the operation, `addr`/`len` its argument.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_user_ctl_in_t {
    pub addr: u64,
    pub len: u32,
    pub opcode: u32,
}

/// Output of `umq_user_ctl`: `addr`/`len` name the caller's result buffer.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_user_ctl_out_t {
    pub addr: u64,
    pub len: u32,
    pub reserved: u32,
}
