//! One-sided WRITE and READ by the engine's RMA (libfabric's or UCX's): the initiator's
//! provider moves the bytes into or out of the target's pool buffer, and the target's library
//! takes no part (over `tcp` the target's provider must run, which its progress thread does
//! when the initiator rings its call bell).
//!
//! **What the target exposes.** A chunk of the process pool that a peer's WRITE or READ reached
//! has each slot registered for the peers' reads and writes (`Exposure`), its data area alone,
//! under a key derived from the chunk's token and the slot (`slot_key`): the token value is the
//! secret, so only a peer that holds the token can name the key, and a registration per data
//! area keeps the buffers' headers, which the library trusts, out of every peer's reach. Chunks
//! no peer reaches are never registered: the cost (a few hundred bytes a slot in the provider)
//! follows what peers use, not the pool. Where the provider takes keys of our choosing (`tcp`)
//! that is all. Where it picks its own (libfabric's verbs, 8 bytes each; UCX's engine: UCP's on
//! an RDMA NIC, elsewhere entries of the engine's table, which its carried operations check),
//! each slot's is packed (`PackedKeys`) and crosses behind the completion that teaches the
//! chunk, and the initiator's node unpacks it. Where the provider needs our own buffers
//! registered too (verbs), the initiator registers the chunk a WR's buffer lies in, of the
//! process pool or a shared pool, at its first use (`Exposure::local_desc`). Chunks of a
//! queue's shared pool are not exposed: they leave with their queue, and a key that no longer
//! exists, once named, makes libfabric's tcp close the connection, which every binding between
//! the two processes shares.
//!
//! **What the initiator learns.** A WR's first WRITE or READ into a chunk goes as a message,
//! which the target's library checks against the buffer (as before: a forged token, an address
//! outside a live buffer, a freed buffer are refused). Its completion then tells where the
//! chunk's data areas are (`RemoteChunk`); later WRs with the same token into a data area of
//! that chunk go by RMA. A WR whose token value differs from the one learned, or that reaches
//! past a data area, goes as a message again and is refused there: RMA is only ever tried
//! under a key that exists, for bytes inside one data area.
//!
//! **Semantics.** Like an RDMA memory region, and like the reference on its hardware, a chunk's
//! exposure lasts as long as the chunk: a buffer freed inside it is still reachable by RMA to
//! a peer that learned the chunk, where the message path refuses it. Shared-pool buffers keep
//! the per-buffer check on every provider, and so does every buffer of a process that sets
//! `UMQ_FABRIC_RMA=off` (`wanted`).

use super::msg::{FRAGMENT, Header};
use super::registered::{Pins, Registered, Use};
use super::sys::{Addressing, Endpoint, MAX_PACKED, Registration, RemoteKey};
use crate::buf::pool::ChunkSpan;
use std::collections::HashMap;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Slots a chunk has at most (`buf::access::SLOTS`): the slot index fits a key's low byte.
const MAX_SLOTS: usize = 256;
/// Chunks an initiator remembers per binding; past it, it starts over (each is relearned by
/// one WR as a message).
const REMEMBERED: usize = 4096;
/// Marks a chunk key apart from the node's other registrations (small counters).
const CHUNK_KEY: u64 = 1 << 31;
/// In a `KIND_DONE`'s opcode: the chunk the WR reached is attached.
pub const DONE_WITH_CHUNK: u8 = 1;

/// `UMQ_FABRIC_RMA`: `off` keeps every WRITE and READ a message the target's library checks,
/// buffer by buffer (a freed process-pool buffer refused, as over shared memory); anything else
/// (the default, `on`) lets them go by RMA.
pub fn wanted() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var("UMQ_FABRIC_RMA")
            .map(|v| !matches!(v.trim(), "off" | "0" | "no"))
            .unwrap_or(true)
    })
}

/// The key slot `slot` of the chunk with this token is registered under.
pub fn slot_key(token_id: u32, token_value: u32, slot: usize) -> u64 {
    (token_value as u64) << 32 | CHUNK_KEY | ((token_id as u64) & 0xf_ffff) << 8 | slot as u64
}

