//! Exports of the July 2026 `umq_pro_api.h` whose ABI differs from December's, and its new one.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

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
        crate::ffi::pro_api::post(umqh, qbuf.cast(), o.io_direction, bad_qbuf.cast())
    })
}

/// Polls completions (`option->io_direction`; `UMQ_IO_ALL` needs room for at least two, as in
/// the reference). A buffer that tells of a credit update has status `UMQ_FAKE_BUF_FC_UPDATE`
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
        let n = crate::ffi::pro_api::poll(umqh, o.io_direction, buf.cast(), max_buf_count);
        for i in 0..n.max(0) as usize {
            let b = unsafe { &mut **(buf as *mut *mut crate::abi::types::umq_buf_t).add(i) };
            if b.status() == UMQ_BUF_FLOW_CONTROL_UPDATE {
                b.set_status(UMQ_FAKE_BUF_FC_UPDATE);
            }
        }
        n
    })
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
                fds.fd[fds.fd_num as usize] = q.interrupt_fd(Some(&option))?;
                fds.fd_num += 1;
            }
            *list = fds;
            Ok(UMQ_SUCCESS)
        })
        .unwrap_or_else(|e| e)
    })
}
