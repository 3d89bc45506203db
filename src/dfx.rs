//! Diagnostics (`umq_dfx_cmd_process`): per-queue message counters, error counters, and latency
//! records of the API calls, with histograms over user thresholds.
//!
//! Results are written into library-owned memory that stays valid until the next GET_RESULT of
//! the same module or `umq_uninit`; the caller never frees it.

use crate::abi::errno::*;
use crate::abi::types::*;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::time::Instant;

static STATS_ON: AtomicBool = AtomicBool::new(false);
static PERF_ON: AtomicBool = AtomicBool::new(false);
static ERR_STATS: [AtomicU64; 24] = [const { AtomicU64::new(0) }; 24];

const FIELDS: usize = 4 + 9;
/// Per record type, a log-scale histogram for quantiles: four buckets per power of two of ns.
const LOG_BUCKETS: usize = 256;

/// Latency samples of `N` record types: per type the sum, minimum, maximum and count, the
/// counts under the user's thresholds (`umq_dfx`), and a log-scale histogram for quantiles.
struct Recorder<const N: usize> {
    fields: [[AtomicU64; FIELDS]; N],
    hist: [[AtomicU64; LOG_BUCKETS]; N],
}

impl<const N: usize> Recorder<N> {
    const fn new() -> Self {
        Recorder {
            fields: [const { [const { AtomicU64::new(0) }; FIELDS] }; N],
            hist: [const { [const { AtomicU64::new(0) }; LOG_BUCKETS] }; N],
        }
    }

    fn clear(&self) {
        self.hist
            .iter()
            .flatten()
            .for_each(|c| c.store(0, Ordering::Relaxed));
        for rec in &self.fields {
            for (i, c) in rec.iter().enumerate() {
                c.store(if i == 1 { u64::MAX } else { 0 }, Ordering::Relaxed);
            }
        }
    }

    fn record(&self, kind: usize, ns: u64) {
        let rec = &self.fields[kind % N];
        rec[0].fetch_add(ns, Ordering::Relaxed);
        rec[1].fetch_min(ns, Ordering::Relaxed);
        rec[2].fetch_max(ns, Ordering::Relaxed);
        rec[3].fetch_add(1, Ordering::Relaxed);
        let n = THRESH_NUM.load(Ordering::Relaxed) as usize;
        let bucket = (0..n)
            .find(|&i| ns < THRESH[i].load(Ordering::Relaxed))
            .unwrap_or(n);
        rec[4 + bucket].fetch_add(1, Ordering::Relaxed);
        self.hist[kind % N][log_bucket(ns)].fetch_add(1, Ordering::Relaxed);
    }

    fn summary(&self, kind: usize) -> PerfSummary {
        let rec = &self.fields[kind % N];
        let hist: Vec<u64> = self.hist[kind % N]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let count: u64 = hist.iter().sum();
        let quantile = |q: f64| {
            let want = ((count as f64 * q).ceil() as u64).max(1);
            let mut seen = 0;
            hist.iter()
                .position(|&n| {
                    seen += n;
                    seen >= want
                })
                .map_or(0, log_bucket_top)
        };
        let max = rec[2].load(Ordering::Relaxed);
        PerfSummary {
            count,
            sum: rec[0].load(Ordering::Relaxed),
            min: if count == 0 {
                0
            } else {
                rec[1].load(Ordering::Relaxed)
            },
            max,
            quantiles: if count == 0 {
                [0; 4]
            } else {
                [0.5, 0.9, 0.99, 0.9999].map(|q| quantile(q).min(max))
            },
        }
    }
}

/// The API calls, by their `umq_perf_record_type_t`.
static PERF: Recorder<22> = Recorder::new();
static THRESH: [AtomicU64; 8] = [const { AtomicU64::new(0) }; 8];
static THRESH_NUM: AtomicU32 = AtomicU32::new(0);

struct Outputs {
    stats: Vec<u64>,
    perf: Vec<u64>,
}
static OUT: Mutex<Outputs> = Mutex::new(Outputs {
    stats: Vec::new(),
    perf: Vec::new(),
});

/// Each queue's message counters, as the layer that owns the queues reports them: this module
/// sits below it (the queues count into it), so it is handed them.
pub trait QueueCounters {
    /// Every queue's handle and its send, receive and read counts.
    fn each(&self) -> Vec<(u64, [u64; 3])>;
    /// Sets every queue's counts to zero.
    fn clear(&self);
}

/// At `umq_init` (no queue exists yet): the features' switches, every counter zero.
pub fn reset(feature: u32) {
    STATS_ON.store(feature & UMQ_FEATURE_ENABLE_STATS != 0, Ordering::Relaxed);
    PERF_ON.store(feature & UMQ_FEATURE_ENABLE_PERF != 0, Ordering::Relaxed);
    clear_err_stats();
    clear_perf();
}

