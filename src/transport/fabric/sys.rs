//! The network engines' one C interface (libfabric's `shim.c`, UCX's `ucx.c`), and `Endpoint`,
//! a reliable-datagram endpoint with its completion queue and address vector on either engine,
//! closed on drop.

use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::mem::MaybeUninit;
use std::net::IpAddr;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::super::call_bell::{Armed, ConnFds};
use super::watch::ip_of;

/// One completion, as the shim flattens it.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Cqe {
    pub ctx: *mut c_void,
    pub len: u64,
    /// 0, or a positive `FI_E*` code.
    pub err: i32,
    pub prov_errno: i32,
    /// A received message's sender's word (`Endpoint::sign`), 0 when it carried none.
    pub from: u64,
}

/// `FI_EAGAIN`: the provider has no room now; progress and retry.
pub const FI_EAGAIN: c_int = 11;
/// `EBUSY` from an inject: the engine takes no message without a completion now (the UCX
/// engine's while messages sent with one wait for UCX to hand them to the kernel: `ucx.c`,
/// `inject`); send it with a completion.
pub const INJECT_LATER: c_int = libc::EBUSY;
/// `FI_ENOKEY`: a registration's requested key is taken in the domain.
pub const FI_ENOKEY: c_int = 266;

/// What tests make this process's endpoints do that otherwise happens only as timing has it
/// (`umq::fuzzing::network_faults`): refuse every send with `FI_EAGAIN`, as one to a peer whose
/// connection is still being made is refused.
#[cfg(feature = "fuzzing")]
pub static REFUSE_SENDS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `FI_EAGAIN` when a test has sends refused (`REFUSE_SENDS`); nothing in other builds.
#[inline(always)]
fn refused_by_test() -> Result<(), c_int> {
    #[cfg(feature = "fuzzing")]
    if REFUSE_SENDS.load(Ordering::Relaxed) {
        return Err(FI_EAGAIN);
    }
    Ok(())
}

/// `how` a one-sided operation moves bytes (shim.h): a READ; a WRITE that completes once sent.
const RMA_READ: c_int = 1;
const RMA_SENT: c_int = 2;

#[repr(C)]
pub struct RawEp {
    _opaque: [u8; 0],
}

/// The calls every engine answers, with one signature each: libfabric's in `shim.c` (`umqf_`),
/// UCX's in `ucx.c` (`umqu_`). An `Endpoint` calls its engine's through `Ops`.
macro_rules! engine_calls {
    ($($field:ident: $f:ident, $u:ident ($($arg:ident: $ty:ty),*) $(-> $ret:ty)?;)*) => {
        unsafe extern "C" {
            $(fn $f($($arg: $ty),*) $(-> $ret)?;)*
            $(fn $u($($arg: $ty),*) $(-> $ret)?;)*
        }

        /// One engine's calls.
        struct Ops {
            $($field: unsafe extern "C" fn($($ty),*) $(-> $ret)?,)*
        }

        /// libfabric (`shim.c`).
        static FABRIC: Ops = Ops { $($field: $f,)* };
        /// UCX's UCP (`ucx.c`).
        static UCX: Ops = Ops { $($field: $u,)* };
    };
}

