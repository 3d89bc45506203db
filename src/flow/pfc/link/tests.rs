//! The pause machine on a virtual clock (nanoseconds).

use super::*;

const ME: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const PEER: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const MS: u64 = 1_000_000;

fn link(speed_bps: u64) -> PauseLink {
    PauseLink::new(Config::for_link(speed_bps, 10_000, ME))
}

fn pfc(enabled: u8, quanta: [u16; 8]) -> [u8; 64] {
    frame::encode(&PauseFrame {
        dst: frame::PAUSE_MULTICAST,
        src: PEER,
        pause: Pause::Priorities { enabled, quanta },
    })
}

fn pause(quanta: u16) -> [u8; 64] {
    frame::encode(&PauseFrame {
        dst: frame::PAUSE_MULTICAST,
        src: PEER,
        pause: Pause::Link { quanta },
    })
}

/// Priority `p` paused for `q` quanta, the others not.
fn only(p: usize, q: u16) -> [u8; 64] {
    let mut quanta = [0; 8];
    quanta[p] = q;
    pfc(1 << p, quanta)
}

#[test]
fn a_quantum_is_512_bit_times_at_the_link_speed() {
    assert_eq!(
        link(10_000_000_000).quanta_ns(0xffff),
        3_355_392,
        "3.36 ms at 10 Gbit/s"
    );
    assert_eq!(link(10_000_000_000).quanta_ns(1), 52, "51.2 ns, rounded up");
    assert_eq!(link(100_000_000_000).quanta_ns(1000), 5120);
    assert_eq!(
        link(1_000_000_000).quanta_ns(1),
        512,
        "not doubled at 1 Gbit/s"
    );
}

/// A PFC frame stops only the priorities it enables, each until its own time is up, exactly.
#[test]
fn pfc_pauses_each_enabled_priority_for_its_own_time() {
    let mut l = link(100_000_000_000);
    let mut quanta = [0; 8];
    quanta[3] = 1000; // 5.12 us
    quanta[5] = 2000;
    assert_eq!(
        l.handle_frame(0, &pfc(1 << 3 | 1 << 5, quanta)),
        Verdict::Consumed
    );
    assert!(!l.may_start(0, 3) && !l.may_start(0, 5));
    assert!(
        (0..8)
            .filter(|&p| p != 3 && p != 5)
            .all(|p| l.may_start(0, p))
    );
    assert!(!l.may_start(5119, 3));
    assert!(l.may_start(5120, 3), "priority 3 resumes at 5120 ns");
    assert!(!l.may_start(10_239, 5));
    assert!(l.may_start(10_240, 5));
    let s = l.stats(20_000);
    assert_eq!(s.priorities[3].paused_ns, 5120);
    assert_eq!(s.priorities[5].paused_ns, 10_240);
    assert_eq!(
        (s.priorities[3].indications, s.priorities[0].indications),
        (1, 0)
    );
}

/// A new frame reloads the timer (the new end replaces the old, shorter or longer); 0 resumes
/// at once.
#[test]
fn a_new_frame_reloads_and_zero_resumes() {
    let mut l = link(100_000_000_000);
    l.handle_frame(0, &only(2, 10_000)); // until 51.2 us
    l.handle_frame(1000, &only(2, 100)); // until 1000 + 512 ns
    assert!(!l.may_start(1511, 2));
    assert!(
        l.may_start(1512, 2),
        "reloaded to the shorter time, not added"
    );
    l.handle_frame(2000, &only(2, 100));
    l.handle_frame(2100, &only(2, 10_000));
    assert!(
        !l.may_start(2100 + 51_199, 2),
        "reloaded to the longer time"
    );
    l.handle_frame(3000, &only(2, 0));
    assert!(l.may_start(3000, 2), "zero resumes at once");
    assert_eq!(
        l.stats(4000).priorities[2].paused_ns,
        1512 + 1000,
        "0..1512, 2000..3000"
    );
}

