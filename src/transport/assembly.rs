//! A peer's message that arrives in pieces (a rate-limited queue's packets, a long network
//! message's fragments), put together where it will land, for every provider.
//!
//! When the receiver's next posted buffer holds the whole message (a SEND or SEND_IMM), each
//! piece is copied straight into it as it arrives: the message costs one copy and no
//! allocation however long it is, and its last piece costs the receiver no more than any other.
//! A message put together aside and copied out at its end held the receiver for the length of
//! that copy (and of the allocation's page faults): 0.3-1 ms for 64 KiB to 1 MiB here, and the
//! packets behind it, paced a packet time apart, were then taken together. Any other message
//! (no buffer posted yet, a WRITE or WRITE_IMM, a base-API message over several buffers) is put
//! together aside for the executor, as before, but never past the longest buffer of the
//! receiver's pool, whatever its first piece claims (`otherwise`): a longer message that can
//! only fail there is counted and not kept (`may_land`), and a longer SEND to a receiver that
//! spreads messages over buffers (base API) is written across the posted buffers that hold it.

use super::LinkError;
use super::target::{
    copy_bytes, land_placed, land_placed_across, posted_buffers_holding, whole_in_next,
};
use super::wire::{Outcome, Side, Wire};
use crate::abi::pro_types::umq_opcode_t;
use crate::abi::pro_types::{UMQ_OPC_SEND, UMQ_OPC_SEND_IMM};
use crate::abi::types::umq_buf_t;

/// The most a message put together aside reserves at its first piece: a peer's claimed length
/// is not trusted with an allocation, the rest grows as the bytes come.
const ASIDE_RESERVE: u64 = 1 << 20;

/// A message whose pieces are arriving: how long it is, how much came, and where it goes.
pub(crate) struct Assembly {
    total: u64,
    got: u64,
    into: Into,
}

enum Into {
    /// The next posted receive buffer, which holds the whole message: posted still, so it is
    /// flushed like any other if the binding ends before the last piece.
    Buffer(*mut umq_buf_t),
    /// Bytes kept aside until the message runs.
    Aside(Vec<u8>),
    /// Nowhere: the message can only fail (`may_land`), so its bytes are counted, not kept.
    Nowhere,
    /// In place across the first `n` posted receive buffers, which hold it together (a SEND
    /// to a receiver that spreads messages over buffers, longer than any one buffer): posted
    /// still, as `Buffer`. The next piece goes at byte `off` of the `at`th.
    Across {
        first: *mut umq_buf_t,
        n: usize,
        at: usize,
        off: u64,
    },
}

/// Where a message's pieces go when the next posted receive buffer does not hold it whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Otherwise {
    /// Aside, to run when the message is whole.
    Aside,
    /// Nowhere: it can only fail (`may_land`).
    Nowhere,
    /// In place across the first `n` posted receive buffers, which hold it together.
    Across(usize),
}

/// Whether a message of opcode `op` and `total` bytes could land at a receiver whose pool's
/// buffers hold at most `largest` bytes (`Pool::largest_buffer`) and that spreads messages
/// over several receive buffers (`fragments`, the base API) or not. One that could not fails
/// whatever its bytes: a SEND or SEND_IMM no single buffer holds completes `LOC_LEN_ERR`, a
/// WRITE or WRITE_IMM past any registered buffer `REM_ACCESS_ABORT`, and a READ's or NOP's
/// payload is never read.
fn may_land(op: umq_opcode_t, total: u64, fragments: bool, largest: u64) -> bool {
    total <= largest || (fragments && (op == UMQ_OPC_SEND || op == UMQ_OPC_SEND_IMM))
}

/// Where the pieces of a message of opcode `op` and `total` bytes go when the next posted
/// receive buffer does not hold it whole, at a receiver whose pool's buffers hold at most
/// `largest` bytes; None while its first piece must wait where it is. A peer's claimed length
/// is not taken on its word: what is kept aside is never longer than a buffer of the pool. One
/// longer can only fail (`may_land`) and is kept nowhere, but for a SEND to a receiver that
/// spreads messages over buffers (base API), which lands in place across the posted buffers
/// that hold it together, once they do.
pub(crate) fn otherwise(
    w: &Wire,
    op: umq_opcode_t,
    total: u64,
    fragments: bool,
    largest: u64,
) -> Option<Otherwise> {
    if total <= largest {
        return Some(Otherwise::Aside);
    }
    if !may_land(op, total, fragments, largest) {
        return Some(Otherwise::Nowhere);
    }
    posted_buffers_holding(w, total).map(Otherwise::Across)
}

