//! What this build of the library and this machine offer, as `fi_info` and `ucx_info` report
//! theirs: the version and ABI, each provider and whether it can be used here (and why not),
//! the limits, the environment variables the library reads, and the flow-control defaults.
//!
//! `umq-info` prints it. Nothing here is exported to C, so `libumq.so` does not carry it.

use crate::abi::types::*;
use crate::transport::fabric::sys as fabric;
use std::os::fd::AsRawFd;

/// The UMQ C API this library implements, by name: the openEuler UMDK revision with window
/// flow control.
pub const UMQ_FUNCTIONS: [&str; 34] = [
    "umq_ack_async_event",
    "umq_ack_interrupt",
    "umq_async_event_fd_get",
    "umq_bind",
    "umq_bind_info_get",
    "umq_buf_alloc",
    "umq_buf_break_and_free",
    "umq_buf_free",
    "umq_buf_headroom_reset",
    "umq_buf_reset",
    "umq_buf_split",
    "umq_create",
    "umq_data_to_head",
    "umq_dequeue",
    "umq_destroy",
    "umq_dev_add",
    "umq_dfx_cmd_process",
    "umq_enqueue",
    "umq_get_async_event",
    "umq_get_cq_event",
    "umq_get_route_list",
    "umq_init",
    "umq_interrupt_fd_get",
    "umq_log_config_get",
    "umq_log_config_set",
    "umq_notify",
    "umq_poll",
    "umq_post",
    "umq_rearm_interrupt",
    "umq_state_get",
    "umq_unbind",
    "umq_uninit",
    "umq_user_ctl",
    "umq_wait_interrupt",
];

/// Our additions (`umq_ext.h`, `umq_fi.h`): libfabric-style queue room and the endpoint.
pub const EXTENSION_FUNCTIONS: [&str; 5] = [
    "umq_tx_size_left",
    "umq_rx_size_left",
    "umq_fi_ep_get",
    "fi_tx_size_left",
    "fi_rx_size_left",
];

pub const ABI_REVISION: &str = "openEuler UMDK UMQ, the revision with window flow control";

/// Everything `umq-info` shows.
#[derive(Debug, Clone)]
pub struct Info {
    pub version: &'static str,
    /// How this build was made: `release`, `release, profile-guided` (`scripts/build-pgo.sh`),
    /// or `with debug assertions`.
    pub build: &'static str,
    pub abi_revision: &'static str,
    pub providers: Vec<Provider>,
    pub limits: Vec<Item>,
    pub environment: Vec<Variable>,
    pub flow_control: Vec<Item>,
}

/// One transport and whether a bind can use it on this machine.
#[derive(Debug, Clone)]
pub struct Provider {
    pub name: &'static str,
    pub what: &'static str,
    pub usable: bool,
    /// Why not, when it is not usable.
    pub why_not: Option<String>,
    /// The facilities it relies on, each checked here.
    pub checks: Vec<Check>,
    /// For the network provider, what libfabric offers.
    pub libfabric: Option<fabric::Offer>,
}

#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// A named value with what it means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub name: &'static str,
    pub value: String,
    pub meaning: &'static str,
}

/// An environment variable the library reads at `umq_init` (or at first use).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: &'static str,
    /// Its value in this process, if set.
    pub value: Option<String>,
    pub default: String,
    pub meaning: &'static str,
}

