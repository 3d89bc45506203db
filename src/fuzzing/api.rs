//! The exported C API, called as a careless or hostile program would: any sequence of calls,
//! with live, stale, forged and zero handles, NULL and forged pointers, lengths and batch sizes
//! at and past their limits, calls before init and after uninit, double frees.
//!
//! What must hold after every call: no panic reached the C boundary (`ffi::panics_caught`), the
//! return code is success or one of the documented negative errors, a refused call left the
//! caller's memory as the caller gave it (bind info, poll arrays, posted lists), and a call with
//! a stale or forged handle is refused with `-UMQ_ERR_EINVAL`. Memory errors are the replay's
//! to find: `scripts/test-all.sh` replays the corpus under valgrind's memcheck, which sees every
//! access of the library, instrumented or not.

use crate::abi::errno::*;
use crate::abi::pro_types::*;
use crate::abi::types::*;
use crate::draw::{Draw, Tape};
use crate::ffi::api::*;
use crate::ffi::fi::*;
use crate::ffi::pro_api::*;
use std::ffi::{c_char, c_int};
use std::ptr::null_mut;

/// The negative codes the API documents.
const DOCUMENTED: &[i32] = &[
    UMQ_FAIL,
    -UMQ_ERR_EPERM,
    -UMQ_ERR_EAGAIN,
    -UMQ_ERR_ENOMEM,
    -UMQ_ERR_EBUSY,
    -UMQ_ERR_EEXIST,
    -UMQ_ERR_EINVAL,
    -UMQ_ERR_ENODEV,
];
const HEADER: usize = std::mem::size_of::<umq_buf_t>();
/// Calls a run makes at most: the sequence, not its length, is what finds bugs.
const CALLS: usize = 256;

unsafe extern "C" fn discard(_level: c_int, _msg: *mut c_char) {}

/// A run: every call the input asks for, then `umq_uninit`, so the next run starts afresh.
pub fn api_sequence(data: &[u8]) {
    let panics = crate::ffi::panics_caught();
    // Other targets replayed in this process before (tests/fuzz_corpus.rs) may hold arenas.
    let arenas = crate::buf::arena::live_arenas();
    let mut tape = Tape::new(data);
    let mut caller = Caller::default();
    quiet_logs();
    if tape.byte() & 1 == 0 {
        caller.bound_pair(&mut tape);
    }
    for _ in 0..CALLS {
        if tape.is_empty() {
            break;
        }
        caller.call(&mut tape);
        assert_eq!(
            crate::ffi::panics_caught(),
            panics,
            "a panic reached the C boundary"
        );
    }
    umq_uninit();
    assert_eq!(
        crate::buf::arena::live_arenas(),
        arenas,
        "umq_uninit left a queue's shared pool behind"
    );
}

/// The library's log lines go nowhere: a run logs every refusal, and the fuzzer reads none
/// (`UMQ_FUZZ_LOG=1` keeps them, to see why calls of a replayed input were refused).
fn quiet_logs() {
    if std::env::var_os("UMQ_FUZZ_LOG").is_some() {
        return;
    }
    let mut cfg = umq_log_config_t {
        log_flag: UMQ_LOG_FLAG_FUNC,
        func: Some(discard),
        level: 0,
        rate_limited: Default::default(),
    };
    assert_eq!(umq_log_config_set(&mut cfg), 0);
}

/// `UMQ_FUZZ_TRACE=1`: each call of a replayed input on stderr, to find the one that fails.
fn tracing() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("UMQ_FUZZ_TRACE").is_some())
}

fn documented(r: i32) -> bool {
    r >= 0 || DOCUMENTED.contains(&r)
}

