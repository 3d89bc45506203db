#!/usr/bin/env python3
"""Draws docs/pacing-wire.svg: the bytes of one rate-limited queue (64 KiB messages, 100 Mbit/s,
PMTU 4096) that have arrived at its peer, against time, from measured arrivals: before, when a
message crossed whole once its last packet was granted, and now, packet by packet. The SVG is
written by hand (no plotting dependency).

    umq-perf --test pacing --wire --arrivals DIR      # DIR/loopback-65536-100000000.csv
    python3 scripts/pacing_wire_plot.py BEFORE.csv AFTER.csv [docs/pacing-wire.svg]

The CSVs hold `ns,bytes` per arrival, nanoseconds from the first packet's time.
"""

import csv
import sys

WIDTH, HEIGHT, PAD = 640, 320, 50
SPAN_MS = 21


def cumulative(path):
    """(ms, KiB arrived by then) as a step line, from the first arrival's start."""
    points, total = [(0.0, 0.0)], 0
    with open(path) as f:
        for row in csv.DictReader(f):
            ms = int(row["ns"]) / 1e6
            if ms > SPAN_MS:
                break
            points.append((ms, total / 1024))
            total += int(row["bytes"])
            points.append((ms, total / 1024))
    points.append((SPAN_MS, total / 1024))
    return points


def svg(series):
    top = max(y for _, pts, _ in series for _, y in pts)
    sx = lambda ms: PAD + ms / SPAN_MS * (WIDTH - 2 * PAD)
    sy = lambda kib: HEIGHT - PAD - kib / top * (HEIGHT - 2 * PAD)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" font-family="sans-serif" font-size="12">',
           f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
           f'<line x1="{PAD}" y1="{HEIGHT - PAD}" x2="{WIDTH - PAD}" y2="{HEIGHT - PAD}" stroke="black"/>',
           f'<line x1="{PAD}" y1="{PAD}" x2="{PAD}" y2="{HEIGHT - PAD}" stroke="black"/>',
           f'<text x="{WIDTH / 2}" y="{HEIGHT - 12}" text-anchor="middle">ms</text>',
           f'<text x="14" y="{HEIGHT / 2}" transform="rotate(-90 14 {HEIGHT / 2})" text-anchor="middle">KiB arrived</text>']
    for ms in range(0, SPAN_MS + 1, 5):
        out.append(f'<text x="{sx(ms):.1f}" y="{HEIGHT - PAD + 16}" text-anchor="middle">{ms}</text>')
    for kib in range(0, int(top) + 1, 64):
        out.append(f'<text x="{PAD - 6}" y="{sy(kib) + 4:.1f}" text-anchor="end">{kib}</text>')
    for i, (name, pts, colour) in enumerate(series):
        path = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="1.5"/>')
        out.append(f'<text x="{PAD + 10}" y="{PAD + 16 * i}" fill="{colour}">{name}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    before, after = sys.argv[1], sys.argv[2]
    dest = sys.argv[3] if len(sys.argv) > 3 else "docs/pacing-wire.svg"
    series = [("whole messages, as each one's last packet is granted", cumulative(before), "#c0392b"),
              ("packets, each at its grant", cumulative(after), "#2471a3")]
    with open(dest, "w") as f:
        f.write(svg(series))
    print(f"wrote {dest}")


if __name__ == "__main__":
    main()
