//! The base API: the library posts and recycles receive buffers itself, and frees sent buffers
//! once their send completes.

use super::{MAX_SGE, Queue};
use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval, eperm};
use std::mem::MaybeUninit;
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

/// Tops the queue's receive buffers up to rx_depth (announcing them, with flow control), and
/// lets a local sender that was waiting for them go on: it may have nothing more to post that
/// would move it along itself. Through a link, the post itself takes in a message that waited
/// for a buffer (`push_rx`), as a pro-API receive post does, and a further round here would
/// find nothing new: it cost every dequeue a lock and a look at the ring.
pub fn post_initial_rx(q: &Queue) -> UmqResult<()> {
    post_rx_from(q, 1, usize::MAX)
}

/// What a dequeue does after taking its messages: replaces the receive buffers they came in,
/// once `refill_batch` of them are missing. One at a time, a buffer took a trip to the pool's
/// lock and lookup and a flow-control post of its own, on every message's critical path.
/// `room` is the receive queue's room as the dequeue's poll left it (`poll_rx_run`).
fn replace_rx(q: &Queue, room: usize) -> UmqResult<()> {
    post_rx_from(q, refill_batch(q.cfg.rx_depth), room)
}

/// How many missing receive buffers a dequeue waits for before it posts them together: a
/// quarter of the queue, at most 16 (as UCX refills its receive queues), at least one. At
/// least `rx_depth - batch + 1` stay posted, so a peer always has credit for some, and the
/// application finds every message that arrived without the refill.
fn refill_batch(rx_depth: u32) -> usize {
    (rx_depth as usize / 4).clamp(1, 16)
}

/// Tops up when at least `least` receive buffers are missing. `room`, the queue's room as a
/// caller saw it under the queue's lock, spares a look under the lock when it is short of
/// `least` (usize::MAX: none seen); a top-up looks again.
fn post_rx_from(q: &Queue, least: usize, room: usize) -> UmqResult<()> {
    let mut announce = false;
    let result = match room < least {
        true => Ok(()),
        false => top_up_rx(q, least, &mut announce),
    };
    if announce {
        q.flow_progress();
    }
    if !q.over_link.load(std::sync::atomic::Ordering::Relaxed) {
        q.kick_blocked_sender();
    }
    result
}

fn top_up_rx(q: &Queue, mut least: usize, announce: &mut bool) -> UmqResult<()> {
    loop {
        let want = q.rx_room().min(crate::limits::BATCH as usize);
        if want == 0 || want < least {
            return Ok(());
        }
        least = 1;
        let head =
            q.rt.pool
                .alloc(q.cfg.rx_buf_size, want as u32, 0, q.handle)
                .inspect_err(|_| {
                    crate::dfx::count_err(UMQ_ERR_STATS_TYPE_RX_BUF_CTX_ALLOC);
                })?;
        // Not zeroed: a dequeue replaces one buffer, and clearing room for 64 cost it more
        // than the replacement.
        let mut bufs =
            [const { MaybeUninit::<*mut umq_buf_t>::uninit() }; crate::limits::BATCH as usize];
        let mut got = 0;
        for (slot, b) in bufs[..want].iter_mut().zip(crate::buf::iter(head)) {
            // Receive buffers hold rx_buf_size bytes, even when the pool slot is larger, so a
            // longer message arrives in fragments exactly as the peer configured.
            unsafe { (*b).buf_size = q.cfg.rx_buf_size };
            // Held: the library's until a dequeue hands it over, so a stale pointer the
            // application frees again cannot free it.
            unsafe { crate::buf::held::hold(b) };
            slot.write(b);
            got += 1;
        }
        debug_assert_eq!(got, want, "the pool returns as many buffers as asked");
        // SAFETY: the first `got` entries were written just above.
        let bufs = unsafe { crate::buf::written(&bufs, got) };
        let (taken, progress) = q.push_rx(bufs);
        *announce |= progress;
        for &b in &bufs[taken..] {
            let _ = q.rt.pool.free_one(b);
        }
        if taken < got {
            return Ok(());
        }
    }
}

/// Frees a chain the library linked (a received message): it ends at a NULL `qbuf_next`.
fn free_chain(q: &Queue, head: *mut umq_buf_t) {
    free_bufs(q, head, usize::MAX);
}