/// What a program holds between calls.
#[derive(Default)]
struct Caller {
    inited: bool,
    /// Every handle `umq_create` returned in this run, live or destroyed since.
    queues: Vec<u64>,
    destroyed: Vec<u64>,
    /// Bind infos `umq_bind_info_get` wrote.
    infos: Vec<Vec<u8>>,
    /// Buffers the caller owns, each alone (its `qbuf_next` NULL).
    owned: Vec<*mut umq_buf_t>,
    /// Buffers freed since init: a second free must be refused, not corrupt the pool.
    freed: Vec<*mut umq_buf_t>,
    /// This call's arguments are what a correct program passes (three calls in four): so a
    /// run reaches bound queues and messages in flight, where the hostile calls then land.
    careful: bool,
}

impl Caller {
    fn call(&mut self, t: &mut Tape) {
        self.careful = t.byte() & 3 != 0;
        let op = t.byte() % 21;
        if tracing() {
            eprintln!("call {op} (careful: {})", self.careful);
        }
        match op {
            0 => self.init(t),
            1 if !self.careful => self.uninit(),
            2 | 3 => self.create(t),
            4 if !self.careful => self.destroy(t),
            5 => self.bind_info_get(t),
            6 => self.bind(t),
            7 => self.unbind_or_state(t),
            8 | 9 => self.alloc(t),
            10 => self.free(t),
            11..=13 => self.post(t),
            14 | 15 => self.poll(t),
            16 => self.base_api(t),
            17 => self.interrupts(t),
            18 => self.buffer_ops(t),
            19 => self.queries(t),
            20 => self.bind_pair(t),
            _ => self.poll(t),
        }
    }

    /// One of `valid` in a careful call, else a value near one of `near` or anything.
    fn choose(&self, t: &mut Tape, valid: &[u64], near: &[u64]) -> u64 {
        if self.careful {
            t.pick(valid)
        } else {
            t.edgy(near)
        }
    }

    /// A handle: in a careful call a live one, else as a careless program might pass one: one
    /// it got (live or destroyed), zero, a made-up one, or a real one with a bit flipped.
    fn handle(&self, t: &mut Tape) -> u64 {
        let live: Vec<u64> = self
            .queues
            .iter()
            .filter(|h| !self.stale(**h))
            .copied()
            .collect();
        if self.careful && !live.is_empty() {
            return t.pick(&live);
        }
        let real = (!self.queues.is_empty()).then(|| t.pick(&self.queues));
        match (t.byte() % 8, real) {
            (0, _) => 0,
            (1, _) => t.next(),
            (2, Some(h)) => h ^ (1 << t.below(64)),
            (_, Some(h)) => h,
            (_, None) => t.next(),
        }
    }

    fn stale(&self, h: u64) -> bool {
        !self.queues.contains(&h) || self.destroyed.contains(&h) || !self.inited
    }

    /// A stale or forged handle is refused with `-EINVAL`.
    fn check_handle_refused(&self, h: u64, r: i32, what: &str) {
        assert!(documented(r), "{what}: {r}");
        if self.stale(h) && h != 0 {
            assert!(r < 0, "{what} accepted stale handle {h:#x}");
        }
    }

    fn init(&mut self, t: &mut Tape) {
        let mut cfg: umq_init_cfg_t = unsafe { std::mem::zeroed() };
        let flags = t.byte();
        cfg.buf_mode = (flags & 1) as umq_buf_mode_t;
        let features = [
            UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_FLOW_CONTROL,
            UMQ_FEATURE_API_PRO,
            UMQ_FEATURE_API_BASE,
            UMQ_FEATURE_API_PRO | UMQ_FEATURE_ENABLE_STATS | UMQ_FEATURE_ENABLE_PERF,
        ]
        .map(u64::from);
        cfg.feature = match self.careful {
            true => t.pick(&features) as u32,
            false => t.next() as u32,
        };
        cfg.headroom_size = self.choose(t, &[0, 64], &[0, 64, 512]) as u16;
        cfg.io_lock_free = flags & 2 != 0;
        cfg.trans_info_num = self.choose(t, &[0], &[0, 1, 128]) as u8;
        cfg.flow_control.initial_window = self.choose(t, &[64, 256], &[0, 1, 64, 256]) as u16;
        cfg.flow_control.notify_interval = self.choose(t, &[1, 16], &[0, 1, 16]) as u16;
        cfg.flow_control.use_atomic_window = flags & 4 != 0;
        let r = if !self.careful && flags & 0xf0 == 0xf0 {
            umq_init(null_mut())
        } else {
            umq_init(&mut cfg)
        };
        assert!(documented(r), "umq_init: {r}");
        if self.inited {
            assert!(r < 0, "a second umq_init succeeded");
        }
        if r == 0 {
            self.inited = true;
            self.freed.clear();
            quiet_logs();
        }
    }

