//! Helpers shared by the Rust tests that drive libumq through its C entry points.
#![allow(dead_code)]

use std::ptr;
use umq::abi::errno::*;
use umq::abi::ext::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::ffi::pro_api::*;

#[path = "../../src/draw.rs"]
mod draw;
#[allow(unused_imports)] // not every test uses it
pub use draw::{Draw, Rng};

/// The pro API without flow control.
pub fn init_pro() {
    let mut cfg: umq_init_cfg_t = unsafe { std::mem::zeroed() };
    cfg.buf_mode = UMQ_BUF_SPLIT;
    cfg.feature = UMQ_FEATURE_API_PRO;
    assert_eq!(umq_init(&mut cfg), 0);
}

pub fn init_flow_control(iw: u16, ni: u16, atomic: bool) {
    let mut cfg: umq_init_cfg_t = unsafe { std::mem::zeroed() };
    cfg.buf_mode = UMQ_BUF_SPLIT;
    cfg.feature = UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL;
    cfg.flow_control.initial_window = iw;
    cfg.flow_control.notify_interval = ni;
    cfg.flow_control.use_atomic_window = atomic;
    assert_eq!(umq_init(&mut cfg), 0);
}

pub fn create(name: &str, depth: u32) -> u64 {
    create_in_mode(name, depth, UMQ_MODE_POLLING)
}

/// `create` with a queue mode (`UMQ_MODE_POLLING` or `UMQ_MODE_INTERRUPT`).
pub fn create_in_mode(name: &str, depth: u32, mode: umq_queue_mode_t) -> u64 {
    let mut o: umq_create_option_t = unsafe { std::mem::zeroed() };
    o.trans_mode = UMQ_TRANS_MODE_UB;
    o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
    for (d, s) in unsafe { o.dev_info.u.ipv4.ip_addr.iter_mut() }.zip(b"127.0.0.1") {
        *d = *s as _;
    }
    for (d, s) in o.name.iter_mut().zip(name.bytes()) {
        *d = s as _;
    }
    o.create_flag =
        UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH | UMQ_CREATE_FLAG_QUEUE_MODE;
    o.rx_depth = depth;
    o.tx_depth = depth;
    o.mode = mode;
    let h = umq_create(&mut o);
    assert_ne!(h, 0);
    h
}

pub fn bind_pair(a: u64, b: u64) {
    let (mut ia, mut ib) = ([0u8; 512], [0u8; 512]);
    let la = umq_bind_info_get(a, ia.as_mut_ptr(), 512);
    let lb = umq_bind_info_get(b, ib.as_mut_ptr(), 512);
    assert_eq!(umq_bind(a, ib.as_mut_ptr(), lb), 0);
    assert_eq!(umq_bind(b, ia.as_mut_ptr(), la), 0);
}

/// Runs a `umq_user_ctl` query whose result is a `T` at `out->addr`.
fn query<T: Default>(h: u64, opcode: u32) -> T {
    let mut s = T::default();
    let mut i = umq_user_ctl_in_t {
        opcode,
        ..Default::default()
    };
    let mut o = umq_user_ctl_out_t {
        addr: &mut s as *mut T as u64,
        len: size_of::<T>() as u32,
        reserved: 0,
    };
    assert_eq!(umq_user_ctl(h, &mut i, &mut o), 0);
    s
}

pub fn stats(h: u64) -> umq_flowcontrol_stats_t {
    query(h, UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY)
}

pub fn ext_stats(h: u64) -> umq_ext_flow_control_stats_t {
    query(h, UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS)
}

pub fn transport_stats(h: u64) -> umq_ext_transport_stats_t {
    query(h, UMQ_EXT_OPCODE_TRANSPORT_STATS)
}

/// The transport `h` is bound through, checked to be the one `UMQ_PROVIDER` forces (loopback
/// when it forces none): a test run again over another provider must not pass on loopback.
pub fn forced_transport(h: u64) -> u32 {
    let want = match std::env::var("UMQ_PROVIDER").as_deref() {
        Ok("shm") => umq::abi::ext::UMQ_EXT_TRANSPORT_SHM,
        Ok("fabric") => umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC,
        _ => umq::abi::ext::UMQ_EXT_TRANSPORT_LOOPBACK,
    };
    let got = transport_stats(h).transport;
    assert_eq!(got, want, "the transport UMQ_PROVIDER asked for");
    got
}

/// Switches queued-send mode (our extension) on or off.
pub fn queued_mode(h: u64, on: bool) {
    let mut i = umq_user_ctl_in_t {
        addr: on as u64,
        opcode: UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE,
        ..Default::default()
    };
    let mut o = umq_user_ctl_out_t::default();
    assert_eq!(umq_user_ctl(h, &mut i, &mut o), 0, "queued mode {on}");
}

