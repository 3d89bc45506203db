//! `umq_dfx_types.h` of the July 2026 revision: the statistics of `umq_dfx_api.h` (flow control,
//! buffer pools, a queue's identity, I/O counts, latencies, traces, transport pools).

use super::types::*;

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
pub const UMQ_PERF_RECORD_REARM_TX: umq_perf_record_type_t = 12;
pub const UMQ_PERF_RECORD_REARM_RX: umq_perf_record_type_t = 13;
pub const UMQ_PERF_RECORD_WAIT_TX: umq_perf_record_type_t = 14;
pub const UMQ_PERF_RECORD_WAIT_RX: umq_perf_record_type_t = 15;
pub const UMQ_PERF_RECORD_ACK_TX: umq_perf_record_type_t = 16;
pub const UMQ_PERF_RECORD_ACK_RX: umq_perf_record_type_t = 17;
pub const UMQ_PERF_RECORD_NOTIFY: umq_perf_record_type_t = 18;
pub const UMQ_PERF_RECORD_BUF_ALLOC: umq_perf_record_type_t = 19;
pub const UMQ_PERF_RECORD_BUF_FREE: umq_perf_record_type_t = 20;
pub const UMQ_PERF_RECORD_BUF_DATA_TO_HEAD: umq_perf_record_type_t = 21;
pub const UMQ_PERF_RECORD_CREATE: umq_perf_record_type_t = 22;
pub const UMQ_PERF_RECORD_DESTROY: umq_perf_record_type_t = 23;
pub const UMQ_PERF_RECORD_ROUTE_LIST_GET: umq_perf_record_type_t = 24;
pub const UMQ_PERF_RECORD_BIND_INFO_GET: umq_perf_record_type_t = 25;
pub const UMQ_PERF_RECORD_BIND: umq_perf_record_type_t = 26;
pub const UMQ_PERF_RECORD_UNBIND: umq_perf_record_type_t = 27;
pub const UMQ_PERF_RECORD_TRANSPORT_POST_SEND: umq_perf_record_type_t = 28;
pub const UMQ_PERF_RECORD_TRANSPORT_POST_RECV: umq_perf_record_type_t = 29;
pub const UMQ_PERF_RECORD_TRANSPORT_POST_SEND_EAGAIN: umq_perf_record_type_t = 30;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_TX: umq_perf_record_type_t = 31;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_RX: umq_perf_record_type_t = 32;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_TX_EMPTY: umq_perf_record_type_t = 33;
pub const UMQ_PERF_RECORD_TRANSPORT_POLL_RX_EMPTY: umq_perf_record_type_t = 34;
pub const UMQ_PERF_RECORD_TRANSPORT_REARM_TX: umq_perf_record_type_t = 35;
pub const UMQ_PERF_RECORD_TRANSPORT_REARM_RX: umq_perf_record_type_t = 36;
pub const UMQ_PERF_RECORD_TRANSPORT_WAIT_TX: umq_perf_record_type_t = 37;
pub const UMQ_PERF_RECORD_TRANSPORT_WAIT_RX: umq_perf_record_type_t = 38;
pub const UMQ_PERF_RECORD_TRANSPORT_ACK_TX: umq_perf_record_type_t = 39;
pub const UMQ_PERF_RECORD_TRANSPORT_ACK_RX: umq_perf_record_type_t = 40;
pub const UMQ_PERF_RECORD_TRANSPORT_CREATE_JFCE: umq_perf_record_type_t = 41;
pub const UMQ_PERF_RECORD_TRANSPORT_CREATE_JFC: umq_perf_record_type_t = 42;
pub const UMQ_PERF_RECORD_TRANSPORT_CREATE_JFR: umq_perf_record_type_t = 43;
pub const UMQ_PERF_RECORD_TRANSPORT_CREATE_JETTY: umq_perf_record_type_t = 44;
pub const UMQ_PERF_RECORD_TRANSPORT_DESTROY_JFCE: umq_perf_record_type_t = 45;
pub const UMQ_PERF_RECORD_TRANSPORT_DESTROY_JFC: umq_perf_record_type_t = 46;
pub const UMQ_PERF_RECORD_TRANSPORT_DESTROY_JFR: umq_perf_record_type_t = 47;
pub const UMQ_PERF_RECORD_TRANSPORT_DESTROY_JETTY: umq_perf_record_type_t = 48;
pub const UMQ_PERF_RECORD_TRANSPORT_RJETTY_GET: umq_perf_record_type_t = 49;
pub const UMQ_PERF_RECORD_TRANSPORT_RJETTY_PUT: umq_perf_record_type_t = 50;
pub const UMQ_PERF_RECORD_TRANSPORT_PATH_GET: umq_perf_record_type_t = 51;
pub const UMQ_PERF_RECORD_TRANSPORT_IMPORT_JETTY: umq_perf_record_type_t = 52;
pub const UMQ_PERF_RECORD_TRANSPORT_BIND_JETTY: umq_perf_record_type_t = 53;
pub const UMQ_PERF_RECORD_TRANSPORT_UNIMPORT_JETTY: umq_perf_record_type_t = 54;
pub const UMQ_PERF_RECORD_TRANSPORT_UNBIND_JETTY: umq_perf_record_type_t = 55;
pub const UMQ_PERF_RECORD_TRANSPORT_ALLOC_JETTY_NODE: umq_perf_record_type_t = 56;
pub const UMQ_PERF_RECORD_TRANSPORT_FREE_JETTY_NODE: umq_perf_record_type_t = 57;
pub const UMQ_PERF_RECORD_TYPE_MAX: umq_perf_record_type_t = 58;

