"""Finds and loads a libumq.so and declares the C signature of every exported function."""

import ctypes as C
import ctypes.util
import os
from pathlib import Path

from . import constants as K
from . import types as T
from . import types2026 as T26

P = C.POINTER
u8, u16, u32, u64 = C.c_uint8, C.c_uint16, C.c_uint32, C.c_uint64
BUF = P(T.umq_buf_t)
OPT = P(T.umq_interrupt_option_t)

# name: (restype, argtypes), exactly as in umq_api.h and umq_pro_api.h (34 functions).
API = {
    "umq_init": (C.c_int, [P(T.umq_init_cfg_t)]),
    "umq_uninit": (None, []),
    "umq_create": (u64, [P(T.umq_create_option_t)]),
    "umq_destroy": (C.c_int, [u64]),
    "umq_bind_info_get": (u32, [u64, P(u8), u32]),
    "umq_bind": (C.c_int, [u64, P(u8), u32]),
    "umq_unbind": (C.c_int, [u64]),
    "umq_state_get": (u32, [u64]),
    "umq_buf_alloc": (BUF, [u32, u32, u64, P(T.umq_alloc_option_t)]),
    "umq_buf_free": (None, [BUF]),
    "umq_buf_break_and_free": (BUF, [BUF]),
    "umq_buf_headroom_reset": (C.c_int, [BUF, u16]),
    "umq_buf_reset": (C.c_int, [BUF]),
    "umq_data_to_head": (BUF, [C.c_void_p]),
    "umq_enqueue": (C.c_int, [u64, BUF, P(BUF)]),
    "umq_dequeue": (BUF, [u64]),
    "umq_notify": (None, [u64]),
    "umq_rearm_interrupt": (C.c_int, [u64, C.c_bool, OPT]),
    "umq_wait_interrupt": (C.c_int32, [u64, C.c_int, OPT]),
    "umq_ack_interrupt": (None, [u64, u32, OPT]),
    "umq_dfx_cmd_process": (None, [P(T.umq_dfx_cmd_t), P(T.umq_dfx_result_t)]),
    "umq_buf_split": (C.c_int, [BUF, BUF]),
    "umq_async_event_fd_get": (C.c_int, [P(T.umq_trans_info_t)]),
    "umq_get_async_event": (C.c_int, [P(T.umq_trans_info_t), P(T.umq_async_event_t)]),
    "umq_ack_async_event": (None, [P(T.umq_async_event_t)]),
    "umq_log_config_set": (C.c_int, [P(T.umq_log_config_t)]),
    "umq_log_config_get": (C.c_int, [P(T.umq_log_config_t)]),
    "umq_dev_add": (C.c_int, [P(T.umq_trans_info_t)]),
    "umq_get_route_list": (C.c_int, [P(T.umq_route_t), u32, P(T.umq_route_list_t)]),
    "umq_user_ctl": (C.c_int, [u64, P(T.umq_user_ctl_in_t), P(T.umq_user_ctl_out_t)]),
    "umq_post": (C.c_int, [u64, BUF, u32, P(BUF)]),
    "umq_poll": (C.c_int, [u64, u32, P(BUF), u32]),
    "umq_interrupt_fd_get": (C.c_int, [u64, OPT]),
    "umq_get_cq_event": (C.c_int, [u64, OPT]),
}

# The July 2026 revision (libumq's abi-2026 build): the functions of the 34 whose signatures
# changed, and those it no longer has or that this package does not speak in that revision
# (their attributes are None there).
OPT26 = P(T26.umq_interrupt_option_t)
API_2026 = {
    "umq_init": (C.c_int, [P(T26.umq_init_cfg_t)]),
    "umq_create": (u64, [P(T26.umq_create_option_t)]),
    "umq_buf_alloc": (BUF, [u32, u32, u64, P(T26.umq_alloc_option_t)]),
    "umq_rearm_interrupt": (C.c_int, [u64, C.c_bool, OPT26]),
    "umq_wait_interrupt": (C.c_int32, [u64, C.c_int, OPT26]),
    "umq_ack_interrupt": (None, [u64, u32, OPT26]),
    "umq_log_config_set": (C.c_int, [P(T26.umq_log_config_t)]),
    "umq_log_config_get": (C.c_int, [P(T26.umq_log_config_t)]),
    "umq_dev_add": (C.c_int, [P(T26.umq_trans_info_t)]),
    "umq_async_event_fd_get": (C.c_int, [P(T26.umq_trans_info_t)]),
    "umq_get_async_event": (C.c_int, [P(T26.umq_trans_info_t), P(T26.umq_async_event_t)]),
    "umq_ack_async_event": (None, [P(T26.umq_async_event_t)]),
    "umq_post": (C.c_int, [u64, BUF, P(T26.umq_io_option_t), P(BUF)]),
    "umq_poll": (C.c_int, [u64, P(T26.umq_io_option_t), P(BUF), u32]),
    "umq_interrupt_fd_get": (C.c_int, [u64, OPT26]),
    "umq_get_cq_event": (C.c_int, [u64, OPT26]),
}
# Functions only the July 2026 revision has, that this package speaks (None on December's).
ONLY_2026 = {
    "umq_transport_pool_resource_create": (u32, [u64, P(T26.umq_tp_resource_create_option_t)]),
    "umq_transport_pool_resource_destroy": (C.c_int, [u64, u32]),
    "umq_transport_pool_resource_modify": (C.c_int, [u64, u32]),
    "umq_transport_pool_eventfd_get": (C.c_int, [u64]),
    "umq_stats_transport_pool_get": (C.c_int, [u64, P(T26.umq_transport_pool_stats_t)]),
}
NOT_IN_2026 = {
    "umq_dfx_cmd_process",  # replaced by the statistics API of umq_dfx_api.h
    "umq_get_route_list",  # takes a umq_route_key_t
}

