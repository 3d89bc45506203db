//! Bind info, the bytes a peer hands us through the application.

use crate::abi::errno::UMQ_ERR_EINVAL;
use crate::draw::Tape;
use crate::queue::bind_info::{LEN_MIN, encode, fnv1a, parse};

/// Any bytes as bind info: refused with `-EINVAL`, or parsed into fields that encode back to
/// bytes that parse into the same fields. The first byte's low bit asks for the length field
/// and the checksum to be made right, so the fuzzer reaches the fields behind them.
pub fn bind_info(data: &[u8]) {
    let mut tape = Tape::new(data);
    let fix = tape.byte() & 1 == 1;
    let mut bytes = tape.bytes(usize::MAX).to_vec();
    if fix && bytes.len() >= LEN_MIN && bytes.len() <= u16::MAX as usize {
        let len = bytes.len();
        bytes[6..8].copy_from_slice(&(len as u16).to_le_bytes());
        let sum = fnv1a(&bytes[..len - 4]);
        bytes[len - 4..].copy_from_slice(&sum.to_le_bytes());
    }
    match parse("fuzz", &bytes) {
        Ok(info) => {
            let again = encode(&info);
            assert_eq!(parse("fuzz", &again).as_ref(), Ok(&info), "{again:02x?}");
        }
        Err(e) => assert_eq!(e, -UMQ_ERR_EINVAL),
    }
}

/// Valid bind infos, one of each transport (the fix-up byte first): loopback, shared memory,
/// and the network provider with its address, death-watch beacon and area key.
pub fn bind_info_seeds() -> Vec<Vec<u8>> {
    use crate::queue::bind_info::*;
    let base = BindInfo {
        transport: TRANSPORT_LOOPBACK,
        pro_api: true,
        flow_control: true,
        flow_version: 1,
        pid: 4242,
        instance: 7,
        umqh: 0x1_0000_0001,
        rx_depth: 256,
        tx_depth: 256,
        rx_buf_size: 8192,
        tx_buf_size: 8192,
        boot_id: 0x0123_4567_89ab_cdef,
        uid: 1000,
        inbox_fd: NO_INBOX,
        secret: 0x005e_c2e7,
        fabric: Default::default(),
    };
    let shm = BindInfo {
        transport: TRANSPORT_SHM | TRANSPORT_LOOPBACK,
        inbox_fd: 9,
        ..base.clone()
    };
    let mut fabric = BindInfo {
        transport: TRANSPORT_FABRIC | TRANSPORT_SHM | TRANSPORT_LOOPBACK,
        ..shm.clone()
    };
    fabric.fabric.name = vec![2, 0, 0x1f, 0x90, 127, 0, 0, 1];
    fabric.fabric.watch = Some("127.0.0.1:40000".parse().unwrap());
    fabric.fabric.area = Some(crate::transport::fabric::sys::RemoteKey {
        addr: 0x7f00_0000_1000,
        key: 0x42,
    });
    [base, shm, fabric]
        .iter()
        .map(|b| [&[0u8][..], &encode(b)].concat())
        .collect()
}
