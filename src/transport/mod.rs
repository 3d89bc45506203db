//! Transports move work requests between two bound queues: `loopback` when both queues live in
//! one process, `shm` between processes of one host.

pub mod fifo;
pub mod loopback;
pub mod placement;
pub mod presence;
#[cfg(test)]
mod protocol_tests;
pub mod shm;
pub mod sync;
pub mod watchdog;
