//! Buffers the library holds for itself: a base-API queue's receive buffers, from their
//! allocation until a dequeue hands their message to the application.
//!
//! The application's buffer calls refuse them. A program that frees a buffer and then frees the
//! stale pointer again would otherwise free whatever now occupies that slot; when the library
//! had taken the slot as a receive buffer, the slot had two owners, and a later destroy walked
//! a chain through freed memory (AFL++ found it). The mark lives in the header's reserved word
//! (`rsvd4`, in both revisions' `umq_buf_t`), so holding and handing over cost a store each and
//! no lookup: the application's calls already look at the header they are given.

use crate::abi::types::umq_buf_t;

/// `rsvd4` of a held buffer ("umq held").
const HELD: u64 = 0x756d_7120_6865_6c64;

/// Marks `b`, just allocated by the library for itself, as held (`queue::base` does, for the
/// receive buffers it posts).
///
/// # Safety
/// `b` is a live buffer header of the library's pool.
pub unsafe fn hold(b: *mut umq_buf_t) {
    unsafe { (*b).rsvd4 = HELD };
}

/// Gives a held message's buffers to the application.
pub fn hand_over(bufs: impl Iterator<Item = *mut umq_buf_t>) {
    for b in bufs {
        // SAFETY: the caller hands over buffers of a message it took from its receive queue.
        unsafe { (*b).rsvd4 = 0 };
    }
}

/// Whether the library holds `b` (a header of its pool: the caller has looked it up).
pub fn is_held(b: *const umq_buf_t) -> bool {
    unsafe { (*b).rsvd4 == HELD }
}
