//! Exports of `umq_api.h`. Unless a comment says otherwise, functions are thread-safe, pointers
//! stay owned by the caller, and failures return a negated `UMQ_ERR_*` (or NULL / 0 with `errno`).
#![allow(clippy::not_unsafe_ptr_arg_deref)]

#[cfg_attr(feature = "abi-2026", allow(unused_imports))]
use super::{checked, code, fd_or_errno, ffi_guard, need, need_mut, or_errno, set_bad, tp_handle};
use crate::abi::errno::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use crate::queue::{self, with_queue};
use std::ffi::{c_int, c_void};

/// Initialises the library once per process: API flavour and features (`feature`), buffer mode and
/// headroom, flow-control settings, transports. A second call without `umq_uninit` returns
/// `-UMQ_ERR_EEXIST`; a NULL or invalid `cfg` returns `-UMQ_ERR_EINVAL`.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_init(cfg: *mut umq_init_cfg_t) -> c_int {
    ffi_guard!("umq_init", {
        code(need("umq_init", "cfg", cfg).and_then(crate::lifecycle::init))
    })
}

/// Destroys every queue and releases all library memory. Buffers the application still holds
/// become invalid. Not to be called concurrently with other UMQ calls.
#[unsafe(no_mangle)]
pub extern "C" fn umq_uninit() {
    ffi_guard!("umq_uninit", { crate::lifecycle::uninit() })
}

/// Creates a queue. Optional fields of `option` count only when their `UMQ_CREATE_FLAG_*` bit is
/// set. Returns the handle, or `UMQ_INVALID_HANDLE` (0) with `errno` set.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_create(option: *mut umq_create_option_t) -> u64 {
    ffi_guard!("umq_create", {
        or_errno(need("umq_create", "option", option).and_then(queue::create))
    })
}

/// Destroys a queue (unbinding it first), after any call other threads are making on it has
/// returned. Buffers it still held return to the pool. The handle is stale afterwards: every
/// call with it fails with `-UMQ_ERR_EINVAL`. `-UMQ_ERR_EBUSY`: called from inside a call on
/// the same queue (a log callback), which would wait for itself.
#[unsafe(no_mangle)]
pub extern "C" fn umq_destroy(umqh: u64) -> c_int {
    ffi_guard!("umq_destroy", { code(queue::destroy(umqh)) })
}

/// Writes the queue's bind information into `bind_info` (at most `bind_info_size` bytes; 512 is
/// always enough) and returns its length, or 0 with `errno` set.
#[unsafe(no_mangle)]
pub extern "C" fn umq_bind_info_get(umqh: u64, bind_info: *mut u8, bind_info_size: u32) -> u32 {
    ffi_guard!("umq_bind_info_get", {
        or_errno(with_queue("umq_bind_info_get", umqh, |q| {
            let info = crate::queue::bind_info::encode(&crate::queue::bind_info::of_queue(q));
            if bind_info.is_null() || (bind_info_size as usize) < info.len() {
                return Err(einval(
                    "umq_bind_info_get",
                    format_args!("buffer NULL or smaller than {} bytes", info.len()),
                ));
            }
            unsafe { std::ptr::copy_nonoverlapping(info.as_ptr(), bind_info, info.len()) };
            Ok(info.len() as u32)
        }))
    })
}

/// Connects the queue to the peer described by `bind_info` (from the peer's `umq_bind_info_get`).
/// Garbage, truncated, foreign or incompatible info returns `-UMQ_ERR_EINVAL`; a queue that is
/// already bound returns `-UMQ_ERR_EEXIST`. Base API: the library posts receive buffers here.
#[unsafe(no_mangle)]
pub extern "C" fn umq_bind(umqh: u64, bind_info: *mut u8, bind_info_size: u32) -> c_int {
    ffi_guard!("umq_bind", {
        code(with_queue("umq_bind", umqh, |q| {
            if bind_info.is_null() {
                return Err(einval("umq_bind", format_args!("bind_info is NULL")));
            }
            let info = unsafe { std::slice::from_raw_parts(bind_info, bind_info_size as usize) };
            q.bind(info)
        }))
    })
}

