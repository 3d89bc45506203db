//! `umq_dfx_types.h` of the July 2026 revision: the latency statistics of `umq_stats_perf_get`.

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

pub const UMQ_PERF_QUANTILE_CNT: u32 = 4;
pub const UMQ_PERF_QUANTILE_P50: u32 = 0;
pub const UMQ_PERF_QUANTILE_P90: u32 = 1;
pub const UMQ_PERF_QUANTILE_P99: u32 = 2;
pub const UMQ_PERF_QUANTILE_P9999: u32 = 3;
pub const UMQ_DFX_TO_STRING_DEFAULT_LEN: u32 = 20480;

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
    pub type_record: [umq_perf_type_stats_t; UMQ_PERF_RECORD_TYPE_MAX as usize],
}

/// Empty in the original header (a GNU C extension); one byte in Rust, never read.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_perf_stats_cfg_t {
    _unused: [u8; 0],
}

const _: () = assert!(size_of::<umq_perf_stats_t>() == 4176);