#[test]
fn with_rfe_off_pause_frames_are_counted_and_ignored() {
    let mut l = link(10_000_000_000);
    let mut cfg = *l.config();
    cfg.rfe = false;
    l.set_config(cfg);
    l.handle_frame(0, &pause(0xffff));
    l.handle_frame(0, &only(1, 0xffff));
    assert!(l.may_start(1, 0) && l.may_start(1, 1));
    let s = l.stats(1);
    assert_eq!((s.link_pauses, s.priorities[1].indications), (1, 1));
}

/// PFCE off with RFE on: a PAUSE stops the whole link; a PFC frame is not acted on.
#[test]
fn with_pfce_off_only_pause_frames_act_and_they_stop_everything() {
    let mut l = link(10_000_000_000);
    let mut cfg = *l.config();
    cfg.pfce = false;
    l.set_config(cfg);
    l.handle_frame(0, &only(4, 0xffff));
    assert!(l.may_start(1, 4), "PFC not acted on");
    l.handle_frame(10, &pause(100)); // 5120 ns at 10 Gbit/s
    assert!((0..8).all(|p| !l.may_start(11, p)), "the whole link stops");
    assert!((0..8).all(|p| l.may_start(10 + 5120, p)));
    assert_eq!(l.stats(10_000).link_paused_ns, 5120);
}

#[test]
fn other_control_frames_are_counted_and_passed_or_dropped_as_configured() {
    let mut l = link(10_000_000_000);
    let mut other = pause(5);
    other[15] = 0x02; // another opcode
    let fcs = frame::crc32(&other[..60]);
    other[60..].copy_from_slice(&fcs.to_le_bytes());
    let mut corrupt = pause(5);
    corrupt[17] ^= 0xff;
    assert_eq!(l.handle_frame(0, &other), Verdict::Dropped);
    assert_eq!(l.handle_frame(0, &corrupt), Verdict::Dropped);
    assert_eq!(l.handle_frame(0, &other[..60]), Verdict::Dropped);
    assert!(l.may_start(0, 0), "a corrupt pause frame pauses nothing");
    let mut cfg = *l.config();
    cfg.pass = PassControl::AllButPause;
    l.set_config(cfg);
    assert_eq!(l.handle_frame(0, &other), Verdict::Pass);
    assert_eq!(l.handle_frame(0, &pause(5)), Verdict::Consumed);
    cfg.pass = PassControl::All;
    l.set_config(cfg);
    assert_eq!(
        l.handle_frame(100, &pause(5)),
        Verdict::Pass,
        "passed, and acted on"
    );
    assert!(!l.may_start(101, 0));
    assert_eq!(l.stats(0).other_control, 4);
}

#[test]
fn a_unicast_pause_counts_only_with_unicast_pause_on() {
    let mut l = link(10_000_000_000);
    let to_me = frame::encode(&PauseFrame {
        dst: ME,
        src: PEER,
        pause: Pause::Link { quanta: 100 },
    });
    assert_eq!(l.handle_frame(0, &to_me), Verdict::Dropped);
    assert!(l.may_start(1, 0));
    let mut cfg = *l.config();
    cfg.unicast_pause = true;
    l.set_config(cfg);
    assert_eq!(l.handle_frame(0, &to_me), Verdict::Consumed);
    assert!(!l.may_start(1, 0));
}

/// A peer that keeps priority 3 paused (a frame every millisecond) while we have work: after
/// 200 ms its pause is no longer honoured; once it has sent none for 200 ms, it is again.
#[test]
fn the_watchdog_stops_honouring_a_storm_and_restores_after_quiet() {
    let mut l = link(10_000_000_000);
    l.set_pending(0, 3, true);
    let mut t = 0;
    while t < 300 * MS {
        l.handle_frame(t, &only(3, 0xffff));
        if t < 200 * MS {
            assert!(!l.may_start(t, 3), "honoured at {t}");
        }
        t += MS;
    }
    assert_eq!(l.poll_event(), Some(Event::StormDetected(3)));
    assert!(l.may_start(t, 3), "not honoured during the storm");
    assert!(l.may_start(t, 0));
    let last = t - MS;
    assert!(l.may_start(last + 199 * MS, 3));
    assert_eq!(l.poll_event(), None);
    l.set_pending(last + 200 * MS, 3, true);
    assert_eq!(l.poll_event(), Some(Event::StormRestored(3)));
    l.handle_frame(last + 201 * MS, &only(3, 0xffff));
    assert!(!l.may_start(last + 201 * MS, 3), "honoured again");
    assert_eq!(l.stats(last + 202 * MS).priorities[3].watchdog_trips, 1);
}

