//! MAC control frames, byte-exact: IEEE 802.3x PAUSE (opcode 0x0001) and 802.1Qbb priority flow
//! control (opcode 0x0101), as a link carries them in-band.
//!
//! A frame is 64 bytes on the wire: destination, source, EtherType 0x8808, opcode, parameters,
//! zero padding, and the frame check sequence (CRC-32 of everything before it, least
//! significant byte first, as Ethernet transmits it). `decode` is strict: a frame that is not
//! exactly a pause frame for this link (other length, opcode, EtherType or address, bad FCS)
//! is reported as what it is, for the link to count and pass on or drop.

/// The reserved multicast address of MAC control frames.
pub const PAUSE_MULTICAST: [u8; 6] = [0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
pub const MAC_CONTROL: u16 = 0x8808;
pub const OPCODE_PAUSE: u16 = 0x0001;
pub const OPCODE_PFC: u16 = 0x0101;
/// A MAC control frame, FCS included.
pub const FRAME_BYTES: usize = 64;
const FCS_AT: usize = FRAME_BYTES - 4;

/// What a pause frame asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pause {
    /// 802.3x: the whole link, for `quanta` x 512 bit times.
    Link { quanta: u16 },
    /// 802.1Qbb: each priority whose bit is set in `enabled`, for its own time.
    Priorities { enabled: u8, quanta: [u16; 8] },
}

/// A pause frame with its addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PauseFrame {
    pub dst: [u8; 6],
    pub src: [u8; 6],
    pub pause: Pause,
}

/// Why bytes are not a pause frame for this link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotPause {
    /// Not 64 bytes.
    Length(usize),
    /// The FCS does not match.
    Fcs,
    /// Not a MAC control frame (this EtherType).
    EtherType(u16),
    /// A MAC control frame with another opcode.
    Opcode(u16),
    /// Addressed neither to the pause multicast nor to this link (when unicast pause is on).
    Address([u8; 6]),
}

/// The 64 bytes of a pause frame.
pub fn encode(frame: &PauseFrame) -> [u8; FRAME_BYTES] {
    let mut b = [0u8; FRAME_BYTES];
    b[0..6].copy_from_slice(&frame.dst);
    b[6..12].copy_from_slice(&frame.src);
    b[12..14].copy_from_slice(&MAC_CONTROL.to_be_bytes());
    match frame.pause {
        Pause::Link { quanta } => {
            b[14..16].copy_from_slice(&OPCODE_PAUSE.to_be_bytes());
            b[16..18].copy_from_slice(&quanta.to_be_bytes());
        }
        Pause::Priorities { enabled, quanta } => {
            b[14..16].copy_from_slice(&OPCODE_PFC.to_be_bytes());
            b[16..18].copy_from_slice(&(enabled as u16).to_be_bytes());
            for (i, q) in quanta.iter().enumerate() {
                b[18 + 2 * i..20 + 2 * i].copy_from_slice(&q.to_be_bytes());
            }
        }
    }
    let fcs = crc32(&b[..FCS_AT]);
    b[FCS_AT..].copy_from_slice(&fcs.to_le_bytes());
    b
}

/// The pause frame in `bytes`, if it is one addressed to the pause multicast or (with
/// unicast pause on) to `unicast`, the link's own address.
pub fn decode(bytes: &[u8], unicast: Option<[u8; 6]>) -> Result<PauseFrame, NotPause> {
    if bytes.len() != FRAME_BYTES {
        return Err(NotPause::Length(bytes.len()));
    }
    let fcs = u32::from_le_bytes(bytes[FCS_AT..].try_into().expect("four bytes"));
    if crc32(&bytes[..FCS_AT]) != fcs {
        return Err(NotPause::Fcs);
    }
    let be16 = |at: usize| u16::from_be_bytes([bytes[at], bytes[at + 1]]);
    let ether_type = be16(12);
    if ether_type != MAC_CONTROL {
        return Err(NotPause::EtherType(ether_type));
    }
    let dst: [u8; 6] = bytes[0..6].try_into().expect("six bytes");
    let src: [u8; 6] = bytes[6..12].try_into().expect("six bytes");
    let pause = match be16(14) {
        OPCODE_PAUSE => Pause::Link { quanta: be16(16) },
        // The vector's upper byte is reserved: received as sent, not acted on.
        OPCODE_PFC => Pause::Priorities {
            enabled: be16(16) as u8,
            quanta: std::array::from_fn(|i| be16(18 + 2 * i)),
        },
        other => return Err(NotPause::Opcode(other)),
    };
    if dst != PAUSE_MULTICAST && Some(dst) != unicast {
        return Err(NotPause::Address(dst));
    }
    Ok(PauseFrame { dst, src, pause })
}

