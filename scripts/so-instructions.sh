#!/usr/bin/env bash
# Instructions a 64 B ping-pong round trip runs in umq_post + umq_poll (inclusive), counted
# through libumq.so as a C program links it (tools/so-pingpong/so_pingpong.c under callgrind):
# what C applications get, where umq-perf's counts (docs/PERFORMANCE.md, "Instructions") are
# of the crate linked into it.
#
#   scripts/so-instructions.sh [--rounds N]     (default 10000)
#
# Runs the ping-pong for N and 2N round trips and takes the difference, so set-up cancels; for
# loopback and shm (two queues of one process), flow control on and off. Prints a line per
# run: `so_instructions provider P flow_control on|off per_round_trip X`.
# LIBUMQ_DIR names the directory of the libumq.so to count (default target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=10000
[ "${1:-}" = "--rounds" ] && rounds=$2
libdir=$(realpath "${LIBUMQ_DIR:-target/release}")
[ -f "$libdir/libumq.so" ] || cargo build --release --quiet --lib
out=target/so-pingpong
mkdir -p "$out"
ln -sf "$libdir/libumq.so" "$out/libumq.so.0"
gcc -O2 -Wall -Wextra -Werror -I include/umq -o "$out/so_pingpong" tools/so-pingpong/so_pingpong.c \
  -L "$libdir" -lumq -Wl,-rpath,"$(realpath "$out")"

# umq_post + umq_poll inclusive in one callgrind run of N round trips: callgrind collects only
# inside those calls, and the file's total is their sum.
counted() {
  local file=$out/callgrind.$1.$2.$3
  UMQ_PROVIDER=$1 valgrind -q --tool=callgrind --toggle-collect=umq_post --toggle-collect=umq_poll \
    --callgrind-out-file="$file" "$out/so_pingpong" "$3" "$2" > /dev/null 2> "$file.log" ||
    { cat "$file.log"; exit 1; }
  awk '/^totals:/ { print $2 }' "$file"
}

for provider in loopback shm; do
  for fc in on off; do
    one=$(counted "$provider" "$fc" "$rounds")
    two=$(counted "$provider" "$fc" $((2 * rounds)))
    echo "so_instructions provider $provider flow_control $fc per_round_trip $(( (two - one) / rounds ))"
  done
done