/// Chunks the pool made since the node last looked: registered at its next progress, under its
/// lock (a chunk is carved while that lock may be held, by a receive that allocates). Where our
/// own memory needs registering for our RMA (`Exposure::local`), the shared pools' chunks too,
/// and their leaving, in order: a shared pool's chunks leave as its last buffer is freed, which
/// may happen under the node's lock.
#[derive(Default)]
pub struct Pending {
    chunks: Mutex<Vec<(ChunkSpan, bool)>>,
    /// Set after a chunk is added: every progress looks, and the lock is taken only then.
    any: AtomicBool,
    with_shared: bool,
    /// The shared pools' chunks registered for our own operations.
    pins: Pins,
}

impl Pending {
    fn new(with_shared: bool) -> Pending {
        Pending {
            with_shared,
            ..Pending::default()
        }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(ChunkSpan, bool)>> {
        self.chunks.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, chunk: &ChunkSpan, added: bool) {
        self.lock().push((*chunk, added));
        self.any.store(true, Ordering::Release);
    }

    /// A chunk the pool made (a shared pool's are never exposed, only registered for our own
    /// RMA where that needs it).
    pub fn add(&self, chunk: &ChunkSpan) {
        if !chunk.shared || self.with_shared {
            self.push(chunk, true);
        }
    }

    /// A shared pool's chunk left: its registration for our RMA goes at the next progress.
    /// False: the caller withdraws it itself (a process-pool chunk).
    pub fn leave_shared(&self, chunk: &ChunkSpan) -> bool {
        if chunk.shared && self.with_shared {
            self.push(chunk, false);
        }
        chunk.shared
    }

    /// The chunks added, and shared ones that left, since the last take (a chunk added
    /// meanwhile sets `any` again after it is in the list, so the next take finds it).
    fn take(&self) -> Vec<(ChunkSpan, bool)> {
        if !self.any.load(Ordering::Acquire) || !self.any.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.lock())
    }

    /// Whether we registered this shared-pool chunk for our own operations (`ChunkHook::pins`).
    pub fn pins(&self, chunk: &ChunkSpan) -> bool {
        self.with_shared && self.pins.holds(chunk.base)
    }

    /// A chunk that left before it was registered.
    pub fn drop_chunk(&self, chunk: &ChunkSpan) {
        self.lock()
            .retain(|(p, added)| !*added || p.token_id != chunk.token_id);
    }
}

/// What the node may expose: the process pool's chunks by token id, and those a peer reached,
/// their slots registered.
pub struct Exposure {
    addressing: Addressing,
    /// The provider packs its own keys (UCX), which cross in the completion that teaches a
    /// chunk; else a key is ours, worked out from the token (`slot_key`).
    packed: bool,
    pending: Arc<Pending>,
    known: HashMap<u32, ChunkSpan>,
    chunks: HashMap<u32, Exposed>,
    /// Where the provider needs the memory of our own operations registered
    /// (`Endpoint::rma_needs_local`: verbs), our chunks, and those our operations named.
    local: Option<Registered>,
}

struct Exposed {
    span: ChunkSpan,
    slots: Vec<Registration>,
    keys: Option<Arc<PackedKeys>>,
}

impl Exposure {
    pub fn new(addressing: Addressing, packed: bool, local: bool) -> Exposure {
        Exposure {
            addressing,
            packed,
            pending: Arc::new(Pending::new(local)),
            known: HashMap::new(),
            chunks: HashMap::new(),
            local: local.then(Registered::default),
        }
    }

    /// How peers name the memory we expose (and so we theirs: the provider is the same).
    pub fn addressing(&self) -> Addressing {
        self.addressing
    }

    /// Whether keys are the provider's, packed (`Exposure::packed`).
    pub fn packs_keys(&self) -> bool {
        self.packed
    }

    pub fn pending(&self) -> Arc<Pending> {
        self.pending.clone()
    }

    /// Takes in the chunks the pool made, and the shared ones that left, since the last call.
    /// (The look is inline: every round of the node asks, and chunks come rarely.)
    #[inline(always)]
    pub fn take_pending(&mut self, ep: &Endpoint) {
        if self.pending.any.load(Ordering::Acquire) {
            self.take_pending_now(ep);
        }
    }

    #[inline(never)]
    fn take_pending_now(&mut self, ep: &Endpoint) {
        for (span, added) in self.pending.take() {
            if !added {
                self.forget_local(ep, &span);
                continue;
            }
            if let Some(l) = self.local.as_mut() {
                l.add(span);
            }
            if !span.shared {
                self.known.insert(span.token_id, span);
            }
        }
    }

