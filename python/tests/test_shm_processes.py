"""Two processes over shared memory, driven from Python with multiprocessing (spawned, so each
process does its own umq_init): bind info goes over a Pipe, as the reference examples send it
over TCP."""

import multiprocessing as mp

import pytest

import umq

COUNT = 2000


def sender(conn, flow_control):
    with umq.Umq(flow_control=flow_control) as ctx:
        q = ctx.queue("child", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
        conn.send(q.bind_info())
        q.bind(conn.recv())
        sent = 0
        while sent < COUNT:
            sent += q.send([f"m{i}".encode() for i in range(sent, min(sent + 8, COUNT))])
            q.poll(umq.UMQ_IO_TX)
        conn.recv()  # the parent has everything


@pytest.mark.libumq_behaviour
@pytest.mark.parametrize("flow_control", [None, umq.FlowControl(initial_window=8)], ids=["fc-off", "fc-on"])
def test_stream_between_processes_arrives_in_order(flow_control):
    parent_end, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=sender, args=(child_end, flow_control))
    child.start()
    try:
        with umq.Umq(flow_control=flow_control) as ctx:
            q = ctx.queue("parent", depth=32, trans_mode=umq.UMQ_TRANS_MODE_IPC)
            q.bind(parent_end.recv())
            parent_end.send(q.bind_info())
            q.post_recv(32, size=64)
            got = []
            for _ in range(2_000_000):
                if len(got) >= COUNT:
                    break
                rx = q.poll(umq.UMQ_IO_RX)
                got += [c.data for c in rx if c.data]
                q.post_recv(len(rx), size=64)
            assert got == [f"m{i}".encode() for i in range(COUNT)]
            if flow_control and umq.lib().has_extensions():
                assert q.ext_stats().rx_without_buffer == 0
            parent_end.send("done")
    finally:
        child.join(30)
    assert child.exitcode == 0
