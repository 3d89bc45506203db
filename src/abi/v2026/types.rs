//! `umq_types.h` of the July 2026 revision: the public structs, enums and constants of that API.
//!
//! The same conventions as the December 2025 types (`crate::abi::types`): `#[repr(C)]` mirrors,
//! enums as `uint32_t` typedefs with constants, `#[cfg(cbindgen)]` items only in the generated
//! header (bit fields), `#[cfg(not(cbindgen))]` items only for rustc (a bit field's storage word,
//! the named union behind an anonymous one). The layout is asserted against the facts of the
//! original headers (`tests/data/abi-2026/`).

use core::ffi::{c_char, c_int, c_void};

pub type umq_external_mutex_attr_t = u32;
pub const MUTEX_ATTR_EXCLUSIVE: umq_external_mutex_attr_t = 0;
pub const MUTEX_ATTR_RECURSIVE: umq_external_mutex_attr_t = 1;
pub const MUTEX_ATTR_BUTT: umq_external_mutex_attr_t = 2;

pub type umq_external_mutex_t = *mut c_void;
pub type umq_external_rwlock_t = *mut c_void;
pub type util_external_thread_key_t = *mut c_void;

/// Lock operations a program may hand the library (`umq_external_mutex_lock_ops_register`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_external_mutex_lock_ops_t {
    pub create:
        Option<unsafe extern "C" fn(attr: umq_external_mutex_attr_t) -> *mut umq_external_mutex_t>,
    pub destroy: Option<unsafe extern "C" fn(m: *mut umq_external_mutex_t) -> c_int>,
    pub lock: Option<unsafe extern "C" fn(m: *mut umq_external_mutex_t) -> c_int>,
    pub unlock: Option<unsafe extern "C" fn(m: *mut umq_external_mutex_t) -> c_int>,
    pub trylock: Option<unsafe extern "C" fn(m: *mut umq_external_mutex_t) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_external_rwlock_ops_t {
    pub create: Option<unsafe extern "C" fn() -> *mut umq_external_rwlock_t>,
    pub destroy: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
    pub read_lock: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
    pub write_lock: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
    pub unlock: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
    pub try_read_lock: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
    pub try_write_lock: Option<unsafe extern "C" fn(m: *mut umq_external_rwlock_t) -> c_int>,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_external_thread_key_ops_t {
    pub key_create: Option<
        unsafe extern "C" fn(
            destr_function: Option<unsafe extern "C" fn(data: *mut c_void)>,
        ) -> *mut util_external_thread_key_t,
    >,
    pub key_delete: Option<unsafe extern "C" fn(key: *mut util_external_thread_key_t) -> c_int>,
    pub setspecific: Option<
        unsafe extern "C" fn(key: *mut util_external_thread_key_t, data: *const c_void) -> c_int,
    >,
    pub getspecific:
        Option<unsafe extern "C" fn(key: *mut util_external_thread_key_t) -> *mut c_void>,
}

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

pub type umq_fd_type_t = u32;
pub const UMQ_FD_IO: umq_fd_type_t = 0;
pub const UMQ_FD_EVENT: umq_fd_type_t = 1;
pub const UMQ_FD_RETRY: umq_fd_type_t = 2;

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

pub type umq_tp_mode_t = u32;
pub const UMQ_TM_RC: umq_tp_mode_t = 0;
pub const UMQ_TM_RM: umq_tp_mode_t = 1;
pub const UMQ_TM_UM: umq_tp_mode_t = 2;
pub const UMQ_TM_MAX: umq_tp_mode_t = 3;

pub type umq_tp_type_t = u32;
pub const UMQ_TP_TYPE_RTP: umq_tp_type_t = 0;
pub const UMQ_TP_TYPE_CTP: umq_tp_type_t = 1;
pub const UMQ_TP_TYPE_UTP: umq_tp_type_t = 2;
pub const UMQ_TP_TYPE_MAX: umq_tp_type_t = 3;

pub type umq_dev_assign_mode_t = u32;
pub const UMQ_DEV_ASSIGN_MODE_IPV4: umq_dev_assign_mode_t = 0;
pub const UMQ_DEV_ASSIGN_MODE_IPV6: umq_dev_assign_mode_t = 1;
pub const UMQ_DEV_ASSIGN_MODE_EID: umq_dev_assign_mode_t = 2;
pub const UMQ_DEV_ASSIGN_MODE_DEV: umq_dev_assign_mode_t = 3;
/// No device: the entry is skipped by `umq_init`.
pub const UMQ_DEV_ASSIGN_MODE_DUMMY: umq_dev_assign_mode_t = 4;
pub const UMQ_DEV_ASSIGN_MODE_MAX: umq_dev_assign_mode_t = 5;

pub type umq_buf_block_size_t = u32;
pub const BLOCK_SIZE_4K: umq_buf_block_size_t = 0;
pub const BLOCK_SIZE_8K: umq_buf_block_size_t = 1;
pub const BLOCK_SIZE_16K: umq_buf_block_size_t = 2;
pub const BLOCK_SIZE_32K: umq_buf_block_size_t = 3;
pub const BLOCK_SIZE_64K: umq_buf_block_size_t = 4;
pub const BLOCK_SIZE_MAX: umq_buf_block_size_t = 5;

pub type umq_tiny_buf_block_size_t = u32;
pub const TINY_BLOCK_SIZE_512: umq_tiny_buf_block_size_t = 0;
pub const TINY_BLOCK_SIZE_1K: umq_tiny_buf_block_size_t = 1;
pub const TINY_BLOCK_SIZE_2K: umq_tiny_buf_block_size_t = 2;
pub const TINY_BLOCK_SIZE_4K: umq_tiny_buf_block_size_t = 3;
pub const TINY_BLOCK_SIZE_8K: umq_tiny_buf_block_size_t = 4;
pub const TINY_BLOCK_SIZE_MAX: umq_tiny_buf_block_size_t = 5;

pub type umq_alloc_pool_type_t = u32;
pub const UMQ_ALLOC_POOL_NORMAL: umq_alloc_pool_type_t = 0;
pub const UMQ_ALLOC_POOL_TINY: umq_alloc_pool_type_t = 1;
pub const UMQ_ALLOC_POOL_HUGE: umq_alloc_pool_type_t = 2;
pub const UMQ_ALLOC_POOL_ESCAPE: umq_alloc_pool_type_t = 3;
pub const UMQ_ALLOC_POOL_AUTO: umq_alloc_pool_type_t = 4;
pub const UMQ_ALLOC_POOL_MAX: umq_alloc_pool_type_t = 5;

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
pub const UMQ_ERR_STATS_TYPE_POST_PARAM_INVALID: umq_err_stats_type_t = 0;
pub const UMQ_ERR_STATS_TYPE_POST_SEND: umq_err_stats_type_t = 1;
pub const UMQ_ERR_STATS_TYPE_POST_RECV: umq_err_stats_type_t = 2;
pub const UMQ_ERR_STATS_TYPE_POST_IO_DIRECTION_INVALID: umq_err_stats_type_t = 3;
pub const UMQ_ERR_STATS_TYPE_POST_DATA_SIZE_INVALID: umq_err_stats_type_t = 4;
pub const UMQ_ERR_STATS_TYPE_POST_SGE_NUM_INVALID: umq_err_stats_type_t = 5;
pub const UMQ_ERR_STATS_TYPE_POST_WR_COUNT_INVALID: umq_err_stats_type_t = 6;
pub const UMQ_ERR_STATS_TYPE_POST_BIG_DATA: umq_err_stats_type_t = 7;
pub const UMQ_ERR_STATS_TYPE_POLL_PARAM_INVALID: umq_err_stats_type_t = 8;
pub const UMQ_ERR_STATS_TYPE_POLL_TX: umq_err_stats_type_t = 9;
pub const UMQ_ERR_STATS_TYPE_POLL_RX: umq_err_stats_type_t = 10;
pub const UMQ_ERR_STATS_TYPE_POLL_IO_DIRECTION_INVALID: umq_err_stats_type_t = 11;
pub const UMQ_ERR_STATS_TYPE_READ: umq_err_stats_type_t = 12;
pub const UMQ_ERR_STATS_TYPE_READ_BIND_CTX_INVALID: umq_err_stats_type_t = 13;
pub const UMQ_ERR_STATS_TYPE_READ_TSEG_INVALID: umq_err_stats_type_t = 14;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_PARAM_INVALID: umq_err_stats_type_t = 15;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_DATA_NUM_INVALID: umq_err_stats_type_t = 16;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_POST_TX_BATCH: umq_err_stats_type_t = 17;
pub const UMQ_ERR_STATS_TYPE_ENQUEUE_SGE_NUM_INVALID: umq_err_stats_type_t = 18;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_PARAM_INVALID: umq_err_stats_type_t = 19;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_BIND_CTX_INVALID: umq_err_stats_type_t = 20;
pub const UMQ_ERR_STATS_TYPE_DEQUEUE_SHM_QBUF: umq_err_stats_type_t = 21;
pub const UMQ_ERR_STATS_TYPE_QBUF_ALLOC: umq_err_stats_type_t = 22;
pub const UMQ_ERR_STATS_TYPE_RX_BUF_CTX_ALLOC: umq_err_stats_type_t = 23;
pub const UMQ_ERR_STATS_TYPE_MAX: umq_err_stats_type_t = 24;

pub type umq_async_event_type_t = u32;
pub const UMQ_EVENT_QH_ERR: umq_async_event_type_t = 0;
pub const UMQ_EVENT_QH_LIMIT: umq_async_event_type_t = 1;
pub const UMQ_EVENT_QH_RQ_ERR: umq_async_event_type_t = 2;
pub const UMQ_EVENT_QH_RQ_LIMIT: umq_async_event_type_t = 3;
pub const UMQ_EVENT_QH_RQ_CQ_ERR: umq_async_event_type_t = 4;
pub const UMQ_EVENT_QH_SQ_CQ_ERR: umq_async_event_type_t = 5;
pub const UMQ_EVENT_PORT_ACTIVE: umq_async_event_type_t = 6;
pub const UMQ_EVENT_PORT_DOWN: umq_async_event_type_t = 7;
pub const UMQ_EVENT_DEV_FATAL: umq_async_event_type_t = 8;
pub const UMQ_EVENT_EID_CHANGE: umq_async_event_type_t = 9;
pub const UMQ_EVENT_ELR_ERR: umq_async_event_type_t = 10;
pub const UMQ_EVENT_ELR_DONE: umq_async_event_type_t = 11;
pub const UMQ_EVENT_OTHER: umq_async_event_type_t = 12;

pub type umq_topo_type_t = u32;
pub const UMQ_TOPO_TYPE_FULLMESH_1D: umq_topo_type_t = 0;
pub const UMQ_TOPO_TYPE_CLOS: umq_topo_type_t = 1;
pub const UMQ_TOPO_TYPE_MAX: umq_topo_type_t = 2;

pub type umq_user_ctl_opcode_t = u32;
pub const UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY: umq_user_ctl_opcode_t = 0;
pub const UMQ_OPCODE_QBUF_POOL_INFO_QUERY: umq_user_ctl_opcode_t = 1;
pub const UMQ_OPCODE_MAX: umq_user_ctl_opcode_t = 2;

pub type mempool_import_state_t = u32;
pub const MEMPOOL_STATE_NON_IMPORTED: mempool_import_state_t = 0;
pub const MEMPOOL_STATE_IMPORTED: mempool_import_state_t = 1;

pub const UMQ_LOG_FLAG_FUNC: u32 = 1;
pub const UMQ_LOG_FLAG_LEVEL: u32 = 2;
pub const UMQ_LOG_FLAG_RATE_LIMITED: u32 = 4;
pub const UMQ_LOG_FLAG_EXT_FUNC: u32 = 8;
pub const UMQ_EID_SIZE: u32 = 16;
pub const UMQ_IPV4_SIZE: u32 = 16;
pub const UMQ_IPV6_SIZE: u32 = 46;
pub const UMQ_DEV_NAME_SIZE: u32 = 64;
/// Most WRs one `umq_post` call accepts, and most buffers one `umq_buf_alloc` returns.
pub const UMQ_BATCH_SIZE: u32 = 256;
/// Largest `request_size` of `umq_buf_alloc` (10 MiB).
pub const UMQ_MAX_BUF_REQUEST_SIZE: u32 = 10485760;
pub const UMQ_INTERRUPT_FLAG_IO_DIRECTION: u32 = 1;
pub const UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX: u32 = 2;
pub const UMQ_INTERRUPT_FLAG_TAG_TIMESTAMP: u32 = 4;
pub const UMQ_INTERRUPT_FD_LIST_LEN: u32 = 20;
pub const MAX_UMQ_TRANS_INFO_NUM: u32 = 128;
pub const UMQ_FEATURE_API_BASE: u32 = 0;
pub const UMQ_FEATURE_API_PRO: u32 = 1;
pub const UMQ_FEATURE_ENABLE_TOKEN_POLICY: u32 = 2;
pub const UMQ_FEATURE_ENABLE_STATS: u32 = 4;
pub const UMQ_FEATURE_ENABLE_PERF: u32 = 8;
pub const UMQ_FEATURE_ENABLE_FLOW_CONTROL: u32 = 16;
pub const UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS: u32 = 32;
pub const UMQ_NAME_MAX_LEN: u32 = 32;
pub const UMQ_CREATE_FLAG_RX_BUF_SIZE: u32 = 1;
pub const UMQ_CREATE_FLAG_TX_BUF_SIZE: u32 = 2;
pub const UMQ_CREATE_FLAG_RX_DEPTH: u32 = 4;
pub const UMQ_CREATE_FLAG_TX_DEPTH: u32 = 8;
pub const UMQ_CREATE_FLAG_QUEUE_MODE: u32 = 16;
pub const UMQ_CREATE_FLAG_SHARE_RQ: u32 = 32;
pub const UMQ_CREATE_FLAG_UMQ_CTX: u32 = 64;
pub const UMQ_CREATE_FLAG_TP_MODE: u32 = 128;
pub const UMQ_CREATE_FLAG_TP_TYPE: u32 = 256;
pub const UMQ_CREATE_FLAG_USED_PORTS: u32 = 512;
pub const UMQ_CREATE_FLAG_PRIORITY: u32 = 1024;
pub const UMQ_CREATE_FLAG_MAIN_UMQ: u32 = 2048;
pub const UMQ_CREATE_FLAG_SUB_UMQ: u32 = 4096;
pub const UMQ_CREATE_FLAG_SHARE_TRANSPORT: u32 = 8192;
pub const UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE: u32 = 1;
pub const UMQ_ALLOC_FLAG_POOL_TYPE: u32 = 2;
pub const UMQ_PERF_QUANTILE_MAX_NUM: u32 = 8;
pub const UMQ_MAX_ROUTES: u32 = 16;
pub const UMQ_MAX_EID_CNT: u32 = 256;
pub const UMQ_IO_OPTION_FLAG_DIRECTION: u32 = 1;
pub const UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX: u32 = 2;
pub const UMQ_IO_OPTION_FLAG_TAG_TIMESTAMP: u32 = 4;
pub const UMQ_TP_CREATE_FLAG_USED_PORTS: u32 = 1;

/// Log sink: `level` is a `umq_log_level_t`, `log_msg` a NUL-terminated line valid for the call.
pub type umq_log_func_t = Option<unsafe extern "C" fn(level: c_int, log_msg: *mut c_char)>;
/// Log sink that is also told where the line was written (`UMQ_LOG_FLAG_EXT_FUNC`).
pub type umq_log_ext_func_t = Option<
    unsafe extern "C" fn(
        level: c_int,
        file: *const c_char,
        function: *const c_char,
        line: c_int,
        log_msg: *mut c_char,
    ),
>;

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
    pub ext_func: umq_log_ext_func_t,
    pub level: umq_log_level_t,
    pub rate_limited: umq_log_rate_limit_t,
}

