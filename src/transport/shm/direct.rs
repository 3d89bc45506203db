//! One-sided WRITE and READ carried out by the initiator alone: checked against the table the
//! target process publishes (`buf::access`), the slot pinned, and the bytes moved either by a
//! plain copy, when the buffer is in the target queue's shared pool (which the initiator maps,
//! as UCX's posix transport maps a peer's registered memory), or else by the kernel between
//! the two address spaces (cross-memory attach: `process_vm_writev` / `readv`, the way UCX's
//! `cma` transport and libfabric's `shm` provider move large messages). The target process
//! runs nothing: it may be asleep, busy elsewhere, or stopped.
//!
//! The kernel allows it where it would allow the initiator to ptrace the target: same user and,
//! under Yama's `ptrace_scope` 1, a target that named the initiator (`PR_SET_PTRACER`, done at
//! bind by `let_peer_attach`). Where it refuses (Yama 2 or 3, another user, a seccomp filter),
//! the WR goes through the ring as before and the target executes it when it next runs.

use super::*;

/// How a one-sided WR went when the initiator tried it itself.
pub(super) enum Direct {
    /// It was refused by the target's table: its completion status.
    Refused(umq_buf_status_t),
    /// It ran: through the target's shared pool mapped here (true), or by the kernel.
    Ran { mapped: bool },
    /// It cannot go this way: the target executes it from the ring.
    ViaTarget,
}

/// One post's run of WRITEs and READs against one target: its table looked up once, and the
/// slot the last WR reached kept pinned while the next WRs reach the same buffer, each checking
/// with one load that it is still handed out (a pin and an unpin are two locked instructions a
/// WR, most of a 64 B WRITE's time). The pin goes when the run ends: a post holds a slot no
/// longer than it runs.
pub(super) struct Run<'a> {
    peer: &'a Segment,
    pid: u32,
    /// The target's table (None: one-sided operations to it go through the ring).
    table: Option<&'a PeerAccess>,
    held: Option<Pin<'a>>,
}

impl<'a> Run<'a> {
    /// A run against `peer`, the inbox of process `pid`.
    #[inline(always)]
    pub(super) fn new(peer: &'a Segment, pid: u32) -> Run<'a> {
        Run {
            peer,
            pid,
            table: peer.peer_access(),
            held: None,
        }
    }

    /// Carries out `wr`, a WRITE or READ, against the target's memory.
    pub(super) fn execute(&mut self, wr: *mut umq_buf_t) -> Direct {
        let Some(table) = self.table else {
            return Direct::ViaTarget;
        };
        let h = unsafe { &*wr };
        let (opcode, sge) = (h.pro().opcode, h.pro().remote_sge);
        let len = match opcode {
            UMQ_OPC_WRITE => h.total_data_size as u64,
            UMQ_OPC_READ => sge.length as u64,
            _ => return Direct::ViaTarget,
        };
        if len > sge.length as u64 {
            return Direct::Refused(UMQ_BUF_REM_ACCESS_ABORT_ERR);
        }
        let (addr, token) = (sge.addr, (sge.token_id, sge.token_value));
        if !self
            .held
            .as_ref()
            .is_some_and(|p| p.covers(addr, len, token.0, token.1))
        {
            self.held = None; // the slot before is let go before another is pinned
            match table.reach(addr, len, token.0, token.1) {
                Reach::Pinned(pin) => self.held = Some(pin),
                Reach::Refused => return Direct::Refused(UMQ_BUF_REM_ACCESS_ABORT_ERR),
                Reach::Unknown => return Direct::ViaTarget,
            }
        }
        self.moved(wr, opcode, addr, len as usize)
    }

    /// Moves the bytes of `wr`, checked and pinned, to or from `[addr, addr + len)` of the
    /// target: a plain copy when the buffer is in the target queue's shared pool, which we
    /// map, else the kernel's.
    fn moved(&mut self, wr: *mut umq_buf_t, opcode: umq_opcode_t, addr: u64, len: usize) -> Direct {
        let mapped = self
            .peer
            .peer_pool()
            .ok()
            .and_then(|p| p.local(addr, len as u64));
        let moved = match (opcode, mapped) {
            (UMQ_OPC_WRITE, Some(dst)) => {
                target::copy_message(wr, dst, len);
                Ok(())
            }
            (_, Some(src)) => {
                target::land_read(wr, src, len);
                Ok(())
            }
            (UMQ_OPC_WRITE, None) => write(self.pid, wr, addr as usize, len),
            (_, None) => read(self.pid, wr, addr as usize, len),
        };
        match moved {
            Ok(()) => Direct::Ran {
                mapped: mapped.is_some(),
            },
            Err(e) if refused(&e) => {
                crate::log_info!(
                    "umq_post",
                    "the kernel refuses cross-memory attach to process {} ({e}): one-sided \
                     WRITE and READ to it wait for it to run",
                    self.pid
                );
                self.peer.refuse_direct();
                (self.table, self.held) = (None, None);
                Direct::ViaTarget
            }
            // The target is gone: the round that finds it closed fails what is in flight.
            Err(e) if e.raw_os_error() == Some(libc::ESRCH) => Direct::ViaTarget,
            Err(_) => Direct::Refused(UMQ_BUF_REM_ACCESS_ABORT_ERR),
        }
    }
}

/// Errors that say cross-memory attach is not allowed here at all (rather than that one
/// transfer failed).
fn refused(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EPERM | libc::EACCES | libc::ENOSYS)
    )
}

