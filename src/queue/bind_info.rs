//! Bind information: what a peer needs to connect to a queue, versioned and checksummed.
//!
//! Layout (little endian, 80 bytes and more): magic "UMQB", version, length, transports offered,
//! api, flow control flag, flow-control protocol version (0 when off), pid, runtime instance,
//! umqh, rx/tx depth, rx/tx buffer size, then for shared memory the host's boot id (hashed), the
//! uid, the inbox memfd number (u32::MAX when there is none) and the inbox secret; then for the
//! network a 16-bit length and the endpoint's name (libfabric's, or UCX's worker address with
//! our packed keys), a length byte and the socket address
//! of the queue's death watch (0, 6 bytes for IPv4 or 18 for IPv6: address, then port, big
//! endian), and a length byte and where the peer writes its flow-control area with the queue's
//! channel in its node, the port of the node's call bell and the secret its pings carry (0, or
//! 34 bytes: address, key, channel, port (0 for none), secret); last, an FNV-1a checksum of
//! everything before it.

use super::Queue;
use crate::error::{UmqResult, einval};
use crate::runtime::Runtime;
use crate::transport::fabric::{Contact, RemoteKey};
use crate::transport::link::{PeerFacts, Provider};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub const MAGIC: u32 = u32::from_le_bytes(*b"UMQB");
/// Raised whenever peers of two versions could not work together: 7 when the network's messages
/// grew to 64 KiB of payload behind their header, which libfabric's rxm sends eagerly (its
/// connections refuse a peer whose eager limit differs); 8 when small network messages began to
/// travel bundled, a kind of message earlier peers take for corruption; 9 when a network WR's
/// completion that teaches a chunk stopped carrying a chunk stride's worth of padding (earlier
/// peers wait for the rest of it); 10 when the network address's length grew to 16 bits; 11
/// when a channel's landing words grew a fifth, the bytes of our messages the peer took (an
/// earlier peer never writes it, and our sender would wait on its allowance for good); 12 when
/// they grew a sixth, their seal (an earlier peer's writes would never be believed); 13 when
/// every network message began to carry its sender's node secret beside its bytes (an earlier
/// peer's carry none, and would all be dropped as a stranger's).
pub const VERSION: u16 = 13;
/// The fixed part, before the network address.
const FIXED: usize = 72;
/// The shortest bind info: no network address, no death watch, no area key.
pub const LEN_MIN: usize = FIXED + 2 + 1 + 1 + 4;
/// The longest network address carried. A UCX worker's address names every transport and
/// device it may use (204 bytes with `UCX_TLS=all`, its shared-memory transports included,
/// more with RDMA devices); at this limit a whole bind info, death watch and area key included, still
/// fits the 512 bytes the reference's programs give `umq_bind_info_get`.
pub const MAX_FABRIC_ADDR: usize = 376;
/// Transports a bind info offers, as bits.
pub const TRANSPORT_LOOPBACK: u8 = 1;
pub const TRANSPORT_SHM: u8 = 2;
pub const TRANSPORT_FABRIC: u8 = 4;
pub const NO_INBOX: u32 = u32::MAX;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindInfo {
    pub transport: u8,
    pub pro_api: bool,
    pub flow_control: bool,
    pub flow_version: u8,
    pub pid: u32,
    pub instance: u64,
    pub umqh: u64,
    pub rx_depth: u32,
    pub tx_depth: u32,
    pub rx_buf_size: u32,
    pub tx_buf_size: u32,
    pub boot_id: u64,
    pub uid: u32,
    pub inbox_fd: u32,
    pub secret: u64,
    /// The queue's network endpoint (an empty name when it offers none).
    pub fabric: Contact,
}

fn encode_socket(a: Option<SocketAddr>) -> Vec<u8> {
    let mut out = match a.map(|a| a.ip()) {
        None => return Vec::new(),
        Some(IpAddr::V4(ip)) => ip.octets().to_vec(),
        Some(IpAddr::V6(ip)) => ip.octets().to_vec(),
    };
    out.extend_from_slice(&a.map_or(0, |a| a.port()).to_be_bytes());
    out
}

