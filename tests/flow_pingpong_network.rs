//! A ping-pong with a window of one over the network provider (two queues of this process: its
//! node connects to itself). Each side answers what it takes after posting its buffer back, so
//! the answer can carry that buffer's grant: no grant may travel as a write of its own, which
//! made every answer two messages and tripled the half round trip.

mod support;
use std::time::{Duration, Instant};
use support::*;
use umq::abi::errno::UMQ_BUF_SUCCESS;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::types::*;

const ROUNDS: u64 = 1000;

/// Polls `h` until one completion in `dir` comes.
fn poll_one(h: u64, dir: umq_io_direction_t) -> *mut umq_buf_t {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let [b] = poll(h, dir, 1)[..] {
            return b;
        }
        assert!(Instant::now() < deadline, "nothing to poll on {h:#x}");
    }
}

/// Posts one SEND of `sends` (every fourth a SEND_IMM with an immediate of its own), waiting
/// while it finds no credit; whether it had to.
fn send(h: u64, seq: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    let wr = sends(seq, 1);
    let mut waited = false;
    while post(h, UMQ_IO_TX, &wr) == Ok(0) {
        assert!(
            Instant::now() < deadline,
            "message {seq}: no credit: {:?}",
            stats(h)
        );
        waited = true;
    }
    waited
}

#[test]
fn answers_carry_the_grants_of_a_window_of_one_over_the_network() {
    // SAFETY: set before the library reads it (umq_init), in this binary's only test.
    unsafe { std::env::set_var("UMQ_PROVIDER", "fabric") };
    init_flow_control(1, 1, false);
    let (a, b) = (create("na", 64), create("nb", 64));
    bind_pair(a, b);
    for h in [a, b] {
        assert_eq!(transport_stats(h).transport, UMQ_EXT_TRANSPORT_FABRIC);
        assert_eq!(post(h, UMQ_IO_RX, &alloc(1, 64)), Ok(1));
    }
    let mut waited = [0; 2];
    for i in 0..ROUNDS {
        for (from, to) in [(a, b), (b, a)] {
            let seq = 2 * i + u64::from(from == b);
            // Each side's first message may wait for the peer's initial window.
            if send(from, seq) && i > 0 {
                waited[usize::from(from == b)] += 1;
            }
            let got = poll_one(to, UMQ_IO_RX);
            assert_eq!(seq_of(got), seq);
            assert_eq!(post(to, UMQ_IO_RX, &[got]), Ok(1));
            let done = poll_one(from, UMQ_IO_TX);
            assert_eq!(unsafe { (*done).status() }, UMQ_BUF_SUCCESS);
            free_all(&[done]);
        }
    }
    // A SEND_IMM carries the application's immediate, not a grant: the grant goes through
    // the area ahead of it. a answers with one every other round (seq % 4 == 0), b never.
    // The engine's round stands in for an answer that has not come within a millisecond (the
    // last message's, or one of a thread descheduled that long), once each time.
    let slack = ROUNDS / 20;
    for (h, imm_answers, first, waited) in [(a, ROUNDS / 2, 0, waited[0]), (b, 0, 1, waited[1])] {
        let e = ext_stats(h);
        assert!(waited <= slack, "{waited} answers waited for credit: {e:?}");
        assert_eq!(e.standalone, 0, "{e:?}");
        // b's first grant goes before it answered anything: the area carries it.
        assert!(
            e.area_only <= imm_answers + first + slack,
            "grants went as writes: {e:?}"
        );
        assert!(
            e.piggybacked + imm_answers + first + slack >= ROUNDS,
            "{e:?}"
        );
    }
}
