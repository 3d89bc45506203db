//! `#[repr(C)]` mirrors of the public C types, one file per public header.

#![allow(non_camel_case_types, non_upper_case_globals)]

pub mod errno;
pub mod ext;
pub mod pro_types;
pub mod types;
pub mod v2026;

use pro_types::umq_buf_pro_t;
use types::umq_buf_t;

/// Accessors for the bit fields of `umq_buf_t` (gcc x86-64 allocation, low bits first).
impl umq_buf_t {
    pub fn first_fragment(&self) -> bool {
        self.bits_30 & 1 != 0
    }
    pub fn set_first_fragment(&mut self, on: bool) {
        self.bits_30 = (self.bits_30 & !1) | on as u16;
    }
    pub fn token_id(&self) -> u32 {
        self.bits_32 & 0xf_ffff
    }
    pub fn mempool_id(&self) -> u32 {
        self.bits_32 >> 24
    }
    pub fn set_token(&mut self, token_id: u32, mempool_id: u8) {
        self.bits_32 = (token_id & 0xf_ffff) | (mempool_id as u32) << 24;
    }
    pub fn status(&self) -> u32 {
        self.bits_40 as u32
    }
    pub fn set_status(&mut self, status: u32) {
        self.bits_40 = (self.bits_40 & !0xffff_ffff) | status as u64;
    }
    pub fn io_direction(&self) -> u32 {
        ((self.bits_40 >> 32) & 3) as u32
    }
    pub fn set_io_direction(&mut self, dir: u32) {
        self.bits_40 = (self.bits_40 & !(3 << 32)) | ((dir as u64 & 3) << 32);
    }
    /// Sets status and io direction together: they share one word, so one write instead of two
    /// read-modify-writes on the hot paths.
    pub fn set_status_and_direction(&mut self, status: u32, dir: u32) {
        self.bits_40 = (self.bits_40 & !0x3_ffff_ffff) | status as u64 | ((dir as u64 & 3) << 32);
    }
    /// The pro-API view of `qbuf_ext`.
    pub fn pro(&self) -> &umq_buf_pro_t {
        // qbuf_ext is 64 bytes with 8-byte alignment, exactly umq_buf_pro_t's size and alignment.
        unsafe { &*(self.qbuf_ext.as_ptr() as *const umq_buf_pro_t) }
    }
    pub fn pro_mut(&mut self) -> &mut umq_buf_pro_t {
        unsafe { &mut *(self.qbuf_ext.as_mut_ptr() as *mut umq_buf_pro_t) }
    }
}

const _: () = {
    assert!(size_of::<umq_buf_t>() == 128);
    assert!(size_of::<umq_buf_pro_t>() == 64);
    assert!(size_of::<types::umq_init_cfg_t>() == 12320);
    assert!(size_of::<types::umq_create_option_t>() == 144);
};
