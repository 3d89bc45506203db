//! Each thread's cache of the process pool's free buffers.
//!
//! The process pool serves every buffer of a queue bound in this process and every
//! `umq_buf_alloc` without a queue. With one free list per size class behind one lock, each
//! allocation and each free of every thread took that lock and wrote its cache line: two
//! threads, each ping-ponging on its own pair of queues, made fewer round trips together than
//! one thread alone. So a thread keeps up to `CACHE_MAX` free buffers of each class for itself,
//! as the reference UMQ's thread-local buffer pools, tcmalloc's thread caches and UCX's
//! per-worker memory pools do: a free puts the buffer there and the next allocation takes it
//! back, with no lock and nothing another thread touches. The cache trades half its limit at
//! a time with the class's free list when it runs dry or full (a refill takes only buffers
//! that are free already: it never grows the pool), and gives all it holds back when its
//! thread ends.
//!
//! A cache belongs to one pool (its id): once the process's runtime is made again, what a
//! thread cached of the old pool is dropped unread at its next buffer call (the memory it
//! points into may be gone). Queues' shared pools have no caches: a queue is mostly served by
//! one thread, and their idle chunks are released, which buffers out of sight would hold up.
//!
//! What each cache holds is published for `umq_stats_qbuf_pool_get` (`held`), written by its
//! own thread only.

use crate::abi::types::umq_buf_t;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

/// Free buffers a thread keeps of one size class at most.
pub const CACHE_MAX: usize = 64;
/// Bytes of buffers a thread keeps of one size class at most: the large classes' buffers are
/// not worth hiding from other threads (each one's allocation is a large copy anyway).
pub const CACHE_BYTES: usize = 512 << 10;
/// Size classes a cache serves (the pool has at most a dozen).
pub const CACHED_CLASSES: usize = 16;

/// Where cached buffers go back to: the pool's free lists.
pub trait Home: Send + Sync {
    /// Puts `bufs` (free buffers of `class`, drained) back on the class's free list.
    fn take_back(&self, class: usize, bufs: &mut Vec<NonNull<umq_buf_t>>);
}

/// A thread's cache as other threads see it: whose buffers, how many of each class, and its
/// refills from each class's free list and the buffers they brought (the July 2026 revision's
/// thread-local pool statistics).
pub struct Shown {
    pool: AtomicU64,
    /// The thread's kernel id.
    pub tid: u64,
    held: [AtomicU64; CACHED_CLASSES],
    refills: [AtomicU64; CACHED_CLASSES],
    refilled: [AtomicU64; CACHED_CLASSES],
}

fn load(counts: &[AtomicU64; CACHED_CLASSES], class: usize) -> u64 {
    counts.get(class).map_or(0, |c| c.load(Ordering::Relaxed))
}

impl Shown {
    pub fn held(&self, class: usize) -> u64 {
        load(&self.held, class)
    }
    pub fn refills(&self, class: usize) -> u64 {
        load(&self.refills, class)
    }
    pub fn refilled(&self, class: usize) -> u64 {
        load(&self.refilled, class)
    }
}

/// Every live thread's `Shown`.
static SHOWN: Mutex<Vec<Weak<Shown>>> = Mutex::new(Vec::new());

/// The caches of pool `pool` alive now.
pub fn caches_of(pool: u64) -> Vec<Arc<Shown>> {
    let mut all = SHOWN.lock().unwrap_or_else(|p| p.into_inner());
    all.retain(|w| w.strong_count() > 0);
    all.iter()
        .filter_map(Weak::upgrade)
        .filter(|s| s.pool.load(Ordering::Relaxed) == pool)
        .collect()
}

struct Cache {
    /// The pool whose buffers these are (0: none yet).
    pool: u64,
    home: Option<Weak<dyn Home>>,
    classes: [Vec<NonNull<umq_buf_t>>; CACHED_CLASSES],
    shown: Arc<Shown>,
}

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache::new());
}

impl Cache {
    fn new() -> Cache {
        let shown = Arc::new(Shown {
            pool: AtomicU64::new(0),
            tid: unsafe { libc::gettid() } as u64,
            held: [const { AtomicU64::new(0) }; CACHED_CLASSES],
            refills: [const { AtomicU64::new(0) }; CACHED_CLASSES],
            refilled: [const { AtomicU64::new(0) }; CACHED_CLASSES],
        });
        SHOWN
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(Arc::downgrade(&shown));
        Cache {
            pool: 0,
            home: None,
            classes: [const { Vec::new() }; CACHED_CLASSES],
            shown,
        }
    }