/// The fds of a queue's completion channels (`umq_interrupt_fd_list_get`).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_interrupt_fd_list_t {
    pub fd: [c_int; 20],
    pub fd_num: u32,
}

/// Which completion channel an interrupt call is about. Its first eight bytes are the
/// December revision's option, which the queue layer reads.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_interrupt_option_t {
    pub flag: u32,
    pub direction: umq_io_direction_t,
    pub fd_type: umq_fd_type_t,
    pub tp_handle_idx: u32,
    pub tag_timestamp: u64,
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

/// A 16-byte endpoint id, in network order (`raw`).
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_eid_t {
    pub raw: [u8; 16],
    pub in4: umq_eid_in4_t,
    pub in6: umq_eid_in6_t,
}

#[cfg(not(cbindgen))]
pub use crate::abi::types::umq_dev_addr_t;

/// How a device is named: by IPv4 or IPv6 address text, by EID, by device name and EID index,
/// or not at all (`UMQ_DEV_ASSIGN_MODE_DUMMY`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_assign_t {
    pub assign_mode: umq_dev_assign_mode_t,
    #[cfg(not(cbindgen))]
    pub u: umq_dev_addr_t,
}

/// A transport and the device it runs on.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_trans_info_t {
    pub trans_mode: umq_trans_mode_t,
    pub dev_info: umq_dev_assign_t,
}