    /// Our chunk `span` left: no operation of ours names it any more.
    fn forget_local(&mut self, ep: &Endpoint, span: &ChunkSpan) {
        if let Some(l) = self.local.as_mut() {
            l.forget(ep, span, &self.pending.pins);
        }
    }

    /// The descriptor an operation of ours names for `len` bytes at `at`, and its use of it
    /// (`local_done` when libfabric is done): none needed (null), or the registration of the
    /// chunk of ours that holds them (`Registered::desc`). None where the bytes lie in no chunk
    /// of ours: the operation cannot go (a WR goes as a message, a send is copied).
    pub fn local_desc(
        &mut self,
        ep: &Endpoint,
        at: usize,
        len: usize,
    ) -> Option<(*mut c_void, Option<Use>)> {
        if self.local.is_none() {
            return Some((std::ptr::null_mut(), None));
        }
        self.take_pending(ep); // a chunk carved since the last progress
        let l = self.local.as_mut()?;
        let (desc, u) = l.desc(ep, (at, len), &self.pending.pins)?;
        Some((desc, Some(u)))
    }

    /// An operation that named a registration of ours (`local_desc`) is done with it.
    pub fn local_done(&mut self, ep: &Endpoint, u: Use) {
        if let Some(l) = self.local.as_mut() {
            l.done(ep, u);
        }
    }

    /// How many chunks have their slots registered.
    pub fn registered(&self) -> usize {
        self.chunks.len()
    }

    /// Registrations of our own chunks open (`local_desc`): of chunks that live, and of
    /// chunks that left with operations that still name them.
    pub fn registered_here(&self) -> (usize, usize) {
        self.local.as_ref().map_or((0, 0), Registered::open)
    }

    /// Chunks of ours whose registration the provider refused (`Registered::refused`).
    pub fn refused_here(&self) -> usize {
        self.local.as_ref().map_or(0, Registered::refused)
    }

    /// Tests: the provider refuses to register our chunks from now on, or no longer.
    #[cfg(test)]
    pub fn refuse_registrations(&mut self, refuse: bool) {
        if let Some(l) = self.local.as_mut() {
            l.fail = refuse;
        }
    }

    /// Takes a chunk back: its keys fail from now on (before its memory goes).
    pub fn withdraw(&mut self, ep: &Endpoint, span: &ChunkSpan) {
        self.pending.drop_chunk(span);
        self.known.remove(&span.token_id);
        self.forget_local(ep, span);
        if let Some(e) = self
            .chunks
            .remove(&span.token_id)
            .filter(|e| e.span.base == span.base)
        {
            e.slots.into_iter().for_each(|r| ep.unexpose(r));
        }
    }

    /// Takes every chunk back (the node closes).
    pub fn withdraw_all(&mut self, ep: &Endpoint) {
        for (_, e) in self.chunks.drain() {
            e.slots.into_iter().for_each(|r| ep.unexpose(r));
        }
        if let Some(l) = self.local.as_mut() {
            l.close_all(ep, &self.pending.pins);
        }
    }

    /// The chunk with this token, as a WR that reached it learns it: registered now if it was
    /// not yet (with `ep`; without, only one registered already). None: not exposed.
    pub fn chunk(
        &mut self,
        ep: Option<&Endpoint>,
        token_id: u32,
        token_value: u32,
    ) -> Option<RemoteChunk> {
        if !self.chunks.contains_key(&token_id) {
            let span = *self
                .known
                .get(&token_id)
                .filter(|s| s.token_value == token_value)?;
            self.chunks
                .insert(token_id, register(ep?, &span, self.packed)?);
        }
        let e = self.chunks.get(&token_id)?;
        let s = &e.span;
        (s.token_value == token_value).then(|| RemoteChunk {
            token_value,
            data_base: s.data_base as u64,
            data_stride: s.data_stride as u64,
            data_cap: s.data_cap as u64,
            count: s.count as u64,
            addressing: self.addressing,
            keys: e.keys.clone(),
        })
    }
}

