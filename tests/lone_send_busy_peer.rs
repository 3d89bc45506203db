//! A lone SEND to a peer queue of this process whose wire lock another thread keeps taking.
//! The post holds its own queue's lock and only tries the peer's (`Queue::send_one_here`):
//! when that fails it must go the general way, waiting for both locks in order, and never
//! refuse, lose, duplicate or reorder a message. A thread here takes and holds the receiver's
//! wire lock in a loop while the main thread ping-pongs single messages; every message must
//! arrive once, in order, with its send completed, and the flow-control identities hold after.
//! The test command runs it again over shared memory and the network (`UMQ_PROVIDER`), where
//! the hog holds the lock the receiver's polls take to land what the link brings.

mod support;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use support::*;
use umq::abi::errno::UMQ_BUF_SUCCESS;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::types::*;

const DEPTH: u32 = 64;
const MESSAGES: u64 = 20_000;
/// Times the hog must have held the lock while the messages went, before they may stop.
const HOG_HOLDS: u64 = 1_000;
/// Messages at most: a hog that by then has not held the lock `HOG_HOLDS` times never ran.
const MESSAGES_AT_MOST: u64 = 5_000_000;

/// Takes `h`'s wire lock over and over, holding it for a few hundred spins each time, until
/// `stop`; returns how many times it held it.
fn hog(h: u64, stop: Arc<AtomicBool>, held: Arc<AtomicU64>) {
    let q = umq::queue::table::get(h).expect("the receiver's queue");
    while !stop.load(Ordering::Acquire) {
        {
            let _w = q.wire.lock();
            for _ in 0..300 {
                std::hint::spin_loop();
            }
        }
        held.fetch_add(1, Ordering::Relaxed);
        for _ in 0..100 {
            std::hint::spin_loop();
        }
    }
}

/// Polls a loopback queue at most this many times for what must already be there, or come
/// once the hog lets go: a message or completion that never comes fails the test, not hangs it.
const POLLS: u32 = 10_000_000;

/// The next receive completion of `h` that carries a message (a standalone window update
/// goes back to the receive queue).
fn next_message(h: u64) -> *mut umq_buf_t {
    for _ in 0..POLLS {
        for b in poll(h, UMQ_IO_RX, 1) {
            if unsafe { (*b).total_data_size } > 0 {
                return b;
            }
            assert_eq!(post(h, UMQ_IO_RX, &[b]).unwrap(), 1);
        }
    }
    panic!("a message that was posted never arrived");
}

/// `h`'s next send completion.
fn next_completion(h: u64) -> Vec<*mut umq_buf_t> {
    for _ in 0..POLLS {
        let d = poll(h, UMQ_IO_TX, 1);
        if !d.is_empty() {
            return d;
        }
    }
    panic!("a send that was posted never completed");
}

#[test]
fn lone_sends_to_a_peer_whose_lock_another_thread_holds_arrive_once_in_order() {
    init_flow_control(16, 4, false);
    let (a, b) = (create("busy-a", DEPTH), create("busy-b", DEPTH));
    bind_pair(a, b);
    let rx = alloc(16, 64);
    assert_eq!(post(b, UMQ_IO_RX, &rx).unwrap(), 16);
    let over_network = forced_transport(a) == UMQ_EXT_TRANSPORT_FABRIC;
    let stop = Arc::new(AtomicBool::new(false));
    let held = Arc::new(AtomicU64::new(0));
    let hogger = {
        let (stop, held) = (stop.clone(), held.clone());
        thread::spawn(move || hog(b, stop, held))
    };
    // The messages go on until the hog has held the lock often while they went: a fast host
    // ran 20,000 of them in 30 ms, in which the hog's thread had held it fewer than a
    // thousand times.
    let mut seq = 0;
    while seq < MESSAGES || held.load(Ordering::Relaxed) < HOG_HOLDS {
        assert!(
            seq < MESSAGES_AT_MOST,
            "the hog barely ran: {} holds in {seq} messages",
            held.load(Ordering::Relaxed)
        );
        let tx = sends(seq, 1);
        let mut tries = 0;
        loop {
            // `post` reports a refusal for credit (-UMQ_ERR_EAGAIN) as none taken. Over loopback
            // and shm b's grants are there at once, so a refusal fails; over the network a grant
            // travels, and a sends its next message as soon as its last completed: the grant
            // b sent for its reposts may still be on its way (tests/grant_at_hand.rs checks
            // that one already arrived is taken).
            match post(a, UMQ_IO_TX, &tx) {
                Ok(1) => break,
                Ok(0) if over_network => {}
                other => panic!("a lone send of message {seq}: {other:?}"),
            }
            tries += 1;
            assert!(tries < POLLS, "no credit for message {seq}");
        }
        let got = next_message(b);
        assert_eq!(seq_of(got), seq, "a message out of order or twice");
        assert_eq!(unsafe { (*got).status() }, UMQ_BUF_SUCCESS);
        assert_eq!(post(b, UMQ_IO_RX, &[got]).unwrap(), 1);
        let done = next_completion(a);
        assert_eq!(done, tx, "the send's own completion");
        assert_eq!(unsafe { (*done[0]).status() }, UMQ_BUF_SUCCESS);
        free_all(&done);
        seq += 1;
    }
    stop.store(true, Ordering::Release);
    hogger.join().unwrap();
    assert!(poll(b, UMQ_IO_RX, 64).is_empty(), "a message arrived twice");
    settle_pair(a, b);
    assert_identities(a, b);
}