/// Disconnects the queue. Everything in flight completes with `UMQ_BUF_WR_FLUSH_ERR` (pro API: the
/// application polls those buffers back; base API: the library frees them).
#[unsafe(no_mangle)]
pub extern "C" fn umq_unbind(umqh: u64) -> c_int {
    ffi_guard!("umq_unbind", {
        code(with_queue("umq_unbind", umqh, |q| q.unbind()))
    })
}

/// `QUEUE_STATE_IDLE` (not bound), `QUEUE_STATE_READY` or `QUEUE_STATE_ERR`; a bad handle gives
/// `QUEUE_STATE_MAX` with `errno` = EINVAL.
#[unsafe(no_mangle)]
pub extern "C" fn umq_state_get(umqh: u64) -> umq_state_t {
    ffi_guard!("umq_state_get", {
        match crate::queue::table::with(umqh, |q| q.state()) {
            Some(s) => s,
            None => {
                crate::error::set_errno(-UMQ_ERR_EINVAL);
                QUEUE_STATE_MAX
            }
        }
    })
}

/// Allocates `request_qbuf_num` (1..UMQ_BATCH_SIZE) buffers chained by `qbuf_next`, each with room
/// for `request_size` bytes after the headroom (`option` or the init default). `umqh` 0 uses the
/// global pool. Returns NULL with `errno` on failure. Free with `umq_buf_free`.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_alloc(
    request_size: u32,
    request_qbuf_num: u32,
    umqh: u64,
    option: *mut umq_alloc_option_t,
) -> *mut umq_buf_t {
    ffi_guard!("umq_buf_alloc", {
        or_errno(alloc(request_size, request_qbuf_num, umqh, checked(option)))
    })
}

/// `umq_buf_alloc` of either revision, its option read.
pub(crate) fn alloc(
    size: u32,
    num: u32,
    umqh: u64,
    option: Option<&umq_alloc_option_t>,
) -> UmqResult<*mut umq_buf_t> {
    // A queue's handle selects its shared pool, from the queue's own runtime (looked up like
    // any call on the queue, without a counted reference); 0 the process pool.
    match umqh {
        0 => crate::runtime::with("umq_buf_alloc", |rt| {
            crate::buf::ops::alloc(&rt.pool, size, num, None, 0, option)
        }),
        h => queue::table::with(h, |q| {
            crate::buf::ops::alloc(&q.rt.pool, size, num, q.shared_pool(), h, option)
        })
        .unwrap_or_else(|| match queue::table::made_before_fork(h) {
            true => Err(queue::not_a_queue("umq_buf_alloc", h)),
            false => Err(einval(
                "umq_buf_alloc",
                format_args!("umqh {h:#x} is not a live queue (pass 0 for the global pool)"),
            )),
        }),
    }
}

/// Frees every buffer of the `qbuf_next` list. A foreign pointer or a double free is logged and
/// stops the walk; it never corrupts the pool. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_free(qbuf: *mut umq_buf_t) {
    ffi_guard!("umq_buf_free", {
        if !qbuf.is_null() {
            crate::runtime::with_installed(|rt| crate::buf::ops::free_list(&rt.pool, qbuf));
        }
    })
}

/// Frees the first message of the list (as delimited by `total_data_size`) and returns the first
/// buffer of the next message, or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_break_and_free(qbuf: *mut umq_buf_t) -> *mut umq_buf_t {
    ffi_guard!("umq_buf_break_and_free", {
        or_errno(crate::runtime::with("umq_buf_break_and_free", |rt| {
            crate::buf::ops::break_and_free(&rt.pool, qbuf)
        }))
    })
}

/// Gives every message of the list `headroom_size` bytes before its data: each message's first
/// buffer (`first_fragment`) has `buf_data` moved and `buf_size` set to match, and the message's
/// `total_data_size` is laid out again over its buffers' `data_size` (bytes are not moved).
/// `-UMQ_ERR_EINVAL`, nothing changed, when a buffer is not a live one or a message would need
/// more buffers than before.
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_headroom_reset(qbuf: *mut umq_buf_t, headroom_size: u16) -> c_int {
    ffi_guard!("umq_buf_headroom_reset", {
        code(crate::runtime::with("umq_buf_headroom_reset", |rt| {
            crate::buf::ops::headroom_reset(&rt.pool, qbuf, headroom_size)
        }))
    })
}

