"""Shared fixtures. Each test gets its own umq_init / umq_uninit (the library allows re-init after
uninit), so a failing test cannot leak state into the next one."""

import atexit
import contextlib
import faulthandler
import os
import tempfile

import pytest

import umq

OURS = umq.lib().has_extensions()
# A test that hangs (in Python or inside a library call) fails the run with every thread's
# traceback instead of stalling it: the watchdog is faulthandler's own thread, so a spin inside
# C code cannot hold it off.
TEST_TIMEOUT_S = int(os.environ.get("UMQ_TEST_TIMEOUT_S", "120"))
# Where the tracebacks go, after the hung test's name: pytest has fd 2 captured, and a run that
# ends there never shows what it captured. scripts/test-all.sh prints this file when it fails.
HANG_LOG = os.environ.get("UMQ_TEST_HANG_LOG") or os.path.join(
    tempfile.gettempdir(), f"umq-test-hang-{os.getpid()}.txt")
_hang_log = None


@pytest.fixture(autouse=True)
def _timeout(request):
    global _hang_log
    if _hang_log is None:
        _hang_log = open(HANG_LOG, "w")
        atexit.register(os.unlink, HANG_LOG)  # a run that hangs ends in os._exit, keeping it
    _hang_log.seek(0)
    _hang_log.truncate()
    _hang_log.write(f"{request.node.nodeid} ran longer than {TEST_TIMEOUT_S} s; its threads:\n")
    _hang_log.flush()
    faulthandler.dump_traceback_later(TEST_TIMEOUT_S, exit=True, file=_hang_log)
    yield
    faulthandler.cancel_dump_traceback_later()
    _hang_log.seek(0)
    _hang_log.truncate()


def expected_transport():
    """What a bind of two queues of this process must use: loopback, or the provider
    UMQ_PROVIDER forces (the suite's later runs: shared memory, the network)."""
    forced = {"shm": umq.UMQ_EXT_TRANSPORT_SHM, "fabric": umq.UMQ_EXT_TRANSPORT_FABRIC}
    return forced.get(os.environ.get("UMQ_PROVIDER"), umq.UMQ_EXT_TRANSPORT_LOOPBACK)


def assert_premise(pair, atomic_window=None):
    """The run's premises hold on a bound pair: the transport it is for and, with flow
    control, the window flavour it asked for (only libumq reports them)."""
    if not OURS:
        return
    for q in pair:
        assert q.transport_stats().transport == expected_transport()
        if atomic_window is not None:
            assert q.ext_stats().atomic_window == int(atomic_window)


JULY_2026 = umq.lib().abi == 2026


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=f"{umq.library_path()} lacks libumq's extensions")
    july = pytest.mark.skip(reason=f"{umq.library_path()} speaks the July 2026 revision (docs/COMPAT.md)")
    december = pytest.mark.skip(reason=f"{umq.library_path()} speaks the December 2025 revision")
    for item in items:
        if not OURS and ("libumq_ext" in item.keywords or "libumq_behaviour" in item.keywords):
            item.add_marker(skip)
        if JULY_2026 and "december" in item.keywords:
            item.add_marker(july)
        if not JULY_2026 and "july" in item.keywords:
            item.add_marker(december)


@pytest.fixture
def ctx():
    """Pro API, no flow control."""
    with umq.Umq() as c:
        yield c


@pytest.fixture
def pair(ctx):
    p = ctx.pair(depth=64)
    assert_premise(p)
    return p


@pytest.fixture(params=[False, True], ids=["plain-window", "atomic-window"])
def fc(request):
    """Flow control on (initial window 4, notify interval 2), with `use_atomic_window` off and
    on: a program may set either, and the library reports which (its counters live under the
    queue's lock either way). (The July 2026 credit requests report it off: one mode.)"""
    if JULY_2026 and request.param:
        pytest.skip("the July 2026 credit requests report no atomic window")
    cfg = umq.FlowControl(initial_window=4, notify_interval=2, use_atomic_window=request.param)
    with umq.Umq(flow_control=cfg) as c:
        probe = c.pair(depth=16)
        assert_premise(probe, atomic_window=request.param)
        for q in probe:
            q.destroy()
        yield c


def drain(q, direction=umq.UMQ_IO_ALL, rounds=50):
    """Everything `q` has to poll now (a few empty polls in a row end it)."""
    out, empty = [], 0
    while empty < rounds:
        got = q.poll(direction)
        out += got
        empty = 0 if got else empty + 1
    return out


def eventually(check, seconds=5.0):
    """Waits until `check()` holds. Over shared memory or in-process what a peer did is visible
    at once; over the network (UMQ_PROVIDER=fabric) it arrives a round trip later, and each
    look (a state query, a poll) moves the binding along."""
    import time

    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "did not happen in time"
        time.sleep(0.0005)


@contextlib.contextmanager
def peer_process(target, *args, depth=32):
    """Runs `target(conn, *args)` in a new (spawned) process that sends its queue's bind info
    over `conn` and binds to ours; yields our context, our queue bound to it and our end of
    the pipe. The child must exit 0 once the block is done."""
    import multiprocessing as mp

    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=target, args=(child_end, *args))
    child.start()
    try:
        with umq.Umq() as ctx:
            q = ctx.queue("parent", depth=depth, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(parent_end.recv())
            parent_end.send(q.bind_info())
            yield ctx, q, parent_end
    finally:
        child.join(30)
    assert child.exitcode == 0


def send_all(q, payloads, poll=None):
    """Sends every payload on `q`, eight at a time as the queue takes them, taking its send
    completions (and calling `poll`, when given, after each try)."""
    sent = 0
    while sent < len(payloads):
        sent += q.send(payloads[sent : sent + 8])
        q.poll(umq.UMQ_IO_TX)
        if poll:
            poll()
