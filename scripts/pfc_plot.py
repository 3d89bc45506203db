#!/usr/bin/env python3
"""Draws docs/pfc.svg: a timeline of link-level pause between two processes. Two queue pairs
share the link, priority 0 and priority 3; this process sends 1 KiB messages on both as fast
as they are taken. The other process takes priority 0's as they come, and priority 3's:
  0.0-1.0 s  in gulps: nothing for 150 ms, then all there is, with XOFF / XON emission on: its
             backlog pauses priority 3 and its drain resumes it;
  1.0-2.0 s  as they come: no pause;
  2.0-3.0 s  as they come, but it keeps priority 3 paused with a frame every 20 ms (a storm):
             our watchdog (detection 200 ms) stops honouring it;
  3.0-3.5 s  quiet again: after the restoration time (200 ms) the watchdog honours it again.
Each priority's rate (100 ms bins) is drawn over the intervals it was paused. Measured on a real
clock through the Python package; the SVG is written by hand (no plotting dependency).

    PYTHONPATH=python python3 scripts/pfc_plot.py [docs/pfc.svg]
"""

import multiprocessing as mp
import sys
import time

import umq

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/python/tests")
from test_pfc import two_queues  # noqa: E402 - the tests' two queue pairs, priorities 0 and 3

SIZE = 1024
SECONDS = 3.5
BIN = 0.1
SAMPLE = 0.002


def take(q, most=64):
    rx = q.poll(umq.UMQ_IO_RX, most)
    if rx:
        q.post_recv(len(rx), size=SIZE)


def receiver(conn):
    with umq.Umq(flow_control=True) as ctx:
        c0, c3 = two_queues(ctx, conn, "rx")
        c0.pfc_config(flags=c0.pfc_config().flags | umq.UMQ_EXT_PFC_EMIT, xoff_bytes=32 * SIZE, xon_bytes=8 * SIZE)
        for q in (c0, c3):
            q.post_recv(64, size=SIZE)
        conn.send("ready")
        start = time.monotonic()
        next_pause = 0.0
        frame = umq.pfc_frame(1 << 3, [0xFFFF] * 8)
        while (t := time.monotonic() - start) < SECONDS + 0.3:
            take(c0)
            if t >= 1.0 or t % 0.2 >= 0.15:
                take(c3)
            if 2.0 <= t < 3.0 and t >= next_pause:
                c0.pfc_send_frame(frame)
                next_pause = t + 0.02
        conn.recv()


def run():
    conn, child_end = mp.Pipe()
    child = mp.get_context("spawn").Process(target=receiver, args=(child_end,))
    child.start()
    samples = []  # (t, completions per priority, paused bits)
    events = []
    with umq.Umq(flow_control=True) as ctx:
        qs = two_queues(ctx, conn, "tx")
        qs[0].pfc_config(speed_bps=1_000_000_000)  # 0xffff quanta: 33.5 ms
        assert conn.recv() == "ready"
        start = time.monotonic()
        done = [0, 0]
        next_sample = 0.0
        while (t := time.monotonic() - start) < SECONDS:
            for k, q in enumerate(qs):
                q.send([b"m" * SIZE] * 8)
                done[k] += sum(1 for c in q.poll(umq.UMQ_IO_TX) if c.direction == umq.UMQ_IO_TX)
            if t >= next_sample:
                samples.append((t, list(done), qs[0].pfc_stats().paused_now))
                next_sample = t + SAMPLE
            ev = next_event(ctx)
            if ev is not None:
                events.append((t, ev))
        conn.send("done")
        trips = qs[0].pfc_stats().priority[3].watchdog_trips
    child.join(30)
    return samples, events, trips


def next_event(ctx):
    import ctypes as C

    ti = ctx.cfg.trans_info[0]
    ev = umq.types.umq_async_event_t()
    if umq.lib().umq_get_async_event(C.byref(ti), C.byref(ev)) != 0:
        return None
    umq.lib().umq_ack_async_event(C.byref(ev))
    return ev.original_code


