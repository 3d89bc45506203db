//! The buffer calls of the public API, on top of the pool.

use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use crate::runtime::Runtime;

/// `umq_buf_alloc`: from `shared` (a queue's shared pool) or the process pool; `umqh` is written
/// into each buffer.
pub fn alloc(
    rt: &Runtime,
    request_size: u32,
    num: u32,
    shared: Option<&std::sync::Arc<crate::buf::pool::Lists>>,
    umqh: u64,
    option: Option<&umq_alloc_option_t>,
) -> UmqResult<*mut umq_buf_t> {
    const F: &str = "umq_buf_alloc";
    if num == 0 || num > UMQ_BATCH_SIZE {
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
        _ => rt.pool.default_headroom,
    };
    match shared {
        Some(lists) => rt.pool.alloc_in(lists, request_size, num, headroom, umqh),
        None => rt.pool.alloc(request_size, num, headroom, umqh),
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
pub fn free_list(rt: &Runtime, head: *mut umq_buf_t) {
    let mut b = head;
    while !b.is_null() {
        // One lookup a buffer: the slot found for the check is the one freed.
        let Some(slot) = rt.pool.slot_of_header(b as usize).filter(|s| s.in_use()) else {
            crate::log_err!(
                "umq_buf_free",
                "{b:p} is not a live buffer of this library (foreign pointer or double free); stopped there"
            );
            return;
        };
        // Read before the buffer is free: another thread may take it at once.
        let next = unsafe { (*b).qbuf_next };
        let _ = rt.pool.free_slot(slot, b);
        b = next;
    }
}

/// Frees the first message of a list and returns the head of the next one.
pub fn break_and_free(rt: &Runtime, head: *mut umq_buf_t) -> UmqResult<*mut umq_buf_t> {
    let live = |b: *mut umq_buf_t| {
        rt.pool
            .slot_of_header(b as usize)
            .is_some_and(|s| s.in_use())
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
    free_list(rt, head);
    Ok(next)
}

fn live_slot(rt: &Runtime, func: &str, b: *mut umq_buf_t) -> UmqResult<crate::buf::pool::SlotRef> {
    rt.pool
        .slot_of_header(b as usize)
        .filter(|s| s.in_use())
        .ok_or_else(|| {
            einval(
                func,
                format_args!("{b:p} is not a live buffer of this library"),
            )
        })
}

pub fn headroom_reset(rt: &Runtime, b: *mut umq_buf_t, headroom: u16) -> UmqResult<()> {
    const F: &str = "umq_buf_headroom_reset";
    let slot = live_slot(rt, F, b)?;
    if headroom as usize > slot.data_cap() {
        return Err(einval(
            F,
            format_args!("headroom {headroom} > buffer capacity {}", slot.data_cap()),
        ));
    }
    let h = unsafe { &mut *b };
    h.headroom_size = headroom;
    h.buf_data = unsafe { slot.data_start().add(headroom as usize) } as *mut _;
    h.buf_size = (slot.data_cap() - headroom as usize) as u32;
    h.data_size = h.data_size.min(h.buf_size);
    h.total_data_size = h.total_data_size.min(h.buf_size).max(h.data_size);
    Ok(())
}

pub fn reset(rt: &Runtime, b: *mut umq_buf_t) -> UmqResult<()> {
    let slot = live_slot(rt, "umq_buf_reset", b)?;
    let headroom = slot.alloc_headroom();
    let h = unsafe { &mut *b };
    h.headroom_size = headroom;
    h.buf_data = unsafe { slot.data_start().add(headroom as usize) } as *mut _;
    h.buf_size = (slot.data_cap() - headroom as usize) as u32;
    h.data_size = slot.alloc_request_size();
    h.total_data_size = slot.alloc_request_size();
    Ok(())
}

pub fn data_to_head(rt: &Runtime, data: *mut std::ffi::c_void) -> Option<*mut umq_buf_t> {
    rt.pool
        .slot_of_data(data as usize)
        .filter(|s| s.in_use())
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
