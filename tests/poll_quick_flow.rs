//! A send waiting for credit goes out as soon as the credit is there, whichever of the sender's
//! polls comes next: one that the queue's quick look answers (`Queue::poll_quick`, which
//! leaves a poll with flow control to step to the whole poll) or the whole poll. Over loopback
//! the receiver's post of a buffer sends it (`kick_waiting_sender`), and the sender's next poll,
//! of either direction, must not hold it back. Over shared memory only the sender's own round
//! sends it: the look's flow-control condition on a send poll is what makes that poll run
//! whole. And a receiver whose grant waits for the answer it owes announces it at its next
//! receive poll, though that poll finds nothing: the look's condition on a receive poll makes
//! that poll run whole over loopback. The test runs over both providers, one after the other.

mod support;
use support::*;
use umq::abi::ext::{UMQ_EXT_TRANSPORT_LOOPBACK, UMQ_EXT_TRANSPORT_SHM};
use umq::abi::types::*;
use umq::ffi::api::{umq_destroy, umq_unbind, umq_uninit};

/// `h` takes the message `seq` at its next receive poll (`what` it shows), and posts its
/// buffer again.
fn takes(h: u64, seq: u64, what: &str) {
    let got = poll(h, UMQ_IO_RX, 1);
    let seqs: Vec<u64> = got.iter().map(|&m| seq_of(m)).collect();
    assert_eq!(seqs, [seq], "{what}");
    assert_eq!(post(h, UMQ_IO_RX, &got), Ok(1));
}

/// `a`'s two sends under a window of one (queued mode: the second waits for credit); `b`
/// takes the first and posts its buffer again, which grants `a` the credit.
fn second_send_waits(a: u64, b: u64, first: u64) {
    assert_eq!(post(a, UMQ_IO_TX, &sends(first, 2)), Ok(2));
    takes(b, first, "b takes a's first send");
}

/// `b` finds `seq` at its next poll, and posts its buffer again.
fn b_finds(b: u64, seq: u64, after: &str) {
    takes(b, seq, &format!("the waiting send went at a's {after}"));
}

/// A pair bound `over` a transport under a window of one, `a` in queued mode, each with one
/// receive buffer.
fn pair(name: &str, over: u32) -> (u64, u64) {
    let (a, b) = (
        create(&format!("{name}a"), 8),
        create(&format!("{name}b"), 8),
    );
    bind_pair(a, b);
    assert_eq!(transport_stats(a).transport, over);
    queued_mode(a, true);
    for h in [a, b] {
        assert_eq!(post(h, UMQ_IO_RX, &alloc(1, 64)), Ok(1));
    }
    (a, b)
}

#[test]
fn a_send_waiting_for_credit_goes_at_the_poll_that_finds_it() {
    for (provider, over) in [
        ("loopback", UMQ_EXT_TRANSPORT_LOOPBACK),
        ("shm", UMQ_EXT_TRANSPORT_SHM),
    ] {
        // SAFETY: set before each umq_init reads it, in this binary's only test.
        unsafe { std::env::set_var("UMQ_PROVIDER", provider) };
        init_flow_control(1, 0, false);
        let mut pairs = Vec::new();

        // A send poll that takes a completion while a send waits for credit.
        let (a, b) = pair(&format!("{provider}qt"), over);
        second_send_waits(a, b, 0);
        let done = poll(a, UMQ_IO_TX, 1);
        assert_eq!(done.len(), 1, "{provider}");
        b_finds(b, 1, &format!("send poll, {provider}"));
        pairs.push((a, b));

        // A receive poll that takes a message while a send waits for credit: `b`'s answer.
        let (a, b) = pair(&format!("{provider}qr"), over);
        second_send_waits(a, b, 0);
        assert_eq!(post(b, UMQ_IO_TX, &sends(5, 1)), Ok(1));
        let answer = poll(a, UMQ_IO_RX, 1);
        assert_eq!(answer.iter().map(|&m| seq_of(m)).collect::<Vec<_>>(), [5]);
        b_finds(b, 1, &format!("receive poll, {provider}"));
        pairs.push((a, b));

        // A receive poll of the receiver that finds nothing, while the grant of its last
        // receive post waits for the answer it owes (`Answering`) and no answer comes: that
        // poll announces the grant, so the sender's next poll sends what waits for it.
        let (a, b) = pair(&format!("{provider}qa"), over);
        assert_eq!(post(b, UMQ_IO_TX, &sends(7, 1)), Ok(1));
        takes(a, 7, "a takes b's question");
        assert_eq!(post(a, UMQ_IO_TX, &sends(0, 1)), Ok(1));
        takes(b, 0, "b takes a's answer"); // its repost's grant waits for b's answer
        assert_eq!(post(a, UMQ_IO_TX, &sends(1, 1)), Ok(1)); // waits for that grant
        assert!(
            poll(b, UMQ_IO_RX, 1).is_empty(),
            "{provider}: nothing came yet"
        );
        reap_sends(a);
        b_finds(b, 1, &format!("poll after b's empty one, {provider}"));
        pairs.push((a, b));

        for (a, b) in pairs {
            for h in [a, b] {
                assert_eq!(umq_unbind(h), 0);
            }
            for h in [a, b] {
                assert_eq!(umq_destroy(h), 0);
            }
        }
        umq_uninit();
    }
}
