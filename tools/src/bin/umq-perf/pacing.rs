//! `--test pacing`: the pacing machine alone on a virtual clock, with `--queues` limited queues
//! on one sender, each always with more to send, each at its own rate: packet times spread
//! from 1 to 16 ticks (so most queues wait in the schedule between packets). The same workload
//! runs on the timing wheel and on a binary heap keyed by next send time, in the same
//! invocation. Each row runs about the same number of packets, so rows compare per packet.

use crate::report::Row;
use std::time::Instant;
use umq::flow::pacing::wheel::{Heap, Schedule, Wheel};
use umq::flow::pacing::{DEFAULT_PMTU, DEFAULT_TICKS_PER_S, Left, Pacer};

/// Packets granted per row, about (at a million queues the run still spans 64 ticks).
const PACKETS_PER_ROW: u64 = 16_000_000;
/// The mean packets per tick per queue of the rate spread below.
const MEAN_PACKETS_PER_TICK: f64 = 0.27;

/// Queue `q`'s rate: packet times from 1 to 16 ticks, spread geometrically over the queues.
fn rate_of(q: u32) -> u64 {
    let packet_ticks =
        16f64.powf((q.wrapping_mul(2_654_435_761) >> 8) as f64 / (1u64 << 24) as f64);
    let bits_per_packet = 8.0 * DEFAULT_PMTU as f64;
    (bits_per_packet * DEFAULT_TICKS_PER_S as f64 / packet_ticks) as u64
}

struct Outcome {
    ns_per_packet: f64,
    packets: u64,
    rate_error_max: f64,
    bytes_per_queue: f64,
}

/// Runs the workload for `ticks` ticks on `schedule`.
fn run<S: Schedule>(queues: u32, ticks: u64, schedule: S) -> Outcome {
    let mut p = Pacer::with_schedule(DEFAULT_TICKS_PER_S, schedule).expect("tick rate");
    p.reserve(queues as usize);
    for q in 0..queues {
        p.set_rate(q, rate_of(q), DEFAULT_PMTU).expect("rate");
    }
    let start = Instant::now();
    let mut packets = 0u64;
    for q in 0..queues {
        let n = p.wake(q);
        p.complete(q, n, n as u64 * DEFAULT_PMTU as u64, Left::More);
        packets += n as u64;
    }
    for tick in 1..ticks {
        p.tick(tick);
        while let Some(g) = p.next_grant() {
            p.complete(
                g.queue,
                g.packets,
                g.packets as u64 * DEFAULT_PMTU as u64,
                Left::More,
            );
            packets += g.packets as u64;
        }
    }
    let elapsed = start.elapsed();
    Outcome {
        ns_per_packet: elapsed.as_nanos() as f64 / packets.max(1) as f64,
        packets,
        rate_error_max: rate_error_max(&p, queues),
        bytes_per_queue: p.bytes() as f64 / queues as f64,
    }
}

/// The largest relative error of any queue's rate: the bits it sent against the time its
/// packets' send times span (a queue served late loses that time: nothing is banked).
fn rate_error_max<S: Schedule>(p: &Pacer<S>, queues: u32) -> f64 {
    (0..queues)
        .map(|q| {
            let s = p.stats(q).expect("queue");
            let seconds = p.next_send(q) / p.ticks_per_s() as f64;
            let achieved = s.bytes as f64 * 8.0 / seconds;
            (achieved / s.rate_bps as f64 - 1.0).abs()
        })
        .fold(0.0, f64::max)
}

/// One row: the wheel and the heap on the same workload.
pub fn measure(queues: u32) -> Row {
    let per_tick = queues as f64 * MEAN_PACKETS_PER_TICK;
    let ticks = ((PACKETS_PER_ROW as f64 / per_tick) as u64).clamp(64, 1 << 20);
    let wheel = run(queues, ticks, Wheel::new(0));
    let heap = run(queues, ticks, Heap::new(0));
    assert_eq!(wheel.packets, heap.packets, "both schedules grant the same");
    Row::new("pacing", "machine", DEFAULT_PMTU, false)
        .num("queues", queues as f64)
        .num("ticks", ticks as f64)
        .num("packets", wheel.packets as f64)
        .num("sched_ns_per_packet", wheel.ns_per_packet)
        .num("heap_ns_per_packet", heap.ns_per_packet)
        .num("bytes_per_queue", wheel.bytes_per_queue)
        .num(
            "rate_error_max",
            wheel.rate_error_max.max(heap.rate_error_max),
        )
}
