//! The call trace (`umq_stats_trace_start` / `_stop` of the July 2026 API): while it runs, each
//! thread keeps a ring of records of its `umq_post` and `umq_poll` calls (the queue, when the
//! call began and ended, and the size of each buffer it carried), and the rings are written to
//! the log at INFO: a thread's new records once a second, as it makes them, and every ring's
//! remaining records when the trace stops. A thread's ring is its own (no lock is contended on
//! the call path); it hangs from one of the application's thread keys when the application
//! registered key functions (`app_sync`), else from the library's thread-local storage.
//!
//! As in the reference, a ring that fills before it is written wraps (the oldest records are
//! lost, and the log says so once), and records are written only when more than
//! `output_limit` are new.

use crate::app_sync::{ThreadKeyOps, thread_key_ops};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Records a ring keeps unless the start says otherwise (the reference's default).
pub const DEFAULT_RECORDS: u32 = 8192;
/// Buffer sizes a record keeps; the count covers all of them.
const ITEMS: usize = 16;
/// How often a thread writes its new records while it records.
const OUTPUT_EVERY: Duration = Duration::from_secs(1);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Post,
    Poll,
}

#[derive(Clone, Copy)]
struct Record {
    call: Call,
    umq_id: u32,
    start_ns: u64,
    end_ns: u64,
    items: u32,
    sizes: [u32; ITEMS],
}

/// One thread's records, and what of them the log has.
struct Ring {
    thread: u32,
    generation: u32,
    records: Vec<Record>,
    written: u32,
    output: u32,
    last_output: Instant,
    overwrite_logged: bool,
    /// The session's clock and log limit, copied so that a call takes no shared lock.
    epoch: Instant,
    output_limit: u32,
}

/// What a start set up: the rings, their size, the log limit, and the clock.
struct Session {
    generation: u32,
    record_num: u32,
    output_limit: u32,
    epoch: Instant,
    rings: Vec<Arc<Mutex<Ring>>>,
}

/// The application's thread key the rings hang from: made by the first start after the
/// application registered key functions, and kept for the life of the process (a thread's
/// slot holds its ring until the thread exits, the stop clears the stopping thread's, and a
/// later session replaces what is left).
struct AppKey {
    ops: &'static ThreadKeyOps,
    key: *mut c_void,
}

// SAFETY: the key is an opaque handle of the application's, usable from any thread.
unsafe impl Send for AppKey {}
unsafe impl Sync for AppKey {}

static APP_KEY: std::sync::OnceLock<AppKey> = std::sync::OnceLock::new();

static ON: AtomicBool = AtomicBool::new(false);
static SESSION: Mutex<Option<Session>> = Mutex::new(None);
static GENERATION: AtomicU32 = AtomicU32::new(0);
static THREADS: AtomicU32 = AtomicU32::new(0);

thread_local! {
    static MINE: std::cell::RefCell<Option<Arc<Mutex<Ring>>>> = const { std::cell::RefCell::new(None) };
}

/// Why a start or stop was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    AlreadyRunning,
    NotRunning,
    ZeroRecords,
}

/// Starts tracing with rings of `record_num` records (None: the default), writing a thread's
/// records only when more than `output_limit` are new.
pub fn start(record_num: Option<u32>, output_limit: u32) -> Result<(), Refused> {
    let record_num = record_num.unwrap_or(DEFAULT_RECORDS);
    if record_num == 0 {
        return Err(Refused::ZeroRecords);
    }
    let mut session = lock_session();
    if session.is_some() {
        return Err(Refused::AlreadyRunning);
    }
    if let (None, Some(ops)) = (APP_KEY.get(), thread_key_ops()) {
        let key = unsafe { (ops.key_create)(Some(release_ring)) };
        if !key.is_null() {
            let _ = APP_KEY.set(AppKey { ops, key });
        }
    }
    *session = Some(Session {
        generation: GENERATION.fetch_add(1, Ordering::Relaxed) + 1,
        record_num,
        output_limit,
        epoch: Instant::now(),
        rings: Vec::new(),
    });
    ON.store(true, Ordering::Release);
    Ok(())
}

/// Stops tracing: every ring's records not yet in the log are written, then the rings go.
pub fn stop() -> Result<(), Refused> {
    let mut session = lock_session();
    let s = session.take().ok_or(Refused::NotRunning)?;
    ON.store(false, Ordering::Release);
    for ring in &s.rings {
        write_new(&mut ring.lock().unwrap_or_else(|p| p.into_inner()), 0);
    }
    if let Some(k) = APP_KEY.get() {
        let held = unsafe { (k.ops.get)(k.key) };
        if !held.is_null() {
            unsafe { (k.ops.set)(k.key, std::ptr::null()) };
            unsafe { release_ring(held) };
        }
    }
    Ok(())
}

