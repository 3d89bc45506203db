//! The base API: the library posts and recycles receive buffers itself, and frees sent buffers
//! once their send completes.

use super::{MAX_SGE, Queue};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval, eperm};
use std::ptr;

fn require_base(q: &Queue, func: &str) -> UmqResult<()> {
    if q.rt.pro_api {
        return Err(eperm(
            func,
            format_args!(
                "queue {:#x}: base API call but umq_init set UMQ_FEATURE_API_PRO",
                q.handle
            ),
        ));
    }
    Ok(())
}

/// Tops the queue's receive buffers up to rx_depth (announcing them, with flow control).
pub fn post_initial_rx(q: &Queue) -> UmqResult<()> {
    let mut announce = false;
    let result = top_up_rx(q, &mut announce);
    if announce {
        q.flow_progress();
    }
    result
}

fn top_up_rx(q: &Queue, announce: &mut bool) -> UmqResult<()> {
    loop {
        let want = q.rx_room().min(UMQ_BATCH_SIZE as usize);
        if want == 0 {
            return Ok(());
        }
        let head =
            q.rt.pool
                .alloc(q.cfg.rx_buf_size, want as u32, 0, q.handle)
                .inspect_err(|_| {
                    crate::dfx::count_err(UMQ_ERR_STATS_TYPE_RX_BUF_CTX_ALLOC);
                })?;
        let mut bufs = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
        for (slot, b) in bufs.iter_mut().zip(crate::buf::iter(head)) {
            // Receive buffers hold rx_buf_size bytes, even when the pool slot is larger, so a
            // longer message arrives in fragments exactly as the peer configured.
            unsafe { (*b).buf_size = q.cfg.rx_buf_size };
            *slot = b;
        }
        let (taken, progress) = q.push_rx(&bufs[..want]);
        *announce |= progress;
        for &b in &bufs[taken..want] {
            let _ = q.rt.pool.free_one(b);
        }
        if taken < want {
            return Ok(());
        }
    }
}

fn free_chain(q: &Queue, head: *mut umq_buf_t) {
    let mut b = head;
    while !b.is_null() {
        let next = unsafe { (*b).qbuf_next };
        if let Err(why) = q.rt.pool.free_one(b) {
            crate::log_err!("umq", "queue {:#x}: cannot free {b:p}: {why}", q.handle);
        }
        b = next;
    }
}

/// Frees the buffers of completed sends.
fn reap_tx(q: &Queue) {
    let mut done = [ptr::null_mut(); UMQ_BATCH_SIZE as usize];
    loop {
        let n = q.poll_inner(UMQ_IO_TX, &mut done);
        for &b in &done[..n] {
            let status = unsafe { (*b).status() };
            if status != UMQ_BUF_SUCCESS {
                crate::log_warn!(
                    "umq_enqueue",
                    "queue {:#x}: a message failed with status {status}",
                    q.handle
                );
            }
            free_chain(q, b);
        }
        if n < done.len() {
            return;
        }
    }
}

pub fn enqueue(q: &Queue, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
    const F: &str = "umq_enqueue";
    require_base(q, F).inspect_err(|_| *bad = head)?;
    reap_tx(q);
    let mut total = 0u64;
    for (i, b) in crate::buf::iter(head).enumerate() {
        if i == MAX_SGE {
            *bad = head;
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_SGE_NUM_INVALID);
            return Err(einval(
                F,
                format_args!("a message may have at most {MAX_SGE} buffers"),
            ));
        }
        total += unsafe { (*b).data_size } as u64;
    }
    if total > UMQ_MAX_BUF_REQUEST_SIZE as u64 {
        *bad = head;
        crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_DATA_NUM_INVALID);
        return Err(einval(
            F,
            format_args!("message of {total} bytes exceeds UMQ_MAX_BUF_REQUEST_SIZE"),
        ));
    }
    unsafe {
        (*head).total_data_size = total as u32;
        (*head).qbuf_ext = [0; 8];
        (*head).pro_mut().opcode = UMQ_OPC_SEND;
    }
    q.post_tx(head, bad)
}

/// One received message (a buffer chain the caller frees), or None.
pub fn dequeue(q: &Queue) -> UmqResult<Option<*mut umq_buf_t>> {
    require_base(q, "umq_dequeue")?;
    reap_tx(q);
    let mut out = [ptr::null_mut(); 1];
    loop {
        if q.poll_inner(UMQ_IO_RX, &mut out) == 0 {
            return Ok(None);
        }
        let head = out[0];
        let (status, len) = unsafe { ((*head).status(), (*head).total_data_size) };
        // A window update piggybacked on a message is still that message; a standalone update
        // carries nothing for the application and its buffer goes straight back.
        let is_message =
            status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE && len > 0;
        if is_message {
            unsafe { (*head).set_status(UMQ_BUF_SUCCESS) };
            post_initial_rx(q)?;
            return Ok(Some(head));
        }
        free_chain(q, head);
        post_initial_rx(q)?;
    }
}

/// Base API: reaps sent buffers and moves flow control and waiting sends along. Pro API: the
/// same progress without reaping (over shared memory it also takes in the peer's messages).
pub fn notify(q: &Queue) -> UmqResult<()> {
    if !q.rt.pro_api {
        reap_tx(q);
    }
    q.flow_progress();
    q.kick_blocked_sender();
    Ok(())
}
