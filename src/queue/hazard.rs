//! Per-thread hazard words and the asymmetric fence behind lock-free handle lookups.
//!
//! A thread about to use a slot of the handle table *publishes* the slot in one of its hazard
//! words (a plain store); a remover clears the slot and waits until no thread publishes it. For
//! that to be safe each side needs a full fence between its store and its load (the Dekker
//! pattern). Lookups happen on every API call and removals almost never, so the remover pays
//! for both: `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` makes every running thread of the
//! process execute a full barrier, which turns the lookups' compiler fences into real ones
//! (the technique of liburcu's membarrier flavour and folly's asymmetric fences). Where the
//! kernel refuses membarrier, lookups fall back to a real fence.

use std::ptr;
use std::sync::atomic::{
    AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering, compiler_fence, fence,
};

/// Lookups one thread may have open at once: a lookup inside a lookup (`umq_bind` looking up
/// its peer, a log callback calling the API) takes the next word.
const NEST: usize = 8;

const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_long = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_long = 1 << 4;

/// One thread's hazard words (0: free). Never freed: a block whose thread exited is reused by
/// the next new thread.
struct Words {
    held: [AtomicUsize; NEST],
    claimed: AtomicBool,
    /// The block made before this one (the list is pushed at its head, never unlinked).
    next: *const Words,
}

/// Every block ever made, newest first. A list pushed without a lock: a child made by `fork()`
/// while another thread was adding a block must still be able to add its own.
static BLOCKS: AtomicPtr<Words> = AtomicPtr::new(ptr::null_mut());

fn blocks() -> impl Iterator<Item = &'static Words> {
    let mut at = BLOCKS.load(Ordering::Acquire) as *const Words;
    std::iter::from_fn(move || {
        // SAFETY: blocks are leaked, and `next` was written before the block was pushed.
        let w = unsafe { at.as_ref()? };
        at = w.next;
        Some(w)
    })
}

/// This thread's claim on a block, given back when the thread exits.
struct Claim(&'static Words);

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
        let w: &'static mut Words = Box::leak(Box::new(Words {
            held: Default::default(),
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
        let _ = WORDS.try_with(|w| w.set(None));
        for h in &self.0.held {
            h.store(0, Ordering::Release);
        }
        self.0.claimed.store(false, Ordering::Release);
    }
}

thread_local! {
    /// This thread's block, once claimed (read on every lookup: a const-initialised,
    /// destructor-free thread local is one load).
    static WORDS: std::cell::Cell<Option<&'static Words>> = const { std::cell::Cell::new(None) };
    /// The claim itself, which gives the block back when the thread exits.
    static MINE: Claim = Claim::new();
}

/// This thread's hazard words; None while the thread is exiting.
#[inline(always)]
fn words() -> Option<&'static Words> {
    match WORDS.get() {
        Some(w) => Some(w),
        None => claim_words(),
    }
}

#[cold]
#[inline(never)]
fn claim_words() -> Option<&'static Words> {
    let w = MINE.try_with(|c| c.0).ok()?;
    WORDS.set(Some(w));
    Some(w)
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

/// The cheap side: orders a hazard store before the slot load that follows.
fn light_fence() {
    if expedited() {
        compiler_fence(Ordering::SeqCst);
    } else {
        fence(Ordering::SeqCst);
    }
}

/// The expensive side: orders a remover's slot store before its scan of the hazard words.
fn heavy_fence() {
    if !(expedited() && membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)) {
        fence(Ordering::SeqCst);
    }
}

/// A published slot id; dropping it withdraws the id.
pub struct Published(&'static AtomicUsize);

impl Drop for Published {
    fn drop(&mut self) {
        self.0.store(0, Ordering::Release);
    }
}

/// Publishes `id` (not 0) for this thread until the guard drops. Loads made after this call
/// see a remover's clearing store, or the remover sees `id`. None when lookups nest deeper
/// than `NEST` or the thread is exiting.
pub fn publish(id: usize) -> Option<Published> {
    debug_assert_ne!(id, 0);
    let word = words()?
        .held
        .iter()
        .find(|w| w.load(Ordering::Relaxed) == 0)?;
    word.store(id, Ordering::Relaxed);
    light_fence();
    Some(Published(word))
}

/// Whether this thread itself has `id` published (a removal from inside a lookup of the same
/// slot would wait for itself forever).
pub fn held_here(id: usize) -> bool {
    words().is_some_and(|w| w.held.iter().any(|h| h.load(Ordering::Relaxed) == id))
}

/// Waits until no thread has `id` published. Call after making the slot unreachable: every
/// lookup that could still reach it has published `id` by the time the fence returns.
pub fn wait_until_unused(id: usize) {
    heavy_fence();
    while blocks().any(|w| w.held.iter().any(|h| h.load(Ordering::Acquire) == id)) {
        std::thread::yield_now();
    }
}
