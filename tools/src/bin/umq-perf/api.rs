//! Thin helpers over the public C API, shared by every measurement. They assert on errors:
//! umq-perf is a measuring tool, and a failed call means the numbers would be meaningless.

use std::ptr;
use umq::abi::errno::{UMQ_BUF_FLOW_CONTROL_UPDATE, UMQ_BUF_SUCCESS, UMQ_ERR_EAGAIN};
use umq::abi::ext::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;
use umq::ffi::api::*;
use umq::ffi::pro_api::*;

/// Flow-control settings of one run.
#[derive(Clone, Copy, Debug)]
pub struct Flow {
    pub on: bool,
    pub atomic_window: bool,
    pub notify_interval: u16,
    /// 0: the library's default (half the receive depth).
    pub initial_window: u16,
}

pub fn init(flow: Flow) {
    init_api(flow, false)
}

/// `init` for the pro API or, with `base_api`, the base API.
pub fn init_api(flow: Flow, base_api: bool) {
    let mut cfg: Box<umq_init_cfg_t> = Box::new(unsafe { std::mem::zeroed() });
    cfg.buf_mode = UMQ_BUF_COMBINE;
    cfg.feature = if base_api {
        UMQ_FEATURE_API_BASE
    } else {
        UMQ_FEATURE_API_PRO
    };
    if flow.on {
        cfg.feature |= UMQ_FEATURE_ENABLE_FLOW_CONTROL;
        cfg.flow_control.notify_interval = flow.notify_interval;
        cfg.flow_control.use_atomic_window = flow.atomic_window;
        cfg.flow_control.initial_window = flow.initial_window;
    }
    assert_eq!(umq_init(&mut *cfg), 0, "umq_init failed");
}

/// A polling-mode queue in UB mode on 127.0.0.1, as the reference examples create them.
pub fn create(depth: u32) -> u64 {
    create_in(depth, UMQ_TRANS_MODE_UB)
}

/// `create` in another trans mode (IPC, as applications between processes of one host use).
pub fn create_in(depth: u32, trans_mode: umq_trans_mode_t) -> u64 {
    create_at(depth, trans_mode, std::net::Ipv4Addr::LOCALHOST.into())
}

/// `create_in` with `ip` as the queue's address (`dev_info`), which other hosts reach it at.
pub fn create_at(depth: u32, trans_mode: umq_trans_mode_t, ip: std::net::IpAddr) -> u64 {
    let mut o: umq_create_option_t = unsafe { std::mem::zeroed() };
    o.trans_mode = trans_mode;
    let text = format!("{ip}\0");
    let field = match ip {
        std::net::IpAddr::V4(_) => {
            o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
            unsafe { &mut o.dev_info.u.ipv4.ip_addr[..] }
        }
        std::net::IpAddr::V6(_) => {
            o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV6;
            unsafe { &mut o.dev_info.u.ipv6.ip_addr[..] }
        }
    };
    for (d, s) in field.iter_mut().zip(text.bytes()) {
        *d = s as _;
    }
    o.create_flag = UMQ_CREATE_FLAG_RX_DEPTH | UMQ_CREATE_FLAG_TX_DEPTH;
    o.rx_depth = depth;
    o.tx_depth = depth;
    let q = umq_create(&mut o);
    assert!(q != 0, "umq_create failed");
    q
}

pub fn bind_info(q: u64) -> Vec<u8> {
    let mut info = vec![0u8; 512];
    let n = umq_bind_info_get(q, info.as_mut_ptr(), info.len() as u32);
    assert!(n > 0, "umq_bind_info_get failed");
    info.truncate(n as usize);
    info
}

pub fn bind(q: u64, mut info: Vec<u8>) {
    let r = umq_bind(q, info.as_mut_ptr(), info.len() as u32);
    assert_eq!(r, 0, "umq_bind failed");
}

