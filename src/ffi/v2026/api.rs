//! Exports of the July 2026 `umq_api.h` whose ABI differs from December's, and its new ones.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use super::convert;
use crate::abi::v2026::errno::*;
use crate::abi::v2026::types::*;
use crate::error::{UmqResult, einval};
use crate::ffi::{checked, code, ffi_guard, need, need_mut, or_errno};
use crate::queue::{self, with_queue};
use std::ffi::{c_char, c_int};
use std::sync::atomic::{AtomicUsize, Ordering};

/// `UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS` as `umq_init` was given it (the queue layer allows
/// one-sided access whatever the features say; `umq_mempool_state_refresh` asks for it).
static REMOTE_MEM_ACCESS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The transport modes the application enabled, a bit each: every entry of `umq_init`'s
/// `trans_info`, DUMMY ones included (they name a mode without a device, which the application
/// then adds with `umq_dev_add`, as openEuler's ubs-comm does), and each `umq_dev_add`.
static ENABLED_MODES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

fn enable_mode(mode: umq_trans_mode_t) {
    if mode < UMQ_TRANS_MODE_MAX {
        ENABLED_MODES.fetch_or(1 << mode, Ordering::AcqRel);
    }
}

/// Initialises the library once per process (see the December `umq_init`). Device names in
/// `trans_info` are the host's interfaces (`lo`, `eth0`, ...) and their EID indices its
/// addresses; DUMMY entries enable their transport mode without a device. `-UMQ_ERR_EEXIST`
/// when already initialised.
#[unsafe(no_mangle)]
pub extern "C" fn umq_init(cfg: *mut umq_init_cfg_t) -> c_int {
    ffi_guard!("umq_init", {
        code(need("umq_init", "cfg", cfg).and_then(|c| {
            crate::lifecycle::init_with_credit(
                &*convert::init_cfg(c)?,
                Some(convert::credit_knobs(c)),
                c.tp_pool_cfg.notify_threshold,
            )?;
            let on = c.feature & UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS != 0;
            REMOTE_MEM_ACCESS.store(on, Ordering::Relaxed);
            let n = (c.trans_info_num as usize).min(c.trans_info.len());
            ENABLED_MODES.store(0, Ordering::Release);
            c.trans_info[..n]
                .iter()
                .for_each(|t| enable_mode(t.trans_mode));
            Ok(())
        }))
    })
}

/// Creates a queue; the optional fields count when their `UMQ_CREATE_FLAG_*` bit is set. The
/// transport mode and type, priority and `umq_ctx` are kept for `umq_cfg_get`, and `umq_ctx`
/// tags every message the queue receives. `MAIN_UMQ` makes a queue whose receive queue
/// sub-queues (`SHARE_RQ | SUB_UMQ` with `share_rq_umqh`) share (`queue::share`); transport
/// pools are refused with EINVAL.
#[unsafe(no_mangle)]
pub extern "C" fn umq_create(option: *mut umq_create_option_t) -> u64 {
    ffi_guard!("umq_create", {
        or_errno(
            need("umq_create", "option", option)
                .and_then(convert::create_option)
                .and_then(|(o, extras)| queue::create_with(&o, extras)),
        )
    })
}

/// Moves a queue to `QUEUE_STATE_ERR` (the only state an application may set, as in the
/// reference): its WRs are flushed and `UMQ_EVENT_QH_ERR` is raised. Setting it again succeeds.
#[unsafe(no_mangle)]
pub extern "C" fn umq_state_set(umqh: u64, state: umq_state_t) -> c_int {
    ffi_guard!("umq_state_set", {
        code(with_queue("umq_state_set", umqh, |q| {
            if state != QUEUE_STATE_ERR {
                return Err(einval(
                    "umq_state_set",
                    format_args!("state {state}: only QUEUE_STATE_ERR can be set"),
                ));
            }
            q.set_error("the application set the error state (umq_state_set)");
            Ok(())
        }))
    })
}