pub const UMQ_STATS_QBUF_POOL_TYPE_MAX: u32 = 16;
pub const UMQ_PERF_REC_MAX_NUM: u32 = 64;
pub const UMQ_LOCAL_QBUF_POOL_MAX_NUM: u32 = 64;
pub const UMQ_PERF_MAX_SUB_TIME_NUM: u32 = 8;
pub const UMQ_TRACE_FLAG_RECORD_NUM: u32 = 1;
pub const UMQ_TRACE_FLAG_OUTPUT_LIMIT: u32 = 2;
pub const UMQ_PERF_QUANTILE_CNT: u32 = 4;
pub const UMQ_PERF_QUANTILE_P50: u32 = 0;
pub const UMQ_PERF_QUANTILE_P90: u32 = 1;
pub const UMQ_PERF_QUANTILE_P99: u32 = 2;
pub const UMQ_PERF_QUANTILE_P9999: u32 = 3;
pub const UMQ_DFX_TO_STRING_DEFAULT_LEN: u32 = 20480;

pub type umq_qbuf_pool_type_t = u32;
pub const UMQ_QBUF_POOL_TYPE_SMALL: umq_qbuf_pool_type_t = 0;
pub const UMQ_QBUF_POOL_TYPE_MEDIUM: umq_qbuf_pool_type_t = 1;
pub const UMQ_QBUF_POOL_TYPE_BIG: umq_qbuf_pool_type_t = 2;
pub const UMQ_QBUF_POOL_TYPE_HUGE: umq_qbuf_pool_type_t = 3;
pub const UMQ_QBUF_POOL_TYPE_GIGANTIC: umq_qbuf_pool_type_t = 4;
pub const UMQ_QBUF_POOL_TYPE_TINY: umq_qbuf_pool_type_t = 5;
pub const UMQ_QBUF_POOL_TYPE_MAX: umq_qbuf_pool_type_t = 6;

pub type umq_trace_type_t = u32;
pub const UMQ_TRACE_TYPE_POST: umq_trace_type_t = 0;
pub const UMQ_TRACE_TYPE_POLL: umq_trace_type_t = 1;
pub const UMQ_TRACE_TYPE_WAIT: umq_trace_type_t = 2;
pub const UMQ_TRACE_TYPE_REARM: umq_trace_type_t = 3;
pub const UMQ_TRACE_TYPE_MAX: umq_trace_type_t = 4;

