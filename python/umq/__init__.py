"""ctypes bindings for libumq (or any implementation of the UMQ C API) and a thin Pythonic layer.

    import umq
    with umq.Umq(flow_control=umq.FlowControl(initial_window=8)) as ctx:
        a, b = ctx.pair(depth=32)
        b.post_recv(8)
        a.send([b"hello"])
        print(b.poll_until(1, umq.UMQ_IO_RX)[0].data)

The library is found through UMQ_LIB, then the repository's build output, then the system loader;
`umq.library_path()` says which one is in use. `umq.lib()` gives the raw declared functions.
"""

from . import constants, types
from ._lib import API, EXTENSIONS, Library, UmqError, error_name, lib, library_path
from .constants import *  # noqa: F401,F403 - the C names, as in the headers
from .core import (
    Buffers,
    Completion,
    ExtFlowStats,
    FlowControl,
    FlowStats,
    Queue,
    RemoteBuffer,
    PacingStats,
    TransportStats,
    Umq,
    check_pair_identities,
    pfc_frame,
)

__version__ = "0.1.0"
