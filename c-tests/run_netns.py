#!/usr/bin/env python3
"""Runs the program given first as a server on one "host" and a client on another: two network
namespaces this script creates, joined by a veth pair with addresses only inside them. Each side
names its own address in dev_info (-i) and every bind is forced onto the network provider
(UMQ_PROVIDER=fabric: namespaces share one kernel, so the library would otherwise choose shared
memory). Fails unless both exit 0 within the time limit. Needs root and iproute2; otherwise it
says why and exits 77, which meson counts as skipped. The namespaces go on every exit."""
import os
import shutil
import subprocess
import sys

from run_pair import run_server_then_client

SKIP = 77
SERVER_IP, CLIENT_IP = "10.231.7.1", "10.231.7.2"


def ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def make_hosts(tag):
    a, b = f"umq-srv-{tag}", f"umq-cli-{tag}"
    ip("netns", "add", a)
    ip("netns", "add", b)
    ip("link", "add", f"umqv{tag}a", "type", "veth", "peer", "name", f"umqv{tag}b")
    for ns, dev, addr in ((a, f"umqv{tag}a", SERVER_IP), (b, f"umqv{tag}b", CLIENT_IP)):
        ip("link", "set", dev, "netns", ns)
        ip("-n", ns, "addr", "add", f"{addr}/24", "dev", dev)
        ip("-n", ns, "link", "set", dev, "up")
        ip("-n", ns, "link", "set", "lo", "up")
    return a, b


def remove_hosts(tag):
    # Deleting a namespace deletes the veth end inside it, and with it the pair.
    for ns in (f"umq-srv-{tag}", f"umq-cli-{tag}"):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def main():
    exe, opts = sys.argv[1], sys.argv[2:]
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("SKIPPED: two-host test needs root and iproute2 (ip netns)")
        sys.exit(SKIP)
    tag = str(os.getpid() % 100000)
    env = dict(os.environ, UMQ_PROVIDER="fabric")
    try:
        a, b = make_hosts(tag)
        client, server = run_server_then_client(
            ["ip", "netns", "exec", a, exe, "-s", "-p", "0", "-i", SERVER_IP, *opts],
            lambda port: ["ip", "netns", "exec", b, exe, "-c", SERVER_IP, "-p", port, "-i", CLIENT_IP,
                          *opts],
            env)
    finally:
        remove_hosts(tag)
    if client or server:
        sys.exit(f"client exited {client}, server exited {server}")


if __name__ == "__main__":
    main()