engine_calls! {
    open: umqf_open, umqu_open(prov: *const c_char, node: *const c_char, cq_size: usize,
        wakeable: c_int, eager: usize, out: *mut *mut RawEp, why: *mut c_char, n: usize) -> c_int;
    close: umqf_close, umqu_close(e: *mut RawEp);
    provider: umqf_provider, umqu_provider(e: *const RawEp) -> *const c_char;
    inject_size: umqf_inject_size, umqu_inject_size(e: *const RawEp) -> usize;
    settled: umqf_settled, umqu_settled(e: *const RawEp, peer: u64) -> usize;
    sends_in_place: umqf_sends_in_place, umqu_sends_in_place(e: *const RawEp) -> c_int;
    wait_fd: umqf_wait_fd, umqu_wait_fd(e: *const RawEp) -> c_int;
    expose: umqf_expose, umqu_expose(e: *mut RawEp, buf: *mut c_void, len: usize, slot: usize,
        addr: *mut u64, key: *mut u64) -> c_int;
    expose_one: umqf_expose_one, umqu_expose_one(e: *mut RawEp, buf: *mut c_void, len: usize,
        want: u64, addr: *mut u64, key: *mut u64, mr: *mut *mut c_void) -> c_int;
    write: umqf_write, umqu_write(e: *mut RawEp, buf: *const c_void, len: usize,
        desc: *mut c_void, peer: u64, addr: u64, key: u64, ctx: *mut c_void) -> c_int;
    trywait: umqf_trywait, umqu_trywait(e: *mut RawEp) -> c_int;
    rma_keyed: umqf_rma_keyed, umqu_rma_keyed(e: *const RawEp) -> c_int;
    expose_keyed: umqf_expose_keyed, umqu_expose_keyed(e: *mut RawEp, buf: *mut c_void,
        len: usize, key: u64, mr: *mut *mut c_void) -> c_int;
    expose_packed: umqf_expose_packed, umqu_expose_packed(e: *mut RawEp, buf: *mut c_void,
        len: usize, mr: *mut *mut c_void, packed: *mut c_void, packed_len: *mut usize) -> c_int;
    unexpose: umqf_unexpose, umqu_unexpose(mr: *mut c_void) -> c_int;
    unpack_key: umqf_unpack_key, umqu_unpack_key(e: *mut RawEp, peer: u64, packed: *const c_void,
        len: usize, key: *mut u64) -> c_int;
    drop_key: umqf_drop_key, umqu_drop_key(key: u64);
    rma: umqf_rma, umqu_rma(e: *mut RawEp, how: c_int, buf: *mut c_void, len: usize,
        desc: *mut c_void, peer: u64, addr: u64, key: u64, ctx: *mut c_void) -> c_int;
    emulate_mr: umqf_emulate_mr, umqu_emulate_mr(e: *mut RawEp, verbs_mr: c_int);
    register_local: umqf_register_local, umqu_register_local(e: *mut RawEp, buf: *mut c_void,
        len: usize, mr: *mut *mut c_void, desc: *mut *mut c_void) -> c_int;
    unregister_local: umqf_unregister_local, umqu_unregister_local(mr: *mut c_void);
    name: umqf_name, umqu_name(e: *mut RawEp, addr: *mut c_void, len: *mut usize) -> c_int;
    connect: umqf_connect, umqu_connect(e: *mut RawEp, addr: *const c_void, len: usize,
        peer: *mut u64) -> c_int;
    register: umqf_register, umqu_register(e: *mut RawEp, buf: *mut c_void, len: usize,
        desc: *mut *mut c_void) -> c_int;
    recv: umqf_recv, umqu_recv(e: *mut RawEp, buf: *mut c_void, len: usize,
        desc: *mut c_void, ctx: *mut c_void) -> c_int;
    send2: umqf_send2, umqu_send2(e: *mut RawEp, head: *const c_void, head_len: usize,
        desc: *mut c_void, body: *const c_void, body_len: usize, body_desc: *mut c_void,
        peer: u64, ctx: *mut c_void) -> c_int;
    send: umqf_send, umqu_send(e: *mut RawEp, buf: *const c_void, len: usize,
        desc: *mut c_void, peer: u64, ctx: *mut c_void) -> c_int;
    poll: umqf_poll, umqu_poll(e: *mut RawEp, out: *mut Cqe, max: c_int) -> c_int;
    sign: umqf_sign, umqu_sign(e: *mut RawEp, word: u64);
    stream_at: umqf_stream_at, umqu_stream_at(e: *mut RawEp, peer: u64, handed: *mut u64,
        sent: *mut u64) -> c_int;
    conn_sockets: umqf_conn_sockets, umqu_conn_sockets(e: *mut RawEp, peer: u64,
        fds: *mut c_int) -> c_int;
    event_fd: umqf_event_fd, umqu_event_fd(e: *const RawEp) -> c_int;
    arm_watch: umqf_arm_watch, umqu_arm_watch(e: *mut RawEp) -> c_int;
}

unsafe extern "C" {
    fn umqf_strerror(code: c_int) -> *const c_char;
    fn umqf_probe(
        version: *mut u32,
        names: *mut c_char,
        names_len: usize,
        why: *mut c_char,
        n: usize,
    ) -> c_int;
    fn umqu_probe(version: *mut c_char, version_len: usize, why: *mut c_char, n: usize) -> c_int;
    fn umqu_host(e: *const RawEp, addr: *mut c_void, len: *mut usize) -> c_int;
}

/// `UMQ_FABRIC_PROVIDER` naming UCX rather than a libfabric provider.
pub const UCX_ENGINE: &str = "ucx";

/// `process::forks()` of the process that first opened a UCX endpoint (`u32::MAX`: none yet).
static UCX_OPENED_AT: AtomicU32 = AtomicU32::new(u32::MAX);

/// Whether this process may open a UCX endpoint: not in a child made by `fork()` from one that
/// had (UCX does not support it: the child's new workers never hear from a peer, since the
/// thread that runs UCX's asynchronous events is the parent's).
fn ucx_usable_here() -> Result<(), String> {
    let here = crate::process::forks();
    match UCX_OPENED_AT.compare_exchange(u32::MAX, here, Ordering::Relaxed, Ordering::Relaxed) {
        Ok(_) => Ok(()),
        Err(at) if at == here => Ok(()),
        Err(_) => Err(
            "the UCX engine cannot run in a process made by fork() from one that \
                       had used it (UCX's asynchronous thread stays the parent's): exec a new \
                       program, or use libfabric (UMQ_FABRIC_PROVIDER=tcp)"
                .to_string(),
        ),
    }
}

/// The unsent bytes a connection's socket keeps at most unless `UMQ_FABRIC_NOTSENT_LOWAT` says
/// otherwise: `shim.c`'s `NOTSENT_LOWAT`, which sets it (and says why).
pub const NOTSENT_LOWAT_DEFAULT: u32 = 65536;

/// The first bytes of a UCX engine's address (`ucx.c`): a libfabric endpoint refuses it.
const UCX_MAGIC: &[u8] = b"UCX2";
/// The first bytes of the address of a libfabric endpoint of connections (`shim.c`, `struct
/// conns`: tcp's own endpoints), before its listener's socket address.
const CONNS_MAGIC: &[u8] = b"OFM1";

