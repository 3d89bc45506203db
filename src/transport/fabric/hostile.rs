//! A hostile peer's messages, for the `fabric_messages` fuzz target: the receive path of a
//! link (`rx::receive_messages`) over bounce buffers the input fills with messages of every
//! kind, their headers' fields chosen by the input (lengths, totals, sequence numbers, kinds
//! and opcodes at and past their edges), and flow-control areas landing in any order. What must
//! hold whatever the peer sends: no panic, every receive buffer of ours either still posted or
//! completed within its size, no write outside our buffers, every bounce buffer accounted for
//! once, nothing kept aside past the longest buffer of our pool whatever a header claims, and
//! the peer's area never going down.

use super::node::Arrival;
use super::rx::{Arrived, receive_messages};
use super::*;
use crate::buf::pool::Pool;
use crate::draw::Draw;
use crate::transport::hostile::{assert_completions_fit, assert_unwritten, opcode, paint};

/// Bounce buffers a case fills at most.
const MESSAGES: usize = 8;

/// What one case did.
pub struct Case {
    /// None when every message ran (or waits for a buffer), else why the binding broke.
    pub broke: Option<String>,
    pub completed: u64,
}

pub fn case(d: &mut impl Draw) -> Case {
    let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
    let alloc = |n| crate::buf::iter(pool.alloc(1000, n, 0, 0).unwrap()).collect::<Vec<_>>();
    let (ours, canaries) = (alloc(1 + d.below(4) as u32), alloc(2));
    paint(&canaries);
    let mut w = Wire::new(16, 16);
    ours.iter().for_each(|&b| w.rq.post(b));
    let (mut rx, mut tx) = (idle_rx(d), tx_in_flight(d));
    let (bounces, mut queue) = filled_bounces(d, &ours, &pool);
    let mut released = Vec::new();
    let lent = bounces_in(&queue);
    let at = Receiver {
        umqh: 0,
        fragments: d.below(4) == 0,
        pool: &pool,
    };
    let (mut left, mut out) = (false, Outcome::default());
    // What a node that exposes nothing yet knows: completions may still teach chunks, with
    // keys of ours or with the keys a UCX peer packs behind them.
    let (addressing, packed) = match d.below(2) {
        0 => (super::sys::Addressing::Offset, false),
        _ => (super::sys::Addressing::Virtual, true),
    };
    let mut exposed = super::rma::Exposure::new(addressing, packed, false);
    let total_bytes: u64 = queue.iter().map(|a| a.bytes() as u64).sum();
    let mut pending = total_bytes;
    let mut arrived = Arrived {
        queue: &mut queue,
        pending: &mut pending,
        bounces: &bounces,
        released: &mut released,
    };
    let r = receive_messages(
        &mut rx,
        &mut arrived,
        &mut tx,
        &mut left,
        Some(&mut exposed),
        None,
        &mut w,
        &at,
        &mut out,
    );
    let case = Case {
        broke: r.err().map(|e| e.to_string()),
        completed: out.rx_done as u64,
    };
    assert_eq!(w.rq.outstanding(), ours.len(), "a receive buffer was lost");
    assert_completions_fit(&w);
    assert_unwritten(&canaries);
    assert_bounces_accounted(&lent, &queue, &released);
    let left_bytes: u64 = queue.iter().map(|a| a.bytes() as u64).sum();
    assert_eq!(
        pending, left_bytes,
        "the inbox's count of its bytes went astray"
    );
    assert_eq!(
        rx.taken.now() + left_bytes,
        total_bytes,
        "a message taken out of the inbox was not counted as taken"
    );
    assert_claims_not_kept(&rx, pool.largest_buffer());
    landing_areas(d);
    for b in ours.into_iter().chain(canaries) {
        pool.free_one(b).unwrap();
    }
    case
}

/// Nothing a message's header claims past the longest buffer of our pool is kept aside: a
/// message being put together that claims more keeps none of its bytes, and none held whole
/// is longer (`assembly::otherwise`).
fn assert_claims_not_kept(rx: &Rx, largest: u64) {
    if let Some((h, a)) = rx.assembling.as_ref() {
        assert!(
            h.total <= largest || a.aside().is_empty(),
            "{} bytes kept aside of a message that claims {}",
            a.aside().len(),
            h.total
        );
    }
    if let Some((_, data)) = rx.held.as_ref() {
        assert!(data.len() as u64 <= largest, "{} bytes held", data.len());
    }
}

