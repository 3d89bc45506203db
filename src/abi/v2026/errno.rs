//! `umq_errno.h` of the July 2026 revision: the December codes and statuses, plus these.

pub use crate::abi::errno::*;

pub const UMQ_ERR_ENOSR: i32 = 63;
pub const UMQ_ERR_EFAULT: i32 = 14;
pub const UMQ_ERR_EMLINK: i32 = 31;
pub const UMQ_ERR_ENOBUFS: i32 = 105;
pub const UMQ_ERR_ETIMEOUT: i32 = 110;
pub const UMQ_ERR_EINPROGRESS: i32 = 115;
pub const UMQ_ERR_ETOOMANYREFS: i32 = 109;
pub const UMQ_ERR_ETSEG_NON_IMPORTED: i32 = 0x0201;
pub const UMQ_ERR_EFLOWCTL: i32 = 0x0202;
pub const UMQ_ERR_EFLOWCTL_FATAL: i32 = 0x0203;

pub const UMQ_MEMPOOL_UPDATE_SUCCESS: umq_buf_status_t = 129;
pub const UMQ_MEMPOOL_UPDATE_FAILED: umq_buf_status_t = 130;
pub const UMQ_IMPORT_TSEG_SUCCESS: umq_buf_status_t = 131;
pub const UMQ_IMPORT_TSEG_FAILED: umq_buf_status_t = 132;
/// A buffer of the library's that says the credit window grew; the application frees it.
pub const UMQ_FAKE_BUF_FC_UPDATE: umq_buf_status_t = 192;
pub const UMQ_FAKE_BUF_FC_MSG: umq_buf_status_t = 193;
pub const UMQ_FAKE_BUF_FC_ERR: umq_buf_status_t = 194;
pub const UMQ_FAKE_BUF_FC_EMLINK: umq_buf_status_t = 195;
pub const UMQ_FAKE_BUF_FC_ERR_FATAL: umq_buf_status_t = 196;
pub const UMQ_FAKE_BUF_MAX: umq_buf_status_t = 256;
