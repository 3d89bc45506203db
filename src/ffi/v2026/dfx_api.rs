//! Exports of the July 2026 `umq_dfx_api.h`: statistics (latencies of the API calls, flow
//! control, I/O packets, buffer pools, a queue's identity) and the I/O perf callback.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::types as dec;
use crate::abi::v2026::dfx_types::*;
use crate::abi::v2026::errno::*;
use crate::abi::v2026::types::{UMQ_TRANS_MODE_MAX, umq_trans_mode_t};
use crate::error::einval;
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
        crate::dfx::clear_perf();
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

/// A queue's flow control in this revision's terms, from the window protocol's counters:
/// `pool_credit` is the receive side (buffers posted and not yet announced, credit the peer
/// holds), `queue_credit` both sides of the queue (credit acquired from the peer and used),
/// `packet_stats` the standalone window updates (sent, sent through the area alone because no
/// message could go, received). The window protocol's updates are cumulative, so none is ever a
/// duplicate.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_flow_control_get(
    umqh: u64,
    flow_control_stats: *mut umq_flow_control_stats_t,
) -> c_int {
    ffi_guard!("umq_stats_flow_control_get", {
        crate::ffi::code(crate::queue::with_queue(
            "umq_stats_flow_control_get",
            umqh,
            |q| {
                let out = need_mut(
                    "umq_stats_flow_control_get",
                    "flow_control_stats",
                    flow_control_stats,
                )?;
                let (s, e) = (q.flow_control_stats(), q.flow_control_ext_stats());
                let (peer_credit, ctrl_received) = q.credit_in_flight();
                let mut v = umq_flow_control_stats_t::default();
                v.pool_credit.pool_idle = s.local_rx_posted;
                v.pool_credit.pool_be_allocated = peer_credit;
                v.pool_credit.total_pool_idle = s.total_local_rx_posted;
                v.pool_credit.total_pool_be_allocated = s.total_local_rx_notified;
                v.pool_credit.total_pool_post_rx_err = s.total_local_rx_posted_error;
                v.queue_credit.queue_be_allocated = peer_credit;
                v.queue_credit.queue_acquired = s.remote_rx_window;
                v.queue_credit.total_queue_acquired = s.total_remote_rx_received;
                v.queue_credit.total_queue_be_allocated = s.total_local_rx_notified;
                v.queue_credit.total_queue_post_tx_success = s.total_remote_rx_consumed;
                v.queue_credit.total_queue_post_tx_err = s.total_flow_controlled_wr;
                v.queue_credit.total_queue_acquired_err = s.total_remote_rx_received_error;
                v.packet_stats = packet_stats(e.standalone, e.area_only, ctrl_received, [0; 3]);
                // The credit requests: the pool is the receive queue's, shared by a shared
                // receive queue's members; duplicates are counted where they were dropped.
                if let Some((pool, dup_req, dup_rsp)) = q.credit_stats() {
                    v.pool_credit.pool_idle = pool.idle;
                    v.pool_credit.pool_be_allocated = pool.allocated;
                    v.pool_credit.total_pool_idle = pool.total_idle;
                    v.pool_credit.total_pool_be_allocated = pool.total_allocated;
                    v.pool_credit.total_pool_post_rx_err = pool.total_post_rx_err;
                    v.packet_stats.recv_duplicate_req_cnt = dup_req;
                    v.packet_stats.recv_duplicate_rsp_cnt = dup_rsp;
                }
                *out = v;
                Ok(())
            },
        ))
    })
}

/// Writes `text` into `buf` as `snprintf` would (cut at `max_buf_len`, NUL-terminated) and
/// returns its whole length, or `-UMQ_ERR_EINVAL` for a NULL or empty buffer.
fn write_text(text: &str, buf: *mut c_char, max_buf_len: c_int) -> c_int {
    if buf.is_null() || max_buf_len <= 0 {
        return -UMQ_ERR_EINVAL;
    }
    let n = text.len().min(max_buf_len as usize - 1);
    unsafe {
        std::ptr::copy_nonoverlapping(text.as_ptr(), buf as *mut u8, n);
        *buf.add(n) = 0;
    }
    text.len().min(c_int::MAX as usize) as c_int
}