    fn uninit(&mut self) {
        umq_uninit();
        self.inited = false;
        self.destroyed.extend(self.queues.iter().copied());
        // Buffers the caller still held are invalid now.
        self.owned.clear();
        self.freed.clear();
    }

    fn create(&mut self, t: &mut Tape) {
        let mut o: umq_create_option_t = unsafe { std::mem::zeroed() };
        o.trans_mode = self.choose(t, &[0], &[UMQ_TRANS_MODE_UB as u64]) as umq_trans_mode_t;
        o.dev_info.assign_mode = UMQ_DEV_ASSIGN_MODE_IPV4;
        let ip: &[u8] = if !self.careful && t.byte().is_multiple_of(8) {
            t.bytes(16)
        } else {
            b"127.0.0.1"
        };
        for (d, s) in unsafe { o.dev_info.u.ipv4.ip_addr.iter_mut() }.zip(ip) {
            *d = *s as _;
        }
        let name = match self.careful {
            true => format!("q{}", self.queues.len()).into_bytes(),
            false => t.bytes(40).to_vec(),
        };
        for (d, s) in o.name.iter_mut().zip(name) {
            *d = s as _;
        }
        o.create_flag = match self.careful {
            true => 0x1f,
            false => t.byte() as u32 & 0x3f,
        };
        let sizes = [4096, 8192, 65536];
        o.rx_buf_size = self.choose(t, &sizes, &[0, 4096, 8192, 65536]) as u32;
        o.tx_buf_size = self.choose(t, &sizes, &[0, 4096, 8192, 65536]) as u32;
        o.rx_depth = self.choose(t, &[16, 64, 256], &[0, 1, 64, 1024]) as u32;
        o.tx_depth = self.choose(t, &[16, 64, 256], &[0, 1, 64, 1024]) as u32;
        o.mode = self.choose(t, &[0, 1], &[0, 1, 2]) as umq_queue_mode_t;
        let h = if !self.careful && t.byte() == 0xff {
            umq_create(null_mut())
        } else {
            umq_create(&mut o)
        };
        if h != 0 {
            assert!(self.inited, "umq_create succeeded before umq_init");
            assert!(!self.queues.contains(&h), "handle {h:#x} handed out twice");
            self.queues.push(h);
        }
    }

    fn destroy(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let r = umq_destroy(h);
        self.check_handle_refused(h, r, "umq_destroy");
        if r == 0 {
            self.destroyed.push(h);
        }
    }

    fn bind_info_get(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let size = t.edgy(&[0, 1, 64, 512]).min(1024) as u32;
        let mut buf = vec![0xab_u8; size as usize];
        let ptr = if t.byte().is_multiple_of(16) {
            null_mut()
        } else {
            buf.as_mut_ptr()
        };
        let n = umq_bind_info_get(h, ptr, size);
        if n == 0 {
            assert!(
                buf.iter().all(|&b| b == 0xab),
                "a refused umq_bind_info_get wrote"
            );
            return;
        }
        assert!(
            n <= size && !self.stale(h),
            "umq_bind_info_get: {n} of {size}, handle {h:#x}"
        );
        buf.truncate(n as usize);
        self.infos.push(buf);
    }