fn idle_rx(d: &mut impl Draw) -> Rx {
    Rx {
        assembling: None,
        blocked: false,
        held: None,
        executed: d.below(3),
        bundle_at: 0,
        taken: Default::default(),
    }
}

/// Bounce buffers filled with the peer's messages, handed to the binding in order.
fn filled_bounces(
    d: &mut impl Draw,
    ours: &[*mut umq_buf_t],
    pool: &Pool,
) -> (sys::Buffers, VecDeque<Arrival>) {
    let mut bufs = sys::Buffers::unregistered(MESSAGES * BOUNCE);
    let mut queue = VecDeque::new();
    // Bytes of a fragmented message still to come.
    let mut more = 0;
    for idx in 0..1 + d.below(MESSAGES as u64) as usize {
        let (h, payload) = match more {
            0 if d.below(4) == 0 => bundle(d, ours, pool),
            0 => message(d, ours, pool),
            _ => fragment(d, &mut more),
        };
        if h.kind != KIND_MORE && h.total > h.len as u64 {
            more = h.total - h.len as u64;
        }
        let bytes = bufs.get_mut(idx * BOUNCE, BOUNCE);
        bytes[..HEADER].copy_from_slice(&h.to_bytes());
        bytes[HEADER..HEADER + payload.len()].copy_from_slice(&payload);
        // What the completion says arrived: the message, or (rarely) any length of the buffer.
        let got = HEADER + payload.len();
        let len = match d.below(32) {
            0 => d.below(BOUNCE as u64 + 1) as usize,
            _ => got,
        };
        // The node copies a message out when it has lent too many buffers.
        queue.push_back(match d.below(8) {
            0 => Arrival::Owned(bufs.get(idx * BOUNCE, len).to_vec(), 0),
            _ => Arrival::Bounce { idx, len, from: 0 },
        });
    }
    (bufs, queue)
}

fn bytes(d: &mut impl Draw, n: u64) -> Vec<u8> {
    (0..n).map(|_| d.next() as u8).collect()
}

/// A message of one of the kinds a peer sends, mostly well-formed, sometimes with a field
/// changed to anything or to just past its edge.
fn message(d: &mut impl Draw, ours: &[*mut umq_buf_t], pool: &Pool) -> (Header, Vec<u8>) {
    let cap = unsafe { (*ours[0]).buf_size } as u64;
    let kind = match d.below(12) {
        0..=6 => KIND_WR,
        7 => KIND_STANDALONE,
        8 => KIND_READ_RESP,
        9 => KIND_DONE,
        10 => KIND_CONTROL,
        _ => d.pick(&[KIND_MORE, KIND_BYE, KIND_PING]),
    };
    let n = match kind {
        KIND_CONTROL => d.edgy(&[14, 64, 1518]) % 2000,
        // A completion may carry the packed keys of the chunk it teaches (`rma`).
        KIND_DONE => d.edgy(&[0, 0, 10, 300]) % 400,
        KIND_STANDALONE | KIND_BYE | KIND_PING => 0,
        _ => d.edgy(&[0, 16, cap, 1500]) % (2 * cap + 2),
    };
    let payload = bytes(d, n);
    let target = d.pick(ours);
    let addr = unsafe { (*target).buf_data } as u64;
    let slot = pool.slot_of_data(addr as usize);
    let mut h = Header {
        kind,
        opcode: opcode(d) as u8,
        len: n as u32,
        imm: d.next(),
        addr: addr + d.below(4) * d.below(64),
        token_id: slot.as_ref().map_or(0, |s| s.chunk.token_id),
        token_value: slot.as_ref().map_or(0, |s| s.chunk.token_value),
        rlen: d.edgy(&[0, n, cap]) as u32,
        seq: d.edgy(&[0, 1, 2]),
        total: match d.below(6) {
            0 => d.edgy(&[n + 1, 2 * n, cap, cap + 1, crate::limits::MAX_MESSAGE]),
            _ => n,
        },
        status: d.below(4) as u32,
        // FLAG_KNOWS_CHUNK, FLAG_ANSWER_MAY_WAIT and FLAG_CARRIED, in any mix, and one unknown.
        flags: d.below(16) as u16,
        ..Default::default()
    };
    if d.below(4) == 0 {
        match d.below(6) {
            0 => h.kind = d.edgy(&[0, KIND_BUNDLE as u64, 10]) as u8,
            1 => h.opcode = d.next() as u8,
            2 => h.len = d.edgy(&[n, n + 1]) as u32,
            3 => (h.token_id, h.token_value) = (d.next() as u32, d.next() as u32),
            4 => h.total = d.edgy(&[n, h.total]),
            _ => h.addr = d.edgy(&[addr, addr + cap]),
        }
    }
    (h, payload)
}

