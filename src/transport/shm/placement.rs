//! Placement: a sender over shared memory writes a message straight into the receive buffer it
//! will land in, when that buffer lies in the receiver's shared pool. The message is then
//! copied once, by the sender, and the receiver completes the buffer without touching the bytes.
//!
//! The receiver publishes, on a *board* in its inbox, each receive buffer it posts from its
//! shared pool: where it is (offset and capacity in the pool's memfd) and its *ordinal*, the
//! number of the peer's ring entry that will take it. The sender numbers its own entries that
//! take a receive buffer (SEND, SEND_IMM, WRITE_IMM and standalone window updates) and places a
//! message only into the posting whose ordinal is the number its entry will have.
//!
//! Why that is safe: a buffer posted when `c` such entries had run, with `p` buffers ahead of
//! it, is taken by entry `c + p` at the earliest, since each entry takes at most one buffer (a
//! WRITE_IMM with a bad token takes none; base-API receivers, which take several, publish
//! nothing). So a buffer placed into for entry `n` is still posted while the sender writes, and
//! the receiver finds the bytes there when it runs entry `n`. When an entry took no buffer, the
//! later postings are one ahead of what the receiver takes: it then copies the placed bytes
//! from the buffer they went to into the one it takes (a second copy, on an error path only).
//!
//! The one thing that takes posted buffers otherwise is the receiver leaving (unbind, destroy):
//! it hands them back to its application. The sender therefore raises `placing` and fences
//! before it looks whether the receiver left, and lowers it once the bytes are written; the
//! receiver marks itself closed, fences, and waits for `placing` to drop before it flushes.

use super::sync::{AtomicU32, AtomicU64, Ordering, fence, pause};

/// Postings on the board. A receiver with more buffers posted than this (or a sender that
/// lags) simply publishes no more until the sender has moved on: those messages go through
/// the ring.
pub const SLOTS: usize = 4096;

/// One published receive buffer, written by the receiver, read by the sender.
#[repr(C)]
#[derive(Default)]
pub struct Posting {
    /// Index of the posting + 1, stored last (release): the slot holds that posting.
    stamp: AtomicU64,
    ordinal: AtomicU64,
    /// Where the buffer is in the receiver's shared pool, and how many bytes it holds.
    offset: AtomicU32,
    capacity: AtomicU32,
}

#[repr(C, align(64))]
#[derive(Default)]
struct Line<T>(T);

/// The board in an inbox: the sender's line (how far it read, whether it is writing into a
/// buffer now), then the postings. In an inbox it is `SLOTS` long and starts zeroed, which is
/// empty; the model checks use short ones.
#[repr(C)]
pub struct Board<const N: usize = SLOTS> {
    read: Line<SenderState>,
    slots: [Posting; N],
}

impl<const N: usize> Default for Board<N> {
    fn default() -> Self {
        Board {
            read: Line::default(),
            slots: std::array::from_fn(|_| Posting::default()),
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct SenderState {
    /// Postings the sender is done with (placed into, or passed over as stale).
    consumed: AtomicU64,
    /// Nonzero while the sender writes into a posted buffer.
    placing: AtomicU32,
}

/// The receiver's own side of its board, private to it.
#[derive(Default)]
pub struct Publisher {
    next: AtomicU64,
    consumed_seen: AtomicU64,
}

impl Publisher {
    /// For a fresh board: nothing published yet, nothing seen consumed.
    pub fn forget(&self) {
        self.next.store(0, Ordering::Relaxed);
        self.consumed_seen.store(0, Ordering::Release);
    }
}

/// A posting the sender may write into: the buffer's offset in the receiver's pool.
pub struct Claim {
    index: u64,
    pub offset: u64,
}

impl<const N: usize> Board<N> {
    /// Forgets everything of a binding that ended: no posting is left to be taken for one of the
    /// next binding.
    pub fn reset(&self, me: &Publisher) {
        for s in &self.slots {
            s.stamp.store(0, Ordering::Relaxed);
        }
        self.read.0.consumed.store(0, Ordering::Relaxed);
        self.read.0.placing.store(0, Ordering::Relaxed);
        me.forget();
    }

    /// Receiver: publishes a buffer at `offset` holding `capacity` bytes, to be taken by the
    /// peer's entry number `ordinal`. Nothing happens when the board is full.
    pub fn publish(&self, me: &Publisher, ordinal: u64, offset: u64, capacity: u32) {
        let Ok(offset) = u32::try_from(offset) else {
            return;
        };
        let j = me.next.load(Ordering::Relaxed);
        if j - me.consumed_seen.load(Ordering::Relaxed) >= N as u64 {
            let consumed = self.read.0.consumed.load(Ordering::Acquire);
            me.consumed_seen.store(consumed, Ordering::Relaxed);
            if j.saturating_sub(consumed) >= N as u64 {
                return;
            }
        }
        let s = &self.slots[j as usize % N];
        s.ordinal.store(ordinal, Ordering::Relaxed);
        s.offset.store(offset, Ordering::Relaxed);
        s.capacity.store(capacity, Ordering::Relaxed);
        s.stamp.store(j + 1, Ordering::Release);
        me.next.store(j + 1, Ordering::Relaxed);
    }

    /// Sender: the posting for our entry number `ordinal` when it is published and holds `len`
    /// bytes. Postings for earlier entries (those went through the ring) are passed over.
    pub fn find(&self, ordinal: u64, len: usize) -> Option<Claim> {
        let read = &self.read.0.consumed;
        for _ in 0..N {
            let j = read.load(Ordering::Relaxed);
            let s = &self.slots[j as usize % N];
            if s.stamp.load(Ordering::Acquire) != j + 1 {
                return None;
            }
            let o = s.ordinal.load(Ordering::Relaxed);
            if o < ordinal {
                read.store(j + 1, Ordering::Release);
                continue;
            }
            let fits = s.capacity.load(Ordering::Relaxed) as usize >= len;
            return (o == ordinal && fits).then(|| Claim {
                index: j,
                offset: s.offset.load(Ordering::Relaxed) as u64,
            });
        }
        None
    }

    /// Sender: announces that we are about to write into a posted buffer. False (and nothing
    /// announced) when the receiver has left: its buffers may be its application's again.
    pub fn begin(&self, receiver_left: impl Fn() -> bool) -> bool {
        let placing = &self.read.0.placing;
        placing.store(1, Ordering::Relaxed);
        // Pairs with the receiver's fence between marking itself closed and `wait_idle`: either
        // we see the mark, or it sees `placing`.
        fence(Ordering::SeqCst);
        if receiver_left() {
            placing.store(0, Ordering::Release);
            return false;
        }
        true
    }

    /// Sender: the bytes of `c` are written and its entry is in the ring.
    pub fn end(&self, c: Claim) {
        self.read.0.consumed.store(c.index + 1, Ordering::Release);
        self.read.0.placing.store(0, Ordering::Release);
    }

    /// Receiver, after marking itself closed and fencing: waits until the sender writes into
    /// none of our buffers, or `sender_gone` says it never will again.
    pub fn wait_idle(&self, sender_gone: impl Fn() -> bool) {
        let placing = &self.read.0.placing;
        let mut turns = 0u32;
        while placing.load(Ordering::Acquire) != 0 {
            turns = turns.wrapping_add(1);
            if turns.is_multiple_of(1024) && sender_gone() {
                return;
            }
            pause(turns);
        }
    }
}