    fn bind(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let mut info = match self.infos.is_empty() || t.byte().is_multiple_of(8) {
            true => {
                let n = t.below(600) as usize;
                t.bytes(n).to_vec()
            }
            false => self.infos[t.below(self.infos.len() as u64) as usize].clone(),
        };
        if !info.is_empty() && t.byte().is_multiple_of(4) {
            let i = t.below(info.len() as u64) as usize;
            info[i] ^= 1 << (t.byte() % 8);
        }
        let len = (t.edgy(&[info.len() as u64]) as u32).min(info.len() as u32);
        let given = info.clone();
        let ptr = if info.is_empty() {
            null_mut()
        } else {
            info.as_mut_ptr()
        };
        let r = umq_bind(h, ptr, len);
        self.check_handle_refused(h, r, "umq_bind");
        assert_eq!(
            info, given,
            "umq_bind wrote into the bind info it was given"
        );
    }

    /// Where most programs are after their first calls: initialised, and two new queues bound
    /// to each other (their settings from the input). Half the runs start here, so the fuzzer
    /// spends its time on calls around messages in flight rather than on finding this state.
    fn bound_pair(&mut self, t: &mut Tape) {
        self.careful = true;
        self.init(t);
        self.create(t);
        self.create(t);
        self.bind_pair(t);
    }

    /// Two queues bound to each other, as every program does it: each one's bind info to the
    /// other.
    fn bind_pair(&mut self, t: &mut Tape) {
        let (a, b) = (self.handle(t), self.handle(t));
        let (mut ia, mut ib) = ([0u8; 512], [0u8; 512]);
        let la = umq_bind_info_get(a, ia.as_mut_ptr(), 512);
        let lb = umq_bind_info_get(b, ib.as_mut_ptr(), 512);
        if la == 0 || lb == 0 {
            return;
        }
        let r = umq_bind(a, ib.as_mut_ptr(), lb);
        self.check_handle_refused(a, r, "umq_bind");
        let r = umq_bind(b, ia.as_mut_ptr(), la);
        self.check_handle_refused(b, r, "umq_bind");
    }

    fn unbind_or_state(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        if t.byte().is_multiple_of(2) {
            let r = umq_unbind(h);
            self.check_handle_refused(h, r, "umq_unbind");
        } else {
            let s = umq_state_get(h);
            assert!(s < 16, "umq_state_get: {s}");
        }
    }

    fn alloc(&mut self, t: &mut Tape) {
        let size = self.choose(t, &[64, 1024, 4096], &[0, 1, 4096, 8192, 65536, 1 << 20]) as u32;
        let num = self.choose(t, &[1, 4, 16], &[0, 1, 2, UMQ_BATCH_SIZE as u64]) as u32;
        let h = if t.byte().is_multiple_of(2) {
            0
        } else {
            self.handle(t)
        };
        let mut option = umq_alloc_option_t {
            flag: t.byte() as u32 & 3,
            headroom_size: t.edgy(&[0, 64, 4096]) as u16,
        };
        let opt = if self.careful || t.byte().is_multiple_of(2) {
            null_mut()
        } else {
            &mut option as *mut _
        };
        let head = umq_buf_alloc(size, num, h, opt);
        if head.is_null() {
            return;
        }
        assert!(
            self.inited && (1..=UMQ_BATCH_SIZE).contains(&num),
            "{num} buffers allocated"
        );
        let mut b = head;
        let mut n = 0;
        while !b.is_null() {
            let next = unsafe { (*b).qbuf_next };
            self.handed_over(b, "umq_buf_alloc");
            b = next;
            n += 1;
        }
        assert_eq!(n, num, "umq_buf_alloc chained {n} of {num} buffers");
    }

    /// `b` came to the caller from `call` (an allocation, a completion, a received message):
    /// it is the caller's alone now, and no longer one freed before. A receive buffer the
    /// library took from the pool may be one the caller freed: freeing it again now is no
    /// double free.
    fn handed_over(&mut self, b: *mut umq_buf_t, call: &str) {
        unsafe { (*b).qbuf_next = null_mut() };
        assert!(
            !self.owned.contains(&b),
            "{call} returned a buffer the caller holds"
        );
        self.owned.push(b);
        self.freed.retain(|&f| f != b);
    }

