#!/usr/bin/env bash
# Coverage-guided fuzzing of the targets in umq::fuzzing (src/fuzzing/) with AFL++ through
# cargo-afl, on the stable toolchain.
#
#   scripts/fuzz.sh --execs N [target...]    each target for about N executions (the test
#                                            command's run: fixed work, not a time)
#   scripts/fuzz.sh --time SECONDS [target...]   a campaign: each target for SECONDS
#
# No target named: all of them. Each starts from its corpus (fuzz/corpus/<target>/) and the
# crashes kept as regressions; findings go to target/fuzz/<target>/. A crash fails the run:
# the script prints how to reproduce it, and it becomes a regression input once fixed.
# Installs cargo-afl (crates.io; it builds AFL++ from source) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() { echo "usage: $0 --execs N | --time SECONDS [target...]" >&2; exit 2; }
[ $# -ge 2 ] || usage
case "$1" in
  --execs) limit=(-E "$2") ;;
  --time) limit=(-V "$2") ;;
  *) usage ;;
esac
shift 2
if ! cargo afl --version >/dev/null 2>&1; then
  echo "installing cargo-afl (builds AFL++ from source)"
  cargo install --quiet --locked cargo-afl
fi
(cd fuzz && cargo afl build --release --quiet)
harness="$root/fuzz/target/release/umq-fuzz"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  mapfile -t targets < <("$harness" --list)
fi

failed=0
for t in "${targets[@]}"; do
  out="$root/target/fuzz/$t"
  seeds="$root/target/fuzz/$t.seeds"
  rm -rf "$out" "$seeds"
  mkdir -p "$seeds"
  cp "$root/fuzz/corpus/$t"/* "$seeds/"
  if [ -d "$root/fuzz/regressions/$t" ]; then cp "$root/fuzz/regressions/$t"/* "$seeds/"; fi
  # No UI, no CPU pinning (the machine is shared), and no core dumps to wait for. An input
  # that takes more than 5 s is a hang; a seed that stalls past it once (a shared host stopped
  # the harness: a corpus input of 40 ms took over a second in one dry run) is skipped, not
  # the run's end ("+").
  AFL_NO_UI=1 AFL_NO_AFFINITY=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 \
    cargo afl fuzz "${limit[@]}" -t 5000+ -i "$seeds" -o "$out" -- "$harness" "$t" >"$out.log" 2>&1 ||
    { echo "$t: afl-fuzz failed:"; tail -20 "$out.log"; failed=1; continue; }
  stats="$out/default/fuzzer_stats"
  field() { awk -F' *: *' -v k="$1" '$1 == k { print $2 }' "$stats"; }
  echo "$t: $(field execs_done) executions, $(field corpus_count) inputs in the queue, coverage $(field bitmap_cvg), $(field saved_crashes) crashes, $(field saved_hangs) hangs"
  crashes=$(find "$out/default/crashes" -type f -name 'id:*' | sort)
  if [ -n "$crashes" ]; then
    failed=1
    echo "$t: crashes found; reproduce with:"
    for c in $crashes; do
      echo "  cargo run --features fuzzing --example fuzz_replay -- $t '$c'"
    done
  fi
done
exit $failed
