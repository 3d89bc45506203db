//! The buffer calls of the public API, on top of the pool.

use crate::abi::types::*;
use crate::buf::pool::Pool;
use crate::error::{UmqResult, einval};

/// `umq_buf_alloc`: from `shared` (a queue's shared pool) or the process pool; `umqh` is written
/// into each buffer.
pub fn alloc(
    pool: &Pool,
    request_size: u32,
    num: u32,
    shared: Option<&std::sync::Arc<crate::buf::pool::Lists>>,
    umqh: u64,
    option: Option<&umq_alloc_option_t>,
) -> UmqResult<*mut umq_buf_t> {
    const F: &str = "umq_buf_alloc";
    if num == 0 || num > crate::limits::BATCH {
        return Err(einval(
            F,
            format_args!("request_qbuf_num {num} outside 1..=UMQ_BATCH_SIZE"),
        ));
    }
    if request_size > UMQ_MAX_BUF_REQUEST_SIZE {
        return Err(einval(
            F,
            format_args!("request_size {request_size} > UMQ_MAX_BUF_REQUEST_SIZE"),
        ));
    }
    let headroom = match option {
        Some(o) if o.flag & !UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE != 0 => {
            return Err(einval(
                F,
                format_args!("unknown option.flag bits {:#x}", o.flag),
            ));
        }
        Some(o) if o.flag & UMQ_ALLOC_FLAG_HEAD_ROOM_SIZE != 0 => o.headroom_size,
        _ => pool.default_headroom,
    };
    match shared {
        Some(lists) => pool.alloc_in(lists, request_size, num, headroom, umqh),
        None => pool.alloc(request_size, num, headroom, umqh),
    }
    .inspect_err(|e| {
        crate::dfx::count_err(UMQ_ERR_STATS_TYPE_QBUF_ALLOC);
        crate::log_err!(
            F,
            "cannot allocate {num} x {request_size} bytes (error {e})"
        );
    })
}

/// Frees a whole list; stops (and logs) at the first pointer that is not a live buffer of ours.
pub fn free_list(pool: &Pool, head: *mut umq_buf_t) {
    let mut b = head;
    while !b.is_null() {
        // One lookup a buffer: the slot found for the check is the one freed.
        let Some(slot) = pool.slot_of_header(b as usize).filter(|s| s.in_use()) else {
            crate::log_err!(
                "umq_buf_free",
                "{b:p} is not a live buffer of this library (foreign pointer or double free); stopped there"
            );
            return;
        };
        if super::held::is_held(b) {
            crate::log_err!(
                "umq_buf_free",
                "{b:p} is a receive buffer the library holds (a stale pointer: freed before, and reused); stopped there"
            );
            return;
        }
        // Read before the buffer is free: another thread may take it at once.
        let next = unsafe { (*b).qbuf_next };
        let _ = pool.free_slot(slot, b);
        b = next;
    }
}

/// Frees the first message of a list and returns the head of the next one.
pub fn break_and_free(pool: &Pool, head: *mut umq_buf_t) -> UmqResult<*mut umq_buf_t> {
    let live = |b: *mut umq_buf_t| {
        pool.slot_of_header(b as usize).is_some_and(|s| s.in_use()) && !super::held::is_held(b)
    };
    if !live(head) {
        return Err(einval(
            "umq_buf_break_and_free",
            format_args!("{head:p} is not a live buffer of this library"),
        ));
    }
    let (tail, _) = crate::buf::message_span(head, usize::MAX).unwrap_or_else(|| {
        // A list whose sizes do not add up is one message to its end.
        (crate::buf::iter(head).last().unwrap(), 0)
    });
    let next = unsafe { (*tail).qbuf_next };
    unsafe { (*tail).qbuf_next = std::ptr::null_mut() };
    free_list(pool, head);
    Ok(next)
}

fn live_slot<'a>(
    pool: &'a Pool,
    func: &str,
    b: *mut umq_buf_t,
) -> UmqResult<crate::buf::pool::SlotRef<'a>> {
    pool.slot_of_header(b as usize)
        .filter(|s| s.in_use() && !super::held::is_held(b))
        .ok_or_else(|| {
            einval(
                func,
                format_args!("{b:p} is not a live buffer of this library"),
            )
        })
}