/// Restores headroom, `buf_size`, `data_size` and `total_data_size` to their values at allocation.
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_reset(qbuf: *mut umq_buf_t) -> c_int {
    ffi_guard!("umq_buf_reset", {
        code(crate::runtime::with("umq_buf_reset", |rt| {
            crate::buf::ops::reset(&rt.pool, qbuf)
        }))
    })
}

/// The buffer header owning `data` (any address inside a live buffer's data area), or NULL.
#[unsafe(no_mangle)]
pub extern "C" fn umq_data_to_head(data: *mut c_void) -> *mut umq_buf_t {
    ffi_guard!("umq_data_to_head", {
        or_errno(crate::runtime::with("umq_data_to_head", |rt| {
            crate::buf::ops::data_to_head(&rt.pool, data).ok_or_else(|| {
                einval(
                    "umq_data_to_head",
                    format_args!("{data:p} is not inside a live buffer"),
                )
            })
        }))
    })
}

/// Base API: sends the list `qbuf` as one message per WR, split as `umq_post` splits a chain
/// (each first buffer's `total_data_size` says where its message ends; at most
/// `UMQ_BATCH_SIZE` messages). The whole list is taken or none of it; the library frees the
/// buffers of each message when its send completes. On failure `*bad_qbuf` is the list, still
/// owned by the caller, its data and links unchanged (`-UMQ_ERR_EAGAIN`: the send queue lacks
/// room for all of it, retry after `umq_notify`/`umq_dequeue`).
#[unsafe(no_mangle)]
pub extern "C" fn umq_enqueue(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    ffi_guard!("umq_enqueue", {
        let mut bad = std::ptr::null_mut();
        let r = with_queue("umq_enqueue", umqh, |q| {
            if qbuf.is_null() {
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_PARM_INVALID);
                return Err(einval("umq_enqueue", format_args!("qbuf is NULL")));
            }
            let t = crate::dfx::perf_start();
            let r = crate::queue::base::enqueue(q, qbuf, &mut bad);
            crate::dfx::perf_record(|| UMQ_PERF_RECORD_ENQUEUE, t);
            r
        });
        set_bad(
            bad_qbuf,
            if r.is_err() && bad.is_null() {
                qbuf
            } else {
                bad
            },
        );
        code(r)
    })
}

/// Base API: the next received message (a buffer list the caller frees with `umq_buf_free`), or
/// NULL. NULL with errno untouched means nothing has arrived yet, as in the reference: base-API
/// loops test errno after a NULL dequeue. errno is set only for real errors (a bad handle, a
/// pro-API queue, a queue in the error state).
#[unsafe(no_mangle)]
pub extern "C" fn umq_dequeue(umqh: u64) -> *mut umq_buf_t {
    ffi_guard!("umq_dequeue", {
        // The round a dequeue runs makes system calls that may set errno on the way (over the
        // network, libfabric's and a connection's set-up: its socket, looked for among the
        // process's fds, asks `getsockname` of fds that are not sockets), so a NULL for nothing
        // yet puts back the errno the caller had.
        let callers = crate::error::errno();
        let got = with_queue("umq_dequeue", umqh, |q| {
            let t = crate::dfx::perf_start();
            let r = crate::queue::base::dequeue(q)?;
            crate::dfx::perf_record(
                || {
                    if r.is_some() {
                        UMQ_PERF_RECORD_DEQUEUE
                    } else {
                        UMQ_PERF_RECORD_DEQUEUE_EMPTY
                    }
                },
                t,
            );
            Ok(r)
        });
        if matches!(got, Ok(None)) {
            crate::error::restore_errno(callers);
        }
        or_errno(got).unwrap_or(std::ptr::null_mut())
    })
}

/// Base API: reclaims completed sends and pushes waiting messages forward. Pro API: moves flow
/// control and waiting sends along (over shared memory it also takes in the peer's messages).
#[unsafe(no_mangle)]
pub extern "C" fn umq_notify(umqh: u64) {
    ffi_guard!("umq_notify", {
        let _ = with_queue("umq_notify", umqh, |q| crate::queue::base::notify(q));
    })
}

