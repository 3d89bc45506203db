//! Buffer pools: size classes of fixed slots carved from large chunks, reused through free lists.
//!
//! A chunk holds `count` slots. In combine mode a slot is the 128-byte header followed by its data
//! area; in split mode headers and data areas live in two separate arrays. A side table per chunk
//! records each slot's state (free or handed out), its allocation size and headroom, so a double
//! free, a foreign pointer or `umq_data_to_head` on a stray address is detected instead of
//! corrupting the pool. Each chunk has a token id and a random token value: peers present them to
//! WRITE into or READ from a buffer of the chunk.
//!
//! A queue may also have a *shared pool* (`umq_buf_alloc` with its handle): the same size classes
//! with their own free lists, carved from an [`Arena`] its peer process maps, so a message sent
//! from such a buffer crosses with one copy. Its chunks are registered here like any other (so
//! every buffer call and remote-access check works on them unchanged); when the queue is gone
//! and the last of its buffers comes back, they are unregistered and the arena unmapped.
//!
//! A shared pool gives memory back: a chunk none of whose buffers has been handed out for
//! `RELEASE_AFTER_MS` has its pages dropped (a hole punched in the arena's memfd, so the peer's
//! mapping lets go of them too). The chunk keeps its address range, its registration and its
//! slots on the free list, so nothing else changes: a slot taken again faults in a zero page.
//! A class's first chunk is kept (it is small, and what a lightly used queue lives in), and
//! nothing is released while a [`ChunkHook`] is present (a device may have pinned the pages).
//!
//! A provider that must register memory with a device before a peer can reach it (a NIC)
//! adds a [`ChunkHook`]: it hears of every chunk, those that exist and each new one, and of
//! each chunk that leaves. The pools do not know what the provider does with them.

use super::access::{AccessTable, ChunkLayout, EntryIndex};
use super::arena::Arena;
use super::cache;
use super::stride::Stride;
use crate::abi::types::*;
use crate::app_sync::AppRwLock;
use std::alloc::Layout;
use std::cell::RefCell;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

pub const HEADER_SIZE: usize = 128;
const CHUNK_TARGET: usize = 2 << 20;
/// A queue's shared pool starts a size class with a chunk this big and doubles each next one
/// up to `CHUNK_TARGET`: a queue that uses a few buffers backs a few (its arena's pages are
/// populated as chunks are carved), not 2 MiB.
const SHARED_FIRST_CHUNK: usize = 64 << 10;
const MAX_SLOTS_PER_CHUNK: usize = super::access::SLOTS;
/// A shared pool's chunk idle this long is released. Long enough that a queue between bursts
/// does not pay a hole punch and page faults per burst.
pub const RELEASE_AFTER_MS: u64 = 1000;
const FREE: u8 = 0;
const IN_USE: u8 = 1;

struct SlotMeta {
    state: AtomicU8,
    request_size: AtomicU32,
    headroom: AtomicU16,
}

pub struct Chunk {
    /// The pool that carved it (`Pool::id`).
    pool: u64,
    class: usize,
    count: usize,
    data_cap: usize,
    hdr_base: usize,
    hdr_stride: Stride,
    data_base: usize,
    data_stride: usize,
    pub token_id: u32,
    pub token_value: u32,
    memory: *mut u8,
    /// Heap chunks are freed with this layout; arena chunks go with their arena.
    heap: Option<Layout>,
    meta: Box<[SlotMeta]>,
    /// The free lists the chunk's slots return to.
    lists: Arc<Lists>,
    /// Carved as its class's how-manyth chunk of these lists (the first one is never released).
    ordinal: u32,
    /// A shared pool's slots handed out and not freed: when the chunk goes idle (a hint:
    /// `release_idle` counts its free slots to be sure), and when a retired pool's last buffer
    /// comes back (`Pool::none_out`).
    out: AtomicU32,
    /// When the chunk last went idle (ms on the pool clock); 0 while in use or released.
    idle_since_ms: AtomicU64,
    /// Its entry in the pool's access table, when it has one (peers then reach its buffers
    /// without this process running: `buf::access`).
    access: Option<EntryIndex>,
}

// The chunk's memory is shared by design; every mutable access goes through slot ownership.
unsafe impl Send for Chunk {}
unsafe impl Sync for Chunk {}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let Some(layout) = self.heap {
            unsafe { std::alloc::dealloc(self.memory, layout) };
        }
    }
}

impl Chunk {
    fn span(&self) -> ChunkSpan {
        ChunkSpan {
            base: self.memory as usize,
            len: self.count * (HEADER_SIZE + self.data_cap),
            token_id: self.token_id,
            token_value: self.token_value,
            shared: self.heap.is_none(),
            data_base: self.data_base,
            data_stride: self.data_stride,
            data_cap: self.data_cap,
            count: self.count,
        }
    }

    fn header(&self, i: usize) -> *mut umq_buf_t {
        (self.hdr_base + i * self.hdr_stride.get()) as *mut umq_buf_t
    }
    fn data(&self, i: usize) -> *mut u8 {
        (self.data_base + i * self.data_stride) as *mut u8
    }
    /// One past the last byte of its last header.
    fn headers_end(&self) -> usize {
        self.hdr_base + self.hdr_stride.get() * (self.count - 1) + HEADER_SIZE
    }
    fn slot_of_header(&self, addr: usize) -> Option<usize> {
        self.hdr_stride
            .index_of(addr.checked_sub(self.hdr_base)?, self.count)
    }
    fn slot_of_data(&self, addr: usize) -> Option<usize> {
        let off = addr.checked_sub(self.data_base)?;
        let i = off / self.data_stride;
        (i < self.count && off % self.data_stride < self.data_cap).then_some(i)
    }
}

/// One thread's cache of one size class of the process pool, as `Pool::thread_caches` reports
/// it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ThreadCacheStats {
    pub tid: u64,
    pub class: usize,
    /// The most buffers it keeps, those it holds, and its refills and the buffers they brought.
    pub limit: u64,
    pub held: u64,
    pub refills: u64,
    pub refilled: u64,
}

/// One size class as `Pool::class_stats` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassStats {
    /// Bytes of data a buffer of the class holds.
    pub data_cap: usize,
    pub slots: u64,
    pub free: u64,
}

/// The free slots of one size class.
struct Class {
    free: Mutex<Slots>,
    /// Chunks carved for this class so far.
    chunks: AtomicU32,
    /// Slots those chunks hold.
    slots: AtomicU64,
}

#[derive(Default)]
struct Slots {
    free: Vec<NonNull<umq_buf_t>>,
    /// A shared pool's chunks past the first, which may be released (cleared when the pool
    /// leaves the registry: chunks hold their lists).
    releasable: Vec<Arc<Chunk>>,
}
unsafe impl Send for Class {}
unsafe impl Sync for Class {}

/// One set of free lists (per size class) and where its chunks' memory comes from: the heap for
/// the process-wide pool, an arena for a queue's shared pool.
pub struct Lists {
    classes: Vec<Class>,
    arena: Option<Arc<Arena>>,
    /// Shared pools: whether the queue is gone. Its buffers still out are its chunks' `out`.
    retired: AtomicBool,
    unregistered: AtomicBool,
    /// Some chunk went idle since `release_idle` last found none waiting.
    idle_hint: AtomicBool,
    /// Called when the first chunk goes idle (`when_idle`).
    on_idle: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Lists {
    fn new(caps: &[usize], arena: Option<Arc<Arena>>) -> Lists {
        Lists {
            classes: caps
                .iter()
                .map(|_| Class {
                    free: Mutex::new(Slots::default()),
                    chunks: AtomicU32::new(0),
                    slots: AtomicU64::new(0),
                })
                .collect(),
            arena,
            retired: AtomicBool::new(false),
            unregistered: AtomicBool::new(false),
            idle_hint: AtomicBool::new(false),
            on_idle: OnceLock::new(),
        }
    }

    /// Has `f` called when a chunk goes idle while none was waiting to be released: the owner
    /// then has `Pool::release_idle` run in `RELEASE_AFTER_MS` (a free must not wait for that).
    pub fn when_idle(&self, f: Box<dyn Fn() + Send + Sync>) {
        let _ = self.on_idle.set(f);
    }

    /// A chunk went idle: the owner hears of it when none was waiting already.
    fn note_idle(&self) {
        if !self.idle_hint.swap(true, Ordering::AcqRel)
            && let Some(f) = self.on_idle.get()
        {
            f();
        }
    }

    /// Some idle chunk waits for its time to be released.
    pub fn idle_waiting(&self) -> bool {
        self.idle_hint.load(Ordering::Acquire)
    }

    fn slots(&self, class: usize) -> std::sync::MutexGuard<'_, Slots> {
        self.classes[class]
            .free
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    pub fn arena(&self) -> Option<&Arc<Arena>> {
        self.arena.as_ref()
    }
}

impl cache::Home for Lists {
    fn take_back(&self, class: usize, bufs: &mut Vec<NonNull<umq_buf_t>>) {
        self.slots(class).free.append(bufs);
    }
}

/// Address ranges -> chunk, sorted by start, for pointer validation.
#[derive(Default)]
struct Registry {
    headers: Vec<(usize, usize, Arc<Chunk>)>,
    data: Vec<(usize, usize, Arc<Chunk>)>,
}

/// A chunk of pool memory as a provider that registers memory sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkSpan {
    pub base: usize,
    pub len: usize,
    /// What a peer presents to reach it (`umq_buf_t` token id and value).
    pub token_id: u32,
    pub token_value: u32,
    /// Carved from a queue's shared pool (its arena), not from the process pool.
    pub shared: bool,
    /// Its `count` slots' data areas: `data_cap` bytes every `data_stride` from `data_base`
    /// (the headers between them, or apart, are the library's own).
    pub data_base: usize,
    pub data_stride: usize,
    pub data_cap: usize,
    pub count: usize,
}