/// Credit flow control settings (used when `UMQ_FEATURE_ENABLE_FLOW_CONTROL` is set).
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_flow_control_cfg_t {
    pub initial_credit: u16,
    pub max_credits_request: u16,
    pub credit_multiple: f32,
    pub return_ratio: u16,
    pub min_reserved_credit: u16,
    pub timeout_ms: u32,
    pub pending_credit_threshold: u16,
    pub use_atomic_window: bool,
    pub is_limited: bool,
    pub fc_req_timeout_ms: i32,
}

/// Buffer pool settings of `umq_init`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_buf_pool_cfg_t {
    pub small_block_size: umq_buf_block_size_t,
    pub umq_mem_pool_init_size: u64,
    pub normal_pool_block_count: u32,
    pub expansion_block_count: u32,
    pub umq_buf_pool_max_size: u64,
    pub tls_qbuf_pool_depth: u64,
    pub tls_expand_qbuf_pool_depth: u64,
    pub disable_scale_cap: bool,
    pub disable_malloc_escape: bool,
    pub enable_tiny_pool: bool,
    pub tiny_pool_block_size: umq_tiny_buf_block_size_t,
    pub tiny_pool_block_count: u32,
    pub tls_tiny_pool_depth: u64,
    pub tls_expand_tiny_pool_depth: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_tp_pool_cfg_t {
    pub notify_threshold: u32,
}

