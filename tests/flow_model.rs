//! Exhaustive state-space exploration of the two-peer flow-control protocol.
//!
//! Two queues, each with an application that owns `depth` receive buffers and has `msgs` SENDs
//! to make, run the library's own `umq::flow::Flow` state machine. Every interleaving of the
//! actions below is explored breadth first, for a sweep of small configurations:
//!
//! - `PostRx(i)`: the application posts one receive buffer it holds (then the library publishes
//!   and may announce, as `Queue::post_rx` does);
//! - `Send(i)`: the application tries one SEND (re-reading the peer's area when short of credit,
//!   piggybacking a due announcement, as `Queue::post_tx` does);
//! - `Deliver(i)`: the oldest message in flight toward `i` lands in one of `i`'s posted buffers;
//! - `Poll(i)`: the application takes one receive completion back (then the library may
//!   announce, as `Queue::poll` does).
//!
//! Checked in every reachable state: no message ever lands without a posted buffer, and the
//! per-queue identities hold. Checked globally:
//! - progress: from every reachable state, a state where both sides have sent and delivered
//!   everything is reachable (no deadlock, whatever was exhausted on the way);
//! - no announcement loop: the state space closes (counters only grow while messages move, so an
//!   announcement that triggered another forever would make it infinite);
//! - at quiescence, after both sides read the other's area, `A.notified == B.received` and back;
//! - a sender that never polls or posts anything still gets all its messages out.

