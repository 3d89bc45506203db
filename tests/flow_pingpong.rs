//! A ping-pong with flow control and a window of one: each side keeps a single receive buffer
//! posted (as `fi_pingpong` does), so every message must win its credit back from the reply,
//! which carries it. On the loopback transport by default; the test command runs it again over
//! shared memory and the network (`UMQ_PROVIDER`), where a message and its grant take a while
//! to arrive: only the first message over the network may wait for credit (b's first grant,
//! which goes before any answer), never a later one.

mod support;
use support::*;
use umq::abi::errno::*;
use umq::abi::ext::UMQ_EXT_TRANSPORT_FABRIC;
use umq::abi::types::*;

#[test]
fn a_window_of_one_ping_pongs() {
    init_flow_control(1, 0, false);
    let (a, b) = (create("pa", 64), create("pb", 64));
    bind_pair(a, b);
    for h in [a, b] {
        assert_eq!(post(h, UMQ_IO_RX, &alloc(1, 64)), Ok(1));
    }
    // Over shared memory the grant is in the peer's area at once, as on loopback.
    let over_network = forced_transport(a) == UMQ_EXT_TRANSPORT_FABRIC;
    for i in 0..1000u64 {
        for (from, to) in [(a, b), (b, a)] {
            let wr = sends(2 * i, 1);
            let first = i == 0 && from == a && over_network;
            post_when_granted(from, &wr, first, &format!("round {i}"));
            let got = poll_some(to, UMQ_IO_RX);
            assert_eq!(got.len(), 1, "round {i}");
            assert_eq!(seq_of(got[0]), 2 * i);
            assert_eq!(post(to, UMQ_IO_RX, &got), Ok(1));
            let done = poll_some(from, UMQ_IO_TX);
            assert_eq!(done.len(), 1);
            assert_eq!(unsafe { (*done[0]).status() }, UMQ_BUF_SUCCESS);
            free_all(&done);
        }
    }
    assert_identities(a, b);
    // Each answer carries the grant of the buffer its sender posted just before, but for a
    // SEND_IMM, whose immediate is the application's (both sides send one every other round):
    // its grant goes through the area. b's first grant goes before it answered anything. The
    // engine's round stands in for an answer that has not come within a millisecond.
    let slack = 1000 / 20;
    for (h, first) in [(a, 0), (b, 1)] {
        let e = ext_stats(h);
        assert_eq!(e.standalone, 0, "{e:?}");
        assert!(
            e.area_only <= 500 + first + slack,
            "grants went aside: {e:?}"
        );
        assert!(e.piggybacked + 500 + first + slack >= 1000, "{e:?}");
    }
}

/// Posts the one SEND `wr` on `h`. Only `may_wait`, the first message over the network, may be
/// refused for credit (`-UMQ_ERR_EAGAIN`, which the helper reports as none taken), and only
/// while its grant is on its way: the post is tried again, and each try runs the link's round
/// that brings it.
fn post_when_granted(h: u64, wr: &[*mut umq_buf_t], may_wait: bool, what: &str) {
    for _ in 0..POLLS {
        match post(h, UMQ_IO_TX, wr) {
            Ok(1) => return,
            Ok(0) if may_wait => {}
            other => panic!("{what}: {other:?}, {:?}", stats(h)),
        }
    }
    panic!("{what}: no credit came, {:?}", stats(h));
}

/// Polls `h` in direction `dir` until something comes: on loopback at the first poll, over
/// shared memory or the network once it arrived.
fn poll_some(h: u64, dir: umq_io_direction_t) -> Vec<*mut umq_buf_t> {
    for _ in 0..POLLS {
        let got = poll(h, dir, 4);
        if !got.is_empty() {
            return got;
        }
    }
    panic!("nothing came to {h:#x} in direction {dir}");
}

/// Tries at most (tens of seconds of polling): what never comes fails the test, not hangs it.
const POLLS: u32 = 10_000_000;
