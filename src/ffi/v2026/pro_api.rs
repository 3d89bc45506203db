//! Exports of the July 2026 `umq_pro_api.h` whose ABI differs from December's, and its new one.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use crate::abi::pro_types::UMQ_OPC_SEND_IMM;
use crate::abi::v2026::dfx_types::*;
use crate::abi::v2026::errno::*;
use crate::abi::v2026::types::*;
use crate::error::einval;
use crate::ffi::{checked, ffi_guard};
use crate::queue::with_queue;
use std::ffi::c_int;

/// Posts TX WRs or receive buffers (`option->io_direction`, read whatever `option->flag`
/// says, as the reference reads it), up to 256 per call; otherwise as the December `umq_post`.
/// `option` and `bad_qbuf` are required (`-UMQ_ERR_EINVAL`).
#[unsafe(no_mangle)]
pub extern "C" fn umq_post(
    umqh: u64,
    qbuf: *mut umq_buf_t,
    option: *mut umq_io_option_t,
    bad_qbuf: *mut *mut umq_buf_t,
) -> c_int {
    ffi_guard!("umq_post", {
        let Some(o) = checked(option).filter(|_| !bad_qbuf.is_null()) else {
            return einval("umq_post", format_args!("option or bad_qbuf is NULL"));
        };
        let traced = o.io_direction == UMQ_IO_TX && has_user_imm(qbuf);
        if traced {
            super::dfx_api::io_perf(UMQ_PERF_RECORD_TRANSPORT_POST_SEND, qbuf);
        }
        let r = crate::ffi::pro_api::post(umqh, qbuf.cast(), o.io_direction, bad_qbuf.cast());
        if traced && r == -UMQ_ERR_EAGAIN {
            super::dfx_api::io_perf(UMQ_PERF_RECORD_TRANSPORT_POST_SEND_EAGAIN, qbuf);
        }
        r
    })
}

/// Polls completions (`option->io_direction`; `UMQ_IO_ALL` needs room for at least two, as in
/// the reference). With `UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX`, a main queue that shares its
/// transport polls the send completions of the transport resource `option->tp_handle_idx`. A buffer that tells of a credit update has status `UMQ_FAKE_BUF_FC_UPDATE`
/// in this revision; the application frees it.
#[unsafe(no_mangle)]
pub extern "C" fn umq_poll(
    umqh: u64,
    option: *mut umq_io_option_t,
    buf: *mut *mut umq_buf_t,
    max_buf_count: u32,
) -> c_int {
    ffi_guard!("umq_poll", {
        let Some(o) = checked(option) else {
            return einval("umq_poll", format_args!("option is NULL"));
        };
        if o.io_direction == UMQ_IO_ALL && max_buf_count == 1 {
            return einval(
                "umq_poll",
                format_args!("polling TX and RX needs room for two buffers"),
            );
        }
        let n = if o.flag & UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX != 0 {
            crate::ffi::pro_api::poll_pooled(
                umqh,
                o.io_direction,
                o.tp_handle_idx,
                buf.cast(),
                max_buf_count,
            )
        } else {
            crate::ffi::pro_api::poll(umqh, o.io_direction, buf.cast(), max_buf_count)
        };
        let traced = super::dfx_api::io_perf_registered();
        for i in 0..n.max(0) as usize {
            let b = unsafe { &mut **(buf as *mut *mut crate::abi::types::umq_buf_t).add(i) };
            if b.status() == UMQ_BUF_FLOW_CONTROL_UPDATE {
                b.set_status(UMQ_FAKE_BUF_FC_UPDATE);
            }
            let received_imm = b.io_direction() == UMQ_IO_RX && b.pro().opcode == UMQ_OPC_SEND_IMM;
            if traced && received_imm {
                super::dfx_api::io_perf(
                    UMQ_PERF_RECORD_TRANSPORT_POLL_RX,
                    (b as *mut crate::abi::types::umq_buf_t).cast(),
                );
            }
        }
        n
    })
}

/// Whether a TX list holds a SEND_IMM, only looked for while an I/O perf callback is
/// registered. WRs end where their first buffer's `total_data_size` says; a list that does not
/// add up stops the walk (the post refuses it anyway).
fn has_user_imm(qbuf: *mut umq_buf_t) -> bool {
    if !super::dfx_api::io_perf_registered() {
        return false;
    }
    let mut head = qbuf as *mut crate::abi::types::umq_buf_t;
    for _ in 0..crate::limits::BATCH {
        let Some(h) = (unsafe { head.as_ref() }) else {
            return false;
        };
        if h.pro().opcode == UMQ_OPC_SEND_IMM {
            return true;
        }
        let (mut left, mut cur) = (h.total_data_size as u64, head);
        for _ in 0..crate::limits::MAX_SGE {
            let Some(b) = (unsafe { cur.as_ref() }) else {
                return false;
            };
            left = left.saturating_sub(b.data_size as u64);
            cur = b.qbuf_next;
            if left == 0 {
                break;
            }
        }
        head = cur;
    }
    false
}

/// The fds of a queue's completion channels: for `UMQ_IO_ALL` the TX and the RX channel, else
/// the one `option->direction` names. `-UMQ_ERR_EINVAL` for a polling-mode queue.
#[unsafe(no_mangle)]
pub extern "C" fn umq_interrupt_fd_list_get(
    umqh: u64,
    option: *mut umq_interrupt_option_t,
    fd_list: *mut umq_interrupt_fd_list_t,
) -> c_int {
    ffi_guard!("umq_interrupt_fd_list_get", {
        let (Some(o), Some(list)) = (checked(option), crate::ffi::checked_mut(fd_list)) else {
            return einval(
                "umq_interrupt_fd_list_get",
                format_args!("option or fd_list is NULL"),
            );
        };
        let both = [UMQ_IO_TX, UMQ_IO_RX];
        let one = [o.direction];
        let dirs: &[u32] = if o.direction == UMQ_IO_ALL {
            &both
        } else {
            &one
        };
        with_queue("umq_interrupt_fd_list_get", umqh, |q| {
            let mut fds = umq_interrupt_fd_list_t::default();
            for &d in dirs {
                let option = crate::abi::types::umq_interrupt_option_t {
                    flag: crate::abi::types::UMQ_INTERRUPT_FLAG_IO_DIRECTION,
                    direction: d,
                };
                let tp =
                    (o.flag & UMQ_INTERRUPT_FLAG_TP_HANDLE_IDX != 0).then_some(o.tp_handle_idx);
                fds.fd[fds.fd_num as usize] = q.interrupt_fd(Some(&option), tp)?;
                fds.fd_num += 1;
            }
            *list = fds;
            Ok(UMQ_SUCCESS)
        })
        .unwrap_or_else(|e| e)
    })
}