/// Allocates buffers (see the December `umq_buf_alloc`; batches of up to 256). Every pool type
/// of `UMQ_ALLOC_FLAG_POOL_TYPE` is served by the one pool, which sizes buffers by request.
#[unsafe(no_mangle)]
pub extern "C" fn umq_buf_alloc(
    request_size: u32,
    request_qbuf_num: u32,
    umqh: u64,
    option: *mut umq_alloc_option_t,
) -> *mut umq_buf_t {
    ffi_guard!("umq_buf_alloc", {
        let option = checked(option);
        if let Some(o) = option {
            let known = UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE | UMQ_ALLOC_FLAG_POOL_TYPE;
            let bad_type =
                o.flag & UMQ_ALLOC_FLAG_POOL_TYPE != 0 && o.pool_type >= UMQ_ALLOC_POOL_MAX;
            if o.flag & !known != 0 || bad_type {
                crate::error::set_errno(einval(
                    "umq_buf_alloc",
                    format_args!(
                        "option flag {:#x} / pool_type {} invalid",
                        o.flag, o.pool_type
                    ),
                ));
                return std::ptr::null_mut();
            }
        }
        let dec = option.map(|o| crate::abi::types::umq_alloc_option_t {
            flag: o.flag & UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE,
            headroom_size: o.headroom_size,
        });
        let r = crate::ffi::api::alloc(request_size, request_qbuf_num, umqh, dec.as_ref());
        or_errno(r) as *mut umq_buf_t
    })
}

/// An fd that is readable while async events are pending; `UMQ_INVALID_FD` with errno set.
#[unsafe(no_mangle)]
pub extern "C" fn umq_async_event_fd_get(trans_info: *mut umq_trans_info_t) -> c_int {
    ffi_guard!("umq_async_event_fd_get", {
        crate::ffi::api::async_event_fd(!trans_info.is_null())
    })
}

/// Takes one pending async event into `*event`; `-UMQ_ERR_EAGAIN` when none is pending.
#[unsafe(no_mangle)]
pub extern "C" fn umq_get_async_event(
    trans_info: *mut umq_trans_info_t,
    event: *mut umq_async_event_t,
) -> c_int {
    ffi_guard!("umq_get_async_event", {
        code((|| {
            let out = need_mut("umq_get_async_event", "event", event)?;
            *out = convert::async_event(&crate::ffi::api::next_async_event(!trans_info.is_null())?);
            Ok(())
        })())
    })
}

/// Acknowledges an event obtained from `umq_get_async_event` (nothing to release here).
#[unsafe(no_mangle)]
pub extern "C" fn umq_ack_async_event(event: *mut umq_async_event_t) {
    let _ = event;
}

/// The `ext_func` of `UMQ_LOG_FLAG_EXT_FUNC`, called through `ext_trampoline`.
static EXT_FUNC: AtomicUsize = AtomicUsize::new(0);

/// The log sink installed for an `ext_func`: it passes the line on with the library's name as
/// the file and no function or line (the library's lines name their function in the text).
unsafe extern "C" fn ext_trampoline(level: c_int, log_msg: *mut c_char) {
    let f = EXT_FUNC.load(Ordering::Acquire);
    if f != 0 {
        let f: unsafe extern "C" fn(c_int, *const c_char, *const c_char, c_int, *mut c_char) =
            unsafe { std::mem::transmute(f) };
        unsafe { f(level, c"libumq".as_ptr(), c"".as_ptr(), 0, log_msg) };
    }
}

