use super::*;
use std::sync::Arc;

fn knobs() -> Knobs {
    Knobs {
        initial_credit: 4,
        is_limited: true,
        ..Knobs::default()
    }
}

fn credit(pool: &Arc<Pool>, umqh: u64) -> Credit {
    Credit::new(Params::new(&knobs(), 64, 64), pool.clone(), umqh, 0)
}

/// Carries every message each way until neither side has one left.
fn exchange(a: &mut Credit, b: &mut Credit) {
    loop {
        let mut moved = false;
        while let Some(m) = a.take_outgoing() {
            b.on_msg(m);
            moved = true;
        }
        while let Some(m) = b.take_outgoing() {
            a.on_msg(m);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

#[test]
fn defaults_follow_the_reference_clamping() {
    let p = Params::new(&Knobs::default(), 256, 128);
    assert_eq!(p.initial_credit, 16, "rx_depth / 16");
    assert_eq!(p.max_credits_request, 256, "512, within the depth");
    assert_eq!((p.return_ratio, p.min_reserved_credit), (2, 2));
    assert_eq!(p.credit_multiple, 2.0);
    assert_eq!((p.idle_return_us, p.req_timeout_us), (10_000, 1_000_000));
    let k = Knobs {
        fc_req_timeout_ms: -1,
        timeout_ms: 5,
        credit_multiple: 1.5,
        ..Knobs::default()
    };
    let p = Params::new(&k, 4096, 64);
    assert_eq!((p.idle_return_us, p.req_timeout_us), (5_000, 0));
    assert_eq!(p.max_credits_request, 512);
    assert_eq!(p.credit_multiple, 1.5);
    let k = Knobs {
        fc_req_timeout_ms: 90_000,
        ..Knobs::default()
    };
    assert_eq!(
        Params::new(&k, 64, 64).req_timeout_us,
        60_000_000,
        "clamped to 60 s"
    );
}

#[test]
fn frames_round_trip_and_hostile_ones_are_refused() {
    let m = Msg {
        kind: Kind::Rep,
        count: 1023,
        ratio: 3,
        seq: 200,
    };
    assert_eq!(Msg::from_frame(&m.frame()), Some(Ok(m)));
    let mut pause = m.frame();
    pause[12..14].copy_from_slice(&0x8808u16.to_be_bytes());
    assert_eq!(Msg::from_frame(&pause), None, "the pause machine's");
    let mut f = m.frame();
    f[18..20].copy_from_slice(&1024u16.to_le_bytes());
    assert!(matches!(Msg::from_frame(&f), Some(Err(_))), "count");
    let mut f = m.frame();
    f[15] = 0;
    assert!(
        matches!(Msg::from_frame(&f), Some(Err(_))),
        "seq 0 is never sent"
    );
    let mut f = m.frame();
    f[14] = 9;
    assert!(matches!(Msg::from_frame(&f), Some(Err(_))), "kind");
    assert!(
        matches!(Msg::from_frame(&m.frame()[..20]), Some(Err(_))),
        "length"
    );
}

#[test]
fn grants_shrink_as_the_pool_fills() {
    assert_eq!(allocate_by_load(0, 100, 40), 40);
    assert_eq!(allocate_by_load(40, 100, 40), 28, "six tenths free: 7/10");
    assert_eq!(allocate_by_load(60, 100, 40), 20, "four tenths: half");
    assert_eq!(
        allocate_by_load(85, 100, 40),
        12,
        "a tenth and a half: 3/10"
    );
    assert_eq!(allocate_by_load(95, 100, 40), 4, "under a tenth: 1/10");
    assert_eq!(allocate_by_load(100, 100, 40), 2, "at least two");
    assert_eq!(load_step(0, 100), 3);
    assert_eq!(load_step(50, 100), 2);
    assert_eq!(load_step(80, 100), 1);
    assert_eq!(load_step(95, 100), 0);
}

#[test]
fn a_sender_asks_once_is_granted_and_asks_for_more_next_time() {
    let (pa, pb) = (Arc::new(Pool::new(64, true)), Arc::new(Pool::new(64, true)));
    let (mut a, mut b) = (credit(&pa, 1), credit(&pb, 2));
    pb.recharge(64);
    assert_eq!(a.take_credit(1, 10), 0, "no credit before asking");
    assert_eq!(a.take_credit(1, 11), 0, "one request outstanding");
    assert_eq!(a.packets.sent, 1);
    exchange(&mut a, &mut b);
    assert_eq!(a.window(), 4, "granted the initial request in full");
    assert_eq!(a.take_updates(), 1, "one update for the application");
    assert_eq!(
        a.credits_per_request(),
        8,
        "a full grant doubles the next request"
    );
    assert_eq!(pb.stats().allocated, 4);
    assert_eq!(pb.stats().idle, 60);
    assert_eq!(a.take_credit(2, 12), 2);
    assert!(
        !a.has_outgoing(),
        "an idle receiver's threshold is lower (2 x 7/10 = 1)"
    );
    assert_eq!(a.take_credit(1, 13), 1);
    exchange(&mut a, &mut b);
    assert_eq!(a.window(), 9, "asked again at the threshold, for 8");
    b.data_arrived(2);
    assert_eq!(pb.stats().allocated, 10);
    assert_eq!(b.granting().consumed, 2);
}

/// Starvation between senders sharing a receive queue: a request that finds the pool empty
/// waits its turn and is answered first when buffers come back, in the order requests came.
#[test]
fn requests_to_an_empty_shared_pool_are_answered_in_order_as_buffers_return() {
    let shared = Arc::new(Pool::new(64, true));
    let peers = Arc::new(Pool::new(64, true));
    let mut members: Vec<Credit> = (0..3).map(|i| credit(&shared, 10 + i)).collect();
    let mut senders: Vec<Credit> = (0..3).map(|i| credit(&peers, 20 + i)).collect();
    shared.recharge(4);
    senders[0].take_credit(1, 0);
    exchange(&mut senders[0], &mut members[0]);
    assert_eq!(senders[0].window(), 4, "took the whole pool");
    for i in [2, 1] {
        senders[i].take_credit(1, 0);
        exchange(&mut senders[i], &mut members[i]);
        assert_eq!(senders[i].window(), 0, "parked, not refused");
    }
    assert!(shared.has_parked());
    shared.recharge(3);
    let granted = shared.serve_parked();
    assert_eq!(
        granted
            .iter()
            .map(|g| (g.umqh, g.count))
            .collect::<Vec<_>>(),
        vec![(12, 3)],
        "the first to ask is first served, with what is idle"
    );
    shared.recharge(8);
    let granted = [granted, shared.serve_parked()].concat();
    assert_eq!(
        granted.iter().map(|g| g.umqh).collect::<Vec<_>>(),
        vec![12, 11]
    );
    for g in granted {
        let i = (g.umqh - 10) as usize;
        members[i].grant(g.count, g.seq, g.ratio);
        exchange(&mut senders[i], &mut members[i]);
    }
    assert_eq!((senders[2].window(), senders[1].window()), (3, 4));
    assert!(!shared.has_parked());
}

/// A duplicate or stale message changes nothing and is counted; a reordered answer to an old
/// request is dropped.
#[test]
fn duplicate_and_reordered_control_messages_are_dropped_and_counted() {
    let (pa, pb) = (Arc::new(Pool::new(64, true)), Arc::new(Pool::new(64, true)));
    let (mut a, mut b) = (credit(&pa, 1), credit(&pb, 2));
    pb.recharge(64);
    a.take_credit(1, 0);
    let req = a.take_outgoing().unwrap();
    b.on_msg(req);
    b.on_msg(req);
    assert_eq!(b.packets.duplicate_req, 1);
    assert_eq!(pb.stats().allocated, 4, "granted once");
    let rep = b.take_outgoing().unwrap();
    assert!(!b.has_outgoing());
    a.on_msg(rep);
    a.on_msg(rep);
    assert_eq!(a.packets.duplicate_rsp, 1);
    assert_eq!(a.window(), 4, "credited once");
    // An answer that overtook nothing: the sender asks again (seq 2), an old answer (seq 1)
    // arrives late and is dropped, the right one is taken.
    a.take_credit(3, 1);
    let req2 = a.take_outgoing().unwrap();
    assert_eq!(req2.seq, 2);
    a.on_msg(rep);
    assert_eq!((a.packets.duplicate_rsp, a.window()), (2, 1));
    b.on_msg(req2);
    a.on_msg(b.take_outgoing().unwrap());
    assert_eq!(a.window(), 9);
}

/// A request the peer never answers fails the sender's posts after `fc_req_timeout_ms`, and
/// an answer that comes after all clears it.
#[test]
fn an_unanswered_request_times_out() {
    let pool = Arc::new(Pool::new(64, true));
    let k = Knobs {
        fc_req_timeout_ms: 5,
        ..knobs()
    };
    let mut a = Credit::new(Params::new(&k, 64, 64), pool.clone(), 1, 0);
    a.take_credit(1, 1_000);
    assert!(!a.request_timed_out(5_999));
    assert!(a.request_timed_out(6_000));
    let req = a.take_outgoing().unwrap();
    a.on_msg(Msg {
        kind: Kind::Rep,
        count: 2,
        ratio: 3,
        seq: req.seq,
    });
    assert!(!a.request_timed_out(60_000));
    let k = Knobs {
        fc_req_timeout_ms: -1,
        ..knobs()
    };
    let mut never = Credit::new(Params::new(&k, 64, 64), pool, 2, 0);
    never.take_credit(1, 0);
    assert!(!never.request_timed_out(u64::MAX / 2));
}

/// Credit a sender holds without sending goes back after `timeout_ms`, and the receiver's
/// pool has it again (serving a parked request with it).
#[test]
fn idle_credit_returns_to_the_pool() {
    let (pa, pb) = (Arc::new(Pool::new(64, true)), Arc::new(Pool::new(64, true)));
    let (mut a, mut b) = (credit(&pa, 1), credit(&pb, 2));
    pb.recharge(12);
    a.take_credit(1, 0);
    exchange(&mut a, &mut b);
    a.take_credit(3, 1);
    exchange(&mut a, &mut b);
    assert_eq!((a.window(), pb.stats().idle), (9, 0));
    let at = a.return_due_at().expect("credit held");
    assert_eq!(at, 1 + 10_000);
    assert!(!a.return_if_idle(at - 1));
    assert!(a.return_if_idle(at));
    assert!(!a.return_if_idle(at), "one return outstanding");
    exchange(&mut a, &mut b);
    assert_eq!(a.window(), 5, "half went back (return_ratio 2)");
    assert_eq!(pb.stats().idle, 4, "and is idle at the receiver");
    assert_eq!(b.granting().allocated, 8);
    assert_eq!(a.credits_per_request(), 8, "the next request shrinks");
}

#[test]
fn an_unlimited_pool_grants_by_load_whatever_is_posted() {
    let (pa, pb) = (
        Arc::new(Pool::new(64, true)),
        Arc::new(Pool::new(64, false)),
    );
    let (mut a, mut b) = (credit(&pa, 1), credit(&pb, 2));
    a.take_credit(1, 0);
    exchange(&mut a, &mut b);
    assert_eq!(a.window(), 4);
    assert_eq!(pb.stats().idle, 0);
    b.release_granted();
    assert_eq!(
        pb.stats().allocated,
        0,
        "a binding's unused grants go back when it ends"
    );
}

/// A receive queue of one's own offers its first credit unasked once buffers are posted, once
/// a binding; a sender that asked meanwhile is answered as usual.
#[test]
fn the_first_credit_is_offered_once_buffers_are_posted() {
    let (pa, pb) = (Arc::new(Pool::new(64, true)), Arc::new(Pool::new(64, true)));
    let (mut a, mut b) = (credit(&pa, 1), credit(&pb, 2));
    b.offer_initial();
    assert!(!b.has_outgoing(), "nothing idle to offer");
    pb.recharge(16);
    b.offer_initial();
    exchange(&mut a, &mut b);
    assert_eq!(a.window(), 4);
    assert_eq!(
        a.take_updates(),
        0,
        "an offer is no answer: no update buffer"
    );
    assert_eq!(a.packets.duplicate_rsp, 0);
    b.offer_initial();
    assert!(!b.has_outgoing(), "once a binding");
    assert_eq!(a.take_credit(3, 0), 3);
    exchange(&mut a, &mut b);
    assert_eq!(
        a.window(),
        5,
        "its first request (for initial_credit) answered as usual"
    );
    let offer = Msg {
        kind: Kind::Offer,
        count: 4,
        ratio: 3,
        seq: 0,
    };
    assert_eq!(Msg::from_frame(&offer.frame()), Some(Ok(offer)));
    let mut f = offer.frame();
    f[15] = 1;
    assert!(
        matches!(Msg::from_frame(&f), Some(Err(_))),
        "an offer has no sequence number"
    );
}

/// A peer that sends more than it was granted (hostile, or a message that found a buffer all
/// the same) leaves nothing negative: it holds no credit, and a return or an unbind gives
/// back nothing.
#[test]
fn messages_beyond_the_grants_leave_no_negative_credit() {
    let pool = Arc::new(Pool::new(64, true));
    let mut b = credit(&pool, 2);
    pool.recharge(4);
    b.data_arrived(5);
    assert_eq!(b.granting().unused(), 0);
    b.on_msg(Msg {
        kind: Kind::Return,
        count: 3,
        ratio: 0,
        seq: 1,
    });
    assert_eq!(
        b.take_outgoing().map(|m| (m.kind, m.count)),
        Some((Kind::ReturnAck, 0))
    );
    b.release_granted();
    let s = pool.stats();
    assert_eq!((s.idle, s.allocated), (4, 0));
}
