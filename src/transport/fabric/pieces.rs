//! Our WRITEs and READs that go by RMA, as pieces. libfabric's tcp sends one operation whole
//! before it starts the next on a connection, and every binding between two processes shares
//! that connection: a 16 MiB WRITE handed over as one operation held another queue's 64 B ping
//! behind all of it. So a WR goes as operations of at most `PIECE` bytes, each counted in the
//! peer's share of libfabric (`node::QUEUED_PER_PEER`) until libfabric finishes it, as a
//! message's fragments are: the pieces of a long WR start as the share frees, and another
//! binding's message goes behind at most the share.
//!
//! Pieces cost the target: over tcp its provider serves each as an operation of its own. So
//! while no other binding to the same peer sent anything for a while (`node::OTHERS_QUIET`),
//! a WRITE goes in pieces of up to `LONE_PIECE`, as fast as a lone WR can, with at most
//! `node::QUEUED_ALONE` in libfabric: a binding that starts sending then waits behind that
//! much, not behind the rest of the WRITE, whose later pieces take the short size. A READ
//! alone goes whole (`Shared::piece_for` says why). Each piece's size is the node's choice as
//! it starts.
//!
//! Only a channel's newest WR may have pieces not yet started (`Rest`): a later WRITE or READ
//! waits for them, as a message waits for all of our RMA. A WR completes once every piece
//! finished, with an error if one failed or libfabric refused one. The node keeps each
//! channel's pieces and starts the rest whenever its progress frees the share, whichever
//! binding's round that is. (A WR under way finishes while its priority is paused, as a
//! message under way does.) Sans-IO: the node starts what `next` names and reports what
//! happened.

use super::sys::{RemoteKey, Rma};
use std::collections::VecDeque;

/// The most bytes one RMA operation moves while another binding sends to the same peer: one
/// bounce buffer's payload, as a fragment.
pub const PIECE: u64 = 64 << 10;
/// The most while a binding has the connection to itself: a WRITE of up to this goes whole, as
/// fast as a lone WR can, and a longer one in pieces that leave a binding that starts sending
/// behind at most `node::QUEUED_ALONE`.
pub const LONE_PIECE: u64 = 1 << 20;

/// One RMA operation to start: `len` bytes at our address `at`, to (or from) `to`, for WR
/// `seq`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Piece {
    pub seq: u64,
    pub op: Rma,
    pub at: usize,
    pub len: usize,
    pub to: RemoteKey,
    /// The WR's last piece: a WRITE's completes once placed, the others once sent (the
    /// connection is in order, so the last one placed says they were too).
    pub last: bool,
    /// The peer process (`node::Shared::peers`) and its address.
    pub peer: (usize, u64),
}

impl Piece {
    /// How the engine is to run it (`Endpoint::rma`).
    pub fn how(&self) -> (Rma, bool) {
        (self.op, !self.last)
    }
}

/// The pieces of the newest WR not yet started: bytes `[done, len)`, in pieces of the size
/// the node gives at each start.
struct Rest {
    seq: u64,
    op: Rma,
    at: usize,
    to: RemoteKey,
    done: u64,
    len: u64,
    peer: (usize, u64),
}

impl Rest {
    fn piece(&self, most: u64) -> Piece {
        let len = (self.len - self.done).min(most);
        Piece {
            seq: self.seq,
            op: self.op,
            at: self.at + self.done as usize,
            len: len as usize,
            to: RemoteKey {
                addr: self.to.addr + self.done,
                key: self.to.key,
            },
            last: self.done + len == self.len,
            peer: self.peer,
        }
    }
}

/// A WR some of whose pieces libfabric holds.
struct InFlight {
    seq: u64,
    pieces: u32,
    failed: bool,
}

/// Our WRs in flight by RMA, oldest first, and the newest one's pieces still to start.
#[derive(Default)]
pub struct Pieces {
    wrs: VecDeque<InFlight>,
    rest: Option<Rest>,
}

impl Pieces {
    /// The first piece of WR `seq` to `peer`: `len` bytes in all at `at`, to (or from) `to`;
    /// at most `most` of them (`PIECE`, `LONE_PIECE`).
    pub fn first(
        (seq, op): (u64, Rma),
        (at, len): (usize, u64),
        (peer, to): ((usize, u64), RemoteKey),
        most: u64,
    ) -> Piece {
        Piece {
            seq,
            op,
            at,
            len: len.min(most) as usize,
            to,
            last: len <= most,
            peer,
        }
    }