/// Registers each slot's data area of `span`, under keys of ours or, `packed`, the provider's,
/// packed for the peers.
fn register(ep: &Endpoint, span: &ChunkSpan, packed: bool) -> Option<Exposed> {
    if span.shared || span.count > MAX_SLOTS {
        return None;
    }
    let mut slots = Vec::with_capacity(span.count);
    let mut keys = packed.then(PackedKeys::default);
    let mut key_bytes = Vec::new();
    for i in 0..span.count {
        let (at, len) = span.slot_data(i);
        // SAFETY: process-pool memory, freed only after the pool's hooks heard it leave.
        let exposed =
            match keys.as_mut() {
                Some(keys) => unsafe { ep.expose_packed(at as *mut u8, len, &mut key_bytes) }
                    .and_then(|r| match keys.push(&key_bytes) {
                        Some(()) => Ok(r),
                        None => {
                            ep.unexpose(r);
                            Err(libc::ENOSPC)
                        }
                    }),
                None => {
                    let key = slot_key(span.token_id, span.token_value, i);
                    unsafe { ep.expose_keyed(at as *mut u8, len, key) }
                }
            };
        match exposed {
            Ok(r) => slots.push(r),
            Err(code) => {
                crate::log_info!(
                    "umq_fabric",
                    "chunk {} not exposed for RMA: {}",
                    span.token_id,
                    super::sys::strerror(code)
                );
                slots.into_iter().for_each(|r| ep.unexpose(r));
                return None;
            }
        }
    }
    Some(Exposed {
        span: *span,
        slots,
        keys: keys.map(Arc::new),
    })
}

/// The provider's packed keys of a chunk's slots (`Exposure::packed`), as they cross behind a
/// chunk's `KIND_DONE`: each behind its length byte, slot by slot.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct PackedKeys {
    bytes: Vec<u8>,
    /// Where each slot's key starts in `bytes` (after its length byte).
    starts: Vec<u32>,
}

impl PackedKeys {
    /// Adds the next slot's key; None when it would not fit a message.
    fn push(&mut self, key: &[u8]) -> Option<()> {
        if key.is_empty() || key.len() > MAX_PACKED || self.bytes.len() + 1 + key.len() > FRAGMENT {
            return None;
        }
        self.bytes.push(key.len() as u8);
        self.starts.push(self.bytes.len() as u32);
        self.bytes.extend_from_slice(key);
        Some(())
    }

    /// The keys as they cross.
    pub fn wire(&self) -> &[u8] {
        &self.bytes
    }

    /// The keys of `count` slots a peer sent, checked: exactly `count` keys, none empty,
    /// nothing after them.
    fn parse(bytes: &[u8], count: u64) -> Option<PackedKeys> {
        let mut keys = PackedKeys::default();
        let mut at = 0;
        while at < bytes.len() {
            let len = bytes[at] as usize;
            keys.push(bytes.get(at + 1..at + 1 + len)?)?;
            at += 1 + len;
        }
        (keys.starts.len() as u64 == count).then_some(keys)
    }

    fn slot(&self, i: usize) -> &[u8] {
        let at = self.starts[i] as usize;
        &self.bytes[at..at + self.bytes[at - 1] as usize]
    }
}

/// Where a peer's chunk keeps its data areas, as the peer told a WR of ours that reached it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteChunk {
    token_value: u32,
    data_base: u64,
    data_stride: u64,
    data_cap: u64,
    count: u64,
    addressing: Addressing,
    /// Its slots' keys, where the provider packs its own (they follow the `KIND_DONE`'s header).
    keys: Option<Arc<PackedKeys>>,
}

/// Where RMA reaches bytes of a peer's chunk: at `addr` under a key of ours, or under the
/// provider's key the peer packed, for the node to unpack.
#[derive(Debug, PartialEq, Eq)]
pub enum Reach<'a> {
    Key(RemoteKey),
    Packed { addr: u64, key: &'a [u8] },
}

impl RemoteChunk {
    /// Attaches the chunk to a `KIND_DONE` header; the packed keys it must carry behind it,
    /// if any.
    pub fn attach(&self, h: &mut Header) -> Option<Vec<u8>> {
        h.opcode = DONE_WITH_CHUNK;
        h.addr = self.data_base;
        h.total = self.data_stride;
        h.rlen = self.data_cap as u32;
        h.imm = self.count;
        self.keys.as_ref().map(|k| k.wire().to_vec())
    }

