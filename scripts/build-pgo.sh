#!/usr/bin/env bash
# Builds what ships (libumq.so, libumq.a, umq-perf, umq-info) with profile-guided optimization,
# as CPython's --enable-optimizations and rustc's own release builds are made: an instrumented
# build runs a training workload, and the release build is compiled again with the counts it
# wrote. The compiler then inlines and lays out code by what runs: the blocks a message takes sit
# together and the rest moves aside, so a round trip runs fewer instructions from fewer cache
# lines (docs/PERFORMANCE.md, "Instructions", has the figures).
#
#   scripts/build-pgo.sh [--quick]      -> target/pgo/release/
#
# The training is every provider this host offers (loopback, shared memory, the network over
# libfabric's tcp and over UCX when installed), each through umq-perf's ping-pong and stream,
# the base API, the reference's qps pattern and one-sided WRITE and READ, and a C program calling
# libumq.so (tools/so-pingpong/so_pingpong.c, both APIs, flow control on and off). --quick runs
# each for a tenth of the messages, enough for the counts' proportions (the test command's).
# Needs llvm-profdata of rustc's own LLVM: rustup's llvm-tools component, added when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
scale=10
[ "${1:-}" = "--quick" ] && scale=1

host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$(rustc --print sysroot)/lib/rustlib/$host/bin/llvm-profdata"
[ -x "$profdata" ] || rustup component add llvm-tools >/dev/null 2>&1 || true
if [ ! -x "$profdata" ]; then
  echo "build-pgo.sh: no llvm-profdata for rustc's LLVM ($profdata); rustup component add llvm-tools" >&2
  exit 2
fi

train=target/pgo-train
profiles=$(pwd)/$train/profiles
rm -rf "$profiles"
mkdir -p "$profiles"
# The flags join the ones .cargo/config.toml gives the host (a target table's flags add up).
with_flags() { cargo build --release --config "target.$host.rustflags=[\"$1\"]" --target-dir "$2"; }

echo "== build-pgo: the instrumented build"
with_flags "-Cprofile-generate=$profiles" "$train"

echo "== build-pgo: training"
perf=$train/release/umq-perf
n() { echo $(( $1 * scale )); }
# A run the host cannot make (a provider not installed) is left out of the training, said so.
run() { "$@" > /dev/null 2>&1 || echo "build-pgo: left out of the training (it failed here): $*"; }
run "$perf" --test all --iters "$(n 20000)"
run "$perf" --test lat --flow-control off --iters "$(n 20000)"
run "$perf" --test lat --api base --iters "$(n 10000)"
run "$perf" --test qps --iters "$(n 64000)"
run "$perf" --test rma --size 64,4096 --iters "$(n 5000)"
run "$perf" --provider shm --test all --iters "$(n 20000)"
run "$perf" --provider shm --test lat --loop app --iters "$(n 10000)"
run "$perf" --provider shm --test lat --api base --iters "$(n 10000)"
run "$perf" --provider shm --test rma --size 64,4096 --iters "$(n 5000)"
for engine in tcp ucx; do
  UMQ_FABRIC_PROVIDER=$engine run "$perf" --provider fabric --test all --iters "$(n 2000)"
done
so=$train/so-pingpong
mkdir -p "$so"
ln -sf "$(realpath "$train/release/libumq.so")" "$so/libumq.so.0"
gcc -O2 -I include/umq -o "$so/so_pingpong" tools/so-pingpong/so_pingpong.c \
  -L "$train/release" -lumq -Wl,-rpath,"$(realpath "$so")"
for provider in loopback shm; do
  for args in "on pro" "off pro" "on base"; do
    # shellcheck disable=SC2086 # the flow-control switch and the API, two words
    UMQ_PROVIDER=$provider run "$so/so_pingpong" "$(n 20000)" $args
  done
done
# Two processes as the reference's examples write them (c-tests/reference_pingpong.c): polling
# and interrupt mode, both APIs, over shared memory (ipc) and the network (ub).
gcc -O2 -I include/umq -o "$so/reference_pingpong" c-tests/reference_pingpong.c \
  -L "$train/release" -lumq -Wl,-rpath,"$(realpath "$so")"
ln -sf libumq.so.0 "$so/libumq_buf.so.0"
pair() {
  local ports=$so/ports port
  timeout 120 "$so/reference_pingpong" -s -p 0 "$@" > "$ports" 2>/dev/null &
  for _ in $(seq 100); do
    port=$(sed -n 's/^port //p' "$ports") && [ -n "$port" ] && break
    sleep 0.05
  done
  run timeout 120 "$so/reference_pingpong" -c 127.0.0.1 -p "${port:-0}" "$@"
  wait $! || true
}
for mode in ipc ub; do
  for wait in poll irq; do
    for api in pro base; do pair -m "$mode" -e "$wait" -a "$api" -n "$(n 2000)"; done
  done
done

echo "== build-pgo: the optimized build"
"$profdata" merge -o "$profiles/merged.profdata" "$profiles"/*.profraw
# UMQ_PGO_BUILD: umq-info says which build it is (src/info.rs).
UMQ_PGO_BUILD=1 with_flags "-Cprofile-use=$profiles/merged.profdata" target/pgo
echo "built with profile-guided optimization: target/pgo/release (libumq.so, libumq.a, umq-perf, umq-info)"