    /// Makes this the cache of `pool`: what it held of another pool goes back there if that
    /// pool's free lists still exist, or is forgotten. (The look is inline: every free and
    /// refill asks, and the cache changes pools about never.)
    #[inline(always)]
    fn serve<H: Home + 'static>(&mut self, pool: u64, home: &Arc<H>) {
        if self.pool != pool {
            self.serve_another(pool, home);
        }
    }

    #[cold]
    #[inline(never)]
    fn serve_another<H: Home + 'static>(&mut self, pool: u64, home: &Arc<H>) {
        self.give_all_back();
        self.pool = pool;
        let home: Weak<dyn Home> = Arc::downgrade(home) as Weak<H>;
        self.home = Some(home);
        self.shown.pool.store(pool, Ordering::Relaxed);
    }

    fn give_all_back(&mut self) {
        let home = self.home.take().and_then(|h| h.upgrade());
        for (class, bufs) in self.classes.iter_mut().enumerate() {
            match &home {
                Some(h) if !bufs.is_empty() => h.take_back(class, bufs),
                _ => bufs.clear(),
            }
            self.shown.held[class].store(0, Ordering::Relaxed);
        }
    }

    fn publish(&self, class: usize) {
        self.shown.held[class].store(self.classes[class].len() as u64, Ordering::Relaxed);
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        self.give_all_back();
    }
}

/// `n` free buffers of `class` of `pool` from this thread's cache, the most recently freed
/// first, linked through `qbuf_next`; None when it holds fewer (or serves another pool).
pub fn take(pool: u64, class: usize, n: usize) -> Option<*mut umq_buf_t> {
    CACHE
        .try_with(|c| {
            let mut c = c.try_borrow_mut().ok()?;
            if c.pool != pool {
                return None;
            }
            let bufs = c.classes.get_mut(class).filter(|b| b.len() >= n)?;
            let head = link(bufs.drain(bufs.len() - n..));
            c.publish(class);
            Some(head)
        })
        .ok()
        .flatten()
}

/// Keeps `bufs` (free buffers of `class` of `pool`, just taken from its free list) in this
/// thread's cache. Returns them when the cache cannot take them.
pub fn stock<H: Home + 'static>(
    pool: u64,
    home: &Arc<H>,
    class: usize,
    bufs: Vec<NonNull<umq_buf_t>>,
) -> Result<(), Vec<NonNull<umq_buf_t>>> {
    let mut bufs = Some(bufs);
    let _ = CACHE.try_with(|c| {
        if class >= CACHED_CLASSES {
            return;
        }
        let Ok(mut c) = c.try_borrow_mut() else {
            return;
        };
        let Some(more) = bufs.take() else {
            return;
        };
        c.serve(pool, home);
        // Only this thread writes its counts: a plain load and store, no locked instruction.
        let (refills, refilled) = (&c.shown.refills[class], &c.shown.refilled[class]);
        refills.store(refills.load(Ordering::Relaxed) + 1, Ordering::Relaxed);
        let brought = refilled.load(Ordering::Relaxed) + more.len() as u64;
        refilled.store(brought, Ordering::Relaxed);
        c.classes[class].extend(more);
        c.publish(class);
    });
    bufs.map_or(Ok(()), Err)
}

/// Puts `buf`, just freed, in this thread's cache, which keeps `limit` of its class. Returns
/// what must go to the class's free list instead: `buf` itself when there is no cache to take
/// it, or the cache's oldest half once it is full.
pub fn put<H: Home + 'static>(
    pool: u64,
    home: &Arc<H>,
    class: usize,
    buf: NonNull<umq_buf_t>,
    limit: usize,
) -> Vec<NonNull<umq_buf_t>> {
    CACHE
        .try_with(|c| {
            let Ok(mut c) = c.try_borrow_mut() else {
                return vec![buf];
            };
            if class >= CACHED_CLASSES {
                return vec![buf];
            }
            c.serve(pool, home);
            let bufs = &mut c.classes[class];
            bufs.push(buf);
            let spill = match bufs.len() > limit {
                true => bufs.drain(..limit / 2).collect(),
                false => Vec::new(),
            };
            c.publish(class);
            spill
        })
        .unwrap_or_else(|_| vec![buf])
}

/// Links `bufs` through `qbuf_next`, the last one first (their headers are ours: free).
pub fn link(bufs: impl Iterator<Item = NonNull<umq_buf_t>>) -> *mut umq_buf_t {
    let mut next = std::ptr::null_mut();
    for b in bufs {
        unsafe { (*b.as_ptr()).qbuf_next = next };
        next = b.as_ptr();
    }
    next
}