/// Gives every message of the list from `head` on `headroom` bytes before its data, as the
/// reference does: each message's first buffer (`first_fragment`) gets the new headroom, and
/// the message's `total_data_size` is laid out again over its buffers (each one's
/// `data_size`), the first holding `headroom` bytes less. Refused, with nothing changed, when a
/// buffer is not a live one of ours or a message would need more buffers than before.
pub fn headroom_reset(pool: &Pool, head: *mut umq_buf_t, headroom: u16) -> UmqResult<()> {
    const F: &str = "umq_buf_headroom_reset";
    if head.is_null() {
        return Err(einval(F, format_args!("qbuf is NULL")));
    }
    for_each_live(pool, F, head, |b, slot| {
        let h = unsafe { &*b };
        if h.first_fragment() || b == head {
            check_headroom_fits(F, h, slot.data_cap(), headroom)
        } else {
            Ok(())
        }
    })?;
    let mut left = unsafe { (*head).total_data_size };
    for_each_live(pool, F, head, |b, slot| {
        let h = unsafe { &mut *b };
        if h.first_fragment() {
            h.headroom_size = headroom;
            h.buf_data = unsafe { slot.data_start().add(headroom as usize) } as *mut _;
            h.buf_size = (slot.data_cap() - headroom as usize) as u32;
            left = h.total_data_size;
        }
        h.data_size = left.min(h.buf_size);
        left -= h.data_size;
        Ok(())
    })
}

/// Calls `each` with every buffer of the list from `head` on and its slot, in order, each one
/// checked to be a live buffer of ours before its `qbuf_next` is read. A list that loops back
/// on itself is refused (Brent's cycle finding: the walk remembers one buffer, moved to the
/// current one whenever the steps since reach a power of two).
fn for_each_live(
    pool: &Pool,
    func: &str,
    head: *mut umq_buf_t,
    mut each: impl FnMut(*mut umq_buf_t, &crate::buf::pool::SlotRef) -> UmqResult<()>,
) -> UmqResult<()> {
    let (mut b, mut remembered, mut steps, mut power) = (head, head, 0u64, 1u64);
    while !b.is_null() {
        let slot = live_slot(pool, func, b)?;
        each(b, &slot)?;
        let next = unsafe { (*b).qbuf_next };
        if next == remembered {
            return Err(einval(func, format_args!("the list from {head:p} loops")));
        }
        steps += 1;
        if steps == power {
            (remembered, steps, power) = (next, 0, power * 2);
        }
        b = next;
    }
    Ok(())
}

/// A message whose first buffer is `h` (of `cap` data bytes) can have `headroom` bytes before
/// its data: they fit the buffer, and the message needs no more buffers than it did.
fn check_headroom_fits(func: &str, h: &umq_buf_t, cap: usize, headroom: u16) -> UmqResult<()> {
    let total = h.total_data_size as usize;
    let buffers = |room: usize| (total + room).div_ceil(cap);
    if headroom as usize > cap || buffers(headroom as usize) > buffers(h.headroom_size as usize) {
        return Err(einval(
            func,
            format_args!(
                "headroom {headroom}: a message of {total} bytes in buffers of {cap} would need more buffers"
            ),
        ));
    }
    Ok(())
}

pub fn reset(pool: &Pool, b: *mut umq_buf_t) -> UmqResult<()> {
    let slot = live_slot(pool, "umq_buf_reset", b)?;
    let headroom = slot.alloc_headroom();
    let h = unsafe { &mut *b };
    h.headroom_size = headroom;
    h.buf_data = unsafe { slot.data_start().add(headroom as usize) } as *mut _;
    h.buf_size = (slot.data_cap() - headroom as usize) as u32;
    h.data_size = slot.alloc_request_size();
    h.total_data_size = slot.alloc_request_size();
    Ok(())
}

pub fn data_to_head(pool: &Pool, data: *mut std::ffi::c_void) -> Option<*mut umq_buf_t> {
    pool.slot_of_data(data as usize)
        .filter(|s| s.in_use() && !super::held::is_held(s.header()))
        .map(|s| s.header())
}

pub fn split(head: *mut umq_buf_t, node: *mut umq_buf_t) -> UmqResult<()> {
    const F: &str = "umq_buf_split";
    if head == node {
        return Err(einval(F, format_args!("node is the head itself")));
    }
    let mut b = head;
    while !b.is_null() {
        let next = unsafe { (*b).qbuf_next };
        if next == node {
            unsafe { (*b).qbuf_next = std::ptr::null_mut() };
            return Ok(());
        }
        b = next;
    }
    Err(einval(F, format_args!("node {node:p} is not in the list")))
}
