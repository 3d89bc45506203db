//! The process-wide state created by `umq_init`: configuration, the buffer pool, async events.

use crate::abi::errno::*;
use crate::abi::types::*;
use crate::buf::pool::Pool;
use crate::error::{UmqResult, einval};
use crate::event::AsyncEvents;
use crate::hazard::Named;
use crate::hazard::slot::{NotRemoved, Slot};
use crate::process::PerProcess;
use crate::transport::link::Provider;
use crate::transport::tp_pool::TransportPool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
pub struct FlowControlConfig {
    pub enabled: bool,
    pub initial_window: u16,
    pub notify_interval: u16,
    pub use_atomic_window: bool,
    /// The July 2026 revision's credit requests instead of the receive window (its knobs).
    pub credit: Option<crate::flow::credit::Knobs>,
}

impl FlowControlConfig {
    /// The flow-control protocol this process speaks, carried in bind info: two processes
    /// bind only if they speak the same (a December window and a July credit request would
    /// take each other's messages for corruption).
    pub fn protocol_version(&self) -> u8 {
        match (self.enabled, self.credit.is_some()) {
            (false, _) => 0,
            (true, false) => crate::flow::PROTOCOL_VERSION,
            (true, true) => crate::flow::credit::PROTOCOL_VERSION,
        }
    }
}

pub struct Runtime {
    pub feature: u32,
    pub pro_api: bool,
    /// The process pool; shared with the network provider, which holds the chunks its sends
    /// read from (`Pool::lease`).
    pub pool: Arc<Pool>,
    pub flow_control: FlowControlConfig,
    /// Random per-`umq_init` value carried in bind info, so a queue of another process (or of an
    /// earlier init) is never mistaken for one of ours.
    pub instance: u64,
    pub rnr_timeout: Duration,
    /// Default time a flow-controlled queue may wait for credit before reporting a stall.
    pub credit_stall: Duration,
    /// `UMQ_PROVIDER`: a transport forced for every bind (None: chosen per peer).
    pub provider: Option<Provider>,
    /// `UMQ_FABRIC_PROVIDER`: the network transport's libfabric provider (default `tcp`), or
    /// `ucx` for its UCX engine.
    pub fabric_provider: String,
    pub events: AsyncEvents,
    pub trans_info: Vec<umq_trans_info_t>,
    /// The process's transport pool (`UMQ_CREATE_FLAG_SHARE_TRANSPORT`), made when a main
    /// queue first shares its transport, and its eventfd's notify threshold.
    pub(crate) tp_pool: std::sync::OnceLock<TransportPool>,
    pub tp_notify_threshold: u32,
}

impl Runtime {
    /// The transport pool, made on first use (its eventfd is the one resource it needs).
    pub fn transport_pool(&self) -> UmqResult<&TransportPool> {
        if let Some(p) = self.tp_pool.get() {
            return Ok(p);
        }
        let made = TransportPool::new(self.tp_notify_threshold).inspect_err(|_| {
            crate::log_err!(
                "umq_create",
                "the transport pool's eventfd could not be made"
            );
        })?;
        Ok(self.tp_pool.get_or_init(|| made))
    }

    /// The transport pool if a main queue made it.
    pub fn transport_pool_made(&self) -> Option<&TransportPool> {
        self.tp_pool.get()
    }
}

/// The runtime of this process: a child made by `fork()` starts with none (`process`), as the
/// parent's pool, queues and connections are the parent's.
///
/// It sits in a slot that calls reach without a lock, as the handle table's queues do
/// (`hazard::slot`): a call publishes the slot in a hazard word of its thread, and `remove`
/// waits until no thread does. A read lock and a counted reference were four atomic
/// read-modify-writes of lines every thread's buffer calls shared. `changing` orders installs
/// and removals (of two `umq_init`s at once, one is refused).
struct Installed {
    slot: Slot<Runtime>,
    changing: Mutex<()>,
}

static RUNTIME: PerProcess<Installed> = PerProcess::new(|| Installed {
    slot: Slot::default(),
    changing: Mutex::new(()),
});