/// Which kind of endpoint an address names: two endpoints talk only to their own kind.
fn kind_of(addr: &[u8]) -> &'static str {
    if addr.starts_with(UCX_MAGIC) {
        "UCX"
    } else if addr.starts_with(CONNS_MAGIC) {
        "libfabric connections"
    } else {
        "libfabric reliable datagrams"
    }
}

/// What libfabric offers this host for what the provider asks (`umq-info`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// `major.minor` of the loaded libfabric, if it says.
    pub version: Option<String>,
    /// The libfabric providers `fi_getinfo` answers with, first seen first.
    pub providers: Vec<String>,
}

/// How an endpoint moves one-sided WRITEs and READs, and sends (`umq-info`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// By the engine's RMA (else as messages the target's library runs).
    pub rma: bool,
    /// Under keys the provider picks, packed across (else ours, from the buffer's token).
    pub provider_keys: bool,
    /// Naming a registration of our own buffer's chunk (verbs' `FI_MR_LOCAL`).
    pub local_registration: bool,
    /// Served in software by the target's engine, which must run (tcp), not by its NIC.
    pub in_software: bool,
    /// Sends read their payload where it lies (else copied into a send buffer).
    pub sends_in_place: bool,
}

/// Loads libfabric and asks it; Err says why it cannot be used.
pub fn probe() -> Result<Offer, String> {
    let (mut version, mut names, mut why) = (0u32, [0u8; 512], [0u8; 256]);
    let rc = unsafe {
        umqf_probe(
            &mut version,
            names.as_mut_ptr() as *mut c_char,
            names.len(),
            why.as_mut_ptr() as *mut c_char,
            why.len(),
        )
    };
    if rc < 0 {
        return Err(text(&why));
    }
    Ok(Offer {
        version: (version != 0).then(|| format!("{}.{}", version >> 16, version & 0xffff)),
        providers: text(&names)
            .split(',')
            .filter(|p| !p.is_empty())
            .map(str::to_string)
            .collect(),
    })
}

/// Why a registration of ours failed, in words: where the provider is out of memory, the limit
/// a device's registrations count against.
pub(super) fn registration_refused(rc: c_int) -> String {
    let why = format!("fi_mr_reg: {}", strerror(rc));
    match rc.abs() == libc::ENOMEM {
        true => format!(
            "{why} (a device pins registered memory: {}; raise it, e.g. `ulimit -l unlimited`)",
            crate::os::memlock_limit()
        ),
        false => why,
    }
}

fn text(why: &[u8]) -> String {
    CStr::from_bytes_until_nul(why)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// What an engine's code means: an errno value (UCX's, and libfabric's own below 256), else
/// libfabric's `FI_E*` text.
pub fn strerror(code: c_int) -> String {
    let code = code.abs();
    if code < 256 {
        return std::io::Error::from_raw_os_error(code).to_string();
    }
    unsafe { CStr::from_ptr(umqf_strerror(code)) }
        .to_string_lossy()
        .into_owned()
}

/// UCX's version when its engine can be used here; Err says why not.
pub fn probe_ucx() -> Result<String, String> {
    let (mut version, mut why) = ([0u8; 32], [0u8; 256]);
    let rc = unsafe {
        umqu_probe(
            version.as_mut_ptr() as *mut c_char,
            version.len(),
            why.as_mut_ptr() as *mut c_char,
            why.len(),
        )
    };
    if rc < 0 {
        Err(text(&why))
    } else {
        Ok(text(&version))
    }
}

/// Send or receive buffers in one allocation, registered with the endpoint that uses them (a
/// provider with `FI_MR_LOCAL`, verbs, needs their descriptor with each operation). Valid while
/// that endpoint is open: it closes the registration when it closes.
pub struct Buffers {
    mem: Box<[u8]>,
    desc: *mut c_void,
}

// SAFETY: the descriptor is the provider's handle for `mem`, used under the same lock.
unsafe impl Send for Buffers {}
unsafe impl Sync for Buffers {}

impl Buffers {
    /// Buffers no provider knows, for running the receive path without an endpoint.
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn unregistered(len: usize) -> Buffers {
        Buffers {
            mem: vec![0u8; len].into_boxed_slice(),
            desc: std::ptr::null_mut(),
        }
    }

    pub fn get(&self, at: usize, len: usize) -> &[u8] {
        &self.mem[at..at + len]
    }

    pub fn get_mut(&mut self, at: usize, len: usize) -> &mut [u8] {
        &mut self.mem[at..at + len]
    }

    /// The aligned 8-byte word at `at` as it is now: memory a peer writes into (RMA, by our
    /// own progress over tcp and by the NIC over verbs), each word whole.
    pub fn word(&self, at: usize) -> u64 {
        let [v] = self.words(at);
        v
    }

    /// The `N` aligned 8-byte words from `at` as they are now, each read whole as `word`
    /// reads it: one check of bounds and alignment for all (a channel's landing words are
    /// read at every round).
    pub fn words<const N: usize>(&self, at: usize) -> [u64; N] {
        let p = self.mem[at..at + 8 * N].as_ptr() as *const u64;
        assert!(p.is_aligned(), "a landing word off its alignment");
        // SAFETY: in bounds and aligned; volatile, since the writer is not this program.
        let v = std::array::from_fn(|i| unsafe { std::ptr::read_volatile(p.add(i)) });
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        v
    }
}

/// Memory of ours the peer writes into (libfabric RMA): where and under which key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteKey {
    pub addr: u64,
    pub key: u64,
}

