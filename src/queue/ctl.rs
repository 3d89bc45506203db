//! `umq_user_ctl` operations.

use super::Queue;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};

pub fn user_ctl(q: &Queue, input: &umq_user_ctl_in_t, out: &umq_user_ctl_out_t) -> UmqResult<()> {
    const F: &str = "umq_user_ctl";
    match input.opcode {
        UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY => {
            if out.addr == 0 || out.len as usize != size_of::<umq_flowcontrol_stats_t>() {
                return Err(einval(
                    F,
                    format_args!(
                        "out.addr NULL or out.len {} != sizeof(umq_flowcontrol_stats_t)",
                        out.len
                    ),
                ));
            }
            if !(out.addr as usize).is_multiple_of(align_of::<umq_flowcontrol_stats_t>()) {
                return Err(einval(F, format_args!("out.addr is misaligned")));
            }
            let stats = q.flow_control_stats();
            unsafe { *(out.addr as *mut umq_flowcontrol_stats_t) = stats };
            Ok(())
        }
        op => Err(einval(F, format_args!("unknown opcode {op}"))),
    }
}

impl Queue {
    /// All zero until flow control is implemented (the window machinery fills them).
    pub fn flow_control_stats(&self) -> umq_flowcontrol_stats_t {
        umq_flowcontrol_stats_t::default()
    }
}