impl Assembly {
    /// A message of `total` bytes and opcode `op` begins with `first`: in the next posted
    /// receive buffer if that holds it all, else where `otherwise` says. Err when `first` is
    /// not shorter than `total` (a message in one piece is not assembled), or `otherwise`
    /// names more buffers than are posted.
    pub(crate) fn begin(
        w: &mut Wire,
        op: umq_opcode_t,
        total: u64,
        first: &[u8],
        otherwise: Otherwise,
    ) -> Result<Assembly, LinkError> {
        if first.is_empty() || first.len() as u64 >= total {
            return Err(LinkError::Corrupt(
                "a first piece that is not part of a message",
            ));
        }
        let into = match u32::try_from(total)
            .ok()
            .and_then(|n| whole_in_next(w, op, n))
        {
            Some(rx) => Into::Buffer(rx),
            None => match otherwise {
                Otherwise::Aside => {
                    Into::Aside(Vec::with_capacity(total.min(ASIDE_RESERVE) as usize))
                }
                Otherwise::Nowhere => Into::Nowhere,
                Otherwise::Across(n) => Into::Across {
                    first: w
                        .rq
                        .posted_at(0)
                        .filter(|_| n > 0 && w.rq.posted_at(n - 1).is_some())
                        .ok_or(LinkError::Corrupt(
                            "a message's receive buffers are not posted",
                        ))?,
                    n,
                    at: 0,
                    off: 0,
                },
            },
        };
        let mut a = Assembly {
            total,
            got: 0,
            into,
        };
        a.add(w, first)?;
        Ok(a)
    }

    /// The next piece, after those before it. Err when it would run past the message's end.
    pub(crate) fn add(&mut self, w: &Wire, piece: &[u8]) -> Result<(), LinkError> {
        let end = self.got + piece.len() as u64;
        if end > self.total {
            return Err(LinkError::Corrupt("pieces that run past their message"));
        }
        match &mut self.into {
            Into::Buffer(rx) => {
                // Nothing else lands while a message's pieces arrive, and what takes a receive
                // buffer between them (a window update) moves the bytes aside first
                // (`set_aside`): the buffer is still the next in line.
                if w.rq.posted_at(0) != Some(*rx) {
                    return Err(LinkError::Corrupt(
                        "a message's receive buffer was taken while it arrived",
                    ));
                }
                // SAFETY: the buffer is posted, so ours to write, and `begin` checked that it
                // holds `total` bytes, past `end`.
                unsafe {
                    let at = ((**rx).buf_data as *mut u8).add(self.got as usize);
                    copy_bytes(piece.as_ptr(), at, piece.len());
                }
            }
            Into::Aside(v) => v.extend_from_slice(piece),
            Into::Nowhere => {}
            Into::Across { first, n, at, off } => {
                if w.rq.posted_at(0) != Some(*first) {
                    return Err(LinkError::Corrupt(
                        "a message's receive buffer was taken while it arrived",
                    ));
                }
                let mut rest = piece;
                while !rest.is_empty() {
                    let b =
                        w.rq.posted_at(*at)
                            .filter(|_| *at < *n)
                            .ok_or(LinkError::Corrupt("a message ran past its receive buffers"))?;
                    let cap = unsafe { (*b).buf_size } as u64;
                    let k = (cap - *off).min(rest.len() as u64) as usize;
                    // SAFETY: the buffer is posted, so ours to write, and `k` bytes from `off`
                    // lie within its `buf_size`.
                    unsafe {
                        let to = ((*b).buf_data as *mut u8).add(*off as usize);
                        copy_bytes(rest.as_ptr(), to, k);
                    }
                    rest = &rest[k..];
                    *off += k as u64;
                    if *off == cap {
                        (*at, *off) = (*at + 1, 0);
                    }
                }
            }
        }
        self.got = end;
        Ok(())
    }

    /// Before something else takes the next posted receive buffer: the bytes so far move
    /// aside, and the rest of the message follows them there.
    pub(crate) fn set_aside(&mut self, w: &Wire) {
        let n = match self.into {
            Into::Buffer(_) => 1,
            Into::Across { n, .. } => n,
            Into::Aside(_) | Into::Nowhere => return,
        };
        let mut v = Vec::with_capacity(self.total.min(ASIDE_RESERVE) as usize);
        let mut left = self.got as usize;
        for b in (0..n).map_while(|i| w.rq.posted_at(i)) {
            // SAFETY: the buffers are still posted and hold the `got` bytes written so far,
            // in order.
            let k = left.min(unsafe { (*b).buf_size } as usize);
            v.extend_from_slice(unsafe {
                std::slice::from_raw_parts((*b).buf_data as *const u8, k)
            });
            left -= k;
        }
        self.into = Into::Aside(v);
    }