/// Sets the log sink (`UMQ_LOG_FLAG_FUNC`, or `UMQ_LOG_FLAG_EXT_FUNC` for a sink that takes a
/// file, function and line), the level and the rate limit.
#[unsafe(no_mangle)]
pub extern "C" fn umq_log_config_set(config: *mut umq_log_config_t) -> c_int {
    ffi_guard!("umq_log_config_set", {
        code(need("umq_log_config_set", "config", config).and_then(|c| {
            let mut dec = crate::abi::types::umq_log_config_t {
                log_flag: c.log_flag
                    & (UMQ_LOG_FLAG_FUNC | UMQ_LOG_FLAG_LEVEL | UMQ_LOG_FLAG_RATE_LIMITED),
                func: c.func,
                level: c.level,
                rate_limited: crate::abi::types::umq_log_rate_limit_t {
                    interval_ms: c.rate_limited.interval_ms,
                    num: c.rate_limited.num,
                },
            };
            if c.log_flag & UMQ_LOG_FLAG_EXT_FUNC != 0 {
                EXT_FUNC.store(c.ext_func.map_or(0, |f| f as usize), Ordering::Release);
                dec.log_flag |= UMQ_LOG_FLAG_FUNC;
                dec.func = c.ext_func.map(|_| ext_trampoline as _);
            }
            crate::log::set_config(&dec)
        }))
    })
}

/// Reads the current log configuration.
#[unsafe(no_mangle)]
pub extern "C" fn umq_log_config_get(config: *mut umq_log_config_t) -> c_int {
    ffi_guard!("umq_log_config_get", {
        code(need_mut("umq_log_config_get", "config", config).map(|c| {
            let dec = crate::log::get_config();
            let trampoline = dec
                .func
                .is_some_and(|f| f as usize == ext_trampoline as *const () as usize);
            let ext = EXT_FUNC.load(Ordering::Acquire);
            *c = umq_log_config_t {
                log_flag: dec.log_flag,
                func: if trampoline { None } else { dec.func },
                ext_func: (trampoline && ext != 0).then(|| unsafe { std::mem::transmute(ext) }),
                level: dec.level,
                rate_limited: umq_log_rate_limit_t {
                    interval_ms: dec.rate_limited.interval_ms,
                    num: dec.rate_limited.num,
                },
            };
        }))
    })
}

/// Registers a device after init: its name or address is checked against the host's.
#[unsafe(no_mangle)]
pub extern "C" fn umq_dev_add(trans_info: *mut umq_trans_info_t) -> c_int {
    ffi_guard!("umq_dev_add", {
        code((|| {
            let t = need("umq_dev_add", "trans_info", trans_info)?;
            crate::runtime::require("umq_dev_add")?;
            convert::trans_info("umq_dev_add", t)?;
            enable_mode(t.trans_mode);
            Ok(())
        })())
    })
}

/// Routes between two EIDs. Without a UB fabric there is one, direct: `route_num` 1, both
/// ports 0, one chip and die, the EIDs as asked.
#[unsafe(no_mangle)]
pub extern "C" fn umq_get_route_list(
    route_key: *const umq_route_key_t,
    umq_trans_mode: umq_trans_mode_t,
    route_list: *mut umq_route_list_t,
) -> c_int {
    ffi_guard!("umq_get_route_list", {
        code((|| {
            let key = need("umq_get_route_list", "route_key", route_key)?;
            let list = need_mut("umq_get_route_list", "route_list", route_list)?;
            require_mode("umq_get_route_list", umq_trans_mode)?;
            *list = unsafe { std::mem::zeroed() };
            list.topo_type = UMQ_TOPO_TYPE_FULLMESH_1D;
            (list.chip_num, list.die_num, list.route_num) = (1, 1, 1);
            list.routes[0] = umq_route_t {
                src_port: umq_port_id_t { value: 0 },
                dst_port: umq_port_id_t { value: 0 },
                src_eid: key.src_bonding_eid,
                dst_eid: key.dst_bonding_eid,
            };
            Ok(())
        })())
    })
}

/// A transport mode the application enabled (`ENABLED_MODES`), as the reference requires of
/// its device calls.
fn require_mode(func: &str, mode: umq_trans_mode_t) -> UmqResult<()> {
    crate::runtime::require(func)?;
    let enabled = ENABLED_MODES.load(Ordering::Acquire);
    if mode >= UMQ_TRANS_MODE_MAX || enabled & (1 << mode) == 0 {
        return Err(einval(
            func,
            format_args!("trans mode {mode} was given neither to umq_init nor to umq_dev_add"),
        ));
    }
    Ok(())
}

