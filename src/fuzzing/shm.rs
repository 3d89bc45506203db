//! The shared-memory receive path, fed by a hostile peer.

use crate::draw::Tape;
use crate::transport::shm::hostile::{Bench, sender_case};
use std::cell::RefCell;

thread_local! {
    /// One receiving binding for the process: each case starts at a fresh line of its ring,
    /// as the test's cases do, and making the 16 MiB inbox anew would cost more than the case.
    static BENCH: RefCell<Option<Bench>> = const { RefCell::new(None) };
}

/// One round of the shared-memory receive path over what the input has the peer write: with
/// the first byte's low bit clear, entries of every shape the sender makes with fields the
/// input chooses (`hostile_entry`); set, the rest of the input as raw ring bytes. What must
/// hold is `Bench::case`'s: no receive buffer lost or overfilled, no write outside our buffers.
pub fn shm_ring(data: &[u8]) {
    let mut tape = Tape::new(data);
    let raw = tape.byte() & 1 == 1;
    BENCH.with_borrow_mut(|bench| {
        let bench = bench.get_or_insert_with(Bench::new);
        if raw {
            let bytes = tape.bytes(usize::MAX);
            bench.case(&mut Tape::new(&[]), Some(bytes));
        } else {
            bench.case(&mut tape, None);
        }
    });
}

/// Our sender's rounds against a receiver whose side of the inbox the input writes
/// (`hostile::sender_case` says what must hold).
pub fn shm_sender(data: &[u8]) {
    sender_case(&mut Tape::new(data));
}
