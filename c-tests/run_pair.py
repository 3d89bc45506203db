#!/usr/bin/env python3
"""Runs a server and a client process of the program given first, with the options that
follow, the way the reference examples are run by hand: the server picks a TCP port and prints
"port N"; the client connects to 127.0.0.1:N. Fails unless both exit 0 within the time limit."""
import subprocess
import sys

TIMEOUT_S = 120


def main():
    exe, opts = sys.argv[1], sys.argv[2:]
    server = subprocess.Popen([exe, "-s", "-p", "0", *opts], stdout=subprocess.PIPE, text=True)
    try:
        first = server.stdout.readline().split()
        if len(first) != 2 or first[0] != "port":
            sys.exit(f"server did not print its port (got {first!r})")
        client = subprocess.run([exe, "-c", "127.0.0.1", "-p", first[1], *opts],
                                timeout=TIMEOUT_S, capture_output=True, text=True)
        sys.stdout.write(client.stdout)
        sys.stderr.write(client.stderr)
        server_out, _ = server.communicate(timeout=TIMEOUT_S)
        sys.stdout.write(server_out)
    finally:
        if server.poll() is None:
            server.kill()
    if client.returncode or server.returncode:
        sys.exit(f"client exited {client.returncode}, server exited {server.returncode}")


if __name__ == "__main__":
    main()