/// Fills `out` with a device: its name, mode and EIDs (index i at position i).
fn fill_dev_info(out: &mut umq_dev_info_t, d: &crate::devices::Device, mode: umq_trans_mode_t) {
    *out = unsafe { std::mem::zeroed() };
    for (o, b) in out.dev_name.iter_mut().zip(d.name.bytes().take(63)) {
        *o = b as c_char;
    }
    out.umq_trans_mode = mode;
    let n = d.eids.len().min(UMQ_MAX_EID_CNT as usize);
    for (i, eid) in d.eids[..n].iter().enumerate() {
        out.ub.eid_list[i] = umq_eid_info_t {
            eid: umq_eid_t { raw: *eid },
            eid_index: i as u32,
        };
    }
    out.ub.eid_cnt = n as u32;
}

/// The device `dev_name` (a host interface) with its EIDs; `-UMQ_ERR_ENODEV` if the host has
/// no such interface.
#[unsafe(no_mangle)]
pub extern "C" fn umq_dev_info_get(
    dev_name: *mut c_char,
    umq_trans_mode: umq_trans_mode_t,
    umq_dev_info: *mut umq_dev_info_t,
) -> c_int {
    ffi_guard!("umq_dev_info_get", {
        code((|| {
            const F: &str = "umq_dev_info_get";
            let out = need_mut(F, "umq_dev_info", umq_dev_info)?;
            if dev_name.is_null() {
                return Err(einval(F, format_args!("dev_name is NULL")));
            }
            let text = unsafe { std::slice::from_raw_parts(dev_name, 64) };
            let name = convert::c_name(F, text)?;
            require_mode(F, umq_trans_mode)?;
            let d = crate::devices::find(name).ok_or_else(|| {
                crate::log_err!(F, "no device '{name}' on this host");
                -UMQ_ERR_ENODEV
            })?;
            fill_dev_info(out, &d, umq_trans_mode);
            Ok(())
        })())
    })
}

/// Every device of the host, as an array of `*dev_num` entries that `umq_dev_info_list_free`
/// releases; NULL with errno set on error.
#[unsafe(no_mangle)]
pub extern "C" fn umq_dev_info_list_get(
    umq_trans_mode: umq_trans_mode_t,
    dev_num: *mut c_int,
) -> *mut umq_dev_info_t {
    ffi_guard!("umq_dev_info_list_get", {
        or_errno((|| {
            const F: &str = "umq_dev_info_list_get";
            let num = need_mut(F, "dev_num", dev_num)?;
            require_mode(F, umq_trans_mode)?;
            let devices = crate::devices::list();
            let size = size_of::<umq_dev_info_t>();
            let list = unsafe { libc::calloc(devices.len().max(1), size) } as *mut umq_dev_info_t;
            if list.is_null() {
                return Err(-UMQ_ERR_ENOMEM);
            }
            for (i, d) in devices.iter().enumerate() {
                fill_dev_info(unsafe { &mut *list.add(i) }, d, umq_trans_mode);
            }
            *num = devices.len() as c_int;
            Ok(list)
        })())
    })
}

/// Releases a list from `umq_dev_info_list_get`. NULL is a no-op.
#[unsafe(no_mangle)]
pub extern "C" fn umq_dev_info_list_free(
    umq_trans_mode: umq_trans_mode_t,
    umq_dev_info: *mut umq_dev_info_t,
) {
    let _ = umq_trans_mode;
    unsafe { libc::free(umq_dev_info as *mut libc::c_void) };
}

