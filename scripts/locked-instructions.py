#!/usr/bin/env python3
"""Locked instructions a message: how many lock-prefixed instructions (and `xchg` with memory,
which locks too) the library executes per message of a umq-perf ping-pong. Each is a full
barrier of tens of cycles, where an instruction count weighs it as one.

    scripts/locked-instructions.py [--iters N] -- <umq-perf arguments>

Runs `umq-perf --iters N` and `--iters 3N` under callgrind with per-instruction counts, takes
the difference (set-up cancels) and divides by the messages of the extra round trips (two a
round trip, umq-perf's warm-up of a tenth of the iterations included).
Prints the total and the instructions that make it, by function. The binary is
target/release/umq-perf (UMQ_PERF to choose another); the environment passes through
(UMQ_PROVIDER=shm for shared memory).

    scripts/locked-instructions.py -- --test lat --api base --size 64
"""
import collections
import os
import re
import subprocess
import sys
import tempfile


def locked_sites(binary):
    """Address -> instruction text of every locked instruction in the binary."""
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", binary],
                         capture_output=True, text=True, check=True).stdout
    sites = {}
    for line in dis.splitlines():
        m = re.match(r"\s*([0-9a-f]+):\s+(.*)", line)
        if not m:
            continue
        ins = m.group(2)
        if ins.startswith("lock ") or (ins.startswith("xchg") and "(" in ins):
            sites[int(m.group(1), 16)] = ins
    return sites


def self_counts(path, binary):
    """Address -> executions of each instruction of `binary` (calls' inclusive lines skipped)."""
    counts, owner = collections.Counter(), {}
    ob = fn = None
    after_call = False
    with open(path) as f:
        for line in f:
            if line.startswith("ob="):
                ob = line[3:].strip()
            elif line.startswith("fn="):
                fn = line[3:].strip()
            elif line.startswith("calls="):
                after_call = True
            else:
                m = re.match(r"(0x[0-9a-f]+) (\d+)", line)
                if not m:
                    continue
                if after_call:
                    after_call = False
                elif ob == binary:
                    addr = int(m.group(1), 16)
                    counts[addr] += int(m.group(2))
                    owner[addr] = fn
    return counts, owner


def round_trips(iters):
    """What umq-perf runs for `--iters`: its warm-up (`shm::warmup`), then the iterations."""
    return iters + min(max(iters // 10, 100), 10_000)


def profile(binary, args, iters, out):
    cmd = ["valgrind", "--tool=callgrind", "--dump-instr=yes", "--dump-line=no",
           "--compress-pos=no", "--compress-strings=no", f"--callgrind-out-file={out}",
           binary, *args, "--iters", str(iters)]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return self_counts(out, binary)


def main():
    argv = sys.argv[1:]
    iters = 10000
    if argv[:1] == ["--iters"]:
        iters, argv = int(argv[1]), argv[2:]
    if argv[:1] != ["--"]:
        sys.exit(__doc__)
    args = argv[1:]
    binary = os.path.abspath(os.environ.get("UMQ_PERF", "target/release/umq-perf"))
    sites = locked_sites(binary)
    with tempfile.TemporaryDirectory() as tmp:
        few, _ = profile(binary, args, iters, f"{tmp}/few")
        many, owner = profile(binary, args, 3 * iters, f"{tmp}/many")
    messages = 2 * (round_trips(3 * iters) - round_trips(iters))
    by_site = collections.Counter()
    for addr, ins in sites.items():
        n = many.get(addr, 0) - few.get(addr, 0)
        if n > 0:
            by_site[(owner.get(addr, "?"), ins)] += n
    total = sum(by_site.values()) / messages
    print(f"locked_instructions_per_message {total:.2f}")
    for (fn, ins), n in by_site.most_common():
        if n / messages >= 0.05:
            print(f"  {n / messages:6.2f}  {ins[:44]:44s} {fn[:100]}")


if __name__ == "__main__":
    main()