use std::collections::{HashMap, VecDeque};
use umq::flow::{Area, Flow, Params, decode_imm};

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Msg {
    Data(Option<u64>),
    Standalone(u64),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Side {
    flow: Flow,
    area: [u64; 3],
    held: u8,
    posted: u8,
    completed: u8,
    to_send: u8,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct State {
    s: [Side; 2],
    /// `wire[i]`: messages from side `i` to the other, in order.
    wire: [VecDeque<Msg>; 2],
}

#[derive(Clone, Copy, Debug)]
struct Config {
    depth: u32,
    iw: u16,
    ni: u16,
    ctrl: u64,
    msgs: u8,
}

#[derive(Clone, Copy, PartialEq)]
enum Policy {
    Everyone,
    /// Side 0 only sends (never posts, never polls).
    SendOnlyZero,
}

fn initial(c: Config, policy: Policy) -> State {
    let side = |to_send| {
        let mut p = Params::new(c.iw, c.ni, c.depth, c.depth);
        p.ctrl_budget = c.ctrl;
        Side {
            flow: Flow::new(p),
            area: [0; 3],
            held: c.depth as u8,
            posted: 0,
            completed: 0,
            to_send,
        }
    };
    let b_sends = if policy == Policy::SendOnlyZero {
        0
    } else {
        c.msgs
    };
    State {
        s: [side(c.msgs), side(b_sends)],
        wire: [VecDeque::new(), VecDeque::new()],
    }
}

/// Runs `f` with both areas materialised, then stores them back.
fn with_areas<R>(st: &mut State, i: usize, f: impl FnOnce(&mut Side, &Area, &Area) -> R) -> R {
    let j = 1 - i;
    let (mine, peer) = (
        Area::from_snapshot(st.s[i].area),
        Area::from_snapshot(st.s[j].area),
    );
    let r = f(&mut st.s[i], &mine, &peer);
    st.s[i].area = mine.snapshot();
    r
}

thread_local! {
    /// Models a weaker design instead: the area is read once (initial window) and never again;
    /// with `REFERENCE_STANDALONE` a standalone update is paid for with ordinary credit, without
    /// it announcements only ride on user SENDs.
    static REFERENCE_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    static REFERENCE_STANDALONE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn reference_only() -> bool {
    REFERENCE_ONLY.with(|r| r.get())
}

/// What the library does after a post or poll on the receive side.
fn announce(st: &mut State, i: usize) {
    if reference_only() {
        return reference_announce(st, i);
    }
    let imm = with_areas(st, i, |side, mine, peer| {
        side.flow.refresh(peer);
        side.flow.publish(mine);
        side.flow.standalone(mine, peer, true)
    });
    if let Some(imm) = imm {
        st.wire[i].push_back(Msg::Standalone(imm));
    }
}

/// The reference: the initial window through the area, then standalone updates paid for with
/// data credit, and nothing when there is none.
fn reference_announce(st: &mut State, i: usize) {
    let imm = with_areas(st, i, |side, mine, peer| {
        if !side.flow.peer_ready() {
            side.flow.refresh(peer);
        }
        side.flow.publish(mine);
        let standalone = REFERENCE_STANDALONE.with(|r| r.get());
        if !standalone || !side.flow.wants_standalone() || side.flow.window() == 0 {
            return None;
        }
        side.flow.take_credit(1);
        side.flow.piggyback().map(|(_, imm)| {
            side.flow.commit(mine);
            imm
        })
    });
    if let Some(imm) = imm {
        st.wire[i].push_back(Msg::Data(Some(imm)));
    }
}

fn post_rx(st: &mut State, i: usize) -> bool {
    if st.s[i].held == 0 {
        return false;
    }
    st.s[i].held -= 1;
    st.s[i].posted += 1;
    assert!(st.s[i].flow.rx_posted(1), "post within depth refused");
    announce(st, i);
    true
}

fn send(st: &mut State, i: usize) -> bool {
    if st.s[i].to_send == 0 {
        return false;
    }
    let msg = with_areas(st, i, |side, mine, peer| {
        if side.flow.window() < 1 && (!reference_only() || !side.flow.peer_ready()) {
            side.flow.refresh(peer);
        }
        if side.flow.take_credit(1) == 0 {
            return None;
        }
        let piggy = side.flow.piggyback().map(|(_, imm)| imm);
        if piggy.is_some() {
            side.flow.commit(mine);
        }
        side.to_send -= 1;
        Some(Msg::Data(piggy))
    });
    // Even a refused send may have changed state (it re-read the area); the explorer drops moves
    // that change nothing.
    st.wire[i].extend(msg);
    true
}

fn deliver(st: &mut State, i: usize) -> Result<bool, String> {
    let j = 1 - i;
    let Some(msg) = st.wire[j].pop_front() else {
        return Ok(false);
    };
    let side = &mut st.s[i];
    if side.posted == 0 {
        return Err(format!("{msg:?} arrived at side {i} with no posted buffer"));
    }
    side.posted -= 1;
    side.completed += 1;
    match msg {
        Msg::Data(imm) => {
            side.flow.data_arrived(1);
            if let Some(a) = imm.and_then(decode_imm) {
                side.flow.on_announcement(a);
            }
        }
        Msg::Standalone(imm) => {
            side.flow
                .on_announcement(decode_imm(imm).expect("standalone carries an update"));
            side.flow.ctrl_arrived();
        }
    }
    Ok(true)
}

fn poll(st: &mut State, i: usize) -> bool {
    if st.s[i].completed == 0 {
        return false;
    }
    st.s[i].completed -= 1;
    st.s[i].held += 1;
    announce(st, i);
    true
}

fn check_local_identities(side: &Side) -> Result<(), String> {
    let s = side.flow.stats();
    if s.remote_rx_window != s.total_remote_rx_received - s.total_remote_rx_consumed {
        return Err(format!("window identity broken: {s:?}"));
    }
    if s.local_rx_posted != s.total_local_rx_posted - s.total_local_rx_notified {
        return Err(format!("posted identity broken: {s:?}"));
    }
    if s.total_remote_rx_received_error + s.total_local_rx_posted_error != 0 {
        return Err(format!("error counters moved: {s:?}"));
    }
    Ok(())
}

fn done(st: &State) -> bool {
    st.s.iter().all(|s| s.to_send == 0) && st.wire.iter().all(|w| w.is_empty())
}

/// At quiescence, after both sides have read each other's area, the pair identity holds.
fn check_pair_identity(st: &State) -> Result<(), String> {
    let mut st = st.clone();
    for i in 0..2 {
        with_areas(&mut st, i, |side, _, peer| side.flow.refresh(peer));
    }
    let (a, b) = (st.s[0].flow.stats(), st.s[1].flow.stats());
    if a.total_local_rx_notified != b.total_remote_rx_received
        || b.total_local_rx_notified != a.total_remote_rx_received
    {
        return Err(format!("pair identity broken at quiescence: {a:?} / {b:?}"));
    }
    Ok(())
}

struct Explored {
    states: usize,
    edges: usize,
}

const STATE_LIMIT: usize = 3_000_000;

fn explore(c: Config, policy: Policy) -> Result<Explored, String> {
    explore_within(c, policy, STATE_LIMIT)
}

// A state's cells are the model's counters, written only while it is being stepped, never
// while it is a key.
#[allow(clippy::mutable_key_type)]
fn explore_within(c: Config, policy: Policy, limit: usize) -> Result<Explored, String> {
    let mut index: HashMap<State, usize> = HashMap::new();
    let mut states: Vec<State> = vec![];
    let mut preds: Vec<Vec<usize>> = vec![];
    let mut queue = VecDeque::new();
    let start = initial(c, policy);
    index.insert(start.clone(), 0);
    states.push(start);
    preds.push(vec![]);
    queue.push_back(0);
    let mut edges = 0;
    while let Some(at) = queue.pop_front() {
        let st = states[at].clone();
        for s in &st.s {
            check_local_identities(s)?;
        }
        if st.wire.iter().all(|w| w.is_empty()) {
            check_pair_identity(&st)?;
        }
        for action in 0..8 {
            let (i, kind) = (action % 2, action / 2);
            if policy == Policy::SendOnlyZero && i == 0 && kind != 1 {
                continue;
            }
            let mut next = st.clone();
            let moved = match kind {
                0 => post_rx(&mut next, i),
                1 => send(&mut next, i),
                2 => deliver(&mut next, i)?,
                _ => poll(&mut next, i),
            };
            if !moved || next == st {
                continue;
            }
            edges += 1;
            let id = match index.get(&next) {
                Some(&id) => id,
                None => {
                    let id = states.len();
                    if id >= limit {
                        return Err(format!(
                            "{c:?}: state space did not close within {limit} states (an announcement loop?)"
                        ));
                    }
                    index.insert(next.clone(), id);
                    states.push(next);
                    preds.push(vec![]);
                    queue.push_back(id);
                    id
                }
            };
            preds[id].push(at);
        }
    }
    // Backward reachability from the goal states.
    let mut can_finish = vec![false; states.len()];
    let mut work: Vec<usize> = (0..states.len()).filter(|&k| done(&states[k])).collect();
    if work.is_empty() {
        return Err(format!(
            "{c:?}: no reachable state has everything delivered"
        ));
    }
    for &k in &work {
        can_finish[k] = true;
    }
    while let Some(k) = work.pop() {
        for &p in &preds[k] {
            if !can_finish[p] {
                can_finish[p] = true;
                work.push(p);
            }
        }
    }
    if let Some(stuck) = (0..states.len()).find(|&k| !can_finish[k]) {
        return Err(format!(
            "{c:?} {}: a reachable state can never finish:\n{:#?}",
            if policy == Policy::Everyone {
                ""
            } else {
                "(send-only side 0)"
            },
            states[stuck]
        ));
    }
    Ok(Explored {
        states: states.len(),
        edges,
    })
}

fn sweep(policy: Policy) -> usize {
    let mut total = 0;
    for depth in 1..=3u32 {
        for iw in 1..=depth as u16 {
            for ni in 1..=depth as u16 {
                // A control budget up to the buffers the application holds (and past half
                // of them only where the sweep stays small): an application may keep fewer
                // buffers posted than the budget.
                let most = if depth < 3 { depth } else { depth / 2 };
                for ctrl in 0..=most as u64 {
                    let c = Config {
                        depth,
                        iw,
                        ni,
                        ctrl,
                        msgs: 3,
                    };
                    let e = explore(c, policy).unwrap_or_else(|e| panic!("{e}"));
                    total += e.states;
                    assert!(e.edges >= e.states - 1);
                }
            }
        }
    }
    total
}

#[test]
fn every_reachable_state_can_finish() {
    let states = sweep(Policy::Everyone);
    eprintln!("explored {states} states over the sweep");
    assert!(
        states > 10_000,
        "the sweep explored suspiciously little: {states}"
    );
}

#[test]
fn deeper_queues_with_a_control_budget_can_finish() {
    for (depth, iw, ni, ctrl) in [(4, 2, 1, 1), (4, 1, 2, 2), (4, 4, 4, 1)] {
        let c = Config {
            depth,
            iw,
            ni,
            ctrl,
            msgs: 2,
        };
        let e = explore(c, Policy::Everyone).unwrap_or_else(|e| panic!("{e}"));
        eprintln!("{c:?}: {} states, {} transitions", e.states, e.edges);
    }
}

#[test]
fn a_sender_that_only_sends_still_gets_everything_out() {
    sweep(Policy::SendOnlyZero);
}

/// The explorer itself must be able to fail. With the area read only for the initial window,
/// announcements riding only on user SENDs deadlock once the windows are spent, and standalone
/// updates paid for with ordinary credit (the reference design) feed each other forever; the
/// checker reports both.
#[test]
fn the_checker_catches_the_reference_design() {
    let c = Config {
        depth: 2,
        iw: 1,
        ni: 1,
        ctrl: 0,
        msgs: 3,
    };
    REFERENCE_ONLY.with(|r| r.set(true));
    let deadlock = explore_within(c, Policy::Everyone, 200_000);
    REFERENCE_STANDALONE.with(|r| r.set(true));
    let looping = explore_within(c, Policy::Everyone, 200_000);
    REFERENCE_STANDALONE.with(|r| r.set(false));
    REFERENCE_ONLY.with(|r| r.set(false));
    let deadlock = deadlock.err().expect("the reference design must deadlock");
    assert!(deadlock.contains("can never finish"), "{deadlock}");
    let looping = looping.err().expect("the reference design must loop");
    assert!(looping.contains("did not close"), "{looping}");
}