/// A queue's settings: sizes and depths as created (defaults filled in), its mode, state, and
/// what it was given to report back (`umq_ctx`, transport mode and type, priority).
#[unsafe(no_mangle)]
pub extern "C" fn umq_cfg_get(umqh: u64, cfg: *mut umq_cfg_get_t) -> c_int {
    ffi_guard!("umq_cfg_get", {
        code(with_queue("umq_cfg_get", umqh, |q| {
            let out = need_mut("umq_cfg_get", "cfg", cfg)?;
            let (c, x) = (&q.cfg, &q.cfg.extras);
            *out = umq_cfg_get_t {
                create_flag: x.create_flag,
                rx_buf_size: c.rx_buf_size,
                tx_buf_size: c.tx_buf_size,
                rx_depth: c.rx_depth,
                tx_depth: c.tx_depth,
                umq_ctx: x.umq_ctx,
                share_rq_umqh: match x.share {
                    crate::queue::config::RqShare::Sub(h) => h,
                    _ => 0,
                },
                max_rx_sge: 1,
                max_tx_sge: crate::limits::MAX_SGE.min(255) as u8,
                priority: x.priority,
                rqe_post_factor: 1,
                trans_mode: c.trans_mode,
                mode: if c.interrupt {
                    UMQ_MODE_INTERRUPT
                } else {
                    UMQ_MODE_POLLING
                },
                state: q.state(),
                tp_type: x.tp_type,
                tp_mode: x.tp_mode,
            };
            Ok(())
        }))
    })
}

/// Whether the bound peer has imported memory pool `mempool_id` of ours: the one pool (id 0,
/// every buffer's) is imported once the queue is bound, as the peer then reaches our buffers
/// (over shared memory it maps the queue's shared pool; over the network and in one process
/// our library carries its accesses out). Other ids, an unbound queue or a NULL `mempool_state`
/// are `-UMQ_ERR_EINVAL`.
#[unsafe(no_mangle)]
pub extern "C" fn umq_mempool_state_get(
    umqh: u64,
    mempool_id: u32,
    mempool_state: *mut umq_mempool_state_t,
) -> c_int {
    ffi_guard!("umq_mempool_state_get", {
        code(with_queue("umq_mempool_state_get", umqh, |q| {
            let out = need_mut("umq_mempool_state_get", "mempool_state", mempool_state)?;
            pool_imported("umq_mempool_state_get", q, mempool_id)?;
            out.import_state = MEMPOOL_STATE_IMPORTED;
            Ok(())
        }))
    })
}

/// Has the peer import memory pool `mempool_id`: already done for the one pool once bound
/// (see `umq_mempool_state_get`). `-UMQ_ERR_EPERM` unless `umq_init` enabled
/// `UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS`, as in the reference.
#[unsafe(no_mangle)]
pub extern "C" fn umq_mempool_state_refresh(umqh: u64, mempool_id: u32) -> c_int {
    ffi_guard!("umq_mempool_state_refresh", {
        code(with_queue("umq_mempool_state_refresh", umqh, |q| {
            if !REMOTE_MEM_ACCESS.load(Ordering::Relaxed) {
                crate::log_err!(
                    "umq_mempool_state_refresh",
                    "UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS was not given to umq_init"
                );
                return Err(-UMQ_ERR_EPERM);
            }
            pool_imported("umq_mempool_state_refresh", q, mempool_id)
        }))
    })
}

/// The one pool of a bound queue, or why not.
fn pool_imported(func: &str, q: &crate::queue::Queue, mempool_id: u32) -> UmqResult<()> {
    if mempool_id != 0 {
        return Err(einval(
            func,
            format_args!("no memory pool {mempool_id} (the library has one, id 0)"),
        ));
    }
    if q.peer_handle().is_none() {
        return Err(einval(
            func,
            format_args!("queue {:#x} is not bound", q.handle),
        ));
    }
    Ok(())
}

/// An application's function on a lock or key handle, with the handle untyped as the library
/// keeps it (the same C signature: a pointer argument, an int result).
fn on_handle<H>(f: unsafe extern "C" fn(*mut H) -> c_int) -> crate::app_sync::HandleFn {
    // SAFETY: only the pointee type of the one pointer argument differs.
    unsafe {
        std::mem::transmute::<unsafe extern "C" fn(*mut H) -> c_int, crate::app_sync::HandleFn>(f)
    }
}