/// Whether the trace runs (one load: the call path branches on it).
#[inline(always)]
pub fn on() -> bool {
    ON.load(Ordering::Relaxed)
}

/// Records a call begun at `began` on queue `umq_id` that carried buffers of `sizes`.
pub fn record(call: Call, umq_id: u32, began: Instant, sizes: impl Iterator<Item = u32>) {
    let end = Instant::now();
    let Some(ring) = my_ring() else {
        return;
    };
    let mut r = ring.lock().unwrap_or_else(|p| p.into_inner());
    let mut rec = Record {
        call,
        umq_id,
        start_ns: 0,
        end_ns: 0,
        items: 0,
        sizes: [0; ITEMS],
    };
    for size in sizes {
        if (rec.items as usize) < ITEMS {
            rec.sizes[rec.items as usize] = size;
        }
        rec.items += 1;
    }
    let epoch = r.epoch;
    rec.start_ns = began.saturating_duration_since(epoch).as_nanos() as u64;
    rec.end_ns = end.saturating_duration_since(epoch).as_nanos() as u64;
    push(&mut r, rec);
    if r.last_output.elapsed() >= OUTPUT_EVERY {
        let limit = r.output_limit;
        write_new(&mut r, limit);
    }
}

fn push(r: &mut Ring, rec: Record) {
    let cap = r.records.capacity() as u32;
    if r.written.wrapping_sub(r.output) >= cap && !r.overwrite_logged {
        crate::log_warn!(
            "umq_stats_trace",
            "thread {}: more than {cap} records since the last output; the oldest are overwritten",
            r.thread
        );
        r.overwrite_logged = true;
    }
    let at = (r.written % cap) as usize;
    if at < r.records.len() {
        r.records[at] = rec;
    } else {
        r.records.push(rec);
    }
    r.written = r.written.wrapping_add(1);
}

/// Writes a ring's records made since its last output, if more than `limit`.
fn write_new(r: &mut Ring, limit: u32) {
    let cap = r.records.capacity().max(1) as u32;
    let new = r.written.wrapping_sub(r.output);
    r.last_output = Instant::now();
    if new <= limit || new == 0 {
        return;
    }
    let kept = new.min(cap);
    crate::log_info!(
        "umq_stats_trace",
        "thread {} records {}..{}",
        r.thread,
        r.written - kept,
        r.written
    );
    for i in r.written - kept..r.written {
        let rec = &r.records[(i % cap) as usize];
        crate::log_info!("umq_stats_trace", "{}", describe(i, rec));
    }
    r.output = r.written;
    r.overwrite_logged = false;
}

fn describe(i: u32, rec: &Record) -> String {
    let call = match rec.call {
        Call::Post => "POST",
        Call::Poll => "POLL",
    };
    let mut line = format!(
        "#{i} type={call} umq_id={} umq_start={} umq_end={} umq_exec={} item_cnt={};",
        rec.umq_id,
        rec.start_ns,
        rec.end_ns,
        rec.end_ns.saturating_sub(rec.start_ns),
        rec.items
    );
    for (k, size) in rec.sizes.iter().take(rec.items as usize).enumerate() {
        line += &format!(" item[{k}] size={size};");
    }
    line
}

fn lock_session() -> std::sync::MutexGuard<'static, Option<Session>> {
    SESSION.lock().unwrap_or_else(|p| p.into_inner())
}

/// The calling thread's ring of the current session, made on its first traced call.
fn my_ring() -> Option<Arc<Mutex<Ring>>> {
    let generation = GENERATION.load(Ordering::Acquire);
    let current =
        |r: &Arc<Mutex<Ring>>| r.lock().unwrap_or_else(|p| p.into_inner()).generation == generation;
    if let Some(&AppKey { ops, key }) = APP_KEY.get() {
        let held = unsafe { (ops.get)(key) } as *const Mutex<Ring>;
        if !held.is_null() {
            // SAFETY: the slot holds an `Arc::into_raw` of ours; borrow it without taking it.
            let ring = unsafe {
                Arc::increment_strong_count(held);
                Arc::from_raw(held)
            };
            if current(&ring) {
                return Some(ring);
            }
        }
        let ring = new_ring(generation)?;
        let old = held;
        unsafe { (ops.set)(key, Arc::into_raw(ring.clone()).cast()) };
        if !old.is_null() {
            drop(unsafe { Arc::from_raw(old) });
        }
        return Some(ring);
    }
    MINE.with(|mine| {
        let mut mine = mine.borrow_mut();
        if let Some(r) = mine.as_ref().filter(|r| current(r)) {
            return Some(r.clone());
        }
        let ring = new_ring(generation)?;
        *mine = Some(ring.clone());
        Some(ring)
    })
}

