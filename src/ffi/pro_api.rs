//! Exports of `umq_pro_api.h`: posting work requests and polling their completions.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::{checked, fd_or_errno, ffi_guard, set_bad, tp_handle};
use crate::abi::errno::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use crate::queue::{Queue, Quick, with_queue};
use crate::trace::Call;
use crate::transport::spin::SpinGuard;
use crate::transport::wired::Wired;
use std::ffi::c_int;
use std::sync::Arc;

/// Posts tx WRs (`UMQ_IO_TX`; each first buffer's `total_data_size` says where its WR ends, and
/// the list's `qbuf_next` links are left as they are, so the same list can be posted again once
/// its completions are polled) or receive buffers (`UMQ_IO_RX`; one buffer each, and each
/// posted buffer's `qbuf_next` is set to NULL, as the reference does), at most `UMQ_BATCH_SIZE`
/// per call (more, or an invalid WR anywhere in the list: `-UMQ_ERR_EINVAL`, nothing posted).
/// On failure `*bad_qbuf` is the first buffer not posted; it and the rest of its list still
/// belong to the caller.
/// `-UMQ_ERR_EAGAIN`: queue full, poll and retry. Posted buffers belong to the library until
/// `umq_poll` returns them.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_post(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    ffi_guard!("umq_post", { post(umqh, qbuf, io_direction, bad_qbuf) })
}

/// `umq_post` of either revision. Each direction runs its own copy of the path, compiled with
/// the direction known. A C program's direction is a value at run time: one path for both,
/// its closure shared and called, had cost a 64 B loopback ping-pong through `libumq.so` 99
/// instructions a message of its posts and polls (1,006 against 907, flow control off). A
/// program that links the crate, as umq-perf does, has the direction folded in by inlining.
pub(crate) fn post(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    match io_direction {
        UMQ_IO_TX => post_in::<UMQ_IO_TX>(umqh, qbuf, io_direction, bad_qbuf),
        UMQ_IO_RX => post_in::<UMQ_IO_RX>(umqh, qbuf, io_direction, bad_qbuf),
        _ => post_refused(umqh, qbuf, io_direction, bad_qbuf),
    }
}

/// A post in neither direction: the queue's own checks refuse it, as for any other post.
#[cold]
#[inline(never)]
fn post_refused(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    post_in::<ANY_DIRECTION>(umqh, qbuf, io_direction, bad_qbuf)
}

/// `DIR` for a path compiled for whatever direction it is given.
const ANY_DIRECTION: umq_io_direction_t = umq_io_direction_t::MAX;

/// The direction a path of `DIR` runs: `DIR` itself, known where it is compiled (each `DIR` is a
/// copy of the path, its closures types of their own), or the one given for `ANY_DIRECTION`.
#[inline(always)]
fn direction<const DIR: umq_io_direction_t>(given: umq_io_direction_t) -> umq_io_direction_t {
    if DIR == ANY_DIRECTION { given } else { DIR }
}

/// Whether calls are timed (the perf statistics) or traced (the call trace): posts and polls
/// then take their observed copies, out of line. The usual copies carry neither a start time
/// nor a trace record through the call, where keeping both alive around the queue's work had
/// cost a 64 B round trip's eight calls 96 instructions through `libumq.so` on loopback and 132
/// over shared memory (23 and 29 in umq-perf's build, which inlines more).
#[inline(always)]
fn observed() -> bool {
    crate::dfx::perf_on() || crate::trace::on()
}

#[inline(always)]
fn post_in<const DIR: umq_io_direction_t>(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    if observed() {
        return post_observed::<DIR>(umqh, qbuf, io_direction, bad_qbuf);
    }
    post_as::<DIR, false>(umqh, qbuf, io_direction, bad_qbuf)
}

#[cold]
#[inline(never)]
fn post_observed<const DIR: umq_io_direction_t>(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    post_as::<DIR, true>(umqh, qbuf, io_direction, bad_qbuf)
}

