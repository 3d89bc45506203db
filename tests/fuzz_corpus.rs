//! Every fuzz target's corpus and regression inputs (fuzz/corpus, fuzz/regressions) replayed:
//! each input once passed, or was a crash that is fixed. Needs the `fuzzing` feature (the
//! test command's release-checked pass turns it on).
#![cfg(feature = "fuzzing")]

use std::path::Path;
use umq::fuzzing::{TARGETS, Target, inputs, replay, target};

fn replay_all(t: &Target) {
    let files = inputs(&Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz"), t);
    assert!(
        files.len() >= 3,
        "{}: a corpus of {} inputs",
        t.name,
        files.len()
    );
    replay(t, &files);
}

#[test]
fn every_target_has_a_corpus() {
    let names: Vec<_> = TARGETS.iter().map(|t| t.name).collect();
    for dir in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus")).unwrap()
    {
        let name = dir.unwrap().file_name().into_string().unwrap();
        assert!(
            names.contains(&name.as_str()),
            "a corpus of no target: {name}"
        );
    }
}

#[test]
fn bind_info_corpus() {
    replay_all(target("bind_info").unwrap());
}

#[test]
fn pause_link_corpus() {
    replay_all(target("pause_link").unwrap());
}

#[test]
fn shm_ring_corpus() {
    replay_all(target("shm_ring").unwrap());
}

#[test]
fn shm_sender_corpus() {
    replay_all(target("shm_sender").unwrap());
}

#[test]
fn fabric_messages_corpus() {
    replay_all(target("fabric_messages").unwrap());
}

/// The API target calls umq_uninit: it runs alone in this process's library state (the other
/// targets here never touch it).
#[test]
fn api_sequence_corpus() {
    replay_all(target("api_sequence").unwrap());
}