/// Rows of `name value`, one a line, under a title.
fn table(title: &str, rows: &[(&str, u64)]) -> String {
    let mut text = format!("{title}\n");
    for (name, value) in rows {
        text += &format!("{name:<32} {value}\n");
    }
    text
}

/// A `umq_flow_control_stats_t` as text (see `umq_stats_perf_to_str` for the return value).
#[unsafe(no_mangle)]
pub extern "C" fn umq_flow_control_stats_to_str(
    flow_control_stats: *const umq_flow_control_stats_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_flow_control_stats_to_str", {
        let Some(s) = crate::ffi::checked(flow_control_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        let (p, q, k) = (&s.pool_credit, &s.queue_credit, &s.packet_stats);
        let text = table(
            "flow control",
            &[
                ("pool_idle", p.pool_idle),
                ("pool_be_allocated", p.pool_be_allocated),
                ("total_pool_idle", p.total_pool_idle),
                ("total_pool_be_allocated", p.total_pool_be_allocated),
                ("total_pool_post_rx_err", p.total_pool_post_rx_err),
                ("queue_be_allocated", q.queue_be_allocated),
                ("queue_acquired", q.queue_acquired),
                ("total_queue_acquired", q.total_queue_acquired),
                ("total_queue_be_allocated", q.total_queue_be_allocated),
                ("total_queue_post_tx_success", q.total_queue_post_tx_success),
                ("total_queue_post_tx_err", q.total_queue_post_tx_err),
                ("total_queue_acquired_err", q.total_queue_acquired_err),
                ("send_cnt", k.send_cnt),
                ("send_success", k.send_success),
                ("send_eagain_cnt", k.send_eagain_cnt),
                ("recv_cnt", k.recv_cnt),
            ],
        );
        write_text(&text, buf, max_buf_len)
    })
}

/// A queue's identity: its transport mode, id (its slot in the handle table), the EID and
/// device of the address it listens on (zero and empty for a queue that names none), and as
/// jetty ids its handle's low word (one channel carries both I/O and flow control here) and,
/// once bound, its peer's.
#[unsafe(no_mangle)]
pub extern "C" fn umq_info_get(umqh: u64, umq_info: *mut umq_info_t) -> c_int {
    ffi_guard!("umq_info_get", {
        crate::ffi::code(crate::queue::with_queue("umq_info_get", umqh, |q| {
            let out = need_mut("umq_info_get", "umq_info", umq_info)?;
            *out = unsafe { std::mem::zeroed() };
            out.trans_mode = q.cfg.trans_mode;
            out.ub.umq_id = umqh as u32;
            out.ub.local_io_jetty_id = umqh as u32;
            out.ub.local_fc_jetty_id = umqh as u32;
            let peer = q.peer_handle().unwrap_or(0) as u32;
            (out.ub.remote_io_jetty_id, out.ub.remote_fc_jetty_id) = (peer, peer);
            let ip = q
                .cfg
                .network_addr
                .as_deref()
                .and_then(crate::devices::ip_of_text);
            if let Some(ip) = ip {
                let eid = crate::devices::eid_of(ip);
                out.ub.eid.raw = eid;
                let dev = crate::devices::list()
                    .into_iter()
                    .find(|d| d.eids.contains(&eid));
                for (o, b) in out
                    .ub
                    .dev_name
                    .iter_mut()
                    .zip(dev.map(|d| d.name).unwrap_or_default().bytes().take(63))
                {
                    *o = b as c_char;
                }
            }
            Ok(())
        }))
    })
}