/// A post, timed and traced when `OBSERVED` (and the perf statistics or the trace are on).
#[inline(always)]
fn post_as<const DIR: umq_io_direction_t, const OBSERVED: bool>(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    io_direction: umq_io_direction_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    let io_direction = direction::<DIR>(io_direction);
    let mut bad = std::ptr::null_mut();
    // Read before the post hands the buffers on.
    let traced = (OBSERVED && crate::trace::on()).then(|| trace_post_begins(qbuf));
    let r = with_queue("umq_post", umqh, |q| {
        if qbuf.is_null() {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POST_PARM_INVALID);
            return Err(einval("umq_post", format_args!("qbuf is NULL")));
        }
        let t = if OBSERVED {
            crate::dfx::perf_start()
        } else {
            None
        };
        let r = q.post(qbuf, io_direction, &mut bad);
        crate::dfx::perf_record(
            || {
                if io_direction == UMQ_IO_TX {
                    UMQ_PERF_RECORD_POST_TX
                } else {
                    UMQ_PERF_RECORD_POST_RX
                }
            },
            t,
        );
        r
    });
    if let Some(t) = traced {
        trace_post_ends(umqh, t);
    }
    match r {
        // As the reference: NULL after a post that took everything.
        Ok(()) => {
            set_bad(bad_qbuf, std::ptr::null_mut());
            UMQ_SUCCESS
        }
        Err(e) => post_refused_at(bad_qbuf, qbuf, bad, e),
    }
}

/// A refused post's result: `bad_qbuf` names the first buffer not taken (`bad`, or the whole
/// list's head where the post named none). Out of line: a post that took everything computed
/// this choice for nothing, about nine instructions a post.
#[cold]
#[inline(never)]
fn post_refused_at(
    bad_qbuf: *mut *mut umq_buf_t,
    qbuf: *mut umq_buf_t,
    bad: *mut umq_buf_t,
    e: c_int,
) -> c_int {
    set_bad(bad_qbuf, if bad.is_null() { qbuf } else { bad });
    e
}

/// A post the call trace records: when it began and its buffers' sizes, read before the post
/// hands them on.
struct TracedPost {
    began: std::time::Instant,
    sizes: Vec<u32>,
}

#[cold]
#[inline(never)]
fn trace_post_begins(mut qbuf: *mut umq_buf_t) -> TracedPost {
    let began = std::time::Instant::now();
    let mut sizes = Vec::new();
    // A list longer than a batch of the largest WRs stops there (the post refuses it).
    while let Some(b) = unsafe { qbuf.as_ref() } {
        if sizes.len() == crate::limits::BATCH as usize * crate::limits::MAX_SGE {
            break;
        }
        sizes.push(b.data_size);
        qbuf = b.qbuf_next;
    }
    TracedPost { began, sizes }
}

#[cold]
#[inline(never)]
fn trace_post_ends(umqh: u64, t: TracedPost) {
    crate::trace::record(Call::Post, umq_id(umqh), t.began, t.sizes.into_iter());
}

#[cold]
#[inline(never)]
fn trace_poll(umqh: u64, began: std::time::Instant, polled: &[*mut umq_buf_t]) {
    let sizes = polled.iter().map(|&b| unsafe { (*b).data_size });
    crate::trace::record(Call::Poll, umq_id(umqh), began, sizes);
}

/// The queue's id in the call trace: its slot in the handle table (u32::MAX for a handle
/// that names none).
fn umq_id(umqh: u64) -> u32 {
    crate::queue::table::index_of(umqh).map_or(u32::MAX, |i| i as u32)
}

/// Polls up to `max_buf_count` completions of `UMQ_IO_TX`, `UMQ_IO_RX` or `UMQ_IO_ALL` into `buf`.
/// Returns how many (>= 0) or a negative error. Each returned buffer heads one WR: its `status`,
/// `qbuf_ext` (`user_ctx`, `imm_data`, opcode) and, for receives, `data_size` are set; a sent
/// WR's `qbuf_next` is what the caller posted, a receive's is NULL. On a queue of a base-API
/// process (no `UMQ_FEATURE_API_PRO`) it returns 0: the library reaps those completions itself.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
#[inline(never)]
pub extern "C" fn umq_poll(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    poll(umqh, io_direction, buf, max_buf_count)
}

