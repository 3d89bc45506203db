//! The progress engine never waits for a queue whose application is in one of its calls: it
//! leaves the queue to that call (`Serviced::Busy`), and comes back for the round it owes by
//! a deadline of the queue's. Waiting, it lost the lock to a polling application look after
//! look: in a network ping-pong the engine yielded and napped for 50-100 ms at a time, twice a
//! second, and each of its wakes took a core from the application.
//!
//! The test holds a network queue's lock as an application thread inside a call does, and has
//! another thread serve the queue as the engine does (`umq::fuzzing::serve_as_engine`); then
//! lets go, and waits for the engine's own thread to run the round it owes.
#![cfg(feature = "fuzzing")]

mod support;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::types::*;
use umq::fuzzing::{round_owed, serve_as_engine};
use umq::transport::progress::Serviced;

/// Long enough that only an engine waiting for the lock takes it: the serve itself is a round.
const HANG: Duration = Duration::from_secs(60);

#[test]
fn the_engine_leaves_a_busy_queue_to_its_application_and_comes_back_for_its_round() {
    // SAFETY: set before the library reads them (umq_init), in this binary's only test. The
    // sweep an hour apart: only the owed round's deadline brings the engine back.
    unsafe {
        std::env::set_var("UMQ_PROVIDER", "fabric");
        std::env::set_var("UMQ_PROGRESS_SWEEP_MS", "3600000");
    }
    init_pro();
    let (a, b) = (create("busy_a", 16), create("busy_b", 16));
    bind_pair(a, b);
    assert_eq!(transport_stats(a).transport, UMQ_EXT_TRANSPORT_FABRIC);
    let q = umq::queue::table::get(a).expect("queue a is live");

    let in_a_call = q.wire.lock();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(serve_as_engine(a)).unwrap());
    let served = rx.recv_timeout(HANG);
    assert_eq!(
        served,
        Ok(Some(Serviced::Busy)),
        "the engine's serve must leave a queue whose lock its application holds, not wait"
    );
    assert_eq!(round_owed(a), Some(true), "and owe it the round");
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(round_owed(a), Some(true), "not run while the lock is held");
    drop(in_a_call);

    let deadline = Instant::now() + Duration::from_secs(10);
    while round_owed(a) == Some(true) {
        assert!(Instant::now() < deadline, "the round owed never ran");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(serve_as_engine(a), Some(Serviced::Ran));

    // The binding still carries a message from b to a.
    post(a, UMQ_IO_RX, &alloc(1, 64)).expect("a takes a receive buffer");
    post(b, UMQ_IO_TX, &sends(0, 1)).expect("b sends");
    let mut landed = Vec::new();
    while landed.is_empty() {
        assert!(Instant::now() < deadline, "b's message never reached a");
        landed = poll(a, UMQ_IO_RX, 1);
    }
    assert_eq!(seq_of(landed[0]), 0);
}
