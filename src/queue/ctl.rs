//! `umq_user_ctl` operations: the UMQ stats query and our flow-control extensions
//! (`include/umq/umq_ext.h`).

use super::Queue;
use crate::abi::ext::*;
use crate::abi::types::*;
use crate::error::{UmqResult, einval};
use std::sync::atomic::Ordering;

const F: &str = "umq_user_ctl";

/// Writes `value` to the caller's `out` buffer, which must be exactly its size and aligned.
pub(super) fn write_out<T>(out: &umq_user_ctl_out_t, what: &str, value: T) -> UmqResult<()> {
    if out.addr == 0 || out.len as usize != size_of::<T>() {
        return Err(einval(
            F,
            format_args!(
                "out.addr NULL or out.len {} != sizeof({what}) ({})",
                out.len,
                size_of::<T>()
            ),
        ));
    }
    if !(out.addr as usize).is_multiple_of(align_of::<T>()) {
        return Err(einval(F, format_args!("out.addr is misaligned")));
    }
    unsafe { *(out.addr as *mut T) = value };
    Ok(())
}

/// The transport statistics into `out`: the whole struct, or the first 96 bytes a caller
/// built against the header before `one_sided_rma_wr` passes.
fn write_transport_stats(
    out: &umq_user_ctl_out_t,
    stats: umq_ext_transport_stats_t,
) -> UmqResult<()> {
    if out.len as usize != TRANSPORT_STATS_V1_LEN {
        return write_out(out, "umq_ext_transport_stats_t", stats);
    }
    if out.addr == 0 || !(out.addr as usize).is_multiple_of(align_of::<u64>()) {
        return Err(einval(F, format_args!("out.addr NULL or misaligned")));
    }
    // SAFETY: the caller gave `out.len` writable bytes at `out.addr`; the struct is plain data.
    unsafe {
        std::ptr::copy_nonoverlapping(
            &stats as *const umq_ext_transport_stats_t as *const u8,
            out.addr as *mut u8,
            TRANSPORT_STATS_V1_LEN,
        )
    };
    Ok(())
}

/// Reads a `T` the caller gave at `in.addr` (`in.len` its size).
pub(super) fn read_in<T: Copy>(input: &umq_user_ctl_in_t, what: &str) -> UmqResult<T> {
    if input.addr == 0
        || input.len as usize != size_of::<T>()
        || !(input.addr as usize).is_multiple_of(align_of::<T>())
    {
        return Err(einval(
            F,
            format_args!(
                "in.addr NULL or misaligned, or in.len {} != sizeof({what}) ({})",
                input.len,
                size_of::<T>()
            ),
        ));
    }
    Ok(unsafe { *(input.addr as *const T) })
}

pub fn user_ctl(q: &Queue, input: &umq_user_ctl_in_t, out: &umq_user_ctl_out_t) -> UmqResult<()> {
    match input.opcode {
        UMQ_OPCODE_FLOW_CONTROL_STATS_QUERY => {
            write_out(out, "umq_flowcontrol_stats_t", q.flow_control_stats())
        }
        UMQ_EXT_OPCODE_FLOW_CONTROL_EXT_STATS => {
            q.flow_progress();
            write_out(
                out,
                "umq_ext_flow_control_stats_t",
                q.flow_control_ext_stats(),
            )
        }
        UMQ_EXT_OPCODE_FLOW_CONTROL_QUEUED_MODE => {
            if input.addr > 1 {
                return Err(einval(
                    F,
                    format_args!(
                        "queued mode takes in.addr 0 (off) or 1 (on), not {}",
                        input.addr
                    ),
                ));
            }
            q.queued_mode.store(input.addr == 1, Ordering::Relaxed);
            // WRs already waiting keep their place and go out as credit arrives.
            q.flow_progress();
            Ok(())
        }
        UMQ_EXT_OPCODE_FLOW_CONTROL_STALL_TIMEOUT => {
            if input.addr == 0 {
                return Err(einval(
                    F,
                    format_args!("stall timeout must be at least 1 ms"),
                ));
            }
            q.stall_timeout_ms.store(input.addr, Ordering::Relaxed);
            Ok(())
        }
        UMQ_EXT_OPCODE_TRANSPORT_STATS => write_transport_stats(out, q.transport_stats()),
        UMQ_EXT_OPCODE_PACING_RATE => super::pacing::set_rate(q, input.addr),
        UMQ_EXT_OPCODE_PACING_PMTU => super::pacing::set_pmtu(q, input.addr),
        UMQ_EXT_OPCODE_PACING_TICK_RATE => super::pacing::set_tick_rate(input.addr),
        UMQ_EXT_OPCODE_PACING_STATS => write_out(out, "umq_ext_pacing_stats_t", q.pacing_stats()),
        UMQ_EXT_OPCODE_PFC_PRIORITY => super::pfc::set_priority(q, input.addr),
        UMQ_EXT_OPCODE_PFC_CONFIG => super::pfc::config(q, input, out),
        UMQ_EXT_OPCODE_PFC_STATS => write_out(out, "umq_ext_pfc_stats_t", super::pfc::stats(q)?),
        UMQ_EXT_OPCODE_PFC_SEND_FRAME => super::pfc::send_frame(q, input),
        UMQ_EXT_OPCODE_PFC_RECV_FRAME => super::pfc::recv_frame(q, out),
        op => Err(einval(F, format_args!("unknown opcode {op:#x}"))),
    }
}