/// `n` single buffers of `size` bytes, unchained, with `opcode` set.
pub fn alloc(size: u32, n: u32, opcode: umq_opcode_t) -> Vec<*mut umq_buf_t> {
    alloc_from(0, size, n, opcode)
}

/// `alloc` from queue `umqh`'s shared pool (0: the process pool).
pub fn alloc_from(umqh: u64, size: u32, n: u32, opcode: umq_opcode_t) -> Vec<*mut umq_buf_t> {
    let mut v = Vec::with_capacity(n as usize);
    let mut left = n;
    while left > 0 {
        let k = left.min(UMQ_BATCH_SIZE);
        let head = umq_buf_alloc(size, k, umqh, ptr::null_mut());
        assert!(!head.is_null(), "umq_buf_alloc failed");
        v.extend(umq::buf::iter(head));
        left -= k;
    }
    for &b in &v {
        unsafe {
            (*b).qbuf_next = ptr::null_mut();
            (*b).pro_mut().opcode = opcode;
        }
    }
    v
}

pub fn chain(bufs: &[*mut umq_buf_t]) -> *mut umq_buf_t {
    for w in bufs.windows(2) {
        unsafe { (*w[0]).qbuf_next = w[1] };
    }
    if let Some(&last) = bufs.last() {
        unsafe { (*last).qbuf_next = ptr::null_mut() };
    }
    bufs[0]
}

pub fn post(h: u64, bufs: &[*mut umq_buf_t], dir: umq_io_direction_t) {
    let mut bad = ptr::null_mut();
    let r = umq_post(h, chain(bufs), dir, &mut bad);
    assert_eq!(r, 0, "umq_post failed");
}

/// Posts up to UMQ_BATCH_SIZE receive buffers at a time.
pub fn post_rx_all(h: u64, bufs: &[*mut umq_buf_t]) {
    for c in bufs.chunks(UMQ_BATCH_SIZE as usize) {
        post(h, c, UMQ_IO_RX);
    }
}

/// Posts sends from `bufs`; returns how many went in (fewer when flow control or the send
/// queue refused the rest with EAGAIN; those stay ours).
pub fn post_tx_some(h: u64, bufs: &[*mut umq_buf_t]) -> usize {
    let mut bad = ptr::null_mut();
    match umq_post(h, chain(bufs), UMQ_IO_TX, &mut bad) {
        0 => bufs.len(),
        r if r == -UMQ_ERR_EAGAIN => bufs.iter().position(|&b| b == bad).unwrap(),
        r => panic!("umq_post failed: {r}"),
    }
}

/// Posts all of `bufs`, retrying what `EAGAIN` refused after running `on_full` (which lets the
/// peer return credit).
pub fn post_all(h: u64, bufs: &[*mut umq_buf_t], mut on_full: impl FnMut()) {
    let mut from = 0;
    while from < bufs.len() {
        from += post_tx_some(h, &bufs[from..]);
        if from < bufs.len() {
            on_full();
        }
    }
}

/// Posts the list `list[from..]` as it is linked, the way the reference's qps tool posts one
/// list head round after round: its `qbuf_next` links are never rewritten here, and umq_post
/// must not rewrite them either. What EAGAIN refuses is posted again from `*bad_qbuf` after
/// running `on_full`. Returns how many posts were refused.
pub fn post_list(h: u64, list: &[*mut umq_buf_t], mut on_full: impl FnMut()) -> u64 {
    let mut from = 0;
    let mut refused = 0;
    while from < list.len() {
        let mut bad = ptr::null_mut();
        match umq_post(h, list[from], UMQ_IO_TX, &mut bad) {
            0 => return refused,
            r if r == -UMQ_ERR_EAGAIN => {
                from = list
                    .iter()
                    .position(|&b| b == bad)
                    .expect("bad_qbuf is in the list");
                refused += 1;
                on_full();
            }
            r => panic!("umq_post failed: {r}"),
        }
    }
    refused
}

