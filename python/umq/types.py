"""ctypes mirrors of every public UMQ struct and union, field for field as in the C headers.

`tests/test_abi.py` checks each size, alignment and offset against the ABI table the C tests use.
"""

import ctypes as C

from .constants import (
    MAX_UMQ_TRANS_INFO_NUM,
    UMQ_DEV_NAME_SIZE,
    UMQ_IPV4_SIZE,
    UMQ_IPV6_SIZE,
    UMQ_MAX_ROUTES,
    UMQ_PERF_QUANTILE_MAX_NUM,
)

u8, u16, u32, u64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64

# void (*umq_log_func_t)(int level, char *log_msg)
umq_log_func_t = C.CFUNCTYPE(None, C.c_int, C.c_char_p)


class _Struct(C.Structure):
    def __repr__(self):
        fields = ", ".join(f"{f[0]}={getattr(self, f[0])!r}" for f in self._fields_ if f[0][0] != "_")
        return f"{type(self).__name__}({fields})"


class umq_log_rate_limit_t(_Struct):
    _fields_ = [("interval_ms", u32), ("num", u32)]


class umq_log_config_t(_Struct):
    _fields_ = [
        ("log_flag", u32),
        ("func", umq_log_func_t),
        ("level", u32),
        ("rate_limited", umq_log_rate_limit_t),
    ]


class umq_interrupt_option_t(_Struct):
    _fields_ = [("flag", u32), ("direction", u32)]


class umq_eid_in4_t(_Struct):
    _fields_ = [("reserved", u64), ("prefix", u32), ("addr", u32)]


class umq_eid_in6_t(_Struct):
    _fields_ = [("subnet_prefix", u64), ("interface_id", u64)]


class umq_eid_t(C.Union):
    _fields_ = [("raw", u8 * 16), ("in4", umq_eid_in4_t), ("in6", umq_eid_in6_t)]


class _ipv4(_Struct):
    _fields_ = [("ip_addr", C.c_char * UMQ_IPV4_SIZE)]


class _ipv6(_Struct):
    _fields_ = [("ip_addr", C.c_char * UMQ_IPV6_SIZE)]


class _eid(_Struct):
    _fields_ = [("eid", umq_eid_t)]


class _dev(_Struct):
    _fields_ = [("dev_name", C.c_char * UMQ_DEV_NAME_SIZE), ("eid_idx", u32)]


class _dev_assign_u(C.Union):
    _fields_ = [("ipv4", _ipv4), ("ipv6", _ipv6), ("eid", _eid), ("dev", _dev)]


class umq_dev_assign_t(_Struct):
    _anonymous_ = ("_u",)
    _fields_ = [("assign_mode", u32), ("_u", _dev_assign_u)]


class umq_memory_cfg_t(_Struct):
    _fields_ = [("total_size", u64)]


class umq_trans_info_t(_Struct):
    _fields_ = [("trans_mode", u32), ("dev_info", umq_dev_assign_t), ("mem_cfg", umq_memory_cfg_t)]


class umq_flow_control_cfg_t(_Struct):
    _fields_ = [("initial_window", u16), ("notify_interval", u16), ("use_atomic_window", C.c_bool)]


class umq_buf_block_cfg_t(_Struct):
    _fields_ = [("small_block_size", u32)]


class umq_init_cfg_t(_Struct):
    _fields_ = [
        ("buf_mode", u32),
        ("feature", u32),
        ("headroom_size", u16),
        ("io_lock_free", C.c_bool),
        ("trans_info_num", u8),
        ("flow_control", umq_flow_control_cfg_t),
        ("block_cfg", umq_buf_block_cfg_t),
        ("cna", u16),
        ("ubmm_eid", u32),
        ("trans_info", umq_trans_info_t * MAX_UMQ_TRANS_INFO_NUM),
    ]


class umq_create_option_t(_Struct):
    _fields_ = [
        ("trans_mode", u32),
        ("dev_info", umq_dev_assign_t),
        ("name", C.c_char * 32),
        ("create_flag", u32),
        ("rx_buf_size", u32),
        ("tx_buf_size", u32),
        ("rx_depth", u32),
        ("tx_depth", u32),
        ("mode", u32),
    ]


class umq_buf_t(_Struct):
    pass