/// A `umq_info_t` as text (see `umq_stats_perf_to_str` for the return value).
#[unsafe(no_mangle)]
pub extern "C" fn umq_info_to_str(
    umq_info: *const umq_info_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_info_to_str", {
        let Some(i) = crate::ffi::checked(umq_info) else {
            return -UMQ_ERR_EINVAL;
        };
        let name = unsafe { std::ffi::CStr::from_ptr(i.ub.dev_name.as_ptr()) }.to_string_lossy();
        let addr = crate::devices::addr_of(unsafe { i.ub.eid.raw });
        let mut text = table(
            "umq info",
            &[
                ("trans_mode", i.trans_mode as u64),
                ("umq_id", i.ub.umq_id as u64),
                ("local_io_jetty_id", i.ub.local_io_jetty_id as u64),
                ("local_fc_jetty_id", i.ub.local_fc_jetty_id as u64),
                ("remote_io_jetty_id", i.ub.remote_io_jetty_id as u64),
                ("remote_fc_jetty_id", i.ub.remote_fc_jetty_id as u64),
            ],
        );
        text += &format!("{:<32} {addr}\n{:<32} {name}\n", "eid", "dev_name");
        write_text(&text, buf, max_buf_len)
    })
}

/// The window protocol's updates as this revision's packet counts, less `since` (sent, sent
/// through the area alone, received at the last reset).
fn packet_stats(
    standalone: u64,
    area_only: u64,
    received: u64,
    since: [u64; 3],
) -> umq_packet_stats_t {
    let (sent, area, got) = (
        standalone.saturating_sub(since[0]),
        area_only.saturating_sub(since[1]),
        received.saturating_sub(since[2]),
    );
    umq_packet_stats_t {
        send_cnt: sent + area,
        send_success: sent,
        send_eagain_cnt: area,
        recv_cnt: got,
        ..Default::default()
    }
}

/// A queue's flow-control packets since its last `umq_stats_io_reset`: window updates sent as
/// messages (`send_success`), sent through the area alone because no message could go
/// (`send_eagain_cnt`), both (`send_cnt`), and received (`recv_cnt`). The window protocol's
/// updates are cumulative: none is ever an error or a duplicate.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_io_get(umqh: u64, packet_stats: *mut umq_packet_stats_t) -> c_int {
    ffi_guard!("umq_stats_io_get", {
        crate::ffi::code(crate::queue::with_queue("umq_stats_io_get", umqh, |q| {
            let out = need_mut("umq_stats_io_get", "packet_stats", packet_stats)?;
            let e = q.flow_control_ext_stats();
            let since = *q.packet_baseline.lock().unwrap_or_else(|p| p.into_inner());
            *out = self::packet_stats(e.standalone, e.area_only, q.credit_in_flight().1, since);
            Ok(())
        }))
    })
}

/// Starts a queue's I/O statistics from zero.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_io_reset(umqh: u64) -> c_int {
    ffi_guard!("umq_stats_io_reset", {
        crate::ffi::code(crate::queue::with_queue("umq_stats_io_reset", umqh, |q| {
            let e = q.flow_control_ext_stats();
            let now = [e.standalone, e.area_only, q.credit_in_flight().1];
            *q.packet_baseline.lock().unwrap_or_else(|p| p.into_inner()) = now;
            Ok(())
        }))
    })
}

/// A `umq_packet_stats_t` as text (see `umq_stats_perf_to_str` for the return value).
#[unsafe(no_mangle)]
pub extern "C" fn umq_io_stats_to_str(
    packet_stats: *const umq_packet_stats_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_io_stats_to_str", {
        let Some(k) = crate::ffi::checked(packet_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        let text = table(
            "io packets",
            &[
                ("send_cnt", k.send_cnt),
                ("send_success", k.send_success),
                ("recv_cnt", k.recv_cnt),
                ("send_eagain_cnt", k.send_eagain_cnt),
                ("send_error_cnt", k.send_error_cnt),
                ("recv_error_cnt", k.recv_error_cnt),
                ("recv_duplicate_req_cnt", k.recv_duplicate_req_cnt),
                ("recv_duplicate_rsp_cnt", k.recv_duplicate_rsp_cnt),
            ],
        );
        write_text(&text, buf, max_buf_len)
    })
}

