#!/usr/bin/env python3
"""Runs a server and a client process of the program given first, with the options that
follow, the way the reference examples are run by hand: the server picks a TCP port and prints
"port N"; the client connects to 127.0.0.1:N. Fails unless both exit 0 within the time limit."""
import subprocess
import sys

TIMEOUT_S = 120


def run_server_then_client(server_argv, client_argv, env=None):
    """Starts the server, reads the "port N" it prints, runs the client (`client_argv(port)`),
    echoes both outputs; returns the two exit codes. The server is killed on any failure."""
    server = subprocess.Popen(server_argv, stdout=subprocess.PIPE, text=True, env=env)
    try:
        first = server.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            sys.exit(f"server did not print its port (got {first!r})")
        client = subprocess.run(client_argv(first[1]), timeout=TIMEOUT_S, capture_output=True,
                                text=True, env=env)
        sys.stdout.write(client.stdout)
        sys.stderr.write(client.stderr)
        server_out, _ = server.communicate(timeout=TIMEOUT_S)
        sys.stdout.write(server_out)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    return client.returncode, server.returncode


def main():
    exe, opts = sys.argv[1], sys.argv[2:]
    client, server = run_server_then_client(
        [exe, "-s", "-p", "0", *opts], lambda port: [exe, "-c", "127.0.0.1", "-p", port, *opts])
    if client or server:
        sys.exit(f"client exited {client}, server exited {server}")


if __name__ == "__main__":
    main()