/// The application's array for a poll's buffers: EINVAL for none.
#[inline(always)]
fn poll_out<'a>(
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> UmqResult<&'a mut [*mut umq_buf_t]> {
    if buf.is_null() || max_buf_count == 0 {
        crate::dfx::count_err(UMQ_ERR_STATS_TYPE_POLL_PARM_INVALID);
        return Err(einval(
            "umq_poll",
            format_args!("buf is NULL or max_buf_count is 0"),
        ));
    }
    // SAFETY: the caller gave room for max_buf_count buffers. A poll returns at most what its
    // queue holds (depths are at most `MAX_DEPTH`), so its count fits the int it returns
    // whatever the room.
    const { assert!(2 * crate::limits::MAX_DEPTH as u64 <= i32::MAX as u64) };
    Ok(unsafe { std::slice::from_raw_parts_mut(buf, max_buf_count as usize) })
}

/// `umq_poll` of either revision; each direction its own copy of the path, as for `post`.
/// Each path catches its own panics. They are C functions, entered by a jump from the export:
/// a function of Rust's calling convention is entered by a call, with a frame for it.
#[inline(always)]
pub(crate) fn poll(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    // Decided here, where deciding takes no frame: a function's frame is set up on entry,
    // before any test of its own. A receive poll through a link has a round to run, which
    // the quick look would only add to; a timed or traced poll takes the whole path.
    if observed() {
        return poll_observed_entry(umqh, io_direction, buf, max_buf_count);
    }
    match io_direction {
        UMQ_IO_TX => poll_one::<UMQ_IO_TX>(umqh, io_direction, buf, max_buf_count),
        UMQ_IO_RX if crate::queue::any_linked() => {
            poll_whole::<UMQ_IO_RX>(umqh, io_direction, buf, max_buf_count)
        }
        UMQ_IO_RX => poll_one::<UMQ_IO_RX>(umqh, io_direction, buf, max_buf_count),
        _ => poll_all_or_refused(umqh, io_direction, buf, max_buf_count),
    }
}

/// A poll of both directions (`UMQ_IO_ALL`), or of none (refused by the queue's checks).
#[inline(never)]
extern "C" fn poll_all_or_refused(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    ffi_guard!("umq_poll", {
        poll_as::<ANY_DIRECTION, false>(umqh, io_direction, buf, max_buf_count)
    })
}

/// A poll of one direction: the queue's quick look (`Queue::poll_quick`) first, which
/// answers most polls of a ping-pong or a stream, and the whole poll of the same queue, under
/// the lock the look took, for the rest (`poll_held`). A poll the look answers pays this
/// function's frame, not the whole poll's: a 64 B loopback ping-pong's send poll 15
/// instructions less, its receive poll 10.
#[inline(never)]
extern "C" fn poll_one<const DIR: umq_io_direction_t>(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    if buf.is_null() || max_buf_count == 0 {
        return poll_whole::<DIR>(umqh, io_direction, buf, max_buf_count);
    }
    ffi_guard!("umq_poll", {
        with_queue(
            "umq_poll",
            umqh,
            #[inline(always)]
            |q| {
                // SAFETY: `buf` is not NULL, and the caller gave room for max_buf_count.
                let out = unsafe { std::slice::from_raw_parts_mut(buf, max_buf_count as usize) };
                Ok(match q.poll_quick::<DIR>(out) {
                    Quick::Took(n) => n as c_int,
                    Quick::Not(Some(w)) => poll_held::<DIR>(q, w, buf, max_buf_count),
                    Quick::Not(None) => poll_on_queue::<DIR>(q, umqh, buf, max_buf_count),
                })
            },
        )
        .unwrap_or_else(|e| e)
    })
}

/// A poll of one direction without the quick look, neither timed nor traced.
#[inline(never)]
extern "C" fn poll_whole<const DIR: umq_io_direction_t>(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    ffi_guard!("umq_poll", {
        poll_as::<DIR, false>(umqh, io_direction, buf, max_buf_count)
    })
}

/// A poll that is timed or traced, of any direction.
#[cold]
#[inline(never)]
extern "C" fn poll_observed_entry(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    ffi_guard!("umq_poll", {
        match io_direction {
            UMQ_IO_TX => poll_as::<UMQ_IO_TX, true>(umqh, io_direction, buf, max_buf_count),
            UMQ_IO_RX => poll_as::<UMQ_IO_RX, true>(umqh, io_direction, buf, max_buf_count),
            _ => poll_as::<ANY_DIRECTION, true>(umqh, io_direction, buf, max_buf_count),
        }
    })
}