umq_buf_t._fields_ = [
    ("qbuf_next", C.POINTER(umq_buf_t)),
    ("umqh", u64),
    ("total_data_size", u32),
    ("buf_size", u32),
    ("data_size", u32),
    ("headroom_size", u16),
    ("first_fragment", u16, 1),
    ("rsvd1", u16, 15),
    ("token_id", u32, 20),
    ("rsvd2", u32, 4),
    ("mempool_id", u32, 8),
    ("token_value", u32),
    ("status", u64, 32),
    ("io_direction", u64, 2),
    ("rsvd3", u64, 30),
    ("rsvd4", u64),
    # char *, kept as an address: c_char_p would copy up to the first NUL.
    ("buf_data", C.c_void_p),
    ("qbuf_ext", u64 * 8),
    # `char data[0]` follows at offset 128.
]


class umq_alloc_option_t(_Struct):
    _fields_ = [("flag", u32), ("headroom_size", u16)]


class umq_flowcontrol_stats_t(_Struct):
    _fields_ = [
        (name, u64)
        for name in (
            "local_rx_posted",
            "remote_rx_window",
            "total_local_rx_posted",
            "total_local_rx_notified",
            "total_local_rx_posted_error",
            "total_remote_rx_received",
            "total_remote_rx_consumed",
            "total_remote_rx_received_error",
            "total_flow_controlled_wr",
        )
    ]


class umq_stats_info_instance_t(_Struct):
    _fields_ = [("stats", u64 * 3), ("umqh", u64)]


class umq_stats_infos_t(_Struct):
    _fields_ = [
        ("err_stats", u64 * 24),
        ("stats_info_num", u32),
        ("stats_info", umq_stats_info_instance_t * 0),
    ]


class umq_perf_type_record_t(_Struct):
    _fields_ = [
        ("accumulation", u64),
        ("min", u64),
        ("max", u64),
        ("cnt", u64),
        ("bucket", u64 * (UMQ_PERF_QUANTILE_MAX_NUM + 1)),
    ]


class umq_perf_record_t(_Struct):
    _fields_ = [("type_record", umq_perf_type_record_t * 22), ("is_used", C.c_bool)]


class perf_in_parm_t(_Struct):
    _fields_ = [("thresh_array", u64 * UMQ_PERF_QUANTILE_MAX_NUM), ("thresh_num", u32)]


class umq_perf_infos_t(_Struct):
    _fields_ = [("perf_record_num", u32), ("perf_record", C.POINTER(umq_perf_record_t) * 0)]


class _cmd_id(C.Union):
    _fields_ = [("perf_cmd_id", u32), ("stats_cmd_id", u32)]


class _perf_in(C.Union):
    _fields_ = [("perf_in_parm", perf_in_parm_t)]


class umq_dfx_cmd_t(_Struct):
    _anonymous_ = ("_id", "_in")
    _fields_ = [("module_id", u32), ("_id", _cmd_id), ("_in", _perf_in)]


class _dfx_out(C.Union):
    _fields_ = [
        ("perf_char", C.c_void_p),
        ("perf_out_parm", C.POINTER(umq_perf_infos_t)),
        ("stats_out_parm", C.POINTER(umq_stats_infos_t)),
    ]


class umq_dfx_result_t(_Struct):
    _anonymous_ = ("_id", "_out")
    _fields_ = [("module_id", u32), ("_id", _cmd_id), ("err_code", C.c_int), ("_out", _dfx_out)]


class umq_async_event_element_t(C.Union):
    _fields_ = [("umqh", u64), ("port_id", u32)]


class umq_async_event_t(_Struct):
    _fields_ = [
        ("trans_info", umq_trans_info_t),
        ("element", umq_async_event_element_t),
        ("event_type", u32),
        ("original_code", C.c_int),
        ("priv", C.c_void_p),
    ]


class umq_route_flag_bs_t(_Struct):
    _fields_ = [("rtp", u32, 1), ("ctp", u32, 1), ("utp", u32, 1), ("reserved", u32, 29)]


class umq_route_flag_t(C.Union):
    _fields_ = [("value", u32), ("bs", umq_route_flag_bs_t)]


