//! July 2026 structs into the December ones the queue layer takes, and back.

use crate::abi::types as dec;
use crate::abi::v2026::types::*;
use crate::error::{UmqResult, einval};

/// The December view of a device assignment, a device name resolved to the address of its EID
/// (`devices`); None for `UMQ_DEV_ASSIGN_MODE_DUMMY`, which names no device.
pub fn dev_assign(func: &str, d: &umq_dev_assign_t) -> UmqResult<Option<dec::umq_dev_assign_t>> {
    let mut out = dec::umq_dev_assign_t {
        assign_mode: d.assign_mode,
        u: d.u,
    };
    match d.assign_mode {
        UMQ_DEV_ASSIGN_MODE_DUMMY => return Ok(None),
        UMQ_DEV_ASSIGN_MODE_DEV => {
            let (name, index) = unsafe { (&d.u.dev.dev_name, d.u.dev.eid_idx) };
            let name = c_name(func, name)?;
            let device = crate::devices::find(name)
                .ok_or_else(|| einval(func, format_args!("no device '{name}' on this host")))?;
            let eid = *device.eids.get(index as usize).ok_or_else(|| {
                einval(
                    func,
                    format_args!(
                        "device '{name}' has {} EIDs, no index {index}",
                        device.eids.len()
                    ),
                )
            })?;
            out.assign_mode = dec::UMQ_DEV_ASSIGN_MODE_EID;
            out.u.eid = dec::umq_dev_eid_t {
                eid: dec::umq_eid_t { raw: eid },
            };
        }
        _ => crate::queue::config::check_dev_assign(func, &out)?,
    }
    Ok(Some(out))
}

/// The knobs of the July 2026 credit flow control (`bool` fields read as bytes: a C caller may
/// store any value there).
pub fn credit_knobs(c: &umq_init_cfg_t) -> crate::flow::credit::Knobs {
    let f = &c.flow_control;
    let limited = unsafe { *(&f.is_limited as *const bool as *const u8) };
    crate::flow::credit::Knobs {
        initial_credit: f.initial_credit,
        max_credits_request: f.max_credits_request,
        credit_multiple: f.credit_multiple,
        return_ratio: f.return_ratio,
        min_reserved_credit: f.min_reserved_credit,
        timeout_ms: f.timeout_ms,
        is_limited: limited != 0,
        fc_req_timeout_ms: f.fc_req_timeout_ms,
    }
}

/// A device name: text that ends inside its 64 bytes.
pub fn c_name<'a>(func: &str, name: &'a [core::ffi::c_char]) -> UmqResult<&'a str> {
    let raw = unsafe { std::slice::from_raw_parts(name.as_ptr() as *const u8, name.len()) };
    std::ffi::CStr::from_bytes_until_nul(raw)
        .ok()
        .and_then(|s| s.to_str().ok())
        .ok_or_else(|| einval(func, format_args!("device name is not NUL-terminated text")))
}

/// The December `umq_init_cfg_t` of a July 2026 one (boxed: it is 12 KiB). Entries naming no
/// device are dropped, as the reference drops them; credits map onto the receive window
/// (`initial_credit` is its initial size); block sizes shift by one (the December sizes start
/// at 8 KiB, so 4 KiB blocks are served as 8 KiB ones).
pub fn init_cfg(c: &umq_init_cfg_t) -> UmqResult<Box<dec::umq_init_cfg_t>> {
    const F: &str = "umq_init";
    if c.trans_info_num as u32 > MAX_UMQ_TRANS_INFO_NUM {
        return Err(einval(
            F,
            format_args!("trans_info_num {} > 128", c.trans_info_num),
        ));
    }
    if c.buf_pool_cfg.small_block_size >= BLOCK_SIZE_MAX {
        return Err(einval(
            F,
            format_args!(
                "buf_pool_cfg.small_block_size {} out of range",
                c.buf_pool_cfg.small_block_size
            ),
        ));
    }
    let mut out: Box<dec::umq_init_cfg_t> = Box::new(unsafe { std::mem::zeroed() });
    out.buf_mode = c.buf_mode;
    out.feature = c.feature & !UMQ_FEATURE_ENABLE_REMOTE_MEM_ACCESS;
    out.headroom_size = c.headroom_size;
    out.io_lock_free = c.bits_10 & 1 != 0;
    out.block_cfg.small_block_size = c.buf_pool_cfg.small_block_size.saturating_sub(1);
    out.flow_control.initial_window = c.flow_control.initial_credit;
    // Read as a byte: a C caller may store any value in a bool field.
    let atomic = unsafe { *(&c.flow_control.use_atomic_window as *const bool as *const u8) };
    out.flow_control.use_atomic_window = atomic != 0;
    let mut n = 0;
    for t in &c.trans_info[..c.trans_info_num as usize] {
        if let Some(dev_info) = dev_assign(F, &t.dev_info)? {
            out.trans_info[n] = dec::umq_trans_info_t {
                trans_mode: t.trans_mode,
                dev_info,
                mem_cfg: dec::umq_memory_cfg_t::default(),
            };
            n += 1;
        }
    }
    out.trans_info_num = n as u8;
    Ok(out)
}