    /// A buffer the caller owns (taken out of `owned`), or None.
    fn take_owned(&mut self, t: &mut Tape) -> Option<*mut umq_buf_t> {
        (!self.owned.is_empty()).then(|| {
            let i = t.below(self.owned.len() as u64) as usize;
            self.owned.swap_remove(i)
        })
    }

    fn free(&mut self, t: &mut Tape) {
        match t.byte() % 4 {
            0 => umq_buf_free(null_mut()),
            1 if !self.freed.is_empty() => {
                // A double free: logged and refused, never a corrupt pool.
                let b = t.pick(&self.freed);
                umq_buf_free(b);
            }
            2 => {
                let mut forged = Forged::new(t);
                umq_buf_free(forged.buf());
                forged.assert_untouched("umq_buf_free");
            }
            _ => {
                if let Some(b) = self.take_owned(t) {
                    umq_buf_free(b);
                    self.freed.push(b);
                }
            }
        }
    }

    /// Up to `n` owned buffers linked by `qbuf_next`, their fields set as the input says.
    fn list(&mut self, t: &mut Tape, n: u64) -> Vec<*mut umq_buf_t> {
        let mut list = Vec::new();
        for _ in 0..n {
            let Some(b) = self.take_owned(t) else { break };
            unsafe {
                let size = (*b).buf_size as u64;
                (*b).data_size = match self.careful {
                    true => t.below(size + 1),
                    false => t.edgy(&[0, 1, size]),
                } as u32;
                (*b).total_data_size = (*b).data_size;
                let pro = (*b).pro_mut();
                let opcodes = [UMQ_OPC_SEND, UMQ_OPC_SEND_IMM, UMQ_OPC_NOP].map(u64::from);
                let near = [UMQ_OPC_WRITE, UMQ_OPC_READ, UMQ_OPC_SEND, UMQ_OPC_NOP].map(u64::from);
                pro.opcode = self.choose(t, &opcodes, &near) as umq_opcode_t;
                pro.imm_data = t.next();
                pro.remote_sge.addr = t.next();
                pro.remote_sge.length = t.edgy(&[0, size]) as u32;
                pro.remote_sge.token_id = t.next() as u32;
            }
            list.push(b);
        }
        // One WR of odd length is posted alone: its total_data_size may span a list.
        if !self.careful && list.len() == 1 && t.byte().is_multiple_of(4) {
            unsafe {
                (*list[0]).total_data_size = t.edgy(&[0, (*list[0]).data_size as u64]) as u32
            };
        }
        for pair in list.windows(2) {
            unsafe { (*pair[0]).qbuf_next = pair[1] };
        }
        list
    }

    /// The buffers of `list` from `bad` on go back to the caller (unchanged, when `refused`);
    /// those before it were taken.
    fn settle_list(
        &mut self,
        list: &[*mut umq_buf_t],
        before: &[Vec<u8>],
        bad: *mut umq_buf_t,
        refused: bool,
    ) {
        let from = list.iter().position(|&b| b == bad).unwrap_or(list.len());
        for (i, &b) in list.iter().enumerate().skip(from) {
            if refused {
                assert_eq!(
                    header_bytes(b),
                    before[i],
                    "a refused call changed buffer {i} of the list"
                );
            }
            unsafe { (*b).qbuf_next = null_mut() };
            self.owned.push(b);
        }
    }

    fn post(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let dirs = [UMQ_IO_TX, UMQ_IO_RX].map(u64::from);
        let dir = self.choose(t, &dirs, &dirs) as umq_io_direction_t;
        let n = self.choose(t, &[1, 2, 8], &[1, 2, 8, UMQ_BATCH_SIZE as u64]);
        let list = self.list(t, n);
        let before: Vec<_> = list.iter().map(|&b| header_bytes(b)).collect();
        let head = list.first().copied().unwrap_or(null_mut());
        let mut bad: *mut umq_buf_t = null_mut();
        let bad_ptr = if list.len() <= 1 && t.byte().is_multiple_of(2) {
            null_mut()
        } else {
            &mut bad as *mut _
        };
        let r = umq_post(h, head, dir, bad_ptr);
        self.check_handle_refused(h, r, "umq_post");
        if r == 0 {
            return; // all posted: the library's until polled
        }
        let bad = if bad_ptr.is_null() { head } else { bad };
        assert!(
            list.is_empty() || list.contains(&bad),
            "umq_post: bad_qbuf {bad:?} is not of the list"
        );
        self.settle_list(&list, &before, bad, r == -UMQ_ERR_EINVAL);
    }