/// Panics unless `list` is still linked in order and ends with its last buffer.
pub fn assert_linked(list: &[*mut umq_buf_t]) {
    for w in list.windows(2) {
        assert_eq!(
            unsafe { (*w[0]).qbuf_next },
            w[1],
            "umq_post rewrote the list"
        );
    }
    let last = *list.last().unwrap();
    assert!(
        unsafe { (*last).qbuf_next }.is_null(),
        "umq_post rewrote the list"
    );
}

pub fn poll(h: u64, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) -> usize {
    let r = umq_poll(h, dir, out.as_mut_ptr(), out.len() as u32);
    assert!(r >= 0, "umq_poll failed: {r}");
    r as usize
}

pub fn poll_exact(h: u64, dir: umq_io_direction_t, out: &mut [*mut umq_buf_t]) {
    let mut n = 0;
    while n < out.len() {
        n += poll(h, dir, &mut out[n..]);
    }
}

/// What a completion is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Done {
    Sent,
    Received,
    /// A standalone window update landed in a receive buffer: repost it, it carries no data.
    WindowUpdate,
}

/// Classifies a completion; any status but success (or a window update) means the run is
/// broken. A window update with data rode on a SEND: the data is an ordinary message.
pub fn done(b: *mut umq_buf_t) -> Done {
    let (status, dir, len) = unsafe { ((*b).status(), (*b).io_direction(), (*b).total_data_size) };
    match (status, dir) {
        (UMQ_BUF_SUCCESS, UMQ_IO_RX) => Done::Received,
        (UMQ_BUF_SUCCESS, _) => Done::Sent,
        (UMQ_BUF_FLOW_CONTROL_UPDATE, UMQ_IO_RX) if len > 0 => Done::Received,
        (UMQ_BUF_FLOW_CONTROL_UPDATE, UMQ_IO_RX) => Done::WindowUpdate,
        _ => panic!("completion with status {status}"),
    }
}

/// Both flow-control statistics of one queue (zero when flow control is off).
#[derive(Clone, Copy, Default, Debug)]
#[repr(C)]
pub struct SideStats {
    pub fc: umq_flowcontrol_stats_t,
    pub ext: umq_ext_flow_control_stats_t,
    /// Which path messages took over shared memory (by reference, placed).
    pub transport: umq_ext_transport_stats_t,
}

pub fn side_stats(h: u64) -> SideStats {
    let mut s = SideStats::default();
    ctl(h, UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY, &mut s.fc);
    ctl(h, UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS, &mut s.ext);
    ctl(h, UMQ_EXT_OPCODE_TRANSPORT_STATS, &mut s.transport);
    s
}

fn ctl<T>(h: u64, opcode: u32, out: &mut T) {
    // EINVAL when flow control is off: the zeroed stats are the right answer then.
    let _ = user_ctl(h, opcode, Default::default(), out_of(out));
}

/// `umq_user_ctl` with opcode `opcode`; its return code.
pub fn user_ctl(h: u64, opcode: u32, input: umq_user_ctl_in_t, out: umq_user_ctl_out_t) -> i32 {
    let (mut i, mut o) = (umq_user_ctl_in_t { opcode, ..input }, out);
    umq_user_ctl(h, &mut i, &mut o)
}

/// `umq_user_ctl`'s output naming `v`.
pub fn out_of<T>(v: &mut T) -> umq_user_ctl_out_t {
    umq_user_ctl_out_t {
        addr: v as *mut T as u64,
        len: size_of::<T>() as u32,
        reserved: 0,
    }
}

/// Unbinds (which flushes the posted receive buffers back), frees every buffer that comes
/// back, and destroys the queue.
pub fn teardown(h: u64) {
    umq_unbind(h);
    let mut scratch = [ptr::null_mut(); 64];
    loop {
        let n = umq_poll(h, UMQ_IO_ALL, scratch.as_mut_ptr(), 64);
        if n <= 0 {
            break;
        }
        scratch[..n as usize].iter().for_each(|&b| umq_buf_free(b));
    }
    umq_destroy(h);
}