/// Hands the library the application's mutex functions (all five required, else
/// `-UMQ_ERR_EINVAL`). Call it before `umq_init`: locks the library makes afterwards (the
/// handle table's, the async-event queue's) lock through them; see `app_sync` for which.
#[unsafe(no_mangle)]
pub extern "C" fn umq_external_mutex_lock_ops_register(
    ops: *mut umq_external_mutex_lock_ops_t,
) -> c_int {
    const F: &str = "umq_external_mutex_lock_ops_register";
    ffi_guard!("umq_external_mutex_lock_ops_register", {
        let Some(o) = checked(ops) else {
            return einval(F, format_args!("ops is NULL"));
        };
        let (Some(create), Some(destroy), Some(lock), Some(unlock), Some(_)) =
            (o.create, o.destroy, o.lock, o.unlock, o.trylock)
        else {
            return einval(F, format_args!("every mutex function is required"));
        };
        crate::app_sync::register_mutex(crate::app_sync::MutexOps {
            // SAFETY: the same C signature, the handle returned untyped.
            create: unsafe {
                std::mem::transmute::<
                    unsafe extern "C" fn(u32) -> *mut umq_external_mutex_t,
                    unsafe extern "C" fn(u32) -> *mut std::ffi::c_void,
                >(create)
            },
            destroy: on_handle(destroy),
            lock: on_handle(lock),
            unlock: on_handle(unlock),
        });
        UMQ_SUCCESS
    })
}

/// Hands the library the application's reader-writer lock functions (all seven required,
/// else `-UMQ_ERR_EINVAL`). Call it before `umq_init`: the buffer pool's list of chunk hooks
/// is guarded with them (a provider registering memory writes it, a growing pool reads it).
#[unsafe(no_mangle)]
pub extern "C" fn umq_external_rwlock_ops_register(ops: *mut umq_external_rwlock_ops_t) -> c_int {
    const F: &str = "umq_external_rwlock_ops_register";
    ffi_guard!("umq_external_rwlock_ops_register", {
        let Some(o) = checked(ops) else {
            return einval(F, format_args!("ops is NULL"));
        };
        let (Some(create), Some(destroy), Some(read), Some(write), Some(unlock), Some(_), Some(_)) = (
            o.create,
            o.destroy,
            o.read_lock,
            o.write_lock,
            o.unlock,
            o.try_read_lock,
            o.try_write_lock,
        ) else {
            return einval(
                F,
                format_args!("every reader-writer lock function is required"),
            );
        };
        crate::app_sync::register_rwlock(crate::app_sync::RwLockOps {
            // SAFETY: the same C signature, the handle returned untyped.
            create: unsafe {
                std::mem::transmute::<
                    unsafe extern "C" fn() -> *mut umq_external_rwlock_t,
                    unsafe extern "C" fn() -> *mut std::ffi::c_void,
                >(create)
            },
            destroy: on_handle(destroy),
            read_lock: on_handle(read),
            write_lock: on_handle(write),
            unlock: on_handle(unlock),
        });
        UMQ_SUCCESS
    })
}