/// Every variable the library reads, with its default and its value in this process.
pub fn variables() -> Vec<Variable> {
    use crate::runtime::{CREDIT_STALL_DEFAULT_MS, RNR_TIMEOUT_DEFAULT_MS};
    use crate::transport::fabric::LIVENESS_DEFAULT_MS;
    let var = |name, default: String, meaning| Variable {
        name,
        value: std::env::var(name).ok(),
        default,
        meaning,
    };
    vec![
        var(
            "UMQ_PROVIDER",
            "auto".into(),
            "force a transport for every bind: loopback, shm, fabric or auto (chosen per peer)",
        ),
        var(
            "UMQ_FABRIC_PROVIDER",
            crate::runtime::FABRIC_PROVIDER_DEFAULT.into(),
            "the network transport's engine: a libfabric provider (tcp, verbs, ...) or ucx (UCX's UCP)",
        ),
        var(
            "UMQ_LOG_LEVEL",
            "warn".into(),
            "the initial log level: a number 0-7 or emerg, alert, crit, err, warn, notice, info, debug",
        ),
        var(
            "UMQ_RNR_TIMEOUT_MS",
            RNR_TIMEOUT_DEFAULT_MS.to_string(),
            "how long a message waits for a receive buffer before its queue fails (ms)",
        ),
        var(
            "UMQ_CREDIT_STALL_MS",
            CREDIT_STALL_DEFAULT_MS.to_string(),
            "how long a queue waits for flow-control credit before it is reported (ms)",
        ),
        var(
            "UMQ_FABRIC_LIVENESS_MS",
            LIVENESS_DEFAULT_MS.to_string(),
            "how long a silent network peer is given before its binding fails (ms)",
        ),
        var(
            "UMQ_FABRIC_RMA",
            "on".into(),
            "off: network WRITEs and READs always go as messages the target's library checks buffer by buffer (a freed buffer refused), never by libfabric RMA",
        ),
        var(
            "UMQ_FABRIC_MR",
            "auto".into(),
            "verbs: a libfabric endpoint registers memory as verbs asks (keys libfabric picks, every WRITE, READ and send in place naming a registration of its own buffer), over any provider, to test that path without an RDMA device; auto: as the provider asks",
        ),
        var(
            "UMQ_UCX_RMA",
            "auto".into(),
            "how the UCX engine carries WRITE and READ: ucp (UCP's own RMA, which over tcp checks no key) or carried (messages the target checks); auto: ucp where UCX_TLS names an RDMA transport and the host has an RDMA device",
        ),
        var(
            "UMQ_FABRIC_NODES",
            crate::transport::fabric::node::default_lanes().to_string(),
            "how many network nodes (an endpoint, its completion queue and its connections) a process makes at most: threads get one in turn as each first makes a network queue, and a node's queues take turns, so threads that drive their own queues run side by side",
        ),
        var(
            "UMQ_FABRIC_NOTSENT_LOWAT",
            fabric::NOTSENT_LOWAT_DEFAULT.to_string(),
            "the unsent bytes a network connection's socket holds at most (TCP_NOTSENT_LOWAT; 0 keeps the kernel's): more waits in the library",
        ),
        var(
            "UMQ_PROGRESS_SWEEP_MS",
            "20".to_string(),
            "how often the progress thread takes in what arrived at queues whose application does not call in, while some peer cannot call it (ms)",
        ),
    ]
}

/// Looks at this machine and this build.
pub fn gather() -> Info {
    Info {
        version: env!("CARGO_PKG_VERSION"),
        build: build(),
        abi_revision: ABI_REVISION,
        providers: vec![loopback(), shm(), network()],
        limits: limits(),
        environment: variables(),
        flow_control: flow_control_defaults(),
    }
}

/// How this build was made. `scripts/build-pgo.sh` sets `UMQ_PGO_BUILD` for the compiler in its
/// optimized build (not the instrumented one), so two builds of one version tell themselves apart
/// in a comparison's record.
fn build() -> &'static str {
    match (option_env!("UMQ_PGO_BUILD"), cfg!(debug_assertions)) {
        (_, true) => "with debug assertions",
        (Some(_), false) => "release, profile-guided",
        (None, false) => "release",
    }
}

fn loopback() -> Provider {
    Provider {
        name: "loopback",
        what: "two queues of one process (the embedded default)",
        usable: true,
        why_not: None,
        checks: Vec::new(),
        libfabric: None,
    }
}

/// Shared memory needs sealed memfds and opening a peer's memfd through /proc; interrupt-mode
/// doorbells use `pidfd_getfd` (without it a peer rings them through the call bell).
fn shm() -> Provider {
    let memfd = crate::os::sealed_memfd(c"umq-info", 4096, libc::F_SEAL_SHRINK);
    let memfd_check = Check {
        name: "memfd",
        ok: memfd.is_ok(),
        detail: match &memfd {
            Ok(_) => "sealed memfds (memfd_create, F_SEAL_SHRINK)".into(),
            Err(e) => format!("memfd_create: {e}"),
        },
    };
    let proc_open = memfd.as_ref().map_err(|e| e.to_string()).and_then(|fd| {
        crate::os::open_peer_memfd(
            std::process::id(),
            fd.as_raw_fd() as u32,
            libc::O_RDWR,
            "memfd",
        )
    });
    let proc_check = Check {
        name: "proc_fd",
        ok: proc_open.is_ok(),
        detail: match &proc_open {
            Ok(_) => "a process's memfd opens through /proc/<pid>/fd".into(),
            Err(e) => e.clone(),
        },
    };
    let getfd = memfd.as_ref().map_err(|e| e.to_string()).and_then(|fd| {
        crate::os::pidfd_getfd(std::process::id(), fd.as_raw_fd() as u32)
            .map_err(|e| format!("pidfd_getfd: {e}"))
    });
    let getfd_check = Check {
        name: "pidfd_getfd",
        ok: getfd.is_ok(),
        detail: match &getfd {
            Ok(_) => {
                "interrupt-mode doorbells (eventfds shared with pidfd_getfd, Linux 5.6)".into()
            }
            Err(e) => {
                format!("{e}: a peer rings interrupt-mode queues through their process's call bell")
            }
        },
    };
    let why_not = [&memfd_check, &proc_check]
        .iter()
        .find(|c| !c.ok)
        .map(|c| c.detail.clone());
    Provider {
        name: "shm",
        what: "another process of this host, over shared memory",
        usable: why_not.is_none(),
        why_not,
        checks: vec![memfd_check, proc_check, getfd_check, ptrace_check()],
        libfabric: None,
    }
}