/// Arms the TX or RX completion channel (`option->direction`): its fd becomes readable at the next
/// completion, or at once when completions are already waiting. `solicated` is accepted and
/// treated like a normal arm.
#[unsafe(no_mangle)]
pub extern "C" fn umq_rearm_interrupt(
    umqh: u64,
    solicated: bool,
    option: *mut umq_interrupt_option_t,
) -> c_int {
    let _ = solicated;
    ffi_guard!("umq_rearm_interrupt", {
        code(with_queue("umq_rearm_interrupt", umqh, |q| {
            q.rearm(checked(option), tp_handle(option))
        }))
    })
}

/// Waits for the armed channel: `time_out` in ms, 0 = do not block, -1 = forever. Returns the
/// number of events consumed (0 on timeout) or a negative error. Safe to call from another thread
/// than the one polling.
#[unsafe(no_mangle)]
pub extern "C" fn umq_wait_interrupt(
    wait_umqh: u64,
    time_out: c_int,
    option: *mut umq_interrupt_option_t,
) -> i32 {
    ffi_guard!("umq_wait_interrupt", {
        let Some(q) = crate::queue::table::get(wait_umqh) else {
            return queue::not_a_queue("umq_wait_interrupt", wait_umqh);
        };
        q.wait_interrupt(time_out, checked(option), tp_handle(option))
            .unwrap_or_else(|e| e)
    })
}

/// Acknowledges `nevents` handled events of the channel.
#[unsafe(no_mangle)]
pub extern "C" fn umq_ack_interrupt(umqh: u64, nevents: u32, option: *mut umq_interrupt_option_t) {
    ffi_guard!("umq_ack_interrupt", {
        let _ = with_queue("umq_ack_interrupt", umqh, |q| {
            q.ack_interrupt(nevents, checked(option), tp_handle(option))
        });
    })
}

/// Runs a diagnostics command (stats or perf: start, stop, clear, get result). `result_ctl->err_code`
/// is 0 or a negative error; result pointers refer to library memory valid until the next
/// GET_RESULT of that module or `umq_uninit`.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_dfx_cmd_process(cmd: *mut umq_dfx_cmd_t, result_ctl: *mut umq_dfx_result_t) {
    ffi_guard!("umq_dfx_cmd_process", {
        let (Some(cmd), Some(result)) = (checked(cmd), super::checked_mut(result_ctl)) else {
            crate::log_err!("umq_dfx_cmd_process", "cmd or result_ctl is NULL");
            return;
        };
        crate::dfx::process(cmd, result, &crate::queue::stats::AllQueues)
    })
}

/// Cuts the list `head` just before `node` (which must be in the list and not be `head`).
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_split(head: *mut umq_buf_t, node: *mut umq_buf_t) -> c_int {
    ffi_guard!("umq_buf_split", {
        if head.is_null() || node.is_null() {
            return einval("umq_buf_split", format_args!("head or node is NULL"));
        }
        code(crate::buf::ops::split(head, node))
    })
}

/// An fd that is readable while async events (queue errors, ...) are pending; `UMQ_INVALID_FD`
/// with errno set on error.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_async_event_fd_get(trans_info: *mut umq_trans_info_t) -> c_int {
    ffi_guard!("umq_async_event_fd_get", {
        async_event_fd(!trans_info.is_null())
    })
}

/// `umq_async_event_fd_get` of either revision, once it knows whether a trans info was given.
pub(crate) fn async_event_fd(trans_info_given: bool) -> c_int {
    const F: &str = "umq_async_event_fd_get";
    let r: UmqResult<i32> = if trans_info_given {
        crate::runtime::require(F).map(|rt| rt.events.fd())
    } else {
        Err(einval(F, format_args!("trans_info is NULL")))
    };
    fd_or_errno(r)
}