/// Hands the library the application's thread-specific storage functions (all four required,
/// else `-UMQ_ERR_EINVAL`): the call trace keeps each thread's records under a key made with
/// them (`umq_stats_trace_start`).
#[unsafe(no_mangle)]
pub extern "C" fn umq_external_thread_key_ops_register(
    ops: *mut umq_external_thread_key_ops_t,
) -> c_int {
    const F: &str = "umq_external_thread_key_ops_register";
    ffi_guard!("umq_external_thread_key_ops_register", {
        let Some(o) = checked(ops) else {
            return einval(F, format_args!("ops is NULL"));
        };
        let (Some(key_create), Some(key_delete), Some(set), Some(get)) =
            (o.key_create, o.key_delete, o.setspecific, o.getspecific)
        else {
            return einval(F, format_args!("every thread-key function is required"));
        };
        type Destructor = Option<unsafe extern "C" fn(*mut std::ffi::c_void)>;
        type Key = *mut util_external_thread_key_t;
        type Untyped = *mut std::ffi::c_void;
        // SAFETY: the same C signatures, the key untyped.
        crate::app_sync::register_thread_key(unsafe {
            crate::app_sync::ThreadKeyOps {
                key_create: std::mem::transmute::<
                    unsafe extern "C" fn(Destructor) -> Key,
                    unsafe extern "C" fn(Destructor) -> Untyped,
                >(key_create),
                key_delete: on_handle(key_delete),
                set: std::mem::transmute::<
                    unsafe extern "C" fn(Key, *const std::ffi::c_void) -> c_int,
                    unsafe extern "C" fn(Untyped, *const std::ffi::c_void) -> c_int,
                >(set),
                get: std::mem::transmute::<
                    unsafe extern "C" fn(Key) -> Untyped,
                    unsafe extern "C" fn(Untyped) -> Untyped,
                >(get),
            }
        });
        UMQ_SUCCESS
    })
}

/// The eventfd of the process's transport pool, written with the count of idle resources as
/// resources become idle (at multiples of `tp_pool_cfg.notify_threshold`); any live queue may
/// ask. The fd is the library's: do not close it.
#[unsafe(no_mangle)]
pub extern "C" fn umq_transport_pool_eventfd_get(umqh: u64) -> c_int {
    const F: &str = "umq_transport_pool_eventfd_get";
    ffi_guard!("umq_transport_pool_eventfd_get", {
        with_queue(F, umqh, |q| q.tp_event_fd()).unwrap_or_else(|e| e)
    })
}

/// Moves the transport resource `tp_handle_idx` to the error state: posts on it fail from then
/// on, and once given back it is not lent again. Only on a main queue that shares its transport.
#[unsafe(no_mangle)]
pub extern "C" fn umq_transport_pool_resource_modify(umqh: u64, tp_handle_idx: u32) -> c_int {
    const F: &str = "umq_transport_pool_resource_modify";
    ffi_guard!("umq_transport_pool_resource_modify", {
        code(with_queue(F, umqh, |q| q.tp_mark_err(tp_handle_idx)))
    })
}

/// Makes a transport resource for the process's pool through a main queue that shares its
/// transport; returns its index, or `UINT32_MAX` with errno set.
#[unsafe(no_mangle)]
pub extern "C" fn umq_transport_pool_resource_create(
    umqh: u64,
    option: *mut umq_tp_resource_create_option_t,
) -> u32 {
    const F: &str = "umq_transport_pool_resource_create";
    ffi_guard!("umq_transport_pool_resource_create", {
        let Some(o) = crate::ffi::checked(option) else {
            crate::error::set_errno(einval(F, format_args!("option is NULL")));
            return u32::MAX;
        };
        let r = if o.create_flag & !UMQ_TP_CREATE_FLAG_USED_PORTS != 0 {
            Err(einval(
                F,
                format_args!("unknown create_flag bits {:#x}", o.create_flag),
            ))
        } else {
            with_queue(F, umqh, |q| {
                q.tp_create(o.create_flag & UMQ_TP_CREATE_FLAG_USED_PORTS != 0)
            })
        };
        r.unwrap_or_else(|e| {
            crate::error::set_errno(e);
            u32::MAX
        })
    })
}

/// Destroys the idle transport resource `tp_handle_idx` (`-UMQ_ERR_EBUSY` while a logic queue
/// holds it).
#[unsafe(no_mangle)]
pub extern "C" fn umq_transport_pool_resource_destroy(umqh: u64, tp_handle_idx: u32) -> c_int {
    const F: &str = "umq_transport_pool_resource_destroy";
    ffi_guard!("umq_transport_pool_resource_destroy", {
        code(with_queue(F, umqh, |q| q.tp_destroy(tp_handle_idx)))
    })
}