/// How a peer names memory of ours in its RMA: by virtual address, or by offset into the
/// registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addressing {
    Virtual,
    Offset,
}

/// The longest packed key `Endpoint::expose_packed` gives (it travels behind a length byte).
pub const MAX_PACKED: usize = 255;

/// Which way a one-sided operation moves bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rma {
    Write,
    Read,
}

/// A region registered for the peers' RMA (`Endpoint::expose_keyed`); closed with
/// `Endpoint::unexpose`, before its endpoint closes.
#[derive(Debug)]
pub struct Registration(NonNull<c_void>);

// SAFETY: a provider handle, used only under the node's lock like the endpoint.
unsafe impl Send for Registration {}

/// Our own memory registered for our RMA (`Endpoint::register_local`): the registration and
/// the descriptor each operation on it takes.
pub struct LocalRegistration {
    mr: NonNull<c_void>,
    pub desc: *mut c_void,
}

// SAFETY: as `Registration`.
unsafe impl Send for LocalRegistration {}

/// `UMQ_FABRIC_MR=verbs`: every libfabric endpoint registers memory as verbs does, whatever its
/// provider (`umqf_emulate_mr`), so hosts without an RDMA device run that path over tcp.
pub fn verbs_mr_wanted() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("UMQ_FABRIC_MR").is_ok_and(|v| v.trim() == "verbs"))
}

/// A reliable-datagram endpoint of one engine (libfabric's, or UCX's worker). Every call on it
/// is made under the lock of the node that owns it (`node::Node`; libfabric's
/// `FI_THREAD_DOMAIN`, UCX's serialized worker: one thread at a time). Memory registered with
/// it must outlive it: the shim closes the registrations as it closes, which `drop` calls.
pub struct Endpoint {
    raw: NonNull<RawEp>,
    ops: &'static Ops,
    name: Vec<u8>,
    host: Option<IpAddr>,
    inject: usize,
    in_place: bool,
    /// A send in place names its buffer's registration (`register_local`).
    in_place_registered: bool,
    provider: String,
}

// SAFETY: see the type's comment: the node's lock serialises every use.
unsafe impl Send for Endpoint {}
unsafe impl Sync for Endpoint {}

impl Drop for Endpoint {
    fn drop(&mut self) {
        unsafe { (self.ops.close)(self.raw.as_ptr()) };
    }
}

impl Endpoint {
    /// Opens an endpoint of libfabric provider `prov` (or of UCX, when `prov` is `UCX_ENGINE`)
    /// listening on `node` (an address of this host; None for the provider's choice), with a
    /// completion queue of `cq_size` entries and, when `wakeable`, a wait fd (`wait_fd`).
    /// Messages of up to `eager` bytes go eagerly where the provider lets us choose (rxm over
    /// tcp: from our buffer into the peer's posted one, with no rendezvous).
    pub fn open(
        prov: &str,
        node: Option<&str>,
        cq_size: usize,
        wakeable: bool,
        eager: usize,
    ) -> Result<Endpoint, String> {
        Endpoint::open_as(prov, node, (cq_size, wakeable, eager), verbs_mr_wanted())
    }

