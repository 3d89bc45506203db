//! The process-wide state created by `umq_init`: configuration, the buffer pool, async events.

use crate::abi::errno::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;
use crate::error::{UmqResult, einval};
use crate::event::AsyncEvents;
use crate::transport::link::Provider;
use std::sync::{Arc, RwLock};
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct FlowControlConfig {
    pub enabled: bool,
    pub initial_window: u16,
    pub notify_interval: u16,
    pub use_atomic_window: bool,
}

pub struct Runtime {
    pub feature: u32,
    pub pro_api: bool,
    pub pool: Pool,
    pub flow_control: FlowControlConfig,
    /// Random per-`umq_init` value carried in bind info, so a queue of another process (or of an
    /// earlier init) is never mistaken for one of ours.
    pub instance: u64,
    pub rnr_timeout: Duration,
    /// Default time a flow-controlled queue may wait for credit before reporting a stall.
    pub credit_stall: Duration,
    /// `UMQ_PROVIDER`: a transport forced for every bind (None: chosen per peer).
    pub provider: Option<Provider>,
    /// `UMQ_FABRIC_PROVIDER`: the libfabric provider of the network transport (default `tcp`).
    pub fabric_provider: String,
    pub events: AsyncEvents,
    pub trans_info: Vec<umq_trans_info_t>,
}

static RUNTIME: RwLock<Option<Arc<Runtime>>> = RwLock::new(None);

pub fn get() -> Option<Arc<Runtime>> {
    RUNTIME.read().unwrap_or_else(|p| p.into_inner()).clone()
}

pub fn require(func: &str) -> UmqResult<Arc<Runtime>> {
    get().ok_or_else(|| einval(func, format_args!("umq_init has not been called")))
}

pub const RNR_TIMEOUT_DEFAULT_MS: u64 = 1000;
pub const CREDIT_STALL_DEFAULT_MS: u64 = 1000;
pub const FABRIC_PROVIDER_DEFAULT: &str = "tcp";

/// `UMQ_FABRIC_PROVIDER`: the libfabric provider of the network transport.
pub fn fabric_provider_from_env() -> String {
    std::env::var("UMQ_FABRIC_PROVIDER")
        .ok()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| FABRIC_PROVIDER_DEFAULT.to_string())
}

fn millis_from_env(var: &str, default: u64) -> Duration {
    let ms = std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(default);
    Duration::from_millis(ms.max(1))
}

/// `UMQ_PROVIDER=loopback|shm|fabric` forces a transport; unset or `auto` lets each bind choose.
fn provider_from_env() -> UmqResult<Option<Provider>> {
    match std::env::var("UMQ_PROVIDER").as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("auto") => Ok(None),
        Ok(name) if Provider::from_name(name).is_some() => Ok(Provider::from_name(name)),
        Ok(other) => Err(einval(
            "umq_init",
            format_args!("UMQ_PROVIDER={other} is not one of loopback, shm, fabric, auto"),
        )),
    }
}

pub fn random_u64() -> u64 {
    let mut v = 0u64;
    unsafe { libc::getrandom(&mut v as *mut u64 as *mut _, 8, 0) };
    v ^ (std::process::id() as u64) << 32 ^ 1
}

pub fn init(cfg: &umq_init_cfg_t) -> UmqResult<()> {
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
    let mut slot = RUNTIME.write().unwrap_or_else(|p| p.into_inner());
    if slot.is_some() {
        crate::log_err!(
            F,
            "already initialised in this process (call umq_uninit first)"
        );
        return Err(-UMQ_ERR_EEXIST);
    }
    let rt = Runtime {
        feature: cfg.feature,
        pro_api: cfg.feature & UMQ_FEATURE_API_PRO != 0,
        pool: Pool::new(
            cfg.buf_mode == UMQ_BUF_SPLIT,
            cfg.block_cfg.small_block_size,
            cfg.headroom_size,
        ),
        flow_control: FlowControlConfig {
            enabled: cfg.feature & UMQ_FEATURE_ENABLE_FLOW_CONTROL != 0,
            initial_window: cfg.flow_control.initial_window,
            notify_interval: cfg.flow_control.notify_interval,
            // Read as a byte: a C caller may store any value in a bool field.
            use_atomic_window: unsafe {
                *(&cfg.flow_control.use_atomic_window as *const bool as *const u8)
            } != 0,
        },
        instance: random_u64(),
        rnr_timeout: millis_from_env("UMQ_RNR_TIMEOUT_MS", RNR_TIMEOUT_DEFAULT_MS),
        credit_stall: millis_from_env("UMQ_CREDIT_STALL_MS", CREDIT_STALL_DEFAULT_MS),
        provider: provider_from_env()?,
        fabric_provider: fabric_provider_from_env(),
        events: AsyncEvents::new()?,
        trans_info,
    };
    crate::dfx::reset(cfg.feature);
    *slot = Some(Arc::new(rt));
    Ok(())
}

/// Destroys every queue and drops the runtime. Buffers still held by the application become
/// invalid (their memory goes back to the system).
pub fn uninit() {
    for q in crate::queue::table::all() {
        let _ = crate::queue::destroy(q.handle);
    }
    RUNTIME.write().unwrap_or_else(|p| p.into_inner()).take();
    crate::dfx::release();
}