/// Brings the bound pair `a`, `b` to a quiescent point: every credit announced has been
/// received. Loopback delivers synchronously, so it is one already; over shared memory
/// (`UMQ_PROVIDER=shm`) an announcement can still be in a ring, over the network
/// (`UMQ_PROVIDER=fabric`) on its way, and rounds on both sides (send-completion polls, which
/// take no receive; what they find must be successes) bring it in. Gives up after 100,000
/// turns, leaving the identities to show what did not come.
pub fn settle_pair(a: u64, b: u64) {
    for _ in 0..100_000 {
        let (sa, sb) = (stats(a), stats(b));
        if sa.total_local_rx_notified == sb.total_remote_rx_received
            && sb.total_local_rx_notified == sa.total_remote_rx_received
        {
            return;
        }
        reap_sends(a);
        reap_sends(b);
    }
}

/// Takes up to 64 of `h`'s send completions, each a success, and frees their buffers.
pub fn reap_sends(h: u64) {
    let done = poll(h, UMQ_IO_TX, 64);
    for &t in &done {
        assert_eq!(unsafe { (*t).status() }, UMQ_BUF_SUCCESS);
    }
    free_all(&done);
}

/// The spec's three identities for a quiescent pair.
pub fn assert_identities(a: u64, b: u64) {
    let (sa, sb) = (stats(a), stats(b));
    for s in [&sa, &sb] {
        assert_eq!(
            s.remote_rx_window,
            s.total_remote_rx_received - s.total_remote_rx_consumed,
            "{s:?}"
        );
        assert_eq!(
            s.local_rx_posted,
            s.total_local_rx_posted - s.total_local_rx_notified,
            "{s:?}"
        );
    }
    assert_eq!(sa.total_local_rx_notified, sb.total_remote_rx_received);
    assert_eq!(sb.total_local_rx_notified, sa.total_remote_rx_received);
}

/// Links buffers into one `qbuf_next` list.
pub fn chain(bufs: &[*mut umq_buf_t]) -> *mut umq_buf_t {
    for w in bufs.windows(2) {
        unsafe { (*w[0]).qbuf_next = w[1] };
    }
    if let Some(&last) = bufs.last() {
        unsafe { (*last).qbuf_next = ptr::null_mut() };
    }
    bufs.first().copied().unwrap_or(ptr::null_mut())
}

pub fn alloc(n: usize, size: u32) -> Vec<*mut umq_buf_t> {
    alloc_from(0, n, size)
}

/// `n` buffers of `size` bytes from the queue `q`'s shared pool, or the process pool (`q` 0).
pub fn alloc_from(q: u64, n: usize, size: u32) -> Vec<*mut umq_buf_t> {
    let head = umq_buf_alloc(size, n as u32, q, ptr::null_mut());
    assert!(!head.is_null());
    let mut v = Vec::with_capacity(n);
    let mut b = head;
    while !b.is_null() {
        v.push(b);
        b = unsafe { (*b).qbuf_next };
    }
    assert_eq!(v.len(), n);
    v
}

/// One-buffer SEND WRs carrying an 8-byte sequence number each.
pub fn sends(first_seq: u64, n: usize) -> Vec<*mut umq_buf_t> {
    let v = alloc(n, 8);
    for (k, &b) in v.iter().enumerate() {
        let seq = first_seq + k as u64;
        unsafe {
            std::ptr::write_unaligned((*b).buf_data as *mut u64, seq);
            (*b).data_size = 8;
            (*b).total_data_size = 8;
            (*b).qbuf_ext = [0; 8];
            let pro = (*b).pro_mut();
            pro.opcode = if seq.is_multiple_of(4) {
                UMQ_OPC_SEND_IMM
            } else {
                UMQ_OPC_SEND
            };
            pro.imm_data = seq << 1;
        }
    }
    v
}

pub fn free_all(bufs: &[*mut umq_buf_t]) {
    for &b in bufs {
        unsafe { (*b).qbuf_next = ptr::null_mut() };
        umq_buf_free(b);
    }
}

/// Posts `bufs` in batches of at most 64; returns how many were taken.
pub fn post(h: u64, dir: umq_io_direction_t, bufs: &[*mut umq_buf_t]) -> Result<usize, i32> {
    let mut done = 0;
    for batch in bufs.chunks(UMQ_BATCH_SIZE as usize) {
        let mut bad = ptr::null_mut();
        let rc = umq_post(h, chain(batch), dir, &mut bad);
        if rc == 0 {
            done += batch.len();
            continue;
        }
        let taken = batch
            .iter()
            .position(|&b| b == bad)
            .expect("bad_qbuf names a buffer of the batch");
        assert_eq!(rc, -UMQ_ERR_EAGAIN);
        return Ok(done + taken);
    }
    Ok(done)
}

