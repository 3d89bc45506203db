//! `umq_init` and `umq_uninit`: the process's runtime made from the application's
//! configuration, and taken down with every queue. Above the queue layer, which it checks the
//! configuration with and destroys the queues of, so that `runtime` itself, which the layers
//! below read their settings from, names none of them.

use crate::abi::errno::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;
use crate::error::{UmqResult, einval};
use crate::event::AsyncEvents;
use crate::flow::credit::Knobs;
use crate::runtime::{
    self, CREDIT_STALL_DEFAULT_MS, FlowControlConfig, RNR_TIMEOUT_DEFAULT_MS, Runtime,
};

pub fn init(cfg: &umq_init_cfg_t) -> UmqResult<()> {
    init_with_credit(cfg, None, 0)
}

/// `init` for a front-end whose flow control is the July 2026 credit requests (`credit`
/// knobs) rather than the receive window, and whose transport pool notifies every
/// `tp_notify_threshold` idle resources (0: the default).
pub fn init_with_credit(
    cfg: &umq_init_cfg_t,
    credit: Option<Knobs>,
    tp_notify_threshold: u32,
) -> UmqResult<()> {
    const F: &str = "umq_init";
    let known = UMQ_FEATURE_API_PRO
        | UMQ_FEATURE_ENABLE_TOKEN_POLICY
        | UMQ_FEATURE_ENABLE_STATS
        | UMQ_FEATURE_ENABLE_PERF
        | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    if cfg.feature & !known != 0 {
        return Err(einval(
            F,
            format_args!("unknown feature bits {:#x}", cfg.feature & !known),
        ));
    }
    if cfg.buf_mode > UMQ_BUF_COMBINE {
        return Err(einval(
            F,
            format_args!("buf_mode {} is neither SPLIT nor COMBINE", cfg.buf_mode),
        ));
    }
    if cfg.block_cfg.small_block_size >= BLOCK_SIZE_MAX {
        return Err(einval(
            F,
            format_args!(
                "block_cfg.small_block_size {} out of range",
                cfg.block_cfg.small_block_size
            ),
        ));
    }
    if cfg.trans_info_num as u32 > MAX_UMQ_TRANS_INFO_NUM {
        return Err(einval(
            F,
            format_args!(
                "trans_info_num {} > {}",
                cfg.trans_info_num, MAX_UMQ_TRANS_INFO_NUM
            ),
        ));
    }
    let trans_info = cfg.trans_info[..cfg.trans_info_num as usize].to_vec();
    for (i, t) in trans_info.iter().enumerate() {
        crate::queue::config::check_trans_info(F, t).inspect_err(|_| {
            crate::log_err!(F, "trans_info[{i}] rejected");
        })?;
    }
    if runtime::installed() {
        crate::log_err!(
            F,
            "already initialised in this process (call umq_uninit first)"
        );
        return Err(-UMQ_ERR_EEXIST);
    }
    let rt = Runtime {
        feature: cfg.feature,
        pro_api: cfg.feature & UMQ_FEATURE_API_PRO != 0,
        pool: std::sync::Arc::new(Pool::new(
            cfg.buf_mode == UMQ_BUF_SPLIT,
            cfg.block_cfg.small_block_size,
            cfg.headroom_size,
        )),
        flow_control: FlowControlConfig {
            enabled: cfg.feature & UMQ_FEATURE_ENABLE_FLOW_CONTROL != 0,
            initial_window: cfg.flow_control.initial_window,
            notify_interval: cfg.flow_control.notify_interval,
            // Read as a byte: a C caller may store any value in a bool field.
            use_atomic_window: unsafe {
                *(&cfg.flow_control.use_atomic_window as *const bool as *const u8)
            } != 0,
            credit,
        },
        instance: crate::os::random_u64(),
        rnr_timeout: runtime::millis_from_env("UMQ_RNR_TIMEOUT_MS", RNR_TIMEOUT_DEFAULT_MS),
        credit_stall: runtime::millis_from_env("UMQ_CREDIT_STALL_MS", CREDIT_STALL_DEFAULT_MS),
        provider: runtime::provider_from_env()?,
        fabric_provider: runtime::fabric_provider_from_env(),
        events: AsyncEvents::new()?,
        trans_info,
        tp_pool: Default::default(),
        tp_notify_threshold,
    };
    // (A second init racing this one is refused here, its pool dropped unused.)
    runtime::install(rt)?;
    crate::dfx::reset(cfg.feature);
    Ok(())
}

/// Destroys every queue and drops the runtime. Buffers still held by the application become
/// invalid (their memory goes back to the system).
pub fn uninit() {
    for q in crate::queue::table::all() {
        let _ = crate::queue::destroy(q.handle);
    }
    runtime::remove();
    crate::dfx::release();
}