/// Yama's `ptrace_scope`, which decides whether a peer process may duplicate a queue's doorbell
/// and attach for one-sided operations: the test above runs in one process, which Yama never
/// refuses.
fn ptrace_check() -> Check {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope");
    let (ok, detail) = match scope.as_deref().map(str::trim) {
        Err(_) => (
            true,
            "no Yama: peers duplicate doorbells and attach".to_string(),
        ),
        Ok("0") => (
            true,
            "Yama ptrace_scope 0: peers duplicate doorbells and attach".into(),
        ),
        Ok("1") => (
            false,
            "Yama ptrace_scope 1: a process lets only the peer it named at its latest bind \
             attach, so the first of two processes to bind rings the other's interrupt-mode \
             queues through the call bell, and one-sided WRITEs and READs to any but a \
             process's latest peer go through the target's ring"
                .into(),
        ),
        Ok(n) => (
            false,
            format!(
                "Yama ptrace_scope {n}: no peer may attach: interrupt-mode queues are rung \
                 through the call bell, one-sided WRITEs and READs go through the target's ring"
            ),
        ),
    };
    Check {
        name: "ptrace_scope",
        ok,
        detail,
    }
}

/// The network provider needs libfabric and, among the providers it offers for what we ask, the
/// one `UMQ_FABRIC_PROVIDER` names.
fn network() -> Provider {
    let wanted = crate::runtime::fabric_provider_from_env();
    if wanted == fabric::UCX_ENGINE {
        return network_over_ucx();
    }
    let (usable, why_not, libfabric) = match fabric::probe() {
        Err(why) => (false, Some(why), None),
        Ok(offer) if !offer.providers.iter().any(|p| offers(p, &wanted)) => (
            false,
            Some(format!(
                "libfabric offers no '{wanted}' endpoint for reliable messages and RMA here \
                 (UMQ_FABRIC_PROVIDER); it offers: {}",
                if offer.providers.is_empty() {
                    "none".to_string()
                } else {
                    offer.providers.join(", ")
                }
            )),
            Some(offer),
        ),
        Ok(offer) => (true, None, Some(offer)),
    };
    let mut checks = vec![Check {
        name: "provider",
        ok: usable,
        detail: format!("UMQ_FABRIC_PROVIDER={wanted}"),
    }];
    if usable {
        checks.push(one_sided(&wanted));
    }
    Provider {
        name: "fabric",
        what: "other hosts, over libfabric (UMQ_FABRIC_PROVIDER: tcp, verbs, ...)",
        usable,
        why_not,
        checks,
        libfabric,
    }
}

/// How WRITE and READ, and sends, go over an endpoint of engine `prov` (one opened and closed
/// to ask it).
fn one_sided(prov: &str) -> Check {
    let caps = match fabric::Endpoint::open(prov, None, 64, false, 4096) {
        Ok(ep) => ep.capabilities(),
        Err(why) => {
            return Check {
                name: "one_sided",
                ok: false,
                detail: format!("no endpoint to ask: {why}"),
            };
        }
    };
    let by_rma = caps.rma && crate::transport::fabric::rma_wanted();
    Check {
        name: "one_sided",
        ok: by_rma,
        detail: describe(caps, by_rma),
    }
}