pub fn poll(h: u64, dir: umq_io_direction_t, max: usize) -> Vec<*mut umq_buf_t> {
    let mut out = vec![ptr::null_mut(); max];
    let n = umq_poll(h, dir, out.as_mut_ptr(), max as u32);
    assert!(n >= 0, "umq_poll failed: {n}");
    out.truncate(n as usize);
    out
}

pub fn seq_of(b: *mut umq_buf_t) -> u64 {
    unsafe { std::ptr::read_unaligned((*b).buf_data as *const u64) }
}

/// What the process holds, from /proc/self (for the leak checks of the fault tests). Private
/// anonymous mappings are the allocator's business (its arenas, its cache of thread stacks,
/// which come and stay as threads come and go): the check counts the shared ones, which are
/// what a binding maps (inboxes, pools, a peer's memory).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct Held {
    pub fds: usize,
    pub memfds: usize,
    pub shared_mappings: usize,
    pub threads: usize,
}

pub fn held() -> Held {
    let links: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    Held {
        fds: links.len(),
        memfds: links.iter().filter(|l| l.starts_with("/memfd:")).count(),
        shared_mappings: shared_maps().len(),
        threads: std::fs::read_dir("/proc/self/task").unwrap().count(),
    }
}

/// The shared mappings of the process, one line of /proc/self/maps each.
pub fn shared_maps() -> Vec<String> {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| {
            l.split_whitespace()
                .nth(1)
                .is_some_and(|perms| perms.ends_with('s'))
        })
        .map(str::to_string)
        .collect()
}

/// `held()` once it equals `want`, or what it still is after two seconds (threads and their
/// stacks go a moment after the binding that needed them).
pub fn held_settled(want: Held) -> Held {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        let now = held();
        if now == want || std::time::Instant::now() > deadline {
            return now;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Panics unless the process holds `before` again, naming the shared mappings that are new
/// since `maps_before` (a `shared_maps()`).
pub fn assert_holds(before: Held, maps_before: &[String], what: &str) {
    let after = held_settled(before);
    if after != before {
        let new: Vec<String> = shared_maps()
            .into_iter()
            .filter(|l| !maps_before.contains(l))
            .collect();
        panic!(
            "{what}: the process holds {after:?}, {before:?} before; new mappings:\n{}",
            new.join("\n")
        );
    }
}

/// Takes every pending async event, as an application reading them would; returns their types.
pub fn drain_async_events() -> Vec<umq_async_event_type_t> {
    let mut types = Vec::new();
    loop {
        let mut info: umq_trans_info_t = unsafe { std::mem::zeroed() };
        let mut ev: umq_async_event_t = unsafe { std::mem::zeroed() };
        if umq_get_async_event(&mut info, &mut ev) != 0 {
            return types;
        }
        types.push(ev.event_type);
        umq_ack_async_event(&mut ev);
    }
}

/// What the process holds once it is back to `threads` threads (a binding's progress thread
/// ends a moment after the binding), with its mappings: the baseline of the leak checks.
pub fn quiescent(threads: usize) -> (Held, Vec<String>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while held().threads != threads && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    (held(), shared_maps())
}

/// A number from the environment (`UMQ_FAULT_RUNS`, `UMQ_FAULT_SEED`, ...), else `default`.
pub fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .map(|v| parse_u64(&v).unwrap_or_else(|| panic!("{name}={v} is not a number")))
        .unwrap_or(default)
}

/// A number in decimal or, with `0x`, in hex: the tests print their seeds in hex, and a seed
/// copied from a failure must reproduce it rather than be ignored.
fn parse_u64(v: &str) -> Option<u64> {
    let v = v.trim().replace('_', "");
    match v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.parse().ok(),
    }
}

/// The fault tests' seed: `UMQ_FAULT_SEED`, else a fixed one.
pub fn fault_seed() -> u64 {
    env_u64("UMQ_FAULT_SEED", 0x5eed_f00d)
}

/// Makes `batch` one-buffer SENDs of 8 bytes carrying `first_seq`, `first_seq + 1`, ...
pub fn fill_sends(batch: &[*mut umq_buf_t], first_seq: u64) {
    for (k, &b) in batch.iter().enumerate() {
        unsafe {
            ptr::write_unaligned((*b).buf_data as *mut u64, first_seq + k as u64);
            (*b).data_size = 8;
            (*b).total_data_size = 8;
            (*b).pro_mut().opcode = UMQ_OPC_SEND;
        }
    }
}