/// The buffer pool's size classes that hold memory, smallest first, as this revision's pools
/// (`SMALL`, `MEDIUM`, `BIG`, `HUGE`, then `GIGANTIC` for the rest): `umqh` 0 the process pool,
/// a queue's handle the queue's shared pool (the process pool where it has none). The pool
/// grows by chunks as it needs and never expands another way, so the expansion figures are
/// zero. The process pool's thread-local pools are its threads' caches (`buf::cache`), one
/// entry a thread and size class it used: a fetch is a refill from the class's free list.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_qbuf_pool_get(
    umqh: u64,
    qbuf_pool_stats: *mut umq_qbuf_pool_stats_t,
) -> c_int {
    ffi_guard!("umq_stats_qbuf_pool_get", {
        let Some(out) = crate::ffi::checked_mut(qbuf_pool_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        let classes = match umqh {
            0 => crate::runtime::require("umq_stats_qbuf_pool_get")
                .map(|rt| (rt.pool.class_stats(None), rt)),
            h => crate::queue::with_queue("umq_stats_qbuf_pool_get", h, |q| {
                Ok((
                    q.rt.pool.class_stats(q.shared_pool().map(|l| &**l)),
                    q.rt.clone(),
                ))
            }),
        };
        let (classes, rt) = match classes {
            Ok(c) => c,
            Err(e) => return e,
        };
        *out = unsafe { std::mem::zeroed() };
        for (i, c) in classes.iter().take(16).enumerate() {
            out.qbuf_pool_info[i] = pool_info(i, c, rt.pool.is_split(), rt.pool.default_headroom);
        }
        out.num = classes.len().min(16) as u32;
        if umqh == 0 {
            let caches = rt.pool.thread_caches();
            let room = out.local_qbuf_pool_stats.len();
            for (slot, c) in out.local_qbuf_pool_stats.iter_mut().zip(&caches) {
                *slot = local_pool(c);
            }
            out.local_qbuf_pool_num = caches.len().min(room) as u32;
        }
        UMQ_SUCCESS
    })
}

/// One thread's cache of one size class as a thread-local pool (`umq_local_qbuf_pool_stats_t`):
/// a "fetch" is a refill from the class's free list.
fn local_pool(c: &crate::buf::pool::ThreadCacheStats) -> umq_local_qbuf_pool_stats_t {
    umq_local_qbuf_pool_stats_t {
        r#type: (c.class as u32).min(UMQ_QBUF_POOL_TYPE_GIGANTIC),
        tid: c.tid,
        capacity_with_data: c.limit,
        buf_cnt_with_data: c.held,
        tls_fetch_cnt_with_data: c.refills,
        tls_fetch_buf_cnt_with_data: c.refilled,
        ..Default::default()
    }
}

/// One size class as a `umq_qbuf_pool_info_t`.
fn pool_info(
    i: usize,
    c: &crate::buf::pool::ClassStats,
    split: bool,
    headroom: u16,
) -> umq_qbuf_pool_info_t {
    let header = crate::buf::pool::HEADER_SIZE as u64;
    let data = c.data_cap as u64;
    let block = if split { data } else { header + data };
    let mut info: umq_qbuf_pool_info_t = unsafe { std::mem::zeroed() };
    info.r#type = (i as u32).min(UMQ_QBUF_POOL_TYPE_GIGANTIC);
    info.mode = if split { 0 } else { 1 };
    info.total_block_num = c.slots;
    info.total_size = c.slots * block;
    info.block_size = block.min(u32::MAX as u64) as u32;
    info.headroom_size = headroom as u32;
    info.data_size = data.min(u32::MAX as u64) as u32;
    info.buf_size = (header + data).min(u32::MAX as u64) as u32;
    info.umq_buf_t_size = header as u32;
    info.available_mem = if split {
        umq_qbuf_pool_available_t {
            split: umq_qbuf_pool_split_t {
                block_num_with_data: c.free,
                size_with_data: c.free * data,
                ..Default::default()
            },
        }
    } else {
        umq_qbuf_pool_available_t {
            combine: umq_qbuf_pool_combine_t {
                block_num_with_data: c.free,
                size_with_data: c.free * block,
            },
        }
    };
    info
}

/// A `umq_qbuf_pool_stats_t` as text (see `umq_stats_perf_to_str` for the return value).
#[unsafe(no_mangle)]
pub extern "C" fn umq_qbuf_pool_stats_to_str(
    qbuf_pool_stats: *const umq_qbuf_pool_stats_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_qbuf_pool_stats_to_str", {
        let Some(s) = crate::ffi::checked(qbuf_pool_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        let mut text = String::from("qbuf pools\ntype  block_size  blocks  free  total_size\n");
        for p in s.qbuf_pool_info.iter().take(s.num.min(16) as usize) {
            let free = unsafe { p.available_mem.combine.block_num_with_data };
            text += &format!(
                "{}  {}  {}  {}  {}\n",
                p.r#type, p.block_size, p.total_block_num, free, p.total_size
            );
        }
        let locals = s
            .local_qbuf_pool_num
            .min(s.local_qbuf_pool_stats.len() as u32);
        if locals > 0 {
            text += "thread-local pools\ntype  tid  capacity  buffers  fetches  fetched\n";
        }
        for l in s.local_qbuf_pool_stats.iter().take(locals as usize) {
            text += &format!(
                "{}  {}  {}  {}  {}  {}\n",
                l.r#type,
                l.tid,
                l.capacity_with_data,
                l.buf_cnt_with_data,
                l.tls_fetch_cnt_with_data,
                l.tls_fetch_buf_cnt_with_data
            );
        }
        write_text(&text, buf, max_buf_len)
    })
}

