//! Link-level PAUSE and priority flow control (flow-control system 5): the frames and one
//! link's pause machine (timers per priority, our own XOFF / XON frames, the storm watchdog),
//! both sans-IO. `transport::pause` shares a machine between the queues bound to one peer
//! process and carries its frames; `docs/PFC.md` tells the whole.

pub mod frame;
pub mod link;
