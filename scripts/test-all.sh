#!/usr/bin/env bash
# Builds everything and runs every test: Rust (unit, integration, header check), then the C tests
# with meson against the freshly built libumq.so, then the Python suite when present.
# Installs meson / ninja (pip) if they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
# Each stage says how long the command has run so far, so a slow stage shows in the log.
stage() { echo "== $1 [${SECONDS} s in]"; }
# A Python test that hangs ends its run; python/tests/conftest.py leaves the test's name and its
# threads' tracebacks here (pytest keeps what it captured to itself), and they are shown on exit.
export UMQ_TEST_HANG_LOG="$root/target/pytest-hang.txt"
rm -f "$UMQ_TEST_HANG_LOG"
show_hang() { if [ -s "$UMQ_TEST_HANG_LOG" ]; then echo "== a Python test hung:"; cat "$UMQ_TEST_HANG_LOG"; fi; }
trap show_hang EXIT

# libfabric (headers and library) before the first build: the network provider's C shim is
# compiled against its headers, and a C test runs libfabric's own inline fi_tx_size_left on our
# endpoint. Without them the library still builds and serves loopback and shm.
if [ ! -e /usr/include/rdma/fi_endpoint.h ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libfabric-dev >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libfabric-dev >/dev/null 2>&1; } ||
    echo "libfabric-dev could not be installed: the network provider and libfabric's inline size_left test will be skipped"
fi

# UCX's headers likewise, for the network provider's second engine (UMQ_FABRIC_PROVIDER=ucx,
# src/transport/fabric/ucx.c); without them that engine reports what to install.
if [ ! -e /usr/include/ucp/api/ucp.h ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q libucx-dev >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q libucx-dev >/dev/null 2>&1; } ||
    echo "libucx-dev could not be installed: the network provider's UCX engine will be skipped"
fi

stage "cargo build + test"
# What ships (libumq.so, umq-perf, umq-info) in the release profile, with fat LTO; the Rust
# tests in release-tests, the same optimization without LTO (Cargo.toml says why).
cargo build --release
# 150 kills a provider in tests/fault_kill.rs, about 2 minutes here (its default, 1000, is the campaign that
# docs/RELIABILITY.md reports): the whole command stays within its 40 minutes. The exhaustive
# flow-control model (tests/flow_model.rs, 90 s) runs once, in the checked pass below, where
# the library's debug assertions run with it.
flow_model=(every_reachable_state_can_finish deeper_queues_with_a_control_budget_can_finish
  a_sender_that_only_sends_still_gets_everything_out the_checker_catches_the_reference_design)
UMQ_FAULT_RUNS=150 cargo test --profile release-tests --all-targets -- "${flow_model[@]/#/--skip=}" 2>&1 | tail -n +1
# The examples under their own names (the test build above keeps them only under hashed ones):
# python/tests/test_mac_control.py drives examples/mac_control.rs. No rebuild, well under a second.
cargo build --profile release-tests --examples
stage "cargo test again with debug assertions and overflow checks (profile release-checked)"
# The release-tests run neither checks the debug_assert! invariants nor catches an integer overflow.
# (The fault runs, 150 kills a provider in the release-tests run above, are cut to 50 here.) The
# fuzzing feature adds the replay of every fuzz corpus (tests/fuzz_corpus.rs).
UMQ_FAULT_RUNS=50 cargo test --profile release-checked --features fuzzing --lib --tests

stage "fuzz targets: every corpus under valgrind's memcheck, then AFL++ for a fixed number of executions"
# AddressSanitizer for Rust needs the nightly toolchain; memcheck sees every memory access of
# the library, instrumented or not. No leak scan: a queue's shared pool reserves a large
# address range that it would walk page by page (leaks are LeakSanitizer's, in the C pass).
if ! command -v valgrind >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q valgrind >/dev/null 2>&1; } || true
fi
cargo build --profile release-checked --features fuzzing --example fuzz_replay
if command -v valgrind >/dev/null; then
  for t in $(target/release-checked/examples/fuzz_replay --list); do
    log="target/fuzz-replay-$t.log"
    valgrind -q --leak-check=no --error-exitcode=99 target/release-checked/examples/fuzz_replay "$t" >"$log" 2>&1 ||
      { echo "memcheck failed replaying $t:"; tail -40 "$log"; exit 1; }
    tail -1 "$log"
  done
else
  echo "SKIPPED: the corpora under memcheck: valgrind not found and could not be installed"
fi
scripts/fuzz.sh --execs 20000

stage "shared library names"
lib="$root/target/release"
ln -sf libumq.so "$lib/libumq.so.0"
ln -sf libumq.so "$lib/libumq_buf.so"
readelf -d "$lib/libumq.so" | grep -q 'SONAME.*libumq.so.0'
# A failing nm fails the script; grep's "nothing found" (exit 1) is the only pass.
symbols=$(nm -D --defined-only "$lib/libumq.so" | awk '{print $3}')
exported=$(grep -v -e '^umq_' -e '^fi_[rt]x_size_left$' <<<"$symbols" || [ $? = 1 ])
if [ -n "$exported" ]; then echo "unexpected exported symbols: $exported"; exit 1; fi
echo "soname libumq.so.0, $(grep -c '^umq_' <<<"$symbols") umq_* symbols exported"
# umq-info names exactly what the library exports: the 34 UMQ functions and our extensions.
"$lib/umq-info" --json | python3 -c 'import json,sys; r=json.load(sys.stdin); listed=sorted(r["functions"]+r["extensions"]); exported=sorted(sys.argv[1].split()); assert listed == exported, (set(listed) ^ set(exported)); print("umq-info lists the", len(listed), "exports")' "$symbols"