/// The application's I/O perf callback (`umq_io_perf_callback_register`), 0 when none.
static IO_PERF: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Registers a function the library calls with WRs that carry a user immediate: a TX list
/// holding a SEND_IMM as it is posted (`UMQ_PERF_RECORD_TRANSPORT_POST_SEND`) and when that
/// post is refused for want of credit or room (`_POST_SEND_EAGAIN`), and each SEND_IMM
/// received as it is polled (`_TRANSPORT_POLL_RX`), as the reference calls it. NULL is
/// `-UMQ_ERR_EINVAL`; a second registration replaces the first.
#[unsafe(no_mangle)]
pub extern "C" fn umq_io_perf_callback_register(func: umq_io_perf_callback_t) -> c_int {
    ffi_guard!("umq_io_perf_callback_register", {
        match func {
            None => -UMQ_ERR_EINVAL,
            Some(f) => {
                IO_PERF.store(f as usize, std::sync::atomic::Ordering::Release);
                UMQ_SUCCESS
            }
        }
    })
}

pub(super) fn io_perf_registered() -> bool {
    IO_PERF.load(std::sync::atomic::Ordering::Relaxed) != 0
}

/// Calls the registered I/O perf callback, if any, with `qbuf`.
pub(super) fn io_perf(
    record: umq_perf_record_type_t,
    qbuf: *mut crate::abi::v2026::types::umq_buf_t,
) {
    let f = IO_PERF.load(std::sync::atomic::Ordering::Acquire);
    if f != 0 {
        let f: unsafe extern "C" fn(
            umq_perf_record_type_t,
            *mut crate::abi::v2026::types::umq_buf_t,
        ) = unsafe { std::mem::transmute(f) };
        unsafe { f(record, qbuf) };
    }
}

