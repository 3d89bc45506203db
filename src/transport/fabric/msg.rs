//! What the fabric provider's messages carry: a 64-byte header, then payload. A WR's message is
//! cut into fragments of at most one bounce buffer; fragments of one WR are sent back to back,
//! so a receiver assembles them in arrival order. Bytes from the peer are checked here before
//! anything else reads them.

use crate::transport::LinkError;

pub const HEADER: usize = 64;
/// A receive bounce buffer, and so the largest message on the wire.
pub const BOUNCE: usize = (64 << 10) + HEADER;
/// The payload a fragment carries at most.
pub const FRAGMENT: usize = BOUNCE - HEADER;

/// A WR of ours (first fragment, or all of it).
pub const KIND_WR: u8 = 1;
/// A later fragment of the message before it.
pub const KIND_MORE: u8 = 2;
/// A standalone window update (`imm`); takes a receive buffer like a SEND.
pub const KIND_STANDALONE: u8 = 3;
/// A READ's data (`seq`: the READ's sequence number); may be fragmented.
pub const KIND_READ_RESP: u8 = 4;
/// The peer executed our WR `seq` with completion status `status`.
pub const KIND_DONE: u8 = 5;
/// The sender left the binding.
pub const KIND_BYE: u8 = 6;
/// Nothing but "still here": sent when a side had nothing else to send for a while.
pub const KIND_PING: u8 = 7;
/// A MAC control frame of the link (`transport::pause`), the payload.
pub const KIND_CONTROL: u8 = 8;
/// In a WRITE's or READ's `flags`: the initiator knows the chunk its token names, so the
/// completion need not teach it (`rma`).
pub const FLAG_KNOWS_CHUNK: u16 = 1;
/// In a WRITE's `flags`: the initiator takes the target for answering its WRITEs with WRs of
/// its own (a put ping-pong), so the answer may wait for the next of them (`tx::HeldAnswers`).
pub const FLAG_ANSWER_MAY_WAIT: u16 = 2;
/// In a `KIND_DONE` of such a WRITE: the answer waited for a WR of the sender's and came with
/// it.
pub const FLAG_CARRIED: u16 = 4;
/// Several whole messages for one channel, their headers and payloads back to back as the
/// payload: a stream of small WRs costs libfabric one message for many (`tx::bundle_of`).
pub const KIND_BUNDLE: u8 = 9;

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub opcode: u8,
    /// `FLAG_*`.
    pub flags: u16,
    /// Payload bytes of this message (after the header).
    pub len: u32,
    pub imm: u64,
    /// WRITE / WRITE_IMM / READ: remote address, token and length.
    pub addr: u64,
    pub token_id: u32,
    pub token_value: u32,
    pub rlen: u32,
    pub status: u32,
    pub seq: u64,
    /// The whole message's bytes (the sum of its fragments).
    pub total: u64,
    /// Which binding of the receiving process it is for (`node::ChannelId`; `NODE`: the
    /// process itself).
    pub dst: u64,
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER);

/// The destination of a message in its header, before anything else of it is read: the node
/// routes on it, the binding it names checks the rest (`Header::read`). None when too short.
pub fn destination(at: &[u8]) -> Option<u64> {
    let dst = at.get(HEADER - 8..HEADER)?;
    Some(u64::from_ne_bytes(dst.try_into().ok()?))
}

impl Header {
    pub fn to_bytes(self) -> [u8; HEADER] {
        // SAFETY: a plain-old-data struct of HEADER bytes without padding.
        unsafe { std::mem::transmute_copy(&self) }
    }

    /// The header of a received message of `got` bytes at `at`, checked against what arrived.
    pub fn read(at: &[u8]) -> Result<Header, LinkError> {
        if at.len() < HEADER {
            return Err(LinkError::Corrupt("fabric message shorter than its header"));
        }
        // SAFETY: at least HEADER bytes; read_unaligned makes no alignment claim.
        let h: Header = unsafe { std::ptr::read_unaligned(at.as_ptr() as *const Header) };
        if h.kind == 0 || h.kind > KIND_BUNDLE {
            return Err(LinkError::Corrupt("unknown fabric message kind"));
        }
        if h.len as usize != at.len() - HEADER {
            return Err(LinkError::Corrupt("fabric message length mismatch"));
        }
        let fragmented = matches!(h.kind, KIND_WR | KIND_READ_RESP | KIND_MORE);
        if fragmented && (h.total < h.len as u64 || h.total > crate::limits::MAX_MESSAGE) {
            return Err(LinkError::Corrupt("fabric message total out of range"));
        }
        Ok(h)
    }
}

