//! The Rust mirrors match the ABI table (tests/data/layout.tsv, copied from the ABI reference):
//! every struct's size and alignment, and the offset and size of every field row.

use std::mem::{align_of, offset_of, size_of};
use umq::abi::pro_types::*;
use umq::abi::types::*;

/// (struct, field) -> (offset, size) as rustc lays them out. Fields of C's anonymous unions live
/// in a named union on the Rust side (`u`, `cmd`, `input`, `out`).
fn rust_field(s: &str, f: &str) -> Option<(usize, usize)> {
    macro_rules! at {
        ($t:ty, $($p:tt).+ ; $size:expr) => { Some((offset_of!($t, $($p).+), $size)) };
    }
    Some(match (s, f) {
        ("umq_log_config_t", "log_flag") => at!(umq_log_config_t, log_flag; 4)?,
        ("umq_log_config_t", "func") => at!(umq_log_config_t, func; 8)?,
        ("umq_log_config_t", "level") => at!(umq_log_config_t, level; 4)?,
        ("umq_log_config_t", "rate_limited") => at!(umq_log_config_t, rate_limited; 8)?,
        ("umq_log_config_t", "rate_limited.interval_ms") => {
            at!(umq_log_config_t, rate_limited.interval_ms; 4)?
        }
        ("umq_log_config_t", "rate_limited.num") => at!(umq_log_config_t, rate_limited.num; 4)?,
        ("umq_interrupt_option_t", "flag") => at!(umq_interrupt_option_t, flag; 4)?,
        ("umq_interrupt_option_t", "direction") => at!(umq_interrupt_option_t, direction; 4)?,
        ("umq_eid_t", "raw" | "in4" | "in6") => (0, 16),
        ("umq_eid_t", "in4.reserved") => (offset_of!(umq_eid_in4_t, reserved), 8),
        ("umq_eid_t", "in4.prefix") => (offset_of!(umq_eid_in4_t, prefix), 4),
        ("umq_eid_t", "in4.addr") => (offset_of!(umq_eid_in4_t, addr), 4),
        ("umq_eid_t", "in6.subnet_prefix") => (offset_of!(umq_eid_in6_t, subnet_prefix), 8),
        ("umq_eid_t", "in6.interface_id") => (offset_of!(umq_eid_in6_t, interface_id), 8),
        ("umq_dev_assign_t", "assign_mode") => at!(umq_dev_assign_t, assign_mode; 4)?,
        ("umq_dev_assign_t", "ipv4.ip_addr") => {
            (offset_of!(umq_dev_assign_t, u), size_of::<umq_dev_ipv4_t>())
        }
        ("umq_dev_assign_t", "ipv6.ip_addr") => {
            (offset_of!(umq_dev_assign_t, u), size_of::<umq_dev_ipv6_t>())
        }
        ("umq_dev_assign_t", "eid.eid") => {
            (offset_of!(umq_dev_assign_t, u), size_of::<umq_eid_t>())
        }
        ("umq_dev_assign_t", "dev.dev_name") => (
            offset_of!(umq_dev_assign_t, u) + offset_of!(umq_dev_name_t, dev_name),
            64,
        ),
        ("umq_dev_assign_t", "dev.eid_idx") => (
            offset_of!(umq_dev_assign_t, u) + offset_of!(umq_dev_name_t, eid_idx),
            4,
        ),
        ("umq_memory_cfg_t", "total_size") => at!(umq_memory_cfg_t, total_size; 8)?,
        ("umq_trans_info_t", "trans_mode") => at!(umq_trans_info_t, trans_mode; 4)?,
        ("umq_trans_info_t", "dev_info") => {
            at!(umq_trans_info_t, dev_info; size_of::<umq_dev_assign_t>())?
        }
        ("umq_trans_info_t", "mem_cfg") => at!(umq_trans_info_t, mem_cfg; 8)?,
        ("umq_flow_control_cfg_t", "initial_window") => {
            at!(umq_flow_control_cfg_t, initial_window; 2)?
        }
        ("umq_flow_control_cfg_t", "notify_interval") => {
            at!(umq_flow_control_cfg_t, notify_interval; 2)?
        }
        ("umq_flow_control_cfg_t", "use_atomic_window") => {
            at!(umq_flow_control_cfg_t, use_atomic_window; 1)?
        }
        ("umq_buf_block_cfg_t", "small_block_size") => {
            at!(umq_buf_block_cfg_t, small_block_size; 4)?
        }
        ("umq_init_cfg_t", "buf_mode") => at!(umq_init_cfg_t, buf_mode; 4)?,
        ("umq_init_cfg_t", "feature") => at!(umq_init_cfg_t, feature; 4)?,
        ("umq_init_cfg_t", "headroom_size") => at!(umq_init_cfg_t, headroom_size; 2)?,
        ("umq_init_cfg_t", "io_lock_free") => at!(umq_init_cfg_t, io_lock_free; 1)?,
        ("umq_init_cfg_t", "trans_info_num") => at!(umq_init_cfg_t, trans_info_num; 1)?,
        ("umq_init_cfg_t", "flow_control") => {
            at!(umq_init_cfg_t, flow_control; size_of::<umq_flow_control_cfg_t>())?
        }
        ("umq_init_cfg_t", "block_cfg") => at!(umq_init_cfg_t, block_cfg; 4)?,
        ("umq_init_cfg_t", "cna") => at!(umq_init_cfg_t, cna; 2)?,
        ("umq_init_cfg_t", "ubmm_eid") => at!(umq_init_cfg_t, ubmm_eid; 4)?,
        ("umq_init_cfg_t", "trans_info") => {
            at!(umq_init_cfg_t, trans_info; size_of::<[umq_trans_info_t; 128]>())?
        }
        ("umq_create_option_t", "trans_mode") => at!(umq_create_option_t, trans_mode; 4)?,
        ("umq_create_option_t", "dev_info") => at!(umq_create_option_t, dev_info; 80)?,
        ("umq_create_option_t", "name") => at!(umq_create_option_t, name; 32)?,
        ("umq_create_option_t", "create_flag") => at!(umq_create_option_t, create_flag; 4)?,
        ("umq_create_option_t", "rx_buf_size") => at!(umq_create_option_t, rx_buf_size; 4)?,
        ("umq_create_option_t", "tx_buf_size") => at!(umq_create_option_t, tx_buf_size; 4)?,
        ("umq_create_option_t", "rx_depth") => at!(umq_create_option_t, rx_depth; 4)?,
        ("umq_create_option_t", "tx_depth") => at!(umq_create_option_t, tx_depth; 4)?,
        ("umq_create_option_t", "mode") => at!(umq_create_option_t, mode; 4)?,
        ("umq_buf_t", "qbuf_next") => at!(umq_buf_t, qbuf_next; 8)?,
        ("umq_buf_t", "umqh") => at!(umq_buf_t, umqh; 8)?,
        ("umq_buf_t", "total_data_size") => at!(umq_buf_t, total_data_size; 4)?,
        ("umq_buf_t", "buf_size") => at!(umq_buf_t, buf_size; 4)?,
        ("umq_buf_t", "data_size") => at!(umq_buf_t, data_size; 4)?,
        ("umq_buf_t", "headroom_size") => at!(umq_buf_t, headroom_size; 2)?,
        ("umq_buf_t", "token_value") => at!(umq_buf_t, token_value; 4)?,
        ("umq_buf_t", "rsvd4") => at!(umq_buf_t, rsvd4; 8)?,
        ("umq_buf_t", "buf_data") => at!(umq_buf_t, buf_data; 8)?,
        ("umq_buf_t", "qbuf_ext") => at!(umq_buf_t, qbuf_ext; 64)?,
        ("umq_buf_t", "data") => at!(umq_buf_t, data; 0)?,
        ("umq_alloc_option_t", "flag") => at!(umq_alloc_option_t, flag; 4)?,
        ("umq_alloc_option_t", "headroom_size") => at!(umq_alloc_option_t, headroom_size; 2)?,
        ("umq_flowcontrol_stats_t", name) => {
            let i = [
                "local_rx_posted",
                "remote_rx_window",
                "total_local_rx_posted",
                "total_local_rx_notified",
                "total_local_rx_posted_error",
                "total_remote_rx_received",
                "total_remote_rx_consumed",
                "total_remote_rx_received_error",
                "total_flow_controlled_wr",
            ]
            .iter()
            .position(|n| *n == name)?;
            (i * 8, 8)
        }
        ("umq_stats_info_instance_t", "stats") => at!(umq_stats_info_instance_t, stats; 24)?,
        ("umq_stats_info_instance_t", "umqh") => at!(umq_stats_info_instance_t, umqh; 8)?,
        ("umq_stats_infos_t", "err_stats") => at!(umq_stats_infos_t, err_stats; 192)?,
        ("umq_stats_infos_t", "stats_info_num") => at!(umq_stats_infos_t, stats_info_num; 4)?,
        ("umq_stats_infos_t", "stats_info") => at!(umq_stats_infos_t, stats_info; 0)?,
        ("umq_perf_record_t", "type_record") => at!(umq_perf_record_t, type_record; 2288)?,
        ("umq_perf_record_t", "is_used") => at!(umq_perf_record_t, is_used; 1)?,
        ("perf_in_parm_t", "thresh_array") => at!(perf_in_parm_t, thresh_array; 64)?,
        ("perf_in_parm_t", "thresh_num") => at!(perf_in_parm_t, thresh_num; 4)?,
        ("umq_perf_infos_t", "perf_record_num") => at!(umq_perf_infos_t, perf_record_num; 4)?,
        ("umq_perf_infos_t", "perf_record") => at!(umq_perf_infos_t, perf_record; 0)?,
        ("umq_dfx_cmd_t", "module_id") => at!(umq_dfx_cmd_t, module_id; 4)?,
        ("umq_dfx_cmd_t", "perf_cmd_id" | "stats_cmd_id") => at!(umq_dfx_cmd_t, cmd; 4)?,
        ("umq_dfx_cmd_t", "perf_in_parm") => at!(umq_dfx_cmd_t, input; 72)?,
        ("umq_dfx_result_t", "module_id") => at!(umq_dfx_result_t, module_id; 4)?,
        ("umq_dfx_result_t", "perf_cmd_id" | "stats_cmd_id") => at!(umq_dfx_result_t, cmd; 4)?,
        ("umq_dfx_result_t", "err_code") => at!(umq_dfx_result_t, err_code; 4)?,
        ("umq_dfx_result_t", "perf_char" | "perf_out_parm" | "stats_out_parm") => {
            at!(umq_dfx_result_t, out; 8)?
        }
        ("umq_async_event_t", "trans_info") => at!(umq_async_event_t, trans_info; 96)?,
        ("umq_async_event_t", "element" | "element.umqh") => at!(umq_async_event_t, element; 8)?,
        ("umq_async_event_t", "element.port_id") => at!(umq_async_event_t, element; 4)?,
        ("umq_async_event_t", "event_type") => at!(umq_async_event_t, event_type; 4)?,
        ("umq_async_event_t", "original_code") => at!(umq_async_event_t, original_code; 4)?,
        ("umq_async_event_t", "priv") => at!(umq_async_event_t, r#priv; 8)?,
        ("umq_route_flag_t", "value") => (0, 4),
        ("umq_route_t", "src") => at!(umq_route_t, src; 16)?,
        ("umq_route_t", "dst") => at!(umq_route_t, dst; 16)?,
        ("umq_route_t", "flag") => at!(umq_route_t, flag; 4)?,
        ("umq_route_t", "hops") => at!(umq_route_t, hops; 4)?,
        ("umq_route_list_t", "len") => at!(umq_route_list_t, len; 4)?,
        ("umq_route_list_t", "buf") => at!(umq_route_list_t, buf; 640)?,
        ("umq_user_ctl_in_t", "addr") => at!(umq_user_ctl_in_t, addr; 8)?,
        ("umq_user_ctl_in_t", "len") => at!(umq_user_ctl_in_t, len; 4)?,
        ("umq_user_ctl_in_t", "opcode") => at!(umq_user_ctl_in_t, opcode; 4)?,
        ("umq_user_ctl_out_t", "addr") => at!(umq_user_ctl_out_t, addr; 8)?,
        ("umq_user_ctl_out_t", "len") => at!(umq_user_ctl_out_t, len; 4)?,
        ("umq_user_ctl_out_t", "reserved") => at!(umq_user_ctl_out_t, reserved; 4)?,
        ("umq_opcode_flag_t", "value") => (0, 4),
        ("umq_buf_pro_t", "opcode") => at!(umq_buf_pro_t, opcode; 4)?,
        ("umq_buf_pro_t", "flag") => at!(umq_buf_pro_t, flag; 4)?,
        ("umq_buf_pro_t", "user_ctx") => at!(umq_buf_pro_t, user_ctx; 8)?,
        ("umq_buf_pro_t", "imm_data") => at!(umq_buf_pro_t, imm_data; 8)?,
        ("umq_buf_pro_t", "remote_sge") => at!(umq_buf_pro_t, remote_sge; 24)?,
        ("umq_buf_pro_t", "remote_sge.addr") => at!(umq_buf_pro_t, remote_sge.addr; 8)?,
        ("umq_buf_pro_t", "remote_sge.length") => at!(umq_buf_pro_t, remote_sge.length; 4)?,
        ("umq_buf_pro_t", "remote_sge.token_id") => at!(umq_buf_pro_t, remote_sge.token_id; 4)?,
        ("umq_buf_pro_t", "remote_sge.token_value") => {
            at!(umq_buf_pro_t, remote_sge.token_value; 4)?
        }
        ("umq_buf_pro_t", "remote_sge.rsvd0") => at!(umq_buf_pro_t, remote_sge.rsvd0; 4)?,
        ("umq_buf_pro_t", "rsvd1") => at!(umq_buf_pro_t, rsvd1; 16)?,
        _ => return None,
    })
}

fn rust_whole(s: &str) -> Option<(usize, usize)> {
    macro_rules! w {
        ($t:ty) => {
            Some((size_of::<$t>(), align_of::<$t>()))
        };
    }
    match s {
        "umq_log_config_t" => w!(umq_log_config_t),
        "umq_interrupt_option_t" => w!(umq_interrupt_option_t),
        "umq_eid_t" => w!(umq_eid_t),
        "umq_dev_assign_t" => w!(umq_dev_assign_t),
        "umq_memory_cfg_t" => w!(umq_memory_cfg_t),
        "umq_trans_info_t" => w!(umq_trans_info_t),
        "umq_flow_control_cfg_t" => w!(umq_flow_control_cfg_t),
        "umq_buf_block_cfg_t" => w!(umq_buf_block_cfg_t),
        "umq_init_cfg_t" => w!(umq_init_cfg_t),
        "umq_create_option_t" => w!(umq_create_option_t),
        "umq_buf_t" => w!(umq_buf_t),
        "umq_alloc_option_t" => w!(umq_alloc_option_t),
        "umq_flowcontrol_stats_t" => w!(umq_flowcontrol_stats_t),
        "umq_stats_info_instance_t" => w!(umq_stats_info_instance_t),
        "umq_stats_infos_t" => w!(umq_stats_infos_t),
        "umq_perf_record_t" => w!(umq_perf_record_t),
        "perf_in_parm_t" => w!(perf_in_parm_t),
        "umq_perf_infos_t" => w!(umq_perf_infos_t),
        "umq_dfx_cmd_t" => w!(umq_dfx_cmd_t),
        "umq_dfx_result_t" => w!(umq_dfx_result_t),
        "umq_async_event_t" => w!(umq_async_event_t),
        "umq_route_flag_t" => w!(umq_route_flag_t),
        "umq_route_t" => w!(umq_route_t),
        "umq_route_list_t" => w!(umq_route_list_t),
        "umq_user_ctl_in_t" => w!(umq_user_ctl_in_t),
        "umq_user_ctl_out_t" => w!(umq_user_ctl_out_t),
        "umq_opcode_flag_t" => w!(umq_opcode_flag_t),
        "umq_buf_pro_t" => w!(umq_buf_pro_t),
        _ => None,
    }
}

#[test]
fn every_layout_row_matches_the_rust_mirror() {
    let table = include_str!("data/layout.tsv");
    let mut checked = 0;
    let mut wrong = Vec::new();
    for row in table.lines().skip(1) {
        let cols: Vec<&str> = row.split('\t').collect();
        let (s, f, offset, size) = (cols[0], cols[1], cols[3], cols[4]);
        if f == "(whole)" {
            let (whole, align) = size.trim_end_matches(')').split_once(" (align ").unwrap();
            let want = (
                whole.parse::<usize>().unwrap(),
                align.parse::<usize>().unwrap(),
            );
            match rust_whole(s) {
                Some(got) if got == want => {}
                got => wrong.push(format!("{s}: rust {got:?}, table {want:?}")),
            }
        } else {
            let want = (
                offset.parse::<usize>().unwrap(),
                size.parse::<usize>().unwrap(),
            );
            match rust_field(s, f) {
                Some(got) if got == want => {}
                got => wrong.push(format!("{s}.{f}: rust {got:?}, table {want:?}")),
            }
        }
        checked += 1;
    }
    assert!(wrong.is_empty(), "layout mismatches:\n{}", wrong.join("\n"));
    assert_eq!(checked, 153);
}

#[test]
fn buf_bit_field_accessors_use_gcc_positions() {
    let mut b: umq_buf_t = unsafe { std::mem::zeroed() };
    b.set_first_fragment(true);
    b.set_token(0xfffff, 0xab);
    b.set_status(128);
    b.set_io_direction(2);
    let raw = unsafe { std::slice::from_raw_parts(&b as *const umq_buf_t as *const u8, 128) };
    assert_eq!(u16::from_le_bytes([raw[30], raw[31]]), 1);
    assert_eq!(
        u32::from_le_bytes(raw[32..36].try_into().unwrap()),
        0xab0f_ffff
    );
    assert_eq!(
        u64::from_le_bytes(raw[40..48].try_into().unwrap()),
        128 | 2 << 32
    );
    assert_eq!(
        (b.status(), b.io_direction(), b.token_id(), b.mempool_id()),
        (128, 2, 0xfffff, 0xab)
    );
}