/// Starts the call trace (`trace`): each thread's post and poll calls recorded in a ring of
/// `cfg->record_num` records (flag `UMQ_TRACE_FLAG_RECORD_NUM`, else 8192) and written to the
/// log at INFO once a second and at the stop, when more than `cfg->output_limit` are new (flag
/// `UMQ_TRACE_FLAG_OUTPUT_LIMIT`, else 0). `-UMQ_ERR_EINVAL` for a NULL `cfg`, a record count of
/// 0, or a trace already running.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_trace_start(cfg: *mut umq_trace_cfg_t) -> c_int {
    ffi_guard!("umq_stats_trace_start", {
        let Some(c) = crate::ffi::checked(cfg) else {
            return einval("umq_stats_trace_start", format_args!("cfg is NULL"));
        };
        let records = (c.flag & UMQ_TRACE_FLAG_RECORD_NUM != 0).then_some(c.record_num);
        let limit = match c.flag & UMQ_TRACE_FLAG_OUTPUT_LIMIT {
            0 => 0,
            _ => c.output_limit,
        };
        match crate::trace::start(records, limit) {
            Ok(()) => UMQ_SUCCESS,
            Err(why) => einval("umq_stats_trace_start", format_args!("{why:?}")),
        }
    })
}

/// Stops the call trace, writing what the log does not have yet; `-UMQ_ERR_EINVAL` when none
/// runs.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_trace_stop() -> c_int {
    ffi_guard!("umq_stats_trace_stop", {
        match crate::trace::stop() {
            Ok(()) => UMQ_SUCCESS,
            Err(why) => einval("umq_stats_trace_stop", format_args!("{why:?}")),
        }
    })
}

/// The transport modes the library serves (every one its devices offer), or why not.
fn transport_mode(func: &str, trans_mode: umq_trans_mode_t) -> Result<(), c_int> {
    if trans_mode >= UMQ_TRANS_MODE_MAX {
        return Err(einval(
            func,
            format_args!("transport mode {trans_mode} is invalid"),
        ));
    }
    Ok(())
}

/// Starts timing the providers' part of posts and polls (`dfx::TransportOp`), forgetting an
/// earlier run's samples. One timing serves every transport mode (the providers are the same).
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_tp_perf_start(trans_mode: umq_trans_mode_t) -> c_int {
    ffi_guard!("umq_stats_tp_perf_start", {
        if let Err(e) = transport_mode("umq_stats_tp_perf_start", trans_mode) {
            return e;
        }
        crate::dfx::tp_perf_switch(true);
        UMQ_SUCCESS
    })
}

/// Stops the provider timing; what it measured stays readable.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_tp_perf_stop(trans_mode: umq_trans_mode_t) -> c_int {
    ffi_guard!("umq_stats_tp_perf_stop", {
        if let Err(e) = transport_mode("umq_stats_tp_perf_stop", trans_mode) {
            return e;
        }
        crate::dfx::tp_perf_switch(false);
        UMQ_SUCCESS
    })
}

/// The provider timing as a table (one row per measured step: samples, mean, min, max, p90,
/// p99, p99.99 in ns), NUL-terminated in `perf_buf`; `*length` gives the buffer's size and is
/// set to the text's length. A buffer too small for the whole table is refused with
/// `-UMQ_ERR_EINVAL` and left as it was, as the reference does.
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_tp_perf_info_get(
    trans_mode: umq_trans_mode_t,
    perf_buf: *mut c_char,
    length: *mut u32,
) -> c_int {
    const F: &str = "umq_stats_tp_perf_info_get";
    ffi_guard!("umq_stats_tp_perf_info_get", {
        if let Err(e) = transport_mode(F, trans_mode) {
            return e;
        }
        let Some(len) = crate::ffi::checked_mut(length).filter(|_| !perf_buf.is_null()) else {
            return einval(F, format_args!("perf_buf or length is NULL"));
        };
        let text = tp_perf_table();
        if (*len as usize) < text.len() + 1 {
            return einval(
                F,
                format_args!(
                    "the table needs {} bytes, the buffer has {}",
                    text.len() + 1,
                    *len
                ),
            );
        }
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), perf_buf as *mut u8, text.len());
            *perf_buf.add(text.len()) = 0;
        }
        *len = text.len() as u32;
        UMQ_SUCCESS
    })
}

