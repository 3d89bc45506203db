"""Two "hosts" over the network provider: a server and a client process in two network
namespaces this test creates, joined by a veth pair with addresses only inside them. The client
streams to the server with flow control on; then the test takes the link down mid-stream and
both sides must reach QUEUE_STATE_ERR within the liveness timeout (no hang, no crash). Needs
root, iproute2 and libfabric; runs once (not again in the suite's forced-provider runs)."""

import os
import shutil
import subprocess
import sys
import time

import pytest

import umq

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP, CLIENT_IP = "10.231.9.1", "10.231.9.2"
LIVENESS_MS = 1000

ROLE = r"""
import socket, struct, sys, time
import umq
role, ip, peer_ip, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
fc = umq.FlowControl(initial_window=16, notify_interval=8)
with umq.Umq(flow_control=fc, ip=ip) as ctx:
    q = ctx.queue(role, depth=64)
    if role == "server":
        lsock = socket.create_server((ip, port))
        sock, _ = lsock.accept()
    else:
        for _ in range(200):
            try:
                sock = socket.create_connection((peer_ip, port))
                break
            except OSError:
                time.sleep(0.05)
    mine = q.bind_info()
    sock.sendall(struct.pack("<I", len(mine)) + mine)
    n = struct.unpack("<I", sock.recv(4, socket.MSG_WAITALL))[0]
    q.bind(sock.recv(n, socket.MSG_WAITALL))
    q.post_recv(32, size=256)
    assert q.transport_stats().transport == umq.UMQ_EXT_TRANSPORT_FABRIC
    moved, last, told = 0, time.monotonic(), False
    while q.state != umq.QUEUE_STATE_ERR:
        if role == "client":
            sent = q.send([b"m%d" % moved] * 4)
            moved += sent
            last = time.monotonic() if sent else last
            q.poll(umq.UMQ_IO_TX)
            if moved >= 2000 and not told:
                print("streaming", flush=True)
                told = True
        else:
            got = q.poll(umq.UMQ_IO_RX)
            if got:
                q.post_recv(len(got), size=256)
                moved, last = moved + len(got), time.monotonic()
        if time.monotonic() - last > 30:
            print("no error state 30 s after the last progress", flush=True)
            sys.exit(1)
    print("err %d %.3f" % (moved, time.monotonic() - last), flush=True)
"""


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_link_cut_mid_stream_ends_in_error_within_the_liveness_timeout():
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and iproute2 (ip netns)")
    if not os.path.exists("/usr/include/rdma/fabric.h"):
        pytest.skip("libumq built without libfabric's headers (libfabric-dev)")
    tag = str(os.getpid() % 100000)
    srv, cli, vs, vc = f"umq-s{tag}", f"umq-c{tag}", f"umqs{tag}", f"umqc{tag}"
    env = dict(os.environ, UMQ_PROVIDER="fabric", UMQ_FABRIC_LIVENESS_MS=str(LIVENESS_MS),
               PYTHONPATH=os.path.join(HERE, ".."), UMQ_LOG_LEVEL="crit")
    procs = []
    try:
        ip("netns", "add", srv)
        ip("netns", "add", cli)
        ip("link", "add", vs, "type", "veth", "peer", "name", vc)
        for ns, dev, addr in ((srv, vs, SERVER_IP), (cli, vc, CLIENT_IP)):
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")
        port = "7431"
        run = lambda ns, role, mine, peer: subprocess.Popen(  # noqa: E731
            ["ip", "netns", "exec", ns, sys.executable, "-c", ROLE, role, mine, peer, port],
            stdout=subprocess.PIPE, text=True, env=env)
        server = run(srv, "server", SERVER_IP, CLIENT_IP)
        procs.append(server)
        client = run(cli, "client", CLIENT_IP, SERVER_IP)
        procs.append(client)
        assert client.stdout.readline().strip() == "streaming"
        ip("-n", cli, "link", "set", vc, "down")
        cut = time.monotonic()
        outs = [p.communicate(timeout=LIVENESS_MS / 1000 * 3 + 10)[0].split() for p in procs]
        took = time.monotonic() - cut
        for p, out in zip(procs, outs):
            assert p.returncode == 0 and out[0] == "err", out
            assert int(out[1]) >= 1000, out  # the stream really ran before the cut
        # Both noticed within the timeout plus the progress thread's tick and process exit.
        assert took < LIVENESS_MS / 1000 + 3, took
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in (srv, cli):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
