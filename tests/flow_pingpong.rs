//! A ping-pong with flow control and a window of one: each side keeps a single receive buffer
//! posted (as `fi_pingpong` does), so every message must win its credit back from the reply.

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
}
