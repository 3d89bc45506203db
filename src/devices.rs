//! The host's network devices as UMQ devices: each interface with an address is a device of
//! that name (`lo` included), and its addresses are its EIDs, as a GID is made from an address:
//! an IPv6 address is its 16 bytes in network order, an IPv4 address the IPv4-mapped IPv6 one
//! (`::ffff:a.b.c.d`). EID indices count from 0 in the order the kernel lists the addresses,
//! IPv4 first. The queue layer reads an EID back as the address its queues listen on
//! (`queue::config`), so naming a device and an index binds on that address.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV6};

/// A device: its interface name and its EIDs, index i at position i.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    pub name: String,
    pub eids: Vec<[u8; 16]>,
}

/// The EID of an address.
pub fn eid_of(ip: IpAddr) -> [u8; 16] {
    match ip {
        IpAddr::V4(v4) => v4.to_ipv6_mapped().octets(),
        IpAddr::V6(v6) => v6.octets(),
    }
}

/// The address an EID names.
pub fn addr_of(eid: [u8; 16]) -> IpAddr {
    Ipv6Addr::from(eid).to_canonical()
}

/// Every address of the host's interfaces, in the kernel's order: the interface's name, the
/// address, and the interface's index (each address has its interface, whatever its scope).
fn addresses() -> Vec<(String, IpAddr, u32)> {
    let mut found = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return found;
    }
    let mut cur = head;
    while !cur.is_null() {
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) };
        let ip = match unsafe { (*ifa.ifa_addr).sa_family } as i32 {
            libc::AF_INET => {
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                IpAddr::V4(std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr)))
            }
            libc::AF_INET6 => {
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))
            }
            _ => continue,
        };
        let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
        found.push((name.to_string_lossy().into_owned(), ip, index));
    }
    unsafe { libc::freeifaddrs(head) };
    found
}

/// Every interface that has an IPv4 or IPv6 address, in the kernel's order.
pub fn list() -> Vec<Device> {
    let (v4, v6): (Vec<_>, Vec<_>) = addresses().into_iter().partition(|(_, ip, _)| ip.is_ipv4());
    let mut devices: Vec<Device> = Vec::new();
    for (name, ip, _) in v4.into_iter().chain(v6) {
        match devices.iter_mut().find(|d| d.name == name) {
            Some(d) => d.eids.push(eid_of(ip)),
            None => devices.push(Device {
                name,
                eids: vec![eid_of(ip)],
            }),
        }
    }
    devices
}

/// The device of that name, if the host has it.
pub fn find(name: &str) -> Option<Device> {
    list().into_iter().find(|d| d.name == name)
}

/// Whether `ip` is an IPv6 link-local address (fe80::/10): one that means something only on
/// one link, so a socket on it names that link's interface too (its scope).
pub fn is_link_local(ip: IpAddr) -> bool {
    matches!(ip, IpAddr::V6(v6) if v6.is_unicast_link_local())
}

/// The address of address text that may end in a zone (`fe80::1%eth0`), the zone left aside.
pub fn ip_of_text(text: &str) -> Option<IpAddr> {
    text.split_once('%').map_or(text, |(ip, _)| ip).parse().ok()
}

/// An address as a queue names it, and the index of the interface whose link it lies on for a
/// link-local IPv6 address (0 for any other, or one no interface here holds). The link comes
/// from the text's zone, an interface's name or index (`fe80::1%eth0`, `fe80::1%3`), or else
/// from the one interface that holds the address: an address held on two links needs a zone.
pub fn parse_scoped(text: &str) -> Result<(IpAddr, u32), String> {
    let (ip_text, zone) = match text.split_once('%') {
        Some((ip, zone)) => (ip, Some(zone)),
        None => (text, None),
    };
    let ip: IpAddr = ip_text
        .parse()
        .map_err(|_| format!("'{ip_text}' is not an IP address"))?;
    match zone {
        Some(_) if !is_link_local(ip) => Err(format!(
            "'{text}': a zone names the link of a link-local IPv6 address (fe80::/10) only"
        )),
        Some(zone) => zone_index(zone)
            .map(|index| (ip, index))
            .ok_or_else(|| format!("'{text}': no interface '{zone}' on this host")),
        None if is_link_local(ip) => Ok((ip, link_of(ip)?)),
        None => Ok((ip, 0)),
    }
}

/// The index of the interface a zone names, by its name or its index.
fn zone_index(zone: &str) -> Option<u32> {
    if let Ok(index) = zone.parse::<u32>() {
        return interface_name(index).map(|_| index);
    }
    let name = std::ffi::CString::new(zone).ok()?;
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    (index != 0).then_some(index)
}

