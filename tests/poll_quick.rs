//! A send or receive poll that only takes the oldest completion, or finds nothing to do, is
//! answered by the queue's quick look (`Queue::poll_quick`); every other poll runs whole. A
//! timed poll (the perf statistics on) always runs whole. Two loopback pairs run the same drawn
//! sequence of posts and polls, one timed and one not, and every call must answer alike: the
//! same return value, the same messages in the same order, the same statuses.

mod support;
use support::*;
use umq::abi::errno::*;
use umq::abi::types::*;
use umq::ffi::api::umq_destroy;
use umq::ffi::pro_api::umq_poll;

const DEPTH: u32 = 16;
/// At most this many messages waiting at a receiver.
const AHEAD: u64 = 4;

// The pro API without flow control (`init_pro`): flow control's grants can be timed by the
// progress engine (a grant left for an answer that does not come), which would let the two
// pairs' credit differ between calls. Its polls through the quick look are the flow-control
// tests' (`flow_pingpong`, `flow_threads`, `poll_quick_flow`), which assert every answer.

/// One side's part of a pair as the test tracks it.
struct Side {
    h: u64,
    next_seq: u64,
    posted_rx: u64,
    /// Messages sent to this side and not yet polled.
    incoming: u64,
    /// Our sends whose completions were not polled yet.
    unreaped: u64,
}

/// What a call answered: its return value and, for polls, the messages' sequence numbers,
/// statuses and directions.
type Answer = (i32, Vec<(u64, u32, u32)>);

fn answer_of(rc: i32, bufs: &[*mut umq_buf_t]) -> Answer {
    let seen = bufs
        .iter()
        .map(|&b| unsafe { (seq_of(b), (*b).status(), (*b).io_direction()) })
        .collect();
    (rc, seen)
}

/// Runs one drawn step on `sides` (a bound pair): returns what it answered.
fn step(sides: &mut [Side; 2], op: u64, who: usize, k: u64, room: u32) -> Answer {
    let other = 1 - who;
    match op {
        0 => {
            // Sends that the peer has buffers and window for.
            let k = k.min(sides[other].posted_rx.saturating_sub(sides[other].incoming));
            let k = k.min(AHEAD.saturating_sub(sides[other].incoming));
            let k = k.min(DEPTH as u64 - sides[who].unreaped);
            if k == 0 {
                return (0, vec![]);
            }
            let wr = sends(sides[who].next_seq, k as usize);
            let taken = post(sides[who].h, UMQ_IO_TX, &wr).expect("posted");
            assert_eq!(taken, k as usize);
            sides[who].next_seq += k;
            sides[who].unreaped += k;
            sides[other].incoming += k;
            sides[other].posted_rx -= k;
            (taken as i32, vec![])
        }
        1 => {
            let room_left = DEPTH as u64 - sides[who].posted_rx - sides[who].incoming;
            let k = k.min(room_left);
            if k == 0 {
                return (0, vec![]);
            }
            let taken = post(sides[who].h, UMQ_IO_RX, &alloc(k as usize, 64)).expect("posted");
            sides[who].posted_rx += taken as u64;
            (taken as i32, vec![])
        }
        dir => {
            let dir = if dir == 2 { UMQ_IO_TX } else { UMQ_IO_RX };
            let mut out = vec![std::ptr::null_mut(); room as usize];
            let rc = umq_poll(sides[who].h, dir, out.as_mut_ptr(), room);
            assert!(rc >= 0 && rc as u32 <= room, "poll answered {rc}");
            out.truncate(rc as usize);
            match dir {
                UMQ_IO_RX => sides[who].incoming -= rc as u64,
                _ => sides[who].unreaped -= rc as u64,
            }
            let a = answer_of(rc, &out);
            free_all(&out);
            a
        }
    }
}

fn pair(name: &str) -> [Side; 2] {
    let (a, b) = (
        create(&format!("{name}a"), DEPTH),
        create(&format!("{name}b"), DEPTH),
    );
    bind_pair(a, b);
    let side = |h, first| Side {
        h,
        next_seq: first,
        posted_rx: 0,
        incoming: 0,
        unreaped: 0,
    };
    [side(a, 0), side(b, 1 << 32)]
}

#[test]
fn quick_and_whole_polls_answer_alike() {
    init_pro();
    refusals_alike();
    let mut rng = Rng(fault_seed() | 1);
    let (mut quick, mut whole) = (pair("q"), pair("w"));
    let mut delivered = [0u64; 2];
    for i in 0..20_000 {
        let (op, who) = (rng.below(4), rng.below(2) as usize);
        let (k, room) = (1 + rng.below(3), 1 + rng.below(4) as u32);
        let q = step(&mut quick, op, who, k, room);
        umq::dfx::perf_switch(true);
        let w = step(&mut whole, op, who, k, room);
        umq::dfx::perf_switch(false);
        assert_eq!(q, w, "step {i}: op {op} side {who} k {k} room {room}");
        // What a receive poll returns is the peer's messages, in the order it sent them.
        if op == 3 {
            for &(seq, status, dir) in &q.1 {
                let first = if who == 0 { 1 << 32 } else { 0 };
                assert_eq!(seq, first + delivered[who], "step {i}");
                assert_eq!((status, dir), (UMQ_BUF_SUCCESS, UMQ_IO_RX));
                delivered[who] += 1;
            }
        }
        if op == 2 {
            assert!(
                q.1.iter()
                    .all(|&(_, s, d)| (s, d) == (UMQ_BUF_SUCCESS, UMQ_IO_TX))
            );
        }
    }
    assert!(delivered.iter().all(|&n| n > 1000), "{delivered:?}");
}

/// A poll with no room, or of a handle that names no queue, is refused, timed or not.
fn refusals_alike() {
    let mut out = [std::ptr::null_mut(); 1];
    let h = create("refused", DEPTH);
    for timed in [false, true] {
        if timed {
            umq::dfx::perf_switch(true);
        }
        for dir in [UMQ_IO_TX, UMQ_IO_RX] {
            assert_eq!(umq_poll(h, dir, std::ptr::null_mut(), 1), -UMQ_ERR_EINVAL);
            assert_eq!(umq_poll(h, dir, out.as_mut_ptr(), 0), -UMQ_ERR_EINVAL);
            assert_eq!(umq_poll(h, dir, out.as_mut_ptr(), 1), 0);
            assert_eq!(
                umq_poll(h ^ (1 << 40), dir, out.as_mut_ptr(), 1),
                -UMQ_ERR_EINVAL
            );
        }
        if timed {
            umq::dfx::perf_switch(false);
        }
    }
    assert_eq!(umq_destroy(h), 0);
}