    fn poll(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let dirs = [UMQ_IO_TX, UMQ_IO_RX, UMQ_IO_ALL].map(u64::from);
        let dir = self.choose(t, &dirs, &dirs) as umq_io_direction_t;
        let max = self
            .choose(t, &[1, 16, 64], &[0, 1, UMQ_BATCH_SIZE as u64, 100])
            .min(128) as u32;
        let sentinel = 0x5a5a_5a5a_5a5a_5a5a_usize as *mut umq_buf_t;
        let mut out = vec![sentinel; max as usize];
        let ptr = if !self.careful && t.byte().is_multiple_of(16) {
            null_mut()
        } else {
            out.as_mut_ptr()
        };
        let r = umq_poll(h, dir, ptr, max);
        self.check_handle_refused(h, r, "umq_poll");
        if r < 0 {
            assert!(
                out.iter().all(|&b| b == sentinel),
                "a refused umq_poll wrote"
            );
            return;
        }
        assert!(r as u32 <= max, "umq_poll returned {r} of {max}");
        for &b in &out[..r as usize] {
            // Each WR here is one buffer; a sent one's qbuf_next is what we posted (NULL or
            // the next WR of its list, which comes back by itself).
            self.handed_over(b, "umq_poll");
        }
    }

    fn base_api(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        if t.byte().is_multiple_of(2) {
            let b = umq_dequeue(h);
            let mut b = b;
            while !b.is_null() {
                let next = unsafe { (*b).qbuf_next };
                self.handed_over(b, "umq_dequeue");
                b = next;
            }
            return;
        }
        let n = t.edgy(&[1, 2, UMQ_BATCH_SIZE as u64]);
        let list = self.list(t, n);
        let before: Vec<_> = list.iter().map(|&b| header_bytes(b)).collect();
        let head = list.first().copied().unwrap_or(null_mut());
        let mut bad: *mut umq_buf_t = null_mut();
        let r = umq_enqueue(h, head, &mut bad);
        self.check_handle_refused(h, r, "umq_enqueue");
        if r != 0 {
            let bad = if bad.is_null() { head } else { bad };
            self.settle_list(&list, &before, bad, r == -UMQ_ERR_EINVAL);
        }
    }

    fn interrupts(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        let mut option = umq_interrupt_option_t {
            flag: t.edgy(&[UMQ_INTERRUPT_FLAG_IO_DIRECTION as u64]) as u32,
            direction: t.edgy(&[UMQ_IO_TX as u64, UMQ_IO_RX as u64]) as umq_io_direction_t,
        };
        let opt = if t.byte().is_multiple_of(8) {
            null_mut()
        } else {
            &mut option as *mut _
        };
        let r = match t.byte() % 6 {
            0 => umq_rearm_interrupt(h, t.byte() & 1 == 1, opt),
            // Never a wait that could block: a timeout of zero.
            1 => umq_wait_interrupt(h, 0, opt),
            2 => {
                umq_ack_interrupt(h, t.edgy(&[0, 1, u32::MAX as u64]) as u32, opt);
                0
            }
            3 => umq_interrupt_fd_get(h, opt).min(0),
            4 => umq_get_cq_event(h, opt),
            _ => {
                umq_notify(h);
                0
            }
        };
        assert!(documented(r), "interrupt call: {r}");
    }

