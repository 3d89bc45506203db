#!/usr/bin/env python3
"""Draws docs/pacing.svg: the rate three rate-limited queues' messages arrive at over two
seconds (three loopback pairs of one process, 16 KiB messages, each sender always with more to
send), one of them changed from 2 to 6 MiB/s half way. Measured on a real clock through the
Python package; the SVG is written by hand (no plotting dependency).

    PYTHONPATH=python python3 scripts/pacing_plot.py [docs/pacing.svg]
"""

import sys
import time

import umq

MIB = 8 * 1024 * 1024  # bit/s
SIZE = 16384
SECONDS = 2.0
BIN = 0.05
LIMITS = [2, 4, 8]  # MiB/s
CHANGE = (0, 6, 1.0)  # queue 0 goes to 6 MiB/s at 1 s


def run():
    arrivals = [[] for _ in LIMITS]
    with umq.Umq() as ctx:
        pairs = [ctx.pair(depth=256) for _ in LIMITS]
        for (a, b), limit in zip(pairs, LIMITS):
            a.set_rate(limit * MIB)
            b.post_recv(256, size=SIZE)
        payload = [b"r" * SIZE] * 8
        start = time.monotonic()
        changed = False
        while (now := time.monotonic() - start) < SECONDS:
            if not changed and now >= CHANGE[2]:
                pairs[CHANGE[0]][0].set_rate(CHANGE[1] * MIB)
                changed = True
            for i, (a, b) in enumerate(pairs):
                a.send(payload)
                a.poll(umq.UMQ_IO_TX)
                rx = b.poll(umq.UMQ_IO_RX)
                t = time.monotonic() - start
                arrivals[i] += [t] * sum(1 for c in rx if c.data)
                if rx:
                    b.post_recv(len(rx), size=SIZE)
    return arrivals


def binned(times):
    bins = [0] * int(SECONDS / BIN)
    for t in times:
        if t < SECONDS:
            bins[int(t / BIN)] += 1
    return [n * SIZE / BIN / (1 << 20) for n in bins]


def svg(series):
    w, h, left, bottom, top = 720, 360, 60, 40, 20
    ymax = 10.0
    x = lambda t: left + (w - left - 20) * t / SECONDS  # noqa: E731
    y = lambda v: h - bottom - (h - bottom - top) * v / ymax  # noqa: E731
    colors = ["#d62728", "#1f77b4", "#2ca02c"]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{x(SECONDS)}" y2="{y(0)}" stroke="black"/>',
        f'<line x1="{left}" y1="{y(0)}" x2="{left}" y2="{y(ymax)}" stroke="black"/>',
    ]
    for v in range(0, int(ymax) + 1, 2):
        out.append(f'<text x="{left - 8}" y="{y(v) + 4}" text-anchor="end">{v}</text>')
        out.append(f'<line x1="{left}" y1="{y(v)}" x2="{x(SECONDS)}" y2="{y(v)}" stroke="#ddd"/>')
    for k in range(0, int(SECONDS / 0.5) + 1):
        t = k * 0.5
        out.append(f'<text x="{x(t)}" y="{h - bottom + 16}" text-anchor="middle">{t:.1f}</text>')
    out.append(f'<text x="{(left + w) / 2}" y="{h - 6}" text-anchor="middle">seconds</text>')
    out.append(f'<text x="14" y="{(top + h - bottom) / 2}" transform="rotate(-90 14 {(top + h - bottom) / 2})" '
               'text-anchor="middle">MiB/s arriving (50 ms bins)</text>')
    for i, rates in enumerate(series):
        limit = [(0, LIMITS[i])] if i != CHANGE[0] else [(0, LIMITS[i]), (CHANGE[2], CHANGE[1])]
        for j, (t0, lim) in enumerate(limit):
            t1 = limit[j + 1][0] if j + 1 < len(limit) else SECONDS
            out.append(f'<line x1="{x(t0)}" y1="{y(lim)}" x2="{x(t1)}" y2="{y(lim)}" '
                       f'stroke="{colors[i]}" stroke-dasharray="4 3" opacity="0.6"/>')
        pts = " ".join(f"{x((k + 0.5) * BIN):.1f},{y(v):.1f}" for k, v in enumerate(rates))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colors[i]}" stroke-width="2"/>')
        label = f"limit {LIMITS[i]} MiB/s" + (f", {CHANGE[1]} from {CHANGE[2]:.0f} s" if i == CHANGE[0] else "")
        out.append(f'<text x="{w - 200}" y="{top + 16 * (i + 1)}" fill="{colors[i]}">{label}</text>')
    out.append(f'<text x="{w - 200}" y="{top + 16 * 4}" fill="#666">dashed: the limit</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/pacing.svg"
    series = [binned(a) for a in run()]
    with open(path, "w") as f:
        f.write(svg(series))
    for limit, rates in zip(LIMITS, series):
        print(f"limit {limit} MiB/s: bins {min(rates[2:]):.2f}..{max(rates[2:]):.2f} MiB/s")


if __name__ == "__main__":
    main()