/// The whole poll of `q`, under `w`, its wire's lock, which the quick look held for it.
#[inline(never)]
fn poll_held<const DIR: umq_io_direction_t>(
    q: &Queue,
    w: SpinGuard<'_, Wired>,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    // SAFETY: `poll_one` found `buf` not NULL, and the caller gave room for max_buf_count.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, max_buf_count as usize) };
    q.poll_plain(w, DIR, out) as c_int
}

/// The whole poll of `q`, whose quick look could not take its lock.
#[inline(never)]
fn poll_on_queue<const DIR: umq_io_direction_t>(
    q: &Arc<Queue>,
    umqh: u64,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    poll_queue::<false>(q, umqh, DIR, buf, max_buf_count).unwrap_or_else(|e| e)
}

/// A poll, timed and traced when `OBSERVED` (and the perf statistics or the trace are on).
#[inline(always)]
fn poll_as<const DIR: umq_io_direction_t, const OBSERVED: bool>(
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    let io_direction = direction::<DIR>(io_direction);
    let r = with_queue("umq_poll", umqh, |q| {
        poll_queue::<OBSERVED>(q, umqh, io_direction, buf, max_buf_count)
    });
    r.unwrap_or_else(|e| e)
}

/// The poll of `q`, the queue `umqh` names.
#[inline(always)]
fn poll_queue<const OBSERVED: bool>(
    q: &Arc<Queue>,
    umqh: u64,
    io_direction: umq_io_direction_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> UmqResult<i32> {
    let out = poll_out(buf, max_buf_count)?;
    let t = if OBSERVED {
        crate::dfx::perf_start()
    } else {
        None
    };
    let traced = (OBSERVED && crate::trace::on()).then(std::time::Instant::now);
    let n = q.poll(io_direction, out)?;
    if let Some(began) = traced {
        trace_poll(umqh, began, &out[..n]);
    }
    let kind = || match (io_direction, n) {
        (UMQ_IO_TX, 0) => UMQ_PERF_RECORD_POLL_TX_EMPTY,
        (UMQ_IO_TX, _) => UMQ_PERF_RECORD_POLL_TX,
        (UMQ_IO_RX, 0) => UMQ_PERF_RECORD_POLL_RX_EMPTY,
        (UMQ_IO_RX, _) => UMQ_PERF_RECORD_POLL_RX,
        (_, 0) => UMQ_PERF_RECORD_POLL_ALL_EMPTY,
        _ => UMQ_PERF_RECORD_POLL_ALL,
    };
    crate::dfx::perf_record(kind, t);
    Ok(n as i32)
}

/// `poll` naming a transport resource (`Queue::poll_pooled`; the July 2026 revision's).
#[cfg(feature = "abi-2026")]
pub(crate) fn poll_pooled(
    umqh: u64,
    io_direction: umq_io_direction_t,
    tp_handle_idx: u32,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    with_queue("umq_poll", umqh, |q| {
        let out = poll_out(buf, max_buf_count)?;
        Ok(q.poll_pooled(io_direction, tp_handle_idx, out)? as i32)
    })
    .unwrap_or_else(|e| e)
}

/// The fd of the TX or RX completion channel (`option->direction`) of an interrupt-mode queue,
/// for poll/epoll; `UMQ_INVALID_FD` with errno set on error. The fd belongs to the queue: do not close it.
#[unsafe(no_mangle)]
pub extern "C" fn umq_interrupt_fd_get(umqh: u64, option: *mut umq_interrupt_option_t) -> c_int {
    ffi_guard!("umq_interrupt_fd_get", {
        fd_or_errno(with_queue(
            "umq_interrupt_fd_get",
            umqh,
            |q| match super::fd_type(option) {
                0 => q.interrupt_fd(checked(option), tp_handle(option)),
                t => q.flow_control_fd(t),
            },
        ))
    })
}

/// Consumes the channel's pending events without blocking; returns how many (0 if none) or a
/// negative error.
#[unsafe(no_mangle)]
pub extern "C" fn umq_get_cq_event(umqh: u64, option: *mut umq_interrupt_option_t) -> c_int {
    ffi_guard!("umq_get_cq_event", {
        with_queue("umq_get_cq_event", umqh, |q| {
            q.get_cq_event(checked(option), tp_handle(option))
        })
        .unwrap_or_else(|e| e)
    })
}
