//! Per-thread hazard words and the asymmetric fence behind lock-free lookups, and the slot
//! they guard (`slot.rs`): the handle table's queues and the process's runtime are reached
//! through such slots.
//!
//! A thread about to use a slot *publishes* the slot in one of its hazard
//! words (a plain store); a remover clears the slot and waits until no thread publishes it. For
//! that to be safe each side needs a full fence between its store and its load (the Dekker
//! pattern, `word.rs`). Lookups happen on every API call and removals almost never, so the
//! remover pays for both: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` makes every running
//! thread of the process execute a full barrier, which turns the lookups' compiler fences into
//! real ones (the technique of liburcu's membarrier flavour and folly's asymmetric fences).
//! Where the kernel refuses membarrier, lookups fall back to a real fence.

pub mod slot;
mod word;

use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU8, Ordering};
pub use word::Published;
use word::Words;

/// What `slot.rs` is built on: std's atomics and `Arc`, and the process's hazard words.
mod slot_sync {
    pub(super) use crate::hazard;
    pub(super) use std::sync::Arc;
    pub(super) use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
}

/// What a slot holds: something that knows its own handle.
pub trait Named {
    fn handle(&self) -> u64;
}

/// What `word.rs` is built on: std's atomics and the asymmetric fence pair.
mod word_sync {
    pub use std::sync::atomic::{AtomicUsize, Ordering};
    pub use std::thread::yield_now;

    /// The cheap side: orders a hazard store before the slot load that follows.
    #[inline(always)]
    pub fn light_fence() {
        if super::expedited() {
            std::sync::atomic::compiler_fence(Ordering::SeqCst);
        } else {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }

    /// The expensive side: orders a remover's slot store before its scan of the hazard words.
    pub fn heavy_fence() {
        if !(super::expedited() && super::membarrier(super::MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
            std::sync::atomic::fence(Ordering::SeqCst);
        }
    }
}

/// The cheap side of the asymmetric fence, for other Dekker pairs of the library (a store,
/// this fence, a load), paired with `heavy_fence` on the side that runs rarely.
#[inline(always)]
pub fn light_fence() {
    word_sync::light_fence();
}

/// The expensive side of the asymmetric fence (a system call where the kernel offers it).
pub fn heavy_fence() {
    word_sync::heavy_fence();
}

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// One thread's block of hazard words. Never freed: a block whose thread exited is reused by
/// the next new thread.
struct Block {
    words: Words,
    claimed: AtomicBool,
    /// The block made before this one (the list is pushed at its head, never unlinked).
    next: *const Block,
}

/// Every block ever made, newest first. A list pushed without a lock: a child made by `fork()`
/// while another thread was adding a block must still be able to add its own.
static BLOCKS: AtomicPtr<Block> = AtomicPtr::new(ptr::null_mut());

fn blocks() -> impl Iterator<Item = &'static Block> {
    let mut at = BLOCKS.load(Ordering::Acquire) as *const Block;
    std::iter::from_fn(move || {
        // SAFETY: blocks are leaked, and `next` was written before the block was pushed.
        let w = unsafe { at.as_ref()? };
        at = w.next;
        Some(w)
    })
}

/// This thread's claim on a block, given back when the thread exits.
struct Claim(&'static Block);

impl Claim {
    fn new() -> Claim {
        let reused = blocks().find(|w| {
            w.claimed
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        });
        if let Some(w) = reused {
            return Claim(w);
        }
        let w: &'static mut Block = Box::leak(Box::new(Block {
            words: Words::default(),
            claimed: AtomicBool::new(true),
            next: ptr::null(),
        }));
        let mut head = BLOCKS.load(Ordering::Acquire);
        loop {
            w.next = head;
            match BLOCKS.compare_exchange_weak(head, w, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Claim(w),
                Err(now) => head = now,
            }
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        // Lookups from later destructors of this thread find no block (and fail) instead of
        // one the next thread may have claimed.
        let _ = WORDS.try_with(|w| w.set(&NONE_FREE));
        self.0.words.clear();
        self.0.claimed.store(false, Ordering::Release);
    }
}

thread_local! {
    /// The words a lookup publishes in with a compiler fence (read on every lookup: a
    /// const-initialised, destructor-free thread local is one load). `NONE_FREE` until the
    /// thread's first lookup finds the kernel's barrier behind the heavy fence, and again once
    /// the thread exits; the thread's own block from that first lookup on.
    static WORDS: std::cell::Cell<&'static Words> = const { std::cell::Cell::new(&NONE_FREE) };
    /// The claim itself, which gives the block back when the thread exits.
    static MINE: Claim = Claim::new();
}