/// `umq_get_async_event` of either revision: the next pending event (`-UMQ_ERR_EAGAIN` when
/// none), once the caller checked its trans info.
pub(crate) fn next_async_event(trans_info_given: bool) -> UmqResult<umq_async_event_t> {
    const F: &str = "umq_get_async_event";
    if !trans_info_given {
        return Err(einval(F, format_args!("trans_info is NULL")));
    }
    crate::runtime::require(F)?
        .events
        .next()
        .ok_or(-UMQ_ERR_EAGAIN)
}

/// Takes one pending async event into `*event`; `-UMQ_ERR_EAGAIN` when none is pending.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_get_async_event(
    trans_info: *mut umq_trans_info_t,
    event: *mut umq_async_event_t,
) -> c_int {
    ffi_guard!("umq_get_async_event", {
        code((|| {
            let out = need_mut("umq_get_async_event", "event", event)?;
            *out = next_async_event(!trans_info.is_null())?;
            Ok(())
        })())
    })
}

/// Acknowledges an event obtained from `umq_get_async_event` (nothing to release here).
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_ack_async_event(event: *mut umq_async_event_t) {
    let _ = event;
}

/// Sets the log callback (`UMQ_LOG_FLAG_FUNC`; NULL restores stderr), the level and the rate limit
/// (at most `num` lines per `interval_ms`). `UMQ_LOG_LEVEL` in the environment sets the initial level.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_log_config_set(config: *mut umq_log_config_t) -> c_int {
    ffi_guard!("umq_log_config_set", {
        code(need("umq_log_config_set", "config", config).and_then(crate::log::set_config))
    })
}

/// Reads the current log configuration.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_log_config_get(config: *mut umq_log_config_t) -> c_int {
    ffi_guard!("umq_log_config_get", {
        code(
            need_mut("umq_log_config_get", "config", config).map(|c| *c = crate::log::get_config()),
        )
    })
}

/// Registers a device after init. The address is validated; the loopback transport needs no
/// device, so on a host without UB/IB hardware this only records it.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_dev_add(trans_info: *mut umq_trans_info_t) -> c_int {
    ffi_guard!("umq_dev_add", {
        code((|| {
            let t = need("umq_dev_add", "trans_info", trans_info)?;
            crate::runtime::require("umq_dev_add")?;
            crate::queue::config::check_trans_info("umq_dev_add", t)
        })())
    })
}

/// Route discovery. Without a UB fabric there is exactly one route, direct: `route_list->len` = 1
/// with `buf[0]` = {src, dst, flag.rtp = 1, hops = 0}.
#[cfg(not(feature = "abi-2026"))]
#[unsafe(no_mangle)]
pub extern "C" fn umq_get_route_list(
    route: *const umq_route_t,
    umq_trans_mode: umq_trans_mode_t,
    route_list: *mut umq_route_list_t,
) -> c_int {
    ffi_guard!("umq_get_route_list", {
        code((|| {
            let r = need("umq_get_route_list", "route", route)?;
            let list = need_mut("umq_get_route_list", "route_list", route_list)?;
            if umq_trans_mode >= UMQ_TRANS_MODE_MAX {
                return Err(einval(
                    "umq_get_route_list",
                    format_args!("trans mode {umq_trans_mode} out of range"),
                ));
            }
            list.len = 1;
            list.buf[0] = umq_route_t {
                src: r.src,
                dst: r.dst,
                flag: umq_route_flag_t { value: 1 },
                hops: 0,
            };
            Ok(())
        })())
    })
}

/// Control channel. `UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY`: fills the `umq_flowcontrol_stats_t` at
/// `out->addr`, which must be non-NULL with `out->len == sizeof(umq_flowcontrol_stats_t)`. Anything
/// else, or a bad handle, returns `-UMQ_ERR_EINVAL`.
#[unsafe(no_mangle)]
pub extern "C" fn umq_user_ctl(
    umqh: u64,
    r#in: *mut umq_user_ctl_in_t,
    out: *mut umq_user_ctl_out_t,
) -> c_int {
    ffi_guard!("umq_user_ctl", {
        code(with_queue("umq_user_ctl", umqh, |q| {
            let i = need("umq_user_ctl", "in", r#in)?;
            let o = need("umq_user_ctl", "out", out)?;
            crate::queue::ctl::user_ctl(q, i, o)
        }))
    })
}