    /// libfabric took `first`, the first piece of a WR of `len` bytes.
    pub fn started(&mut self, first: &Piece, len: u64) {
        debug_assert!(
            self.rest.is_none(),
            "a WR started while another's pieces wait"
        );
        self.wrs.push_back(InFlight {
            seq: first.seq,
            pieces: 1,
            failed: false,
        });
        self.rest = ((first.len as u64) < len).then_some(Rest {
            seq: first.seq,
            op: first.op,
            at: first.at,
            to: first.to,
            done: first.len as u64,
            len,
            peer: first.peer,
        });
    }

    /// WRs with a piece in flight or to start.
    #[cfg(test)]
    fn in_flight(&self) -> u32 {
        self.wrs.len() as u32
    }

    /// Whether the newest WR has pieces to start (no other WRITE or READ may start before).
    pub fn waiting(&self) -> bool {
        self.rest.is_some()
    }

    /// The peer the next piece goes to, and its operation, if any waits.
    pub fn next_to(&self) -> Option<(usize, Rma)> {
        self.rest.as_ref().map(|r| (r.peer.0, r.op))
    }

    /// The next piece to start, of at most `most` bytes, if any.
    pub fn next(&self, most: u64) -> Option<Piece> {
        self.rest.as_ref().map(|r| r.piece(most))
    }

    /// libfabric took the next piece, of `len` bytes.
    pub fn next_started(&mut self, len: usize) {
        let Some(rest) = self.rest.as_mut() else {
            return;
        };
        rest.done += (rest.len - rest.done).min(len as u64);
        if rest.done == rest.len {
            self.rest = None;
        }
        if let Some(wr) = self.wrs.back_mut() {
            wr.pieces += 1;
        }
    }

    /// The pieces still to start will not be (libfabric refused one, or the WR was flushed):
    /// the WR fails. Its sequence number when that leaves it done.
    pub fn give_up_rest(&mut self) -> Option<u64> {
        self.rest.take()?;
        let wr = self.wrs.back_mut()?;
        wr.failed = true;
        (wr.pieces == 0).then(|| self.wrs.pop_back().map(|wr| wr.seq))?
    }

