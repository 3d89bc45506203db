//! libumq: the UMQ message-queue C API, implemented in Rust.
//!
//! Layers, top down: `ffi` (the `extern "C"` functions), `abi` (the C types), `queue` (lifecycle,
//! post / poll, base API, interrupts), `buf` (pools), `transport` (how WRs reach the peer), plus
//! process-wide `runtime`, `log`, `event` and `dfx`. See docs/DESIGN.md.

// The modules are public for the library's own binaries and tests, not as a Rust API. Their
// functions take buffer pointers the way the C API does, after the `extern "C"` entry points
// checked them (`ffi::checked`, `ffi::need`), so they are not marked `unsafe` one by one.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

pub mod abi;
pub mod app_sync;
pub mod buf;
pub mod devices;
pub mod dfx;
#[cfg(any(test, feature = "fuzzing"))]
pub mod draw;
pub mod error;
pub mod event;
pub mod ffi;
pub mod flow;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod hazard;
pub mod info;
pub mod lifecycle;
pub mod limits;
pub mod os;
pub mod process;
#[macro_use]
pub mod log;
pub mod queue;
pub mod runtime;
pub mod trace;
pub mod transport;
