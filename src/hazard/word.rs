//! The hazard-word protocol itself, apart from where the words live (`hazard/mod.rs`: one block
//! a thread) and how the fences are made (`word_sync`: an asymmetric pair in the library, two
//! full fences where `tests/loom_table.rs` compiles this file unchanged against loom).
//!
//! A reader publishes an id in a free word of its own and fences before it loads what the id
//! guards; a remover makes that unreachable, fences, and waits until no word holds the id. One
//! of the two fences comes second in every interleaving, so either the reader's load sees the
//! remover's store, or the remover's scan sees the reader's word (the Dekker pattern).

use super::word_sync::{AtomicUsize, Ordering, heavy_fence, light_fence, yield_now};

/// Lookups one thread may have open at once: a lookup inside a lookup (`umq_bind` looking up
/// its peer, a log callback calling the API) takes the next word.
pub const NEST: usize = 8;

/// One thread's hazard words (0: free).
#[derive(Default)]
pub struct Words {
    pub(super) held: [AtomicUsize; NEST],
}

/// A published id; dropping it withdraws the id.
pub struct Published<'a>(&'a AtomicUsize);

impl Drop for Published<'_> {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

impl Words {
    /// Publishes `id` (not 0) in a free word until the guard drops. Loads made after this call
    /// see a remover's store that came before its fence, or the remover sees `id`. None when
    /// every word is taken (lookups nested deeper than `NEST`).
    #[inline(always)]
    pub fn publish(&self, id: usize) -> Option<Published<'_>> {
        self.publish_then(id, light_fence)
    }

    /// `publish` with `fence` in place of the light fence: a compiler fence, where the caller
    /// knows that the remover's heavy fence is the kernel's barrier (`hazard/mod.rs`).
    #[inline(always)]
    pub fn publish_then(&self, id: usize, fence: impl FnOnce()) -> Option<Published<'_>> {
        debug_assert_ne!(id, 0);
        let word = self.held.iter().find(|w| w.load(Ordering::Relaxed) == 0)?;
        word.store(id, Ordering::Relaxed);
        fence();
        Some(Published(word))
    }

    /// Whether `id` is published here (read by the owning thread itself).
    pub fn holds(&self, id: usize) -> bool {
        self.held.iter().any(|h| h.load(Ordering::Relaxed) == id)
    }

    /// Withdraws every id (the owning thread is exiting).
    pub fn clear(&self) {
        for h in &self.held {
            h.store(0, Ordering::Release);
        }
    }

    fn publishes(&self, id: usize) -> bool {
        self.held.iter().any(|h| h.load(Ordering::Acquire) == id)
    }
}

/// Waits until no thread's words hold `id` (`all` lists every thread's, afresh at each look).
/// Call after making what `id` guards unreachable: every lookup that could still reach it has
/// published `id` by the time the fence returns, and it is done with it once it withdraws it.
pub fn wait_until_unused<'a, I>(all: impl Fn() -> I, id: usize)
where
    I: Iterator<Item = &'a Words>,
{
    heavy_fence();
    while all().any(|w| w.publishes(id)) {
        yield_now();
    }
}
