//! Our own chunks registered with the provider, for providers that need the memory of every
//! operation registered (libfabric's `FI_MR_LOCAL`: verbs). A WR's buffer lies in a chunk of
//! the process pool or of a queue's shared pool; the first operation that names it registers
//! the whole chunk, and the registration lasts as long as the chunk.
//!
//! A chunk may leave (a shared pool goes with its last buffer) while an operation that named
//! its registration is still in libfabric: a send read in place after its WR was flushed, an
//! RMA piece of a WR whose queue went. Closing the registration under it would have a verbs
//! device fail the operation, and with it the connection every binding between the two
//! processes shares; so each operation holds a use of the registration (`Use`), and the
//! registration of a chunk that left closes with its last use.

use super::sys::{Endpoint, LocalRegistration};
use crate::buf::pool::ChunkSpan;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

/// Where the shared pools' chunks we registered start: their pages stay while registered
/// (`ChunkHook::pins`: a punched hole would leave the device the old pages). The pool's hook
/// reads it without the node's lock.
#[derive(Default)]
pub struct Pins(Mutex<HashSet<usize>>);

impl Pins {
    fn lock(&self) -> MutexGuard<'_, HashSet<usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the chunk that starts at `base` is pinned.
    pub fn holds(&self, base: usize) -> bool {
        self.lock().contains(&base)
    }

    fn pin(&self, base: usize) {
        self.lock().insert(base);
    }

    fn unpin(&self, base: usize) {
        self.lock().remove(&base);
    }
}

/// An operation's hold on the registration it named: given back (`Registered::done`) when
/// libfabric is done with the operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Use {
    token_id: u32,
    base: usize,
}

struct Registration {
    base: usize,
    r: LocalRegistration,
    /// Operations in flight that named it.
    users: usize,
}

/// Our chunks by where they start, and those an operation named, registered.
#[derive(Default)]
pub struct Registered {
    chunks: BTreeMap<usize, ChunkSpan>,
    live: HashMap<u32, Registration>,
    /// Registrations of chunks that left while an operation named them.
    leaving: Vec<(u32, Registration)>,
    /// Chunks the provider refused to register (a device's limit on pinned memory, say), by
    /// where they start: their operations go without (as messages, sends copied), and no
    /// operation tries again while the chunk lasts, so a refusal costs one system call.
    refused: HashMap<usize, u32>,
    /// Tests: registrations fail, as a device out of pinnable memory makes them.
    #[cfg(test)]
    pub fail: bool,
}

impl Registered {
    /// A chunk of ours that operations may name from now on.
    pub fn add(&mut self, span: ChunkSpan) {
        self.chunks.insert(span.base, span);
    }

    /// Our chunk `span` left: no operation may name it any more, and its registration closes
    /// now or with its last use.
    pub fn forget(&mut self, ep: &Endpoint, span: &ChunkSpan, pins: &Pins) {
        if self
            .chunks
            .get(&span.base)
            .is_some_and(|s| s.token_id == span.token_id)
        {
            self.chunks.remove(&span.base);
        }
        if self.refused.get(&span.base) == Some(&span.token_id) {
            self.refused.remove(&span.base);
        }
        if self
            .live
            .get(&span.token_id)
            .is_some_and(|g| g.base == span.base)
            && let Some(g) = self.live.remove(&span.token_id)
        {
            pins.unpin(span.base);
            self.retire(ep, span.token_id, g);
        }
    }

    /// The descriptor an operation on `len` bytes at `at` names, and its use of it: the
    /// registration of the chunk that holds them, made now if no operation named it before.
    /// None where the bytes lie in no chunk of ours, or the provider refused the registration.
    pub fn desc(
        &mut self,
        ep: &Endpoint,
        (at, len): (usize, usize),
        pins: &Pins,
    ) -> Option<(*mut c_void, Use)> {
        let (_, span) = self.chunks.range(..=at).next_back()?;
        if at - span.base > span.len || len > span.len - (at - span.base) {
            return None;
        }
        let span = *span;
        let u = Use {
            token_id: span.token_id,
            base: span.base,
        };
        if let Some(g) = self.live.get_mut(&u.token_id)
            && g.base == u.base
        {
            g.users += 1;
            return Some((g.r.desc, u));
        }
        let Some(r) = self.register(ep, &span, pins) else {
            // Not asked again: its operations go without from now on.
            self.chunks.remove(&span.base);
            self.refused.insert(span.base, span.token_id);
            return None;
        };
        let desc = r.desc;
        let g = Registration {
            base: span.base,
            r,
            users: 1,
        };
        if let Some(old) = self.live.insert(u.token_id, g) {
            // A chunk of the same token that left unheard: it is not ours any more.
            pins.unpin(old.base);
            self.retire(ep, u.token_id, old);
        }
        Some((desc, u))
    }

    fn register(&self, ep: &Endpoint, span: &ChunkSpan, pins: &Pins) -> Option<LocalRegistration> {
        #[cfg(test)]
        if self.fail {
            return None;
        }
        if span.shared {
            // Its pages stay while registered: an idle chunk's are not given back (`pins`).
            pins.pin(span.base);
        }
        // SAFETY: process-pool memory is freed only after the pool's hooks heard it leave; a
        // shared pool's arena stays mapped while a buffer of it is out, as the operation's is;
        // either way the registration closes after the chunk left (`forget`), and one that
        // outlives a mapping holds its pages, nothing else.
        match unsafe { ep.register_local(span.base as *mut u8, span.len) } {
            Ok(r) => Some(r),
            Err(code) => {
                pins.unpin(span.base);
                crate::log_warn!(
                    "umq_fabric",
                    "a chunk of {} bytes could not be registered ({}; a device limits pinned memory by RLIMIT_MEMLOCK): WRITEs and READs from its buffers go as messages, and its sends are copied",
                    span.len,
                    super::sys::strerror(code)
                );
                None
            }
        }
    }

    fn retire(&mut self, ep: &Endpoint, token_id: u32, g: Registration) {
        match g.users {
            0 => ep.unregister_local(g.r),
            _ => self.leaving.push((token_id, g)),
        }
    }

    /// An operation that named a registration is done with it.
    pub fn done(&mut self, ep: &Endpoint, u: Use) {
        if let Some(g) = self.live.get_mut(&u.token_id)
            && g.base == u.base
        {
            g.users = g.users.saturating_sub(1);
            return;
        }
        let Some(i) = self
            .leaving
            .iter()
            .position(|(t, g)| *t == u.token_id && g.base == u.base)
        else {
            return;
        };
        let g = &mut self.leaving[i].1;
        g.users = g.users.saturating_sub(1);
        if g.users == 0 {
            let (_, g) = self.leaving.swap_remove(i);
            ep.unregister_local(g.r);
        }
    }

    /// Closes every registration (the node closes: nothing of it is in flight any more).
    pub fn close_all(&mut self, ep: &Endpoint, pins: &Pins) {
        for (_, g) in self.live.drain().chain(self.leaving.drain(..)) {
            pins.unpin(g.base);
            ep.unregister_local(g.r);
        }
    }

    /// Registrations open: of chunks that live, and of chunks that left with operations that
    /// still name them.
    pub fn open(&self) -> (usize, usize) {
        (self.live.len(), self.leaving.len())
    }

    /// Chunks that live whose registration the provider refused.
    pub fn refused(&self) -> usize {
        self.refused.len()
    }
}