/// The receive queue a July 2026 create option asks for, checked as the reference checks the
/// flags: `SHARE_RQ` and `SUB_UMQ` go together (with `share_rq_umqh`), and a main queue is not
/// a sub-queue.
fn share_of(o: &umq_create_option_t) -> UmqResult<crate::queue::config::RqShare> {
    use crate::queue::config::RqShare;
    let flag = |f: u32| o.create_flag & f != 0;
    // A logic queue shares the main queue's receive queue (and transport) without the
    // sub-queue flag.
    let logic = flag(UMQ_CREATE_FLAG_SHARE_TRANSPORT) && !flag(UMQ_CREATE_FLAG_MAIN_UMQ);
    match (
        flag(UMQ_CREATE_FLAG_MAIN_UMQ),
        flag(UMQ_CREATE_FLAG_SHARE_RQ),
        flag(UMQ_CREATE_FLAG_SUB_UMQ) || logic,
    ) {
        (false, false, false) => Ok(RqShare::Own),
        (true, false, false) => Ok(RqShare::Main),
        (false, true, true) if o.share_rq_umqh != 0 => Ok(RqShare::Sub(o.share_rq_umqh)),
        (false, true, true) => Err(einval(
            "umq_create",
            format_args!("UMQ_CREATE_FLAG_SHARE_RQ with share_rq_umqh 0"),
        )),
        (true, _, true) => Err(einval(
            "umq_create",
            format_args!("UMQ_CREATE_FLAG_MAIN_UMQ and UMQ_CREATE_FLAG_SUB_UMQ conflict"),
        )),
        _ => Err(einval(
            "umq_create",
            format_args!(
                "create_flag {:#x}: UMQ_CREATE_FLAG_SHARE_RQ and UMQ_CREATE_FLAG_SUB_UMQ go together",
                o.create_flag
            ),
        )),
    }
}

/// `UMQ_CREATE_FLAG_SHARE_TRANSPORT` as the reference allows it: on a main queue (which makes
/// the resources) or on a queue that shares a receive queue (a logic queue, or a sub-queue),
/// and only in RM mode, the default.
fn check_share_transport(o: &umq_create_option_t) -> UmqResult<()> {
    let flag = |f: u32| o.create_flag & f != 0;
    if !flag(UMQ_CREATE_FLAG_SHARE_TRANSPORT) {
        return Ok(());
    }
    if !flag(UMQ_CREATE_FLAG_MAIN_UMQ) && !flag(UMQ_CREATE_FLAG_SHARE_RQ) {
        return Err(einval(
            "umq_create",
            format_args!(
                "create_flag {:#x}: UMQ_CREATE_FLAG_SHARE_TRANSPORT needs UMQ_CREATE_FLAG_MAIN_UMQ or UMQ_CREATE_FLAG_SHARE_RQ",
                o.create_flag
            ),
        ));
    }
    if flag(UMQ_CREATE_FLAG_TP_MODE) && o.tp_mode != UMQ_TM_RM {
        return Err(einval(
            "umq_create",
            format_args!(
                "tp_mode {}: UMQ_CREATE_FLAG_SHARE_TRANSPORT needs UMQ_TM_RM",
                o.tp_mode
            ),
        ));
    }
    Ok(())
}

