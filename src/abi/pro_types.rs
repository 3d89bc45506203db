//! `umq_pro_types.h`: per-WR data of the pro API, kept inside `umq_buf_t.qbuf_ext`.

/// Operation of one work request. Only SEND, SEND_IMM and WRITE_IMM consume a receive buffer at
/// the peer; WRITE and READ address peer memory through `umq_buf_pro_t.remote_sge`.
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
    pub value: u32,
    #[cfg(cbindgen)]
    pub bs: umq_opcode_flag_bs_t,
}

/// A remote memory reference for WRITE / READ: an address inside a buffer the peer exposed, with
/// that buffer's `token_id` and `token_value` (see `docs/USER_GUIDE.md`, "Remote memory access").
#[repr(C)]
#[derive(Clone, Copy, Default, Debug)]
pub struct umq_ref_sge_t {
    pub addr: u64,
    pub length: u32,
    pub token_id: u32,
    pub token_value: u32,
    pub rsvd0: u32,
}

/// Per-WR data of the pro API; lives in `umq_buf_t.qbuf_ext` of the first buffer of each WR.
/// `user_ctx` comes back unchanged with the completion.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct umq_buf_pro_t {
    pub opcode: umq_opcode_t,
    pub flag: umq_opcode_flag_t,
    pub user_ctx: u64,
    pub imm_data: u64,
    pub remote_sge: umq_ref_sge_t,
    pub rsvd1: [u64; 2],
}