fn encode_key(c: &Contact) -> Vec<u8> {
    c.area.map_or(Vec::new(), |k| {
        [
            k.addr.to_le_bytes(),
            k.key.to_le_bytes(),
            c.channel.to_le_bytes(),
        ]
        .concat()
        .into_iter()
        .chain(c.call_bell.to_le_bytes())
        .chain(c.secret.to_le_bytes())
        .collect()
    })
}

/// What `decode_key` reads: the area key, the channel, the call bell's port, the node's secret.
type KeyField = (RemoteKey, u64, u16, u64);

/// The area key, the channel, the call bell's port and the node's secret; None for an empty
/// field; Err for a length that is no key.
fn decode_key(b: &[u8]) -> Result<Option<KeyField>, ()> {
    match b.len() {
        0 => Ok(None),
        34 => Ok(Some((
            RemoteKey {
                addr: u64_at(b, 0),
                key: u64_at(b, 8),
            },
            u64_at(b, 16),
            u16::from_le_bytes([b[24], b[25]]),
            u64_at(b, 26),
        ))),
        _ => Err(()),
    }
}

/// None for an empty field; Err for a length that is no address.
fn decode_socket(b: &[u8]) -> Result<Option<SocketAddr>, ()> {
    let port = |at: usize| u16::from_be_bytes([b[at], b[at + 1]]);
    match b.len() {
        0 => Ok(None),
        6 => {
            let ip: [u8; 4] = b[..4].try_into().unwrap();
            Ok(Some(SocketAddr::new(Ipv4Addr::from(ip).into(), port(4))))
        }
        18 => {
            let ip: [u8; 16] = b[..16].try_into().unwrap();
            Ok(Some(SocketAddr::new(Ipv6Addr::from(ip).into(), port(16))))
        }
        _ => Err(()),
    }
}

/// The checksum that ends a bind info.
pub fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| {
        (h ^ b as u32).wrapping_mul(0x0100_0193)
    })
}

/// A hash of this boot's id: equal bind infos came from the same host and boot.
pub fn boot_id() -> u64 {
    static ID: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *ID.get_or_init(|| {
        let text = std::fs::read("/proc/sys/kernel/random/boot_id").unwrap_or_default();
        fnv1a(&text) as u64 | (fnv1a(&[&text[..], b"umq"].concat()) as u64) << 32
    })
}

pub fn of_queue(q: &Queue) -> BindInfo {
    let offer = q.offer_for_bind();
    BindInfo {
        transport: TRANSPORT_LOOPBACK
            | if offer.shm.is_some() {
                TRANSPORT_SHM
            } else {
                0
            }
            | if offer.fabric.is_some() {
                TRANSPORT_FABRIC
            } else {
                0
            },
        pro_api: q.rt.pro_api,
        flow_control: q.rt.flow_control.enabled,
        flow_version: q.rt.flow_control.protocol_version(),
        pid: std::process::id(),
        instance: q.rt.instance,
        umqh: q.handle,
        rx_depth: q.cfg.rx_depth,
        tx_depth: q.cfg.tx_depth,
        rx_buf_size: q.cfg.rx_buf_size,
        tx_buf_size: q.cfg.tx_buf_size,
        boot_id: boot_id(),
        uid: unsafe { libc::getuid() },
        inbox_fd: offer.shm.map_or(NO_INBOX, |(fd, _)| fd as u32),
        secret: offer.shm.map_or(0, |(_, s)| s),
        fabric: offer.fabric.filter(carried).unwrap_or_default(),
    }
}

/// Whether the network endpoint's address fits a bind info; if not, the queue offers no
/// network endpoint, and the log says why (the peer can only say that none was offered).
fn carried(c: &Contact) -> bool {
    let fits = c.name.len() <= MAX_FABRIC_ADDR;
    if !fits {
        crate::log_err!(
            "umq_bind_info_get",
            "the network endpoint's address is {} bytes, more than the {MAX_FABRIC_ADDR} a bind \
             info carries: the queue offers no network endpoint (over UCX, name fewer \
             transports in UCX_TLS)",
            c.name.len()
        );
    }
    fits
}

