//! The July 2026 revision of the UMQ ABI (`--features abi-2026` exports it): the structs and
//! constants of its headers, one file per header. Its per-WR type (`pro_types`) has the
//! December storage, so the queue layer's `umq_buf_pro_t` serves both revisions.

#![allow(non_camel_case_types, non_upper_case_globals)]

pub mod dfx_types;
pub mod errno;
pub mod pro_types;
pub mod types;