    /// A piece of WR `seq` finished (`ok`: it succeeded); the WR's sequence number and whether
    /// all of it succeeded, once its last piece finished.
    pub fn finished(&mut self, seq: u64, ok: bool) -> Option<(u64, bool)> {
        let i = self.wrs.iter().position(|wr| wr.seq == seq)?;
        let wr = &mut self.wrs[i];
        wr.pieces = wr.pieces.saturating_sub(1);
        wr.failed |= !ok;
        let mut more = self.rest.as_ref().is_some_and(|r| r.seq == seq);
        if more && !ok {
            // A WR that failed moves no more bytes: its pieces still to start never will.
            (self.rest, more) = (None, false);
        }
        if wr.pieces > 0 || more {
            return None;
        }
        let wr = self.wrs.remove(i)?;
        Some((wr.seq, !wr.failed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TO: RemoteKey = RemoteKey {
        addr: 0x10_0000,
        key: 7,
    };
    const PEER: (usize, u64) = (2, 0x77);

    fn start(p: &mut Pieces, seq: u64, len: u64) -> Piece {
        let first = Pieces::first((seq, Rma::Write), (0x5000_0000, len), (PEER, TO), PIECE);
        p.started(&first, len);
        first
    }

    #[test]
    fn a_long_wr_goes_in_pieces_that_cover_it_once_each() {
        let mut p = Pieces::default();
        let len = 3 * PIECE + 100;
        let first = start(&mut p, 9, len);
        assert_eq!(
            (first.len as u64, first.at, first.to),
            (PIECE, 0x5000_0000, TO)
        );
        assert_eq!(
            first.how(),
            (Rma::Write, true),
            "sent is enough: more follow"
        );
        let mut covered = vec![(first.at, first.len, first.to.addr)];
        while let Some(next) = p.next(PIECE) {
            assert_eq!(
                (next.seq, next.op, next.to.key, next.peer),
                (9, Rma::Write, 7, PEER)
            );
            assert_eq!(
                next.last,
                next.len < PIECE as usize,
                "only the last is placed"
            );
            covered.push((next.at, next.len, next.to.addr));
            p.next_started(next.len);
        }
        let lens: Vec<usize> = covered.iter().map(|c| c.1).collect();
        assert_eq!(lens, [PIECE as usize, PIECE as usize, PIECE as usize, 100]);
        for (i, &(at, _, addr)) in covered.iter().enumerate() {
            let off = i * PIECE as usize;
            assert_eq!((at, addr), (0x5000_0000 + off, 0x10_0000 + off as u64));
        }
        assert!(!p.waiting());
        // Done only with its fourth finish, whatever the order.
        for (i, ok) in [(0, true), (2, true), (1, true)] {
            assert_eq!(p.finished(9, ok), None, "piece {i}");
        }
        assert_eq!(p.finished(9, true), Some((9, true)));
        assert_eq!(p.in_flight(), 0);
    }

    #[test]
    fn a_wr_that_goes_whole_is_one_piece_placed() {
        let mut p = Pieces::default();
        let first = Pieces::first(
            (3, Rma::Read),
            (0x5000_0000, 5 * PIECE),
            (PEER, TO),
            LONE_PIECE,
        );
        p.started(&first, 5 * PIECE);
        assert_eq!(
            (first.len as u64, first.how()),
            (5 * PIECE, (Rma::Read, false))
        );
        assert_eq!((p.waiting(), p.next(PIECE)), (false, None));
        assert_eq!(p.finished(3, true), Some((3, true)));
    }

    /// A WR that started in lone pieces goes on in short ones once another binding sends, and
    /// back: each piece has the size the node gives as it starts, and they cover the WR once.
    #[test]
    fn a_wr_s_pieces_take_the_size_given_as_each_starts() {
        let mut p = Pieces::default();
        let len = 2 * LONE_PIECE + PIECE + 7;
        let first = Pieces::first((8, Rma::Write), (0x5000_0000, len), (PEER, TO), LONE_PIECE);
        p.started(&first, len);
        let mut lens = vec![first.len as u64];
        for most in [PIECE, LONE_PIECE, LONE_PIECE] {
            let next = p.next(most).expect("more to start");
            assert_eq!(next.at as u64, 0x5000_0000 + lens.iter().sum::<u64>());
            assert_eq!(next.last, next.len as u64 + lens.iter().sum::<u64>() == len);
            lens.push(next.len as u64);
            p.next_started(next.len);
        }
        assert_eq!(lens, [LONE_PIECE, PIECE, LONE_PIECE, 7]);
        assert_eq!((p.waiting(), p.next(LONE_PIECE)), (false, None));
        for _ in 0..3 {
            assert_eq!(p.finished(8, true), None);
        }
        assert_eq!(p.finished(8, true), Some((8, true)));
    }

    #[test]
    fn a_wr_with_pieces_to_start_is_not_done_when_those_in_flight_finish() {
        let mut p = Pieces::default();
        start(&mut p, 4, 2 * PIECE);
        assert!(p.waiting());
        assert_eq!(p.finished(4, true), None);
        assert_eq!(p.in_flight(), 1);
        p.next_started(PIECE as usize);
        assert_eq!(p.finished(4, true), Some((4, true)));
    }

    #[test]
    fn one_failed_piece_fails_its_wr_and_no_other() {
        let mut p = Pieces::default();
        let whole = start(&mut p, 1, 100);
        assert_eq!(
            whole.how(),
            (Rma::Write, false),
            "one piece: placed, as a WR's WRITE"
        );
        start(&mut p, 2, 2 * PIECE);
        p.next_started(PIECE as usize);
        assert_eq!(p.finished(2, false), None);
        assert_eq!(p.finished(1, true), Some((1, true)));
        assert_eq!(p.finished(2, true), Some((2, false)));
        // A finish for nothing in flight (a late duplicate) changes nothing.
        assert_eq!(p.finished(2, true), None);
    }

    #[test]
    fn a_failed_piece_starts_no_more_of_its_wr() {
        let mut p = Pieces::default();
        start(&mut p, 3, 3 * PIECE);
        p.next_started(PIECE as usize);
        assert_eq!(p.finished(3, false), None, "a piece still in flight");
        assert_eq!((p.waiting(), p.next(PIECE)), (false, None));
        assert_eq!(p.finished(3, true), Some((3, false)));
    }

    #[test]
    fn giving_up_the_rest_fails_the_wr_now_or_with_its_last_piece() {
        let mut p = Pieces::default();
        start(&mut p, 5, 3 * PIECE);
        assert_eq!(p.give_up_rest(), None, "a piece is still in flight");
        assert!(!p.waiting());
        assert_eq!(p.finished(5, true), Some((5, false)));

        start(&mut p, 6, 3 * PIECE);
        assert_eq!(p.finished(6, true), None);
        assert_eq!(p.give_up_rest(), Some(6), "nothing in flight: done now");
        assert_eq!((p.in_flight(), p.give_up_rest()), (0, None));
    }
}