impl ChunkSpan {
    /// Slot `i`'s data area: its start and length.
    pub fn slot_data(&self, i: usize) -> (usize, usize) {
        (self.data_base + i * self.data_stride, self.data_cap)
    }
}

/// Told of every chunk of a pool: `added` for each that exists when the hook is added and for
/// each new one, `removed` for each that leaves (a retired shared pool). A hook runs under the
/// pool's hook lock and must not call back into the pool.
pub trait ChunkHook: Send + Sync {
    fn added(&self, chunk: &ChunkSpan);
    fn removed(&self, chunk: &ChunkSpan);
    /// Whether it may pin this shared-pool chunk's pages (a device registration), so that the
    /// chunk, idle, must keep them: a punched hole would leave the device the old pages.
    fn pins(&self, _chunk: &ChunkSpan) -> bool {
        true
    }
}

fn find(ranges: &[(usize, usize, Arc<Chunk>)], addr: usize) -> Option<Arc<Chunk>> {
    let i = ranges.partition_point(|(start, _, _)| *start <= addr);
    let (start, end, c) = ranges.get(i.checked_sub(1)?)?;
    (addr >= *start && addr < *end).then(|| c.clone())
}

/// A chunk a thread found in the registry, held weakly: a chunk that leaves the registry goes
/// with its memory whatever threads remember it.
struct Seen {
    /// Its headers: `len` bytes from `start` (none for an entry not filled yet).
    start: usize,
    len: usize,
    chunk: Weak<Chunk>,
    /// Its pool, and whether it is of the process pool's own lists (which stay in the
    /// registry as long as the pool: such a chunk is borrowed, not counted, `ChunkRef`).
    pool: u64,
    main: bool,
}

impl Seen {
    const NONE: Seen = Seen {
        start: 0,
        len: 0,
        chunk: Weak::new(),
        pool: 0,
        main: false,
    };

    #[inline(always)]
    fn holds(&self, addr: usize) -> bool {
        addr.wrapping_sub(self.start) < self.len
    }
}

thread_local! {
    /// The chunks whose headers this thread looked up last, newest first. A thread allocates
    /// and frees in a few chunks over and over (its queue's shared pool, the process pool),
    /// and the registry's lock, search and reference count made a lookup cost as much as the
    /// rest of a buffer call.
    static RECENT: RefCell<[Seen; 4]> = const { RefCell::new([Seen::NONE; 4]) };
}

/// Puts `chunk` first in this thread's `RECENT`, the oldest one out.
fn remember(chunk: &Arc<Chunk>) {
    let _ = RECENT.try_with(|recent| {
        let mut recent = recent.borrow_mut();
        recent.rotate_right(1);
        recent[0] = Seen {
            start: chunk.hdr_base,
            len: chunk.headers_end() - chunk.hdr_base,
            chunk: Arc::downgrade(chunk),
            pool: chunk.pool,
            main: chunk.lists.arena.is_none(),
        };
    });
}

pub struct Pool {
    /// Tells this pool's chunks from another's in a thread's `RECENT`.
    id: u64,
    split: bool,
    pub default_headroom: u16,
    /// Slot data capacity of each size class, smallest first.
    caps: Vec<usize>,
    /// How many free buffers of each class a thread keeps of the process pool (`cache_limit`).
    cache_limits: Vec<usize>,
    main: Arc<Lists>,
    registry: RwLock<Registry>,
    next_token_id: AtomicU32,
    /// What hears of chunks coming and going. The application's reader-writer lock when it
    /// registered one (`app_sync`): adding a hook holds it while every existing chunk is told
    /// (a provider registering memory), and a growing pool waits on it.
    hooks: AppRwLock<Vec<Arc<dyn ChunkHook>>>,
    /// What peers on this host check one-sided operations against (None: it could not be
    /// made, and they go through the target-side path).
    access: Option<AccessTable>,
}

/// A hold on the memory of a buffer's chunk: while it lives, that memory stays mapped, whatever
/// becomes of the buffer, its queue or its pool. A provider that reads a WR's bytes in place
/// holds one until it is done with them, which may be after the WR was flushed.
pub struct Lease {
    _chunk: Arc<Chunk>,
}

/// A chunk found from a pointer: a reference of its own, or a borrow of a process-pool chunk
/// from its pool (which keeps those chunks as long as it lives). Every thread's buffers of the
/// process pool share its few chunks, and taking and dropping a reference of one were two
/// atomic read-modify-writes of a line all of them write. Either way the chunk is reached
/// through one pointer: a buffer call reads a dozen of its fields, and a match on the kind of
/// reference at each read was about 50 instructions a message.
pub struct ChunkRef<'a> {
    chunk: NonNull<Chunk>,
    /// The reference of its own, for a counted chunk (None: borrowed from the pool).
    held: Option<Arc<Chunk>>,
    _pool: std::marker::PhantomData<&'a Chunk>,
}

impl<'a> ChunkRef<'a> {
    #[inline(always)]
    fn counted(chunk: Arc<Chunk>) -> Self {
        ChunkRef {
            chunk: NonNull::from(&*chunk),
            held: Some(chunk),
            _pool: std::marker::PhantomData,
        }
    }

    #[inline(always)]
    fn pooled(chunk: &'a Chunk) -> Self {
        ChunkRef {
            chunk: NonNull::from(chunk),
            held: None,
            _pool: std::marker::PhantomData,
        }
    }

    /// A reference of its own to the chunk.
    fn into_arc(self) -> Arc<Chunk> {
        match self.held {
            Some(c) => c,
            None => {
                let p: *const Chunk = self.chunk.as_ptr();
                // SAFETY: a pooled chunk is borrowed from a live `Arc` (`Weak::as_ptr` of a
                // chunk its pool's registry holds): one more count makes a reference of ours.
                unsafe {
                    Arc::increment_strong_count(p);
                    Arc::from_raw(p)
                }
            }
        }
    }
}

impl std::ops::Deref for ChunkRef<'_> {
    type Target = Chunk;
    #[inline(always)]
    fn deref(&self) -> &Chunk {
        // SAFETY: the pointer is of `held` (an `Arc` this value owns) or of a chunk borrowed
        // for `'a` from the pool that keeps it: alive as long as this value.
        unsafe { self.chunk.as_ref() }
    }
}

/// A buffer slot found from a pointer.
pub struct SlotRef<'a> {
    pub chunk: ChunkRef<'a>,
    pub index: usize,
}

impl SlotRef<'_> {
    pub fn header(&self) -> *mut umq_buf_t {
        self.chunk.header(self.index)
    }
    pub fn data_start(&self) -> *mut u8 {
        self.chunk.data(self.index)
    }
    pub fn data_cap(&self) -> usize {
        self.chunk.data_cap
    }
    fn meta(&self) -> &SlotMeta {
        &self.chunk.meta[self.index]
    }
    pub fn in_use(&self) -> bool {
        self.meta().state.load(Ordering::Acquire) == IN_USE
    }
    pub fn alloc_headroom(&self) -> u16 {
        self.meta().headroom.load(Ordering::Relaxed)
    }
    pub fn alloc_request_size(&self) -> u32 {
        self.meta().request_size.load(Ordering::Relaxed)
    }
}

fn random_u32() -> u32 {
    let mut v = 0u32;
    let n = unsafe { libc::getrandom(&mut v as *mut u32 as *mut _, 4, 0) };
    if n != 4 {
        v = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0x5eed);
    }
    v | 1
}

impl Pool {
    pub fn new(split: bool, small_block: umq_buf_block_size_t, default_headroom: u16) -> Pool {
        let first = 8192usize << small_block.min(BLOCK_SIZE_64K);
        let need = UMQ_MAX_BUF_REQUEST_SIZE as usize + u16::MAX as usize;
        let mut caps = vec![first];
        while *caps.last().unwrap() < need {
            caps.push(caps.last().unwrap() * 2);
        }
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Pool {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            split,
            default_headroom,
            main: Arc::new(Lists::new(&caps, None)),
            cache_limits: caps.iter().enumerate().map(cache_limit).collect(),
            caps,
            registry: RwLock::new(Registry::default()),
            next_token_id: AtomicU32::new(1),
            hooks: AppRwLock::new(Vec::new()),
            access: AccessTable::create(u64::from(random_u32()) << 32 | u64::from(random_u32()))
                .inspect_err(|e| {
                    crate::log_warn!(
                        "umq_init",
                        "no access table ({e}): one-sided operations wait for this process"
                    )
                })
                .ok(),
        }
    }

