//! Buffers: the pool and the list operations of the public API.

pub mod access;
pub mod arena;
pub mod cache;
pub mod held;
pub mod ops;
mod pin;
/// What `pin` runs on: std here, loom's in `tests/loom_pin.rs`.
mod pin_sync {
    pub use std::sync::atomic::{AtomicU32, Ordering};
}
pub mod pool;
mod stride;

use crate::abi::types::umq_buf_t;
use std::mem::MaybeUninit;

/// The first `n` entries of an array of buffer pointers left uninitialised (clearing room for
/// `UMQ_BATCH_SIZE` of them costs a one-buffer call more than its own work).
///
/// # Safety
/// Each of `slots[..n]` must have been written.
pub unsafe fn written(slots: &[MaybeUninit<*mut umq_buf_t>], n: usize) -> &[*mut umq_buf_t] {
    // SAFETY: MaybeUninit<T> has the layout of T, and the caller wrote these n.
    unsafe { &*(&slots[..n] as *const [MaybeUninit<*mut umq_buf_t>] as *const [*mut umq_buf_t]) }
}

/// Iterates a `qbuf_next` list. The caller vouches that the list is well formed.
pub fn iter(head: *mut umq_buf_t) -> impl Iterator<Item = *mut umq_buf_t> {
    std::iter::successors((!head.is_null()).then_some(head), |&b| {
        let n = unsafe { (*b).qbuf_next };
        (!n.is_null()).then_some(n)
    })
}

/// The buffers of the WR (or message) that `head` starts, without following `qbuf_next` past
/// its last one: buffers are taken until their `data_size` reaches the first buffer's
/// `total_data_size` (at least one buffer, at most the list). The caller's list goes on behind
/// it untouched, as the reference leaves it: a posted list is never cut.
pub fn wr_bufs(head: *mut umq_buf_t) -> WrBufs {
    WrBufs {
        next: head,
        left: unsafe { (*head).total_data_size },
    }
}

/// The iterator of `wr_bufs`: a one-buffer WR costs one compare and never reads `qbuf_next`.
#[derive(Clone)]
pub struct WrBufs {
    next: *mut umq_buf_t,
    left: u32,
}

impl Iterator for WrBufs {
    type Item = *mut umq_buf_t;

    #[inline]
    fn next(&mut self) -> Option<*mut umq_buf_t> {
        let b = self.next;
        if b.is_null() {
            return None;
        }
        let size = unsafe { (*b).data_size };
        self.next = if size >= self.left {
            std::ptr::null_mut()
        } else {
            self.left -= size;
            unsafe { (*b).qbuf_next }
        };
        Some(b)
    }
}

/// The buffers of the first message of a list: as many buffers as it takes for their `data_size`
/// to add up to the first buffer's `total_data_size` (at least one). Returns the last buffer of
/// the message and how many buffers it has, or None when the list ends first or overshoots.
pub fn message_span(head: *mut umq_buf_t, max_bufs: usize) -> Option<(*mut umq_buf_t, usize)> {
    let total = unsafe { (*head).total_data_size } as u64;
    let mut sum = 0u64;
    for (i, b) in iter(head).enumerate() {
        if i == max_bufs {
            return None;
        }
        sum += unsafe { (*b).data_size } as u64;
        if sum >= total {
            return (sum == total).then_some((b, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bufs(sizes: &[u32], total: u32) -> Vec<umq_buf_t> {
        let mut v: Vec<umq_buf_t> = sizes
            .iter()
            .map(|&s| {
                let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
                b.data_size = s;
                b
            })
            .collect();
        v[0].total_data_size = total;
        for i in 0..v.len() - 1 {
            let next = &mut v[i + 1] as *mut umq_buf_t;
            v[i].qbuf_next = next;
        }
        v
    }

    #[test]
    fn wr_bufs_stop_at_the_last_buffer_of_the_wr() {
        let mut v = bufs(&[10, 20, 5, 7], 30);
        let got: Vec<_> = wr_bufs(&mut v[0]).collect();
        assert_eq!(got, [&mut v[0] as *mut _, &mut v[1] as *mut _]);
        // A one-buffer WR never reads the next buffer.
        let mut v = bufs(&[8, 99], 8);
        assert_eq!(wr_bufs(&mut v[0]).count(), 1);
        let mut v = bufs(&[0, 3], 0);
        assert_eq!(wr_bufs(&mut v[0]).count(), 1);
        // A list that ends first ends the WR.
        let mut v = bufs(&[1, 1], 50);
        assert_eq!(wr_bufs(&mut v[0]).count(), 2);
        assert_eq!(v[1].qbuf_next, std::ptr::null_mut(), "nothing written");
    }

    #[test]
    fn message_span_follows_total_data_size() {
        let mut v = bufs(&[10, 20, 5], 30);
        let (tail, n) = message_span(&mut v[0], 64).unwrap();
        assert_eq!((tail, n), (&mut v[1] as *mut _, 2));
        let mut v = bufs(&[10, 20], 25);
        assert!(message_span(&mut v[0], 64).is_none(), "overshoot");
        let mut v = bufs(&[10, 20], 40);
        assert!(message_span(&mut v[0], 64).is_none(), "list ends first");
        let mut v = bufs(&[0], 0);
        assert_eq!(message_span(&mut v[0], 64).unwrap().1, 1);
        let mut v = bufs(&[1, 1, 1], 3);
        assert!(message_span(&mut v[0], 2).is_none(), "too many buffers");
    }
}
