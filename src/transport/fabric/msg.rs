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

#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Header {
    pub kind: u8,
    pub opcode: u8,
    pub _r0: u16,
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
        if h.kind == 0 || h.kind > KIND_CONTROL {
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
}
