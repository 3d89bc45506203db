//! Queue-room queries with libfabric's calling convention (`docs/FLOW_CONTROL.md`, section 2).
//!
//! `umq_fi_ep_get` hands out an object whose leading layout is libfabric 1.x `struct fid_ep`:
//! `fid`, then `ops` pointing at a `struct fi_ops_ep` whose `rx_size_left` / `tx_size_left`
//! sit where libfabric's inline `fi_rx_size_left` / `fi_tx_size_left` look for them. One endpoint
//! lives per queue slot for the life of the process, so a stale endpoint is detected (its queue
//! is gone) instead of being a dangling pointer; anything outside that array is "foreign".

use super::{Failure, ffi_guard};
use crate::abi::errno::UMQ_ERR_EINVAL;
use crate::queue::{self, table};
use std::cell::UnsafeCell;
use std::ffi::c_void;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// libfabric's `FI_EINVAL` and `FI_EOPBADSTATE`.
pub const FI_EINVAL: isize = 22;
pub const FI_EOPBADSTATE: isize = 258;
const FI_ENOSYS: i32 = 38;
const FI_CLASS_EP: usize = 3;

impl Failure for isize {
    fn failure() -> isize {
        -FI_EINVAL
    }
}
impl Failure for i64 {
    fn failure() -> i64 {
        -(FI_EINVAL as i64)
    }
}

#[repr(C)]
pub struct fid {
    pub fclass: usize,
    pub context: *mut c_void,
    pub ops: *const fi_ops,
}

#[repr(C)]
pub struct fi_ops {
    pub size: usize,
    pub close: unsafe extern "C" fn(*mut fid) -> i32,
    pub bind: unsafe extern "C" fn(*mut fid, *mut fid, u64) -> i32,
    pub control: unsafe extern "C" fn(*mut fid, i32, *mut c_void) -> i32,
    pub ops_open:
        unsafe extern "C" fn(*mut fid, *const i8, u64, *mut *mut c_void, *mut c_void) -> i32,
    pub tostr: unsafe extern "C" fn(*const fid, *mut i8, usize) -> i32,
    pub ops_set: unsafe extern "C" fn(*mut fid, *const i8, u64, *mut c_void, *mut c_void) -> i32,
}

#[repr(C)]
pub struct fi_ops_ep {
    pub size: usize,
    pub cancel: unsafe extern "C" fn(*mut fid, *mut c_void) -> isize,
    pub getopt: unsafe extern "C" fn(*mut fid, i32, i32, *mut c_void, *mut usize) -> i32,
    pub setopt: unsafe extern "C" fn(*mut fid, i32, i32, *const c_void, usize) -> i32,
    pub tx_ctx:
        unsafe extern "C" fn(*mut fid_ep, i32, *mut c_void, *mut *mut fid_ep, *mut c_void) -> i32,
    pub rx_ctx:
        unsafe extern "C" fn(*mut fid_ep, i32, *mut c_void, *mut *mut fid_ep, *mut c_void) -> i32,
    pub rx_size_left: unsafe extern "C" fn(*mut fid_ep) -> isize,
    pub tx_size_left: unsafe extern "C" fn(*mut fid_ep) -> isize,
}

/// libfabric 1.x `struct fid_ep`.
#[repr(C)]
pub struct fid_ep {
    pub fid: fid,
    pub ops: *const fi_ops_ep,
    pub cm: *const c_void,
    pub msg: *const c_void,
    pub rma: *const c_void,
    pub tagged: *const c_void,
    pub atomic: *const c_void,
    pub collective: *const c_void,
}

#[repr(C)]
struct Endpoint {
    /// Written once, by the first `umq_fi_ep_get` of its slot (`ready` says when), then only
    /// read; its raw pointers are to statics.
    ep: UnsafeCell<fid_ep>,
    umqh: AtomicU64,
    /// 0: never handed out (all zero), 1: being filled in, 2: filled in.
    ready: AtomicU32,
}

unsafe impl Sync for Endpoint {}

/// Slot `index`'s endpoint, filled in on first use.
fn endpoint(index: usize) -> &'static Endpoint {
    let e = &endpoints()[index];
    if e.ready.load(Ordering::Acquire) != 2 {
        if e.ready
            .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
            .is_ok()
        {
            // SAFETY: nobody reads `ep` before `ready` is 2, and only this thread writes it.
            unsafe { e.ep.get().write(new_fid_ep()) };
            e.ready.store(2, Ordering::Release);
        }
        while e.ready.load(Ordering::Acquire) != 2 {
            std::hint::spin_loop();
        }
    }
    e
}

fn new_fid_ep() -> fid_ep {
    fid_ep {
        fid: fid {
            fclass: FI_CLASS_EP,
            context: std::ptr::null_mut(),
            ops: &FI_OPS,
        },
        ops: &EP_OPS,
        cm: std::ptr::null(),
        msg: std::ptr::null(),
        rma: std::ptr::null(),
        tagged: std::ptr::null(),
        atomic: std::ptr::null(),
        collective: std::ptr::null(),
    }
}
unsafe impl Send for Endpoint {}

