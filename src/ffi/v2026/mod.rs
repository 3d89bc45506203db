//! The July 2026 revision's entry points (`--features abi-2026`), in place of the December
//! ones whose ABI changed. Each reads its revision's structs, turns them into what the queue
//! layer takes (the December structs are its vocabulary), and calls the same core; what the
//! application reads back in buffers is written in this revision's terms (`pro_api::poll`).
//! The entry points the two revisions share are in `ffi::api` and `ffi::pro_api`.

pub mod api;
pub mod convert;
pub mod dfx_api;
pub mod pro_api;
