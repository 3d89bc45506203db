//! The July 2026 revision of the UMQ ABI (`--features abi-2026` exports it): the structs and
//! constants of its headers, one file per header. The per-WR type of `umq_pro_types.h` has the
//! December storage (its last reserved word is named `umq_ctx`), so the queue layer's
//! `umq_buf_pro_t` serves both.

#![allow(non_camel_case_types, non_upper_case_globals)]

pub mod dfx_types;
pub mod errno;
pub mod types;