/// A bundle of up to four messages as `message` makes them (so sometimes one that does not
/// belong in a bundle), its length sometimes off.
fn bundle(d: &mut impl Draw, ours: &[*mut umq_buf_t], pool: &Pool) -> (Header, Vec<u8>) {
    let mut payload = Vec::new();
    for _ in 0..1 + d.below(4) {
        let (h, p) = message(d, ours, pool);
        if payload.len() + HEADER + p.len() > FRAGMENT {
            break;
        }
        payload.extend_from_slice(&h.to_bytes());
        payload.extend_from_slice(&p);
    }
    if d.below(8) == 0 {
        payload.truncate(d.below(payload.len() as u64 + 1) as usize);
    }
    let h = Header {
        kind: KIND_BUNDLE,
        len: payload.len() as u32,
        total: payload.len() as u64,
        ..Default::default()
    };
    (h, payload)
}

/// The next fragment of a message with `more` bytes to come (or, sometimes, something else).
fn fragment(d: &mut impl Draw, more: &mut u64) -> (Header, Vec<u8>) {
    let n = match d.below(8) {
        0 => d.edgy(&[*more, more.saturating_add(1)]) % (FRAGMENT as u64 + 1),
        _ => (*more).min(1 + d.below(FRAGMENT as u64)),
    };
    *more = more.saturating_sub(n);
    let h = Header {
        kind: if d.below(16) == 0 { KIND_WR } else { KIND_MORE },
        len: n as u32,
        total: n,
        ..Default::default()
    };
    (h, bytes(d, n))
}

/// Our WRs in flight, some waiting for the peer's report that it executed them.
fn tx_in_flight(d: &mut impl Draw) -> Tx {
    let flight = (0..d.below(4))
        .map(|_| tx::Flight {
            quick: d.below(2) == 0,
            sent: true,
            unfinished: 0,
            status: None,
        })
        .collect();
    Tx {
        flight,
        ..Tx::new()
    }
}

fn bounces_in(queue: &VecDeque<Arrival>) -> Vec<usize> {
    let idx = |a: &Arrival| match a {
        Arrival::Bounce { idx, .. } => Some(*idx),
        Arrival::Owned(..) => None,
    };
    queue.iter().filter_map(idx).collect()
}

/// Every bounce buffer the binding was `lent` is still in its queue or released, once.
fn assert_bounces_accounted(lent: &[usize], queue: &VecDeque<Arrival>, released: &[usize]) {
    let mut now: Vec<usize> = bounces_in(queue);
    now.extend_from_slice(released);
    now.sort_unstable();
    let mut before = lent.to_vec();
    before.sort_unstable();
    assert_eq!(before, now, "bounce buffers");
}