/// Words of which none is ever free, and in which nothing is ever published: a lookup that
/// finds them in `WORDS` takes `publish_slow`. So the lookup's fast path tests neither whether
/// the thread has claimed its block nor whether the fence may be a compiler fence (five
/// instructions a call, forty a 64 B round trip's eight calls).
static NONE_FREE: Words = Words {
    held: [const { std::sync::atomic::AtomicUsize::new(usize::MAX) }; word::NEST],
};

/// This thread's own block; None while the thread is exiting.
fn own_words() -> Option<&'static Words> {
    MINE.try_with(|c| &c.0.words).ok()
}

/// A lookup that found no free word in `WORDS`: the thread's first, one on a host whose kernel
/// refuses the expedited barrier (each of those publishes with a full fence), one nested deeper
/// than `word::NEST` (None), or one while the thread exits (None).
#[cold]
#[inline(never)]
fn publish_slow(id: usize) -> Option<Published<'static>> {
    let own = own_words()?;
    if !expedited() {
        return own.publish(id);
    }
    WORDS.set(own);
    own.publish_then(id, compiler_fence)
}

#[inline(always)]
fn compiler_fence() {
    std::sync::atomic::compiler_fence(Ordering::SeqCst);
}

/// Whether the kernel runs the heavy side of the fence for us (decided once per process).
#[inline(always)]
fn expedited() -> bool {
    // 0: not asked yet, 1: yes, 2: no. A race asks twice and gets the same answer.
    static EXPEDITED: AtomicU8 = AtomicU8::new(0);
    match EXPEDITED.load(Ordering::Relaxed) {
        1 => true,
        2 => false,
        _ => register_expedited(&EXPEDITED),
    }
}

#[cold]
#[inline(never)]
fn register_expedited(state: &AtomicU8) -> bool {
    let yes = membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED);
    state.store(if yes { 1 } else { 2 }, Ordering::Relaxed);
    yes
}

fn membarrier(cmd: libc::c_long) -> bool {
    unsafe {
        libc::syscall(
            libc::SYS_membarrier,
            cmd,
            0 as libc::c_long,
            0 as libc::c_long,
        ) == 0
    }
}

/// Publishes `id` (not 0) for this thread until the guard drops. Loads made after this call
/// see a remover's clearing store, or the remover sees `id`. None when lookups nest deeper
/// than `word::NEST` or the thread is exiting.
#[inline(always)]
pub fn publish(id: usize) -> Option<Published<'static>> {
    // Only a block whose thread found the kernel's barrier is ever in `WORDS`.
    match WORDS.get().publish_then(id, compiler_fence) {
        Some(published) => Some(published),
        None => publish_slow(id),
    }
}

/// Whether this thread itself has `id` published (a removal from inside a lookup of the same
/// slot would wait for itself forever).
pub fn held_here(id: usize) -> bool {
    own_words().is_some_and(|w| w.holds(id))
}

/// Waits until no thread has `id` published. Call after making the slot unreachable: every
/// lookup that could still reach it has published `id` by the time the fence returns.
pub fn wait_until_unused(id: usize) {
    word::wait_until_unused(|| blocks().map(|b| &b.words), id);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs `f` on a thread of its own, so its thread locals start as a new thread's do.
    fn on_new_thread<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
        std::thread::spawn(f).join().unwrap()
    }

    fn none_free_untouched() -> bool {
        NONE_FREE
            .held
            .iter()
            .all(|w| w.load(Ordering::Relaxed) == usize::MAX)
    }

    #[test]
    fn a_thread_s_first_lookup_takes_its_own_block_for_the_fast_path() {
        let (before, after, held, withdrawn) = on_new_thread(|| {
            let before = std::ptr::eq(WORDS.get(), &NONE_FREE);
            let published = publish(0x40).unwrap();
            let own = own_words().unwrap();
            let after = if expedited() {
                std::ptr::eq(WORDS.get(), own)
            } else {
                std::ptr::eq(WORDS.get(), &NONE_FREE)
            };
            let held = held_here(0x40) && own.holds(0x40);
            drop(published);
            (before, after, held, !held_here(0x40))
        });
        assert!(before, "a new thread's lookups start on the slow path");
        assert!(
            after,
            "the fast path names the thread's own block only behind the barrier"
        );
        assert!(held && withdrawn);
        assert!(none_free_untouched());
    }

    #[test]
    fn lookups_nest_as_deep_as_the_words_and_no_deeper() {
        let (depths, again) = on_new_thread(|| {
            let mut held = Vec::new();
            let mut depths = Vec::new();
            for id in 1..=word::NEST + 1 {
                let p = publish(id * 8);
                depths.push(p.is_some());
                held.extend(p);
            }
            held.pop();
            let again = publish(0x1000).is_some();
            (depths, again)
        });
        let mut want = vec![true; word::NEST];
        want.push(false);
        assert_eq!(depths, want);
        assert!(again, "a word withdrawn is free again");
        assert!(none_free_untouched());
    }
}