stage "the July 2026 ABI: the second build (cargo --features abi-2026) and its core tests"
# Its own target directory: the same crate with other exports, and libumq.so of the default
# build stays the December one. Its C tests run with the meson suite below.
lib2026="$root/target/abi-2026/release"
CARGO_TARGET_DIR=target/abi-2026 cargo build --release --features abi-2026 -p umq --lib
# Its core tests in release-tests and the default target directory: the dependencies built for
# the tests above serve again and only the crate rebuilds (a test binary overwrites no library).
UMQ_FAULT_RUNS=100 cargo test --profile release-tests --features abi-2026 -p umq --lib 2>&1 | tail -n 3
ln -sf libumq.so "$lib2026/libumq.so.0"
ln -sf libumq.so "$lib2026/libumq_buf.so"
readelf -d "$lib2026/libumq.so" | grep -q 'SONAME.*libumq.so.0'
symbols2026=$(nm -D --defined-only "$lib2026/libumq.so" | awk '{print $3}')
# Every function the original July 2026 headers declare (their prototypes are checked against
# ours in c-tests/test_layout_2026.c).
for f in $(tail -n +2 tests/data/abi-2026/functions.tsv | cut -f1); do
  grep -qx "$f" <<<"$symbols2026" || { echo "the abi-2026 build does not export $f"; exit 1; }
done
if grep -qx umq_dfx_cmd_process <<<"$symbols2026"; then echo "the abi-2026 build exports December's umq_dfx_cmd_process"; exit 1; fi
echo "abi-2026: soname libumq.so.0, $(grep -c '^umq_' <<<"$symbols2026") umq_* symbols exported"

stage "umq-perf smoke run (proves it runs; no timing is asserted)"
"$lib/umq-perf" --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert {r["test"] for r in rows} == {"bw", "lat", "fc"}, rows; print(len(rows), "result lines")'
"$lib/umq-perf" --provider shm --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert {r["test"] for r in rows} >= {"bw", "lat"} and all(r["provider"] == "shm" for r in rows), rows; print(len(rows), "result lines over shm")'
# The reference qps tool's pattern (the same 64-buffer list posted every round) on both providers.
for p in loopback shm; do
  "$lib/umq-perf" --provider $p --test qps --iters 20000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 1 and rows[0]["test"] == "qps" and rows[0]["msgs_per_s"] > 0, rows; print("qps over", rows[0]["provider"] + ": ok")'
done
# The loop applications write (IPC queues, 256 receive buffers, TX then RX polled on their own).
timeout 120 "$lib/umq-perf" --provider shm --test lat --loop app --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 1 and rows[0]["loop"] == "app" and rows[0]["rx_bufs"] == 256, rows; print("application loop over shm: ok")'
# One receive buffer per side, as fi_pingpong posts: flow control must still ping-pong (a
# deadlock here once); the timeout turns a hang into a failure.
timeout 120 "$lib/umq-perf" --provider shm --test lat --rx-bufs 1 --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 1 and rows[0]["rx_bufs"] == 1, rows; print("window of one over shm: ok")'

# One-sided WRITE and READ against a target that runs nothing of ours meanwhile: over shm the
# initiator carries every one out itself, through the target queue's shared pool mapped here
# (the default) or through the kernel (--shared-pool off); the target's buffer must hold the
# last WRITE (umq-perf asserts it). Times are reported, not asserted.
"$lib/umq-perf" --test rma --size 64 --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream"] and all(r["provider"] == "loopback" for r in rows), rows; print("rma over loopback: ok")'
for pool in on off; do
  timeout 120 "$lib/umq-perf" --provider shm --test rma --size 64,4096 --iters 2000 --shared-pool $pool --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; mapped=sys.argv[1] == "on"; assert len(rows) == 8 and all(r["provider"] == "shm" for r in rows), rows; n=rows[-1]["one_sided_mapped_wr" if mapped else "one_sided_kernel_wr"]; assert n > 4 * 2000 and rows[-1]["one_sided_kernel_wr" if mapped else "one_sided_mapped_wr"] == 0, rows[-1]; print("rma over shm,", "mapped" if mapped else "by the kernel", ":", n, "WRs carried out by the initiator")' $pool
done
# A put ping-pong over shm (as ucp_put_lat): each side waits for the other's WRITE in its memory.
timeout 120 "$lib/umq-perf" --provider shm --test rma --size 64 --iters 2000 --target poll --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream", "write_pingpong"] and rows[-1]["mean_ns"] > 0, rows; print("put ping-pong over shm:", rows[-1]["mean_ns"], "ns one way")'

# Queue scale: 10,000 bound loopback pairs at depth 64, each queue within 64 KiB of resident
# memory and holding no fd (no shared memory for a pair in one process), a message each way
# through every pair. Memory is counted, not timed.
timeout 600 "$lib/umq-perf" --test scale --depth 64 --pairs 10000 --iters 20000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; r=rows[0]; assert len(rows) == 1 and r["queues"] == 20000, rows; assert r["bytes_per_queue"] <= 65536, r; assert r["fds_per_queue"] == 0, r; print("scale: 20000 queues,", r["bytes_per_queue"], "bytes each")'
# The same over shared memory, 2,000 pairs between two processes: within 256 KiB a queue (its
# proportional share of the pages it shares with its peer) and one fd.
timeout 600 "$lib/umq-perf" --test scale --provider shm --depth 64 --pairs 2000 --iters 20000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; r=rows[0]; assert len(rows) == 1 and r["queues"] == 2000, rows; assert r["bytes_per_queue"] <= 262144, r; assert r["fds_per_queue"] <= 1.01, r; print("scale over shm: 2000 queues,", r["bytes_per_queue"], "bytes each")'