pub fn encode(b: &BindInfo) -> Vec<u8> {
    let addr = &b.fabric.name[..b.fabric.name.len().min(MAX_FABRIC_ADDR)];
    let watch = encode_socket(b.fabric.watch);
    let key = encode_key(&b.fabric);
    let len = LEN_MIN + addr.len() + watch.len() + key.len();
    let mut out = Vec::with_capacity(len);
    out.extend_from_slice(&MAGIC.to_le_bytes());
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(len as u16).to_le_bytes());
    out.extend_from_slice(&[
        b.transport,
        b.pro_api as u8,
        b.flow_control as u8,
        b.flow_version,
    ]);
    out.extend_from_slice(&b.pid.to_le_bytes());
    out.extend_from_slice(&b.instance.to_le_bytes());
    out.extend_from_slice(&b.umqh.to_le_bytes());
    for v in [b.rx_depth, b.tx_depth, b.rx_buf_size, b.tx_buf_size] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&b.boot_id.to_le_bytes());
    out.extend_from_slice(&b.uid.to_le_bytes());
    out.extend_from_slice(&b.inbox_fd.to_le_bytes());
    out.extend_from_slice(&b.secret.to_le_bytes());
    debug_assert_eq!(out.len(), FIXED);
    out.extend_from_slice(&(addr.len() as u16).to_le_bytes());
    out.extend_from_slice(addr);
    out.push(watch.len() as u8);
    out.extend_from_slice(&watch);
    out.push(key.len() as u8);
    out.extend_from_slice(&key);
    let sum = fnv1a(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

pub fn parse(func: &str, b: &[u8]) -> UmqResult<BindInfo> {
    if b.len() < LEN_MIN {
        return Err(einval(
            func,
            format_args!("bind info of {} bytes is shorter than {LEN_MIN}", b.len()),
        ));
    }
    if u32_at(b, 0) != MAGIC {
        return Err(einval(
            func,
            format_args!("bind info has no UMQ magic (not produced by umq_bind_info_get)"),
        ));
    }
    let version = u16::from_le_bytes([b[4], b[5]]);
    if version != VERSION {
        return Err(einval(
            func,
            format_args!(
                "bind info version {version} is not supported (this library speaks {VERSION})"
            ),
        ));
    }
    let corrupt = || {
        einval(
            func,
            format_args!("bind info is corrupt or truncated (length or checksum mismatch)"),
        )
    };
    let len = u16::from_le_bytes([b[6], b[7]]) as usize;
    let addr_len = u16::from_le_bytes([b[FIXED], b[FIXED + 1]]) as usize;
    let watch_at = FIXED + 2 + addr_len;
    if len > b.len() || addr_len > MAX_FABRIC_ADDR || watch_at >= len {
        return Err(corrupt());
    }
    let key_at = watch_at + 1 + b[watch_at] as usize;
    if key_at >= len {
        return Err(corrupt());
    }
    let key_len = b[key_at] as usize;
    if len != key_at + 1 + key_len + 4 || fnv1a(&b[..len - 4]) != u32_at(b, len - 4) {
        return Err(corrupt());
    }
    let watch = decode_socket(&b[watch_at + 1..key_at]).map_err(|()| corrupt())?;
    let area = decode_key(&b[key_at + 1..key_at + 1 + key_len]).map_err(|()| corrupt())?;
    Ok(BindInfo {
        transport: b[8],
        pro_api: b[9] != 0,
        flow_control: b[10] != 0,
        flow_version: b[11],
        pid: u32_at(b, 12),
        instance: u64_at(b, 16),
        umqh: u64_at(b, 24),
        rx_depth: u32_at(b, 32),
        tx_depth: u32_at(b, 36),
        rx_buf_size: u32_at(b, 40),
        tx_buf_size: u32_at(b, 44),
        boot_id: u64_at(b, 48),
        uid: u32_at(b, 56),
        inbox_fd: u32_at(b, 60),
        secret: u64_at(b, 64),
        fabric: Contact {
            name: b[FIXED + 2..watch_at].to_vec(),
            watch,
            area: area.map(|(k, ..)| k),
            channel: area.map_or(0, |(_, c, ..)| c),
            call_bell: area.map_or(0, |(_, _, p, _)| p),
            secret: area.map_or(0, |(.., secret)| secret),
        },
    })
}

/// Refuses peers this build cannot serve, saying why.
pub fn check_compatible(func: &str, rt: &Runtime, remote: &BindInfo) -> UmqResult<()> {
    if remote.transport & !(TRANSPORT_LOOPBACK | TRANSPORT_SHM | TRANSPORT_FABRIC) != 0 {
        return Err(einval(
            func,
            format_args!(
                "unknown transport bits {:#x} in bind info",
                remote.transport
            ),
        ));
    }
    if remote.flow_control != rt.flow_control.enabled {
        return Err(einval(
            func,
            format_args!(
                "flow control is {} here but {} at the peer; both sides must agree",
                on_off(rt.flow_control.enabled),
                on_off(remote.flow_control)
            ),
        ));
    }
    let ours = rt.flow_control.protocol_version();
    if remote.flow_control && remote.flow_version != ours {
        return Err(einval(
            func,
            format_args!(
                "peer speaks flow-control protocol version {}, this process speaks {ours} \
                 (the December window is {}, the July 2026 credit requests {})",
                remote.flow_version,
                crate::flow::PROTOCOL_VERSION,
                crate::flow::credit::PROTOCOL_VERSION
            ),
        ));
    }
    if remote.rx_depth == 0 || remote.tx_depth == 0 {
        return Err(einval(
            func,
            format_args!("peer reports a zero queue depth"),
        ));
    }
    Ok(())
}

fn on_off(b: bool) -> &'static str {
    if b { "on" } else { "off" }
}