/// CRC-32 as Ethernet's FCS computes it (reflected polynomial 0xEDB88320, initial value and
/// final XOR all ones).
pub fn crc32(bytes: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        std::array::from_fn(|i| {
            (0..8).fold(i as u32, |c, _| {
                if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                }
            })
        })
    });
    !bytes.iter().fold(!0u32, |c, &b| {
        table[((c ^ b as u32) & 0xff) as usize] ^ (c >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: [u8; 6] = [0x02, 0x00, 0x5e, 0x10, 0x20, 0x30];

    #[test]
    fn the_crc_is_ethernets() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926, "the CRC-32 check value");
        // A frame with its FCS appended leaves Ethernet's residue.
        let f = encode(&PauseFrame {
            dst: PAUSE_MULTICAST,
            src: SRC,
            pause: Pause::Link { quanta: 0xffff },
        });
        assert_eq!(crc32(&f), 0x2144_df1c);
    }

    /// Every byte of an 802.3x PAUSE: addresses, EtherType, opcode, time, zero padding, FCS.
    #[test]
    fn a_pause_frame_is_byte_exact() {
        let f = encode(&PauseFrame {
            dst: PAUSE_MULTICAST,
            src: SRC,
            pause: Pause::Link { quanta: 0x1234 },
        });
        let mut want = vec![0x01, 0x80, 0xc2, 0x00, 0x00, 0x01];
        want.extend_from_slice(&SRC);
        want.extend_from_slice(&[0x88, 0x08, 0x00, 0x01, 0x12, 0x34]);
        want.resize(60, 0);
        want.extend_from_slice(&crc32(&want).to_le_bytes());
        assert_eq!(f.to_vec(), want);
    }

    #[test]
    fn a_pfc_frame_is_byte_exact_and_decodes_back() {
        let quanta = [0, 1, 2, 0xffff, 4, 5, 6, 0x8000];
        let frame = PauseFrame {
            dst: PAUSE_MULTICAST,
            src: SRC,
            pause: Pause::Priorities {
                enabled: 0b1000_1001,
                quanta,
            },
        };
        let f = encode(&frame);
        assert_eq!(&f[12..18], &[0x88, 0x08, 0x01, 0x01, 0x00, 0x89]);
        assert_eq!(&f[18..22], &[0x00, 0x00, 0x00, 0x01]);
        assert_eq!(&f[24..26], &[0xff, 0xff]);
        assert_eq!(&f[32..34], &[0x80, 0x00]);
        assert!(f[34..60].iter().all(|&b| b == 0));
        assert_eq!(decode(&f, None), Ok(frame));
    }

    #[test]
    fn anything_else_is_not_a_pause_frame_and_says_why() {
        let good = PauseFrame {
            dst: PAUSE_MULTICAST,
            src: SRC,
            pause: Pause::Link { quanta: 7 },
        };
        let f = encode(&good);
        assert_eq!(decode(&f[..63], None), Err(NotPause::Length(63)));
        let mut bad_fcs = f;
        bad_fcs[20] ^= 1;
        assert_eq!(decode(&bad_fcs, None), Err(NotPause::Fcs));
        let refcs = |mut b: [u8; FRAME_BYTES]| {
            let fcs = crc32(&b[..FCS_AT]);
            b[FCS_AT..].copy_from_slice(&fcs.to_le_bytes());
            b
        };
        let mut other_op = f;
        other_op[15] = 0x02;
        assert_eq!(decode(&refcs(other_op), None), Err(NotPause::Opcode(2)));
        let mut other_type = f;
        other_type[13] = 0x09;
        assert_eq!(
            decode(&refcs(other_type), None),
            Err(NotPause::EtherType(0x8809))
        );
        let unicast = PauseFrame { dst: SRC, ..good };
        let u = encode(&unicast);
        assert_eq!(decode(&u, None), Err(NotPause::Address(SRC)));
        assert_eq!(decode(&u, Some(SRC)), Ok(unicast), "unicast pause on");
    }
}