type Iovecs = [libc::iovec; crate::limits::MAX_SGE];

fn no_iovecs() -> Iovecs {
    [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; crate::limits::MAX_SGE]
}

/// The WRITE's payload (its buffers, `len` bytes in all) into `[at, at + len)` of `pid`.
fn write(pid: u32, wr: *mut umq_buf_t, at: usize, len: usize) -> std::io::Result<()> {
    let mut local = no_iovecs();
    let mut n = 0;
    for (p, piece) in message_pieces(wr) {
        *local.get_mut(n).ok_or(std::io::ErrorKind::InvalidInput)? = libc::iovec {
            iov_base: p as *mut libc::c_void,
            iov_len: piece,
        };
        n += 1;
    }
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: len,
    };
    let done =
        unsafe { libc::process_vm_writev(pid as i32, local.as_ptr(), n as u64, &remote, 1, 0) };
    whole(done, len)
}

/// `[at, at + len)` of `pid` into the READ WR's buffers, in order up to their room; their sizes
/// are set only once the bytes are there.
fn read(pid: u32, wr: *mut umq_buf_t, at: usize, len: usize) -> std::io::Result<()> {
    let nbufs = crate::buf::wr_bufs(wr).count();
    let mut local = no_iovecs();
    let (mut n, mut left) = (0, len);
    for b in crate::buf::iter(wr).take(nbufs) {
        let take = left.min(unsafe { (*b).buf_size } as usize);
        *local.get_mut(n).ok_or(std::io::ErrorKind::InvalidInput)? = libc::iovec {
            iov_base: unsafe { (*b).buf_data } as *mut libc::c_void,
            iov_len: take,
        };
        (n, left) = (n + 1, left - take);
    }
    let fits = len - left;
    let remote = libc::iovec {
        iov_base: at as *mut libc::c_void,
        iov_len: fits,
    };
    let done =
        unsafe { libc::process_vm_readv(pid as i32, local.as_ptr(), n as u64, &remote, 1, 0) };
    whole(done, fits)?;
    target::set_read_sizes(wr, nbufs, len);
    Ok(())
}

/// A transfer that moved fewer bytes than asked hit memory the table said was there.
fn whole(done: isize, want: usize) -> std::io::Result<()> {
    match done {
        d if d < 0 => Err(std::io::Error::last_os_error()),
        d if d as usize == want => Ok(()),
        _ => Err(std::io::ErrorKind::UnexpectedEof.into()),
    }
}

/// At bind: lets the peer process `pid` attach to us for its one-sided operations where Yama
/// asks a process to name the one that may (`ptrace_scope` 1). A process names one such peer
/// at a time: with several, the last one bound to is the one whose WRITEs and READs need not
/// wait for this process; the others' go through the ring.
pub(super) fn let_peer_attach(pid: u32) {
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope");
    if scope.is_ok_and(|s| s.trim() == "1") {
        unsafe { libc::prctl(libc::PR_SET_PTRACER, pid as libc::c_ulong, 0, 0, 0) };
    }
}