def rates(samples, k):
    bins = [0.0] * int(SECONDS / BIN)
    for (t0, d0, _), (t1, d1, _) in zip(samples, samples[1:]):
        i = int(t1 / BIN)
        if i < len(bins):
            bins[i] += (d1[k] - d0[k]) * SIZE / BIN / 1e6
    return bins


def paused_spans(samples, bit):
    spans, since = [], None
    for t, _, paused in samples:
        if paused & bit and since is None:
            since = t
        elif not paused & bit and since is not None:
            spans.append((since, t))
            since = None
    if since is not None:
        spans.append((since, samples[-1][0]))
    return spans


def svg(series, spans, events):
    w, h, left, bottom, top, lane = 760, 420, 70, 40, 30, 150
    x = lambda t: left + (w - left - 20) * t / SECONDS  # noqa: E731
    colors = {0: "#1f77b4", 3: "#d62728"}
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
    ]
    for row, (p, bins) in enumerate(series):
        base = top + lane * (row + 1)
        ymax = max(max(bins), 1.0) * 1.1
        y = lambda v, base=base, ymax=ymax: base - (lane - 30) * v / ymax  # noqa: E731
        for a, b in spans[p]:
            out.append(f'<rect x="{x(a):.1f}" y="{base - lane + 30}" width="{max(x(b) - x(a), 0.5):.1f}" '
                       f'height="{lane - 30}" fill="{colors[p]}" opacity="0.15"/>')
        out.append(f'<line x1="{left}" y1="{base}" x2="{x(SECONDS)}" y2="{base}" stroke="black"/>')
        pts = " ".join(f"{x((i + 0.5) * BIN):.1f},{y(v):.1f}" for i, v in enumerate(bins))
        out.append(f'<polyline points="{pts}" fill="none" stroke="{colors[p]}" stroke-width="2"/>')
        out.append(f'<text x="{left - 8}" y="{y(ymax / 1.1) + 4:.1f}" text-anchor="end">{ymax / 1.1:.0f}</text>')
        out.append(f'<text x="{left - 8}" y="{base + 4}" text-anchor="end">0</text>')
        out.append(f'<text x="{left + 6}" y="{base - lane + 44}" fill="{colors[p]}">priority {p}: MB/s sent '
                   f'(100 ms bins); shaded: paused by the peer</text>')
    for k in range(0, int(SECONDS / 0.5) + 1):
        t = k * 0.5
        out.append(f'<text x="{x(t)}" y="{h - bottom + 16}" text-anchor="middle">{t:.1f}</text>')
    out.append(f'<text x="{(left + w) / 2}" y="{h - 6}" text-anchor="middle">seconds</text>')
    phases = [(0.5, "receiver in gulps: XOFF / XON"), (1.5, "receiver fast"), (2.5, "peer storms priority 3")]
    for t, label in phases:
        out.append(f'<text x="{x(t)}" y="{top - 10}" text-anchor="middle" fill="#444">{label}</text>')
    for t, code in events:
        what = "watchdog trips" if code == umq.UMQ_EXT_EVENT_PFC_STORM + 3 else "restored"
        out.append(f'<line x1="{x(t):.1f}" y1="{top}" x2="{x(t):.1f}" y2="{h - bottom}" stroke="#555" '
                   'stroke-dasharray="3 3"/>')
        out.append(f'<text x="{x(t) + 3:.1f}" y="{top + lane + 20}" fill="#555">{what}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "docs/pfc.svg"
    samples, events, trips = run()
    series = [(0, rates(samples, 0)), (3, rates(samples, 1))]
    spans = {0: paused_spans(samples, 1), 3: paused_spans(samples, 1 << 3)}
    with open(path, "w") as f:
        f.write(svg(series, spans, events))
    for p, bins in series:
        paused = sum(b - a for a, b in spans[p])
        print(f"priority {p}: paused {paused:.2f} s, bins {min(bins):.1f}..{max(bins):.1f} MB/s")
    print(f"watchdog trips {trips}, events {[(round(t, 3), hex(c)) for t, c in events]}")


if __name__ == "__main__":
    main()