/// The provider that serves a binding to `remote` (`link::choose`), or why none can.
pub fn choose(func: &str, rt: &Runtime, remote: &BindInfo) -> UmqResult<Provider> {
    let peer = PeerFacts {
        pid: remote.pid,
        uid: remote.uid,
        same_process: remote.pid == std::process::id() && remote.instance == rt.instance,
        same_host: remote.boot_id == boot_id(),
        same_user: remote.uid == unsafe { libc::getuid() },
        offers_shm: remote.transport & TRANSPORT_SHM != 0 && remote.inbox_fd != NO_INBOX,
        offers_fabric: remote.transport & TRANSPORT_FABRIC != 0 && !remote.fabric.name.is_empty(),
    };
    crate::transport::link::choose(rt.provider, &peer)
        .map_err(|why| einval(func, format_args!("{why}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> BindInfo {
        BindInfo {
            transport: TRANSPORT_LOOPBACK,
            pro_api: true,
            flow_control: true,
            flow_version: 1,
            pid: 42,
            instance: 0xfeed_beef,
            umqh: 0x554d_0001_0000_0003,
            rx_depth: 128,
            tx_depth: 64,
            rx_buf_size: 8192,
            tx_buf_size: 4096,
            boot_id: 0x1234_5678_9abc_def0,
            uid: 1000,
            inbox_fd: 7,
            secret: 0x005e_c2e7,
            fabric: Contact {
                name: vec![2, 0, 0x1f, 0x90, 127, 0, 0, 1],
                watch: Some("10.0.0.7:40001".parse().unwrap()),
                area: Some(RemoteKey {
                    addr: 0x7f00_1234_5000,
                    key: 0x9a,
                }),
                channel: 0x0000_0007_0000_0003,
                call_bell: 40002,
                secret: 0x51ec_7e75_0000_0009,
            },
        }
    }

    #[test]
    fn round_trips_with_and_without_a_network_address() {
        assert_eq!(parse("t", &encode(&sample())), Ok(sample()));
        let v6 = BindInfo {
            fabric: Contact {
                watch: Some("[fd00::1]:9".parse().unwrap()),
                ..sample().fabric
            },
            ..sample()
        };
        assert_eq!(parse("t", &encode(&v6)), Ok(v6));
        let plain = BindInfo {
            fabric: Contact::default(),
            ..sample()
        };
        assert_eq!(encode(&plain).len(), LEN_MIN);
        assert_eq!(parse("t", &encode(&plain)), Ok(plain));
        // A caller's buffer may be longer than the info: the length field says where it ends.
        let mut padded = encode(&sample());
        padded.resize(512, 0xaa);
        assert_eq!(parse("t", &padded), Ok(sample()));
    }

    /// A UCX worker's address outgrows a length byte (204 bytes with `UCX_TLS=all` here):
    /// addresses up to `MAX_FABRIC_ADDR` travel whole, and a bind info that carries the
    /// longest, with a death watch over IPv6 and an area key, still fits the 512 bytes the
    /// reference's programs give `umq_bind_info_get`. A longer one is not offered.
    #[test]
    fn a_long_network_address_travels_whole_and_the_longest_fits_512_bytes() {
        for len in [255, 256, 300, MAX_FABRIC_ADDR] {
            let long = BindInfo {
                fabric: Contact {
                    name: (0..len).map(|i| i as u8).collect(),
                    watch: Some("[fd00::1]:9".parse().unwrap()),
                    ..sample().fabric
                },
                ..sample()
            };
            let info = encode(&long);
            assert!(info.len() <= 512, "{len}: {} bytes", info.len());
            assert_eq!(parse("t", &info), Ok(long), "{len}");
        }
        let too_long = Contact {
            name: vec![7; MAX_FABRIC_ADDR + 1],
            ..Contact::default()
        };
        assert!(!carried(&too_long));
        assert!(carried(&sample().fabric));
    }

    #[test]
    fn every_single_bit_flip_is_refused() {
        let good = encode(&sample());
        for byte in 0..good.len() {
            for bit in 0..8 {
                let mut bad = good.clone();
                bad[byte] ^= 1 << bit;
                assert_eq!(
                    parse("t", &bad),
                    Err(-crate::abi::errno::UMQ_ERR_EINVAL),
                    "byte {byte} bit {bit}"
                );
            }
        }
    }

    #[test]
    fn truncated_oversized_and_foreign_versions_are_refused() {
        let good = encode(&sample());
        let n = good.len();
        for cut in [LEN_MIN - 1, n - 1, n - 4] {
            assert!(parse("t", &good[..cut]).is_err(), "cut to {cut}");
        }
        let resum = |mut b: Vec<u8>| {
            let len = u16::from_le_bytes([b[6], b[7]]) as usize;
            let sum = fnv1a(&b[..len - 4]);
            b[len - 4..len].copy_from_slice(&sum.to_le_bytes());
            b
        };
        let mut other_version = good.clone();
        other_version[4] = 2;
        assert!(parse("t", &resum(other_version)).is_err());
        // An address length past the limit, checksummed as if honest, is still refused.
        let mut long = encode(&BindInfo {
            fabric: Contact {
                name: vec![1; MAX_FABRIC_ADDR],
                ..Contact::default()
            },
            ..sample()
        });
        long[FIXED..FIXED + 2].copy_from_slice(&(MAX_FABRIC_ADDR as u16 + 1).to_le_bytes());
        let len = LEN_MIN + MAX_FABRIC_ADDR + 1;
        long[6..8].copy_from_slice(&(len as u16).to_le_bytes());
        long.resize(len, 1);
        assert!(parse("t", &resum(long)).is_err());
        // A death-watch or area-key field of a length no such thing has, checksummed as if
        // honest.
        let no_extras = BindInfo {
            fabric: Contact {
                watch: None,
                area: None,
                channel: 0,
                call_bell: 0,
                secret: 0,
                ..sample().fabric
            },
            ..sample()
        };
        for field in [0, 1] {
            let mut odd = encode(&no_extras);
            let at = FIXED + 2 + no_extras.fabric.name.len() + field;
            odd[at] = 5;
            odd.splice(at + 1..at + 1, [1, 2, 3, 4, 5]);
            let len = odd.len();
            odd[6..8].copy_from_slice(&(len as u16).to_le_bytes());
            assert!(parse("t", &resum(odd)).is_err(), "field {field}");
        }
    }
}