    fn buffer_ops(&mut self, t: &mut Tape) {
        let Some(b) = self.take_owned(t) else {
            let mut forged = Forged::new(t);
            assert!(
                umq_buf_reset(forged.buf()) < 0,
                "umq_buf_reset took a forged buffer"
            );
            assert!(
                umq_data_to_head(forged.data()).is_null(),
                "a forged buffer's head"
            );
            forged.assert_untouched("buffer calls");
            return;
        };
        match t.byte() % 5 {
            0 => assert!(documented(umq_buf_headroom_reset(
                b,
                t.edgy(&[0, 64, 4096]) as u16
            ))),
            1 => assert!(documented(umq_buf_reset(b))),
            2 => {
                let head = umq_data_to_head(unsafe { (*b).buf_data } as *mut _);
                assert!(
                    head.is_null() || head == b,
                    "umq_data_to_head: {head:?} for {b:?}"
                );
            }
            3 => {
                let other = self.owned.first().copied().unwrap_or(null_mut());
                assert!(documented(umq_buf_split(b, other)));
            }
            _ => {
                let rest = umq_buf_break_and_free(b);
                assert!(rest.is_null(), "a lone buffer has no rest");
                self.freed.push(b);
                return;
            }
        }
        unsafe { (*b).qbuf_next = null_mut() };
        self.owned.push(b);
    }

    fn queries(&mut self, t: &mut Tape) {
        let h = self.handle(t);
        match t.byte() % 8 {
            0 => {
                // A count, or -FI_EINVAL for a bad handle, -FI_EOPBADSTATE while unbound.
                let left = [umq_tx_size_left(h), umq_rx_size_left(h)];
                let refusals = [-(FI_EINVAL as i64), -(FI_EOPBADSTATE as i64)];
                assert!(
                    left.iter().all(|n| *n >= 0 || refusals.contains(n)),
                    "{left:?}"
                );
                if self.stale(h) && h != 0 {
                    assert_eq!(left, [refusals[0]; 2], "size left of stale handle {h:#x}");
                }
            }
            1 => {
                let ep = if t.byte().is_multiple_of(4) {
                    null_mut()
                } else {
                    umq_fi_ep_get(h)
                };
                let left = [fi_tx_size_left(ep) as i64, fi_rx_size_left(ep) as i64];
                let refusals = [-(FI_EINVAL as i64), -(FI_EOPBADSTATE as i64)];
                assert!(
                    left.iter().all(|n| *n >= 0 || refusals.contains(n)),
                    "{left:?}"
                );
                if ep.is_null() {
                    assert_eq!(left, [refusals[0]; 2], "size left of no endpoint");
                }
            }
            2 => {
                let mut out = [0xcdu8; 256];
                let mut input = umq_user_ctl_in_t {
                    addr: if t.byte().is_multiple_of(4) {
                        0
                    } else {
                        out.as_mut_ptr() as u64
                    },
                    len: t.edgy(&[0, 64, 256]).min(256) as u32,
                    opcode: t.edgy(&[0, 1]) as u32,
                };
                let mut result = umq_user_ctl_out_t::default();
                let r = umq_user_ctl(h, &mut input, &mut result);
                self.check_handle_refused(h, r, "umq_user_ctl");
                if r < 0 {
                    assert!(
                        out.iter().all(|&b| b == 0xcd),
                        "a refused umq_user_ctl wrote"
                    );
                }
            }
            3 => {
                let mut cmd: umq_dfx_cmd_t = unsafe { std::mem::zeroed() };
                fill_raw(&mut cmd, t);
                let mut result: umq_dfx_result_t = unsafe { std::mem::zeroed() };
                umq_dfx_cmd_process(&mut cmd, &mut result);
                umq_dfx_cmd_process(null_mut(), null_mut());
            }
            4 => {
                let mut info: umq_trans_info_t = unsafe { std::mem::zeroed() };
                fill_raw(&mut info, t);
                let r = umq_dev_add(if t.byte().is_multiple_of(4) {
                    null_mut()
                } else {
                    &mut info
                });
                assert!(documented(r), "umq_dev_add: {r}");
                let mut list: umq_route_list_t = unsafe { std::mem::zeroed() };
                let route: umq_route_t = unsafe { std::mem::zeroed() };
                let r = umq_get_route_list(&route, t.edgy(&[0, 1]) as umq_trans_mode_t, &mut list);
                assert!(
                    documented(r) && list.len <= 16,
                    "umq_get_route_list: {r}, {}",
                    list.len
                );
            }
            5 => {
                let mut info: umq_trans_info_t = unsafe { std::mem::zeroed() };
                let fd = umq_async_event_fd_get(&mut info);
                assert!(
                    fd >= 0 || fd == UMQ_INVALID_FD,
                    "umq_async_event_fd_get: {fd}"
                );
                let mut event: umq_async_event_t = unsafe { std::mem::zeroed() };
                let r = umq_get_async_event(&mut info, &mut event);
                assert!(documented(r), "umq_get_async_event: {r}");
                if r == 0 {
                    umq_ack_async_event(&mut event);
                }
            }
            6 => {
                let mut cfg = umq_log_config_t {
                    // Any flags but FUNC, which would send the lines to stderr.
                    log_flag: t.byte() as u32 & !UMQ_LOG_FLAG_FUNC,
                    func: Some(discard),
                    level: t.edgy(&[0, UMQ_LOG_LEVEL_MAX as u64]) as umq_log_level_t,
                    rate_limited: umq_log_rate_limit_t {
                        interval_ms: t.next() as u32,
                        num: t.next() as u32,
                    },
                };
                assert!(documented(umq_log_config_set(&mut cfg)));
                assert_eq!(umq_log_config_get(&mut cfg), 0);
                assert!(
                    documented(umq_log_config_set(null_mut()))
                        && umq_log_config_get(null_mut()) < 0
                );
            }
            _ => {
                // Calls given NULL where they need a pointer refuse with a documented error.
                assert!(umq_post(h, null_mut(), UMQ_IO_TX, null_mut()) < 0);
                assert!(umq_poll(h, UMQ_IO_ALL, null_mut(), 1) < 0);
                assert!(umq_enqueue(h, null_mut(), null_mut()) < 0);
                assert_eq!(umq_bind_info_get(h, null_mut(), 512), 0);
                assert!(umq_bind(h, null_mut(), 64) < 0);
            }
        }
    }
}

