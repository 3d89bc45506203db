//! Exports of the July 2026 `umq_dfx_api.h`: the latency statistics of the API calls.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::types as dec;
use crate::abi::v2026::dfx_types::*;
use crate::abi::v2026::errno::*;
use crate::ffi::{ffi_guard, need_mut};
use std::ffi::{c_char, c_int};

/// The record types the library measures, in the December numbering its collector keeps, and
/// their July 2026 numbers.
const RECORDED: &[(u32, umq_perf_record_type_t)] = &[
    (dec::UMQ_PERF_RECORD_ENQUEUE, UMQ_PERF_RECORD_ENQUEUE),
    (dec::UMQ_PERF_RECORD_DEQUEUE, UMQ_PERF_RECORD_DEQUEUE),
    (
        dec::UMQ_PERF_RECORD_DEQUEUE_EMPTY,
        UMQ_PERF_RECORD_DEQUEUE_EMPTY,
    ),
    (dec::UMQ_PERF_RECORD_POST_ALL, UMQ_PERF_RECORD_POST_ALL),
    (dec::UMQ_PERF_RECORD_POST_TX, UMQ_PERF_RECORD_POST_TX),
    (dec::UMQ_PERF_RECORD_POST_RX, UMQ_PERF_RECORD_POST_RX),
    (dec::UMQ_PERF_RECORD_POLL_ALL, UMQ_PERF_RECORD_POLL_ALL),
    (dec::UMQ_PERF_RECORD_POLL_TX, UMQ_PERF_RECORD_POLL_TX),
    (dec::UMQ_PERF_RECORD_POLL_RX, UMQ_PERF_RECORD_POLL_RX),
    (
        dec::UMQ_PERF_RECORD_POLL_ALL_EMPTY,
        UMQ_PERF_RECORD_POLL_ALL_EMPTY,
    ),
    (
        dec::UMQ_PERF_RECORD_POLL_TX_EMPTY,
        UMQ_PERF_RECORD_POLL_TX_EMPTY,
    ),
    (
        dec::UMQ_PERF_RECORD_POLL_RX_EMPTY,
        UMQ_PERF_RECORD_POLL_RX_EMPTY,
    ),
    (dec::UMQ_PERF_RECORD_NOTIFY, UMQ_PERF_RECORD_NOTIFY),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POST_SEND,
        UMQ_PERF_RECORD_TRANSPORT_POST_SEND,
    ),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POST_RECV,
        UMQ_PERF_RECORD_TRANSPORT_POST_RECV,
    ),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POLL_TX,
        UMQ_PERF_RECORD_TRANSPORT_POLL_TX,
    ),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POLL_RX,
        UMQ_PERF_RECORD_TRANSPORT_POLL_RX,
    ),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POLL_TX_EMPTY,
        UMQ_PERF_RECORD_TRANSPORT_POLL_TX_EMPTY,
    ),
    (
        dec::UMQ_PERF_RECORD_TRANSPORT_POLL_RX_EMPTY,
        UMQ_PERF_RECORD_TRANSPORT_POLL_RX_EMPTY,
    ),
];

/// Starts timing the API calls.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_perf_start() -> c_int {
    ffi_guard!("umq_stats_perf_start", {
        crate::dfx::perf_switch(true);
        UMQ_SUCCESS
    })
}

/// Stops timing; what was measured stays readable.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_perf_stop() -> c_int {
    ffi_guard!("umq_stats_perf_stop", {
        crate::dfx::perf_switch(false);
        UMQ_SUCCESS
    })
}

/// Forgets every sample (the configuration is empty in this revision).
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_perf_reset(perf_stats_cfg: *mut umq_perf_stats_cfg_t) -> c_int {
    ffi_guard!("umq_stats_perf_reset", {
        let _ = perf_stats_cfg;
        crate::dfx::perf_clear();
        UMQ_SUCCESS
    })
}

/// Every record type's count, mean, extremes and quantiles (ns). Types the library does not
/// time have a count of 0. Quantiles are upper bounds to a quarter of a power of two.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_perf_get(umq_perf_stats: *mut umq_perf_stats_t) -> c_int {
    ffi_guard!("umq_stats_perf_get", {
        crate::ffi::code(
            need_mut("umq_stats_perf_get", "umq_perf_stats", umq_perf_stats).map(|out| {
                *out = unsafe { std::mem::zeroed() };
                for (t, r) in out.type_record.iter_mut().enumerate() {
                    r.r#type = t as u32;
                }
                for &(ours, theirs) in RECORDED {
                    let s = crate::dfx::perf_summary(ours);
                    let r = &mut out.type_record[theirs as usize];
                    r.sample_num = s.count;
                    r.average = s.sum.checked_div(s.count).unwrap_or(0);
                    (r.mininum, r.maxinum, r.quantile) = (s.min, s.max, s.quantiles);
                }
            }),
        )
    })
}

/// Writes a table of the measured record types into `buf` (NUL-terminated, cut at
/// `max_buf_len`) and returns the length of the whole table, as `snprintf` does.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_perf_to_str(
    umq_perf_stats: *mut umq_perf_stats_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_stats_perf_to_str", {
        let Some(stats) = crate::ffi::checked(umq_perf_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        if buf.is_null() || max_buf_len <= 0 {
            return -UMQ_ERR_EINVAL;
        }
        let mut text = String::from(
            "type  samples  average(ns)  min(ns)  max(ns)  p50(ns)  p90(ns)  p99(ns)  p9999(ns)\n",
        );
        for r in stats.type_record.iter().filter(|r| r.sample_num > 0) {
            let q = r.quantile;
            text += &format!(
                "{}  {}  {}  {}  {}  {}  {}  {}  {}\n",
                r.r#type, r.sample_num, r.average, r.mininum, r.maxinum, q[0], q[1], q[2], q[3]
            );
        }
        let n = text.len().min(max_buf_len as usize - 1);
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
            *buf.add(n) = 0;
        }
        text.len().min(c_int::MAX as usize) as c_int
    })
}