class umq_route_t(_Struct):
    _fields_ = [("src", umq_eid_t), ("dst", umq_eid_t), ("flag", umq_route_flag_t), ("hops", u32)]


class umq_route_list_t(_Struct):
    _fields_ = [("len", u32), ("buf", umq_route_t * UMQ_MAX_ROUTES)]


class umq_user_ctl_in_t(_Struct):
    _fields_ = [("addr", u64), ("len", u32), ("opcode", u32)]


class umq_user_ctl_out_t(_Struct):
    _fields_ = [("addr", u64), ("len", u32), ("reserved", u32)]


# Pro API (umq_pro_types.h): the per-WR fields live in umq_buf_t.qbuf_ext.


class umq_opcode_flag_bs_t(_Struct):
    _fields_ = [
        ("place_order", u32, 2),
        ("comp_order", u32, 1),
        ("fence", u32, 1),
        ("solicited_enable", u32, 1),
        ("complete_enable", u32, 1),
        ("inline_flag", u32, 1),
        ("reserved", u32, 25),
    ]


class umq_opcode_flag_t(C.Union):
    _fields_ = [("value", u32), ("bs", umq_opcode_flag_bs_t)]


class umq_ref_sge_t(_Struct):
    _fields_ = [
        ("addr", u64),
        ("length", u32),
        ("token_id", u32),
        ("token_value", u32),
        ("rsvd0", u32),
    ]


class umq_buf_pro_t(_Struct):
    _fields_ = [
        ("opcode", u32),
        ("flag", umq_opcode_flag_t),
        ("user_ctx", u64),
        ("imm_data", u64),
        ("remote_sge", umq_ref_sge_t),
        ("rsvd1", u64 * 2),
    ]


# libumq extension (umq_ext.h).


class umq_ext_flow_control_stats_t(_Struct):
    _fields_ = [
        (name, u64)
        for name in (
            "piggybacked",
            "standalone",
            "area_only",
            "area_refreshes",
            "ctrl_grants",
            "ctrl_budget",
            "ctrl_credit",
            "queued_wr",
            "credit_stalls",
        )
    ] + [(name, u32) for name in ("initial_window", "notify_interval", "queued_mode", "atomic_window")] + [
        ("rx_without_buffer", u64)
    ]


class umq_ext_transport_stats_t(_Struct):
    _fields_ = [("transport", u32), ("shared_pool", u32)] + [
        (name, u64)
        for name in (
            "shared_pool_bytes",
            "by_ref_wr",
            "by_ref_bytes",
            "placed_wr",
            "placed_bytes",
            "placed_rx",
            "paced_packets",
            "one_sided_mapped_wr",
            "one_sided_kernel_wr",
            "calls_sent",
            "calls_answered",
            "one_sided_rma_wr",
        )
    ]


class umq_ext_pacing_stats_t(_Struct):
    _fields_ = [(name, u64) for name in ("rate_bps", "packets", "bytes", "ticks_parked", "achieved_bps")] + [
        ("pmtu", u32),
        ("ticks_per_s", u32),
        ("held_wr", u64),
    ]


def pro(buf):
    """The pro-API view (`umq_buf_pro_t`) of a buffer's `qbuf_ext`: reads and writes go to the buffer."""
    return umq_buf_pro_t.from_address(C.addressof(buf.qbuf_ext))


class umq_ext_pfc_config_t(_Struct):
    _fields_ = [("flags", u32), ("pass_control", u32)] + [
        (name, u64) for name in ("speed_bps", "xoff_bytes", "xon_bytes", "watchdog_detect_ns", "watchdog_restore_ns")
    ] + [("pause_quanta", u16), ("address", u8 * 6)]


class umq_ext_pfc_priority_stats_t(_Struct):
    _fields_ = [(name, u64) for name in ("indications", "requests", "paused_ns", "watchdog_trips")]


class umq_ext_pfc_stats_t(_Struct):
    _fields_ = [("priority", umq_ext_pfc_priority_stats_t * 8)] + [
        (name, u64) for name in ("link_pauses", "link_paused_ns", "other_control", "passed_dropped")
    ] + [("paused_now", u32), ("queues", u32)]


class umq_ext_pfc_frame_t(_Struct):
    _fields_ = [("len", u32), ("rsvd", u32), ("bytes", u8 * 1520)]