    /// Whether the receive buffer the message was landing in is no longer the next posted
    /// one: something else took it between two pieces, and the bytes written so far went with it.
    pub(crate) fn lost_its_buffer(&self, w: &Wire) -> bool {
        match self.into {
            Into::Buffer(first) | Into::Across { first, .. } => w.rq.posted_at(0) != Some(first),
            Into::Aside(_) | Into::Nowhere => false,
        }
    }

    /// The bytes that came so far.
    pub(crate) fn received(&self) -> u64 {
        self.got
    }

    pub(crate) fn is_whole(&self) -> bool {
        self.got == self.total
    }

    /// The receive buffer the message lands in, when it lands in place (the next posted one).
    pub(crate) fn in_buffer(&self) -> Option<*mut umq_buf_t> {
        match self.into {
            Into::Buffer(rx) => Some(rx),
            Into::Aside(_) | Into::Nowhere | Into::Across { .. } => None,
        }
    }

    /// Whether the message is being written in place: in the next posted receive buffer, or
    /// across the first several (`Otherwise::Across`).
    pub(crate) fn in_place(&self) -> bool {
        matches!(self.into, Into::Buffer(_) | Into::Across { .. })
    }

    /// Completes the whole message `op` (a SEND or SEND_IMM, its immediate `imm`) where it
    /// was written in place (`in_place`), as one that came whole does.
    ///
    /// # Safety
    /// Every byte of the message arrived (`is_whole`), in place, and `dst` is the wire it
    /// arrived on.
    pub(crate) unsafe fn land_in_place(
        &self,
        dst: &mut Side,
        op: umq_opcode_t,
        imm: u64,
        out: &mut Outcome,
    ) {
        debug_assert!(self.is_whole() && self.in_place());
        // SAFETY: the buffers it was written to are still the next posted (`add` checks it
        // at every piece, and nothing else takes them while its pieces arrive), and hold it.
        match self.into {
            Into::Buffer(rx) => unsafe { land_placed(dst, rx, self.total as u32, op, imm, out) },
            Into::Across { n, .. } => unsafe {
                land_placed_across(dst, n, self.total, op, imm, out)
            },
            Into::Aside(_) | Into::Nowhere => {}
        }
    }

    /// The message's bytes, for one put together aside (none for one that lands in place or
    /// nowhere).
    pub(crate) fn into_aside(self) -> Vec<u8> {
        match self.into {
            Into::Buffer(_) | Into::Nowhere | Into::Across { .. } => Vec::new(),
            Into::Aside(v) => v,
        }
    }

