//! Validation of `umq_create_option_t` and `umq_trans_info_t`, and the resulting queue settings.

use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use std::ffi::CStr;

pub const DEFAULT_DEPTH: u32 = 1024;
pub use crate::limits::MAX_DEPTH;
pub const DEFAULT_BUF_SIZE: u32 = 8192;

#[derive(Clone, Debug)]
pub struct QueueConfig {
    pub name: String,
    pub trans_mode: umq_trans_mode_t,
    pub rx_buf_size: u32,
    pub tx_buf_size: u32,
    pub rx_depth: u32,
    pub tx_depth: u32,
    pub interrupt: bool,
    /// The address (IPv4 or IPv6 text) `dev_info` names for a UB / IB / UB_PLUS / IB_PLUS
    /// queue: where its network endpoint listens.
    pub network_addr: Option<String>,
    /// What the application asked for that the queue only reports back.
    pub extras: CreateExtras,
}

/// Settings of a July 2026 `umq_create` that the queue keeps for `umq_cfg_get` and does not act
/// on: the transport mode and type of a UB jetty, its priority, the application's context.
#[derive(Clone, Copy, Debug, Default)]
pub struct CreateExtras {
    pub create_flag: u32,
    /// Tags every message the queue receives (`umq_ctx` of the pro header).
    pub umq_ctx: u64,
    pub tp_mode: u32,
    pub tp_type: u32,
    pub priority: u8,
    pub share: RqShare,
}

/// Whether a queue receives into a receive queue of its own or a shared one (`SharedRq`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RqShare {
    #[default]
    Own,
    /// The queue whose receive queue sub-queues share: the only one that polls it.
    Main,
    /// Receives into the receive queue of the main queue with this handle.
    Sub(u64),
}

/// The address `d` names, for the transport modes that run over a network device. An EID is
/// read as a GID is: its 16 bytes an IPv6 address in network order, an IPv4-mapped one
/// (`in4`: prefix ::ffff, then the IPv4 address) as that IPv4 address; the all-zero EID names
/// none. A link-local IPv6 address comes with its link (`devices::parse_scoped`): `fe80::1%eth0`.
fn network_addr(mode: umq_trans_mode_t, d: &umq_dev_assign_t) -> UmqResult<Option<String>> {
    const F: &str = "umq_create";
    let networked = matches!(
        mode,
        UMQ_TRANS_MODE_UB | UMQ_TRANS_MODE_IB | UMQ_TRANS_MODE_UB_PLUS | UMQ_TRANS_MODE_IB_PLUS
    );
    let text = match d.assign_mode {
        _ if !networked => return Ok(None),
        UMQ_DEV_ASSIGN_MODE_IPV4 => c_text(F, "dev_info address", unsafe { &d.u.ipv4.ip_addr })?,
        UMQ_DEV_ASSIGN_MODE_IPV6 => c_text(F, "dev_info address", unsafe { &d.u.ipv6.ip_addr })?,
        UMQ_DEV_ASSIGN_MODE_EID => &match eid_addr(d) {
            Some(ip) => ip.to_string(),
            None => return Ok(None),
        },
        _ => return Ok(None),
    };
    let (ip, scope) =
        crate::devices::parse_scoped(text).map_err(|why| einval(F, format_args!("{why}")))?;
    Ok(Some(crate::devices::scoped_text(ip, scope)))
}

/// The address an EID assignment names; None for the all-zero EID.
fn eid_addr(d: &umq_dev_assign_t) -> Option<std::net::IpAddr> {
    let ip = std::net::Ipv6Addr::from(unsafe { d.u.eid.eid.raw });
    (!ip.is_unspecified()).then(|| ip.to_canonical())
}

/// A C string that must end inside its array.
fn c_text<'a>(func: &str, what: &str, bytes: &'a [std::ffi::c_char]) -> UmqResult<&'a str> {
    let raw: &[u8] =
        unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const u8, bytes.len()) };
    let s = CStr::from_bytes_until_nul(raw)
        .map_err(|_| einval(func, format_args!("{what} is not NUL-terminated")))?;
    s.to_str()
        .map_err(|_| einval(func, format_args!("{what} is not valid text")))
}