/// The peer's flow-control area as its RMA writes land, any words in any order: what we take
/// from it never goes down.
fn landing_areas(d: &mut impl Draw) {
    let area = Area::default();
    let mut before = area.snapshot();
    for _ in 0..d.below(4) {
        area.raise_to([d.next(), d.edgy(&[before[1]]), d.edgy(&[before[2]])]);
        let now = area.snapshot();
        assert!(
            now.iter().zip(&before).all(|(n, b)| n >= b),
            "{before:?} -> {now:?}"
        );
        before = now;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::draw::Tape;

    /// A link's receiving parts with one receive buffer of 1,000 bytes posted, fed a peer's
    /// messages one at a time.
    struct Receiving {
        pool: Pool,
        w: Wire,
        rx: Rx,
        tx: Tx,
        fragments: bool,
    }

    impl Receiving {
        fn new(fragments: bool) -> Receiving {
            let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
            let mut w = Wire::new(16, 16);
            w.rq.post(pool.alloc(1000, 1, 0, 0).unwrap());
            let mut zeros = Tape::new(&[]);
            let (rx, tx) = (idle_rx(&mut zeros), tx_in_flight(&mut zeros));
            Receiving {
                pool,
                w,
                rx,
                tx,
                fragments,
            }
        }

        /// Runs the peer's message `h` with `payload`; the binding's error, if it broke.
        fn run(&mut self, h: Header, payload: &[u8]) -> Result<(), LinkError> {
            let ran = self.offer(h, payload)?;
            assert!(ran, "the message ran");
            Ok(())
        }

        /// Offers the peer's message `h` with `payload`: whether it ran (else it waits in the
        /// inbox), or the binding's error.
        fn offer(&mut self, h: Header, payload: &[u8]) -> Result<bool, LinkError> {
            let mut bytes = h.to_bytes().to_vec();
            bytes.extend_from_slice(payload);
            let mut queue = VecDeque::from([Arrival::Owned(bytes, 0)]);
            let mut pending = queue[0].bytes() as u64;
            let bounces = sys::Buffers::unregistered(BOUNCE);
            let mut released = Vec::new();
            let mut arrived = Arrived {
                queue: &mut queue,
                pending: &mut pending,
                bounces: &bounces,
                released: &mut released,
            };
            let at = Receiver {
                umqh: 0,
                fragments: self.fragments,
                pool: &self.pool,
            };
            let (mut left, mut out) = (false, Outcome::default());
            let r = receive_messages(
                &mut self.rx,
                &mut arrived,
                &mut self.tx,
                &mut left,
                None,
                None,
                &mut self.w,
                &at,
                &mut out,
            );
            r.map(|()| queue.is_empty())
        }

        /// The bytes the message being put together keeps aside.
        fn aside(&self) -> usize {
            self.rx
                .assembling
                .as_ref()
                .map_or(0, |(_, a)| a.aside().len())
        }

        /// A SEND of `total` bytes in fragments of FRAGMENT bytes: the most it kept aside.
        fn send_in_fragments(&mut self, total: u64) -> usize {
            let piece = vec![0x5a; FRAGMENT];
            let mut h = Header {
                kind: KIND_WR,
                opcode: UMQ_OPC_SEND as u8,
                len: FRAGMENT as u32,
                total,
                ..Default::default()
            };
            let (mut sent, mut most) = (0u64, 0);
            while sent < total {
                let n = (total - sent).min(FRAGMENT as u64) as usize;
                h.len = n as u32;
                self.run(h, &piece[..n]).unwrap();
                (h.kind, h.total) = (KIND_MORE, n as u64);
                sent += n as u64;
                most = most.max(self.aside());
            }
            most
        }
    }

    /// A peer's SEND in fragments longer than any buffer of our pool, to a receiver that takes
    /// a message in one buffer (pro API), can only fail: none of its bytes are kept, and at its
    /// end the posted buffer completes LOC_LEN_ERR, as it did after all of it was put together
    /// aside. A base-API receiver, which spreads a message over its buffers, keeps it.
    #[test]
    fn a_send_no_buffer_can_take_costs_the_receiver_no_memory() {
        let mut pro = Receiving::new(false);
        let total = pro.pool.largest_buffer() + 1;
        assert_eq!(pro.send_in_fragments(total), 0, "bytes kept aside");
        let (b, status) = pro.w.rq.completion_at(0).expect("the buffer completed");
        assert_eq!((status, unsafe { (*b).status() }), (1, UMQ_BUF_LOC_LEN_ERR));
        assert_eq!(pro.rx.executed, 1);
        pro.w
            .rq
            .drain_completions()
            .for_each(|(b, _)| pro.pool.free_one(b).unwrap());

        let mut base = Receiving::new(true);
        let kept = base.send_in_fragments(8 << 20);
        assert_eq!(kept, (8 << 20) - FRAGMENT, "kept until its last fragment");
        assert!(base.rx.held.is_some(), "waits for buffers to hold it");
        base.w.rq.flush();
    }

    /// A base-API receiver's SEND longer than any buffer of our pool is kept nowhere aside: its
    /// first fragment waits in the inbox until the posted buffers hold it together, and its
    /// fragments are then written across them in place, byte for byte.
    #[test]
    fn a_base_api_send_longer_than_a_buffer_lands_across_the_buffers_in_place() {
        let mut r = Receiving::new(true);
        let total = r.pool.largest_buffer() + 3;
        let byte = |at: u64| (at % 251) as u8;
        let fragment = |at: u64| {
            let n = (total - at).min(FRAGMENT as u64);
            let h = Header {
                kind: if at == 0 { KIND_WR } else { KIND_MORE },
                opcode: UMQ_OPC_SEND as u8,
                len: n as u32,
                total: if at == 0 { total } else { n },
                imm: 7,
                ..Default::default()
            };
            (h, (at..at + n).map(byte).collect::<Vec<u8>>())
        };
        let (h, first) = fragment(0);
        assert!(!r.offer(h, &first).unwrap(), "waits for buffers");
        assert!(r.rx.assembling.is_none() && r.rx.blocked);
        let bufs: Vec<_> = (0..3)
            .map(|_| r.pool.alloc(8 << 20, 1, 0, 0).unwrap())
            .collect();
        bufs.iter().for_each(|&b| r.w.rq.post(b));
        let mut at = 0;
        while at < total {
            let (h, piece) = fragment(at);
            r.run(h, &piece).unwrap();
            assert_eq!(r.aside(), 0, "bytes kept aside");
            at += piece.len() as u64;
        }
        let mut landed = Vec::new();
        let (head, n) =
            r.w.rq
                .drain_completions()
                .next()
                .expect("the SEND completed");
        for b in crate::buf::iter(head) {
            let b = unsafe { &*b };
            assert_eq!(b.status(), UMQ_BUF_SUCCESS);
            landed.extend_from_slice(unsafe {
                std::slice::from_raw_parts(b.buf_data as *const u8, b.data_size as usize)
            });
        }
        assert_eq!(n, 3, "across the first buffers that hold it");
        assert_eq!(unsafe { (*head).total_data_size } as u64, total);
        assert!(landed.iter().enumerate().all(|(i, &v)| v == byte(i as u64)));
        assert_eq!(landed.len() as u64, total);
        for b in crate::buf::iter(head).collect::<Vec<_>>() {
            r.pool.free_one(b).unwrap();
        }
        r.w.rq.flush();
    }

    /// An answer to a READ is kept only as long as the READ in flight asked for: one for no
    /// READ, or longer than it, breaks the binding at its first fragment.
    #[test]
    fn a_read_answer_is_kept_no_longer_than_the_read_asked() {
        let mut r = Receiving::new(false);
        let answer = |total| Header {
            kind: KIND_READ_RESP,
            len: 100,
            total,
            ..Default::default()
        };
        let e = r.run(answer(1 << 30), &[1; 100]).unwrap_err();
        assert_eq!(
            e.to_string(),
            LinkError::Corrupt("READ response for no READ in flight").to_string()
        );

        let read = r.pool.alloc(4096, 1, 0, 0).unwrap();
        unsafe {
            (*read).pro_mut().opcode = UMQ_OPC_READ;
            (*read).pro_mut().remote_sge.length = 4096;
        }
        r.w.sq.push(read);
        r.w.sq.hand_over(true);
        let e = r.run(answer(4097), &[1; 100]).unwrap_err();
        assert_eq!(
            e.to_string(),
            LinkError::Corrupt("a READ answer longer than the READ").to_string()
        );
        assert!(r.rx.assembling.is_none());
        r.run(answer(4096), &[1; 100]).unwrap();
        assert_eq!(
            r.rx.assembling.as_ref().map(|(_, a)| a.received()),
            Some(100)
        );
        r.pool.free_one(read).unwrap();
        r.w.rq.flush();
    }
}