pub fn release() {
    let mut out = OUT.lock().unwrap_or_else(|p| p.into_inner());
    out.stats = Vec::new();
    out.perf = Vec::new();
}

pub fn stats_on() -> bool {
    STATS_ON.load(Ordering::Relaxed)
}

/// (Cold: it is called only on the way to an error.)
#[cold]
pub fn count_err(kind: umq_err_stats_type_t) {
    ERR_STATS[kind as usize % 24].fetch_add(1, Ordering::Relaxed);
}

fn clear_err_stats() {
    ERR_STATS.iter().for_each(|c| c.store(0, Ordering::Relaxed));
}

/// Forgets every latency sample (`umq_stats_perf_reset` too).
pub fn clear_perf() {
    PERF.clear();
}

/// Whether perf collection is on.
#[inline(always)]
pub fn perf_on() -> bool {
    PERF_ON.load(Ordering::Relaxed)
}

/// Starts a latency sample when perf collection is on.
pub fn perf_start() -> Option<Instant> {
    PERF_ON.load(Ordering::Relaxed).then(Instant::now)
}

/// Records a sample started by `perf_start`; `kind` is only worked out when one was started, so
/// a hot path with perf collection off pays one branch.
#[inline]
pub fn perf_record(kind: impl FnOnce() -> umq_perf_record_type_t, start: Option<Instant>) {
    if let Some(t) = start {
        record(kind(), t);
    }
}

fn record(kind: umq_perf_record_type_t, t: Instant) {
    PERF.record(kind as usize, t.elapsed().as_nanos() as u64);
}

/// The log-scale bucket of `ns`: its power of two and the quarter within it.
fn log_bucket(ns: u64) -> usize {
    let ns = ns.max(1);
    let exp = 63 - ns.leading_zeros() as usize;
    let quarter = if exp >= 2 {
        (ns >> (exp - 2)) as usize & 3
    } else {
        0
    };
    (exp * 4 + quarter).min(LOG_BUCKETS - 1)
}

/// The upper edge (ns) of a log-scale bucket.
fn log_bucket_top(b: usize) -> u64 {
    let (exp, quarter) = (b / 4, b as u64 % 4);
    ((4 + quarter + 1) << exp) >> 2
}

/// One record type's latencies: count, sum, min, max (ns), and p50, p90, p99, p99.99 to the
/// resolution of a quarter of a power of two (an upper bound).
pub struct PerfSummary {
    pub count: u64,
    pub sum: u64,
    pub min: u64,
    pub max: u64,
    pub quantiles: [u64; 4],
}

pub fn perf_summary(kind: umq_perf_record_type_t) -> PerfSummary {
    PERF.summary(kind as usize)
}

/// Turns latency collection on or off (`umq_stats_perf_start` / `_stop`).
pub fn perf_switch(on: bool) {
    PERF_ON.store(on, Ordering::Relaxed);
}

/// What the transport timing (`umq_stats_tp_perf_*`) measures: the provider's part of a call,
/// below the queue layer's checks and bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportOp {
    /// A post's provider step: the queue's unsent WRs handed to its provider (in this process,
    /// delivered to the peer queue).
    Send,
    /// A receive poll's one-message step (a message taken from the provider into our next
    /// receive buffer).
    Receive,
    /// A provider's full round: what the peer sent taken in, our WRs it finished completed,
    /// our waiting WRs sent.
    Round,
}

impl TransportOp {
    pub const ALL: [TransportOp; 3] = [TransportOp::Send, TransportOp::Receive, TransportOp::Round];

    pub fn name(self) -> &'static str {
        match self {
            TransportOp::Send => "provider_send",
            TransportOp::Receive => "provider_receive",
            TransportOp::Round => "provider_round",
        }
    }
}

static TP_PERF_ON: AtomicBool = AtomicBool::new(false);
static TP_PERF: Recorder<3> = Recorder::new();

/// Starts (forgetting what an earlier run measured) or stops the transport timing.
pub fn tp_perf_switch(on: bool) {
    if on {
        TP_PERF.clear();
    }
    TP_PERF_ON.store(on, Ordering::Relaxed);
}

/// Starts a transport sample when the transport timing is on (one load when it is off).
#[inline(always)]
pub fn tp_perf_start() -> Option<Instant> {
    if TP_PERF_ON.load(Ordering::Relaxed) {
        return Some(Instant::now());
    }
    None
}

/// Records a sample started by `tp_perf_start`.
#[inline(always)]
pub fn tp_perf_record(op: TransportOp, start: Option<Instant>) {
    if let Some(t) = start {
        TP_PERF.record(op as usize, t.elapsed().as_nanos() as u64);
    }
}