# The pacing machine on a virtual clock with a million limited queues: every queue's rate
# within 0.5 % (in fact about 1e-10), the wheel and the heap granting the same packets (umq-perf
# asserts it). Times are reported, not asserted.
timeout 600 "$lib/umq-perf" --test pacing --queues 1000,1000000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["queues"] for r in rows] == [1000, 1000000], rows; assert all(r["rate_error_max"] < 0.005 and r["packets"] > 0 and r["bytes_per_queue"] < 256 for r in rows), rows; print("pacing: 1e6 queues,", rows[1]["sched_ns_per_packet"], "ns a packet (heap", rows[1]["heap_ns_per_packet"], "ns)")'

# Link-level pause between two processes: the slow priority-3 receiver pauses and resumes it by
# itself, priority 0 is never held up by it, nothing is lost; under --storm the watchdog trips.
timeout 120 "$lib/umq-perf" --provider shm --test pfc --size 1024 --json | python3 -c 'import json,sys; rows={r["priority"]: r for r in map(json.loads, sys.stdin)}; p0, p3 = rows[0], rows[3]; assert p3["pause_frames_sent"] >= 2 and p3["pause_frames_received"] >= 2 and p3["paused_ms"] > 500, p3; assert p0["msgs_per_s"] > 10 * p3["msgs_per_s"], rows; assert p0["lost"] == p3["lost"] == 0 and p3["watchdog_trips"] == 0, rows; print("pfc: priority 3 paused", p3["paused_ms"], "ms by", p3["pause_frames_sent"], "frames; priority 0 at", p0["msgs_per_s"], "msgs/s")'
timeout 120 "$lib/umq-perf" --provider shm --test pfc --size 1024 --storm --json | python3 -c 'import json,sys; rows={r["priority"]: r for r in map(json.loads, sys.stdin)}; p3 = rows[3]; assert p3["watchdog_trips"] == 1 and p3["pause_frames_received"] >= 10, p3; assert rows[0]["lost"] == p3["lost"] == 0, rows; print("pfc --storm: the watchdog tripped once, after", p3["paused_ms"], "ms paused")'

# Locked instructions a message (docs/PERFORMANCE.md, "Instructions"): the loopback ping-pong's
# come from the API calls' queue locks, which callgrind's per-instruction counts find (a post's
# may sit in the send or receive post it calls, a poll's in the path `umq_poll` jumps to); the
# figures are printed, the count checked to be there.
if command -v valgrind >/dev/null && command -v objdump >/dev/null; then
  UMQ_PERF="$lib/umq-perf" timeout 300 "$root/scripts/locked-instructions.py" --iters 300 -- --test lat --size 64 | python3 -c 'import sys; lines=sys.stdin.read().splitlines(); k, v = lines[0].split(); assert k == "locked_instructions_per_message" and float(v) > 0, lines; fns=" ".join(lines[1:]); assert any(f in fns for f in ("umq_poll", "poll_one", "poll_whole")) and any(f in fns for f in ("umq_post", "post_tx", "post_rx")), lines; print("locked instructions a message, loopback ping-pong:", v)'
  # The same ping-pong's instructions through libumq.so, as a C program links it, by either API
  # (the program checks every byte it receives); flow control's work must show.
  LIBUMQ_DIR="$lib" timeout 300 "$root/scripts/so-instructions.sh" --rounds 500 | python3 -c 'import sys; rows=[l.split() for l in sys.stdin.read().splitlines()]; v={(r[2], r[4], r[6]): int(r[8]) for r in rows}; assert sorted(v) == sorted((a, p, f) for p in ("loopback", "shm") for a, f in (("pro", "on"), ("pro", "off"), ("base", "on"))), rows; assert all(v[("pro", p, "on")] > v[("pro", p, "off")] > 0 and v[("base", p, "on")] > 0 for p in ("loopback", "shm")), v; print("instructions a round trip through libumq.so:", v)'
  # Its idle mode: receive polls of a queue to which nothing comes, after its round trips
  # (docs/TRANSPORTS.md, "Latency": a poll that finds nothing). Every one must find nothing.
  for p in loopback shm; do
    UMQ_PROVIDER=$p timeout 60 "$root/target/so-pingpong/so_pingpong" 20000 on pro idle | grep -E '^so_pingpong: 20000 idle receive polls, flow control on, [0-9.]+ ns a poll$'
  done
else
  echo "SKIPPED: locked instructions a message and instructions through libumq.so: valgrind or objdump not found"
fi

# tcpdump shows a rate-limited queue's packets on the veth between two namespaces
# (python/tests/test_two_hosts.py).
if ! command -v tcpdump >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q tcpdump >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q tcpdump >/dev/null 2>&1; } || true
fi

# UCX's ucx_perftest is the second shared-memory baseline (`umq-perf --compare ucx`).
if ! command -v ucx_perftest >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q ucx-utils >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q ucx-utils >/dev/null 2>&1; } || true
fi
if command -v ucx_perftest >/dev/null; then
  timeout 300 "$lib/umq-perf" --provider shm --test lat --iters 2000 --compare ucx --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 1 and rows[0]["ucx_tag_lat_mean_ns"] > 0 and rows[0]["mean_vs_ucx"] > 0, rows; print("ucx baseline over shm: ok")'
  timeout 300 "$lib/umq-perf" --provider shm --test rma --size 4096 --iters 2000 --compare ucx --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; compared=[r for r in rows if "ucx_test" in r]; assert [r["ucx_test"] for r in compared] == ["ucp_put_lat", "ucp_put_bw", "ucp_get"], rows; assert all(r.get("mean_vs_ucx", r.get("msgs_vs_ucx", 0)) > 0 for r in compared), compared; print("ucx one-sided baselines over shm: ok")'
else
  echo "SKIPPED: umq-perf --compare ucx smoke run: ucx_perftest not found, ucx-utils could not be installed"
fi

