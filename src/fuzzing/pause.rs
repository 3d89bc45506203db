//! PAUSE / PFC frames from the peer, into the link's machine on a virtual clock.

use crate::draw::{Draw, Tape};
use crate::flow::pfc::frame::{self, FRAME_BYTES};
use crate::flow::pfc::link::{Config, LinkStats, PRIORITIES, PassControl, PauseLink};

/// A run of the link machine (`flow::pfc::link`) steered by the input: frames from the peer
/// (any bytes, or a frame made well-formed around the fuzzer's fields), time passing, our
/// backlog and pending work. What must hold: the decoder's verdict is stable (a frame it
/// accepts encodes back to one it accepts the same), counters never go down, what we send
/// decodes as PFC, and once the peer falls silent every priority may start again after the
/// longest pause a frame can ask for (or the watchdog's restore time, if longer).
pub fn pause_link(data: &[u8]) {
    let mut tape = Tape::new(data);
    let cfg = config(&mut tape);
    let mut link = PauseLink::new(cfg);
    let mut now = 1u64;
    let mut last = link.stats(now);
    while !tape.is_empty() {
        match tape.byte() % 6 {
            0 => now += tape.edgy(&[0, 1, 1000, link.quanta_ns(0xffff)]) % (1 << 40),
            1 => {
                let bytes = frame_from(&mut tape);
                check_decoder(&bytes, &cfg);
                link.handle_frame(now, &bytes);
            }
            2 => {
                let p = tape.byte();
                link.may_start(now, p);
            }
            3 => link.set_pending(now, tape.byte(), tape.byte() & 1 == 1),
            4 => link.set_backlog(
                now,
                tape.byte(),
                tape.edgy(&[cfg.xoff_bytes, cfg.xon_bytes]),
            ),
            _ => {
                if let Some(sent) = link.poll_transmit(now) {
                    assert!(frame::decode(&sent, None).is_ok(), "we sent {sent:02x?}");
                }
                while link.poll_event().is_some() {}
            }
        }
        let stats = link.stats(now);
        assert_monotonic(&last, &stats);
        last = stats;
    }
    now += link.quanta_ns(0xffff).max(cfg.watchdog_restore_ns) + 1;
    for p in 0..PRIORITIES as u8 {
        assert!(
            link.may_start(now, p),
            "priority {p} paused by a silent peer"
        );
    }
}

fn config(tape: &mut Tape) -> Config {
    let flags = tape.byte();
    let speed = [
        1_000_000_000,
        10_000_000_000,
        100_000_000_000,
        400_000_000_000,
    ];
    let mut cfg = Config::for_link(speed[flags as usize & 3], 20_000, [2, 0, 0, 0, 0, 1]);
    cfg.rfe = flags & 4 == 0;
    cfg.pfce = flags & 8 == 0;
    cfg.unicast_pause = flags & 16 != 0;
    cfg.pass = [
        PassControl::None,
        PassControl::AllButPause,
        PassControl::All,
    ][(flags >> 5) as usize % 3];
    cfg.pause_quanta = tape.edgy(&[0, 1, 0xffff]) as u16;
    cfg
}

/// A frame: mostly a pause frame's shape around the fuzzer's bytes (addresses, EtherType and
/// opcode often right, the FCS made right), sometimes bytes of any length as they are.
fn frame_from(tape: &mut Tape) -> Vec<u8> {
    let shape = tape.byte();
    if shape & 7 == 0 {
        let n = tape.below(2 * FRAME_BYTES as u64) as usize;
        return tape.bytes(n).to_vec();
    }
    let mut b = vec![0u8; FRAME_BYTES];
    let given = tape.bytes(FRAME_BYTES - 4);
    b[..given.len()].copy_from_slice(given);
    if shape & 8 != 0 {
        b[..6].copy_from_slice(&frame::PAUSE_MULTICAST);
    }
    if shape & 16 != 0 {
        b[12..14].copy_from_slice(&frame::MAC_CONTROL.to_be_bytes());
    }
    if shape & 32 != 0 {
        let op = if shape & 64 != 0 {
            frame::OPCODE_PFC
        } else {
            frame::OPCODE_PAUSE
        };
        b[14..16].copy_from_slice(&op.to_be_bytes());
    }
    if shape & 128 == 0 {
        let fcs = frame::crc32(&b[..FRAME_BYTES - 4]);
        b[FRAME_BYTES - 4..].copy_from_slice(&fcs.to_le_bytes());
    }
    b
}

fn check_decoder(bytes: &[u8], cfg: &Config) {
    let unicast = cfg.unicast_pause.then_some(cfg.address);
    if let Ok(f) = frame::decode(bytes, unicast) {
        assert_eq!(frame::decode(&frame::encode(&f), unicast), Ok(f));
    }
}

fn assert_monotonic(before: &LinkStats, after: &LinkStats) {
    assert!(after.link_pauses >= before.link_pauses);
    assert!(after.link_paused_ns >= before.link_paused_ns);
    assert!(after.other_control >= before.other_control);
    for (b, a) in before.priorities.iter().zip(&after.priorities) {
        assert!(a.indications >= b.indications && a.requests >= b.requests);
        assert!(a.paused_ns >= b.paused_ns && a.watchdog_trips >= b.watchdog_trips);
    }
}