/// URMA's table, line for line: its `retry_count` line counts the bonding layer's switches
/// to another path (`urma_ubagg_switch_get`), which applications such as ubs-comm parse as
/// their retransmission count. A binding of this library has one path and never switches, so
/// the count is 0.
fn tp_perf_table() -> String {
    let rule = "+----------------------+----------+----------+----------+----------+----------+----------+----------+\n";
    let mut text = String::from(rule);
    text += &format!("  retry_count: {:<20}\n", 0);
    text += rule;
    text += "  Type                 | samples  | avg[ns]  | min[ns]  | max[ns]  | p90[ns]  | p99[ns]  | p9999[ns]\n";
    text += rule;
    for op in crate::dfx::TransportOp::ALL {
        let s = crate::dfx::tp_perf_summary(op);
        if s.count == 0 {
            continue;
        }
        let q = s.quantiles;
        text += &format!(
            "  {:<20} | {:<8} | {:<8} | {:<8} | {:<8} | {:<8} | {:<8} | {:<8}\n",
            op.name(),
            s.count,
            s.sum / s.count,
            s.min,
            s.max,
            q[1],
            q[2],
            q[3]
        );
    }
    text + rule
}

/// The process's transport pool's counts (any live queue may ask, as in the reference): all
/// zero until a main queue shares its transport. `cache_num` is always 0: no resource waits in
/// a per-thread cache (the reference's default cache size is 0 too).
#[unsafe(no_mangle)]
pub extern "C" fn umq_stats_transport_pool_get(
    umqh: u64,
    umq_transport_pool_stats: *mut umq_transport_pool_stats_t,
) -> c_int {
    const F: &str = "umq_stats_transport_pool_get";
    ffi_guard!("umq_stats_transport_pool_get", {
        crate::ffi::code(
            need_mut(F, "umq_transport_pool_stats", umq_transport_pool_stats).and_then(|out| {
                crate::queue::with_queue(F, umqh, |q| {
                    let s =
                        q.rt.transport_pool_made()
                            .map(|p| p.stats())
                            .unwrap_or_default();
                    *out = umq_transport_pool_stats_t {
                        total_num: s.total,
                        global_num: s.idle,
                        cache_num: 0,
                        in_use_num: s.in_use,
                        error_num: s.err,
                        acc_alloc_num: s.lent,
                        acc_free_num: s.given_back,
                        acc_miss_num: s.missed,
                    };
                    Ok(())
                })
            }),
        )
    })
}

/// A `umq_transport_pool_stats_t` as text (see `umq_stats_perf_to_str` for the return value).
#[unsafe(no_mangle)]
pub extern "C" fn umq_transport_pool_stats_to_str(
    umq_transport_pool_stats: *const umq_transport_pool_stats_t,
    buf: *mut c_char,
    max_buf_len: c_int,
) -> c_int {
    ffi_guard!("umq_transport_pool_stats_to_str", {
        let Some(s) = crate::ffi::checked(umq_transport_pool_stats) else {
            return -UMQ_ERR_EINVAL;
        };
        let text = table(
            "transport pool",
            &[
                ("total_num", s.total_num),
                ("global_num", s.global_num),
                ("cache_num", s.cache_num),
                ("in_use_num", s.in_use_num),
                ("error_num", s.error_num),
                ("acc_alloc_num", s.acc_alloc_num),
                ("acc_free_num", s.acc_free_num),
                ("acc_miss_num", s.acc_miss_num),
            ],
        );
        write_text(&text, buf, max_buf_len)
    })
}