# The network provider (libfabric tcp on this host), with UCX's tcp transport as the baseline.
if [ -e /usr/include/rdma/fabric.h ]; then
  timeout 300 "$lib/umq-perf" --provider fabric --test all --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert {r["test"] for r in rows} == {"bw", "lat"} and all(r["provider"] == "fabric" for r in rows), rows; print(len(rows), "result lines over the network provider")'
  # The responder's critical path (docs/TRANSPORTS.md, "Latency: where the time goes"): the
  # preloaded timer sees both processes of each ping-pong; figures printed, not judged.
  UMQ_PERF="$lib/umq-perf" timeout 300 "$root/scripts/critical-path.sh" --iters 2000 | python3 -c 'import sys; (l,)=sys.stdin.read().split("\n")[:-1]; f=l.split(); assert f[0] == "critical_path", l; v=dict(zip(f[1::2], map(int, f[2::2]))); assert v["umq_tcp_ns"] > 0 and v["umq_ucx_ns"] > 0, v; print("receive to reply, ns:", v)'
  # A limited queue over the network never runs faster than its limit (docs/PACING.md): the
  # goal, 0.5 %, on the fast side only (the machine's stalls slow a run down), plus what the
  # receiver's longest stop can shorten the stream by where the rate is taken (a stop as the
  # first packets arrive). A queue that made up its first send's wait, libfabric setting up
  # its buffers, ran 0.75-0.88 % fast.
  timeout 120 "$lib/umq-perf" --provider fabric --test pacing --wire --size 65536 --rates 100000000 --json | python3 -c 'import json,sys; (r,)=[r for r in map(json.loads, sys.stdin) if r["test"] == "pacing_wire"]; assert r["provider"] == "fabric" and r["packets"] == 16 * r["messages"] and r["rate_error"] < 0.005 + r["receiver_stop_max_us"] * 1e-6 / (r["packets"] * 4096 * 8 / r["rate_bps"]), r; print("fabric pacing --wire: burst", r["burst_bytes_max"], "B within a packet time,", r["burst_bytes_max_timed"], "B over the packets timed, rate error", r["rate_error"])'
  # The short version of the 10,000-pair campaign (docs/TRANSPORTS.md, "At scale"): every queue
  # of a process shares one endpoint, so a queue costs kilobytes and no fd of its own.
  timeout 300 "$lib/umq-perf" --provider fabric --test scale --pairs 1000 --depth 64 --iters 200 --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["queues"] == 1000 and r["fds_per_queue"] < 0.02 and r["bytes_per_queue"] < 256 << 10, r; print("fabric scale, 1000 pairs:", r["bytes_per_queue"], "B and", r["fds_per_queue"], "fds a queue,", r["setup_us_per_pair"], "us a pair")'
  # A ping-pong beside a 64 KiB stream over the same connection (docs/TRANSPORTS.md, "Queues
  # beside each other on one connection"): every message arrives, in order; the figures are
  # printed, not judged (a timing on a shared host).
  timeout 120 "$lib/umq-perf" --provider fabric --test beside --size 65536 --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["provider"] == "fabric" and r["lost"] == 0 and r["stream_msgs_per_s"] > 0, r; print("fabric beside: ping", r["ping_alone_half_rtt_ns"], "ns alone,", r["ping_beside_half_rtt_ns"], "ns beside a stream of", r["stream_msgs_per_s"], "msgs/s")'
  # The same beside a stream of 1 MiB WRITEs and of READs by libfabric RMA (docs/TRANSPORTS.md,
  # "Long WRITEs and READs in pieces"): they went by RMA, and every WR completed.
  for op in write read; do
    timeout 120 "$lib/umq-perf" --provider fabric --test beside --size 1048576 --stream $op --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["lost"] == 0 and r["one_sided_rma_wr"] > 0 and r["stream_msgs_per_s"] > 0, r; print("fabric beside", r["stream"], "by RMA: ping", r["ping_alone_half_rtt_ns"], "ns alone,", r["ping_beside_half_rtt_ns"], "ns beside", r["stream_msgs_per_s"], "WRs/s of 1 MiB")'
  done
  # 8 MiB WRITEs alone go in lone pieces, at most 2 MiB in libfabric: a ping every 20 ms beside
  # them waits behind that much (TRANSPORTS.md, "Long WRITEs and READs in pieces").
  timeout 120 "$lib/umq-perf" --provider fabric --test beside --size 8388608 --stream write --ping-every 20 --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["lost"] == 0 and r["one_sided_rma_wr"] > 0 and r["ping_every_ms"] == 20, r; print("fabric beside 8 MiB WRITEs alone, a ping every 20 ms:", r["ping_beside_half_rtt_ns"], "ns half round trip (alone", r["ping_alone_half_rtt_ns"], "ns),", r["stream_msgs_per_s"], "WRs/s")'
  # 1 MiB READs alone, a ping every 20 ms beside them: libfabric's tcp answers READs before
  # anything the peer sends, so the READs pause every few milliseconds to let its echo through
  # (TRANSPORTS.md, "A READ stream pauses for the peer's messages").
  timeout 120 "$lib/umq-perf" --provider fabric --test beside --size 1048576 --stream read --ping-every 20 --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["lost"] == 0 and r["one_sided_rma_wr"] > 0 and r["pings_beside"] > 0, r; print("fabric beside 1 MiB READs alone, a ping every 20 ms:", r["pings_beside"], "pings, median", r["ping_beside_half_rtt_ns"], "ns, longest", r["ping_beside_max_ns"], "ns half round trip,", r["stream_msgs_per_s"], "WRs/s")'
  # A READ stream longer than the liveness timeout: the target's answers are word from it, as
  # nothing else of its can reach us meanwhile (TRANSPORTS.md, "Liveness").
  UMQ_FABRIC_LIVENESS_MS=300 timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 1048576 --iters 3000 --shared-pool off --target poll --json | python3 -c 'import json,sys; rows={r["op"]: r for r in map(json.loads, sys.stdin)}; r=rows["read_stream"]; assert r["one_sided_rma_wr"] > 4 * 3000, rows; print("fabric 3000 READs of 1 MiB at", r["msgs_per_s"], "WRs/s past a 300 ms liveness timeout: the binding holds")'
  # The same against a target whose application runs nothing of ours: its progress thread
  # serves the RMA as bytes arrive on the connection (TRANSPORTS.md, "A target asleep").
  timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 65536,1048576 --iters 500 --shared-pool off --target sleep --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 8 and all(r["one_sided_rma_wr"] > 4 * 500 for r in rows), rows; fig={(r["size"], r["op"]): r.get("mean_ns", r.get("gbytes_per_s")) for r in rows}; print("rma over the network, target asleep: 64 KiB WRITE stream", fig[(65536, "write_stream")], "GB/s; 1 MiB READ", fig[(1048576, "read")], "ns, READ stream", fig[(1048576, "read_stream")], "GB/s")'
  # Into a shared-pool buffer they go as messages its library runs: a WR held back for room
  # in libfabric calls it, and the ring has it watch the connection (TRANSPORTS.md, "The call
  # bell"); a 1 MiB WRITE had never finished.
  timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 65536,1048576 --iters 200 --target sleep --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 8 and all(r["one_sided_rma_wr"] == 0 for r in rows), rows; fig={(r["size"], r["op"]): r.get("mean_ns", r.get("msgs_per_s")) for r in rows}; print("WRITEs and READs as messages into a sleeping target, its thread called and watching: 1 MiB WRITE", fig[(1048576, "write")], "ns, 64 KiB WRITE stream", fig[(65536, "write_stream")], "WRs/s")'
  # One-sided WRITE and READ by RMA against a target that polls (as UCX's responder does), and
  # a put ping-pong with it (as ucp_put_lat): each side waits for the other's WRITE in its memory.
  # The WRITE stream goes as messages, bundled, since the polling target answers them unasked
  # (TRANSPORTS.md, "Longer WRITEs in a stream follow the target"), and so do the put
  # ping-pong's WRITEs, their answers carried by the replies ("Answers ride on replies"): three
  # rows' WRs by RMA.
  timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 4096 --iters 500 --shared-pool off --target poll --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream", "write_pingpong"] and rows[-1]["one_sided_rma_wr"] > 3 * 500 and rows[-1]["mean_ns"] > 0, rows; print("rma over the network, target polling:", rows[-1]["one_sided_rma_wr"], "WRs by libfabric RMA (the put ping-pong goes as messages, their answers on the replies); put ping-pong", rows[-1]["mean_ns"], "ns one way")'
  if command -v ucx_perftest >/dev/null; then
    timeout 300 "$lib/umq-perf" --provider fabric --test lat --iters 2000 --compare ucx --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 1 and rows[0]["ucx_tls"] == "tcp" and rows[0]["ucx_tag_lat_mean_ns"] > 0, rows; print("ucx tcp baseline over the network provider: ok")'
    timeout 300 "$lib/umq-perf" --provider fabric --test bw --size 4096 --iters 2000 --compare ucx --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["ucx_tls"] == "tcp" and r["ucx_tag_bw_msgs_per_s"] > 0 and r["msgs_vs_ucx"] > 0, r; print("ucx tcp stream baseline (tag_bw) over the network provider: ok")'
  fi
