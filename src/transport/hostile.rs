//! What every hostile-peer bench checks (`shm::hostile`, `fabric::hostile`): buffers of ours
//! that nothing may write to keep their canary bytes, and every receive completion fits the
//! buffers it names. For tests and the fuzz targets only.

use super::wire::Wire;
use crate::abi::pro_types::*;
use crate::abi::types::umq_buf_t;
use crate::draw::Draw;

const CANARY: u8 = 0xc5;

/// An opcode a peer's WR may have, SENDs the likeliest.
pub fn opcode(d: &mut impl Draw) -> umq_opcode_t {
    d.pick(&[
        UMQ_OPC_SEND,
        UMQ_OPC_SEND,
        UMQ_OPC_SEND_IMM,
        UMQ_OPC_WRITE,
        UMQ_OPC_WRITE_IMM,
        UMQ_OPC_READ,
        UMQ_OPC_NOP,
    ])
}

/// Fills each buffer with canary bytes.
pub fn paint(bufs: &[*mut umq_buf_t]) {
    for &b in bufs {
        unsafe { std::ptr::write_bytes((*b).buf_data, CANARY, (*b).buf_size as usize) };
    }
}

/// Panics unless each buffer still holds only canary bytes.
pub fn assert_unwritten(bufs: &[*mut umq_buf_t]) {
    for &b in bufs {
        let (data, cap) = unsafe { ((*b).buf_data as *const u8, (*b).buf_size as usize) };
        let bytes = unsafe { std::slice::from_raw_parts(data, cap) };
        assert!(bytes.iter().all(|&x| x == CANARY), "a stray write");
    }
}

/// Every completion fits the buffers it names: a receiver that fragments takes a long message
/// in a chain of buffers.
pub fn assert_completions_fit(w: &Wire) {
    for (b, nbufs) in w.rq.completions() {
        let chain: Vec<_> = crate::buf::iter(b).take(nbufs as usize).collect();
        let cap: u64 = chain.iter().map(|&c| unsafe { (*c).buf_size } as u64).sum();
        let len = unsafe { (*b).total_data_size } as u64;
        assert!(
            len <= cap,
            "{len} bytes completed in {cap} bytes of buffers"
        );
        for &c in &chain {
            let (n, cap) = unsafe { ((*c).data_size, (*c).buf_size) };
            assert!(n <= cap, "{n} bytes in a {cap}-byte buffer");
        }
    }
}