pub fn check_dev_assign(func: &str, d: &umq_dev_assign_t) -> UmqResult<()> {
    let u = &d.u;
    match d.assign_mode {
        UMQ_DEV_ASSIGN_MODE_IPV4 => {
            let s = c_text(func, "dev_info.ipv4.ip_addr", unsafe { &u.ipv4.ip_addr })?;
            s.parse::<std::net::Ipv4Addr>()
                .map_err(|_| einval(func, format_args!("'{s}' is not an IPv4 address")))?;
        }
        UMQ_DEV_ASSIGN_MODE_IPV6 => {
            let s = c_text(func, "dev_info.ipv6.ip_addr", unsafe { &u.ipv6.ip_addr })?;
            match crate::devices::parse_scoped(s) {
                Ok((ip, _)) if ip.is_ipv6() => {}
                Ok(_) => return Err(einval(func, format_args!("'{s}' is not an IPv6 address"))),
                Err(why) => return Err(einval(func, format_args!("{why}"))),
            }
        }
        UMQ_DEV_ASSIGN_MODE_EID => {
            if let Some(ip) = eid_addr(d) {
                crate::devices::parse_scoped(&ip.to_string())
                    .map_err(|why| einval(func, format_args!("{why}")))?;
            }
        }
        UMQ_DEV_ASSIGN_MODE_DEV => {
            if c_text(func, "dev_info.dev.dev_name", unsafe { &u.dev.dev_name })?.is_empty() {
                return Err(einval(func, format_args!("dev_info.dev.dev_name is empty")));
            }
        }
        m => {
            return Err(einval(
                func,
                format_args!("dev_info.assign_mode {m} out of range"),
            ));
        }
    }
    Ok(())
}

pub fn check_trans_info(func: &str, t: &umq_trans_info_t) -> UmqResult<()> {
    if t.trans_mode >= UMQ_TRANS_MODE_MAX {
        return Err(einval(
            func,
            format_args!("trans_mode {} out of range", t.trans_mode),
        ));
    }
    check_dev_assign(func, &t.dev_info)
}

fn flagged(
    func: &str,
    what: &str,
    set: bool,
    value: u32,
    default: u32,
    max: u32,
) -> UmqResult<u32> {
    if !set {
        return Ok(default);
    }
    if value == 0 || value > max {
        return Err(einval(
            func,
            format_args!("{what} {value} outside 1..={max}"),
        ));
    }
    Ok(value)
}