    /// The bytes kept aside (none when the message lands in place or nowhere).
    pub(crate) fn aside(&self) -> &[u8] {
        match &self.into {
            Into::Buffer(_) | Into::Nowhere | Into::Across { .. } => &[],
            Into::Aside(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::abi::pro_types::{UMQ_OPC_SEND, UMQ_OPC_WRITE};

    fn buffer(data: &mut [u8]) -> umq_buf_t {
        let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
        b.buf_data = data.as_mut_ptr() as *mut _;
        b.buf_size = data.len() as u32;
        b
    }

    /// A SEND that the next posted buffer holds is written into it piece by piece, and nothing
    /// is kept aside; a SEND no posted buffer holds, and a WRITE, are kept aside.
    #[test]
    fn a_message_the_next_buffer_holds_lands_there_piece_by_piece() {
        let mut data = [0u8; 16];
        let mut rx = buffer(&mut data);
        let mut w = Wire::new(4, 4);
        w.rq.post(&mut rx);
        let mut a = Assembly::begin(&mut w, UMQ_OPC_SEND, 10, b"abcd", Otherwise::Aside).unwrap();
        assert_eq!(a.in_buffer(), Some(&mut rx as *mut _));
        a.add(&w, b"efg").unwrap();
        assert_eq!((a.received(), a.is_whole(), a.aside()), (7, false, &[][..]));
        a.add(&w, b"hij").unwrap();
        assert!(a.is_whole());
        assert_eq!(
            &data[..11],
            b"abcdefghij\0",
            "in place, nothing past the end"
        );
        assert_eq!(w.rq.posted_len(), 1, "the buffer is still posted");

        let mut w = Wire::new(4, 4);
        let mut small = [0u8; 8];
        let mut rx = buffer(&mut small);
        w.rq.post(&mut rx);
        let mut a = Assembly::begin(&mut w, UMQ_OPC_SEND, 10, b"abcd", Otherwise::Aside).unwrap();
        a.add(&w, b"efghij").unwrap();
        assert_eq!((a.in_buffer(), a.aside()), (None, &b"abcdefghij"[..]));
        assert_eq!(small, [0; 8], "a buffer too short is not touched");
        let a = Assembly::begin(&mut w, UMQ_OPC_WRITE, 6, b"ab", Otherwise::Aside).unwrap();
        assert_eq!((a.in_buffer(), a.aside()), (None, &b"ab"[..]));
    }

    /// Set aside halfway, the bytes so far go with the rest; pieces that run past the message,
    /// a first piece as long as the message, and a buffer taken under the message are errors.
    #[test]
    fn a_message_set_aside_keeps_its_bytes_and_bad_pieces_are_refused() {
        let mut data = [0u8; 16];
        let mut rx = buffer(&mut data);
        let mut w = Wire::new(4, 4);
        w.rq.post(&mut rx);
        let mut a = Assembly::begin(&mut w, UMQ_OPC_SEND, 8, b"abc", Otherwise::Aside).unwrap();
        a.set_aside(&w);
        a.add(&w, b"defgh").unwrap();
        assert_eq!((a.in_buffer(), a.aside()), (None, &b"abcdefgh"[..]));
        assert!(a.add(&w, b"i").is_err(), "past the end");
        assert!(Assembly::begin(&mut w, UMQ_OPC_SEND, 3, b"abc", Otherwise::Aside).is_err());
        assert!(Assembly::begin(&mut w, UMQ_OPC_SEND, 3, b"", Otherwise::Aside).is_err());

        let mut a = Assembly::begin(&mut w, UMQ_OPC_SEND, 8, b"abc", Otherwise::Aside).unwrap();
        assert!(!a.lost_its_buffer(&w));
        w.rq.take_posted();
        assert!(a.lost_its_buffer(&w));
        assert!(a.add(&w, b"d").is_err(), "the buffer was taken");
    }

    /// A message no buffer could take keeps none of its bytes and still counts them to its
    /// end; what decides it: longer than the pool's largest buffer, and not a SEND that a
    /// fragmenting (base-API) receiver spreads over several buffers.
    #[test]
    fn a_message_that_can_only_fail_is_counted_and_not_kept() {
        use crate::abi::pro_types::{UMQ_OPC_READ, UMQ_OPC_SEND_IMM, UMQ_OPC_WRITE_IMM};
        let mut w = Wire::new(4, 4);
        let total = 64 << 20;
        let mut a =
            Assembly::begin(&mut w, UMQ_OPC_SEND, total, b"abc", Otherwise::Nowhere).unwrap();
        for _ in 0..1000 {
            a.add(&w, &[7; 4096]).unwrap();
        }
        assert_eq!(
            (a.received(), a.aside(), a.in_buffer()),
            (4_096_003, &[][..], None)
        );
        let piece = vec![7; 1 << 20];
        while total - a.received() > piece.len() as u64 {
            a.add(&w, &piece).unwrap();
        }
        a.add(&w, &piece[..(total - a.received()) as usize])
            .unwrap();
        assert!(a.is_whole());
        assert!(a.add(&w, b"x").is_err(), "past the end");
        assert!(a.into_aside().is_empty());

        let largest = 16 << 20;
        for op in [
            UMQ_OPC_SEND,
            UMQ_OPC_SEND_IMM,
            UMQ_OPC_WRITE,
            UMQ_OPC_WRITE_IMM,
            UMQ_OPC_READ,
        ] {
            assert!(
                may_land(op, largest, false, largest),
                "{op}: as long as a buffer"
            );
            assert!(
                !may_land(op, largest + 1, false, largest),
                "{op}: longer, pro API"
            );
        }
        assert!(
            may_land(UMQ_OPC_SEND, u32::MAX as u64, true, largest),
            "over several buffers"
        );
        assert!(may_land(UMQ_OPC_SEND_IMM, u32::MAX as u64, true, largest));
        assert!(
            !may_land(UMQ_OPC_WRITE, largest + 1, true, largest),
            "one registered buffer"
        );
        assert!(!may_land(UMQ_OPC_WRITE_IMM, largest + 1, true, largest));
    }
}
