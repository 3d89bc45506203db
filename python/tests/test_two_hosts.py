"""Two "hosts" over the network provider: a server and a client process in two network
namespaces these tests create, joined by a veth pair with addresses only inside them. The client
streams to the server with flow control on; then a test takes the link down mid-stream (both
sides must reach QUEUE_STATE_ERR within the liveness timeout, or, for an outage shorter than it,
stay READY with every message delivered once, in order), or kills one side with SIGKILL
(the other must reach it long before the liveness timeout: a killed process's kernel closes its
connections; it takes 8-9 ms here). The
server runs with another boot id (a private mount namespace with its own
/proc/sys/kernel/random/boot_id), so the client takes it for another host and cannot watch its
process. Needs root, iproute2, unshare and libfabric; runs once (not again in the suite's
forced-provider runs)."""

import os
import shutil
import subprocess
import sys
import time

import pytest

import umq

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER_IP, CLIENT_IP = "10.231.9.1", "10.231.9.2"
SERVER_IP6, CLIENT_IP6 = "fd00:231:9::1", "fd00:231:9::2"
SERVER_LINK, CLIENT_LINK = "fe80::231:1", "fe80::231:2"
LINK = (SERVER_LINK, CLIENT_LINK)
LIVENESS_MS = 1000

# What both ends' scripts start with: the side channel (the server listens, the client
# connects), and a queue's bind info swapped over it.
SIDE_CHANNEL = r"""
import socket, struct, sys, time
import umq
role, ip, peer_ip, port = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
# A link-local address comes with its zone (fe80::1%dev), which names its link. The server gives
# the library the address alone, which finds the one interface that holds it; the client gives
# it the zone too.
umq_ip = ip.split("%")[0] if role == "server" else ip


def side_channel():
    if role == "server":
        family = socket.AF_INET6 if ":" in ip else socket.AF_INET
        at = socket.getaddrinfo(ip, port, family, socket.SOCK_STREAM)[0][4]  # with its zone
        return socket.create_server(at, family=family).accept()[0]
    for _ in range(200):
        try:
            return socket.create_connection((peer_ip, port))
        except OSError:
            time.sleep(0.05)


def bind_over(sock, q):
    mine = q.bind_info()
    sock.sendall(struct.pack("<I", len(mine)) + mine)
    n = struct.unpack("<I", sock.recv(4, socket.MSG_WAITALL))[0]
    q.bind(sock.recv(n, socket.MSG_WAITALL))


# This side's queue, bound to the other's over the side channel, 32 receive buffers posted;
# and the side channel.
def bound_queue(ctx):
    q = ctx.queue(role, depth=64)
    sock = side_channel()
    bind_over(sock, q)
    q.post_recv(32, size=256)
    return q, sock
"""

ROLE = SIDE_CHANNEL + r"""
fc = umq.FlowControl(initial_window=16, notify_interval=8)
with umq.Umq(flow_control=fc, ip=umq_ip) as ctx:
    q, sock = bound_queue(ctx)
    assert q.transport_stats().transport == umq.UMQ_EXT_TRANSPORT_FABRIC
    moved, last, told = 0, time.monotonic(), False
    while q.state != umq.QUEUE_STATE_ERR:
        try:
            if role == "client":
                sent = q.send([b"m%d" % moved] * 4)
                moved += sent
                last = time.monotonic() if sent else last
                q.poll(umq.UMQ_IO_TX)
                if moved >= 2000 and not told:
                    # Established TCP connections of this namespace, by family.
                    up = [sum(l.split()[3] == "01" for l in open(f).readlines()[1:])
                          for f in ("/proc/net/tcp", "/proc/net/tcp6")]
                    print("streaming", *up, flush=True)
                    told = True
            else:
                got = q.poll(umq.UMQ_IO_RX)
                if got:
                    q.post_recv(len(got), size=256)
                    moved, last = moved + len(got), time.monotonic()
        except umq.UmqError:
            if q.state != umq.QUEUE_STATE_ERR:
                raise
        if time.monotonic() - last > 30:
            print("no error state 30 s after the last progress", flush=True)
            sys.exit(1)
    print("err %d %.3f %.6f" % (moved, time.monotonic() - last, time.monotonic()), flush=True)
"""


