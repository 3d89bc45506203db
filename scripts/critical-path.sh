#!/usr/bin/env bash
# The responder's critical path of a 64 B network ping-pong over 127.0.0.1: from a message's
# receive system call returning to the reply's send system call, for our library over each
# network engine and for the engines' own ping-pongs (UCX's tag_lat over tcp and its UCT-level
# am_lat below UCP, libfabric's fi_pingpong over tcp's connected endpoints).
# tools/critical-path/recv_to_send.c, preloaded into both processes of each, times it with the
# TSC; the kernel's TCP and the peer are outside it.
#
#   scripts/critical-path.sh [--iters N]      (default 50000 round trips each)
#
# Prints one line: `critical_path` and, per program, the median over its two processes of
# each process's median interval in ns, then, as `<program>_send_ns` and `<program>_recv_ns`,
# the same medians of the send system call's own time and of a receive's that returned bytes,
# the kernel's share (a baseline that is not installed is left out).
set -euo pipefail
cd "$(dirname "$0")/.."
iters=50000
[ "${1:-}" = "--iters" ] && iters=$2
out=target/critical-path
mkdir -p "$out"
gcc -O2 -Wall -Wextra -shared -fPIC -o "$out/recv_to_send.so" tools/critical-path/recv_to_send.c -ldl
shim=$(pwd)/$out/recv_to_send.so
perf=${UMQ_PERF:-target/release/umq-perf}
[ -x "$perf" ] || cargo build --release --quiet --bin umq-perf

# The median of field $2's values that the processes of one run printed (their stderr is in
# $1): `p50_ns`, the receive to reply, `send_median_ns` or `receive_median_ns`, the calls'.
median_of() {
  grep '^recv_to_send ' "$1" | grep -o " $2 [0-9]*" | awk '{print $2}' | sort -n |
    awk '{v[NR]=$1} END {if (NR == 0) exit 1; print (NR % 2) ? v[(NR+1)/2] : int((v[NR/2]+v[NR/2+1])/2)}'
}

# Adds program $2's medians from log $1 to the line (the system calls' to `calls`).
note() {
  local p
  p=$(median_of "$1" p50_ns) && line+=" $2_ns $p"
  p=$(median_of "$1" send_median_ns) && calls+=" $2_send_ns $p"
  p=$(median_of "$1" receive_median_ns) && calls+=" $2_recv_ns $p"
}

# A free TCP port on 127.0.0.1 for a baseline's server.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# Waits up to 10 s for a socket listening on 127.0.0.1 port $1 (read from /proc/net/tcp: a
# probing connection would be taken for the baseline's client).
await_listener() {
  python3 - "$1" <<'PY'
import sys, time
want = "%04X" % int(sys.argv[1])
for _ in range(200):
    with open("/proc/net/tcp") as f:
        if any(l.split()[1].endswith(":" + want) and l.split()[3] == "0A" for l in f.readlines()[1:]):
            sys.exit(0)
    time.sleep(0.05)
sys.exit(1)
PY
}

# Runs a baseline's server in the background and its client against it, both preloaded: $1 the
# log, $2 and $3 the options that give the server and the client the port, then the command.
# A server whose client never came is stopped by its timeout.
pair() {
  local log=$1 server_port=$2 client_port=$3; shift 3
  local port; port=$(free_port)
  LD_PRELOAD=$shim timeout 120 "$@" "$server_port" "$port" > "$log.server" 2>&1 &
  local server=$!
  await_listener "$port" || true
  LD_PRELOAD=$shim "$@" "$client_port" "$port" 127.0.0.1 > "$log" 2>&1 || true
  wait "$server" || true
  cat "$log.server" >> "$log"
}

line="critical_path"
calls=""
for engine in tcp ucx; do
  log=$out/umq-$engine.log
  UMQ_FABRIC_PROVIDER=$engine LD_PRELOAD=$shim "$perf" --provider fabric --test lat --size 64 \
    --rounds 1 --iters "$iters" > "$log" 2>&1 || { echo "umq-perf over $engine failed:"; cat "$log"; exit 1; }
  median_of "$log" p50_ns > /dev/null || { echo "no timings from umq-perf over $engine:"; cat "$log"; exit 1; }
  note "$log" "umq_${engine}" || true
done
if command -v fi_pingpong > /dev/null; then
  pair "$out/fi_pingpong.log" -B -P fi_pingpong -p tcp -e msg -I "$iters" -S 64
  note "$out/fi_pingpong.log" fi_pingpong_msg || true
fi
if command -v ucx_perftest > /dev/null; then
  UCX_TLS=tcp pair "$out/ucx.log" -p -p ucx_perftest -t tag_lat -s 64 -n "$iters"
  note "$out/ucx.log" ucx_tag_lat || true
  # UCT's own active messages over tcp, below UCP: what an engine without UCP would start from.
  pair "$out/uct.log" -p -p ucx_perftest -t am_lat -x tcp -d lo -s 64 -n "$iters"
  note "$out/uct.log" uct_am_lat || true
fi
echo "$line$calls"