unsafe extern "C" fn close(_: *mut fid) -> i32 {
    0 // The endpoint belongs to its queue; umq_destroy releases it.
}
unsafe extern "C" fn bind(_: *mut fid, _: *mut fid, _: u64) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn control(_: *mut fid, _: i32, _: *mut c_void) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn ops_open(
    _: *mut fid,
    _: *const i8,
    _: u64,
    _: *mut *mut c_void,
    _: *mut c_void,
) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn tostr(_: *const fid, _: *mut i8, _: usize) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn cancel(_: *mut fid, _: *mut c_void) -> isize {
    -(FI_ENOSYS as isize)
}
unsafe extern "C" fn getopt(_: *mut fid, _: i32, _: i32, _: *mut c_void, _: *mut usize) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn setopt(_: *mut fid, _: i32, _: i32, _: *const c_void, _: usize) -> i32 {
    -FI_ENOSYS
}
unsafe extern "C" fn ctx(
    _: *mut fid_ep,
    _: i32,
    _: *mut c_void,
    _: *mut *mut fid_ep,
    _: *mut c_void,
) -> i32 {
    -FI_ENOSYS
}

static FI_OPS: fi_ops = fi_ops {
    size: size_of::<fi_ops>(),
    close,
    bind,
    control,
    ops_open,
    tostr,
    ops_set: ops_open_set,
};
unsafe extern "C" fn ops_open_set(
    _: *mut fid,
    _: *const i8,
    _: u64,
    _: *mut c_void,
    _: *mut c_void,
) -> i32 {
    -FI_ENOSYS
}

static EP_OPS: fi_ops_ep = fi_ops_ep {
    size: size_of::<fi_ops_ep>(),
    cancel,
    getopt,
    setopt,
    tx_ctx: ctx,
    rx_ctx: ctx,
    rx_size_left: fi_rx_size_left,
    tx_size_left: fi_tx_size_left,
};

/// One endpoint per queue slot, reserved up front and resident only where handed out.
fn endpoints() -> &'static [Endpoint] {
    static EPS: OnceLock<crate::os::ZeroedSlab<Endpoint>> = OnceLock::new();
    EPS.get_or_init(|| {
        // SAFETY: an all-zero endpoint is one never handed out (`ready` 0).
        unsafe { crate::os::ZeroedSlab::new(table::MAX_QUEUES) }
            .expect("cannot reserve the endpoint table")
    })
}

/// The queue handle behind an endpoint pointer, if the pointer is one of ours.
fn handle_of(ep: *mut fid_ep) -> Option<u64> {
    let eps = endpoints();
    let base = eps.as_ptr() as usize;
    let at = (ep as usize).checked_sub(base)?;
    let size = size_of::<Endpoint>();
    if ep.is_null() || at % size != 0 || at / size >= eps.len() {
        return None;
    }
    Some(eps[at / size].umqh.load(Ordering::Acquire))
}

fn size_left(ep: *mut fid_ep, f: fn(&queue::Queue) -> Option<u64>) -> isize {
    let Some(umqh) = handle_of(ep) else {
        crate::log_err!("fi_size_left", "NULL or foreign endpoint {ep:p}");
        return -FI_EINVAL;
    };
    native_size_left(umqh, f) as isize
}

fn native_size_left(umqh: u64, f: fn(&queue::Queue) -> Option<u64>) -> i64 {
    match table::with(umqh, |q| f(q)) {
        None => -(FI_EINVAL as i64),
        Some(None) => -(FI_EOPBADSTATE as i64),
        Some(Some(n)) => n as i64,
    }
}

/// The endpoint of a queue (NULL with errno `UMQ_ERR_EINVAL` for a bad handle).
#[unsafe(no_mangle)]
pub extern "C" fn umq_fi_ep_get(umqh: u64) -> *mut fid_ep {
    ffi_guard!("umq_fi_ep_get", {
        let Some(index) = table::with(umqh, |_| table::index_of(umqh)).flatten() else {
            crate::error::set_errno(-UMQ_ERR_EINVAL);
            return std::ptr::null_mut();
        };
        let e = endpoint(index);
        e.umqh.store(umqh, Ordering::Release);
        e.ep.get()
    })
}

/// Lower bound on the send WRs that can be posted now without `EAGAIN`, flow-control window
/// included; `-FI_EINVAL` for a NULL or foreign endpoint, `-FI_EOPBADSTATE` when unbound.
#[unsafe(no_mangle)]
pub extern "C" fn fi_tx_size_left(ep: *mut fid_ep) -> isize {
    ffi_guard!("fi_tx_size_left", {
        size_left(ep, queue::Queue::tx_size_left)
    })
}

/// Lower bound on the receive buffers that can be posted now.
#[unsafe(no_mangle)]
pub extern "C" fn fi_rx_size_left(ep: *mut fid_ep) -> isize {
    ffi_guard!("fi_rx_size_left", {
        size_left(ep, queue::Queue::rx_size_left)
    })
}

/// `fi_tx_size_left` by queue handle.
#[unsafe(no_mangle)]
pub extern "C" fn umq_tx_size_left(umqh: u64) -> i64 {
    ffi_guard!("umq_tx_size_left", {
        native_size_left(umqh, queue::Queue::tx_size_left)
    })
}

/// `fi_rx_size_left` by queue handle.
#[unsafe(no_mangle)]
pub extern "C" fn umq_rx_size_left(umqh: u64) -> i64 {
    ffi_guard!("umq_rx_size_left", {
        native_size_left(umqh, queue::Queue::rx_size_left)
    })
}