pub fn tp_perf_summary(op: TransportOp) -> PerfSummary {
    TP_PERF.summary(op as usize)
}

fn stats_result(result: &mut umq_dfx_result_t, queues: &dyn QueueCounters) {
    let queues = queues.each();
    let mut out = OUT.lock().unwrap_or_else(|p| p.into_inner());
    // u64 storage keeps the 8-byte alignment umq_stats_infos_t needs.
    out.stats = vec![0u64; 25 + 4 * queues.len()];
    let infos = out.stats.as_mut_ptr() as *mut umq_stats_infos_t;
    unsafe {
        for (i, c) in ERR_STATS.iter().enumerate() {
            (*infos).err_stats[i] = c.load(Ordering::Relaxed);
        }
        (*infos).stats_info_num = queues.len() as u32;
        let inst = (*infos).stats_info.as_mut_ptr();
        for (i, &(umqh, stats)) in queues.iter().enumerate() {
            *inst.add(i) = umq_stats_info_instance_t { stats, umqh };
        }
        result.out.stats_out_parm = infos;
    }
}

fn perf_result(result: &mut umq_dfx_result_t) {
    let mut out = OUT.lock().unwrap_or_else(|p| p.into_inner());
    let record_words = size_of::<umq_perf_record_t>().div_ceil(8);
    out.perf = vec![0u64; 2 + record_words];
    let base = out.perf.as_mut_ptr();
    unsafe {
        let infos = base as *mut umq_perf_infos_t;
        let record = base.add(2) as *mut umq_perf_record_t;
        for (t, rec) in PERF.fields.iter().enumerate() {
            let r = &mut (*record).type_record[t];
            r.accumulation = rec[0].load(Ordering::Relaxed);
            r.min = if rec[3].load(Ordering::Relaxed) == 0 {
                0
            } else {
                rec[1].load(Ordering::Relaxed)
            };
            r.max = rec[2].load(Ordering::Relaxed);
            r.cnt = rec[3].load(Ordering::Relaxed);
            for b in 0..9 {
                r.bucket[b] = rec[4 + b].load(Ordering::Relaxed);
            }
        }
        (*record).is_used = true;
        (*infos).perf_record_num = 1;
        *(*infos).perf_record.as_mut_ptr() = record;
        result.out.perf_out_parm = infos;
    }
}

pub fn process(cmd: &umq_dfx_cmd_t, result: &mut umq_dfx_result_t, queues: &dyn QueueCounters) {
    result.module_id = cmd.module_id;
    result.cmd = cmd.cmd;
    result.err_code = 0;
    let id = unsafe { cmd.cmd.stats_cmd_id };
    match (cmd.module_id, id) {
        (UMQ_DFX_MODULE_STATS, UMQ_STATS_CMD_START) => STATS_ON.store(true, Ordering::Relaxed),
        (UMQ_DFX_MODULE_STATS, UMQ_STATS_CMD_STOP) => STATS_ON.store(false, Ordering::Relaxed),
        (UMQ_DFX_MODULE_STATS, UMQ_STATS_CMD_CLEAR) => {
            clear_err_stats();
            queues.clear();
        }
        (UMQ_DFX_MODULE_STATS, UMQ_STATS_CMD_GET_RESULT) => stats_result(result, queues),
        (UMQ_DFX_MODULE_PERF, UMQ_PERF_CMD_START) => {
            let p = unsafe { cmd.input.perf_in_parm };
            if p.thresh_num > UMQ_PERF_QUANTILE_MAX_NUM
                || p.thresh_array[..p.thresh_num.min(8) as usize]
                    .windows(2)
                    .any(|w| w[0] >= w[1])
            {
                crate::log_err!(
                    "umq_dfx_cmd_process",
                    "perf thresholds must be at most 8 and strictly increasing"
                );
                result.err_code = -UMQ_ERR_EINVAL;
                return;
            }
            for (i, t) in THRESH.iter().enumerate() {
                t.store(p.thresh_array[i], Ordering::Relaxed);
            }
            THRESH_NUM.store(p.thresh_num, Ordering::Relaxed);
            PERF_ON.store(true, Ordering::Relaxed);
        }
        (UMQ_DFX_MODULE_PERF, UMQ_PERF_CMD_STOP) => PERF_ON.store(false, Ordering::Relaxed),
        (UMQ_DFX_MODULE_PERF, UMQ_PERF_CMD_CLEAR) => clear_perf(),
        (UMQ_DFX_MODULE_PERF, UMQ_PERF_CMD_GET_RESULT) => perf_result(result),
        (m, c) => {
            crate::log_err!("umq_dfx_cmd_process", "unknown module {m} / command {c}");
            result.err_code = -UMQ_ERR_EINVAL;
        }
    }
}
