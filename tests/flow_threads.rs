//! The tx and rx paths of each queue run on different threads at once (four threads for a
//! pair), both directions streaming, with `use_atomic_window = true` (which changes nothing but
//! what the statistics report: the counters live under the queue's lock either way). Every message arrives, in order,
//! never without a posted buffer, and the identities hold once everything is quiet. With
//! `UMQ_PROVIDER=shm` the pair binds over shared memory, with `UMQ_PROVIDER=fabric` over the
//! network.

mod support;
use std::thread;
use support::*;
use umq::abi::errno::*;
use umq::abi::types::*;

const DEPTH: u32 = 64;
const MESSAGES: u64 = 200_000;

fn sender(h: u64) {
    let mut next = 0;
    let mut in_flight = 0usize;
    while next < MESSAGES {
        let k = (MESSAGES - next).min(16) as usize;
        let wrs = sends(next, k);
        let taken = post(h, UMQ_IO_TX, &wrs).unwrap();
        free_all(&wrs[taken..]);
        next += taken as u64;
        in_flight += taken;
        let done = poll(h, UMQ_IO_TX, 64);
        for &b in &done {
            assert_eq!(unsafe { (*b).status() }, UMQ_BUF_SUCCESS);
        }
        in_flight -= done.len();
        free_all(&done);
        if taken == 0 {
            thread::yield_now();
        }
    }
    while in_flight > 0 {
        let done = poll(h, UMQ_IO_TX, 64);
        in_flight -= done.len();
        free_all(&done);
    }
}

fn receiver(h: u64) {
    let bufs = alloc(DEPTH as usize, 64);
    assert_eq!(post(h, UMQ_IO_RX, &bufs).unwrap(), DEPTH as usize);
    let mut next = 0;
    while next < MESSAGES {
        let got = poll(h, UMQ_IO_RX, 64);
        for &b in &got {
            let (status, len) = unsafe { ((*b).status(), (*b).total_data_size) };
            assert!(status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE);
            if len > 0 {
                assert_eq!(seq_of(b), next, "out of order");
                next += 1;
            }
        }
        if got.is_empty() {
            thread::yield_now();
        } else {
            assert_eq!(post(h, UMQ_IO_RX, &got).unwrap(), got.len());
        }
    }
}

#[test]
fn tx_and_rx_of_one_queue_on_different_threads() {
    init_flow_control(0, 0, true);
    let (a, b) = (create("thr-a", DEPTH), create("thr-b", DEPTH));
    bind_pair(a, b);
    // A run asked to go over shared memory or the network cannot pass on loopback.
    forced_transport(a);
    let threads = [
        thread::spawn(move || sender(a)),
        thread::spawn(move || receiver(a)),
        thread::spawn(move || sender(b)),
        thread::spawn(move || receiver(b)),
    ];
    for t in threads {
        t.join().unwrap();
    }
    // Over the network the grants of the receivers' last reposts may still be on their way.
    settle_pair(a, b);
    assert_identities(a, b);
    for h in [a, b] {
        assert_eq!(ext_stats(h).rx_without_buffer, 0);
        assert_eq!(stats(h).total_remote_rx_received_error, 0);
    }
}
