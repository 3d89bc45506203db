//! The host's network devices as UMQ devices: each interface with an address is a device of
//! that name (`lo` included), and its addresses are its EIDs, as a GID is made from an address:
//! an IPv6 address is its 16 bytes in network order, an IPv4 address the IPv4-mapped IPv6 one
//! (`::ffff:a.b.c.d`). EID indices count from 0 in the order the kernel lists the addresses,
//! IPv4 first. The queue layer reads an EID back as the address its queues listen on
//! (`queue::config`), so naming a device and an index binds on that address.

use std::ffi::CStr;
use std::net::{IpAddr, Ipv6Addr};

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

/// Every interface that has an IPv4 or IPv6 address, in the kernel's order.
pub fn list() -> Vec<Device> {
    let mut v4: Vec<(String, IpAddr)> = Vec::new();
    let mut v6: Vec<(String, IpAddr)> = Vec::new();
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    if unsafe { libc::getifaddrs(&mut head) } != 0 {
        return Vec::new();
    }
    let mut cur = head;
    while !cur.is_null() {
        let ifa = unsafe { &*cur };
        cur = ifa.ifa_next;
        if ifa.ifa_addr.is_null() || ifa.ifa_name.is_null() {
            continue;
        }
        let name = unsafe { CStr::from_ptr(ifa.ifa_name) }
            .to_string_lossy()
            .into_owned();
        match unsafe { (*ifa.ifa_addr).sa_family } as i32 {
            libc::AF_INET => {
                let sin = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in) };
                let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                v4.push((name, IpAddr::V4(ip)));
            }
            libc::AF_INET6 => {
                let sin6 = unsafe { &*(ifa.ifa_addr as *const libc::sockaddr_in6) };
                v6.push((name, IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr))));
            }
            _ => {}
        }
    }
    unsafe { libc::freeifaddrs(head) };
    let mut devices: Vec<Device> = Vec::new();
    for (name, ip) in v4.into_iter().chain(v6) {
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
    fn an_ipv4_eid_is_the_mapped_address_in_network_order() {
        let e = eid_of("10.1.2.3".parse().unwrap());
        assert_eq!(e, [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 1, 2, 3]);
        let v6: IpAddr = "fd00::17".parse().unwrap();
        assert_eq!(addr_of(eid_of(v6)), v6);
    }
}