pub type umq_urma_func_type_t = u32;
pub const UMQ_URMA_FUNC_POST_TX: umq_urma_func_type_t = 0;
pub const UMQ_URMA_FUNC_POST_RX: umq_urma_func_type_t = 1;
pub const UMQ_URMA_FUNC_POLL_TX: umq_urma_func_type_t = 2;
pub const UMQ_URMA_FUNC_POLL_RX: umq_urma_func_type_t = 3;
pub const UMQ_URMA_FUNC_WAIT_TX_JFC: umq_urma_func_type_t = 4;
pub const UMQ_URMA_FUNC_WAIT_RX_JFC: umq_urma_func_type_t = 5;
pub const UMQ_URMA_FUNC_ACK_TX_JFC: umq_urma_func_type_t = 6;
pub const UMQ_URMA_FUNC_ACK_RX_JFC: umq_urma_func_type_t = 7;
pub const UMQ_URMA_FUNC_REARM_JFC: umq_urma_func_type_t = 8;
pub const UMQ_URMA_FUNC_FC_REARM_JFC: umq_urma_func_type_t = 9;
pub const UMQ_URMA_FUNC_FC_POST_TX: umq_urma_func_type_t = 10;
pub const UMQ_URMA_FUNC_FC_POLL_TX: umq_urma_func_type_t = 11;
pub const UMQ_URMA_FUNC_FC_POST_RX: umq_urma_func_type_t = 12;
pub const UMQ_URMA_FUNC_FC_POLL_RX: umq_urma_func_type_t = 13;
pub const UMQ_URMA_FUNC_MAX: umq_urma_func_type_t = 14;

/// Flow-control messages of one queue.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_packet_stats_t {
    pub send_cnt: u64,
    pub send_success: u64,
    pub recv_cnt: u64,
    pub send_eagain_cnt: u64,
    pub send_error_cnt: u64,
    pub recv_error_cnt: u64,
    pub recv_duplicate_req_cnt: u64,
    pub recv_duplicate_rsp_cnt: u64,
}

/// Credits of a receive queue's pool: idle and handed out, now and in total.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_credit_pool_stats_t {
    pub pool_idle: u64,
    pub pool_be_allocated: u64,
    pub rsvd0: [u64; 2],
    pub total_pool_idle: u64,
    pub total_pool_be_allocated: u64,
    pub rsvd1: [u64; 2],
    pub total_pool_post_rx_err: u64,
    pub rsvd2: [u64; 2],
}