/// Frees up to `n` buffers of a list from `head` on (each `qbuf_next` is read before its buffer
/// goes back to the pool).
fn free_bufs(q: &Queue, head: *mut umq_buf_t, n: usize) {
    let mut b = head;
    for _ in 0..n {
        if b.is_null() {
            return;
        }
        let next = unsafe { (*b).qbuf_next };
        if let Err(why) = q.rt.pool.free_one(b) {
            crate::log_err!("umq", "queue {:#x}: cannot free {b:p}: {why}", q.handle);
        }
        b = next;
    }
}

/// Frees the buffers of completed sends: each completion is one WR, and only its own buffers
/// go (the enqueued list was never cut, so its last buffer still points at the next WR).
fn reap_tx(q: &Queue) {
    // A few at a time (the loop goes on while a poll fills it): an enqueue or dequeue usually
    // reaps one, and a smaller array is cleared without a call into memset. When nothing sent
    // is still ours (a ping-pong's enqueue, after the dequeue before it reaped) the poll
    // returns at once, without its round over a link.
    let mut done = [ptr::null_mut(); 16];
    loop {
        let n = q.reap_sends(&mut done);
        for &wr in &done[..n] {
            let status = unsafe { (*wr).status() };
            if status != UMQ_BUF_SUCCESS {
                crate::log_warn!(
                    "umq_enqueue",
                    "queue {:#x}: a message failed with status {status}",
                    q.handle
                );
            }
            free_bufs(q, wr, crate::buf::wr_bufs(wr).count());
        }
        if n < done.len() {
            return;
        }
    }
}

/// Sends a list as one message per WR, exactly as `umq_post` splits a chain: each WR's first
/// buffer's `total_data_size` says where it ends. The whole list is taken or none of it: a
/// program that retries the same list after `-UMQ_ERR_EAGAIN` must not send its first WRs
/// twice. With flow control, WRs without credit yet wait in the library (the base API hands
/// its buffers over).
pub fn enqueue(q: &Queue, head: *mut umq_buf_t, bad: &mut *mut umq_buf_t) -> UmqResult<()> {
    const F: &str = "umq_enqueue";
    require_base(q, F).inspect_err(|_| *bad = head)?;
    reap_tx(q);
    // Not zeroed, as `given` below: only the entries of the messages are written and read.
    let mut heads =
        [const { MaybeUninit::<*mut umq_buf_t>::uninit() }; crate::limits::BATCH as usize];
    let heads = check_messages(head, &mut heads).inspect_err(|_| *bad = head)?;
    // Each message goes as a SEND. A refused list (the queue not bound, in the error state, or
    // without room for all of it: none is taken then) gets its fields back as the caller gave
    // them.
    // Only the first n are written and read: zeroing all 64 (4 KiB) cost a small message's
    // enqueue a quarter of its instructions.
    let mut given = [const { MaybeUninit::<[u64; 8]>::uninit() }; crate::limits::BATCH as usize];
    for (&wr, given) in heads.iter().zip(&mut given) {
        unsafe {
            given.write((*wr).qbuf_ext);
            (*wr).qbuf_ext = [0; 8];
            (*wr).pro_mut().opcode = UMQ_OPC_SEND;
        }
    }
    q.post_tx_whole(head, bad).inspect_err(|_| {
        for (&wr, given) in heads.iter().zip(&given) {
            unsafe { (*wr).qbuf_ext = given.assume_init_read() };
        }
    })
}