# A stream of `total` numbered messages, checked in order as they arrive; each side ends by
# saying how many it moved, how many came out of order or changed, and its queue's state.
COUNTED = SIDE_CHANNEL + r"""
total, req_timeout_ms = int(sys.argv[5]), int(sys.argv[6])
# (fc_req_timeout_ms is the July 2026 revision's: how long its posts wait for an answer to a
# credit request before they are refused with ETIMEDOUT. December's flow control has none.)
fc = umq.FlowControl(initial_window=16, notify_interval=8, fc_req_timeout_ms=req_timeout_ms)
with umq.Umq(flow_control=fc, ip=umq_ip) as ctx:
    q, sock = bound_queue(ctx)
    moved, wrong, told, refused = 0, 0, False, 0
    while moved < total and q.state != umq.QUEUE_STATE_ERR:
        if role == "client":
            try:
                moved += q.send([b"m%d" % (moved + i) for i in range(min(4, total - moved))])
            except umq.UmqError as e:
                if e.code != -110:  # UMQ_ERR_ETIMEOUT of the July 2026 revision
                    raise
                moved += e.bad_index or 0
                refused += 1
                time.sleep(0.01)
            q.poll(umq.UMQ_IO_TX)
            if moved >= 2000 and not told:
                print("streaming", flush=True)
                told = True
        else:
            got = q.poll(umq.UMQ_IO_RX)
            for c in got:
                wrong += c.data != b"m%d" % moved
                moved += 1
            if got:
                q.post_recv(len(got), size=256)
    state = q.state  # before the other side may have left, which would end the binding
    sock.sendall(b"x")  # each side leaves only once the other is done with the queues
    sock.recv(1)
    print("done %d %d %d %d" % (moved, wrong, state, refused), flush=True)
"""


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


OTHER_BOOT = ("echo 6f3c1e2a-0000-4000-8000-0000756d7121 > {f} && "
              "mount --bind {f} /proc/sys/kernel/random/boot_id && exec \"$@\"")