/// `one_sided`'s words for what an endpoint can do.
fn describe(caps: fabric::Capabilities, by_rma: bool) -> String {
    let sends = match (caps.sends_in_place, caps.local_registration) {
        (false, _) => "sends copied into send buffers",
        (true, false) => "sends read in place",
        (true, true) => "sends read in place from their registered chunks",
    };
    if !by_rma {
        let why = match caps.rma {
            true => "UMQ_FABRIC_RMA=off",
            false => "the provider's keys do not fit (raw, or longer than 8 bytes)",
        };
        return format!("WRITE and READ as messages the target's library checks ({why}); {sends}");
    }
    let served = match caps.in_software {
        true => "served by the target's engine in software, which runs when called",
        false => "served by the target's NIC",
    };
    let keys = match caps.provider_keys {
        true => "keys the provider picks, packed across",
        false => "keys ours, from the buffer's token",
    };
    let local = match caps.local_registration {
        true => format!(
            "; each names a registration of its own buffer's chunk ({})",
            crate::os::memlock_limit()
        ),
        false => String::new(),
    };
    format!("WRITE and READ by RMA, {served}; {keys}{local}; {sends}")
}

/// The network provider on its UCX engine (`UMQ_FABRIC_PROVIDER=ucx`): usable where libucp
/// loads.
fn network_over_ucx() -> Provider {
    let probe = fabric::probe_ucx();
    Provider {
        name: "fabric",
        what: "other hosts, over UCX (UMQ_FABRIC_PROVIDER=ucx; UCX_TLS, default tcp)",
        usable: probe.is_ok(),
        why_not: probe.as_ref().err().cloned(),
        checks: std::iter::once(Check {
            name: "provider",
            ok: probe.is_ok(),
            detail: match &probe {
                Ok(version) => format!("UMQ_FABRIC_PROVIDER=ucx: UCX {version}"),
                Err(_) => "UMQ_FABRIC_PROVIDER=ucx".to_string(),
            },
        })
        .chain(probe.is_ok().then(|| one_sided(fabric::UCX_ENGINE)))
        .collect(),
        libfabric: None,
    }
}

/// Whether libfabric's provider `name` ("tcp;ofi_rxm": tcp under the rxm utility layer) is
/// what `wanted` asks for, as `fi_getinfo` matches a `prov_name` hint.
fn offers(name: &str, wanted: &str) -> bool {
    name == wanted || name.split(';').next() == Some(wanted)
}

fn item(name: &'static str, value: impl ToString, meaning: &'static str) -> Item {
    Item {
        name,
        value: value.to_string(),
        meaning,
    }
}

/// The bytes of each `BLOCK_SIZE_*` (8 KiB doubling, as the pool sizes them).
fn block_sizes() -> String {
    let sizes: Vec<String> = (BLOCK_SIZE_8K..BLOCK_SIZE_MAX)
        .map(|b| (8192u32 << b).to_string())
        .collect();
    sizes.join(",")
}

fn limits() -> Vec<Item> {
    use crate::limits::*;
    vec![
        item(
            "max_queues",
            crate::queue::table::MAX_QUEUES,
            "queues alive at once in a process",
        ),
        item(
            "max_depth",
            MAX_DEPTH,
            "deepest send or receive queue (tx_depth, rx_depth)",
        ),
        item(
            "batch",
            UMQ_BATCH_SIZE,
            "WRs or receive buffers one umq_post takes",
        ),
        item("max_sge", MAX_SGE, "buffers one WR may gather"),
        item(
            "max_message",
            MAX_MESSAGE,
            "bytes one WR carries (total_data_size)",
        ),
        item(
            "max_buf_request",
            UMQ_MAX_BUF_REQUEST_SIZE,
            "bytes one umq_buf_alloc request or umq_enqueue message may hold",
        ),
        item(
            "block_sizes",
            block_sizes(),
            "umq_init's small_block_size choices",
        ),
        item(
            "max_trans_info",
            MAX_UMQ_TRANS_INFO_NUM,
            "umq_init trans_info entries",
        ),
        item(
            "shm_ring_bytes",
            crate::transport::shm::RING_BYTES,
            "a shared-memory inbox ring",
        ),
        item(
            "open_files",
            crate::os::fd_limits()
                .map_or("unknown".into(), |(soft, hard)| format!("{soft}/{hard}")),
            "this process's soft/hard limit on descriptors (RLIMIT_NOFILE): a queue over \
             shared memory holds one (three in interrupt mode), and the library raises the \
             soft limit toward the hard one when it runs out",
        ),
    ]
}

