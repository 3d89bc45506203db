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
use std::sync::{Arc, Mutex};
use std::time::Duration;

struct Watched {
    umqh: u64,
    pid: u32,
    /// Shared with the thread's poll set, so the descriptor stays open (and its number cannot be
    /// reused by another watch) until the thread has looked at what poll said about it.
    pidfd: Option<Arc<OwnedFd>>,
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
        pidfd: pidfd_open(pid).map(Arc::new),
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
        let (pidfds, tick) = {
            let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
            if w.0.is_empty() {
                w.1 = false;
                return;
            }
            let pidfds: Vec<Arc<OwnedFd>> = w.0.iter().filter_map(|e| e.pidfd.clone()).collect();
            let fast = w.0.iter().any(|e| e.interrupt);
            (pidfds, if fast { INTERRUPT_TICK } else { TICK })
        };
        let exited = wait_for_exits(&pidfds, tick);
        sweep(&exited);
    }
}

/// Polls the pidfds for up to `tick`; returns the ones whose process has exited.
fn wait_for_exits(pidfds: &[Arc<OwnedFd>], tick: Duration) -> Vec<Arc<OwnedFd>> {
    let mut fds: Vec<libc::pollfd> = pidfds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ready = unsafe {
        libc::poll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            tick.as_millis() as i32,
        )
    };
    if ready <= 0 {
        return Vec::new();
    }
    // A pidfd is readable (POLLIN) once its process has exited; nothing else means that.
    fds.iter()
        .zip(pidfds)
        .filter(|(p, _)| p.revents & libc::POLLIN != 0)
        .map(|(_, fd)| fd.clone())
        .collect()
}

/// Reports dead peers and services the others.
fn sweep(exited: &[Arc<OwnedFd>]) {
    let (dead, live): (Vec<(u64, u32)>, Vec<u64>) = {
        let mut w = WATCHED.lock().unwrap_or_else(|p| p.into_inner());
        let is_dead = |e: &Watched| match &e.pidfd {
            Some(fd) => exited.iter().any(|x| Arc::ptr_eq(x, fd)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_exited_process_is_reported() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let exiting = Arc::new(pidfd_open(child.id()).expect("pidfd_open"));
        let living = Arc::new(pidfd_open(std::process::id()).unwrap());
        child.wait().unwrap();
        let both = [living.clone(), exiting.clone()];
        let exited = wait_for_exits(&both, Duration::from_millis(1000));
        assert_eq!(exited.len(), 1);
        assert!(Arc::ptr_eq(&exited[0], &exiting));
        assert!(wait_for_exits(&[living], Duration::from_millis(10)).is_empty());
    }
}
