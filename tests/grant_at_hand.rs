//! A post over the network that the window refuses takes in the peer's grant that has already
//! arrived before it refuses. Over the network a grant travels (in the peer's flow-control
//! area, or on a message), and only a round of ours takes it in; a post's round runs after
//! the post's admission, so a post that found the window empty was refused with the credit
//! for it waiting on the connection, and only the caller's next try went. Two queues of this
//! process over the network provider (its node connects to itself), one-way: `a` spends its
//! whole window, `b` takes the messages in, posts their buffers back and ships the grant; once
//! the grant has had time to arrive, `a`'s next post must go at its first try.

mod support;
use std::time::{Duration, Instant};
use support::*;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::types::*;

/// The window.
const WINDOW: u16 = 4;
/// Turns of the test: in each, `a` spends what `b` granted since the last.
const TURNS: u64 = 20;

/// Polls `h` until `n` receive completions came; they are posted back at once.
fn take_in(h: u64, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut got = 0;
    while got < n {
        let bufs = poll(h, UMQ_IO_RX, n - got);
        got += bufs.len();
        assert_eq!(post(h, UMQ_IO_RX, &bufs), Ok(bufs.len()));
        assert!(Instant::now() < deadline, "{got} of {n} messages came");
    }
}

/// Runs `b`'s rounds (receive polls, which find nothing: `a` sent nothing since) until it has
/// announced buffers beyond the `used` that `a` has spent; the buffers announced in all.
fn grant_beyond(b: u64, used: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let notified = stats(b).total_local_rx_notified;
        if notified > used {
            return notified;
        }
        assert!(poll(b, UMQ_IO_RX, 1).is_empty(), "a message nobody sent");
        assert!(
            Instant::now() < deadline,
            "b announced nothing beyond {used}"
        );
    }
}

#[test]
fn a_post_refused_for_credit_takes_in_the_grant_that_arrived_first() {
    // SAFETY: set before the library reads it (umq_init), in this binary's only test.
    unsafe { std::env::set_var("UMQ_PROVIDER", "fabric") };
    init_flow_control(WINDOW, 1, false);
    let (a, b) = (create("ga", 64), create("gb", 64));
    bind_pair(a, b);
    assert_eq!(transport_stats(a).transport, UMQ_EXT_TRANSPORT_FABRIC);
    let rx = alloc(WINDOW as usize, 64);
    assert_eq!(post(b, UMQ_IO_RX, &rx), Ok(WINDOW as usize));
    // A first message, which may wait: the initial window travels on a connection the node
    // sets up with its first message, a handshake that takes rounds on both sides (UCX's).
    let deadline = Instant::now() + Duration::from_secs(10);
    while post(a, UMQ_IO_TX, &sends(0, 1)) == Ok(0) {
        assert!(
            Instant::now() < deadline,
            "no initial window: {:?}",
            stats(a)
        );
    }
    take_in(b, 1);
    reap_sends(a);
    let mut seq = 1;
    for turn in 0..TURNS {
        // b's grant goes, and has time to arrive. b's rounds run a while more first: over the
        // UCX engine a grant made while the last is on its way leaves in a later round.
        let granted = grant_beyond(b, seq);
        let until = Instant::now() + Duration::from_millis(2);
        while Instant::now() < until {
            assert!(poll(b, UMQ_IO_RX, 1).is_empty(), "a message nobody sent");
        }
        std::thread::sleep(Duration::from_millis(50));
        let sent = seq;
        while seq < granted {
            let before = stats(a);
            assert_eq!(
                post(a, UMQ_IO_TX, &sends(seq, 1)),
                Ok(1),
                "turn {turn}, message {seq} of the {granted} granted: refused with the grant \
                 at hand (before: {before:?})",
            );
            seq += 1;
        }
        take_in(b, (seq - sent) as usize);
        reap_sends(a);
    }
    settle_pair(a, b);
    assert_identities(a, b);
}