    /// Each size class of `lists` (the process pool when None) that has memory: the bytes a
    /// buffer of it holds, its slots, and how many of them are free.
    /// (The process pool's free buffers include those its threads' caches hold.)
    pub fn class_stats(&self, lists: Option<&Lists>) -> Vec<ClassStats> {
        let lists = lists.unwrap_or(&self.main);
        let caches = match lists.arena {
            None => cache::caches_of(self.id),
            Some(_) => Vec::new(),
        };
        (0..lists.classes.len())
            .filter_map(|c| {
                let slots = lists.classes[c].slots.load(Ordering::Relaxed);
                let cached: u64 = caches.iter().map(|t| t.held(c)).sum();
                (slots > 0).then(|| ClassStats {
                    data_cap: self.caps[c],
                    slots,
                    free: lists.slots(c).free.len() as u64 + cached,
                })
            })
            .collect()
    }

    /// The caches the threads alive keep of the process pool's classes, those each has used.
    pub fn thread_caches(&self) -> Vec<ThreadCacheStats> {
        let mut all = Vec::new();
        for t in cache::caches_of(self.id) {
            for class in 0..self.caps.len().min(cache::CACHED_CLASSES) {
                let (held, refills) = (t.held(class), t.refills(class));
                if held == 0 && refills == 0 {
                    continue;
                }
                all.push(ThreadCacheStats {
                    tid: t.tid,
                    class,
                    limit: self.cache_limit(&self.main, class) as u64,
                    held,
                    refills,
                    refilled: t.refilled(class),
                });
            }
        }
        all
    }

    /// Tells this pool apart from others.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Whether headers and data are apart (`UMQ_BUF_SPLIT`).
    pub fn is_split(&self) -> bool {
        self.split
    }

    /// The table peers check one-sided operations against: its fd and secret.
    pub fn access_table(&self) -> Option<(i32, u64)> {
        self.access.as_ref().map(|t| (t.fd(), t.secret()))
    }

    /// Adds a hook: it hears of every chunk there is now, then of each that comes or goes.
    pub fn add_chunk_hook(&self, hook: Arc<dyn ChunkHook>) {
        // Under the hooks' write lock: a chunk that grows meanwhile waits for it, and is then
        // told to the hook once, by `grow`.
        let mut hooks = self.hooks.write();
        for span in &self.spans() {
            hook.added(span);
        }
        hooks.push(hook);
    }

    /// Every chunk there is now.
    fn spans(&self) -> Vec<ChunkSpan> {
        let reg = self.registry.read().unwrap_or_else(|p| p.into_inner());
        reg.headers.iter().map(|(_, _, c)| c.span()).collect()
    }

    fn tell_hooks(&self, spans: &[ChunkSpan], added: bool) {
        let hooks = self.hooks.read();
        for hook in hooks.iter() {
            for span in spans {
                if added {
                    hook.added(span);
                } else {
                    hook.removed(span);
                }
            }
        }
    }

    pub fn class_for(&self, bytes: usize) -> Option<usize> {
        self.caps.iter().position(|&c| c >= bytes)
    }

    /// Free lists for a new shared pool, with its own arena.
    pub fn new_shared(&self, secret: u64) -> Result<Arc<Lists>, i32> {
        let arena = Arena::create(secret)?;
        Ok(Arc::new(Lists::new(&self.caps, Some(Arc::new(arena)))))
    }

    /// The queue of a shared pool is gone: its chunks leave the registry (and the arena is
    /// unmapped) once the last of its buffers has been freed, now if none is out.
    pub fn retire(&self, lists: &Arc<Lists>) {
        lists.retired.store(true, Ordering::SeqCst);
        if self.none_out(lists) {
            self.unregister(lists);
        }
    }

    /// Whether no buffer of `lists` is out: every chunk's count is 0. A retired pool's last
    /// free and its retirement each store (the count, the flag) and then load the other's, all
    /// SeqCst: whichever comes second sees both, so one of them unregisters it (a second call
    /// does nothing). The counts, not one count for the pool: a buffer's allocation and free
    /// already write its chunk's, and a second locked operation on each was a tenth of the
    /// locked instructions of a base-API message over shared memory.
    fn none_out(&self, lists: &Arc<Lists>) -> bool {
        let reg = self.registry.read().unwrap_or_else(|p| p.into_inner());
        (reg.headers.iter())
            .filter(|(_, _, c)| Arc::ptr_eq(&c.lists, lists))
            .all(|(_, _, c)| c.out.load(Ordering::SeqCst) == 0)
    }

    fn unregister(&self, lists: &Arc<Lists>) {
        if lists.unregistered.swap(true, Ordering::AcqRel) {
            return;
        }
        let gone: Vec<ChunkSpan> = {
            let mut reg = self.registry.write().unwrap_or_else(|p| p.into_inner());
            let leaving = reg
                .headers
                .iter()
                .filter(|(_, _, c)| Arc::ptr_eq(&c.lists, lists));
            let mut gone = Vec::new();
            for (_, _, c) in leaving {
                if let (Some(t), Some(at)) = (&self.access, c.access) {
                    t.withdraw(at);
                }
                gone.push(c.span());
            }
            reg.headers
                .retain(|(_, _, c)| !Arc::ptr_eq(&c.lists, lists));
            reg.data.retain(|(_, _, c)| !Arc::ptr_eq(&c.lists, lists));
            gone
        };
        for class in 0..lists.classes.len() {
            lists.slots(class).releasable.clear();
        }
        self.tell_hooks(&gone, false);
    }

    /// Memory for a chunk: zeroed heap pages, or the next pages of the arena (zero when new).
    fn chunk_memory(lists: &Lists, bytes: usize) -> Result<(*mut u8, Option<Layout>), i32> {
        if let Some(arena) = &lists.arena {
            return Ok((arena.extend(bytes)?, None));
        }
        let layout =
            Layout::from_size_align(bytes, 4096).map_err(|_| -crate::abi::errno::UMQ_ERR_ENOMEM)?;
        let memory = unsafe { std::alloc::alloc_zeroed(layout) };
        if memory.is_null() {
            return Err(-crate::abi::errno::UMQ_ERR_ENOMEM);
        }
        Ok((memory, Some(layout)))
    }

    fn grow(&self, lists: &Arc<Lists>, class: usize) -> Result<(), i32> {
        let data_cap = self.caps[class];
        let slot = HEADER_SIZE + data_cap;
        let made = lists.classes[class].chunks.fetch_add(1, Ordering::Relaxed);
        let target = match lists.arena {
            Some(_) => SHARED_FIRST_CHUNK
                .checked_shl(made.min(16))
                .map_or(CHUNK_TARGET, |b| b.min(CHUNK_TARGET)),
            None => CHUNK_TARGET,
        };
        let count = (target / slot).clamp(1, MAX_SLOTS_PER_CHUNK);
        lists.classes[class]
            .slots
            .fetch_add(count as u64, Ordering::Relaxed);
        let (memory, heap) = Self::chunk_memory(lists, slot * count)?;
        let base = memory as usize;
        let (hdr_base, hdr_stride, data_base, data_stride) = if self.split {
            (base, HEADER_SIZE, base + HEADER_SIZE * count, data_cap)
        } else {
            (base, slot, base + HEADER_SIZE, slot)
        };
        let token_id = self.next_token_id.fetch_add(1, Ordering::Relaxed) & 0xf_ffff;
        let token_value = random_u32();
        let access = self.access.as_ref().and_then(|t| {
            t.publish(&ChunkLayout {
                token_id,
                token_value,
                data_base,
                data_stride,
                data_cap,
                count,
            })
        });
        let chunk = Arc::new(Chunk {
            pool: self.id,
            class,
            count,
            data_cap,
            hdr_base,
            hdr_stride: Stride::new(hdr_stride),
            data_base,
            data_stride,
            token_id,
            token_value,
            access,
            memory,
            heap,
            lists: lists.clone(),
            ordinal: made,
            out: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(0),
            meta: (0..count)
                .map(|_| SlotMeta {
                    state: AtomicU8::new(FREE),
                    request_size: AtomicU32::new(0),
                    headroom: AtomicU16::new(0),
                })
                .collect(),
        });
        {
            // The hooks' lock first (as `add_chunk_hook` takes them): a hook being added
            // either finds this chunk in the registry or hears of it here, never both.
            let hooks = self.hooks.read();
            {
                let mut reg = self.registry.write().unwrap_or_else(|p| p.into_inner());
                let hdr_end = chunk.headers_end();
                let data_end = data_base + data_stride * (count - 1) + data_cap;
                insert_sorted(&mut reg.headers, (hdr_base, hdr_end, chunk.clone()));
                insert_sorted(&mut reg.data, (data_base, data_end, chunk.clone()));
            }
            for hook in hooks.iter() {
                hook.added(&chunk.span());
            }
        }
        let mut slots = lists.slots(class);
        slots.free.extend(
            (0..count)
                .rev()
                .map(|i| NonNull::new(chunk.header(i)).unwrap()),
        );
        if lists.arena.is_some() && made > 0 {
            // Idle from birth: a chunk grown for a batch that the previous ones' slots covered
            // in the end is never handed out, and goes back like any other.
            chunk.idle_since_ms.store(clock_ms(), Ordering::Relaxed);
            slots.releasable.push(chunk);
            drop(slots);
            lists.note_idle();
        }
        Ok(())
    }