pub fn from_option(o: &umq_create_option_t) -> UmqResult<QueueConfig> {
    const F: &str = "umq_create";
    let known = UMQ_CREATE_FLAG_RX_BUF_SIZE
        | UMQ_CREATE_FLAG_TX_BUF_SIZE
        | UMQ_CREATE_FLAG_RX_DEPTH
        | UMQ_CREATE_FLAG_TX_DEPTH
        | UMQ_CREATE_FLAG_QUEUE_MODE;
    if o.create_flag & !known != 0 {
        return Err(einval(
            F,
            format_args!("unknown create_flag bits {:#x}", o.create_flag & !known),
        ));
    }
    if o.trans_mode >= UMQ_TRANS_MODE_MAX {
        return Err(einval(
            F,
            format_args!("trans_mode {} out of range", o.trans_mode),
        ));
    }
    check_dev_assign(F, &o.dev_info)?;
    let name = c_text(F, "name", &o.name)?.to_string();
    let f = o.create_flag;
    let mode = if f & UMQ_CREATE_FLAG_QUEUE_MODE != 0 {
        o.mode
    } else {
        UMQ_MODE_POLLING
    };
    if mode >= UMQ_MODE_MAX {
        return Err(einval(F, format_args!("mode {mode} out of range")));
    }
    let max_buf = UMQ_MAX_BUF_REQUEST_SIZE;
    // A buffer size of 0 is the default size. The reference takes 0 as it is: receive buffers
    // that hold nothing, so only empty messages could arrive (its perftest's `-s 0` asks for
    // that queue and sends empty messages, which default-sized buffers take as well).
    let rx_buf_size_set = f & UMQ_CREATE_FLAG_RX_BUF_SIZE != 0 && o.rx_buf_size != 0;
    let tx_buf_size_set = f & UMQ_CREATE_FLAG_TX_BUF_SIZE != 0 && o.tx_buf_size != 0;
    Ok(QueueConfig {
        name,
        trans_mode: o.trans_mode,
        rx_buf_size: flagged(
            F,
            "rx_buf_size",
            rx_buf_size_set,
            o.rx_buf_size,
            DEFAULT_BUF_SIZE,
            max_buf,
        )?,
        tx_buf_size: flagged(
            F,
            "tx_buf_size",
            tx_buf_size_set,
            o.tx_buf_size,
            DEFAULT_BUF_SIZE,
            max_buf,
        )?,
        rx_depth: flagged(
            F,
            "rx_depth",
            f & UMQ_CREATE_FLAG_RX_DEPTH != 0,
            o.rx_depth,
            DEFAULT_DEPTH,
            MAX_DEPTH,
        )?,
        tx_depth: flagged(
            F,
            "tx_depth",
            f & UMQ_CREATE_FLAG_TX_DEPTH != 0,
            o.tx_depth,
            DEFAULT_DEPTH,
            MAX_DEPTH,
        )?,
        interrupt: mode == UMQ_MODE_INTERRUPT,
        network_addr: network_addr(o.trans_mode, &o.dev_info)?,
        extras: CreateExtras::default(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eid(raw: [u8; 16]) -> umq_dev_assign_t {
        let mut d: umq_dev_assign_t = unsafe { std::mem::zeroed() };
        d.assign_mode = UMQ_DEV_ASSIGN_MODE_EID;
        d.u.eid.eid.raw = raw;
        d
    }

    #[test]
    fn an_eid_names_the_address_its_bytes_are() {
        let mut mapped = [0u8; 16];
        mapped[10..12].copy_from_slice(&[0xff, 0xff]);
        mapped[12..].copy_from_slice(&[10, 1, 2, 3]);
        let v6 = "fd00::17".parse::<std::net::Ipv6Addr>().unwrap().octets();
        let ub = UMQ_TRANS_MODE_UB;
        let addr = |d: umq_dev_assign_t| network_addr(ub, &d).unwrap();
        assert_eq!(addr(eid(mapped)).as_deref(), Some("10.1.2.3"));
        assert_eq!(addr(eid(v6)).as_deref(), Some("fd00::17"));
        assert_eq!(addr(eid([0; 16])), None);
        assert_eq!(network_addr(UMQ_TRANS_MODE_IPC, &eid(v6)).unwrap(), None);
    }

    fn ipv6_text(text: &str) -> umq_dev_assign_t {
        let mut d: umq_dev_assign_t = unsafe { std::mem::zeroed() };
        d.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV6;
        for (to, b) in unsafe { d.u.ipv6.ip_addr.iter_mut() }.zip(text.bytes()) {
            *to = b as std::ffi::c_char;
        }
        d
    }

    /// A link-local address keeps its link (the zone by name, whichever form named it); a zone
    /// that names no interface, or one on an address that is not link-local, is refused.
    #[test]
    fn a_link_local_address_names_its_link() {
        let ub = UMQ_TRANS_MODE_UB;
        let lo = unsafe { libc::if_nametoindex(c"lo".as_ptr()) };
        let by_index = format!("fe80::7%{lo}");
        for text in ["fe80::7%lo", &by_index] {
            check_dev_assign("t", &ipv6_text(text)).unwrap();
            assert_eq!(
                network_addr(ub, &ipv6_text(text)).unwrap().as_deref(),
                Some("fe80::7%lo")
            );
        }
        for bad in ["fe80::7%no-such-if0", "fd00::7%lo", "10.1.2.3", "fe80::7%"] {
            assert_eq!(
                check_dev_assign("t", &ipv6_text(bad)),
                Err(-crate::abi::errno::UMQ_ERR_EINVAL),
                "{bad}"
            );
        }
        assert_eq!(
            network_addr(ub, &ipv6_text("fd00::7%lo")),
            Err(-crate::abi::errno::UMQ_ERR_EINVAL)
        );
    }
}
