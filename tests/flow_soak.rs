//! Randomized, seeded soak of flow control on a bound pair (plain window, one thread): random
//! batch sizes, random receive posting, random polling directions, both directions at once.
//! Each side also switches queued-send mode on and off now and then, so sends beyond the window
//! wait in the send queue without credit and take it as it arrives, across the switches.
//! Asserts in-order delivery of every message, zero receives without a posted buffer, and the
//! spec's identities at quiescent points. `UMQ_SOAK_SEED` and `UMQ_SOAK_MESSAGES` override the
//! defaults (seed 0x5eed, 1,000,000 messages per run; a seed in decimal or `0x` hex); with
//! `UMQ_PROVIDER=shm` the pair binds over shared memory, with `UMQ_PROVIDER=fabric` over the
//! network (the long soaks of docs/RELIABILITY.md).

mod support;
use support::*;
use umq::abi::errno::*;
use umq::abi::pro_types::*;
use umq::abi::types::*;

const DEPTH: u32 = 64;

struct Peer {
    h: u64,
    held: Vec<*mut umq_buf_t>,
    next_send: u64,
    next_recv: u64,
    to_send: u64,
    updates: u64,
}

fn receive(p: &mut Peer, got: Vec<*mut umq_buf_t>) {
    for b in got {
        let (status, len, op, imm) = unsafe {
            (
                (*b).status(),
                (*b).total_data_size,
                (*b).pro().opcode,
                (*b).pro().imm_data,
            )
        };
        assert!(
            status == UMQ_BUF_SUCCESS || status == UMQ_BUF_FLOW_CONTROL_UPDATE,
            "status {status}"
        );
        if status == UMQ_BUF_FLOW_CONTROL_UPDATE {
            p.updates += 1;
        }
        if len == 0 {
            assert_eq!(
                status, UMQ_BUF_FLOW_CONTROL_UPDATE,
                "only standalone updates are empty"
            );
        } else {
            assert_eq!(seq_of(b), p.next_recv, "out of order");
            if op == UMQ_OPC_SEND_IMM {
                assert_eq!(imm, p.next_recv << 1);
            } else {
                assert_eq!(imm, 0);
            }
            p.next_recv += 1;
        }
        p.held.push(b);
    }
}

/// Every credit `p`'s queue consumed went to one of its sends or standalone updates. The
/// standalone count comes from the extended statistics, whose query first runs a flow-control
/// step, and the consumed count from the plain ones: between the two reads the queue's step (the
/// second query's, or the progress engine's on another thread, as over the network) may send
/// more standalones. So the consumed count lies between the sends plus the standalones counted
/// before it was read (`standalone_before`) and those counted after.
fn assert_credit_once_per_send(p: &Peer, standalone_before: u64, seed: u64, step: u64) {
    let consumed = stats(p.h).total_remote_rx_consumed;
    let standalone_after = ext_stats(p.h).standalone;
    assert!(
        (p.next_send + standalone_before..=p.next_send + standalone_after).contains(&consumed),
        "credit consumed once per send (seed {seed:#x}, step {step}): {consumed} consumed, \
         {} sends, {standalone_before}..={standalone_after} standalone updates",
        p.next_send
    );
}

#[test]
fn soak() {
    let seed = env_u64("UMQ_SOAK_SEED", 0x5eed);
    let total = env_u64("UMQ_SOAK_MESSAGES", 1_000_000);
    let mut rng = Rng(seed | 1);
    init_flow_control(0, 0, false);
    let (a, b) = (create("soak-a", DEPTH), create("soak-b", DEPTH));
    bind_pair(a, b);
    // A run asked to go over shared memory or the network cannot pass on loopback.
    forced_transport(a);
    let mut peers = [a, b].map(|h| Peer {
        h,
        held: alloc(DEPTH as usize, 64),
        next_send: 0,
        next_recv: 0,
        to_send: total / 2,
        updates: 0,
    });
    let mut steps = 0u64;
    let mut quiescent_checks = 0;
    let mut queued_switches = [0u64; 2];
    let mut queued_seen = 0u64;
    while peers
        .iter()
        .any(|p| p.to_send > 0 || p.next_recv < total / 2)
    {
        steps += 1;
        assert!(
            steps < total * 200,
            "no progress after {steps} steps (seed {seed:#x})"
        );
        let i = rng.below(2) as usize;
        let p = &mut peers[i];
        if rng.below(500) == 0 {
            let on = rng.below(2);
            queued_mode(p.h, on == 1);
            queued_switches[on as usize] += 1;
        }
        match rng.below(5) {
            0 => {
                let k = rng.below(p.held.len() as u64 + 1) as usize;
                let bufs: Vec<_> = p.held.drain(..k).collect();
                let taken = post(p.h, UMQ_IO_RX, &bufs).unwrap();
                assert_eq!(
                    taken, k,
                    "receive depth cannot be exceeded: we own only DEPTH buffers"
                );
            }
            1 | 2 if p.to_send > 0 => {
                let k = (1 + rng.below(32)).min(p.to_send) as usize;
                let wrs = sends(p.next_send, k);
                let taken = post(p.h, UMQ_IO_TX, &wrs).unwrap();
                free_all(&wrs[taken..]);
                p.next_send += taken as u64;
                p.to_send -= taken as u64;
            }
            3 => {
                let dir = [UMQ_IO_RX, UMQ_IO_ALL][rng.below(2) as usize];
                let got = poll(p.h, dir, 1 + rng.below(64) as usize);
                let (tx, rx): (Vec<_>, Vec<_>) = got
                    .into_iter()
                    .partition(|&b| unsafe { (*b).io_direction() } == UMQ_IO_TX);
                for &t in &tx {
                    assert_eq!(unsafe { (*t).status() }, UMQ_BUF_SUCCESS);
                }
                free_all(&tx);
                receive(p, rx);
            }
            _ => reap_sends(p.h),
        }
        let ext = ext_stats(peers[i].h);
        queued_seen = queued_seen.max(ext.queued_wr);
        if ext.queued_wr == 0 {
            // Nothing waits: every send posted so far went out on exactly one credit (and a
            // standalone update counts as one credit received and used).
            assert_credit_once_per_send(&peers[i], ext.standalone, seed, steps);
        }
        if steps.is_multiple_of(5_000) {
            quiescent_checks += 1;
            settle_pair(a, b);
            assert_identities(a, b);
        }
    }
    for p in &peers {
        assert_eq!(p.next_recv, total / 2);
        assert_eq!(ext_stats(p.h).rx_without_buffer, 0);
    }
    // The last messages' announcements may still be on their way, as at any quiescent point.
    settle_pair(a, b);
    assert_identities(a, b);
    let (ea, eb) = (ext_stats(a), ext_stats(b));
    eprintln!(
        "seed {seed:#x}: {total} messages in {steps} steps, {quiescent_checks} identity checks; \
         updates seen {} / {}; piggybacked {} / {}, standalone {} / {}, area-only {} / {}",
        peers[0].updates,
        peers[1].updates,
        ea.piggybacked,
        eb.piggybacked,
        ea.standalone,
        eb.standalone,
        ea.area_only,
        eb.area_only
    );
    assert!(
        ea.piggybacked + eb.piggybacked > 0 && ea.standalone + eb.standalone > 0,
        "both kinds of announcement exercised"
    );
    assert!(
        queued_switches[0] > 0 && queued_switches[1] > 0 && queued_seen > 0,
        "queued mode switched both ways ({queued_switches:?}) and held sends ({queued_seen})"
    );
    eprintln!("queued mode switched off/on {queued_switches:?}; most sends held {queued_seen}");
}
