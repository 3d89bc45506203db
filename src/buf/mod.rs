//! Buffers: the pool and the list operations of the public API.

pub mod ops;
pub mod pool;

use crate::abi::types::umq_buf_t;

/// Iterates a `qbuf_next` list. The caller vouches that the list is well formed.
pub fn iter(head: *mut umq_buf_t) -> impl Iterator<Item = *mut umq_buf_t> {
    std::iter::successors((!head.is_null()).then_some(head), |&b| {
        let n = unsafe { (*b).qbuf_next };
        (!n.is_null()).then_some(n)
    })
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
