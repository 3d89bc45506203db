//! The pacing protocol between a poster and the progress engine (`src/queue/pacing.rs`) under
//! every interleaving loom can produce: no posted message is ever stranded (held with its
//! queue idle in the machine, so no tick would grant it again).
//!
//! The two locks are the process's machine (`Pacer`, the real one) and the queue's wire (here
//! the held messages' sizes and their progress). As in the library, they are taken one after
//! the other, never together:
//! - a post pushes its message under the wire lock, then wakes the queue under the machine's
//!   and, when granted at once, releases under the wire lock and completes under the machine's;
//! - a tick grants under the machine's lock, releases under the wire's, completes under the
//!   machine's.
//!
//! The race this guards against: the tick's release finds nothing held (and will say so) just
//! before a post pushes a message and wakes the queue, which the machine still sees as granted.
//! The machine remembers such a wake (`GrantedWoken`) and files the queue whatever the tick
//! then says; with that state taken out of `Pacer::wake`, this model finds a stranded message.

use loom::sync::{Arc, Mutex};
use loom::thread;
use std::collections::VecDeque;
use umq::flow::pacing::{self, Grant, Left, Pacer};

const PMTU: u32 = 1024;
/// One packet a tick (8 Mbit/s at 1024 ticks/s), and messages of two packets: a message
/// always spans a grant, so the tick thread has grants to race with.
const RATE: u64 = 8 * 1024 * 1024;
const SIZE: u32 = 2 * PMTU;

#[derive(Default)]
struct Wire {
    held: VecDeque<u32>,
    progress: u32,
    sent: usize,
}

/// The library's `release`: what the grant covers leaves the wire.
fn release(w: &Mutex<Wire>, packets: u32) -> (u32, u64, Left) {
    let mut w = w.lock().unwrap();
    let c = pacing::cover(w.held.iter().copied(), w.progress, PMTU, packets);
    w.progress = c.progress;
    w.held.drain(..c.messages);
    w.sent += c.messages;
    let left = if w.held.is_empty() {
        Left::Nothing
    } else {
        Left::More
    };
    (c.packets, c.bytes, left)
}

fn post(machine: &Mutex<Pacer>, w: &Mutex<Wire>) {
    w.lock().unwrap().held.push_back(SIZE);
    let packets = machine.lock().unwrap().wake(0);
    if packets > 0 {
        let (used, bytes, left) = release(w, packets);
        machine.lock().unwrap().complete(0, used, bytes, left);
    }
}

fn serve_tick(machine: &Mutex<Pacer>, w: &Mutex<Wire>, tick: u64) {
    let grants: Vec<Grant> = {
        let mut m = machine.lock().unwrap();
        let mut g = Vec::new();
        m.advance(tick, &mut g);
        g
    };
    for g in grants {
        let (used, bytes, left) = release(w, g.packets);
        machine.lock().unwrap().complete(g.queue, used, bytes, left);
    }
}

#[test]
fn no_posted_message_is_ever_stranded() {
    loom::model(|| {
        let mut p = Pacer::new(1024).unwrap();
        p.set_rate(0, RATE, PMTU).unwrap();
        let machine = Arc::new(Mutex::new(p));
        let wire = Arc::new(Mutex::new(Wire::default()));
        let poster = {
            let (m, w) = (machine.clone(), wire.clone());
            thread::spawn(move || {
                post(&m, &w);
                post(&m, &w);
            })
        };
        for tick in 1..=2 {
            serve_tick(&machine, &wire, tick);
        }
        poster.join().unwrap();
        // Quiet now: ticks alone must take everything out (two messages, four packets).
        for tick in 3..12 {
            serve_tick(&machine, &wire, tick);
        }
        let w = wire.lock().unwrap();
        assert!(w.held.is_empty(), "{} message(s) stranded", w.held.len());
        assert_eq!(w.sent, 2);
    });
}