class Hosts:
    """The two namespaces and the processes started in them."""

    def __init__(self, tag, tmp):
        self.srv, self.cli = f"umq-s{tag}", f"umq-c{tag}"
        self.vs, self.vc = f"umqs{tag}", f"umqc{tag}"
        self.tmp = tmp
        self.procs = []

    def up(self):
        ip("netns", "add", self.srv)
        ip("netns", "add", self.cli)
        ip("link", "add", self.vs, "type", "veth", "peer", "name", self.vc)
        for ns, dev, addr, addr6 in ((self.srv, self.vs, SERVER_IP, SERVER_IP6),
                                     (self.cli, self.vc, CLIENT_IP, CLIENT_IP6)):
            ip("link", "set", dev, "netns", ns)
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
            ip("-n", ns, "addr", "add", f"{addr6}/64", "dev", dev, "nodad")
            ip("-n", ns, "addr", "add", f"{LINK[ns == self.cli]}/64", "dev", dev, "nodad")
            ip("-n", ns, "link", "set", dev, "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def start(self, role, env, family="inet", script=ROLE, *args):
        """`family`: "inet", "inet6", or "link" for the veth's link-local IPv6 addresses (each
        side's with its own veth as zone)."""
        dev = self.vs if role == "server" else self.vc
        server, client = {"inet": (SERVER_IP, CLIENT_IP), "inet6": (SERVER_IP6, CLIENT_IP6),
                          "link": (f"{SERVER_LINK}%{dev}", f"{CLIENT_LINK}%{dev}")}[family]
        ns, mine, peer = ((self.srv, server, client) if role == "server"
                          else (self.cli, client, server))
        cmd = [sys.executable, "-c", script, role, mine, peer, "7431", *args]
        if role == "server":
            fake = os.path.join(self.tmp, "boot_id")
            cmd = ["unshare", "--mount", "sh", "-c", OTHER_BOOT.format(f=fake), "sh", *cmd]
        p = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], stdout=subprocess.PIPE,
                             text=True, env=env)
        self.procs.append(p)
        return p

    def spawn(self, ns, cmd, **kw):
        p = subprocess.Popen(["ip", "netns", "exec", ns, *cmd], **kw)
        self.procs.append(p)
        return p

    def down(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for ns in (self.srv, self.cli):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


@pytest.fixture
def hosts(tmp_path):
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("unshare") is None:
        pytest.skip("needs root, iproute2 (ip netns) and unshare")
    if not os.path.exists("/usr/include/rdma/fabric.h"):
        pytest.skip("libumq built without libfabric's headers (libfabric-dev)")
    h = Hosts(str(os.getpid() % 100000), str(tmp_path))
    try:
        h.up()
        yield h
    finally:
        h.down()


def env(liveness_ms):
    return dict(os.environ, UMQ_PROVIDER="fabric", UMQ_FABRIC_LIVENESS_MS=str(liveness_ms),
                PYTHONPATH=os.path.join(HERE, ".."), UMQ_LOG_LEVEL="crit")


def streaming(hosts, liveness_ms, family="inet"):
    server = hosts.start("server", env(liveness_ms), family)
    client = hosts.start("client", env(liveness_ms), family)
    v6 = family != "inet"
    said = client.stdout.readline().split()
    assert said[0] == "streaming", said
    # The side channel and libfabric's connection (with the death watch's) all in one family.
    v4, v6s = int(said[1]), int(said[2])
    assert (v4, v6s > 0) == (0, True) if v6 else (v6s, v4 > 0) == (0, True), said
    return server, client


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_link_cut_mid_stream_ends_in_error_within_the_liveness_timeout(hosts):
    procs = streaming(hosts, LIVENESS_MS)
    ip("-n", hosts.cli, "link", "set", hosts.vc, "down")
    cut = time.monotonic()
    outs = [p.communicate(timeout=LIVENESS_MS / 1000 * 3 + 10)[0].split() for p in procs]
    took = time.monotonic() - cut
    for p, out in zip(procs, outs):
        assert p.returncode == 0 and out[0] == "err", out
        assert int(out[1]) >= 1000, out  # the stream really ran before the cut
    # Both noticed within the timeout plus the progress thread's tick and process exit.
    assert took < LIVENESS_MS / 1000 + 3, took


def flap(hosts, total, req_timeout_ms):
    """Streams `total` counted messages from the client to the server while the client's link
    goes down for a second (liveness timeout 5 s); returns what each side printed: done,
    messages moved, how many out of order, the queue's state, posts refused with ETIMEDOUT."""
    args = (str(total), str(req_timeout_ms))
    server = hosts.start("server", env(5000), "inet", COUNTED, *args)
    client = hosts.start("client", env(5000), "inet", COUNTED, *args)
    assert client.stdout.readline().split() == ["streaming"]
    ip("-n", hosts.cli, "link", "set", hosts.vc, "down")
    time.sleep(1.0)
    ip("-n", hosts.cli, "link", "set", hosts.vc, "up")
    procs = (server, client)
    outs = [p.communicate(timeout=60)[0].split() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    return outs


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_link_down_for_less_than_the_liveness_timeout_loses_nothing(hosts):
    """A link that goes down for a second and comes back, as a flapping port or a cable
    reseated does: TCP retransmits what was in flight, the queues stay READY, and every
    message arrives once, in order. (The first retransmission after the link is back comes
    within about 1.4 s of the cut, below the 5 s timeout.) On the July 2026 revision the credit
    requests wait 10 s for their answers here, so that only the liveness timeout is in play."""
    total = 30000
    server, client = flap(hosts, total, 10000)
    ready = str(umq.QUEUE_STATE_READY)
    assert server == ["done", str(total), "0", ready, "0"], server
    assert client == ["done", str(total), "0", ready, "0"], client


@pytest.mark.july
@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_credit_request_cut_off_by_a_link_flap_refuses_posts_until_its_answer_comes(hosts):
    """July 2026: a credit request the outage holds up past `fc_req_timeout_ms` (200 ms here,
    the link down for a second) refuses the sender's posts with ETIMEDOUT, the queue stays
    READY, and once the answer arrives over the link that came back the posts go on: every
    message arrives once, in order."""
    total = 30000
    server, client = flap(hosts, total, 200)
    ready = str(umq.QUEUE_STATE_READY)
    assert server == ["done", str(total), "0", ready, "0"], server
    assert client[:4] == ["done", str(total), "0", ready] and int(client[4]) >= 1, client


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.parametrize("victim,family", [("server", "inet"), ("client", "inet"),
                                           ("server", "inet6"), ("server", "link")])
def test_a_peer_killed_on_another_host_is_noticed_at_once(hosts, victim, family):
    """Also over IPv6 (the queues' addresses given as IPv6 text): the stream runs over the
    engine on the IPv6 addresses, and the death watch reaches the peer's IPv6 address; and over
    the veth's link-local addresses, whose link each side names or the library finds."""
    if family == "link" and os.environ.get("UMQ_FABRIC_PROVIDER") == "ucx":
        pytest.skip("UCX's tcp transport skips link-local addresses (docs/TRANSPORTS.md)")
    # A long liveness timeout: only the closed connection can explain a quick error.
    server, client = streaming(hosts, 60000, family)
    killed, survivor = (server, client) if victim == "server" else (client, server)
    killed.kill()
    at = time.monotonic()
    out = survivor.communicate(timeout=30)[0].split()
    assert survivor.returncode == 0 and out[0] == "err", out
    assert int(out[1]) >= 1000, out
    took_ms = (float(out[3]) - at) * 1000
    print(f"{victim} killed: the other side in ERR after {took_ms:.1f} ms")
    # Measured here: 8-9 ms. The bound is loose on purpose (a loaded machine must not fail it);
    # it is still far below the 60 s liveness timeout, so only the death watch can meet it.
    assert took_ms < 5000, took_ms


# Makes a queue on each address given; prints what each did.
ON_ADDRESSES = r"""
import sys
import umq
for ip in sys.argv[1:]:
    try:
        with umq.Umq(ip=ip) as ctx:
            ctx.queue("q")
        print("made", flush=True)
    except umq.UmqError as e:
        print(e.func, e.name, flush=True)
"""


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_link_local_address_on_two_links_needs_its_zone(hosts):
    """The address alone does not say which link is meant: the library refuses it, and takes it
    with a zone that names one of them, by name or by index."""
    # A second link in the server's namespace (a veth pair of its own) with the same address.
    ip("-n", hosts.srv, "link", "add", "umqd0", "type", "veth", "peer", "name", "umqd1")
    ip("-n", hosts.srv, "addr", "add", f"{SERVER_LINK}/64", "dev", "umqd0", "nodad")
    ip("-n", hosts.srv, "link", "set", "umqd0", "up")
    index = subprocess.run(["ip", "netns", "exec", hosts.srv, "cat",
                            f"/sys/class/net/{hosts.vs}/ifindex"],
                           capture_output=True, text=True, check=True).stdout.strip()
    p = hosts.spawn(hosts.srv, [sys.executable, "-c", ON_ADDRESSES, SERVER_LINK,
                                f"{SERVER_LINK}%{hosts.vs}", f"{SERVER_LINK}%{index}",
                                f"{SERVER_LINK}%umq-none0"],
                    stdout=subprocess.PIPE, text=True, env=env(1000))
    out = p.communicate(timeout=60)[0].splitlines()
    assert out == ["umq_init UMQ_ERR_EINVAL", "made", "made", "umq_init UMQ_ERR_EINVAL"], out


# Binds this side's queue (on the address argv[5] names, if given) to the other's; prints the
# bind's error name, or "bound".
BIND_ONLY = SIDE_CHANNEL + r"""
umq_ip = sys.argv[5] if len(sys.argv) > 5 else umq_ip
with umq.Umq(flow_control=True, ip=umq_ip) as ctx:
    q = ctx.queue(role, depth=64)
    sock = side_channel()
    try:
        bind_over(sock, q)
        print("bound", flush=True)
    except umq.UmqError as e:
        print(e.name, flush=True)
"""


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_queues_of_two_address_families_refuse_to_bind(hosts):
    """A queue on an IPv6 address and its peer on an IPv4 one cannot meet: both binds fail at
    once, with EINVAL and a log line naming both addresses (before, over libfabric the IPv6
    side's bind succeeded and its queue waited for a connection that never came)."""
    procs = [hosts.spawn(ns, [sys.executable, "-c", BIND_ONLY, role, mine, SERVER_IP6, "7438"],
                         stdout=subprocess.PIPE, text=True, env=env(1000))
             for ns, role, mine in ((hosts.srv, "server", SERVER_IP6),
                                    (hosts.cli, "client", CLIENT_IP))]
    said = [p.communicate(timeout=60)[0].split() for p in procs]
    assert said == [["UMQ_ERR_EINVAL"], ["UMQ_ERR_EINVAL"]], said


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
def test_a_bind_whose_own_endpoint_failed_says_why(hosts):
    """The server's queue names an address its host does not have: its endpoint cannot open,
    and its bind says so with the reason, not as a step the program skipped; the client's bind
    says the peer offers none."""
    logged = dict(env(1000), UMQ_LOG_LEVEL="err")
    procs = [hosts.spawn(ns, [sys.executable, "-c", BIND_ONLY, role, mine, SERVER_IP, "7439",
                              *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=logged)
             for ns, role, mine, extra in ((hosts.srv, "server", SERVER_IP, ["10.231.9.99"]),
                                           (hosts.cli, "client", CLIENT_IP, []))]
    (srv_out, srv_err), (cli_out, cli_err) = [p.communicate(timeout=60) for p in procs]
    assert (srv_out.split(), cli_out.split()) == (["UMQ_ERR_EINVAL"], ["UMQ_ERR_EINVAL"])
    assert "no network endpoint of our own: " in srv_err, srv_err
    assert "call umq_bind_info_get first" not in srv_err, srv_err
    assert "the peer offers no network endpoint" in cli_err, cli_err


PERF = os.path.join(HERE, "..", "..", "target", "release", "umq-perf")


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(not os.path.exists(PERF), reason="umq-perf not built (cargo build --release)")
def test_umq_perf_runs_between_two_hosts_as_server_and_client(hosts):
    import json
    server = hosts.spawn(hosts.srv, [PERF, "--server", "--port", "7432"], stderr=subprocess.PIPE,
                         text=True)
    # The client gives up on a server that is not listening yet, as perftest's do.
    assert "listening" in server.stderr.readline()
    out = subprocess.run(
        ["ip", "netns", "exec", hosts.cli, PERF, "--client", SERVER_IP, "--port", "7432",
         "--test", "all", "--size", "64,4096", "--iters", "3000", "--json"],
        capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines()]
    assert [(r["test"], r["size"]) for r in rows] == [
        ("lat", 64), ("bw", 64), ("lat", 4096), ("bw", 4096)]
    for r in rows:
        assert r["provider"] == "fabric" and r["flow_control"], r
        if r["test"] == "lat":
            assert 0 < r["p50_ns"] <= r["p99_ns"] <= r["p999_ns"], r
        else:
            assert r["msgs_per_s"] > 0, r
        # Both sides' flow-control counters agree: what one announced the other received.
        c, s = r["client_fc"], r["server_fc"]
        assert c["total_local_rx_notified"] == s["total_remote_rx_received"], r
        assert s["total_local_rx_notified"] == c["total_remote_rx_received"], r
    server.kill()
    # A server nobody answers for is reported as such, not as a crash.
    bad = subprocess.run(["ip", "netns", "exec", hosts.cli, PERF, "--client", "10.231.9.77",
                          "--port", "7433", "--test", "lat", "--iters", "10"],
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "cannot reach umq-perf --server" in bad.stderr, bad.stderr


def perf_between_hosts(hosts, port, *args, server_ip=SERVER_IP):
    """Runs `umq-perf --client` in the client's namespace against `umq-perf --server` in the
    server's (at `server_ip`); its JSON rows."""
    import json
    server = hosts.spawn(hosts.srv, [PERF, "--server", "--port", str(port)], stderr=subprocess.PIPE,
                         text=True)
    assert "listening" in server.stderr.readline()
    out = subprocess.run(
        ["ip", "netns", "exec", hosts.cli, PERF, "--client", server_ip, "--port", str(port), *args,
         "--json"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(not os.path.exists(PERF), reason="umq-perf not built (cargo build --release)")
def test_two_thousand_queue_pairs_bind_between_two_hosts(hosts):
    """Two processes on two hosts share one libfabric endpoint a side: 2,000 queue pairs bind
    between them and each carries a message each way. What binding them costs the client, per
    queue, is a share of its endpoint, not an endpoint (TRANSPORTS.md, "At scale"; the
    10,000-pair run is a documented command there)."""
    (row,) = perf_between_hosts(hosts, 7434, "--test", "scale", "--pairs", "2000", "--depth", "64",
                                "--iters", "200")
    print(row)
    assert row["provider"] == "fabric" and row["queues"] == 2000, row
    # One endpoint, one watch socket and a handful of fds for all 2,000 queues.
    assert row["fds_per_queue"] < 0.02, row
    # Issue's goal: at most 256 KiB grown a pair; an endpoint a queue was 72 MB.
    assert row["bytes_per_queue"] < 256 << 10, row
    assert row["sweep_ns"] > 0 and row["msg_ns"] > 0, row


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(not os.path.exists(PERF), reason="umq-perf not built (cargo build --release)")
@pytest.mark.parametrize("family", ["inet", "link"])
def test_writes_and_reads_reach_a_sleeping_target_on_another_host(hosts, family):
    """`umq-perf --test rma` against a target process on the other host that exposes a buffer
    and then sleeps on its connection to the server: every WRITE and READ completes (umq-perf
    checks each status, and that the target's buffer holds the last WRITE), each one-at-a-time
    WR having rung the target node's call bell (TRANSPORTS.md, "The call bell"). Also over the
    veth's link-local addresses: the client names the server's with its zone, and each side's
    queues take their own address's link."""
    if family == "link" and os.environ.get("UMQ_FABRIC_PROVIDER") == "ucx":
        pytest.skip("UCX's tcp transport skips link-local addresses (docs/TRANSPORTS.md)")
    server_ip = SERVER_IP if family == "inet" else f"{SERVER_LINK}%{hosts.vc}"
    rows = perf_between_hosts(hosts, 7435, "--test", "rma", "--size", "4096", "--iters", "200",
                              "--depth", "64", server_ip=server_ip)
    assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream"], rows
    assert all(r["provider"] == "fabric" for r in rows), rows
    # 200 WRITEs and 200 READs one at a time ring once each; the streams ring about once a
    # round trip of their WRs.
    assert rows[0]["calls_sent"] >= 400, rows[0]


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(not os.path.exists(PERF), reason="umq-perf not built (cargo build --release)")
def test_writes_and_reads_into_the_process_pool_of_another_host_go_by_rma(hosts):
    """The same against a buffer of the target's process pool: after the first WR taught the
    initiator the buffer's chunk, the WRs go by libfabric RMA (TRANSPORTS.md, "WRITE and READ
    by RMA"), and umq-perf still checks every status and the target's bytes."""
    rows = perf_between_hosts(hosts, 7436, "--test", "rma", "--size", "4096", "--iters", "200",
                              "--depth", "64", "--shared-pool", "off")
    assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream"], rows
    # The counter is the run's, on every row: the 200 one-at-a-time WRITEs and READs and the
    # streams' WRs, all but the first by RMA.
    assert rows[0]["one_sided_rma_wr"] >= 400, rows[0]


def tcp_payloads(pcap):
    """(seconds, new TCP payload bytes) of each IPv4 frame of an Ethernet pcap (tcpdump -w) of
    one direction, and the bytes frames carried again: the kernel's retransmissions (a tail
    loss probe fires when the receiver acknowledges late) are no departures of ours, and count
    only for the bytes they carry first in their connection."""
    import struct
    data = open(pcap, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    scale = 1e-9 if magic == 0xA1B23C4D else 1e-6
    out, at, again = [], 24, 0
    conns = {}  # by ports: the first sequence number seen, and the highest end since
    while at + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack("<IIII", data[at:at + 16])
        frame = data[at + 16:at + 16 + incl]
        at += 16 + incl
        if len(frame) < 54 or frame[12:14] != b"\x08\x00":
            continue
        ihl = (frame[14] & 0x0F) * 4
        total = struct.unpack(">H", frame[16:18])[0]
        tcp = 14 + ihl
        doff = (frame[tcp + 12] >> 4) * 4
        ports, seq = frame[tcp:tcp + 4], struct.unpack(">I", frame[tcp + 4:tcp + 8])[0]
        first, high = conns.setdefault(ports, (seq, 0))
        start, n = (seq - first) % (1 << 32), total - ihl - doff
        new = max(0, start + n - max(high, start))
        again += n - new
        conns[ports] = (first, max(high, start + n))
        if new:
            out.append((sec + frac * scale, new))
    return out, again


def windows(frames, window):
    """The payload bytes within the `window` seconds that end at each frame."""
    first, inside = 0, 0
    for t, n in frames:
        inside += n
        while t - frames[first][0] > window:
            inside -= frames[first][1]
            first += 1
        yield inside


def most_in_window(frames, window):
    """The most payload bytes within any `window` seconds."""
    return max(windows(frames, window))


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(not os.path.exists(PERF), reason="umq-perf not built (cargo build --release)")
@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="tcpdump not installed")
@pytest.mark.parametrize("rate", [100_000_000, 1_000_000_000])
def test_a_limited_queue_crosses_the_veth_as_packets(hosts, tmp_path, rate):
    """A queue limited to 100 Mbit/s or 1 Gbit/s (PMTU 4096) sends 64 KiB messages to the other
    host while tcpdump captures the client's veth: every message's bytes cross (the capture
    holds at least them all), spread over the time the rate calls for, and no window of one
    packet time holds more than two packets with their headers (a message sent whole would be
    16): the pacer grants a packet no sooner than a packet time and a quarter after the one
    before the last left, however late that one left, and grants none while the last waits in
    the kernel's hands (at 1 Gbit/s the receiver's acknowledgments come late at times, and what
    the socket held then left together: 15-30 packets in TCP frames of up to 65,160 bytes).
    A busy host can still stop the sending thread inside its send, after TCP counted a packet
    sent and before the veth saw it, and the next packets then cross right behind it: a window
    of three packets was seen once at 1 Gbit/s (a packet time is 33 us) in a full test run. So
    up to one window in a thousand may hold three or four packets; a message sent whole holds
    sixteen in one."""
    if rate >= 1_000_000_000 and os.environ.get("UMQ_FABRIC_PROVIDER") == "ucx":
        pytest.skip("UCX's engine keeps its sockets to itself, so its packets go as granted and "
                    "the kernel may hold and then send many at 1 Gbit/s (docs/PACING.md)")
    pcap = str(tmp_path / "wire.pcap")
    dump = hosts.spawn(hosts.cli, ["tcpdump", "-i", hosts.vc, "-w", pcap, "-U", "-s", "96", "-n",
                                   "tcp and src host " + CLIENT_IP + " and greater 200"],
                       stderr=subprocess.PIPE, text=True)
    assert "listening" in dump.stderr.readline()
    rows = perf_between_hosts(hosts, 7436, "--test", "pacing", "--wire", "--size", "65536",
                              "--rates", str(rate))
    (row,) = [r for r in rows if r["test"] == "pacing_wire"]
    time.sleep(1)  # tcpdump drops what it has not read yet when it stops
    dump.send_signal(2)
    print(dump.communicate(timeout=10)[1].strip().replace("\n", "; "))
    frames, again = tcp_payloads(pcap)
    packet_s = 4096 * 8 / rate
    sent = row["messages"] * 65536
    payload = sum(n for _, n in frames)
    burst = most_in_window(frames, packet_s)
    two = 2 * (4096 + 256)
    over = sum(1 for inside in windows(frames, packet_s) if inside > two)
    print(f"{len(frames)} frames, {payload} payload bytes for {sent} sent ({again} sent again); "
          f"most within one packet time {burst} bytes, {over} windows over two packets; at the "
          f"receiver {row['burst_bytes_max']}")
    assert row["packets"] == row["messages"] * 16, row
    assert payload >= sent, "the capture missed data"
    # A first packet that left late (its serve came late) is made up for, at most the pacer's
    # 10 ms (CATCH_UP_MS, docs/PACING.md), by the packets behind it: the span from the first
    # departure may be that much shorter than the schedule's.
    catch_up_s = 0.010
    span = frames[-1][0] - frames[0][0]
    assert span >= (row["packets"] - 2) * packet_s - catch_up_s, "faster than the limit"
    assert burst <= 2 * two, f"{burst} bytes within one packet time"
    assert over <= len(frames) // 1000, f"{over} windows of one packet time over two packets"


BESIDE = SIDE_CHANNEL + r"""
limit, COUNT = int(sys.argv[5]), int(sys.argv[6])
SIZE, BULK = 16384, 65536
with umq.Umq(flow_control=True, ip=umq_ip) as ctx:
    lim, bulk = ctx.queue(role + "-limited", depth=256), ctx.queue(role + "-bulk", depth=8)
    sock = side_channel()
    for q in (lim, bulk):
        bind_over(sock, q)
    deadline = time.monotonic() + 60
    if role == "server":
        lim.post_recv(256, size=SIZE)
        bulk.post_recv(8, size=BULK)
        sock.sendall(b"r")
        times, streamed, streamed_before = [], 0, 0
        stop, last = 0.0, None  # the longest this loop went between two polls, once it had data
        while len(times) < COUNT and time.monotonic() < deadline:
            rx = lim.poll(umq.UMQ_IO_RX)
            now = time.monotonic()
            if times:
                stop = max(stop, now - last)
            last = now
            if rx and not times:
                streamed_before = streamed
            times += [now for c in rx if c.data]
            if rx:
                lim.post_recv(len(rx), size=SIZE)
            b = bulk.poll(umq.UMQ_IO_RX)
            streamed += sum(1 for c in b if c.data)
            if b:
                bulk.post_recv(len(b), size=BULK)
        span = times[-1] - times[COUNT // 8]
        bits = (len(times) - 1 - COUNT // 8) * SIZE * 8
        beside = (streamed - streamed_before) * BULK * 8 / (times[-1] - times[0])
        print("limited %d %.0f bulk %.0f stop %.6f span %.6f" % (len(times), bits / span, beside,
                                                                 stop, span), flush=True)
        # Done; then stay until the client has stopped posting: leaving takes these queues
        # down, and a post the client made after that would fail on a queue in error.
        sock.sendall(b"d")
        sock.recv(1)
    else:
        lim.set_rate(limit)
        lim.set_pmtu(4096)
        sock.recv(1)
        big, msg, sent = bytes(BULK), bytes(SIZE), 0
        sock.setblocking(False)
        # The stream alone first, until its credit keeps as much queued as it ever will: the
        # limited queue's packets then wait behind a backlog that no longer grows.
        start = time.monotonic() + 0.5
        stop, last = 0.0, None  # the longest this loop went between two turns while it sent
        while time.monotonic() < deadline:
            now = time.monotonic()
            if sent < COUNT and now > start:
                if last is not None:
                    stop = max(stop, now - last)
                last = now
                sent += lim.send([msg] * min(8, COUNT - sent))
            bulk.send([big] * 4)
            lim.poll(umq.UMQ_IO_TX)
            bulk.poll(umq.UMQ_IO_TX)
            try:
                if sock.recv(1):
                    break
            except BlockingIOError:
                pass
        sock.setblocking(True)
        sock.sendall(b"k")
        print("stop %.6f" % stop, flush=True)
"""


@pytest.mark.libumq_behaviour
@pytest.mark.skipif(bool(os.environ.get("UMQ_PROVIDER")), reason="runs once, in the suite's first run")
@pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (iproute2)")
def test_a_limited_queue_keeps_its_rate_beside_a_stream_that_fills_the_link(hosts):
    """The client's veth is shaped to 200 Mbit/s (tbf), and two queue pairs join the two
    hosts over one connection: an unlimited queue streams 64 KiB messages as fast as the link
    takes them, so the client's socket always holds unsent bytes, while a queue limited to
    20 Mbit/s (on the default tick) sends 16 KiB messages. The limited queue still arrives at
    its rate: the pacer holds it only while its own newest packets wait in the socket, not while
    the stream's bytes before them do (TRANSPORTS.md, "Connections"; held for those, it ran at
    7 Mbit/s), and a packet time under two ticks costs it no rate (it ran at 15)."""
    subprocess.run(["ip", "netns", "exec", hosts.cli, "tc", "qdisc", "add", "dev", hosts.vc, "root",
                    "tbf", "rate", "200mbit", "burst", "32kb", "latency", "20ms"],
                   check=True, capture_output=True)
    limit, count = 20_000_000, 160  # about a second
    procs = []
    for role, ns, mine, peer in (("server", hosts.srv, SERVER_IP, CLIENT_IP),
                                 ("client", hosts.cli, CLIENT_IP, SERVER_IP)):
        procs.append(hosts.spawn(ns, [sys.executable, "-c", BESIDE, role, mine, peer, "7437",
                                      str(limit), str(count)],
                                 stdout=subprocess.PIPE, text=True, env=env(LIVENESS_MS)))
    out = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], out
    said, sender = out[0].split(), out[1].split()
    assert said[0] == "limited" and int(said[1]) == count, out
    achieved, bulk = float(said[2]), float(said[4])
    receiver_stop, span, sender_stop = float(said[6]), float(said[8]), float(sender[1])
    print(f"limited {achieved / 1e6:.2f} Mbit/s of {limit / 1e6:.0f}, beside {bulk / 1e6:.0f} "
          f"Mbit/s of the stream; longest stops: receiver {receiver_stop * 1e3:.1f} ms, "
          f"sender {sender_stop * 1e3:.1f} ms")
    # A busy host stops either process now and then. A stopped receiver finds packets late (the
    # span looks shorter or longer by up to its stop); a stopped sender sends nothing meanwhile.
    # On the slow side many short stops add up too: in full test runs the queue came out 11.5 %
    # and 14 % slow (longest stops 17 ms and 6 ms). Held behind the stream's bytes it ran 65 %
    # slow, on a short tick 25 %: the slow side's bound, 20 % and the longest stops, is between.
    assert achieved / limit < 1.1 + receiver_stop / span, out
    assert achieved / limit > 0.8 - (receiver_stop + sender_stop) / span, out
    assert bulk > 100e6, f"the stream did not fill the link: {out}"