/// The message at byte `at` of a bundle's `payload`, its payload, and where the next one
/// starts (None after the last). Each must be whole (no fragment, no bundle) and lie inside.
pub fn bundled(payload: &[u8], at: usize) -> Result<(Header, &[u8], Option<usize>), LinkError> {
    const NOT_WHOLE: LinkError = LinkError::Corrupt("a fabric bundle of other than whole messages");
    let head = payload.get(at..at + HEADER).ok_or(NOT_WHOLE)?;
    let len = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]) as usize;
    let end = at + HEADER + len;
    let bytes = payload.get(at..end).ok_or(NOT_WHOLE)?;
    let h = Header::read(bytes)?;
    let whole = match h.kind {
        KIND_MORE | KIND_BUNDLE => false,
        KIND_WR | KIND_READ_RESP => h.total == h.len as u64,
        _ => true,
    };
    if !whole {
        return Err(NOT_WHOLE);
    }
    Ok((h, &bytes[HEADER..], (end < payload.len()).then_some(end)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(h: &Header, payload: &[u8]) -> Vec<u8> {
        let mut m = h.to_bytes().to_vec();
        m.extend_from_slice(payload);
        m
    }

    #[test]
    fn a_header_round_trips_and_bad_ones_are_refused() {
        let h = Header {
            kind: KIND_WR,
            opcode: 3,
            len: 5,
            imm: u64::MAX,
            seq: 7,
            total: 5,
            ..Default::default()
        };
        assert_eq!(Header::read(&message(&h, b"hello")).unwrap(), h);
        assert!(Header::read(&message(&h, b"hell")).is_err(), "length");
        assert!(Header::read(&h.to_bytes()[..HEADER - 1]).is_err(), "short");
        let odd = Header { kind: 99, ..h };
        assert!(Header::read(&message(&odd, b"hello")).is_err(), "kind");
        let huge = Header {
            total: u64::MAX,
            ..h
        };
        assert!(Header::read(&message(&huge, b"hello")).is_err(), "total");
        let small = Header { total: 4, ..h };
        assert!(
            Header::read(&message(&small, b"hello")).is_err(),
            "total below len"
        );
    }

    #[test]
    fn a_bundle_gives_its_messages_in_order_and_refuses_all_but_whole_ones() {
        let send = |payload: &[u8]| {
            let n = payload.len() as u32;
            let h = Header {
                kind: KIND_WR,
                len: n,
                total: n as u64,
                ..Default::default()
            };
            message(&h, payload)
        };
        let ping = Header {
            kind: KIND_PING,
            ..Default::default()
        };
        let mut bundle = send(b"first");
        bundle.extend(message(&ping, b""));
        bundle.extend(send(b"third one"));
        let (h, p, next) = bundled(&bundle, 0).unwrap();
        assert_eq!(
            (h.kind, p, next),
            (KIND_WR, &b"first"[..], Some(HEADER + 5))
        );
        let (h, p, next) = bundled(&bundle, next.unwrap()).unwrap();
        assert_eq!(
            (h.kind, p.len(), next),
            (KIND_PING, 0, Some(2 * HEADER + 5))
        );
        let (h, p, next) = bundled(&bundle, next.unwrap()).unwrap();
        assert_eq!((h.kind, p, next), (KIND_WR, &b"third one"[..], None));

        assert!(bundled(&[], 0).is_err(), "empty");
        assert!(
            bundled(&bundle[..bundle.len() - 1], 2 * HEADER + 5).is_err(),
            "cut short"
        );
        assert!(bundled(&bundle, 3).is_err(), "not at a message");
        let longer = Header {
            kind: KIND_WR,
            len: 6,
            total: 6,
            ..Default::default()
        };
        assert!(
            bundled(&message(&longer, b"first"), 0).is_err(),
            "past the end"
        );
        let part = Header {
            kind: KIND_WR,
            len: 5,
            total: 9,
            ..Default::default()
        };
        assert!(bundled(&message(&part, b"first"), 0).is_err(), "a fragment");
        for kind in [KIND_MORE, KIND_BUNDLE] {
            let inner = Header {
                kind,
                len: 5,
                total: 5,
                ..Default::default()
            };
            assert!(
                bundled(&message(&inner, b"first"), 0).is_err(),
                "kind {kind}"
            );
        }
    }
}