else
  echo "SKIPPED: umq-perf --provider fabric smoke runs: libfabric-dev is not installed"
fi

stage "C tests (meson)"
if ! command -v meson >/dev/null || ! command -v ninja >/dev/null; then
  python3 -m pip install --quiet meson ninja
fi
if [ ! -e /usr/include/rdma/fi_endpoint.h ]; then
  echo "SKIPPED: fi_libfabric_inline (libfabric's own inline fi_tx_size_left on our endpoint): rdma/fi_endpoint.h not found, libfabric-dev is not installed"
fi
rm -rf build-c
meson setup build-c -Dlibdir_rust="$lib" -Dlibdir_rust_2026="$lib2026" >/dev/null
meson test -C build-c --print-errorlogs
stage "C tests again under AddressSanitizer and LeakSanitizer"
# The tests' own memory errors around our buffers, and at exit every heap block nobody can reach
# any more, the library's included (LeakSanitizer sees all of malloc, instrumented or not).
rm -rf build-c-asan
meson setup build-c-asan -Dlibdir_rust="$lib" -Dlibdir_rust_2026="$lib2026" -Dsanitize_tests=true >/dev/null
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 meson test -C build-c-asan --print-errorlogs

stage "install: scripts/install.sh into a scratch prefix, a program built with pkg-config, man pages"
# pkg-config and groff: what a user of the installed tree has (installed when missing).
for tool in pkg-config:pkgconf groff:groff-base; do
  if ! command -v "${tool%%:*}" >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${tool#*:}" >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${tool#*:}" >/dev/null 2>&1; } || true
  fi
done
if command -v pkg-config >/dev/null && command -v groff >/dev/null; then
  prefix="$root/target/install-check"
  rm -rf "$prefix"
  scripts/install.sh "$prefix" >/dev/null
  export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
  # shellcheck disable=SC2046 # pkg-config's words
  cc -o "$prefix/reference_example" c-tests/reference_example.c $(pkg-config --cflags --libs umq) -pthread
  LD_LIBRARY_PATH="$prefix/lib" "$prefix/reference_example" >/dev/null
  echo "a C program built with pkg-config against $prefix runs"
  mandir=$(pkg-config --variable=mandir umq)
  [ "$mandir" = "$prefix/share/man" ]
  # A page for every function the library exports, each rendered without a warning.
  # umq(7) names every environment variable the library reads.
  "$lib/umq-info" --json | python3 -c 'import json,os,sys; r=json.load(sys.stdin); want=sorted(r["functions"]+r["extensions"]); have=sorted(f[:-2] for f in os.listdir(sys.argv[1] + "/man3")); assert want == have, set(want) ^ set(have); overview=open(sys.argv[1] + "/man7/umq.7").read(); missing=[v["name"] for v in r["environment"] if ".B " + v["name"] not in overview]; assert not missing, missing; print(len(have), "umq_*(3) pages; umq(7) names the", len(r["environment"]), "environment variables")' "$mandir"
  # The tools' pages, from their clap definitions: every option --help lists is on the page.
  for tool in umq-info umq-perf; do
    for opt in $("$lib/$tool" --help | grep -o -- '--[a-z][a-z-]*' | sort -u); do
      grep -qF -- "${opt//-/\\-}" "$mandir/man1/$tool.1" || { echo "$tool(1) does not describe $opt"; exit 1; }
    done
  done
  for page in "$mandir"/man*/*; do
    warnings=$(groff -man -ww -z "$page" 2>&1)
    if [ -n "$warnings" ]; then echo "$page: $warnings"; exit 1; fi
  done
  echo "$(find "$mandir" -type f | wc -l) man pages render without warnings"
  unset PKG_CONFIG_PATH
else
  echo "SKIPPED: the install check: pkg-config or groff not found and could not be installed"
fi

stage "Python package and tests"
python3 -c 'import pytest, hypothesis' 2>/dev/null || python3 -m pip install --quiet pytest hypothesis
# scapy: the independent check of our MAC control frames (python/tests/test_mac_control.py).
python3 -c 'import scapy.contrib.mac_control' 2>/dev/null || python3 -m pip install --quiet scapy
# The package must build as a wheel (pure Python); the suite runs it in place against our library.
python3 -m pip wheel --quiet --no-deps --no-build-isolation -w target/python-wheel ./python >/dev/null 2>&1 ||
  python3 -m pip wheel --quiet --no-deps -w target/python-wheel ./python >/dev/null
UMQ_LIB="$lib/libumq.so" python3 -m pytest -q python/tests
stage "Python tests again, every bind forced onto the shared-memory engine"
UMQ_PROVIDER=shm UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
# The flow-control soak (tests/flow_soak.rs, run on loopback above) over shared memory: a short
# run of docs/RELIABILITY.md's long one; and the four-thread stream, each queue's sends and
# receives on threads of their own, over the shared-memory rings.
UMQ_PROVIDER=shm UMQ_SOAK_MESSAGES=2000000 cargo test --profile release-tests --test flow_soak --test flow_threads -- --nocapture 2>&1 | grep -E '^seed|^test result|panicked'
# Two in-process tests of loopback's again over shared memory: a window of one that ping-pongs
# on the grants the answers carry, and lone sends to a peer whose lock another thread holds.
UMQ_PROVIDER=shm cargo test --profile release-tests --test flow_pingpong --test lone_send_busy_peer 2>&1 | grep -E '^test result|panicked'
stage "with the progress engine's sweep set to an hour: a killed peer is noticed through its pidfd, a receiver whose application is away is called to take in what arrives and its credit reaches the sender, PFC frames and timers on links the application does not poll, the shared pool's idle release, network pings from an idle process"
no_sweep=(python/tests/test_pfc.py python/tests/test_shm_processes.py python/tests/test_flow.py -k "killed or idle or pfc or pause or priority")
UMQ_PROGRESS_SWEEP_MS=3600000 UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly "${no_sweep[@]}"
if [ -e /usr/include/rdma/fabric.h ] && ldconfig -p | grep 'libfabric\.so\.1 ' >/dev/null; then
  stage "Python tests again, every bind forced onto the network provider (libfabric ${UMQ_FABRIC_PROVIDER:-tcp})"
  UMQ_PROVIDER=fabric UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
  # The flow-control soak and the four-thread stream over the network: its progress engine runs
  # flow-control steps beside the tests' own threads, and announcements take their time
  # (docs/RELIABILITY.md, "Long soaks over shared memory and the network").
  UMQ_PROVIDER=fabric UMQ_SOAK_MESSAGES=2000000 cargo test --profile release-tests --test flow_soak --test flow_threads -- --nocapture 2>&1 | grep -E '^seed|^test result|panicked'
  UMQ_PROVIDER=fabric cargo test --profile release-tests --test flow_pingpong --test lone_send_busy_peer 2>&1 | grep -E '^test result|panicked'
  # The whole suite again with the sweep at an hour: over the network nothing may wait for it
  # (credit, pings, a receiver away, what libfabric moves only when called), so every test
  # that passes with it passes without.
  stage "Python tests over the network provider with the progress engine's sweep set to an hour"
  UMQ_PROVIDER=fabric UMQ_PROGRESS_SWEEP_MS=3600000 UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
  if [ -e /usr/include/ucp/api/ucp.h ] && ldconfig -p | grep 'libucp\.so\.0 ' >/dev/null; then
    stage "the network provider over its UCX engine (UMQ_FABRIC_PROVIDER=ucx): its unit tests, the C network tests, the Python suite"
    # The test result, and any failing test by name (the engine's warnings at exit would hide it).
    UMQ_FABRIC_PROVIDER=ucx cargo test --profile release-tests -p umq --lib transport::fabric 2>&1 | grep -E '^test .*FAILED|panicked|^test result|^error'
    # Again with UCP's own RMA (put and flush, get), which the engine runs only on an RDMA NIC
    # unless UMQ_UCX_RMA asks for it.
    UMQ_UCX_RMA=ucp UMQ_FABRIC_PROVIDER=ucx cargo test --profile release-tests -p umq --lib transport::fabric 2>&1 | grep -E '^test .*FAILED|panicked|^test result|^error'
    # A killed sender loses nothing it saw complete over this engine too, whose sends complete
    # once UCX handed them to the kernel (tests/fault_kill.rs, its network runs: about 30 s).
    UMQ_FABRIC_PROVIDER=ucx UMQ_FAULT_PROVIDERS=fabric UMQ_FAULT_RUNS=150 cargo test --profile release-tests -p umq --test fault_kill -- --nocapture 2>&1 | grep -E '^test .*FAILED|panicked|^test result|^error|^fabric: '
    # A queue destroyed, unbound or rebound under its sender loses nothing it completed, its
    # peer's node and connection shared with the next run's queues (tests/fault_race.rs).
    UMQ_FABRIC_PROVIDER=ucx UMQ_RACE_PROVIDERS=fabric cargo test --profile release-tests -p umq --test fault_race -- --nocapture 2>&1 | grep -E '^test .*FAILED|panicked|^test result|^error|^fabric: '
    # A target and an initiator whose UMQ_UCX_RMA differ work together: a target with UCP's
    # keys gets our WRs as messages (we run no UCP RMA), one with the table's gets them carried.
    for pair in "ucp carried 0" "carried ucp 1"; do
      read -r target initiator expect <<<"$pair"
      port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
      UMQ_UCX_RMA=$target UMQ_FABRIC_PROVIDER=ucx timeout 120 "$lib/umq-perf" --server --port "$port" >/dev/null 2>&1 &
      server=$!
      sleep 1
      UMQ_UCX_RMA=$initiator UMQ_FABRIC_PROVIDER=ucx timeout 100 "$lib/umq-perf" --client 127.0.0.1 --port "$port" --provider fabric --test rma --size 4096 --iters 300 --shared-pool off --target poll --json | EXPECT_RMA=$expect python3 -c 'import json,os,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream", "write_pingpong"], rows; by_rma=rows[-1]["one_sided_rma_wr"]; assert (by_rma > 0) == (os.environ["EXPECT_RMA"] == "1"), rows; print("UCX engine, target", sys.argv[1], "initiator", sys.argv[2] + ":", by_rma, "WRs by RMA")' "$target" "$initiator"
      kill "$server" 2>/dev/null || true
      wait "$server" 2>/dev/null || true
    done
    # shellcheck disable=SC2046 # one name a word
    UMQ_FABRIC_PROVIDER=ucx meson test -C build-c --print-errorlogs $(meson test -C build-c --list 2>/dev/null | grep -e fabric -e two_hosts | grep -v fi_libfabric_inline)
    UMQ_FABRIC_PROVIDER=ucx timeout 300 "$lib/umq-perf" --provider fabric --test all --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert {r["test"] for r in rows} == {"bw", "lat"} and all(r["provider"] == "fabric" for r in rows), rows; print(len(rows), "result lines over the UCX engine")'
    # WRITE and READ by UCX's RMA (the keys cross in the completion that teaches a chunk),
    # against a target asleep on its pipe that the call bell wakes.
    UMQ_FABRIC_PROVIDER=ucx timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 4096 --iters 500 --shared-pool off --target sleep --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream"] and rows[-1]["one_sided_rma_wr"] > 4 * 500, rows; print("rma over the UCX engine, target asleep:", rows[-1]["one_sided_rma_wr"], "WRs by UCX RMA; WRITE", rows[0]["mean_ns"], "ns, READ", rows[1]["mean_ns"], "ns")'
    # A user's UCX_RNDV_THRESH does not reach the engine's messages, areas and pings: they go
    # eagerly, as their handlers take them (with 0 a queue's peer had been taken for dead).
    UCX_RNDV_THRESH=0 UMQ_FABRIC_PROVIDER=ucx timeout 120 "$lib/umq-perf" --provider fabric --test lat --size 64,65536 --iters 500 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["size"] for r in rows] == [64, 65536] and all(r["mean_ns"] > 0 for r in rows), rows; print("UCX_RNDV_THRESH=0: 64 B half round trip", rows[0]["mean_ns"], "ns")'
    # With every transport UCX has (an address of about 200 bytes: past a length byte).
    UCX_TLS=all UMQ_FABRIC_PROVIDER=ucx timeout 120 "$lib/umq-perf" --provider fabric --test lat --size 64,65536 --iters 2000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["size"] for r in rows] == [64, 65536] and all(r["provider"] == "fabric" for r in rows), rows; print("UCX_TLS=all: 64 B half round trip", rows[0]["mean_ns"], "ns")'
    # Long WRITEs as messages into a sleeping target, whose thread sleeps on the worker's
    # event fd as the ring asks (docs/TRANSPORTS.md, "Watching the connection for long WRs").
    UMQ_FABRIC_PROVIDER=ucx timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 1048576 --iters 50 --target sleep --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert len(rows) == 4 and all(r["one_sided_rma_wr"] == 0 for r in rows), rows; fig={r["op"]: r.get("mean_ns", r.get("msgs_per_s")) for r in rows}; print("1 MiB WRITEs as messages into a sleeping target over the UCX engine: WRITE", fig["write"], "ns, stream", fig["write_stream"], "WRs/s")'
    UMQ_PROVIDER=fabric UMQ_FABRIC_PROVIDER=ucx UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
    # The two hosts in network namespaces, which the suite runs once above over libfabric, over
    # this engine too: among them a queue bound by IPv6 alone, whose connection UCP would make
    # over the device's IPv4 address unless told the family (docs/TRANSPORTS.md, "The UCX engine").
    UMQ_FABRIC_PROVIDER=ucx UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests/test_two_hosts.py
    UMQ_PROVIDER=fabric UMQ_FABRIC_PROVIDER=ucx UMQ_SOAK_MESSAGES=2000000 cargo test --profile release-tests --test flow_soak --test flow_threads -- --nocapture 2>&1 | grep -E '^seed|^test result|panicked'
    UMQ_PROVIDER=fabric UMQ_FABRIC_PROVIDER=ucx cargo test --profile release-tests --test flow_pingpong --test lone_send_busy_peer --test grant_at_hand 2>&1 | grep -E '^test result|panicked'
  else
    echo "SKIPPED: the network provider over UCX: libucx-dev (headers and libucp.so.0) is not installed"
  fi
  # Memory registered as verbs needs it (FI_MR_LOCAL, FI_MR_PROV_KEY), over tcp: the keys are
  # libfabric's, packed across, and every WRITE, READ and send in place names a registration of
  # its own buffer, which the shim checks covers it (docs/TRANSPORTS.md, "Providers" under
  # "WRITE and READ by RMA").
  stage "the network provider with memory registered as verbs asks (UMQ_FABRIC_MR=verbs): its unit tests, the Python suite, the C network tests, a stream and RMA by umq-perf"
  UMQ_FABRIC_MR=verbs cargo test --profile release-tests -p umq --lib transport::fabric 2>&1 | tail -n 3
  UMQ_FABRIC_MR=verbs UMQ_PROVIDER=fabric UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
  UMQ_FABRIC_MR=verbs meson test -C build-c --print-errorlogs $(meson test -C build-c --list 2>/dev/null | grep -e fabric -e two_hosts | grep -v fi_libfabric_inline)
  UMQ_FABRIC_MR=verbs timeout 120 "$lib/umq-perf" --provider fabric --test bw --size 65536 --iters 500 --json | python3 -c 'import json,sys; (r,)=[json.loads(l) for l in sys.stdin]; assert r["client_copies"]["by_ref_wr"] >= 500, r; print("64 KiB stream under local registrations:", r["client_copies"]["by_ref_wr"], "SENDs read in place,", r["msgs_per_s"], "msgs/s")'
  UMQ_FABRIC_MR=verbs timeout 120 "$lib/umq-perf" --provider fabric --test rma --size 4096 --iters 500 --shared-pool off --target sleep --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert [r["op"] for r in rows] == ["write", "read", "write_stream", "read_stream"] and all(r["one_sided_rma_wr"] > 4 * 500 for r in rows), rows; print("rma under provider keys and local registrations, target asleep:", rows[-1]["one_sided_rma_wr"], "WRs by libfabric RMA; WRITE", rows[0]["mean_ns"], "ns, READ", rows[1]["mean_ns"], "ns")'
  # verbs where an RDMA device exists (this machine's kernel has no InfiniBand support).
  if command -v fi_info >/dev/null && fi_info -p verbs >/dev/null 2>&1; then
    stage "Python tests again over libfabric verbs"
    UMQ_PROVIDER=fabric UMQ_FABRIC_PROVIDER=verbs UMQ_LIB="$lib/libumq.so" python3 -m pytest -q -p no:randomly python/tests
  else
    echo "SKIPPED: the Python suite over libfabric verbs: fi_info -p verbs finds no RDMA device here"
  fi
else
  echo "SKIPPED: the Python suite over the network provider: libfabric-dev (headers and libfabric.so.1) is not installed"
fi
stage "Python tests again against the July 2026 build (the package speaks the revision the library reports)"
UMQ_LIB="$lib2026/libumq.so" python3 -m pytest -q -p no:randomly python/tests
stage "the July 2026 credit requests and transport pools across links: over shm, and over the network provider"
july_links=(python/tests/test_credit.py python/tests/test_transport_pool.py)
UMQ_PROVIDER=shm UMQ_LIB="$lib2026/libumq.so" python3 -m pytest -q -p no:randomly "${july_links[@]}"
if [ -e /usr/include/rdma/fabric.h ] && ldconfig -p | grep 'libfabric\.so\.1 ' >/dev/null; then
  UMQ_PROVIDER=fabric UMQ_LIB="$lib2026/libumq.so" python3 -m pytest -q -p no:randomly "${july_links[@]}"
else
  echo "SKIPPED: the July 2026 credit requests and transport pools over the network provider: libfabric-dev is not installed"
fi
stage "the build with profile-guided optimization (scripts/build-pgo.sh --quick): its umq-perf, the C ping-pong through its libumq.so, the Python suite"
# The compiler lays that build out by its training run's counts: it must behave as the plain one.
pgo_rc=0
scripts/build-pgo.sh --quick > target/build-pgo.log 2>&1 || pgo_rc=$?
if [ "$pgo_rc" = 2 ]; then
  echo "SKIPPED: the PGO build: $(tail -1 target/build-pgo.log)"
elif [ "$pgo_rc" != 0 ]; then
  cat target/build-pgo.log
  exit "$pgo_rc"
else
  grep -E '^build-pgo: left out' target/build-pgo.log || true
  pgo=$root/target/pgo/release
  # umq-info tells the builds apart.
  "$pgo/umq-info" --json | python3 -c 'import json,sys; b=json.load(sys.stdin)["build"]; assert b == "release, profile-guided", b'
  "$lib/umq-info" --json | python3 -c 'import json,sys; b=json.load(sys.stdin)["build"]; assert b == "release", b; print("umq-info tells the plain build from the PGO build")'
  timeout 300 "$pgo/umq-perf" --test all --iters 20000 --json | python3 -c 'import json,sys; rows=[json.loads(l) for l in sys.stdin]; assert {r["test"] for r in rows} >= {"lat", "bw"}, rows; print(len(rows), "result lines from the PGO build of umq-perf")'
  if command -v valgrind >/dev/null; then
    # so_pingpong checks every byte; the counts are printed beside the plain build's above.
    LIBUMQ_DIR="$pgo" timeout 300 scripts/so-instructions.sh --rounds 500 | sed 's/^/PGO build: /'
  fi
  UMQ_LIB="$pgo/libumq.so" python3 -m pytest -q -p no:randomly python/tests
fi
stage "all tests passed"
