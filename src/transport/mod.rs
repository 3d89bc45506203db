//! Transports move work requests between two bound queues. Only the in-process loopback exists so
//! far; it is what a bind between two queues of one process uses.

pub mod loopback;