    /// The chunk a peer's `KIND_DONE` (`h`, then `payload`) carries for our WR with token
    /// value `token_value`, checked: what does not describe data areas a pool could have, or
    /// lacks a key for each (`packed`), is dropped (it could only make our own RMA fail).
    pub fn from_done(
        h: &Header,
        payload: &[u8],
        token_value: u32,
        addressing: Addressing,
        packed: bool,
    ) -> Option<RemoteChunk> {
        let keys = match packed {
            true => Some(Arc::new(PackedKeys::parse(payload, h.imm)?)),
            false => None,
        };
        let c = RemoteChunk {
            token_value,
            data_base: h.addr,
            data_stride: h.total,
            data_cap: h.rlen as u64,
            count: h.imm,
            addressing,
            keys,
        };
        let fits = (1..=MAX_SLOTS as u64).contains(&c.count)
            && c.data_cap > 0
            && c.data_cap <= c.data_stride
            && c.data_stride
                .checked_mul(c.count)
                .and_then(|span| c.data_base.checked_add(span))
                .is_some();
        (h.opcode == DONE_WITH_CHUNK && fits).then_some(c)
    }

    /// The key and remote address of `len` bytes at `addr`, when they lie inside one data
    /// area of the chunk and `token_value` is the chunk's.
    fn reach(&self, addr: u64, len: u64, token_id: u32, token_value: u32) -> Option<Reach<'_>> {
        if token_value != self.token_value || len == 0 {
            return None;
        }
        let off = addr.checked_sub(self.data_base)?;
        let slot = off / self.data_stride;
        let within = off % self.data_stride;
        if slot >= self.count || within.checked_add(len)? > self.data_cap {
            return None;
        }
        let addr = match self.addressing {
            Addressing::Virtual => addr,
            Addressing::Offset => within,
        };
        Some(match &self.keys {
            Some(keys) => Reach::Packed {
                addr,
                key: keys.slot(slot as usize),
            },
            None => Reach::Key(RemoteKey {
                addr,
                key: slot_key(token_id, token_value, slot as usize),
            }),
        })
    }
}

/// The peer's chunks this binding learned, by token id.
#[derive(Default)]
pub struct RemoteChunks(HashMap<u32, RemoteChunk>);

impl RemoteChunks {
    pub fn learn(&mut self, token_id: u32, c: RemoteChunk) {
        if self.0.len() >= REMEMBERED {
            self.0.clear();
        }
        self.0.insert(token_id, c);
    }

    /// Whether a chunk was learned under this token.
    pub fn knows(&self, token_id: u32, token_value: u32) -> bool {
        self.0
            .get(&token_id)
            .is_some_and(|c| c.token_value == token_value)
    }

    pub fn forget_all(&mut self) {
        self.0.clear();
    }