/// Process-wide configuration for `umq_init`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_init_cfg_t {
    pub buf_mode: umq_buf_mode_t,
    pub feature: u32,
    pub headroom_size: u16,
    #[cfg(not(cbindgen))]
    pub bits_10: u8,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=1
    pub io_lock_free: u8,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=1
    pub rq_lock_free: u8,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=6
    pub rsvd: u8,
    pub trans_info_num: u8,
    pub flow_control: umq_flow_control_cfg_t,
    pub trans_info: [umq_trans_info_t; 128],
    pub buf_pool_cfg: umq_buf_pool_cfg_t,
    pub tp_pool_cfg: umq_tp_pool_cfg_t,
}

#[cfg(cbindgen)]
#[repr(C)]
pub struct umq_port_id_bs_t {
    /// cbindgen:bitfield=8
    pub chip_id: u32,
    /// cbindgen:bitfield=8
    pub die_id: u32,
    /// cbindgen:bitfield=8
    pub port_idx: u32,
    /// cbindgen:bitfield=8
    pub reserved: u32,
}

/// A port: chip, die and index (`bs`), or `value` as a whole.
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_port_id_t {
    #[cfg(cbindgen)]
    pub bs: umq_port_id_bs_t,
    pub value: u32,
}

/// The ports a queue may use; `port[0]` is the primary one.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_used_ports_t {
    pub port: *mut umq_port_id_t,
    pub num: u8,
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
    pub share_rq_umqh: u64,
    pub umq_ctx: u64,
    pub mode: umq_queue_mode_t,
    pub tp_mode: umq_tp_mode_t,
    pub tp_type: umq_tp_type_t,
    pub used_ports: umq_used_ports_t,
    pub priority: u8,
}