/// A ring for this thread in the session of `generation`, registered for the output; None
/// when that session has ended.
fn new_ring(generation: u32) -> Option<Arc<Mutex<Ring>>> {
    let mut session = lock_session();
    let s = session.as_mut().filter(|s| s.generation == generation)?;
    let ring = Arc::new(Mutex::new(Ring {
        thread: THREADS.fetch_add(1, Ordering::Relaxed),
        generation,
        records: Vec::with_capacity(s.record_num as usize),
        written: 0,
        output: 0,
        last_output: Instant::now(),
        overwrite_logged: false,
        epoch: s.epoch,
        output_limit: s.output_limit,
    }));
    s.rings.push(ring.clone());
    Some(ring)
}

/// The application's thread-key destructor: a thread that exits lets its ring go.
unsafe extern "C" fn release_ring(ring: *mut c_void) {
    if !ring.is_null() {
        drop(unsafe { Arc::from_raw(ring as *const Mutex<Ring>) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(i: u32) -> Record {
        Record {
            call: Call::Post,
            umq_id: i,
            start_ns: i as u64,
            end_ns: i as u64 + 5,
            items: 1,
            sizes: [i; ITEMS],
        }
    }

    /// A ring keeps its last `capacity` records in order, however often it wraps, and writes
    /// only those made since its last output.
    #[test]
    fn a_ring_wraps_and_keeps_the_newest() {
        let mut r = Ring {
            thread: 0,
            generation: 0,
            records: Vec::with_capacity(4),
            written: 0,
            output: 0,
            last_output: Instant::now(),
            overwrite_logged: false,
            epoch: Instant::now(),
            output_limit: 0,
        };
        for i in 0..10 {
            push(&mut r, rec(i));
        }
        let cap = r.records.capacity() as u32;
        let kept: Vec<u32> = (r.written - cap..r.written)
            .map(|i| r.records[(i % cap) as usize].umq_id)
            .collect();
        assert_eq!(kept, (10 - cap..10).collect::<Vec<_>>());
        assert!(r.overwrite_logged);
        write_new(&mut r, 0);
        assert_eq!((r.output, r.overwrite_logged), (10, false));
        push(&mut r, rec(10));
        write_new(&mut r, 1);
        assert_eq!(
            r.output, 10,
            "one new record is not more than the limit of one"
        );
    }

    /// Each thread records into a ring of its own (here the library's thread-local storage);
    /// a second start is refused, and after the stop nothing is recorded.
    #[test]
    fn each_thread_records_into_its_own_ring() {
        start(Some(4), 0).unwrap();
        assert_eq!(start(None, 0), Err(Refused::AlreadyRunning));
        assert!(on());
        let t = Instant::now();
        record(Call::Post, 1_000_001, t, [10u32, 20].into_iter());
        std::thread::spawn(|| {
            let t = Instant::now();
            for _ in 0..6 {
                record(Call::Poll, 1_000_002, t, std::iter::empty());
            }
        })
        .join()
        .unwrap();
        {
            let session = lock_session();
            let rings: Vec<_> = session
                .as_ref()
                .unwrap()
                .rings
                .iter()
                .map(|r| r.lock().unwrap())
                .collect();
            let of = |id: u32| {
                rings
                    .iter()
                    .find(|r| r.records.iter().any(|rec| rec.umq_id == id))
                    .unwrap()
            };
            let mine = of(1_000_001);
            assert_eq!((mine.written, mine.records[0].items), (1, 2));
            assert_eq!(mine.records[0].sizes[..2], [10, 20]);
            let other = of(1_000_002);
            assert_eq!(other.written, 6);
            assert!(
                other
                    .records
                    .iter()
                    .all(|rec| rec.umq_id == 1_000_002 && rec.call == Call::Poll)
            );
        }
        stop().unwrap();
        assert!(!on());
        assert_eq!(stop(), Err(Refused::NotRunning));
    }

    #[test]
    fn a_record_lists_its_buffers() {
        let mut rec = rec(3);
        rec.items = 2;
        rec.sizes[1] = 64;
        assert_eq!(
            describe(7, &rec),
            "#7 type=POST umq_id=3 umq_start=3 umq_end=8 umq_exec=5 item_cnt=2; item[0] size=3; item[1] size=64;"
        );
    }
}
