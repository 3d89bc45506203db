//! Every fuzz target's corpus and regression inputs (fuzz/corpus, fuzz/regressions) replayed:
//! each input once passed, or was a crash that is fixed. Needs the `fuzzing` feature (the
//! test command's release-checked pass turns it on).
#![cfg(feature = "fuzzing")]

use std::path::Path;
use umq::fuzzing::{TARGETS, Target, inputs, replay};

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

/// One target after the other: the API target calls umq_uninit, and runs alone in this
/// process's library state (the other targets never touch it).
#[test]
fn every_corpus_replays() {
    for t in TARGETS {
        replay_all(t);
    }
}
