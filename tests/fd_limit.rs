//! A process whose soft limit on open files is low (most distributions start one at 1,024)
//! still binds more queues over shared memory than that limit allows descriptors: each queue
//! holds its inbox's memfd (and, in interrupt mode, a doorbell eventfd, and its peer's), and
//! the library raises the soft limit toward the hard one when a descriptor it makes would not
//! fit (`os::new_fd`). And a process with almost no descriptor to spare still opens its
//! network endpoint, whose descriptors libfabric makes (`os::fd_headroom`). Every pair then
//! carries its messages. The test sets its own soft limit, so it is the only test of this
//! binary.

mod support;
use support::*;
use umq::abi::ext::{UMQ_EXT_TRANSPORT_FABRIC, UMQ_EXT_TRANSPORT_SHM};
use umq::abi::types::*;
use umq::ffi::api::{umq_destroy, umq_unbind, umq_uninit};

fn nofile() -> libc::rlimit {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
    r
}

fn set_soft_nofile(soft: u64) {
    let r = libc::rlimit {
        rlim_cur: soft,
        rlim_max: nofile().rlim_max,
    };
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) }, 0);
}

/// `a` sends `seq` to `b`, which takes it (the bytes are the sequence number) and posts its
/// buffer again.
fn carries(a: u64, b: u64, seq: u64) {
    assert_eq!(post(a, UMQ_IO_TX, &sends(seq, 1)), Ok(1));
    let mut got = Vec::new();
    for _ in 0..100_000 {
        got = poll(b, UMQ_IO_RX, 1);
        if !got.is_empty() {
            break;
        }
    }
    assert_eq!(
        got.iter().map(|&m| seq_of(m)).collect::<Vec<_>>(),
        [seq],
        "pair {seq}"
    );
    assert_eq!(post(b, UMQ_IO_RX, &got), Ok(1));
    reap_sends(a);
}

fn open_now() -> u64 {
    std::fs::read_dir("/proc/self/fd").unwrap().count() as u64
}

#[test]
fn queues_bind_past_the_soft_limit_on_descriptors() {
    let before = open_now();
    if shm_pairs_past_the_soft_limit() {
        // The progress thread lets the last queues' descriptors go once it ends, after
        // `umq_uninit`.
        for _ in 0..1000 {
            if open_now() <= before + 8 {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        network_pairs_with_almost_no_descriptor_to_spare();
    }
}

/// False when the hard limit leaves no room for the test.
fn shm_pairs_past_the_soft_limit() -> bool {
    let open_now = open_now();
    let hard = nofile().rlim_max;
    let soft = open_now + 48;
    const PAIRS: u64 = 120;
    if hard < soft + 4 * PAIRS {
        eprintln!("skipped: the hard limit on open files ({hard}) leaves no room to raise");
        return false;
    }
    set_soft_nofile(soft);
    // SAFETY: set before umq_init reads it, in this binary's only test.
    unsafe { std::env::set_var("UMQ_PROVIDER", "shm") };
    init_pro();
    let mut pairs = Vec::new();
    for i in 0..PAIRS {
        // Every fourth pair in interrupt mode: doorbells are descriptors too.
        let mode = if i % 4 == 0 {
            UMQ_MODE_INTERRUPT
        } else {
            UMQ_MODE_POLLING
        };
        pairs.push(bound_pair(&format!("f{i}"), mode, UMQ_EXT_TRANSPORT_SHM));
    }
    let raised = nofile().rlim_cur;
    assert!(
        raised > soft && raised <= hard,
        "the soft limit went from {soft} to {raised} (hard {hard})"
    );
    let held_fds = std::fs::read_dir("/proc/self/fd").unwrap().count() as u64;
    assert!(
        held_fds > soft,
        "the queues hold {held_fds} descriptors, not past the first soft limit {soft}"
    );
    for (i, &(a, b)) in pairs.iter().enumerate() {
        carries(a, b, i as u64);
    }
    end(pairs);
    true
}

/// Two queues named after `name`, in `mode`, bound to each other `over` a transport, the
/// second with two receive buffers.
fn bound_pair(name: &str, mode: umq_queue_mode_t, over: u32) -> (u64, u64) {
    let (a, b) = (
        create_in_mode(&format!("{name}a"), 8, mode),
        create_in_mode(&format!("{name}b"), 8, mode),
    );
    bind_pair(a, b);
    assert_eq!(transport_stats(a).transport, over, "pair {name}");
    assert_eq!(post(b, UMQ_IO_RX, &alloc(2, 64)), Ok(2));
    (a, b)
}

fn end(pairs: Vec<(u64, u64)>) {
    for (a, b) in pairs {
        for h in [a, b] {
            assert_eq!(umq_unbind(h), 0);
            assert_eq!(umq_destroy(h), 0);
        }
    }
    umq_uninit();
}

/// The network endpoint's descriptors are libfabric's (sockets, epoll sets, eventfds): with
/// four to spare, opening it fails unless the library makes room first.
fn network_pairs_with_almost_no_descriptor_to_spare() {
    let soft = open_now() + 4;
    set_soft_nofile(soft);
    // SAFETY: set before umq_init reads it, in this binary's only test.
    unsafe { std::env::set_var("UMQ_PROVIDER", "fabric") };
    init_pro();
    let mut pairs = Vec::new();
    for i in 0..4 {
        pairs.push(bound_pair(
            &format!("n{i}"),
            UMQ_MODE_POLLING,
            UMQ_EXT_TRANSPORT_FABRIC,
        ));
    }
    assert!(nofile().rlim_cur > soft, "the soft limit stayed at {soft}");
    for (i, &(a, b)) in pairs.iter().enumerate() {
        carries(a, b, 100 + i as u64);
    }
    end(pairs);
}