/// A buffer the library never gave out, in the caller's own memory: every call must refuse it
/// without writing into it.
struct Forged {
    mem: Vec<u8>,
    given: Vec<u8>,
}

impl Forged {
    fn new(t: &mut Tape) -> Forged {
        let mut mem = vec![0u8; HEADER + 256];
        let bytes = t.bytes(HEADER);
        mem[..bytes.len()].copy_from_slice(bytes);
        // Its pointers point into itself or nowhere, never at memory that is not ours.
        let base = mem.as_mut_ptr();
        let b = base as *mut umq_buf_t;
        unsafe {
            (*b).qbuf_next = null_mut();
            (*b).buf_data = if t.byte().is_multiple_of(2) {
                base.add(HEADER) as *mut _
            } else {
                null_mut()
            };
        }
        let given = mem.clone();
        Forged { mem, given }
    }

    fn buf(&mut self) -> *mut umq_buf_t {
        self.mem.as_mut_ptr() as *mut umq_buf_t
    }

    fn data(&mut self) -> *mut std::ffi::c_void {
        unsafe { self.mem.as_mut_ptr().add(HEADER) as *mut _ }
    }

    fn assert_untouched(&self, what: &str) {
        assert!(self.mem == self.given, "{what} wrote into a forged buffer");
    }
}

fn header_bytes(b: *mut umq_buf_t) -> Vec<u8> {
    unsafe { std::slice::from_raw_parts(b as *const u8, HEADER) }.to_vec()
}

/// `v`'s bytes from the input (a plain-old-data struct without pointers the library follows).
fn fill_raw<T>(v: &mut T, t: &mut Tape) {
    let bytes = t.bytes(std::mem::size_of::<T>());
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), v as *mut T as *mut u8, bytes.len()) };
}
