//! An interrupt-mode queue over shared memory whose peer could not duplicate its doorbell
//! (the kernel refuses `pidfd_getfd` under Yama's `ptrace_scope` 1 until the queue's process
//! has named the peer, which it does only at its own bind) is rung through its process's call
//! bell instead: the peer's rounds that change what it waits for send the ring, and the queue's
//! progress thread need not look every millisecond. `umq::fuzzing::refuse_doorbells` stands in
//! for the kernel's refusal. Each message wakes the sleeping receiver, and some of the wakes
//! come by the call bell (the sender's `calls_sent`). Where no ring can reach the receiver, its
//! progress thread keeps looking every millisecond: it is told it is rung only by a ring.
#![cfg(feature = "fuzzing")]

mod support;
use std::time::Duration;
use support::*;
use umq::abi::ext::UMQ_EXT_TRANSPORT_SHM;
use umq::abi::types::*;
use umq::ffi::api::*;

const MESSAGES: u64 = 20;

/// Waits for `q`'s next receive interrupt (at most a minute: a hang guard), then takes the
/// message and posts its buffer again.
fn wake_and_take(q: u64) -> u64 {
    let mut opt = umq_interrupt_option_t {
        flag: UMQ_INTERRUPT_FLAG_IO_DIRECTION,
        direction: UMQ_IO_RX,
    };
    loop {
        let got = poll(q, UMQ_IO_RX, 1);
        if let [m] = got[..] {
            let seq = seq_of(m);
            assert_eq!(post(q, UMQ_IO_RX, &got), Ok(1));
            return seq;
        }
        assert_eq!(umq_rearm_interrupt(q, false, &mut opt), 0);
        let n = umq_wait_interrupt(q, 60_000, &mut opt);
        assert!(n > 0, "the receiver was never woken ({n})");
        umq_ack_interrupt(q, n as u32, &mut opt);
    }
}

/// Binds an interrupt-mode receiver to a sender over shared memory, wakes it for `MESSAGES`
/// messages sent 20 ms apart (each must arrive, in order), and returns the sender's
/// `calls_sent` and whether the receiver's progress thread counted on being rung.
fn wake_receiver_for_each_message(name: &str) -> (u64, Option<bool>) {
    let sender = create(&format!("{name}s"), 16);
    let receiver = create_in_mode(&format!("{name}r"), 16, UMQ_MODE_INTERRUPT);
    bind_pair(sender, receiver);
    assert_eq!(transport_stats(sender).transport, UMQ_EXT_TRANSPORT_SHM);
    assert_eq!(post(receiver, UMQ_IO_RX, &alloc(4, 64)), Ok(4));
    let taker =
        std::thread::spawn(move || (0..MESSAGES).map(|_| wake_and_take(receiver)).collect());
    for seq in 0..MESSAGES {
        // Time for the receiver's progress thread to arm its doorbell and sleep.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(post(sender, UMQ_IO_TX, &sends(seq, 1)), Ok(1));
        reap_sends(sender);
    }
    let taken: Vec<u64> = taker.join().unwrap();
    assert_eq!(taken, (0..MESSAGES).collect::<Vec<_>>());
    let out = (
        transport_stats(sender).calls_sent,
        umq::fuzzing::rung_by_peer(receiver),
    );
    for h in [sender, receiver] {
        assert_eq!(umq_unbind(h), 0);
        assert_eq!(umq_destroy(h), 0);
    }
    out
}

#[test]
fn a_peer_without_the_doorbell_rings_the_call_bell() {
    umq::fuzzing::refuse_doorbells(true);
    // SAFETY: set before umq_init reads it, in this binary's only test.
    unsafe { std::env::set_var("UMQ_PROVIDER", "shm") };
    init_pro();
    let (calls, rung) = wake_receiver_for_each_message("r");
    assert!(calls > 0, "no wake came by the call bell");
    assert_eq!(
        rung,
        Some(true),
        "rings arrived: the receiver's thread counts on them"
    );
    // Where the rings cannot reach the receiver's call bell (none published: no call bell in
    // its process, or its 127.0.0.1 another network namespace's), its thread keeps its 1 ms
    // look rather than sleeping for the backstop's second on rings that never come.
    umq::fuzzing::hide_call_ports(true);
    let (calls, rung) = wake_receiver_for_each_message("h");
    assert_eq!(calls, 0, "nowhere to ring");
    assert_eq!(
        rung,
        Some(false),
        "never rung, the receiver must not count on it"
    );
    umq_uninit();
}
