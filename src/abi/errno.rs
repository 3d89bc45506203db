//! `umq_errno.h`: return codes and completion status values.
//!
//! Functions return `0` or a negated `UMQ_ERR_*` (Linux errno values); completed buffers carry a
//! `umq_buf_status_t` in `umq_buf_t.status`.

/// Completion status of a buffer (`umq_buf_t.status`). Everything except `UMQ_BUF_SUCCESS` and
/// `UMQ_BUF_FLOW_CONTROL_UPDATE` is an error.
pub type umq_buf_status_t = u32;
pub const UMQ_BUF_SUCCESS: umq_buf_status_t = 0;
pub const UMQ_BUF_UNSUPPORTED_OPCODE_ERR: umq_buf_status_t = 1;
pub const UMQ_BUF_LOC_LEN_ERR: umq_buf_status_t = 2;
pub const UMQ_BUF_LOC_OPERATION_ERR: umq_buf_status_t = 3;
pub const UMQ_BUF_LOC_ACCESS_ERR: umq_buf_status_t = 4;
pub const UMQ_BUF_REM_RESP_LEN_ERR: umq_buf_status_t = 5;
pub const UMQ_BUF_REM_UNSUPPORTED_REQ_ERR: umq_buf_status_t = 6;
pub const UMQ_BUF_REM_OPERATION_ERR: umq_buf_status_t = 7;
pub const UMQ_BUF_REM_ACCESS_ABORT_ERR: umq_buf_status_t = 8;
pub const UMQ_BUF_ACK_TIMEOUT_ERR: umq_buf_status_t = 9;
pub const UMQ_BUF_RNR_RETRY_CNT_EXC_ERR: umq_buf_status_t = 10;
pub const UMQ_BUF_WR_FLUSH_ERR: umq_buf_status_t = 11;
pub const UMQ_BUF_WR_SUSPEND_DONE: umq_buf_status_t = 12;
pub const UMQ_BUF_WR_FLUSH_ERR_DONE: umq_buf_status_t = 13;
pub const UMQ_BUF_WR_UNHANDLED: umq_buf_status_t = 14;
pub const UMQ_BUF_LOC_DATA_POISON: umq_buf_status_t = 15;
pub const UMQ_BUF_REM_DATA_POISON: umq_buf_status_t = 16;
/// Not an error: the buffer carried a flow-control window update.
pub const UMQ_BUF_FLOW_CONTROL_UPDATE: umq_buf_status_t = 128;

pub const UMQ_SUCCESS: i32 = 0;
pub const UMQ_FAIL: i32 = -1;
pub const UMQ_INVALID_HANDLE: u64 = 0;
pub const UMQ_INVALID_FD: i32 = -1;
pub const UMQ_ERR_EPERM: i32 = 1;
pub const UMQ_ERR_EAGAIN: i32 = 11;
pub const UMQ_ERR_ENOMEM: i32 = 12;
pub const UMQ_ERR_EBUSY: i32 = 16;
pub const UMQ_ERR_EEXIST: i32 = 17;
pub const UMQ_ERR_EINVAL: i32 = 22;
pub const UMQ_ERR_ENODEV: i32 = 19;