fn flow_control_defaults() -> Vec<Item> {
    let p = crate::flow::Params::new(0, 0, 1024, 1024);
    vec![
        item(
            "enabled",
            "no",
            "UMQ_FEATURE_ENABLE_FLOW_CONTROL in umq_init's features turns it on",
        ),
        item(
            "initial_window",
            "rx_depth/2",
            "credit granted once that many buffers are posted",
        ),
        item(
            "notify_interval",
            "rx_depth/16",
            "buffers posted between announcements",
        ),
        item(
            "control_budget",
            "min(rx_depth/16, 4)",
            "buffers kept for standalone announcements",
        ),
        item(
            "at_rx_depth_1024",
            format!(
                "{}/{}/{}",
                p.initial_window, p.notify_interval, p.ctrl_budget
            ),
            "initial_window/notify_interval/control_budget",
        ),
        item(
            "stall_report_ms",
            crate::runtime::CREDIT_STALL_DEFAULT_MS,
            "UMQ_CREDIT_STALL_MS",
        ),
        item(
            "queued_mode",
            "off",
            "posts beyond the window fail with -UMQ_ERR_EAGAIN",
        ),
        item(
            "atomic_window",
            "off",
            "flow_control.use_atomic_window in umq_init",
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The library's sources, for the checks that the lists above miss nothing.
    fn sources() -> Vec<(std::path::PathBuf, String)> {
        fn walk(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() && !p.ends_with("bin") {
                    walk(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs" || x == "c") {
                    out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut out = Vec::new();
        walk(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut out,
        );
        out
    }

    fn fuzzing_dir() -> std::path::PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/fuzzing")
    }

    #[test]
    fn every_environment_variable_the_library_reads_is_listed() {
        let listed: Vec<&str> = variables().iter().map(|v| v.name).collect();
        let mut read = Vec::new();
        // The fuzz targets' switches (src/fuzzing/) are not in a shipped build.
        let shipped =
            |p: &std::path::Path| !p.ends_with("info.rs") && !p.starts_with(fuzzing_dir());
        for (path, text) in sources().into_iter().filter(|(p, _)| shipped(p)) {
            // `std::env::var("UMQ_...")`, `millis_from_env("UMQ_...", ...)` and C's
            // `getenv("UMQ_...")`.
            for (at, _) in text.match_indices("(\"UMQ_") {
                if !text[at.saturating_sub(12)..at].contains("env") {
                    continue;
                }
                let name = &text[at + 2..];
                let name = &name[..name.find('"').unwrap()];
                assert!(
                    listed.contains(&name),
                    "{} reads {name}, not listed",
                    path.display()
                );
                read.push(name.to_string());
            }
        }
        for name in &listed {
            assert!(
                read.iter().any(|r| r == name),
                "{name} is listed but never read"
            );
        }
    }

    #[test]
    fn the_api_lists_name_every_export_once() {
        let exported: String = sources()
            .into_iter()
            // The July 2026 front-end (ffi/v2026) replaces some of these in its own build.
            .filter(|(p, _)| p.components().any(|c| c.as_os_str() == "ffi"))
            .filter(|(p, _)| !p.components().any(|c| c.as_os_str() == "v2026"))
            .map(|(_, t)| t)
            .collect();
        let all: Vec<&str> = UMQ_FUNCTIONS
            .iter()
            .chain(&EXTENSION_FUNCTIONS)
            .copied()
            .collect();
        for name in &all {
            assert_eq!(all.iter().filter(|n| *n == name).count(), 1, "{name} twice");
            assert!(
                exported.contains(&format!("extern \"C\" fn {name}(")),
                "{name} is not an export"
            );
        }
        let exports = exported.matches("#[unsafe(no_mangle)]").count();
        assert_eq!(exports, all.len(), "exports not in the lists");
    }

    #[test]
    fn loopback_and_shared_memory_are_usable_here() {
        let info = gather();
        let names: Vec<&str> = info.providers.iter().map(|p| p.name).collect();
        assert_eq!(names, ["loopback", "shm", "fabric"]);
        assert!(info.providers[0].usable);
        let shm = &info.providers[1];
        assert!(shm.usable, "{:?}", shm.why_not);
        let checks: Vec<(&str, bool)> = shm.checks.iter().map(|c| (c.name, c.ok)).collect();
        assert_eq!(checks[..2], [("memfd", true), ("proc_fd", true)]);
        let fabric = &info.providers[2];
        assert_eq!(fabric.usable, fabric.why_not.is_none());
        assert_eq!(info.version, env!("CARGO_PKG_VERSION"));
        let plain = if cfg!(debug_assertions) {
            "with debug assertions"
        } else {
            "release"
        };
        assert_eq!(
            info.build, plain,
            "the tests are not built by scripts/build-pgo.sh"
        );
    }
}
