//! `umq_pro_types.h` of the July 2026 revision: per-WR data of the pro API, kept inside
//! `umq_buf_t.qbuf_ext`. The storage is December's (`crate::abi::pro_types::umq_buf_pro_t`, which
//! the queue layer reads); this revision names a 24-bit user immediate inside `imm_data`, splits
//! the remote token into `token_id:20` and `mempool_id:12`, and calls the first reserved word
//! `umq_ctx` (the sub-queue a receive came for).

/// Operation of one work request.
pub type umq_opcode_t = u32;
pub const UMQ_OPC_WRITE: umq_opcode_t = 0x00;
pub const UMQ_OPC_WRITE_IMM: umq_opcode_t = 0x01;
pub const UMQ_OPC_READ: umq_opcode_t = 0x10;
pub const UMQ_OPC_SEND: umq_opcode_t = 0x40;
pub const UMQ_OPC_SEND_IMM: umq_opcode_t = 0x41;
pub const UMQ_OPC_NOP: umq_opcode_t = 0x51;
pub const UMQ_OPC_LAST: umq_opcode_t = 0x52;

#[cfg(cbindgen)]
#[repr(C)]
pub struct umq_opcode_flag_bs_t {
    /// cbindgen:bitfield=2
    pub place_order: u32,
    /// cbindgen:bitfield=1
    pub comp_order: u32,
    /// cbindgen:bitfield=1
    pub fence: u32,
    /// cbindgen:bitfield=1
    pub solicited_enable: u32,
    /// cbindgen:bitfield=1
    pub complete_enable: u32,
    /// cbindgen:bitfield=1
    pub inline_flag: u32,
    /// cbindgen:bitfield=25
    pub reserved: u32,
}

/// Work-request flags: `value` as a whole or the bit fields of `bs`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union umq_opcode_flag_t {
    #[cfg(cbindgen)]
    pub bs: umq_opcode_flag_bs_t,
    pub value: u32,
}

/// A remote memory reference for WRITE / READ: an address inside a buffer the peer exposed,
/// with that buffer's token.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_ref_sge {
    pub addr: u64,
    pub length: u32,
    #[cfg(not(cbindgen))]
    pub bits_12: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=20
    pub token_id: u32,
    #[cfg(cbindgen)]
    /// cbindgen:bitfield=12
    pub mempool_id: u32,
    pub token_value: u32,
    pub rsvd0: u32,
}

/// Per-WR data of the pro API; lives in `umq_buf_t.qbuf_ext` of the first buffer of each WR.
/// From `imm_data` on, the C layout (an anonymous union naming the 24-bit user immediate) is
/// the header's body text.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_buf_pro_t {
    pub opcode: umq_opcode_t,
    pub flag: umq_opcode_flag_t,
    pub user_ctx: u64,
    #[cfg(not(cbindgen))]
    pub imm_data: u64,
    #[cfg(not(cbindgen))]
    pub remote_sge: umq_ref_sge,
    #[cfg(not(cbindgen))]
    pub umq_ctx: u64,
    #[cfg(not(cbindgen))]
    pub rsvd1: u64,
}

const _: () =
    assert!(size_of::<umq_buf_pro_t>() == size_of::<crate::abi::pro_types::umq_buf_pro_t>());
