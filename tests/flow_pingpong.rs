//! A ping-pong with flow control and a window of one: each side keeps a single receive buffer
//! posted (as `fi_pingpong` does), so every message must win its credit back from the reply,
//! which carries it.

mod support;
use support::*;
use umq::abi::errno::*;
use umq::abi::types::*;

#[test]
fn a_window_of_one_ping_pongs() {
    init_flow_control(1, 0, false);
    let (a, b) = (create("pa", 64), create("pb", 64));
    bind_pair(a, b);
    for h in [a, b] {
        assert_eq!(post(h, UMQ_IO_RX, &alloc(1, 64)), Ok(1));
    }
    for i in 0..1000u64 {
        for (from, to) in [(a, b), (b, a)] {
            let wr = sends(2 * i, 1);
            assert_eq!(
                post(from, UMQ_IO_TX, &wr),
                Ok(1),
                "round {i}: {:?}",
                stats(from)
            );
            let got = poll(to, UMQ_IO_RX, 4);
            assert_eq!(got.len(), 1, "round {i}");
            assert_eq!(seq_of(got[0]), 2 * i);
            assert_eq!(post(to, UMQ_IO_RX, &got), Ok(1));
            let done = poll(from, UMQ_IO_TX, 4);
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
