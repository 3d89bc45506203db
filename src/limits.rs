//! The library's own limits, which every layer sees (the UMQ ABI's are in `abi`).

/// Most buffers one WR may gather.
pub const MAX_SGE: usize = 64;
/// Deepest send or receive queue a queue may be created with.
pub const MAX_DEPTH: u32 = 32768;