    /// Takes `n` free buffers of `class`, the most recently freed first, linked through their
    /// `qbuf_next` in that order (their headers are ours once off the free list): no list
    /// of them to allocate for a call that usually takes one. The process pool's come from
    /// this thread's cache (`buf::cache`), which the free list refills.
    fn take(&self, lists: &Arc<Lists>, class: usize, n: usize) -> Result<*mut umq_buf_t, i32> {
        let limit = self.cache_limit(lists, class);
        if n > limit / 2 {
            return self.take_free_linked(lists, class, n);
        }
        if let Some(head) = cache::take(self.id, class, n) {
            return Ok(head);
        }
        let mut more = self.take_free(lists, class, n, limit / 2)?;
        let mine = more.split_off(more.len() - n);
        if let Err(mut back) = cache::stock(self.id, lists, class, more) {
            lists.slots(class).free.append(&mut back);
        }
        Ok(cache::link(mine.into_iter()))
    }

    /// How many free buffers of `class` of `lists` a thread keeps in its cache (0: none, as
    /// for every class of a shared pool).
    fn cache_limit(&self, lists: &Lists, class: usize) -> usize {
        match lists.arena {
            None => self.cache_limits[class],
            Some(_) => 0,
        }
    }

    /// `n` buffers off the free list of `class`, linked as `take` links them, growing the pool
    /// when it runs short. Linked under the list's lock straight off its end: a shared pool's
    /// every allocation comes here, and a list of them to allocate and free was a third of
    /// `umq_buf_alloc`.
    fn take_free_linked(
        &self,
        lists: &Arc<Lists>,
        class: usize,
        n: usize,
    ) -> Result<*mut umq_buf_t, i32> {
        loop {
            {
                let mut slots = lists.slots(class);
                if let Some(at) = slots.free.len().checked_sub(n) {
                    return Ok(cache::link(slots.free.drain(at..)));
                }
            }
            self.grow(lists, class)?;
        }
    }

    /// `n` buffers off the free list of `class`, growing the pool when it runs short, and up
    /// to `extra` more if they are free already; the most recently freed last.
    fn take_free(
        &self,
        lists: &Arc<Lists>,
        class: usize,
        n: usize,
        extra: usize,
    ) -> Result<Vec<NonNull<umq_buf_t>>, i32> {
        loop {
            {
                let mut slots = lists.slots(class);
                if slots.free.len() >= n {
                    let at = slots.free.len().saturating_sub(n + extra);
                    return Ok(slots.free.split_off(at));
                }
            }
            self.grow(lists, class)?;
        }
    }

    /// Allocates `num` buffers, each with room for `request_size` bytes after `headroom`, chained
    /// by `qbuf_next`.
    pub fn alloc(
        &self,
        request_size: u32,
        num: u32,
        headroom: u16,
        umqh: u64,
    ) -> Result<*mut umq_buf_t, i32> {
        self.alloc_in(&self.main, request_size, num, headroom, umqh)
    }

    /// `alloc` from a given set of free lists (a queue's shared pool).
    pub fn alloc_in(
        &self,
        lists: &Arc<Lists>,
        request_size: u32,
        num: u32,
        headroom: u16,
        umqh: u64,
    ) -> Result<*mut umq_buf_t, i32> {
        let class = self
            .class_for(headroom as usize + request_size as usize)
            .ok_or(-crate::abi::errno::UMQ_ERR_EINVAL)?;
        let head = self.take(lists, class, num as usize)?;
        let mut b = head;
        let mut last: Option<SlotRef> = None;
        while !b.is_null() {
            // Read before the header is written over.
            let next = unsafe { (*b).qbuf_next };
            let slot = self.slot_near(last.take(), b as usize).expect("pool slot");
            let meta = slot.meta();
            meta.request_size.store(request_size, Ordering::Relaxed);
            meta.headroom.store(headroom, Ordering::Relaxed);
            if let (Some(t), Some(at)) = (&self.access, slot.chunk.access) {
                // A peer's copy that pinned the slot before its last free ends first.
                t.wait_unpinned(at, slot.index);
                t.set_live(at, slot.index);
            }
            meta.state.store(IN_USE, Ordering::Release);
            // Only a shared pool's chunks go idle (and every thread's buffers share the
            // process pool's: a count there would be a line they all write).
            if lists.arena.is_some() && slot.chunk.out.fetch_add(1, Ordering::Relaxed) == 0 {
                slot.chunk.idle_since_ms.store(0, Ordering::Relaxed);
            }
            unsafe { init_header(&slot, b, request_size, headroom, umqh, next) };
            last = Some(slot);
            b = next;
        }
        Ok(head)
    }

    /// `slot_of_header`, asking the chunk of `near` first: buffers taken together mostly
    /// share a chunk, and that chunk's answer needs neither the registry's lock and search nor
    /// a new reference to the chunk.
    fn slot_near<'a>(&'a self, near: Option<SlotRef<'a>>, addr: usize) -> Option<SlotRef<'a>> {
        if let Some(SlotRef { chunk, .. }) = near
            && let Some(index) = chunk.slot_of_header(addr)
        {
            return Some(SlotRef { chunk, index });
        }
        self.slot_of_header(addr)
    }