/// Credits of one queue: handed to its peer, acquired from it, used.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_credit_private_stats_t {
    pub queue_idle: u64,
    pub queue_be_allocated: u64,
    pub queue_acquired: u64,
    pub rsvd0: [u64; 2],
    pub total_queue_idle: u64,
    pub total_queue_acquired: u64,
    pub total_queue_be_allocated: u64,
    pub total_queue_post_tx_success: u64,
    pub rsvd1: [u64; 2],
    pub total_queue_post_tx_err: u64,
    pub total_queue_acquired_err: u64,
    pub rsvd: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_flow_control_stats_t {
    pub pool_credit: umq_credit_pool_stats_t,
    pub queue_credit: umq_credit_private_stats_t,
    pub packet_stats: umq_packet_stats_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_expansion_pool_stats_t {
    pub expansion_count: u32,
    pub exp_total_block_num: u64,
    pub exp_total_free_block_num: u64,
    pub exp_total_mem_size: u64,
    pub exp_used_mem_size: u64,
    pub total_expansion_count: u64,
    pub total_shrink_count: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_local_qbuf_pool_stats_t {
    pub r#type: umq_qbuf_pool_type_t,
    pub tid: u64,
    pub capacity_with_data: u64,
    pub buf_cnt_with_data: u64,
    pub capacity_without_data: u64,
    pub buf_cnt_without_data: u64,
    pub tls_fetch_cnt_with_data: u64,
    pub tls_fetch_buf_cnt_with_data: u64,
    pub tls_fetch_cnt_without_data: u64,
    pub tls_fetch_buf_cnt_without_data: u64,
    pub tls_return_cnt_with_data: u64,
    pub tls_return_buf_cnt_with_data: u64,
    pub tls_return_cnt_without_data: u64,
    pub tls_return_buf_cnt_without_data: u64,
    pub alloc_cnt_with_data: u64,
    pub alloc_cnt_without_data: u64,
    pub free_cnt_with_data: u64,
    pub free_cnt_without_data: u64,
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_qbuf_pool_split_t {
    pub block_num_with_data: u64,
    pub size_with_data: u64,
    pub block_num_without_data: u64,
    pub size_without_data: u64,
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_qbuf_pool_combine_t {
    pub block_num_with_data: u64,
    pub size_with_data: u64,
}

#[cfg(not(cbindgen))]
/// The anonymous union `available_mem` (named only on the Rust side).
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_qbuf_pool_available_t {
    pub split: umq_qbuf_pool_split_t,
    pub combine: umq_qbuf_pool_combine_t,
}

/// One buffer pool: its sizes and what is free in it (`available_mem`).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_qbuf_pool_info_t {
    pub r#type: umq_qbuf_pool_type_t,
    pub mode: umq_buf_mode_t,
    pub total_size: u64,
    pub total_block_num: u64,
    pub block_size: u32,
    pub headroom_size: u32,
    pub data_size: u32,
    pub buf_size: u32,
    pub umq_buf_t_size: u32,
    #[cfg(not(cbindgen))]
    pub available_mem: umq_qbuf_pool_available_t,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_qbuf_pool_stats_t {
    pub qbuf_pool_info: [umq_qbuf_pool_info_t; 16],
    pub num: u32,
    pub exp_pool_with_data: umq_expansion_pool_stats_t,
    pub exp_pool_without_data: umq_expansion_pool_stats_t,
    pub local_qbuf_pool_stats: [umq_local_qbuf_pool_stats_t; 64],
    pub local_qbuf_pool_num: u32,
    pub escape_buf_cnt: u64,
}

#[cfg(not(cbindgen))]
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_info_ub_t {
    pub umq_id: u32,
    pub eid: umq_eid_t,
    pub dev_name: [core::ffi::c_char; 64],
    pub local_io_jetty_id: u32,
    pub local_fc_jetty_id: u32,
    pub remote_io_jetty_id: u32,
    pub remote_fc_jetty_id: u32,
}

/// A queue's identity: its transport mode and (`ub`, an anonymous union in C) its id, EID and
/// device, and the ids of its and its peer's ends.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_info_t {
    pub trans_mode: umq_trans_mode_t,
    #[cfg(not(cbindgen))]
    pub ub: umq_info_ub_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_sub_time_t {
    pub start_time: u64,
    pub exec_time: u64,
    pub func_type: umq_urma_func_type_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_trace_item_t {
    pub sub_umq_id: u32,
    pub msn: u32,
    pub size: u32,
}

/// One traced call: its items, times and type.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_data_record_t {
    pub items: [umq_trace_item_t; 256],
    pub item_cnt: u32,
    pub timestamp: u64,
    pub tag_timestamp: u64,
    pub umq_id: u32,
    pub start_time: u64,
    pub end_time: u64,
    pub sub_time_cnt: u32,
    pub sub_time: [umq_sub_time_t; 8],
    pub r#type: umq_trace_type_t,
}

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_trace_cfg_t {
    pub flag: u32,
    pub record_num: u32,
    pub output_limit: u32,
}

/// Called with a buffer at a probe point (`umq_io_perf_callback_register`).
pub type umq_io_perf_callback_t =
    Option<unsafe extern "C" fn(record_type: umq_perf_record_type_t, qbuf: *mut umq_buf_t)>;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_transport_pool_stats_t {
    pub total_num: u64,
    pub global_num: u64,
    pub cache_num: u64,
    pub in_use_num: u64,
    pub error_num: u64,
    pub acc_alloc_num: u64,
    pub acc_free_num: u64,
    pub acc_miss_num: u64,
}

/// One probe point's latencies (ns): count, mean, extremes, and p50 / p90 / p99 / p99.99.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_perf_type_stats_t {
    pub r#type: umq_perf_record_type_t,
    pub sample_num: u64,
    pub average: u64,
    pub mininum: u64,
    pub maxinum: u64,
    pub quantile: [u64; 4],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_perf_stats_t {
    pub type_record: [umq_perf_type_stats_t; 58],
}

/// Empty in the original header (a GNU C extension); one byte in Rust, never read.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_perf_stats_cfg_t {
    _unused: [u8; 0],
}

const _: () = {
    assert!(size_of::<umq_perf_stats_t>() == 4176);
    assert!(size_of::<umq_qbuf_pool_stats_t>() == 10632);
    assert!(size_of::<umq_info_t>() == 112);
    assert!(size_of::<umq_data_record_t>() == 3328);
    assert!(size_of::<umq_flow_control_stats_t>() == 288);
};
