//! The library's own limits, which every layer sees (the UMQ ABI's are in `abi`).

/// Most buffers one WR may gather.
pub const MAX_SGE: usize = 64;
/// Deepest send or receive queue a queue may be created with.
pub const MAX_DEPTH: u32 = 32768;
/// The largest message a WR carries (`total_data_size` is 32 bits).
pub const MAX_MESSAGE: u64 = u32::MAX as u64;
/// Most WRs one `umq_post` accepts and most buffers one `umq_buf_alloc` returns: the
/// exported revision's `UMQ_BATCH_SIZE` (64 in December 2025, 256 in July 2026).
#[cfg(not(feature = "abi-2026"))]
pub const BATCH: u32 = crate::abi::types::UMQ_BATCH_SIZE;
#[cfg(feature = "abi-2026")]
pub const BATCH: u32 = crate::abi::v2026::types::UMQ_BATCH_SIZE;