# libumq's extensions (umq_ext.h, umq_fi.h): bound when the library has them.
EXTENSIONS = {
    "umq_tx_size_left": (C.c_int64, [u64]),
    "umq_rx_size_left": (C.c_int64, [u64]),
    "umq_fi_ep_get": (C.c_void_p, [u64]),
    "fi_tx_size_left": (C.c_ssize_t, [C.c_void_p]),
    "fi_rx_size_left": (C.c_ssize_t, [C.c_void_p]),
}

_ERROR_NAMES = {
    -K.UMQ_ERR_EPERM: "UMQ_ERR_EPERM",
    -K.UMQ_ERR_EAGAIN: "UMQ_ERR_EAGAIN",
    -K.UMQ_ERR_ENOMEM: "UMQ_ERR_ENOMEM",
    -K.UMQ_ERR_EBUSY: "UMQ_ERR_EBUSY",
    -K.UMQ_ERR_EEXIST: "UMQ_ERR_EEXIST",
    -K.UMQ_ERR_EINVAL: "UMQ_ERR_EINVAL",
    -K.UMQ_ERR_ENODEV: "UMQ_ERR_ENODEV",
    K.UMQ_FAIL: "UMQ_FAIL",
}


def error_name(code):
    """The C name of a negative UMQ return code (an errno name for codes UMQ does not name)."""
    if code in _ERROR_NAMES:
        return _ERROR_NAMES[code]
    import errno

    return errno.errorcode.get(-code, f"error {code}")


class UmqError(Exception):
    """A UMQ call failed. `code` is the negative return value (or -errno); `name` its C name.

    `bad_index`, for a post or enqueue, is the position of the first refused work request: the
    ones before it were accepted, it and the ones after are still the caller's."""

    def __init__(self, code, func, bad_index=None):
        self.code = code
        self.name = error_name(code)
        self.func = func
        self.bad_index = bad_index
        where = f" at work request {bad_index}" if bad_index is not None else ""
        super().__init__(f"{func} failed: {self.name} ({code}){where}")


def _candidates():
    env = os.environ.get("UMQ_LIB")
    if env:
        yield env
        return
    repo = Path(__file__).resolve().parents[2]
    for profile in ("release", "debug"):
        built = repo / "target" / profile / "libumq.so"
        if built.exists():
            yield str(built)
    yield ctypes.util.find_library("umq") or "libumq.so.0"


class Library:
    """One loaded libumq.so with its functions declared; `path` says which file it is."""

    def __init__(self, path=None):
        errors = []
        for candidate in [path] if path else _candidates():
            try:
                self.cdll = C.CDLL(candidate, use_errno=True)
                self.path = candidate
                break
            except OSError as e:
                errors.append(f"{candidate}: {e}")
        else:
            raise OSError("no libumq.so found (set UMQ_LIB): " + "; ".join(errors))
        # The July 2026 revision (libumq's abi-2026 build, or a UMDK of that revision) is told
        # apart by a function December's lacks, and declared with its own signatures: December's
        # would call umq_post, umq_poll and others wrongly.
        self.abi = 2026 if getattr(self.cdll, "umq_cfg_get", None) is not None else 2025
        for name, (restype, argtypes) in API.items():
            if self.abi == 2026 and name in NOT_IN_2026:
                setattr(self, name, None)
                continue
            if self.abi == 2026:
                restype, argtypes = API_2026.get(name, (restype, argtypes))
            fn = getattr(self.cdll, name)
            fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        for name, (restype, argtypes) in ONLY_2026.items():
            fn = getattr(self.cdll, name) if self.abi == 2026 else None
            if fn is not None:
                fn.restype, fn.argtypes = restype, argtypes
            setattr(self, name, fn)
        self.extensions = set()
        for name, (restype, argtypes) in EXTENSIONS.items():
            fn = getattr(self.cdll, name, None)
            if fn is not None:
                fn.restype, fn.argtypes = restype, argtypes
                self.extensions.add(name)
            setattr(self, name, fn)

    def has_extensions(self):
        """True when this library has libumq's own extensions (size_left, extended stats)."""
        return EXTENSIONS.keys() <= self.extensions

    def check(self, rc, func):
        """Raises UmqError for a negative return code; returns rc otherwise."""
        if rc < 0:
            raise UmqError(rc, func)
        return rc

    def errno_error(self, func):
        """The UmqError for a call that signals failure by its return value and errno."""
        return UmqError(-(C.get_errno() or K.UMQ_ERR_EINVAL), func)


_library = None


def lib():
    """The process-wide library, loaded on first use."""
    global _library
    if _library is None:
        _library = Library()
    return _library


def library_path():
    """Path of the libumq.so in use (from UMQ_LIB, the repository's build output, or the system)."""
    return lib().path
