//! The ring of an inbox: entries published by their stamp, the producer's side (room, push)
//! and the consumer's (peek, validated; pop; the executed-WR count).

use super::*;

/// The stamp word of the entry at `at`.
pub(super) fn stamp_of(at: *mut u8) -> &'static AtomicU64 {
    unsafe { &*(at.add(STAMP_AT) as *const AtomicU64) }
}

/// Writes header `e` at `at`, all but its stamp (which publishes it).
pub(super) fn write_header(at: *mut u8, e: &Entry) {
    unsafe { std::ptr::copy_nonoverlapping(e as *const Entry as *const u8, at, STAMP_AT) };
}

pub(super) fn entry_bytes(len: usize) -> usize {
    LINE + len.next_multiple_of(LINE)
}

impl Segment {
    /// Room the producer may assume: against the cached consumer index first, the shared one
    /// only when that looks too small.
    pub(super) fn free_bytes(&self, prod: u64, want: usize) -> usize {
        let cached = self.cons_seen.load(Ordering::Relaxed);
        let free = RING_BYTES - (prod - cached) as usize;
        if free >= want {
            return free;
        }
        let cons = self.inbox().cons.0.load(Ordering::Acquire);
        self.cons_seen.store(cons, Ordering::Relaxed);
        RING_BYTES.saturating_sub(prod.saturating_sub(cons) as usize)
    }

    /// Producer side: whether the consumer has taken every entry we pushed (reads its index).
    pub(super) fn caught_up(&self) -> bool {
        let i = self.inbox();
        let cons = i.cons.0.load(Ordering::Acquire);
        self.cons_seen.store(cons, Ordering::Relaxed);
        cons == i.prod.0.load(Ordering::Relaxed)
    }

    /// Whether an entry with `len` payload bytes fits in the ring now.
    pub(super) fn has_room(&self, len: usize) -> bool {
        let prod = self.inbox().prod.0.load(Ordering::Relaxed);
        // Worst case: padding to the end of the ring first.
        let want = 2 * entry_bytes(len);
        self.free_bytes(prod, want) >= want
    }

    /// Producer side: appends an entry with `len` payload bytes written by `fill`; false when
    /// the ring has no room now.
    pub(super) fn push(&self, e: Entry, len: usize, fill: impl FnOnce(*mut u8)) -> bool {
        self.push_with(len, fill, move || e)
    }

    /// `push` with the header made by `header` once the payload is written: a caller whose
    /// header fields come from memory reads them after the copy instead of keeping them in
    /// registers across it.
    #[inline(always)]
    pub(super) fn push_with(
        &self,
        len: usize,
        fill: impl FnOnce(*mut u8),
        header: impl FnOnce() -> Entry,
    ) -> bool {
        let i = self.inbox();
        let prod = i.prod.0.load(Ordering::Relaxed);
        let need = entry_bytes(len);
        let off = prod as usize % RING_BYTES;
        // Pad to the end when the entry does not fit before it, or to go back early to the
        // populated start once the consumer is done with it.
        let wrap = RING_BYTES - off < need
            || (off >= self.hot.bytes
                && need <= self.hot.entry_max
                && self.free_bytes(prod, RING_BYTES - off + need) >= RING_BYTES - off + need);
        let pad = if wrap { RING_BYTES - off } else { 0 };
        if self.free_bytes(prod, pad + need) < pad + need {
            return false;
        }
        let ring = self.ring();
        if pad > 0 {
            let p = Entry {
                kind: KIND_PAD,
                len: (pad - LINE) as u32,
                ..Default::default()
            };
            let at = unsafe { ring.add(off) };
            write_header(at, &p);
            stamp_of(at).store(prod + 1, Ordering::Release);
        }
        let pos = prod + pad as u64;
        let at = unsafe { ring.add((off + pad) % RING_BYTES) };
        // Payload first, then the header line: the header's fields and its stamp are then
        // the last stores and commit together, on one ownership transfer of that line. The
        // other order wrote the header line, then the payload line, then the header line
        // again, and a receiver spinning on the stamp took the line back in between, so the
        // stamp waited for a third transfer.
        fill(unsafe { at.add(LINE) });
        let mut e = header();
        e.len = len as u32;
        write_header(at, &e);
        stamp_of(at).store(pos + 1, Ordering::Release);
        i.prod.0.store(pos + need as u64, Ordering::Relaxed);
        true
    }

    /// Consumer side: whether the next entry has been published (not validated: `peek` does).
    #[inline]
    pub(super) fn has_entry(&self) -> bool {
        let cons = self.inbox().cons.0.load(Ordering::Relaxed);
        let at = unsafe { self.ring().add(cons as usize % RING_BYTES) };
        stamp_of(at).load(Ordering::Acquire) == cons + 1
    }

    /// Consumer side: the oldest entry and its payload, validated; Err when the producer wrote
    /// something impossible.
    #[inline(always)]
    pub(super) fn peek(&self) -> Result<Option<(Entry, *const u8)>, LinkError> {
        let cons = self.inbox().cons.0.load(Ordering::Relaxed);
        if !cons.is_multiple_of(LINE as u64) {
            return Err(LinkError::Corrupt("ring index out of range"));
        }
        let off = cons as usize % RING_BYTES;
        let at = unsafe { self.ring().add(off) };
        if stamp_of(at).load(Ordering::Acquire) != cons + 1 {
            self.touch_line_after(off);
            return Ok(None);
        }
        let e = unsafe { (at as *const Entry).read() };
        let size = LINE as u64 + (e.len as u64).next_multiple_of(LINE as u64);
        if off as u64 + size > RING_BYTES as u64 {
            return Err(LinkError::Corrupt("ring entry length out of range"));
        }
        if e.kind > KIND_CONTROL {
            return Err(LinkError::Corrupt("unknown ring entry kind"));
        }
        Ok(Some((e, unsafe { at.add(LINE) })))
    }

    /// Reads a word of the ring line after `off`, where the next entry's payload will be.
    /// A poll that finds the ring empty issues this load beside the stamp's, so when the entry
    /// comes both of its lines cross between the cores at once instead of one after the other
    /// (the branch that sees the stamp is predicted empty, so the CPU has already run this
    /// load when it finds the entry there).
    #[inline(always)]
    fn touch_line_after(&self, off: usize) {
        let next = unsafe { self.ring().add((off + LINE) % RING_BYTES) } as *const AtomicU64;
        std::hint::black_box(unsafe { &*next }.load(Ordering::Relaxed));
    }

    pub(super) fn pop(&self, e: &Entry) {
        let i = self.inbox();
        let cons = i.cons.0.load(Ordering::Relaxed);
        i.cons
            .0
            .store(cons + entry_bytes(e.len as usize) as u64, Ordering::Release);
    }

    pub(super) fn finish_wr(&self, status: umq_buf_status_t) {
        let i = self.inbox();
        let done = i.done.0.load(Ordering::Relaxed);
        i.statuses[done as usize % STATUS_SLOTS].store(status as u8, Ordering::Relaxed);
        i.done.0.store(done + 1, Ordering::Release);
    }
}
