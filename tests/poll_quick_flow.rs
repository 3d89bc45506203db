//! A send waiting for credit goes out as soon as the credit is there, whichever of the sender's
//! polls comes next: one that the queue's quick look answers (`Queue::poll_quick`, which
//! leaves a poll with flow control to step to the whole poll) or the whole poll. Over loopback
//! the receiver's post of a buffer sends it (`kick_waiting_sender`); the sender's next poll,
//! of either direction, must not hold it back.

mod support;
use support::*;
use umq::abi::types::*;

/// `a`'s two sends under a window of one (queued mode: the second waits for credit); `b`
/// takes the first and posts its buffer again, which grants `a` the credit.
fn second_send_waits(a: u64, b: u64, first: u64) {
    assert_eq!(post(a, UMQ_IO_TX, &sends(first, 2)), Ok(2));
    let got = poll(b, UMQ_IO_RX, 1);
    assert_eq!(got.iter().map(|&m| seq_of(m)).collect::<Vec<_>>(), [first]);
    assert_eq!(post(b, UMQ_IO_RX, &got), Ok(1));
}

/// `b` finds `seq` at its next poll, and posts its buffer again.
fn b_finds(b: u64, seq: u64, after: &str) {
    let got = poll(b, UMQ_IO_RX, 1);
    let seqs: Vec<u64> = got.iter().map(|&m| seq_of(m)).collect();
    assert_eq!(seqs, [seq], "the waiting send went at a's {after}");
    assert_eq!(post(b, UMQ_IO_RX, &got), Ok(1));
}

/// A pair bound under a window of one, `a` in queued mode, each with one receive buffer.
fn pair(name: &str) -> (u64, u64) {
    let (a, b) = (
        create(&format!("{name}a"), 8),
        create(&format!("{name}b"), 8),
    );
    bind_pair(a, b);
    queued_mode(a, true);
    for h in [a, b] {
        assert_eq!(post(h, UMQ_IO_RX, &alloc(1, 64)), Ok(1));
    }
    (a, b)
}

#[test]
fn a_send_waiting_for_credit_goes_at_the_poll_that_finds_it() {
    init_flow_control(1, 0, false);

    // A send poll that takes a completion while a send waits for credit.
    let (a, b) = pair("qt");
    second_send_waits(a, b, 0);
    let done = poll(a, UMQ_IO_TX, 1);
    assert_eq!(done.len(), 1);
    b_finds(b, 1, "send poll");

    // A receive poll that takes a message while a send waits for credit: `b`'s answer.
    let (a, b) = pair("qr");
    second_send_waits(a, b, 0);
    assert_eq!(post(b, UMQ_IO_TX, &sends(5, 1)), Ok(1));
    let answer = poll(a, UMQ_IO_RX, 1);
    assert_eq!(answer.iter().map(|&m| seq_of(m)).collect::<Vec<_>>(), [5]);
    b_finds(b, 1, "receive poll");
}