/// A message buffer: a 128-byte header, then (combine mode) headroom and data. The same storage
/// as the December revision's; two bit fields moved (`mempool_id` is 11 bits from bit 21,
/// `umq_id` new at bit 34 of the status word).
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
    /// cbindgen:bitfield=1
    pub alloc_state: u16,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=14
    pub rsvd1: u16,
    #[cfg(not(cbindgen))]
    pub bits_32: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=20
    pub token_id: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=1
    pub mempool_without_data: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=11
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
    /// cbindgen:bitfield=18
    pub umq_id: u64,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=12
    pub rsvd3: u64,
    pub rsvd4: u64,
    pub buf_data: *mut c_char,
    pub qbuf_ext: [u64; 8],
    pub data: [c_char; 0],
}

/// Options of `umq_buf_alloc`; each field counts when its `UMQ_ALLOC_FLAG_*` bit is set.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_alloc_option_t {
    pub flag: u32,
    pub headroom_size: u16,
    pub pool_type: umq_alloc_pool_type_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_stats_info_instance_t {
    pub stats: [u64; 3],
    pub umqh: u64,
}

#[repr(C)]
pub struct umq_stats_infos_t {
    pub err_stats: [u64; 24],
    pub stats_info_num: u32,
    pub stats_info: [umq_stats_info_instance_t; 0],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct perf_in_param_t {
    pub thresh_array: [u64; 8],
    pub thresh_num: u32,
}

#[repr(C)]
pub struct umq_perf_infos_t {
    pub perf_record_num: u32,
    pub perf_record: [*mut c_void; 0],
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_dfx_cmd_id_u {
    pub perf_cmd_id: umq_perf_cmd_id_t,
    pub stats_cmd_id: umq_stats_cmd_id_t,
}

/// A diagnostics command of the revision's `umq_dfx_cmd_t` (declared for the ABI; the July 2026
/// API reads its statistics through `umq_dfx_api.h`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dfx_cmd_t {
    pub module_id: umq_dfx_module_id_t,
    #[cfg(not(cbindgen))]
    pub cmd: umq_dfx_cmd_id_u,
    #[cfg(not(cbindgen))]
    pub perf_in_param: perf_in_param_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dfx_result_t {
    pub module_id: umq_dfx_module_id_t,
    #[cfg(not(cbindgen))]
    pub cmd: umq_dfx_cmd_id_u,
    #[cfg(not(cbindgen))]
    pub err_code: c_int,
    #[cfg(not(cbindgen))]
    pub out: *mut c_void,
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

/// The two ends a route is asked for.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_route_key_t {
    pub src_bonding_eid: umq_eid_t,
    pub dst_bonding_eid: umq_eid_t,
    pub tp_type: umq_tp_type_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_node_id_t {
    pub super_node_id: u32,
    pub node_id: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_route_t {
    pub src_port: umq_port_id_t,
    pub dst_port: umq_port_id_t,
    pub src_eid: umq_eid_t,
    pub dst_eid: umq_eid_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_route_list_t {
    pub topo_type: umq_topo_type_t,
    pub src_node: umq_node_id_t,
    pub dst_node: umq_node_id_t,
    pub chip_num: u32,
    pub die_num: u32,
    pub route_num: u32,
    pub routes: [umq_route_t; 16],
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

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_mempool_state_t {
    pub import_state: mempool_import_state_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_eid_info_t {
    pub eid: umq_eid_t,
    pub eid_index: u32,
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_info_ub_t {
    pub eid_list: [umq_eid_info_t; 256],
    pub eid_cnt: u32,
}

/// A device: its name, transport mode and (`ub`, an anonymous union in C) its EIDs.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_dev_info_t {
    pub dev_name: [c_char; 64],
    pub umq_trans_mode: umq_trans_mode_t,
    #[cfg(not(cbindgen))]
    pub ub: umq_dev_info_ub_t,
}

/// A queue's settings as `umq_cfg_get` reports them.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_cfg_get_t {
    pub create_flag: u32,
    pub rx_buf_size: u32,
    pub tx_buf_size: u32,
    pub rx_depth: u32,
    pub tx_depth: u32,
    pub umq_ctx: u64,
    pub share_rq_umqh: u64,
    pub max_rx_sge: u8,
    pub max_tx_sge: u8,
    pub priority: u8,
    pub rqe_post_factor: u8,
    pub trans_mode: umq_trans_mode_t,
    pub mode: umq_queue_mode_t,
    pub state: umq_state_t,
    pub tp_type: umq_tp_type_t,
    pub tp_mode: umq_tp_mode_t,
}

/// Direction (and further per-call properties) of `umq_post` / `umq_poll`. `io_direction` is
/// read whatever `flag` says, as the reference reads it.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_io_option_t {
    pub flag: u32,
    pub io_direction: umq_io_direction_t,
    pub tp_handle_idx: u32,
    pub tag_timestamp: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_tp_resource_create_option_t {
    pub create_flag: u32,
    pub used_ports: umq_used_ports_t,
}

/// Accessors for the bit fields of the 2026 `umq_buf_t` that differ from December's.
impl umq_buf_t {
    pub fn mempool_id(&self) -> u32 {
        self.bits_32 >> 21
    }
    pub fn umq_id(&self) -> u32 {
        ((self.bits_40 >> 34) & 0x3_ffff) as u32
    }
}

const _: () = {
    assert!(size_of::<umq_buf_t>() == 128);
    assert!(size_of::<umq_init_cfg_t>() == 11392);
    assert!(size_of::<umq_create_option_t>() == 200);
    assert!(size_of::<umq_async_event_t>() == 112);
    assert!(size_of::<umq_dev_info_t>() == 6224);
};
