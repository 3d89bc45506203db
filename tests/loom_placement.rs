//! Placement (a sender writing a message straight into the receive buffer it will land in) and
//! the owner's presence, under every interleaving loom can produce.
//!
//! `src/transport/shm/placement.rs` and `src/transport/shm/presence.rs` are compiled here unchanged,
//! against loom's atomics: the `sync` module below stands in for `src/transport/shm/sync.rs`. The
//! receive buffers are loom cells, so a sender writing into a buffer while the receiver or its
//! application touches it is reported as a data race, on top of the assertions on the bytes.
//! What the model adds around the two files (the ring, the receiver's posted queue) is the
//! smallest stand-in for `shm.rs` that keeps the property checked: entries go through a
//! single-producer ring in order, each takes the receiver's front posted buffer.

/// Stands in for `src/transport/shm/sync.rs`, the `super::sync` of the two files.
mod sync {
    pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering, fence};

    pub fn pause(_turn: u32) {
        loom::thread::yield_now();
    }
}

#[path = "../src/transport/shm/placement.rs"]
mod placement;
#[path = "../src/transport/shm/presence.rs"]
mod presence;

use loom::cell::UnsafeCell;
use loom::sync::Arc;
use loom::sync::atomic::{AtomicU64, Ordering, fence};
use loom::thread;
use placement::{Board, Publisher};
use presence::Presence;
use std::collections::VecDeque;

/// The parts of an inbox the protocols use, with a two-posting board (so it wraps).
#[derive(Default)]
struct Inbox {
    presence: Presence,
    board: Board<2>,
}

/// Receive buffers of the receiver's shared pool; a posting's offset is the index here.
struct Buffers([UnsafeCell<u64>; 2]);

impl Buffers {
    fn new() -> Self {
        Buffers([UnsafeCell::new(0), UnsafeCell::new(0)])
    }
    fn write(&self, i: u64, v: u64) {
        self.0[i as usize].with_mut(|p| unsafe { *p = v });
    }
    fn read(&self, i: u64) -> u64 {
        self.0[i as usize].with(|p| unsafe { *p })
    }
}

/// The sender's side of a placement, as `shm::place` does it: find the posting for our entry,
/// announce, write, (push the entry), end. Returns the buffer written to.
fn place(inbox: &Inbox, buffers: &Buffers, entry: u64, value: u64, joined: u64) -> Option<u64> {
    let claim = inbox.board.find(entry, 8)?;
    if !inbox.board.begin(|| inbox.presence.left(joined)) {
        return None;
    }
    let at = claim.offset;
    buffers.write(at, value);
    inbox.board.end(claim);
    Some(at)
}

/// The receiver unbinds while the sender may be placing a message into its posted buffer, then
/// gives the buffer back to its application and opens the inbox for a new peer. The sender
/// writes only while the buffer is still posted: either its bytes are there when the unbind
/// completes, or it never writes, even when it found the posting before the unbind and only
/// announces itself after the inbox was open again.
#[test]
fn no_placement_lands_after_the_receiver_left() {
    loom::model(|| {
        let inbox = Arc::new(Inbox::default());
        let buffers = Arc::new(Buffers::new());
        let me = Publisher::default();
        inbox.board.publish(&me, 0, 0, 8);
        let joined = inbox.presence.binding();
        let sender = {
            let (inbox, buffers) = (inbox.clone(), buffers.clone());
            thread::spawn(move || place(&inbox, &buffers, 0, 42, joined).is_some())
        };
        // Unbind, as `Queue::unbind` does it.
        inbox.presence.leave();
        fence(Ordering::SeqCst);
        inbox.board.wait_idle(|| false);
        // The buffer is the application's again.
        let seen = buffers.read(0);
        inbox.board.reset(&me);
        inbox.presence.reopen();
        buffers.write(0, 7);
        let placed = sender.join().unwrap();
        assert_eq!(seen, if placed { 42 } else { 0 });
    });
}

/// A single-producer ring of entries: (placed, buffer, value).
struct Ring {
    entries: [UnsafeCell<(bool, u64, u64)>; MESSAGES as usize],
    pushed: AtomicU64,
}

const MESSAGES: u64 = 3;

impl Ring {
    fn push(&self, k: u64, e: (bool, u64, u64)) {
        self.entries[k as usize].with_mut(|p| unsafe { *p = e });
        self.pushed.store(k + 1, Ordering::Release);
    }
    fn pop(&self, k: u64) -> (bool, u64, u64) {
        while self.pushed.load(Ordering::Acquire) <= k {
            thread::yield_now();
        }
        self.entries[k as usize].with(|p| unsafe { *p })
    }
}

/// Three messages into two receive buffers that the receiver's application reposts as each
/// one completes, all published on a board of two postings. Every message lands in the buffer
/// the receiver takes for it, placed or copied, with its own bytes; the sender never writes
/// into a buffer the application holds (the third message can only be placed into the first
/// buffer once it was posted again).
#[test]
fn each_placed_message_is_in_the_buffer_its_entry_takes() {
    loom::model(|| {
        let inbox = Arc::new(Inbox::default());
        let buffers = Arc::new(Buffers::new());
        let ring = Arc::new(Ring {
            entries: std::array::from_fn(|_| UnsafeCell::new((false, 0, 0))),
            pushed: AtomicU64::new(0),
        });
        let me = Publisher::default();
        // Ordinal of a buffer: entries that took one so far, plus the buffers posted ahead of it.
        let mut posted: VecDeque<u64> = VecDeque::new();
        for b in 0..2 {
            inbox.board.publish(&me, posted.len() as u64, b, 8);
            posted.push_back(b);
        }
        let joined = inbox.presence.binding();
        let sender = {
            let (inbox, buffers, ring) = (inbox.clone(), buffers.clone(), ring.clone());
            thread::spawn(move || {
                for k in 0..MESSAGES {
                    let value = 100 + k;
                    // `place` pushes the entry before `end`; here the ring is never full, and the
                    // entry follows the bytes either way.
                    match place(&inbox, &buffers, k, value, joined) {
                        Some(at) => ring.push(k, (true, at, value)),
                        None => ring.push(k, (false, 0, value)),
                    }
                }
            })
        };
        let mut taken = 0;
        for k in 0..MESSAGES {
            let (placed, at, value) = ring.pop(k);
            let b = posted.pop_front().unwrap();
            // The first two buffers were published before the sender started.
            assert!(placed || k >= 2, "entry {k} should have been placed");
            if placed {
                assert_eq!(at, b, "entry {k} was placed into another buffer");
            } else {
                buffers.write(b, value); // the copy out of the ring
            }
            taken += 1;
            assert_eq!(buffers.read(b), value, "entry {k}");
            // The application is done with it and posts it again.
            buffers.write(b, 0);
            inbox.board.publish(&me, taken + posted.len() as u64, b, 8);
            posted.push_back(b);
        }
        sender.join().unwrap();
    });
}
