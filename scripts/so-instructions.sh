#!/usr/bin/env bash
# Instructions a 64 B ping-pong round trip runs in the API's calls (inclusive), counted through
# libumq.so as a C program links it (tools/so-pingpong/so_pingpong.c under callgrind): what C
# applications get, where umq-perf's counts (docs/PERFORMANCE.md, "Instructions") are of the
# crate linked into it. The pro API's calls are umq_post and umq_poll; the base API's
# umq_buf_alloc, umq_enqueue, umq_dequeue and umq_buf_free.
#
#   scripts/so-instructions.sh [--rounds N]     (default 10000)
#
# Runs the ping-pong for N and 2N round trips and takes the difference, so set-up cancels; for
# loopback and shm (two queues of one process): the pro API with flow control on and off, the
# base API with it on. Prints a line per run:
# `so_instructions api pro|base provider P flow_control on|off per_round_trip X`.
# LIBUMQ_DIR names the directory of the libumq.so to count (default target/release).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=10000
[ "${1:-}" = "--rounds" ] && rounds=$2
[ -n "${LIBUMQ_DIR:-}" ] || [ -f target/release/libumq.so ] || cargo build --release --quiet --lib
libdir=$(realpath "${LIBUMQ_DIR:-target/release}")
out=target/so-pingpong
mkdir -p "$out"
ln -sf "$libdir/libumq.so" "$out/libumq.so.0"
gcc -O2 -Wall -Wextra -Werror -I include/umq -o "$out/so_pingpong" tools/so-pingpong/so_pingpong.c \
  -L "$libdir" -lumq -Wl,-rpath,"$(realpath "$out")"

# The API's calls, inclusive, in one callgrind run of N round trips ($1 provider, $2 flow
# control, $3 API, $4 N): callgrind collects only inside those calls, and the file's total is
# their sum.
counted() {
  local file=$out/callgrind.$1.$2.$3.$4 calls=(umq_post umq_poll) toggles=()
  [ "$3" = base ] && calls=(umq_buf_alloc umq_enqueue umq_dequeue umq_buf_free)
  for c in "${calls[@]}"; do toggles+=(--toggle-collect="$c"); done
  UMQ_PROVIDER=$1 valgrind -q --tool=callgrind "${toggles[@]}" --callgrind-out-file="$file" \
    "$out/so_pingpong" "$4" "$2" "$3" > /dev/null 2> "$file.log" || { cat "$file.log"; exit 1; }
  awk '/^totals:/ { print $2 }' "$file"
}

for provider in loopback shm; do
  for run in "pro on" "pro off" "base on"; do
    read -r api fc <<< "$run"
    one=$(counted "$provider" "$fc" "$api" "$rounds")
    two=$(counted "$provider" "$fc" "$api" $((2 * rounds)))
    echo "so_instructions api $api provider $provider flow_control $fc per_round_trip $(( (two - one) / rounds ))"
  done
done
