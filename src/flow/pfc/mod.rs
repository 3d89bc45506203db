//! Link-level PAUSE and priority flow control (flow-control system 5): the frames and one
//! link's pause machine (timers per priority, our own XOFF / XON frames, the storm watchdog),
//! both sans-IO. Carrying frames over a provider's link and the opcodes that configure it are
//! to come (`docs/DESIGN.md`, "Not yet built").

pub mod frame;
pub mod link;
