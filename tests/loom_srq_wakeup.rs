//! The wake-up protocol of a shared receive queue (`src/queue/share.rs`,
//! `src/transport/shared_rq.rs`, `deliver_to` in `src/transport/loopback/mod.rs`), modelled
//! with loom's locks and atomics and checked under every interleaving: a message that finds
//! the line empty is never left waiting once a buffer is posted.
//!
//! The parts, as the library has them:
//! - the member's wire lock, under which a sender looks for a buffer (`claim`: the line's lock,
//!   a leaf, taken inside) and, finding none, notes itself waiting at the line and sets the
//!   member's `rnr_waiting` flag before the wire lock goes;
//! - a post: the buffer joins the line and the waiting members are taken, under the line's lock;
//!   then for each, the member's wire lock is taken and released (so a sender still inside has
//!   finished), and the flag swapped: if it was set, the sender's message is delivered again
//!   under the wire lock.

use loom::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use loom::sync::{Arc, Mutex};
use loom::thread;

#[derive(Default)]
struct Line {
    buffers: u32,
    waiting: bool,
}

#[derive(Default)]
struct Model {
    wire: Mutex<()>,
    line: Mutex<Line>,
    rnr_waiting: AtomicBool,
    delivered: AtomicU32,
}

impl Model {
    /// One delivery attempt under the member's wire lock (the caller holds it).
    fn try_deliver(&self) -> bool {
        let mut l = self.line.lock().unwrap();
        if l.buffers > 0 {
            l.buffers -= 1;
            drop(l);
            self.delivered.fetch_add(1, Ordering::Relaxed);
            return true;
        }
        l.waiting = true;
        false
    }

    /// The sender's post: delivers, or notes itself at the member before the lock goes.
    fn send(&self) {
        let _w = self.wire.lock().unwrap();
        if !self.try_deliver() {
            self.rnr_waiting.store(true, Ordering::Release);
        }
    }

    /// The receiver's post of one buffer to the line, and the kick of a waiting member.
    fn post(&self) {
        let woken = {
            let mut l = self.line.lock().unwrap();
            l.buffers += 1;
            std::mem::take(&mut l.waiting)
        };
        if !woken {
            return;
        }
        drop(self.wire.lock().unwrap());
        if self.rnr_waiting.swap(false, Ordering::AcqRel) {
            let _w = self.wire.lock().unwrap();
            if !self.try_deliver() {
                self.rnr_waiting.store(true, Ordering::Release);
            }
        }
    }
}

/// A sender and a poster race on an empty line: the message is delivered exactly once, and no
/// buffer is left behind with the message still waiting.
#[test]
fn a_posted_buffer_always_reaches_a_waiting_message() {
    loom::model(|| {
        let m = Arc::new(Model::default());
        let sender = {
            let m = m.clone();
            thread::spawn(move || m.send())
        };
        m.post();
        sender.join().unwrap();
        let left = m.line.lock().unwrap().buffers;
        assert_eq!(
            m.delivered.load(Ordering::Relaxed),
            1,
            "the message waits with a buffer posted"
        );
        assert_eq!(left, 0);
    });
}
