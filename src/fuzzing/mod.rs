//! The fuzz targets' entry points. `fuzz/` runs each under AFL++ (`cargo afl`), and `cargo
//! test` replays every input of their corpora (`fuzz/corpus/<target>/`) and every crash a
//! campaign found (`fuzz/regressions/<target>/`). A target takes any bytes and panics only when
//! something that must hold whatever the input does not: the fuzzer reports that panic as a
//! crash. Compiled for tests and the `fuzzing` feature only, never into a shipped build.

mod api;
mod fabric;
mod input;
mod pause;
mod shm;

/// A fuzz target: its name (its corpus directory) and its entry point.
pub struct Target {
    pub name: &'static str,
    pub run: fn(&[u8]),
}

pub const TARGETS: &[Target] = &[
    Target {
        name: "bind_info",
        run: input::bind_info,
    },
    Target {
        name: "pause_link",
        run: pause::pause_link,
    },
    Target {
        name: "shm_ring",
        run: shm::shm_ring,
    },
    Target {
        name: "shm_sender",
        run: shm::shm_sender,
    },
    Target {
        name: "fabric_messages",
        run: fabric::fabric_messages,
    },
    Target {
        name: "api_sequence",
        run: api::api_sequence,
    },
];

/// Sets what the network provider's endpoints of this process do that otherwise happens only
/// as timing has it, for the tests of what follows: with `refuse_sends` every send is refused
/// (`FI_EAGAIN`), as one to a peer whose connection is still being made is; with
/// `no_ping_rounds` no node has the progress engine run a round for its liveness pings (such a
/// round runs some channel of the node every half second).
pub fn network_faults(refuse_sends: bool, no_ping_rounds: bool) {
    use crate::transport::fabric::{node, sys};
    use std::sync::atomic::Ordering::Relaxed;
    sys::REFUSE_SENDS.store(refuse_sends, Relaxed);
    node::NO_PING_ROUNDS.store(no_ping_rounds, Relaxed);
}

/// With `refuse`, no bind over shared memory duplicates its peer's doorbell, as where the
/// kernel refuses `pidfd_getfd` (Yama's `ptrace_scope` 1 before the peer named us): our call
/// bell then rings the peer's interrupt-mode queue.
pub fn refuse_doorbells(refuse: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    crate::transport::shm::REFUSE_DOORBELLS.store(refuse, Relaxed);
}

/// With `hide`, a bind over shared memory publishes no call bell for its peer to ring (as where
/// its process has none, or where the peer's datagrams to 127.0.0.1 cannot reach it: another
/// network namespace), so a peer without its doorbell has nowhere to ring it.
pub fn hide_call_ports(hide: bool) {
    use std::sync::atomic::Ordering::Relaxed;
    crate::transport::shm::HIDE_CALL_PORTS.store(hide, Relaxed);
}

/// Whether queue `umqh`'s progress thread may count on its peer to wake it (over shared memory:
/// the peer holds its doorbell, or a ring of the peer's reached its call bell); None when no
/// queue has that handle or it has no doorbell.
pub fn rung_by_peer(umqh: u64) -> Option<bool> {
    crate::queue::table::get(umqh)?.rung_by_peer()
}

/// Serves queue `umqh` on this thread as the progress engine does when a peer rings for it or
/// its sweep comes (`Watched::service`); None when no queue has that handle. For the tests of
/// what the engine does to a queue whose application is in a call.
pub fn serve_as_engine(umqh: u64) -> Option<crate::transport::progress::Serviced> {
    use crate::transport::progress::{Watched, as_engine};
    let q = crate::queue::table::get(umqh)?;
    Some(as_engine(|| q.service()))
}

/// Whether the progress engine owes queue `umqh` a round it left to the queue's application
/// (`Serviced::Busy`) and has not run yet; None when no queue has that handle.
pub fn round_owed(umqh: u64) -> Option<bool> {
    Some(crate::queue::table::get(umqh)?.round_owed())
}

/// The target called `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// The inputs of `target` kept under `root` (the repository's `fuzz/`): its seed corpus and
/// the crashes campaigns found, which stay as regression inputs.
pub fn inputs(root: &std::path::Path, target: &Target) -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = ["corpus", "regressions"]
        .iter()
        .filter_map(|kind| std::fs::read_dir(root.join(kind).join(target.name)).ok())
        .flatten()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    files
}

/// Runs `target` on every file of `files`, naming the file that fails.
pub fn replay(target: &Target, files: &[std::path::PathBuf]) {
    for f in files {
        let data = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        eprintln!("{} {}", target.name, f.display());
        (target.run)(&data);
    }
}

/// Seeds for a new corpus: for bind info, a valid one of every transport; for the others,
/// bytes from a seeded generator (their inputs are choices, and any bytes are a valid run).
pub fn seeds(target: &Target) -> Vec<Vec<u8>> {
    if target.name == "bind_info" {
        return input::bind_info_seeds();
    }
    let mut rng = crate::draw::Rng(0x5eed_0000 + target.name.len() as u64);
    (0..16)
        .map(|i| {
            let n = 32 << (i % 6);
            (0..n)
                .map(|_| crate::draw::Draw::next(&mut rng) as u8)
                .collect()
        })
        .collect()
}