    /// Where RMA reaches `len` bytes at `addr` under this token, if a chunk learned says.
    pub fn reach(&self, addr: u64, len: u64, token_id: u32, token_value: u32) -> Option<Reach<'_>> {
        self.0
            .get(&token_id)?
            .reach(addr, len, token_id, token_value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk() -> RemoteChunk {
        RemoteChunk {
            token_value: 0xabcd_1234,
            data_base: 0x10_0080,
            data_stride: 4096 + 128,
            data_cap: 4096,
            count: 4,
            addressing: Addressing::Offset,
            keys: None,
        }
    }

    #[test]
    fn a_key_names_its_token_and_slot_and_never_a_small_counter() {
        let k = slot_key(5, 0xabcd_1234, 3);
        assert_eq!(k >> 32, 0xabcd_1234);
        assert_eq!(k & 0xff, 3);
        assert_ne!(k, slot_key(5, 0xabcd_1235, 3), "the value is in the key");
        assert_ne!(k, slot_key(5, 0xabcd_1234, 2));
        assert_ne!(k, slot_key(6, 0xabcd_1234, 3));
        assert!(
            slot_key(0, 0, 0) > 1 << 30,
            "apart from the node's own keys"
        );
    }

    #[test]
    fn rma_reaches_only_inside_one_data_area_under_the_learned_value() {
        let c = chunk();
        let slot1 = c.data_base + c.data_stride;
        let at = c.reach(slot1 + 100, 64, 5, 0xabcd_1234).unwrap();
        assert_eq!(
            at,
            Reach::Key(RemoteKey {
                addr: 100,
                key: slot_key(5, 0xabcd_1234, 1)
            })
        );
        assert_eq!(
            c.reach(slot1, 4096, 5, 0xabcd_1234),
            Some(Reach::Key(RemoteKey {
                addr: 0,
                key: slot_key(5, 0xabcd_1234, 1)
            })),
            "a whole area"
        );
        assert!(
            c.reach(slot1, 4097, 5, 0xabcd_1234).is_none(),
            "past the area"
        );
        assert!(
            c.reach(slot1 + 4096, 1, 5, 0xabcd_1234).is_none(),
            "the next header"
        );
        assert!(
            c.reach(c.data_base - 1, 1, 5, 0xabcd_1234).is_none(),
            "before the chunk"
        );
        assert!(
            c.reach(c.data_base + 4 * c.data_stride, 1, 5, 0xabcd_1234)
                .is_none()
        );
        assert!(
            c.reach(slot1, 64, 5, 0xabcd_1235).is_none(),
            "another value"
        );
        assert!(
            c.reach(slot1, 0, 5, 0xabcd_1234).is_none(),
            "nothing to move"
        );
        assert!(c.reach(u64::MAX - 8, 64, 5, 0xabcd_1234).is_none());
        let virt = RemoteChunk {
            addressing: Addressing::Virtual,
            ..c
        };
        assert!(matches!(
            virt.reach(slot1 + 100, 64, 5, 0xabcd_1234),
            Some(Reach::Key(RemoteKey { addr, .. })) if addr == slot1 + 100
        ));
    }

    #[test]
    fn a_chunk_crosses_in_a_done_header_and_nonsense_is_dropped() {
        let c = chunk();
        let mut h = Header::default();
        assert_eq!(c.attach(&mut h), None, "keys of ours travel in no payload");
        let done =
            |h: &Header| RemoteChunk::from_done(h, &[], 0xabcd_1234, Addressing::Offset, false);
        assert_eq!(done(&h), Some(c.clone()));
        let plain = Header { opcode: 0, ..h };
        assert_eq!(done(&plain), None);

        for bad in [
            Header { imm: 0, ..h },
            Header { imm: 257, ..h },
            Header { rlen: 0, ..h },
            Header { total: 100, ..h },
            Header {
                addr: u64::MAX - 10,
                ..h
            },
        ] {
            assert_eq!(done(&bad), None);
        }
    }

    /// Keys the provider packs cross behind the header, one a slot, and RMA into a slot names
    /// that slot's; a table that lacks a key, has one too many, is empty or runs past its
    /// bytes is dropped.
    #[test]
    fn packed_keys_cross_with_the_chunk_and_bad_tables_are_dropped() {
        let mut keys = PackedKeys::default();
        for slot in 0..4u8 {
            keys.push(&[slot; 9][..9 - slot as usize]).unwrap();
        }
        let c = RemoteChunk {
            addressing: Addressing::Virtual,
            keys: Some(Arc::new(keys)),
            ..chunk()
        };
        let mut h = Header::default();
        let wire = c.attach(&mut h).expect("the keys go along");
        assert_eq!(wire.len(), 4 + 9 + 8 + 7 + 6);
        let learned = RemoteChunk::from_done(&h, &wire, 0xabcd_1234, Addressing::Virtual, true);
        assert_eq!(learned, Some(c.clone()));
        let slot2 = c.data_base + 2 * c.data_stride;
        assert_eq!(
            c.reach(slot2 + 8, 64, 5, 0xabcd_1234),
            Some(Reach::Packed {
                addr: slot2 + 8,
                key: &[2; 7]
            })
        );
        assert_eq!(
            c.reach(slot2 + 4090, 64, 5, 0xabcd_1234),
            None,
            "past the area"
        );
        let mut missing = wire.clone();
        missing.truncate(wire.len() - 7);
        let mut extra = wire.clone();
        extra.extend_from_slice(&[1, 0]);
        let mut short = wire.clone();
        short.pop();
        let mut empty_key = wire.clone();
        empty_key[0] = 0;
        for bad in [&missing, &extra, &short, &empty_key, &Vec::new()] {
            assert_eq!(
                RemoteChunk::from_done(&h, bad, 0xabcd_1234, Addressing::Virtual, true),
                None
            );
        }
        assert!(PackedKeys::default().push(&[]).is_none(), "an empty key");
        assert!(PackedKeys::default().push(&[0; MAX_PACKED + 1]).is_none());
    }

    #[test]
    fn the_binding_remembers_a_bounded_number_of_chunks() {
        let mut known = RemoteChunks::default();
        for id in 0..REMEMBERED as u32 {
            known.learn(id, chunk());
        }
        assert!(known.reach(chunk().data_base, 8, 7, 0xabcd_1234).is_some());
        known.learn(99_999, chunk());
        assert_eq!(known.0.len(), 1, "started over");
        assert!(
            known
                .reach(chunk().data_base, 8, 99_999, 0xabcd_1234)
                .is_some()
        );
    }
}
