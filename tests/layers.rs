//! Imports run down the layers of docs/DESIGN.md, file by file: no file of the library names a
//! module above its own (`crate::x` paths, as every cross-module reference in `src/` is
//! written), and inside `transport/` the link pause machines never name the progress thread
//! that serves their timers.

use std::path::{Path, PathBuf};

/// Top-level modules by layer, highest first. A file may name its own layer and those below
/// it. The fuzzing entry points and the tools' view (`info`) sit on top, the test helpers
/// (`draw`) at the bottom. `error` and `log` are one layer: a refusal is logged, and the log's
/// own settings are refused with the same helpers.
const LAYERS: &[&[&str]] = &[
    &["fuzzing", "info"],
    &["ffi"],
    &["lifecycle"],
    &["queue"],
    &["runtime"],
    &["transport"],
    &["flow"],
    &["buf"],
    &["dfx", "event", "trace", "app_sync"],
    &["error", "log"],
    &["os", "limits", "devices", "process", "hazard"],
    &["abi"],
    &["draw"],
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level module a file of `src/` belongs to (None for lib.rs).
fn layer_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.trim_end_matches(".rs");
    (name != "lib").then(|| name.to_string())
}

/// The modules a file names as `crate::<name>`.
fn named(text: &str) -> Vec<String> {
    text.match_indices("crate::")
        .map(|(at, _)| {
            text[at + 7..]
                .chars()
                .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                .collect()
        })
        .collect()
}

fn rank(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("module {module} is in no layer: add it to LAYERS"))
}

fn is_module(name: &str) -> bool {
    LAYERS.iter().any(|l| l.contains(&name))
}

#[test]
fn no_file_names_a_layer_above_its_own() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for file in &files {
        let Some(own) = layer_of(&src, file) else {
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        for other in named(&text) {
            if is_module(&other) && rank(&other) < rank(&own) {
                upward.push(format!("{} names crate::{other}", file.display()));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports running up:\n{}",
        upward.join("\n")
    );
    assert!(files.len() > 50, "found the library's files");
}

#[test]
fn the_pause_machines_never_name_the_progress_thread() {
    let pause = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transport/pause.rs");
    let text = std::fs::read_to_string(pause).unwrap();
    assert!(
        !text.contains("progress::"),
        "transport/pause.rs names the progress thread"
    );
}

#[test]
fn the_check_sees_an_upward_name() {
    assert_eq!(
        named("use crate::queue::table; crate::os::x()"),
        ["queue", "os"]
    );
    assert!(rank("queue") < rank("transport"));
}