    /// The slot whose header is at `addr`: asked first of the chunks this thread found last
    /// (`RECENT`), then of the registry.
    #[inline]
    pub fn slot_of_header(&self, addr: usize) -> Option<SlotRef<'_>> {
        match self.recent_slot_of_header(addr) {
            Some(slot) => Some(slot),
            None => self.registry_slot_of_header(addr),
        }
    }

    /// `slot_of_header` through the registry, remembering the chunk found in `RECENT`.
    #[cold]
    #[inline(never)]
    fn registry_slot_of_header(&self, addr: usize) -> Option<SlotRef<'_>> {
        let chunk = find(
            &self
                .registry
                .read()
                .unwrap_or_else(|p| p.into_inner())
                .headers,
            addr,
        )?;
        let index = chunk.slot_of_header(addr)?;
        remember(&chunk);
        Some(SlotRef {
            chunk: ChunkRef::counted(chunk),
            index,
        })
    }

    /// `slot_of_header` through `RECENT`: None when no chunk remembered there holds `addr`
    /// (or the one that does has left, or is another pool's), and the registry must answer.
    #[inline]
    fn recent_slot_of_header(&self, addr: usize) -> Option<SlotRef<'_>> {
        RECENT
            .try_with(|recent| {
                let recent = recent.borrow();
                let seen = recent.iter().find(|r| r.holds(addr))?;
                if seen.pool != self.id {
                    return None;
                }
                let chunk = match seen.main {
                    // SAFETY: a chunk of this pool's own lists stays in its registry, which
                    // holds a reference of it, until the pool drops; the slot borrows the pool.
                    true => ChunkRef::pooled(unsafe { &*seen.chunk.as_ptr() }),
                    false => {
                        // A chunk in the registry is the only one at its addresses; once its
                        // shared pool is unregistered it is in no registry, as must be said.
                        let chunk = seen.chunk.upgrade()?;
                        if chunk.lists.unregistered.load(Ordering::Acquire) {
                            return None;
                        }
                        ChunkRef::counted(chunk)
                    }
                };
                let index = chunk.slot_of_header(addr)?;
                Some(SlotRef { chunk, index })
            })
            .ok()
            .flatten()
    }

    /// A hold on the chunk whose buffer holds the `len` bytes at `data` in its data area (None:
    /// they are not all in one buffer's data area of this pool's).
    pub fn lease(&self, data: *const u8, len: usize) -> Option<Lease> {
        let slot = self.slot_of_data(data as usize)?;
        let chunk = &slot.chunk;
        let in_area = (data as usize - chunk.data_base) % chunk.data_stride;
        (in_area + len <= chunk.data_cap).then(|| Lease {
            _chunk: slot.chunk.into_arc(),
        })
    }

    /// The most bytes any buffer of this pool holds: its largest class's. No receive buffer
    /// the application posts and no memory it exposes for WRITEs is longer.
    pub fn largest_buffer(&self) -> u64 {
        self.caps.last().map_or(0, |&c| c as u64)
    }

    pub fn slot_of_data(&self, addr: usize) -> Option<SlotRef<'_>> {
        let chunk = find(
            &self.registry.read().unwrap_or_else(|p| p.into_inner()).data,
            addr,
        )?;
        let index = chunk.slot_of_data(addr)?;
        Some(SlotRef {
            chunk: ChunkRef::counted(chunk),
            index,
        })
    }

    /// Returns one buffer to its free list. Refuses (and reports) foreign pointers and double frees.
    pub fn free_one(&self, buf: *mut umq_buf_t) -> Result<(), &'static str> {
        let slot = self
            .slot_of_header(buf as usize)
            .ok_or("not a buffer of this library's pools")?;
        self.free_slot(slot, buf)
    }

    /// `free_one` of a buffer whose slot the caller has looked up already.
    pub fn free_slot(&self, slot: SlotRef, buf: *mut umq_buf_t) -> Result<(), &'static str> {
        let meta = slot.meta();
        if meta
            .state
            .compare_exchange(IN_USE, FREE, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err("buffer is already free (double free)");
        }
        if let (Some(t), Some(at)) = (&self.access, slot.chunk.access) {
            t.clear_live(at, slot.index);
        }
        let lists = &slot.chunk.lists;
        let buf = NonNull::new(buf).ok_or("a null buffer")?;
        if lists.arena.is_none() {
            self.free_to_process_pool(lists, slot.chunk.class, buf);
            return Ok(());
        }
        lists.slots(slot.chunk.class).free.push(buf);
        let chunk = &slot.chunk;
        let went_idle = chunk.out.fetch_sub(1, Ordering::SeqCst) == 1;
        if went_idle && chunk.ordinal > 0 {
            chunk.idle_since_ms.store(clock_ms(), Ordering::Relaxed);
            lists.note_idle();
        }
        if went_idle && lists.retired.load(Ordering::SeqCst) && self.none_out(lists) {
            self.unregister(lists);
        }
        Ok(())
    }

    /// A free buffer of the process pool to this thread's cache of its class, or what the cache
    /// cannot keep to the class's free list.
    fn free_to_process_pool(&self, lists: &Arc<Lists>, class: usize, buf: NonNull<umq_buf_t>) {
        let limit = self.cache_limits[class];
        if limit == 0 {
            lists.slots(class).free.push(buf);
            return;
        }
        let mut spill = cache::put(self.id, lists, class, buf, limit);
        if !spill.is_empty() {
            lists.slots(class).free.append(&mut spill);
        }
    }

    /// Releases the chunks of a shared pool that have been idle for `RELEASE_AFTER_MS`; returns
    /// how many. Cheap when none went idle: a queue's housekeeping calls it every tick.
    pub fn release_idle(&self, lists: &Lists) -> usize {
        self.release_idle_at(lists, clock_ms())
    }

    /// `release_idle` as if the pool clock read `now` (ms).
    fn release_idle_at(&self, lists: &Lists, now: u64) -> usize {
        if lists.arena.is_none() || !lists.idle_hint.swap(false, Ordering::Acquire) {
            return 0;
        }
        let mut released = 0;
        let mut waiting = false;
        for class in 0..lists.classes.len() {
            let candidates: Vec<Arc<Chunk>> = lists.slots(class).releasable.clone();
            for chunk in candidates {
                let since = chunk.idle_since_ms.load(Ordering::Relaxed);
                if since == 0 {
                    continue;
                }
                if now.saturating_sub(since) < RELEASE_AFTER_MS {
                    waiting = true;
                } else if self.pinned(&chunk) {
                    continue;
                } else if Self::release(lists, &chunk) {
                    released += 1;
                }
            }
        }
        if waiting {
            lists.idle_hint.store(true, Ordering::Release);
        }
        released
    }

    /// Whether a hook keeps `chunk`'s pages pinned (a device registration of them).
    fn pinned(&self, chunk: &Chunk) -> bool {
        let span = chunk.span();
        self.hooks.read().iter().any(|h| h.pins(&span))
    }

    /// Drops an idle chunk's pages. Its slots leave the free list meanwhile, so no one can take
    /// one while the hole is punched; if they are not all there, a buffer is out after all
    /// and nothing happens.
    fn release(lists: &Lists, chunk: &Arc<Chunk>) -> bool {
        let held = {
            let mut slots = lists.slots(chunk.class);
            let before = slots.free.len();
            let mut mine = Vec::with_capacity(chunk.count);
            slots.free.retain(|b| {
                let is_mine = chunk.slot_of_header(b.as_ptr() as usize).is_some();
                if is_mine {
                    mine.push(*b);
                }
                !is_mine
            });
            debug_assert_eq!(before - slots.free.len(), mine.len());
            if mine.len() != chunk.count {
                slots.free.extend(mine);
                return false;
            }
            mine
        };
        let arena = lists.arena.as_ref().expect("a shared pool has an arena");
        let span = chunk.span();
        let done = arena.release(span.base as *const u8, span.len);
        chunk.idle_since_ms.store(0, Ordering::Relaxed);
        lists.slots(chunk.class).free.extend(held);
        done
    }

    /// Is `[addr, addr + len)` inside one in-use buffer's data area of a chunk with this token?
    pub fn check_remote(&self, addr: u64, len: u32, token_id: u32, token_value: u32) -> bool {
        let Some(slot) = self.slot_of_data(addr as usize) else {
            return false;
        };
        let start = slot.data_start() as u64;
        slot.in_use()
            && slot.chunk.token_id == token_id
            && slot.chunk.token_value == token_value
            && addr
                .checked_add(len as u64)
                .is_some_and(|end| end <= start + slot.data_cap() as u64)
    }
}

/// A pool that goes tells its hooks that every chunk leaves with it: a provider that exposed
/// them to peers must take them back before the memory is freed. Then it lets go of the chunks
/// their lists hold, so every shared pool goes with it, with the buffers the application still
/// held (`umq_uninit` makes them invalid).
impl Drop for Pool {
    fn drop(&mut self) {
        if !self.hooks.read().is_empty() {
            self.tell_hooks(&self.spans(), false);
        }
        let reg = self.registry.get_mut().unwrap_or_else(|p| p.into_inner());
        for (_, _, chunk) in &reg.headers {
            for class in 0..chunk.lists.classes.len() {
                chunk.lists.slots(class).releasable.clear();
            }
        }
    }
}

/// How many free buffers of class `class` (of `cap` bytes) a thread keeps of the process pool:
/// up to `cache::CACHE_BYTES` of them, and none where fewer than two fit.
fn cache_limit((class, &cap): (usize, &usize)) -> usize {
    let fit = (cache::CACHE_BYTES / cap).min(cache::CACHE_MAX);
    match class < cache::CACHED_CLASSES && fit >= 2 {
        true => fit,
        false => 0,
    }
}

/// Milliseconds on a monotonic clock (never 0: 0 means "not idle").
fn clock_ms() -> u64 {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_millis() as u64
        + 1
}

fn insert_sorted(v: &mut Vec<(usize, usize, Arc<Chunk>)>, item: (usize, usize, Arc<Chunk>)) {
    let at = v.partition_point(|(s, _, _)| *s < item.0);
    v.insert(at, item);
}

