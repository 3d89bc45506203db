//! Noticing at once that the peer's process died on another host.
//!
//! libfabric's endpoints surface a killed peer only as a failed transmit or a connection event
//! read later, and over `tcp;ofi_rxm` not even that (it reconnects and waits).
//! The kernel knows at once, though: when a process dies, its sockets close, and a listening
//! socket that closes resets every connection still waiting in its backlog. So each network
//! endpoint comes with a `Beacon`, a listening socket on the same address that never accepts,
//! and a peer on another host connects to it (`watch`) and hands the socket to the progress
//! thread, which sleeps on it as on a pidfd: it turns readable (reset) when our process is gone,
//! and never before, since no byte ever crosses it. No protocol runs over it: it carries nothing
//! but the kernel's own connection state. A host that vanishes sends no reset; the liveness
//! timeout covers that case.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::OwnedFd;
use std::time::Duration;

/// How long a bind waits to reach the peer's beacon before going on without it.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(1);

/// Our side: a listening socket the kernel closes when this process dies.
pub struct Beacon(TcpListener);

impl Beacon {
    /// A beacon on the address our endpoint listens on (`Endpoint::host`, port 0); None when
    /// the socket cannot be made.
    pub fn open(host: SocketAddr) -> Option<Beacon> {
        TcpListener::bind(host).ok().map(Beacon)
    }

    pub fn addr(&self) -> Option<SocketAddr> {
        self.0.local_addr().ok()
    }
}

/// Connects to the peer's beacon at `at`: the socket turns readable when the peer's process
/// is gone (the progress thread polls it; nothing is ever read from or written to it).
pub fn watch(at: SocketAddr) -> Result<OwnedFd, String> {
    TcpStream::connect_timeout(&at, CONNECT_TIMEOUT)
        .map(OwnedFd::from)
        .map_err(|e| format!("the peer's death watch at {at} is unreachable: {e}"))
}

/// The IP address of a `struct sockaddr_in` / `sockaddr_in6` as bytes (host-order family,
/// network-order port and address): a tcp endpoint's name (`fi_getname`).
pub(super) fn ip_of(name: &[u8]) -> Option<IpAddr> {
    let family = i32::from(u16::from_ne_bytes([*name.first()?, *name.get(1)?]));
    match (family, name.len()) {
        (libc::AF_INET, 16) => {
            let ip: [u8; 4] = name[4..8].try_into().ok()?;
            Some(Ipv4Addr::from(ip).into())
        }
        (libc::AF_INET6, 28) => {
            let ip: [u8; 16] = name[8..24].try_into().ok()?;
            Some(Ipv6Addr::from(ip).into())
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn readable(fd: &OwnedFd, timeout_ms: i32) -> bool {
        use std::os::fd::AsRawFd;
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        unsafe { libc::poll(&mut p, 1, timeout_ms) == 1 }
    }

    #[test]
    fn the_address_comes_from_an_ip_endpoint_name_only() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&7431u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[10, 1, 2, 3]);
        assert_eq!(ip_of(&v4), Some("10.1.2.3".parse().unwrap()));
        let mut v6 = vec![0u8; 28];
        v6[..2].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        v6[8..24].copy_from_slice(&"fd00::9".parse::<Ipv6Addr>().unwrap().octets());
        assert_eq!(ip_of(&v6), Some("fd00::9".parse().unwrap()));
        assert_eq!(ip_of(&v4[..15]), None);
        assert_eq!(ip_of(&[27, 0, 1, 2]), None);
        assert_eq!(ip_of(&[]), None);
    }

    /// The watch stays quiet while the beacon's process lives, and turns readable as soon as it
    /// is killed (a child process here holds the beacon: a shell that inherited it).
    #[test]
    fn a_watch_turns_readable_when_the_beacons_process_is_killed() {
        let beacon = Beacon::open((Ipv4Addr::LOCALHOST, 0).into()).expect("a beacon on 127.0.0.1");
        let at = beacon.addr().unwrap();
        // Hand the listening socket to a child as its stdin, then close ours.
        let mut child = Command::new("sleep")
            .arg("60")
            .stdin(Stdio::from(OwnedFd::from(beacon.0)))
            .spawn()
            .unwrap();
        let w = watch(at).expect("connect to the beacon");
        assert!(
            !readable(&w, 100),
            "readable while the beacon's process lives"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(readable(&w, 5000), "the beacon's death went unnoticed");
    }
}