/// The runtime's handle in its slot: there is one runtime a process at a time.
const HANDLE: u64 = 1;

impl Named for Runtime {
    fn handle(&self) -> u64 {
        HANDLE
    }
}

/// The runtime, a reference of the caller's own.
pub fn get() -> Option<Arc<Runtime>> {
    RUNTIME.get().slot.occupant()
}

pub fn require(func: &str) -> UmqResult<Arc<Runtime>> {
    get().ok_or_else(|| no_runtime(func))
}

/// Runs `f` on the runtime, which `umq_uninit` does not take away meanwhile; `-EINVAL` (as
/// `require`) without one. No reference is counted: the buffer calls run here.
#[inline]
pub fn with<R>(func: &str, f: impl FnOnce(&Runtime) -> UmqResult<R>) -> UmqResult<R> {
    with_installed(f).unwrap_or_else(|| Err(no_runtime(func)))
}

/// `with`, None without a runtime (and nothing logged).
#[inline]
pub fn with_installed<R>(f: impl FnOnce(&Runtime) -> R) -> Option<R> {
    RUNTIME.get().slot.with(HANDLE, |rt| f(rt))
}

#[cold]
fn no_runtime(func: &str) -> i32 {
    einval(func, format_args!("umq_init has not been called"))
}

pub const RNR_TIMEOUT_DEFAULT_MS: u64 = 1000;
pub const CREDIT_STALL_DEFAULT_MS: u64 = 1000;
pub const FABRIC_PROVIDER_DEFAULT: &str = "tcp";

/// `UMQ_FABRIC_PROVIDER`: the network transport's libfabric provider, or `ucx`.
pub fn fabric_provider_from_env() -> String {
    std::env::var("UMQ_FABRIC_PROVIDER")
        .ok()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| FABRIC_PROVIDER_DEFAULT.to_string())
}

pub(crate) fn millis_from_env(var: &str, default: u64) -> Duration {
    let ms = std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(default);
    Duration::from_millis(ms.max(1))
}

/// `UMQ_PROVIDER=loopback|shm|fabric` forces a transport; unset or `auto` lets each bind choose.
pub(crate) fn provider_from_env() -> UmqResult<Option<Provider>> {
    match std::env::var("UMQ_PROVIDER").as_deref().map(str::trim) {
        Err(_) | Ok("") | Ok("auto") => Ok(None),
        Ok(name) if Provider::from_name(name).is_some() => Ok(Provider::from_name(name)),
        Ok(other) => Err(einval(
            "umq_init",
            format_args!("UMQ_PROVIDER={other} is not one of loopback, shm, fabric, auto"),
        )),
    }
}

/// Makes `rt` the process's runtime; `-UMQ_ERR_EEXIST` while one is installed.
pub fn install(rt: Runtime) -> UmqResult<()> {
    let installed = RUNTIME.get();
    let _changing = installed.changing.lock().unwrap_or_else(|p| p.into_inner());
    if installed.slot.occupant().is_some() {
        crate::log_err!(
            "umq_init",
            "already initialised in this process (call umq_uninit first)"
        );
        return Err(-UMQ_ERR_EEXIST);
    }
    installed.slot.fill(&Arc::new(rt));
    Ok(())
}

/// Whether a runtime is installed (`umq_init` has been called and `umq_uninit` has not).
pub fn installed() -> bool {
    with_installed(|_| ()).is_some()
}

/// Drops the process's runtime (what `umq_uninit` ends with), once no call is inside it.
pub fn remove() {
    let installed = RUNTIME.get();
    let _changing = installed.changing.lock().unwrap_or_else(|p| p.into_inner());
    if let Err(NotRemoved::InUseHere) = installed.slot.remove(HANDLE) {
        // Only a buffer call's own log callback can get here; the runtime stays.
        crate::log_err!(
            "umq_uninit",
            "called from inside a buffer call of this thread: the runtime stays"
        );
    }
}
