//! Watches the processes at the other end of shared-memory bindings, and drives interrupt-mode
//! queues bound over shared memory.
//!
//! One thread per process, alive while something is watched. It waits on a pidfd per peer
//! process (readable when that process exits, however it exits), so a dead peer is noticed at
//! once: the queue goes to the error state, its sends in flight complete with
//! `UMQ_BUF_WR_FLUSH_ERR`, `UMQ_EVENT_QH_ERR` is raised and interrupt waiters wake. Without
//! pidfd (Linux < 5.3) it probes the pid every tick instead.
//!
//! It also runs the shared-memory engine of every watched queue each tick (every millisecond
//! for interrupt-mode queues, which have no caller polling them): the peer's messages then raise
//! interrupts, and one-sided WRITE / READ / NOP complete even when the target never calls in.

use crate::queue::table;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Mutex;
use std::time::Duration;

struct Watched {
    umqh: u64,
    pid: u32,
    pidfd: Option<OwnedFd>,
    interrupt: bool,
}

/// The watched queues, and whether the thread runs.
static WATCHED: Mutex<(Vec<Watched>, bool)> = Mutex::new((Vec::new(), false));

const TICK: Duration = Duration::from_millis(20);
const INTERRUPT_TICK: Duration = Duration::from_millis(1);

fn pidfd_open(pid: u32) -> Option<OwnedFd> {
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) })
}

fn alive(pid: u32) -> bool {
    let probed = unsafe { libc::kill(pid as libc::pid_t, 0) };
    probed == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// Starts watching the peer process of queue `q`.
pub fn watch(q: &crate::queue::Queue, pid: u32) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.0.retain(|e| e.umqh != q.handle);
    w.0.push(Watched {
        umqh: q.handle,
        pid,
        pidfd: pidfd_open(pid),
        interrupt: q.irq.is_some(),
    });
    if !w.1 {
        w.1 = true;
        std::thread::Builder::new()
            .name("umq-watchdog".into())
            .spawn(run)
            .expect("cannot start the umq watchdog thread");
    }
}

pub fn unwatch(umqh: u64) {
    let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
    w.0.retain(|e| e.umqh != umqh);
}

fn run() {
    loop {
        let (fds, ticks) = {
            let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            if w.0.is_empty() {
                w.1 = false;
                return;
            }
            let fds: Vec<libc::pollfd> =
                w.0.iter()
                    .filter_map(|e| e.pidfd.as_ref())
                    .map(|fd| libc::pollfd {
                        fd: fd.as_raw_fd(),
                        events: libc::POLLIN,
                        revents: 0,
                    })
                    .collect();
            let fast = w.0.iter().any(|e| e.interrupt);
            (fds, if fast { INTERRUPT_TICK } else { TICK })
        };
        let mut fds = fds;
        unsafe {
            libc::poll(
                fds.as_mut_ptr(),
                fds.len() as libc::nfds_t,
                ticks.as_millis() as i32,
            )
        };
        let exited: Vec<i32> = fds
            .iter()
            .filter(|p| p.revents != 0)
            .map(|p| p.fd)
            .collect();
        sweep(&exited);
    }
}

/// Reports dead peers and services the others.
fn sweep(exited_fds: &[i32]) {
    let (dead, live): (Vec<(u64, u32)>, Vec<u64>) = {
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        let is_dead = |e: &Watched| match &e.pidfd {
            Some(fd) => exited_fds.contains(&fd.as_raw_fd()),
            None => !alive(e.pid),
        };
        let dead =
            w.0.iter()
                .filter(|e| is_dead(e))
                .map(|e| (e.umqh, e.pid))
                .collect();
        w.0.retain(|e| !is_dead(e));
        let live = w.0.iter().map(|e| e.umqh).collect();
        (dead, live)
    };
    for (umqh, pid) in dead {
        if let Some(q) = table::get(umqh) {
            q.peer_lost(&format!("peer process {pid} exited"));
        }
    }
    for umqh in live {
        if let Some(q) = table::get(umqh) {
            q.shm_service();
        }
    }
}