/// On a slow link one frame pauses for half a minute. The watchdog drops that pause when it
/// trips: once restored, the priority runs until a new frame comes, and no new trip follows.
#[test]
fn a_pause_the_watchdog_dropped_does_not_come_back_on_restore() {
    let mut l = link(1_000_000);
    l.set_pending(0, 3, true);
    l.handle_frame(0, &only(3, 0xffff));
    assert!(!l.may_start(199 * MS, 3));
    l.set_pending(200 * MS, 3, true);
    assert_eq!(l.poll_event(), Some(Event::StormDetected(3)));
    assert!(l.may_start(201 * MS, 3));
    l.set_pending(400 * MS, 3, true);
    assert_eq!(l.poll_event(), Some(Event::StormRestored(3)));
    for t in [401 * MS, 700 * MS, 2000 * MS] {
        l.set_pending(t, 3, true);
        assert!(l.may_start(t, 3), "paused again at {t} without a frame");
    }
    assert_eq!(l.poll_event(), None, "no second trip");
    let s = l.stats(2000 * MS).priorities[3];
    assert_eq!((s.watchdog_trips, s.paused_ns), (1, 200 * MS));
}

#[test]
fn a_long_pause_without_pending_work_trips_nothing() {
    let mut l = link(10_000_000_000);
    for t in (0..400 * MS).step_by(MS as usize) {
        l.handle_frame(t, &only(6, 0xffff));
    }
    assert!(!l.may_start(400 * MS, 6));
    assert_eq!(l.poll_event(), None);
}

/// Our backlog above XOFF sends a PFC frame for its priority, refreshed at half the pause
/// time while it stays; below XON a zero-time frame resumes the peer.
#[test]
fn our_backlog_pauses_the_peer_refreshes_and_resumes() {
    let mut l = link(10_000_000_000);
    let xoff = l.config().xoff_bytes;
    assert_eq!(xoff, 25_000, "twice a 10 us round trip at 10 Gbit/s");
    assert!(l.poll_transmit(0).is_none());
    l.set_backlog(0, 3, xoff + 1);
    let f = frame::decode(&l.poll_transmit(0).expect("XOFF"), None).unwrap();
    let mut want = [0; 8];
    want[3] = 0xffff;
    assert_eq!(
        f.pause,
        Pause::Priorities {
            enabled: 1 << 3,
            quanta: want
        }
    );
    assert_eq!(f.src, ME);
    assert!(
        l.poll_transmit(1_000_000).is_none(),
        "not before the refresh"
    );
    let half = l.quanta_ns(0xffff) / 2;
    assert!(
        l.poll_transmit(half).is_some(),
        "refreshed before it runs out"
    );
    l.set_backlog(half + 10, 3, xoff / 2 + 1);
    assert!(
        l.poll_transmit(half + 10).is_none(),
        "between XON and XOFF nothing changes"
    );
    l.set_backlog(half + 20, 3, 0);
    let f = frame::decode(&l.poll_transmit(half + 20).expect("XON"), None).unwrap();
    assert_eq!(
        f.pause,
        Pause::Priorities {
            enabled: 1 << 3,
            quanta: [0; 8]
        }
    );
    assert_eq!(l.stats(0).priorities[3].requests, 3);
}

#[test]
fn the_next_timeout_is_the_earliest_thing_due() {
    let mut l = link(100_000_000_000);
    assert_eq!(l.next_timeout(), None);
    l.handle_frame(0, &only(1, 1000));
    assert_eq!(l.next_timeout(), Some(5120));
    l.set_pending(0, 1, true);
    assert_eq!(l.next_timeout(), Some(5120));
    l.handle_frame(0, &pause(10));
    assert_eq!(l.next_timeout(), Some(52));
}
