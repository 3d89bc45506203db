"""The structures the July 2026 revision of the UMQ API changed (libumq's abi-2026 build,
`include/umq-2026/`). Everything else is as in `types`. `tests/test_abi.py` checks each size
and offset against the 2026 ABI table the C tests use."""

import ctypes as C

from . import types
from .types import _Struct, umq_async_event_element_t, umq_dev_assign_t, umq_log_func_t

u8, u16, u32, u64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64

MAX_UMQ_TRANS_INFO_NUM = 128


class umq_trans_info_t(_Struct):
    _fields_ = [("trans_mode", u32), ("dev_info", umq_dev_assign_t)]


class umq_flow_control_cfg_t(_Struct):
    _fields_ = [
        ("initial_credit", u16),
        ("max_credits_request", u16),
        ("credit_multiple", C.c_float),
        ("return_ratio", u16),
        ("min_reserved_credit", u16),
        ("timeout_ms", u32),
        ("pending_credit_threshold", u16),
        ("use_atomic_window", C.c_bool),
        ("is_limited", C.c_bool),
        ("fc_req_timeout_ms", C.c_int32),
    ]


class umq_buf_pool_cfg_t(_Struct):
    _fields_ = [
        ("small_block_size", u32),
        ("umq_mem_pool_init_size", u64),
        ("normal_pool_block_count", u32),
        ("expansion_block_count", u32),
        ("umq_buf_pool_max_size", u64),
        ("tls_qbuf_pool_depth", u64),
        ("tls_expand_qbuf_pool_depth", u64),
        ("disable_scale_cap", C.c_bool),
        ("disable_malloc_escape", C.c_bool),
        ("enable_tiny_pool", C.c_bool),
        ("tiny_pool_block_size", u32),
        ("tiny_pool_block_count", u32),
        ("tls_tiny_pool_depth", u64),
        ("tls_expand_tiny_pool_depth", u64),
    ]


class umq_tp_pool_cfg_t(_Struct):
    _fields_ = [("notify_threshold", u32)]


class umq_init_cfg_t(_Struct):
    _fields_ = [
        ("buf_mode", u32),
        ("feature", u32),
        ("headroom_size", u16),
        ("io_lock_free", u8, 1),
        ("rq_lock_free", u8, 1),
        ("rsvd", u8, 6),
        ("trans_info_num", u8),
        ("flow_control", umq_flow_control_cfg_t),
        ("trans_info", umq_trans_info_t * MAX_UMQ_TRANS_INFO_NUM),
        ("buf_pool_cfg", umq_buf_pool_cfg_t),
        ("tp_pool_cfg", umq_tp_pool_cfg_t),
    ]


class umq_used_ports_t(_Struct):
    _fields_ = [("port", C.c_void_p), ("num", u8)]


class umq_create_option_t(_Struct):
    # December's fields up to tx_depth, then the shared receive queue and the context before
    # the mode, and the transport settings after it.
    _fields_ = types.umq_create_option_t._fields_[:8] + [
        ("share_rq_umqh", u64),
        ("umq_ctx", u64),
        ("mode", u32),
        ("tp_mode", u32),
        ("tp_type", u32),
        ("used_ports", umq_used_ports_t),
        ("priority", u8),
    ]


class umq_tp_resource_create_option_t(_Struct):
    _fields_ = [("create_flag", u32), ("used_ports", umq_used_ports_t)]


class umq_transport_pool_stats_t(_Struct):
    _fields_ = [
        (name, u64)
        for name in (
            "total_num", "global_num", "cache_num", "in_use_num",
            "error_num", "acc_alloc_num", "acc_free_num", "acc_miss_num",
        )
    ]


# Create flags, option flags and errors of this revision that December's has not.
UMQ_CREATE_FLAG_SHARE_RQ = 1 << 5
UMQ_CREATE_FLAG_UMQ_CTX = 1 << 6
UMQ_CREATE_FLAG_MAIN_UMQ = 1 << 11
UMQ_CREATE_FLAG_SUB_UMQ = 1 << 12
UMQ_CREATE_FLAG_SHARE_TRANSPORT = 1 << 13
UMQ_IO_OPTION_FLAG_TP_HANDLE_IDX = 1 << 1
UMQ_ERR_EMLINK = 31
UMQ_ERR_ENOBUFS = 105


class umq_io_option_t(_Struct):
    _fields_ = [
        ("flag", u32),
        ("io_direction", u32),
        ("tp_handle_idx", u32),
        ("tag_timestamp", u64),
    ]


class umq_interrupt_option_t(_Struct):
    _fields_ = [
        ("flag", u32),
        ("direction", u32),
        ("fd_type", u32),
        ("tp_handle_idx", u32),
        ("tag_timestamp", u64),
    ]


class umq_alloc_option_t(_Struct):
    _fields_ = [("flag", u32), ("headroom_size", u16), ("pool_type", u32)]


class umq_log_rate_limit_t(_Struct):
    _fields_ = [("interval_ms", u32), ("num", u32)]


class umq_log_config_t(_Struct):
    _fields_ = [
        ("log_flag", u32),
        ("func", umq_log_func_t),
        ("ext_func", C.c_void_p),
        ("level", u32),
        ("rate_limited", umq_log_rate_limit_t),
    ]


class umq_async_event_t(_Struct):
    _fields_ = [
        ("trans_info", umq_trans_info_t),
        ("element", umq_async_event_element_t),
        ("event_type", u32),
        ("original_code", C.c_int),
        ("priv", C.c_void_p),
    ]