/// The first buffers of the messages of an enqueued list, checked: at most `UMQ_BATCH_SIZE`
/// messages of at most `MAX_SGE` buffers and `UMQ_MAX_BUF_REQUEST_SIZE` bytes each.
fn check_messages(
    head: *mut umq_buf_t,
    heads: &mut [MaybeUninit<*mut umq_buf_t>],
) -> UmqResult<&[*mut umq_buf_t]> {
    const F: &str = "umq_enqueue";
    let mut n = 0;
    let mut cur = head;
    while !cur.is_null() {
        if n == heads.len() {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_DATA_NUM_INVALID);
            return Err(einval(
                F,
                format_args!(
                    "more than UMQ_BATCH_SIZE ({}) messages in one call",
                    heads.len()
                ),
            ));
        }
        let total = unsafe { (*cur).total_data_size };
        let Some((tail, nbufs)) = crate::buf::message_span(cur, MAX_SGE) else {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_SGE_NUM_INVALID);
            return Err(einval(
                F,
                format_args!(
                    "buffer {cur:p}: total_data_size {total} is not the sum of data_size over at most {MAX_SGE} buffers"
                ),
            ));
        };
        if total > UMQ_MAX_BUF_REQUEST_SIZE {
            crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_DATA_NUM_INVALID);
            return Err(einval(
                F,
                format_args!("message of {total} bytes exceeds UMQ_MAX_BUF_REQUEST_SIZE"),
            ));
        }
        for b in crate::buf::iter(cur).take(nbufs) {
            let b = unsafe { &*b };
            if b.data_size > b.buf_size || b.buf_data.is_null() && b.buf_size > 0 {
                crate::dfx::count_err(UMQ_ERR_STATS_TYPE_ENQUEUE_PARM_INVALID);
                return Err(einval(
                    F,
                    format_args!(
                        "buffer {b:p}: data_size {} does not fit buf_size {} at buf_data {:p}",
                        b.data_size, b.buf_size, b.buf_data
                    ),
                ));
            }
        }
        heads[n].write(cur);
        n += 1;
        cur = unsafe { (*tail).qbuf_next };
    }
    // SAFETY: the first n entries were written in the loop.
    Ok(unsafe { crate::buf::written(heads, n) })
}

/// Most messages one `umq_dequeue` returns. The reference's UB transport polls up to 64
/// completions a call and links their messages into one list; its IPC transport returns one.
const DEQUEUE_MOST: usize = 64;

/// The received messages waiting, linked into one list the caller frees (or None): each
/// message is its head's `total_data_size` bytes of buffers, and the last buffer of one points
/// at the head of the next, as the reference's UB transport returns them (up to
/// `DEQUEUE_MOST`). In IPC mode one message a call, as the reference's IPC transport does.
pub fn dequeue(q: &Queue) -> UmqResult<Option<*mut umq_buf_t>> {
    require_base(q, "umq_dequeue")?;
    reap_tx(q);
    let most = if q.cfg.trans_mode == UMQ_TRANS_MODE_IPC {
        1
    } else {
        DEQUEUE_MOST
    };
    let mut got = [ptr::null_mut(); DEQUEUE_MOST];
    loop {
        let mut room = usize::MAX;
        let n = q.poll_rx_run(&mut got[..most], &mut room);
        if n == 0 {
            return Ok(None);
        }
        let mut list = MessageList::default();
        for &head in &got[..n] {
            if is_message(head) {
                unsafe { (*head).set_status(UMQ_BUF_SUCCESS) };
                crate::buf::held::hand_over(crate::buf::wr_bufs(head));
                list.append(head);
            } else {
                free_chain(q, head);
            }
        }
        // The messages are the caller's now: a receive buffer that cannot be replaced yet is
        // tried again on the next call, which reports the failure if it has nothing to return.
        let topped_up = replace_rx(q, room);
        if let Some(head) = list.head {
            if let Err(e) = topped_up {
                crate::log_warn!(
                    "umq_dequeue",
                    "queue {:#x}: receive buffers not replaced yet ({e})",
                    q.handle
                );
            }
            return Ok(Some(head));
        }
        topped_up?;
    }
}

/// Whether a received entry is a message for the application. A window update piggybacked on
/// a message is still that message; a standalone update carries nothing for the application
/// and its buffer goes straight back.
fn is_message(head: *mut umq_buf_t) -> bool {
    let (status, len) = unsafe { ((*head).status(), (*head).total_data_size) };
    status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE && len > 0
}

/// Messages linked into one list, each message's last buffer pointing at the next head.
#[derive(Default)]
struct MessageList {
    head: Option<*mut umq_buf_t>,
    tail: *mut umq_buf_t,
}

impl MessageList {
    /// Appends a received message: a chain of buffers ending in a NULL `qbuf_next`.
    fn append(&mut self, message: *mut umq_buf_t) {
        match self.head {
            None => self.head = Some(message),
            Some(_) => unsafe { (*self.tail).qbuf_next = message },
        }
        self.tail = crate::buf::iter(message).last().unwrap_or(message);
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