/// Writes a fresh header: sizes, data pointer, token; everything else zero.
unsafe fn init_header(
    slot: &SlotRef,
    b: *mut umq_buf_t,
    request_size: u32,
    headroom: u16,
    umqh: u64,
    next: *mut umq_buf_t,
) {
    unsafe {
        std::ptr::write_bytes(b as *mut u8, 0, HEADER_SIZE);
        let h = &mut *b;
        h.qbuf_next = next;
        h.umqh = umqh;
        h.headroom_size = headroom;
        h.buf_size = (slot.data_cap() - headroom as usize) as u32;
        h.data_size = request_size;
        h.total_data_size = request_size;
        h.buf_data = slot.data_start().add(headroom as usize) as *mut _;
        h.set_first_fragment(true);
        h.set_token(slot.chunk.token_id, 0);
        h.token_value = slot.chunk.token_value;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    #[test]
    fn slots_are_reused_and_double_free_is_refused() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let a = pool.alloc(100, 2, 0, 0).unwrap();
        let b = unsafe { (*a).qbuf_next };
        assert_ne!(a, b);
        assert_eq!(pool.free_one(a), Ok(()));
        assert!(pool.free_one(a).is_err());
        let c = pool.alloc(100, 1, 0, 0).unwrap();
        assert_eq!(c, a, "the freed slot is reused");
        let stack = 0u64;
        assert!(
            pool.free_one(&stack as *const u64 as *mut umq_buf_t)
                .is_err()
        );
        assert!(
            pool.free_one(unsafe { (b as *mut u8).add(8) } as *mut umq_buf_t)
                .is_err(),
            "inside a header, not at its start"
        );
    }

    /// A free of a process-pool buffer goes to the thread's cache and the thread's next
    /// allocation takes it back from there, the class's free list untouched; what the cache
    /// holds still counts as free.
    #[test]
    fn a_thread_reuses_the_buffers_it_freed_through_its_own_cache() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let a = pool.alloc(100, 1, 0, 0).unwrap();
        let on_list = pool.main.slots(0).free.len();
        let slots = pool.class_stats(None)[0].slots;
        assert_eq!(pool.class_stats(None)[0].free, slots - 1);
        pool.free_one(a).unwrap();
        assert_eq!(
            pool.main.slots(0).free.len(),
            on_list,
            "the free went to the cache"
        );
        assert_eq!(pool.class_stats(None)[0].free, slots);
        let b = pool.alloc(100, 1, 0, 0).unwrap();
        assert_eq!(b, a, "the next allocation took it back from there");
        assert_eq!(pool.main.slots(0).free.len(), on_list);
        assert_eq!(pool.free_one(b), Ok(()));
        assert!(pool.free_one(b).is_err(), "a double free is still refused");
    }

    /// A thread's cache holds at most its limit: buffers another thread allocated and this
    /// one frees go back to the free list past it, and all of them once the thread ends.
    #[test]
    fn a_thread_gives_back_what_its_cache_cannot_hold_and_all_of_it_as_it_ends() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let limit = pool.cache_limit(&pool.main, 0);
        let bufs: Vec<usize> = (0..4)
            .flat_map(|_| crate::buf::iter(pool.alloc(100, 64, 0, 0).unwrap()))
            .map(|b| b as usize)
            .collect();
        let slots = pool.class_stats(None)[0].slots as usize;
        std::thread::scope(|s| {
            s.spawn(|| {
                let before = pool.main.slots(0).free.len();
                for &b in &bufs {
                    pool.free_one(b as *mut umq_buf_t).unwrap();
                }
                let kept = before + bufs.len() - pool.main.slots(0).free.len();
                assert!(kept <= limit, "the cache kept {kept} of {limit}");
                assert_eq!(pool.class_stats(None)[0].free as usize, slots);
            })
            // Joined, not only waited for: a thread's caches go back as it exits, after
            // its closure returned.
            .join()
            .unwrap();
        });
        assert_eq!(
            pool.main.slots(0).free.len() + cache_of_this_thread(&pool),
            slots,
            "the ended thread's cache is back on the free list"
        );
    }

    fn cache_of_this_thread(pool: &Pool) -> usize {
        let tid = unsafe { libc::gettid() } as u64;
        cache::caches_of(pool.id)
            .iter()
            .filter(|c| c.tid == tid)
            .map(|c| c.held(0) as usize)
            .sum()
    }

    /// Threads that allocate and free at once, through their caches and the free list they
    /// trade with, never hold the same buffer: each writes its mark into the buffers it holds
    /// and finds it there when it frees them.
    #[test]
    fn threads_allocating_and_freeing_at_once_never_hold_the_same_buffer() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        std::thread::scope(|s| {
            for mark in 1..=3u8 {
                let pool = &pool;
                s.spawn(move || {
                    let mut held: Vec<*mut umq_buf_t> = Vec::new();
                    for round in 0..3000usize {
                        if held.len() < 100 && round % 3 != 2 {
                            let n = 1 + (round % 5) as u32;
                            for b in crate::buf::iter(pool.alloc(100, n, 0, 0).unwrap()) {
                                unsafe {
                                    std::ptr::write_bytes((*b).buf_data as *mut u8, mark, 100)
                                };
                                held.push(b);
                            }
                        } else {
                            for b in held.drain(..held.len().min(7)) {
                                let data = unsafe {
                                    std::slice::from_raw_parts((*b).buf_data as *const u8, 100)
                                };
                                assert!(
                                    data.iter().all(|&x| x == mark),
                                    "another thread wrote into a buffer of ours"
                                );
                                pool.free_one(b).unwrap();
                            }
                        }
                    }
                    for b in held {
                        pool.free_one(b).unwrap();
                    }
                });
            }
        });
        let c = pool.class_stats(None)[0];
        assert_eq!(c.free, c.slots, "every buffer is free again");
    }

    /// A thread's cache of a pool that went (`umq_uninit`) is dropped unread: the next pool's
    /// allocation gets that pool's buffers.
    #[test]
    fn a_cache_of_a_pool_that_went_is_forgotten() {
        let old = Pool::new(false, BLOCK_SIZE_8K, 0);
        let a = old.alloc(100, 4, 0, 0).unwrap();
        old.free_one(a).unwrap();
        drop(old);
        let new = Pool::new(false, BLOCK_SIZE_8K, 0);
        let b = new.alloc(100, 1, 0, 0).unwrap();
        assert!(
            new.slot_of_header(b as usize).is_some(),
            "a buffer of the new pool"
        );
        assert_eq!(
            new.class_stats(None)[0].free,
            new.class_stats(None)[0].slots - 1
        );
    }

    #[test]
    fn split_mode_keeps_data_apart_and_maps_data_back_to_headers() {
        let pool = Pool::new(true, BLOCK_SIZE_8K, 16);
        let a = pool.alloc(1000, 1, 16, 0).unwrap();
        let data = unsafe { (*a).buf_data } as usize;
        assert_ne!(
            data,
            a as usize + HEADER_SIZE + 16,
            "split mode: data is not behind the header"
        );
        assert_eq!(pool.slot_of_data(data + 500).unwrap().header(), a);
        assert_eq!(unsafe { (*a).buf_size }, 8192 - 16);
    }

    #[test]
    fn remote_access_needs_the_right_token_and_bounds() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let a = pool.alloc(64, 1, 0, 0).unwrap();
        let (addr, id, val) = unsafe { ((*a).buf_data as u64, (*a).token_id(), (*a).token_value) };
        assert!(pool.check_remote(addr, 64, id, val));
        assert!(!pool.check_remote(addr, 64, id, val ^ 2));
        assert!(!pool.check_remote(addr, 8193, id, val));
        pool.free_one(a).unwrap();
        assert!(
            !pool.check_remote(addr, 64, id, val),
            "a freed buffer is no longer exposed"
        );
    }

    /// The access table agrees with `check_remote`: the same buffers, tokens and bounds.
    #[test]
    fn the_access_table_exposes_what_check_remote_allows() {
        use crate::buf::access::{PeerAccess, Reach};
        let pool = Pool::new(true, BLOCK_SIZE_8K, 16);
        let (fd, secret) = pool.access_table().unwrap();
        let peer = PeerAccess::open(std::process::id(), fd as u32, secret).unwrap();
        let a = pool.alloc(100, 3, 0, 0).unwrap();
        for b in crate::buf::iter(a) {
            let (addr, id, val, size) = unsafe {
                let b = &*b;
                (
                    b.buf_data as u64,
                    b.token_id(),
                    b.token_value,
                    b.buf_size as u64,
                )
            };
            for (at, len, value) in [
                (addr, size, val),
                (addr, size + 1, val),
                (addr - 16, 16, val),
                (addr, 8, val ^ 4),
            ] {
                let local = pool.check_remote(at, len as u32, id, value);
                let remote = matches!(peer.reach(at, len, id, value), Reach::Pinned(_));
                assert_eq!(local, remote, "{at:#x} + {len}");
            }
        }
        let (addr, id, val) = unsafe { ((*a).buf_data as u64, (*a).token_id(), (*a).token_value) };
        pool.free_one(a).unwrap();
        assert!(
            matches!(peer.reach(addr, 8, id, val), Reach::Refused),
            "freed"
        );
    }

    /// A peer's copy that pinned a buffer before its free ends before the slot's next owner
    /// gets it: the next owner's bytes are never overwritten by it (revoke before reuse), and
    /// no copy starts once the free returned. The writer stands for a peer process: it pins
    /// through the table and writes with the kernel's cross-memory copy, as
    /// `transport::shm::direct` does, after a varying delay (a slow copy).
    #[test]
    fn a_one_sided_write_racing_a_free_never_reaches_the_next_owner() {
        use crate::buf::access::{PeerAccess, Reach};
        use std::sync::atomic::AtomicBool;
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let (fd, secret) = pool.access_table().unwrap();
        let peer = PeerAccess::open(std::process::id(), fd as u32, secret).unwrap();
        const LEN: usize = 4096;
        for round in 0..300u32 {
            let b = pool.alloc(LEN as u32, 1, 0, 0).unwrap();
            let (addr, id, val) =
                unsafe { ((*b).buf_data as u64, (*b).token_id(), (*b).token_value) };
            let pinned = AtomicBool::new(false);
            std::thread::scope(|s| {
                let writer = s.spawn(|| {
                    let Reach::Pinned(pin) = peer.reach(addr, LEN as u64, id, val) else {
                        panic!("a live buffer is within reach");
                    };
                    pinned.store(true, Ordering::Release);
                    for _ in 0..(round % 30) * 100 {
                        std::hint::spin_loop();
                    }
                    let junk = [0xeeu8; LEN];
                    let local = libc::iovec {
                        iov_base: junk.as_ptr() as *mut libc::c_void,
                        iov_len: LEN,
                    };
                    let remote = libc::iovec {
                        iov_base: pin.addr as *mut libc::c_void,
                        iov_len: LEN,
                    };
                    let pid = std::process::id() as i32;
                    let done = unsafe { libc::process_vm_writev(pid, &local, 1, &remote, 1, 0) };
                    assert_eq!(done, LEN as isize);
                });
                while !pinned.load(Ordering::Acquire) {
                    std::hint::spin_loop();
                }
                pool.free_one(b).unwrap();
                let after_free = peer.reach(addr, LEN as u64, id, val);
                assert!(
                    matches!(after_free, Reach::Refused),
                    "no copy starts after the free"
                );
                let next = pool.alloc(LEN as u32, 1, 0, 0).unwrap();
                assert_eq!(next, b, "the freed slot is the next one handed out");
                unsafe { std::ptr::write_bytes((*next).buf_data as *mut u8, 0x22, LEN) };
                writer.join().unwrap();
                let now = unsafe { std::slice::from_raw_parts((*next).buf_data as *const u8, LEN) };
                assert!(
                    now.iter().all(|&x| x == 0x22),
                    "round {round}: a stale write reached the next owner"
                );
                pool.free_one(next).unwrap();
            });
        }
    }

    /// A queue that takes a few buffers from its shared pool backs a small chunk, not 2 MiB;
    /// the chunks double as it takes more.
    #[test]
    fn a_shared_pool_starts_with_a_small_chunk_and_doubles() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(5).unwrap();
        let arena = shared.arena().unwrap();
        let first = pool.alloc_in(&shared, 100, 1, 0, 1).unwrap();
        let backed = arena.backed();
        assert!(
            backed > 0 && backed <= SHARED_FIRST_CHUNK,
            "first chunk: {backed} B"
        );
        // The rest of the first chunk's slots come from it; the next buffer makes a second
        // chunk, twice as big.
        let in_first = (SHARED_FIRST_CHUNK / (HEADER_SIZE + 8192)) as u32;
        let more = pool.alloc_in(&shared, 100, in_first - 1, 0, 1).unwrap();
        assert_eq!(arena.backed(), backed);
        let next = pool.alloc_in(&shared, 100, 1, 0, 1).unwrap();
        let grown = arena.backed() - backed;
        assert!(
            grown > backed && grown <= 2 * SHARED_FIRST_CHUNK,
            "second chunk: {grown} B"
        );
        for head in [first, more, next] {
            for b in crate::buf::iter(head).collect::<Vec<_>>() {
                pool.free_one(b).unwrap();
            }
        }
        pool.retire(&shared);
    }

    /// After a burst, the chunks the burst grew go back to the system once idle for
    /// `RELEASE_AFTER_MS`; the first stays, as does a chunk with a buffer still out. The
    /// released slots work as before.
    #[test]
    fn idle_chunks_of_a_shared_pool_are_released_and_reusable() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(9).unwrap();
        let told = Arc::new(AtomicUsize::new(0));
        let counter = told.clone();
        shared.when_idle(Box::new(move || {
            counter.fetch_add(1, Ordering::Relaxed);
        }));
        let arena = shared.arena().unwrap().clone();
        let slot = HEADER_SIZE + 8192;
        let per_chunk: Vec<usize> = (0..4).map(|k| (SHARED_FIRST_CHUNK << k) / slot).collect();
        let burst: usize = per_chunk.iter().sum();
        let head = pool.alloc_in(&shared, 8000, burst as u32, 0, 1).unwrap();
        let bufs: Vec<_> = crate::buf::iter(head).collect();
        for &b in &bufs {
            unsafe { std::ptr::write_bytes((*b).buf_data as *mut u8, 0x5a, 8000) };
        }
        let backed = arena.backed();
        let resident = arena.resident();
        assert!(
            resident + 4096 >= backed - super::super::arena::HEADER_BYTES,
            "{resident} of {backed}"
        );
        // Keep one buffer of the last chunk out; free the rest.
        let kept = *bufs.iter().max().unwrap();
        for &b in bufs.iter().filter(|&&b| b != kept) {
            pool.free_one(b).unwrap();
        }
        assert_eq!(
            told.load(Ordering::Relaxed),
            1,
            "the owner hears once that chunks went idle"
        );
        let t0 = clock_ms();
        assert_eq!(
            pool.release_idle_at(&shared, t0),
            0,
            "not idle long enough yet"
        );
        assert!(shared.idle_waiting(), "still waiting for their time");
        assert_eq!(arena.resident(), resident);
        assert_eq!(
            pool.release_idle_at(&shared, t0 + RELEASE_AFTER_MS),
            2,
            "the second and third chunks go; the first stays, the fourth has a buffer out"
        );
        let chunk_bytes = |k: usize| per_chunk[k] * slot;
        let gone = resident - arena.resident();
        assert!(
            gone >= chunk_bytes(1) + chunk_bytes(2) - 8192,
            "released {gone} B"
        );
        assert_eq!(arena.backed(), backed, "the address range stays");
        assert_eq!(
            pool.release_idle_at(&shared, t0 + 10 * RELEASE_AFTER_MS),
            0,
            "once"
        );
        // Every slot is still there: the same burst again grows nothing, and released memory
        // reads zero.
        let again = pool
            .alloc_in(&shared, 8000, burst as u32 - 1, 0, 1)
            .unwrap();
        let again: Vec<_> = crate::buf::iter(again).collect();
        assert_eq!(arena.backed(), backed, "no new chunk");
        let zeroed = again
            .iter()
            .filter(|&&b| unsafe { *((*b).buf_data as *const u8).add(100) } == 0)
            .count();
        assert_eq!(
            zeroed,
            per_chunk[1] + per_chunk[2],
            "the released slots read zero"
        );
        for &b in again.iter().chain([&kept]) {
            pool.free_one(b).unwrap();
        }
        pool.retire(&shared);
    }

    /// Pins the chunks that start at these addresses, as a device registration would.
    struct Pinner(Mutex<Vec<usize>>);

    impl ChunkHook for Pinner {
        fn added(&self, _: &ChunkSpan) {}
        fn removed(&self, _: &ChunkSpan) {}
        fn pins(&self, chunk: &ChunkSpan) -> bool {
            self.0.lock().unwrap().contains(&chunk.base)
        }
    }

    #[test]
    fn an_idle_chunk_a_hook_pins_keeps_its_pages_and_the_others_go() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let pinner = Arc::new(Pinner(Mutex::new(Vec::new())));
        pool.add_chunk_hook(pinner.clone());
        let shared = pool.new_shared(4).unwrap();
        let slot = HEADER_SIZE + 8192;
        let per_chunk: Vec<usize> = (0..3).map(|k| (SHARED_FIRST_CHUNK << k) / slot).collect();
        let burst: usize = per_chunk.iter().sum();
        let head = pool.alloc_in(&shared, 8000, burst as u32, 0, 1).unwrap();
        let bufs: Vec<_> = crate::buf::iter(head).collect();
        let mut bases: Vec<usize> = pool
            .spans()
            .iter()
            .filter(|c| c.shared)
            .map(|c| c.base)
            .collect();
        bases.sort();
        assert_eq!(bases.len(), 3);
        pinner.0.lock().unwrap().push(bases[1]);
        for &b in &bufs {
            unsafe { std::ptr::write_bytes((*b).buf_data as *mut u8, 0x5a, 8000) };
            pool.free_one(b).unwrap();
        }
        let arena = shared.arena().unwrap().clone();
        let resident = arena.resident();
        let t0 = clock_ms();
        assert_eq!(
            pool.release_idle_at(&shared, t0 + RELEASE_AFTER_MS),
            1,
            "the third chunk goes; the first stays, the second is pinned"
        );
        let gone = resident - arena.resident();
        assert!(gone >= per_chunk[2] * slot - 8192, "released {gone} B");
        assert!(
            gone < (per_chunk[1] + per_chunk[2]) * slot,
            "released {gone} B"
        );
        let second = bases[1] + HEADER_SIZE + 100;
        assert_eq!(
            unsafe { *(second as *const u8) },
            0x5a,
            "pinned pages keep their bytes"
        );
        pool.retire(&shared);
    }

    #[test]
    fn a_retired_shared_pool_leaves_the_registry_with_its_last_buffer() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(3).unwrap();
        let a = pool.alloc_in(&shared, 100, 2, 0, 7).unwrap();
        let b = unsafe { (*a).qbuf_next };
        let arena = shared.arena().unwrap();
        assert!(
            arena
                .offset_of(unsafe { (*a).buf_data } as *const u8, 100)
                .is_some(),
            "the buffer lives in the arena"
        );
        let (addr, id, val) = unsafe { ((*a).buf_data as u64, (*a).token_id(), (*a).token_value) };
        assert!(
            pool.check_remote(addr, 64, id, val),
            "exposable like any buffer"
        );
        pool.free_one(b).unwrap();
        pool.retire(&shared);
        assert!(
            pool.slot_of_header(a as usize).is_some(),
            "one buffer is still out"
        );
        assert_eq!(unsafe { (*a).umqh }, 7);
        pool.free_one(a).unwrap();
        assert!(
            pool.slot_of_header(a as usize).is_none(),
            "unregistered with the last one"
        );
        assert!(pool.free_one(a).is_err(), "and no longer a buffer of ours");
        let c = pool.alloc(100, 1, 0, 0).unwrap();
        assert!(
            arena
                .offset_of(unsafe { (*c).buf_data } as *const u8, 1)
                .is_none(),
            "the process pool never hands out arena memory"
        );
    }

    /// Buffers of a shared pool taken one at a time until two chunks hold them: the first
    /// chunk's buffers, and the first of the second's.
    fn out_of_two_chunks(
        pool: &Pool,
        shared: &Arc<Lists>,
    ) -> (Vec<*mut umq_buf_t>, *mut umq_buf_t) {
        let base = |b: *mut umq_buf_t| pool.slot_of_header(b as usize).unwrap().chunk.span().base;
        let mut first = vec![pool.alloc_in(shared, 100, 1, 0, 7).unwrap()];
        loop {
            let b = pool.alloc_in(shared, 100, 1, 0, 7).unwrap();
            if base(b) != base(first[0]) {
                return (first, b);
            }
            first.push(b);
        }
    }

    /// A retired pool whose buffers lie in two chunks stays registered until the last buffer
    /// of either comes back, in whichever order they do.
    #[test]
    fn a_retired_shared_pool_counts_the_buffers_of_every_chunk() {
        for second_last in [false, true] {
            let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
            let shared = pool.new_shared(3).unwrap();
            let (first, other) = out_of_two_chunks(&pool, &shared);
            pool.retire(&shared);
            let (early, last): (Vec<_>, _) = match second_last {
                true => (first.clone(), other),
                false => (
                    first[1..].iter().copied().chain([other]).collect(),
                    first[0],
                ),
            };
            for b in early {
                pool.free_one(b).unwrap();
                assert!(
                    pool.slot_of_header(last as usize).is_some(),
                    "a buffer is still out"
                );
            }
            pool.free_one(last).unwrap();
            assert!(
                pool.slot_of_header(last as usize).is_none(),
                "unregistered with the last one"
            );
        }
    }

    /// The last buffers of two chunks coming back on two threads while a third retires the
    /// pool: whatever the interleaving, the pool leaves the registry (the buffers' free and the
    /// retirement each see the other's store, `Pool::none_out`).
    #[test]
    fn a_retired_shared_pool_leaves_however_its_last_frees_and_retirement_interleave() {
        struct Sent(*mut umq_buf_t);
        unsafe impl Send for Sent {}
        for _ in 0..300 {
            let pool = Arc::new(Pool::new(false, BLOCK_SIZE_8K, 0));
            let shared = pool.new_shared(3).unwrap();
            let (first, other) = out_of_two_chunks(&pool, &shared);
            for &b in &first[1..] {
                pool.free_one(b).unwrap();
            }
            let start = Arc::new(std::sync::Barrier::new(3));
            let frees: Vec<_> = [first[0], other]
                .into_iter()
                .map(|b| {
                    let (pool, start, b) = (pool.clone(), start.clone(), Sent(b));
                    std::thread::spawn(move || {
                        let b = b;
                        start.wait();
                        pool.free_one(b.0).unwrap();
                    })
                })
                .collect();
            start.wait();
            pool.retire(&shared);
            frees.into_iter().for_each(|t| t.join().unwrap());
            assert!(
                pool.slot_of_header(other as usize).is_none(),
                "still registered"
            );
            assert!(shared.unregistered.load(Ordering::SeqCst));
        }
    }

    /// A queue that goes with its buffers still out keeps its shared pool (the application may
    /// still free them); a pool that goes (`umq_uninit`) takes every shared pool with it, its
    /// arena unmapped, whatever buffers the application still held. Chunks past the first
    /// hold their lists, which hold them back: that cycle once kept each arena for good.
    #[test]
    fn a_pool_that_goes_takes_its_retired_shared_pools_with_buffers_still_out() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(4).unwrap();
        let in_first = (SHARED_FIRST_CHUNK / (HEADER_SIZE + 8192)) as u32;
        let head = pool.alloc_in(&shared, 100, in_first + 1, 0, 1).unwrap();
        assert!(
            pool.slot_of_header(head as usize).is_some(),
            "two chunks, a buffer out in each"
        );
        let lists = Arc::downgrade(&shared);
        pool.retire(&shared);
        drop(shared);
        assert!(lists.upgrade().is_some(), "kept while its buffers are out");
        drop(pool);
        assert!(
            lists.upgrade().is_none(),
            "the shared pool and its arena went with the pool"
        );
    }

    #[test]
    fn a_lease_keeps_a_buffers_memory_after_its_shared_pool_and_the_pool_are_gone() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(3).unwrap();
        let a = pool.alloc_in(&shared, 4096, 1, 0, 7).unwrap();
        let data = unsafe { (*a).buf_data as *mut u8 };
        unsafe { std::ptr::write_bytes(data, 0x5a, 4096) };
        let cap = unsafe { (*a).buf_size } as usize;
        let lease = pool.lease(data, 4096).expect("a buffer of this pool");
        assert!(
            pool.lease(a as *const u8, 1).is_none(),
            "a header is no data"
        );
        assert!(pool.lease(data, cap + 1).is_none(), "past the buffer");
        assert!(
            pool.lease(data.wrapping_add(1), cap).is_none(),
            "past it by one"
        );
        pool.retire(&shared);
        drop(shared);
        pool.free_one(a).unwrap();
        assert!(pool.slot_of_header(a as usize).is_none(), "unregistered");
        drop(pool);
        // The arena is unmapped once nothing holds its chunks: without the lease this faults.
        let bytes = unsafe { std::slice::from_raw_parts(data, 4096) };
        assert!(bytes.iter().all(|&b| b == 0x5a));
        drop(lease);
    }

    #[test]
    fn a_chunk_this_thread_remembers_answers_for_its_own_pool_only() {
        let (mine, other) = (
            Pool::new(false, BLOCK_SIZE_8K, 0),
            Pool::new(false, BLOCK_SIZE_8K, 0),
        );
        let a = mine.alloc(100, 1, 0, 0).unwrap();
        assert!(mine.slot_of_header(a as usize).is_some(), "remembered now");
        assert!(
            other.slot_of_header(a as usize).is_none(),
            "another pool's buffer"
        );
        assert!(other.free_one(a).is_err(), "not freed through another pool");
        assert_eq!(mine.free_one(a), Ok(()), "still out in its own");
    }

    #[test]
    fn a_remembered_chunk_stops_answering_once_its_pool_leaves_the_registry() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let shared = pool.new_shared(4).unwrap();
        let arena = Arc::downgrade(shared.arena().unwrap());
        let a = pool.alloc_in(&shared, 100, 1, 0, 0).unwrap();
        // A lookup in flight elsewhere keeps the chunk itself alive past the unregistering.
        let held = pool.slot_of_header(a as usize).unwrap();
        pool.retire(&shared);
        pool.free_one(a).unwrap();
        assert!(
            pool.slot_of_header(a as usize).is_none(),
            "the chunk is in no registry, whatever this thread remembers"
        );
        drop((held, shared));
        assert!(
            arena.upgrade().is_none(),
            "remembering a chunk does not keep its pool's memory"
        );
    }

    /// Records what a hook hears, as a provider registering memory with a NIC would.
    #[derive(Default)]
    struct Registrar {
        live: Mutex<Vec<ChunkSpan>>,
        removed: AtomicUsize,
    }

    impl ChunkHook for Registrar {
        fn added(&self, chunk: &ChunkSpan) {
            let mut live = self.live.lock().unwrap();
            assert!(!live.contains(chunk), "a chunk is told once");
            live.push(*chunk);
        }
        fn removed(&self, chunk: &ChunkSpan) {
            let mut live = self.live.lock().unwrap();
            let i = live
                .iter()
                .position(|c| c == chunk)
                .expect("removed after added");
            live.remove(i);
            self.removed.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_chunk_hook_hears_of_every_chunk_that_exists_comes_and_goes() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let early = pool.alloc(100, 1, 0, 0).unwrap();
        let hook = Arc::new(Registrar::default());
        pool.add_chunk_hook(hook.clone());
        let covers = |b: *mut umq_buf_t, shared: bool| {
            let (data, id) = unsafe { ((*b).buf_data as usize, (*b).token_id()) };
            hook.live.lock().unwrap().iter().any(|c| {
                c.token_id == id && c.shared == shared && data >= c.base && data < c.base + c.len
            })
        };
        assert!(covers(early, false), "a chunk that existed is replayed");
        // A new size class grows a new chunk; so does a shared pool.
        let big = pool.alloc(1 << 20, 1, 0, 0).unwrap();
        assert!(covers(big, false), "a new chunk is told");
        let shared = pool.new_shared(5).unwrap();
        let s = pool.alloc_in(&shared, 100, 1, 0, 9).unwrap();
        assert!(
            covers(s, true),
            "a shared pool's chunk is told, marked shared"
        );
        assert_eq!(hook.live.lock().unwrap().len(), 3);
        pool.free_one(s).unwrap();
        pool.retire(&shared);
        assert_eq!(
            hook.removed.load(Ordering::Relaxed),
            1,
            "the retired chunk left"
        );
        assert!(!covers(s, true));
        assert_eq!(hook.live.lock().unwrap().len(), 2);
        pool.free_one(early).unwrap();
        pool.free_one(big).unwrap();
    }

    #[test]
    fn large_requests_get_a_large_enough_class() {
        let pool = Pool::new(false, BLOCK_SIZE_8K, 0);
        let a = pool.alloc(UMQ_MAX_BUF_REQUEST_SIZE, 1, 0, 0).unwrap();
        assert!(unsafe { (*a).buf_size } >= UMQ_MAX_BUF_REQUEST_SIZE);
        pool.free_one(a).unwrap();
    }
}
