"""Shared fixtures. Each test gets its own umq_init / umq_uninit (the library allows re-init after
uninit), so a failing test cannot leak state into the next one."""

import pytest

import umq

OURS = umq.lib().has_extensions()


def pytest_collection_modifyitems(config, items):
    skip = pytest.mark.skip(reason=f"{umq.library_path()} lacks libumq's extensions")
    for item in items:
        if not OURS and ("libumq_ext" in item.keywords or "libumq_behaviour" in item.keywords):
            item.add_marker(skip)


@pytest.fixture
def ctx():
    """Pro API, no flow control."""
    with umq.Umq() as c:
        yield c


@pytest.fixture
def pair(ctx):
    return ctx.pair(depth=64)


@pytest.fixture(params=[False, True], ids=["plain-window", "atomic-window"])
def fc(request):
    """Flow control on (initial window 4, notify interval 2), in both window modes."""
    cfg = umq.FlowControl(initial_window=4, notify_interval=2, use_atomic_window=request.param)
    with umq.Umq(flow_control=cfg) as c:
        yield c


def drain(q, direction=umq.UMQ_IO_ALL, rounds=50):
    """Everything `q` has to poll now (a few empty polls in a row end it)."""
    out, empty = [], 0
    while empty < rounds:
        got = q.poll(direction)
        out += got
        empty = 0 if got else empty + 1
    return out