/// The December create option of a July 2026 one, and what the queue keeps to report back.
pub fn create_option(
    o: &umq_create_option_t,
) -> UmqResult<(dec::umq_create_option_t, crate::queue::config::CreateExtras)> {
    const F: &str = "umq_create";
    check_share_transport(o)?;
    let share = share_of(o)?;
    if o.create_flag >= UMQ_CREATE_FLAG_SHARE_TRANSPORT << 1 {
        return Err(einval(
            F,
            format_args!("unknown create_flag bits {:#x}", o.create_flag),
        ));
    }
    let flag = |f: u32| o.create_flag & f != 0;
    if flag(UMQ_CREATE_FLAG_TP_MODE) && o.tp_mode >= UMQ_TM_MAX
        || flag(UMQ_CREATE_FLAG_TP_TYPE) && o.tp_type >= UMQ_TP_TYPE_MAX
    {
        return Err(einval(
            F,
            format_args!(
                "tp_mode {} or tp_type {} out of range",
                o.tp_mode, o.tp_type
            ),
        ));
    }
    let dev_info = dev_assign(F, &o.dev_info)?.unwrap_or(dec::umq_dev_assign_t {
        assign_mode: dec::UMQ_DEV_ASSIGN_MODE_EID,
        u: dec::umq_dev_addr_t {
            eid: dec::umq_dev_eid_t {
                eid: dec::umq_eid_t { raw: [0; 16] },
            },
        },
    });
    let served = dec::UMQ_CREATE_FLAG_RX_BUF_SIZE
        | dec::UMQ_CREATE_FLAG_TX_BUF_SIZE
        | dec::UMQ_CREATE_FLAG_RX_DEPTH
        | dec::UMQ_CREATE_FLAG_TX_DEPTH
        | dec::UMQ_CREATE_FLAG_QUEUE_MODE;
    let option = dec::umq_create_option_t {
        trans_mode: o.trans_mode,
        dev_info,
        name: o.name,
        create_flag: o.create_flag & served,
        rx_buf_size: o.rx_buf_size,
        tx_buf_size: o.tx_buf_size,
        rx_depth: o.rx_depth,
        tx_depth: o.tx_depth,
        mode: o.mode,
    };
    let extras = crate::queue::config::CreateExtras {
        create_flag: o.create_flag,
        umq_ctx: if flag(UMQ_CREATE_FLAG_UMQ_CTX) {
            o.umq_ctx
        } else {
            0
        },
        tp_mode: if flag(UMQ_CREATE_FLAG_TP_MODE) {
            o.tp_mode
        } else {
            UMQ_TM_RM // the reference's default
        },
        tp_type: if flag(UMQ_CREATE_FLAG_TP_TYPE) {
            o.tp_type
        } else {
            UMQ_TP_TYPE_RTP
        },
        share,
        priority: if flag(UMQ_CREATE_FLAG_PRIORITY) {
            o.priority
        } else {
            0
        },
    };
    Ok((option, extras))
}

/// The December trans info of a July 2026 one (a device name resolved).
pub fn trans_info(func: &str, t: &umq_trans_info_t) -> UmqResult<dec::umq_trans_info_t> {
    if t.trans_mode >= UMQ_TRANS_MODE_MAX {
        return Err(einval(
            func,
            format_args!("trans_mode {} out of range", t.trans_mode),
        ));
    }
    let dev_info = dev_assign(func, &t.dev_info)?
        .ok_or_else(|| einval(func, format_args!("a DUMMY device names no device")))?;
    Ok(dec::umq_trans_info_t {
        trans_mode: t.trans_mode,
        dev_info,
        mem_cfg: dec::umq_memory_cfg_t::default(),
    })
}

/// A queue-layer async event as the July 2026 revision lays it out and numbers its types.
pub fn async_event(e: &dec::umq_async_event_t) -> umq_async_event_t {
    let event_type = match e.event_type {
        dec::UMQ_EVENT_QH_ERR => UMQ_EVENT_QH_ERR,
        dec::UMQ_EVENT_QH_LIMIT => UMQ_EVENT_QH_LIMIT,
        // The July revision put four queue events between QH_LIMIT and PORT_ACTIVE: the rest
        // keep their order, four further on.
        t @ dec::UMQ_EVENT_PORT_ACTIVE..=dec::UMQ_EVENT_OTHER => {
            t - dec::UMQ_EVENT_PORT_ACTIVE + UMQ_EVENT_PORT_ACTIVE
        }
        _ => UMQ_EVENT_OTHER,
    };
    umq_async_event_t {
        trans_info: umq_trans_info_t {
            trans_mode: e.trans_info.trans_mode,
            dev_info: umq_dev_assign_t {
                assign_mode: e.trans_info.dev_info.assign_mode,
                u: e.trans_info.dev_info.u,
            },
        },
        // The union's widest member carries all of it.
        element: umq_async_event_element_t {
            umqh: unsafe { e.element.umqh },
        },
        event_type,
        original_code: e.original_code,
        r#priv: e.r#priv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn async_event_types_keep_their_names_across_the_revisions() {
        let pairs = [
            (dec::UMQ_EVENT_QH_ERR, UMQ_EVENT_QH_ERR),
            (dec::UMQ_EVENT_QH_LIMIT, UMQ_EVENT_QH_LIMIT),
            (dec::UMQ_EVENT_PORT_ACTIVE, UMQ_EVENT_PORT_ACTIVE),
            (dec::UMQ_EVENT_PORT_DOWN, UMQ_EVENT_PORT_DOWN),
            (dec::UMQ_EVENT_DEV_FATAL, UMQ_EVENT_DEV_FATAL),
            (dec::UMQ_EVENT_EID_CHANGE, UMQ_EVENT_EID_CHANGE),
            (dec::UMQ_EVENT_ELR_ERR, UMQ_EVENT_ELR_ERR),
            (dec::UMQ_EVENT_ELR_DONE, UMQ_EVENT_ELR_DONE),
            (dec::UMQ_EVENT_OTHER, UMQ_EVENT_OTHER),
            (dec::UMQ_EVENT_OTHER + 1, UMQ_EVENT_OTHER),
        ];
        for (december, july) in pairs {
            let e = dec::umq_async_event_t {
                event_type: december,
                ..unsafe { std::mem::zeroed() }
            };
            assert_eq!(async_event(&e).event_type, july, "December type {december}");
        }
    }
}
