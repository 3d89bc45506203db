#!/usr/bin/env bash
# Runs openEuler ubs-comm's `golden` ping-pong (UBSocket over UMQ) on the July 2026 build, two
# processes in two network namespaces joined by a veth pair (each end named bonding_dev_0,
# UBSocket's default device), and checks from a trace of the library's calls what UBSocket did:
#   the transport pool warmed up (800 resources), each side created a logic queue, and
#   - flow control on (ubs-comm's default): the first send was refused (EAGAIN); seen when
#     golden waits long enough: the credit answer out of the main queue's receive poll tagged
#     with the socket, and the send going;
#   - flow control off: the send went; seen when golden waits long enough: the 4 bytes in the
#     server's main queue tagged with its socket, and the client's poll of its main queue by
#     resource index taking the send completion.
# golden then fails in readv, as on any UMQ: UBSocket reads into brpc blocks only
# (docs/COMPAT.md). Not part of the test command: it needs a ubs-comm build.
#
# usage: scripts/ubs-comm/run.sh <ubs-comm tree, built> [on|off] [extra env...]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
ubs=${1:?ubs-comm tree}
fc=${2:-on}
shift $(( $# >= 2 ? 2 : 1 ))
lib="$root/target/abi-2026/release"
golden="$ubs/src/ubsocket/build/tools/golden/golden"
ubsocket="$ubs/src/ubsocket/build/csrc"
out=$(mktemp -d)
ns=(umq-ubs-a umq-ubs-b)
cleanup() {
    for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; done
    [ -n "${KEEP:-}" ] && cp -r "$out" "$KEEP"
    rm -rf "$out"
}
trap cleanup EXIT

[ -x "$golden" ] || { echo "no golden at $golden (build ubs-comm first)"; exit 2; }
[ -f "$lib/libumq.so" ] || { echo "no July build at $lib"; exit 2; }
gcc -shared -fPIC -O1 -I"$root/include/umq-2026" "$here/trace.c" -o "$out/trace.so" -ldl

for n in "${ns[@]}"; do ip netns del "$n" 2>/dev/null || true; ip netns add "$n"; done
ip link add umq-ubs-va type veth peer name umq-ubs-vb
ip link set umq-ubs-va netns "${ns[0]}"
ip link set umq-ubs-vb netns "${ns[1]}"
for i in 0 1; do
    n=${ns[$i]}
    ip netns exec "$n" ip link set "umq-ubs-v$([ $i = 0 ] && echo a || echo b)" name bonding_dev_0
    ip netns exec "$n" ip addr add "10.79.0.$((i + 1))/24" dev bonding_dev_0
    ip netns exec "$n" ip link set lo up
    ip netns exec "$n" ip link set bonding_dev_0 up
    # The kernel lacks openEuler's TCP_UB_SOCKET_HANDSHAKE: UBSocket's TCP Fast Open handshake.
    ip netns exec "$n" sysctl -q -w net.ipv4.tcp_fastopen=0x207
done

env=(LD_PRELOAD="$out/trace.so" LD_LIBRARY_PATH="$lib:$ubsocket" UBSOCKET_UB_HANDSHAKE_MODE=tfo
     UMQ_LOG_LEVEL=warn "$@")
[ "$fc" = off ] && env+=(UBSOCKET_FLOW_CONTROL_ENABLE=false)
# The server is pp-epoll's, which reads only once the socket is readable (pp's reads at once,
# fails, and exits before the client's credit answer can come); the client is pp's, which
# sends from a buffer of UBSocket's allocator (pp-epoll's sends from the stack, which
# UBSocket refuses before posting).
args=(--protocol=ub_rm_rtp --ip=10.79.0.1 --port=10001)
ip netns exec "${ns[0]}" env "${env[@]}" timeout 40 "$golden" pp-epoll "${args[@]}" --role=server \
    > "$out/server" 2>&1 &
sleep 3
ip netns exec "${ns[1]}" env "${env[@]}" timeout 30 "$golden" pp "${args[@]}" --role=client \
    > "$out/client" 2>&1 || true
sleep 2
kill %1 2>/dev/null || true
wait || true

show() { grep '^TRACE' "$out/$1" | grep -v 'tp_resource_create [1-7]00 made' | sed "s/^/$1: /"; }
show server; show client
failed=0
check() { if grep -Eq "$2" "$out/$1"; then echo "ok: $3"; else echo "FAILED: $3"; failed=1; fi; }
for side in server client; do
    check $side 'tp_resource_create 800 made' "$side warmed up 800 transport resources"
    check $side "create name='fd: [0-9]+' flag=0x27ff" "$side created a logic queue for its socket"
done
# golden gives up within a millisecond of its first failure (a retry after EAGAIN with a
# buffer UBSocket has freed by then, or a readv into the stack), and its process exits: what
# depends on a round trip after that is reported as seen or not, not required.
seen() { if grep -Eq "$2" "$out/$1"; then echo "seen: $3"; else echo "not seen (golden had exited): $3"; fi; }
if [ "$fc" = on ]; then
    check client 'post .* bytes=4 -> -11' "the first send waited for credit (EAGAIN)"
    seen client 'poll .* dir=rx .* status=192 .* ctx=[1-9]' "the credit answer, through the main queue, tagged with the socket"
    seen client 'post .* bytes=4 -> 0' "the send, once credit came"
else
    check client 'post .* bytes=4 -> 0' "the client's send went"
    seen server 'poll .* dir=rx .* status=0 bytes=4 ctx=[1-9]' "the 4 bytes in the server's main queue, tagged with its socket"
    seen client 'poll .* dir=tx tp_flag=1 tp=0 status=0 bytes=4' "the send completion, by the client's poll by resource"
fi
exit $failed