    /// `open`, registering memory as verbs does when `verbs_mr` is set (`verbs_mr_wanted`).
    pub fn open_as(
        prov: &str,
        node: Option<&str>,
        (cq_size, wakeable, eager): (usize, bool, usize),
        verbs_mr: bool,
    ) -> Result<Endpoint, String> {
        let ops = if prov == UCX_ENGINE { &UCX } else { &FABRIC };
        if prov == UCX_ENGINE {
            ucx_usable_here()?;
        }
        let prov_c = CString::new(prov).map_err(|_| "provider name with a NUL".to_string())?;
        let node_c = node
            .map(CString::new)
            .transpose()
            .map_err(|_| "address with a NUL".to_string())?;
        let mut raw = std::ptr::null_mut();
        let mut why = [0u8; 256];
        let rc = unsafe {
            (ops.open)(
                prov_c.as_ptr(),
                node_c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr()),
                cq_size,
                wakeable as c_int,
                eager,
                &mut raw,
                why.as_mut_ptr() as *mut c_char,
                why.len(),
            )
        };
        let raw = match NonNull::new(raw) {
            Some(raw) if rc == 0 => raw,
            _ => return Err(text(&why)),
        };
        unsafe { (ops.emulate_mr)(raw.as_ptr(), verbs_mr as c_int) };
        let provider = unsafe { CStr::from_ptr((ops.provider)(raw.as_ptr())) }
            .to_string_lossy()
            .into_owned();
        let in_place = unsafe { (ops.sends_in_place)(raw.as_ptr()) };
        let mut ep = Endpoint {
            raw,
            ops,
            name: Vec::new(),
            host: None,
            inject: unsafe { (ops.inject_size)(raw.as_ptr()) },
            in_place: in_place & 1 != 0,
            in_place_registered: in_place & 2 != 0,
            provider,
        };
        ep.read_name()?;
        ep.host = if std::ptr::eq(ops, &UCX) {
            let mut at = [0u8; 28];
            let mut len = at.len();
            let rc = unsafe { umqu_host(raw.as_ptr(), at.as_mut_ptr() as *mut c_void, &mut len) };
            (rc == 0).then(|| ip_of(&at[..len])).flatten()
        } else {
            ip_of(ep.name.strip_prefix(CONNS_MAGIC).unwrap_or(&ep.name))
        };
        Ok(ep)
    }

    /// Reads our address again (a UCX endpoint's names the regions it exposed). Too long for
    /// the first buffer, it is read again into one of the length the engine asked for (a UCX
    /// worker with many transports and devices), up to `NAME_MAX`.
    fn read_name(&mut self) -> Result<(), String> {
        const NAME_MAX: usize = 4096;
        let mut name = vec![0u8; 256];
        loop {
            let mut len = name.len();
            let rc = unsafe {
                (self.ops.name)(
                    self.raw.as_ptr(),
                    name.as_mut_ptr() as *mut c_void,
                    &mut len,
                )
            };
            if rc != 0 && len > name.len() && len <= NAME_MAX {
                name.resize(len, 0);
                continue;
            }
            if rc != 0 || len > name.len() {
                return Err(format!("fi_getname: {}", strerror(rc)));
            }
            name.truncate(len);
            self.name = name;
            return Ok(());
        }
    }

    /// The IP address this endpoint listens on, where it has one (the death watch's beacon
    /// listens there too).
    pub fn host(&self) -> Option<IpAddr> {
        self.host
    }

    /// `len` bytes of buffers for our sends or receives, registered with this endpoint.
    pub fn buffers(&self, len: usize) -> Result<Buffers, String> {
        let mut mem = vec![0u8; len].into_boxed_slice();
        let mut desc = std::ptr::null_mut();
        let rc = unsafe {
            (self.ops.register)(
                self.raw.as_ptr(),
                mem.as_mut_ptr() as *mut c_void,
                len,
                &mut desc,
            )
        };
        match rc {
            0 => Ok(Buffers { mem, desc }),
            rc => Err(registration_refused(rc)),
        }
    }

    /// `len` bytes of zeroed memory the peers write into (RMA), slots of `slot` bytes, and where
    /// they name it in their writes: UCX registers it as one region, and its handler takes a
    /// write of one whole slot only, which begins with the slot's own first word; libfabric
    /// registers each slot on its own (`expose_one`) and this region not at all (key 0).
    /// Untouched pages stay unallocated (zeroed allocations of this size are fresh mappings),
    /// so a large region costs what is used. Our address is read again: UCX's names the
    /// regions exposed.
    pub fn exposed(&mut self, len: usize, slot: usize) -> Result<(Buffers, RemoteKey), String> {
        let mut mem = vec![0u8; len].into_boxed_slice();
        let mut key = RemoteKey { addr: 0, key: 0 };
        let rc = unsafe {
            (self.ops.expose)(
                self.raw.as_ptr(),
                mem.as_mut_ptr() as *mut c_void,
                len,
                slot,
                &mut key.addr,
                &mut key.key,
            )
        };
        if rc != 0 {
            return Err(registration_refused(rc));
        }
        self.read_name()?;
        let desc = std::ptr::null_mut();
        Ok((Buffers { mem, desc }, key))
    }

    /// Writes `len` bytes of `bufs` at `at` into the peer's memory at `to`; they must stay put
    /// until the completion that carries `ctx`. Err(code), where `FI_EAGAIN` means no room now.
    pub fn write(
        &self,
        bufs: &Buffers,
        at: usize,
        len: usize,
        peer: u64,
        to: RemoteKey,
        ctx: usize,
    ) -> Result<(), c_int> {
        let rc = unsafe {
            (self.ops.write)(
                self.raw.as_ptr(),
                bufs.mem[at..at + len].as_ptr() as *const c_void,
                len,
                bufs.desc,
                peer,
                to.addr,
                to.key,
                ctx as *mut c_void,
            )
        };
        match rc {
            0 => Ok(()),
            rc => Err(-rc),
        }
    }

    /// How peers reach memory we register under keys of our choosing (`expose_keyed`), or
    /// None when this provider cannot (it picks its own keys, or needs our buffers registered
    /// for RMA too: verbs).
    pub fn rma_keyed(&self) -> Option<Addressing> {
        match unsafe { (self.ops.rma_keyed)(self.raw.as_ptr()) } {
            0 => None,
            r if r & 2 != 0 => Some(Addressing::Virtual),
            _ => Some(Addressing::Offset),
        }
    }

    /// Whether the provider carries RMA in software, as messages of its own the target's
    /// progress runs (libfabric's tcp, UCX over tcp), rather than on a NIC.
    pub fn rma_in_software(&self) -> bool {
        unsafe { (self.ops.rma_keyed)(self.raw.as_ptr()) & 8 != 0 }
    }

    /// Whether the keys of memory we expose are the provider's, packed for the peer to unpack
    /// (UCX: `expose_packed`, `unpack_key`), rather than keys of our choosing (`expose_keyed`).
    pub fn packs_keys(&self) -> bool {
        unsafe { (self.ops.rma_keyed)(self.raw.as_ptr()) & 4 != 0 }
    }

    /// Registers `len` bytes at `at` for the peers' RMA reads and writes under a key of the
    /// provider's, which it packs into `packed` (emptied first; up to `MAX_PACKED` bytes).
    ///
    /// # Safety
    /// The memory must stay allocated until the registration is closed (`unexpose`).
    pub unsafe fn expose_packed(
        &self,
        at: *mut u8,
        len: usize,
        packed: &mut Vec<u8>,
    ) -> Result<Registration, c_int> {
        let mut mr = std::ptr::null_mut();
        let mut bytes = [0u8; MAX_PACKED];
        let mut n = MAX_PACKED;
        let rc = unsafe {
            (self.ops.expose_packed)(
                self.raw.as_ptr(),
                at as *mut c_void,
                len,
                &mut mr,
                bytes.as_mut_ptr() as *mut c_void,
                &mut n,
            )
        };
        match NonNull::new(mr) {
            Some(mr) if rc == 0 && n <= MAX_PACKED => {
                packed.clear();
                packed.extend_from_slice(&bytes[..n]);
                Ok(Registration(mr))
            }
            _ => Err(-rc),
        }
    }

    /// A key the peer packed (`expose_packed` at its end), unpacked for our RMA to it: the
    /// `key` of a `RemoteKey`, until `drop_key`.
    pub fn unpack_key(&self, peer: u64, packed: &[u8]) -> Result<u64, c_int> {
        let mut key = 0;
        let rc = unsafe {
            (self.ops.unpack_key)(
                self.raw.as_ptr(),
                peer,
                packed.as_ptr() as *const c_void,
                packed.len(),
                &mut key,
            )
        };
        if rc == 0 { Ok(key) } else { Err(-rc) }
    }

    /// Ends an unpacked key; no operation of ours under it may be in flight.
    pub fn drop_key(&self, key: u64) {
        unsafe { (self.ops.drop_key)(key) }
    }

    /// Registers `len` bytes at `at` for the peers' RMA reads and writes under `key`.
    ///
    /// # Safety
    /// The memory must stay allocated until the registration is closed (`unexpose`).
    pub unsafe fn expose_keyed(
        &self,
        at: *mut u8,
        len: usize,
        key: u64,
    ) -> Result<Registration, c_int> {
        let mut mr = std::ptr::null_mut();
        let rc = unsafe {
            (self.ops.expose_keyed)(self.raw.as_ptr(), at as *mut c_void, len, key, &mut mr)
        };
        match NonNull::new(mr) {
            Some(mr) if rc == 0 => Ok(Registration(mr)),
            _ => Err(-rc),
        }
    }

    /// Registers `len` bytes at `at` for a peer's RMA writes under a key of their own (`want`
    /// where the provider takes ours), and where the peer names them. Err(-ENOSYS) where the
    /// engine names our memory by region (UCX: `exposed`), Err(-FI_ENOKEY) when `want` is
    /// taken.
    ///
    /// # Safety
    /// The bytes must stay allocated until the registration ends (`unexpose`).
    pub unsafe fn expose_one(
        &self,
        at: *mut u8,
        len: usize,
        want: u64,
    ) -> Result<(RemoteKey, Registration), c_int> {
        let mut key = RemoteKey { addr: 0, key: 0 };
        let mut mr = std::ptr::null_mut();
        let rc = unsafe {
            (self.ops.expose_one)(
                self.raw.as_ptr(),
                at as *mut c_void,
                len,
                want,
                &mut key.addr,
                &mut key.key,
                &mut mr,
            )
        };
        match (rc, NonNull::new(mr)) {
            (0, Some(mr)) => Ok((key, Registration(mr))),
            (0, None) => Err(-libc::EINVAL),
            (rc, _) => Err(rc),
        }
    }

    /// Ends a registration: a peer's operation under its key fails from now on.
    pub fn unexpose(&self, r: Registration) {
        unsafe { (self.ops.unexpose)(r.0.as_ptr()) };
    }

    /// How this endpoint moves one-sided WRITEs and READs, and sends.
    pub fn capabilities(&self) -> Capabilities {
        let bits = unsafe { (self.ops.rma_keyed)(self.raw.as_ptr()) };
        Capabilities {
            rma: bits & 1 != 0,
            provider_keys: bits & 4 != 0,
            local_registration: bits & 16 != 0,
            in_software: bits & 8 != 0,
            sends_in_place: self.in_place,
        }
    }

    /// Whether our own memory needs a registration before our RMA moves it, its descriptor
    /// going with each operation (`FI_MR_LOCAL`: verbs).
    pub fn rma_needs_local(&self) -> bool {
        unsafe { (self.ops.rma_keyed)(self.raw.as_ptr()) & 16 != 0 }
    }

    /// Registers `len` bytes at `at` for our own RMA from and into them (`rma_needs_local`).
    ///
    /// # Safety
    /// The memory must stay allocated until the registration is closed (`unregister_local`).
    pub unsafe fn register_local(
        &self,
        at: *mut u8,
        len: usize,
    ) -> Result<LocalRegistration, c_int> {
        let (mut mr, mut desc) = (std::ptr::null_mut(), std::ptr::null_mut());
        let rc = unsafe {
            (self.ops.register_local)(
                self.raw.as_ptr(),
                at as *mut c_void,
                len,
                &mut mr,
                &mut desc,
            )
        };
        match NonNull::new(mr) {
            Some(mr) if rc == 0 => Ok(LocalRegistration { mr, desc }),
            _ => Err(if rc < 0 { -rc } else { libc::EINVAL }),
        }
    }

    pub fn unregister_local(&self, r: LocalRegistration) {
        unsafe { (self.ops.unregister_local)(r.mr.as_ptr()) };
    }

    /// One-sided: `Rma::Write` writes `len` bytes at `at` into the peer's memory at `remote`,
    /// completing once they are placed there, or with `sent_only` once sent (a later WRITE on
    /// the connection, placed, says these were too); `Rma::Read` reads that many of it into
    /// `at`. The completion carries `ctx`. Err(code), where `FI_EAGAIN` means no room now.
    ///
    /// # Safety
    /// `at` must stay valid (and, for a read, untouched by us) until the completion.
    pub unsafe fn rma(
        &self,
        (op, sent_only): (Rma, bool),
        (at, desc): (*mut u8, *mut c_void),
        len: usize,
        peer: u64,
        remote: RemoteKey,
        ctx: usize,
    ) -> Result<(), c_int> {
        let how = match op {
            Rma::Read => RMA_READ,
            Rma::Write if sent_only => RMA_SENT,
            Rma::Write => 0,
        };
        let rc = unsafe {
            (self.ops.rma)(
                self.raw.as_ptr(),
                how,
                at as *mut c_void,
                len,
                desc,
                peer,
                remote.addr,
                remote.key,
                ctx as *mut c_void,
            )
        };
        if rc == 0 { Ok(()) } else { Err(-rc) }
    }

    /// Our address, for the peer (`fi_getname`).
    pub fn name(&self) -> &[u8] {
        &self.name
    }

    /// The libfabric provider serving it ("tcp;ofi_rxm", ...).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// Whether it is an endpoint of connections (`shim.c`, `struct conns`): a message longer
    /// than the buffer it lands in breaks the connection it came on (tcp reads the rest of it
    /// as the next message's header), where the other engines complete it in error alone.
    pub fn of_connections(&self) -> bool {
        self.name.starts_with(CONNS_MAGIC)
    }

    /// The largest message `send` copies out at once without a completion.
    pub fn inject_size(&self) -> usize {
        self.inject
    }

    /// Bytes of our messages to `peer` that the engine has handed on (to the kernel, or to its
    /// own transport's buffer) though their completions have not come: the UCX engine
    /// completes a message only once a flush has followed it (`ucx.c`, `send_pieces`);
    /// libfabric never holds a completion back so (0).
    pub fn settled(&self, peer: u64) -> usize {
        // SAFETY: the endpoint is open; the call reads a counter.
        unsafe { (self.ops.settled)(self.raw.as_ptr(), peer) }
    }

    /// Whether `send_gathered` may read a payload from memory we did not register.
    pub fn sends_in_place(&self) -> bool {
        self.in_place
    }

    /// Whether a send in place names its buffer's registration (`register_local`).
    pub fn sends_in_place_registered(&self) -> bool {
        self.in_place_registered
    }

    /// The fd that turns readable when the completion queue has something (after `arm_wait`
    /// said so); None for an endpoint opened without one.
    pub fn wait_fd(&self) -> Option<i32> {
        Some(unsafe { (self.ops.wait_fd)(self.raw.as_ptr()) }).filter(|&fd| fd >= 0)
    }

    /// Before sleeping on `wait_fd`: true when that is safe, false when completions or progress
    /// are pending (read the queue first, `fi_trywait`).
    pub fn arm_wait(&self) -> bool {
        unsafe { (self.ops.trywait)(self.raw.as_ptr()) == 0 }
    }

    /// Makes the endpoint at `addr` (its `name`) reachable; returns its address handle.
    pub fn connect(&self, addr: &[u8]) -> Result<u64, String> {
        if kind_of(addr) != kind_of(&self.name) {
            return Err(format!(
                "the peer's network endpoint ({}) is not of our kind ({}, {}): set \
                 UMQ_FABRIC_PROVIDER alike on both sides",
                kind_of(addr),
                kind_of(&self.name),
                self.provider
            ));
        }
        let mut peer = 0u64;
        let (at, len) = (addr.as_ptr() as *const c_void, addr.len());
        let rc = unsafe { (self.ops.connect)(self.raw.as_ptr(), at, len, &mut peer) };
        match rc {
            0 => Ok(peer),
            _ => Err(format!(
                "reaching the peer's network endpoint: {}",
                strerror(rc)
            )),
        }
    }

    /// Posts `len` bytes of `bufs` at `at` for a message; its completion carries `ctx`.
    /// Err(code).
    pub fn post_recv(
        &self,
        bufs: &mut Buffers,
        at: usize,
        len: usize,
        ctx: usize,
    ) -> Result<(), c_int> {
        let buf = bufs.mem[at..at + len].as_mut_ptr();
        match unsafe {
            (self.ops.recv)(
                self.raw.as_ptr(),
                buf as *mut c_void,
                len,
                bufs.desc,
                ctx as *mut c_void,
            )
        } {
            0 => Ok(()),
            rc => Err(-rc),
        }
    }

    /// Sets the word every message sent from now carries beside its bytes (a receiver's
    /// `Cqe::from`): libfabric's remote CQ data, UCP's tag.
    pub fn sign(&mut self, word: u64) {
        // SAFETY: the endpoint is open; the call only stores the word.
        unsafe { (self.ops.sign)(self.raw.as_ptr(), word) };
    }

    /// Sends `bytes` to `peer`, copied out now (at most `inject_size`, no completion).
    /// Err(code), where `FI_EAGAIN` means no room now.
    pub fn inject(&self, bytes: &[u8], peer: u64) -> Result<(), c_int> {
        self.send_raw(bytes, std::ptr::null_mut(), peer, std::ptr::null_mut())
    }

    /// Sends `len` bytes of `bufs` at `at` to `peer`; they must stay put until the completion
    /// that carries `ctx`. Err(code), where `FI_EAGAIN` means no room now.
    pub fn send(
        &self,
        bufs: &Buffers,
        at: usize,
        len: usize,
        peer: u64,
        ctx: usize,
    ) -> Result<(), c_int> {
        self.send_raw(&bufs.mem[at..at + len], bufs.desc, peer, ctx as *mut c_void)
    }

    /// Sends `head` bytes of `bufs` at `at` and then `body.1` bytes at `body.0` to `peer` as
    /// one message; `body_desc` names the body's registration where sends in place need one
    /// (`sends_in_place_registered`; else null). Err(code), where `FI_EAGAIN` means no room
    /// now.
    ///
    /// # Safety
    /// `sends_in_place()`, and `body` stays readable, and its registration open, until the
    /// completion that carries `ctx` (or until this endpoint closes).
    pub unsafe fn send_gathered(
        &self,
        (bufs, at, head): (&Buffers, usize, usize),
        body: (*const u8, usize),
        body_desc: *mut c_void,
        peer: u64,
        ctx: usize,
    ) -> Result<(), c_int> {
        refused_by_test()?;
        let head = &bufs.mem[at..at + head];
        let rc = unsafe {
            (self.ops.send2)(
                self.raw.as_ptr(),
                head.as_ptr() as *const c_void,
                head.len(),
                bufs.desc,
                body.0 as *const c_void,
                body.1,
                body_desc,
                peer,
                ctx as *mut c_void,
            )
        };
        match rc {
            0 => Ok(()),
            rc => Err(-rc),
        }
    }

    fn send_raw(
        &self,
        bytes: &[u8],
        desc: *mut c_void,
        peer: u64,
        ctx: *mut c_void,
    ) -> Result<(), c_int> {
        refused_by_test()?;
        let rc = unsafe {
            (self.ops.send)(
                self.raw.as_ptr(),
                bytes.as_ptr() as *const c_void,
                bytes.len(),
                desc,
                peer,
                ctx,
            )
        };
        match rc {
            0 => Ok(()),
            rc => Err(-rc),
        }
    }

    /// Takes up to `out.len()` completions (at most 16) and returns them; Err(code) when the
    /// queue failed. `out` need not be initialised: zeroing it cost more than the poll.
    pub fn poll<'a>(&self, out: &'a mut [MaybeUninit<Cqe>]) -> Result<&'a [Cqe], c_int> {
        let max = out.len().min(16) as c_int;
        match unsafe { (self.ops.poll)(self.raw.as_ptr(), out.as_mut_ptr().cast(), max) } {
            // The engine wrote the first `n` entries.
            n if n >= 0 => {
                Ok(unsafe { std::slice::from_raw_parts(out.as_ptr().cast(), n as usize) })
            }
            rc => Err(-rc),
        }
    }

    /// How far the stream of our connection to `peer` has got: the bytes handed to its socket
    /// and those the kernel has put on the wire. None where the engine cannot tell (UCX, rxm,
    /// a socket not found).
    pub fn stream_at(&self, peer: u64) -> Option<StreamAt> {
        let (mut handed, mut sent) = (0, 0);
        match unsafe { (self.ops.stream_at)(self.raw.as_ptr(), peer, &mut handed, &mut sent) } {
            0 => Some(StreamAt { handed, sent }),
            _ => None,
        }
    }

    /// The sockets what `peer` sends us arrives on (our connection to it, and its own to us
    /// where both sides connected), to be watched, never read or written: they are the
    /// provider's. None where the engine has no socket of its own per peer (UCX, rxm, verbs).
    pub fn conn_sockets(&self, peer: u64) -> Option<[RawFd; 2]> {
        let mut fds = [-1; 2];
        let n = unsafe { (self.ops.conn_sockets)(self.raw.as_ptr(), peer, fds.as_mut_ptr()) };
        (n > 0).then_some(fds)
    }

    /// What shows that `peer`'s bytes arrive: its connection's sockets, or, where the engine
    /// keeps its sockets to itself (UCX), its event fd, which `arm_watch` arms.
    pub fn conn_watch(&self, peer: u64) -> Option<ConnFds> {
        if let Some(fds) = self.conn_sockets(peer) {
            return Some(ConnFds::Sockets(fds));
        }
        let fd = unsafe { (self.ops.event_fd)(self.raw.as_ptr()) };
        (fd >= 0).then_some(ConnFds::Events(fd))
    }

    /// Before the event fd of `conn_watch` is slept on: progresses the engine until it is
    /// idle, then arms the fd.
    pub fn arm_watch(&self) -> Armed {
        match unsafe { (self.ops.arm_watch)(self.raw.as_ptr()) } {
            0 => Armed::Sleep,
            1 => Armed::ServeAgain,
            _ => Armed::Failed,
        }
    }
}

/// A connection's byte stream as its socket counts it (`Endpoint::stream_at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamAt {
    /// Bytes given to the kernel.
    pub handed: u64,
    /// Bytes the kernel has sent (retransmissions aside): those behind it wait in the socket.
    pub sent: u64,
}