/// The name of the interface with index `index`, if there is one.
fn interface_name(index: u32) -> Option<String> {
    let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
    let found = unsafe { libc::if_indextoname(index, name.as_mut_ptr()) };
    (index != 0 && !found.is_null()).then(|| {
        unsafe { CStr::from_ptr(name.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    })
}

/// The interface that holds link-local address `ip`: 0 when none does, an error when several
/// do (the address alone does not say which link is meant).
fn link_of(ip: IpAddr) -> Result<u32, String> {
    let mut holders: Vec<(String, u32)> = addresses()
        .into_iter()
        .filter(|(_, held, _)| *held == ip)
        .map(|(name, _, index)| (name, index))
        .collect();
    holders.dedup();
    match holders.as_slice() {
        [] => Ok(0),
        [(_, index)] => Ok(*index),
        [(first, _), ..] => Err(format!(
            "link-local address {ip} is on several interfaces ({}): name one, as {ip}%{first}",
            holders
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// Address text with its link: `fe80::1%eth0` for a link-local address on interface `scope`,
/// the plain address otherwise. The form `parse_scoped` reads back (and libfabric's node names,
/// through getaddrinfo).
pub fn scoped_text(ip: IpAddr, scope: u32) -> String {
    match interface_name(scope).filter(|_| is_link_local(ip)) {
        Some(name) => format!("{ip}%{name}"),
        None => ip.to_string(),
    }
}

/// The socket address of `ip` and `port`, on the link of interface `scope` when `ip` is
/// link-local (a peer's link-local address is reached over the link our own address lies on).
pub fn socket_addr(ip: IpAddr, port: u16, scope: u32) -> SocketAddr {
    match ip {
        IpAddr::V6(v6) if v6.is_unicast_link_local() => {
            SocketAddr::V6(SocketAddrV6::new(v6, port, 0, scope))
        }
        ip => SocketAddr::new(ip, port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lo_is_a_device_whose_first_eid_is_127_0_0_1() {
        let lo = find("lo").expect("every Linux host has lo");
        assert_eq!(lo.eids[0], eid_of("127.0.0.1".parse().unwrap()));
        assert_eq!(addr_of(lo.eids[0]).to_string(), "127.0.0.1");
        assert!(find("no-such-device0").is_none());
    }

    #[test]
    fn a_zone_names_an_interface_by_name_or_index_and_only_for_a_link_local_address() {
        let lo = zone_index("lo").expect("lo has an index");
        let ll: IpAddr = "fe80::7".parse().unwrap();
        assert_eq!(parse_scoped("fe80::7%lo"), Ok((ll, lo)));
        assert_eq!(parse_scoped(&format!("fe80::7%{lo}")), Ok((ll, lo)));
        assert_eq!(
            parse_scoped("10.1.2.3"),
            Ok(("10.1.2.3".parse().unwrap(), 0))
        );
        assert_eq!(parse_scoped("fd00::7"), Ok(("fd00::7".parse().unwrap(), 0)));
        // No interface holds it: no link to take (the endpoint then fails as on any address
        // that is not ours).
        assert_eq!(
            parse_scoped("fe80::dead:beef:7"),
            Ok(("fe80::dead:beef:7".parse().unwrap(), 0))
        );
        for bad in [
            "fe80::7%no-such-if0",
            "fe80::7%4000000000",
            "fd00::7%lo",
            "10.1.2.3%lo",
            "lo",
        ] {
            assert!(parse_scoped(bad).is_err(), "{bad}");
        }
        assert_eq!(ip_of_text("fe80::7%eth9"), Some(ll));
        assert_eq!(scoped_text(ll, lo), "fe80::7%lo");
        assert_eq!(scoped_text(ll, 0), "fe80::7");
        assert_eq!(scoped_text("fd00::7".parse().unwrap(), lo), "fd00::7");
        let SocketAddr::V6(at) = socket_addr(ll, 9, lo) else {
            panic!("not IPv6")
        };
        assert_eq!((at.port(), at.scope_id()), (9, lo));
        assert_eq!(
            socket_addr("fd00::7".parse().unwrap(), 9, lo),
            "[fd00::7]:9".parse().unwrap()
        );
    }

    #[test]
    fn an_ipv4_eid_is_the_mapped_address_in_network_order() {
        let e = eid_of("10.1.2.3".parse().unwrap());
        assert_eq!(e, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
        let v6: IpAddr = "fd00::17".parse().unwrap();
        assert_eq!(addr_of(eid_of(v6)), v6);
    }
}
